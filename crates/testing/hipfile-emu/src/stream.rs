//! Streams, host callbacks, events and stream memory operations, with real stream order.
//!
//! Each stream, and the null stream, has an in-order queue ([`crate::queue`]) served by a
//! worker thread of its own, started by the first operation that has to wait and ended when the
//! stream is destroyed and its queue has drained (`hipStreamDestroy` returns at once; queued
//! work still completes, as in HIP). An operation runs when everything queued before it on
//! its stream is done. To keep the common case as fast and as simple to follow as a
//! synchronous call, a copy or a value write submitted to an idle stream (nothing queued or
//! running) runs inline, on the calling thread, before the call returns; host functions
//! (`hipLaunchHostFunc`) and waits (`hipStreamWaitValue32/64`, `hipStreamWaitEvent`) always
//! go to the worker, so a host function never runs on its caller's thread.
//! `HIPFILE_EMU_STREAMS=queued` ([`crate::config`]) sends every operation to the worker, to
//! find callers that read a copy's result without synchronising.
//!
//! `hipEventRecord` takes a ticket on the stream's queue: the event completes when the stream
//! reaches it (`hipEventQuery` says `hipErrorNotReady` until then, `hipEventSynchronize`
//! waits for it); an event never recorded is complete. `hipStreamSynchronize` waits for
//! everything queued so far and reports the first error of a queued operation since the last
//! synchronisation; `hipStreamQuery` says `hipErrorNotReady` while work is queued or running.
//! The null stream is HIP's legacy default stream, and synchronises with the blocking
//! streams (those created without `hipStreamNonBlocking`), as HIP's and CUDA's does: work
//! submitted to a blocking stream waits for the work queued on the null stream before it, and
//! work submitted to the null stream waits for the work queued before it on every blocking
//! stream ([`submission_queue`] queues those waits). Non-blocking streams are ordered only
//! with themselves. Synchronous `hipMemcpy` is ordered on the null stream; like HIP's, some
//! null-stream operations return before they are done: see [`crate::copy`].
//!
//! A wait on a memory word (`hipStreamWaitValue32/64`) blocks only the stream's worker, which
//! polls the word with acquire loads, backing off from microseconds to a millisecond. The
//! word must lie in memory of this runtime's table (`hipHostMalloc`, `hipMalloc` or a
//! `hipHostRegister` range), be aligned to its size, and stay allocated until the wait ends:
//! it is checked again, under the transfer gate, before every load, and a wait whose word was
//! released ends with `hipErrorInvalidValue` at the stream's next synchronisation.
//!
//! Host functions must not call this runtime's stream functions on their own stream (HIP
//! forbids calling HIP from a host function); where such a call would wait for itself it
//! returns `hipErrorInvalidValue` instead of hanging.
//!
//! Handles are unique, non-null, never dereferenced values from one counter; each handle is
//! live from its creation to its destruction, and an unknown handle is
//! `hipErrorInvalidHandle`. The null stream is the default stream, always valid.
//!
//! Each stream and each event belongs to a device: the one current on the calling thread when
//! it was created (as in HIP). `hipMemcpyAsync` uses the stream's device to refuse copies
//! routed to the wrong device (see [`crate::copy`]), and `hipEventRecord` refuses an event
//! of one device on a stream of another with `hipErrorInvalidValue` (real HIP refuses such a
//! record too; the emulation keeps to this one simple rule). The null stream belongs to no
//! particular device here: it accepts events and copies of every device.
//!
//! # Safety
//!
//! Host functions run on a worker with the caller's data pointer, as `hipLaunchHostFunc`'s
//! contract allows. Words are read and written through atomics only after the table shows
//! them inside a live entry, under the transfer gate, which keeps the entry alive meanwhile.
use crate::device::current_device;
use crate::error::{INVALID_HANDLE, INVALID_VALUE, NOT_READY, SUCCESS};
use crate::memory::{known_range, transfer_gate};
pub use crate::queue::null_queue;
use crate::queue::{Job, Queue, SendPtr, code_of_submission};
use std::collections::BTreeMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// `hipStream_t`: an opaque handle; null is the default stream.
pub type HipStream = *mut c_void;
/// `hipEvent_t`: an opaque handle.
pub type HipEvent = *mut c_void;
/// `hipHostFn_t`: `void (*)(void* userData)`.
pub type HipHostFn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// `hipStreamNonBlocking`, the only flag of `hipStreamCreateWithFlags`.
const STREAM_NON_BLOCKING: c_uint = 1;

