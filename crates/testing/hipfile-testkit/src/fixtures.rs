//! Made-up and real inputs for the decision path and the backends: file facts of the usual
//! kinds of file, device buffers, requests, and one-call helpers that validate, score and serve
//! a request on a backend as core does.
//!
//! The made-up facts are what the probe would say of such a file; tests change a field with
//! struct update syntax (`FileFacts { size: 0, ..xfs_file() }`).

use hipfile_core::buffer::{BufferUse, check_buffer};
use hipfile_core::{
    Backend, BackendError, BufferFacts, DevicePtr, Error, GpuRuntime, IoOutcome, IoTarget,
    MemoryKind, MemoryTypes, Op, Request, Submission, ValidRequest, Verdict,
};
use hipfile_probe::{
    AlignSource, DirectIo, Ext4Journal, FileFacts, FileKind, Filesystem, NoDirectReason,
};
use std::fs::File;
use std::os::fd::AsFd;
use std::path::PathBuf;

/// A device address for made-up buffers: 4096-aligned, in the range a runtime hands out.
pub const BASE: u64 = 0x7f00_0000_0000;

/// `statfs` magic numbers of the filesystems the fixtures name.
pub mod magic {
    /// ext2/3/4.
    pub const EXT4: u64 = 0xef53;
    /// xfs.
    pub const XFS: u64 = 0x5846_5342;
    /// tmpfs.
    pub const TMPFS: u64 = 0x0102_1994;
}

/// A filesystem of type `fs_type` mounted at `/mnt` from `/dev/loop0`, read-write.
pub fn filesystem(fs_type: &str, ext4_journal: Option<Ext4Journal>) -> Filesystem {
    Filesystem {
        fs_type: fs_type.into(),
        mount_point: PathBuf::from("/mnt"),
        source: "/dev/loop0".into(),
        super_options: vec!["rw".into()],
        ext4_journal,
    }
}

/// Direct I/O with these alignments, as `statx` reports them.
pub fn direct_io(mem_align: u32, offset_align: u32) -> DirectIo {
    DirectIo::Available {
        mem_align,
        offset_align,
        source: AlignSource::Statx,
    }
}

/// A 1 MiB regular file on xfs with a usable `O_DIRECT` descriptor (4096-byte alignments):
/// what the fastpath serves.
pub fn xfs_file() -> FileFacts {
    FileFacts {
        kind: FileKind::Regular,
        mode: 0o100_644,
        dev: (7, 0),
        rdev: (0, 0),
        size: 1 << 20,
        status_flags: 0,
        filesystem: Some(filesystem("xfs", None)),
        statfs_magic: magic::XFS,
        direct: direct_io(4096, 4096),
    }
}

/// As [`xfs_file`], on ext4 with this journalling mode (the fastpath takes `Ordered` only).
pub fn ext4_file(journal: Ext4Journal) -> FileFacts {
    FileFacts {
        filesystem: Some(filesystem("ext4", Some(journal))),
        statfs_magic: magic::EXT4,
        ..xfs_file()
    }
}

/// As [`xfs_file`], on tmpfs, which refuses `O_DIRECT`: only the fallback serves it.
pub fn tmpfs_file() -> FileFacts {
    FileFacts {
        filesystem: Some(filesystem("tmpfs", None)),
        statfs_magic: magic::TMPFS,
        direct: DirectIo::Unavailable(NoDirectReason::OpenRejected),
        ..xfs_file()
    }
}

/// A 1 GiB block device (`/dev/loop0`) with a usable `O_DIRECT` descriptor (512-byte
/// logical blocks).
pub fn block_device() -> FileFacts {
    FileFacts {
        kind: FileKind::BlockDevice,
        mode: 0o060_660,
        dev: (0, 6),
        rdev: (7, 0),
        size: 1 << 30,
        status_flags: 0,
        filesystem: None,
        statfs_magic: 0,
        direct: DirectIo::Available {
            mem_align: 512,
            offset_align: 512,
            source: AlignSource::LogicalBlockSize,
        },
    }
}

