//! Requests are ordered after the work the caller queued on the legacy null stream before
//! them (docs/BEHAVIOUR.md §3.7), whichever API makes them and whichever backend serves them.
//!
//! Each test holds the emulated runtime's null stream back with a host function, queues on
//! it a copy into the buffer (as `cudaMemcpy` from pageable memory, `cudaMemset` or a kernel
//! leave work behind), and then makes its request. The hold is released once the request has
//! ended or has begun to wait for the null stream (the emulated runtime's
//! `hipfileEmuNullStreamUsers` grows: a thread waits for it, or a host function was queued
//! behind the copy). A write must carry the copied bytes to the file, and a read's bytes must
//! not be overwritten by the copy: without the order, the write takes the buffer's earlier
//! bytes and the copy lands on top of the read.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.
#![allow(unsafe_code)]

use hipfile::core::runtime::{HostFunctions, Streams};
use hipfile::{
    BackendKind, BatchIo, BatchStatus, ConfigBuilder, DeviceBuffer, DevicePtr, Driver, FileHandle,
    IoOutcome, Op, Platform, StreamHandle,
};
use hipfile_testfs::{MountedFs, Skip, TempDir, emulated_runtime, require};
use std::ffi::CString;
use std::fs::OpenOptions;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The runtime's streams (every runtime these tests use has them).
fn streams(d: &Driver) -> &dyn Streams {
    d.tuning().gpu().streams().expect("the runtime has streams")
}

/// The runtime's host functions (every runtime these tests use has them).
fn host_functions(d: &Driver) -> &dyn HostFunctions {
    streams(d)
        .host_functions()
        .expect("the runtime has host functions")
}

/// The null stream is the process's: one test at a time holds it.
static SERIAL: Mutex<()> = Mutex::new(());

const NULL: StreamHandle = StreamHandle(0);

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(7) as u8 ^ seed)
        .collect()
}

/// A driver on the emulated runtime; with `fallback`, the fastpath is never used.
fn driver(fallback: bool) -> Result<Driver, Skip> {
    let lib = emulated_runtime()?;
    let config = ConfigBuilder::new()
        .hip_library(lib)
        .io_threads(2)
        .request_threads(2)
        .force_compat_mode(fallback)
        .build_with(|_| None)
        .0;
    let d = Driver::open_private(config).unwrap();
    assert_eq!(d.runtime().platform, Platform::Emulated);
    Ok(d)
}

/// `hipfileEmuNullStreamUsers` of the emulated runtime the driver loaded.
fn null_stream_users() -> u64 {
    let path = CString::new(
        emulated_runtime()
            .unwrap()
            .into_os_string()
            .into_encoded_bytes(),
    )
    .unwrap();
    // SAFETY: the library is loaded already (RTLD_NOLOAD loads nothing); the symbol has the
    // hook's C signature, `uint64_t (void)`.
    unsafe {
        let lib = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        assert!(!lib.is_null(), "the emulated runtime is not loaded");
        let sym = libc::dlsym(lib, c"hipfileEmuNullStreamUsers".as_ptr());
        assert!(!sym.is_null());
        let users: extern "C" fn() -> u64 = std::mem::transmute(sym);
        let n = users();
        libc::dlclose(lib);
        n
    }
}

/// Holds the null stream back until the returned sender sends or is dropped.
fn hold_null_stream(d: &Driver) -> std::sync::mpsc::Sender<()> {
    let (go, wait) = std::sync::mpsc::channel::<()>();
    host_functions(d)
        .launch_host_func(
            NULL,
            Box::new(move || {
                let _ = wait.recv();
            }),
        )
        .unwrap();
    go
}

