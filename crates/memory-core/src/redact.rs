//! Removing secrets from connection URLs before they reach a message, a log or a `Debug`.
//!
//! This is the one redaction of the workspace: every crate masks URLs with [`redact_url`] and
//! prints [`REDACTED`] in place of a key or a password.

use std::ops::Range;

/// The text that replaces a secret, in URLs (`postgres://app:***@db/x`) and in the `Debug` and
/// `Display` of keys.
pub const REDACTED: &str = "***";

/// Query parameters whose values are secrets, compared case-insensitively with `-` and `_`
/// removed; a name ending in `password`, `secret` or `token` is a secret too.
const SECRET_PARAMS: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "pass",
    "secret",
    "token",
    "key",
    "apikey",
    "accesskey",
    "secretkey",
    "sslpassword",
    "auth",
];

/// `url` with the password of its user info and the values of secret-looking query parameters
/// replaced by [`REDACTED`].
///
/// The user info ends at the last `@` that a host list follows, so a password that holds `/`,
/// `?`, `#`, `@` or `:` unescaped is masked whole: everything between the user's `:` and that
/// `@` counts as the password. Several hosts (`redis+cluster://u:p@h1,h2`), IPv6 hosts and
/// empty hosts are host lists. A user info without `:` names a user only and is kept. Text
/// that is not a `scheme://` URL is returned unchanged, or replaced whole when it holds an `@`
/// (it may be `user:password@host`).
///
/// ```
/// use memory_core::redact_url;
/// assert_eq!(redact_url("postgres://app:hunter2@db:5432/x?sslmode=require&password=p2"),
///            "postgres://app:***@db:5432/x?sslmode=require&password=***");
/// assert_eq!(redact_url("redis://:hunter2@127.0.0.1:6379"), "redis://:***@127.0.0.1:6379");
/// assert_eq!(redact_url("mysql://root:p/a?s#s@w:rd@db/x"), "mysql://root:***@db/x");
/// assert_eq!(redact_url("sqlite://memory.db"), "sqlite://memory.db");
/// ```
pub fn redact_url(url: &str) -> String {
    match secret_spans(url) {
        Spans::Whole => REDACTED.to_owned(),
        Spans::Ranges(ranges) => {
            let mut out = String::with_capacity(url.len());
            let mut at = 0;
            for range in ranges {
                out.push_str(&url[at..range.start]);
                out.push_str(REDACTED);
                at = range.end;
            }
            out.push_str(&url[at..]);
            out
        }
    }
}

/// The secrets [`redact_url`] masks in `url`, as written and percent-decoded, longest first
/// and without empty ones: what an error message from a driver given `url` must not show.
/// For text that [`redact_url`] replaces whole, that text.
///
/// ```
/// use memory_core::url_secrets;
/// assert_eq!(url_secrets("mysql://root:p%40ss@h/db?password=zz"), ["p%40ss", "p@ss", "zz"]);
/// assert!(url_secrets("redis://h:6379").is_empty());
/// ```
pub fn url_secrets(url: &str) -> Vec<String> {
    let mut found: Vec<String> = match secret_spans(url) {
        Spans::Whole => vec![url.to_owned()],
        Spans::Ranges(ranges) => ranges.into_iter().map(|r| url[r].to_owned()).collect(),
    };
    let decoded: Vec<String> = found.iter().map(|s| percent_decode(s)).collect();
    found.extend(decoded);
    found.retain(|s| !s.is_empty());
    // Longest first, so that a caller replacing them masks a secret holding another whole.
    found.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    found.dedup();
    found
}

