//! The fallback's I/O against real files in the system's temporary directory, with the
//! testkit's `HostMemRuntime` standing in for the GPU: it checks that every copy stays inside
//! the pinned and device memory it made, runs stream copies only when synchronised (built
//! `deferred`), and fails the copies, allocations and synchronisations a test names.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile_core::GpuRuntime;
use hipfile_core::{
    Backend, BackendError, Config, DevicePtr, ErrorCode, FallbackKnobs, HipFileCode, Op,
};
use hipfile_fallback::{Fallback, StagingConfig};
use hipfile_testfs::{MountedFs, TempDir, require};
use hipfile_testkit::fixtures::{self, Io, pattern};
use hipfile_testkit::{Call, Fault, HostMemRuntime};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The default configuration.
fn config() -> Config {
    Config::default()
}

/// Validates and runs one request on `backend`, as core does: `size` bytes at `file_offset`
/// of `file`, at `buffer_offset` into the device buffer `base` (registered with `len`), with
/// no direct descriptor.
#[allow(clippy::too_many_arguments)]
fn run(
    backend: &dyn Backend,
    runtime: &dyn GpuRuntime,
    file: &File,
    op: Op,
    base: DevicePtr,
    len: u64,
    buffer_offset: u64,
    file_offset: u64,
    size: u64,
) -> Result<u64, BackendError> {
    let io = Io::new(op, base, len, buffer_offset, file_offset, size);
    fixtures::run(backend, runtime, file, io)
}

/// As [`run`], with the descriptors and facts of a registration: the file is probed, and its
/// `O_DIRECT` descriptor, if it has one, is passed on.
#[allow(clippy::too_many_arguments)]
fn run_probed(
    backend: &dyn Backend,
    runtime: &dyn GpuRuntime,
    file: &File,
    op: Op,
    base: DevicePtr,
    len: u64,
    buffer_offset: u64,
    file_offset: u64,
    size: u64,
) -> Result<u64, BackendError> {
    let io = Io::new(op, base, len, buffer_offset, file_offset, size);
    fixtures::run_probed(backend, runtime, file, io)
}

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
const SMALL_CHUNK: usize = 64 * KIB;

/// A fallback that serves every request on the caller's thread, one buffer per request.
fn fallback(rt: &Arc<HostMemRuntime>, chunk_size: usize, max_buffers: usize) -> Fallback {
    let mut serial = config();
    serial.fallback.small_io_threshold = u64::MAX;
    Fallback::with_runtime(
        &serial,
        rt.clone(),
        StagingConfig {
            chunk_size,
            max_buffers,
        },
    )
}

fn read_write(path: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap()
}

/// A device buffer of `len` zero bytes.
fn device(rt: &HostMemRuntime, len: usize) -> DevicePtr {
    rt.device_with(&vec![0; len])
}

/// Every buffer of the fallback's pool is back and idle.
fn assert_pool_idle(fb: &Fallback) {
    let pool = fb.staging().unwrap();
    assert_eq!(
        pool.idle(),
        pool.allocated(),
        "a staging buffer was not given back"
    );
}

/// Writes `size` bytes from a device buffer at an unaligned buffer offset to an unaligned file
/// offset, checks the file through another descriptor, reads the range back into another
/// device buffer and checks it, with bytes around the range untouched.
fn round_trip(dir: &Path, chunk_size: usize, size: usize) {
    const BUF_OFF: usize = 13;
    const SLACK: usize = 7;
    let file_offset = 4096 + 5;
    let rt = Arc::new(HostMemRuntime::new());
    let fb = fallback(&rt, chunk_size, 2);
    let path = dir.join(format!("rt-{chunk_size}-{size}"));
    let file = read_write(&path);
    let data = pattern(size, size as u8);
    let len = BUF_OFF + size + SLACK;

    let mut src = vec![0xee; len];
    src[BUF_OFF..BUF_OFF + size].copy_from_slice(&data);
    let src = rt.device_with(&src);
    let wrote = run(
        &fb,
        &*rt,
        &file,
        Op::Write,
        src,
        len as u64,
        BUF_OFF as u64,
        file_offset,
        size as u64,
    );
    assert_eq!(wrote.unwrap(), size as u64, "write of {size} bytes");

    let on_disk = std::fs::read(&path).unwrap();
    if size == 0 {
        assert!(on_disk.is_empty(), "a write of nothing writes nothing");
    } else {
        assert_eq!(on_disk.len(), file_offset as usize + size);
        assert!(
            on_disk[file_offset as usize..] == data[..],
            "file differs after a write of {size}"
        );
    }

    let dst = device(&rt, len);
    let read = run(
        &fb,
        &*rt,
        &file,
        Op::Read,
        dst,
        len as u64,
        BUF_OFF as u64,
        file_offset,
        size as u64,
    );
    assert_eq!(read.unwrap(), size as u64, "read of {size} bytes");
    let back = rt.read_device(dst, len);
    assert!(
        back[BUF_OFF..BUF_OFF + size] == data[..],
        "device buffer differs after a read of {size}"
    );
    assert!(
        back[..BUF_OFF].iter().all(|&b| b == 0),
        "a read wrote before its range"
    );
    assert!(
        back[BUF_OFF + size..].iter().all(|&b| b == 0),
        "a read wrote past its range"
    );

    let chunks = size.div_ceil(chunk_size);
    assert_eq!(
        rt.calls(Call::CopyToHost),
        chunks,
        "copies of a {size}-byte write"
    );
    assert_eq!(
        rt.calls(Call::CopyToDevice),
        chunks,
        "copies of a {size}-byte read"
    );
    // One buffer serves a whole request, allocated once and reused by the next request.
    assert_eq!(rt.calls(Call::AllocPinned), usize::from(size > 0));
    assert_pool_idle(&fb);
    drop(fb);
    assert_eq!(
        rt.live_pinned(),
        0,
        "the pool frees its buffers when dropped"
    );
}

#[test]
fn round_trips_every_size_at_unaligned_offsets() {
    let dir = TempDir::new("fallback-round-trip");
    let small = [0, 1, 4095, 4096, 3 * SMALL_CHUNK + 1, 16 * MIB + 3];
    for size in small {
        round_trip(dir.path(), SMALL_CHUNK, size);
    }
    for size in [0, 1, 4096, 16 * MIB + 3] {
        round_trip(dir.path(), StagingConfig::DEFAULT_CHUNK_SIZE, size);
    }
}

#[test]
fn a_read_stops_at_the_end_of_the_file() {
    let dir = TempDir::new("fallback-eof");
    let path = dir.path().join("f");
    let data = pattern(3 * 4096 + 100, 1);
    std::fs::write(&path, &data).unwrap();
    let file = File::open(&path).unwrap();
    let rt = Arc::new(HostMemRuntime::new());
    let fb = fallback(&rt, 4096, 1);
    let dst = device(&rt, 64 * KIB);
    let read = |offset: u64, size: u64| {
        run(
            &fb,
            &*rt,
            &file,
            Op::Read,
            dst,
            64 * KIB as u64,
            0,
            offset,
            size,
        )
        .unwrap()
    };

    // Short inside the last chunk.
    assert_eq!(read(5000, 32 * KIB as u64), (data.len() - 5000) as u64);
    assert!(rt.read_device(dst, data.len() - 5000) == data[5000..]);
    // The end of the file falls on a chunk boundary: the next chunk reads nothing.
    assert_eq!(read(100, 3 * 4096 + 500), 3 * 4096);
    assert!(rt.read_device(dst, 3 * 4096) == data[100..]);
    // At and after the end.
    assert_eq!(read(data.len() as u64, 10), 0);
    assert_eq!(read(1 << 30, 10), 0);
    assert_pool_idle(&fb);
}

/// The dirty and under-writeback pages of `file`, or `None` where the kernel cannot say.
fn dirty_pages(file: &File) -> Option<(u64, u64)> {
    hipfile_testkit::page_cache(file).map(|c| (c.dirty, c.writeback))
}

