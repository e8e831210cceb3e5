//! The page cache of the file being served: how much of a range it holds (`cachestat(2)`,
//! asked through `hipfile-probe`, which reads nothing and starts no readahead, where a
//! `preadv2(RWF_NOWAIT)` probe would start readahead of the range it could not take, and the
//! disk would then read it twice); and starting the writeback of a range just written, with
//! `sync_file_range(2)`.
//!
//! # Safety
//!
//! `sync_file_range` takes no pointers, only a borrowed descriptor.

#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd};

/// Pages of `offset..offset + len` of `fd` in the page cache; `None` when the kernel cannot
/// say (no `cachestat`, or a file it does not answer for).
pub(crate) fn cached_pages(fd: BorrowedFd<'_>, offset: u64, len: u64) -> Option<u64> {
    if len == 0 {
        return Some(0); // a length of 0 would mean "to the end of the file"
    }
    hipfile_probe::page_cache(fd, offset, len).map(|stat| stat.cache)
}

/// Starts writing `offset..offset + len` of `fd` back to the disk and returns without waiting
/// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`), so that the disk works while the rest of a
/// write is still being copied and `pwrite`n, and the `fdatasync` that ends the call has only
/// the tail left to wait for. Advice only: errors are ignored (a file of a kind that has no
/// writeback, say), and a failed writeback is still reported by that `fdatasync`, which
/// alone makes the data durable.
pub(crate) fn start_writeback(fd: BorrowedFd<'_>, offset: u64, len: u64) {
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return;
    };
    if len == 0 {
        return; // a length of 0 would mean "to the end of the file"
    }
    // SAFETY: no pointers; the descriptor is borrowed, so open for the call.
    let _ =
        unsafe { libc::sync_file_range(fd.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE) };
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

    #[test]
    fn writeback_starts_at_once_on_the_range_asked_for() {
        use std::os::fd::AsFd;
        use std::os::unix::fs::FileExt;
        let dir = std::env::temp_dir();
        let path = dir.join(format!("hipfile-writeback-{}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        const PAGES: u64 = 64;
        let len = PAGES * 4096;
        file.write_all_at(&vec![9u8; len as usize], 0).unwrap();
        let dirty = |off, len| hipfile_probe::page_cache(file.as_fd(), off, len).map(|s| s.dirty);
        let shows_dirty_pages = match dirty(0, len) {
            Some(n) if n == PAGES => Ok(()),
            // tmpfs keeps no dirty pages to write back; an old kernel has no cachestat.
            other => Err(hipfile_testfs::Skip(format!(
                "cachestat shows {other:?} dirty pages in {} after a write of {PAGES}",
                dir.display()
            ))),
        };
        hipfile_testfs::require!(shows_dirty_pages);
        // The second half, so that an offset lost on the way would leave it dirty: the
        // kernel's own writeback waits about 30 s before it takes dirty pages.
        start_writeback(file.as_fd(), len / 2, len / 2);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while dirty(len / 2, len / 2) != Some(0) {
            assert!(
                std::time::Instant::now() < deadline,
                "the range asked for is still dirty after 20 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}
