//! [`LayeredTextIndex`]: a text index that wraps another and changes only what it names, and
//! the forwarding impls (every layer, `Box` and `Arc`) that make wrapped indexes indexes (written
//! once for both scoped indexes, in `scoped_index`).

use super::{ScoredDocument, TextCapabilities, TextDocument, TextIndex, TextQuery};
use crate::scoped_index::scoped_index_layer;

scoped_index_layer! {
    pub trait LayeredTextIndex over TextIndex, a "text index",
    { TextCapabilities, TextDocument, TextQuery, ScoredDocument }
}
