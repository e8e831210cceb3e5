//! The facts a probe reports about one open file. Plain data: no system calls here.

use std::path::PathBuf;

/// What `statx` says the descriptor refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// A regular file (`S_IFREG`).
    Regular,
    /// A block device (`S_IFBLK`).
    BlockDevice,
    /// Anything else: directory, FIFO, socket, character device, or a `statx` answer whose
    /// mask lacks `STATX_TYPE`.
    Other,
}

impl FileKind {
    /// The stable lower-case name used in reports: `regular`, `block` or `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::Regular => "regular",
            FileKind::BlockDevice => "block",
            FileKind::Other => "other",
        }
    }
}

/// The `data=` journaling mode of an ext4 mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ext4Journal {
    /// `data=ordered`, also ext4's default when no `data=` option is shown.
    Ordered,
    /// `data=journal`.
    Journal,
    /// `data=writeback`.
    Writeback,
    /// A `data=` value this crate does not know.
    Unknown,
}

impl Ext4Journal {
    /// The stable lower-case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Ext4Journal::Ordered => "ordered",
            Ext4Journal::Journal => "journal",
            Ext4Journal::Writeback => "writeback",
            Ext4Journal::Unknown => "unknown",
        }
    }
}

/// The filesystem a file lives on, from the `/proc/self/mountinfo` line whose device number
/// matches the file's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filesystem {
    /// The mount type (field 9 of mountinfo), for example `ext4`, `xfs`, `tmpfs`.
    pub fs_type: String,
    /// Where it is mounted (unescaped).
    pub mount_point: PathBuf,
    /// The mount source (field 10, unescaped), for example `/dev/loop3`.
    pub source: String,
    /// The per-superblock options (field 11), split at commas.
    pub super_options: Vec<String>,
    /// For ext4 only: the `data=` mode wherever it stands among the super options,
    /// [`Ext4Journal::Ordered`] when absent. `None` for every other filesystem type.
    pub ext4_journal: Option<Ext4Journal>,
}

/// Where a direct-I/O alignment came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AlignSource {
    /// `statx` reported `STATX_DIOALIGN`.
    Statx,
    /// The kernel did not report it; 4096 is assumed (docs/BEHAVIOUR.md §1.7).
    Assumed,
    /// A block device without `STATX_DIOALIGN`: its logical block size (`BLKSSZGET`).
    LogicalBlockSize,
}

/// Why a file has no usable direct-I/O descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NoDirectReason {
    /// Neither a regular file nor a block device: no reopen was attempted (reopening a FIFO
    /// through `/proc/self/fd` would block).
    NotAttempted,
    /// The `O_DIRECT` reopen failed with `EINVAL`: the filesystem does not do direct I/O.
    OpenRejected,
    /// The reopen succeeded but `statx` reports `STATX_DIOALIGN` with an alignment of 0 (ext4
    /// with `data=journal` does this).
    AlignmentZero,
}

/// Whether the file can be used for direct I/O, and with which alignments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DirectIo {
    /// No usable `O_DIRECT` descriptor; the fastpath never serves this file.
    Unavailable(NoDirectReason),
    /// A usable `O_DIRECT` descriptor exists.
    Available {
        /// Required alignment of the memory address, in bytes (`stx_dio_mem_align`).
        mem_align: u32,
        /// Required alignment of file offsets and sizes, in bytes (`stx_dio_offset_align`).
        offset_align: u32,
        /// Where the two values came from.
        source: AlignSource,
    },
}

/// Everything hipfile needs to know about an open file to score a request on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileFacts {
    /// Regular file, block device or other.
    pub kind: FileKind,
    /// `st_mode` as `statx` reports it (type and permission bits).
    pub mode: u32,
    /// Major and minor number of the device holding the file (`stx_dev_*`).
    pub dev: (u32, u32),
    /// For block devices, the device's own major and minor (`stx_rdev_*`); `(0, 0)` otherwise.
    pub rdev: (u32, u32),
    /// File size in bytes, as `statx` reported it at probe time.
    pub size: u64,
    /// The caller's descriptor flags (`F_GETFL`).
    pub status_flags: i32,
    /// The filesystem: for a regular file, the mount whose device number is `dev`; for a block
    /// device, the mount whose device number is `rdev` (what is mounted on it, if anything).
    /// `None` when mountinfo has no such device.
    pub filesystem: Option<Filesystem>,
    /// `f_type` from `fstatfs`, a cross-check of `filesystem`.
    pub statfs_magic: u64,
    /// Direct-I/O availability and alignments.
    pub direct: DirectIo,
}

