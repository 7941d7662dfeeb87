//! Time-to-live values, checked once for every store.

use std::time::Duration;

use crate::error::{Error, Result};

/// The longest time to live a store accepts (100 years).
pub const MAX_TTL: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Checks a time to live and returns it in whole milliseconds.
///
/// # Errors
/// [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput) for a TTL under one millisecond
/// or over [`MAX_TTL`] (so no backend ever overflows computing an expiry).
///
/// ```
/// use std::time::Duration;
/// assert_eq!(memory_core::ttl_millis(Duration::from_secs(2))?, 2_000);
/// assert!(memory_core::ttl_millis(Duration::ZERO).is_err());
/// assert!(memory_core::ttl_millis(Duration::MAX).is_err());
/// # Ok::<(), memory_core::Error>(())
/// ```
pub fn ttl_millis(ttl: Duration) -> Result<u64> {
    if ttl < Duration::from_millis(1) || ttl > MAX_TTL {
        return Err(Error::invalid_input(format!(
            "a time to live must be between 1 ms and {} days, not {ttl:?}",
            MAX_TTL.as_secs() / 86_400
        )));
    }
    u64::try_from(ttl.as_millis()).map_err(|_| Error::invalid_input("time to live too long"))
}
