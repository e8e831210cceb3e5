//! The registration-time probe (docs/BEHAVIOUR.md §1.3–§1.5 and §1.7): `statx`, `fcntl(F_GETFL)`,
//! `fstatfs`, `/proc/thread-self/mountinfo`, the `/proc/thread-self/fd/N` reopen with or without
//! `O_DIRECT`, and the direct-I/O alignments. The decisions are pure functions below the
//! system calls, so that every branch is testable without a filesystem that takes it.

use crate::error::ProbeError;
use crate::facts::{AlignSource, DirectIo, FileFacts, FileKind, Filesystem, NoDirectReason};
use crate::mountinfo;
use rustix::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Statx, StatxFlags};
use rustix::io::Errno;
use std::path::PathBuf;

/// Where the mount table is read.
const MOUNTINFO: &str = "/proc/thread-self/mountinfo";

/// The alignment assumed when the kernel does not report one (docs/BEHAVIOUR.md §1.7).
pub const ASSUMED_ALIGN: u32 = 4096;

/// A descriptor the probe chose for one kind of I/O: the caller's own, or one it opened.
#[derive(Debug)]
pub enum Descriptor {
    /// Use the caller's descriptor, the one that was probed.
    Caller,
    /// A descriptor the probe opened; closed when this is dropped.
    Owned(OwnedFd),
}

impl Descriptor {
    /// The descriptor to use: `caller` (the one that was probed) for [`Descriptor::Caller`],
    /// the owned one otherwise.
    pub fn as_fd<'a>(&'a self, caller: BorrowedFd<'a>) -> BorrowedFd<'a> {
        match self {
            Descriptor::Caller => caller,
            Descriptor::Owned(fd) => fd.as_fd(),
        }
    }

    /// Whether this is the caller's own descriptor.
    pub fn is_caller(&self) -> bool {
        matches!(self, Descriptor::Caller)
    }
}

/// What [`probe_fd`] found, with the descriptors to do I/O through.
#[derive(Debug)]
pub struct ProbedFile {
    /// The facts about the file.
    pub facts: FileFacts,
    /// The usable `O_DIRECT` descriptor; `None` exactly when `facts.direct` is
    /// [`DirectIo::Unavailable`].
    pub direct_fd: Option<Descriptor>,
    /// A descriptor without `O_DIRECT` for buffered I/O: the caller's unless the caller's has
    /// `O_DIRECT`.
    pub buffered_fd: Descriptor,
}

/// Probes an open descriptor at registration time.
///
/// 1. `statx(fd, "", AT_EMPTY_PATH)`: kind (from `STATX_TYPE`; [`FileKind::Other`] when the
///    mask lacks it), mode, device numbers, size.
/// 2. `fcntl(F_GETFL)`: the caller's status flags.
/// 3. `/proc/thread-self/mountinfo`: the mount whose device number is the file's `dev` (a block
///    device: its `rdev`, what is mounted on it); `fstatfs`: the magic.
/// 4. Only for regular files and block devices (reopening a FIFO would block): the reopen of
///    `/proc/thread-self/fd/N` (see [`reopen_flags`]), checked to be the same file (device and
///    inode). Without `O_DIRECT` on the caller's descriptor, a direct one is opened; `EINVAL`
///    means the filesystem does no direct I/O. With it, the caller's is the direct one and a
///    buffered one is opened. A caller's descriptor with `O_APPEND` is never used for I/O
///    (Linux appends whatever offset `pwrite` is given): both are reopened without it.
/// 5. `statx` `STATX_DIOALIGN` on the direct descriptor; a zero alignment means no direct
///    I/O (ext4 `data=journal`); not reported: `BLKSSZGET` for a block device, else 4096.
///
/// # Errors
///
/// A [`ProbeError`] when a call fails in a way that is not an answer: a closed descriptor,
/// no procfs, a reopen refused with anything but `EINVAL`.
pub fn probe_fd(fd: BorrowedFd<'_>) -> Result<ProbedFile, ProbeError> {
    let raw = fd.as_raw_fd();
    let stx = statx(
        fd,
        StatxFlags::TYPE | StatxFlags::MODE | StatxFlags::SIZE | StatxFlags::INO,
    )?;
    let kind = kind_of(&stx);
    let dev = (stx.stx_dev_major, stx.stx_dev_minor);
    let rdev = match kind {
        FileKind::BlockDevice => (stx.stx_rdev_major, stx.stx_rdev_minor),
        FileKind::Regular | FileKind::Other => (0, 0),
    };
    let flags =
        rustix::fs::fcntl_getfl(fd).map_err(|errno| ProbeError::GetFlags { fd: raw, errno })?;
    let statfs = rustix::fs::fstatfs(fd).map_err(|errno| ProbeError::Fstatfs { fd: raw, errno })?;
    let mounts = read_mountinfo()?;
    let (major, minor) = if kind == FileKind::BlockDevice {
        rdev
    } else {
        dev
    };
    let filesystem = filesystem_of(&mounts, major, minor);
    let identity = Identity::of(&stx);
    let (direct, direct_fd, buffered_fd) = descriptors(fd, kind, flags, identity)?;
    let facts = FileFacts {
        kind,
        mode: u32::from(stx.stx_mode),
        dev,
        rdev,
        size: stx.stx_size,
        status_flags: flags.bits() as i32,
        filesystem,
        statfs_magic: magic_of(statfs.f_type),
        direct,
    };
    Ok(ProbedFile {
        facts,
        direct_fd,
        buffered_fd,
    })
}

