//! The record in which a user-level [`FactExtractionMemoryBlock`](super::FactExtractionMemoryBlock)
//! keeps a user's facts: one versioned document per tenant, user and block in a
//! [`SessionStore`], shared by every session of the user, with each fact's provenance (the
//! session it was learned in) and, per session, the last message applied to it (so a batch
//! handed again after a crash or a lost race is not extracted twice).
//!
//! # Format (version 1)
//! `{"format": "agent-memory/user-facts", "version": 1, "facts": [{"text", "from"}],
//! "applied": {"<session scope key>": {"seq", "id", "first"}}}`: `from` is the scope key of the
//! session the fact was learned in (absent for a fact the model condensed from several);
//! `first` the id of the session thread's seq-1 message.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::history::StoredMessage;
use crate::id::SessionId;
use crate::scope::Scope;
use crate::session::SessionStore;

const FORMAT: &str = "agent-memory/user-facts";
const VERSION: u64 = 1;
/// The session id of the record's scope (beside the user's sessions, under its own source).
const RECORD_SESSION: &str = "user-facts";

/// One fact and where it was learned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct UserFact {
    /// The fact.
    pub(super) text: String,
    /// The scope key of the session it was learned in; `None` when condensed from several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) from: Option<String>,
}

/// The last message of a session applied to the facts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Applied {
    seq: u64,
    id: String,
    /// The id of the thread's seq-1 message, once a batch that starts there was applied: the
    /// thread's incarnation (seqs restart at 1 when it is re-created).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    first: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    format: String,
    version: u64,
    facts: Vec<UserFact>,
    #[serde(default)]
    applied: BTreeMap<String, Applied>,
}

/// A user's facts as loaded, with the version to save against.
#[derive(Debug, Default)]
pub(super) struct UserFacts {
    pub(super) facts: Vec<UserFact>,
    applied: BTreeMap<String, Applied>,
    version: Option<u64>,
}

/// The scope of the record of `session`'s user for the block `name`.
///
/// # Errors
/// [`InvalidInput`](crate::ErrorKind::InvalidInput) when the session's scope names no user.
pub(super) fn record_scope(session: &Scope, name: &str) -> Result<Scope> {
    let user = session.user().ok_or_else(|| {
        Error::invalid_input(
            "user-level facts need a scope with a user: give the session's scope a user id, or \
             keep the facts per session",
        )
    })?;
    Scope::new(session.tenant().clone(), SessionId::new(RECORD_SESSION)?)
        .with_user_id(user.clone())
        .with_source(format!("memory.facts.{name}"))
}

impl UserFacts {
    /// Loads the record at `scope` (empty when there is none).
    ///
    /// # Errors
    /// The store's errors; [`Serialization`](crate::ErrorKind::Serialization) for a record
    /// that is not a user-facts document of a known version.
    pub(super) async fn load(store: &dyn SessionStore, scope: &Scope) -> Result<Self> {
        let Some(stored) = store.load(scope).await? else {
            return Ok(Self::default());
        };
        let doc: Document = serde_json::from_value(stored.state)
            .map_err(|e| Error::serialization(format!("invalid user facts record: {e}")))?;
        if doc.format != FORMAT || doc.version != VERSION {
            return Err(Error::serialization(format!(
                "user facts record {:?} version {} is not supported",
                doc.format, doc.version
            )));
        }
        Ok(Self {
            facts: doc.facts,
            applied: doc.applied,
            version: Some(stored.version),
        })
    }

    /// Saves the record if nobody saved it since it was loaded.
    ///
    /// # Errors
    /// [`Conflict`](crate::ErrorKind::Conflict) when someone did; the store's errors.
    pub(super) async fn save(&self, store: &dyn SessionStore, scope: &Scope) -> Result<()> {
        let doc = Document {
            format: FORMAT.to_owned(),
            version: VERSION,
            facts: self.facts.clone(),
            applied: self.applied.clone(),
        };
        store
            .save(scope, &serde_json::to_value(&doc)?, self.version)
            .await?;
        Ok(())
    }

    /// The texts of the facts.
    pub(super) fn texts(&self) -> Vec<String> {
        self.facts.iter().map(|f| f.text.clone()).collect()
    }

    /// The messages of a batch of `session` not applied yet: the whole batch when the session
    /// applied nothing or the thread was re-created since (the batch holds another message at
    /// the applied seq, or another seq-1 message than the applied one's thread); else those
    /// after the applied seq. (A memory hands a re-created thread's messages from seq 1 again,
    /// so its first batch shows the new seq-1 message.)
    pub(super) fn unapplied<'a>(
        &self,
        session: &Scope,
        batch: &'a [StoredMessage],
    ) -> &'a [StoredMessage] {
        let Some(applied) = self.applied.get(&session.key()) else {
            return batch;
        };
        let id_at = |seq: u64| {
            batch
                .iter()
                .find(|m| m.seq == seq)
                .map(|m| m.message.id.as_str())
        };
        let recreated = id_at(applied.seq).is_some_and(|id| id != applied.id)
            || applied
                .first
                .as_deref()
                .is_some_and(|first| id_at(1).is_some_and(|id| id != first));
        if recreated {
            return batch;
        }
        batch
            .get(batch.partition_point(|m| m.seq <= applied.seq)..)
            .unwrap_or_default()
    }

    /// Records `texts` as the facts after `session` applied `batch` (its messages not applied
    /// before, oldest first): a text already known keeps its provenance; a new one was learned
    /// in `session`, or has none when the model `condensed` the list.
    pub(super) fn replace(
        &mut self,
        texts: Vec<String>,
        condensed: bool,
        session: &Scope,
        batch: &[StoredMessage],
    ) {
        let Some(through) = batch.last() else {
            return;
        };
        let key = session.key();
        let first = match batch.first().filter(|m| m.seq == 1) {
            Some(m) => Some(m.message.id.as_str().to_owned()),
            None => self.applied.get(&key).and_then(|a| a.first.clone()),
        };
        let learned = (!condensed).then(|| key.clone());
        let facts = texts
            .into_iter()
            .map(|text| {
                let from = self
                    .facts
                    .iter()
                    .find(|f| f.text == text)
                    .map_or_else(|| learned.clone(), |known| known.from.clone());
                UserFact { text, from }
            })
            .collect();
        self.facts = facts;
        self.applied.insert(
            key,
            Applied {
                seq: through.seq,
                id: through.message.id.as_str().to_owned(),
                first,
            },
        );
    }

    /// Removes what was learned in `session` (its facts and its applied mark); returns whether
    /// anything changed.
    pub(super) fn forget_session(&mut self, session: &Scope) -> bool {
        let key = session.key();
        let before = self.facts.len();
        self.facts
            .retain(|f| f.from.as_deref() != Some(key.as_str()));
        let marked = self.applied.remove(&key).is_some();
        marked || self.facts.len() != before
    }
}
