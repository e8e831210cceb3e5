//! The copy entry points, `hipMemcpy` and `hipMemcpyAsync`: each copy is checked against the
//! table of allocations ([`crate::memory`]) and ordered on a stream ([`crate::stream`]), so
//! this module sits above both and neither of them uses it.
//!
//! # Devices
//!
//! Unified addressing routes a copy by its pointers, so `hipMemcpy` and `hipMemcpyAsync` on
//! the null stream copy between any devices' memory. A non-null stream, though, belongs to one
//! device ([`crate::stream`]), and `hipMemcpyAsync` on it refuses, with
//! `hipErrorInvalidValue` and copying nothing, a copy with a device-memory operand (any
//! pointer that lies in a `hipMalloc` allocation, whatever the kind says: the destination of
//! a host-to-device copy, the source of a device-to-host one, either of a device-to-device
//! one) of another device than the stream's. A real runtime would do such a copy through peer
//! access, at a lower speed; the emulation refuses it so that misrouted copies show in tests.
//!
//! Copies are ordered on their streams ([`crate::stream`]): `hipMemcpyAsync` is checked when
//! it is called and again when it runs, under the gate, so memory released while a copy waits
//! in a queue makes that copy fail instead of touching freed memory. `hipFree` and
//! `hipHostFree` wait for the null stream's earlier work, as HIP's (which synchronise the
//! device) do, but not for the other streams'.
//!
//! # The null stream's deferred operations
//!
//! As in HIP and CUDA, `hipMemcpy` returns before its copy is done when nothing on the host
//! waits for it: a copy from pageable host memory (memory outside the table) into device
//! memory returns once the source has been read into a buffer of the runtime's, and a copy
//! between device allocations and a `hipMemset` of device memory return once queued. The
//! rest of the work runs on the null stream's worker, in the null stream's order, after
//! `HIPFILE_EMU_NULL_STREAM_DELAY` ([`crate::config`]). So, as on a GPU, work queued later
//! on the null stream or on a blocking stream sees the bytes, and a copy on a non-blocking
//! stream, or a read by the host, may not until the null stream has been synchronised.
//! A copy to host memory, and any copy from `hipHostMalloc` or registered memory, returns
//! when it is done.
//!
//! The bytes each copy moves into and out of device memory are counted per device
//! ([`crate::memory::device_copy_bytes`]).
//!
//! # Safety
//!
//! A copy writes only where [`check_copy`] allows (see [`crate::memory`]): inside the entry
//! of the table it falls into, or in host memory the caller passes outside every entry. It
//! checks and copies under the transfer gate, held shared, so the entries it checked cannot be
//! released before the copy ends.

use crate::error::{INVALID_MEMCPY_DIRECTION, INVALID_VALUE, SUCCESS, code_of};
use crate::memory::{check_copy, count_copied, device_range, lookup, transfer_gate};
use crate::queue::{Job, SendPtr, code_of_submission};
use crate::stream::{HipStream, queue_of, submission_queue};
use std::ffi::{c_int, c_void};

/// The copy of `hipMemcpy`/`hipMemcpyAsync`, checked, under the transfer gate, and counted
/// per device. With `stream_device`, every device-memory operand must be of that device.
///
/// # Safety
///
/// Host-side ranges outside the table are valid for the copy.
unsafe fn copy(
    dst: *mut c_void,
    src: *const c_void,
    len: usize,
    kind: c_int,
    stream_device: Option<c_int>,
) -> Result<(), i32> {
    if !(0..=4).contains(&kind) {
        return Err(INVALID_MEMCPY_DIRECTION);
    }
    if len == 0 {
        return Ok(());
    }
    let _gate = transfer_gate();
    let route = check_copy(dst as usize, src as usize, len, kind)?;
    if stream_device.is_some_and(|device| !route.stays_on(device)) {
        return Err(INVALID_VALUE);
    }
    // SAFETY: both ranges are valid: those in the table were just checked to fit their
    // entries, which the gate keeps alive; the others are the caller's promise. `copy` allows
    // overlap.
    unsafe { std::ptr::copy(src.cast::<u8>(), dst.cast::<u8>(), len) };
    count_copied(route.dst, route.src, len as u64);
    Ok(())
}

