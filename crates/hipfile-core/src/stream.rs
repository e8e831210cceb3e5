//! Stream-ordered requests: the seam between the facade, which schedules, and a backend that
//! moves a request's bytes with copies queued on the caller's GPU stream.
//!
//! A stream-ordered request is validated and its backend selected at submission, as every
//! request is. When the selected backend has a stream-ordered data path
//! ([`Backend::on_stream`](crate::Backend::on_stream), the fallback's staging),
//! [`stream_path`](crate::stream_path) hands it out and the facade queues the request there
//! ([`StreamOrderedIo::queue_on_stream`](crate::backend::StreamOrderedIo)); otherwise the
//! facade's engine serves the request through [`submit`](crate::submit) when the stream
//! reaches it. What the data path needs from the facade comes through small traits:
//!
//! - [`IoQueue`]: the engine's file-I/O queue (jobs that do file I/O only, queued from host
//!   functions, with a listener on their end and a cancel hook);
//! - [`GateWords`]: the words in pinned memory that a stream waits on ([`Gate`]);
//! - [`StreamFile`]: the registered file (its descriptor, its registration count, and the
//!   counters of the statistics).
//!
//! # Safety
//!
//! A [`Gate`] is made only by the `unsafe` [`Gate::new`], whose caller vouches that the word
//! stays allocated while the gate exists and for as long as a stream may wait on it: a gate
//! is not `Clone`, so once it is given back ([`GateReturns::give_back`]) nothing can open it
//! again.

#![allow(unsafe_code)]

use crate::error::Error;
use crate::outcome::IoOutcome;
use crate::runtime::{StreamHandle, StreamOrdering};
use crate::types::{DevicePtr, Op};
use std::any::Any;
use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// Called with a stream-ordered request's result before its stream goes on past it (the C
/// ABI writes the bytes moved there).
pub type Report = Box<dyn FnOnce(&Result<IoOutcome, Error>) + Send>;

/// What a queued job runs: file I/O only (a stream may be waiting for it), returning its
/// result.
pub type JobFn = Box<dyn FnOnce() -> Result<IoOutcome, Error> + Send>;

/// Called once when a job ends, served or cancelled.
pub type OnEnd = Box<dyn FnOnce() + Send>;

/// What cancelling a waiting job does instead of ending it at once (for a job whose end comes
/// from elsewhere: a stream-ordered request ends when its stream has passed it); returns
/// whether any I/O was cancelled.
pub type OnCancel = Box<dyn Fn() -> bool + Send + Sync>;

/// A job made by an [`IoQueue`]: queued or not yet, running, or ended.
pub trait QueuedJob: Any + Send + Sync {
    /// Cancels the job if it has not started (or runs its [`OnCancel`]); whether it did.
    fn cancel(&self) -> bool;

    /// Waits until the job has ended (at once in a process forked from the one that made it).
    fn wait_ended(&self);
}

/// A shared handle to a queued job.
pub type JobHandle = Arc<dyn QueuedJob>;

/// The engine's file-I/O queue, as a stream-ordered data path uses it.
pub trait IoQueue: Send + Sync {
    /// A job not queued yet ([`IoQueue::push`] queues it) that runs `run` on a file-I/O
    /// thread; `on_end` is called once when it ends, however it ends; `on_cancel` replaces
    /// what cancelling does while it waits.
    fn job(
        &self,
        op: Op,
        run: JobFn,
        on_end: Option<OnEnd>,
        on_cancel: Option<OnCancel>,
    ) -> JobHandle;

    /// A job that has already ended with `result`.
    fn finished(&self, op: Op, result: Result<IoOutcome, Error>) -> JobHandle;

    /// Queues `job` (one this queue made). Callable from a host function on a GPU stream:
    /// it only queues, never calls the runtime or waits.
    fn push(&self, job: JobHandle);
}

/// A 32-bit word in pinned host memory that a GPU stream waits on until it is 1.
#[derive(Debug)]
pub struct Gate {
    host: NonNull<AtomicU32>,
    device: DevicePtr,
}

// SAFETY: the word is only ever accessed atomically (`Gate::new`'s contract).
unsafe impl Send for Gate {}
// SAFETY: as for `Send`.
unsafe impl Sync for Gate {}

