//! The seed corpus: the documented vectors under `docs/` (every JSON node in them, and the
//! JSON that strings in them hold), plus small examples taken from the crates' tests.

use serde_json::Value;

/// The JSON documents of `docs/format` and `docs/interop/vectors`.
const DOCS: &[&str] = &[
    include_str!("../../../docs/format/agent-chat-v1.json"),
    include_str!("../../../docs/format/message-media.json"),
    include_str!("../../../docs/format/message-refusal.json"),
    include_str!("../../../docs/format/message-text.json"),
    include_str!("../../../docs/format/message-tool-call.json"),
    include_str!("../../../docs/format/message-tool-result.json"),
    include_str!("../../../docs/format/openai-conversation.json"),
    include_str!("../../../docs/format/session-v1.json"),
    include_str!("../../../docs/format/session-v2.json"),
    include_str!("../../../docs/format/invalid/message-bad-id.json"),
    include_str!("../../../docs/format/invalid/message-unknown-part.json"),
    include_str!("../../../docs/format/invalid/message-unknown-role.json"),
    include_str!("../../../docs/format/invalid/message-unknown-version.json"),
    include_str!("../../../docs/format/invalid/session-future-version.json"),
    include_str!("../../../docs/format/invalid/session-secret-field.json"),
    include_str!("../../../docs/format/invalid/session-truncated.json"),
    include_str!("../../../docs/format/invalid/session-unknown-version.json"),
    include_str!("../../../docs/format/invalid/session-v2-bad-scope-key.json"),
    include_str!("../../../docs/format/invalid/session-v2-scope-object.json"),
    include_str!("../../../docs/format/invalid/session-wrong-types.json"),
    include_str!("../../../docs/interop/vectors/agent_framework_redis_keys.json"),
    include_str!("../../../docs/interop/vectors/agent_framework_session.json"),
    include_str!("../../../docs/interop/vectors/llamaindex_memory_get.json"),
    include_str!("../../../docs/interop/vectors/llamaindex_rows.json"),
];

/// Examples of the answers of Mem0 (platform and self-hosted) and OpenAI, and of memory block
/// state and Mem0 session state documents, from the crates' tests.
const EXAMPLES: &[&str] = &[
    r#"{"results": [{"id": "m1", "memory": "Likes tea", "event": "ADD"}]}"#,
    r#"[{"id": "m1", "data": {"memory": "Likes tea"}, "event": "add"}]"#,
    r#"[{"message": "queued", "status": "PENDING", "event_id": "e1"}]"#,
    r#"{"event_id": "e1", "status": "PENDING"}"#,
    r#"{"id": "m1", "memory": "Likes tea", "user_id": "u", "agent_id": "a", "app_id": null, "run_id": "r", "hash": "h", "score": 0.8, "categories": null, "metadata": {"k": 1}, "created_at": "2024-01-01T00:00:00Z", "updated_at": null}"#,
    r#"{"count": 3, "next": "https://api.mem0.ai/v1/memories/?page=2", "previous": null, "results": [{"id": "m1", "memory": "x"}]}"#,
    r#"[{"id": "h1", "memory_id": "m1", "event": "UPDATE", "old_memory": "a", "new_memory": "b", "user_id": "u", "input": [{"role": "user", "content": "hi"}], "metadata": null, "categories": [], "created_at": "2024-01-01T00:00:00Z"}]"#,
    r#"{"detail": "Invalid API key"}"#,
    r#"{"error": "rate limited", "message": "slow down"}"#,
    r#"{"status": "ok", "org_id": "o", "project_id": "p", "user_email": "a@b"}"#,
    r#"{"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello", "refusal": null}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21}}"#,
    r#"{"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}}]}"#,
    r#"{"object": "list", "data": [{"object": "embedding", "index": 1, "embedding": [0.1, 0.2, 0.3]}, {"object": "embedding", "index": 0, "embedding": [0.4, 0.5, 0.6]}], "model": "text-embedding-3-small"}"#,
    r#"{"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}}"#,
    r#"{"format": "agent-memory/memory-blocks", "version": 1, "blocks": {"facts": {"watermark": 3, "state": {"facts": ["Dana is an SRE", "Likes tea"]}}, "core_info": {"watermark": 0, "state": null}}}"#,
    r#"{"v": 1, "storage_scope": {"user_id": "u", "agent_id": "a", "run_id": "r", "app_id": "x"}, "search_scope": {"user_id": "u"}}"#,
    r#"{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}}, {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}, {"type": "file", "file": {"file_id": "f1", "filename": "a.pdf"}}]}"#,
    r#"{"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"}"#,
];