/// Durability is checked as the kernel reports it: after the write returns, the file has no
/// dirty or under-writeback pages in the page cache (a plain `pwrite` of the same bytes
/// leaves dirty ones, which shows that the check can fail). That there is exactly one
/// `fdatasync` per call rather than one per chunk cannot be seen from outside; `transfer.rs`
/// has it once, after the chunk loop.
#[test]
fn a_write_is_on_disk_when_it_returns() {
    let dir = TempDir::new("fallback-durable");
    let rt = Arc::new(HostMemRuntime::new());
    let fb = fallback(&rt, SMALL_CHUNK, 2);
    let size = 4 * SMALL_CHUNK + 17;
    let data = pattern(size, 9);
    let src = rt.device_with(&data);

    let control = read_write(&dir.path().join("control"));
    control.write_all_at(&data, 0).unwrap();
    let measurable = match dirty_pages(&control) {
        Some((dirty, writeback)) if dirty + writeback > 0 => true,
        other => {
            eprintln!(
                "note: cachestat cannot show dirty pages here ({other:?}); checking the data only"
            );
            false
        }
    };

    let path = dir.path().join("f");
    let file = read_write(&path);
    let n = run(
        &fb,
        &*rt,
        &file,
        Op::Write,
        src,
        size as u64,
        0,
        0,
        size as u64,
    )
    .unwrap();
    assert_eq!(n, size as u64);
    if measurable {
        assert_eq!(
            dirty_pages(&file),
            Some((0, 0)),
            "pages still dirty after the write returned"
        );
    }
    let other = File::open(&path).unwrap();
    let mut back = vec![0; size];
    other.read_exact_at(&mut back, 0).unwrap();
    assert!(back == data);
}

#[test]
fn a_write_on_a_read_only_descriptor_is_ebadf() {
    let dir = TempDir::new("fallback-ebadf-w");
    let path = dir.path().join("f");
    std::fs::write(&path, b"old").unwrap();
    let file = File::open(&path).unwrap();
    let rt = Arc::new(HostMemRuntime::new());
    let fb = fallback(&rt, SMALL_CHUNK, 1);
    let src = rt.device_with(&pattern(1000, 2));
    let e = run(&fb, &*rt, &file, Op::Write, src, 1000, 0, 0, 1000).unwrap_err();
    assert_eq!(
        e,
        BackendError::Os {
            call: "pwrite",
            errno: libc::EBADF
        }
    );
    assert!(!e.is_retryable());
    assert_eq!(std::fs::read(&path).unwrap(), b"old");
    assert_pool_idle(&fb);
}

#[test]
fn a_read_on_a_write_only_descriptor_is_ebadf() {
    let dir = TempDir::new("fallback-ebadf-r");
    let path = dir.path().join("f");
    std::fs::write(&path, pattern(1000, 3)).unwrap();
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    let rt = Arc::new(HostMemRuntime::new());
    let fb = fallback(&rt, SMALL_CHUNK, 1);
    let dst = device(&rt, 1000);
    let e = run(&fb, &*rt, &file, Op::Read, dst, 1000, 0, 0, 1000).unwrap_err();
    assert_eq!(
        e,
        BackendError::Os {
            call: "pread",
            errno: libc::EBADF
        }
    );
    assert_eq!(rt.calls(Call::CopyToDevice), 0);
    assert_pool_idle(&fb);
}

#[test]
fn a_failing_copy_to_the_device_fails_the_read_and_returns_every_buffer() {
    let dir = TempDir::new("fallback-copy-fail");
    let path = dir.path().join("f");
    let size = 5 * SMALL_CHUNK;
    let data = pattern(size, 4);
    std::fs::write(&path, &data).unwrap();
    let file = File::open(&path).unwrap();
    let rt = Arc::new(
        HostMemRuntime::builder()
            .fault(Fault::on(Call::CopyToDevice).nth(2).fail(999))
            .build(),
    );
    let fb = fallback(&rt, SMALL_CHUNK, 2);
    let dst = device(&rt, size);
    let e = run(
        &fb,
        &*rt,
        &file,
        Op::Read,
        dst,
        size as u64,
        0,
        0,
        size as u64,
    )
    .unwrap_err();
    assert!(
        matches!(&e, BackendError::Runtime(r) if r.code == 999),
        "{e:?}"
    );
    assert_eq!(e.hip_error(), Some(999));
    assert_eq!(rt.calls(Call::CopyToDevice), 3, "it stops at the failure");
    assert_pool_idle(&fb);

    // The pool is intact: the next request is served with the same buffer.
    let n = run(
        &fb,
        &*rt,
        &file,
        Op::Read,
        dst,
        size as u64,
        0,
        0,
        size as u64,
    )
    .unwrap();
    assert_eq!(n, size as u64);
    assert!(rt.read_device(dst, size) == data);
    assert_eq!(rt.calls(Call::AllocPinned), 1);
    assert_pool_idle(&fb);
}

#[test]
fn a_failing_copy_from_the_device_fails_the_write_before_it_writes() {
    let dir = TempDir::new("fallback-copy-fail-w");
    let path = dir.path().join("f");
    let file = read_write(&path);
    let rt = Arc::new(
        HostMemRuntime::builder()
            .fault(Fault::on(Call::CopyToHost).nth(0).fail(999))
            .build(),
    );
    let fb = fallback(&rt, SMALL_CHUNK, 1);
    let src = rt.device_with(&pattern(1000, 5));
    let e = run(&fb, &*rt, &file, Op::Write, src, 1000, 0, 0, 1000).unwrap_err();
    assert!(matches!(e, BackendError::Runtime(_)), "{e:?}");
    assert_eq!(file.metadata().unwrap().len(), 0);
    assert_pool_idle(&fb);
}

#[test]
fn a_failing_pinned_allocation_is_a_runtime_error_and_is_retried_next_time() {
    let dir = TempDir::new("fallback-alloc-fail");
    let path = dir.path().join("f");
    std::fs::write(&path, pattern(100, 6)).unwrap();
    let file = File::open(&path).unwrap();
    let rt = Arc::new(
        HostMemRuntime::builder()
            .fault(
                Fault::on(Call::AllocPinned)
                    .nth(0)
                    .fail_with(2, "injected out of memory"),
            )
            .build(),
    );
    let fb = fallback(&rt, SMALL_CHUNK, 1);
    let dst = device(&rt, 100);
    let e = run(&fb, &*rt, &file, Op::Read, dst, 100, 0, 0, 100).unwrap_err();
    assert!(
        matches!(&e, BackendError::Runtime(r) if r.call == "hipHostMalloc"),
        "{e:?}"
    );
    assert_eq!(fb.staging().unwrap().allocated(), 0);
    assert_eq!(
        run(&fb, &*rt, &file, Op::Read, dst, 100, 0, 0, 100).unwrap(),
        100
    );
    assert_eq!(fb.staging().unwrap().allocated(), 1);
}

/// A write that fills the file system returns the bytes that fit, which are the file's first
/// bytes (docs/BEHAVIOUR.md §3.2: POSIX's rule), and the next write, where nothing fits, is
/// `ENOSPC`.
#[test]
fn a_write_that_fills_the_file_system_returns_what_fits() {
    let fs = require!(MountedFs::tmpfs(1));
    let path: PathBuf = fs.path().join("f");
    let file = read_write(&path);
    let rt = Arc::new(HostMemRuntime::new());
    let fb = fallback(&rt, SMALL_CHUNK, 1);
    let size = 2 * MIB;
    let data = pattern(size, 7);
    let src = rt.device_with(&data);
    let write = |at: usize| {
        run(
            &fb,
            &*rt,
            &file,
            Op::Write,
            src,
            size as u64,
            at as u64,
            at as u64,
            (size - at) as u64,
        )
    };
    let n = write(0).unwrap() as usize;
    assert!(n > 0 && n < size, "{n} of {size} bytes");
    let on_disk = std::fs::read(&path).unwrap();
    assert_eq!(on_disk.len(), n);
    assert!(on_disk[..] == data[..n]);
    assert_eq!(
        write(n).unwrap_err(),
        BackendError::Os {
            call: "pwrite",
            errno: libc::ENOSPC
        }
    );
    assert_pool_idle(&fb);
}

/// A write whose copy from the device fails in its fourth chunk returns the three chunks
/// written before it; one that fails in its first chunk returns the error.
#[test]
fn a_write_that_fails_part_way_returns_the_bytes_written() {
    let dir = TempDir::new("fallback-short-write");
    let path = dir.path().join("f");
    let file = read_write(&path);
    let size = 6 * SMALL_CHUNK;
    let data = pattern(size, 14);
    for (chunk, expect) in [(3, Ok(3 * SMALL_CHUNK as u64)), (0, Err(999))] {
        file.set_len(0).unwrap();
        let rt = Arc::new(HostMemRuntime::new());
        let src = rt.device_with(&data);
        rt.faults().add(
            Fault::on(Call::CopyToHost)
                .touching(DevicePtr(src.0 + (chunk * SMALL_CHUNK + 5) as u64))
                .fail(999),
        );
        let fb = fallback(&rt, SMALL_CHUNK, 1);
        let got = run(
            &fb,
            &*rt,
            &file,
            Op::Write,
            src,
            size as u64,
            0,
            0,
            size as u64,
        )
        .map_err(|e| e.hip_error().unwrap());
        assert_eq!(got, expect, "a failure in chunk {chunk}");
        assert!(std::fs::read(&path).unwrap() == data[..chunk * SMALL_CHUNK]);
        assert_pool_idle(&fb);
    }
}

