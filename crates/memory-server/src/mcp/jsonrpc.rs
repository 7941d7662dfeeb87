//! A JSON-RPC message from outside bytes, read and checked before rmcp sees it, and the error
//! each refusal answers: both transports (a stdio line, an HTTP body) read requests here, so a
//! request is refused the same way, with a JSON-RPC error, whichever carried it.
//!
//! What is refused: bytes that are not UTF-8 or not JSON (parse error, -32700), JSON nested
//! deeper than [`MAX_REQUEST_DEPTH`], a batch (a JSON array; MCP has no batches since its
//! 2025-06-18 revision), and JSON that is not a JSON-RPC 2.0 message (invalid request, -32600);
//! a request over the size limit is refused by the transport with [`too_large`]. The id of the
//! refused request is in the answer whenever it can be read, so a client waiting for it hears
//! back; else the answer's id is `null`, as JSON-RPC 2.0 asks.

use agent_memory::MAX_JSON_DEPTH;
use rmcp::model::{ClientJsonRpcMessage, ErrorCode};
use serde_json::{Value, json};

/// How deeply a request may nest: a message may nest [`MAX_JSON_DEPTH`] levels (its metadata,
/// a part's data), and the request around it (`params`, `arguments`, `messages`, the message)
/// adds a few.
pub const MAX_REQUEST_DEPTH: usize = MAX_JSON_DEPTH + 8;

/// How many leading bytes of a request too large to read are kept to find its id in.
pub(super) const ID_SCAN_BYTES: usize = 64 * 1024;

/// The UTF-8 byte order mark, which JSON text may start with (RFC 8259 §8.1).
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// A request refused before rmcp read it: the JSON-RPC error to answer.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Refusal {
    /// The JSON-RPC error code (-32700 or -32600).
    pub(super) code: ErrorCode,
    /// What is wrong, as a sentence.
    pub(super) message: String,
    /// The refused request's id, when it could be read (a number or a string).
    pub(super) id: Option<Value>,
}

impl Refusal {
    fn parse(message: impl Into<String>, id: Option<Value>) -> Self {
        Self {
            code: ErrorCode::PARSE_ERROR,
            message: message.into(),
            id,
        }
    }

    fn invalid(message: impl Into<String>, id: Option<Value>) -> Self {
        Self {
            code: ErrorCode::INVALID_REQUEST,
            message: message.into(),
            id,
        }
    }

    /// The JSON-RPC error response: `{"jsonrpc": "2.0", "id": …, "error": {"code", "message"}}`.
    pub(super) fn to_response(&self) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": self.id.clone().unwrap_or(Value::Null),
            "error": { "code": self.code.0, "message": self.message },
        })
    }
}

/// What a request's bytes are.
#[derive(Debug)]
pub(super) enum Read {
    /// A JSON-RPC message for rmcp.
    Message(Box<ClientJsonRpcMessage>),
    /// A notification of a method MCP does not define: it gets no answer (JSON-RPC answers no
    /// notification), and is dropped, as rmcp drops it.
    Ignored,
}

/// The refusal of a request of `len` bytes over a transport's `limit`; `head` is its first
/// bytes (up to [`ID_SCAN_BYTES`]), where its id is looked for.
pub(super) fn too_large(len: Option<usize>, limit: usize, head: &[u8]) -> Refusal {
    let size = len.map_or_else(|| "larger".to_owned(), |n| format!("{n} bytes"));
    Refusal::invalid(
        format!(
            "the request is {size}, over the server's limit of {limit} bytes: send less at \
             once (fewer messages per `remember`)"
        ),
        request_id(head),
    )
}

/// The refusal of a request that is not read at all (its head is over a limit), saying
/// `message`: an invalid request without an id.
pub(super) fn invalid_request(message: String) -> Refusal {
    Refusal::invalid(message, None)
}

/// The refusal of a request whose bytes could not all be read (the connection failed).
pub(super) fn unreadable() -> Refusal {
    Refusal::parse("the request could not be read whole", None)
}

