//! Reading a [`Part`] from JSON in one pass.
//!
//! A part is an object tagged by `"type"`. serde's derive for such an enum buffers the whole
//! object into an intermediate tree before it looks at the tag; this reader instead reads the
//! tag (which this library always writes first) and then each field straight into its typed
//! slot. Only when the tag comes after other fields does it buffer those fields, as JSON
//! values, until the tag is known. What it accepts and refuses is what the derive did for a
//! part written as an object: unknown fields are ignored, duplicate and missing fields and
//! unknown types are errors, `null` is no value for an optional media field.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use super::part::{Media, Part};

/// The type names of the parts, as `"type"` spells them.
const TYPES: &[&str] = &[
    "text",
    "tool_call",
    "tool_result",
    "refusal",
    "image",
    "audio",
    "video",
    "document",
    "data",
];

/// The `"type"` of a part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    ToolCall,
    ToolResult,
    Refusal,
    Image,
    Audio,
    Video,
    Document,
    Data,
}

impl Kind {
    fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "text" => Kind::Text,
            "tool_call" => Kind::ToolCall,
            "tool_result" => Kind::ToolResult,
            "refusal" => Kind::Refusal,
            "image" => Kind::Image,
            "audio" => Kind::Audio,
            "video" => Kind::Video,
            "document" => Kind::Document,
            "data" => Kind::Data,
            _ => return None,
        })
    }

    fn is_media(self) -> bool {
        matches!(
            self,
            Kind::Image | Kind::Audio | Kind::Video | Kind::Document
        )
    }

    /// The field that `key` names in a part of this kind, if any.
    fn field(self, key: Key) -> Option<Field> {
        use Field::*;
        Some(match (self, key) {
            (Kind::Text | Kind::Refusal, Key::Text) => Text,
            (Kind::ToolCall, Key::Id) => Id,
            (Kind::ToolCall, Key::Name) => Name,
            (Kind::ToolCall, Key::Arguments) => Arguments,
            (Kind::ToolResult, Key::CallId) => CallId,
            (Kind::ToolResult, Key::Content) => Content,
            (Kind::Data, Key::MediaType) => DataMediaType,
            (Kind::Data, Key::Data) => DataValue,
            (kind, Key::Url) if kind.is_media() => Url,
            (kind, Key::Data) if kind.is_media() => InlineData,
            (kind, Key::MediaType) if kind.is_media() => MediaType,
            (kind, Key::FileId) if kind.is_media() => FileId,
            (kind, Key::Filename) if kind.is_media() => Filename,
            (kind, Key::Detail) if kind.is_media() => Detail,
            _ => return None,
        })
    }
}

/// A key of a part object, read without copying it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Type,
    Text,
    Id,
    Name,
    Arguments,
    CallId,
    Content,
    Url,
    Data,
    MediaType,
    FileId,
    Filename,
    Detail,
    Other,
}

impl Key {
    fn from_name(name: &str) -> Self {
        match name {
            "type" => Key::Type,
            "text" => Key::Text,
            "id" => Key::Id,
            "name" => Key::Name,
            "arguments" => Key::Arguments,
            "call_id" => Key::CallId,
            "content" => Key::Content,
            "url" => Key::Url,
            "data" => Key::Data,
            "media_type" => Key::MediaType,
            "file_id" => Key::FileId,
            "filename" => Key::Filename,
            "detail" => Key::Detail,
            _ => Key::Other,
        }
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_identifier(NameVisitor {
            expecting: "a field name",
            parse: |name| Some(Key::from_name(name)),
        })
    }
}

/// Reads a string as a `T` with `parse`; a string `parse` refuses is an unknown part type.
struct NameVisitor<T> {
    /// What the input should have been, for the error message.
    expecting: &'static str,
    /// The value a string names, if any.
    parse: fn(&str) -> Option<T>,
}

impl<T> Visitor<'_> for NameVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.expecting)
    }
    fn visit_str<E: de::Error>(self, name: &str) -> Result<T, E> {
        (self.parse)(name).ok_or_else(|| E::unknown_variant(name, TYPES))
    }
}

/// The value of `"type"`.
struct KindSeed;

impl<'de> DeserializeSeed<'de> for KindSeed {
    type Value = Kind;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Kind, D::Error> {
        deserializer.deserialize_str(NameVisitor {
            expecting: "a part type",
            parse: Kind::from_name,
        })
    }
}