#[test]
fn many_threads_share_a_small_pool() {
    const THREADS: usize = 8;
    let part = MIB + 4097; // not a multiple of the chunk: every part ends with a short chunk
    let dir = TempDir::new("fallback-threads");
    let path = dir.path().join("f");
    let data = pattern(THREADS * part, 8);
    std::fs::write(&path, &data).unwrap();
    let file = read_write(&path);
    let rt = Arc::new(HostMemRuntime::new());
    // Two buffers for eight threads: most acquisitions wait for another thread's buffer.
    let fb = fallback(&rt, SMALL_CHUNK, 2);

    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (fb, rt, file, data) = (&fb, &rt, &file, &data);
            s.spawn(move || {
                let dst = device(rt, part);
                for _ in 0..3 {
                    let off = (t * part) as u64;
                    let n = run(
                        fb,
                        &**rt,
                        file,
                        Op::Read,
                        dst,
                        part as u64,
                        0,
                        off,
                        part as u64,
                    );
                    assert_eq!(n.unwrap(), part as u64);
                    assert!(
                        rt.read_device(dst, part) == data[t * part..(t + 1) * part],
                        "thread {t}"
                    );
                }
            });
        }
    });
    let pool = fb.staging().unwrap();
    assert!(
        pool.allocated() <= 2,
        "the pool grew past its bound: {pool:?}"
    );
    assert_pool_idle(&fb);

    // And writers: each thread writes its part back shifted, then the file is checked.
    let new = pattern(THREADS * part, 77);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (fb, rt, file, new) = (&fb, &rt, &file, &new);
            s.spawn(move || {
                let src = rt.device_with(&new[t * part..(t + 1) * part]);
                let off = (t * part) as u64;
                let n = run(
                    fb,
                    &**rt,
                    file,
                    Op::Write,
                    src,
                    part as u64,
                    0,
                    off,
                    part as u64,
                );
                assert_eq!(n.unwrap(), part as u64);
            });
        }
    });
    assert!(std::fs::read(&path).unwrap() == new);
    assert!(fb.staging().unwrap().allocated() <= 2);
    assert_pool_idle(&fb);
}

#[test]
fn a_fallback_without_a_runtime_only_scores() {
    let dir = TempDir::new("fallback-scoring-only");
    let path = dir.path().join("f");
    std::fs::write(&path, b"x").unwrap();
    let file = File::open(&path).unwrap();
    let rt = HostMemRuntime::new();
    let fb = Fallback::new(&config());
    assert!(fb.staging().is_none());
    let dst = device(&rt, 1);
    let e = run(&fb, &rt, &file, Op::Read, dst, 1, 0, 0, 1).unwrap_err();
    assert!(
        matches!(&e, BackendError::Unsupported(m) if m.contains("without a GPU runtime")),
        "{e:?}"
    );
    assert_eq!(fb.kind(), hipfile_core::BackendKind::Fallback);
}

// The parallel path: tasks on I/O threads, with a runtime whose copies on a stream run only
// when synchronised.

const TASK: usize = 64 * KIB;
/// Enough threads that a request of up to `THREADS × TASK` bytes is cut into `TASK`-byte
/// tasks (a larger one is cut into even shares per thread).
const THREADS: usize = 8;

/// A fallback with `THREADS` threads, `TASK`-byte tasks and 256 KiB of staging memory (16 KiB
/// chunks, so four per task and each buffer reused within a task), handing off every request
/// above `threshold` bytes.
fn pipelined(rt: &Arc<HostMemRuntime>, threshold: u64) -> Fallback {
    let knobs = pipelined_knobs(threshold);
    let staging = StagingConfig::for_knobs(&knobs);
    assert_eq!((staging.chunk_size, staging.max_buffers), (16 * KIB, 16));
    with_knobs(rt, knobs)
}

/// The knobs of [`pipelined`].
fn pipelined_knobs(threshold: u64) -> FallbackKnobs {
    knobs(THREADS, TASK as u64, 256 * KIB as u64, threshold, true)
}

/// Knobs with these values (`FallbackKnobs` is `#[non_exhaustive]`: no struct literal).
fn knobs(
    io_threads: usize,
    task_size: u64,
    staging_memory: u64,
    small_io_threshold: u64,
    cold_direct_reads: bool,
) -> FallbackKnobs {
    let mut k = FallbackKnobs::default();
    k.io_threads = io_threads;
    k.task_size = task_size;
    k.staging_memory = staging_memory;
    k.small_io_threshold = small_io_threshold;
    k.cold_direct_reads = cold_direct_reads;
    k
}

/// A fallback with these knobs and the staging sizes they give.
fn with_knobs(rt: &Arc<HostMemRuntime>, knobs: FallbackKnobs) -> Fallback {
    let mut c = config();
    c.fallback = knobs;
    Fallback::with_runtime(&c, rt.clone(), StagingConfig::for_knobs(&knobs))
}

#[allow(clippy::too_many_arguments)]
fn pipelined_round_trip(
    rt: &Arc<HostMemRuntime>,
    fb: &Fallback,
    file: &File,
    path: &Path,
    buf_off: usize,
    file_offset: u64,
    size: usize,
    seed: u8,
) {
    const SLACK: usize = 7;
    let data = pattern(size, seed);
    let len = buf_off + size + SLACK;
    let mut src = vec![0xee; len];
    src[buf_off..buf_off + size].copy_from_slice(&data);
    let src = rt.device_with(&src);
    let wrote = run(
        fb,
        &**rt,
        file,
        Op::Write,
        src,
        len as u64,
        buf_off as u64,
        file_offset,
        size as u64,
    );
    assert_eq!(
        wrote.unwrap(),
        size as u64,
        "write of {size} at {file_offset}"
    );
    let mut on_disk = vec![0; size];
    File::open(path)
        .unwrap()
        .read_exact_at(&mut on_disk, file_offset)
        .unwrap();
    assert!(on_disk == data, "file differs: {size} at {file_offset}");

    let dst = device(rt, len);
    let read = run(
        fb,
        &**rt,
        file,
        Op::Read,
        dst,
        len as u64,
        buf_off as u64,
        file_offset,
        size as u64,
    );
    assert_eq!(
        read.unwrap(),
        size as u64,
        "read of {size} at {file_offset}"
    );
    let back = rt.read_device(dst, len);
    assert!(
        back[buf_off..buf_off + size] == data[..],
        "device differs: {size} at {file_offset}"
    );
    assert!(back[..buf_off].iter().all(|&b| b == 0), "wrote before");
    assert!(back[buf_off + size..].iter().all(|&b| b == 0), "wrote past");
    assert_pool_idle(fb);
}

#[test]
fn pipelined_round_trips_around_task_boundaries() {
    let dir = TempDir::new("fallback-pipe-round-trip");
    let rt = Arc::new(HostMemRuntime::builder().deferred().build());
    let fb = pipelined(&rt, 4096);
    let path = dir.path().join("f");
    let file = read_write(&path);
    let mut seed = 0u8;
    for file_offset in [0, 5, 4096, TASK as u64 - 1, 3 * TASK as u64 + 4097] {
        for k in 1..=4 {
            for size in [k * TASK - 1, k * TASK, k * TASK + 1] {
                seed = seed.wrapping_add(1);
                pipelined_round_trip(&rt, &fb, &file, &path, 13, file_offset, size, seed);
            }
        }
    }
    assert!(fb.tasks_dispatched() > 0);
    assert_eq!(fb.io_threads_started(), THREADS);
    let pool = fb.staging().unwrap();
    assert!(pool.allocated() <= 2 * THREADS, "{pool:?}");
    drop(fb);
    assert_eq!(
        rt.live_pinned(),
        0,
        "the pool frees its buffers when dropped"
    );
    assert_eq!(
        rt.calls(Call::StreamCreate),
        rt.calls(Call::StreamDestroy),
        "every worker destroys its stream when the pool is dropped"
    );
    assert!(rt.calls(Call::StreamCreate) <= THREADS);
}

