//! Removing secrets from connection URLs before they reach a message, a log or a `Debug`.

/// The text that replaces a secret.
pub const REDACTED: &str = "***";

/// Query parameters whose values are secrets.
const SECRET_PARAMS: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "pass",
    "secret",
    "token",
    "key",
    "api_key",
    "apikey",
    "sslpassword",
    "auth",
];

/// `url` with the password of its user info and the values of secret-looking query parameters
/// replaced by [`REDACTED`]. Works on URLs with several hosts (`redis+cluster://u:p@h1,h2`) and
/// on text that is not a URL (returned unchanged, or replaced whole when it holds an `@`).
///
/// ```
/// use memory_core::redact_url;
/// assert_eq!(redact_url("postgres://app:hunter2@db:5432/x?sslmode=require&password=p2"),
///            "postgres://app:***@db:5432/x?sslmode=require&password=***");
/// assert_eq!(redact_url("redis://:hunter2@127.0.0.1:6379"), "redis://:***@127.0.0.1:6379");
/// assert_eq!(redact_url("sqlite://memory.db"), "sqlite://memory.db");
/// ```
pub fn redact_url(url: &str) -> String {
    let (before_query, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let mut out = match before_query.split_once("://") {
        Some((scheme, rest)) => {
            // The authority ends at the first '/' after the scheme; user info ends at its last '@'.
            let authority_end = rest.find('/').unwrap_or(rest.len());
            let (authority, path) = rest.split_at(authority_end);
            let authority = match authority.rsplit_once('@') {
                Some((userinfo, hosts)) => match userinfo.split_once(':') {
                    Some((user, _password)) => format!("{user}:{REDACTED}@{hosts}"),
                    None => format!("{userinfo}@{hosts}"),
                },
                None => authority.to_owned(),
            };
            format!("{scheme}://{authority}{path}")
        }
        // Not a URL: with an '@' it may be `user:password@host`, so nothing of it is shown.
        None if before_query.contains('@') => return REDACTED.to_owned(),
        None => before_query.to_owned(),
    };
    if let Some(query) = query {
        let params: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) if SECRET_PARAMS.contains(&name.to_ascii_lowercase().as_str()) => {
                    format!("{name}={REDACTED}")
                }
                _ => pair.to_owned(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_every_place_a_secret_hides() {
        for (url, secret) in [
            ("mysql://root:s3cret@127.0.0.1:3306/test", "s3cret"),
            ("redis+cluster://u:s3cret@h1:1,h2:2", "s3cret"),
            ("rediss://default:s3cret@host:6380/0", "s3cret"),
            ("postgres://u@h/db?password=s3cret", "s3cret"),
            ("postgres://u:p%40ss@h/db?x=a@b", "p%40ss"),
        ] {
            let shown = redact_url(url);
            assert!(!shown.contains(secret), "{shown}");
        }
        assert_eq!(
            redact_url("postgres://u:p@h/db?x=a@b"),
            "postgres://u:***@h/db?x=a@b"
        );
        assert_eq!(redact_url("not a url"), "not a url");
        assert_eq!(redact_url("user:pw@host"), REDACTED);
    }
}