/// `hipError_t hipMemcpy(void* dst, const void* src, size_t size, hipMemcpyKind kind)` —
/// copies `size` bytes, checked against the table first: a device side must lie in one device
/// allocation, every side that falls into a known entry must fit in it (`hipMemcpyDefault`
/// checks only that). Size 0 is a no-op. The devices of the two sides may differ (unified
/// addressing routes the copy by its pointers).
///
/// Ordered on the null stream, as in HIP: it runs after the work queued there. A copy from
/// pageable host memory to device memory, or between device allocations, returns once queued
/// (the source read first, for the former) and is done when the null stream reaches it (see
/// the module documentation); any other returns when the copy is done.
///
/// # Errors
///
/// `hipErrorInvalidMemcpyDirection` for an unknown kind; `hipErrorInvalidValue` for a null
/// pointer or a range the checks refuse (nothing is copied), or when called from a host
/// function of the null stream (which would wait for itself).
///
/// # Safety
///
/// Host memory outside this runtime's table is valid for `size` bytes (readable at `src`,
/// writable at `dst`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipMemcpy(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: c_int,
) -> i32 {
    if let Err(e) = check_async_copy(dst as usize, src as usize, size, kind, None) {
        return crate::error::record(e);
    }
    // A deferred copy runs later, when its memory may have been released (hipFree here does
    // not wait for the streams): it is checked again then as the copy it was found to be
    // (device to device, host to device), whatever kind the caller named, so that memory
    // no longer in the table is refused rather than taken for the caller's host memory.
    const HOST_TO_DEVICE: c_int = 1;
    const DEVICE_TO_DEVICE: c_int = 3;
    if size > 0 && device_range(dst as usize, size).is_some() {
        if device_range(src as usize, size).is_some() {
            let (dst, src) = (SendPtr(dst), SendPtr(src.cast_mut()));
            return defer(Box::new(move || {
                // SAFETY: both sides must still be device memory, checked under the gate.
                unsafe { copy(dst.get(), src.get(), size, DEVICE_TO_DEVICE, None) }
            }));
        }
        if lookup(src as usize).is_none() {
            // SAFETY: pageable host memory the caller promises readable for `size` bytes.
            let staged = unsafe { std::slice::from_raw_parts(src.cast::<u8>(), size) }.to_vec();
            let dst = SendPtr(dst);
            return defer(Box::new(move || {
                // SAFETY: `staged` is this job's own buffer; the destination must still be
                // device memory, checked under the gate.
                unsafe {
                    copy(
                        dst.get(),
                        staged.as_ptr().cast(),
                        staged.len(),
                        HOST_TO_DEVICE,
                        None,
                    )
                }
            }));
        }
    }
    let (dst, src) = (SendPtr(dst), SendPtr(src.cast_mut()));
    let null = match submission_queue(std::ptr::null_mut()) {
        Ok((_, queue)) => queue,
        Err(e) => return crate::error::record(e),
    };
    code_of(null.run_ordered(move || {
        // SAFETY: the caller's promise is `copy`'s, and holds until this call returns, which
        // waits for the copy.
        unsafe { copy(dst.get(), src.get(), size, kind, None) }
    }))
}

/// Queues `job`, a deferred operation of the null stream (see the module documentation), to
/// run on the null stream's worker after the configured delay; returns its submission's code.
fn defer(job: Job) -> i32 {
    let delay = crate::config::current().null_stream_delay;
    let delayed: Job = Box::new(move || {
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        job()
    });
    match submission_queue(std::ptr::null_mut()) {
        Ok((_, null)) => code_of_submission(null.submit(delayed, false)),
        Err(e) => crate::error::record(e),
    }
}

