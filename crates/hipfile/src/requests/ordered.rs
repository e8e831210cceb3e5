//! Stream-ordered requests: a read or write queued on the caller's GPU stream, which runs when
//! the stream reaches it and holds the stream's later work back until it has ended.
//!
//! The request is validated and its backend selected at submission (`hipfile_core::stream`).
//! When the selected backend has a stream-ordered data path (the fallback's staging, whose
//! copies are queued on the stream), the request goes there, with this driver's file-I/O
//! queue, gates and file as the path's scheduling. The others (the fastpath's, and those
//! whose size and offsets are read when the stream reaches them) are served here by the
//! engine as any request: on the stream go a host function that hands the request to the
//! engine (it only queues: a host function may not call the runtime), a wait until a gate
//! word in pinned memory is 1, and a host function that returns the word once the stream has
//! passed the wait; the engine opens the gate when the request ends, however it ends
//! (served, failed or cancelled), so the stream never waits for ever on a request that
//! cannot run. docs/decisions/stream-ordered-requests.md says why.
//!
//! # Safety
//!
//! The calls are `unsafe` because a stream handle is the caller's word that the stream is
//! live; the wait is given a gate word that `gates.rs` keeps allocated until the stream has
//! passed it.

#![allow(unsafe_code)]

use crate::api::buffer::DeviceBuffer;
use crate::api::file::FileHandle;
use crate::api::view::{DeviceBuf, DeviceBufMut};
use crate::engine::null_stream::Order;
use crate::engine::{Engine, Slot};
use crate::requests::pending::Io;
use hipfile_core::runtime::{StreamHandle, StreamOrdering};
use hipfile_core::stream::{
    Gate, GateReturns, GateWords, IoQueue, Report, StreamFile, StreamRequest, StreamTarget,
};
use hipfile_core::{Error, Op, Request, Submission, check_access, stream_path};
use std::sync::{Arc, Mutex, PoisonError};

/// A gate shared by the request that opens it and the host function that gives it back:
/// whichever takes it out first decides, so a gate given back is never opened again.
struct SharedGate(Mutex<Option<Gate>>);