/// Reads one request: UTF-8, nested at most [`MAX_REQUEST_DEPTH`] deep, one JSON object that
/// is a JSON-RPC 2.0 message.
///
/// # Errors
/// The [`Refusal`] to answer.
pub(super) fn read(bytes: &[u8]) -> Result<Read, Refusal> {
    let bytes = bytes.strip_prefix(UTF8_BOM).unwrap_or(bytes);
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Err(Refusal::parse(
            "the request is not UTF-8 text",
            request_id(bytes),
        ));
    };
    if nests_deeper_than(bytes, MAX_REQUEST_DEPTH) {
        return Err(Refusal::invalid(
            format!("the request nests deeper than {MAX_REQUEST_DEPTH} levels"),
            request_id(bytes),
        ));
    }
    let error = match serde_json::from_str::<ClientJsonRpcMessage>(text) {
        Ok(message) => return Ok(Read::Message(Box::new(message))),
        Err(error) => error,
    };
    let value = match serde_json::from_str::<Value>(text) {
        Ok(value) => value,
        Err(syntax) => {
            return Err(Refusal::parse(
                format!("the request is not valid JSON: {syntax}"),
                request_id(bytes),
            ));
        }
    };
    let object = match value {
        Value::Object(object) => object,
        Value::Array(_) => {
            return Err(Refusal::invalid(
                "batches (a JSON array of requests) are not supported: send one request at a time",
                None,
            ));
        }
        _ => {
            return Err(Refusal::invalid(
                "a request is a JSON object, not a bare JSON value",
                None,
            ));
        }
    };
    let id = object
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned();
    let method = object.get("method").and_then(Value::as_str);
    match (method, object.contains_key("id")) {
        (Some(method), false) if !is_mcp_notification(method) => Ok(Read::Ignored),
        (Some(method), _) => Err(Refusal::invalid(
            format!(
                "the `{method}` request is not one MCP defines with these fields: {}",
                first_sentence(&error)
            ),
            id,
        )),
        (None, _) => Err(Refusal::invalid(
            "the request is JSON but not a JSON-RPC 2.0 message: it needs \"jsonrpc\": \"2.0\", \
             a \"method\" and, to be answered, an \"id\"",
            id,
        )),
    }
}

/// Whether `method` is a notification MCP defines (a malformed one is refused; any other
/// notification is ignored, as rmcp ignores it).
fn is_mcp_notification(method: &str) -> bool {
    matches!(
        method,
        "notifications/cancelled"
            | "notifications/initialized"
            | "notifications/message"
            | "notifications/progress"
            | "notifications/prompts/list_changed"
            | "notifications/resources/list_changed"
            | "notifications/resources/updated"
            | "notifications/roots/list_changed"
            | "notifications/subscriptions/acknowledged"
            | "notifications/tools/list_changed"
    )
}

/// serde's message without its position (`at line 1 column 80`), which says nothing to a
/// client that sent one line.
fn first_sentence(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rsplit_once(" at line ") {
        Some((head, _)) => head.to_owned(),
        None => text,
    }
}

