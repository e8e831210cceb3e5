//! The POSIX side of a fallback transfer: `pread` and `pwrite` until done (reissued on
//! `EINTR`), the `O_DIRECT` reads of what the page cache lacks, and `fdatasync`. Both the
//! caller's thread (`transfer.rs`) and the I/O threads (`pipeline.rs`) call these, so they live
//! below both, and the pipeline never reaches back into the module that calls it.

use crate::cache::{cached_pages, pages_in};
use hipfile_core::BackendError;
use rustix::io::Errno;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The file's `O_DIRECT` descriptor and its alignments, for the parts of large reads that are
/// not in the page cache.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Direct<'a> {
    pub(crate) fd: BorrowedFd<'a>,
    /// File offsets and sizes of direct reads are multiples of this (at least 1).
    pub(crate) offset_align: u64,
    /// Memory addresses of direct reads are multiples of this (at least 1).
    pub(crate) mem_align: u64,
}

/// What the cold-read path of one fallback has learned and done: whether the kernel says
/// what the page cache holds, and the bytes read with `O_DIRECT`.
#[derive(Debug)]
pub(crate) struct ColdReads {
    cachestat_works: AtomicBool,
    direct_bytes: AtomicU64,
    page: u64,
}

impl ColdReads {
    pub(crate) fn new() -> Self {
        ColdReads {
            cachestat_works: AtomicBool::new(true),
            direct_bytes: AtomicU64::new(0),
            page: rustix::param::page_size() as u64,
        }
    }

    /// Bytes read with `O_DIRECT` so far.
    pub(crate) fn direct_bytes(&self) -> u64 {
        self.direct_bytes.load(Ordering::Relaxed)
    }
}

/// A transfer that failed after moving `moved` bytes from its start (0 when it moved none).
#[derive(Debug)]
pub(crate) struct Failed {
    pub(crate) moved: u64,
    pub(crate) error: BackendError,
}

impl Failed {
    /// `error`, after `moved` bytes.
    pub(crate) fn after(moved: u64) -> impl FnOnce(BackendError) -> Failed {
        move |error| Failed { moved, error }
    }

    /// This failure of a part that starts `before` bytes into a larger transfer, as a failure
    /// of the larger one.
    pub(crate) fn within(self, before: u64) -> Failed {
        Failed {
            moved: before.saturating_add(self.moved),
            error: self.error,
        }
    }
}

