//! Helpers for the tests of the API clients (feature `testing`): formatted `tracing` output,
//! captured to check that it never shows a secret.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

/// Formatted tracing output, collected in memory.
///
/// ```
/// let captured = memory_http::testing::CapturedLogs::default();
/// tracing::subscriber::with_default(captured.subscriber(), || {
///     tracing::info!(status = 200, "done");
/// });
/// assert!(captured.text().contains("status=200"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct CapturedLogs(Arc<Mutex<Vec<u8>>>);

impl CapturedLogs {
    /// A subscriber writing every event and span, at every level and without colours, here.
    pub fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync + 'static {
        let writer = self.clone();
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish()
    }

    /// Everything written so far (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An environment of `vars` for the `from_lookup` constructors the clients' `from_env` use:
/// a variable not among them is unset.
///
/// ```
/// let env = memory_http::testing::env_lookup(&[("API_KEY", "k-1")]);
/// assert_eq!(env("API_KEY").as_deref(), Some("k-1"));
/// assert_eq!(env("OTHER"), None);
/// ```
pub fn env_lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect();
    move |name| map.get(name).cloned()
}