/// `hipStreamWaitValueGte`: wait until `(*ptr & mask) >= value`.
pub const WAIT_VALUE_GTE: c_uint = 0x0;
/// `hipStreamWaitValueEq`: wait until `(*ptr & mask) == value`.
pub const WAIT_VALUE_EQ: c_uint = 0x1;
/// `hipStreamWaitValueAnd`: wait until `(*ptr & mask & value) != 0`.
pub const WAIT_VALUE_AND: c_uint = 0x2;
/// `hipStreamWaitValueNor`: wait until `(~(*ptr | value) & mask) != 0`.
pub const WAIT_VALUE_NOR: c_uint = 0x3;

/// The longest pause between two loads of a waited-for word.
const MAX_BACKOFF: Duration = Duration::from_millis(1);

/// A live stream.
struct Stream {
    device: c_int,
    queue: Arc<Queue>,
    /// Created without `hipStreamNonBlocking`: it synchronises with the null stream.
    blocking: bool,
}

/// A live event: its device, and where it was last recorded (a queue and its ticket).
struct Event {
    device: c_int,
    recorded: Option<(Arc<Queue>, u64)>,
}

/// The next handle value (times 16, so that handles look like aligned pointers).
static NEXT_HANDLE: AtomicUsize = AtomicUsize::new(1);
/// Every live stream, by handle.
static STREAMS: Mutex<BTreeMap<usize, Stream>> = Mutex::new(BTreeMap::new());
/// Every live event, by handle.
static EVENTS: Mutex<BTreeMap<usize, Event>> = Mutex::new(BTreeMap::new());
fn streams() -> MutexGuard<'static, BTreeMap<usize, Stream>> {
    STREAMS.lock().unwrap_or_else(PoisonError::into_inner)
}

fn events() -> MutexGuard<'static, BTreeMap<usize, Event>> {
    EVENTS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A new handle value.
fn new_handle() -> usize {
    NEXT_HANDLE.fetch_add(1, Ordering::Relaxed).wrapping_mul(16)
}

/// The device (`None` for the null stream) and the queue of `stream`.
///
/// # Errors
///
/// `hipErrorInvalidHandle` for a stream that is neither null nor live.
pub fn queue_of(stream: HipStream) -> Result<(Option<c_int>, Arc<Queue>), i32> {
    if stream.is_null() {
        return Ok((None, null_queue()));
    }
    streams()
        .get(&(stream as usize))
        .map(|s| (Some(s.device), Arc::clone(&s.queue)))
        .ok_or(INVALID_HANDLE)
}

/// The device (`None` for the null stream) and the queue of `stream`, for work about to be
/// submitted to it: with the waits of the legacy default stream's synchronisation queued
/// first. A blocking stream's queue gets a wait for the null stream's work queued so far; the
/// null stream's, a wait for the work queued so far on each blocking stream. Nothing is
/// queued for work that is already done.
///
/// # Errors
///
/// `hipErrorInvalidHandle` for a stream that is neither null nor live; `hipErrorOutOfMemory`
/// when no worker thread can be started for a wait.
pub fn submission_queue(stream: HipStream) -> Result<(Option<c_int>, Arc<Queue>), i32> {
    if stream.is_null() {
        let blocking: Vec<Arc<Queue>> = streams()
            .values()
            .filter(|s| s.blocking)
            .map(|s| Arc::clone(&s.queue))
            .collect();
        let null = null_queue();
        for earlier in &blocking {
            order_after(&null, earlier)?;
        }
        return Ok((None, null));
    }
    let (device, queue, blocking) = streams()
        .get(&(stream as usize))
        .map(|s| (s.device, Arc::clone(&s.queue), s.blocking))
        .ok_or(INVALID_HANDLE)?;
    if blocking {
        order_after(&queue, &null_queue())?;
    }
    Ok((Some(device), queue))
}

/// Queues on `queue` a wait until the work queued so far on `earlier` is done, unless it is.
fn order_after(queue: &Arc<Queue>, earlier: &Arc<Queue>) -> Result<(), i32> {
    let ticket = earlier.ticket();
    if earlier.reached(ticket) {
        return Ok(());
    }
    let earlier = Arc::clone(earlier);
    queue
        .submit(Box::new(move || earlier.wait_for(ticket)), false)
        .map(|_| ())
}

