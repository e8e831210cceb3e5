//! hipfile's public error, a backend's run-time failure ([`BackendError`]), and the numeric
//! codes kept for the C ABI (docs/BEHAVIOUR.md §4).

pub use crate::code::{ErrorCode, HipFileCode};
use crate::reason::{BackendKind, Reason};
use crate::runtime::{FileIoError, RuntimeError};
use crate::types::{DevicePtr, MemoryKind, Op};
use std::fmt;

/// hipfile's public error: the operation, what went wrong, and enough to act on it.
///
/// Each message includes its cause's message, and [`source`](std::error::Error::source)
/// returns the cause as a value for callers that inspect it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument is invalid; nothing was transferred.
    #[error("{}invalid argument: {what}", op_prefix(*op))]
    InvalidValue {
        /// The operation, when the error concerns a request.
        op: Option<Op>,
        /// What is wrong.
        what: String,
    },
    /// Every backend refused the request.
    #[error("{}", NoBackendDisplay { op: *op, verdicts, config_leaves_none: *config_leaves_none })]
    NoBackend {
        /// The operation.
        op: Op,
        /// Each backend with its reasons, in registration order.
        verdicts: Vec<(BackendKind, Vec<Reason>)>,
        /// The configuration itself leaves no backend (`FORCE=true`, `ALLOW=false`).
        config_leaves_none: bool,
    },
    /// The backend that served the request failed.
    #[error("{op} on the {backend} failed: {source}{}", retry_note(retried_from.as_deref(), retry_refused.as_deref()))]
    Backend {
        /// The operation.
        op: Op,
        /// The backend whose failure this is (the fallback, after a retry).
        backend: BackendKind,
        /// What went wrong.
        #[source]
        source: BackendError,
        /// When the failure came from a retry: the fastpath failure that caused it.
        retried_from: Option<Box<BackendError>>,
        /// When a retryable fastpath failure could not be retried: the fallback's reasons.
        retry_refused: Option<Vec<Reason>>,
    },
    /// A runtime call made while validating a buffer failed.
    #[error("GPU runtime error: {0}")]
    Runtime(#[source] RuntimeError),
    /// A buffer to register is memory of a kind the driver's rule does not register
    /// ([`MemoryTypes::registers`](crate::MemoryTypes::registers)).
    #[error("cannot register {ptr}: it is {} memory; {}", memory.as_str(), rule.refusal(*memory))]
    MemoryTypeInvalid {
        /// The pointer.
        ptr: DevicePtr,
        /// What it is.
        memory: MemoryKind,
        /// The rule that refused it.
        rule: crate::config::MemoryTypes,
    },
    /// A buffer range leaves its allocation.
    #[error("buffer {ptr} + {len} bytes leaves its allocation {base} + {alloc_len} bytes")]
    PointerRange {
        /// The pointer.
        ptr: DevicePtr,
        /// The length asked for.
        len: u64,
        /// The allocation's base.
        base: DevicePtr,
        /// The allocation's length.
        alloc_len: u64,
    },
    /// Registering a file failed: its facts could not be read or a descriptor not opened.
    #[error("cannot register the file: {0}")]
    Probe(#[source] hipfile_probe::ProbeError),
    /// The descriptor can never be read or written at an offset (a directory, FIFO, socket,
    /// symbolic link or `O_PATH` descriptor), so it is not registered.
    #[error("cannot register the file: {0}")]
    UnusableFile(hipfile_probe::Unusable),
    /// The file's descriptor was opened without the access the operation needs: a write on
    /// a read-only descriptor, or a read on a write-only one (`EBADF`, as `pwrite`/`pread`
    /// would say).
    #[error(
        "cannot {op}: the file was opened {opened}; open it with {needed} to {op}, and register \
         that descriptor"
    )]
    AccessMode {
        /// The operation refused.
        op: Op,
        /// How the descriptor was opened: `read-only (O_RDONLY)` or `write-only (O_WRONLY)`.
        opened: &'static str,
        /// The modes that allow `op`.
        needed: &'static str,
    },
    /// A whole-range call (`read_exact_at`, `write_all_at`) could not move the whole range:
    /// the file ended first, or a write moved nothing. `done` bytes from the start of the
    /// range were moved.
    #[error(
        "{op}: {done} of {wanted} bytes at file offset {offset} were moved: {}",
        if *op == Op::Read {
            "the file ends before the end of the range"
        } else {
            "a write moved no byte"
        }
    )]
    Incomplete {
        /// The operation.
        op: Op,
        /// The file offset of the range.
        offset: u64,
        /// Bytes asked for.
        wanted: u64,
        /// Bytes moved from the start of the range.
        done: u64,
    },
    /// An asynchronous request was cancelled before it started; nothing was transferred.
    #[error("{op}: cancelled before it started; nothing was transferred")]
    Canceled {
        /// The operation.
        op: Op,
    },
    /// This file descriptor is already registered.
    #[error("file descriptor {fd} is already registered; deregister it first")]
    HandleAlreadyRegistered {
        /// The descriptor.
        fd: i32,
    },
    /// The file handle was deregistered.
    #[error("the file handle is not registered (it was deregistered)")]
    HandleNotRegistered,
    /// This buffer is already registered.
    #[error("buffer {ptr} is already registered")]
    MemoryAlreadyRegistered {
        /// The buffer's address.
        ptr: DevicePtr,
    },
    /// Deregistering a buffer that is not registered.
    #[error("buffer {ptr} is not registered")]
    MemoryNotRegistered {
        /// The buffer's address.
        ptr: DevicePtr,
    },
    /// Deregistration refused while I/O uses the file or buffer.
    #[error(
        "cannot deregister the {what} while {count} I/O request(s) use it; retry when they finish"
    )]
    InUse {
        /// `file` or `buffer`.
        what: &'static str,
        /// Requests in flight.
        count: usize,
    },
    /// No GPU runtime could be loaded, or the driver could not be opened. The source is the
    /// loader's error (for `hipfile-runtime`'s loader, a `hipfile_sys::LoadError` or a
    /// `hipfile_runtime::NoRuntime`), which lists every library tried.
    #[error("cannot open the hipfile driver: {0}")]
    DriverOpen(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
    /// A driver with another configuration is already open in this process.
    #[error(
        "the hipfile driver is already open with another configuration; close every handle first or use Driver::open()"
    )]
    DriverAlreadyOpen,
    /// The driver was opened by another process, of which this one is a copy made by
    /// `fork()`: its threads and GPU state did not come along, so it serves nothing here.
    #[error(
        "this driver was opened by process {opened_by}, and this process ({this}) was made \
         from it by fork(): a driver's threads and GPU state do not survive fork, so it \
         serves nothing here; open a new driver in this process (the GPU runtime itself may \
         not be usable after fork either)"
    )]
    Forked {
        /// The process that opened the driver.
        opened_by: u32,
        /// This process.
        this: u32,
    },
    /// A fault inside hipfile or a backend that broke its contract.
    #[error("internal error: {0}")]
    Internal(String),
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

