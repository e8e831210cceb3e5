//! Functions that only the emulated runtime has: its marker, the test hook that re-reads the
//! configuration, and counters for tests.

use crate::error::{INVALID_VALUE, SUCCESS};
use crate::{config, fault, memory};
use std::ffi::{CStr, c_char, c_int};

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
/// again, puts them in force (fault counts start afresh) and zeroes the file-I/O counters.
/// The allocation table, streams and events are untouched. Meant for tests that change the
/// environment within one process; a thread's current device keeps its value.
///
/// # Errors
///
/// `hipErrorInvalidValue` when the new configuration is invalid (reported on stderr), as
/// `hipInit` would.
#[unsafe(no_mangle)]
pub extern "C" fn hipfileEmuReset() -> i32 {
    fault::reset_counters();
    if config::reload().problems.is_empty() {
        SUCCESS
    } else {
        INVALID_VALUE
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
