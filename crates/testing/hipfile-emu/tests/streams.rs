//! Stream order in the emulated runtime, as a caller sees it through `dlopen`: host functions
//! on the stream's own thread, waits on a word of pinned memory that hold back the work queued
//! after them, events and queries that say "not ready" meanwhile, and destruction that loses
//! no queued work.
//!
//! No test measures time: each blocked state is observed through queries, and every wait for
//! the runtime is bounded by a generous deadlock guard.

#![allow(clippy::unwrap_used)]

use libloading::Library;
use std::ffi::{c_int, c_uint, c_void};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::ThreadId;
use std::time::Duration;

const SUCCESS: i32 = 0;
const INVALID_VALUE: i32 = 1;
const NOT_READY: i32 = 600;
const H2D: c_int = 1;
const D2H: c_int = 2;
const WAIT_GTE: c_uint = 0;
const WAIT_EQ: c_uint = 1;
const MASK: u32 = u32::MAX;

/// Only a deadlock guard: a correct runtime answers long before.
const GUARD: Duration = Duration::from_secs(60);

type Stream = *mut c_void;
type HostFn = unsafe extern "C" fn(*mut c_void);

/// The functions the tests call, resolved once from the loaded library.
struct Api {
    _lib: Library,
    malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> i32,
    host_malloc: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> i32,
    host_get_device_pointer: unsafe extern "C" fn(*mut *mut c_void, *mut c_void, c_uint) -> i32,
    free: unsafe extern "C" fn(*mut c_void) -> i32,
    host_free: unsafe extern "C" fn(*mut c_void) -> i32,
    memcpy: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> i32,
    memcpy_async: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int, Stream) -> i32,
    stream_create: unsafe extern "C" fn(*mut Stream, c_uint) -> i32,
    stream_destroy: unsafe extern "C" fn(Stream) -> i32,
    stream_synchronize: unsafe extern "C" fn(Stream) -> i32,
    stream_query: unsafe extern "C" fn(Stream) -> i32,
    stream_wait_event: unsafe extern "C" fn(Stream, *mut c_void, c_uint) -> i32,
    launch_host_func: unsafe extern "C" fn(Stream, Option<HostFn>, *mut c_void) -> i32,
    event_create: unsafe extern "C" fn(*mut *mut c_void) -> i32,
    event_record: unsafe extern "C" fn(*mut c_void, Stream) -> i32,
    event_query: unsafe extern "C" fn(*mut c_void) -> i32,
    event_synchronize: unsafe extern "C" fn(*mut c_void) -> i32,
    event_destroy: unsafe extern "C" fn(*mut c_void) -> i32,
    wait_value32: unsafe extern "C" fn(Stream, *mut c_void, u32, c_uint, u32) -> i32,
    wait_value64: unsafe extern "C" fn(Stream, *mut c_void, u64, c_uint, u64) -> i32,
    write_value32: unsafe extern "C" fn(Stream, *mut c_void, u32, c_uint) -> i32,
    write_value64: unsafe extern "C" fn(Stream, *mut c_void, u64, c_uint) -> i32,
}

fn api() -> &'static Api {
    static API: OnceLock<Api> = OnceLock::new();
    API.get_or_init(|| {
        let path = hipfile_testfs::emulated_runtime().unwrap_or_else(|s| panic!("{}", s.0));
        // SAFETY: the library is this crate's cdylib, whose initialisers do nothing.
        let lib = unsafe { Library::new(&path) }
            .unwrap_or_else(|e| panic!("cannot load {}: {e}", path.display()));
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: each name is declared with its C signature from the ABI.
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .unwrap_or_else(|e| panic!("{}: {e}", $name))
            };
        }
        Api {
            malloc: sym!("hipMalloc"),
            host_malloc: sym!("hipHostMalloc"),
            host_get_device_pointer: sym!("hipHostGetDevicePointer"),
            free: sym!("hipFree"),
            host_free: sym!("hipHostFree"),
            memcpy: sym!("hipMemcpy"),
            memcpy_async: sym!("hipMemcpyAsync"),
            stream_create: sym!("hipStreamCreateWithFlags"),
            stream_destroy: sym!("hipStreamDestroy"),
            stream_synchronize: sym!("hipStreamSynchronize"),
            stream_query: sym!("hipStreamQuery"),
            stream_wait_event: sym!("hipStreamWaitEvent"),
            launch_host_func: sym!("hipLaunchHostFunc"),
            event_create: sym!("hipEventCreate"),
            event_record: sym!("hipEventRecord"),
            event_query: sym!("hipEventQuery"),
            event_synchronize: sym!("hipEventSynchronize"),
            event_destroy: sym!("hipEventDestroy"),
            wait_value32: sym!("hipStreamWaitValue32"),
            wait_value64: sym!("hipStreamWaitValue64"),
            write_value32: sym!("hipStreamWriteValue32"),
            write_value64: sym!("hipStreamWriteValue64"),
            _lib: lib,
        }
    })
}

