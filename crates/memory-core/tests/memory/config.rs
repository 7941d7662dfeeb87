//! Building a `Memory`: a bad configuration or a store it cannot work on is refused.

use std::sync::Arc;

use memory_core::memory::Memory;
use memory_core::memory::blocks::StaticMemoryBlock;
use memory_core::{ErrorKind, Scope};

use super::support::*;

#[tokio::test]
async fn bad_configuration_is_refused() {
    let (history, states) = stores();
    let scope = Scope::session("s").unwrap();
    let err = Memory::builder(scope.clone(), history.clone(), states.clone())
        .chat_history_token_ratio(1.5)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let a = Arc::new(StaticMemoryBlock::new("same", "x").unwrap());
    let err = Memory::builder(scope, history, states)
        .block(a.clone())
        .block(a)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    assert!(StaticMemoryBlock::new("Bad Name", "x").is_err());
}

#[tokio::test]
async fn a_store_that_reduces_on_append_is_refused() {
    let (inner, states) = stores();
    let history = Arc::new(ReadLog {
        reduces_on_append: true,
        ..ReadLog::plain(inner)
    });
    let err = Memory::builder(Scope::session("s").unwrap(), history, states)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    assert!(err.to_string().contains("max_messages"), "{err}");
}

#[tokio::test]
async fn a_store_that_cannot_archive_is_refused() {
    let (inner, states) = stores();
    let history = Arc::new(ReadLog {
        no_archive: true,
        ..ReadLog::plain(inner)
    });
    let err = Memory::builder(Scope::session("s").unwrap(), history, states)
        .build()
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported);
    assert!(err.to_string().contains("archive"), "{err}");
}