/// A duplicate of `fd` (`F_DUPFD_CLOEXEC`) that the caller owns, so that a registration stays
/// valid whatever the owner of `fd` does with it.
///
/// # Errors
///
/// [`ProbeError::Duplicate`]: a closed descriptor (`EBADF`), no descriptor to spare
/// (`EMFILE`).
pub fn duplicate(fd: BorrowedFd<'_>) -> Result<OwnedFd, ProbeError> {
    rustix::io::fcntl_dupfd_cloexec(fd, 0).map_err(|errno| ProbeError::Duplicate {
        fd: fd.as_raw_fd(),
        errno,
    })
}

/// [`probe_fd`] without the descriptors: any it opened are closed before this returns.
///
/// # Errors
///
/// As [`probe_fd`].
pub fn file_facts(fd: BorrowedFd<'_>) -> Result<FileFacts, ProbeError> {
    probe_fd(fd).map(|p| p.facts)
}

/// The flags of a reopen of the caller's descriptor through `/proc/thread-self/fd/N`: with
/// `O_DIRECT` when `direct`, without it otherwise, always `O_CLOEXEC`.
///
/// Kept from the caller's `F_GETFL` flags: the access mode, `O_NONBLOCK` (only when the caller
/// has it: it decides whether the open may wait on a lease), `O_SYNC`/`O_DSYNC`, `O_NOATIME`,
/// `O_LARGEFILE`, `O_PATH` (a reopen must not gain access the caller's descriptor lacks).
/// Dropped: `O_APPEND` (writes go to explicit offsets), `O_CREAT`, `O_TRUNC`, `O_EXCL` (a
/// reopen must never create or truncate), and also `O_NOFOLLOW` (`/proc/thread-self/fd/N` is a
/// link, so the reopen would fail with `ELOOP`), `O_DIRECTORY`, `O_TMPFILE` (would create a
/// new file), `O_NOCTTY` and `O_ASYNC` (only settable with `F_SETFL`).
pub fn reopen_flags(caller: OFlags, direct: bool) -> OFlags {
    // rustix's `SYNC` is both bits of `O_SYNC`, so this keeps `O_DSYNC` alone as well.
    let keep = OFlags::ACCMODE
        | OFlags::RWMODE
        | OFlags::NONBLOCK
        | OFlags::SYNC
        | OFlags::NOATIME
        | OFlags::LARGEFILE
        | OFlags::PATH;
    let base = (caller & keep) | OFlags::CLOEXEC;
    if direct { base | OFlags::DIRECT } else { base }
}

/// What an `O_DIRECT` reopen's result means: `Ok(Some(fd))` a direct descriptor,
/// `Ok(None)` `EINVAL` (the filesystem does not do direct I/O: data, not an error), `Err` any
/// other failure.
pub fn classify_direct_reopen<T>(result: Result<T, Errno>) -> Result<Option<T>, Errno> {
    match result {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::INVAL) => Ok(None),
        Err(errno) => Err(errno),
    }
}

