//! Requests that do not block their caller, through the emulated runtime on a real file:
//! many in flight at once land where each asked, a future completes under a plain executor,
//! a failing request fails alone, cancellation moves nothing, and a leaked handle frees
//! nothing under a transfer.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile::{ConfigBuilder, Driver, Error, Op, Platform};
use hipfile_testfs::{Skip, TempDir, emulated_runtime, require};
use std::fs::{File, OpenOptions};
use std::future::{Future, IntoFuture};
use std::path::Path;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

fn driver(settings: ConfigBuilder) -> Result<Driver, Skip> {
    let lib = emulated_runtime()?;
    let config = settings.hip_library(lib).build_with(|_| None).0;
    let d = Driver::open_private(config).unwrap();
    assert_eq!(d.runtime().platform, Platform::Emulated);
    Ok(d)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(7) as u8 ^ seed)
        .collect()
}

fn file_with(dir: &TempDir, name: &str, data: &[u8]) -> (std::path::PathBuf, File) {
    let path = dir.path().join(name);
    std::fs::write(&path, data).unwrap();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    (path, file)
}

/// The smallest executor: polls, and parks the thread until the waker unparks it.
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        thread::park();
    }
}

#[test]
fn many_reads_in_flight_land_where_each_asked() {
    let d = require!(driver(
        ConfigBuilder::new().io_threads(4).request_threads(4)
    ));
    let dir = TempDir::new("async-io");
    let data = pattern(24 << 20, 3);
    let (_, file) = file_with(&dir, "data.bin", &data);
    let fh = d.register_file(&file).unwrap();
    // Small and large, aligned and not: the large ones go through the fallback's I/O
    // threads (or the fastpath) while the small ones run on the engine's threads.
    let sizes = [4096usize, 1000, 8 << 20, 65536, 3, 2 << 20, 123_457, 4096];
    let total: usize = sizes.iter().sum();
    let mut buf = d.alloc(total).unwrap();
    let mut views = Vec::new();
    let mut rest = buf.slice_mut(..).unwrap();
    for &size in &sizes {
        let (view, tail) = rest.split_at(size).unwrap();
        views.push(view);
        rest = tail;
    }
    let offsets: Vec<u64> = (0..sizes.len() as u64).map(|i| i * 1_999_999).collect();
    let pending: Vec<_> = views
        .iter_mut()
        .zip(&offsets)
        .map(|(view, &offset)| fh.read_at_async(view, offset))
        .collect();
    for (io, &size) in pending.into_iter().zip(&sizes) {
        assert_eq!(io.wait().unwrap().bytes, size as u64);
    }
    let mut at = 0;
    for (&size, &offset) in sizes.iter().zip(&offsets) {
        let mut got = vec![0u8; size];
        buf.copy_to_host(at, &mut got).unwrap();
        let offset = offset as usize;
        assert!(
            got == data[offset..offset + size],
            "read of {size} at {offset}"
        );
        at += size;
    }
}

#[test]
fn futures_complete_under_a_plain_executor_and_report_short_reads() {
    let d = require!(driver(ConfigBuilder::new()));
    let dir = TempDir::new("async-io");
    let data = pattern(10_000, 9);
    let (_, file) = file_with(&dir, "short.bin", &data);
    let fh = d.register_file(&file).unwrap();
    let mut buf = d.alloc(3 << 20).unwrap();
    let mut parts = buf.slice_mut(..).unwrap().chunks(1 << 20).unwrap();
    let mut pending: Vec<_> = parts
        .iter_mut()
        .enumerate()
        .map(|(i, view)| fh.read_at_async(view, i as u64 * 4000))
        .collect();
    // Requests run as soon as they are made; awaiting them in reverse order is fine.
    pending.reverse();
    let got: Vec<u64> = pending
        .into_iter()
        .map(|io| block_on(io).unwrap().bytes)
        .collect();
    // The file has 10 000 bytes: reads at 8000, 4000 and 0 get what is left.
    assert_eq!(got, [2000, 6000, 10_000]);
    let mut head = vec![0u8; 10_000];
    buf.copy_to_host(0, &mut head).unwrap();
    assert!(head == data);
}

