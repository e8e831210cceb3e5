//! Initialisation, versions and devices.
//!
//! Devices are numbers: `0..HIPFILE_EMU_DEVICES`. Each thread has a current device (0 until
//! `hipSetDevice`), which `hipMalloc` records in the allocation, so that pointer attributes
//! tell devices apart.

use crate::config;
use crate::error::{INVALID_DEVICE, INVALID_VALUE, NO_DEVICE, NOT_INITIALIZED, SUCCESS};
use std::cell::Cell;
use std::ffi::{c_int, c_uint};

thread_local! {
    static CURRENT_DEVICE: Cell<c_int> = const { Cell::new(0) };
}

/// The calling thread's current device.
pub fn current_device() -> c_int {
    // During thread teardown the thread-local may be gone: device 0, as for a new thread.
    CURRENT_DEVICE.try_with(Cell::get).unwrap_or(0)
}

/// Makes `device` current on the calling thread, given `count` devices.
///
/// # Errors
///
/// `hipErrorInvalidDevice` unless `0 <= device < count`.
pub fn set_device(device: c_int, count: c_int) -> Result<(), i32> {
    if !(0..count).contains(&device) {
        return Err(INVALID_DEVICE);
    }
    CURRENT_DEVICE
        .try_with(|c| c.set(device))
        .map_err(|_| INVALID_DEVICE)
}

/// Writes `value` through `out`, or reports a null `out`.
///
/// # Safety
///
/// `out` is null or writable.
unsafe fn put(out: *mut c_int, value: c_int) -> i32 {
    if out.is_null() {
        return INVALID_VALUE;
    }
    // SAFETY: non-null and writable by the caller's promise.
    unsafe { out.write(value) };
    SUCCESS
}

/// `hipError_t hipInit(unsigned int flags)` — checks the configuration. Every other function
/// also works without it.
///
/// # Errors
///
/// `hipErrorNotInitialized` when a `HIPFILE_EMU_*` variable is invalid (its text names the
/// problem, which was also printed on stderr when the variables were read);
/// `hipErrorInvalidDevice` without devices (`HIPFILE_EMU_DEVICES=0`); `hipErrorInvalidValue`
/// for non-zero flags.
#[unsafe(no_mangle)]
pub extern "C" fn hipInit(flags: c_uint) -> i32 {
    if let Err(e) = config::with_device() {
        return e;
    }
    if flags != 0 {
        return INVALID_VALUE;
    }
    SUCCESS
}

/// `hipError_t hipRuntimeGetVersion(int* runtimeVersion)` — the emulated ROCm version,
/// major·10⁷ + minor·10⁵ + patch.
///
/// # Errors
///
/// `hipErrorInvalidValue` for a null pointer.
///
/// # Safety
///
/// `runtime_version` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipRuntimeGetVersion(runtime_version: *mut c_int) -> i32 {
    // SAFETY: the caller's promise is `put`'s.
    unsafe { put(runtime_version, config::current().version.encoded()) }
}

/// `hipError_t hipDriverGetVersion(int* driverVersion)` — the same value as
/// [`hipRuntimeGetVersion`]: the emulated driver is the runtime.
///
/// # Errors
///
/// `hipErrorInvalidValue` for a null pointer.
///
/// # Safety
///
/// `driver_version` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipDriverGetVersion(driver_version: *mut c_int) -> i32 {
    // SAFETY: the caller's promise is `put`'s.
    unsafe { put(driver_version, config::current().version.encoded()) }
}

/// `hipError_t hipGetDeviceCount(int* count)` — `HIPFILE_EMU_DEVICES`, 1 by default.
///
/// # Errors
///
/// `hipErrorInvalidValue` for a null pointer; `hipErrorNoDevice` with a count of 0 without
/// devices, as ROCm answers on a machine without a GPU; `hipErrorNotInitialized` with a
/// count of 0 while the configuration is invalid.
///
/// # Safety
///
/// `count` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipGetDeviceCount(count: *mut c_int) -> i32 {
    let config = config::current();
    let (devices, failure) = if !config.problems.is_empty() {
        (0, NOT_INITIALIZED)
    } else if config.devices == 0 {
        (0, NO_DEVICE)
    } else {
        (config.devices, SUCCESS)
    };
    // SAFETY: the caller's promise is `put`'s.
    match unsafe { put(count, devices) } {
        SUCCESS => failure,
        other => other,
    }
}

/// `hipError_t hipGetDevice(int* deviceId)` — the calling thread's current device.
///
/// # Errors
///
/// `hipErrorInvalidDevice` without devices; `hipErrorInvalidValue` for a null pointer.
///
/// # Safety
///
/// `device_id` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipGetDevice(device_id: *mut c_int) -> i32 {
    if let Err(e) = config::with_device() {
        return e;
    }
    // SAFETY: the caller's promise is `put`'s.
    unsafe { put(device_id, current_device()) }
}

/// `hipError_t hipSetDevice(int deviceId)` — makes `device_id` current on the calling thread.
///
/// # Errors
///
/// `hipErrorInvalidDevice` outside `0..HIPFILE_EMU_DEVICES`.
#[unsafe(no_mangle)]
pub extern "C" fn hipSetDevice(device_id: c_int) -> i32 {
    crate::error::code_of(set_device(device_id, config::current().devices))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::null_mut;

    #[test]
    fn devices_are_per_thread() {
        std::thread::spawn(|| {
            assert_eq!(current_device(), 0);
            assert_eq!(set_device(5, 6), Ok(()));
            assert_eq!(current_device(), 5);
            std::thread::spawn(|| assert_eq!(current_device(), 0))
                .join()
                .unwrap();
            let mut d = -1;
            // SAFETY: `d` is writable.
            assert_eq!(unsafe { hipGetDevice(&mut d) }, SUCCESS);
            assert_eq!(d, 5);
            assert_eq!(set_device(6, 6), Err(INVALID_DEVICE));
            assert_eq!(set_device(-1, 6), Err(INVALID_DEVICE));
            assert_eq!(current_device(), 5);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn set_device_checks_the_configured_count() {
        std::thread::spawn(|| {
            let count = config::current().devices;
            assert_eq!(hipSetDevice(count - 1), SUCCESS);
            assert_eq!(hipSetDevice(count), INVALID_DEVICE);
            assert_eq!(hipSetDevice(-1), INVALID_DEVICE);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn version_and_count_outputs() {
        let (mut runtime, mut driver, mut count) = (0, 0, 0);
        // SAFETY: the outputs are writable; null ones are refused.
        unsafe {
            assert_eq!(hipRuntimeGetVersion(&mut runtime), SUCCESS);
            assert_eq!(hipDriverGetVersion(&mut driver), SUCCESS);
            assert_eq!(hipGetDeviceCount(&mut count), SUCCESS);
            assert_eq!(hipRuntimeGetVersion(null_mut()), INVALID_VALUE);
            assert_eq!(hipDriverGetVersion(null_mut()), INVALID_VALUE);
            assert_eq!(hipGetDeviceCount(null_mut()), INVALID_VALUE);
            assert_eq!(hipGetDevice(null_mut()), INVALID_VALUE);
        }
        let config = config::current();
        assert_eq!(runtime, config.version.encoded());
        assert_eq!(driver, runtime);
        assert_eq!(count, config.devices);
    }

    #[test]
    fn init_refuses_flags() {
        assert_eq!(hipInit(1), INVALID_VALUE);
    }
}