/// A field of one kind of part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Text,
    Id,
    Name,
    Arguments,
    CallId,
    Content,
    DataMediaType,
    DataValue,
    Url,
    InlineData,
    MediaType,
    FileId,
    Filename,
    Detail,
}

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Text => "text",
            Field::Id => "id",
            Field::Name => "name",
            Field::Arguments => "arguments",
            Field::CallId => "call_id",
            Field::Content => "content",
            Field::DataMediaType | Field::MediaType => "media_type",
            Field::DataValue | Field::InlineData => "data",
            Field::Url => "url",
            Field::FileId => "file_id",
            Field::Filename => "filename",
            Field::Detail => "detail",
        }
    }
}

/// The fields read so far.
#[derive(Default)]
struct Slots {
    /// `text`, `id` or `call_id` (the first string field of the kind).
    first: Option<String>,
    /// `name` or `content`.
    second: Option<String>,
    /// `arguments`.
    third: Option<String>,
    /// The application data of a `data` part.
    data: Option<Value>,
    /// The media fields; the outer `Option` tells whether the field was present.
    media: [Option<Option<String>>; 6],
}

impl Slots {
    /// Reads the value of `field` from `read` (a map's next value or a buffered value).
    fn fill<E, R>(&mut self, field: Field, read: R) -> Result<(), E>
    where
        E: de::Error,
        R: FnOnce(Want) -> Result<Got, E>,
    {
        let (slot_present, want) = match field {
            Field::Text | Field::Id | Field::CallId => (self.first.is_some(), Want::Text),
            Field::Name | Field::Content => (self.second.is_some(), Want::Text),
            Field::Arguments => (self.third.is_some(), Want::Text),
            // The media type of a `data` part shares the first slot's place: a `data` part has
            // no other string field.
            Field::DataMediaType => (self.first.is_some(), Want::Text),
            Field::DataValue => (self.data.is_some(), Want::Value),
            media => (
                self.media
                    .get(media_index(media))
                    .is_some_and(Option::is_some),
                Want::OptionalText,
            ),
        };
        if slot_present {
            return Err(E::duplicate_field(field.name()));
        }
        match (read(want)?, field) {
            (Got::Text(text), Field::Text | Field::Id | Field::CallId | Field::DataMediaType) => {
                self.first = Some(text);
            }
            (Got::Text(text), Field::Name | Field::Content) => self.second = Some(text),
            (Got::Text(text), Field::Arguments) => self.third = Some(text),
            (Got::Value(value), _) => self.data = Some(value),
            (Got::OptionalText(text), media) => {
                if let Some(slot) = self.media.get_mut(media_index(media)) {
                    *slot = Some(text);
                }
            }
            (Got::Text(_), _) => return Err(E::custom("a part field was read as the wrong type")),
        }
        Ok(())
    }

    fn take_required<E: de::Error>(slot: Option<String>, name: &'static str) -> Result<String, E> {
        slot.ok_or_else(|| E::missing_field(name))
    }

    /// The part of `kind` from the fields read.
    fn finish<E: de::Error>(mut self, kind: Kind) -> Result<Part, E> {
        Ok(match kind {
            Kind::Text => Part::Text {
                text: Self::take_required(self.first, "text")?,
            },
            Kind::Refusal => Part::Refusal {
                text: Self::take_required(self.first, "text")?,
            },
            Kind::ToolCall => Part::ToolCall {
                id: Self::take_required(self.first, "id")?,
                name: Self::take_required(self.second, "name")?,
                arguments: Self::take_required(self.third, "arguments")?,
            },
            Kind::ToolResult => Part::ToolResult {
                call_id: Self::take_required(self.first, "call_id")?,
                content: Self::take_required(self.second, "content")?,
            },
            Kind::Data => Part::Data {
                media_type: Self::take_required(self.first, "media_type")?,
                data: self.data.ok_or_else(|| E::missing_field("data"))?,
            },
            Kind::Image | Kind::Audio | Kind::Video | Kind::Document => {
                let mut take = |field: Field| {
                    self.media
                        .get_mut(media_index(field))
                        .and_then(Option::take)
                        .flatten()
                };
                let media = Media {
                    url: take(Field::Url),
                    data: take(Field::InlineData),
                    media_type: take(Field::MediaType),
                    file_id: take(Field::FileId),
                    filename: take(Field::Filename),
                    detail: take(Field::Detail),
                };
                match kind {
                    Kind::Image => Part::Image(media),
                    Kind::Audio => Part::Audio(media),
                    Kind::Video => Part::Video(media),
                    _ => Part::Document(media),
                }
            }
        })
    }
}

