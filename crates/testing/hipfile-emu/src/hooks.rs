//! Functions that only the emulated runtime has: its marker, the test hook that re-reads the
//! configuration, and counters for tests.

use crate::error::{INVALID_VALUE, NOT_INITIALIZED, SUCCESS};
use crate::{config, fault, memory};
use std::ffi::{CStr, c_char, c_int, c_ulonglong};

/// What `hipfileEmuVersion` returns: `hipfile-emu <crate version>`.
pub const VERSION: &CStr = {
    let text = concat!("hipfile-emu ", env!("CARGO_PKG_VERSION"), "\0");
    match CStr::from_bytes_with_nul(text.as_bytes()) {
        Ok(s) => s,
        // Evaluated at compile time: a bad constant fails the build, never a call.
        Err(_) => panic!("the version string has an interior NUL"),
    }
};

/// `const char* hipfileEmuVersion(void)` — `"hipfile-emu <version>"`, a static string. Its
/// presence is how hipfile recognises the emulated runtime (and reports `platform: emulated`).
#[unsafe(no_mangle)]
pub extern "C" fn hipfileEmuVersion() -> *const c_char {
    VERSION.as_ptr()
}

/// `hipError_t hipfileEmuReset(void)` — a test hook: reads the `HIPFILE_EMU_*` variables
/// again, puts them in force (fault counts start afresh) and zeroes the file-I/O counters and
/// the per-device copy counters. The allocation table, streams and events (with their
/// devices) are untouched. Meant for tests that change the environment within one process; a
/// thread's current device keeps its value.
///
/// # Errors
///
/// `hipErrorNotInitialized` when the new configuration is invalid (reported on stderr), as
/// `hipInit` would.
#[unsafe(no_mangle)]
pub extern "C" fn hipfileEmuReset() -> i32 {
    fault::reset_counters();
    memory::reset_copy_counters();
    if config::reload().problems.is_empty() {
        SUCCESS
    } else {
        NOT_INITIALIZED
    }
}

/// `uint64_t hipfileEmuFileIoCalls(int op)` — the `hipAmdFileRead` (`op` 0) or
/// `hipAmdFileWrite` (`op` 1) calls since load or the last reset, faulted ones included;
/// `UINT64_MAX` for another `op`.
#[unsafe(no_mangle)]
pub extern "C" fn hipfileEmuFileIoCalls(op: c_int) -> u64 {
    fault::Op::from_index(op).map_or(u64::MAX, fault::calls)
}

/// `uint64_t hipfileEmuFaultsInjected(int op)` — the injected faults of `op` (0 read, 1 write)
/// since load or the last reset; `UINT64_MAX` for another `op`.
#[unsafe(no_mangle)]
pub extern "C" fn hipfileEmuFaultsInjected(op: c_int) -> u64 {
    fault::Op::from_index(op).map_or(u64::MAX, fault::injected)
}

/// `uint64_t hipfileEmuLiveAllocations(void)` — allocations and registrations not yet
/// released, so that a test can check that nothing leaked.
#[unsafe(no_mangle)]
pub extern "C" fn hipfileEmuLiveAllocations() -> u64 {
    memory::live_entries() as u64
}

/// `uint64_t hipfileEmuNullStreamUsers(void)` — what depends on the null stream now: the
/// operations queued or running on it (a deferred copy, a host function, a wait) plus the
/// threads blocked until it reaches some point (`hipStreamSynchronize(NULL)`,
/// `hipEventSynchronize` of an event recorded on it). A test that holds the null stream back
/// reads it to tell when a call has begun to wait for the stream or queued work behind it.
#[unsafe(no_mangle)]
pub extern "C" fn hipfileEmuNullStreamUsers() -> u64 {
    crate::stream::null_queue().users()
}

