//! [`RecordingBlock`]: a memory block that records in its state every sequence number it is
//! given.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use memory_core::Result;
use memory_core::memory::{BlockContent, BlockGetContext, BlockPutContext, MemoryBlock};
use serde_json::{Value, json};

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A [`MemoryBlock`] (priority 0) that keeps the sequence numbers it is given in its state and
/// shows them as its content (`"1 2 3"`), and logs every `put` call on the object (a redone
/// `put` shows there twice, never in the state).
#[derive(Debug)]
pub struct RecordingBlock {
    name: String,
    calls: Mutex<Vec<Vec<u64>>>,
}

impl RecordingBlock {
    /// A block named `name` (a valid block name).
    pub fn new(name: &str) -> Arc<Self> {
        Arc::new(Self {
            name: name.to_owned(),
            calls: Mutex::new(Vec::new()),
        })
    }

    /// The sequence numbers of each `put` call on this object, in call order.
    pub fn calls(&self) -> Vec<Vec<u64>> {
        lock(&self.calls).clone()
    }
}

fn recorded(state: &Value) -> Vec<u64> {
    state["seqs"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default()
}

#[async_trait]
impl MemoryBlock for RecordingBlock {
    fn name(&self) -> &str {
        &self.name
    }
    fn priority(&self) -> u32 {
        0
    }
    async fn get(&self, context: BlockGetContext<'_>) -> Result<BlockContent> {
        let seqs: Vec<String> = recorded(context.state).iter().map(u64::to_string).collect();
        Ok(BlockContent::Text(seqs.join(" ")))
    }
    async fn put(&self, context: BlockPutContext<'_>) -> Result<()> {
        let given: Vec<u64> = context.messages.iter().map(|m| m.seq).collect();
        lock(&self.calls).push(given.clone());
        let mut seqs = recorded(context.state);
        seqs.extend(given);
        *context.state = json!({ "seqs": seqs });
        Ok(())
    }
}
