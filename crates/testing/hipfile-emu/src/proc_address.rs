//! `hipGetProcAddress`: symbols by name, the only way to reach `hipAmdFileRead`/`Write`.
//!
//! The emulated version decides what exists: below ROCm 6.2 the real function does not exist,
//! so every lookup fails with status 1 (symbol not found) and `hipErrorNotFound` (the symbol
//! is exported anyway, which is harmless: a caller that probes for it sees a runtime without
//! it). From 6.2 on, every function this library exports is found by its name; the file-I/O
//! pair exists only from 7.2, as in ROCm. The `hipVersion` argument is not used to refuse
//! anything: no emulated function is newer than the version a caller compiled against.

use crate::config::{self, RocmVersion};
use crate::error::{INVALID_VALUE, NOT_FOUND, SUCCESS};
use crate::{copy, device, error, fileio, memory, stream};
use std::ffi::{CStr, c_char, c_int, c_void};

/// `HIP_GET_PROC_ADDRESS_SUCCESS`.
pub const STATUS_SUCCESS: c_int = 0;
/// `HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`.
pub const STATUS_SYMBOL_NOT_FOUND: c_int = 1;

/// `HIP_GET_PROC_ADDRESS_DEFAULT | LEGACY_STREAM | PER_THREAD_DEFAULT_STREAM`.
const KNOWN_FLAGS: u64 = 0x1 | 0x2;

/// The address of `name` in a runtime of `version`, or `None` where it has no such symbol.
pub fn lookup(name: &[u8], version: RocmVersion) -> Option<*mut c_void> {
    if !version.at_least(6, 2) {
        return None;
    }
    let address: *const () = match name {
        b"hipAmdFileRead" if version.at_least(7, 2) => fileio::READ as *const (),
        b"hipAmdFileWrite" if version.at_least(7, 2) => fileio::WRITE as *const (),
        b"hipGetProcAddress" => hipGetProcAddress as *const (),
        b"hipInit" => device::hipInit as *const (),
        b"hipRuntimeGetVersion" => device::hipRuntimeGetVersion as *const (),
        b"hipDriverGetVersion" => device::hipDriverGetVersion as *const (),
        b"hipGetDeviceCount" => device::hipGetDeviceCount as *const (),
        b"hipGetDevice" => device::hipGetDevice as *const (),
        b"hipSetDevice" => device::hipSetDevice as *const (),
        b"hipGetErrorName" => error::hipGetErrorName as *const (),
        b"hipGetErrorString" => error::hipGetErrorString as *const (),
        b"hipPointerGetAttributes" => memory::hipPointerGetAttributes as *const (),
        b"hipMemGetAddressRange" => memory::hipMemGetAddressRange as *const (),
        b"hipMalloc" => memory::hipMalloc as *const (),
        b"hipFree" => memory::hipFree as *const (),
        b"hipHostMalloc" => memory::hipHostMalloc as *const (),
        b"hipHostFree" => memory::hipHostFree as *const (),
        b"hipHostRegister" => memory::hipHostRegister as *const (),
        b"hipHostUnregister" => memory::hipHostUnregister as *const (),
        b"hipMemcpy" => copy::hipMemcpy as *const (),
        b"hipMemcpyAsync" => copy::hipMemcpyAsync as *const (),
        b"hipStreamCreateWithFlags" => stream::hipStreamCreateWithFlags as *const (),
        b"hipStreamDestroy" => stream::hipStreamDestroy as *const (),
        b"hipStreamSynchronize" => stream::hipStreamSynchronize as *const (),
        b"hipLaunchHostFunc" => stream::hipLaunchHostFunc as *const (),
        b"hipEventCreate" => stream::hipEventCreate as *const (),
        b"hipEventRecord" => stream::hipEventRecord as *const (),
        b"hipEventSynchronize" => stream::hipEventSynchronize as *const (),
        b"hipEventDestroy" => stream::hipEventDestroy as *const (),
        b"hipEventQuery" => stream::hipEventQuery as *const (),
        b"hipStreamQuery" => stream::hipStreamQuery as *const (),
        b"hipStreamWaitEvent" => stream::hipStreamWaitEvent as *const (),
        b"hipStreamWaitValue32" => stream::hipStreamWaitValue32 as *const (),
        b"hipStreamWaitValue64" => stream::hipStreamWaitValue64 as *const (),
        b"hipStreamWriteValue32" => stream::hipStreamWriteValue32 as *const (),
        b"hipStreamWriteValue64" => stream::hipStreamWriteValue64 as *const (),
        b"hipHostGetDevicePointer" => memory::hipHostGetDevicePointer as *const (),
        b"hipMallocManaged" => memory::hipMallocManaged as *const (),
        b"hipMemset" => copy::hipMemset as *const (),
        b"hipStreamCreate" => stream::hipStreamCreate as *const (),
        b"hipDeviceSynchronize" => stream::hipDeviceSynchronize as *const (),
        b"hipGetLastError" => error::hipGetLastError as *const (),
        b"hipPeekAtLastError" => error::hipPeekAtLastError as *const (),
        _ => return None,
    };
    Some(address.cast_mut().cast())
}

