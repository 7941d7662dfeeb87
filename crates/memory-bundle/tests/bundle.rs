//! Export, import and migrate on the in-memory stores, the fallback path (no paged reads),
//! resume after failures, conflicts, and the test vectors of docs/bundle/.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

mod support;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use memory_bundle::format::{BundleReader, FormatError, MAX_LINE_BYTES, Record};
use memory_bundle::{
    Endpoint, NoProgress, Progress, Selection, Tenants, export, import, migrate, survey,
};
use memory_core::{
    ErrorKind, HistoryStore, InMemoryHistoryStore, InMemorySessionStore, Scope, SessionStore,
    TenantId,
};
use support::*;

fn tenants(names: &[&str]) -> Selection {
    Selection::tenants(names.iter().map(|n| TenantId::new(*n).unwrap()))
}

async fn export_vec(ep: &Endpoint, selection: &Selection) -> Vec<u8> {
    let mut out = Vec::new();
    export(ep, selection, &mut out, &NoProgress).await.unwrap();
    out
}

fn vectors() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/bundle")
}

#[tokio::test]
async fn export_import_round_trip_is_exact() {
    let from = memory_endpoint();
    fill_sample(&from).await;
    let bundle = export_vec(&from, &Selection::all()).await;

    let to = memory_endpoint();
    let summary = import(&to, bundle.as_slice(), &NoProgress).await.unwrap();
    assert_eq!(survey(&from, &Selection::all()).await.unwrap(), summary);
    assert_eq!(
        survey(&from, &tenants(&["zeta"]))
            .await
            .unwrap()
            .to_string(),
        "1 thread with 2 messages (0 archived), 0 sessions and 0 block states"
    );
    assert_eq!(
        (summary.threads, summary.messages, summary.archived),
        (3, 9, 3)
    );
    assert_eq!((summary.sessions, summary.block_states), (1, 1));
    assert_eq!(
        summary.to_string(),
        "3 threads with 9 messages (3 archived), 1 session and 1 block state"
    );
    for t in ["acme", "zeta"] {
        assert_eq!(dump(&from, t).await, dump(&to, t).await);
        assert_eq!(dump_sessions(&from, t).await, dump_sessions(&to, t).await);
    }
    // Re-exporting the import gives the same bundle (the header's time aside).
    let again = export_vec(&to, &Selection::all()).await;
    assert_eq!(body(&bundle), body(&again));

    // Importing twice changes nothing and duplicates nothing.
    import(&to, bundle.as_slice(), &NoProgress).await.unwrap();
    assert_eq!(dump(&from, "acme").await, dump(&to, "acme").await);
    assert_eq!(
        body(&export_vec(&to, &Selection::all()).await),
        body(&bundle)
    );
}

#[tokio::test]
async fn the_fallback_without_paged_reads_writes_the_same_bundle() {
    let from = memory_endpoint();
    fill_sample(&from).await;
    fill_large(&from, 1, 2_500).await;
    let paged = export_vec(&from, &Selection::all()).await;
    let mut wrapped = Wrapped::new(Arc::clone(&from.history));
    wrapped.paged = false;
    let fallback = Endpoint::new(Arc::new(wrapped), Arc::clone(&from.sessions));
    assert!(!fallback.history.capabilities().paged_reads);
    let unpaged = export_vec(&fallback, &Selection::all()).await;
    assert_eq!(body(&paged), body(&unpaged));

    // And a target without paged reads imports and migrates (its resume check reads whole).
    let mut target = Wrapped::new(Arc::new(InMemoryHistoryStore::new()));
    target.paged = false;
    let to = Endpoint::new(Arc::new(target), Arc::new(InMemorySessionStore::new()));
    let report = migrate(&fallback, &to, &Selection::all(), &NoProgress)
        .await
        .unwrap();
    assert_eq!(report.copied.messages, 9 + 2_500);
    assert_eq!(report.verified_threads, 4);
    assert_eq!(report.verified_sessions, 3);
}

