//! How much of a file range is in the page cache, from `cachestat(2)` (Linux 6.5, asked
//! through `hipfile::probe`): how the loader tells a cold checkpoint from a hot one without
//! reading it.

use std::fs::File;
use std::os::fd::AsFd;

/// Bytes of `file`'s range `offset..offset + len` in the page cache, or `None` where the
/// kernel lacks `cachestat` or refuses.
pub fn cached_bytes(file: &File, offset: u64, len: u64) -> Option<u64> {
    if len == 0 {
        return Some(0);
    }
    let page = rustix::param::page_size() as u64;
    hipfile::probe::page_cache(file.as_fd(), offset, len)
        .map(|stat| stat.cache.saturating_mul(page).min(len))
}

/// Whether `cached` bytes of `total` make the range cold: less than
/// [`COLD_BELOW`](crate::COLD_BELOW) of it in the page cache. The one rule of the loader's
/// detection, `is_cold` and [`Inventory::is_cold`](crate::Inventory::is_cold).
pub fn mostly_uncached(cached: u64, total: u64) -> bool {
    (cached as f64) < crate::COLD_BELOW * total as f64
}