/// Runs `request` while the null stream holds a copy of `bytes` to `at` that has not run
/// yet, and returns its result once the copy has run.
fn behind_null_stream_copy<T: Send>(
    d: &Driver,
    at: DevicePtr,
    bytes: &[u8],
    request: impl FnOnce() -> T + Send,
) -> T {
    let release = hold_null_stream(d);
    // SAFETY: `at..+len` is device memory of the test's buffer, alive until the null stream
    // is synchronised below; `bytes` outlives that too.
    unsafe { streams(d).copy_to_device_async(at, bytes.as_ptr(), bytes.len(), NULL) }.unwrap();
    let before = null_stream_users();
    let ended = AtomicBool::new(false);
    let result = std::thread::scope(|s| {
        let call = s.spawn(|| {
            let r = request();
            ended.store(true, Ordering::SeqCst);
            r
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ended.load(Ordering::SeqCst) && null_stream_users() <= before {
            assert!(
                Instant::now() < deadline,
                "the request neither ended nor waited"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(release);
        call.join().unwrap()
    });
    streams(d).stream_synchronize(NULL).unwrap();
    result
}

/// A file of `data` in `dir`, opened for reading and writing and registered with `d`.
fn registered(d: &Driver, dir: &Path, data: &[u8]) -> (std::fs::File, FileHandle) {
    let path = dir.join("f.bin");
    std::fs::write(&path, data).unwrap();
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let fh = d.register_file(&f).unwrap();
    (f, fh)
}

fn file_bytes(f: &std::fs::File, len: usize) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut out = vec![0u8; len];
    f.read_exact_at(&mut out, 0).unwrap();
    out
}

/// The APIs a request can be made through.
#[derive(Debug, Clone, Copy)]
enum Api {
    Sync,
    Future,
    Owned,
    Batch,
}

const APIS: [Api; 4] = [Api::Sync, Api::Future, Api::Owned, Api::Batch];

/// One request of `op` for all of `buf` at file offset 0 through `api`: its outcome, and
/// the buffer back.
fn request(api: Api, op: Op, fh: &FileHandle, buf: DeviceBuffer) -> (IoOutcome, DeviceBuffer) {
    let mut buf = buf;
    let outcome = match (api, op) {
        (Api::Sync, Op::Read) => fh.read_at(&mut buf.slice_mut(..).unwrap(), 0).unwrap(),
        (Api::Sync, _) => fh.write_at(&buf.slice(..).unwrap(), 0).unwrap(),
        (Api::Future, Op::Read) => fh.read_at_async(&mut buf, 0).wait().unwrap(),
        (Api::Future, _) => fh.write_at_async(&buf, 0).wait().unwrap(),
        (Api::Owned, _) => {
            let io = match op {
                Op::Read => fh.read_owned(buf, .., 0),
                _ => fh.write_owned(buf, .., 0),
            };
            let (result, back) = io.map_err(|(e, _)| e).unwrap().wait();
            buf = back;
            result.unwrap()
        }
        (Api::Batch, _) => {
            let mut batch = fh.driver().batch(1).unwrap();
            let io = match op {
                Op::Read => BatchIo::read(fh, &mut buf, 0, 7),
                _ => BatchIo::write(fh, &buf, 0, 7),
            };
            batch.submit([io]).unwrap();
            let mut events = batch.poll(1, 1, Some(Duration::from_secs(60)));
            assert_eq!(events.len(), 1);
            let event = events.remove(0);
            assert_eq!(event.cookie, 7);
            match event.status {
                BatchStatus::Complete(outcome) => outcome,
                other => panic!("the batch request ended with {other:?}"),
            }
        }
    };
    (outcome, buf)
}

/// Writes a buffer whose bytes a null-stream copy put there just before, through `api`: the
/// file must hold those bytes (`false` when it does not).
fn write_after_copy(d: &Driver, dir: &Path, len: usize, api: Api, served_by: BackendKind) -> bool {
    let (earlier, copied) = (pattern(len, 1), pattern(len, 2));
    let (f, fh) = registered(d, dir, &vec![0u8; len]);
    let mut buf = d.alloc(len).unwrap();
    buf.copy_from_host(0, &earlier).unwrap();
    let at = buf.ptr();
    let (outcome, _buf) =
        behind_null_stream_copy(d, at, &copied, || request(api, Op::Write, &fh, buf));
    assert_eq!(outcome.bytes, len as u64, "{api:?}");
    assert_eq!(outcome.backend, served_by, "{api:?}");
    file_bytes(&f, len) == copied
}

/// Reads into a buffer that a null-stream copy queued just before targets, through `api`:
/// the buffer must hold the file's bytes (`false` when it does not).
fn read_after_copy(d: &Driver, dir: &Path, len: usize, api: Api, served_by: BackendKind) -> bool {
    let (contents, copied) = (pattern(len, 3), pattern(len, 4));
    let (_f, fh) = registered(d, dir, &contents);
    let buf = d.alloc(len).unwrap();
    let at = buf.ptr();
    let (outcome, buf) =
        behind_null_stream_copy(d, at, &copied, || request(api, Op::Read, &fh, buf));
    assert_eq!(outcome.bytes, len as u64, "{api:?}");
    assert_eq!(outcome.backend, served_by, "{api:?}");
    let mut back = vec![0u8; len];
    buf.copy_to_host(0, &mut back).unwrap();
    back == contents
}

/// Every API, both directions, small requests (served on the caller's or a request thread)
/// and large ones (cut into tasks for the I/O threads).
fn every_api(d: &Driver, dir: &Path, served_by: BackendKind) {
    let mut wrong = Vec::new();
    for len in [64 << 10, 4 << 20] {
        for api in APIS {
            if !write_after_copy(d, dir, len, api, served_by) {
                wrong.push(format!(
                    "{api:?} write of {len} bytes: not the null stream's bytes"
                ));
            }
            if !read_after_copy(d, dir, len, api, served_by) {
                wrong.push(format!(
                    "{api:?} read of {len} bytes: overwritten by the copy"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn fallback_requests_start_after_the_null_streams_earlier_work() {
    let _one = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let d = require!(driver(true));
    let dir = TempDir::new("null-stream-fallback");
    every_api(&d, dir.path(), BackendKind::Fallback);
}

#[test]
fn fastpath_requests_start_after_the_null_streams_earlier_work() {
    let _one = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let fs = require!(MountedFs::xfs(300));
    let d = require!(driver(false));
    every_api(&d, fs.path(), BackendKind::Fastpath);
}

#[test]
fn copies_of_device_buffers_start_after_the_null_streams_earlier_work() {
    let _one = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let d = require!(driver(true));
    let len = 64 << 10;
    let copied = pattern(len, 5);
    let mut buf = d.alloc(len).unwrap();
    buf.copy_from_host(0, &pattern(len, 6)).unwrap();
    let at = buf.ptr();
    let back = behind_null_stream_copy(&d, at, &copied, || {
        let mut back = vec![0u8; len];
        buf.copy_to_host(0, &mut back).unwrap();
        back
    });
    assert!(
        back == copied,
        "the copy to the host missed the null stream's copy"
    );
    let written = pattern(len, 7);
    let mut buf = buf;
    behind_null_stream_copy(&d, at, &copied, || buf.copy_from_host(0, &written).unwrap());
    let mut back = vec![0u8; len];
    buf.copy_to_host(0, &mut back).unwrap();
    assert!(
        back == written,
        "the null stream's copy landed on top of the host's"
    );
}

#[test]
fn a_stream_ordered_request_on_the_null_stream_is_ordered_there_alone() {
    // Sample 031's pattern: a request queued on stream 0 itself runs when the stream reaches
    // it, after the copy queued before it, and never waits for itself.
    let _one = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for fallback in [true, false] {
        let d = require!(driver(fallback));
        let dir = TempDir::new("null-stream-ordered");
        let len = 64 << 10;
        let contents = pattern(len, 8);
        let (_f, fh) = registered(&d, dir.path(), &contents);
        let mut buf = d.alloc(len).unwrap();
        let release = hold_null_stream(&d);
        let copied = pattern(len, 9);
        // SAFETY: the buffer lives until the null stream is synchronised below.
        unsafe {
            streams(&d)
                .copy_to_device_async(buf.ptr(), copied.as_ptr(), len, NULL)
                .unwrap();
        }
        // SAFETY: the null stream is always live.
        let io = unsafe { fh.read_on_stream(NULL, &mut buf, 0) }.unwrap();
        drop(release);
        let outcome = io.wait().unwrap();
        assert_eq!(outcome.bytes, len as u64);
        streams(&d).stream_synchronize(NULL).unwrap();
        let mut back = vec![0u8; len];
        buf.copy_to_host(0, &mut back).unwrap();
        assert!(back == contents, "the read ran before the copy ahead of it");
    }
}