/// The place of a media field in [`Slots::media`].
fn media_index(field: Field) -> usize {
    match field {
        Field::Url => 0,
        Field::InlineData => 1,
        Field::MediaType => 2,
        Field::FileId => 3,
        Field::Filename => 4,
        _ => 5,
    }
}

/// What a field's value is read as.
#[derive(Debug, Clone, Copy)]
enum Want {
    Text,
    OptionalText,
    Value,
}

/// A field's value, read.
enum Got {
    Text(String),
    OptionalText(Option<String>),
    Value(Value),
}

/// Reads the next value of `map` as `want`.
fn read_next<'de, A: MapAccess<'de>>(map: &mut A, want: Want) -> Result<Got, A::Error> {
    Ok(match want {
        Want::Text => Got::Text(map.next_value()?),
        Want::OptionalText => Got::OptionalText(map.next_value()?),
        Want::Value => Got::Value(map.next_value()?),
    })
}

/// Reads a buffered value as `want`.
fn read_buffered<E: de::Error>(value: Value, want: Want) -> Result<Got, E> {
    Ok(match want {
        Want::Text => Got::Text(String::deserialize(value).map_err(E::custom)?),
        Want::OptionalText => {
            Got::OptionalText(Option::<String>::deserialize(value).map_err(E::custom)?)
        }
        Want::Value => Got::Value(value),
    })
}

struct PartVisitor;

