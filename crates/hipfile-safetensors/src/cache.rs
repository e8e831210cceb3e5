//! How much of a file range is in the page cache, from `cachestat(2)` (Linux 6.5): how the
//! loader tells a cold checkpoint from a hot one without reading it.
//!
//! # Safety
//!
//! One raw system call, given pointers to live structs of the kernel's layout.

#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::AsRawFd;

/// Bytes of `file`'s range `offset..offset + len` in the page cache, or `None` where the
/// kernel lacks `cachestat` or refuses.
pub fn cached_bytes(file: &File, offset: u64, len: u64) -> Option<u64> {
    if len == 0 {
        return Some(0);
    }
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Stat {
        cache: u64,
        dirty: u64,
        writeback: u64,
        evicted: u64,
        recently_evicted: u64,
    }
    const SYS_CACHESTAT: libc::c_long = 451;
    let range = Range { off: offset, len };
    let mut stat = Stat::default();
    // SAFETY: both pointers are to live structs of the kernel's layout (`struct
    // cachestat_range` and `struct cachestat`, five u64s); flags must be 0.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &range as *const Range,
            &mut stat as *mut Stat,
            0,
        )
    };
    let page = rustix::param::page_size() as u64;
    (r == 0).then(|| stat.cache.saturating_mul(page).min(len))
}
