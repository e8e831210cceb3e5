//! The probe against real files: ext4 in each `data=` mode, xfs and tmpfs on fresh mounts, a
//! loop device used as a block device, FIFOs, directories and procfs. The mounted ones need
//! root and loop devices (xfs also `mkfs.xfs`) and say SKIP without them
//! (`HIPFILE_TEST_STRICT=1` makes that a failure). Each prints what the kernel reported.

// Helpers outside #[test] functions too: an unwrap that fails is a failing test.
#![allow(clippy::unwrap_used)]

use hipfile_probe::mountinfo::{self, MountEntry};
use hipfile_probe::{
    AlignSource, Descriptor, DirectIo, Ext4Journal, FileFacts, FileKind, Filesystem,
    NoDirectReason, ProbedFile, file_facts, probe_fd,
};
use hipfile_testfs::{Ext4Data, MountedFs, TempDir, fifo, loop_device, require};
use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::fs::{Mode, OFlags};
use rustix::io::FdFlags;
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

const EXT4_MAGIC: u64 = 0xEF53;
const XFS_MAGIC: u64 = 0x5846_5342;
const TMPFS_MAGIC: u64 = 0x0102_1994;
const PROC_MAGIC: u64 = 0x9FA0;

fn open(path: &Path, flags: OFlags) -> OwnedFd {
    rustix::fs::open(path, flags | OFlags::CLOEXEC, Mode::from_raw_mode(0o644))
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

fn data_file(dir: &Path, name: &str, len: usize) -> std::path::PathBuf {
    let path = dir.join(name);
    let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, bytes).unwrap();
    path
}

fn getfl(fd: BorrowedFd<'_>) -> OFlags {
    rustix::fs::fcntl_getfl(fd).unwrap()
}

fn mounts() -> Vec<MountEntry> {
    mountinfo::parse(&String::from_utf8_lossy(
        &std::fs::read("/proc/self/mountinfo").unwrap(),
    ))
}

/// Probes `path` opened with `flags` and prints what came back.
fn probe(path: &Path, flags: OFlags) -> (OwnedFd, ProbedFile) {
    let fd = open(path, flags);
    let probed = probe_fd(fd.as_fd()).unwrap_or_else(|e| panic!("probe {}: {e}", path.display()));
    let f = &probed.facts;
    println!(
        "{}: kind {:?}, dev {:?}, rdev {:?}, fs {:?} {:?}, magic {:#x}, direct {:?}",
        path.display(),
        f.kind,
        f.dev,
        f.rdev,
        f.fs_type(),
        f.filesystem.as_ref().map(|fs| &fs.super_options),
        f.statfs_magic,
        f.direct
    );
    assert_consistent(fd.as_fd(), &probed);
    (fd, probed)
}

/// What holds for every probe: descriptors match `direct`, the buffered one lacks
/// `O_DIRECT`, the direct one has it, and the filesystem is mountinfo's entry for the device.
fn assert_consistent(caller: BorrowedFd<'_>, p: &ProbedFile) {
    assert_eq!(p.direct_fd.is_some(), p.facts.has_direct_io(), "{p:?}");
    if let Some(direct) = &p.direct_fd {
        assert!(
            getfl(direct.as_fd(caller)).contains(OFlags::DIRECT),
            "{p:?}"
        );
    }
    assert!(
        !getfl(p.buffered_fd.as_fd(caller)).contains(OFlags::DIRECT),
        "{p:?}"
    );
    for owned in [p.direct_fd.as_ref(), Some(&p.buffered_fd)]
        .into_iter()
        .flatten()
    {
        if let Descriptor::Owned(fd) = owned {
            assert!(
                rustix::io::fcntl_getfd(fd)
                    .unwrap()
                    .contains(FdFlags::CLOEXEC)
            );
        }
    }
    if !p.facts.has_direct_io() {
        assert_eq!(
            (p.facts.dio_mem_align(), p.facts.dio_offset_align()),
            (0, 0)
        );
    }
    assert_filesystem_is_mountinfos(&p.facts);
}