#[test]
fn a_failing_request_fails_alone_with_its_own_error() {
    let d = require!(driver(ConfigBuilder::new()));
    let dir = TempDir::new("async-io");
    let data = pattern(1 << 20, 5);
    let (path, _) = file_with(&dir, "ro.bin", &data);
    let read_only = File::open(&path).unwrap();
    let fh = d.register_file(&read_only).unwrap();
    let mut buf = d.alloc(2 << 20).unwrap();
    let src = d.alloc(4096).unwrap();
    let (mut first, mut second) = buf.slice_mut(..).unwrap().split_at(1 << 20).unwrap();
    let a = fh.read_at_async(&mut first, 0);
    // A write on a read-only descriptor, and a read whose end is beyond i64::MAX.
    let bad_write = fh.write_at_async(&src, 0);
    let bad_read = fh.read_at_async(&mut second, u64::MAX - 10);
    let a = a.wait().unwrap();
    assert_eq!(a.bytes, 1 << 20);
    match bad_write.wait() {
        Err(Error::AccessMode { op: Op::Write, .. }) => {}
        other => panic!("the write on a read-only file gave {other:?}"),
    }
    match bad_read.wait() {
        Err(Error::InvalidValue { .. }) => {}
        other => panic!("the read beyond i64::MAX gave {other:?}"),
    }
    let mut got = vec![0u8; 1 << 20];
    buf.copy_to_host(0, &mut got).unwrap();
    assert!(got == data);
}

#[test]
fn writes_in_flight_all_reach_the_file() {
    let d = require!(driver(
        ConfigBuilder::new().io_threads(3).request_threads(3)
    ));
    let dir = TempDir::new("async-io");
    let (path, file) = file_with(&dir, "out.bin", &[]);
    let fh = d.register_file(&file).unwrap();
    let data = pattern(6 << 20, 11);
    let mut buf = d.alloc(data.len()).unwrap();
    buf.slice_mut(..).unwrap().copy_from_host(&data).unwrap();
    let pieces: Vec<_> = (0..data.len()).step_by(777_777).collect();
    let pending: Vec<_> = pieces
        .iter()
        .map(|&start| {
            let end = data.len().min(start + 777_777);
            (
                end - start,
                fh.write_at_async(buf.slice(start..end).unwrap(), start as u64),
            )
        })
        .collect();
    for (len, io) in pending {
        assert_eq!(io.wait().unwrap().bytes, len as u64);
    }
    assert!(std::fs::read(&path).unwrap() == data);
}

#[test]
fn a_cancelled_request_moves_nothing_and_the_others_complete() {
    // One request thread, and many requests: those behind the first are still queued when
    // they are cancelled (which ones is up to the scheduler; each is checked for what it
    // says happened).
    let d = require!(driver(
        ConfigBuilder::new().io_threads(1).request_threads(1)
    ));
    let dir = TempDir::new("async-io");
    let data = pattern(8 << 20, 1);
    let (_, file) = file_with(&dir, "cancel.bin", &data);
    let fh = d.register_file(&file).unwrap();
    let mut buf = d.alloc(32 << 20).unwrap();
    let mut views = buf.slice_mut(..).unwrap().chunks(1 << 20).unwrap();
    let pending: Vec<_> = views
        .iter_mut()
        .enumerate()
        .map(|(i, view)| fh.read_at_async(view, (i as u64 % 8) << 20))
        .collect();
    let cancelled: Vec<bool> = pending.iter().rev().map(|io| io.cancel()).collect();
    let cancelled: Vec<bool> = cancelled.into_iter().rev().collect();
    assert!(
        cancelled.iter().any(|&c| c),
        "with one thread and 32 requests, the last ones are still queued"
    );
    for (io, &was_cancelled) in pending.into_iter().zip(&cancelled) {
        let result = io.wait();
        if was_cancelled {
            assert!(matches!(result, Err(Error::Canceled { op: Op::Read })));
        } else {
            assert_eq!(result.unwrap().bytes, 1 << 20);
        }
    }
    for (i, &was_cancelled) in cancelled.iter().enumerate() {
        let mut got = vec![0u8; 1 << 20];
        buf.copy_to_host(i << 20, &mut got).unwrap();
        if was_cancelled {
            assert!(
                got.iter().all(|&b| b == 0),
                "cancelled request {i} moved bytes"
            );
        } else {
            let at = (i % 8) << 20;
            assert!(got == data[at..at + (1 << 20)], "request {i}");
        }
    }
    // Every request has ended, so nothing holds the file any more.
    fh.deregister().unwrap();
}

