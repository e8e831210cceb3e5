//! Requests that do not block their caller: [`FileHandle::read_at_async`] and
//! [`FileHandle::write_at_async`] queue a request on the driver's engine and return an
//! [`Io`], a handle that is a [`Future`] and can also be waited for.
//!
//! The handle borrows the view it reads into (or writes from) for its whole life, so safe
//! code cannot touch that memory while the request may use it; dropping the handle cancels
//! the request if it has not started and otherwise waits for it to end. The request also
//! holds the buffer's memory itself until it ends, so even a handle that is leaked
//! (`mem::forget`) never lets the memory be freed under a transfer: its buffer's bytes are
//! then unspecified until the request ends, but nothing is freed or reused by hipfile.

use crate::api::buffer::DeviceBuffer;
use crate::api::file::FileHandle;
use crate::api::view::{DeviceBuf, DeviceBufMut};
use crate::engine::IoState;
use crate::engine::null_stream::OrderPoint;
use crate::engine::{Engine, InFlightHandle, Slot};
use hipfile_core::IoOutcome;
use hipfile_core::{Error, Op, Request};
use std::future::Future;
use std::marker::PhantomData;
use std::ops::RangeBounds;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A request in flight. Await it, [`wait`](Io::wait) for it, or drop it (which cancels it if
/// it has not started, and otherwise waits for it). No async runtime is needed: the request
/// runs on the driver's own threads, and the future only waits for its result.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # // Runs only with a runtime named (as `cargo xtask ci` does); compiles in any case.
/// # if std::env::var_os("HIPFILE_HIP_LIBRARY").is_none() { return Ok(()); }
/// # let path = std::env::temp_dir().join(format!("hipfile-doc-async-{}", std::process::id()));
/// # std::fs::write(&path, vec![3u8; 4 << 20])?;
/// let driver = hipfile::Driver::open()?;
/// let fh = driver.register_file(&std::fs::File::open(&path)?)?;
/// let mut buf = driver.alloc(4 << 20)?;
/// // Four requests in flight at once, one per MiB of the buffer.
/// let pending: Vec<_> = buf
///     .slice_mut(..)?
///     .chunks(1 << 20)?
///     .into_iter()
///     .enumerate()
///     .map(|(i, view)| fh.read_at_async(view, i as u64 * (1 << 20)))
///     .collect();
/// // `wait` blocks; `.await` does the same inside any async runtime.
/// for io in pending {
///     assert_eq!(io.wait()?.bytes, 1 << 20);
/// }
/// # std::fs::remove_file(&path)?;
/// # Ok(())
/// # }
/// ```
#[must_use = "a request runs on the driver's threads; dropping its handle cancels or waits for it"]
#[derive(Debug)]
pub struct Io<'a> {
    slot: Arc<Slot>,
    /// Set once the result is taken: dropping then has nothing to wait for.
    done: bool,
    /// A future's place among the requests its callers keep in flight, which decides how
    /// the next ones are ordered after the null stream (`Engine::backlogged`).
    _in_flight: Option<InFlightHandle>,
    /// The view the request reads into or writes from, borrowed for the handle's life.
    _view: PhantomData<&'a mut ()>,
}

impl Io<'_> {
    pub(crate) fn new(slot: Arc<Slot>) -> Self {
        Io {
            slot,
            done: false,
            _in_flight: None,
            _view: PhantomData,
        }
    }

    /// As [`Io::new`], counted among the requests in flight until the handle drops.
    fn counted(slot: Arc<Slot>, in_flight: InFlightHandle) -> Self {
        let mut io = Io::new(slot);
        io._in_flight = Some(in_flight);
        io
    }

    /// Blocks until the request ends and returns what it did.
    ///
    /// # Errors
    ///
    /// As the synchronous call ([`FileHandle::read_at`], [`FileHandle::write_at`]);
    /// [`Error::Canceled`] when it was cancelled before it started.
    pub fn wait(mut self) -> Result<IoOutcome, Error> {
        self.done = true;
        self.slot.wait_result()
    }

    /// Cancels the request if it has not started: it then ends with [`Error::Canceled`]
    /// and moves nothing. A request already running is not interrupted. Whether it was
    /// cancelled.
    pub fn cancel(&self) -> bool {
        self.slot.cancel()
    }

    /// Whether the request has ended (its result is ready).
    pub fn is_finished(&self) -> bool {
        matches!(self.slot.phase(), IoState::Finished | IoState::Canceled)
    }

    /// Where the request is: waiting, being served, or ended.
    pub fn state(&self) -> IoState {
        self.slot.phase()
    }
}

impl Future for Io<'_> {
    type Output = Result<IoOutcome, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.slot.poll_result(cx.waker()) {
            Some(result) => {
                self.done = true;
                Poll::Ready(result)
            }
            None => Poll::Pending,
        }
    }
}

impl Drop for Io<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.slot.cancel();
            self.slot.wait_ended();
        }
    }
}

