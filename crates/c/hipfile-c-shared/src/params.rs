//! `hipFileGetParameter{SizeT,Bool,String}` and `hipFileSetParameter{SizeT,Bool,String}`:
//! they read and change the settings (`settings.rs`, which holds their values and checks)
//! that the state keeps, with the driver setters of `props.rs`, for the next open of the
//! process-wide driver.
//!
//! Every enum value of the header has a place
//! (docs/decisions/c-abi-properties-and-parameters.md has the table): *applied* values become the driver's
//! `ConfigBuilder` overrides (they win over the environment); *recorded* values are kept
//! and reported back but change nothing, since this library has no such mechanism; *fixed*
//! values are limits of ours that a set can only confirm (another value is
//! `hipFileDriverUnsupportedLimit`).
//!
//! Setting a parameter while the driver is open (use count above 0) is
//! `hipFileDriverAlreadyOpen`, as in cuFile; getting works at any time and reports what the
//! open driver uses, or, when it is closed, what the next open would use (the settings over
//! the environment over the defaults).
//!
//! # Safety
//!
//! Value pointers are the caller's, checked for NULL before use; a string is read only up to
//! its NUL, and written only within the `len` bytes the caller gave.

use crate::panic::boundary;
use crate::settings::{
    KIB, MAX_BATCH_IO, Settings, cache_bytes, chunk_bytes, get_string, pinned_bytes, recorded_slot,
    set_bool, set_size, size_bounds, string_slot, string_value,
};
use crate::state::{self, State};
use crate::types::*;
use std::ffi::{CStr, c_char, c_int};

const INTERNAL: hipFileError_t = hipFileError_t::code(hipFileInternalError);

/// The value of a `size_t` parameter.
fn get_size(param: hipFileSizeTConfigParameter_t, st: &State) -> Option<u64> {
    let (config, s) = st.current();
    let knobs = config.fallback;
    Some(match param {
        hipFileParamProfileStats => u64::from(config.stats_level),
        hipFileParamExecutionMaxIOQueueDepth => s.queue_depth,
        hipFileParamExecutionMaxIOThreads => knobs.io_threads as u64,
        hipFileParamExecutionMinIOThresholdSizeKB => knobs.small_io_threshold / KIB,
        hipFileParamExecutionMaxRequestParallelism => {
            s.request_parallelism.unwrap_or(knobs.io_threads as u64)
        }
        hipFileParamPropertiesMaxDirectIOSizeKB => knobs.task_size / KIB,
        hipFileParamPropertiesMaxDeviceCacheSizeKB => cache_bytes(&config, s) / KIB,
        hipFileParamPropertiesPerBufferCacheSizeKB => chunk_bytes(&config) / KIB,
        hipFileParamPropertiesMaxDevicePinnedMemSizeKB => pinned_bytes(&config, s) / KIB,
        hipFileParamPropertiesIOBatchsize => MAX_BATCH_IO,
        hipFileParamPollthresholdSizeKB => s.poll_threshold_kib,
        hipFileParamPropertiesBatchIOTimeoutMs => s.batch_timeout_ms,
        _ => return None,
    })
}

/// The least and greatest value [`hipFileSetParameterSizeT`] accepts for `param`, in its
/// unit: what cuFile's `cuFileGetParameterMinMaxValue` reports (hipFile has no such call).
/// A fixed parameter's bounds are both its value.
///
/// # Errors
///
/// `hipFileInvalidValue` for a value that is not one of the enum's.
pub fn size_parameter_bounds(
    param: hipFileSizeTConfigParameter_t,
) -> Result<(u64, u64), hipFileError_t> {
    boundary(Err(INTERNAL), || {
        let st = state::lock();
        size_bounds(param, get_size(param, &st)).ok_or(hipFileError_t::code(hipFileInvalidValue))
    })
}

/// The value of a boolean parameter.
fn get_bool(param: hipFileBoolConfigParameter_t, st: &State) -> Option<bool> {
    let (config, s) = st.current();
    if let Some(slot) = recorded_slot(param) {
        return Some(s.recorded[slot]);
    }
    Some(match param {
        hipFileParamPropertiesUsePollMode => s.poll_mode,
        hipFileParamPropertiesAllowCompatMode => config.allow_compat_mode,
        hipFileParamForceCompatMode => config.force_compat_mode,
        hipFileParamExecutionParallelIO => s
            .parallel_io
            .or(st.params.file.as_ref().and_then(|f| f.parallel_io))
            .unwrap_or(true),
        // Only device memory is accepted; the fastpath is peer-to-peer DMA, the fallback not.
        hipFileParamPropertiesAllowSystemMemory => false,
        hipFileParamUsePcip2pdma => !config.force_compat_mode,
        hipFileParamPreferIOUring => false,
        _ => return None,
    })
}

/// Runs `change` on the pending settings when the driver is closed.
fn set_pending(
    change: impl FnOnce(&mut Settings, &State) -> Result<(), hipFileOpError_t>,
) -> hipFileError_t {
    let mut st = state::lock();
    if st.count > 0 {
        return hipFileError_t::code(hipFileDriverAlreadyOpen);
    }
    let mut next = st.params.pending.clone();
    match change(&mut next, &st) {
        Ok(()) => {
            st.params.pending = next;
            hipFileError_t::SUCCESS
        }
        Err(code) => hipFileError_t::code(code),
    }
}