impl SharedGate {
    fn open(&self) {
        if let Some(gate) = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            gate.open();
        }
    }

    fn take(&self) -> Option<Gate> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl FileHandle {
    /// Queues a read into `dst` from file offset `offset` on `stream`: it runs when the
    /// stream reaches it, and the stream's later work (kernels, copies) waits until the
    /// bytes are in place. The same request as [`FileHandle::read_at`]; the returned
    /// [`Io`] gives its result (`wait` or `.await`) and keeps `dst` borrowed. Dropping the
    /// handle before the stream reaches the request cancels its file I/O and lets the
    /// stream go on; the drop returns once nothing queued for the request can still touch
    /// `dst` (for staged requests, once the stream has passed their copies).
    ///
    /// A request the fallback serves moves through staging buffers: the file I/O runs on
    /// the driver's threads, and the copies to the device are queued on `stream` now, so
    /// the stream never waits for work that needs the GPU. It holds up to half the staging
    /// pool until the stream has passed it, and this call waits when earlier stream-ordered
    /// requests hold the pool. A read that finds the file shorter than it was at submission
    /// reads zeros for the part that went missing; bytes past the end of the file as it was
    /// at submission keep their value. The handle ends once the stream has passed the
    /// request: the bytes are then in place for the stream's later work (synchronise the
    /// stream before reading them from the host). docs/decisions/stream-ordered-requests.md
    /// says how the fastpath's requests are ordered.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] when the runtime cannot order work on a stream this way (it
    /// lacks host functions or stream wait-value operations; ROCm 5.2 does); the runtime's
    /// error when the stream refuses the operations. Errors of the request itself come from
    /// the handle.
    ///
    /// # Safety
    ///
    /// `stream` is a live stream of the driver's runtime, and is not destroyed before the
    /// request has ended (the handle waited for, or the stream synchronised).
    pub unsafe fn read_on_stream<'a>(
        &self,
        stream: StreamHandle,
        dst: impl DeviceBufMut + 'a,
        offset: u64,
    ) -> Result<Io<'a>, Error> {
        let (buffer, range) = dst.parts();
        // SAFETY: the caller vouches for the stream.
        unsafe { self.on_stream(stream, Op::Read, buffer, range, offset) }
    }

    /// Queues a write of `src` at file offset `offset` on `stream`, as
    /// [`read_on_stream`](Self::read_on_stream) queues a read: the stream's earlier work
    /// (the kernel that produced `src`) is done before it runs, and its later work waits
    /// until it has ended.
    ///
    /// # Errors
    ///
    /// As [`read_on_stream`](Self::read_on_stream).
    ///
    /// # Safety
    ///
    /// As [`read_on_stream`](Self::read_on_stream).
    pub unsafe fn write_on_stream<'a>(
        &self,
        stream: StreamHandle,
        src: impl DeviceBuf + 'a,
        offset: u64,
    ) -> Result<Io<'a>, Error> {
        let (buffer, range) = src.parts();
        // SAFETY: the caller vouches for the stream.
        unsafe { self.on_stream(stream, Op::Write, buffer, range, offset) }
    }

    /// # Safety
    ///
    /// `stream` is a live stream of the runtime until the request has ended.
    unsafe fn on_stream(
        &self,
        stream: StreamHandle,
        op: Op,
        buffer: &DeviceBuffer,
        range: std::ops::Range<usize>,
        offset: u64,
    ) -> Result<Io<'static>, Error> {
        let request = Request {
            op,
            size: range.len() as u64,
            file_offset: offset,
            buffer_offset: range.start as u64,
        };
        // SAFETY: forwarded from the caller.
        unsafe { self.order_on_stream(stream, op, buffer, StreamParams::Fixed(request), None) }
    }

    /// A stream-ordered request as hipFile's C calls make it: parameters known now or read
    /// when the stream reaches the request, and `report` called with the result before the
    /// stream goes on past it. For the C ABI; not a stable interface.
    ///
    /// # Errors
    ///
    /// As [`read_on_stream`](Self::read_on_stream).
    ///
    /// # Safety
    ///
    /// As [`read_on_stream`](Self::read_on_stream); `buffer` stays unused by safe code until
    /// the returned handle has ended (the handle does not borrow it).
    #[doc(hidden)]
    pub unsafe fn order_on_stream(
        &self,
        stream: StreamHandle,
        op: Op,
        buffer: &DeviceBuffer,
        params: StreamParams,
        report: Option<Report>,
    ) -> Result<Io<'static>, Error> {
        let driver = self.driver();
        driver.in_this_process()?;
        let Some(ordering) = StreamOrdering::of(driver.gpu().as_ref()) else {
            return Err(Error::InvalidValue {
                op: Some(op),
                what: "this GPU runtime cannot order a request on a stream (it lacks host \
                       functions or stream wait-value operations); use read_at_async or \
                       write_at_async and synchronise the stream first"
                    .into(),
            });
        };
        let mut report = report;
        if let StreamParams::Fixed(request) = &params {
            // SAFETY: the caller vouches for the stream.
            match unsafe { self.on_stream_path(ordering, stream, buffer, *request, &mut report) } {
                Ok(Some(slot)) => return Ok(Io::new(slot)),
                Ok(None) => {}
                Err(e) => {
                    let result = Err(e);
                    if let Some(report) = report {
                        report(&result);
                    }
                    return Ok(Io::new(Engine::finished(op, result)));
                }
            }
        }
        // SAFETY: forwarded from the caller.
        unsafe { self.serve_on_stream(ordering, stream, op, buffer, params, report) }
    }

    /// Validates a stream-ordered request and selects its backend now, as a synchronous
    /// call would, and queues it on the selected backend's stream-ordered data path when it
    /// has one (`hipfile_core::stream_path`): `None` when it has none, or the memory is host
    /// memory (read and written in place), or no backend accepts the request; the engine
    /// then serves it (and fails it with the error a synchronous call gives).
    ///
    /// # Errors
    ///
    /// The request's validation errors, as [`FileHandle::read_at`] gives them.
    ///
    /// # Safety
    ///
    /// `stream` is a live stream of the runtime until the request has ended.
    unsafe fn on_stream_path(
        &self,
        ordering: StreamOrdering<'_>,
        stream: StreamHandle,
        buffer: &DeviceBuffer,
        request: Request,
        report: &mut Option<Report>,
    ) -> Result<Option<Arc<Slot>>, Error> {
        let driver = self.driver();
        check_access(self.facts(), request.op)?;
        let memory = buffer.memory();
        let (facts, in_flight) = memory.request_facts()?;
        let valid = request.validate_checked(&facts)?;
        let submission = Submission {
            request: &valid,
            file: self.facts(),
            buffer: facts.facts(),
        };
        let backends = driver.backends();
        let Some(path) = stream_path(&backends, &submission) else {
            return Ok(None);
        };
        let queue: Arc<dyn IoQueue> = Arc::new(driver.engine().queue_handle());
        let target = StreamTarget {
            stream,
            ordering,
            queue: &queue,
            gates: driver.gates(),
            file: Arc::new(self.clone()) as Arc<dyn StreamFile>,
        };
        let request = StreamRequest {
            report: report.take(),
            // Until the request ends: the memory it copies into or from, the registered
            // buffer's in-flight count, and the driver.
            keep: Box::new((Arc::clone(memory), in_flight, driver.clone())),
        };
        // SAFETY: the caller vouches for the stream; `keep` holds the validated request's
        // memory until the request has ended.
        let job = unsafe { path.queue_on_stream(&submission, target, request) };
        Slot::of(job).map(Some).ok_or_else(|| {
            Error::Internal("a stream-ordered request was queued on another queue".into())
        })
    }

    /// A stream-ordered request that the engine serves as any other (the fastpath's, or one
    /// whose parameters are read when the stream reaches it): the stream waits on a gate
    /// until the request has ended.
    ///
    /// # Safety
    ///
    /// `stream` is a live stream of the runtime until the request has ended.
    unsafe fn serve_on_stream(
        &self,
        ordering: StreamOrdering<'_>,
        stream: StreamHandle,
        op: Op,
        buffer: &DeviceBuffer,
        params: StreamParams,
        report: Option<Report>,
    ) -> Result<Io<'static>, Error> {
        let driver = self.driver();
        let memory = Arc::clone(buffer.memory());
        let entered = self.enter_owned();
        let gates = driver.gates();
        let returns = gates.returns();
        let gate = gates.take()?;
        let device = gate.device();
        let gate = Arc::new(SharedGate(Mutex::new(Some(gate))));
        let job = Box::new(move || {
            let request = match params {
                StreamParams::Fixed(r) => Ok(r),
                StreamParams::Deferred(read) => {
                    let (size, file_offset, buffer_offset) = read();
                    Request::from_c(op, size, file_offset, buffer_offset)
                }
            };
            // Ordered by its own stream, which reached it.
            let result = entered.and_then(|fh| fh.serve(op, &memory, request, Order::Taken));
            if let Some(report) = report {
                report(&result);
            }
            result
        });
        let opener = Arc::clone(&gate);
        let slot = Engine::slot(op, job, Some(Box::new(move || opener.open())));
        let queue = driver.engine().queue_handle();
        let reached = Arc::clone(&slot);
        let give_back = |returns: &dyn GateReturns| {
            if let Some(g) = gate.take() {
                returns.give_back(g);
            }
        };
        if let Err(e) = ordering
            .host_functions
            .launch_host_func(stream, Box::new(move || queue.push(reached)))
        {
            slot.cancel();
            give_back(returns.as_ref());
            return Err(Error::Runtime(e));
        }
        // SAFETY: the word is in pinned memory of this runtime that stays allocated while it
        // is out (`gates.rs`), which lasts until the host function queued below has run,
        // after the stream passed the wait; the host touches it only atomically.
        if let Err(e) = unsafe { ordering.mem_ops.stream_wait_value32(stream, device, 1) } {
            // The host function may still queue the request: cancelled, it is skipped. No
            // wait refers to the word, so it can go back at once.
            slot.cancel();
            give_back(returns.as_ref());
            return Err(Error::Runtime(e));
        }
        let returned = Arc::clone(&gate);
        let free = Arc::clone(&returns);
        if ordering
            .host_functions
            .launch_host_func(
                stream,
                Box::new(move || {
                    if let Some(g) = returned.take() {
                        free.give_back(g);
                    }
                }),
            )
            .is_err()
        {
            // The request is ordered; only the word is lost: the request still opens it, and
            // it is never given back, so its page is never freed.
        }
        Ok(Io::new(slot))
    }
}