/// `err` with every secret of `secrets` (see [`url_secrets`]) masked as [`REDACTED`] in its
/// message and in the text of its sources: a driver's error often quotes the URL it was given,
/// password included. When neither the message nor a source (`Display` or `Debug`) shows a
/// secret, `err` is returned as it is; otherwise it is rebuilt with
/// [`Error::new_like`](crate::Error::new_like), its sources replaced by one source holding
/// their scrubbed `Display` texts, joined with `": "`.
///
/// ```
/// use memory_core::redact::scrub_error;
/// use memory_core::{Error, ErrorKind, url_secrets};
///
/// let url = "http://admin:pa%2Fss@db:1";
/// let driver = std::io::Error::other(format!("cannot reach {url}"));
/// let err = Error::new(ErrorKind::Unavailable, "connect failed").with_source(driver);
/// let clean = scrub_error(err, &url_secrets(url));
/// let text = format!("{clean:?} {}", std::error::Error::source(&clean).unwrap());
/// assert!(!text.contains("pa%2Fss") && !text.contains("pa/ss"), "{text}");
/// assert!(text.contains("cannot reach http://admin:***@db:1"), "{text}");
/// ```
pub fn scrub_error(err: crate::Error, secrets: &[String]) -> crate::Error {
    let leaks = |text: &str| secrets.iter().any(|s| text.contains(s.as_str()));
    let scrub = |text: &str| {
        secrets.iter().fold(text.to_owned(), |out, secret| {
            out.replace(secret.as_str(), REDACTED)
        })
    };
    let chain: Vec<&(dyn std::error::Error + 'static)> =
        std::iter::successors(std::error::Error::source(&err), |s| s.source()).collect();
    let leaking = leaks(err.message())
        || chain
            .iter()
            .any(|s| leaks(&s.to_string()) || leaks(&format!("{s:?}")));
    if !leaking {
        return err;
    }
    let details: Vec<String> = chain.iter().map(|s| scrub(&s.to_string())).collect();
    let rebuilt = crate::Error::new_like(&err, scrub(err.message()));
    if details.is_empty() {
        rebuilt
    } else {
        rebuilt.with_source(Scrubbed(details.join(": ")))
    }
}

/// The error with its message and the text of each of its sources passed through `rewrite`,
/// the sources then joined into one: what a caller does to take a URL, or a name for it, out
/// of an error. An error that `rewrite` leaves as it is comes back unchanged, its sources kept.
///
/// ```
/// use memory_core::redact::rewrite_error;
/// use memory_core::{Error, ErrorKind};
///
/// let driver = std::io::Error::other("cannot reach db:1");
/// let err = Error::new(ErrorKind::Unavailable, "db:1 failed").with_source(driver);
/// let clean = rewrite_error(err, |text| text.replace("db:1", "the database"));
/// assert_eq!(clean.message(), "the database failed");
/// let source = std::error::Error::source(&clean).unwrap().to_string();
/// assert_eq!(source, "cannot reach the database");
/// ```
pub fn rewrite_error(err: crate::Error, rewrite: impl Fn(&str) -> String) -> crate::Error {
    let raw: Vec<String> = std::iter::successors(std::error::Error::source(&err), |s| s.source())
        .map(|s| s.to_string())
        .collect();
    let chain: Vec<String> = raw.iter().map(|s| rewrite(s)).collect();
    let message = rewrite(err.message());
    if message == err.message() && chain == raw {
        return err;
    }
    let rebuilt = crate::Error::new_like(&err, message);
    if chain.is_empty() {
        rebuilt
    } else {
        rebuilt.with_source(Scrubbed(chain.join(": ")))
    }
}

/// An error text from which secrets were removed, or that was rewritten: the source
/// [`scrub_error`] and [`rewrite_error`] leave.
#[derive(Debug)]
struct Scrubbed(String);

impl std::fmt::Display for Scrubbed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Scrubbed {}

/// Where the secrets of a text are.
enum Spans {
    /// Nothing of it may be shown.
    Whole,
    /// These byte ranges, in order, not overlapping.
    Ranges(Vec<Range<usize>>),
}

fn secret_spans(text: &str) -> Spans {
    let Some(after_scheme) = scheme_end(text) else {
        return if text.contains('@') {
            Spans::Whole
        } else {
            Spans::Ranges(query_secrets(text, 0))
        };
    };
    let mut ranges = Vec::new();
    let rest = &text[after_scheme..];
    let hosts_start = match userinfo_end(rest) {
        Some(at) => {
            let userinfo = &rest[..at];
            // Offsets inside `text`: every sum is at most `text.len()`.
            if let Some(colon) = userinfo.find(':') {
                ranges.push(
                    after_scheme.saturating_add(colon).saturating_add(1)
                        ..after_scheme.saturating_add(at),
                );
            }
            after_scheme.saturating_add(at).saturating_add(1)
        }
        None => after_scheme,
    };
    ranges.extend(query_secrets(&text[hosts_start..], hosts_start));
    Spans::Ranges(ranges)
}

/// The index just past `scheme://`, when `text` starts with a valid scheme followed by `://`.
fn scheme_end(text: &str) -> Option<usize> {
    let (scheme, _) = text.split_once("://")?;
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some(scheme.len().saturating_add(3))
}

/// The index of the `@` that ends the user info of `rest` (the URL after `scheme://`): the
/// last `@` followed by a host list, else the last `@` (so that a password is masked even
/// when what follows is not a host). `None` when there is no `@`, or when the text before it
/// has no `:` but a `/`, `?` or `#`: no password then, and the `@` is in the path or query.
fn userinfo_end(rest: &str) -> Option<usize> {
    let last = rest.rfind('@')?;
    let at = rest
        .match_indices('@')
        .map(|(i, _)| i)
        .rev()
        .find(|&i| rest.get(i.saturating_add(1)..).is_some_and(is_host_list))
        .unwrap_or(last);
    let userinfo = &rest[..at];
    (userinfo.contains(':') || !userinfo.contains(['/', '?', '#'])).then_some(at)
}

/// Whether `tail` starts with a host list (`h`, `h:1`, `h1:1,h2:2`, `[::1]:5432`, or nothing)
/// that ends the text or is followed by `/`, `?` or `#`.
fn is_host_list(tail: &str) -> bool {
    let end = tail.find(['/', '?', '#']).unwrap_or(tail.len());
    tail[..end].split(',').all(is_host)
}

fn is_host(host: &str) -> bool {
    let (name, port) = if let Some(v6) = host.strip_prefix('[') {
        let Some((addr, after)) = v6.split_once(']') else {
            return false;
        };
        if !addr
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '.' | '%'))
        {
            return false;
        }
        match after.strip_prefix(':') {
            Some(port) => ("", Some(port)),
            None if after.is_empty() => ("", None),
            None => return false,
        }
    } else {
        match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    name.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '~' | '%'))
        && port.is_none_or(|p| p.chars().all(|c| c.is_ascii_digit()))
}

