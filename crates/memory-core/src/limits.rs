//! The size limits every store enforces on what it is given to append (re-exported by
//! [`history`](crate::history), where [`HistoryStore::append`](crate::HistoryStore::append)
//! states them). A leaf: the tokenizer's off-executor counting reads them too.

/// The largest message a store accepts, in bytes of its JSON form (8 MiB).
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;
/// The most messages one append accepts.
pub const MAX_BATCH_MESSAGES: usize = 10_000;
/// The most bytes (of the messages' JSON forms) one append accepts (64 MiB): below what every
/// backend takes in one request (Redis's 1 GiB query buffer, MariaDB's packets are split by the
/// store).
pub const MAX_BATCH_BYTES: usize = 64 * 1024 * 1024;
/// The deepest nesting of arrays and objects a stored message may have: in its JSON values
/// (metadata, [`Part::Data`](crate::Part::Data)) and in the text a store writes for it (the
/// versioned form, or a peer layout's form). Every decoder that reads messages back reads at
/// least twice as deep (serde_json stops at 128 levels, Python's `json` and Redis's `cjson` at
/// about 1000), so a message that is accepted can always be read back, also inside a session
/// state document that nests it a few levels further.
pub const MAX_JSON_DEPTH: usize = 64;