/// `hipError_t hipfileEmuDeviceCopyBytes(int device, unsigned long long* to_device,
/// unsigned long long* from_device)` — the bytes copied into (`*to_device`) and out of
/// (`*from_device`) the memory of `device` since load or the last reset, by `hipMemcpy`,
/// `hipMemcpyAsync`, `hipAmdFileRead` (into) and `hipAmdFileWrite` (out of). A copy between
/// two places in one device's memory counts both ways; refused copies count nothing. So that
/// a test can check that data went through the device it meant.
///
/// # Errors
///
/// `hipErrorInvalidValue` for a null pointer (checked first);
/// `hipErrorInvalidDevice` outside `0..HIPFILE_EMU_DEVICES`. Nothing is written on error.
///
/// # Safety
///
/// `to_device` and `from_device` are null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipfileEmuDeviceCopyBytes(
    device: c_int,
    to_device: *mut c_ulonglong,
    from_device: *mut c_ulonglong,
) -> i32 {
    if to_device.is_null() || from_device.is_null() {
        return INVALID_VALUE;
    }
    match memory::device_copy_bytes(device, config::current().devices) {
        Ok((to, from)) => {
            // SAFETY: both non-null and writable by the caller's promise.
            unsafe {
                to_device.write(to);
                from_device.write(from);
            }
            SUCCESS
        }
        Err(e) => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MAX_DEVICES;
    use crate::copy::hipMemcpy;
    use crate::device::set_device;
    use crate::error::INVALID_DEVICE;
    use crate::memory::{counters_lock, device_copy_bytes, hipFree, hipMalloc};
    use std::ffi::c_void;
    use std::ptr::null_mut;

    #[test]
    fn the_marker_names_the_crate_version() {
        // SAFETY: a static NUL-terminated string.
        let text = unsafe { CStr::from_ptr(hipfileEmuVersion()) };
        assert_eq!(
            text.to_str().unwrap(),
            format!("hipfile-emu {}", env!("CARGO_PKG_VERSION"))
        );
    }

    #[test]
    fn unknown_ops_have_no_counters() {
        assert_eq!(hipfileEmuFileIoCalls(2), u64::MAX);
        assert_eq!(hipfileEmuFaultsInjected(-1), u64::MAX);
        assert_ne!(hipfileEmuFileIoCalls(0), u64::MAX);
    }

    #[test]
    fn device_copy_bytes_checks_its_arguments() {
        let (mut to, mut from) = (u64::MAX, u64::MAX);
        let count = config::current().devices;
        // SAFETY: the out-pointers are writable; null ones are refused.
        unsafe {
            assert_eq!(hipfileEmuDeviceCopyBytes(0, &mut to, &mut from), SUCCESS);
            assert_ne!((to, from), (u64::MAX, u64::MAX));
            assert_eq!(
                hipfileEmuDeviceCopyBytes(0, null_mut(), &mut from),
                INVALID_VALUE
            );
            assert_eq!(
                hipfileEmuDeviceCopyBytes(0, &mut to, null_mut()),
                INVALID_VALUE
            );
            assert_eq!(
                hipfileEmuDeviceCopyBytes(count, null_mut(), null_mut()),
                INVALID_VALUE,
                "null pointers are checked first"
            );
            (to, from) = (7, 7);
            assert_eq!(
                hipfileEmuDeviceCopyBytes(count, &mut to, &mut from),
                INVALID_DEVICE
            );
            assert_eq!(
                hipfileEmuDeviceCopyBytes(-1, &mut to, &mut from),
                INVALID_DEVICE
            );
        }
        assert_eq!((to, from), (7, 7), "nothing written on error");
    }

    #[test]
    fn reset_zeroes_the_device_copy_counters() {
        // A thread of its own, so that no other test sees its current device.
        std::thread::spawn(|| {
            let _counters = counters_lock();
            assert_eq!(set_device(15, MAX_DEVICES), Ok(()));
            let mut d = null_mut::<c_void>();
            let mut host = [9u8; 512];
            // SAFETY: `d` is writable; `host` is readable for 512 bytes.
            unsafe {
                assert_eq!(hipMalloc(&mut d, 512), SUCCESS);
                assert_eq!(hipMemcpy(d, host.as_ptr().cast(), 512, 1), SUCCESS);
            }
            // A copy from pageable memory is done once the null stream reaches it.
            assert_eq!(crate::stream::hipStreamSynchronize(null_mut()), SUCCESS);
            let copied = || device_copy_bytes(15, MAX_DEVICES).unwrap();
            assert!(copied().0 >= 512);
            let valid = config::current().problems.is_empty();
            assert_eq!(hipfileEmuReset() == SUCCESS, valid);
            assert_eq!(copied(), (0, 0));
            // Counting starts afresh.
            // SAFETY: `host` is writable for 512 bytes; `d` is this test's allocation.
            unsafe {
                let r = hipMemcpy(host.as_mut_ptr().cast(), d, 256, 2);
                assert_eq!(r, SUCCESS);
                assert_eq!(hipFree(d), SUCCESS);
            }
            assert_eq!(copied(), (0, 256));
        })
        .join()
        .unwrap();
    }
}
