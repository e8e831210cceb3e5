//! Moving a request through staging buffers: for a read, `pread` a chunk into a staging
//! buffer and copy it to the device; for a write, copy a chunk from the device and `pwrite`
//! it; after a write, one `fdatasync` for the whole call (docs/BEHAVIOUR.md §3.3).
//!
//! A request of at most the small-request threshold is one range that [`transfer_range`] moves
//! with one staging buffer on the caller's thread; a larger one goes to the
//! [`Pipeline`](crate::pipeline::Pipeline), which splits it into tasks for its workers. Either
//! way the `fdatasync` of a write is made here, once, after every byte is written.

use crate::cache::{cached_pages, pages_in};
use crate::pipeline::Pipeline;
use crate::staging::{DeviceRange, StagingGuard, StagingPool};
use hipfile_core::{BackendError, Op, ValidRequest};
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

/// Serves `r` on `fd` (a buffered descriptor) for device memory of device `gpu` and returns
/// the bytes moved: short for a read that reaches the end of the file, and for a write that
/// fails after writing some bytes. Size 0 returns 0 and touches nothing (a write of nothing
/// has nothing to make durable). The caller's thread copies synchronously, which the runtime
/// routes by the pointers, so its current device is left alone; the I/O threads copy on
/// streams of `gpu`, and read what the page cache lacks through `direct` when it is given
/// (see `Pipeline::run`).
///
/// A write follows POSIX's rule for `write(2)`, as the fastpath's `hipAmdFileWrite` does: one
/// that writes some bytes from the start of the request and then fails returns the count of
/// those bytes (the contiguous prefix from the request's start; with tasks in parallel,
/// bytes past it may be in the file too, as with any short write the bytes after the count
/// are unspecified), and the `fdatasync` still runs for them, its failure being the error;
/// one that writes nothing from the start returns the error. Under a file-size limit or on a
/// full file system the caller learns how much is in the file, and the next write, at the
/// count, reports the error. A read that fails is an error whatever it had read.
pub(crate) fn serve(
    pool: &StagingPool,
    pipeline: Option<&Pipeline>,
    policy: Policy,
    r: &ValidRequest,
    gpu: i32,
    fd: BorrowedFd<'_>,
    direct: Option<Direct<'_>>,
) -> Result<u64, BackendError> {
    if r.size() == 0 {
        return Ok(0);
    }
    if r.size() > policy.small_io_threshold
        && let Some(p) = pipeline
        && let Some(result) = p.run(
            r.op(),
            gpu,
            fd,
            direct,
            DeviceRange::of_request(r),
            r.file_offset(),
        )
    {
        return finish(r.op(), policy, fd, result);
    }
    let mut buf = pool.acquire()?;
    let result = transfer_range(
        r.op(),
        fd,
        DeviceRange::of_request(r),
        r.file_offset(),
        &mut buf,
    );
    // Give the buffer back before waiting on the disk: others may use it meanwhile.
    drop(buf);
    finish(r.op(), policy, fd, result)
}

/// How a fallback serves requests, from its configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Policy {
    /// Requests of at most this many bytes run on the caller's thread.
    pub(crate) small_io_threshold: u64,
    /// Whether a write ends with an `fdatasync`.
    pub(crate) durable_writes: bool,
}

/// The outcome of a request that moved what `result` says: a write that wrote some bytes
/// before failing counts them, and any write that wrote something ends with its `fdatasync`
/// (unless the policy leaves flushing to the caller).
fn finish(
    op: Op,
    policy: Policy,
    fd: BorrowedFd<'_>,
    result: Result<u64, Failed>,
) -> Result<u64, BackendError> {
    let moved = match result {
        Ok(n) => n,
        Err(Failed { moved, .. }) if op == Op::Write && moved > 0 => moved,
        Err(f) => return Err(f.error),
    };
    if op == Op::Write && policy.durable_writes {
        sync_data(fd)?;
    }
    Ok(moved)
}

/// Moves `device` (read: into it; write: out of it) from or to `file_offset..` of `fd`, in
/// chunks of at most the buffer's capacity. Returns the bytes moved, short only when a read
/// reaches the end of the file; a failure says how many bytes were moved before it. Does not
/// sync.
pub(crate) fn transfer_range(
    op: Op,
    fd: BorrowedFd<'_>,
    device: DeviceRange,
    file_offset: u64,
    buf: &mut StagingGuard<'_>,
) -> Result<u64, Failed> {
    let chunk_size = buf.capacity() as u64;
    let mut rest = device;
    let mut done = 0u64;
    while rest.len() > 0 {
        let (chunk, after) = rest.split_at(chunk_size);
        // A chunk is at most the buffer's capacity, a `usize`.
        let want = chunk.len() as usize;
        let offset = file_offset + done;
        match op {
            Op::Read => {
                let got = pread_full(fd, &mut buf.as_mut_slice()[..want], offset)
                    .map_err(Failed::after(done))?;
                let (filled, _) = chunk.split_at(got as u64);
                if got > 0 {
                    buf.copy_to_device(filled).map_err(Failed::after(done))?;
                }
                done += got as u64;
                if got < want {
                    break; // end of file
                }
            }
            Op::Write => {
                buf.copy_from_device(chunk).map_err(Failed::after(done))?;
                pwrite_full(fd, &buf.as_slice()[..want], offset).map_err(|f| f.within(done))?;
                done += chunk.len();
            }
        }
        rest = after;
    }
    Ok(done)
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
fn sync_data(fd: BorrowedFd<'_>) -> Result<(), BackendError> {
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