#[test]
fn a_deregistered_file_fails_at_once_in_the_handle() {
    let d = require!(driver(ConfigBuilder::new()));
    let dir = TempDir::new("async-io");
    let (_, file) = file_with(&dir, "gone.bin", &[1u8; 4096]);
    let fh = d.register_file(&file).unwrap();
    fh.deregister().unwrap();
    let mut buf = d.alloc(4096).unwrap();
    let io = fh.read_at_async(&mut buf, 0);
    assert!(matches!(io.wait(), Err(Error::HandleNotRegistered)));
}

#[test]
fn a_leaked_handle_frees_nothing_under_its_transfer() {
    let dir = TempDir::new("async-io");
    let data = pattern(16 << 20, 2);
    let (path, file) = file_with(&dir, "leak.bin", &data);
    {
        let d = require!(driver(
            ConfigBuilder::new().io_threads(1).request_threads(1)
        ));
        let fh = d.register_file(&file).unwrap();
        let mut buf = d.alloc(16 << 20).unwrap();
        for _ in 0..4 {
            std::mem::forget(fh.read_at_async(&mut buf, 0));
        }
        // The buffer, the handle and the driver go while the requests may still run: the
        // requests hold the memory, the file and the driver until they end.
        drop(buf);
        drop(fh);
        drop(d);
    }
    // The file is intact and a new driver works.
    assert!(std::fs::read(Path::new(&path)).unwrap() == data);
    let d = require!(driver(ConfigBuilder::new()));
    let fh = d.register_file(&File::open(&path).unwrap()).unwrap();
    let mut buf = d.alloc(4096).unwrap();
    assert_eq!(fh.read_at_async(&mut buf, 0).wait().unwrap().bytes, 4096);
}

#[test]
fn owned_buffers_come_back_and_keep_a_queue_full() {
    let d = require!(driver(
        ConfigBuilder::new().io_threads(2).request_threads(2)
    ));
    let dir = TempDir::new("async-io");
    let data = pattern(16 * 65536, 12);
    let (_, file) = file_with(&dir, "owned.bin", &data);
    let fh = d.register_file(&file).unwrap();
    // Four requests in flight over four buffers, each reused as soon as it comes back.
    let mut free: Vec<_> = (0..4).map(|_| d.alloc(65536).unwrap()).collect();
    let mut pending = std::collections::VecDeque::new();
    let mut block = 0u64;
    let mut checked = 0;
    while checked < 16 {
        while block < 16
            && let Some(buf) = free.pop()
        {
            pending.push_back((block, fh.read_owned(buf, .., block * 65536).unwrap()));
            block += 1;
        }
        let (at, io) = pending.pop_front().unwrap();
        let (result, buf) = block_on(io.into_future());
        assert_eq!(result.unwrap().bytes, 65536);
        let mut got = vec![0u8; 65536];
        buf.copy_to_host(0, &mut got).unwrap();
        let at = at as usize * 65536;
        assert!(got == data[at..at + 65536], "block at {at}");
        checked += 1;
        free.push(buf);
    }
}