/// Whether `bytes` (JSON text, read lexically: strings skipped) nests objects and arrays more
/// than `max` deep. Stops at the first level past it, so its cost is bounded by the bytes.
pub(super) fn nests_deeper_than(bytes: &[u8], max: usize) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth = depth.saturating_add(1);
                if depth > max {
                    return true;
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// The `id` of the JSON object `bytes` starts with (a number or a string), read lexically, so
/// it is found in a request that is cut short, too deep or otherwise unreadable, as long as its
/// members up to `id` are well formed: the top-level members are skipped one by one (strings
/// and nested values by their brackets) until `id`.
pub(super) fn request_id(bytes: &[u8]) -> Option<Value> {
    let bytes = bytes.strip_prefix(UTF8_BOM).unwrap_or(bytes);
    let mut scan = Scan { bytes, at: 0 };
    scan.expect(b'{')?;
    loop {
        let key = scan.string()?;
        scan.expect(b':')?;
        scan.blank();
        if key == b"\"id\"" {
            return scan.id();
        }
        scan.skip_value()?;
        match scan.next_token()? {
            b',' => {}
            _ => return None,
        }
    }
}

/// A cursor over JSON text for [`request_id`].
struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn bump(&mut self) {
        self.at = self.at.saturating_add(1);
    }

    fn blank(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.bump();
        }
    }

    /// The next byte after blanks, consumed.
    fn next_token(&mut self) -> Option<u8> {
        self.blank();
        let b = self.peek()?;
        self.bump();
        Some(b)
    }

    fn expect(&mut self, want: u8) -> Option<()> {
        (self.next_token()? == want).then_some(())
    }

    /// A string token, quotes included, raw (escapes not decoded).
    fn string(&mut self) -> Option<&'a [u8]> {
        self.blank();
        let start = self.at;
        if self.peek()? != b'"' {
            return None;
        }
        self.bump();
        let mut escaped = false;
        loop {
            let b = self.peek()?;
            self.bump();
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => {
                    let bytes: &'a [u8] = self.bytes;
                    return bytes.get(start..self.at);
                }
                _ => {}
            }
        }
    }

    /// The id's value: a string or a number, decoded by serde.
    fn id(&mut self) -> Option<Value> {
        let token = match self.peek()? {
            b'"' => self.string()?,
            b'-' | b'0'..=b'9' => {
                let start = self.at;
                while self.peek().is_some_and(|b| {
                    b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E')
                }) {
                    self.bump();
                }
                // A number cut off by the end of the bytes may be cut short: not an id.
                self.peek()?;
                self.bytes.get(start..self.at)?
            }
            _ => return None,
        };
        serde_json::from_slice::<Value>(token)
            .ok()
            .filter(|v| v.is_string() || v.is_number())
    }

    /// Skips one value: a string, or everything up to the bracket that closes an object or an
    /// array, or a bare literal up to the next `,` or `}`.
    fn skip_value(&mut self) -> Option<()> {
        self.blank();
        match self.peek()? {
            b'"' => {
                self.string()?;
            }
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth = depth.saturating_add(1),
                        b'}' | b']' => {
                            depth = depth.saturating_sub(1);
                            if depth == 0 {
                                self.bump();
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.bump();
                }
            }
            _ => {
                while self
                    .peek()
                    .is_some_and(|b| !matches!(b, b',' | b'}') && !b.is_ascii_whitespace())
                {
                    self.bump();
                }
            }
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(bytes: &[u8]) -> Refusal {
        read(bytes).expect_err("a refusal")
    }

    #[test]
    fn a_request_is_read() {
        let read = read(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap();
        assert!(matches!(read, Read::Message(_)), "{read:?}");
        let bom = [UTF8_BOM, br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#].concat();
        assert!(matches!(super::read(&bom), Ok(Read::Message(_))));
        // A notification of a method MCP does not define is not refused (rmcp reads it as a
        // custom one, or it is dropped): a notification is never answered.
        assert!(super::read(br#"{"jsonrpc":"2.0","method":"$/lsp"}"#).is_ok());
        assert!(super::read(br#"{"jsonrpc":"2.0","method":"$/lsp","params":5}"#).is_ok());
    }

    #[test]
    fn each_kind_of_bad_request_has_its_code_and_the_id_when_readable() {
        let garbage = refused(b"hello there");
        assert_eq!((garbage.code, garbage.id), (ErrorCode::PARSE_ERROR, None));
        let cut = refused(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"#);
        assert_eq!(cut.code, ErrorCode::PARSE_ERROR);
        assert_eq!(cut.id, Some(json!(7)));
        let latin1 = refused(b"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"x\":\"\xE9\"}");
        assert_eq!(latin1.code, ErrorCode::PARSE_ERROR);
        assert_eq!(latin1.id, Some(json!("a")));
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let deep = refused(deep.as_bytes());
        assert_eq!(
            (deep.code, deep.id),
            (ErrorCode::INVALID_REQUEST, Some(json!(3)))
        );
        assert!(deep.message.contains("deeper than"), "{}", deep.message);
        let batch = refused(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#);
        assert_eq!(batch.code, ErrorCode::INVALID_REQUEST);
        assert!(batch.message.contains("batches"), "{}", batch.message);
        let not_rpc = refused(br#"{"role":1}"#);
        assert_eq!(not_rpc.code, ErrorCode::INVALID_REQUEST);
        assert!(
            !not_rpc.message.contains("not valid JSON"),
            "{}",
            not_rpc.message
        );
        assert!(
            not_rpc.message.contains("JSON-RPC 2.0"),
            "{}",
            not_rpc.message
        );
        let both = refused(br#"{"jsonrpc":"2.0","id":"q","result":{},"error":{}}"#);
        assert_eq!(both.code, ErrorCode::INVALID_REQUEST);
        assert_eq!(both.id, Some(json!("q")));
        assert_eq!(
            both.to_response()["error"]["code"],
            json!(-32600),
            "{:?}",
            both.to_response()
        );
        assert_eq!(refused(b"42").id, None);
    }

    #[test]
    fn the_id_is_found_ahead_of_what_cannot_be_read() {
        assert_eq!(
            request_id(br#" {"jsonrpc" : "2.0", "id" : "x\"y", "params": {"#),
            Some(json!("x\"y"))
        );
        assert_eq!(
            request_id(br#"{"params":{"a":[1,{"id":9}],"s":"}"},"id":-4,"method":"m"}"#),
            Some(json!(-4))
        );
        assert_eq!(
            request_id(br#"{"jsonrpc":"2.0","id":12"#),
            None,
            "cut inside the id"
        );
        assert_eq!(request_id(br#"{"jsonrpc":"2.0","id":null}"#), None);
        assert_eq!(request_id(br#"{"jsonrpc":"2.0","id":{"a":1}}"#), None);
        assert_eq!(request_id(b"[1]"), None);
        assert_eq!(request_id(b""), None);
    }

    #[test]
    fn depth_is_counted_outside_strings() {
        assert!(!nests_deeper_than(br#"{"a":"[[[[[[[[["}"#, 2));
        assert!(nests_deeper_than(br#"{"a":[[{}]]}"#, 3));
        assert!(!nests_deeper_than(br#"{"a":[[{}]]}"#, 4));
        let too_large = too_large(Some(17), 10, br#"{"id":5,"jsonrpc":"2.0","params":{"#);
        assert_eq!(too_large.id, Some(json!(5)));
        assert!(
            too_large.message.contains("17 bytes"),
            "{}",
            too_large.message
        );
    }
}