#[test]
fn a_pipelined_read_stops_at_the_end_of_the_file_inside_the_third_task() {
    let dir = TempDir::new("fallback-pipe-eof");
    let path = dir.path().join("f");
    // From offset 100: task 1 is 100..64 KiB, task 2 the next 64 KiB, the end of the file in
    // task 3, tasks 4 and 5 after it.
    let data = pattern(2 * TASK + 5000, 3);
    std::fs::write(&path, &data).unwrap();
    let file = File::open(&path).unwrap();
    let rt = Arc::new(HostMemRuntime::builder().deferred().build());
    let fb = pipelined(&rt, 0);
    let size = 5 * TASK - 100; // 100..5 × 64 KiB: five tasks
    let dst = device(&rt, size);
    for _ in 0..3 {
        let before = fb.tasks_dispatched();
        let n = run(
            &fb,
            &*rt,
            &file,
            Op::Read,
            dst,
            size as u64,
            0,
            100,
            size as u64,
        )
        .unwrap();
        assert_eq!(fb.tasks_dispatched() - before, 5);
        assert_eq!(n, (data.len() - 100) as u64);
        let back = rt.read_device(dst, size);
        assert!(back[..data.len() - 100] == data[100..]);
        assert!(
            back[data.len() - 100..].iter().all(|&b| b == 0),
            "bytes after the end of the file"
        );
        assert_pool_idle(&fb);
    }
    // The end of the file on a task boundary, and a read that starts after it.
    let n = run(
        &fb,
        &*rt,
        &file,
        Op::Read,
        dst,
        size as u64,
        0,
        (data.len() - 5000 - TASK) as u64,
        size as u64,
    );
    assert_eq!(n.unwrap(), (TASK + 5000) as u64);
    let n = run(
        &fb,
        &*rt,
        &file,
        Op::Read,
        dst,
        size as u64,
        0,
        1 << 30,
        size as u64,
    );
    assert_eq!(n.unwrap(), 0);
    assert_pool_idle(&fb);
}

#[test]
fn a_failing_copy_in_a_middle_task_fails_the_request_and_the_pool_goes_on() {
    let dir = TempDir::new("fallback-pipe-copy-fail");
    let path = dir.path().join("f");
    let size = 5 * TASK;
    let data = pattern(size, 4);
    std::fs::write(&path, &data).unwrap();
    let file = read_write(&path);
    // Twenty copies per request (four chunks per task): fail the tenth, in the middle
    // whichever threads issue the copies.
    let rt = Arc::new(
        HostMemRuntime::builder()
            .deferred()
            .fault(Fault::on(Call::CopyToDevice).nth(9).fail(999))
            .fault(Fault::on(Call::CopyToHost).nth(9).fail(999))
            .build(),
    );
    let fb = pipelined(&rt, 0);
    let dst = device(&rt, size);
    let e = run(
        &fb,
        &*rt,
        &file,
        Op::Read,
        dst,
        size as u64,
        0,
        0,
        size as u64,
    )
    .unwrap_err();
    assert!(
        matches!(&e, BackendError::Runtime(r) if r.code == 999),
        "{e:?}"
    );
    assert_pool_idle(&fb);
    // A write fails, or returns the chunks written from the start before the failure when
    // its first task wrote some (which task fails depends on the threads).
    let new = pattern(size, 40);
    let src = rt.device_with(&new);
    match run(
        &fb,
        &*rt,
        &file,
        Op::Write,
        src,
        size as u64,
        0,
        0,
        size as u64,
    ) {
        Err(e) => assert!(
            matches!(&e, BackendError::Runtime(r) if r.code == 999),
            "{e:?}"
        ),
        Ok(n) => {
            let n = n as usize;
            assert!(n > 0 && n < size && n.is_multiple_of(16 * KIB), "{n}");
            assert!(std::fs::read(&path).unwrap()[..n] == new[..n]);
        }
    }
    assert_pool_idle(&fb);

    // The same threads and buffers serve the next requests.
    std::fs::write(&path, &data).unwrap();
    let n = run(
        &fb,
        &*rt,
        &file,
        Op::Read,
        dst,
        size as u64,
        0,
        0,
        size as u64,
    )
    .unwrap();
    assert_eq!(n, size as u64);
    assert!(rt.read_device(dst, size) == data);
    assert_eq!(fb.io_threads_started(), THREADS);
    assert_pool_idle(&fb);
}

/// Tasks run in parallel: a write whose copy from the device fails in the fourth chunk of
/// its third task returns the bytes of the two tasks before it and of the chunks that task
/// wrote before the failure (the tasks after it may have written theirs too: bytes past a
/// short count are unspecified); one that fails in its first chunk returns the error.
#[test]
fn a_pipelined_write_that_fails_part_way_returns_the_prefix_written() {
    const CHUNK: usize = 16 * KIB;
    let dir = TempDir::new("fallback-pipe-short-write");
    let path = dir.path().join("f");
    let file = read_write(&path);
    let size = 5 * TASK;
    let data = pattern(size, 15);
    // With two buffers per task, the copy of chunk 3 is queued once chunk 1 is written.
    for (at, expect) in [
        (2 * TASK + 3 * CHUNK, Ok((2 * TASK + 2 * CHUNK) as u64)),
        (0, Err(999)),
    ] {
        file.set_len(0).unwrap();
        let rt = Arc::new(HostMemRuntime::builder().deferred().build());
        let src = rt.device_with(&data);
        rt.faults().add(
            Fault::on(Call::CopyToHost)
                .touching(DevicePtr(src.0 + at as u64 + 5))
                .fail(999),
        );
        let fb = pipelined(&rt, 0);
        let got = run(
            &fb,
            &*rt,
            &file,
            Op::Write,
            src,
            size as u64,
            0,
            0,
            size as u64,
        )
        .map_err(|e| e.hip_error().unwrap());
        assert_eq!(got, expect, "a failure at byte {at}");
        assert_eq!(fb.tasks_dispatched(), 5);
        let on_disk = std::fs::read(&path).unwrap();
        let n = *got.as_ref().unwrap_or(&0) as usize;
        assert!(on_disk.len() >= n && on_disk[..n] == data[..n]);
        assert_pool_idle(&fb);
    }
}

/// A stream that cannot be synchronised may still have copies queued: the request fails with
/// the runtime's error, the task's buffers are given up (never handed out again, never freed)
/// and its stream is not destroyed; the next request gets new buffers, within the pool's
/// bound, and a new stream, and moves the right bytes.
#[test]
fn a_failed_stream_synchronisation_gives_up_the_buffers_and_the_stream() {
    const CHUNK: usize = 16 * KIB;
    let dir = TempDir::new("fallback-pipe-sync-fail");
    let path = dir.path().join("f");
    let size = 4 * CHUNK;
    let data = pattern(size, 16);
    std::fs::write(&path, &data).unwrap();
    let file = File::open(&path).unwrap();
    let rt = Arc::new(
        HostMemRuntime::builder()
            .deferred()
            .fault(
                Fault::on(Call::StreamSynchronize)
                    .nth(0)
                    .fail_with(700, "injected illegal address"),
            )
            .build(),
    );
    // One thread, so one task with both buffers of a pool of two 16 KiB buffers.
    let knobs = knobs(1, size as u64, 2 * CHUNK as u64, 0, false);
    let staging = StagingConfig::for_knobs(&knobs);
    assert_eq!((staging.chunk_size, staging.max_buffers), (CHUNK, 2));
    let fb = with_knobs(&rt, knobs);
    let dst = device(&rt, size);
    let read = || {
        run(
            &fb,
            &*rt,
            &file,
            Op::Read,
            dst,
            size as u64,
            0,
            0,
            size as u64,
        )
    };

    let e = read().unwrap_err();
    assert!(
        matches!(&e, BackendError::Runtime(r) if r.code == 700 && r.call == "hipStreamSynchronize"),
        "{e:?}"
    );
    let pool = fb.staging().unwrap();
    assert_eq!((pool.abandoned(), pool.allocated(), pool.idle()), (2, 0, 0));
    assert_eq!(rt.calls(Call::StreamCreate), 1);
    assert_eq!(
        rt.calls(Call::StreamDestroy),
        0,
        "a stream with copies queued was destroyed"
    );
    let given_up: Vec<usize> = rt.pinned_used();
    assert!(!given_up.is_empty());

    let n = read().unwrap();
    assert_eq!(n, size as u64);
    assert!(rt.read_device(dst, size) == data);
    let used = rt.pinned_used();
    assert!(
        used[given_up.len()..].iter().all(|p| !given_up.contains(p)),
        "a buffer given up was handed out again"
    );
    drop(used);
    assert_eq!(rt.calls(Call::StreamCreate), 2);
    // Each request's two buffers were one allocation (`StagingPool::reserve`).
    assert_eq!(rt.calls(Call::AllocPinned), 2);
    assert_eq!((pool.abandoned(), pool.allocated(), pool.idle()), (2, 2, 2));
    drop(fb);
    assert_eq!(
        rt.calls(Call::StreamDestroy),
        1,
        "only the new stream is destroyed"
    );
    assert_eq!(
        rt.live_pinned(),
        1,
        "the allocation of the buffers given up is never freed"
    );
}

