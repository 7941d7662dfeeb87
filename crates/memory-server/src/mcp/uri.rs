//! The URIs of the thread resources: `thread://<session>[?user=…&agent=…&source=…]`.

use super::THREAD_SCHEME;
use crate::error::{OpError, OpResult};
use crate::ops::Address;

/// The resource URI of a thread: `thread://<session>`, with `?user=…&agent=…&source=…` for
/// the parts it has (`:` and `@` percent-encoded, so the session reads as a URI host).
pub fn thread_uri(
    session: &str,
    user: Option<&str>,
    agent: Option<&str>,
    source: Option<&str>,
) -> String {
    let mut uri = format!("{THREAD_SCHEME}{}", encode_id(session));
    let mut separator = '?';
    for (name, value) in [("user", user), ("agent", agent), ("source", source)] {
        if let Some(value) = value {
            uri.push(separator);
            uri.push_str(name);
            uri.push('=');
            uri.push_str(&encode_id(value));
            separator = '&';
        }
    }
    uri
}

fn encode_id(id: &str) -> String {
    id.replace('%', "%25")
        .replace(':', "%3A")
        .replace('@', "%40")
}

/// Percent-decodes `text`: the escapes give bytes, and the bytes together must be UTF-8
/// (`%C3%A9` is `é`, one character, which the id rule then refuses by name).
fn decode_id(text: &str) -> OpResult<String> {
    let mut out = Vec::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('%') {
        let (head, tail) = rest.split_at(at);
        out.extend_from_slice(head.as_bytes());
        let code = tail
            .get(1..3)
            .ok_or_else(|| bad_uri("a `%` escape is cut short"))?;
        let byte = u8::from_str_radix(code, 16).map_err(|_| bad_uri("a `%` escape is not hex"))?;
        out.push(byte);
        rest = tail.get(3..).unwrap_or_default();
    }
    out.extend_from_slice(rest.as_bytes());
    String::from_utf8(out).map_err(|_| bad_uri("its `%` escapes do not spell UTF-8"))
}

fn bad_uri(why: &str) -> OpError {
    OpError::invalid(format!(
        "the resource URI is not `thread://<session>[?user=…&agent=…&source=…]`: {why}"
    ))
}

/// The address a `thread://` URI names.
pub(super) fn parse_thread_uri(uri: &str) -> OpResult<Address> {
    let rest = uri
        .strip_prefix(THREAD_SCHEME)
        .ok_or_else(|| bad_uri("it does not start with `thread://`"))?;
    let (session, query) = match rest.split_once('?') {
        Some((session, query)) => (session, Some(query)),
        None => (rest, None),
    };
    let session = session.strip_suffix('/').unwrap_or(session);
    if session.is_empty() {
        return Err(bad_uri("the session is missing"));
    }
    let mut address = Address::session(decode_id(session)?);
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| bad_uri("a query parameter has no `=`"))?;
        let value = Some(decode_id(value)?);
        match name {
            "user" => address.user = value,
            "agent" => address.agent = value,
            "source" => address.source = value,
            _ => {
                return Err(bad_uri(
                    "the query names something other than user, agent or source",
                ));
            }
        }
    }
    Ok(address)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn escapes_decode_as_utf8_not_byte_by_byte() {
        // `é` is two bytes: decoded as one character, not as `Ã©`.
        assert_eq!(parse_thread_uri("thread://%C3%A9").unwrap().session, "é");
        assert_eq!(
            parse_thread_uri("thread://s?user=%E2%82%AC")
                .unwrap()
                .user
                .as_deref(),
            Some("€")
        );
    }

    #[test]
    fn thread_uris_parse_back_to_their_address() {
        let uri = thread_uri("a:b@c", Some("u@x"), Some("ag"), Some("facts"));
        let address = parse_thread_uri(&uri).unwrap();
        assert_eq!(address.session, "a:b@c");
        assert_eq!(address.user.as_deref(), Some("u@x"));
        assert_eq!(address.agent.as_deref(), Some("ag"));
        assert_eq!(address.source.as_deref(), Some("facts"));
        // Raw `:` and `@`, and a trailing slash some URI libraries add, read the same.
        assert_eq!(
            parse_thread_uri("thread://a:b@c/").unwrap().session,
            "a:b@c"
        );
        for bad in [
            "thread://",
            "thread://s?owner=x",
            "thread://s?user",
            "thread://s%4",
            "thread://s%zz",
            "thread://s%C3",
            "thread://s%FF",
            "threads://s",
        ] {
            let error = parse_thread_uri(bad).unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidInput, "{bad}");
            assert!(
                error.detail.contains("thread://<session>"),
                "{bad}: {error}"
            );
        }
    }
}