/// `pread` until `buf` is full or the file ends; returns the bytes read. `EINTR` is not a
/// failure: the call is reissued.
pub(crate) fn pread_full(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    offset: u64,
) -> Result<usize, BackendError> {
    let mut filled = 0;
    while filled < buf.len() {
        match rustix::io::pread(fd, &mut buf[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(os("pread", e)),
        }
    }
    Ok(filled)
}

/// Fills `buf` from `offset..` like [`pread_full`], reading the range with `O_DIRECT` when
/// `direct` is given and the page cache holds less than half of it (the pipeline passes
/// `direct` only for short tasks, where direct reads were faster: docs/BENCHMARKS.md). A
/// range mostly in the cache is read buffered, at the cost of a plain `pread` and one
/// `cachestat`. A kernel without `cachestat` turns the direct path off for this fallback.
pub(crate) fn pread_chunk(
    fd: BorrowedFd<'_>,
    direct: Option<Direct<'_>>,
    cold: &ColdReads,
    buf: &mut [u8],
    offset: u64,
) -> Result<usize, BackendError> {
    let Some(direct) = direct.filter(|_| cold.cachestat_works.load(Ordering::Relaxed)) else {
        return pread_full(fd, buf, offset);
    };
    let len = buf.len() as u64;
    match cached_pages(fd, offset, len) {
        None => {
            cold.cachestat_works.store(false, Ordering::Relaxed);
            pread_full(fd, buf, offset)
        }
        Some(cached) if cached * 2 >= pages_in(offset, len, cold.page) => {
            pread_full(fd, buf, offset)
        }
        Some(_) => read_uncached(fd, direct, cold, buf, offset),
    }
}

/// `buf` from `offset..`, mostly not in the page cache: the head up to the first aligned
/// offset and the tail after the last one buffered, the middle with `O_DIRECT` (which writes
/// back any dirty cached page of the range first, so it reads what a buffered read would).
/// All of it buffered when there is no aligned middle or it would not land on an aligned
/// address.
fn read_uncached(
    fd: BorrowedFd<'_>,
    direct: Direct<'_>,
    cold: &ColdReads,
    buf: &mut [u8],
    offset: u64,
) -> Result<usize, BackendError> {
    let align = direct.offset_align.max(1);
    let end = offset + buf.len() as u64;
    let first = offset.div_ceil(align).saturating_mul(align);
    let last = end / align * align;
    // Below `buf.len()`, so a `usize`.
    let head = (first.min(end) - offset) as usize;
    let aligned_address =
        (buf.as_ptr() as usize + head).is_multiple_of(direct.mem_align.max(1) as usize);
    if first >= last || !aligned_address {
        return pread_full(fd, buf, offset);
    }
    let got = pread_full(fd, &mut buf[..head], offset)?;
    if got < head {
        return Ok(got);
    }
    let middle = head + (last - first) as usize;
    let got = pread_direct(fd, direct, cold, &mut buf[head..middle], first)?;
    if head + got < middle {
        return Ok(head + got); // end of file
    }
    Ok(middle + pread_full(fd, &mut buf[middle..], last)?)
}

/// `O_DIRECT` reads of `buf` (aligned in address, offset and size) until it is full or the
/// file ends. Should the kernel refuse the alignment after all (`EINVAL`), the rest is read
/// through the buffered descriptor `fd`.
fn pread_direct(
    fd: BorrowedFd<'_>,
    direct: Direct<'_>,
    cold: &ColdReads,
    buf: &mut [u8],
    offset: u64,
) -> Result<usize, BackendError> {
    let mut filled = 0;
    while filled < buf.len() {
        let at = offset + filled as u64;
        match rustix::io::pread(direct.fd, &mut buf[filled..], at) {
            Ok(0) => break,
            Ok(n) => {
                filled += n;
                cold.direct_bytes.fetch_add(n as u64, Ordering::Relaxed);
                if !(n as u64).is_multiple_of(direct.offset_align.max(1)) {
                    break; // the end of the file
                }
            }
            Err(Errno::INTR) => {}
            Err(Errno::INVAL) => return Ok(filled + pread_full(fd, &mut buf[filled..], at)?),
            Err(e) => return Err(os("pread (O_DIRECT)", e)),
        }
    }
    Ok(filled)
}

/// `pwrite` all of `buf`. `EINTR` is reissued; a `pwrite` that writes nothing would repeat
/// forever, so it is reported as `EIO`. A failure says how many bytes were written before it
/// (a `pwrite` that crosses a file-size limit or fills the file system writes what fits and
/// returns that count; the next one fails).
pub(crate) fn pwrite_full(fd: BorrowedFd<'_>, buf: &[u8], offset: u64) -> Result<(), Failed> {
    let mut written = 0;
    while written < buf.len() {
        match rustix::io::pwrite(fd, &buf[written..], offset + written as u64) {
            Ok(0) => return Err(Failed::after(written as u64)(os("pwrite", Errno::IO))),
            Ok(n) => written += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(Failed::after(written as u64)(os("pwrite", e))),
        }
    }
    Ok(())
}

/// `fdatasync`, reissued on `EINTR`. `EINVAL` means the file is of a kind that has nothing to
/// synchronise (a character device such as `/dev/null`): the write itself succeeded, so it
/// is not an error.
pub(crate) fn sync_data(fd: BorrowedFd<'_>) -> Result<(), BackendError> {
    loop {
        match rustix::fs::fdatasync(fd) {
            Ok(()) | Err(Errno::INVAL) => return Ok(()),
            Err(Errno::INTR) => {}
            Err(e) => return Err(os("fdatasync", e)),
        }
    }
}

fn os(call: &'static str, e: Errno) -> BackendError {
    BackendError::Os {
        call,
        errno: e.raw_os_error(),
    }
}
