//! Stream-ordered requests through the emulated runtime (whose streams run in order on their
//! own threads): a read runs when its stream reaches it and holds the stream's later work
//! back until the bytes are in place; a write waits for the stream's earlier work; a
//! cancelled request lets the stream go on.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile::core::runtime::{HostFunctions, StreamOrdering, Streams};
use hipfile::{ConfigBuilder, Driver, Error, IoState, Op, Platform, StreamHandle};
use hipfile_testfs::{Skip, TempDir, emulated_runtime, require};
use hipfile_testkit::{Call, Fault, Gate, Injected};
use std::fs::OpenOptions;
use std::sync::Arc;

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

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(7) as u8 ^ seed)
        .collect()
}

/// A file of `len` pattern bytes made with `seed`, in a directory of its own, registered with
/// `d`: the directory (removed when dropped), the bytes, the file and its handle.
fn registered(
    d: &Driver,
    what: &str,
    len: usize,
    seed: u8,
) -> (TempDir, Vec<u8>, std::fs::File, hipfile::FileHandle) {
    let dir = TempDir::new(what);
    let data = pattern(len, seed);
    let path = dir.path().join("f.bin");
    std::fs::write(&path, &data).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let fh = d.register_file(&file).unwrap();
    (dir, data, file, fh)
}

/// A driver on the emulated runtime with faults in front of it (none until armed).
fn driver() -> Result<(Driver, Arc<Injected>), Skip> {
    let lib = emulated_runtime()?;
    let config = ConfigBuilder::new()
        .hip_library(lib)
        .io_threads(2)
        .request_threads(2)
        .build_with(|_| None)
        .0;
    Ok(injected(config))
}

/// A driver of `config` (on the emulated runtime) whose runtime is wrapped in an
/// [`Injected`], and that wrapper.
fn injected(config: hipfile::Config) -> (Driver, Arc<Injected>) {
    let base = Driver::open_private(config).unwrap();
    assert_eq!(base.runtime().platform, Platform::Emulated);
    let injected = Arc::new(Injected::new(base.tuning().gpu().clone()));
    let d = Driver::with_runtime(
        base.config().clone(),
        injected.clone(),
        base.runtime().clone(),
    );
    assert!(StreamOrdering::of(d.tuning().gpu().as_ref()).is_some());
    (d, injected)
}

/// Holds `stream` back (a host function that waits) until the returned sender sends or is
/// dropped: earlier work that the test releases when it chooses.
fn hold(d: &Driver, stream: StreamHandle) -> std::sync::mpsc::Sender<()> {
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    host_functions(d)
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
        streams(d)
            .copy_to_host_async(host.as_mut_ptr(), src, host.len(), stream)
            .unwrap();
    }
}

