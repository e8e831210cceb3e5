//! The page cache's view of a file, from `cachestat(2)`: how durability tests see whether a
//! write left dirty pages behind.
//!
//! # Safety
//!
//! One raw system call, given pointers to live structs of the kernel's layout.

#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::AsRawFd;

/// What `cachestat(2)` says of a whole file, in pages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PageCache {
    /// Pages in the page cache.
    pub cache: u64,
    /// Dirty pages.
    pub dirty: u64,
    /// Pages under writeback.
    pub writeback: u64,
    /// Pages evicted.
    pub evicted: u64,
    /// Pages evicted recently.
    pub recently_evicted: u64,
}

impl PageCache {
    /// Pages not on the device yet: dirty or under writeback.
    pub fn unwritten(&self) -> u64 {
        self.dirty + self.writeback
    }
}

/// `cachestat(2)` of all of `file` (Linux 6.5; the same number on every architecture), or
/// `None` where the kernel lacks it or refuses.
pub fn page_cache(file: &File) -> Option<PageCache> {
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    const SYS_CACHESTAT: libc::c_long = 451;
    let range = Range { off: 0, len: 0 }; // 0: to the end of the file
    let mut stat = PageCache::default();
    // SAFETY: both pointers are to live structs of the kernel's layout (`struct
    // cachestat_range` and `struct cachestat`, five u64s); flags must be 0.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &range as *const Range,
            &mut stat as *mut PageCache,
            0,
        )
    };
    (r == 0).then_some(stat)
}