impl<'de> Visitor<'de> for PartVisitor {
    type Value = Part;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message part (an object with a \"type\")")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Part, A::Error> {
        let mut kind: Option<Kind> = None;
        let mut slots = Slots::default();
        // Fields met before the tag, kept until it is known (never when the tag comes first).
        let mut early: Vec<(Key, Value)> = Vec::new();
        while let Some(key) = map.next_key::<Key>()? {
            match (key, kind) {
                (Key::Type, Some(_)) => return Err(de::Error::duplicate_field("type")),
                (Key::Type, None) => {
                    let found = map.next_value_seed(KindSeed)?;
                    kind = Some(found);
                    for (key, value) in early.drain(..) {
                        if let Some(field) = found.field(key) {
                            slots.fill(field, |want| read_buffered(value, want))?;
                        }
                    }
                }
                (Key::Other, _) => {
                    map.next_value::<IgnoredAny>()?;
                }
                (key, Some(kind)) => match kind.field(key) {
                    Some(field) => slots.fill(field, |want| read_next(&mut map, want))?,
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                },
                (key, None) => early.push((key, map.next_value()?)),
            }
        }
        let kind = kind.ok_or_else(|| de::Error::missing_field("type"))?;
        slots.finish(kind)
    }
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(PartVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The derive this reader replaces, kept to check that both read the same.
    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case")]
    enum DerivedPart {
        Text {
            text: String,
        },
        ToolCall {
            id: String,
            name: String,
            arguments: String,
        },
        ToolResult {
            call_id: String,
            content: String,
        },
        Refusal {
            text: String,
        },
        Image(Media),
        Audio(Media),
        Video(Media),
        Document(Media),
        Data {
            media_type: String,
            data: Value,
        },
    }

    impl From<DerivedPart> for Part {
        fn from(p: DerivedPart) -> Part {
            match p {
                DerivedPart::Text { text } => Part::Text { text },
                DerivedPart::ToolCall {
                    id,
                    name,
                    arguments,
                } => Part::ToolCall {
                    id,
                    name,
                    arguments,
                },
                DerivedPart::ToolResult { call_id, content } => {
                    Part::ToolResult { call_id, content }
                }
                DerivedPart::Refusal { text } => Part::Refusal { text },
                DerivedPart::Image(m) => Part::Image(m),
                DerivedPart::Audio(m) => Part::Audio(m),
                DerivedPart::Video(m) => Part::Video(m),
                DerivedPart::Document(m) => Part::Document(m),
                DerivedPart::Data { media_type, data } => Part::Data { media_type, data },
            }
        }
    }

    const CASES: &[&str] = &[
        r#"{"type":"text","text":"hi"}"#,
        r#"{"text":"hi","type":"text"}"#,
        r#"{"type":"text","text":"hi","id":5,"extra":[1,{"a":2}]}"#,
        r#"{"id":5,"text":"hi","type":"text"}"#,
        r#"{"type":"text","text":"a","text":"b"}"#,
        r#"{"text":"a","type":"text","text":"b"}"#,
        r#"{"text":"a","text":"b","type":"text"}"#,
        r#"{"type":"text","type":"text","text":"a"}"#,
        r#"{"type":"text"}"#,
        r#"{"type":"text","text":null}"#,
        r#"{"type":"text","text":5}"#,
        r#"{"text":5,"type":"refusal"}"#,
        r#"{"type":"refusal","text":"no"}"#,
        r#"{"type":"nope","text":"hi"}"#,
        r#"{"type":5,"text":"hi"}"#,
        r#"{"text":"hi"}"#,
        r#"{}"#,
        r#"{"type":"tool_call","id":"c1","name":"f","arguments":"{\"a\":1}"}"#,
        r#"{"arguments":"{}","name":"f","type":"tool_call","id":"c1"}"#,
        r#"{"type":"tool_call","id":"c1","name":"f"}"#,
        r#"{"type":"tool_call","id":"c1","name":"f","arguments":"x","text":7}"#,
        r#"{"type":"tool_result","call_id":"c1","content":"ok"}"#,
        r#"{"type":"tool_result","call_id":"c1","content":"ok","call_id":"c2"}"#,
        r#"{"type":"tool_result","content":"ok"}"#,
        r#"{"type":"image","url":"https://x/a.png","detail":"low"}"#,
        r#"{"url":"https://x/a.png","type":"image","detail":null}"#,
        r#"{"type":"audio","data":"AAAA","media_type":"wav"}"#,
        r#"{"data":"AAAA","type":"audio","media_type":"wav"}"#,
        r#"{"data":{"not":"a string"},"type":"audio"}"#,
        r#"{"type":"video","file_id":"f1","filename":"v.mp4"}"#,
        r#"{"type":"document"}"#,
        r#"{"type":"document","url":null,"url":"x"}"#,
        r#"{"type":"document","url":5}"#,
        r#"{"type":"document","text":5,"media_type":"pdf"}"#,
        r#"{"type":"data","media_type":"application/json","data":{"k":[1,2,{"z":null}]}}"#,
        r#"{"data":[1,"x"],"media_type":"m","type":"data"}"#,
        r#"{"type":"data","media_type":"m","data":null}"#,
        r#"{"type":"data","media_type":"m"}"#,
        r#"{"type":"data","data":1}"#,
        r#"{"type":"data","media_type":"m","data":1,"data":2}"#,
        r#"{"type":"text","text":"\u0000 héllo \ud83c\udf89"}"#,
        r#"null"#,
        r#""text""#,
        r#"5"#,
    ];

    #[test]
    fn reads_what_the_derive_read() {
        for case in CASES {
            let ours = serde_json::from_str::<Part>(case);
            let derived = serde_json::from_str::<DerivedPart>(case).map(Part::from);
            match (ours, derived) {
                (Ok(ours), Ok(derived)) => assert_eq!(ours, derived, "{case}"),
                (Err(_), Err(_)) => {}
                (ours, derived) => panic!("{case}: ours {ours:?}, the derive {derived:?}"),
            }
            // From an already parsed value too (ChatMessage::from_json_value).
            if let Ok(value) = serde_json::from_str::<Value>(case) {
                let ours = Part::deserialize(&value);
                let derived = DerivedPart::deserialize(&value).map(Part::from);
                assert_eq!(ours.is_ok(), derived.is_ok(), "{case} (value)");
                if let (Ok(ours), Ok(derived)) = (ours, derived) {
                    assert_eq!(ours, derived, "{case} (value)");
                }
            }
        }
    }

    #[test]
    fn a_part_reads_back_what_it_wrote() {
        let parts = [
            Part::text("x"),
            Part::Image(Media::url("https://x").with_detail("high")),
            Part::Document(Media::inline("application/pdf", "AAAA")),
            Part::Data {
                media_type: "m".into(),
                data: json!({"a": [1, null]}),
            },
            Part::ToolResult {
                call_id: "c".into(),
                content: "ok".into(),
            },
        ];
        for part in parts {
            let text = serde_json::to_string(&part).unwrap();
            assert_eq!(serde_json::from_str::<Part>(&text).unwrap(), part, "{text}");
        }
    }

    #[test]
    fn errors_name_the_field_or_type() {
        let err = serde_json::from_str::<Part>(r#"{"type":"text"}"#).unwrap_err();
        assert!(err.to_string().contains("missing field `text`"), "{err}");
        let err = serde_json::from_str::<Part>(r#"{"type":"nope"}"#).unwrap_err();
        assert!(err.to_string().contains("unknown variant `nope`"), "{err}");
        let err =
            serde_json::from_str::<Part>(r#"{"type":"text","text":"a","text":"b"}"#).unwrap_err();
        assert!(err.to_string().contains("duplicate field `text`"), "{err}");
    }
}