/// `hipError_t hipMemcpyAsync(void* dst, const void* src, size_t size, hipMemcpyKind kind,
/// hipStream_t stream)` — [`hipMemcpy`] in `stream`'s order: done when the stream reaches it
/// (at once, on the calling thread, when the stream is idle). The arguments are checked when
/// it is called, and again when it runs: memory released in between makes the copy fail
/// with `hipErrorInvalidValue` at the stream's next synchronisation. On a non-null stream,
/// every device-memory operand must be memory of the stream's device (see the module
/// documentation); the null stream copies between any devices.
///
/// # Errors
///
/// As [`hipMemcpy`]; `hipErrorInvalidHandle` for a stream that is not null or live;
/// `hipErrorInvalidValue` (nothing copied) for device memory of another device than the
/// stream's.
///
/// # Safety
///
/// As [`hipMemcpy`], until the copy is done (the stream synchronised, or an event recorded
/// after it complete).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: c_int,
    stream: HipStream,
) -> i32 {
    let stream_device = match queue_of(stream) {
        Ok((device, _)) => device,
        Err(e) => return e,
    };
    if let Err(e) = check_async_copy(dst as usize, src as usize, size, kind, stream_device) {
        return e;
    }
    let queue = match submission_queue(stream) {
        Ok((_, queue)) => queue,
        Err(e) => return e,
    };
    let (dst, src) = (SendPtr(dst), SendPtr(src.cast_mut()));
    let job = move || {
        // SAFETY: the caller's promise is `copy`'s, and holds until the copy is done.
        unsafe { copy(dst.get(), src.get(), size, kind, stream_device) }
    };
    code_of_submission(queue.submit(Box::new(job), true))
}

/// `hipError_t hipMemset(void* dst, int value, size_t size)` — sets `size` bytes at `dst` to
/// the low byte of `value`. `dst..dst+size` must lie in one allocation of this runtime that a
/// device can reach: `hipMalloc`, `hipMallocManaged` or `hipHostMalloc` memory, or a
/// `hipHostRegister` range. Ordered on the null stream, as [`hipMemcpy`]: a memset of
/// `hipMalloc` memory returns once queued and is done when the null stream reaches it (see
/// the module documentation), any other when it is done. Size 0 is a no-op. It is not a
/// copy: the per-device copy counters do not count it.
///
/// # Errors
///
/// `hipErrorInvalidValue` for a null `dst` or a range outside every allocation (nothing is
/// written), or when called from a host function of the null stream.
///
/// # Safety
///
/// None beyond HIP's: the range is checked against the table, under the transfer gate (when
/// called, and again when it runs).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipMemset(dst: *mut c_void, value: c_int, size: usize) -> i32 {
    if dst.is_null() {
        return crate::error::record(INVALID_VALUE);
    }
    if size == 0 {
        return SUCCESS;
    }
    let dst = SendPtr(dst);
    let set = move || {
        let dst = dst.get();
        let _gate = transfer_gate();
        let lookup = lookup(dst as usize);
        if lookup.is_none_or(|a| size > a.len - (dst as usize - a.base)) {
            return Err(INVALID_VALUE);
        }
        // HIP's memset takes the value's low byte.
        let byte = value.to_le_bytes()[0];
        // SAFETY: `dst..dst+size` lies inside a live entry of the table, which the gate keeps
        // alive until the write ends.
        unsafe { std::ptr::write_bytes(dst.cast::<u8>(), byte, size) };
        Ok(())
    };
    if device_range(dst.get() as usize, size).is_some() {
        return defer(Box::new(set));
    }
    match submission_queue(std::ptr::null_mut()) {
        Ok((_, null)) => code_of(null.run_ordered(set)),
        Err(e) => crate::error::record(e),
    }
}