/// `hipError_t hipGetProcAddress(const char* symbol, void** pfn, int hipVersion,
/// uint64_t flags, hipDriverProcAddressQueryResult* symbolStatus)` — the address of `symbol`
/// (see the module documentation for what exists). `status` may be null.
///
/// # Errors
///
/// `hipErrorInvalidValue` for a null `symbol` or `pfn` or unknown flags; `hipErrorNotFound`
/// (status 1, `*pfn` null) for a symbol the emulated version lacks.
///
/// # Safety
///
/// `symbol` is null or a NUL-terminated string; `pfn` and `status` are null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    hip_version: c_int,
    flags: u64,
    status: *mut c_int,
) -> i32 {
    let _ = hip_version;
    if symbol.is_null() || pfn.is_null() || flags & !KNOWN_FLAGS != 0 {
        return INVALID_VALUE;
    }
    // SAFETY: non-null and NUL-terminated by the caller's promise.
    let name = unsafe { CStr::from_ptr(symbol) };
    let found = lookup(name.to_bytes(), config::current().version);
    // SAFETY: `pfn` is non-null and writable, `status` null or writable, by the caller's
    // promise.
    unsafe {
        pfn.write(found.unwrap_or(std::ptr::null_mut()));
        if !status.is_null() {
            status.write(if found.is_some() {
                STATUS_SUCCESS
            } else {
                STATUS_SYMBOL_NOT_FOUND
            });
        }
    }
    if found.is_some() { SUCCESS } else { NOT_FOUND }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::null_mut;

    #[test]
    fn nothing_exists_before_6_2() {
        for v in [RocmVersion::new(5, 7, 0), RocmVersion::new(6, 1, 3)] {
            assert_eq!(lookup(b"hipAmdFileRead", v), None);
            assert_eq!(lookup(b"hipMalloc", v), None);
        }
    }

    #[test]
    fn file_io_exists_from_7_2() {
        for v in [RocmVersion::new(6, 2, 0), RocmVersion::new(7, 1, 1)] {
            assert_eq!(lookup(b"hipAmdFileRead", v), None);
            assert_eq!(lookup(b"hipAmdFileWrite", v), None);
            assert!(lookup(b"hipMalloc", v).is_some());
        }
        for v in [RocmVersion::new(7, 2, 0), RocmVersion::new(8, 0, 0)] {
            assert_eq!(
                lookup(b"hipAmdFileRead", v),
                Some(fileio::READ as *mut c_void)
            );
            assert_eq!(
                lookup(b"hipAmdFileWrite", v),
                Some(fileio::WRITE as *mut c_void)
            );
        }
    }

    #[test]
    fn exported_functions_resolve_to_themselves() {
        let v = RocmVersion::DEFAULT;
        assert_eq!(
            lookup(b"hipMalloc", v),
            Some(memory::hipMalloc as *mut c_void)
        );
        assert_eq!(
            lookup(b"hipGetProcAddress", v),
            Some(hipGetProcAddress as *mut c_void)
        );
        assert_eq!(
            lookup(b"hipStreamWaitValue32", v),
            Some(stream::hipStreamWaitValue32 as *mut c_void)
        );
        assert_eq!(
            lookup(b"hipHostGetDevicePointer", v),
            Some(memory::hipHostGetDevicePointer as *mut c_void)
        );
        assert_eq!(lookup(b"hipNoSuchThing", v), None);
        assert_eq!(
            lookup(b"hipfileEmuVersion", v),
            None,
            "hooks are not HIP symbols"
        );
    }

    #[test]
    fn the_c_entry_point_reports_status() {
        let (mut pfn, mut status) = (null_mut(), -1);
        let expected = lookup(b"hipAmdFileRead", config::current().version);
        // SAFETY: valid strings and writable out-pointers; null ones are refused.
        unsafe {
            let r = hipGetProcAddress(
                c"hipAmdFileRead".as_ptr(),
                &mut pfn,
                70_200_000,
                0,
                &mut status,
            );
            assert_eq!(r == SUCCESS, expected.is_some());
            assert_eq!(pfn, expected.unwrap_or(null_mut()));
            let r = hipGetProcAddress(c"hipBogus".as_ptr(), &mut pfn, 0, 0, &mut status);
            assert_eq!((r, status), (NOT_FOUND, STATUS_SYMBOL_NOT_FOUND));
            assert!(pfn.is_null());
            let r = hipGetProcAddress(c"hipBogus".as_ptr(), &mut pfn, 0, 0, null_mut());
            assert_eq!(r, NOT_FOUND);
            assert_eq!(
                hipGetProcAddress(c"hipInit".as_ptr(), null_mut(), 0, 0, &mut status),
                INVALID_VALUE
            );
            assert_eq!(
                hipGetProcAddress(std::ptr::null(), &mut pfn, 0, 0, &mut status),
                INVALID_VALUE
            );
            assert_eq!(
                hipGetProcAddress(c"hipInit".as_ptr(), &mut pfn, 0, 4, &mut status),
                INVALID_VALUE
            );
        }
    }
}