/// The retry rule holds for requests in flight too: an asynchronous fastpath request whose
/// `hipAmdFileRead` fails with `ENODEV` or `EREMOTEIO` is served by the fallback, and one
/// that fails with another errno fails with it, alone.
#[test]
fn asynchronous_fastpath_failures_are_retried_on_the_fallback_as_synchronous_ones_are() {
    use hipfile::BackendKind;
    use hipfile_testfs::MountedFs;
    use hipfile_testkit::{Call, Fault, Injected};
    let fs = require!(MountedFs::xfs(300));
    let base = require!(driver(ConfigBuilder::new()));
    let injected = Arc::new(Injected::new(base.tuning().gpu().clone()));
    let d = Driver::with_runtime(
        base.config().clone(),
        injected.clone(),
        base.runtime().clone(),
    );
    let data = pattern(3 << 20, 21);
    let path = fs.path().join("retry.bin");
    std::fs::write(&path, &data).unwrap();
    let file = OpenOptions::new().read(true).open(&path).unwrap();
    let fh = d.register_file(&file).unwrap();
    let mut buf = d.alloc(3 << 20).unwrap();
    // Aligned: the fastpath serves, unless its call fails.
    let clean = fh
        .read_at_async(buf.slice_mut(..1 << 20).unwrap(), 0)
        .wait()
        .unwrap();
    assert_eq!(
        (clean.backend, clean.retried),
        (BackendKind::Fastpath, false)
    );
    for errno in [libc::ENODEV, libc::EREMOTEIO] {
        injected
            .faults()
            .add(Fault::on(Call::AmdFileRead).once().errno(errno));
        let got = fh.read_at_async(&mut buf, 0).wait().unwrap();
        assert_eq!(got.bytes, 3 << 20, "errno {errno}");
        assert_eq!(
            (got.backend, got.retried),
            (BackendKind::Fallback, true),
            "errno {errno}"
        );
    }
    injected
        .faults()
        .add(Fault::on(Call::AmdFileRead).once().errno(libc::EIO));
    let (a, b) = buf.slice_mut(..).unwrap().split_at(1 << 20).unwrap();
    let failing = fh.read_at_async(a, 0);
    let e = failing.wait().unwrap_err();
    assert_eq!(e.errno(), Some(libc::EIO), "{e}");
    let other = fh.read_at_async(b, 1 << 20).wait().unwrap();
    assert_eq!(other.bytes, 2 << 20);
    let mut got = vec![0u8; 3 << 20];
    buf.copy_to_host(0, &mut got).unwrap();
    assert!(got[1 << 20..] == data[1 << 20..]);
}

/// Host memory stays within the staging budget however many requests are queued: 64 reads
/// of 1 MiB in flight through the fallback, with 512 KiB of staging memory, never pin more
/// than the pool's buffers (on a host-memory runtime that counts its pinned allocations).
#[test]
fn requests_in_flight_stay_within_the_staging_budget() {
    use hipfile_testkit::HostMemRuntime;
    let dir = TempDir::new("async-io");
    let data = pattern(8 << 20, 30);
    let (_, file) = file_with(&dir, "budget.bin", &data);
    let config = ConfigBuilder::new()
        .force_compat_mode(true)
        .staging_memory(512 << 10)
        .task_size(256 << 10)
        .small_io_threshold(128 << 10)
        .io_threads(4)
        .build_with(|_| None)
        .0;
    let runtime = Arc::new(HostMemRuntime::new());
    let d = Driver::with_runtime(config, runtime.clone(), hipfile::RuntimeReport::default());
    let fh = d.register_file(&file).unwrap();
    let mut buf = d.alloc(64 << 20).unwrap();
    let pending: Vec<_> = buf
        .slice_mut(..)
        .unwrap()
        .chunks(1 << 20)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(i, view)| fh.read_at_async(view, ((i % 8) as u64) << 20))
        .collect();
    for io in pending {
        assert_eq!(io.wait().unwrap().bytes, 1 << 20);
    }
    let pinned = runtime.live_pinned();
    let staging = hipfile_fallback::StagingConfig::for_knobs(&d.config().fallback_knobs());
    assert!(pinned > 0, "the fallback staged through pinned memory");
    assert!(
        pinned <= staging.max_buffers && staging.max_buffers * staging.chunk_size <= 512 << 10,
        "{pinned} pinned buffers; the pool allows {} of {} bytes",
        staging.max_buffers,
        staging.chunk_size
    );
    // This runtime copies only to pinned memory.
    let mut got = d.alloc_pinned(1 << 20).unwrap();
    buf.copy_to_host(63 << 20, &mut got).unwrap();
    assert!(got[..] == data[7 << 20..]);
}