/// The checks of [`copy`], without the copy: made when a copy is queued, so that its caller
/// learns of a bad argument at once.
fn check_async_copy(
    dst: usize,
    src: usize,
    len: usize,
    kind: c_int,
    stream_device: Option<c_int>,
) -> Result<(), i32> {
    if !(0..=4).contains(&kind) {
        return Err(INVALID_MEMCPY_DIRECTION);
    }
    if len == 0 {
        return Ok(());
    }
    let _gate = transfer_gate();
    let route = check_copy(dst, src, len, kind)?;
    if stream_device.is_some_and(|device| !route.stays_on(device)) {
        return Err(INVALID_VALUE);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MAX_DEVICES;
    use crate::device::set_device;
    use crate::error::{INVALID_HANDLE, SUCCESS};
    use crate::memory::{counters_lock, device_copy_bytes, hipFree, hipMalloc};
    use crate::stream::{hipStreamCreateWithFlags, hipStreamDestroy, hipStreamSynchronize};
    use std::ptr::null_mut;

    fn device_alloc(len: usize) -> *mut u8 {
        let mut p = null_mut();
        // SAFETY: `p` is writable.
        assert_eq!(unsafe { hipMalloc(&mut p, len) }, SUCCESS);
        p.cast()
    }

    fn free(p: *mut u8) {
        // SAFETY: the tests free only their own allocations, once.
        assert_eq!(unsafe { hipFree(p.cast()) }, SUCCESS);
    }

    fn new_stream() -> HipStream {
        let mut s = null_mut();
        // SAFETY: `s` is writable.
        assert_eq!(unsafe { hipStreamCreateWithFlags(&mut s, 0) }, SUCCESS);
        s
    }

    /// `(to_device, from_device)` of `device`, among all the devices that have counters.
    fn copied(device: c_int) -> (u64, u64) {
        device_copy_bytes(device, MAX_DEVICES).unwrap()
    }

    /// Makes `device` current on this thread, with room for every device that has counters.
    fn use_device(device: c_int) {
        assert_eq!(set_device(device, MAX_DEVICES), Ok(()));
    }

    #[test]
    fn memcpy_round_trips_through_device_memory() {
        let d = device_alloc(4096);
        let d2 = device_alloc(4096);
        let src: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
        let mut back = vec![0u8; 4096];
        // SAFETY: host buffers are valid for 4096 bytes; device ranges are checked.
        unsafe {
            assert_eq!(hipMemcpy(d.cast(), src.as_ptr().cast(), 4096, 1), SUCCESS);
            assert_eq!(hipMemcpy(d2.cast(), d.cast(), 4096, 3), SUCCESS);
            assert_eq!(
                hipMemcpyAsync(back.as_mut_ptr().cast(), d2.cast(), 4096, 2, null_mut()),
                SUCCESS
            );
        }
        // An asynchronous copy is done only once its stream is synchronised: the null
        // stream may have work of other tests queued.
        assert_eq!(hipStreamSynchronize(null_mut()), SUCCESS);
        assert_eq!(back, src);
        free(d);
        free(d2);
    }

    #[test]
    fn memcpy_refuses_out_of_allocation_writes() {
        let d = device_alloc(4096);
        let d2 = device_alloc(4096);
        let mut host = vec![0xAAu8; 8192];
        let h = host.as_mut_ptr();
        // SAFETY: every call here is refused before copying.
        unsafe {
            // Past the end of the device allocation.
            assert_eq!(hipMemcpy(d.add(1).cast(), h.cast(), 4096, 1), INVALID_VALUE);
            assert_eq!(
                hipMemcpy(h.cast(), d.add(4000).cast(), 97, 2),
                INVALID_VALUE
            );
            // Host memory declared device memory.
            assert_eq!(
                hipMemcpy(h.cast(), h.add(4096).cast(), 16, 1),
                INVALID_VALUE
            );
            assert_eq!(
                hipMemcpy(h.cast(), h.add(4096).cast(), 16, 3),
                INVALID_VALUE
            );
            // A host side that runs from one entry past its end, or into an entry.
            assert_eq!(
                hipMemcpy(d.add(4000).cast(), h.cast(), 200, 0),
                INVALID_VALUE
            );
            assert_eq!(
                hipMemcpy(d.add(4000).cast(), h.cast(), 200, 4),
                INVALID_VALUE
            );
            assert_eq!(
                hipMemcpy(h.cast(), d2.add(4095).cast(), 2, 4),
                INVALID_VALUE
            );
            // Null pointers and unknown kinds.
            assert_eq!(hipMemcpy(null_mut(), h.cast(), 1, 4), INVALID_VALUE);
            assert_eq!(hipMemcpy(d.cast(), std::ptr::null(), 1, 1), INVALID_VALUE);
            assert_eq!(
                hipMemcpy(d.cast(), h.cast(), 1, 5),
                INVALID_MEMCPY_DIRECTION
            );
            assert_eq!(
                hipMemcpy(d.cast(), h.cast(), 0, -1),
                INVALID_MEMCPY_DIRECTION
            );
            // A stream that does not exist.
            assert_eq!(
                hipMemcpyAsync(d.cast(), h.cast(), 1, 1, 8usize as HipStream),
                INVALID_HANDLE
            );
        }
        assert!(host.iter().all(|&b| b == 0xAA));
        // SAFETY: size 0 copies nothing, whatever the pointers.
        let r = unsafe { hipMemcpy(null_mut(), std::ptr::null(), 0, 1) };
        assert_eq!(r, SUCCESS);
        // SAFETY: in bounds, kind Default.
        let r = unsafe { hipMemcpy(d.add(4095).cast(), h.cast(), 1, 4) };
        assert_eq!(r, SUCCESS);
        free(d);
        free(d2);
    }

    #[test]
    fn async_copies_must_stay_on_the_stream_device() {
        // A thread of its own, so that no other test sees its current device.
        std::thread::spawn(|| {
            let _counters = counters_lock();
            use_device(8);
            let (d8, s8) = (device_alloc(4096), new_stream());
            use_device(9);
            let (d9, s9) = (device_alloc(4096), new_stream());
            let before = (copied(8), copied(9));
            let src = vec![0x3Cu8; 4096];
            let mut host = vec![0xAAu8; 4096];
            let (h, hm) = (src.as_ptr().cast::<c_void>(), host.as_mut_ptr().cast());
            // SAFETY: host buffers are valid for 4096 bytes; device ranges are checked; every
            // call is refused before copying.
            unsafe {
                // Host to device 9, device 9 to host, on device 8's stream.
                assert_eq!(hipMemcpyAsync(d9.cast(), h, 4096, 1, s8), INVALID_VALUE);
                assert_eq!(hipMemcpyAsync(hm, d9.cast(), 4096, 2, s8), INVALID_VALUE);
                // Device to device, one side on another device than the stream's.
                assert_eq!(
                    hipMemcpyAsync(d8.cast(), d9.cast(), 64, 3, s8),
                    INVALID_VALUE
                );
                assert_eq!(
                    hipMemcpyAsync(d8.cast(), d9.cast(), 64, 3, s9),
                    INVALID_VALUE
                );
                // hipMemcpyDefault is routed by the pointers, and refused the same way.
                assert_eq!(hipMemcpyAsync(d9.cast(), h, 4096, 4, s8), INVALID_VALUE);
            }
            assert!(host.iter().all(|&b| b == 0xAA));
            // SAFETY: the allocation is 4096 bytes, live, and written by no one.
            let d9_bytes = unsafe { std::slice::from_raw_parts(d9, 4096) };
            assert!(d9_bytes.iter().all(|&b| b == 0), "a refused copy wrote");
            assert_eq!((copied(8), copied(9)), before, "a refused copy was counted");
            free(d8);
            free(d9);
            for s in [s8, s9] {
                assert_eq!(hipStreamDestroy(s), SUCCESS);
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn async_copies_on_the_right_stream_run_and_are_counted() {
        std::thread::spawn(|| {
            let _counters = counters_lock();
            use_device(10);
            let (d, d2, s) = (device_alloc(4096), device_alloc(4096), new_stream());
            // The stream's device counts, not the current one.
            use_device(0);
            let before = copied(10);
            let src: Vec<u8> = (0..4096u32).map(|i| (i * 13) as u8).collect();
            let mut back = vec![0u8; 4096];
            // SAFETY: host buffers are valid for 4096 bytes; device ranges are checked.
            unsafe {
                let r = hipMemcpyAsync(d.cast(), src.as_ptr().cast(), 4096, 1, s);
                assert_eq!(r, SUCCESS);
                assert_eq!(hipMemcpyAsync(d2.cast(), d.cast(), 1000, 3, s), SUCCESS);
                let r = hipMemcpyAsync(back.as_mut_ptr().cast(), d2.cast(), 1000, 4, s);
                assert_eq!(r, SUCCESS);
                // Host to host touches no device memory, on any stream.
                let r = hipMemcpyAsync(
                    back[1000..].as_mut_ptr().cast(),
                    src[1000..].as_ptr().cast(),
                    8,
                    0,
                    s,
                );
                assert_eq!(r, SUCCESS);
            }
            assert_eq!(hipStreamSynchronize(s), SUCCESS);
            assert_eq!(back[..1008], src[..1008]);
            let after = copied(10);
            assert_eq!(after.0 - before.0, 4096 + 1000, "into device 10");
            assert_eq!(after.1 - before.1, 1000 + 1000, "out of device 10");
            free(d);
            free(d2);
            assert_eq!(hipStreamDestroy(s), SUCCESS);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn sync_and_null_stream_copies_cross_devices() {
        std::thread::spawn(|| {
            let _counters = counters_lock();
            use_device(11);
            let d11 = device_alloc(4096);
            use_device(12);
            let d12 = device_alloc(4096);
            let before = (copied(11), copied(12));
            let src = vec![0x77u8; 4096];
            let mut back = vec![0u8; 4096];
            // SAFETY: host buffers are valid for 4096 bytes; device ranges are checked.
            unsafe {
                // Current device 12, memory of device 11.
                assert_eq!(hipMemcpy(d11.cast(), src.as_ptr().cast(), 4096, 1), SUCCESS);
                assert_eq!(hipMemcpy(d12.cast(), d11.cast(), 4096, 3), SUCCESS);
                let r = hipMemcpyAsync(d11.cast(), d12.cast(), 2048, 4, null_mut());
                assert_eq!(r, SUCCESS);
                let r = hipMemcpyAsync(back.as_mut_ptr().cast(), d11.cast(), 4096, 2, null_mut());
                assert_eq!(r, SUCCESS);
            }
            assert_eq!(hipStreamSynchronize(null_mut()), SUCCESS);
            assert_eq!(back, src);
            let (d11_before, d12_before) = before;
            let (d11_after, d12_after) = (copied(11), copied(12));
            assert_eq!(d11_after.0 - d11_before.0, 4096 + 2048);
            assert_eq!(d11_after.1 - d11_before.1, 4096 + 4096);
            assert_eq!(d12_after.0 - d12_before.0, 4096);
            assert_eq!(d12_after.1 - d12_before.1, 2048);
            free(d11);
            free(d12);
        })
        .join()
        .unwrap();
    }

    /// Holds `stream` back with a host function until the returned sender sends or is
    /// dropped.
    fn hold(stream: HipStream) -> std::sync::mpsc::Sender<()> {
        unsafe extern "C" fn wait(data: *mut c_void) {
            // SAFETY: `data` is the receiver leaked below, used once.
            let rx = unsafe { Box::from_raw(data.cast::<std::sync::mpsc::Receiver<()>>()) };
            let _ = rx.recv();
        }
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let data = Box::into_raw(Box::new(rx)).cast::<c_void>();
        // SAFETY: `wait` takes back the box, once, on the stream's worker.
        let r = unsafe { crate::stream::hipLaunchHostFunc(stream, Some(wait), data) };
        assert_eq!(r, SUCCESS);
        tx
    }

    #[test]
    fn null_stream_work_that_the_host_need_not_wait_for_is_deferred() {
        let _counters = counters_lock();
        let (d, back) = (device_alloc(4096), device_alloc(4096));
        let mut host = vec![0x11u8; 4096];
        let mut seen = vec![0u8; 4096];
        let s = {
            let mut s = null_mut();
            // SAFETY: `s` is writable.
            let r = unsafe { hipStreamCreateWithFlags(&mut s, 1) };
            assert_eq!(r, SUCCESS);
            s
        };
        // SAFETY: every range is a live allocation of this test or its own host memory; the
        // non-blocking stream is synchronised before `seen` is read.
        unsafe {
            assert_eq!(hipMemset(d.cast(), 0x22, 4096), SUCCESS);
            assert_eq!(hipStreamSynchronize(null_mut()), SUCCESS);
            let release = hold(null_mut());
            // Each returns at once, though the null stream is held.
            assert_eq!(hipMemcpy(d.cast(), host.as_ptr().cast(), 4096, 1), SUCCESS);
            host.fill(0x33); // the copy took the bytes as they were
            assert_eq!(hipMemset(d.add(4000).cast(), 0x44, 96), SUCCESS);
            assert_eq!(hipMemcpy(back.cast(), d.cast(), 4096, 3), SUCCESS);
            assert!(crate::hooks::hipfileEmuNullStreamUsers() >= 4);
            // A non-blocking stream does not wait for them: it sees the earlier bytes.
            let r = hipMemcpyAsync(seen.as_mut_ptr().cast(), d.cast(), 4096, 2, s);
            assert_eq!(r, SUCCESS);
            assert_eq!(hipStreamSynchronize(s), SUCCESS);
            assert!(seen.iter().all(|&b| b == 0x22));
            drop(release);
            // A copy to the host waits for the null stream's earlier work.
            let r = hipMemcpy(seen.as_mut_ptr().cast(), back.cast(), 4096, 2);
            assert_eq!(r, SUCCESS);
            assert_eq!(hipStreamDestroy(s), SUCCESS);
        }
        assert!(seen[..4000].iter().all(|&b| b == 0x11));
        assert!(seen[4000..].iter().all(|&b| b == 0x44));
        free(d);
        free(back);
    }

    #[test]
    fn blocking_streams_synchronise_with_the_null_stream() {
        let d = device_alloc(4096);
        let host = vec![5u8; 4096];
        let (blocking, free_running) = {
            let (mut b, mut n) = (null_mut(), null_mut());
            // SAFETY: both are writable.
            unsafe {
                assert_eq!(hipStreamCreateWithFlags(&mut b, 0), SUCCESS);
                assert_eq!(hipStreamCreateWithFlags(&mut n, 1), SUCCESS);
            }
            (b, n)
        };
        let release = hold(null_mut());
        // SAFETY: `d` is this test's allocation and `host` outlives the synchronisations.
        unsafe {
            assert_eq!(
                hipMemcpyAsync(d.cast(), host.as_ptr().cast(), 64, 1, blocking),
                SUCCESS
            );
            let r = hipMemcpyAsync(d.add(64).cast(), host.as_ptr().cast(), 64, 1, free_running);
            assert_eq!(r, SUCCESS);
        }
        // The blocking stream waits behind the held null stream; the other does not.
        assert_eq!(
            crate::stream::hipStreamQuery(blocking),
            crate::error::NOT_READY
        );
        assert_eq!(crate::stream::hipStreamQuery(free_running), SUCCESS);
        drop(release);
        assert_eq!(hipStreamSynchronize(blocking), SUCCESS);
        // The null stream's later work waits for the blocking stream's earlier work.
        let release = hold(blocking);
        let mut event = null_mut();
        // SAFETY: `event` is writable.
        let created = unsafe { crate::stream::hipEventCreate(&mut event) };
        assert_eq!(created, SUCCESS);
        assert_eq!(crate::stream::hipEventRecord(event, null_mut()), SUCCESS);
        assert_eq!(crate::stream::hipEventQuery(event), crate::error::NOT_READY);
        drop(release);
        assert_eq!(crate::stream::hipEventSynchronize(event), SUCCESS);
        assert_eq!(crate::stream::hipEventDestroy(event), SUCCESS);
        assert_eq!(hipStreamDestroy(blocking), SUCCESS);
        assert_eq!(hipStreamDestroy(free_running), SUCCESS);
        free(d);
    }

    #[test]
    fn memset_fills_known_memory_only() {
        let d = device_alloc(8192);
        let mut back = vec![0u8; 8192];
        // SAFETY: `d` is a live 8192-byte allocation; `back` is 8192 bytes; the bad ranges
        // are refused before anything is written.
        unsafe {
            assert_eq!(hipMemset(d.add(4096).cast(), 0x1a5, 4096), SUCCESS);
            assert_eq!(hipMemset(d.cast(), 0x11, 0), SUCCESS);
            assert_eq!(hipMemset(d.add(4096).cast(), 0, 4097), INVALID_VALUE);
            assert_eq!(hipMemset(null_mut(), 0, 1), INVALID_VALUE);
            let mut local = [0u8; 16];
            assert_eq!(hipMemset(local.as_mut_ptr().cast(), 0, 16), INVALID_VALUE);
            assert_eq!(local, [0u8; 16]);
            let r = hipMemcpy(back.as_mut_ptr().cast(), d.cast(), 8192, 2);
            assert_eq!(r, SUCCESS);
        }
        assert!(back[..4096].iter().all(|&b| b == 0));
        assert!(back[4096..].iter().all(|&b| b == 0xa5), "the low byte");
        free(d);
    }

    #[test]
    fn managed_memory_is_either_side_of_a_copy_and_freed_by_hip_free() {
        use crate::memory::{MemoryAbi, hipMallocManaged, pointer_attributes};
        let mut m = null_mut();
        // SAFETY: `m` is writable.
        unsafe {
            assert_eq!(hipMallocManaged(&mut m, 4096, 0), INVALID_VALUE);
            assert_eq!(hipMallocManaged(&mut m, 4096, 3), INVALID_VALUE);
            assert_eq!(hipMallocManaged(&mut m, 4096, 1), SUCCESS);
        }
        let attr = pointer_attributes(m, MemoryAbi::Rocm6, 0).unwrap();
        assert_eq!((attr.memory_type, attr.is_managed), (3, 1));
        let old = pointer_attributes(m, MemoryAbi::Rocm5 { managed: false }, 0).unwrap();
        assert_eq!(old.memory_type, 3, "Unified before ROCm 5.3");
        let src = vec![0x5au8; 4096];
        let mut back = vec![0u8; 4096];
        // SAFETY: `m` is a live 4096-byte allocation; the host buffers are 4096 bytes.
        unsafe {
            assert_eq!(hipMemcpy(m, src.as_ptr().cast(), 4096, 1), SUCCESS);
            assert_eq!(hipMemcpy(back.as_mut_ptr().cast(), m, 4096, 2), SUCCESS);
        }
        assert_eq!(back, src);
        // SAFETY: `m` is not used afterwards.
        assert_eq!(unsafe { hipFree(m) }, SUCCESS);
    }

    #[test]
    fn device_synchronize_waits_for_the_current_devices_streams() {
        use crate::stream::{hipDeviceSynchronize, hipStreamCreate};
        let mut s = null_mut();
        // SAFETY: `s` is writable.
        assert_eq!(unsafe { hipStreamCreate(&mut s) }, SUCCESS);
        let d = device_alloc(4096);
        let src = vec![0x33u8; 4096];
        let mut back = vec![0u8; 4096];
        // SAFETY: the buffers outlive the copies, which the device synchronisation ends.
        unsafe {
            let r = hipMemcpyAsync(d.cast(), src.as_ptr().cast(), 4096, 1, s);
            assert_eq!(r, SUCCESS);
            let r = hipMemcpyAsync(back.as_mut_ptr().cast(), d.cast(), 4096, 2, s);
            assert_eq!(r, SUCCESS);
        }
        assert_eq!(hipDeviceSynchronize(), SUCCESS);
        assert_eq!(back, src);
        assert_eq!(hipStreamDestroy(s), SUCCESS);
        free(d);
    }

    #[test]
    fn the_last_error_is_kept_per_thread_until_read() {
        use crate::error::{hipGetLastError, hipPeekAtLastError};
        std::thread::spawn(|| {
            assert_eq!(hipGetLastError(), SUCCESS);
            // SAFETY: null is refused before anything is written.
            assert_eq!(unsafe { hipMalloc(null_mut(), 16) }, INVALID_VALUE);
            let d = device_alloc(16);
            assert_eq!(hipPeekAtLastError(), INVALID_VALUE, "a success keeps it");
            assert_eq!(hipGetLastError(), INVALID_VALUE);
            assert_eq!(hipGetLastError(), SUCCESS, "read and reset");
            // SAFETY: the copy is refused: an unknown direction.
            let r = unsafe { hipMemcpy(d.cast(), d.cast(), 16, 9) };
            assert_eq!(r, INVALID_MEMCPY_DIRECTION);
            assert_eq!(hipPeekAtLastError(), INVALID_MEMCPY_DIRECTION);
            free(d);
        })
        .join()
        .unwrap();
    }
}
