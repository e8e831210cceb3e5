//! From the facade's errors to the C API's returns: `hipFileError_t` values, negative
//! `ssize_t` codes with `errno`, and the descriptions `hipFileGetOpErrorString` hands out.
//! The codes' numbers and texts are those of the one table (`hipfile_core::code`,
//! re-exported here for the libraries): hipFile's for `libhipfile.so.0`, and cuFile's names
//! for `libcufile.so.0`, whose texts are in its header.

use crate::types::*;
/// The one table of codes and texts, and what is made from it.
pub use facade::core::code::{
    CUFILE_UNKNOWN, Entry, HIPFILE_UNKNOWN, Row, TABLE, cufile_h, hipfile_h, row,
};
use facade::{Error, ErrorCode};
use std::ffi::{CStr, c_int};

/// `hipErrorInvalidValue`: the one HIP status whose negation (-1) reads as "see errno".
const HIP_ERROR_INVALID_VALUE: i32 = 1;

/// The `hipFileError_t` for `e`. A system error has no place in the struct: it becomes
/// `hipFileInternalError` (as hipFile reports any failure to examine a descriptor), with
/// `errno` set for callers that look.
pub(crate) fn status(e: &Error) -> hipFileError_t {
    match e.code() {
        ErrorCode::HipFile(c) => hipFileError_t {
            err: c.value(),
            hip_drv_err: e.hip_error().unwrap_or(0),
        },
        ErrorCode::Errno(n) => {
            set_errno(n);
            hipFileError_t::code(hipFileInternalError)
        }
    }
}

/// The `ssize_t` a failed read or write returns: -1 with `errno` for a system error, the
/// negated HIP status when a HIP call failed, else the negated hipFile code. HIP's
/// `hipErrorInvalidValue` (1) would read as -1 with a stale `errno`, so it is returned as
/// -1 with `errno` `EINVAL`.
pub(crate) fn io_failure(e: &Error) -> isize {
    if let Some(hip) = e.hip_error() {
        return hip_failure(hip);
    }
    match e.code() {
        ErrorCode::Errno(n) => {
            set_errno(n);
            -1
        }
        ErrorCode::HipFile(c) => negated(c.value()),
    }
}

/// The negated HIP status `hip` (see [`io_failure`] for 1).
pub(crate) fn hip_failure(hip: i32) -> isize {
    if hip == HIP_ERROR_INVALID_VALUE {
        set_errno(libc::EINVAL);
        -1
    } else {
        negated(hip)
    }
}

/// `-code`.
pub(crate) fn negated(code: c_int) -> isize {
    -(code as isize)
}

/// Sets the calling thread's `errno`.
pub fn set_errno(n: c_int) {
    // SAFETY: `__errno_location` returns the calling thread's `errno`, valid for the
    // thread's lifetime.
    unsafe { *libc::__errno_location() = n };
}

/// The description of `code`, a static NUL-terminated string: hipFile's text for it, or
/// [`HIPFILE_UNKNOWN`] for a number that is not one of hipFile's codes.
pub fn describe(code: hipFileOpError_t) -> &'static CStr {
    facade::core::code::hipfile_text(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_own_description() {
        let mut seen = std::collections::HashSet::new();
        for code in (5001..=5039).chain([0]) {
            let text = describe(code);
            if code == 5021 || code == 5032 {
                assert_eq!(text, HIPFILE_UNKNOWN);
            } else {
                assert!(seen.insert(text), "{code}: {text:?} is used twice");
            }
        }
        assert_eq!(describe(-5022), HIPFILE_UNKNOWN);
        assert_eq!(describe(5040), HIPFILE_UNKNOWN);
    }

    #[test]
    fn hip_invalid_value_never_reads_as_a_stale_errno() {
        set_errno(0);
        assert_eq!(hip_failure(1), -1);
        // SAFETY: reads this thread's errno.
        assert_eq!(unsafe { *libc::__errno_location() }, libc::EINVAL);
        assert_eq!(hip_failure(999), -999);
    }
}
