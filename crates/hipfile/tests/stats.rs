//! The counters of `HIPFILE_STATS_LEVEL` on the emulated runtime: every request, ok or
//! failed, and every registration is counted at levels 1 to 3, exactly; level 2 adds the
//! size histograms and level 3 the figures of each device; level 0 counts nothing.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile::{ConfigBuilder, Driver, OpCount, histogram_bucket};
use hipfile_testfs::{Skip, TempDir, emulated_runtime, require};
use std::fs::OpenOptions;

fn driver(level: u32) -> Result<Driver, Skip> {
    let lib = emulated_runtime()?;
    let config = ConfigBuilder::new()
        .stats_level(level)
        .hip_library(lib)
        .build_with(|_| None)
        .0;
    Ok(Driver::open_private(config).unwrap())
}

/// Does the same requests at `level`: two writes (64 KiB, 4 KiB), three reads (64 KiB,
/// 1000 bytes, 10 bytes past the end of the file: a short read of 0), one read that fails
/// validation, and registrations; returns the driver and whether the file had a direct
/// descriptor (which makes the 64 KiB read aligned).
fn workload(level: u32, dir: &TempDir) -> Result<(Driver, bool), Skip> {
    let d = driver(level)?;
    let path = dir.path().join(format!("data-{level}.bin"));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let fh = d.register_file(&file).unwrap();
    let direct = fh.facts().has_direct_io();
    let mut buf = d.alloc(128 << 10).unwrap();
    buf.copy_from_host(0, &[5u8; 128 << 10]).unwrap();
    d.register_buffer(&buf).unwrap();
    assert!(d.register_buffer(&buf).is_err(), "registered twice");
    assert_eq!(fh.write(&buf, 64 << 10, 0, 0).unwrap().bytes, 64 << 10);
    assert_eq!(fh.write(&buf, 4096, 64 << 10, 0).unwrap().bytes, 4096);
    assert_eq!(fh.read(&mut buf, 64 << 10, 0, 0).unwrap().bytes, 64 << 10);
    assert_eq!(fh.read(&mut buf, 1000, 0, 4096).unwrap().bytes, 1000);
    assert_eq!(fh.read(&mut buf, 10, (68 << 10) + 10, 0).unwrap().bytes, 0);
    assert!(fh.read(&mut buf, 10, -1, 0).is_err(), "negative offset");
    d.deregister_buffer(&buf).unwrap();
    fh.deregister().unwrap();
    assert!(fh.deregister().is_err(), "deregistered twice");
    Ok((d, direct))
}

#[test]
fn level_one_counts_requests_bytes_and_registrations() {
    let dir = TempDir::new("stats-l1");
    let (d, _) = require!(workload(1, &dir));
    let s = d.stats().unwrap();
    assert_eq!(s.level, 1);
    assert_eq!(s.read.ops, OpCount::new(3, 1));
    assert_eq!(s.write.ops, OpCount::new(2, 0));
    assert_eq!(s.read.bytes, (64 << 10) + 1000);
    assert_eq!(s.write.bytes, (64 << 10) + 4096);
    assert_eq!(s.errors, 1);
    assert_eq!(s.fastpath_ops + s.fallback_ops, 5);
    assert_eq!(
        s.fastpath_bytes + s.fallback_bytes,
        (128 << 10) + 1000 + 4096
    );
    assert_eq!(s.file_registrations, OpCount::new(1, 0));
    assert_eq!(s.file_deregistrations, OpCount::new(1, 1));
    assert_eq!(s.buffer_registrations, OpCount::new(1, 1));
    assert_eq!(s.buffer_deregistrations, OpCount::new(1, 0));
    assert_eq!(s.read.size_histogram, [0; 32], "no histograms at level 1");
    assert!(s.gpus.is_empty(), "no devices at level 1");
}

#[test]
fn level_two_adds_size_histograms() {
    let dir = TempDir::new("stats-l2");
    let s = require!(workload(2, &dir)).0.stats().unwrap();
    let mut reads = [0u64; 32];
    for size in [64 << 10, 1000, 10] {
        reads[histogram_bucket(size)] += 1;
    }
    let mut writes = [0u64; 32];
    for size in [64 << 10, 4096] {
        writes[histogram_bucket(size)] += 1;
    }
    assert_eq!(s.read.size_histogram, reads);
    assert_eq!(s.write.size_histogram, writes);
    assert_eq!((reads[0], reads[6], writes[2], writes[6]), (2, 1, 1, 1));
    assert!(s.gpus.is_empty(), "no devices at level 2");
}

#[test]
fn level_three_adds_each_device() {
    let dir = TempDir::new("stats-l3");
    let (d, direct) = require!(workload(3, &dir));
    let s = d.stats().unwrap();
    assert_eq!(s.gpus.len(), 1, "{:?}", s.gpus);
    let g = s.gpus[0];
    assert_eq!(g.device, 0);
    assert_eq!((g.read.ops, g.read.bytes), (3, (64 << 10) + 1000));
    assert_eq!((g.write.ops, g.write.bytes), (2, (64 << 10) + 4096));
    assert_eq!(g.read.fastpath + g.read.fallback, 3);
    assert_eq!(g.write.fastpath + g.write.fallback, 2);
    assert_eq!(
        g.read.errors, 1,
        "the failed read counts against its buffer's device"
    );
    // 1000 bytes, and 10 at an odd offset, miss any alignment; 64 KiB at 0 into the start of
    // an allocation meets it where the file has a direct descriptor.
    assert_eq!(g.read.unaligned, if direct { 2 } else { 3 });
    assert_eq!(g.write.unaligned, if direct { 0 } else { 2 });
    assert_eq!(s.read.ops.err, 1);
}

#[test]
fn level_zero_counts_nothing() {
    let dir = TempDir::new("stats-l0");
    let (d, _) = require!(workload(0, &dir));
    assert_eq!(d.stats(), None);
    assert!(!d.publish_stats().unwrap(), "nothing to publish at level 0");
}

#[test]
fn asynchronous_and_batch_requests_are_counted_as_reads_and_writes() {
    use hipfile::BatchIo;
    let dir = TempDir::new("stats-async");
    let d = require!(driver(1));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.path().join("data"))
        .unwrap();
    let fh = d.register_file(&file).unwrap();
    let mut buf = d.alloc(64 << 10).unwrap();
    fh.write_all_at(&buf, 0).unwrap();
    let got = fh.read_at_async(&mut buf, 0).wait().unwrap();
    assert_eq!(got.bytes, 64 << 10);
    {
        let ios: Vec<BatchIo<'_>> = buf
            .slice_mut(..)
            .unwrap()
            .chunks(32 << 10)
            .unwrap()
            .into_iter()
            .enumerate()
            .map(|(i, view)| BatchIo::read(&fh, view, i as u64 * 100, i as u64))
            .collect();
        let mut batch = d.batch(4).unwrap();
        batch.submit(ios).unwrap();
        let mut events = 0;
        while batch.outstanding() > 0 {
            events += batch.poll(1, 4, None).len();
        }
        assert_eq!(events, 2);
    }
    let s = d.stats().unwrap();
    assert_eq!(s.write.ops, OpCount::new(1, 0));
    assert_eq!(s.read.ops, OpCount::new(3, 0));
    assert_eq!(s.read.bytes, (64 << 10) + (32 << 10) + (32 << 10));
}
