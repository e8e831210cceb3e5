//! How much of a file range the page cache holds, asked with `cachestat(2)` (Linux 6.5),
//! which reads nothing and starts no readahead (a `preadv2(RWF_NOWAIT)` probe would start
//! readahead of the range it could not take, and the disk would then read it twice).
//!
//! # Safety
//!
//! The one `unsafe` block is the raw system call: it passes the kernel pointers to two live
//! structs laid out as the kernel's `cachestat_range` and `cachestat` (`#[repr(C)]`, all
//! `u64`), which outlive the call; the kernel writes only the second.

#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd};

/// `cachestat`'s number, the same on every architecture.
const SYS_CACHESTAT: libc::c_long = 451;

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

/// Pages of `offset..offset + len` of `fd` in the page cache; `None` when the kernel cannot
/// say (no `cachestat`, or a file it does not answer for).
pub(crate) fn cached_pages(fd: BorrowedFd<'_>, offset: u64, len: u64) -> Option<u64> {
    if len == 0 {
        return Some(0); // a length of 0 would mean "to the end of the file"
    }
    let range = CachestatRange { off: offset, len };
    let mut stat = Cachestat::default();
    // SAFETY: both pointers are to live structs of the kernel's layout for the duration of
    // the call; the flags must be 0.
    let r = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            fd.as_raw_fd(),
            &range as *const CachestatRange,
            &mut stat as *mut Cachestat,
            0u32,
        )
    };
    (r == 0).then_some(stat.nr_cache)
}

/// Pages of `page`-byte size that `offset..offset + len` touches.
pub(crate) fn pages_in(offset: u64, len: u64, page: u64) -> u64 {
    let page = page.max(1);
    (offset + len).div_ceil(page) - offset / page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_pages_a_range_touches() {
        assert_eq!(pages_in(0, 4096, 4096), 1);
        assert_eq!(pages_in(1, 4096, 4096), 2);
        assert_eq!(pages_in(4095, 2, 4096), 2);
        assert_eq!(pages_in(8192, 2 << 20, 4096), 512);
    }

    #[test]
    fn a_file_just_written_is_cached_and_a_pipe_is_not_answered_for_or_is_empty() {
        let path = std::env::temp_dir().join(format!("hipfile-cache-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; 3 * 4096]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        use std::os::fd::AsFd;
        match cached_pages(file.as_fd(), 0, 3 * 4096) {
            Some(n) => assert_eq!(n, 3),
            None => eprintln!("note: this kernel has no cachestat"),
        }
        assert_eq!(cached_pages(file.as_fd(), 0, 0), Some(0));
    }
}
