//! Registered files and the read/write calls.

use crate::api::buffer::{DeviceBuffer, Memory};
use crate::api::driver::Driver;
use crate::api::view::{DeviceBuf, DeviceBufMut};
use crate::engine::null_stream::Order;
use crate::stats::{Registration as Counted, Served};
use hipfile_core::IoOutcome;
use hipfile_core::stream::StreamFile;
use hipfile_core::{Error, IoTarget, Op, Request, Submission, check_access, submit};
use hipfile_probe::{FileFacts, ProbedFile, duplicate, probe_fd};
use std::ops::Range;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The driver's side of file registration.
impl Driver {
    /// Registers an open file (any [`AsFd`]: `File`, `OwnedFd`, …). The descriptor is
    /// duplicated, so the handle stays valid whatever the caller does with its own; the
    /// file is probed once, now, and the `O_DIRECT` descriptor opened (docs/BEHAVIOUR.md §1.3).
    ///
    /// # Errors
    ///
    /// [`Error::HandleAlreadyRegistered`] when this descriptor is registered already;
    /// [`Error::Probe`] when the file cannot be probed or reopened.
    pub fn register_file(&self, file: &impl AsFd) -> Result<FileHandle, Error> {
        let result = FileHandle::register(self.clone(), file.as_fd());
        self.count_registration(Counted::FileRegister, result.is_ok());
        result
    }
}

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
    registration: Registration,
}

/// A handle's registration and its requests in flight, in one atomic word so that each
/// change is one step: the top bit says "deregistered", the rest counts requests. A request
/// counts itself in only while the bit is clear, and deregistration sets the bit only while
/// the count is 0, so a refused deregistration changes nothing that a request could see.
struct Registration(AtomicUsize);

const DEREGISTERED: usize = 1 << (usize::BITS - 1);

impl Registration {
    fn new() -> Registration {
        Registration(AtomicUsize::new(0))
    }

    /// Counts a request in, unless the handle is deregistered.
    fn enter(&self) -> Result<InFlight<'_>, Error> {
        let mut now = self.0.load(Ordering::Acquire);
        loop {
            if now & DEREGISTERED != 0 {
                return Err(Error::HandleNotRegistered);
            }
            match self
                .0
                .compare_exchange_weak(now, now + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(InFlight(&self.0)),
                Err(seen) => now = seen,
            }
        }
    }

    /// Marks the handle deregistered if no request is in flight.
    fn deregister(&self) -> Result<(), Error> {
        match self
            .0
            .compare_exchange(0, DEREGISTERED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Ok(()),
            Err(seen) if seen & DEREGISTERED != 0 => Err(Error::HandleNotRegistered),
            Err(count) => Err(Error::InUse {
                what: "file",
                count,
            }),
        }
    }

    fn is_deregistered(&self) -> bool {
        self.0.load(Ordering::Acquire) & DEREGISTERED != 0
    }
}

/// One request counted in; counted out when dropped.
struct InFlight<'a>(&'a AtomicUsize);

/// One request counted in on a handle it keeps alive: an asynchronous request's, which
/// outlives its caller's borrow of the handle.
pub(crate) struct Entered(FileHandle);

impl Entered {
    /// Serves the request it counts, in `order`.
    pub(crate) fn serve(
        &self,
        op: Op,
        buffer: &Memory,
        request: Result<Request, Error>,
        order: Order,
    ) -> Result<IoOutcome, Error> {
        self.0.serve(op, buffer, request, order)
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        self.0.inner.registration.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl std::fmt::Debug for FileHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileHandle")
            .field("fd", &self.inner.key)
            .field("facts", &self.inner.probed.facts)
            .finish_non_exhaustive()
    }
}

