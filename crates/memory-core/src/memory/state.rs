//! The durable per-session state of a memory's blocks: each block's own state and the sequence
//! number of the last message it was given (its watermark), in one versioned document in a
//! [`SessionStore`].
//!
//! # Versions
//! - 1: `format`, `version`, `blocks` (each block's `watermark`, `state`, and, when written
//!   by a later binary, `watermark_id`).
//! - 2: adds the top-level `thread` (the id of the thread's seq-1 message).
//!
//! Both are read (a version-1 document loads with no `thread`; a version-1 document that
//! already has one, written before the version was bumped, keeps it). Every save writes
//! version 2, so the upgrade is one-way: once a memory saved a session's document, a binary
//! that only knows version 1 refuses it with a version error instead of misreading it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::scope::Scope;
use crate::session::SessionStore;

const FORMAT: &str = "agent-memory/memory-blocks";
/// The version written.
const VERSION: u64 = 2;
/// The versions read.
const READ_VERSIONS: [u64; 2] = [1, 2];
/// The source id under which a session's block states are saved.
pub const BLOCK_STATE_SOURCE: &str = "memory.blocks";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct BlockRecord {
    /// The last message seq handed to the block (0: none yet).
    pub(crate) watermark: u64,
    /// The id of the message at `watermark`: tells this incarnation of the thread from a later
    /// one (seqs restart at 1 after a `clear` or an expiry). Absent in states written before it
    /// was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) watermark_id: Option<String>,
    /// The block's own state.
    #[serde(default)]
    pub(crate) state: Value,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    format: String,
    version: u64,
    /// The id of the thread's seq-1 message when the memory saw it: the thread's incarnation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    thread: Option<String>,
    blocks: BTreeMap<String, BlockRecord>,
}

/// The loaded document and the version it was loaded at.
#[derive(Debug, Clone, Default)]
pub(crate) struct BlockStates {
    /// The id of the thread's seq-1 message, once seen.
    pub(crate) thread: Option<String>,
    pub(crate) blocks: BTreeMap<String, BlockRecord>,
    pub(crate) version: Option<u64>,
}

impl BlockStates {
    pub(crate) fn record(&self, block: &str) -> BlockRecord {
        self.blocks.get(block).cloned().unwrap_or_default()
    }
}

pub(crate) fn state_scope(scope: &Scope) -> Result<Scope> {
    scope.clone().with_source(BLOCK_STATE_SOURCE)
}

pub(crate) async fn load(store: &dyn SessionStore, scope: &Scope) -> Result<BlockStates> {
    let Some(stored) = store.load(&state_scope(scope)?).await? else {
        return Ok(BlockStates::default());
    };
    let doc: Document = serde_json::from_value(stored.state)
        .map_err(|e| Error::serialization(format!("invalid memory block state: {e}")))?;
    if doc.format != FORMAT || !READ_VERSIONS.contains(&doc.version) {
        return Err(Error::serialization(format!(
            "memory block state {:?} version {} is not supported",
            doc.format, doc.version
        )));
    }
    Ok(BlockStates {
        thread: doc.thread,
        blocks: doc.blocks,
        version: Some(stored.version),
    })
}

/// Saves `states` if nobody saved since it was loaded; updates its version.
pub(crate) async fn save(
    store: &dyn SessionStore,
    scope: &Scope,
    states: &mut BlockStates,
) -> Result<()> {
    let doc = Document {
        format: FORMAT.to_owned(),
        version: VERSION,
        thread: states.thread.clone(),
        blocks: states.blocks.clone(),
    };
    let value = serde_json::to_value(&doc)?;
    let version = store
        .save(&state_scope(scope)?, &value, states.version)
        .await?;
    states.version = Some(version);
    Ok(())
}

/// Saves the stored document again, unchanged, so a store that expires sessions restarts its
/// clock (each save does). Nothing stored: nothing to do. A `Conflict` means another process
/// just saved it, which restarted the clock too.
pub(crate) async fn touch(store: &dyn SessionStore, scope: &Scope) -> Result<()> {
    let state_scope = state_scope(scope)?;
    let Some(stored) = store.load(&state_scope).await? else {
        return Ok(());
    };
    match store
        .save(&state_scope, &stored.state, Some(stored.version))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == crate::ErrorKind::Conflict => Ok(()),
        Err(e) => Err(e),
    }
}