/// `hipFileError_t hipFileGetParameterSizeT(hipFileSizeTConfigParameter_t param, size_t
/// *value)` — stores the parameter's value in `*value`: the open driver's, or what the next
/// open would use. Sizes named `...KB` are in KiB.
///
/// # Errors
///
/// `hipFileInvalidValue` for NULL or a value that is not one of the enum's.
///
/// # Safety
///
/// `value` is NULL or writable.
pub unsafe extern "C" fn hipFileGetParameterSizeT(
    param: hipFileSizeTConfigParameter_t,
    value: *mut usize,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        if value.is_null() {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        let Some(v) = get_size(param, &state::lock()) else {
            return hipFileError_t::code(hipFileInvalidValue);
        };
        // SAFETY: non-NULL, and the caller vouches that it is writable.
        unsafe { value.write(usize::try_from(v).unwrap_or(usize::MAX)) };
        hipFileError_t::SUCCESS
    })
}

/// `hipFileError_t hipFileSetParameterSizeT(hipFileSizeTConfigParameter_t param, size_t
/// value)` — sets the parameter for the next open of the driver. Sizes named `...KB` are
/// in KiB.
///
/// # Errors
///
/// `hipFileInvalidValue` for a value of `param` that is not one of the enum's;
/// `hipFileDriverAlreadyOpen` while the driver is open; `hipFileDriverUnsupportedLimit` for
/// a value outside the parameter's bounds (or another than a fixed parameter's own).
pub extern "C" fn hipFileSetParameterSizeT(
    param: hipFileSizeTConfigParameter_t,
    value: usize,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        if !(hipFileParamProfileStats..=hipFileParamPropertiesBatchIOTimeoutMs).contains(&param) {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        set_pending(|s, st| {
            let fixed = get_size(param, st);
            set_size(param, value as u64, s, fixed)
        })
    })
}

/// `hipFileError_t hipFileGetParameterBool(hipFileBoolConfigParameter_t param, bool
/// *value)` — stores the parameter's value in `*value`: the open driver's, or what the next
/// open would use.
///
/// # Errors
///
/// `hipFileInvalidValue` for NULL or a value that is not one of the enum's.
///
/// # Safety
///
/// `value` is NULL or writable.
pub unsafe extern "C" fn hipFileGetParameterBool(
    param: hipFileBoolConfigParameter_t,
    value: *mut bool,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        if value.is_null() {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        let Some(v) = get_bool(param, &state::lock()) else {
            return hipFileError_t::code(hipFileInvalidValue);
        };
        // SAFETY: non-NULL, and the caller vouches that it is writable.
        unsafe { value.write(v) };
        hipFileError_t::SUCCESS
    })
}

/// `hipFileError_t hipFileSetParameterBool(hipFileBoolConfigParameter_t param, bool value)`
/// — sets the parameter for the next open of the driver.
///
/// # Errors
///
/// `hipFileInvalidValue` for a value of `param` that is not one of the enum's;
/// `hipFileDriverAlreadyOpen` while the driver is open; `hipFileDriverUnsupportedLimit` for
/// `true` to `AllowSystemMemory` or `PreferIOUring`, which this library does not do.
pub extern "C" fn hipFileSetParameterBool(
    param: hipFileBoolConfigParameter_t,
    value: bool,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        if !(hipFileParamPropertiesUsePollMode..=hipFileParamStreamMemopsBypass).contains(&param) {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        set_pending(|s, _| set_bool(param, value, s))
    })
}

/// `hipFileError_t hipFileGetParameterString(hipFileStringConfigParameter_t param, char
/// *desc_str, int len)` — copies the parameter's value, NUL-terminated, into the `len`
/// bytes at `desc_str`.
///
/// # Errors
///
/// `hipFileInvalidValue` for NULL, a value of `param` that is not one of the enum's, or
/// `len` too small for the value and its NUL (nothing is written then).
///
/// # Safety
///
/// `desc_str` is NULL or points to `len` writable bytes.
pub unsafe extern "C" fn hipFileGetParameterString(
    param: hipFileStringConfigParameter_t,
    desc_str: *mut c_char,
    len: c_int,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        let Some(slot) = string_slot(param) else {
            return hipFileError_t::code(hipFileInvalidValue);
        };
        if desc_str.is_null() {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        let value = {
            let st = state::lock();
            get_string(slot, st.current().1)
        };
        let bytes = value.as_bytes_with_nul();
        if usize::try_from(len).map_or(true, |room| room < bytes.len()) {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        // SAFETY: `desc_str` is non-NULL and has `len` ≥ `bytes.len()` writable bytes (the
        // caller's contract); the source is ours and does not overlap it.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), desc_str.cast::<u8>(), bytes.len())
        };
        hipFileError_t::SUCCESS
    })
}

/// `hipFileError_t hipFileSetParameterString(hipFileStringConfigParameter_t param, const
/// char *desc_str)` — sets the parameter for the next open of the driver. A logging level
/// is one of TRACE, DEBUG, INFO, NOTICE, WARN or ERROR (any case).
///
/// # Errors
///
/// `hipFileInvalidValue` for NULL, a value of `param` that is not one of the enum's, a
/// string longer than 4095 bytes or an unknown logging level; `hipFileDriverAlreadyOpen`
/// while the driver is open.
///
/// # Safety
///
/// `desc_str` is NULL or a NUL-terminated string.
pub unsafe extern "C" fn hipFileSetParameterString(
    param: hipFileStringConfigParameter_t,
    desc_str: *const c_char,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        let Some(slot) = string_slot(param) else {
            return hipFileError_t::code(hipFileInvalidValue);
        };
        if desc_str.is_null() {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        // SAFETY: non-NULL, and the caller vouches that it is NUL-terminated.
        let text = unsafe { CStr::from_ptr(desc_str) };
        set_pending(|s, _| {
            s.strings[slot] = Some(string_value(slot, text)?);
            Ok(())
        })
    })
}
