//! The per-request decision path on the CPU, in nanoseconds per call: request validation,
//! each backend's score, the whole `decide` over both backends, and settling a `Config`.
//!
//! It measures the real backends' scoring (`Fastpath::new`, `Fallback::new`: scoring only,
//! no runtime), which is why it lives in the cross-crate test package. Run with
//! `cargo bench -p hipfile-tests`.

#![allow(missing_docs, clippy::unwrap_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use hipfile_core::{Backend, ConfigBuilder, Op, Request, Submission, decide};
use hipfile_fallback::Fallback;
use hipfile_fastpath::Fastpath;
use hipfile_probe::Ext4Journal;
use hipfile_testkit::fixtures::{BASE, device_buffer, ext4_file, request, tmpfs_file};
use std::hint::black_box;

/// A read with no buffer offset, from the start of the device buffer.
fn read(size: u64, file_offset: u64) -> Request {
    request(Op::Read, size, file_offset, 0)
}

fn benches(c: &mut Criterion) {
    let buffer = device_buffer(BASE, 64 << 20);
    let config = ConfigBuilder::new().build_with(|_| None).0;
    let fast = Fastpath::new(&config, true);
    let slow = Fallback::new(&config);
    let backends: [&dyn Backend; 2] = [&fast, &slow];
    // A regular file on ext4 `data=ordered` with direct I/O, as the fastpath likes it, and
    // one without direct I/O (tmpfs), which only the fallback serves.
    let ext4 = ext4_file(Ext4Journal::Ordered);
    let tmpfs = tmpfs_file();
    let aligned = read(64 << 20, 1 << 30);
    let misaligned = read((64 << 20) - 1, 4097);

    c.bench_function("validate/accepted", |b| {
        b.iter(|| black_box(&aligned).validate(black_box(&buffer)))
    });
    c.bench_function("validate/rejected", |b| {
        let too_big = read(128 << 20, 0);
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
