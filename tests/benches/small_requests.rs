//! The library's own work for one small request, on the CPU: a 4 KiB read at a random offset
//! of a hot file, through the fallback into (emulated) device memory, synchronous and as a
//! future, one at a time and 32 in flight from one caller, beside the same read done by
//! hand (`pread` into pinned memory, then `DeviceBuffer::copy_from_host`: one thread of
//! `hipfile bench`'s staged raw path), and a bare round trip to another thread and back.
//!
//! The emulated runtime copies with `memcpy` on its own stream threads, so these figures
//! say what the library adds to a request (the hand-off to an engine thread and back, the
//! staging buffer, the null stream's order), not what a GPU does: on the GPU machine, 32
//! futures of 4 KiB reached 0.76–0.79 of bare runtime calls (docs/PERF.md), and this is the
//! loop in which to shorten that path before measuring it there. Needs the emulated runtime
//! (`cargo build -p hipfile-emu`); says so and measures nothing without it. Run with
//! `cargo bench -p hipfile-tests --bench small_requests`.

#![allow(missing_docs, clippy::unwrap_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use hipfile::{ConfigBuilder, DeviceBuffer, Driver, FileHandle};
use hipfile_testfs::{TempDir, emulated_runtime};
use std::collections::VecDeque;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const IO: usize = 4096;
const FILE_SIZE: u64 = 64 << 20;
const IN_FLIGHT: usize = 32;

/// Random 4 KiB-aligned offsets of the file, the same list for every case.
struct Offsets {
    list: Vec<u64>,
    next: usize,
}

impl Offsets {
    fn new() -> Offsets {
        let blocks = FILE_SIZE / IO as u64;
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let list = (0..65_536)
            .map(|_| {
                // xorshift64: spread, repeatable, no dependency.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % blocks) * IO as u64
            })
            .collect();
        Offsets { list, next: 0 }
    }

    fn take(&mut self) -> u64 {
        let at = self.list[self.next];
        self.next = (self.next + 1) % self.list.len();
        at
    }
}

/// A hot test file of [`FILE_SIZE`] bytes, its handle and the driver, on the emulated
/// runtime with the fallback forced (as on a GPU without the fastpath).
struct Setup {
    _dir: TempDir,
    file: File,
    driver: Driver,
    handle: FileHandle,
}

fn setup() -> Option<Setup> {
    let lib = match emulated_runtime() {
        Ok(lib) => lib,
        Err(skip) => {
            eprintln!("small_requests: nothing measured: {skip}");
            return None;
        }
    };
    let dir = TempDir::new("small-requests");
    let path = dir.path().join("data");
    let data: Vec<u8> = (0..FILE_SIZE).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let file = File::open(&path).unwrap();
    let driver = Driver::open_with(
        ConfigBuilder::new()
            .hip_library(lib)
            .force_compat_mode(true),
    )
    .unwrap();
    let handle = driver.register_file(&file).unwrap();
    Some(Setup {
        _dir: dir,
        file,
        driver,
        handle,
    })
}

/// 32 futures in flight from one caller, the oldest waited for before another is queued,
/// as `hipfile bench --api async --queue-depth 32` keeps them; the time of `iters` requests.
fn futures_in_flight(s: &Setup, offsets: &mut Offsets, iters: u64) -> Duration {
    let mut bufs: Vec<DeviceBuffer> = (0..IN_FLIGHT)
        .map(|_| s.driver.alloc(IO).unwrap())
        .collect();
    let mut pending = VecDeque::with_capacity(IN_FLIGHT);
    let start = Instant::now();
    let mut queued = 0;
    while queued < iters || !pending.is_empty() {
        while queued < iters {
            let Some(buf) = bufs.pop() else { break };
            pending.push_back(s.handle.read_owned(buf, .., offsets.take()).unwrap());
            queued += 1;
        }
        if let Some(io) = pending.pop_front() {
            let (result, buf) = io.wait();
            assert_eq!(result.unwrap().bytes, IO as u64);
            bufs.push(buf);
        }
    }
    start.elapsed()
}

fn benches(c: &mut Criterion) {
    let Some(s) = setup() else { return };
    let mut offsets = Offsets::new();
    let mut group = c.benchmark_group("small_read_4k");

    let mut host = s.driver.alloc_pinned(IO).unwrap();
    let mut buf = s.driver.alloc(IO).unwrap();
    group.bench_function("by_hand", |b| {
        b.iter(|| {
            s.file.read_exact_at(&mut host, offsets.take()).unwrap();
            buf.copy_from_host(0, &host).unwrap();
        })
    });
    group.bench_function("sync", |b| {
        b.iter(|| {
            let o = s.handle.read_at(&mut buf, offsets.take()).unwrap();
            assert_eq!(o.bytes, IO as u64);
        })
    });
    let mut owned = Some(s.driver.alloc(IO).unwrap());
    group.bench_function("future", |b| {
        b.iter(|| {
            let io = s
                .handle
                .read_owned(owned.take().unwrap(), .., offsets.take())
                .unwrap();
            let (result, back) = io.wait();
            assert_eq!(result.unwrap().bytes, IO as u64);
            owned = Some(back);
        })
    });
    group.bench_function("futures_32_in_flight", |b| {
        b.iter_custom(|iters| futures_in_flight(&s, &mut offsets, iters))
    });
    group.finish();

    // What any future pays on this machine: a message to another thread and its answer,
    // the two wake-ups a request handed to an engine thread makes.
    let (to, from_caller) = mpsc::channel::<u64>();
    let (back, answers) = mpsc::channel::<u64>();
    let echo = std::thread::spawn(move || {
        for x in from_caller {
            if back.send(x).is_err() {
                break;
            }
        }
    });
    c.bench_function("thread_round_trip", |b| {
        b.iter(|| {
            to.send(1).unwrap();
            answers.recv().unwrap()
        })
    });
    drop(to);
    echo.join().unwrap();
}

criterion_group!(small_requests, benches);
criterion_main!(small_requests);
