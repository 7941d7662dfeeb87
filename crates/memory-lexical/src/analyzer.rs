//! [`Analyzer`]: how texts and queries are cut into the words the index matches.

use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer,
    StopWordFilter, TextAnalyzer, TextAnalyzerBuilder,
};

/// The longest word, in bytes, that the default analyzers index; longer words are dropped
/// (they are rarely words, and tantivy refuses terms past 64 KiB).
pub const DEFAULT_MAX_WORD_BYTES: usize = 40;

/// How a [`TantivyTextIndex`](crate::TantivyTextIndex) cuts texts and queries into words.
///
/// Words are runs of Unicode letters and digits (what
/// [`query_words`](memory_core::lexical::query_words) finds), always lowercased; then,
/// optionally and in this order: accents folded to ASCII (`café` matches `cafe`), English stop
/// words dropped (`the`, `and`, `not` ... are not matched), and English words stemmed (Snowball:
/// `walking` matches `walked`). Words longer than [`max_word_bytes`](Self::max_word_bytes) are
/// dropped.
///
/// An index remembers the analyzer it was created with (it is part of its schema, as
/// [`name`](Self::name)): opening a directory with another analyzer is refused, since the
/// words already indexed would not match the new queries.
///
/// # Behavior
/// - [`english`](Self::english) (the default): lowercase, English stop words, English
///   stemming, no accent folding, words up to [`DEFAULT_MAX_WORD_BYTES`].
/// - [`plain`](Self::plain): lowercase only.
/// - The `with_*` methods change one option each; [`name`](Self::name) is distinct for every
///   distinct set of options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Analyzer {
    stemming: bool,
    stop_words: bool,
    ascii_folding: bool,
    max_word_bytes: usize,
}

impl Default for Analyzer {
    fn default() -> Self {
        Self::english()
    }
}

impl Analyzer {
    /// Lowercase, English stop words and English stemming.
    pub const fn english() -> Self {
        Self {
            stemming: true,
            stop_words: true,
            ascii_folding: false,
            max_word_bytes: DEFAULT_MAX_WORD_BYTES,
        }
    }

    /// Lowercase only: every word matches as written, whatever its case.
    pub const fn plain() -> Self {
        Self {
            stemming: false,
            stop_words: false,
            ascii_folding: false,
            max_word_bytes: DEFAULT_MAX_WORD_BYTES,
        }
    }

    /// Whether English words are stemmed (Snowball).
    #[must_use]
    pub const fn with_stemming(mut self, stemming: bool) -> Self {
        self.stemming = stemming;
        self
    }

    /// Whether English stop words are dropped.
    #[must_use]
    pub const fn with_stop_words(mut self, stop_words: bool) -> Self {
        self.stop_words = stop_words;
        self
    }

    /// Whether accented letters are folded to ASCII (`é` to `e`).
    #[must_use]
    pub const fn with_ascii_folding(mut self, ascii_folding: bool) -> Self {
        self.ascii_folding = ascii_folding;
        self
    }

    /// The longest word indexed, in bytes (at least 1, at most 16 KiB); longer words are
    /// dropped.
    #[must_use]
    pub const fn with_max_word_bytes(mut self, max_word_bytes: usize) -> Self {
        self.max_word_bytes = if max_word_bytes == 0 {
            1
        } else if max_word_bytes > 16 << 10 {
            16 << 10
        } else {
            max_word_bytes
        };
        self
    }

    /// Whether English words are stemmed.
    pub const fn stemming(&self) -> bool {
        self.stemming
    }

    /// Whether English stop words are dropped.
    pub const fn stop_words(&self) -> bool {
        self.stop_words
    }

    /// Whether accents are folded to ASCII.
    pub const fn ascii_folding(&self) -> bool {
        self.ascii_folding
    }

    /// The longest word indexed, in bytes.
    pub const fn max_word_bytes(&self) -> usize {
        self.max_word_bytes
    }

    /// The analyzer's name in the index schema, e.g. `am_lower_stop_stem_40`: distinct for
    /// every distinct set of options.
    pub fn name(&self) -> String {
        let mut name = String::from("am_lower");
        if self.ascii_folding {
            name.push_str("_fold");
        }
        if self.stop_words {
            name.push_str("_stop");
        }
        if self.stemming {
            name.push_str("_stem");
        }
        format!("{name}_{}", self.max_word_bytes)
    }

    /// The tantivy analyzer.
    pub(crate) fn build(&self) -> TextAnalyzer {
        let builder = TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(RemoveLongFilter::limit(
                self.max_word_bytes.saturating_add(1),
            ))
            .filter(LowerCaser)
            .dynamic();
        let builder = self.optional_filters(builder);
        builder.build()
    }

    fn optional_filters(&self, mut builder: TextAnalyzerBuilder) -> TextAnalyzerBuilder {
        if self.ascii_folding {
            builder = builder.filter_dynamic(AsciiFoldingFilter);
        }
        if self.stop_words
            && let Some(filter) = StopWordFilter::new(Language::English)
        {
            builder = builder.filter_dynamic(filter);
        }
        if self.stemming {
            builder = builder.filter_dynamic(Stemmer::new(Language::English));
        }
        builder
    }
}