/// Waits until `gate` holds `n` calls; a guard against a deadlock, not a measure of speed.
fn wait_parked(gate: &Gate, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while gate.parked() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "{n} calls never parked"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

#[test]
fn a_read_holds_the_streams_later_work_until_its_bytes_are_in_place() {
    let (d, injected) = require!(driver());
    let (_dir, data, _file, fh) = registered(&d, "hipfile-ordered", 1 << 20, 3);
    let stream = streams(&d).stream_create().unwrap();
    let mut buf = d.alloc(8192).unwrap();
    // A marker that a copy made too early would bring back.
    buf.copy_from_host(0, &[0xAA; 8192]).unwrap();
    let src = buf.ptr();
    let mut host = d.alloc_pinned(4000).unwrap();
    // Both of the engine's threads park in the synchronous copies of two other requests, so
    // the stream-ordered read (unaligned: the fallback's, whose copies are on the stream) is
    // reached by its stream but cannot be served until the test lets them go.
    let gate = Gate::new();
    injected
        .faults()
        .add(Fault::on(Call::CopyToDevice).synchronous().park(&gate));
    let _release = gate.release_on_drop();
    let mut others = [d.alloc(4096).unwrap(), d.alloc(4096).unwrap()];
    let busy: Vec<_> = others
        .iter_mut()
        .map(|b| fh.read_at_async(b.slice_mut(..1000).unwrap(), 1))
        .collect();
    wait_parked(&gate, 2);
    // SAFETY: the stream is live until the end of the test, after the request has ended.
    let io = unsafe { fh.read_on_stream(stream, buf.slice_mut(..4000).unwrap(), 100) }.unwrap();
    copy_back_on(&d, stream, src, &mut host);
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(io.state(), IoState::Waiting);
    assert!(
        !streams(&d).stream_query(stream).unwrap(),
        "the stream went past the read"
    );
    assert!(
        host.iter().all(|&b| b == 0),
        "the later copy ran before the read"
    );
    gate.release();
    for other in busy {
        assert_eq!(other.wait().unwrap().bytes, 1000);
    }
    let done = io.wait().unwrap();
    assert_eq!(done.bytes, 4000);
    assert_eq!(done.backend, hipfile::BackendKind::Fallback);
    streams(&d).stream_synchronize(stream).unwrap();
    assert!(host[..] == data[100..4100]);
    streams(&d).stream_destroy(stream).unwrap();
}

/// [`driver`]'s, served by the fallback, with the default staging (256 MiB of 4 MiB
/// buffers).
fn fallback_driver() -> Result<(Driver, Arc<Injected>), Skip> {
    let lib = emulated_runtime()?;
    let config = ConfigBuilder::new()
        .hip_library(lib)
        .io_threads(2)
        .force_compat_mode(true)
        .build_with(|_| None)
        .0;
    Ok(injected(config))
}

#[test]
fn a_stream_ordered_request_pins_only_the_staging_it_uses() {
    // An 8 MiB read on a stream needs two buffers, not the whole budget.
    let (d, injected) = require!(fallback_driver());
    let len = 8 << 20;
    let (_dir, data, _file, fh) = registered(&d, "hipfile-ordered-pins", len, 9);
    let stream = d.create_stream().unwrap();
    let mut buf = d.alloc(len).unwrap();
    let done = fh.read_on(&stream, &mut buf, 0).unwrap().wait().unwrap();
    assert_eq!(done.bytes, len as u64);
    assert_eq!(done.backend, hipfile::BackendKind::Fallback);
    stream.synchronize().unwrap();
    let mut got = vec![0u8; len];
    buf.copy_to_host(0, &mut got).unwrap();
    assert!(got == data);
    let pinned = injected.pinned_bytes();
    assert!(
        pinned <= 16 << 20,
        "an 8 MiB stream-ordered read pinned {pinned} bytes of staging"
    );
}

#[test]
fn a_one_piece_read_on_a_stream_queues_two_host_functions() {
    // One to hand the read to the engine when the stream reaches it, one to return its
    // gates and buffer and end the request: each is a costly call on a GPU's stream, and a
    // small request pays for every one.
    let (d, injected) = require!(fallback_driver());
    let len = 4096;
    let (_dir, data, _file, fh) = registered(&d, "hipfile-ordered-host-fns", len, 3);
    let stream = d.create_stream().unwrap();
    let mut buf = d.alloc(len).unwrap();
    let before = injected.calls(Call::LaunchHostFunc);
    let done = fh.read_on(&stream, &mut buf, 0).unwrap().wait().unwrap();
    assert_eq!(done.bytes, len as u64);
    assert_eq!(done.backend, hipfile::BackendKind::Fallback);
    assert_eq!(injected.calls(Call::LaunchHostFunc) - before, 2);
    stream.synchronize().unwrap();
    let mut got = vec![0u8; len];
    buf.copy_to_host(0, &mut got).unwrap();
    assert!(got == data);
}

/// A driver on the emulated runtime that serves everything with the fallback, through a
/// staging pool of `chunks` buffers of 4 KiB: stream-ordered requests then go through
/// staging buffers copied on the stream, many pieces and several segments each, each
/// segment's pieces served by two threads (a quarter of the eight).
fn staged_driver(chunks: u64) -> Result<Driver, Skip> {
    let lib = emulated_runtime()?;
    let config = ConfigBuilder::new()
        .hip_library(lib)
        .io_threads(8)
        .force_compat_mode(true)
        .task_size(8 << 10)
        .staging_memory(chunks * 4096)
        .build_with(|_| None)
        .0;
    Ok(Driver::open_private(config).unwrap())
}

#[test]
fn staged_requests_of_many_pieces_keep_stream_order_and_bytes_past_the_end() {
    let d = require!(staged_driver(8));
    let dir = TempDir::new("hipfile-staged");
    let path = dir.path().join("s.bin");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let fh = d.register_file(&file).unwrap();
    let stream = d.create_stream().unwrap();
    // 10 pieces of 4 KiB and a bit, so three segments of at most four pieces.
    let len = 10 * 4096 + 123;
    let data = pattern(len, 4);
    let mut src = d.alloc(len).unwrap();
    src.copy_from_host(0, &data).unwrap();
    let mut back = d.alloc(len + 5000).unwrap();
    let marker = vec![0x5Au8; len + 5000];
    back.copy_from_host(0, &marker).unwrap();
    // The write then the read, queued before either runs: when the read is queued the file
    // is still empty, and the read must still see what the write put there.
    let w = fh.write_on(&stream, &src, 7).unwrap();
    let r = fh.read_on(&stream, &mut back, 7).unwrap();
    let written = w.wait().unwrap();
    assert_eq!(written.bytes, len as u64);
    assert_eq!(written.backend, hipfile::BackendKind::Fallback);
    // The file ends `len` bytes after offset 7: the read is short and leaves the rest.
    assert_eq!(r.wait().unwrap().bytes, len as u64);
    stream.synchronize().unwrap();
    let mut got = vec![0u8; len + 5000];
    back.copy_to_host(0, &mut got).unwrap();
    assert!(
        got[..len] == data[..],
        "the read did not see the write before it"
    );
    assert!(
        got[len..].iter().all(|&b| b == 0x5A),
        "bytes past the end of the file were changed"
    );
    assert!(std::fs::read(&path).unwrap()[7..] == data[..]);
}

#[test]
fn many_streams_with_staged_requests_parked_at_once_all_end() {
    let d = require!(staged_driver(8));
    let (_dir, data, _file, fh) = registered(&d, "hipfile-staged-many", 32 * 12288, 6);
    let streams: Vec<_> = (0..32).map(|_| d.create_stream().unwrap()).collect();
    let mut bufs: Vec<_> = (0..32).map(|_| d.alloc(12288).unwrap()).collect();
    // Every stream held back first, so that all 32 requests are queued before any runs,
    // and more staging is asked for than the pool holds: submissions wait for earlier
    // requests to give their buffers back.
    let holds: Vec<_> = streams.iter().map(|s| hold(&d, s.handle())).collect();
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        drop(holds);
    });
    let ios: Vec<_> = streams
        .iter()
        .zip(bufs.iter_mut())
        .enumerate()
        .map(|(i, (s, b))| fh.read_on(s, b, (i * 12288) as u64).unwrap())
        .collect();
    release.join().unwrap();
    for io in ios {
        assert_eq!(io.wait().unwrap().bytes, 12288);
    }
    for (i, (s, b)) in streams.iter().zip(&bufs).enumerate() {
        s.synchronize().unwrap();
        let mut got = vec![0u8; 12288];
        b.copy_to_host(0, &mut got).unwrap();
        assert!(got[..] == data[i * 12288..(i + 1) * 12288], "stream {i}");
    }
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
    let stream = streams(&d).stream_create().unwrap();
    let data = pattern(1 << 20, 8);
    let mut staging = d.alloc_pinned(data.len()).unwrap();
    staging.copy_from_slice(&data);
    let buf = d.alloc(data.len()).unwrap();
    // Earlier work on the stream: a copy that fills the buffer the write takes its bytes
    // from, held back behind a host function until the test lets it go.
    let go_tx = hold(&d, stream);
    // SAFETY: the buffer and the pinned bytes live until the stream is synchronised below.
    unsafe {
        streams(&d)
            .copy_to_device_async(buf.ptr(), staging.as_ptr(), data.len(), stream)
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
    streams(&d).stream_synchronize(stream).unwrap();
    assert!(std::fs::read(&path).unwrap() == data);
    streams(&d).stream_destroy(stream).unwrap();
}