#[tokio::test]
async fn selection_narrows_to_tenant_user_agent_and_session() {
    let from = memory_endpoint();
    fill_sample(&from).await;
    let count = |b: &[u8], ty: &str| {
        body(b)
            .iter()
            .filter(|l| l.starts_with(&format!("{{\"type\":\"{ty}\"")))
            .count()
    };
    let zeta = export_vec(&from, &tenants(&["zeta"])).await;
    assert_eq!((count(&zeta, "thread"), count(&zeta, "message")), (1, 2));
    let dana = export_vec(
        &from,
        &tenants(&["acme"]).with_user(memory_core::UserId::new("dana").unwrap()),
    )
    .await;
    assert_eq!(count(&dana, "thread"), 1);
    assert_eq!((count(&dana, "session"), count(&dana, "blocks")), (1, 1));
    let planner = export_vec(
        &from,
        &tenants(&["acme"]).with_agent(memory_core::AgentId::new("planner").unwrap()),
    )
    .await;
    assert_eq!(
        (count(&planner, "thread"), count(&planner, "session")),
        (1, 0)
    );
    let chat1 = export_vec(
        &from,
        &Selection::all().with_session(memory_core::SessionId::new("chat-1").unwrap()),
    )
    .await;
    assert_eq!(
        (
            count(&chat1, "thread"),
            count(&chat1, "message"),
            count(&chat1, "blocks")
        ),
        (1, 6, 1)
    );
}

#[tokio::test]
async fn all_tenants_needs_stores_that_list_them() {
    let from = memory_endpoint();
    fill_sample(&from).await;
    let mut wrapped = Wrapped::new(Arc::clone(&from.history));
    wrapped.tenants = false;
    let ep = Endpoint::new(Arc::new(wrapped), Arc::clone(&from.sessions));
    let err = export(&ep, &Selection::all(), Vec::new(), &NoProgress)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    assert!(err.to_string().contains("lists_tenants"), "{err}");
    assert!(err.to_string().contains("name the tenants"), "{err}");
    // Naming them works on the same store.
    let named = export_vec(&ep, &tenants(&["acme", "zeta"])).await;
    assert_eq!(
        body(&named),
        body(&export_vec(&from, &Selection::all()).await)
    );
    assert_eq!(Selection::all().tenants, Tenants::All);
}

/// Runs `migrate` into a target that fails as `faults` says, then again on the healthy
/// target, and checks the target equals the source exactly.
async fn resume_after(faults: Faults) {
    let from = memory_endpoint();
    fill_large(&from, 3, 2_100).await;
    fill_sample(&from).await;
    let inner: Arc<dyn HistoryStore> = Arc::new(InMemoryHistoryStore::new());
    let sessions: Arc<dyn SessionStore> = Arc::new(InMemorySessionStore::new());
    let mut failing = Wrapped::new(Arc::clone(&inner));
    failing.faults = faults;
    let broken = Endpoint::new(Arc::new(failing), Arc::clone(&sessions));
    let err = migrate(&from, &broken, &Selection::all(), &NoProgress)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");

    let to = Endpoint::new(inner, sessions);
    let report = migrate(&from, &to, &Selection::all(), &NoProgress)
        .await
        .unwrap();
    assert!(report.already_present > 0, "{report}");
    assert_eq!(report.verified_threads, 6);
    assert_eq!(report.verified_sessions, 3 + 2);
    for t in ["big", "acme", "zeta"] {
        assert_eq!(dump(&from, t).await, dump(&to, t).await, "tenant {t}");
        assert_eq!(dump_sessions(&from, t).await, dump_sessions(&to, t).await);
    }
    // A third run finds everything present and copies nothing.
    let report = migrate(&from, &to, &Selection::all(), &NoProgress)
        .await
        .unwrap();
    assert_eq!(report.copied.messages, 0);
    assert_eq!(report.already_present, 3 * 2_100 + 9);
}

#[tokio::test]
async fn migrate_resumes_after_a_failed_append() {
    let faults = Faults::none();
    faults
        .appends_left
        .store(4, std::sync::atomic::Ordering::SeqCst);
    resume_after(faults).await;
}

#[tokio::test]
async fn migrate_resumes_after_an_append_whose_answer_was_lost() {
    let mut faults = Faults::none();
    faults.appends_left = AtomicUsize::new(5);
    faults.store_then_fail = true;
    resume_after(faults).await;
}

#[tokio::test]
async fn migrate_resumes_after_a_failed_archive() {
    let mut faults = Faults::none();
    faults.archives_left = AtomicUsize::new(1);
    resume_after(faults).await;
}

