//! What a served request reports: the ground type that the synchronous calls, the engine
//! and the handles of requests in flight all return.

use hipfile_core::BackendKind;

/// What a served request reports. The count may be short of the request (end of file, the
/// size clamp, a write that failed part way), so it must be looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "the count may be short of the request's size"]
#[non_exhaustive]
pub struct IoOutcome {
    /// Bytes moved (short at end of file, or for a size above `0x7ffff000`).
    pub bytes: u64,
    /// The backend that finally served it.
    pub backend: BackendKind,
    /// Whether the fastpath failed first and the fallback served it.
    pub retried: bool,
}