/// Whether `stream` is the default stream or a live one.
pub fn stream_is_valid(stream: HipStream) -> bool {
    queue_of(stream).is_ok()
}

/// The device `stream` belongs to: `None` for the null stream, which belongs to none.
///
/// # Errors
///
/// `hipErrorInvalidHandle` for a stream that is neither null nor live.
pub fn stream_device(stream: HipStream) -> Result<Option<c_int>, i32> {
    queue_of(stream).map(|(device, _)| device)
}

/// The device a live `event` belongs to, `None` for one that is not live.
pub fn event_device(event: HipEvent) -> Option<c_int> {
    events().get(&(event as usize)).map(|e| e.device)
}

/// Where a live `event` was last recorded; `Ok(None)` if never.
fn event_ticket(event: HipEvent) -> Result<Option<(Arc<Queue>, u64)>, i32> {
    events()
        .get(&(event as usize))
        .map(|e| e.recorded.clone())
        .ok_or(INVALID_HANDLE)
}

/// `hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags)` — a new
/// stream, belonging to the calling thread's current device. Its worker thread starts with
/// the first operation that has to wait.
///
/// # Errors
///
/// `hipErrorInvalidDevice` without devices; `hipErrorInvalidValue` for a null pointer or flags
/// other than 0 and `hipStreamNonBlocking` (1).
///
/// # Safety
///
/// `stream` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamCreateWithFlags(stream: *mut HipStream, flags: c_uint) -> i32 {
    if let Err(e) = crate::config::with_device() {
        return e;
    }
    if stream.is_null() || flags & !STREAM_NON_BLOCKING != 0 {
        return INVALID_VALUE;
    }
    let handle = new_handle();
    streams().insert(
        handle,
        Stream {
            device: current_device(),
            queue: Arc::default(),
            blocking: flags & STREAM_NON_BLOCKING == 0,
        },
    );
    // SAFETY: non-null and writable by the caller's promise.
    unsafe { stream.write(std::ptr::without_provenance_mut(handle)) };
    SUCCESS
}

/// `hipError_t hipStreamCreate(hipStream_t* stream)` — [`hipStreamCreateWithFlags`] with
/// flags 0.
///
/// # Errors
///
/// As [`hipStreamCreateWithFlags`].
///
/// # Safety
///
/// `stream` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamCreate(stream: *mut HipStream) -> i32 {
    // SAFETY: the caller's promise is the callee's.
    unsafe { hipStreamCreateWithFlags(stream, 0) }
}

/// `hipError_t hipDeviceSynchronize(void)` — waits until the work queued so far on the null
/// stream and on every live stream of the calling thread's current device is done.
///
/// # Errors
///
/// `hipErrorInvalidDevice` without devices; otherwise the first error one of those streams
/// reports (see [`hipStreamSynchronize`]), after every one of them has been waited for.
#[unsafe(no_mangle)]
pub extern "C" fn hipDeviceSynchronize() -> i32 {
    if let Err(e) = crate::config::with_device() {
        return e;
    }
    let device = current_device();
    let mut queues = vec![null_queue()];
    queues.extend(
        streams()
            .values()
            .filter(|s| s.device == device)
            .map(|s| Arc::clone(&s.queue)),
    );
    // Every queue is waited for, so that none is left running when an earlier one failed.
    let mut first = Ok(());
    for queue in queues {
        let result = queue.synchronize();
        if first.is_ok() {
            first = result;
        }
    }
    crate::error::code_of(first)
}

/// `hipError_t hipStreamDestroy(hipStream_t stream)` — ends a stream's handle at once; the
/// work queued on it still completes, after which its worker ends.
///
/// # Errors
///
/// `hipErrorInvalidHandle` for null or a handle that is not live.
#[unsafe(no_mangle)]
pub extern "C" fn hipStreamDestroy(stream: HipStream) -> i32 {
    match streams().remove(&(stream as usize)) {
        Some(s) => {
            s.queue.close();
            SUCCESS
        }
        None => INVALID_HANDLE,
    }
}