/// The filesystem reported is exactly mountinfo's first entry for the device; `None` only when
/// mountinfo has no such device.
fn assert_filesystem_is_mountinfos(f: &FileFacts) {
    let (major, minor) = if f.kind == FileKind::BlockDevice {
        f.rdev
    } else {
        f.dev
    };
    let mounts = mounts();
    let entry = mountinfo::find_by_device(&mounts, major, minor);
    assert_eq!(
        f.filesystem,
        entry.map(Filesystem::from),
        "device {major}:{minor}"
    );
}

fn assert_statx_alignment(f: &FileFacts) -> (u32, u32) {
    match f.direct {
        DirectIo::Available {
            mem_align,
            offset_align,
            source: AlignSource::Statx,
        } => {
            assert!(mem_align > 0 && offset_align > 0);
            assert!(
                mem_align.is_power_of_two() && offset_align.is_power_of_two(),
                "{f:?}"
            );
            (mem_align, offset_align)
        }
        other => panic!("expected alignments from statx, got {other:?}"),
    }
}

fn assert_ext4(fs: &MountedFs, f: &FileFacts, journal: Ext4Journal) {
    assert_eq!(f.kind, FileKind::Regular);
    assert_eq!(f.fs_type(), Some("ext4"));
    assert_eq!(f.ext4_journal(), Some(journal));
    assert_eq!(f.statfs_magic, EXT4_MAGIC);
    assert_eq!(f.magic_agrees(), Some(true));
    let on = f.filesystem.as_ref().unwrap();
    assert_eq!(on.mount_point, fs.path());
    assert_eq!(Path::new(&on.source), fs.loop_device().unwrap().path());
    assert_eq!(f.rdev, (0, 0));
    assert_eq!(f.size, 1 << 20);
}

#[test]
fn ext4_data_ordered_has_direct_io_with_statx_alignments() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let path = data_file(fs.path(), "data", 1 << 20);
    let (_fd, p) = probe(&path, OFlags::RDONLY);
    assert_ext4(&fs, &p.facts, Ext4Journal::Ordered);
    let (mem, offset) = assert_statx_alignment(&p.facts);
    println!("ext4 data=ordered: dio_mem_align {mem}, dio_offset_align {offset}");
    // ext4 does not show its default journaling mode.
    let options = &p.facts.filesystem.as_ref().unwrap().super_options;
    assert!(
        !options.iter().any(|o| o.starts_with("data=")),
        "{options:?}"
    );
    assert!(matches!(p.direct_fd, Some(Descriptor::Owned(_))));
    assert!(p.buffered_fd.is_caller());
}

#[test]
fn ext4_mounted_with_data_ordered_lists_it_and_is_the_same() {
    let fs = require!(MountedFs::ext4(Ext4Data::OrderedExplicit, 64));
    let path = data_file(fs.path(), "data", 1 << 20);
    let (_fd, p) = probe(&path, OFlags::RDONLY);
    assert_ext4(&fs, &p.facts, Ext4Journal::Ordered);
    let options = &p.facts.filesystem.as_ref().unwrap().super_options;
    assert!(options.contains(&"data=ordered".to_owned()), "{options:?}");
    assert_statx_alignment(&p.facts);
}

#[test]
fn ext4_data_journal_opens_o_direct_but_reports_alignment_zero() {
    let fs = require!(MountedFs::ext4(Ext4Data::Journal, 64));
    let path = data_file(fs.path(), "data", 1 << 20);
    // The O_DIRECT open itself succeeds; only statx tells that direct I/O will not happen.
    let raw = raw_dioalign(&path);
    println!("ext4 data=journal: statx DIOALIGN (in mask, mem, offset) = {raw:?}");
    assert_eq!(raw, (true, 0, 0));
    let (_fd, p) = probe(&path, OFlags::RDWR);
    assert_ext4(&fs, &p.facts, Ext4Journal::Journal);
    let options = &p.facts.filesystem.as_ref().unwrap().super_options;
    assert!(options.contains(&"data=journal".to_owned()), "{options:?}");
    assert_eq!(
        p.facts.direct,
        DirectIo::Unavailable(NoDirectReason::AlignmentZero)
    );
    assert!(p.direct_fd.is_none());
    assert!(p.buffered_fd.is_caller());

    // A caller descriptor that has O_DIRECT is no more usable: it gets a buffered twin.
    let (_fd, p) = probe(&path, OFlags::RDWR | OFlags::DIRECT);
    assert_eq!(
        p.facts.direct,
        DirectIo::Unavailable(NoDirectReason::AlignmentZero)
    );
    assert!(p.direct_fd.is_none());
    assert!(matches!(p.buffered_fd, Descriptor::Owned(_)));
}