#[tokio::test]
async fn import_resumes_after_a_truncated_bundle() {
    let from = memory_endpoint();
    fill_large(&from, 2, 1_500).await;
    let bundle = export_vec(&from, &tenants(&["big"])).await;
    let text = String::from_utf8(bundle.clone()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cut = lines[..lines.len() / 2].join("\n") + "\n";
    let to = memory_endpoint();
    let err = import(&to, cut.as_bytes(), &NoProgress).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Serialization);
    assert!(err.to_string().contains("truncated"), "{err}");
    let summary = import(&to, bundle.as_slice(), &NoProgress).await.unwrap();
    assert_eq!(summary.messages, 3_000);
    assert_eq!(dump(&from, "big").await, dump(&to, "big").await);
    assert_eq!(
        dump_sessions(&from, "big").await,
        dump_sessions(&to, "big").await
    );
}

#[tokio::test]
async fn a_target_thread_with_other_messages_is_a_conflict_naming_it() {
    let from = memory_endpoint();
    fill_sample(&from).await;
    let to = memory_endpoint();
    let a = scope("acme", Some("dana"), "chat-1");
    to.history
        .append(&a, &[msg("other", "not from the source", 0)])
        .await
        .unwrap();
    let err = migrate(&from, &to, &tenants(&["acme"]), &NoProgress)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(err.to_string().contains(&a.to_string()), "{err}");

    // A target thread longer than the source's is a conflict too.
    let to = memory_endpoint();
    migrate(&from, &to, &tenants(&["zeta"]), &NoProgress)
        .await
        .unwrap();
    let c = scope("zeta", Some("eli"), "s-9");
    to.history
        .append(&c, &[msg("extra", "later", 3)])
        .await
        .unwrap();
    let err = migrate(&from, &to, &tenants(&["zeta"]), &NoProgress)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(err.to_string().contains(&c.to_string()), "{err}");
}

#[tokio::test]
async fn verification_names_the_thread_that_differs() {
    let from = memory_endpoint();
    fill_sample(&from).await;
    let to = memory_endpoint();
    migrate(&from, &to, &tenants(&["acme"]), &NoProgress)
        .await
        .unwrap();
    // The source changes after the copy: the next migrate copies the new message... unless
    // the target archived differently. Archive one in the target only.
    let a = scope("acme", Some("dana"), "chat-1");
    to.history.archive(&a, 6..=6).await.unwrap();
    let err = migrate(&from, &to, &tenants(&["acme"]), &NoProgress)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(err.to_string().contains("verification"), "{err}");
    assert!(err.to_string().contains(&a.to_string()), "{err}");
}

#[tokio::test]
async fn sessions_overwrite_the_target_and_get_its_versions() {
    let from = memory_endpoint();
    fill_sample(&from).await;
    let a = scope("acme", Some("dana"), "chat-1");
    for _ in 0..3 {
        let v = from.sessions.load(&a).await.unwrap().unwrap().version;
        from.sessions
            .save(&a, &serde_json::json!({"turn": v}), Some(v))
            .await
            .unwrap();
    }
    let to = memory_endpoint();
    to.sessions
        .save(&a, &serde_json::json!({"stale": true}), None)
        .await
        .unwrap();
    migrate(&from, &to, &tenants(&["acme"]), &NoProgress)
        .await
        .unwrap();
    let (src, dst) = (
        from.sessions.load(&a).await.unwrap().unwrap(),
        to.sessions.load(&a).await.unwrap().unwrap(),
    );
    assert_eq!(src.state, dst.state);
    assert_eq!(src.version, 4);
    assert_eq!(dst.version, 2, "the target's own next version");
    // Equal state: left alone.
    migrate(&from, &to, &tenants(&["acme"]), &NoProgress)
        .await
        .unwrap();
    assert_eq!(to.sessions.load(&a).await.unwrap().unwrap().version, 2);
}

#[derive(Default)]
struct Counting {
    threads: std::sync::Mutex<Vec<(String, u64)>>,
    messages: std::sync::atomic::AtomicU64,
    sessions: std::sync::atomic::AtomicU64,
}

