//! The per-request decision path on the CPU, in nanoseconds per call: request validation,
//! each backend's score, the whole `decide` over both backends, and settling a `Config`.
//!
//! The core may not depend on the backends, so two local backends stand in for them: they
//! score by the same rules as the fastpath (SPEC.md §1: configuration, runtime, file kind and
//! filesystem, memory kind, alignment) and the fallback (compatibility mode, memory kind).
//! They never serve a request. Run with `cargo bench -p hipfile-core`.

#![allow(missing_docs, clippy::unwrap_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use hipfile_core::{
    Backend, BackendError, BackendKind, BufferFacts, ConfigBuilder, DevicePtr, IoTarget,
    MemoryKind, Op, Reason, Request, Submission, Verdict, decide,
};
use hipfile_probe::{
    AlignSource, DirectIo, Ext4Journal, FileFacts, FileKind, Filesystem, NoDirectReason,
};
use std::hint::black_box;
use std::path::PathBuf;

/// Scores as the fastpath does.
struct FastpathLike {
    force_compat_mode: bool,
    amd_file_io: bool,
    unsupported_file_systems: bool,
}

fn supported_file_system(file: &FileFacts) -> bool {
    match file.fs_type() {
        Some("xfs") => true,
        Some("ext4") => file.ext4_journal() == Some(Ext4Journal::Ordered),
        _ => false,
    }
}

impl Backend for FastpathLike {
    fn kind(&self) -> BackendKind {
        BackendKind::Fastpath
    }

    fn score(&self, s: &Submission<'_>) -> Verdict {
        let mut reasons = Vec::new();
        if self.force_compat_mode {
            reasons.push(Reason::ForceCompatMode);
        }
        if !self.amd_file_io {
            reasons.push(Reason::RuntimeLacksAmdFileIo);
        }
        let direct = s.file.has_direct_io();
        if direct {
            match s.file.kind {
                FileKind::Regular => {
                    if !self.unsupported_file_systems && !supported_file_system(s.file) {
                        reasons.push(Reason::UnsupportedFileSystem);
                    }
                }
                FileKind::BlockDevice => {}
                FileKind::Other => reasons.push(Reason::NotRegularFileOrBlockDevice),
            }
        } else {
            reasons.push(Reason::NoODirectFd);
        }
        if s.buffer.memory != MemoryKind::Device {
            reasons.push(Reason::BufferNotDeviceMemory);
        }
        if direct {
            let offset_align = u64::from(s.file.dio_offset_align());
            let mem_align = u64::from(s.file.dio_mem_align());
            if !s.request.file_offset.is_multiple_of(offset_align) {
                reasons.push(Reason::FileOffsetMisaligned);
            }
            if !s.request.size.is_multiple_of(offset_align) {
                reasons.push(Reason::SizeMisaligned);
            }
            if !s.request.address.0.is_multiple_of(mem_align) {
                reasons.push(Reason::BufferAddressMisaligned);
            }
        }
        Verdict::from_reasons(Verdict::FASTPATH_SCORE, reasons)
    }

    fn io(&self, _: &Submission<'_>, _: &IoTarget<'_>) -> Result<i64, BackendError> {
        Err(BackendError::Unsupported("a benchmark stand-in".into()))
    }
}

/// Scores as the fallback does.
struct FallbackLike {
    allow_compat_mode: bool,
}

impl Backend for FallbackLike {
    fn kind(&self) -> BackendKind {
        BackendKind::Fallback
    }

    fn score(&self, s: &Submission<'_>) -> Verdict {
        let mut reasons = Vec::new();
        if !self.allow_compat_mode {
            reasons.push(Reason::CompatModeDisallowed);
        }
        if s.buffer.memory != MemoryKind::Device {
            reasons.push(Reason::BufferNotDeviceMemory);
        }
        Verdict::from_reasons(Verdict::FALLBACK_SCORE, reasons)
    }

    fn io(&self, _: &Submission<'_>, _: &IoTarget<'_>) -> Result<i64, BackendError> {
        Err(BackendError::Unsupported("a benchmark stand-in".into()))
    }
}

/// A regular file on ext4 `data=ordered` with direct I/O, as the fastpath likes it.
fn ext4_file() -> FileFacts {
    FileFacts {
        kind: FileKind::Regular,
        mode: 0o100_644,
        dev: (259, 1),
        rdev: (0, 0),
        size: 8 << 30,
        status_flags: 0o2,
        filesystem: Some(Filesystem {
            fs_type: "ext4".into(),
            mount_point: PathBuf::from("/data"),
            source: "/dev/nvme0n1p1".into(),
            super_options: vec!["rw".into(), "data=ordered".into()],
            ext4_journal: Some(Ext4Journal::Ordered),
        }),
        statfs_magic: 0xef53,
        direct: DirectIo::Available {
            mem_align: 4,
            offset_align: 512,
            source: AlignSource::Statx,
        },
    }
}