/// `hipError_t hipStreamSynchronize(hipStream_t stream)` — waits until the work queued on
/// `stream` so far is done.
///
/// # Errors
///
/// `hipErrorInvalidHandle` for a stream that is neither null nor live; the first error of an
/// operation that failed on the stream's worker since the last synchronisation;
/// `hipErrorInvalidValue` from a host function of the same stream.
#[unsafe(no_mangle)]
pub extern "C" fn hipStreamSynchronize(stream: HipStream) -> i32 {
    match queue_of(stream) {
        Ok((_, queue)) => crate::error::code_of(queue.synchronize()),
        Err(e) => e,
    }
}

/// `hipError_t hipStreamQuery(hipStream_t stream)` — whether `stream` has finished its work.
///
/// # Errors
///
/// `hipErrorNotReady` while work is queued or running; `hipErrorInvalidHandle` for a stream
/// that is neither null nor live.
#[unsafe(no_mangle)]
pub extern "C" fn hipStreamQuery(stream: HipStream) -> i32 {
    match queue_of(stream) {
        Ok((_, queue)) if queue.idle() => SUCCESS,
        Ok(_) => NOT_READY,
        Err(e) => e,
    }
}

/// `hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void* userData)` — queues
/// `func(user_data)`, to run on the stream's worker thread when the stream reaches it.
///
/// # Errors
///
/// `hipErrorInvalidValue` for a null function; `hipErrorInvalidHandle` for a stream that is
/// neither null nor live; `hipErrorOutOfMemory` when no worker thread can be started.
///
/// # Safety
///
/// Calling `func(user_data)` once, later, on another thread, is sound.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipLaunchHostFunc(
    stream: HipStream,
    func: HipHostFn,
    user_data: *mut c_void,
) -> i32 {
    let Some(func) = func else {
        return INVALID_VALUE;
    };
    let queue = match submission_queue(stream) {
        Ok((_, queue)) => queue,
        Err(e) => return e,
    };
    let data = SendPtr(user_data);
    let job: Job = Box::new(move || {
        // SAFETY: the caller's promise.
        unsafe { func(data.get()) };
        Ok(())
    });
    code_of_submission(queue.submit(job, false))
}

/// `hipError_t hipEventCreate(hipEvent_t* event)` — a new event, complete until recorded,
/// belonging to the calling thread's current device.
///
/// # Errors
///
/// `hipErrorInvalidDevice` without devices; `hipErrorInvalidValue` for a null pointer.
///
/// # Safety
///
/// `event` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipEventCreate(event: *mut HipEvent) -> i32 {
    if let Err(e) = crate::config::with_device() {
        return e;
    }
    if event.is_null() {
        return INVALID_VALUE;
    }
    let handle = new_handle();
    events().insert(
        handle,
        Event {
            device: current_device(),
            recorded: None,
        },
    );
    // SAFETY: non-null and writable by the caller's promise.
    unsafe { event.write(std::ptr::without_provenance_mut(handle)) };
    SUCCESS
}

/// `hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream)` — the event completes
/// when the stream reaches this point (at once if it is idle). The stream must be null or of
/// the event's device.
///
/// # Errors
///
/// `hipErrorInvalidHandle` for an event that is not live or a stream that is neither null nor
/// live; `hipErrorInvalidValue` for a stream of another device than the event's.
#[unsafe(no_mangle)]
pub extern "C" fn hipEventRecord(event: HipEvent, stream: HipStream) -> i32 {
    let Some(event_device) = event_device(event) else {
        return INVALID_HANDLE;
    };
    let queue = match queue_of(stream) {
        Err(e) => return e,
        Ok((Some(device), _)) if device != event_device => return INVALID_VALUE,
        Ok(_) => match submission_queue(stream) {
            Ok((_, queue)) => queue,
            Err(e) => return e,
        },
    };
    let ticket = queue.ticket();
    match events().get_mut(&(event as usize)) {
        Some(e) => {
            e.recorded = Some((queue, ticket));
            SUCCESS
        }
        None => INVALID_HANDLE,
    }
}

/// `hipError_t hipEventSynchronize(hipEvent_t event)` — waits until the event is complete.
///
/// # Errors
///
/// `hipErrorInvalidHandle` for an event that is not live; `hipErrorInvalidValue` from a host
/// function of the stream the event waits for.
#[unsafe(no_mangle)]
pub extern "C" fn hipEventSynchronize(event: HipEvent) -> i32 {
    match event_ticket(event) {
        Ok(Some((queue, ticket))) => crate::error::code_of(queue.wait_for(ticket)),
        Ok(None) => SUCCESS,
        Err(e) => e,
    }
}

