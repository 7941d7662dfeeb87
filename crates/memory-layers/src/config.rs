//! [`WindowCacheConfig`]: how much a [`WindowCache`](crate::WindowCache) may hold, and whether
//! it caches at all.

/// The settings of a [`WindowCache`](crate::WindowCache).
///
/// ```
/// use memory_layers::WindowCacheConfig;
///
/// let config = WindowCacheConfig::new().with_max_bytes(8 * 1024 * 1024);
/// assert!(config.enabled());
/// assert_eq!(config.max_bytes(), 8 * 1024 * 1024);
/// assert!(!WindowCacheConfig::disabled().enabled());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowCacheConfig {
    max_bytes: u64,
    enabled: bool,
}

impl WindowCacheConfig {
    /// The byte budget of [`new`](Self::new): 64 MiB of cached messages.
    pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;

    /// Caching on, with a budget of [`DEFAULT_MAX_BYTES`](Self::DEFAULT_MAX_BYTES).
    pub const fn new() -> Self {
        Self {
            max_bytes: Self::DEFAULT_MAX_BYTES,
            enabled: true,
        }
    }

    /// Caching off: the cache is a pure pass-through to the store it wraps.
    pub const fn disabled() -> Self {
        Self::new().with_enabled(false)
    }

    /// Sets the byte budget: about how many bytes of messages (their text, data and metadata,
    /// plus a fixed overhead per message) the cache holds at most, across every thread and
    /// window. When a refresh would pass it, the least recently useful windows are dropped. A
    /// window larger than the budget is served but not kept. 0 keeps nothing.
    #[must_use]
    pub const fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// Turns caching on or off.
    #[must_use]
    pub const fn with_enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// The byte budget.
    pub const fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Whether the cache keeps windows (`false`: a pass-through).
    pub const fn enabled(&self) -> bool {
        self.enabled
    }
}

impl Default for WindowCacheConfig {
    fn default() -> Self {
        Self::new()
    }
}
