//! [`LayeredVectors`]: a vector store that wraps another and changes only what it names, and
//! the forwarding impls (every layer, `Box` and `Arc`) that make wrapped stores stores (written
//! once for both scoped indexes, in `scoped_index`).

use super::{ScoredPoint, VectorCapabilities, VectorPoint, VectorQuery, VectorStore};
use crate::scoped_index::scoped_index_layer;

scoped_index_layer! {
    pub trait LayeredVectors over VectorStore, a "store",
    { VectorCapabilities, VectorPoint, VectorQuery, ScoredPoint }
}