#[test]
fn ext4_data_writeback_has_direct_io() {
    let fs = require!(MountedFs::ext4(Ext4Data::Writeback, 64));
    let path = data_file(fs.path(), "data", 1 << 20);
    let (_fd, p) = probe(&path, OFlags::RDONLY);
    assert_ext4(&fs, &p.facts, Ext4Journal::Writeback);
    let options = &p.facts.filesystem.as_ref().unwrap().super_options;
    assert!(
        options.contains(&"data=writeback".to_owned()),
        "{options:?}"
    );
    let (mem, offset) = assert_statx_alignment(&p.facts);
    println!("ext4 data=writeback: dio_mem_align {mem}, dio_offset_align {offset}");
}

#[test]
fn xfs_has_direct_io_with_statx_alignments() {
    let fs = require!(MountedFs::xfs(300));
    let path = data_file(fs.path(), "data", 1 << 20);
    let (_fd, p) = probe(&path, OFlags::RDWR);
    let f = &p.facts;
    assert_eq!(f.kind, FileKind::Regular);
    assert_eq!(f.fs_type(), Some("xfs"));
    assert_eq!(f.ext4_journal(), None);
    assert_eq!(f.statfs_magic, XFS_MAGIC);
    assert_eq!(f.magic_agrees(), Some(true));
    assert_eq!(f.filesystem.as_ref().unwrap().mount_point, fs.path());
    let (mem, offset) = assert_statx_alignment(f);
    println!("xfs: dio_mem_align {mem}, dio_offset_align {offset}");
}

/// `statx` with `STATX_DIOALIGN` on `path` opened with `O_DIRECT`: whether the mask has it,
/// and the two alignments.
fn raw_dioalign(path: &Path) -> (bool, u32, u32) {
    let dioalign = rustix::fs::StatxFlags::DIOALIGN;
    let fd = open(path, OFlags::RDONLY | OFlags::DIRECT);
    let stx = rustix::fs::statx(&fd, "", rustix::fs::AtFlags::EMPTY_PATH, dioalign).unwrap();
    (
        stx.stx_mask & dioalign.bits() != 0,
        stx.stx_dio_mem_align,
        stx.stx_dio_offset_align,
    )
}

/// Since Linux 6.6 tmpfs accepts `O_DIRECT` opens, but it does not report `STATX_DIOALIGN`,
/// so the alignment is the assumed 4096.
#[test]
fn tmpfs_opens_o_direct_without_reporting_alignments() {
    let fs = require!(MountedFs::tmpfs(16));
    let path = data_file(fs.path(), "data", 1 << 20);
    let raw = raw_dioalign(&path);
    println!("tmpfs: statx DIOALIGN (in mask, mem, offset) = {raw:?}");
    assert_eq!(raw, (false, 0, 0));
    let (_fd, p) = probe(&path, OFlags::RDWR);
    let f = &p.facts;
    assert_eq!(f.kind, FileKind::Regular);
    assert_eq!(f.fs_type(), Some("tmpfs"));
    assert_eq!(f.ext4_journal(), None);
    assert_eq!(f.statfs_magic, TMPFS_MAGIC);
    assert_eq!(f.magic_agrees(), Some(true));
    assert_eq!(f.filesystem.as_ref().unwrap().mount_point, fs.path());
    assert_eq!(
        f.direct,
        DirectIo::Available {
            mem_align: 4096,
            offset_align: 4096,
            source: AlignSource::Assumed
        }
    );
    assert!(matches!(p.direct_fd, Some(Descriptor::Owned(_))));
}

