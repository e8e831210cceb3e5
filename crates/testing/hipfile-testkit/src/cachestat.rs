//! The page cache's view of a file, from `cachestat(2)` (asked through `hipfile-probe`): how
//! durability tests see whether a write left dirty pages behind.

use std::fs::File;
use std::os::fd::AsFd;

pub use hipfile_probe::PageCache;

/// `cachestat(2)` of all of `file` (Linux 6.5), or `None` where the kernel lacks it or
/// refuses.
pub fn page_cache(file: &File) -> Option<PageCache> {
    hipfile_probe::page_cache(file.as_fd(), 0, 0)
}
