//! Stream-ordered requests through the emulated runtime (whose streams run in order on their
//! own threads): a read runs when its stream reaches it and holds the stream's later work
//! back until the bytes are in place; a write waits for the stream's earlier work; a
//! cancelled request lets the stream go on.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile::{ConfigBuilder, Driver, Error, IoState, Op, Platform, StreamHandle};
use hipfile_testfs::{Skip, TempDir, emulated_runtime, require};
use hipfile_testkit::{Call, Fault, Gate, Injected};
use std::fs::OpenOptions;
use std::sync::Arc;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(7) as u8 ^ seed)
        .collect()
}

/// A driver on the emulated runtime with faults in front of it (none until armed).
fn driver() -> Result<(Driver, Arc<Injected>), Skip> {
    let lib = emulated_runtime()?;
    let config = ConfigBuilder::new()
        .hip_library(lib)
        .io_threads(2)
        .build_with(|_| None)
        .0;
    let base = Driver::open_private(config).unwrap();
    assert_eq!(base.runtime().platform, Platform::Emulated);
    let injected = Arc::new(Injected::new(base.gpu().clone()));
    let d = Driver::with_runtime(
        base.config().clone(),
        injected.clone(),
        base.runtime().clone(),
    );
    assert!(d.gpu().has_stream_wait_value());
    Ok((d, injected))
}

/// Holds `stream` back (a host function that waits) until the returned sender sends or is
/// dropped: earlier work that the test releases when it chooses.
fn hold(d: &Driver, stream: StreamHandle) -> std::sync::mpsc::Sender<()> {
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    d.gpu()
        .launch_host_func(
            stream,
            Box::new(move || {
                let _ = go_rx.recv();
            }),
        )
        .unwrap();
    go_tx
}

/// Queues on `stream` a copy of `len` device bytes at `src` into `host`, then synchronises
/// nothing: the caller looks at `host` after synchronising the stream.
fn copy_back_on(d: &Driver, stream: StreamHandle, src: hipfile::DevicePtr, host: &mut [u8]) {
    // SAFETY: `src..+len` is device memory of this runtime that the test keeps alive, and
    // `host` stays borrowed until the caller synchronises the stream.
    unsafe {
        d.gpu()
            .copy_to_host(host.as_mut_ptr(), src, host.len(), Some(stream))
            .unwrap();
    }
}

#[test]
fn a_read_holds_the_streams_later_work_until_its_bytes_are_in_place() {
    let (d, injected) = require!(driver());
    let dir = TempDir::new("hipfile-ordered");
    let data = pattern(1 << 20, 3);
    let path = dir.path().join("o.bin");
    std::fs::write(&path, &data).unwrap();
    let file = OpenOptions::new().read(true).open(&path).unwrap();
    let fh = d.register_file(&file).unwrap();
    let stream = d.gpu().stream_create().unwrap();
    let mut buf = d.alloc(8192).unwrap();
    // A marker that a copy made too early would bring back.
    buf.copy_from_host(0, &[0xAA; 8192]).unwrap();
    let src = buf.ptr();
    let mut host = d.alloc_pinned(4000).unwrap();
    // The request parks in its copy to the device (an unaligned read: the fallback serves it
    // with a synchronous copy), so the test sees the stream held back.
    let gate = Gate::new();
    injected.faults().add(
        Fault::on(Call::CopyToDevice)
            .synchronous()
            .once()
            .park(&gate),
    );
    // SAFETY: the stream is live until the end of the test, after the request has ended.
    let io = unsafe { fh.read_on_stream(stream, buf.slice_mut(..4000).unwrap(), 100) }.unwrap();
    // Released however the test ends (and before `io` is dropped, which waits for it).
    let _release = gate.release_on_drop();
    copy_back_on(&d, stream, src, &mut host);
    gate.wait_parked(|| false);
    assert_eq!(io.state(), IoState::Pending);
    assert!(
        !d.gpu().stream_query(stream).unwrap(),
        "the stream went past the read"
    );
    assert!(
        host.iter().all(|&b| b == 0),
        "the later copy ran before the read"
    );
    gate.release();
    assert_eq!(io.wait().unwrap().bytes, 4000);
    d.gpu().stream_synchronize(stream).unwrap();
    assert!(host[..] == data[100..4100]);
    d.gpu().stream_destroy(stream).unwrap();
}