#[test]
fn a_loop_device_is_a_block_device_without_a_filesystem() {
    let dev = require!(loop_device(16));
    let (_fd, p) = probe(dev.path(), OFlags::RDWR);
    let f = &p.facts;
    assert_eq!(f.kind, FileKind::BlockDevice);
    assert_eq!(f.rdev, dev.rdev());
    assert_eq!(f.filesystem, None);
    assert!(mountinfo::find_by_device(&mounts(), f.rdev.0, f.rdev.1).is_none());
    // The node lives on devtmpfs; its magic says nothing about the device's contents.
    assert_eq!(f.magic_agrees(), None);
    match f.direct {
        DirectIo::Available {
            mem_align,
            offset_align,
            source,
        } => {
            println!("loop block device: mem {mem_align}, offset {offset_align}, from {source:?}");
            assert!(matches!(
                source,
                AlignSource::Statx | AlignSource::LogicalBlockSize
            ));
            assert_eq!(offset_align, 512);
        }
        other => panic!("a loop device does direct I/O: {other:?}"),
    }
}

#[test]
fn a_loop_device_with_ext4_mounted_reports_that_filesystem() {
    let fs = require!(MountedFs::ext4(Ext4Data::Writeback, 64));
    let dev = fs.loop_device().unwrap();
    let (_fd, p) = probe(dev.path(), OFlags::RDONLY);
    let f = &p.facts;
    assert_eq!(f.kind, FileKind::BlockDevice);
    assert_eq!(f.rdev, dev.rdev());
    let on = f.filesystem.as_ref().unwrap();
    assert_eq!(
        (on.fs_type.as_str(), on.mount_point.as_path()),
        ("ext4", fs.path())
    );
    assert_eq!(on.ext4_journal, Some(Ext4Journal::Writeback));
    assert!(f.has_direct_io());
}

/// Runs `f` on another thread and fails if it takes more than ten seconds (a FIFO reopen
/// would block forever).
fn within_deadline<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the probe returned")
}

#[test]
fn a_fifo_and_a_directory_are_other_and_not_reopened() {
    let dir = TempDir::new("probe");
    let pipe = fifo(dir.path());
    for (path, flags) in [
        (pipe.clone(), OFlags::RDONLY | OFlags::NONBLOCK),
        (pipe, OFlags::RDWR),
        (dir.path().to_owned(), OFlags::RDONLY | OFlags::DIRECTORY),
    ] {
        let fd = open(&path, flags);
        let p = within_deadline(move || {
            let p = probe_fd(fd.as_fd()).unwrap();
            (p.facts, p.direct_fd.is_none(), p.buffered_fd.is_caller())
        });
        let (facts, no_direct, buffered_is_caller) = p;
        println!("{}: {:?}", path.display(), facts.direct);
        assert_eq!(facts.kind, FileKind::Other, "{}", path.display());
        assert_eq!(
            facts.direct,
            DirectIo::Unavailable(NoDirectReason::NotAttempted)
        );
        assert!(no_direct && buffered_is_caller);
        assert_filesystem_is_mountinfos(&facts);
    }
}

#[test]
fn a_caller_descriptor_with_o_direct_is_the_direct_one() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let path = data_file(fs.path(), "data", 1 << 20);
    let (fd, p) = probe(&path, OFlags::RDWR | OFlags::DIRECT);
    assert!(getfl(fd.as_fd()).contains(OFlags::DIRECT));
    assert_ne!(p.facts.status_flags & OFlags::DIRECT.bits() as i32, 0);
    assert!(matches!(p.direct_fd, Some(Descriptor::Caller)));
    let Descriptor::Owned(buffered) = &p.buffered_fd else {
        panic!("{p:?}")
    };
    let flags = getfl(buffered.as_fd());
    assert!(!flags.contains(OFlags::DIRECT), "{flags:?}");
    assert_eq!(flags & OFlags::ACCMODE, OFlags::RDWR);
    assert_statx_alignment(&p.facts);
}