/// The direct-I/O answer from what the kernel reported on the direct descriptor:
/// `dioalign` is `(stx_dio_mem_align, stx_dio_offset_align)` when `STATX_DIOALIGN` is in
/// the mask; `logical_block_size` is `BLKSSZGET`'s answer for a block device without it.
pub fn direct_io(dioalign: Option<(u32, u32)>, logical_block_size: Option<u32>) -> DirectIo {
    match (dioalign, logical_block_size) {
        (Some((0, _) | (_, 0)), _) => DirectIo::Unavailable(NoDirectReason::AlignmentZero),
        (Some((mem_align, offset_align)), _) => DirectIo::Available {
            mem_align,
            offset_align,
            source: AlignSource::Statx,
        },
        (None, Some(size)) if size > 0 => DirectIo::Available {
            mem_align: size,
            offset_align: size,
            source: AlignSource::LogicalBlockSize,
        },
        (None, _) => DirectIo::Available {
            mem_align: ASSUMED_ALIGN,
            offset_align: ASSUMED_ALIGN,
            source: AlignSource::Assumed,
        },
    }
}

/// The kind from `STATX_TYPE`; without it in the mask the type bits mean nothing.
fn kind_of(stx: &Statx) -> FileKind {
    if !StatxFlags::from_bits_retain(stx.stx_mask).contains(StatxFlags::TYPE) {
        return FileKind::Other;
    }
    match FileType::from_raw_mode(stx.stx_mode.into()) {
        FileType::RegularFile => FileKind::Regular,
        FileType::BlockDevice => FileKind::BlockDevice,
        _ => FileKind::Other,
    }
}

/// The mount with device number `major:minor`, if mountinfo has one.
fn filesystem_of(mounts: &[mountinfo::MountEntry], major: u32, minor: u32) -> Option<Filesystem> {
    mountinfo::find_by_device(mounts, major, minor).map(Filesystem::from)
}

/// Linux magic numbers are 32-bit. On 32-bit targets `f_type` is a signed word, so a magic
/// with the top bit set (btrfs) must not be sign-extended.
#[allow(clippy::cast_sign_loss, clippy::unnecessary_cast)]
fn magic_of(f_type: rustix::fs::FsWord) -> u64 {
    u64::from(f_type as u32)
}

/// The mount table. Not cached: mounts come and go while a process runs. Paths that are not
/// UTF-8 become lossy text; entries are found by device number, which is unaffected.
fn read_mountinfo() -> Result<Vec<mountinfo::MountEntry>, ProbeError> {
    let bytes = std::fs::read(MOUNTINFO).map_err(|error| ProbeError::Mountinfo {
        path: MOUNTINFO.into(),
        error,
    })?;
    Ok(mountinfo::parse(&String::from_utf8_lossy(&bytes)))
}

fn statx(fd: BorrowedFd<'_>, mask: StatxFlags) -> Result<Statx, ProbeError> {
    rustix::fs::statx(fd, "", AtFlags::EMPTY_PATH, mask).map_err(|errno| ProbeError::Statx {
        fd: fd.as_raw_fd(),
        errno,
    })
}

/// The path that reopens `fd`: through `/proc/thread-self`, the calling thread's descriptor
/// table. `/proc/self/fd` is the table of the process's main thread, which a thread that
/// called `unshare(CLONE_FILES)` no longer shares: the same number can be another file there.
fn proc_fd_path(fd: BorrowedFd<'_>) -> PathBuf {
    PathBuf::from(format!("/proc/thread-self/fd/{}", fd.as_raw_fd()))
}

/// Which file a descriptor refers to: the device holding it and its inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: (u32, u32),
    ino: u64,
}

impl Identity {
    fn of(stx: &Statx) -> Identity {
        Identity {
            dev: (stx.stx_dev_major, stx.stx_dev_minor),
            ino: stx.stx_ino,
        }
    }
}

/// Reopens `fd` with `flags` and checks that the new descriptor is the file that was probed
/// (`expected`) before anything uses it.
fn reopen(fd: BorrowedFd<'_>, flags: OFlags, expected: Identity) -> Result<OwnedFd, ReopenError> {
    let new =
        rustix::fs::open(proc_fd_path(fd), flags, Mode::empty()).map_err(ReopenError::Open)?;
    let stx = rustix::fs::statx(&new, "", AtFlags::EMPTY_PATH, StatxFlags::INO)
        .map_err(ReopenError::Open)?;
    let found = Identity::of(&stx);
    if found == expected {
        Ok(new)
    } else {
        Err(ReopenError::OtherFile { found })
    }
}