/// A worker that panics in the middle of a pipelined read (the runtime's tenth copy of
/// twenty panics) fails that request with an internal error that says so and carries the
/// panic's message; the task's buffers go back to the pool (its stream could be
/// synchronised), and the next requests on the same fallback move the right bytes.
#[test]
fn a_worker_panic_fails_its_request_and_the_next_one_works() {
    let dir = TempDir::new("fallback-pipe-panic");
    let path = dir.path().join("f");
    let size = 5 * TASK;
    let data = pattern(size, 17);
    std::fs::write(&path, &data).unwrap();
    let file = read_write(&path);
    let rt = Arc::new(
        HostMemRuntime::builder()
            .deferred()
            .fault(
                Fault::on(Call::CopyToDevice)
                    .nth(9)
                    .panic("injected panic in copy 9 to the device"),
            )
            .build(),
    );
    let fb = pipelined(&rt, 0);
    let dst = device(&rt, size);
    let read = || {
        run(
            &fb,
            &*rt,
            &file,
            Op::Read,
            dst,
            size as u64,
            0,
            0,
            size as u64,
        )
    };
    let e = read().unwrap_err();
    let BackendError::Internal(message) = &e else {
        panic!("an internal error expected: {e:?}");
    };
    assert!(
        message.contains("I/O worker of the fallback panicked while serving this request")
            && message.contains("injected panic in copy 9 to the device"),
        "{message}"
    );
    assert_eq!(e.code(), ErrorCode::HipFile(HipFileCode::InternalError));
    assert_pool_idle(&fb);
    assert_eq!(fb.staging().unwrap().abandoned(), 0);

    assert_eq!(read().unwrap(), size as u64);
    assert!(rt.read_device(dst, size) == data);
    let new = pattern(size, 18);
    let src = rt.device_with(&new);
    let n = run(
        &fb,
        &*rt,
        &file,
        Op::Write,
        src,
        size as u64,
        0,
        0,
        size as u64,
    );
    assert_eq!(n.unwrap(), size as u64);
    assert!(std::fs::read(&path).unwrap() == new);
    assert_eq!(fb.io_threads_started(), THREADS);
    assert_pool_idle(&fb);
}

#[test]
fn a_pipelined_read_error_fails_the_request() {
    let dir = TempDir::new("fallback-pipe-ebadf");
    let path = dir.path().join("f");
    std::fs::write(&path, pattern(4 * TASK, 3)).unwrap();
    let file = OpenOptions::new().write(true).open(&path).unwrap();
    let rt = Arc::new(HostMemRuntime::builder().deferred().build());
    let fb = pipelined(&rt, 0);
    let dst = device(&rt, 4 * TASK);
    let size = 4 * TASK as u64;
    let e = run(&fb, &*rt, &file, Op::Read, dst, size, 0, 0, size).unwrap_err();
    assert_eq!(
        e,
        BackendError::Os {
            call: "pread",
            errno: libc::EBADF
        }
    );
    assert_eq!(rt.calls(Call::CopyToDevice), 0);
    assert_pool_idle(&fb);
}

/// One I/O thread, every request handed to it, 16 KiB chunks: the first request (`first`
/// bytes at file offset 0 into `a`) parks in its first copy to the device until the second
/// (`TASK` bytes at file offset `TASK` of `second_file` into `b`) is queued behind it, so that
/// the thread serves the two tasks one after the other. Returns both results.
fn two_reads_in_a_row(
    rt: &Arc<HostMemRuntime>,
    fb: &Fallback,
    (file, a, first): (&File, DevicePtr, usize),
    (second_file, b): (&File, DevicePtr),
) -> (Result<u64, BackendError>, Result<u64, BackendError>) {
    let gate = hipfile_testkit::Gate::new();
    rt.faults()
        .add(Fault::on(Call::CopyToDevice).touching(a).park(&gate));
    let _release = gate.release_on_drop();
    std::thread::scope(|s| {
        let one = s.spawn(|| {
            let n = first as u64;
            run(fb, &**rt, file, Op::Read, a, n, 0, 0, n)
        });
        gate.wait_parked(|| one.is_finished());
        let t = TASK as u64;
        let two = s.spawn(move || run(fb, &**rt, second_file, Op::Read, b, t, 0, t, t));
        // A guard against waiting for ever, not a measure of speed.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while fb.tasks_dispatched() < 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(
            fb.tasks_dispatched(),
            2,
            "the second request was not queued"
        );
        gate.release();
        (one.join().unwrap(), two.join().unwrap())
    })
}

/// The fallback of [`two_reads_in_a_row`]: one I/O thread, 16 KiB chunks, two buffers.
fn one_io_thread(rt: &Arc<HostMemRuntime>) -> Fallback {
    let knobs = knobs(1, TASK as u64, 32 * KIB as u64, 0, false);
    let staging = StagingConfig::for_knobs(&knobs);
    assert_eq!((staging.chunk_size, staging.max_buffers), (16 * KIB, 2));
    with_knobs(rt, knobs)
}

/// An I/O thread that finds another read queued when it has queued a task's last copy reads
/// that task's first chunk while the copy runs, rather than waiting for its stream: one
/// stream synchronisation for the two tasks, at the end, and each request's bytes in place
/// when it returns (the runtime runs copies only when waited for).
#[test]
fn a_read_task_queued_behind_another_starts_before_the_others_last_copy_is_waited_for() {
    let dir = TempDir::new("fallback-pipe-tail");
    let path = dir.path().join("f");
    let data = pattern(2 * TASK, 21);
    std::fs::write(&path, &data).unwrap();
    let file = File::open(&path).unwrap();
    let rt = Arc::new(HostMemRuntime::builder().deferred().build());
    let fb = one_io_thread(&rt);
    let (a, b) = (device(&rt, TASK), device(&rt, TASK));
    let (one, two) = two_reads_in_a_row(&rt, &fb, (&file, a, TASK), (&file, b));
    assert_eq!(one.unwrap(), TASK as u64);
    assert_eq!(two.unwrap(), TASK as u64);
    assert!(rt.read_device(a, TASK) == data[..TASK]);
    assert!(rt.read_device(b, TASK) == data[TASK..]);
    assert_eq!(
        rt.calls(Call::StreamSynchronize),
        1,
        "the thread waited for its stream between the two tasks"
    );
    assert_pool_idle(&fb);
}

/// A read of another file on the same file system queued behind goes on from the task
/// before it, as a read of the same file does: a loader interleaves its shards' requests, so
/// a worker's next task is often of another shard.
#[test]
fn a_read_of_another_file_on_the_same_file_system_goes_on_from_the_task_before_it() {
    let dir = TempDir::new("fallback-pipe-tail-same-fs");
    assert_eq!(
        syncs_between_files(dir.path(), dir.path()),
        1,
        "the thread waited for its stream between the two tasks"
    );
}

/// A read of a file on another file system queued behind does not go on from the task
/// before it: that task's report would wait for the other file's first read (a stalled
/// mount would hold an unrelated caller), so the thread waits for its stream between the
/// two.
#[test]
fn a_read_from_another_file_system_does_not_go_on_from_the_task_before_it() {
    let dir = TempDir::new("fallback-pipe-tail-other");
    let fs = require!(MountedFs::tmpfs(1));
    assert_eq!(syncs_between_files(dir.path(), fs.path()), 2);
}

