//! The code every memory block with a `name` and a `priority` field writes alike: its
//! `with_name` and `with_priority` builders and its [`MemoryBlock::name`] and
//! [`MemoryBlock::priority`], as macros, so the blocks of every crate of the workspace share
//! them.
//!
//! [`MemoryBlock::name`]: super::MemoryBlock::name
//! [`MemoryBlock::priority`]: super::MemoryBlock::priority

/// Writes the builders `with_name` (checked by
/// [`block_name`](crate::memory::block_name)) and `with_priority` of a memory block type whose
/// fields `name: String` and `priority: u32` hold them; call it inside the type's `impl`.
///
/// Not a public API: it serves the blocks of agent-memory's own crates and may change in any
/// release.
#[doc(hidden)]
#[macro_export]
macro_rules! __memory_block_builders {
    () => {
        /// Renames the block.
        ///
        /// # Errors
        /// `ErrorKind::InvalidInput` for an invalid block name (see
        /// `memory_core::memory::validate_block_name`).
        pub fn with_name(
            mut self,
            name: impl ::core::convert::Into<::std::string::String>,
        ) -> $crate::Result<Self> {
            self.name = $crate::memory::block_name(name)?;
            ::core::result::Result::Ok(self)
        }

        /// Sets the truncation priority (0: never truncated; otherwise higher numbers are
        /// truncated first).
        pub fn with_priority(mut self, priority: u32) -> Self {
            self.priority = priority;
            self
        }
    };
}

/// Writes [`MemoryBlock::name`](crate::memory::MemoryBlock::name) and
/// [`MemoryBlock::priority`](crate::memory::MemoryBlock::priority) of a block type whose fields
/// `name: String` and `priority: u32` hold them; call it inside the type's `impl MemoryBlock`.
///
/// Not a public API: it serves the blocks of agent-memory's own crates and may change in any
/// release.
#[doc(hidden)]
#[macro_export]
macro_rules! __memory_block_name_and_priority {
    () => {
        fn name(&self) -> &str {
            &self.name
        }

        fn priority(&self) -> u32 {
            self.priority
        }
    };
}