#[test]
fn the_direct_reopen_drops_append_and_never_truncates() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let path = fs.path().join("log");
    let fd = open(
        &path,
        OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::TRUNC,
    );
    rustix::io::write(&fd, &[7u8; 8192]).unwrap();
    let p = probe_fd(fd.as_fd()).unwrap();
    assert_consistent(fd.as_fd(), &p);
    let Some(Descriptor::Owned(direct)) = &p.direct_fd else {
        panic!("{p:?}")
    };
    let flags = getfl(direct.as_fd());
    assert!(
        flags.contains(OFlags::DIRECT) && !flags.contains(OFlags::APPEND),
        "{flags:?}"
    );
    assert_eq!(flags & OFlags::ACCMODE, OFlags::WRONLY);
    assert_ne!(p.facts.status_flags & OFlags::APPEND.bits() as i32, 0);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 8192);
}

#[test]
fn o_tmpfile_and_o_nofollow_callers_are_reopened_as_themselves() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let tmp = open(fs.path(), OFlags::RDWR | OFlags::TMPFILE);
    rustix::io::write(&tmp, b"hello").unwrap();
    let p = probe_fd(tmp.as_fd()).unwrap();
    assert_consistent(tmp.as_fd(), &p);
    assert!(p.facts.has_direct_io());
    assert_eq!(p.facts.size, 5);
    // The reopen is the same (unnamed) file, not a second temporary one.
    let Some(Descriptor::Owned(direct)) = &p.direct_fd else {
        panic!("{p:?}")
    };
    let (a, b) = (
        rustix::fs::fstat(&tmp).unwrap(),
        rustix::fs::fstat(direct).unwrap(),
    );
    assert_eq!((a.st_dev, a.st_ino), (b.st_dev, b.st_ino));
    assert_eq!(
        std::fs::read_dir(fs.path()).unwrap().count(),
        1,
        "only lost+found"
    );

    let path = data_file(fs.path(), "data", 4096);
    let (_fd, p) = probe(&path, OFlags::RDONLY | OFlags::NOFOLLOW);
    assert!(p.facts.has_direct_io());
}

#[test]
fn procfs_refuses_o_direct_with_einval() {
    let (_fd, p) = probe(Path::new("/proc/self/status"), OFlags::RDONLY);
    let f = &p.facts;
    assert_eq!(f.kind, FileKind::Regular);
    assert_eq!(
        f.direct,
        DirectIo::Unavailable(NoDirectReason::OpenRejected)
    );
    assert!(p.direct_fd.is_none() && p.buffered_fd.is_caller());
    assert_eq!(f.statfs_magic, PROC_MAGIC);
    if f.filesystem.is_some() {
        assert_eq!(f.fs_type(), Some("proc"));
        assert_eq!(f.magic_agrees(), Some(true));
    }
}

#[test]
fn files_anywhere_report_only_devices_mountinfo_has() {
    let dir = TempDir::new("probe");
    let file = data_file(dir.path(), "data", 100);
    for path in [
        file.as_path(),
        Path::new("/proc/self/status"),
        Path::new("/dev/null"),
        Path::new("Cargo.toml"),
    ] {
        let fd = open(path, OFlags::RDONLY);
        let f = file_facts(fd.as_fd()).unwrap();
        assert_filesystem_is_mountinfos(&f);
    }
    let f = file_facts(open(&file, OFlags::RDONLY).as_fd()).unwrap();
    assert_eq!(f.kind, FileKind::Regular);
    assert_eq!(f.size, 100);
    assert!(
        f.filesystem.is_some(),
        "the temporary directory's filesystem is mounted: {f:?}"
    );
    // A character device is Other, with no rdev.
    let null = file_facts(open(Path::new("/dev/null"), OFlags::RDONLY).as_fd()).unwrap();
    assert_eq!((null.kind, null.rdev), (FileKind::Other, (0, 0)));
}

/// The inode a descriptor refers to.
fn inode(fd: BorrowedFd<'_>) -> u64 {
    rustix::fs::fstat(fd).unwrap().st_ino
}