impl Gate {
    /// The gate of the word at `host`, whose device address is `device`.
    ///
    /// # Safety
    ///
    /// `host` is 4-byte aligned, is accessed only atomically, and stays allocated while the
    /// gate exists and afterwards for as long as a stream may wait on it: memory of a
    /// [`GateWords`] that frees a word's page only once every gate taken from it has come
    /// back, and never one that was lost.
    pub unsafe fn new(host: NonNull<u32>, device: DevicePtr) -> Gate {
        Gate {
            host: host.cast(),
            device,
        }
    }

    /// The device address, for the stream's wait.
    pub fn device(&self) -> DevicePtr {
        self.device
    }

    /// Lets a stream waiting on the word go on.
    pub fn open(&self) {
        // SAFETY: the word is live and accessed atomically while the gate exists (`new`).
        unsafe { self.host.as_ref() }.store(1, Ordering::Release);
    }

    /// Closes the gate again (stores 0), for a word no stream waits on.
    pub fn close(&self) {
        // SAFETY: as in `open`.
        unsafe { self.host.as_ref() }.store(0, Ordering::Release);
    }
}

/// Where gates come from: closed ones, taken for one request each.
pub trait GateWords: Send + Sync {
    /// A closed gate (its word 0).
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`] when pinned memory for the words cannot be had.
    fn take(&self) -> Result<Gate, Error>;

    /// Where gates go back to, held by host functions queued on streams: giving one back
    /// never calls the runtime.
    fn returns(&self) -> Arc<dyn GateReturns>;
}

/// The return of gates whose streams have passed their waits.
pub trait GateReturns: Send + Sync {
    /// Returns a gate whose stream has passed its wait. A gate dropped instead is lost: its
    /// word stays allocated for good, since a stream may still wait on it.
    fn give_back(&self, gate: Gate);
}

/// A registered file as a stream-ordered data path sees it.
pub trait StreamFile: Send + Sync {
    /// Counts a request in for as long as the returned guard lives.
    ///
    /// # Errors
    ///
    /// [`Error::HandleNotRegistered`] once the file has been deregistered.
    fn enter(&self) -> Result<Box<dyn Send>, Error>;

    /// A buffered descriptor of the file, for `pread` and `pwrite`.
    fn buffered_fd(&self) -> BorrowedFd<'_>;

    /// Whether requests are counted (then, and only then, they are timed).
    fn counting(&self) -> bool;

    /// Counts a request served.
    fn served(&self, served: &Served);

    /// Counts a request that failed, on a buffer of `device`.
    fn failed(&self, op: Op, device: i32);
}

/// A request served, as the statistics count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Served {
    /// Read or write.
    pub op: Op,
    /// The device of its buffer (negative for host memory).
    pub device: i32,
    /// The backend that served it.
    pub backend: crate::reason::BackendKind,
    /// Bytes moved.
    pub bytes: u64,
    /// Bytes asked for (after validation).
    pub size: u64,
    /// Whether the fastpath failed first and the fallback served it.
    pub retried: bool,
    /// Whether offset, size and address met the file's direct-I/O alignment.
    pub aligned: bool,
    /// From submission to the end.
    pub took: std::time::Duration,
}

/// Where a stream-ordered request is queued, and what of the facade's it uses.
pub struct StreamTarget<'a> {
    /// The caller's stream.
    pub stream: StreamHandle,
    /// The runtime's streams, host functions and waits.
    pub ordering: StreamOrdering<'a>,
    /// The engine's file-I/O queue.
    pub queue: &'a Arc<dyn IoQueue>,
    /// The gates the stream waits on.
    pub gates: &'a dyn GateWords,
    /// The file.
    pub file: Arc<dyn StreamFile>,
}

impl std::fmt::Debug for StreamTarget<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamTarget")
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

/// What a stream-ordered request carries besides its [`Submission`].
pub struct StreamRequest {
    /// Called with the result before the stream goes on past the request.
    pub report: Option<Report>,
    /// Held until the request has ended (the buffer's memory and its in-flight count), then
    /// dropped on a file-I/O thread.
    pub keep: Box<dyn Send>,
}

impl std::fmt::Debug for StreamRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamRequest")
            .field("report", &self.report.is_some())
            .finish_non_exhaustive()
    }
}
