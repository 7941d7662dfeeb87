//! Fault-injection harnesses: tooling for tests that kill, race or cut off the parties of a
//! store (writer processes, servers, the network) and then check what survived.

pub mod writers;
