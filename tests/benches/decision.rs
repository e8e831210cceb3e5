//! The per-request decision path on the CPU, in nanoseconds per call: request validation,
//! each backend's score, the whole `decide` over both backends, and settling a `Config`.
//!
//! It measures the real backends' scoring (`Fastpath::new`, `Fallback::new`: scoring only,
//! no runtime), which is why it lives in the cross-crate test package. Run with
//! `cargo bench -p hipfile-tests`.

#![allow(missing_docs, clippy::unwrap_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use hipfile_core::{
    Backend, BufferFacts, ConfigBuilder, DevicePtr, MemoryKind, Op, Request, Submission, decide,
};
use hipfile_fallback::Fallback;
use hipfile_fastpath::Fastpath;
use hipfile_probe::{
    AlignSource, DirectIo, Ext4Journal, FileFacts, FileKind, Filesystem, NoDirectReason,
};
use std::hint::black_box;
use std::path::PathBuf;

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

fn request(size: u64, file_offset: u64) -> Request {
    Request {
        op: Op::Read,
        size,
        file_offset,
        buffer_offset: 0,
    }
}

fn benches(c: &mut Criterion) {
    let buffer = device_buffer();
    let config = ConfigBuilder::new().build_with(|_| None).0;
    let fast = Fastpath::new(&config, true);
    let slow = Fallback::new(&config);
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