/// As [`xfs_file`], with nothing known of its filesystem and no `O_DIRECT` descriptor tried:
/// a file only the fallback may serve.
pub fn unusable_file() -> FileFacts {
    FileFacts {
        filesystem: None,
        statfs_magic: 0,
        direct: DirectIo::Unavailable(NoDirectReason::NotAttempted),
        ..xfs_file()
    }
}

/// The facts of `len` bytes of device memory of device 0 at `base`.
pub fn device_buffer(base: u64, len: u64) -> BufferFacts {
    BufferFacts {
        base: DevicePtr(base),
        len,
        memory: MemoryKind::Device,
        device: 0,
    }
}

/// A request, not validated yet.
pub fn request(op: Op, size: u64, file_offset: u64, buffer_offset: u64) -> Request {
    Request {
        op,
        size,
        file_offset,
        buffer_offset,
    }
}

/// `/dev/null`, open for reading: a descriptor for requests that must not move bytes.
///
/// # Panics
///
/// If it cannot be opened.
pub fn dev_null() -> File {
    File::open("/dev/null").expect("cannot open /dev/null")
}

/// A target with `file` as the buffered descriptor and no direct one.
pub fn buffered(file: &File) -> IoTarget<'_> {
    IoTarget {
        direct: None,
        buffered: file.as_fd(),
    }
}

/// A validated request with the facts of its file and buffer, and `/dev/null` to serve it
/// on: what `submit` and `decide` take, for tests of the decision path whose backends move no
/// bytes (mocks, scripted backends).
#[derive(Debug)]
pub struct SubmitFixture {
    /// The request, validated against [`SubmitFixture::buffer`].
    pub request: ValidRequest,
    /// The file's facts.
    pub file: FileFacts,
    /// The buffer's facts.
    pub buffer: BufferFacts,
    dev_null: File,
}

impl SubmitFixture {
    /// `request` on `file` and `buffer`.
    ///
    /// # Panics
    ///
    /// If the request is not valid for the buffer.
    pub fn new(file: FileFacts, buffer: BufferFacts, request: Request) -> SubmitFixture {
        let request = request
            .validate(&buffer)
            .expect("the request is not valid for the buffer");
        SubmitFixture {
            request,
            file,
            buffer,
            dev_null: dev_null(),
        }
    }

    /// The submission the backends see.
    pub fn submission(&self) -> Submission<'_> {
        Submission {
            request: &self.request,
            file: &self.file,
            buffer: &self.buffer,
        }
    }

    /// `/dev/null` as the buffered descriptor, no direct one.
    pub fn target(&self) -> IoTarget<'_> {
        buffered(&self.dev_null)
    }

    /// Core's `submit` over `backends`: scoring, selection, I/O and the retry rules.
    pub fn submit(&self, backends: &[&dyn Backend]) -> Result<IoOutcome, Error> {
        hipfile_core::submit(backends, &self.submission(), &self.target())
    }
}

/// `len` bytes of a pattern that differs at every offset of a 251-byte cycle, shifted by
/// `seed`.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ seed.wrapping_mul(31))
        .collect()
}

/// One request on a buffer of a test runtime: `size` bytes at `file_offset`, at
/// `buffer_offset` into the buffer at `base` (registered with `len` under `rule`, or used
/// unregistered, `len` its owner's length).
#[derive(Debug, Clone, Copy)]
pub struct Io {
    /// Read or write.
    pub op: Op,
    /// The buffer's base.
    pub base: DevicePtr,
    /// The registered length of the buffer.
    pub len: u64,
    /// Where in the buffer.
    pub buffer_offset: u64,
    /// Where in the file.
    pub file_offset: u64,
    /// How many bytes.
    pub size: u64,
    /// The memory rule the buffer is checked under ([`MemoryTypes::HipFile`] unless set).
    pub rule: MemoryTypes,
    /// Whether the buffer is used unregistered (false unless set).
    pub unregistered: bool,
}

impl Io {
    /// `size` bytes at `file_offset`, at `buffer_offset` into the buffer at `base`
    /// (registered with `len`).
    pub fn new(
        op: Op,
        base: DevicePtr,
        len: u64,
        buffer_offset: u64,
        file_offset: u64,
        size: u64,
    ) -> Io {
        Io {
            op,
            base,
            len,
            buffer_offset,
            file_offset,
            size,
            rule: MemoryTypes::HipFile,
            unregistered: false,
        }
    }

