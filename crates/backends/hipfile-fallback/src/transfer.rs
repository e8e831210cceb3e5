//! Moving a request through staging buffers (or, for host memory, straight between the file
//! and the buffer: `host.rs`): for a read, `pread` a chunk into a staging
//! buffer and copy it to the device; for a write, copy a chunk from the device and `pwrite`
//! it; after a write, one `fdatasync` for the whole call (docs/BEHAVIOUR.md §3.3).
//!
//! A request of at most the small-request threshold is one range that [`transfer_range`] moves
//! with one staging buffer on the caller's thread; a larger one goes to the
//! [`Pipeline`](crate::pipeline::Pipeline), which splits it into tasks for its workers. Either
//! way the `fdatasync` of a write is made here, once, after every byte is written.

use crate::host;
use crate::pipeline::Pipeline;
use crate::posix::{Direct, Failed, pread_full, pwrite_full, sync_data};
use crate::staging::{DeviceRange, StagingGuard, StagingPool};
use hipfile_core::{BackendError, Op, ValidRequest};
use std::os::fd::BorrowedFd;

/// Serves `r` on `fd` (a buffered descriptor) for device memory of device `gpu` and returns
/// the bytes moved: short for a read that reaches the end of the file, and for a write that
/// fails after writing some bytes. Size 0 returns 0 and touches nothing (a write of nothing
/// has nothing to make durable). The caller's thread copies synchronously (naming the device,
/// so that the runtime need not ask for it), which leaves its current device alone; the I/O
/// threads copy on streams of `gpu`, and read what the page cache lacks through `direct` when
/// it is given (see `Pipeline::run`).
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
        gpu,
        fd,
        DeviceRange::of_request(r),
        r.file_offset(),
        &mut buf,
    );
    // Give the buffer back before waiting on the disk: others may use it meanwhile.
    drop(buf);
    finish(r.op(), policy, fd, result)
}

/// Serves `r`, a checked request on host memory, on `fd` (a buffered descriptor) in place:
/// `pread` into the buffer, `pwrite` from it ([`host::transfer`]), then [`finish`], as for
/// device memory. Size 0 returns 0 and touches nothing.
pub(crate) fn serve_host(
    policy: Policy,
    r: &ValidRequest,
    fd: BorrowedFd<'_>,
) -> Result<u64, BackendError> {
    if r.size() == 0 {
        return Ok(0);
    }
    finish(r.op(), policy, fd, host::transfer(r, fd))
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
    gpu: i32,
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
                    buf.copy_to_device(filled, gpu)
                        .map_err(Failed::after(done))?;
                }
                done += got as u64;
                if got < want {
                    break; // end of file
                }
            }
            Op::Write => {
                buf.copy_from_device(chunk, gpu)
                    .map_err(Failed::after(done))?;
                pwrite_full(fd, &buf.as_slice()[..want], offset).map_err(|f| f.within(done))?;
                done += chunk.len();
            }
        }
        rest = after;
    }
    Ok(done)
}