impl Progress for Counting {
    fn thread_started(&self, scope: &Scope, messages: u64) {
        self.threads.lock().unwrap().push((scope.key(), messages));
    }
    fn messages_copied(&self, n: u64) {
        self.messages
            .fetch_add(n, std::sync::atomic::Ordering::SeqCst);
    }
    fn session_copied(&self, _scope: &Scope) {
        self.sessions
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[tokio::test]
async fn progress_reports_every_thread_message_and_session() {
    let from = memory_endpoint();
    fill_large(&from, 2, 2_500).await;
    for run in ["export", "migrate"] {
        let progress = Counting::default();
        if run == "export" {
            export(&from, &tenants(&["big"]), Vec::new(), &progress)
                .await
                .unwrap();
        } else {
            migrate(&from, &memory_endpoint(), &tenants(&["big"]), &progress)
                .await
                .unwrap();
        }
        let threads = progress.threads.lock().unwrap().clone();
        assert_eq!(threads.len(), 2, "{run}");
        assert!(threads.iter().all(|(_, n)| *n == 2_500), "{run}");
        assert_eq!(
            progress.messages.load(std::sync::atomic::Ordering::SeqCst),
            5_000,
            "{run}"
        );
        assert_eq!(
            progress.sessions.load(std::sync::atomic::Ordering::SeqCst),
            2
        );
    }
}

#[tokio::test]
async fn migration_report_reads_as_a_sentence() {
    let from = memory_endpoint();
    fill_sample(&from).await;
    let report = migrate(&from, &memory_endpoint(), &Selection::all(), &NoProgress)
        .await
        .unwrap();
    assert_eq!(
        report.to_string(),
        "copied 3 threads with 9 messages (3 archived), 1 session and 1 block state; 0 \
         messages were already present in the target; verified 3 threads and 2 sessions"
    );
}

/// The sample exported now is the valid vector (its header aside), so the vector stays what
/// the writer writes. Set `BUNDLE_VECTORS_WRITE=1` to rewrite it after a deliberate change.
#[tokio::test]
async fn the_valid_vector_is_what_the_writer_writes() {
    let from = memory_endpoint();
    fill_sample(&from).await;
    let bundle = export_vec(&from, &Selection::all()).await;
    let path = vectors().join("valid.jsonl");
    if std::env::var_os("BUNDLE_VECTORS_WRITE").is_some() {
        let mut text = String::from_utf8(bundle.clone()).unwrap();
        let header_end = text.find('\n').unwrap();
        text.replace_range(
            ..header_end,
            r#"{"type":"header","format":"agent-memory/bundle","version":1,"created_at":"2026-01-02T03:04:05Z","producer":"memory-bundle 0.1.0"}"#,
        );
        std::fs::write(&path, text).unwrap();
    }
    let vector = std::fs::read(&path).unwrap();
    assert_eq!(body(&vector), body(&bundle));
}

#[tokio::test]
async fn the_valid_vector_imports_and_re_exports_identically() {
    let vector = std::fs::read(vectors().join("valid.jsonl")).unwrap();
    let reader = BundleReader::new(vector.as_slice()).unwrap();
    assert_eq!(reader.header().unwrap().version, 1);
    let to = memory_endpoint();
    let summary = import(&to, vector.as_slice(), &NoProgress).await.unwrap();
    assert_eq!((summary.threads, summary.messages), (3, 9));
    let again = export_vec(&to, &Selection::all()).await;
    assert_eq!(body(&vector), body(&again));
}

/// Each invalid vector and the error it must give (docs/bundle.md lists them).
#[tokio::test]
async fn the_invalid_vectors_give_their_documented_errors() {
    type Check = fn(&FormatError) -> bool;
    let cases: &[(&str, Check)] = &[
        ("empty.jsonl", |e| matches!(e, FormatError::MissingHeader)),
        ("no-header.jsonl", |e| {
            matches!(e, FormatError::MissingHeader)
        }),
        ("wrong-format.jsonl", |e| {
            matches!(e, FormatError::WrongFormat { .. })
        }),
        ("future-version.jsonl", |e| {
            matches!(e, FormatError::UnsupportedVersion { found: 2 })
        }),
        ("bad-json.jsonl", |e| {
            matches!(e, FormatError::BadRecord { line: 3, .. })
        }),
        ("unknown-type.jsonl", |e| {
            matches!(e, FormatError::BadRecord { line: 2, .. })
        }),
        ("message-before-thread.jsonl", |e| {
            matches!(e, FormatError::MessageOutsideThread { line: 2 })
        }),
        ("seq-out-of-order.jsonl", |e| {
            matches!(
                e,
                FormatError::SeqOutOfOrder {
                    line: 4,
                    previous: 2,
                    found: 1
                }
            )
        }),
        ("too-deep.jsonl", |e| {
            matches!(e, FormatError::TooDeep { line: 2 })
        }),
        ("truncated.jsonl", |e| {
            matches!(e, FormatError::MissingEnd { lines: 4 })
        }),
        ("wrong-totals.jsonl", |e| {
            matches!(e, FormatError::TotalsMismatch { line: 4, .. })
        }),
        ("after-end.jsonl", |e| {
            matches!(e, FormatError::AfterEnd { line: 3 })
        }),
        ("second-header.jsonl", |e| {
            matches!(e, FormatError::UnexpectedHeader { line: 2 })
        }),
    ];
    for (name, check) in cases {
        let bytes = std::fs::read(vectors().join("invalid").join(name)).unwrap();
        let error = read_all(&bytes).expect_err(name);
        assert!(check(&error), "{name}: {error:?}");
        // The error reads as a sentence, and import gives it as a typed Error.
        assert!(!error.to_string().contains('{'), "{name}: {error}");
        let err = import(&memory_endpoint(), bytes.as_slice(), &NoProgress)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), error.kind(), "{name}");
        assert_eq!(err.message(), error.to_string(), "{name}");
        let source = std::error::Error::source(&err).expect(name);
        assert!(source.downcast_ref::<FormatError>().is_some(), "{name}");
    }
}