/// Small requests run whole on a request thread (a `pread` and a copy), so how many run at
/// once is how many request threads there are, which `request_threads` sets apart from the
/// I/O threads.
#[test]
fn small_requests_run_as_many_at_once_as_there_are_request_threads() {
    use hipfile_testkit::{Call, Fault, Gate, Injected};
    let base = require!(driver(
        ConfigBuilder::new().io_threads(1).request_threads(4)
    ));
    let injected = Arc::new(Injected::new(base.tuning().gpu().clone()));
    let d = Driver::with_runtime(
        base.config().clone(),
        injected.clone(),
        base.runtime().clone(),
    );
    let dir = TempDir::new("async-io");
    let data = pattern(64 << 10, 2);
    let (_, file) = file_with(&dir, "four.bin", &data);
    let fh = d.register_file(&file).unwrap();
    let gate = Gate::new();
    injected
        .faults()
        .add(Fault::on(Call::CopyToDevice).synchronous().park(&gate));
    let _release = gate.release_on_drop();
    let mut bufs: Vec<_> = (0..4).map(|_| d.alloc(4096).unwrap()).collect();
    // Unaligned: the fallback serves them, each with a synchronous copy that parks.
    let pending: Vec<_> = bufs
        .iter_mut()
        .enumerate()
        .map(|(i, b)| fh.read_at_async(b.slice_mut(..1000).unwrap(), 1 + i as u64 * 4096))
        .collect();
    // A guard against a deadlock, not a measure of speed.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while gate.parked() < 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "only {} of 4 small requests ran at once with four request threads",
            gate.parked()
        );
        thread::sleep(std::time::Duration::from_millis(2));
    }
    gate.release();
    for io in pending {
        assert_eq!(io.wait().unwrap().bytes, 1000);
    }
    for (i, b) in bufs.iter().enumerate() {
        let mut got = vec![0u8; 1000];
        b.copy_to_host(0, &mut got).unwrap();
        let at = 1 + i * 4096;
        assert!(got[..] == data[at..at + 1000]);
    }
}

/// A waker that panics when the request ends must not take the engine down: the request
/// still reports its result, and later requests are served by the same thread.
#[test]
fn a_panicking_waker_leaves_the_engine_serving() {
    use hipfile_testkit::{Call, Fault, Gate, Injected};
    struct Explodes;
    impl Wake for Explodes {
        fn wake(self: Arc<Self>) {
            panic!("a waker that panics");
        }
    }
    let base = require!(driver(
        ConfigBuilder::new().io_threads(1).request_threads(1)
    ));
    let injected = Arc::new(Injected::new(base.tuning().gpu().clone()));
    let d = Driver::with_runtime(
        base.config().clone(),
        injected.clone(),
        base.runtime().clone(),
    );
    let dir = TempDir::new("async-io-waker");
    let data = pattern(64 << 10, 3);
    let (_, file) = file_with(&dir, "waker.bin", &data);
    let fh = d.register_file(&file).unwrap();
    let gate = Gate::new();
    injected.faults().add(
        Fault::on(Call::CopyToDevice)
            .synchronous()
            .once()
            .park(&gate),
    );
    let mut first = d.alloc(4096).unwrap();
    let mut io = fh.read_at_async(first.slice_mut(..1000).unwrap(), 1);
    gate.wait_parked(|| false);
    // Polled while it is held, so that its end wakes the panicking waker.
    let waker = Waker::from(Arc::new(Explodes));
    assert!(matches!(
        std::pin::Pin::new(&mut io).poll(&mut Context::from_waker(&waker)),
        Poll::Pending
    ));
    gate.release();
    assert_eq!(io.wait().unwrap().bytes, 1000);
    // The one engine thread still serves. On a thread of its own, left behind if it hangs.
    let (done, ended) = std::sync::mpsc::channel();
    let (fh, mut second) = (fh.clone(), d.alloc(4096).unwrap());
    thread::spawn(move || {
        let got = fh
            .read_at_async(second.slice_mut(..1000).unwrap(), 2)
            .wait();
        let _ = done.send(got.map(|o| o.bytes));
    });
    // A guard against a hang, not a measure of speed.
    let got = ended.recv_timeout(std::time::Duration::from_secs(60));
    assert!(matches!(got, Ok(Ok(1000))), "{got:?}");
}