enum ReopenError {
    Open(Errno),
    OtherFile { found: Identity },
}

/// The direct-I/O answer and the two descriptors (docs/BEHAVIOUR.md §1.3).
fn descriptors(
    fd: BorrowedFd<'_>,
    kind: FileKind,
    flags: OFlags,
    identity: Identity,
) -> Result<(DirectIo, Option<Descriptor>, Descriptor), ProbeError> {
    if kind == FileKind::Other {
        return Ok((
            DirectIo::Unavailable(NoDirectReason::NotAttempted),
            None,
            Descriptor::Caller,
        ));
    }
    let failed = |direct, e| match e {
        ReopenError::Open(errno) => ProbeError::Reopen {
            path: proc_fd_path(fd),
            direct,
            errno,
        },
        ReopenError::OtherFile { found } => ProbeError::ReopenedOtherFile {
            path: proc_fd_path(fd),
            expected: (identity.dev, identity.ino),
            found: (found.dev, found.ino),
        },
    };
    // The caller's own descriptor serves only where its flags are right: `O_APPEND` would
    // put every write at the end of the file.
    let usable = !flags.contains(OFlags::APPEND);
    let buffered = |fd| -> Result<Descriptor, ProbeError> {
        if usable && !flags.contains(OFlags::DIRECT) {
            return Ok(Descriptor::Caller);
        }
        reopen(fd, reopen_flags(flags, false), identity)
            .map(Descriptor::Owned)
            .map_err(|e| failed(false, e))
    };
    let direct_fd = if usable && flags.contains(OFlags::DIRECT) {
        Descriptor::Caller
    } else {
        let opened = match reopen(fd, reopen_flags(flags, true), identity) {
            Ok(direct) => Ok(direct),
            Err(ReopenError::Open(errno)) => Err(errno),
            Err(other) => return Err(failed(true, other)),
        };
        match classify_direct_reopen(opened) {
            Ok(Some(direct)) => Descriptor::Owned(direct),
            Ok(None) => {
                let rejected = DirectIo::Unavailable(NoDirectReason::OpenRejected);
                return Ok((rejected, None, buffered(fd)?));
            }
            Err(errno) => return Err(failed(true, ReopenError::Open(errno))),
        }
    };
    let buffered_fd = buffered(fd)?;
    let dfd = direct_fd.as_fd(fd);
    let stx = statx(dfd, StatxFlags::DIOALIGN)?;
    let dioalign = StatxFlags::from_bits_retain(stx.stx_mask)
        .contains(StatxFlags::DIOALIGN)
        .then_some((stx.stx_dio_mem_align, stx.stx_dio_offset_align));
    let logical_block_size = if dioalign.is_none() && kind == FileKind::BlockDevice {
        let size = rustix::fs::ioctl_blksszget(dfd).map_err(|errno| ProbeError::BlockSize {
            fd: dfd.as_raw_fd(),
            errno,
        })?;
        Some(size)
    } else {
        None
    };
    let direct = direct_io(dioalign, logical_block_size);
    let direct_fd = matches!(direct, DirectIo::Available { .. }).then_some(direct_fd);
    Ok((direct, direct_fd, buffered_fd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mountinfo::parse;

    #[test]
    fn reopen_keeps_the_access_mode_and_drops_what_must_not_repeat() {
        for mode in [OFlags::RDONLY, OFlags::WRONLY, OFlags::RDWR] {
            let caller = mode
                | OFlags::APPEND
                | OFlags::CREATE
                | OFlags::TRUNC
                | OFlags::EXCL
                | OFlags::NOFOLLOW
                | OFlags::NOCTTY
                | OFlags::ASYNC
                | OFlags::LARGEFILE;
            let direct = reopen_flags(caller, true);
            assert_eq!(
                direct,
                mode | OFlags::LARGEFILE | OFlags::DIRECT | OFlags::CLOEXEC
            );
            let buffered = reopen_flags(caller | OFlags::DIRECT, false);
            assert_eq!(buffered, mode | OFlags::LARGEFILE | OFlags::CLOEXEC);
        }
    }

    #[test]
    fn reopen_keeps_sync_nonblock_and_noatime_only_when_the_caller_has_them() {
        let wanted = OFlags::NONBLOCK | OFlags::SYNC | OFlags::NOATIME;
        assert_eq!(
            reopen_flags(OFlags::RDWR | wanted, true),
            OFlags::RDWR | wanted | OFlags::DIRECT | OFlags::CLOEXEC
        );
        assert_eq!(
            reopen_flags(OFlags::RDWR, true),
            OFlags::RDWR | OFlags::DIRECT | OFlags::CLOEXEC
        );
        // O_DSYNC alone (0o10000) stays O_DSYNC, not O_SYNC.
        let dsync = OFlags::from_bits_retain(0o10000);
        assert_eq!(
            reopen_flags(OFlags::WRONLY | dsync, false),
            OFlags::WRONLY | dsync | OFlags::CLOEXEC
        );
    }

    #[test]
    fn reopen_never_creates_a_temporary_file() {
        let flags = reopen_flags(OFlags::RDWR | OFlags::TMPFILE, true);
        assert!(
            !flags.intersects(OFlags::TMPFILE | OFlags::DIRECTORY),
            "{flags:?}"
        );
    }

    #[test]
    fn einval_on_the_direct_reopen_is_an_answer_and_other_errors_are_errors() {
        assert_eq!(classify_direct_reopen(Ok::<_, Errno>(5)), Ok(Some(5)));
        assert_eq!(classify_direct_reopen(Err::<(), _>(Errno::INVAL)), Ok(None));
        for errno in [
            Errno::ACCESS,
            Errno::PERM,
            Errno::NOENT,
            Errno::LOOP,
            Errno::MFILE,
        ] {
            assert_eq!(classify_direct_reopen(Err::<(), _>(errno)), Err(errno));
        }
    }

    #[test]
    fn alignments() {
        let statx = |m, o| DirectIo::Available {
            mem_align: m,
            offset_align: o,
            source: AlignSource::Statx,
        };
        assert_eq!(direct_io(Some((512, 4096)), None), statx(512, 4096));
        assert_eq!(direct_io(Some((4, 512)), Some(4096)), statx(4, 512));
        let zero = DirectIo::Unavailable(NoDirectReason::AlignmentZero);
        assert_eq!(direct_io(Some((0, 0)), None), zero);
        assert_eq!(direct_io(Some((0, 512)), None), zero);
        assert_eq!(direct_io(Some((512, 0)), Some(512)), zero);
        assert_eq!(
            direct_io(None, Some(512)),
            DirectIo::Available {
                mem_align: 512,
                offset_align: 512,
                source: AlignSource::LogicalBlockSize
            }
        );
        let assumed = DirectIo::Available {
            mem_align: 4096,
            offset_align: 4096,
            source: AlignSource::Assumed,
        };
        assert_eq!(direct_io(None, None), assumed);
        assert_eq!(direct_io(None, Some(0)), assumed);
    }

    #[test]
    fn an_unknown_device_has_no_filesystem() {
        let mounts =
            parse("1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 0:22 / /proc rw - proc proc rw\n");
        assert_eq!(filesystem_of(&mounts, 8, 2), None);
        assert_eq!(filesystem_of(&mounts, 9, 1), None);
        assert_eq!(filesystem_of(&[], 8, 1), None);
        let fs = filesystem_of(&mounts, 8, 1).unwrap();
        assert_eq!(
            (fs.fs_type.as_str(), fs.source.as_str()),
            ("ext4", "/dev/sda1")
        );
    }

    #[test]
    fn magics_are_not_sign_extended() {
        assert_eq!(magic_of(0xEF53), 0xEF53);
        assert_eq!(magic_of(0x9123_683E), 0x9123_683E);
    }

    #[test]
    fn a_regular_file_here() {
        let file = std::fs::File::open("Cargo.toml").unwrap();
        let p = probe_fd(file.as_fd()).unwrap();
        assert_eq!(p.facts.kind, FileKind::Regular);
        assert_eq!(p.facts.rdev, (0, 0));
        assert_eq!(p.facts.size, file.metadata().unwrap().len());
        assert!(p.buffered_fd.is_caller());
        assert_eq!(p.direct_fd.is_some(), p.facts.has_direct_io());
        assert_eq!(file_facts(file.as_fd()).unwrap(), p.facts);
    }
}
