//! Serving a request: `hipAmdFileRead`/`hipAmdFileWrite` on the `O_DIRECT` descriptor, after
//! `hipInit` once per thread (docs/ABI.md: older runtimes crash when a file-I/O call is a thread's
//! first HIP call).
//!
//! # Safety
//!
//! The only `unsafe` here calls `amd_file_read`/`amd_file_write` of the runtime's AMD
//! file-I/O capability (`GpuRuntime::amd_file_io`), whose contract is that
//! `address..address + size` is device memory of the runtime, valid for the call. The
//! request comes from `hipfile-core`'s validation, which guarantees that this range lies
//! inside the request's buffer (`buffer_offset + size <= buffer length`, no overflow), and the
//! buffer was checked against its allocation (`hipMemGetAddressRange`) when it was registered
//! or, unregistered, for this call; `Fastpath::io` passes on only requests validated against
//! device memory (`ValidRequest::memory`). Backends trust that validation (ARCHITECTURE.md).

#![allow(unsafe_code)]

use hipfile_core::runtime::FileIoError;
use hipfile_core::{BackendError, GpuRuntime, IoTarget, Op, ValidRequest};
use rustix::io::Errno;
use std::cell::RefCell;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Gives every [`FileIo`] its own identity for the per-thread initialisation record.
/// A counter, not the runtime's address: an address can be reused by a later runtime, which
/// would then skip its `hipInit`.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The [`FileIo`]s whose `thread_init` succeeded on this thread.
    static INITIALISED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// The fastpath's access to a runtime with AMD file I/O. Clones share the runtime and the
/// per-thread initialisation record.
#[derive(Clone)]
pub(crate) struct FileIo {
    runtime: Arc<dyn GpuRuntime>,
    id: u64,
    /// Whether a write ends with an `fdatasync` of the direct descriptor.
    durable_writes: bool,
}

impl FileIo {
    pub(crate) fn new(runtime: Arc<dyn GpuRuntime>, durable_writes: bool) -> Self {
        FileIo {
            runtime,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            durable_writes,
        }
    }

    /// Calls `thread_init` the first time this thread uses this runtime. A failure is not
    /// recorded, so the next request on the thread tries again.
    fn ensure_thread_init(&self) -> Result<(), BackendError> {
        if INITIALISED.with_borrow(|done| done.contains(&self.id)) {
            return Ok(());
        }
        self.runtime.thread_init().map_err(BackendError::Runtime)?;
        INITIALISED.with_borrow_mut(|done| done.push(self.id));
        Ok(())
    }

    /// Serves `r` with one runtime call and returns the count it reports.
    pub(crate) fn transfer(
        &self,
        r: &ValidRequest,
        target: &IoTarget<'_>,
    ) -> Result<u64, BackendError> {
        if r.size() == 0 {
            return Ok(0);
        }
        let Some(direct) = target.direct else {
            // Scoring refuses such files (`no_o_direct_fd`), so only a caller that skipped
            // scoring gets here.
            return Err(BackendError::Unsupported(format!(
                "the fastpath cannot {}: the file has no O_DIRECT descriptor",
                r.op()
            )));
        };
        self.ensure_thread_init()?;
        // Scoring refuses a runtime without AMD file I/O (`runtime_lacks_amd_file_io`), so
        // only a caller that skipped scoring gets here without it.
        let Some(file_io) = self.runtime.amd_file_io() else {
            return Err(BackendError::from_file_io(
                call_name(r.op()),
                FileIoError::Unavailable,
            ));
        };
        let fd = direct.as_raw_fd();
        // Validation keeps `file_offset + size` within `i64::MAX`.
        let offset = i64::try_from(r.file_offset()).map_err(|_| BackendError::Os {
            call: call_name(r.op()),
            errno: libc::EOVERFLOW,
        })?;
        let moved = loop {
            let done = match r.op() {
                // SAFETY: `r.address..r.address + r.size` lies inside the request's device
                // buffer, as core's validation guarantees (see the module's `# Safety`); the
                // buffer outlives this call, which is synchronous.
                Op::Read => unsafe { file_io.amd_file_read(fd, r.address(), r.size(), offset) },
                // SAFETY: as for the read: the range lies inside the request's device buffer
                // and the call completes before it returns.
                Op::Write => unsafe { file_io.amd_file_write(fd, r.address(), r.size(), offset) },
            };
            // An interrupted call is not a failure: it is issued again (BEHAVIOUR.md §1.9),
            // as `pread`/`pwrite` are on the fallback.
            match done {
                Err(FileIoError::Errno(libc::EINTR)) => continue,
                other => break other,
            }
        }
        .map_err(|e| BackendError::from_file_io(call_name(r.op()), e))?;
        // `O_DIRECT` bypasses the page cache, but neither flushes the device's write cache
        // nor makes an allocating write's metadata (the file's size, its extents) durable:
        // without this a new file written through the fastpath was empty after a crash.
        if r.op() == Op::Write && moved > 0 && self.durable_writes {
            sync_data(direct)?;
        }
        // A count above the request is the runtime breaking its contract; core reports it
        // as an internal error, so pass it on rather than hide it.
        Ok(moved)
    }
}

/// `fdatasync`, reissued on `EINTR`; `EINVAL` (a file with nothing to synchronise) is not an
/// error.
fn sync_data(fd: BorrowedFd<'_>) -> Result<(), BackendError> {
    loop {
        match rustix::fs::fdatasync(fd) {
            Ok(()) | Err(Errno::INVAL) => return Ok(()),
            Err(Errno::INTR) => {}
            Err(e) => {
                return Err(BackendError::Os {
                    call: "fdatasync",
                    errno: e.raw_os_error(),
                });
            }
        }
    }
}

fn call_name(op: Op) -> &'static str {
    match op {
        Op::Read => "hipAmdFileRead",
        Op::Write => "hipAmdFileWrite",
    }
}