/// A pinned allocation of this runtime, freed on drop.
struct Pinned(*mut u8);

impl Pinned {
    fn new(len: usize) -> Pinned {
        let mut p = null_mut();
        // SAFETY: `p` is writable.
        assert_eq!(unsafe { (api().host_malloc)(&mut p, len, 0) }, SUCCESS);
        Pinned(p.cast())
    }

    /// The first 4 bytes as an atomic word (pinned memory is page-aligned and zeroed).
    fn word(&self) -> &AtomicU32 {
        // SAFETY: the allocation is live, aligned and at least 4 bytes; every access to it
        // in these tests, the runtime's included, is atomic.
        unsafe { AtomicU32::from_ptr(self.0.cast()) }
    }

    fn ptr(&self) -> *mut c_void {
        self.0.cast()
    }

    fn bytes(&self, len: usize) -> Vec<u8> {
        // SAFETY: the allocation is live and at least `len` bytes; the tests read it only
        // when no copy into it can be running.
        unsafe { std::slice::from_raw_parts(self.0, len) }.to_vec()
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // SAFETY: allocated by `new`, freed once.
        unsafe { (api().host_free)(self.0.cast()) };
    }
}

/// Device memory holding `contents`.
fn device_with(contents: &[u8]) -> *mut c_void {
    let mut d = null_mut();
    // SAFETY: `d` is writable; the copy reads `contents` into the new allocation.
    unsafe {
        assert_eq!((api().malloc)(&mut d, contents.len()), SUCCESS);
        assert_eq!(
            (api().memcpy)(d, contents.as_ptr().cast(), contents.len(), H2D),
            SUCCESS
        );
    }
    // A copy from pageable memory may land after `hipMemcpy` returns, on the null stream:
    // the tests' streams are non-blocking, so the bytes are waited for here, as a program
    // must before such a stream reads them.
    synchronize(null_mut());
    d
}

fn new_stream() -> Stream {
    let mut s = null_mut();
    // SAFETY: `s` is writable.
    assert_eq!(unsafe { (api().stream_create)(&mut s, 1) }, SUCCESS);
    s
}

fn new_event() -> *mut c_void {
    let mut e = null_mut();
    // SAFETY: `e` is writable.
    assert_eq!(unsafe { (api().event_create)(&mut e) }, SUCCESS);
    e
}

/// Queues on `s` a wait until `word >= 1`.
fn wait_for_word(s: Stream, word: &Pinned) {
    // SAFETY: the word is pinned memory of the runtime, which outlives the wait (each test
    // releases the wait before it frees the word).
    let r = unsafe { (api().wait_value32)(s, word.ptr(), 1, WAIT_GTE, MASK) };
    assert_eq!(r, SUCCESS);
}

/// What the host functions of a test report to: each sends its tag and thread.
struct Probe {
    tx: Mutex<Sender<(u32, ThreadId)>>,
}

/// A host function's data: the probe (shared with the test, so that nothing is leaked
/// once both are done) and a tag.
struct Call {
    probe: Arc<Probe>,
    tag: u32,
}

unsafe extern "C" fn report(data: *mut c_void) {
    // SAFETY: `launch` passes a leaked `Call`, which this reclaims once.
    let call = unsafe { Box::from_raw(data.cast::<Call>()) };
    let tx = call.probe.tx.lock().unwrap_or_else(|e| e.into_inner());
    let _ = tx.send((call.tag, std::thread::current().id()));
}

fn probe() -> (Arc<Probe>, mpsc::Receiver<(u32, ThreadId)>) {
    let (tx, rx) = mpsc::channel();
    (Arc::new(Probe { tx: Mutex::new(tx) }), rx)
}

/// Queues on `s` a host function that reports `tag` to `probe`.
fn launch(s: Stream, probe: &Arc<Probe>, tag: u32) {
    let probe = Arc::clone(probe);
    let data = Box::into_raw(Box::new(Call { probe, tag }));
    // SAFETY: `report` takes the leaked `Call` once, and with it its share of the probe.
    let r = unsafe { (api().launch_host_func)(s, Some(report), data.cast()) };
    assert_eq!(r, SUCCESS);
}

fn synchronize(s: Stream) {
    // SAFETY: a live stream or null.
    assert_eq!(unsafe { (api().stream_synchronize)(s) }, SUCCESS);
}

fn query(s: Stream) -> i32 {
    // SAFETY: a live stream or null.
    unsafe { (api().stream_query)(s) }
}

fn destroy(s: Stream) {
    // SAFETY: a live stream, destroyed once.
    assert_eq!(unsafe { (api().stream_destroy)(s) }, SUCCESS);
}

