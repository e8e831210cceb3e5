//! Stream-ordered requests leave no heap memory behind: whatever ends them (served through
//! staging or the engine, cancelled before their stream reached them, or failed at
//! submission), once their handles, the stream and the driver are gone, what they allocated
//! is freed. The binary counts its live heap bytes with a global allocator of its own and
//! holds one test only, so no other test allocates meanwhile; the first round warms up what
//! is made once per process (lazy statics, the emulated runtime's threads), and three more
//! rounds must end where it ended.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.
#![allow(unsafe_code)] // The counting allocator.

use hipfile::core::runtime::HostFunctions;
use hipfile::{ConfigBuilder, Driver};
use hipfile_testfs::{TempDir, emulated_runtime, require};
use std::alloc::{GlobalAlloc, Layout, System};
use std::path::Path;
use std::sync::atomic::{AtomicIsize, Ordering};

/// The runtime's host functions (every runtime these tests use has them).
fn host_functions(d: &Driver) -> &dyn HostFunctions {
    d.tuning()
        .gpu()
        .streams()
        .and_then(|s| s.host_functions())
        .expect("the runtime has host functions")
}

/// The system allocator, counting the bytes it has handed out and not yet taken back.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to the system allocator with the caller's arguments; the
// counter is only arithmetic on the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as is.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as is.
        let q = unsafe { System.realloc(p, layout, new_size) };
        if !q.is_null() {
            LIVE.fetch_add(
                new_size as isize - layout.size() as isize,
                Ordering::Relaxed,
            );
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const LEN: usize = 256 << 10;

/// One round: a driver, a registered file, a stream, and on it a staged read, an aligned
/// read and write, a read cancelled before the stream reached it, and many small reads in a
/// row; then everything dropped, the driver last.
fn round(lib: &Path, dir: &Path) {
    let path = dir.join("f.bin");
    let data: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let config = ConfigBuilder::new()
        .hip_library(lib)
        .io_threads(2)
        .request_threads(2)
        .build_with(|_| None)
        .0;
    let d = Driver::open_private(config).unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let fh = d.register_file(&file).unwrap();
    let stream = d.create_stream().unwrap();
    let mut buf = d.alloc(LEN).unwrap();
    // SAFETY: the stream is live until it is dropped, after the last handle below has
    // ended and the stream was synchronised.
    unsafe {
        // Unaligned: the fallback's staged path.
        let io = fh
            .read_on_stream(stream.handle(), buf.slice_mut(..4000).unwrap(), 7)
            .unwrap();
        assert_eq!(io.wait().unwrap().bytes, 4000);
        // Aligned: served by the engine behind a gate.
        let io = fh.read_on_stream(stream.handle(), &mut buf, 0).unwrap();
        assert_eq!(io.wait().unwrap().bytes, LEN as u64);
        let io = fh
            .write_on_stream(stream.handle(), buf.slice(..LEN / 2).unwrap(), 0)
            .unwrap();
        assert_eq!(io.wait().unwrap().bytes, (LEN / 2) as u64);
        // Cancelled: dropped while a host function holds the stream back.
        let (go, held) = std::sync::mpsc::channel::<()>();
        host_functions(&d)
            .launch_host_func(
                stream.handle(),
                Box::new(move || {
                    let _ = held.recv();
                }),
            )
            .unwrap();
        let io = fh
            .read_on_stream(stream.handle(), buf.slice_mut(..8192).unwrap(), 5)
            .unwrap();
        drop(go);
        drop(io);
        let views = buf.slice_mut(..).unwrap().chunks(16 << 10).unwrap();
        let ios: Vec<_> = views
            .into_iter()
            .enumerate()
            .map(|(i, view)| {
                fh.read_on_stream(stream.handle(), view, (i * (16 << 10)) as u64)
                    .unwrap()
            })
            .collect();
        for io in ios {
            assert_eq!(io.wait().unwrap().bytes, 16 << 10);
        }
    }
    stream.synchronize().unwrap();
    let mut got = vec![0u8; LEN];
    buf.copy_to_host(0, &mut got).unwrap();
    assert!(got == data, "the round's reads moved the wrong bytes");
    drop((buf, stream, fh, file));
    drop(d);
}

#[test]
fn stream_ordered_requests_leave_no_heap_memory_behind() {
    let lib = require!(emulated_runtime());
    let dir = TempDir::new("hipfile-ordered-leaks");
    round(&lib, dir.path());
    let before = LIVE.load(Ordering::Relaxed);
    for _ in 0..3 {
        round(&lib, dir.path());
    }
    let after = LIVE.load(Ordering::Relaxed);
    assert!(
        after <= before,
        "three rounds of stream-ordered requests left {} bytes more on the heap than one did",
        after - before
    );
}