/// `hipError_t hipEventQuery(hipEvent_t event)` — whether the event is complete.
///
/// # Errors
///
/// `hipErrorNotReady` before the stream reaches the point where it was recorded;
/// `hipErrorInvalidHandle` for an event that is not live.
#[unsafe(no_mangle)]
pub extern "C" fn hipEventQuery(event: HipEvent) -> i32 {
    match event_ticket(event) {
        Ok(Some((queue, ticket))) if !queue.reached(ticket) => NOT_READY,
        Ok(_) => SUCCESS,
        Err(e) => e,
    }
}

/// `hipError_t hipEventDestroy(hipEvent_t event)` — ends an event's handle.
///
/// # Errors
///
/// `hipErrorInvalidHandle` for null or a handle that is not live.
#[unsafe(no_mangle)]
pub extern "C" fn hipEventDestroy(event: HipEvent) -> i32 {
    if events().remove(&(event as usize)).is_some() {
        SUCCESS
    } else {
        INVALID_HANDLE
    }
}

/// `hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags)` —
/// the stream's later work waits until `event` completes (an event never recorded is
/// complete: nothing waits).
///
/// # Errors
///
/// `hipErrorInvalidValue` for flags other than 0; `hipErrorInvalidHandle` for an event that
/// is not live or a stream that is neither null nor live.
#[unsafe(no_mangle)]
pub extern "C" fn hipStreamWaitEvent(stream: HipStream, event: HipEvent, flags: c_uint) -> i32 {
    if flags != 0 {
        return INVALID_VALUE;
    }
    if let Err(e) = queue_of(stream) {
        return e;
    }
    let (target, ticket) = match event_ticket(event) {
        Ok(Some(recorded)) => recorded,
        Ok(None) => return SUCCESS,
        Err(e) => return e,
    };
    let queue = match submission_queue(stream) {
        Ok((_, queue)) => queue,
        Err(e) => return e,
    };
    let job: Job = Box::new(move || target.wait_for(ticket));
    code_of_submission(queue.submit(job, false))
}

/// A 32- or 64-bit word of the stream memory operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Width {
    W32,
    W64,
}

impl Width {
    fn bytes(self) -> usize {
        match self {
            Width::W32 => 4,
            Width::W64 => 8,
        }
    }
}

/// Checks that `ptr` is a word of `width` in memory of the table, aligned.
fn check_word(ptr: *mut c_void, width: Width) -> Result<(), i32> {
    let addr = ptr as usize;
    if ptr.is_null() || !addr.is_multiple_of(width.bytes()) || !known_range(addr, width.bytes()) {
        return Err(INVALID_VALUE);
    }
    Ok(())
}

/// Loads the word at `ptr` (acquire), checked against the table under the transfer gate.
fn load_word(ptr: SendPtr, width: Width) -> Result<u64, i32> {
    let _gate = transfer_gate();
    check_word(ptr.get(), width)?;
    // SAFETY: the word lies, aligned, in a live entry of the table, which the gate keeps
    // alive; other threads access it only atomically (the callers' contract).
    Ok(unsafe {
        match width {
            Width::W32 => u64::from(AtomicU32::from_ptr(ptr.get().cast()).load(Ordering::Acquire)),
            Width::W64 => AtomicU64::from_ptr(ptr.get().cast()).load(Ordering::Acquire),
        }
    })
}

/// Stores `value` (release) into the word at `ptr`, checked as [`load_word`].
fn store_word(ptr: SendPtr, width: Width, value: u64) -> Result<(), i32> {
    let _gate = transfer_gate();
    check_word(ptr.get(), width)?;
    // SAFETY: as in `load_word`. A 32-bit write keeps the low half of `value`, as C's
    // conversion to `uint32_t` does.
    unsafe {
        match width {
            Width::W32 => {
                AtomicU32::from_ptr(ptr.get().cast()).store(value as u32, Ordering::Release);
            }
            Width::W64 => AtomicU64::from_ptr(ptr.get().cast()).store(value, Ordering::Release),
        }
    }
    Ok(())
}