#[test]
fn a_write_waits_for_the_streams_earlier_work() {
    let (d, _) = require!(driver());
    let dir = TempDir::new("hipfile-ordered-w");
    let path = dir.path().join("w.bin");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let fh = d.register_file(&file).unwrap();
    let stream = d.gpu().stream_create().unwrap();
    let data = pattern(1 << 20, 8);
    let mut staging = d.alloc_pinned(data.len()).unwrap();
    staging.copy_from_slice(&data);
    let buf = d.alloc(data.len()).unwrap();
    // Earlier work on the stream: a copy that fills the buffer the write takes its bytes
    // from, held back behind a host function until the test lets it go.
    let go_tx = hold(&d, stream);
    // SAFETY: the buffer and the pinned bytes live until the stream is synchronised below.
    unsafe {
        d.gpu()
            .copy_to_device(buf.ptr(), staging.as_ptr(), data.len(), Some(stream))
            .unwrap();
    }
    // SAFETY: the stream is live until after the request has ended.
    let io = unsafe { fh.write_on_stream(stream, &buf, 0) }.unwrap();
    assert_eq!(
        io.state(),
        IoState::Waiting,
        "the write ran before the stream reached it"
    );
    go_tx.send(()).unwrap();
    assert_eq!(io.wait().unwrap().bytes, data.len() as u64);
    d.gpu().stream_synchronize(stream).unwrap();
    assert!(std::fs::read(&path).unwrap() == data);
    d.gpu().stream_destroy(stream).unwrap();
}

#[test]
fn a_request_dropped_before_its_stream_reaches_it_is_cancelled_and_the_stream_goes_on() {
    let (d, _) = require!(driver());
    let dir = TempDir::new("hipfile-ordered-c");
    let data = pattern(64 << 10, 5);
    let path = dir.path().join("c.bin");
    std::fs::write(&path, &data).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let fh = d.register_file(&file).unwrap();
    let stream = d.gpu().stream_create().unwrap();
    let mut buf = d.alloc(64 << 10).unwrap();
    let go_tx = hold(&d, stream);
    // SAFETY: the stream is live until the end of the test.
    let io = unsafe { fh.read_on_stream(stream, &mut buf, 0) }.unwrap();
    assert!(io.cancel());
    match io.wait() {
        Err(Error::Canceled { op: Op::Read }) => {}
        other => panic!("a cancelled stream read gave {other:?}"),
    }
    go_tx.send(()).unwrap();
    // The gate was opened by the cancellation: the stream does not wait for ever.
    d.gpu().stream_synchronize(stream).unwrap();
    let mut got = vec![0u8; 64 << 10];
    buf.copy_to_host(0, &mut got).unwrap();
    assert!(got.iter().all(|&b| b == 0), "a cancelled read moved bytes");
    // Many requests in a row on one stream reuse the gate words and all land.
    let mut ios = Vec::new();
    let views = buf.slice_mut(..).unwrap().chunks(4096).unwrap();
    for (i, view) in views.into_iter().enumerate() {
        // SAFETY: as above.
        ios.push(unsafe { fh.read_on_stream(stream, view, (i * 4096) as u64) }.unwrap());
    }
    for io in ios {
        assert_eq!(io.wait().unwrap().bytes, 4096);
    }
    d.gpu().stream_synchronize(stream).unwrap();
    buf.copy_to_host(0, &mut got).unwrap();
    assert!(got == data);
    d.gpu().stream_destroy(stream).unwrap();
}

/// A request ordered on the null stream, which a synchronous copy on the legacy default
/// stream would queue behind the request's own wait: the copies of the engine's requests run
/// on streams of their own, so the request ends.
#[test]
fn a_request_on_the_null_stream_does_not_wait_for_itself() {
    let (d, _) = require!(driver());
    let dir = TempDir::new("hipfile-ordered-null");
    let data = pattern(64 << 10, 9);
    let path = dir.path().join("n.bin");
    std::fs::write(&path, &data).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let fh = d.register_file(&file).unwrap();
    let mut buf = d.alloc(64 << 10).unwrap();
    // Unaligned: the fallback serves it with a synchronous copy.
    // SAFETY: the null stream is always live.
    let io =
        unsafe { fh.read_on_stream(StreamHandle(0), buf.slice_mut(..4000).unwrap(), 7) }.unwrap();
    // A guard against a deadlock, not a measure of speed: generous, and the failure leaks
    // what it must so that the test fails instead of hanging.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !io.is_finished() {
        if std::time::Instant::now() > deadline {
            std::mem::forget(io);
            std::mem::forget(fh);
            std::mem::forget(d);
            panic!("a request on the null stream never ended: its copy waits behind its own wait");
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(io.wait().unwrap().bytes, 4000);
    d.gpu().stream_synchronize(StreamHandle(0)).unwrap();
    let mut got = vec![0u8; 4000];
    buf.copy_to_host(0, &mut got).unwrap();
    assert!(got[..] == data[7..4007]);
}