/// Sets the word from another thread, as hipfile's engine will.
fn release(word: &Pinned) {
    let addr = word.0 as usize;
    std::thread::spawn(move || {
        // SAFETY: the word stays allocated until the test has seen the stream pass it.
        unsafe { AtomicU32::from_ptr(addr as *mut u32) }.store(1, Ordering::Release);
    })
    .join()
    .unwrap();
}

#[test]
fn a_host_function_runs_on_another_thread_than_its_caller() {
    let (probe, rx) = probe();
    for s in [new_stream(), null_mut()] {
        launch(s, &probe, 7);
        let (tag, thread) = rx.recv_timeout(GUARD).unwrap();
        assert_eq!(tag, 7);
        assert_ne!(thread, std::thread::current().id());
        synchronize(s);
        if !s.is_null() {
            destroy(s);
        }
    }
}

#[test]
fn a_copy_queued_after_a_wait_happens_only_once_the_word_is_set() {
    let word = Pinned::new(4096);
    let dst = Pinned::new(4096);
    let contents: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8 + 1).collect();
    let src = device_with(&contents);
    let s = new_stream();
    wait_for_word(s, &word);
    // SAFETY: both ranges are this runtime's allocations, alive until after the sync.
    let r = unsafe { (api().memcpy_async)(dst.ptr(), src, 4096, D2H, s) };
    assert_eq!(r, SUCCESS);
    assert_eq!(query(s), NOT_READY);
    assert_eq!(
        dst.bytes(4096),
        vec![0; 4096],
        "copied before the word was set"
    );
    release(&word);
    synchronize(s);
    assert_eq!(query(s), SUCCESS);
    assert_eq!(dst.bytes(4096), contents);
    destroy(s);
    // SAFETY: allocated by `device_with`, no longer used.
    assert_eq!(unsafe { (api().free)(src) }, SUCCESS);
}

#[test]
fn events_and_queries_say_not_ready_while_a_wait_blocks() {
    let word = Pinned::new(4096);
    let s = new_stream();
    let (before, after, never) = (new_event(), new_event(), new_event());
    // SAFETY: live events and stream throughout.
    unsafe {
        assert_eq!((api().event_record)(before, s), SUCCESS);
        wait_for_word(s, &word);
        assert_eq!((api().event_record)(after, s), SUCCESS);
        assert_eq!(
            (api().event_query)(before),
            SUCCESS,
            "recorded before the wait"
        );
        assert_eq!((api().event_query)(after), NOT_READY);
        assert_eq!(
            (api().event_query)(never),
            SUCCESS,
            "never recorded: complete"
        );
        assert_eq!(query(s), NOT_READY);
        release(&word);
        assert_eq!((api().event_synchronize)(after), SUCCESS);
        assert_eq!((api().event_query)(after), SUCCESS);
        assert_eq!(query(s), SUCCESS);
        for e in [before, after, never] {
            assert_eq!((api().event_destroy)(e), SUCCESS);
        }
    }
    destroy(s);
}

#[test]
fn host_functions_keep_stream_order() {
    let word = Pinned::new(4096);
    let (probe, rx) = probe();
    let s = new_stream();
    wait_for_word(s, &word);
    for tag in 0..20 {
        launch(s, &probe, tag);
    }
    assert_eq!(rx.try_recv().err(), Some(mpsc::TryRecvError::Empty));
    release(&word);
    synchronize(s);
    let order: Vec<u32> = rx.try_iter().map(|(tag, _)| tag).collect();
    assert_eq!(order, (0..20).collect::<Vec<_>>());
    destroy(s);
}

#[test]
fn synchronize_waits_for_a_blocked_wait_to_be_released() {
    let word = Pinned::new(4096);
    let s = new_stream();
    wait_for_word(s, &word);
    let (tx, rx) = mpsc::channel();
    let stream = s as usize;
    let waiter = std::thread::spawn(move || {
        // SAFETY: a live stream, destroyed only after this thread is joined.
        let r = unsafe { (api().stream_synchronize)(stream as Stream) };
        tx.send(r).unwrap();
    });
    // Whatever the scheduling, a synchronisation that returned now would be wrong.
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(50)),
        Err(RecvTimeoutError::Timeout)
    );
    assert_eq!(query(s), NOT_READY);
    release(&word);
    assert_eq!(rx.recv_timeout(GUARD), Ok(SUCCESS));
    waiter.join().unwrap();
    destroy(s);
}