/// The value ranges of secret query parameters in `text` (a URL from its hosts on, or text
/// without a scheme), shifted by `offset`.
fn query_secrets(text: &str, offset: usize) -> Vec<Range<usize>> {
    let Some(q) = text.find('?') else {
        return Vec::new();
    };
    // Offsets inside `text`: every sum is at most `text.len()`.
    let query_end = text[q..]
        .find('#')
        .map_or(text.len(), |i| q.saturating_add(i));
    let mut ranges = Vec::new();
    let mut start = q.saturating_add(1);
    for pair in text.get(start..query_end).unwrap_or_default().split('&') {
        if let Some((name, value)) = pair.split_once('=')
            && is_secret_param(name)
            && !value.is_empty()
        {
            let value_start = offset
                .saturating_add(start)
                .saturating_add(name.len())
                .saturating_add(1);
            ranges.push(value_start..value_start.saturating_add(value.len()));
        }
        start = start.saturating_add(pair.len()).saturating_add(1);
    }
    ranges
}

fn is_secret_param(name: &str) -> bool {
    let name: String = name
        .chars()
        .filter(|c| !matches!(c, '-' | '_'))
        .map(|c| c.to_ascii_lowercase())
        .collect();
    SECRET_PARAMS.contains(&name.as_str())
        || ["password", "secret", "token"]
            .iter()
            .any(|suffix| name.ends_with(suffix))
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

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
        // An `@` after the host makes the text ambiguous (`p@h/db?x=a` may be the password):
        // everything up to the last `@` that a host follows is masked.
        assert_eq!(
            redact_url("postgres://u:p@h/db?x=a@b"),
            "postgres://u:***@b"
        );
        assert_eq!(redact_url("not a url"), "not a url");
        assert_eq!(redact_url("user:pw@host"), REDACTED);
    }

    #[test]
    fn a_password_may_hold_any_delimiter() {
        assert_eq!(
            redact_url("postgres://app:p/a?s#s@w:rd@db.example:5432/x?sslmode=require"),
            "postgres://app:***@db.example:5432/x?sslmode=require"
        );
        assert_eq!(redact_url("mysql://root:a@b@h/db"), "mysql://root:***@h/db");
        assert_eq!(
            redact_url("postgres://u:pa/ss@h/db?password=zz"),
            "postgres://u:***@h/db?password=***"
        );
        assert_eq!(
            redact_url("redis://u:1234/abc@h:6379"),
            "redis://u:***@h:6379"
        );
    }

    #[test]
    fn empty_and_missing_passwords() {
        assert_eq!(redact_url("postgres://u:@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact_url("postgres://h/db"), "postgres://h/db");
        assert_eq!(redact_url("redis://:pw@h"), "redis://:***@h");
        // A Unix socket: the host list is empty.
        assert_eq!(
            redact_url("postgres://u:pw@/db?host=/run/postgresql"),
            "postgres://u:***@/db?host=/run/postgresql"
        );
    }

    #[test]
    fn ipv6_and_cluster_hosts() {
        assert_eq!(
            redact_url("postgres://u:pw@[::1]:5432/db"),
            "postgres://u:***@[::1]:5432/db"
        );
        assert_eq!(redact_url("redis://[::1]:6379"), "redis://[::1]:6379");
        assert_eq!(
            redact_url("redis+cluster://u:p@ss@h1:7000,h2:7001,[fe80::1%25eth0]:7002"),
            "redis+cluster://u:***@h1:7000,h2:7001,[fe80::1%25eth0]:7002"
        );
        assert_eq!(redact_url("redis+cluster://h1,h2"), "redis+cluster://h1,h2");
    }

    #[test]
    fn secret_query_parameters() {
        assert_eq!(
            redact_url("https://h/v1?api_key=k1&x=1&Access-Token=t&sslmode=require#frag"),
            "https://h/v1?api_key=***&x=1&Access-Token=***&sslmode=require#frag"
        );
        assert_eq!(
            redact_url("sqlite:data.db?mode=rwc&password=zz"),
            "sqlite:data.db?mode=rwc&password=***"
        );
        assert_eq!(redact_url("https://h/?password="), "https://h/?password=");
        assert_eq!(
            redact_url("https://h/?client_secret=s&sslkey=/path"),
            "https://h/?client_secret=***&sslkey=/path"
        );
    }

    #[test]
    fn secrets_are_listed_for_scrubbing() {
        assert_eq!(
            url_secrets("postgres://u:pa/ss@h/db?password=zz"),
            ["pa/ss", "zz"]
        );
        assert_eq!(url_secrets("user:pw@host"), ["user:pw@host"]);
        assert!(url_secrets("postgres://u@h/db").is_empty());
        assert_eq!(url_secrets("postgres://u:%zz@h"), ["%zz"]);
    }

    fn shown_without(password: &str, url: &str) -> std::result::Result<(), TestCaseError> {
        let shown = redact_url(url);
        prop_assert!(!shown.contains(password), "{url} shown as {shown}");
        prop_assert!(
            url_secrets(url).iter().any(|s| s == password),
            "{url}: {:?}",
            url_secrets(url)
        );
        Ok(())
    }

    proptest! {
        #[test]
        fn no_password_is_ever_shown(
            password in "[ -~]{4,40}",
            user in "[a-z]{0,8}",
            hosts in prop::sample::select(vec![
                "db.example:5432", "[::1]:6379", "h1:7000,h2:7001", "", "127.0.0.1",
            ]),
            path in prop::sample::select(vec!["", "/db", "/db?sslmode=require", "/0#f"]),
            scheme in prop::sample::select(vec![
                "postgres", "mysql", "redis", "redis+cluster", "https",
            ]),
        ) {
            let fixed = format!("{scheme}://{user}:@{hosts}{path}");
            // A password that the rest of the URL spells out by chance cannot be hidden.
            prop_assume!(!fixed.contains(&password));
            prop_assume!(password != REDACTED);
            shown_without(&password, &format!("{scheme}://{user}:{password}@{hosts}{path}"))?;
        }

        #[test]
        fn no_secret_parameter_is_shown(value in "[!-~&&[^&#]]{4,40}") {
            let url = format!("https://h/x?a=1&token={value}&b=2");
            prop_assume!(!"https://h/x?a=1&token=&b=2".contains(&value));
            prop_assert!(!redact_url(&url).contains(&value));
        }
    }
}