fn read_all(bytes: &[u8]) -> Result<Vec<Record>, FormatError> {
    let mut reader = BundleReader::new(bytes)?;
    let mut out = Vec::new();
    while let Some(r) = reader.next_record()? {
        out.push(r);
    }
    Ok(out)
}

#[test]
fn a_line_over_the_limit_is_refused_without_reading_it_whole() {
    let header = r#"{"type":"header","format":"agent-memory/bundle","version":1,"created_at":"2026-01-02T03:04:05Z","producer":"t"}"#;
    let mut bytes = format!("{header}\n").into_bytes();
    bytes.extend(std::iter::repeat_n(b' ', MAX_LINE_BYTES + 1));
    bytes.push(b'\n');
    let err = read_all(&bytes).unwrap_err();
    assert!(
        matches!(err, FormatError::LineTooLong { line: 2 }),
        "{err:?}"
    );
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    // No newline at all: the same.
    let mut bytes = vec![b'{'; MAX_LINE_BYTES + 10];
    bytes.truncate(MAX_LINE_BYTES + 10);
    let err = read_all(&bytes).unwrap_err();
    assert!(
        matches!(err, FormatError::LineTooLong { line: 1 }),
        "{err:?}"
    );
}

#[test]
fn hostile_lines_give_typed_errors_never_a_panic() {
    let header = r#"{"type":"header","format":"agent-memory/bundle","version":1,"created_at":"2026-01-02T03:04:05Z","producer":"t"}"#;
    let thread = r#"{"type":"thread","scope":{"tenant":"t","session":"s","source":"history"},"messages":1,"archived":0,"last_seq":1}"#;
    let bodies = [
        "\u{0}\u{1}garbage".to_owned(),
        "[".repeat(200_000),
        "{\"type\":\"message\"".to_owned(),
        format!("{thread}\n{{\"type\":\"message\",\"seq\":1,\"tokens\":1,\"archived\":false,\"message\":{{\"v\":99}}}}"),
        format!("{thread}\n{{\"type\":\"message\",\"seq\":1,\"tokens\":-1,\"archived\":false,\"message\":{{}}}}"),
        r#"{"type":"thread","scope":{"tenant":"bad|id","session":"s","source":"history"},"messages":1,"archived":0,"last_seq":1}"#.to_owned(),
        r#"{"type":"session","scope":{"tenant":"t","session":"s","source":"history"},"version":1}"#.to_owned(),
    ];
    for body in bodies {
        let mut bytes = format!("{header}\n{body}\n").into_bytes();
        bytes.extend(b"\xff\xfe\n");
        let err = read_all(&bytes).unwrap_err();
        assert!(
            matches!(
                err,
                FormatError::BadRecord { .. } | FormatError::TooDeep { .. }
            ),
            "{err:?}"
        );
    }
    // Not UTF-8 in the header.
    assert!(matches!(
        read_all(b"\xff\xfe\n").unwrap_err(),
        FormatError::BadRecord { line: 1, .. }
    ));
}

