//! Streams, host callbacks and events, all of which complete at once.
//!
//! Every operation on a stream runs to completion before the call that enqueues it returns,
//! so a stream is only a handle: synchronising it, recording an event on it and waiting for an
//! event always succeed immediately. `hipLaunchHostFunc` runs the callback on the calling
//! thread before it returns (which keeps stream order trivially; a callback must therefore not
//! wait for a lock its caller holds, which a real runtime's callback thread could take).
//!
//! Handles are unique, non-null, never dereferenced values from one counter; each handle is
//! live from its creation to its destruction, and an unknown handle is
//! `hipErrorInvalidHandle`. The null stream is the default stream, always valid.
//!
//! Each stream and each event belongs to a device: the one current on the calling thread when
//! it was created (as in HIP). `hipMemcpyAsync` uses the stream's device to refuse copies
//! routed to the wrong device (see [`crate::memory`]), and `hipEventRecord` refuses an event
//! of one device on a stream of another with `hipErrorInvalidValue` (real HIP refuses such a
//! record too; the emulation keeps to this one simple rule). The null stream belongs to no
//! particular device here: it accepts events and copies of every device.
use crate::device::current_device;
use crate::error::{INVALID_HANDLE, INVALID_VALUE, SUCCESS};
use std::collections::BTreeMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

/// `hipStream_t`: an opaque handle; null is the default stream.
pub type HipStream = *mut c_void;
/// `hipEvent_t`: an opaque handle.
pub type HipEvent = *mut c_void;
/// `hipHostFn_t`: `void (*)(void* userData)`.
pub type HipHostFn = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// `hipStreamNonBlocking`, the only flag of `hipStreamCreateWithFlags`.
const STREAM_NON_BLOCKING: c_uint = 1;

/// The next handle value (times 16, so that handles look like aligned pointers).
static NEXT_HANDLE: AtomicUsize = AtomicUsize::new(1);
/// Every live stream handle, with the device it belongs to.
static STREAMS: Mutex<BTreeMap<usize, c_int>> = Mutex::new(BTreeMap::new());
/// Every live event handle, with the device it belongs to.
static EVENTS: Mutex<BTreeMap<usize, c_int>> = Mutex::new(BTreeMap::new());

/// A new live handle in `live`, belonging to the calling thread's current device.
fn new_handle(live: &Mutex<BTreeMap<usize, c_int>>) -> *mut c_void {
    let value = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed).wrapping_mul(16);
    live.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(value, current_device());
    std::ptr::without_provenance_mut(value)
}

/// The device of `handle` if it is live in `live`.
fn device_of(live: &Mutex<BTreeMap<usize, c_int>>, handle: *mut c_void) -> Option<c_int> {
    live.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&(handle as usize))
        .copied()
}

/// Ends `handle` in `live`: `hipSuccess`, or `hipErrorInvalidHandle` if it was not live.
fn destroy(live: &Mutex<BTreeMap<usize, c_int>>, handle: *mut c_void) -> i32 {
    if live
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&(handle as usize))
        .is_some()
    {
        SUCCESS
    } else {
        INVALID_HANDLE
    }
}

/// Whether `stream` is the default stream or a live one.
pub fn stream_is_valid(stream: HipStream) -> bool {
    stream.is_null() || device_of(&STREAMS, stream).is_some()
}

/// The device `stream` belongs to: `None` for the null stream, which belongs to none.
///
/// # Errors
///
/// `hipErrorInvalidHandle` for a stream that is neither null nor live.
pub fn stream_device(stream: HipStream) -> Result<Option<c_int>, i32> {
    if stream.is_null() {
        return Ok(None);
    }
    device_of(&STREAMS, stream).map(Some).ok_or(INVALID_HANDLE)
}

/// The device a live `event` belongs to, `None` for one that is not live.
pub fn event_device(event: HipEvent) -> Option<c_int> {
    device_of(&EVENTS, event)
}