/// A file without direct I/O (tmpfs, say): only the fallback serves it.
fn tmpfs_file() -> FileFacts {
    FileFacts {
        filesystem: Some(Filesystem {
            fs_type: "tmpfs".into(),
            mount_point: PathBuf::from("/tmp"),
            source: "tmpfs".into(),
            super_options: vec!["rw".into()],
            ext4_journal: None,
        }),
        statfs_magic: 0x0102_1994,
        direct: DirectIo::Unavailable(NoDirectReason::OpenRejected),
        ..ext4_file()
    }
}

fn device_buffer() -> BufferFacts {
    BufferFacts {
        base: DevicePtr(0x7f00_0000_0000),
        len: 64 << 20,
        memory: MemoryKind::Device,
        device: 0,
    }
}

fn request(size: u64, file_offset: i64) -> Request {
    Request {
        op: Op::Read,
        size,
        file_offset,
        buffer_offset: 0,
    }
}

fn benches(c: &mut Criterion) {
    let buffer = device_buffer();
    let fast = FastpathLike {
        force_compat_mode: false,
        amd_file_io: true,
        unsupported_file_systems: false,
    };
    let slow = FallbackLike {
        allow_compat_mode: true,
    };
    let backends: [&dyn Backend; 2] = [&fast, &slow];
    let ext4 = ext4_file();
    let tmpfs = tmpfs_file();
    let aligned = request(64 << 20, 1 << 30);
    let misaligned = request((64 << 20) - 1, 4097);

    c.bench_function("validate/accepted", |b| {
        b.iter(|| black_box(&aligned).validate(black_box(&buffer)))
    });
    c.bench_function("validate/rejected", |b| {
        let too_big = request(128 << 20, 0);
        b.iter(|| black_box(&too_big).validate(black_box(&buffer)))
    });

    let valid = aligned.validate(&buffer).unwrap();
    let valid_misaligned = misaligned.validate(&buffer).unwrap();
    let on = |file, request| Submission {
        request,
        file,
        buffer: &buffer,
    };
    let accepted = on(&ext4, &valid);
    let no_direct = on(&tmpfs, &valid);
    let unaligned = on(&ext4, &valid_misaligned);

    c.bench_function("score/fastpath/accept", |b| {
        b.iter(|| fast.score(black_box(&accepted)))
    });
    c.bench_function("score/fastpath/reject_no_o_direct", |b| {
        b.iter(|| fast.score(black_box(&no_direct)))
    });
    c.bench_function("score/fastpath/reject_misaligned", |b| {
        b.iter(|| fast.score(black_box(&unaligned)))
    });
    c.bench_function("score/fallback/accept", |b| {
        b.iter(|| slow.score(black_box(&accepted)))
    });

    c.bench_function("decide/fastpath_wins", |b| {
        b.iter(|| decide(black_box(&backends), black_box(&accepted)))
    });
    c.bench_function("decide/fallback_wins", |b| {
        b.iter(|| decide(black_box(&backends), black_box(&no_direct)))
    });
    c.bench_function("validate_then_decide", |b| {
        b.iter(|| {
            let valid = black_box(&aligned).validate(&buffer).unwrap();
            let submission = Submission {
                request: &valid,
                file: black_box(&ext4),
                buffer: &buffer,
            };
            decide(&backends, &submission)
        })
    });

    c.bench_function("config/defaults", |b| {
        b.iter(|| ConfigBuilder::new().build_with(|_| None))
    });
    c.bench_function("config/from_variables", |b| {
        b.iter(|| {
            ConfigBuilder::new().build_with(|name| match name {
                "HIPFILE_ALLOW_COMPAT_MODE" => Some("true".to_owned()),
                "HIPFILE_FORCE_COMPAT_MODE" => Some("0".to_owned()),
                "HIPFILE_STATS_LEVEL" => Some("1".to_owned()),
                _ => None,
            })
        })
    });
    c.bench_function("config/overridden", |b| {
        b.iter(|| {
            ConfigBuilder::new()
                .force_compat_mode(black_box(true))
                .allow_compat_mode(true)
                .build_with(|_| None)
        })
    });
}

criterion_group!(decision, benches);
criterion_main!(decision);
