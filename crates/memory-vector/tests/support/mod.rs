//! Helpers shared by the test modules.

pub(crate) mod forget;