/// Reads a task of a file in `one` and, queued behind it, a task of a file in `two` on one
/// I/O thread ([`two_reads_in_a_row`]), checks both requests' bytes, and returns the stream
/// synchronisations made.
fn syncs_between_files(one: &Path, two: &Path) -> usize {
    let (one_path, two_path) = (one.join("one"), two.join("two"));
    let (one_data, two_data) = (pattern(2 * TASK, 24), pattern(2 * TASK, 25));
    std::fs::write(&one_path, &one_data).unwrap();
    std::fs::write(&two_path, &two_data).unwrap();
    let (one_file, two_file) = (
        File::open(&one_path).unwrap(),
        File::open(&two_path).unwrap(),
    );
    let rt = Arc::new(HostMemRuntime::builder().deferred().build());
    let fb = one_io_thread(&rt);
    let (a, b) = (device(&rt, TASK), device(&rt, TASK));
    let (one, two) = two_reads_in_a_row(&rt, &fb, (&one_file, a, TASK), (&two_file, b));
    assert_eq!((one.unwrap(), two.unwrap()), (TASK as u64, TASK as u64));
    assert!(rt.read_device(a, TASK) == one_data[..TASK]);
    assert!(rt.read_device(b, TASK) == two_data[TASK..]);
    assert_pool_idle(&fb);
    rt.calls(Call::StreamSynchronize)
}

/// When the task read after another fails before its first chunk (`pread` on a write-only
/// descriptor of the same file), the task before it is still reported with its bytes, once its copies ran.
#[test]
fn a_failure_of_the_next_task_leaves_the_read_before_it_whole() {
    let dir = TempDir::new("fallback-pipe-tail-fail");
    let path = dir.path().join("f");
    let data = pattern(2 * TASK, 22);
    std::fs::write(&path, &data).unwrap();
    let file = File::open(&path).unwrap();
    let write_only = OpenOptions::new().write(true).open(&path).unwrap();
    let rt = Arc::new(HostMemRuntime::builder().deferred().build());
    let fb = one_io_thread(&rt);
    let (a, b) = (device(&rt, TASK), device(&rt, TASK));
    let (one, two) = two_reads_in_a_row(&rt, &fb, (&file, a, TASK), (&write_only, b));
    assert_eq!(one.unwrap(), TASK as u64);
    assert!(rt.read_device(a, TASK) == data[..TASK]);
    assert_eq!(
        two.unwrap_err(),
        BackendError::Os {
            call: "pread",
            errno: libc::EBADF
        }
    );
    assert_pool_idle(&fb);
}

/// A panic while the thread waits for the previous task's copies (the runtime's first event
/// synchronisation: the previous task is one chunk, so nothing waited before) fails both
/// requests, neither caller waits for ever, the buffers come back once the stream has been
/// waited for, and the next request moves the right bytes.
#[test]
fn a_panic_between_two_tasks_fails_both_and_the_next_request_works() {
    let dir = TempDir::new("fallback-pipe-tail-panic");
    let path = dir.path().join("f");
    let data = pattern(2 * TASK, 23);
    std::fs::write(&path, &data).unwrap();
    let file = File::open(&path).unwrap();
    let rt = Arc::new(
        HostMemRuntime::builder()
            .deferred()
            .fault(
                Fault::on(Call::EventSynchronize)
                    .nth(0)
                    .panic("injected panic waiting for an event"),
            )
            .build(),
    );
    let fb = one_io_thread(&rt);
    let chunk = 16 * KIB;
    let (a, b) = (device(&rt, chunk), device(&rt, TASK));
    let (one, two) = two_reads_in_a_row(&rt, &fb, (&file, a, chunk), (&file, b));
    let internal = |r: Result<u64, BackendError>| match r {
        Err(BackendError::Internal(m)) => m,
        other => panic!("an internal error expected: {other:?}"),
    };
    let one = internal(one);
    assert!(
        one.contains("panicked before this request's last copies were confirmed"),
        "{one}"
    );
    let two = internal(two);
    assert!(two.contains("injected panic waiting for an event"), "{two}");
    assert_eq!(rt.calls(Call::EventSynchronize), 1);
    assert_pool_idle(&fb);
    assert_eq!(fb.staging().unwrap().abandoned(), 0);
    let t = TASK as u64;
    assert_eq!(run(&fb, &*rt, &file, Op::Read, b, t, 0, t, t).unwrap(), t);
    assert!(rt.read_device(b, TASK) == data[TASK..]);
}

#[test]
fn small_requests_stay_on_the_callers_thread() {
    let dir = TempDir::new("fallback-pipe-small");
    let path = dir.path().join("f");
    let data = pattern(2 * MIB, 5);
    std::fs::write(&path, &data).unwrap();
    let file = File::open(&path).unwrap();
    let rt = Arc::new(HostMemRuntime::builder().deferred().build());
    let fb = pipelined(&rt, FallbackKnobs::DEFAULT_SMALL_IO_THRESHOLD);
    let dst = device(&rt, 2 * MIB);
    for size in [1, 4096, TASK + 1, MIB] {
        let n = run(
            &fb,
            &*rt,
            &file,
            Op::Read,
            dst,
            2 * MIB as u64,
            0,
            3,
            size as u64,
        );
        assert_eq!(n.unwrap(), size as u64);
        assert!(rt.read_device(dst, size) == data[3..3 + size]);
    }
    assert_eq!(fb.tasks_dispatched(), 0, "a small request was handed off");
    assert_eq!(
        fb.io_threads_started(),
        0,
        "threads started for small requests"
    );
    assert_eq!(rt.calls(Call::StreamCreate), 0);

    let size = MIB + 1;
    let n = run(
        &fb,
        &*rt,
        &file,
        Op::Read,
        dst,
        2 * MIB as u64,
        0,
        3,
        size as u64,
    );
    assert_eq!(n.unwrap(), size as u64);
    assert!(rt.read_device(dst, size) == data[3..3 + size]);
    // 3..1 MiB + 4 is more than `THREADS` tasks of 64 KiB: it is cut into even shares of
    // 132 KiB (1 MiB + 1 over 8 threads, rounded up to 4 KiB) at multiples of 132 KiB, 8 tasks.
    assert_eq!(fb.tasks_dispatched(), 8);
    assert_eq!(fb.io_threads_started(), THREADS);
    assert_pool_idle(&fb);
}

#[test]
fn eight_callers_share_the_io_threads() {
    const CALLERS: usize = 8;
    let part = 5 * TASK + 4097;
    let dir = TempDir::new("fallback-pipe-callers");
    let path = dir.path().join("f");
    let data = pattern(CALLERS * part, 8);
    std::fs::write(&path, &data).unwrap();
    let file = read_write(&path);
    let rt = Arc::new(HostMemRuntime::builder().deferred().build());
    let fb = pipelined(&rt, 4096);

    std::thread::scope(|s| {
        for t in 0..CALLERS {
            let (fb, rt, file, data) = (&fb, &rt, &file, &data);
            s.spawn(move || {
                let dst = device(rt, part);
                for _ in 0..3 {
                    let off = (t * part) as u64;
                    let n = run(
                        fb,
                        &**rt,
                        file,
                        Op::Read,
                        dst,
                        part as u64,
                        0,
                        off,
                        part as u64,
                    );
                    assert_eq!(n.unwrap(), part as u64);
                    assert!(
                        rt.read_device(dst, part) == data[t * part..(t + 1) * part],
                        "caller {t}"
                    );
                }
            });
        }
    });
    assert_pool_idle(&fb);

    let new = pattern(CALLERS * part, 77);
    std::thread::scope(|s| {
        for t in 0..CALLERS {
            let (fb, rt, file, new) = (&fb, &rt, &file, &new);
            s.spawn(move || {
                let src = rt.device_with(&new[t * part..(t + 1) * part]);
                let off = (t * part) as u64;
                let n = run(
                    fb,
                    &**rt,
                    file,
                    Op::Write,
                    src,
                    part as u64,
                    0,
                    off,
                    part as u64,
                );
                assert_eq!(n.unwrap(), part as u64);
            });
        }
    });
    assert!(std::fs::read(&path).unwrap() == new);
    assert_eq!(fb.io_threads_started(), THREADS);
    let pool = fb.staging().unwrap();
    assert!(pool.allocated() <= 16, "{pool:?}");
    assert_pool_idle(&fb);
}

/// Reads `data.len()` bytes of `file` from offset 0 into `dst` in one request and checks
/// them against `data`.
fn read_whole(fb: &Fallback, rt: &HostMemRuntime, file: &File, dst: DevicePtr, data: &[u8]) {
    let size = data.len() as u64;
    let n = run(fb, rt, file, Op::Read, dst, size, 0, 0, size);
    assert_eq!(n.unwrap(), size);
    assert!(rt.read_device(dst, data.len()) == data);
}

