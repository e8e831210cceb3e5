//! Registered files and the read/write calls.

use crate::buffer::DeviceBuffer;
use crate::driver::Driver;
use hipfile_core::{Backend, BackendKind, Error, IoTarget, Op, Request, Submission, submit};
use hipfile_probe::{FileFacts, ProbedFile, probe_fd};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A file registered for GPU I/O. Cheap to clone; `Send + Sync`, so one handle serves many
/// threads at once. Dropping the last clone deregisters it.
#[derive(Clone)]
pub struct FileHandle {
    inner: Arc<FileInner>,
}

struct FileInner {
    driver: Driver,
    /// The caller's descriptor number, the key of the registry.
    key: i32,
    /// Our duplicate of the caller's descriptor.
    fd: OwnedFd,
    probed: ProbedFile,
    in_flight: AtomicUsize,
    deregistered: AtomicBool,
}

impl std::fmt::Debug for FileHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileHandle")
            .field("fd", &self.inner.key)
            .field("facts", &self.inner.probed.facts)
            .finish_non_exhaustive()
    }
}

/// What a served request reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoOutcome {
    /// Bytes moved (short at end of file, or for a size above `0x7ffff000`).
    pub bytes: u64,
    /// The backend that finally served it.
    pub backend: BackendKind,
    /// Whether the fastpath failed first and the fallback served it.
    pub retried: bool,
}

impl FileHandle {
    pub(crate) fn register(driver: Driver, fd: BorrowedFd<'_>) -> Result<FileHandle, Error> {
        use std::os::fd::AsRawFd;
        let key = fd.as_raw_fd();
        driver.claim_fd(&fd)?;
        let opened = (|| {
            let dup = fd
                .try_clone_to_owned()
                .map_err(|e| Error::DriverOpen(format!("dup of descriptor {key} failed: {e}")))?;
            let probed = probe_fd(dup.as_fd()).map_err(Error::Probe)?;
            Ok::<_, Error>((dup, probed))
        })();
        match opened {
            Ok((fd, probed)) => Ok(FileHandle {
                inner: Arc::new(FileInner {
                    driver,
                    key,
                    fd,
                    probed,
                    in_flight: AtomicUsize::new(0),
                    deregistered: AtomicBool::new(false),
                }),
            }),
            Err(e) => {
                driver.release_fd(key);
                Err(e)
            }
        }
    }

    /// The file's facts, as probed at registration.
    pub fn facts(&self) -> &FileFacts {
        &self.inner.probed.facts
    }

    /// The driver this file is registered with.
    pub fn driver(&self) -> &Driver {
        &self.inner.driver
    }

    /// Reads up to `size` bytes at `file_offset` into `buffer` at `buffer_offset`.
    ///
    /// # Errors
    ///
    /// SPEC.md §3–§4: invalid arguments, no backend (with every backend's reasons), the
    /// serving backend's failure (with its errno or runtime error), a deregistered handle.
    pub fn read(
        &self,
        buffer: &DeviceBuffer,
        size: u64,
        file_offset: i64,
        buffer_offset: i64,
    ) -> Result<IoOutcome, Error> {
        self.io(Op::Read, buffer, size, file_offset, buffer_offset)
    }

    /// Writes `size` bytes of `buffer` at `buffer_offset` to the file at `file_offset`.
    /// Durable when it returns (one `fdatasync` on the fallback; `O_DIRECT` on the fastpath).
    ///
    /// # Errors
    ///
    /// As [`FileHandle::read`].
    pub fn write(
        &self,
        buffer: &DeviceBuffer,
        size: u64,
        file_offset: i64,
        buffer_offset: i64,
    ) -> Result<IoOutcome, Error> {
        self.io(Op::Write, buffer, size, file_offset, buffer_offset)
    }

    /// Deregisters the file: later I/O through any clone fails with
    /// [`Error::HandleNotRegistered`].
    ///
    /// # Errors
    ///
    /// [`Error::InUse`] while requests are in flight (nothing changes then);
    /// [`Error::HandleNotRegistered`] when already deregistered.
    pub fn deregister(&self) -> Result<(), Error> {
        // Mark first, then look for requests: one that started before the mark is counted
        // and the deregistration backs out; one that starts after it sees the mark.
        if self.inner.deregistered.swap(true, Ordering::SeqCst) {
            return Err(Error::HandleNotRegistered);
        }
        let count = self.inner.in_flight.load(Ordering::SeqCst);
        if count > 0 {
            self.inner.deregistered.store(false, Ordering::SeqCst);
            return Err(Error::InUse {
                what: "file",
                count,
            });
        }
        self.inner.driver.release_fd(self.inner.key);
        Ok(())
    }

    fn io(
        &self,
        op: Op,
        buffer: &DeviceBuffer,
        size: u64,
        file_offset: i64,
        buffer_offset: i64,
    ) -> Result<IoOutcome, Error> {
        let inner = &self.inner;
        inner.in_flight.fetch_add(1, Ordering::SeqCst);
        let _guard = Decrement(&inner.in_flight);
        if inner.deregistered.load(Ordering::SeqCst) {
            return Err(Error::HandleNotRegistered);
        }
        let driver = &inner.driver.inner;
        let result = (|| {
            let (facts, _registered) = inner.driver.buffer_facts(buffer)?;
            let request = Request {
                op,
                size,
                file_offset,
                buffer_offset,
            }
            .validate(&facts)?;
            let caller = inner.fd.as_fd();
            let target = IoTarget {
                direct: inner.probed.direct_fd.as_ref().map(|d| d.as_fd(caller)),
                buffered: inner.probed.buffered_fd.as_fd(caller),
            };
            let submission = Submission {
                request: &request,
                file: &inner.probed.facts,
                buffer: &facts,
            };
            let backends: [&dyn Backend; 2] = [&driver.fastpath, &driver.fallback];
            submit(&backends, &submission, &target).map(|o| (o, facts.device))
        })();
        match result {
            Ok((o, device)) => {
                driver.stats.served(o.backend, o.bytes, o.retried);
                if driver.config.stats_level >= 1 {
                    driver.stats.served_device(device, op, o.bytes);
                }
                Ok(IoOutcome {
                    bytes: o.bytes,
                    backend: o.backend,
                    retried: o.retried,
                })
            }
            Err(e) => {
                driver.stats.failed();
                Err(e)
            }
        }
    }
}

impl Drop for FileInner {
    fn drop(&mut self) {
        // The last clone of the handle is gone: release the descriptor number, unless
        // `deregister` already did.
        if !self.deregistered.load(Ordering::SeqCst) {
            self.driver.release_fd(self.key);
        }
    }
}

struct Decrement<'a>(&'a AtomicUsize);

impl Drop for Decrement<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