/// Scope keys, URLs and header values: the text decoders' seeds.
pub(crate) const TEXTS: &[&str] = &[
    "t.default/s.session-1/src.default",
    "t.acme/u.dana/a.planner/s.s-1/src.memory.blocks",
    "t.a/u.b/s.c/src.d",
    "postgres://app:hunter2@db:5432/x?sslmode=require&password=p2",
    "redis://:hunter2@127.0.0.1:6379",
    "redis+cluster://u:p@h1:7000,h2:7001/0",
    "mysql://root:p/a?s#s@w:rd@db/x",
    "mysql://root@[::1]:3306/test?ssl-mode=DISABLED&api_key=k",
    "sqlite://memory.db",
    "sqlite::memory:",
    "user:password@host",
    "https://api.openai.com/v1/",
    "http://[::1]:9000",
    "https://u:p@api.mem0.ai/v1?token=t#frag",
    "120",
    "1.5",
    "0",
    "-1",
    "1e400",
    "Wed, 21 Oct 2015 07:28:00 GMT",
    "Tue, 1 Jan 2999 00:00:00 +0000",
];

/// The seeds of a JSON decoder: every document and example, every object and array in them,
/// and the JSON documents that strings in them hold.
pub(crate) fn json() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for text in DOCS.iter().chain(EXAMPLES) {
        out.push(text.as_bytes().to_vec());
        if let Ok(value) = serde_json::from_str::<Value>(text) {
            explode(&value, &mut out);
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The bundles of `docs/bundle` (valid and invalid), whole and cut after each line.
const BUNDLES: &[&str] = &[
    include_str!("../../../docs/bundle/valid.jsonl"),
    include_str!("../../../docs/bundle/invalid/after-end.jsonl"),
    include_str!("../../../docs/bundle/invalid/bad-json.jsonl"),
    include_str!("../../../docs/bundle/invalid/message-before-thread.jsonl"),
    include_str!("../../../docs/bundle/invalid/seq-out-of-order.jsonl"),
    include_str!("../../../docs/bundle/invalid/second-header.jsonl"),
    include_str!("../../../docs/bundle/invalid/too-deep.jsonl"),
    include_str!("../../../docs/bundle/invalid/truncated.jsonl"),
    include_str!("../../../docs/bundle/invalid/unknown-type.jsonl"),
    include_str!("../../../docs/bundle/invalid/wrong-totals.jsonl"),
];

/// The seeds of the bundle reader.
pub(crate) fn bundle() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for text in BUNDLES {
        out.push(text.as_bytes().to_vec());
        let mut prefix = String::new();
        for line in text.lines() {
            prefix.push_str(line);
            prefix.push('\n');
            out.push(prefix.as_bytes().to_vec());
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The seeds of a text decoder.
pub(crate) fn text() -> Vec<Vec<u8>> {
    TEXTS.iter().map(|t| t.as_bytes().to_vec()).collect()
}

fn explode(value: &Value, out: &mut Vec<Vec<u8>>) {
    match value {
        Value::Object(map) => {
            out.push(value.to_string().into_bytes());
            map.values().for_each(|child| explode(child, out));
        }
        Value::Array(items) => {
            out.push(value.to_string().into_bytes());
            items.iter().for_each(|child| explode(child, out));
        }
        Value::String(text) if text.starts_with('{') || text.starts_with('[') => {
            if let Ok(inner) = serde_json::from_str::<Value>(text) {
                explode(&inner, out);
            }
        }
        _ => {}
    }
}