impl FileHandle {
    pub(crate) fn register(driver: Driver, fd: BorrowedFd<'_>) -> Result<FileHandle, Error> {
        use std::os::fd::AsRawFd;
        let key = fd.as_raw_fd();
        driver.in_this_process()?;
        driver.claim_fd(&fd)?;
        let opened = (|| {
            let dup = duplicate(fd).map_err(Error::Probe)?;
            let probed = probe_fd(dup.as_fd()).map_err(Error::Probe)?;
            if let Some(why) = probed.facts.unusable() {
                return Err(Error::UnusableFile(why));
            }
            Ok::<_, Error>((dup, probed))
        })();
        match opened {
            Ok((fd, probed)) => Ok(FileHandle {
                inner: Arc::new(FileInner {
                    driver,
                    key,
                    fd,
                    probed,
                    registration: Registration::new(),
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

    /// Counts a request in for as long as the returned guard lives.
    pub(crate) fn enter_owned(&self) -> Result<Entered, Error> {
        let counted = self.inner.registration.enter()?;
        // The count now belongs to the guard, which takes it back out when dropped.
        std::mem::forget(counted);
        Ok(Entered(self.clone()))
    }

    /// Reads up to `size` bytes at `file_offset` into `buffer` at `buffer_offset`: hipFile's
    /// call, with its signed offsets (docs/BEHAVIOUR.md §3.1). [`FileHandle::read_at`] is the
    /// same request with `u64` offsets and a view for the buffer range.
    ///
    /// # Errors
    ///
    /// docs/BEHAVIOUR.md §3–§4: invalid arguments, no backend (with every backend's reasons), the
    /// serving backend's failure (with its errno or runtime error), a deregistered handle.
    pub fn read(
        &self,
        buffer: &mut DeviceBuffer,
        size: u64,
        file_offset: i64,
        buffer_offset: i64,
    ) -> Result<IoOutcome, Error> {
        let request = Request::from_c(Op::Read, size, file_offset, buffer_offset);
        self.io(Op::Read, buffer.memory(), request)
    }

    /// Writes `size` bytes of `buffer` at `buffer_offset` to the file at `file_offset`.
    /// Durable when it returns, whichever backend serves it (one `fdatasync` of the
    /// descriptor written), unless `HIPFILE_DURABLE_WRITES` is false. A write that moves
    /// some bytes and then fails returns the bytes moved; one that moves none, the error.
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
        let request = Request::from_c(Op::Write, size, file_offset, buffer_offset);
        self.io(Op::Write, buffer.memory(), request)
    }

    /// Reads into `dst` from file offset `offset`: up to `dst`'s length in one request (at
    /// most [`MAX_IO_SIZE`](hipfile_core::MAX_IO_SIZE) bytes), fewer at the end of the file.
    /// The outcome says how many bytes came; [`FileHandle::read_exact_at`] fills the whole
    /// view or fails.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # // Runs only with a runtime named (as `cargo xtask ci` does); compiles in any case.
    /// # if std::env::var_os("HIPFILE_HIP_LIBRARY").is_none() { return Ok(()); }
    /// # let path = std::env::temp_dir().join(format!("hipfile-doc-read-at-{}", std::process::id()));
    /// # std::fs::write(&path, vec![7u8; 10_000])?;
    /// let driver = hipfile::Driver::open()?;
    /// let file = std::fs::File::open(&path)?;
    /// let fh = driver.register_file(&file)?;
    /// let mut buf = driver.alloc(1 << 20)?;
    /// // Asks for 1 MiB - 4 KiB; the file has 10 000 bytes, so that is what comes.
    /// let got = fh.read_at(&mut buf.slice_mut(4096..)?, 0)?;
    /// println!("{} bytes from the {}", got.bytes, got.backend);
    /// assert_eq!(got.bytes, 10_000);
    /// # std::fs::remove_file(&path)?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// As [`FileHandle::read`]; [`Error::InvalidValue`] when the end of the range is beyond
    /// `i64::MAX`.
    pub fn read_at(&self, dst: &mut impl DeviceBufMut, offset: u64) -> Result<IoOutcome, Error> {
        self.io_view(Op::Read, dst.parts(), offset)
    }

    /// Writes `src` at file offset `offset` in one request (at most
    /// [`MAX_IO_SIZE`](hipfile_core::MAX_IO_SIZE) bytes); the outcome says how many bytes
    /// went, and [`FileHandle::write_all_at`] writes the whole view or fails. Durable on
    /// return as [`FileHandle::write`] says.
    ///
    /// # Errors
    ///
    /// As [`FileHandle::write`]; [`Error::InvalidValue`] when the end of the range is beyond
    /// `i64::MAX`.
    pub fn write_at(&self, src: &impl DeviceBuf, offset: u64) -> Result<IoOutcome, Error> {
        self.io_view(Op::Write, src.parts(), offset)
    }

    /// Fills all of `dst` from file offset `offset`, with as many requests as it takes
    /// (short counts and the size clamp included): when it returns `Ok`, every byte of the
    /// view came (as `std::io::Read::read_exact`, no count to look at).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # // Runs only with a runtime named (as `cargo xtask ci` does); compiles in any case.
    /// # if std::env::var_os("HIPFILE_HIP_LIBRARY").is_none() { return Ok(()); }
    /// # let path = std::env::temp_dir().join(format!("hipfile-doc-exact-{}", std::process::id()));
    /// # std::fs::write(&path, vec![1u8; 4 << 20])?;
    /// let driver = hipfile::Driver::open()?;
    /// let file = std::fs::File::open(&path)?;
    /// let fh = driver.register_file(&file)?;
    /// let mut tensor = driver.alloc(4 << 20)?;
    /// fh.read_exact_at(&mut tensor, 0)?; // every byte, or an error
    /// # std::fs::remove_file(&path)?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Incomplete`] when the file ends before the view is full (what was read
    /// stays in the view); otherwise as [`FileHandle::read_at`].
    pub fn read_exact_at(&self, dst: &mut impl DeviceBufMut, offset: u64) -> Result<(), Error> {
        self.io_all(Op::Read, dst.parts(), offset)
    }

    /// Writes all of `src` at file offset `offset`, with as many requests as it takes.
    /// When it returns `Ok`, every byte went.
    ///
    /// # Errors
    ///
    /// [`Error::Incomplete`] when a write moves nothing; the error of the request that
    /// failed (the bytes before it are in the file); otherwise as [`FileHandle::write_at`].
    pub fn write_all_at(&self, src: &impl DeviceBuf, offset: u64) -> Result<(), Error> {
        self.io_all(Op::Write, src.parts(), offset)
    }

    /// One request for the view `(buffer, range)`.
    fn io_view(
        &self,
        op: Op,
        (buffer, range): (&DeviceBuffer, Range<usize>),
        offset: u64,
    ) -> Result<IoOutcome, Error> {
        // A view lies inside its buffer, whose length is a `usize`.
        let request = Request {
            op,
            size: range.len() as u64,
            file_offset: offset,
            buffer_offset: range.start as u64,
        };
        self.io(op, buffer.memory(), Ok(request))
    }

    /// Requests until the whole view `(buffer, range)` is moved.
    fn io_all(
        &self,
        op: Op,
        (buffer, range): (&DeviceBuffer, Range<usize>),
        offset: u64,
    ) -> Result<(), Error> {
        let wanted = range.len() as u64;
        let mut done = 0u64;
        while done < wanted {
            let at = range.start + done as usize;
            let out = self.io_view(op, (buffer, at..range.end), offset.saturating_add(done))?;
            if out.bytes == 0 {
                return Err(Error::Incomplete {
                    op,
                    offset,
                    wanted,
                    done,
                });
            }
            done += out.bytes;
        }
        Ok(())
    }

    /// Deregisters the file: later I/O through any clone fails with
    /// [`Error::HandleNotRegistered`].
    ///
    /// # Errors
    ///
    /// [`Error::InUse`] while requests are in flight (nothing changes then);
    /// [`Error::HandleNotRegistered`] when already deregistered.
    pub fn deregister(&self) -> Result<(), Error> {
        let result = self.inner.registration.deregister();
        if result.is_ok() {
            self.inner.driver.release_fd(self.inner.key);
        }
        self.inner
            .driver
            .count_registration(Counted::FileDeregister, result.is_ok());
        result
    }

    /// Serves `request`, a synchronous call's, after the work queued on the null stream
    /// before it; one that could not be made (a negative offset of hipFile's call) fails
    /// where validation would, after the handle and buffer checks.
    fn io(
        &self,
        op: Op,
        buffer: &Memory,
        request: Result<Request, Error>,
    ) -> Result<IoOutcome, Error> {
        self.inner.driver.in_this_process()?;
        let _in_flight = self.inner.registration.enter()?;
        self.serve(op, buffer, request, Order::AfterNullStream)
    }

    /// Serves `request` for a caller that has counted it in (`Registration::enter`): after
    /// validation, it waits for the null stream of the buffer's device when `order` says so
    /// (`null_stream.rs`), then has `submit` select and run its backend.
    pub(crate) fn serve(
        &self,
        op: Op,
        buffer: &Memory,
        request: Result<Request, Error>,
        order: Order,
    ) -> Result<IoOutcome, Error> {
        let inner = &self.inner;
        let driver = &inner.driver;
        // Timed only when counted: a clock read is cheap, but level 0 costs nothing.
        let started = driver.counting().then(std::time::Instant::now);
        let mut device = None;
        let mut size = 0;
        let result = (|| {
            check_access(&inner.probed.facts, op)?;
            let (facts, _registered) = buffer.request_facts()?;
            device = Some(facts.facts().device);
            let request = request?.validate_checked(&facts)?;
            size = request.size();
            let caller = inner.fd.as_fd();
            let target = IoTarget {
                direct: inner.probed.direct_fd.as_ref().map(|d| d.as_fd(caller)),
                buffered: inner.probed.buffered_fd.as_fd(caller),
            };
            let submission = Submission {
                request: &request,
                file: &inner.probed.facts,
                buffer: facts.facts(),
            };
            let aligned = request.meets_direct_alignment(&inner.probed.facts);
            if order == Order::AfterNullStream {
                driver.wait_null_stream(facts.facts().device)?;
            }
            submit(&driver.backends(), &submission, &target)
                .map(|o| (o, facts.facts().device, aligned))
        })();
        match result {
            Ok((o, device, aligned)) => {
                if let Some(t) = started {
                    driver.count_served(&Served {
                        op,
                        device,
                        backend: o.backend,
                        bytes: o.bytes,
                        size,
                        retried: o.retried,
                        aligned,
                        took: t.elapsed(),
                    });
                }
                Ok(o)
            }
            Err(e) => {
                driver.count_failed(op, device);
                Err(e)
            }
        }
    }
}

impl Drop for FileInner {
    fn drop(&mut self) {
        // The last clone of the handle is gone: release the descriptor number, unless
        // `deregister` already did.
        if !self.registration.is_deregistered() {
            self.driver.release_fd(self.key);
        }
    }
}

/// The file as a backend's stream-ordered data path sees it (`hipfile_core::stream`).
impl StreamFile for FileHandle {
    fn enter(&self) -> Result<Box<dyn Send>, Error> {
        self.enter_owned().map(|e| Box::new(e) as Box<dyn Send>)
    }

    fn buffered_fd(&self) -> BorrowedFd<'_> {
        let inner = &self.inner;
        inner.probed.buffered_fd.as_fd(inner.fd.as_fd())
    }

    fn counting(&self) -> bool {
        self.inner.driver.counting()
    }

    fn served(&self, served: &Served) {
        self.inner.driver.count_served(served);
    }

    fn failed(&self, op: Op, device: i32) {
        self.inner.driver.count_failed(op, Some(device));
    }
}
