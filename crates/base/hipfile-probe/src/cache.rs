//! The page cache's view of a file range, from `cachestat(2)` (Linux 6.5): the one place
//! every crate asks it (the fallback's cold reads, the loader's hot/cold choice, the tests'
//! durability checks). It reads nothing and starts no readahead, as a `preadv2(RWF_NOWAIT)`
//! probe would.
//!
//! # Safety
//!
//! One raw system call (rustix has no `cachestat`): it passes the kernel pointers to two
//! live structs laid out as the kernel's `cachestat_range` and `cachestat` (`#[repr(C)]`,
//! all `u64`), which outlive the call; the kernel writes only the second.

#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd};

/// `cachestat`'s number, the same on every architecture.
const SYS_CACHESTAT: libc::c_long = 451;

/// What `cachestat(2)` says of a file range, in pages.
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

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

/// `cachestat(2)` of `offset..offset + len` of `fd`, where a `len` of 0 means to the end of
/// the file (the kernel's rule); `None` where the kernel lacks the call (before 6.5) or
/// refuses it for this file.
pub fn page_cache(fd: BorrowedFd<'_>, offset: u64, len: u64) -> Option<PageCache> {
    let range = CachestatRange { off: offset, len };
    let mut stat = PageCache::default();
    // SAFETY: both pointers are to live structs of the kernel's layout for the duration of
    // the call; the flags must be 0.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd.as_raw_fd(),
            &range as *const CachestatRange,
            &mut stat as *mut PageCache,
            0u32,
        )
    };
    (r == 0).then_some(stat)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    #[test]
    fn a_file_just_written_is_in_the_cache_and_a_range_counts_its_pages_only() {
        let dir = std::env::temp_dir().join(format!("hipfile-probe-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&vec![7u8; 64 << 10]).unwrap();
        let Some(whole) = page_cache(f.as_fd(), 0, 0) else {
            // Kernels before 6.5 lack cachestat: nothing to check.
            std::fs::remove_dir_all(&dir).unwrap();
            return;
        };
        let page = rustix::param::page_size() as u64;
        assert_eq!(whole.cache, (64 << 10) / page, "{whole:?}");
        let part = page_cache(f.as_fd(), 0, page).unwrap();
        assert_eq!(part.cache, 1, "{part:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