/// The futures of export, import and migrate can be spawned on a multi-threaded runtime.
#[test]
fn the_operations_are_send() {
    fn send<T: Send>(_: T) {}
    let ep = memory_endpoint();
    let selection = Selection::all();
    send(export(&ep, &selection, Vec::new(), &NoProgress));
    send(import(&ep, &b""[..], &NoProgress));
    send(migrate(&ep, &ep, &selection, &NoProgress));
}

#[tokio::test]
async fn a_tenant_listed_twice_is_exported_once() {
    let from = memory_endpoint();
    fill_sample(&from).await;
    let twice = export_vec(&from, &tenants(&["zeta", "acme", "zeta"])).await;
    let once = export_vec(&from, &tenants(&["zeta", "acme"])).await;
    assert_eq!(body(&twice), body(&once));
    assert!(
        body(&once)[0].contains("\"zeta\""),
        "the order given is kept"
    );
}

#[tokio::test]
async fn a_target_that_cannot_archive_refuses_archived_messages() {
    let from = memory_endpoint();
    fill_sample(&from).await;
    let mut target = Wrapped::new(Arc::new(InMemoryHistoryStore::new()));
    target.archive = false;
    let to = Endpoint::new(Arc::new(target), Arc::new(InMemorySessionStore::new()));
    // Zeta's thread has no archived message: it copies.
    migrate(&from, &to, &tenants(&["zeta"]), &NoProgress)
        .await
        .unwrap();
    let err = migrate(&from, &to, &tenants(&["acme"]), &NoProgress)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    let a = scope("acme", Some("dana"), "chat-1");
    assert!(err.to_string().contains(&a.to_string()), "{err}");
    assert!(
        err.to_string().contains("HistoryCapabilities::archive"),
        "{err}"
    );
}

#[tokio::test]
async fn crlf_line_ends_and_blank_lines_are_read() {
    let vector = std::fs::read_to_string(vectors().join("valid.jsonl")).unwrap();
    let crlf = vector.replace('\n', "\r\n\r\n");
    let to = memory_endpoint();
    let summary = import(&to, crlf.as_bytes(), &NoProgress).await.unwrap();
    assert_eq!((summary.threads, summary.messages), (3, 9));
    let again = export_vec(&to, &Selection::all()).await;
    assert_eq!(body(vector.as_bytes()), body(&again));
}

/// A source thread of `n` messages `{prefix}{i}`, every odd seq archived (`n / 2` runs).
async fn alternating_thread(ep: &Endpoint, s: &Scope, prefix: &str, n: u32) {
    let msgs: Vec<_> = (0..n)
        .map(|i| msg(&format!("{prefix}{i}"), &format!("{prefix} {i}"), i))
        .collect();
    for chunk in msgs.chunks(1_000) {
        ep.history.append(s, chunk).await.unwrap();
    }
    for seq in (1..=u64::from(n)).step_by(2) {
        ep.history.archive(s, seq..=seq).await.unwrap();
    }
}

/// Imports `bundle` into a target whose thread `s` holds `n` foreign messages, none
/// archived: a `Conflict` naming the thread, and the target's messages untouched.
async fn assert_foreign_target_refused_unchanged(bundle: &[u8], s: &Scope, n: u32) {
    let to = memory_endpoint();
    let foreign: Vec<_> = (0..n)
        .map(|i| msg(&format!("f{i}"), &format!("foreign {i}"), i))
        .collect();
    for chunk in foreign.chunks(1_000) {
        to.history.append(s, chunk).await.unwrap();
    }
    let before = dump(&to, s.tenant().as_str()).await;
    assert_eq!(before.len(), n as usize);
    assert!(before.iter().all(|(_, _, archived, _)| !archived));

    let err = import(&to, bundle, &NoProgress).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert!(err.to_string().contains(&s.to_string()), "{err}");
    // Every message, with its archived flag, is as it was: no archive flag of the bundle
    // reached the foreign thread.
    assert_eq!(dump(&to, s.tenant().as_str()).await, before);
}