/// Why a descriptor can never be read or written at an offset, so that registering it is
/// refused: `pread`/`pwrite` fail on it whatever the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Unusable {
    /// A directory (`EISDIR`).
    Directory,
    /// A FIFO or pipe: no file offsets (`ESPIPE`).
    Fifo,
    /// A socket: no file offsets (`ESPIPE`).
    Socket,
    /// A symbolic link itself (an `O_PATH | O_NOFOLLOW` descriptor).
    Symlink,
    /// An `O_PATH` descriptor: it only names the file and allows no I/O (`EBADF`).
    PathOnly,
}

impl Unusable {
    /// The stable snake_case name used in reports.
    pub fn code(self) -> &'static str {
        match self {
            Unusable::Directory => "directory",
            Unusable::Fifo => "fifo",
            Unusable::Socket => "socket",
            Unusable::Symlink => "symlink",
            Unusable::PathOnly => "o_path_descriptor",
        }
    }

    /// What it is and why no I/O can be done on it, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Unusable::Directory => "it is a directory, which cannot be read or written as data",
            Unusable::Fifo => "it is a FIFO or pipe, which has no file offsets to read or write at",
            Unusable::Socket => "it is a socket, which has no file offsets to read or write at",
            Unusable::Symlink => "it is a symbolic link itself (opened with O_PATH | O_NOFOLLOW)",
            Unusable::PathOnly => {
                "it was opened with O_PATH, which allows no reads or writes; open the file \
                 with O_RDONLY, O_WRONLY or O_RDWR"
            }
        }
    }
}

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.describe())
    }
}

impl FileFacts {
    /// Why no request could ever be served on this descriptor, if that is so: a directory,
    /// FIFO, socket or symbolic link, or an `O_PATH` descriptor. Character devices are not
    /// refused: some take positional I/O (`/dev/null`, `/dev/zero`), and a request on one
    /// that does not fails with the kernel's error.
    pub fn unusable(&self) -> Option<Unusable> {
        const S_IFMT: u32 = 0o170_000;
        if self.status_flags & o_path_bits() != 0 {
            return Some(Unusable::PathOnly);
        }
        match self.mode & S_IFMT {
            0o040_000 => Some(Unusable::Directory),
            0o010_000 => Some(Unusable::Fifo),
            0o140_000 => Some(Unusable::Socket),
            0o120_000 => Some(Unusable::Symlink),
            _ => None,
        }
    }

    /// Whether a usable `O_DIRECT` descriptor exists (docs/BEHAVIOUR.md §1.3).
    pub fn has_direct_io(&self) -> bool {
        matches!(self.direct, DirectIo::Available { .. })
    }

    /// Required memory alignment for direct I/O; 0 when there is no usable direct descriptor.
    pub fn dio_mem_align(&self) -> u32 {
        match self.direct {
            DirectIo::Available { mem_align, .. } => mem_align,
            DirectIo::Unavailable(_) => 0,
        }
    }

    /// Required file-offset and size alignment for direct I/O; 0 when there is no usable
    /// direct descriptor.
    pub fn dio_offset_align(&self) -> u32 {
        match self.direct {
            DirectIo::Available { offset_align, .. } => offset_align,
            DirectIo::Unavailable(_) => 0,
        }
    }

    /// The mount type, if the filesystem is known.
    pub fn fs_type(&self) -> Option<&str> {
        self.filesystem.as_ref().map(|f| f.fs_type.as_str())
    }

    /// The ext4 journaling mode, if the filesystem is ext4.
    pub fn ext4_journal(&self) -> Option<Ext4Journal> {
        self.filesystem.as_ref().and_then(|f| f.ext4_journal)
    }

    /// Whether the `fstatfs` magic agrees with the mount type from mountinfo. `None` when
    /// there is nothing to compare: no filesystem, a magic and type both unknown to
    /// [`magic_name`](crate::magic_name)'s table, or a block device (its magic is that of
    /// the filesystem holding the device node, not of what is mounted on it).
    pub fn magic_agrees(&self) -> Option<bool> {
        if self.kind == FileKind::BlockDevice {
            return None;
        }
        let fs = self.filesystem.as_ref()?;
        crate::magic::magic_matches(self.statfs_magic, &fs.fs_type)
    }
}

/// `O_PATH` as the `F_GETFL` bits hold it.
fn o_path_bits() -> i32 {
    rustix::fs::OFlags::PATH.bits() as i32
}
