//! The stream-ordered pattern through the runtime seam, on the emulated runtime: a host
//! function tells the engine that the stream reached a request, a wait on a word of pinned
//! memory holds the stream, and the work queued after it (a device-to-host copy) runs only
//! once the engine sets the word.
//!
//! No test measures time; every wait for the runtime is bounded by a generous deadlock guard.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile_core::GpuRuntime;
use hipfile_core::runtime::{HostFunctions, StreamMemOps, StreamOrdering, Streams};
use hipfile_runtime::HipRuntime;
use hipfile_testfs::{Skip, require};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// Only a deadlock guard: a correct runtime answers long before.
const GUARD: Duration = Duration::from_secs(60);
const LEN: usize = 8192;

fn emulated() -> Result<HipRuntime, Skip> {
    let path = hipfile_testfs::emulated_runtime()?;
    HipRuntime::load_path(&path).map_err(|e| Skip(format!("cannot load {}: {e}", path.display())))
}

/// Reads `len` bytes of pinned memory no copy is writing.
fn bytes(p: *mut u8, len: usize) -> Vec<u8> {
    // SAFETY: the callers pass live pinned allocations of at least `len` bytes, read when
    // the stream cannot be copying into them.
    unsafe { std::slice::from_raw_parts(p, len) }.to_vec()
}

#[test]
fn a_copy_behind_a_word_waits_for_the_engine() {
    let rt = require!(emulated());
    assert!(StreamOrdering::of(&rt).is_some());
    let contents: Vec<u8> = (0..LEN).map(|i| (i % 253) as u8 + 1).collect();
    let device = rt.alloc_device(LEN).unwrap();
    // SAFETY: `contents` is readable and `device` is LEN bytes of device memory; synchronous.
    unsafe { rt.copy_to_device(device, contents.as_ptr(), LEN) }.unwrap();
    let host = rt.alloc_pinned(LEN).unwrap();
    let word_memory = rt.alloc_pinned(4096).unwrap();
    let word = word_memory.cast::<AtomicU32>();
    let word_on_device = rt.host_device_pointer(word_memory).unwrap();
    let stream = rt.stream_create().unwrap();
    let event = rt.event_create().unwrap();

    // The engine learns that the stream reached request 42.
    let (reached, engine) = mpsc::channel();
    rt.launch_host_func(stream, Box::new(move || reached.send(42u64).unwrap()))
        .unwrap();
    // SAFETY: the word is pinned memory of this runtime, 4096-aligned, freed only after the
    // stream is synchronised; it is accessed only atomically meanwhile. The copy's ranges
    // are LEN bytes of pinned and device memory, alive until the synchronisation.
    unsafe {
        rt.stream_wait_value32(stream, word_on_device, 1).unwrap();
        rt.copy_to_host_async(host, device, LEN, stream).unwrap();
    }
    rt.event_record(event, stream).unwrap();

    assert_eq!(engine.recv_timeout(GUARD), Ok(42));
    assert!(!rt.stream_query(stream).unwrap(), "held by the wait");
    assert!(!rt.event_query(event).unwrap());
    assert_eq!(
        bytes(host, LEN),
        vec![0; LEN],
        "copied before the word was set"
    );

    // The engine has put the data in place: it releases the stream from its own thread.
    let address = word as usize;
    std::thread::spawn(move || {
        // SAFETY: the word stays allocated until the stream has been synchronised below.
        unsafe { &*(address as *const AtomicU32) }.store(1, Ordering::Release);
    })
    .join()
    .unwrap();

    rt.stream_synchronize(stream).unwrap();
    assert!(rt.stream_query(stream).unwrap());
    assert!(rt.event_query(event).unwrap());
    assert_eq!(bytes(host, LEN), contents);

    rt.event_destroy(event).unwrap();
    rt.stream_destroy(stream).unwrap();
    // SAFETY: allocated above, no longer used by any stream.
    unsafe {
        rt.free_pinned(word_memory).unwrap();
        rt.free_pinned(host).unwrap();
        rt.free_device(device).unwrap();
    }
}

#[test]
fn a_panicking_host_function_does_not_stop_the_stream() {
    let rt = require!(emulated());
    let stream = rt.stream_create().unwrap();
    let (tx, rx) = mpsc::channel();
    rt.launch_host_func(stream, Box::new(|| panic!("a host function panics")))
        .unwrap();
    rt.launch_host_func(stream, Box::new(move || tx.send(()).unwrap()))
        .unwrap();
    assert_eq!(rx.recv_timeout(GUARD), Ok(()));
    rt.stream_synchronize(stream).unwrap();
    rt.stream_destroy(stream).unwrap();
}

#[test]
fn a_write_on_the_stream_releases_a_wait_on_another() {
    let rt = require!(emulated());
    let word_memory = rt.alloc_pinned(4096).unwrap();
    let word = rt.host_device_pointer(word_memory).unwrap();
    let (waiting, writing) = (rt.stream_create().unwrap(), rt.stream_create().unwrap());
    let (tx, rx) = mpsc::channel();
    // SAFETY: the word is pinned memory of this runtime, freed after both streams are
    // synchronised, and accessed only atomically meanwhile.
    unsafe {
        rt.stream_wait_value32(waiting, word, 3).unwrap();
        rt.launch_host_func(waiting, Box::new(move || tx.send(()).unwrap()))
            .unwrap();
        assert!(!rt.stream_query(waiting).unwrap());
        rt.stream_write_value32(writing, word, 3).unwrap();
    }
    assert_eq!(rx.recv_timeout(GUARD), Ok(()));
    rt.stream_synchronize(writing).unwrap();
    rt.stream_synchronize(waiting).unwrap();
    rt.stream_destroy(waiting).unwrap();
    rt.stream_destroy(writing).unwrap();
    // SAFETY: allocated above; both streams are done with it.
    unsafe { rt.free_pinned(word_memory) }.unwrap();
}

#[test]
fn only_pinned_memory_has_a_device_pointer() {
    let rt = require!(emulated());
    let pinned = rt.alloc_pinned(4096).unwrap();
    // The emulation has one address space.
    assert_eq!(
        rt.host_device_pointer(pinned).unwrap().0,
        pinned as usize as u64
    );
    let local = AtomicU32::new(0);
    let e = rt
        .host_device_pointer(std::ptr::from_ref(&local).cast())
        .unwrap_err();
    assert_eq!(e.call, "hipHostGetDevicePointer");
    // SAFETY: allocated above, unused.
    unsafe { rt.free_pinned(pinned) }.unwrap();
}
