//! The content parts of a message.

use serde::{Deserialize, Serialize};

/// One piece of a message's content.
///
/// In JSON a part is an object tagged by `"type"` (docs/format.md); it is read in one pass by
/// the reader in `part_de.rs`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Part {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// A request from the model to call a tool.
    ToolCall {
        /// The call id that the result refers to.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments, as the JSON text the model produced (kept verbatim, even when it is
        /// not valid JSON, so the conversion to and from OpenAI's form is lossless).
        arguments: String,
    },
    /// The result of a tool call.
    ToolResult {
        /// The id of the call this answers.
        call_id: String,
        /// The result, as text.
        content: String,
    },
    /// A refusal by the model (OpenAI's `refusal`).
    Refusal {
        /// The refusal text.
        text: String,
    },
    /// An image.
    Image(Media),
    /// An audio clip.
    Audio(Media),
    /// A video clip.
    Video(Media),
    /// A document or file.
    Document(Media),
    /// Opaque application data, kept verbatim.
    Data {
        /// What the data is (a MIME type or any name the application chooses).
        media_type: String,
        /// The data.
        data: serde_json::Value,
    },
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part::Text { text: text.into() }
    }

    /// The text of a text part.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Part::Text { text } => Some(text),
            _ => None,
        }
    }

    /// The media of an image, audio, video or document part, with its kind.
    pub fn as_media(&self) -> Option<(MediaKind, &Media)> {
        match self {
            Part::Image(m) => Some((MediaKind::Image, m)),
            Part::Audio(m) => Some((MediaKind::Audio, m)),
            Part::Video(m) => Some((MediaKind::Video, m)),
            Part::Document(m) => Some((MediaKind::Document, m)),
            _ => None,
        }
    }
}

/// The kind of a media part; token counters give each kind a fixed cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MediaKind {
    /// An image.
    Image,
    /// Audio.
    Audio,
    /// Video.
    Video,
    /// A document or file.
    Document,
}

/// Where a media part's bytes are: a URL, inline base64 data, or a provider's file id.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Media {
    /// A URL (`https:` or `data:`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Inline data, base64-encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// The MIME type or format of inline data (`image/png`, `wav`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// A file id held by the model provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_id: Option<String>,
    /// A file name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// A rendering hint (OpenAI's image `detail`: `low`, `high`, `auto`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl Media {
    /// Media at a URL.
    pub fn url(url: impl Into<String>) -> Self {
        Self {
            url: Some(url.into()),
            ..Self::default()
        }
    }

    /// Inline base64 data of a MIME type or format.
    pub fn inline(media_type: impl Into<String>, base64: impl Into<String>) -> Self {
        Self {
            data: Some(base64.into()),
            media_type: Some(media_type.into()),
            ..Self::default()
        }
    }

    /// Sets the rendering hint.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }
}