/// Whether `word` satisfies a wait of `flags` for `value` under `mask`.
pub fn wait_satisfied(flags: c_uint, word: u64, value: u64, mask: u64) -> bool {
    match flags {
        WAIT_VALUE_GTE => word & mask >= value,
        WAIT_VALUE_EQ => word & mask == value,
        WAIT_VALUE_AND => word & mask & value != 0,
        _ => !(word | value) & mask != 0,
    }
}

/// The wait operation of `hipStreamWaitValue32/64`, after its checks.
fn wait_value(
    stream: HipStream,
    ptr: *mut c_void,
    width: Width,
    value: u64,
    flags: c_uint,
    mask: u64,
) -> i32 {
    if flags > WAIT_VALUE_NOR {
        return INVALID_VALUE;
    }
    if let Err(e) = queue_of(stream).and_then(|_| check_word(ptr, width)) {
        return e;
    }
    let queue = match submission_queue(stream) {
        Ok((_, queue)) => queue,
        Err(e) => return e,
    };
    let ptr = SendPtr(ptr);
    let job: Job = Box::new(move || {
        let mut pause = Duration::from_micros(10);
        loop {
            if wait_satisfied(flags, load_word(ptr, width)?, value, mask) {
                return Ok(());
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(MAX_BACKOFF);
        }
    });
    code_of_submission(queue.submit(job, false))
}

/// The write operation of `hipStreamWriteValue32/64`, after its checks.
fn write_value(
    stream: HipStream,
    ptr: *mut c_void,
    width: Width,
    value: u64,
    flags: c_uint,
) -> i32 {
    if flags != 0 {
        return INVALID_VALUE;
    }
    if let Err(e) = queue_of(stream).and_then(|_| check_word(ptr, width)) {
        return e;
    }
    let queue = match submission_queue(stream) {
        Ok((_, queue)) => queue,
        Err(e) => return e,
    };
    let ptr = SendPtr(ptr);
    let job: Job = Box::new(move || store_word(ptr, width, value));
    code_of_submission(queue.submit(job, true))
}

/// `hipError_t hipStreamWaitValue32(hipStream_t stream, void* ptr, uint32_t value,
/// unsigned int flags, uint32_t mask)` — the stream's later work waits until the 32-bit word
/// at `ptr` satisfies `flags` (`hipStreamWaitValueGte` 0, `Eq` 1, `And` 2, `Nor` 3) for
/// `value` under `mask`. Only the stream's worker waits; the call returns at once.
///
/// # Errors
///
/// `hipErrorInvalidValue` for unknown flags or a word that is null, unaligned or outside the
/// memory of this runtime; `hipErrorInvalidHandle` for a stream that is neither null nor live.
///
/// # Safety
///
/// Until the wait ends, the word is accessed only atomically by others (the runtime checks
/// that it stays allocated).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamWaitValue32(
    stream: HipStream,
    ptr: *mut c_void,
    value: u32,
    flags: c_uint,
    mask: u32,
) -> i32 {
    wait_value(stream, ptr, Width::W32, value.into(), flags, mask.into())
}

/// `hipError_t hipStreamWaitValue64(hipStream_t stream, void* ptr, uint64_t value,
/// unsigned int flags, uint64_t mask)` — [`hipStreamWaitValue32`] on a 64-bit word.
///
/// # Errors
///
/// As [`hipStreamWaitValue32`] (the word must be 8-byte aligned).
///
/// # Safety
///
/// As [`hipStreamWaitValue32`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamWaitValue64(
    stream: HipStream,
    ptr: *mut c_void,
    value: u64,
    flags: c_uint,
    mask: u64,
) -> i32 {
    wait_value(stream, ptr, Width::W64, value, flags, mask)
}

/// `hipError_t hipStreamWriteValue32(hipStream_t stream, void* ptr, uint32_t value,
/// unsigned int flags)` — stores `value` into the 32-bit word at `ptr` (release) when the
/// stream reaches it. Flags must be 0.
///
/// # Errors
///
/// `hipErrorInvalidValue` for flags other than 0 or a word that is null, unaligned or outside
/// the memory of this runtime; `hipErrorInvalidHandle` for a stream that is neither null nor
/// live.
///
/// # Safety
///
/// Until the write is done, the word is accessed only atomically by others.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamWriteValue32(
    stream: HipStream,
    ptr: *mut c_void,
    value: u32,
    flags: c_uint,
) -> i32 {
    write_value(stream, ptr, Width::W32, value.into(), flags)
}

