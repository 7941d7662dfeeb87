//! [`StaticMemoryBlock`]: fixed content, always shown.

use async_trait::async_trait;

use crate::error::Result;
use crate::memory::{
    BlockContent, BlockGetContext, BlockPutContext, MemoryBlock, block_name, escape_memory_text,
};
use crate::message::Part;

/// Fixed content (text or parts such as an image), always inserted: priority 0 unless set
/// otherwise. Flushed messages are ignored. The text is shown escaped
/// ([`escape_memory_text`]): it cannot close the memory or forge a message.
#[derive(Debug, Clone)]
pub struct StaticMemoryBlock {
    name: String,
    content: BlockContent,
    priority: u32,
}

impl StaticMemoryBlock {
    /// A block named `name` holding `text`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for an invalid name.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Result<Self> {
        Self::with_content(name, BlockContent::Text(text.into()))
    }

    /// A block named `name` holding `parts`.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_parts(name: impl Into<String>, parts: Vec<Part>) -> Result<Self> {
        Self::with_content(name, BlockContent::Parts(parts))
    }

    fn with_content(name: impl Into<String>, content: BlockContent) -> Result<Self> {
        Ok(Self {
            name: block_name(name)?,
            content,
            priority: 0,
        })
    }

    /// Sets the truncation priority.
    pub fn with_priority(mut self, priority: u32) -> Self {
        self.priority = priority;
        self
    }
}

#[async_trait]
impl MemoryBlock for StaticMemoryBlock {
    crate::__memory_block_name_and_priority!();

    async fn get(&self, _context: BlockGetContext<'_>) -> Result<BlockContent> {
        Ok(match &self.content {
            BlockContent::Text(text) => BlockContent::Text(escape_memory_text(text).into_owned()),
            BlockContent::Parts(parts) => BlockContent::Parts(
                parts
                    .iter()
                    .map(|part| match part {
                        Part::Text { text } => Part::text(escape_memory_text(text)),
                        other => other.clone(),
                    })
                    .collect(),
            ),
        })
    }

    async fn put(&self, _context: BlockPutContext<'_>) -> Result<()> {
        Ok(())
    }
}