#[test]
fn destroying_a_stream_keeps_its_queued_work() {
    let word = Pinned::new(4096);
    let dst = Pinned::new(4096);
    let src = device_with(&[9; 4096]);
    let (probe, rx) = probe();
    let s = new_stream();
    wait_for_word(s, &word);
    // SAFETY: both ranges are this runtime's allocations, alive until the work is seen done.
    let r = unsafe { (api().memcpy_async)(dst.ptr(), src, 4096, D2H, s) };
    assert_eq!(r, SUCCESS);
    launch(s, &probe, 1);
    destroy(s);
    assert_eq!(query(s), 400, "the handle ends at once");
    release(&word);
    assert_eq!(rx.recv_timeout(GUARD).map(|(tag, _)| tag), Ok(1));
    assert_eq!(
        dst.bytes(4096),
        vec![9; 4096],
        "the copy ran before the host function"
    );
    // SAFETY: allocated by `device_with`; the stream that used it has finished.
    assert_eq!(unsafe { (api().free)(src) }, SUCCESS);
}

#[test]
fn a_stream_waits_for_an_event_of_another() {
    let word = Pinned::new(4096);
    let (a, b) = (new_stream(), new_stream());
    let e = new_event();
    let (probe, rx) = probe();
    wait_for_word(a, &word);
    // SAFETY: live streams and event.
    unsafe {
        assert_eq!((api().event_record)(e, a), SUCCESS);
        assert_eq!((api().stream_wait_event)(b, e, 0), SUCCESS);
        assert_eq!((api().stream_wait_event)(b, e, 1), INVALID_VALUE);
    }
    launch(b, &probe, 2);
    assert_eq!(query(b), NOT_READY);
    release(&word);
    assert_eq!(rx.recv_timeout(GUARD).map(|(tag, _)| tag), Ok(2));
    synchronize(b);
    // SAFETY: a live event.
    assert_eq!(unsafe { (api().event_destroy)(e) }, SUCCESS);
    destroy(a);
    destroy(b);
}

#[test]
fn writes_and_64_bit_waits_are_ordered_too() {
    let word = Pinned::new(4096);
    let flag = Pinned::new(4096);
    let s = new_stream();
    // SAFETY: pinned words of the runtime, alive until the stream is synchronised; the
    // 64-bit word is at offset 8 of the flag allocation, 8-aligned.
    unsafe {
        let wide = flag.0.add(8).cast::<c_void>();
        assert_eq!(
            (api().wait_value64)(s, word.ptr(), 1, WAIT_EQ, 0xff),
            SUCCESS
        );
        assert_eq!((api().write_value32)(s, flag.ptr(), 7, 0), SUCCESS);
        assert_eq!((api().write_value64)(s, wide, u64::MAX - 1, 0), SUCCESS);
        assert_eq!(
            flag.word().load(Ordering::Acquire),
            0,
            "written before the wait"
        );
        // Bits outside the mask do not count.
        word.word().store(0x101, Ordering::Release);
        synchronize(s);
        assert_eq!(flag.word().load(Ordering::Acquire), 7);
        assert_eq!(
            std::sync::atomic::AtomicU64::from_ptr(wide.cast()).load(Ordering::Acquire),
            u64::MAX - 1
        );
    }
    destroy(s);
}

#[test]
fn words_must_be_aligned_memory_of_the_runtime() {
    let pinned = Pinned::new(4096);
    let mut local = 0u32;
    let s = new_stream();
    let mut device = null_mut();
    // SAFETY: every call is refused before anything is queued or written, except the
    // device-pointer lookups, which write `device`.
    unsafe {
        let stack = std::ptr::from_mut(&mut local).cast::<c_void>();
        assert_eq!(
            (api().wait_value32)(s, stack, 1, WAIT_GTE, MASK),
            INVALID_VALUE
        );
        assert_eq!((api().write_value32)(s, stack, 1, 0), INVALID_VALUE);
        let odd = pinned.0.add(2).cast::<c_void>();
        assert_eq!(
            (api().wait_value32)(s, odd, 1, WAIT_GTE, MASK),
            INVALID_VALUE
        );
        assert_eq!(
            (api().wait_value32)(s, null_mut(), 1, WAIT_GTE, MASK),
            INVALID_VALUE
        );
        assert_eq!(
            (api().wait_value32)(s, pinned.ptr(), 1, 4, MASK),
            INVALID_VALUE
        );
        assert_eq!((api().write_value32)(s, pinned.ptr(), 1, 1), INVALID_VALUE);
        assert_eq!(
            (api().host_get_device_pointer)(&mut device, pinned.ptr(), 0),
            SUCCESS
        );
        assert_eq!(device, pinned.ptr(), "one address space");
        assert_eq!(
            (api().host_get_device_pointer)(&mut device, stack, 0),
            INVALID_VALUE
        );
        assert_eq!(
            (api().host_get_device_pointer)(&mut device, pinned.ptr(), 1),
            INVALID_VALUE
        );
    }
    assert_eq!(query(s), SUCCESS, "nothing was queued");
    destroy(s);
}
