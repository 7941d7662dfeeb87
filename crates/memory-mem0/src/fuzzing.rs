//! Entry points for the `memory-fuzz` crate (feature `fuzzing`): the decoders of Mem0's
//! answers, fed with bytes instead of an HTTP exchange. Not a stable API.

use memory_core::Result;
use serde_json::Value;

use crate::response::{self, AddResponse, HistoryEntry, MemoryPage, MemoryRecord};

/// Decodes the body of an add answer as [`Mem0Client::add`](crate::Mem0Client::add) does.
pub fn add(body: &[u8]) -> Result<AddResponse> {
    AddResponse::from_value(crate::http::decode_json(body, "add")?)
}

/// Decodes the body of a search answer as [`Mem0Client::search`](crate::Mem0Client::search)
/// does.
pub fn search(body: &[u8]) -> Result<Vec<MemoryRecord>> {
    response::records(crate::http::decode_json(body, "search")?, "search")
}

/// Decodes the body of one page of a list answer as
/// [`Mem0Client::list`](crate::Mem0Client::list) does.
pub fn list(body: &[u8]) -> Result<MemoryPage> {
    MemoryPage::from_value(crate::http::decode_json(body, "list")?)
}

/// Decodes the body of a history answer as [`Mem0Client::history`](crate::Mem0Client::history)
/// does.
pub fn history(body: &[u8]) -> Result<Vec<HistoryEntry>> {
    response::history(crate::http::decode_json(body, "history")?)
}

/// Decodes the body of a get answer (one memory, `null` for none).
pub fn get(body: &[u8]) -> Result<Option<MemoryRecord>> {
    match crate::http::decode_json(body, "get")? {
        Value::Null => Ok(None),
        value => serde_json::from_value(value)
            .map(Some)
            .map_err(|err| memory_core::Error::serialization(format!("malformed: {err}"))),
    }
}

/// The detail an error answer's body gives, as the client puts it in its error messages.
pub fn error_detail(body: &[u8]) -> Option<String> {
    crate::error::detail(body)
}
