//! What a served request reports.

use crate::reason::BackendKind;

/// What a served request reports, whichever API made it (the synchronous calls, the engine
/// and the handles of requests in flight all return it). The count may be short of the
/// request (end of file, a size clamped to [`MAX_IO_SIZE`](crate::request::MAX_IO_SIZE), a
/// write that failed part way), so it must be looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "the count may be short of the request's size"]
#[non_exhaustive]
pub struct IoOutcome {
    /// Bytes moved.
    pub bytes: u64,
    /// The backend that finally served the request.
    pub backend: BackendKind,
    /// Whether the fastpath failed first and the fallback served it.
    pub retried: bool,
}

impl IoOutcome {
    /// `bytes` moved by `backend`; `retried` when the fastpath failed first and the fallback
    /// served the request.
    pub const fn new(bytes: u64, backend: BackendKind, retried: bool) -> IoOutcome {
        IoOutcome {
            bytes,
            backend,
            retried,
        }
    }
}
