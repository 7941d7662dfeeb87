//! The scopes a filter selects in an endpoint's history or session store, a listing page at a
//! time: the loop every pass over a source (export, survey, verification) runs.

use memory_core::{PageRequest, Result, Scope, ScopeFilter};

use crate::Endpoint;

/// Scopes listed per page.
const LIST_PAGE: usize = 200;

/// Which store a [`Listing`] lists.
#[derive(Debug, Clone, Copy)]
enum Listed {
    /// The history store's threads.
    Threads,
    /// The session store's sessions (and block states).
    Sessions,
}

/// The scopes `filter` selects in one of an endpoint's stores, a page at a time, each page
/// keeping only the scopes the filter matches.
pub(crate) struct Listing<'a> {
    from: &'a Endpoint,
    filter: &'a ScopeFilter,
    listed: Listed,
    page: Option<PageRequest>,
}

impl<'a> Listing<'a> {
    /// The threads `filter` selects in `from`'s history store.
    pub(crate) fn threads(from: &'a Endpoint, filter: &'a ScopeFilter) -> Self {
        Self::new(from, filter, Listed::Threads)
    }

    /// The sessions (and block states) `filter` selects in `from`'s session store.
    pub(crate) fn sessions(from: &'a Endpoint, filter: &'a ScopeFilter) -> Self {
        Self::new(from, filter, Listed::Sessions)
    }

    fn new(from: &'a Endpoint, filter: &'a ScopeFilter, listed: Listed) -> Self {
        Self {
            from,
            filter,
            listed,
            page: Some(PageRequest::first(LIST_PAGE)),
        }
    }

    /// The next page's matching scopes; `None` after the last page.
    pub(crate) async fn next_page(&mut self) -> Result<Option<Vec<Scope>>> {
        let Some(page) = self.page.take() else {
            return Ok(None);
        };
        let got = match self.listed {
            Listed::Threads => self.from.history.list_threads(self.filter, page).await?,
            Listed::Sessions => self.from.sessions.list(self.filter, page).await?,
        };
        self.page = got.next_cursor.map(|c| PageRequest::after(LIST_PAGE, c));
        let filter = self.filter;
        Ok(Some(
            got.items
                .into_iter()
                .filter(|s| filter.matches(s))
                .collect(),
        ))
    }
}