#[test]
fn a_request_dropped_before_its_stream_reaches_it_is_cancelled_and_the_stream_goes_on() {
    let (d, _) = require!(driver());
    let (_dir, data, _file, fh) = registered(&d, "hipfile-ordered-c", 64 << 10, 5);
    let stream = streams(&d).stream_create().unwrap();
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
    streams(&d).stream_synchronize(stream).unwrap();
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
    streams(&d).stream_synchronize(stream).unwrap();
    buf.copy_to_host(0, &mut got).unwrap();
    assert!(got == data);
    streams(&d).stream_destroy(stream).unwrap();
}

/// A request ordered on the null stream, which a synchronous copy on the legacy default
/// stream would queue behind the request's own wait: the copies of the engine's requests run
/// on streams of their own, so the request ends.
#[test]
fn a_request_on_the_null_stream_does_not_wait_for_itself() {
    let (d, _) = require!(driver());
    let (_dir, data, _file, fh) = registered(&d, "hipfile-ordered-null", 64 << 10, 9);
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
    streams(&d).stream_synchronize(StreamHandle(0)).unwrap();
    let mut got = vec![0u8; 4000];
    buf.copy_to_host(0, &mut got).unwrap();
    assert!(got[..] == data[7..4007]);
}

/// A request whose copy cannot be queued on the stream fails at once, reports its error to
/// the caller's report (where the C ABI writes `*bytes_read_p`), and leaves the stream free.
#[test]
fn a_request_whose_copy_cannot_be_queued_reports_its_error_and_frees_the_stream() {
    let (d, injected) = require!(driver());
    let (_dir, data, _file, fh) = registered(&d, "hipfile-ordered-fail", 64 << 10, 2);
    let stream = d.create_stream().unwrap();
    let buf = d.alloc(8192).unwrap();
    injected
        .faults()
        .add(Fault::on(Call::CopyToDevice).once().fail(1));
    let (tx, rx) = std::sync::mpsc::channel();
    let report: hipfile::Report = Box::new(move |r: &Result<hipfile::IoOutcome, Error>| {
        tx.send(r.is_err()).unwrap();
    });
    // Unaligned: the fallback's, whose copy to the device is queued on the stream.
    let request = hipfile::core::Request {
        op: Op::Read,
        size: 4000,
        file_offset: 100,
        buffer_offset: 0,
    };
    // SAFETY: the stream is live until the end of the test.
    let io = unsafe {
        fh.order_on_stream(
            stream.handle(),
            Op::Read,
            &buf,
            hipfile::StreamParams::Fixed(request),
            Some(report),
        )
    }
    .unwrap();
    assert!(io.wait().is_err());
    assert_eq!(
        rx.try_recv(),
        Ok(true),
        "the report was not given the error"
    );
    stream.synchronize().unwrap();
    // The stream and the driver serve the next request.
    let mut again = d.alloc(8192).unwrap();
    let io = fh
        .read_on(&stream, again.slice_mut(..4000).unwrap(), 100)
        .unwrap();
    assert_eq!(io.wait().unwrap().bytes, 4000);
    stream.synchronize().unwrap();
    let mut got = vec![0u8; 4000];
    again.copy_to_host(0, &mut got).unwrap();
    assert!(got[..] == data[100..4100]);
}