fn op_prefix(op: Option<Op>) -> String {
    op.map(|o| format!("{o}: ")).unwrap_or_default()
}

fn retry_note(from: Option<&BackendError>, refused: Option<&[Reason]>) -> String {
    match (from, refused) {
        (Some(first), _) => format!(" (retried after the fastpath failed: {first})"),
        (None, Some(reasons)) => format!(
            " (not retried on the fallback, which refuses: {})",
            join_reasons(reasons)
        ),
        (None, None) => String::new(),
    }
}

fn join_reasons(reasons: &[Reason]) -> String {
    reasons
        .iter()
        .map(|r| r.code())
        .collect::<Vec<_>>()
        .join(", ")
}

struct NoBackendDisplay<'a> {
    op: Op,
    verdicts: &'a [(BackendKind, Vec<Reason>)],
    config_leaves_none: bool,
}

impl fmt::Display for NoBackendDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: no backend can serve this request", self.op)?;
        for (backend, reasons) in self.verdicts {
            write!(f, "; {backend} refuses: {}", join_reasons(reasons))?;
        }
        if self.config_leaves_none {
            f.write_str(
                " (HIPFILE_FORCE_COMPAT_MODE=true with HIPFILE_ALLOW_COMPAT_MODE=false leaves no backend)",
            )?;
        }
        Ok(())
    }
}