#[test]
fn a_thread_with_its_own_descriptor_table_reopens_its_own_file() {
    let dir = TempDir::new("probe");
    let main_path = data_file(dir.path(), "main.bin", 4096);
    let thread_path = data_file(dir.path(), "thread.bin", 4096);
    let main_file = open(&main_path, OFlags::RDONLY);
    let number = main_file.as_fd().as_raw_fd();
    let main_inode = inode(main_file.as_fd());
    let (want, direct, buffered) = std::thread::spawn(move || {
        // SAFETY: `unshare(CLONE_FILES)` gives this thread a private copy of the descriptor
        // table; it takes no pointers.
        #[allow(unsafe_code)]
        let r = unsafe { libc::unshare(libc::CLONE_FILES) };
        assert_eq!(r, 0, "unshare: {}", std::io::Error::last_os_error());
        let other = open(&thread_path, OFlags::RDONLY);
        // In this table `number` is a copy of the main thread's `main.bin`, which nothing in
        // this thread owns: make it `thread.bin` here, as a program that unshares might.
        // SAFETY: see above; `slot` is the only owner of the number in this table.
        #[allow(unsafe_code)]
        let mut slot = unsafe { OwnedFd::from_raw_fd(number) };
        rustix::io::dup2(&other, &mut slot).unwrap();
        let want = inode(slot.as_fd());
        let probed = probe_fd(slot.as_fd()).unwrap();
        let direct = probed
            .direct_fd
            .as_ref()
            .map(|d| inode(d.as_fd(slot.as_fd())));
        let buffered = inode(probed.buffered_fd.as_fd(slot.as_fd()));
        (want, direct, buffered)
    })
    .join()
    .unwrap();
    assert_ne!(
        want, main_inode,
        "the thread's number refers to its own file"
    );
    assert_eq!(buffered, want);
    assert_eq!(
        direct,
        Some(want),
        "the O_DIRECT reopen is the thread's file"
    );
}

#[test]
fn an_append_descriptor_is_never_the_one_written_through() {
    let dir = TempDir::new("probe");
    let path = data_file(dir.path(), "log.bin", 8192);
    for flags in [
        OFlags::RDWR | OFlags::APPEND,
        OFlags::WRONLY | OFlags::APPEND,
    ] {
        let fd = open(&path, flags);
        let p = probe_fd(fd.as_fd()).unwrap();
        assert!(!p.buffered_fd.is_caller(), "{flags:?}");
        let buffered = getfl(p.buffered_fd.as_fd(fd.as_fd()));
        assert!(!buffered.contains(OFlags::APPEND), "{buffered:?}");
        assert!(!buffered.contains(OFlags::DIRECT), "{buffered:?}");
        assert_eq!(inode(p.buffered_fd.as_fd(fd.as_fd())), inode(fd.as_fd()));
        if let Some(d) = &p.direct_fd {
            assert!(!d.is_caller());
            assert!(!getfl(d.as_fd(fd.as_fd())).contains(OFlags::APPEND));
        }
    }
}

#[test]
fn descriptors_no_request_can_use_are_named() {
    use hipfile_probe::Unusable;
    let dir = TempDir::new("probe");
    let file = data_file(dir.path(), "f.bin", 10);
    let cases = [
        (
            dir.path().to_owned(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Some(Unusable::Directory),
        ),
        (
            fifo(dir.path()),
            OFlags::RDONLY | OFlags::NONBLOCK,
            Some(Unusable::Fifo),
        ),
        (file.clone(), OFlags::PATH, Some(Unusable::PathOnly)),
        (file, OFlags::RDONLY, None),
        (std::path::PathBuf::from("/dev/null"), OFlags::RDWR, None),
    ];
    for (path, flags, want) in cases {
        let fd = open(&path, flags);
        let facts = file_facts(fd.as_fd()).unwrap();
        assert_eq!(facts.unusable(), want, "{}", path.display());
    }
    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
    assert_eq!(
        file_facts(a.as_fd()).unwrap().unusable(),
        Some(Unusable::Socket)
    );
}