/// A request that keeps every I/O thread busy has the buffers they take pinned as one
/// allocation before they start, not one allocation per buffer while the others copy; the
/// next requests find them.
#[test]
fn the_buffers_of_a_request_over_every_thread_are_one_allocation() {
    let dir = TempDir::new("fallback-pipe-reserve");
    let path = dir.path().join("f");
    let size = THREADS * TASK;
    let data = pattern(size, 21);
    std::fs::write(&path, &data).unwrap();
    let file = read_write(&path);
    let rt = Arc::new(HostMemRuntime::builder().deferred().build());
    let fb = pipelined(&rt, 4096);
    let dst = device(&rt, size);
    for _ in 0..3 {
        read_whole(&fb, &rt, &file, dst, &data);
    }
    assert!(fb.tasks_dispatched() >= THREADS as u64);
    assert_eq!(rt.calls(Call::AllocPinned), 1);
    assert_eq!(fb.staging().unwrap().allocated(), 2 * THREADS);
    assert_pool_idle(&fb);
}

/// With room for them, chunks are as large as a task: a task of one chunk takes one buffer
/// (it has no second chunk to overlap its copy with), so a request over every thread pins
/// one buffer per thread, as one allocation.
#[test]
fn tasks_of_one_chunk_take_one_buffer_each() {
    let dir = TempDir::new("fallback-one-chunk");
    let path = dir.path().join("f");
    let size = THREADS * TASK;
    let data = pattern(size, 23);
    std::fs::write(&path, &data).unwrap();
    let file = read_write(&path);
    let rt = Arc::new(HostMemRuntime::builder().deferred().build());
    let knobs = knobs(
        THREADS,
        TASK as u64,
        (2 * THREADS * TASK) as u64,
        4096,
        true,
    );
    assert_eq!(StagingConfig::for_knobs(&knobs).chunk_size, TASK);
    let fb = with_knobs(&rt, knobs);
    let dst = device(&rt, size);
    for _ in 0..2 {
        read_whole(&fb, &rt, &file, dst, &data);
    }
    assert_eq!(fb.tasks_dispatched(), 2 * THREADS as u64);
    assert_eq!(rt.calls(Call::AllocPinned), 1);
    assert_eq!(fb.staging().unwrap().allocated(), THREADS);
    assert_pool_idle(&fb);
}

/// Task sizes and staging budgets far beyond the configuration's bounds, set in the knobs
/// directly: the fallback is made without overflowing, its staging buffers are at most
/// 16 MiB, and a 5 MB request through the I/O threads pins only the buffers its two tasks
/// use.
#[test]
fn huge_sizes_neither_overflow_nor_pin_more_than_requests_use() {
    let dir = TempDir::new("fallback-huge-knobs");
    let path = dir.path().join("f");
    let file = read_write(&path);
    let size = 5_000_000;
    for (task_size, staging_memory) in [(64 << 30, 64 << 30), (u64::MAX, u64::MAX)] {
        let rt = Arc::new(HostMemRuntime::builder().deferred().build());
        let fb = with_knobs(
            &rt,
            knobs(
                2,
                task_size,
                staging_memory,
                FallbackKnobs::DEFAULT_SMALL_IO_THRESHOLD,
                true,
            ),
        );
        let chunk = fb.staging().unwrap().config().chunk_size;
        assert!(
            chunk <= StagingConfig::MAX_CHUNK_SIZE,
            "{task_size} {staging_memory}: chunks of {chunk} bytes"
        );
        pipelined_round_trip(&rt, &fb, &file, &path, 5, 3, size, 13);
        assert!(fb.tasks_dispatched() >= 2);
        let pool = fb.staging().unwrap();
        assert!(pool.allocated() <= 4, "{pool:?}");
        assert!(
            (pool.allocated() * chunk) as u64 <= 4 * StagingConfig::MAX_CHUNK_SIZE as u64,
            "{pool:?}"
        );
        assert!(
            (1..=pool.allocated()).contains(&rt.calls(Call::AllocPinned)),
            "pinned allocations beyond the pool's buffers: {}",
            rt.calls(Call::AllocPinned)
        );
    }
}

/// As [`a_write_is_on_disk_when_it_returns`], through the I/O threads: the one `fdatasync`
/// runs on the caller's thread after every task is done (`transfer.rs`), so what the tasks
/// wrote is durable when the call returns.
#[test]
fn a_pipelined_write_is_on_disk_when_it_returns() {
    let dir = TempDir::new("fallback-pipe-durable");
    let rt = Arc::new(HostMemRuntime::builder().deferred().build());
    let fb = pipelined(&rt, 0);
    let size = 7 * TASK + 17;
    let data = pattern(size, 9);
    let src = rt.device_with(&data);
    let control = read_write(&dir.path().join("control"));
    control.write_all_at(&data, 0).unwrap();
    let measurable = matches!(dirty_pages(&control), Some((d, w)) if d + w > 0);
    let path = dir.path().join("f");
    let file = read_write(&path);
    let n = run(
        &fb,
        &*rt,
        &file,
        Op::Write,
        src,
        size as u64,
        0,
        0,
        size as u64,
    )
    .unwrap();
    assert_eq!(n, size as u64);
    assert!(fb.tasks_dispatched() >= 8);
    if measurable {
        assert_eq!(dirty_pages(&file), Some((0, 0)), "pages still dirty");
    } else {
        eprintln!("note: cachestat cannot show dirty pages here; checking the data only");
    }
    assert!(std::fs::read(&path).unwrap() == data);
}

/// Drops `file`'s pages from the page cache (after writing back any dirty ones).
fn drop_cache(file: &File) {
    file.sync_all().unwrap();
    rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
}

/// Large reads of a file that is not in the page cache take its aligned middle with
/// `O_DIRECT` on a real ext4: the bytes are those of the file for unaligned offsets, a partly
/// cached file and the end of the file inside a chunk; a cached file, and a fallback with
/// `cold_direct_reads` off, read nothing directly.
#[test]
fn uncached_parts_of_large_reads_come_through_o_direct() {
    let fs = require!(MountedFs::ext4(hipfile_testfs::Ext4Data::Ordered, 64));
    let path = fs.path().join("cold");
    let size = 4 * MIB + 1234;
    let data = pattern(size, 21);
    std::fs::write(&path, &data).unwrap();
    let file = File::open(&path).unwrap();
    let rt = Arc::new(HostMemRuntime::builder().deferred().build());
    let fb = pipelined(&rt, 0);
    let dst = device(&rt, size + 13);
    let read = |fb: &Fallback, file_offset: usize, len: usize| {
        let n = run_probed(
            fb,
            &*rt,
            &file,
            Op::Read,
            dst,
            (size + 13) as u64,
            13,
            file_offset as u64,
            len as u64,
        )
        .unwrap() as usize;
        let end = (file_offset + len).min(size);
        assert_eq!(n, end - file_offset, "read of {len} at {file_offset}");
        assert!(
            rt.read_device(dst, 13 + n)[13..] == data[file_offset..end],
            "bytes of the read of {len} at {file_offset}"
        );
    };

    drop_cache(&file);
    read(&fb, 0, size);
    let whole = fb.direct_read_bytes();
    assert!(whole > 3 * MIB as u64, "{whole} bytes read directly");

    // Part of the file cached, an unaligned start, the end of the file inside the last chunk.
    // The MiB is read through a descriptor without readahead, so that only it is cached.
    drop_cache(&file);
    let no_readahead = File::open(&path).unwrap();
    rustix::fs::fadvise(&no_readahead, 0, None, rustix::fs::Advice::Random).unwrap();
    let mut cached = vec![0; MIB];
    no_readahead.read_exact_at(&mut cached, MIB as u64).unwrap();
    read(&fb, 4097, size);
    let partly = fb.direct_read_bytes() - whole;
    // Chunks are cut at multiples of the chunk size in file offsets, so only the first one
    // (unaligned) and those over the cached MiB are read buffered.
    assert!(
        partly > 2 * MIB as u64 && partly <= (size - MIB) as u64,
        "{partly} bytes read directly"
    );

    // All of it cached now (a buffered read fills the cache): nothing goes direct.
    std::fs::read(&path).unwrap();
    let before = fb.direct_read_bytes();
    read(&fb, 5, size - 5000);
    assert_eq!(fb.direct_read_bytes(), before);

    let buffered_only = with_knobs(&rt, knobs(THREADS, TASK as u64, 256 * KIB as u64, 0, false));
    drop_cache(&file);
    read(&buffered_only, 0, size);
    assert_eq!(buffered_only.direct_read_bytes(), 0);
    assert_pool_idle(&fb);
}

