//! The [`Backend`] trait: how a backend scores a request and serves it.

pub use crate::error::BackendError;
use crate::reason::{BackendKind, Verdict};
use crate::request::{BufferFacts, ValidRequest};
use crate::stream::{JobHandle, StreamRequest, StreamTarget};
use hipfile_probe::FileFacts;
use std::os::fd::BorrowedFd;

/// Everything a backend may look at to score a request: the validated request, the file's
/// facts (probed once at registration) and the buffer's.
#[derive(Debug, Clone, Copy)]
pub struct Submission<'a> {
    /// The validated request.
    pub request: &'a ValidRequest,
    /// The file, as probed at registration.
    pub file: &'a FileFacts,
    /// The buffer.
    pub buffer: &'a BufferFacts,
}

/// The descriptors a backend moves bytes through.
#[derive(Debug, Clone, Copy)]
pub struct IoTarget<'a> {
    /// The `O_DIRECT` descriptor, when the file has a usable one.
    pub direct: Option<BorrowedFd<'a>>,
    /// A buffered descriptor.
    pub buffered: BorrowedFd<'a>,
}

/// A way to serve requests. Validation happened before either method is called: a backend
/// trusts the [`Submission`].
pub trait Backend: Send + Sync {
    /// Which backend this is.
    fn kind(&self) -> BackendKind;

    /// Whether and how eagerly this backend would serve `s`, with every reason if not.
    fn score(&self, s: &Submission<'_>) -> Verdict;

    /// Serves `s`, returning the bytes moved (short at end of file). Only called after
    /// [`Backend::score`] accepted `s`. A count above the request's size is a broken
    /// contract, which the caller reports as an internal error.
    fn io(&self, s: &Submission<'_>, target: &IoTarget<'_>) -> Result<u64, BackendError>;

    /// The backend's data path for stream-ordered requests, when it has one (the fallback's
    /// staging: [`crate::stream`]); `None` by default, and the engine then serves its
    /// stream-ordered requests through [`crate::submit`] when the stream reaches them.
    fn on_stream(&self) -> Option<&dyn StreamOrderedIo> {
        None
    }
}

/// A backend's data path for stream-ordered requests: it moves the bytes with copies queued
/// on the caller's stream, so that the stream never waits for work that needs the GPU.
#[allow(unsafe_code)] // Declares the promise that implementers rely on.
pub trait StreamOrderedIo: Send + Sync {
    /// Queues `s` on `target.stream`; the returned job ends once the stream has passed all
    /// of it, with the request's result (which `request.report` gets first).
    ///
    /// # Safety
    ///
    /// `target.stream` is a live stream of the runtime until the job has ended, and the
    /// memory of `s.request` stays allocated until then (`request.keep` holds it).
    unsafe fn queue_on_stream(
        &self,
        s: &Submission<'_>,
        target: StreamTarget<'_>,
        request: StreamRequest,
    ) -> JobHandle;
}
