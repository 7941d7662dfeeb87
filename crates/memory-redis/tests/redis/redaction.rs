//! No error of memory-redis shows the URL's password, in its message, its `Debug` or any of its
//! sources, for passwords holding `/ ? # @ :` (URL-encoded, as they must be in a URL) and
//! unencoded, against a Redis user created for the test with `ACL SETUSER`, and against a host
//! that does not answer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Tests fail loudly.
// Test code: arithmetic and indexing on the test's own data; a panic fails the test.
#![allow(clippy::arithmetic_side_effects, clippy::indexing_slicing)]

use std::time::Duration;

use memory_core::{ErrorKind, HistoryStore, Scope};
use memory_redis::RedisStore;
use memory_testkit::error_text;

use crate::support;

const PASSWORD: &str = "pw/with?odd#chars@and:more";

/// `PASSWORD`, as a URL must carry it.
fn encoded() -> String {
    PASSWORD
        .replace('%', "%25")
        .replace('/', "%2F")
        .replace('?', "%3F")
        .replace('#', "%23")
        .replace('@', "%40")
        .replace(':', "%3A")
}

/// A user `amtest-<random>` with `PASSWORD`, allowed everything on the machine's Redis, removed
/// when dropped.
struct AclUser {
    name: String,
}

impl AclUser {
    async fn create() -> Self {
        let name = format!("amtest-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        let client = redis::Client::open(support::standalone_url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(&name)
            .arg("on")
            .arg(format!(">{PASSWORD}"))
            .arg("~*")
            .arg("&*")
            .arg("+@all")
            .query_async(&mut conn)
            .await
            .unwrap();
        Self { name }
    }
}

impl Drop for AclUser {
    fn drop(&mut self) {
        if let Ok(client) = redis::Client::open(support::standalone_url())
            && let Ok(mut conn) = client.get_connection()
        {
            let _: redis::RedisResult<()> = redis::cmd("ACL")
                .arg("DELUSER")
                .arg(&self.name)
                .query(&mut conn);
        }
    }
}

fn assert_no_password(err: &memory_core::Error) {
    let text = error_text(err);
    for secret in [PASSWORD, &encoded(), "odd#chars", "with%3Fodd"] {
        assert!(!text.contains(secret), "{secret:?} leaked: {text}");
    }
}

fn host_port() -> String {
    let url = support::standalone_url();
    url.trim_start_matches("redis://")
        .rsplit('@')
        .next()
        .unwrap()
        .trim_end_matches('/')
        .to_owned()
}

#[tokio::test]
async fn the_acl_user_with_an_odd_password_connects_when_encoded() {
    let user = AclUser::create().await;
    let url = format!("redis://{}:{}@{}", user.name, encoded(), host_port());
    let store = RedisStore::builder(&url)
        .key_prefix(support::prefix())
        .connect()
        .await
        .unwrap();
    let scope = Scope::session(format!("s-{}", uuid::Uuid::new_v4().simple())).unwrap();
    assert!(
        store
            .read(&scope, memory_core::Window::All)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!format!("{store:?}").contains(&encoded()));
}

#[tokio::test]
async fn a_wrong_password_never_shows_in_the_error() {
    let user = AclUser::create().await;
    let wrong = format!("{}x", encoded());
    let url = format!("redis://{}:{wrong}@{}", user.name, host_port());
    let err = RedisStore::builder(&url).connect().await.unwrap_err();
    let text = error_text(&err);
    assert!(!text.contains(&wrong), "{text}");
    assert_no_password(&err);
}

#[tokio::test]
async fn unencoded_odd_passwords_never_show_in_the_error() {
    let user = AclUser::create().await;
    for url in [
        format!("redis://{}:{PASSWORD}@{}", user.name, host_port()),
        format!("redis://:{PASSWORD}@{}", host_port()),
        format!(
            "redis+cluster://{}:{PASSWORD}@{},127.0.0.1:1",
            user.name,
            host_port()
        ),
    ] {
        match RedisStore::builder(&url)
            .connection_timeout(Duration::from_secs(2))
            .connect()
            .await
        {
            Ok(_) => panic!("{url} connected"),
            Err(err) => assert_no_password(&err),
        }
    }
}

#[tokio::test]
async fn a_wrong_host_never_shows_the_password() {
    for url in [
        format!("redis://amuser:{}@nonexistent.invalid:6379", encoded()),
        format!("redis://amuser:{}@127.0.0.1:1", encoded()),
        format!(
            "redis+cluster://amuser:{}@127.0.0.1:1,127.0.0.1:2",
            encoded()
        ),
    ] {
        let err = RedisStore::builder(&url)
            .connection_timeout(Duration::from_secs(2))
            .connect()
            .await
            .unwrap_err();
        assert!(
            matches!(
                err.kind(),
                ErrorKind::Unavailable | ErrorKind::Timeout | ErrorKind::InvalidInput
            ),
            "{err}"
        );
        assert_no_password(&err);
    }
}