/// With one I/O thread a request is one task: below 16 MiB its uncached parts go direct, from
/// 16 MiB on they are read buffered (readahead keeps the disk busier along a long task).
#[test]
fn long_tasks_read_uncached_parts_buffered() {
    let fs = require!(MountedFs::ext4(hipfile_testfs::Ext4Data::Ordered, 64));
    let path = fs.path().join("long");
    let size = 17 * MIB;
    let data = pattern(size, 22);
    std::fs::write(&path, &data).unwrap();
    let file = File::open(&path).unwrap();
    let rt = Arc::new(HostMemRuntime::builder().deferred().build());
    let fb = with_knobs(&rt, knobs(1, TASK as u64, 256 * KIB as u64, 0, true));
    let dst = device(&rt, size);
    for (len, direct) in [(8 * MIB, true), (size, false)] {
        drop_cache(&file);
        let before = fb.direct_read_bytes();
        let n = run_probed(
            &fb,
            &*rt,
            &file,
            Op::Read,
            dst,
            size as u64,
            0,
            0,
            len as u64,
        )
        .unwrap();
        assert_eq!(n, len as u64);
        assert!(rt.read_device(dst, len) == data[..len]);
        assert_eq!(fb.direct_read_bytes() > before, direct, "a read of {len}");
    }
    assert_pool_idle(&fb);
}

/// One file read into buffers on four devices at once, by a caller per device, in requests
/// large enough for the I/O threads and small enough for the caller's thread; then written
/// back from each. Every copy runs on a stream of its memory's device (the runtime fails the
/// test otherwise), the bytes are the file's, and each device's counters show its own bytes.
#[test]
fn buffers_on_several_devices_are_served_at_once() {
    const DEVICES: i32 = 4;
    let part = 3 * TASK + 4097;
    let dir = TempDir::new("fallback-devices");
    let path = dir.path().join("f");
    let data = pattern(DEVICES as usize * part, 31);
    std::fs::write(&path, &data).unwrap();
    let file = read_write(&path);
    let rt = Arc::new(
        HostMemRuntime::builder()
            .deferred()
            .devices(DEVICES)
            .build(),
    );
    let fb = pipelined(&rt, 64 * KIB as u64);

    std::thread::scope(|s| {
        for d in 0..DEVICES {
            let (fb, rt, file, data) = (&fb, &rt, &file, &data);
            s.spawn(move || {
                let dst = rt.device_with_on(d, &vec![0; data.len()]);
                // The whole file, then a small request on the caller's thread.
                let n = run(
                    fb,
                    &**rt,
                    file,
                    Op::Read,
                    dst,
                    data.len() as u64,
                    0,
                    0,
                    data.len() as u64,
                );
                assert_eq!(n.unwrap(), data.len() as u64);
                assert!(rt.read_device(dst, data.len()) == data[..], "device {d}");
                let n = run(
                    fb,
                    &**rt,
                    file,
                    Op::Read,
                    dst,
                    data.len() as u64,
                    7,
                    5,
                    1000,
                );
                assert_eq!(n.unwrap(), 1000);
                assert!(
                    rt.read_device(dst, 1007)[7..] == data[5..1005],
                    "device {d}"
                );
            });
        }
    });
    for d in 0..DEVICES as usize {
        assert_eq!(
            rt.bytes_to_device(d),
            data.len() as u64 + 1000,
            "device {d}"
        );
    }

    let new = pattern(DEVICES as usize * part, 32);
    std::thread::scope(|s| {
        for d in 0..DEVICES {
            let (fb, rt, file, new) = (&fb, &rt, &file, &new);
            s.spawn(move || {
                let at = d as usize * part;
                let src = rt.device_with_on(d, &new[at..at + part]);
                let n = run(
                    fb,
                    &**rt,
                    file,
                    Op::Write,
                    src,
                    part as u64,
                    0,
                    at as u64,
                    part as u64,
                );
                assert_eq!(n.unwrap(), part as u64);
            });
        }
    });
    assert!(std::fs::read(&path).unwrap() == new);
    for d in 0..DEVICES as usize {
        assert_eq!(rt.bytes_from_device(d), part as u64, "device {d}");
    }
    assert!(fb.tasks_dispatched() > 0);
    assert_pool_idle(&fb);
}

/// Facts that nobody checked (a made-up length, say) can be scored, but the fallback moves
/// no bytes for a request validated against them: it neither copies nor stages anything.
#[test]
fn no_bytes_move_for_a_request_validated_against_made_up_facts() {
    use hipfile_core::mock::MockGpuRuntime;
    let mut rt = MockGpuRuntime::new();
    rt.expect_alloc_pinned().never();
    rt.expect_copy_to_device().never();
    rt.expect_copy_to_host().never();
    let fallback =
        Fallback::with_runtime(&config(), std::sync::Arc::new(rt), StagingConfig::default());
    let file = std::fs::File::open("/dev/zero").unwrap();
    let made_up = hipfile_core::BufferFacts {
        base: hipfile_core::DevicePtr(0x7f00_0000_0000),
        len: 1 << 20,
        memory: hipfile_core::MemoryKind::Device,
        device: 0,
    };
    for op in [Op::Read, Op::Write] {
        let request = hipfile_core::Request {
            op,
            size: 1 << 20,
            file_offset: 0,
            buffer_offset: 0,
        }
        .validate(&made_up)
        .unwrap();
        let facts = hipfile_probe::file_facts(std::os::fd::AsFd::as_fd(&file)).unwrap();
        let s = hipfile_core::Submission {
            request: &request,
            file: &facts,
            buffer: &made_up,
        };
        assert!(fallback.score(&s).accepted());
        let target = hipfile_core::IoTarget {
            direct: None,
            buffered: std::os::fd::AsFd::as_fd(&file),
        };
        let e = fallback.io(&s, &target).unwrap_err();
        assert!(e.to_string().contains("did not vouch"), "{e}");
    }
}

#[test]
fn with_as_many_callers_as_half_the_threads_a_request_of_one_task_stays_on_its_callers_thread() {
    let dir = TempDir::new("fallback-callers");
    let path = dir.path().join("f");
    let data = pattern(4 * TASK, 9);
    std::fs::write(&path, &data).unwrap();
    let file = File::open(&path).unwrap();
    let rt = Arc::new(HostMemRuntime::builder().deferred().build());
    // Four I/O threads: two callers at once are half of them.
    let fb = with_knobs(&rt, knobs(4, TASK as u64, 256 * KIB as u64, 4096, true));
    let held = device(&rt, TASK);
    let mine = device(&rt, TASK);
    let gate = hipfile_testkit::Gate::new();
    rt.faults()
        .add(Fault::on(Call::CopyToDevice).touching(held).park(&gate));
    let _release = gate.release_on_drop();
    std::thread::scope(|s| {
        // A lone caller's request of one task goes to the I/O threads, whose copy parks.
        let first = s.spawn(|| {
            run(
                &fb,
                &*rt,
                &file,
                Op::Read,
                held,
                TASK as u64,
                0,
                0,
                TASK as u64,
            )
        });
        gate.wait_parked(|| first.is_finished());
        assert_eq!(fb.tasks_dispatched(), 1);
        // A second caller while the first is in: its request of one task is served on its
        // own thread, so it ends while the first's I/O thread is held.
        let second = s.spawn(|| {
            run(
                &fb,
                &*rt,
                &file,
                Op::Read,
                mine,
                TASK as u64,
                0,
                TASK as u64,
                TASK as u64,
            )
        });
        // A guard against waiting for ever, not a measure of speed.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !second.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let ended_alone = second.is_finished();
        gate.release();
        assert_eq!(second.join().unwrap().unwrap(), TASK as u64);
        assert!(rt.read_device(mine, TASK) == data[TASK..2 * TASK]);
        assert!(
            ended_alone,
            "the second caller's request waited for the first caller's held I/O thread"
        );
        assert_eq!(
            fb.tasks_dispatched(),
            1,
            "the second caller's request was handed to the I/O threads"
        );
        assert_eq!(first.join().unwrap().unwrap(), TASK as u64);
    });
    assert!(rt.read_device(held, TASK) == data[..TASK]);
    // Alone again: a request of one task is handed off.
    let n = run(
        &fb,
        &*rt,
        &file,
        Op::Read,
        mine,
        TASK as u64,
        0,
        2 * TASK as u64,
        TASK as u64,
    );
    assert_eq!(n.unwrap(), TASK as u64);
    assert_eq!(fb.tasks_dispatched(), 2);
    assert_pool_idle(&fb);
}