#[tokio::test]
async fn a_longer_foreign_target_thread_is_refused_before_any_archive() {
    let from = memory_endpoint();
    let s = scope("acme", Some("dana"), "chat-1");
    // Three messages, the first two archived.
    let msgs: Vec<_> = (0..3)
        .map(|i| msg(&format!("a{i}"), &format!("message {i}"), i))
        .collect();
    from.history.append(&s, &msgs).await.unwrap();
    from.history.archive(&s, 1..=2).await.unwrap();
    let bundle = export_vec(&from, &tenants(&["acme"])).await;
    // The target holds another, longer conversation under the same scope: the bundle's
    // thread ends before the resume point, so no position was checked before the thread ends.
    assert_foreign_target_refused_unchanged(&bundle, &s, 5).await;

    // The same through migrate.
    let to = memory_endpoint();
    let foreign: Vec<_> = (0..5)
        .map(|i| msg(&format!("f{i}"), &format!("foreign {i}"), i))
        .collect();
    to.history.append(&s, &foreign).await.unwrap();
    let before = dump(&to, "acme").await;
    let err = migrate(&from, &to, &tenants(&["acme"]), &NoProgress)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert!(err.to_string().contains(&s.to_string()), "{err}");
    // The error names the differing messages: the target's and the bundle's last one.
    assert!(err.to_string().contains("f2"), "{err}");
    assert!(err.to_string().contains("a2"), "{err}");
    assert_eq!(dump(&to, "acme").await, before);
}

#[tokio::test]
async fn a_longer_foreign_target_is_refused_unchanged_past_a_thousand_archive_runs() {
    let from = memory_endpoint();
    let s = scope("acme", Some("dana"), "long");
    // 2,010 messages in 1,005 archived runs: the runs held exceed the importer's limit while
    // every message is still one the target holds.
    alternating_thread(&from, &s, "m", 2_010).await;
    let bundle = export_vec(&from, &tenants(&["acme"])).await;
    assert_foreign_target_refused_unchanged(&bundle, &s, 2_500).await;
}

#[tokio::test]
async fn a_resumed_thread_past_a_thousand_archive_runs_gets_every_flag() {
    let from = memory_endpoint();
    let s = scope("acme", Some("dana"), "long");
    alternating_thread(&from, &s, "m", 2_400).await;
    // The target holds the thread's first 2,200 messages without their archive flags (a run
    // that stopped after appending): the resume checks positions, then applies every flag.
    let to = memory_endpoint();
    let source = dump(&from, "acme").await;
    let first: Vec<_> = source
        .iter()
        .take(2_200)
        .map(|(_, _, _, m)| m.clone())
        .collect();
    for chunk in first.chunks(1_000) {
        to.history.append(&s, chunk).await.unwrap();
    }
    let report = migrate(&from, &to, &tenants(&["acme"]), &NoProgress)
        .await
        .unwrap();
    assert_eq!(report.already_present, 2_200);
    assert_eq!(report.copied.messages, 200);
    assert_eq!(dump(&to, "acme").await, source);
}

#[tokio::test]
async fn migrate_lists_every_tenant_once_for_copy_and_verification() {
    let from = memory_endpoint();
    fill_sample(&from).await;
    let wrapped = Arc::new(Wrapped::new(Arc::clone(&from.history)));
    let source = Endpoint::new(
        Arc::clone(&wrapped) as Arc<dyn HistoryStore>,
        Arc::clone(&from.sessions),
    );
    let to = memory_endpoint();
    let report = migrate(&source, &to, &Selection::all(), &NoProgress)
        .await
        .unwrap();
    assert_eq!(report.verified_threads, 3);
    // One listing (one page: the tenants fit in it) serves the copy and the verification.
    assert_eq!(
        wrapped
            .tenant_listings
            .load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    assert_eq!(dump(&to, "acme").await, dump(&from, "acme").await);
    assert_eq!(dump(&to, "zeta").await, dump(&from, "zeta").await);
}