/// `hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags)` — a new
/// stream handle, belonging to the calling thread's current device.
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
    // SAFETY: non-null and writable by the caller's promise.
    unsafe { stream.write(new_handle(&STREAMS)) };
    SUCCESS
}

/// `hipError_t hipStreamDestroy(hipStream_t stream)` — ends a stream's handle.
///
/// # Errors
///
/// `hipErrorInvalidHandle` for null or a handle that is not live.
#[unsafe(no_mangle)]
pub extern "C" fn hipStreamDestroy(stream: HipStream) -> i32 {
    destroy(&STREAMS, stream)
}

/// `hipError_t hipStreamSynchronize(hipStream_t stream)` — returns at once: the stream's work
/// is already done.
///
/// # Errors
///
/// `hipErrorInvalidHandle` for a stream that is neither null nor live.
#[unsafe(no_mangle)]
pub extern "C" fn hipStreamSynchronize(stream: HipStream) -> i32 {
    if stream_is_valid(stream) {
        SUCCESS
    } else {
        INVALID_HANDLE
    }
}

/// `hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void* userData)` — runs
/// `func(user_data)` on the calling thread before returning.
///
/// # Errors
///
/// `hipErrorInvalidValue` for a null function; `hipErrorInvalidHandle` for a stream that is
/// neither null nor live.
///
/// # Safety
///
/// Calling `func(user_data)` on this thread, now, is sound.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipLaunchHostFunc(
    stream: HipStream,
    func: HipHostFn,
    user_data: *mut c_void,
) -> i32 {
    let Some(func) = func else {
        return INVALID_VALUE;
    };
    if !stream_is_valid(stream) {
        return INVALID_HANDLE;
    }
    // SAFETY: the caller's promise.
    unsafe { func(user_data) };
    SUCCESS
}

/// `hipError_t hipEventCreate(hipEvent_t* event)` — a new event handle, belonging to the
/// calling thread's current device.
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
    // SAFETY: non-null and writable by the caller's promise.
    unsafe { event.write(new_handle(&EVENTS)) };
    SUCCESS
}

/// `hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream)` — the event completes at
/// once. The stream must be null or of the event's device.
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
    match stream_device(stream) {
        Err(e) => e,
        Ok(Some(device)) if device != event_device => INVALID_VALUE,
        Ok(_) => SUCCESS,
    }
}

/// `hipError_t hipEventSynchronize(hipEvent_t event)` — returns at once.
///
/// # Errors
///
/// `hipErrorInvalidHandle` for an event that is not live.
#[unsafe(no_mangle)]
pub extern "C" fn hipEventSynchronize(event: HipEvent) -> i32 {
    if event_device(event).is_some() {
        SUCCESS
    } else {
        INVALID_HANDLE
    }
}

/// `hipError_t hipEventDestroy(hipEvent_t event)` — ends an event's handle.
///
/// # Errors
///
/// `hipErrorInvalidHandle` for null or a handle that is not live.
#[unsafe(no_mangle)]
pub extern "C" fn hipEventDestroy(event: HipEvent) -> i32 {
    destroy(&EVENTS, event)
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
    fn host_functions_run_before_return() {
        let counter = AtomicUsize::new(0);
        let data = std::ptr::from_ref(&counter).cast_mut().cast();
        let s = new_stream(0);
        // SAFETY: `bump` gets the counter, which outlives the calls.
        unsafe {
            assert_eq!(hipLaunchHostFunc(s, Some(bump), data), SUCCESS);
            assert_eq!(counter.load(Ordering::SeqCst), 1);
            assert_eq!(hipLaunchHostFunc(null_mut(), Some(bump), data), SUCCESS);
            assert_eq!(counter.load(Ordering::SeqCst), 2);
            assert_eq!(hipLaunchHostFunc(s, None, data), INVALID_VALUE);
            assert_eq!(hipStreamDestroy(s), SUCCESS);
            assert_eq!(hipLaunchHostFunc(s, Some(bump), data), INVALID_HANDLE);
        }
        assert_eq!(counter.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn events_complete_at_once() {
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
