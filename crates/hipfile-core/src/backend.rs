//! The [`Backend`] trait: how a backend scores a request and serves it.

use crate::code::{ErrorCode, HipFileCode};
use crate::reason::{BackendKind, Verdict};
use crate::request::{BufferFacts, ValidRequest};
use crate::runtime::{FileIoError, RuntimeError};
use crate::types::Op;
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

/// A backend's run-time failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// A system call (or the kernel driver behind the runtime) failed with `errno`.
    #[error("{call}: {}", std::io::Error::from_raw_os_error(*errno))]
    Os {
        /// What failed, e.g. `pread` or `hipAmdFileRead`.
        call: &'static str,
        /// The errno.
        errno: i32,
    },
    /// The GPU runtime failed.
    #[error(transparent)]
    Runtime(RuntimeError),
    /// The backend cannot do this (yet, or on this build).
    #[error("{0}")]
    Unsupported(String),
    /// A fault inside the backend, such as a panic in one of its threads.
    #[error("{0}")]
    Internal(String),
}

impl BackendError {
    /// The errno, for [`BackendError::Os`].
    pub fn errno(&self) -> Option<i32> {
        match self {
            BackendError::Os { errno, .. } => Some(*errno),
            _ => None,
        }
    }

    /// Whether a fastpath failure with this error may be retried on the fallback: only
    /// `ENODEV` and `EREMOTEIO` (docs/BEHAVIOUR.md §1.9).
    pub fn is_retryable(&self) -> bool {
        matches!(self.errno(), Some(libc::ENODEV | libc::EREMOTEIO))
    }

    /// The runtime's error number, for [`BackendError::Runtime`].
    pub fn hip_error(&self) -> Option<i32> {
        match self {
            BackendError::Runtime(e) => Some(e.code),
            _ => None,
        }
    }

    /// The code a C caller would get.
    pub fn code(&self) -> ErrorCode {
        match self {
            BackendError::Os { errno, .. } => ErrorCode::Errno(*errno),
            BackendError::Runtime(_) => ErrorCode::HipFile(HipFileCode::HipDriverError),
            BackendError::Unsupported(_) => ErrorCode::HipFile(HipFileCode::IONotSupported),
            BackendError::Internal(_) => ErrorCode::HipFile(HipFileCode::InternalError),
        }
    }

    /// The refusal to move bytes for a request that was validated against described buffer
    /// facts rather than a [`CheckedBuffer`](crate::CheckedBuffer).
    pub fn unchecked(op: Op) -> BackendError {
        BackendError::Unsupported(format!(
            "cannot {op}: the request was validated against buffer facts that the runtime did \
             not vouch for (Request::validate); validate it against a CheckedBuffer \
             (Request::validate_checked) to move bytes"
        ))
    }

    /// Converts a failed AMD file-I/O call made as `call`.
    pub fn from_file_io(call: &'static str, e: FileIoError) -> BackendError {
        match e {
            FileIoError::Errno(errno) => BackendError::Os { call, errno },
            FileIoError::Runtime(r) => BackendError::Runtime(r),
            FileIoError::Unavailable => {
                BackendError::Unsupported(format!("{call}: the runtime has no AMD file I/O"))
            }
        }
    }
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_enodev_and_eremoteio_are_retryable() {
        for errno in 1..200 {
            let e = BackendError::Os { call: "x", errno };
            assert_eq!(
                e.is_retryable(),
                errno == libc::ENODEV || errno == libc::EREMOTEIO,
                "errno {errno}"
            );
        }
        let hip = BackendError::Runtime(RuntimeError::new("h", 100, "no device"));
        assert!(!hip.is_retryable());
        assert!(!BackendError::Unsupported("x".into()).is_retryable());
    }

    #[test]
    fn an_os_error_names_its_errno_once() {
        let text = BackendError::Os {
            call: "pread",
            errno: libc::EIO,
        }
        .to_string();
        assert_eq!(text, "pread: Input/output error (os error 5)");
    }

    #[test]
    fn internal_faults_are_hipfiles_internal_error() {
        let e = BackendError::Internal("a worker panicked".into());
        assert_eq!(e.code(), ErrorCode::HipFile(HipFileCode::InternalError));
        assert_eq!(HipFileCode::InternalError.value(), 5030);
        assert_eq!(e.to_string(), "a worker panicked");
        assert!(!e.is_retryable());
    }

    #[test]
    fn file_io_errors_keep_the_errno() {
        let e = BackendError::from_file_io("hipAmdFileRead", FileIoError::Errno(libc::EREMOTEIO));
        assert_eq!(e.errno(), Some(libc::EREMOTEIO));
        assert!(e.to_string().contains("hipAmdFileRead"));
    }
}