/// The size, file offset and buffer offset of a stream-ordered request made through
/// [`FileHandle::order_on_stream`]. Not a stable interface.
#[doc(hidden)]
pub enum StreamParams {
    /// Known at submission.
    Fixed(Request),
    /// Read when the stream reaches the request: size, file offset, buffer offset (hipFile's
    /// signed offsets, checked then).
    Deferred(Box<dyn FnOnce() -> (u64, i64, i64) + Send>),
}

impl std::fmt::Debug for StreamParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamParams::Fixed(r) => f.debug_tuple("Fixed").field(r).finish(),
            StreamParams::Deferred(_) => f.write_str("Deferred"),
        }
    }
}

/// A GPU stream that hipfile created and owns, for stream-ordered requests from safe code:
/// [`FileHandle::read_on`] and [`FileHandle::write_on`]. Non-blocking (it does not wait for
/// the legacy default stream), on the device current on the thread that created it;
/// synchronised and destroyed when dropped. Work of other libraries can be ordered on it
/// through [`handle`](Stream::handle).
#[derive(Debug)]
pub struct Stream {
    driver: crate::api::driver::Driver,
    handle: StreamHandle,
}

impl crate::api::driver::Driver {
    /// A new stream on the calling thread's current device.
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`] when the runtime cannot create one.
    pub fn create_stream(&self) -> Result<Stream, Error> {
        self.in_this_process()?;
        let gpu = self.gpu();
        let streams = gpu.require_streams().map_err(Error::Runtime)?;
        gpu.thread_init().map_err(Error::Runtime)?;
        let handle = streams.stream_create().map_err(Error::Runtime)?;
        Ok(Stream {
            driver: self.clone(),
            handle,
        })
    }
}

impl Stream {
    /// The runtime's handle, for work queued on the stream by other code (a kernel launch,
    /// a copy). It stays valid while the stream lives.
    pub fn handle(&self) -> StreamHandle {
        self.handle
    }

    /// Waits until all work queued on the stream is done.
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`] with the runtime's error.
    pub fn synchronize(&self) -> Result<(), Error> {
        self.driver
            .gpu()
            .require_streams()
            .and_then(|s| s.stream_synchronize(self.handle))
            .map_err(Error::Runtime)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // Requests ordered on the stream borrow it, so none is left; other work may be.
        // A stream was made, so the runtime has streams.
        let Some(streams) = self.driver.gpu().streams() else {
            return;
        };
        let _ = streams.stream_synchronize(self.handle);
        if let Err(e) = streams.stream_destroy(self.handle) {
            hipfile_core::diag::line(&format!("hipfile: warning: destroying a stream: {e}"));
        }
    }
}