    /// The same request, its buffer checked under `rule`.
    pub fn under(self, rule: MemoryTypes) -> Io {
        Io { rule, ..self }
    }

    /// The same request, its buffer used unregistered.
    pub fn unregistered(self) -> Io {
        Io {
            unregistered: true,
            ..self
        }
    }

    /// How the buffer is checked.
    pub fn usage(&self) -> BufferUse {
        if self.unregistered {
            BufferUse::Unregistered { len: self.len }
        } else {
            BufferUse::Register {
                len: self.len,
                rule: self.rule,
            }
        }
    }
}

/// Checks the buffer against `runtime` and validates the request as core does, then scores
/// it on `backend` and serves it whatever the score: the verdict and what `io` returned.
///
/// # Panics
///
/// If the buffer or the request is invalid (a test that means to pass invalid input calls
/// core itself).
pub fn score_and_serve(
    backend: &dyn Backend,
    runtime: &dyn GpuRuntime,
    file: &FileFacts,
    target: &IoTarget<'_>,
    io: Io,
) -> (Verdict, Result<u64, BackendError>) {
    serve(backend, runtime, file, target, io, false)
}

/// As [`score_and_serve`], asserting that the backend accepts the request before it serves
/// it.
pub fn serve_accepted(
    backend: &dyn Backend,
    runtime: &dyn GpuRuntime,
    file: &FileFacts,
    target: &IoTarget<'_>,
    io: Io,
) -> Result<u64, BackendError> {
    serve(backend, runtime, file, target, io, true).1
}

fn serve(
    backend: &dyn Backend,
    runtime: &dyn GpuRuntime,
    file: &FileFacts,
    target: &IoTarget<'_>,
    io: Io,
    require_accepted: bool,
) -> (Verdict, Result<u64, BackendError>) {
    // SAFETY: a test runtime keeps its allocations for as long as it lives, which is past
    // this call (it is borrowed for it).
    let buffer = unsafe { check_buffer(runtime, io.base, io.usage()) }
        .expect("the buffer is not valid memory of the runtime");
    let request = request(io.op, io.size, io.file_offset, io.buffer_offset)
        .validate_checked(&buffer)
        .expect("the request is not valid for the buffer");
    let s = Submission {
        request: &request,
        file,
        buffer: buffer.facts(),
    };
    let verdict = backend.score(&s);
    assert!(
        !require_accepted || verdict.accepted(),
        "the backend refuses {request:?}: {verdict:?}"
    );
    (verdict, backend.io(&s, target))
}

/// Serves `io` on `file` through `backend`, with the file's probed facts and only its
/// buffered descriptor (as for a file that has no `O_DIRECT` one), asserting that the backend
/// accepts it.
///
/// # Panics
///
/// As [`score_and_serve`], and if the file cannot be probed.
pub fn run(
    backend: &dyn Backend,
    runtime: &dyn GpuRuntime,
    file: &File,
    io: Io,
) -> Result<u64, BackendError> {
    let facts = hipfile_probe::file_facts(file.as_fd()).expect("cannot probe the file");
    serve_accepted(backend, runtime, &facts, &buffered(file), io)
}

/// As [`run`], with the descriptors and facts of a registration: the file is probed, and its
/// `O_DIRECT` descriptor, if it has one, is passed on.
///
/// # Panics
///
/// As [`run`].
pub fn run_probed(
    backend: &dyn Backend,
    runtime: &dyn GpuRuntime,
    file: &File,
    io: Io,
) -> Result<u64, BackendError> {
    let probed = hipfile_probe::probe_fd(file.as_fd()).expect("cannot probe the file");
    let target = IoTarget {
        direct: probed.direct_fd.as_ref().map(|d| d.as_fd(file.as_fd())),
        buffered: probed.buffered_fd.as_fd(file.as_fd()),
    };
    serve_accepted(backend, runtime, &probed.facts, &target, io)
}