impl FileHandle {
    /// Queues a read into `dst` from file offset `offset` and returns at once: the same
    /// request as [`FileHandle::read_at`] (one request of up to `dst`'s length, short at the
    /// end of the file), served by the driver's I/O threads. `dst` is a view taken by value
    /// (`buf.slice_mut(..)?`) or a mutable reference (`&mut buf`); what it borrows stays
    /// borrowed until the returned handle is waited for, polled to completion or dropped.
    ///
    /// Errors that concern the request (validation, no backend, I/O) come from the handle,
    /// as they would from the synchronous call; a deregistered file fails at once (in the
    /// handle too). The file cannot be deregistered while the request is in flight.
    pub fn read_at_async<'a>(&self, dst: impl DeviceBufMut + 'a, offset: u64) -> Io<'a> {
        self.submit(Op::Read, dst.parts(), offset)
    }

    /// Queues a write of `src` at file offset `offset` and returns at once: the same
    /// request as [`FileHandle::write_at`] (durable when it ends, unless
    /// `HIPFILE_DURABLE_WRITES` is false). `src` is a view (`buf.slice(..)?`) or a
    /// reference (`&buf`); what it borrows stays borrowed until the handle ends.
    pub fn write_at_async<'a>(&self, src: impl DeviceBuf + 'a, offset: u64) -> Io<'a> {
        self.submit(Op::Write, src.parts(), offset)
    }

    fn submit(
        &self,
        op: Op,
        (buffer, range): (&DeviceBuffer, std::ops::Range<usize>),
        offset: u64,
    ) -> Io<'static> {
        let request = Request {
            op,
            size: range.len() as u64,
            file_offset: offset,
            buffer_offset: range.start as u64,
        };
        if let Err(e) = self.driver().in_this_process() {
            return Io::new(Engine::finished(op, Err(e)));
        }
        let memory = Arc::clone(buffer.memory());
        let device = memory.device_now();
        let entered = self.enter_owned();
        let point = Arc::new(OrderPoint::default());
        let order = Arc::clone(&point);
        let job = Box::new(move || {
            let entered = entered?;
            entered.serve(op, &memory, Ok(request), order.order())
        });
        let slot = Engine::slot(op, job, None);
        // Counted before it is queued, so that its own order sees it in flight.
        let in_flight = self.driver().engine().in_flight();
        self.driver()
            .queue_after_null_stream(device, Arc::clone(&slot), &point);
        Io::counted(slot, in_flight)
    }
}

/// A request that owns its buffer: [`FileHandle::read_owned`] or
/// [`FileHandle::write_owned`]. Waiting for it (or awaiting it) gives the result and the
/// buffer back, as tokio-uring's calls do, so a caller can keep many requests in flight
/// over buffers it reuses, without borrows. Dropping it cancels the request if it has not
/// started and otherwise waits for it, then frees the buffer.
#[must_use = "a request runs on the driver's threads; dropping its handle cancels or waits for it"]
#[derive(Debug)]
pub struct IoOwned {
    io: Io<'static>,
    buffer: Option<DeviceBuffer>,
}

impl IoOwned {
    /// Blocks until the request ends; returns its result and the buffer.
    pub fn wait(mut self) -> (Result<IoOutcome, Error>, DeviceBuffer) {
        let result = self.io.slot.wait_result();
        self.io.done = true;
        match self.buffer.take() {
            Some(buffer) => (result, buffer),
            // `wait` and the future both consume the handle, so the buffer is always here.
            None => unreachable!("an IoOwned holds its buffer until it ends"),
        }
    }

    /// Where the request is.
    pub fn state(&self) -> IoState {
        self.io.state()
    }

    /// As [`Io::cancel`].
    pub fn cancel(&self) -> bool {
        self.io.cancel()
    }
}

/// The future of an [`IoOwned`] (`.await` it): the result and the buffer. Polled again
/// after it completed, it stays pending.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled; the request itself runs anyway"]
pub struct IoOwnedFuture(IoOwned);

impl std::future::IntoFuture for IoOwned {
    type Output = (Result<IoOutcome, Error>, DeviceBuffer);
    type IntoFuture = IoOwnedFuture;

    fn into_future(self) -> IoOwnedFuture {
        IoOwnedFuture(self)
    }
}

impl Future for IoOwnedFuture {
    type Output = (Result<IoOutcome, Error>, DeviceBuffer);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let owned = &mut self.0;
        if owned.buffer.is_none() {
            return Poll::Pending;
        }
        match Pin::new(&mut owned.io).poll(cx) {
            Poll::Ready(result) => match owned.buffer.take() {
                Some(buffer) => Poll::Ready((result, buffer)),
                None => Poll::Pending,
            },
            Poll::Pending => Poll::Pending,
        }
    }
}

impl FileHandle {
    /// Queues a read from file offset `offset` into `range` of `buffer` (`..` for all of
    /// it), which the returned handle owns until the request ends and then gives back.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] when `range` is not inside the buffer (the buffer is given
    /// back with it).
    pub fn read_owned(
        &self,
        buffer: DeviceBuffer,
        range: impl RangeBounds<usize>,
        offset: u64,
    ) -> Result<IoOwned, (Error, DeviceBuffer)> {
        self.owned(Op::Read, buffer, range, offset)
    }

    /// Queues a write of `range` of `buffer` (`..` for all of it) at file offset `offset`;
    /// the handle owns the buffer until the request ends and then gives it back.
    ///
    /// # Errors
    ///
    /// As [`read_owned`](Self::read_owned).
    pub fn write_owned(
        &self,
        buffer: DeviceBuffer,
        range: impl RangeBounds<usize>,
        offset: u64,
    ) -> Result<IoOwned, (Error, DeviceBuffer)> {
        self.owned(Op::Write, buffer, range, offset)
    }

    fn owned(
        &self,
        op: Op,
        buffer: DeviceBuffer,
        range: impl RangeBounds<usize>,
        offset: u64,
    ) -> Result<IoOwned, (Error, DeviceBuffer)> {
        let range = match crate::api::view::bounds(range, buffer.len()) {
            Ok(r) => r,
            Err(e) => return Err((e, buffer)),
        };
        let io = self.submit(op, (&buffer, range), offset);
        Ok(IoOwned {
            io,
            buffer: Some(buffer),
        })
    }
}
