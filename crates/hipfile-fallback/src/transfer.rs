//! Moving a request through staging buffers: for a read, `pread` a chunk into a staging
//! buffer and copy it to the device; for a write, copy a chunk from the device and `pwrite`
//! it; after a write, one `fdatasync` for the whole call (SPEC.md §3).
//!
//! A request of at most the small-request threshold is one range that [`transfer_range`] moves
//! with one staging buffer on the caller's thread; a larger one goes to the
//! [`Pipeline`](crate::pipeline::Pipeline), which splits it into tasks for its workers. Either
//! way the `fdatasync` of a write is made here, once, after every byte is written.

use crate::pipeline::Pipeline;
use crate::staging::{DeviceRange, StagingGuard, StagingPool};
use hipfile_core::{BackendError, Op, ValidRequest};
use rustix::io::Errno;
use std::os::fd::BorrowedFd;

/// Serves `r` on `fd` (a buffered descriptor) and returns the bytes moved: short only for a
/// read that reaches the end of the file. Size 0 returns 0 and touches nothing (a write of
/// nothing has nothing to make durable).
///
/// A write that fails part-way fails the request although earlier chunks may already be in
/// the file: the caller asked for the whole range, and a partial write that looks like
/// success would be taken for durable data.
pub(crate) fn serve(
    pool: &StagingPool,
    pipeline: Option<&Pipeline>,
    small_io_threshold: u64,
    r: &ValidRequest,
    fd: BorrowedFd<'_>,
) -> Result<u64, BackendError> {
    if r.size == 0 {
        return Ok(0);
    }
    if r.size > small_io_threshold
        && let Some(p) = pipeline
        && let Some(moved) = p.run(r.op, fd, DeviceRange::of_request(r), r.file_offset)
    {
        let moved = moved?;
        if r.op == Op::Write {
            sync_data(fd)?;
        }
        return Ok(moved);
    }
    let mut buf = pool.acquire()?;
    let moved = transfer_range(
        r.op,
        fd,
        DeviceRange::of_request(r),
        r.file_offset,
        &mut buf,
    )?;
    // Give the buffer back before waiting on the disk: others may use it meanwhile.
    drop(buf);
    if r.op == Op::Write {
        sync_data(fd)?;
    }
    Ok(moved)
}

/// Moves `device` (read: into it; write: out of it) from or to `file_offset..` of `fd`, in
/// chunks of at most the buffer's capacity. Returns the bytes moved, short only when a read
/// reaches the end of the file. Does not sync.
pub(crate) fn transfer_range(
    op: Op,
    fd: BorrowedFd<'_>,
    device: DeviceRange,
    file_offset: u64,
    buf: &mut StagingGuard<'_>,
) -> Result<u64, BackendError> {
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
                let got = pread_full(fd, &mut buf.as_mut_slice()[..want], offset)?;
                let (filled, _) = chunk.split_at(got as u64);
                if got > 0 {
                    buf.copy_to_device(filled)?;
                }
                done += got as u64;
                if got < want {
                    break; // end of file
                }
            }
            Op::Write => {
                buf.copy_from_device(chunk)?;
                pwrite_full(fd, &buf.as_slice()[..want], offset)?;
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

/// `pwrite` all of `buf`. `EINTR` is reissued; a `pwrite` that writes nothing would repeat
/// forever, so it is reported as `EIO`.
pub(crate) fn pwrite_full(fd: BorrowedFd<'_>, buf: &[u8], offset: u64) -> Result<(), BackendError> {
    let mut written = 0;
    while written < buf.len() {
        match rustix::io::pwrite(fd, &buf[written..], offset + written as u64) {
            Ok(0) => return Err(os("pwrite", Errno::IO)),
            Ok(n) => written += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(os("pwrite", e)),
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