impl Error {
    /// The code a C caller would get.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::InvalidValue { .. } => ErrorCode::HipFile(HipFileCode::InvalidValue),
            Error::NoBackend { .. } => ErrorCode::HipFile(HipFileCode::IONotSupported),
            Error::Backend { source, .. } => source.code(),
            Error::Runtime(_) => ErrorCode::HipFile(HipFileCode::HipDriverError),
            Error::MemoryTypeInvalid { .. } => {
                ErrorCode::HipFile(HipFileCode::HipMemoryTypeInvalid)
            }
            Error::PointerRange { .. } => ErrorCode::HipFile(HipFileCode::HipPointerRangeError),
            Error::Internal(_) => ErrorCode::HipFile(HipFileCode::InternalError),
            Error::Probe(p) => match p.errno() {
                Some(e) => ErrorCode::Errno(e),
                None => ErrorCode::HipFile(HipFileCode::InternalError),
            },
            Error::UnusableFile(hipfile_probe::Unusable::PathOnly) => {
                ErrorCode::HipFile(HipFileCode::InvalidFileOpenFlag)
            }
            Error::UnusableFile(_) => ErrorCode::HipFile(HipFileCode::InvalidFileType),
            Error::AccessMode { .. } => ErrorCode::Errno(libc::EBADF),
            Error::Incomplete { op: Op::Read, .. } => ErrorCode::HipFile(HipFileCode::InvalidValue),
            Error::Incomplete { op: Op::Write, .. } => ErrorCode::Errno(libc::EIO),
            Error::Canceled { .. } => ErrorCode::Errno(libc::ECANCELED),
            Error::HandleAlreadyRegistered { .. } => {
                ErrorCode::HipFile(HipFileCode::HandleAlreadyRegistered)
            }
            Error::HandleNotRegistered => ErrorCode::HipFile(HipFileCode::HandleNotRegistered),
            Error::MemoryAlreadyRegistered { .. } => {
                ErrorCode::HipFile(HipFileCode::MemoryAlreadyRegistered)
            }
            Error::MemoryNotRegistered { .. } => {
                ErrorCode::HipFile(HipFileCode::MemoryNotRegistered)
            }
            Error::InUse { .. } => ErrorCode::HipFile(HipFileCode::InvalidValue),
            Error::DriverOpen(_) => ErrorCode::HipFile(HipFileCode::DriverNotInitialized),
            Error::DriverAlreadyOpen => ErrorCode::HipFile(HipFileCode::DriverAlreadyOpen),
            Error::Forked { .. } => ErrorCode::HipFile(HipFileCode::DriverNotInitialized),
        }
    }

    /// The errno, when the error is a system error.
    pub fn errno(&self) -> Option<i32> {
        match self.code() {
            ErrorCode::Errno(e) => Some(e),
            ErrorCode::HipFile(_) => None,
        }
    }

    /// The runtime's error number, when a runtime call caused the error.
    pub fn hip_error(&self) -> Option<i32> {
        match self {
            Error::Runtime(e) => Some(e.code),
            Error::Backend { source, .. } => source.hip_error(),
            _ => None,
        }
    }

    /// For [`Error::NoBackend`]: each backend's reasons.
    pub fn rejections(&self) -> &[(BackendKind, Vec<Reason>)] {
        match self {
            Error::NoBackend { verdicts, .. } => verdicts,
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_keep_upstream_values() {
        assert_eq!(HipFileCode::DriverNotInitialized.value(), 5001);
        assert_eq!(HipFileCode::DriverClosing.value(), 5006);
        assert_eq!(HipFileCode::IONotSupported.value(), 5008);
        assert_eq!(HipFileCode::HipDriverError.value(), 5011);
        assert_eq!(HipFileCode::HipMemoryTypeInvalid.value(), 5013);
        assert_eq!(HipFileCode::HipPointerRangeError.value(), 5014);
        assert_eq!(HipFileCode::InvalidValue.value(), 5022);
        assert_eq!(HipFileCode::MemoryAlreadyRegistered.value(), 5023);
        assert_eq!(HipFileCode::MemoryNotRegistered.value(), 5024);
        assert_eq!(HipFileCode::HandleNotRegistered.value(), 5027);
        assert_eq!(HipFileCode::HandleAlreadyRegistered.value(), 5028);
        assert_eq!(HipFileCode::InternalError.value(), 5030);
        assert_eq!(HipFileCode::DriverSetupError.value(), 5033);
    }

    #[test]
    fn no_backend_names_every_reason() {
        let e = Error::NoBackend {
            op: Op::Read,
            verdicts: vec![
                (BackendKind::Fastpath, vec![Reason::ForceCompatMode]),
                (BackendKind::Fallback, vec![Reason::CompatModeDisallowed]),
            ],
            config_leaves_none: true,
        };
        let text = e.to_string();
        for needle in [
            "read",
            "fastpath refuses: force_compat_mode",
            "fallback refuses: compat_mode_disallowed",
            "leaves no backend",
        ] {
            assert!(text.contains(needle), "{needle:?} missing from {text:?}");
        }
        assert_eq!(e.code(), ErrorCode::HipFile(HipFileCode::IONotSupported));
        assert_eq!(e.rejections().len(), 2);
    }

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
