//! Helpers shared by the test modules.

pub(crate) mod forget;
pub(crate) mod overflow;
pub(crate) mod ties;
