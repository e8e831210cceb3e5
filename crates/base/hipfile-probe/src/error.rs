//! The crate's one error type.

use rustix::io::Errno;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};

/// A system call of the probe failed. Each variant names the call, the descriptor or path
/// and the errno; the message says what to check. Answers that are data (no `O_DIRECT`, no
/// alignment reported, unknown filesystem) are never errors: they are in
/// [`FileFacts`](crate::FileFacts).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// `statx` on the caller's descriptor or on the reopened direct one failed.
    #[error("statx on descriptor {fd} failed: {errno}; the descriptor must refer to an open file")]
    Statx {
        /// The descriptor.
        fd: RawFd,
        /// What the kernel said.
        errno: Errno,
    },
    /// `fcntl(F_GETFL)` on the caller's descriptor failed.
    #[error("fcntl(F_GETFL) on descriptor {fd} failed: {errno}; the descriptor must be open")]
    GetFlags {
        /// The descriptor.
        fd: RawFd,
        /// What the kernel said.
        errno: Errno,
    },
    /// `fstatfs` on the caller's descriptor failed.
    #[error("fstatfs on descriptor {fd} failed: {errno}")]
    Fstatfs {
        /// The descriptor.
        fd: RawFd,
        /// What the kernel said.
        errno: Errno,
    },
    /// `/proc/self/mountinfo` could not be read.
    #[error(
        "cannot read {}: {error}; the filesystem of a file is found there, so procfs must be \
         mounted on /proc",
        path.display()
    )]
    Mountinfo {
        /// The file that could not be read.
        path: PathBuf,
        /// What reading it said.
        error: std::io::Error,
    },
    /// Reopening the file through `/proc/thread-self/fd/N` failed with something other than the
    /// `EINVAL` that means "no direct I/O here".
    #[error(
        "reopening {} {} failed: {errno}; hipfile opens its own {} descriptor through \
         /proc/thread-self/fd, which needs procfs and permission to open the file again with the \
         same access mode",
        path.display(),
        if *direct { "with O_DIRECT" } else { "without O_DIRECT" },
        if *direct { "direct-I/O" } else { "buffered" }
    )]
    Reopen {
        /// The `/proc/thread-self/fd/N` path.
        path: PathBuf,
        /// Whether the reopen was the `O_DIRECT` one (else the buffered one, for a caller
        /// descriptor that already has `O_DIRECT`).
        direct: bool,
        /// What the kernel said.
        errno: Errno,
    },
    /// The reopened descriptor is not the file that was probed (another device or inode).
    #[error(
        "reopening {} gave another file (device {}:{}, inode {}) than the one registered \
         (device {}:{}, inode {}); the descriptor number must refer to the same file in the \
         registering thread's descriptor table, so register the file again",
        path.display(), found.0.0, found.0.1, found.1, expected.0.0, expected.0.1, expected.1
    )]
    ReopenedOtherFile {
        /// The `/proc/thread-self/fd/N` path.
        path: PathBuf,
        /// The registered file: device (major, minor) and inode.
        expected: ((u32, u32), u64),
        /// What the reopen gave.
        found: ((u32, u32), u64),
    },
    /// Duplicating the caller's descriptor (`F_DUPFD_CLOEXEC`) failed: a closed descriptor
    /// (`EBADF`) or no descriptor left (`EMFILE`).
    #[error(
        "duplicating descriptor {fd} failed: {errno}; the descriptor must be open, and the \
         process must have a descriptor to spare"
    )]
    Duplicate {
        /// The descriptor.
        fd: RawFd,
        /// What the kernel said.
        errno: Errno,
    },
    /// `ioctl(BLKSSZGET)` on a block device failed.
    #[error("ioctl(BLKSSZGET) on block device descriptor {fd} failed: {errno}")]
    BlockSize {
        /// The descriptor.
        fd: RawFd,
        /// What the kernel said.
        errno: Errno,
    },
}

impl ProbeError {
    /// The raw errno of the failed call, if it gave one.
    pub fn errno(&self) -> Option<i32> {
        match self {
            ProbeError::Statx { errno, .. }
            | ProbeError::GetFlags { errno, .. }
            | ProbeError::Fstatfs { errno, .. }
            | ProbeError::Reopen { errno, .. }
            | ProbeError::Duplicate { errno, .. }
            | ProbeError::BlockSize { errno, .. } => Some(errno.raw_os_error()),
            ProbeError::Mountinfo { error, .. } => error.raw_os_error(),
            ProbeError::ReopenedOtherFile { .. } => None,
        }
    }

    /// The failed call, for example `statx` or `open`.
    pub fn call(&self) -> &'static str {
        match self {
            ProbeError::Statx { .. } => "statx",
            ProbeError::GetFlags { .. } => "fcntl(F_GETFL)",
            ProbeError::Fstatfs { .. } => "fstatfs",
            ProbeError::Mountinfo { .. } => "read",
            ProbeError::Reopen { .. } | ProbeError::ReopenedOtherFile { .. } => "open",
            ProbeError::BlockSize { .. } => "ioctl(BLKSSZGET)",
            ProbeError::Duplicate { .. } => "fcntl(F_DUPFD_CLOEXEC)",
        }
    }

    /// The path involved, where there is one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            ProbeError::Mountinfo { path, .. }
            | ProbeError::Reopen { path, .. }
            | ProbeError::ReopenedOtherFile { path, .. } => Some(path),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_call_the_errno_and_the_path() {
        let e = ProbeError::Reopen {
            path: "/proc/self/fd/7".into(),
            direct: true,
            errno: Errno::ACCESS,
        };
        let msg = e.to_string();
        assert!(
            msg.contains("/proc/self/fd/7") && msg.contains("with O_DIRECT"),
            "{msg}"
        );
        assert!(msg.contains("Permission denied"), "{msg}");
        assert_eq!(e.errno(), Some(Errno::ACCESS.raw_os_error()));
        assert_eq!(e.call(), "open");
        assert_eq!(e.path(), Some(Path::new("/proc/self/fd/7")));

        let e = ProbeError::Statx {
            fd: 9,
            errno: Errno::BADF,
        };
        assert!(e.to_string().contains("descriptor 9"), "{e}");
        assert_eq!(e.errno(), Some(Errno::BADF.raw_os_error()));
        assert_eq!(e.path(), None);

        let error = std::io::Error::from_raw_os_error(Errno::NOENT.raw_os_error());
        let e = ProbeError::Mountinfo {
            path: "/proc/self/mountinfo".into(),
            error,
        };
        assert_eq!(e.errno(), Some(Errno::NOENT.raw_os_error()));
        assert!(e.to_string().contains("procfs"), "{e}");
    }
}
