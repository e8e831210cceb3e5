//! hipFile's C ABI: `libhipfile.so.0`, a drop-in for programs written against hipFile's
//! `hipfile.h` (this crate's `include/hipfile.h` declares the interface in our words, with
//! hipFile 0.5's names, values and layouts).
//!
//! This crate is the exported names and nothing else: each function is a
//! `#[unsafe(no_mangle)]` wrapper that calls the function of the same name and signature in
//! `hipfile-c-shared`, the implementation this library shares with `libcufile.so.0` (crate
//! `hipfile-c-cufile`). The documentation of each function, its errors and its safety
//! contract are there.
//!
//! Nothing depends on this crate; it is a leaf like the CLI.
//!
//! # Safety
//!
//! Each wrapper passes its arguments on unchanged, so its contract is the contract of the
//! function it calls; those run inside the panic boundary and check every pointer.

// The header's names, used as they are.
#![allow(non_snake_case)]

use hipfile_c_shared as shared;
use shared::types::*;
use std::ffi::{c_char, c_int, c_uint, c_void};

/// Exports each listed function of `hipfile-c-shared` under its own name. `safe` functions take
/// no pointer they dereference; `unsafe` ones carry their callee's contract.
macro_rules! export {
    ($(safe fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)?;)*
     $(unsafe fn $uname:ident($($uarg:ident: $uty:ty),*) $(-> $uret:ty)?;)*) => {
        $(
            #[doc = concat!("`", stringify!($name), "`: see `hipfile_c_shared::", stringify!($name), "`.")]
            #[unsafe(no_mangle)]
            pub extern "C" fn $name($($arg: $ty),*) $(-> $ret)? {
                shared::$name($($arg),*)
            }
        )*
        $(
            #[doc = concat!("`", stringify!($uname), "`: see `hipfile_c_shared::", stringify!($uname), "`.")]
            ///
            /// # Safety
            ///
            /// As the function called, whose contract is hipFile's for this function.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $uname($($uarg: $uty),*) $(-> $uret)? {
                // SAFETY: the arguments are passed on unchanged, under the same contract.
                unsafe { shared::$uname($($uarg),*) }
            }
        )*
    };
}

export! {
    safe fn hipFileGetOpErrorString(status: hipFileOpError_t) -> *const c_char;
    safe fn hipFileDriverOpen() -> hipFileError_t;
    safe fn hipFileDriverClose() -> hipFileError_t;
    safe fn hipFileUseCount() -> i64;
    safe fn hipFileHandleDeregister(fh: hipFileHandle_t);
    safe fn hipFileBufDeregister(buffer_base: *const c_void) -> hipFileError_t;
    safe fn hipFileBatchIOCancel(batch_idp: hipFileBatchHandle_t) -> hipFileError_t;
    safe fn hipFileBatchIODestroy(batch_idp: hipFileBatchHandle_t);
    safe fn hipFileStreamRegister(stream: hipStream_t, flags: c_uint) -> hipFileError_t;
    safe fn hipFileStreamDeregister(stream: hipStream_t) -> hipFileError_t;
    safe fn hipFileSetParameterSizeT(param: hipFileSizeTConfigParameter_t, value: usize) -> hipFileError_t;
    safe fn hipFileSetParameterBool(param: hipFileBoolConfigParameter_t, value: bool) -> hipFileError_t;
    safe fn hipFileDriverSetPollMode(poll: bool, poll_threshold_size: usize) -> hipFileError_t;
    safe fn hipFileDriverSetMaxDirectIOSize(max_direct_io_size: usize) -> hipFileError_t;
    safe fn hipFileDriverSetMaxCacheSize(max_cache_size: usize) -> hipFileError_t;
    safe fn hipFileDriverSetMaxPinnedMemSize(max_pinned_size: usize) -> hipFileError_t;

    unsafe fn hipFileGetVersion(major: *mut c_uint, minor: *mut c_uint, patch: *mut c_uint) -> hipFileError_t;
    unsafe fn hipFileHandleRegister(fh: *mut hipFileHandle_t, descr: *mut hipFileDescr_t) -> hipFileError_t;
    unsafe fn hipFileBufRegister(buffer_base: *const c_void, length: usize, flags: c_int) -> hipFileError_t;
    unsafe fn hipFileRead(fh: hipFileHandle_t, buffer_base: *mut c_void, size: usize, file_offset: hoff_t, buffer_offset: hoff_t) -> isize;
    unsafe fn hipFileWrite(fh: hipFileHandle_t, buffer_base: *const c_void, size: usize, file_offset: hoff_t, buffer_offset: hoff_t) -> isize;
    unsafe fn hipFileBatchIOSetUp(batch_idp: *mut hipFileBatchHandle_t, max_nr: c_uint) -> hipFileError_t;
    unsafe fn hipFileBatchIOSubmit(batch_idp: hipFileBatchHandle_t, nr: c_uint, iocbp: *mut hipFileIOParams_t, flags: c_uint) -> hipFileError_t;
    unsafe fn hipFileBatchIOGetStatus(batch_idp: hipFileBatchHandle_t, min_nr: c_uint, nr: *mut c_uint, iocbp: *mut hipFileIOEvents_t, timeout: *mut libc::timespec) -> hipFileError_t;
    unsafe fn hipFileReadAsync(fh: hipFileHandle_t, buffer_base: *mut c_void, size_p: *mut usize, file_offset_p: *mut hoff_t, buffer_offset_p: *mut hoff_t, bytes_read_p: *mut isize, stream: hipStream_t) -> hipFileError_t;
    unsafe fn hipFileWriteAsync(fh: hipFileHandle_t, buffer_base: *mut c_void, size_p: *mut usize, file_offset_p: *mut hoff_t, buffer_offset_p: *mut hoff_t, bytes_written_p: *mut isize, stream: hipStream_t) -> hipFileError_t;
    unsafe fn hipFileGetParameterSizeT(param: hipFileSizeTConfigParameter_t, value: *mut usize) -> hipFileError_t;
    unsafe fn hipFileGetParameterBool(param: hipFileBoolConfigParameter_t, value: *mut bool) -> hipFileError_t;
    unsafe fn hipFileGetParameterString(param: hipFileStringConfigParameter_t, desc_str: *mut c_char, len: c_int) -> hipFileError_t;
    unsafe fn hipFileSetParameterString(param: hipFileStringConfigParameter_t, desc_str: *const c_char) -> hipFileError_t;
    unsafe fn hipFileDriverGetProperties(props: *mut hipFileDriverProps_t) -> hipFileError_t;
    unsafe fn hipFileGetStatsL1(stats: *mut hipFileStatsLevel1_t) -> hipFileError_t;
    unsafe fn hipFileGetStatsL2(stats: *mut hipFileStatsLevel2_t) -> hipFileError_t;
    unsafe fn hipFileGetStatsL3(stats: *mut hipFileStatsLevel3_t) -> hipFileError_t;
}
