//! The text of the `hipError_t` codes (`codes.rs`, re-exported here): `hipGetErrorName`,
//! `hipGetErrorString`.

use std::ffi::{CStr, c_char};

pub use crate::codes::*;

/// Every code this runtime knows: value, name, description (HIP's wording).
const TABLE: &[(i32, &CStr, &CStr)] = &[
    (SUCCESS, c"hipSuccess", c"no error"),
    (INVALID_VALUE, c"hipErrorInvalidValue", c"invalid argument"),
    (OUT_OF_MEMORY, c"hipErrorOutOfMemory", c"out of memory"),
    (
        NOT_INITIALIZED,
        c"hipErrorNotInitialized",
        c"initialization error",
    ),
    (
        DEINITIALIZED,
        c"hipErrorDeinitialized",
        c"driver shutting down",
    ),
    (
        INVALID_DEVICE_POINTER,
        c"hipErrorInvalidDevicePointer",
        c"invalid device pointer",
    ),
    (
        INVALID_MEMCPY_DIRECTION,
        c"hipErrorInvalidMemcpyDirection",
        c"invalid copy direction for memcpy",
    ),
    (
        INSUFFICIENT_DRIVER,
        c"hipErrorInsufficientDriver",
        c"driver version is insufficient for runtime version",
    ),
    (
        NO_DEVICE,
        c"hipErrorNoDevice",
        c"no ROCm-capable device is detected",
    ),
    (
        INVALID_DEVICE,
        c"hipErrorInvalidDevice",
        c"invalid device ordinal",
    ),
    (
        INVALID_CONTEXT,
        c"hipErrorInvalidContext",
        c"invalid device context",
    ),
    (
        INVALID_HANDLE,
        c"hipErrorInvalidHandle",
        c"invalid resource handle",
    ),
    (NOT_FOUND, c"hipErrorNotFound", c"named symbol not found"),
    (NOT_READY, c"hipErrorNotReady", c"device not ready"),
    (
        ILLEGAL_ADDRESS,
        c"hipErrorIllegalAddress",
        c"an illegal memory access was encountered",
    ),
    (
        HOST_MEMORY_ALREADY_REGISTERED,
        c"hipErrorHostMemoryAlreadyRegistered",
        c"part or all of the requested memory range is already mapped",
    ),
    (
        HOST_MEMORY_NOT_REGISTERED,
        c"hipErrorHostMemoryNotRegistered",
        c"pointer does not correspond to a registered memory region",
    ),
    (
        LAUNCH_FAILURE,
        c"hipErrorLaunchFailure",
        c"unspecified launch failure",
    ),
    (
        NOT_SUPPORTED,
        c"hipErrorNotSupported",
        c"operation not supported",
    ),
    (UNKNOWN, c"hipErrorUnknown", c"unknown error"),
];

/// The name of `code` (`"hipErrorInvalidValue"`); unknown codes are named `hipErrorUnknown`,
/// as HIP does.
pub fn name(code: i32) -> &'static CStr {
    lookup(code).0
}

/// The description of `code` (`"invalid argument"`); unknown codes read `unknown error`.
pub fn description(code: i32) -> &'static CStr {
    lookup(code).1
}

fn lookup(code: i32) -> (&'static CStr, &'static CStr) {
    TABLE
        .iter()
        .find(|(c, _, _)| *c == code)
        .map_or((c"hipErrorUnknown", c"unknown error"), |(_, n, d)| (n, d))
}

/// `const char* hipGetErrorName(hipError_t error)` — the code's name, a static NUL-terminated
/// string that is never null.
#[unsafe(no_mangle)]
pub extern "C" fn hipGetErrorName(error: i32) -> *const c_char {
    name(error).as_ptr()
}

/// `const char* hipGetErrorString(hipError_t error)` — the code's description, a static
/// NUL-terminated string that is never null. While the configuration is invalid,
/// `hipErrorNotInitialized`'s says what is wrong with it ([`crate::config`]).
#[unsafe(no_mangle)]
pub extern "C" fn hipGetErrorString(error: i32) -> *const c_char {
    if error == NOT_INITIALIZED
        && let Some(text) = crate::config::current().init_error
    {
        return text.as_ptr();
    }
    description(error).as_ptr()
}

/// Turns an internal result into the `hipError_t` a C caller sees, and records an error as
/// the thread's last ([`hipGetLastError`]).
pub(crate) fn code_of(result: Result<(), i32>) -> i32 {
    record(result.err().unwrap_or(SUCCESS))
}

std::thread_local! {
    /// The last error a call of this thread returned (see [`hipGetLastError`]).
    static LAST_ERROR: std::cell::Cell<i32> = const { std::cell::Cell::new(SUCCESS) };
}

/// Records `code`, when it is an error, as the calling thread's last error; returns it.
pub(crate) fn record(code: i32) -> i32 {
    if code != SUCCESS {
        // During thread teardown the thread-local may be gone: nothing is left to ask.
        let _ = LAST_ERROR.try_with(|last| last.set(code));
    }
    code
}

/// `hipError_t hipGetLastError(void)` — the last error a call of this thread returned, reset
/// to `hipSuccess` by this call, as HIP does. The calls that record their errors are those
/// that report through the runtime's common paths: allocations (`hipMalloc`,
/// `hipHostMalloc`, `hipMallocManaged`), frees, copies (`hipMemcpy`, `hipMemcpyAsync`),
/// `hipMemset`, and stream and device synchronisation; the others return their error
/// without recording it.
#[unsafe(no_mangle)]
pub extern "C" fn hipGetLastError() -> i32 {
    LAST_ERROR
        .try_with(|last| last.replace(SUCCESS))
        .unwrap_or(SUCCESS)
}

/// `hipError_t hipPeekAtLastError(void)` — [`hipGetLastError`] without the reset.
#[unsafe(no_mangle)]
pub extern "C" fn hipPeekAtLastError() -> i32 {
    LAST_ERROR.try_with(std::cell::Cell::get).unwrap_or(SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_descriptions_follow_hip() {
        assert_eq!(name(INVALID_VALUE), c"hipErrorInvalidValue");
        assert_eq!(description(INVALID_VALUE), c"invalid argument");
        assert_eq!(
            name(HOST_MEMORY_NOT_REGISTERED),
            c"hipErrorHostMemoryNotRegistered"
        );
        assert_eq!(name(12345), c"hipErrorUnknown");
        assert_eq!(description(-1), c"unknown error");
    }

    #[test]
    fn every_code_has_one_entry() {
        for (i, (code, _, _)) in TABLE.iter().enumerate() {
            assert!(
                TABLE[i + 1..].iter().all(|(c, _, _)| c != code),
                "{code} twice"
            );
        }
    }

    #[test]
    fn exported_strings_are_the_table_strings() {
        assert_eq!(hipGetErrorName(NOT_FOUND), name(NOT_FOUND).as_ptr());
        assert_eq!(hipGetErrorString(SUCCESS), description(SUCCESS).as_ptr());
    }
}