/// `hipError_t hipStreamWriteValue64(hipStream_t stream, void* ptr, uint64_t value,
/// unsigned int flags)` — [`hipStreamWriteValue32`] on a 64-bit word.
///
/// # Errors
///
/// As [`hipStreamWriteValue32`] (the word must be 8-byte aligned).
///
/// # Safety
///
/// As [`hipStreamWriteValue32`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipStreamWriteValue64(
    stream: HipStream,
    ptr: *mut c_void,
    value: u64,
    flags: c_uint,
) -> i32 {
    write_value(stream, ptr, Width::W64, value, flags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::set_device;
    use std::ptr::null_mut;

    fn new_stream(flags: c_uint) -> HipStream {
        let mut s = null_mut();
        // SAFETY: `s` is writable.
        assert_eq!(unsafe { hipStreamCreateWithFlags(&mut s, flags) }, SUCCESS);
        s
    }

    #[test]
    fn streams_are_unique_and_checked() {
        let (a, b) = (new_stream(0), new_stream(STREAM_NON_BLOCKING));
        assert!(!a.is_null() && !b.is_null() && a != b);
        assert_eq!(hipStreamSynchronize(a), SUCCESS);
        assert_eq!(hipStreamSynchronize(null_mut()), SUCCESS);
        assert_eq!(hipStreamDestroy(a), SUCCESS);
        assert_eq!(hipStreamDestroy(a), INVALID_HANDLE);
        assert_eq!(hipStreamSynchronize(a), INVALID_HANDLE);
        assert_eq!(hipStreamDestroy(null_mut()), INVALID_HANDLE);
        assert_eq!(hipStreamDestroy(b), SUCCESS);
        let mut s = null_mut();
        // SAFETY: `s` is writable; the null pointer is refused.
        unsafe {
            assert_eq!(hipStreamCreateWithFlags(&mut s, 2), INVALID_VALUE);
            assert_eq!(hipStreamCreateWithFlags(null_mut(), 0), INVALID_VALUE);
        }
    }

    unsafe extern "C" fn bump(data: *mut c_void) {
        // SAFETY: the tests pass a live `AtomicUsize`.
        unsafe { &*data.cast::<AtomicUsize>() }.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn host_functions_run_in_order_on_the_worker() {
        let counter = AtomicUsize::new(0);
        let data = std::ptr::from_ref(&counter).cast_mut().cast();
        let s = new_stream(0);
        // SAFETY: `bump` gets the counter, which outlives the calls: each stream is
        // synchronised before the counter is read or dropped.
        unsafe {
            assert_eq!(hipLaunchHostFunc(s, Some(bump), data), SUCCESS);
            assert_eq!(hipStreamSynchronize(s), SUCCESS);
            assert_eq!(counter.load(Ordering::SeqCst), 1);
            assert_eq!(hipLaunchHostFunc(null_mut(), Some(bump), data), SUCCESS);
            assert_eq!(hipStreamSynchronize(null_mut()), SUCCESS);
            assert_eq!(counter.load(Ordering::SeqCst), 2);
            assert_eq!(hipLaunchHostFunc(s, None, data), INVALID_VALUE);
            assert_eq!(hipStreamDestroy(s), SUCCESS);
            assert_eq!(hipLaunchHostFunc(s, Some(bump), data), INVALID_HANDLE);
        }
        assert_eq!(counter.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn wait_conditions_follow_hip() {
        assert!(wait_satisfied(WAIT_VALUE_GTE, 5, 5, u64::MAX));
        assert!(!wait_satisfied(WAIT_VALUE_GTE, 4, 5, u64::MAX));
        assert!(!wait_satisfied(WAIT_VALUE_GTE, 0x105, 5, 0xf0));
        assert!(wait_satisfied(WAIT_VALUE_EQ, 0x105, 5, 0xff));
        assert!(!wait_satisfied(WAIT_VALUE_EQ, 6, 5, u64::MAX));
        assert!(wait_satisfied(WAIT_VALUE_AND, 0b110, 0b010, u64::MAX));
        assert!(!wait_satisfied(WAIT_VALUE_AND, 0b100, 0b010, u64::MAX));
        assert!(wait_satisfied(WAIT_VALUE_NOR, 0b01, 0b10, 0b111));
        assert!(!wait_satisfied(WAIT_VALUE_NOR, 0b01, 0b10, 0b011));
    }

    #[test]
    fn events_of_idle_streams_complete_at_once() {
        let mut e = null_mut();
        // SAFETY: `e` is writable; the null pointer is refused.
        unsafe {
            assert_eq!(hipEventCreate(&mut e), SUCCESS);
            assert_eq!(hipEventCreate(null_mut()), INVALID_VALUE);
        }
        let s = new_stream(0);
        assert_eq!(hipEventRecord(e, s), SUCCESS);
        assert_eq!(hipEventRecord(e, null_mut()), SUCCESS);
        assert_eq!(hipEventSynchronize(e), SUCCESS);
        assert_eq!(hipEventRecord(e, 8usize as HipStream), INVALID_HANDLE);
        assert_eq!(
            hipEventRecord(s, s),
            INVALID_HANDLE,
            "a stream is not an event"
        );
        assert_eq!(hipEventDestroy(e), SUCCESS);
        assert_eq!(hipEventDestroy(e), INVALID_HANDLE);
        assert_eq!(hipEventSynchronize(e), INVALID_HANDLE);
        assert_eq!(hipEventRecord(null_mut(), null_mut()), INVALID_HANDLE);
        assert_eq!(hipStreamDestroy(s), SUCCESS);
    }

    fn new_event() -> HipEvent {
        let mut e = null_mut();
        // SAFETY: `e` is writable.
        assert_eq!(unsafe { hipEventCreate(&mut e) }, SUCCESS);
        e
    }

    #[test]
    fn streams_and_events_belong_to_the_creating_device() {
        // A thread of its own, so that no other test sees its current device.
        std::thread::spawn(|| {
            let s0 = new_stream(0);
            let e0 = new_event();
            assert_eq!(set_device(3, 4), Ok(()));
            let s3 = new_stream(STREAM_NON_BLOCKING);
            let e3 = new_event();
            assert_eq!(stream_device(s0), Ok(Some(0)));
            assert_eq!(stream_device(s3), Ok(Some(3)));
            assert_eq!(stream_device(null_mut()), Ok(None));
            assert_eq!(event_device(e0), Some(0));
            assert_eq!(event_device(e3), Some(3));
            // The device is the creator's, whatever is current now.
            assert_eq!(set_device(1, 4), Ok(()));
            assert_eq!(stream_device(s0), Ok(Some(0)));
            assert_eq!(hipStreamDestroy(s3), SUCCESS);
            assert_eq!(stream_device(s3), Err(INVALID_HANDLE));
            assert_eq!(hipStreamDestroy(s0), SUCCESS);
            assert_eq!(hipEventDestroy(e0), SUCCESS);
            assert_eq!(hipEventDestroy(e3), SUCCESS);
            assert_eq!(event_device(e3), None);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn events_are_recorded_only_on_streams_of_their_device() {
        std::thread::spawn(|| {
            assert_eq!(set_device(2, 4), Ok(()));
            let (s2, e2) = (new_stream(0), new_event());
            assert_eq!(set_device(1, 4), Ok(()));
            let (s1, e1) = (new_stream(0), new_event());
            assert_eq!(hipEventRecord(e2, s2), SUCCESS);
            assert_eq!(hipEventRecord(e1, s1), SUCCESS);
            assert_eq!(hipEventRecord(e2, s1), INVALID_VALUE);
            assert_eq!(hipEventRecord(e1, s2), INVALID_VALUE);
            // The null stream takes events of every device.
            assert_eq!(hipEventRecord(e2, null_mut()), SUCCESS);
            assert_eq!(hipEventRecord(e1, null_mut()), SUCCESS);
            // Handles are checked before devices.
            assert_eq!(hipEventDestroy(e1), SUCCESS);
            assert_eq!(hipEventRecord(e1, s2), INVALID_HANDLE);
            assert_eq!(hipStreamDestroy(s1), SUCCESS);
            assert_eq!(hipEventRecord(e2, s1), INVALID_HANDLE);
            assert_eq!(hipStreamDestroy(s2), SUCCESS);
            assert_eq!(hipEventDestroy(e2), SUCCESS);
        })
        .join()
        .unwrap();
    }
}