impl FileHandle {
    /// [`read_on_stream`](Self::read_on_stream) on a stream hipfile owns: safe, since the
    /// stream outlives the returned handle.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] for a stream of another driver; otherwise as
    /// [`read_on_stream`](Self::read_on_stream).
    pub fn read_on<'a>(
        &self,
        stream: &'a Stream,
        dst: impl DeviceBufMut + 'a,
        offset: u64,
    ) -> Result<Io<'a>, Error> {
        self.check_stream(stream, Op::Read)?;
        // SAFETY: the stream is live while it is borrowed, which the handle does.
        unsafe { self.read_on_stream(stream.handle, dst, offset) }
    }

    /// [`write_on_stream`](Self::write_on_stream) on a stream hipfile owns.
    ///
    /// # Errors
    ///
    /// As [`read_on`](Self::read_on).
    pub fn write_on<'a>(
        &self,
        stream: &'a Stream,
        src: impl DeviceBuf + 'a,
        offset: u64,
    ) -> Result<Io<'a>, Error> {
        self.check_stream(stream, Op::Write)?;
        // SAFETY: as in `read_on`.
        unsafe { self.write_on_stream(stream.handle, src, offset) }
    }

    fn check_stream(&self, stream: &Stream, op: Op) -> Result<(), Error> {
        if stream.driver.same_as(self.driver()) {
            Ok(())
        } else {
            Err(Error::InvalidValue {
                op: Some(op),
                what: "the stream belongs to another driver; create it with this file's \
                       driver"
                    .into(),
            })
        }
    }
}
