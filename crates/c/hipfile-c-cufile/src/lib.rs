//! cuFile's C ABI: `libcufile.so.0`, a drop-in for programs written against NVIDIA's
//! `cufile.h` (this crate's `include/cufile.h` declares the interface in our words, with
//! cuFile's names, values and layouts), served by hipfile. Where NVIDIA's library needs the
//! nvidia-fs kernel module, or falls back to its own compatibility mode, this one serves every
//! request through hipfile: on NVIDIA GPUs the fallback moves the bytes (no GPUDirect
//! peer-to-peer), on AMD GPUs the fastpath where the kernel has it.
//!
//! This crate is the exported names and nothing else: each function calls the function of
//! hipFile's ABI that does the same in `hipfile-c-shared`, the implementation this library shares
//! with `libhipfile.so.0`, and translates only what cuFile lays out or reports differently
//! (docs/decisions/cufile-abi.md):
//!
//! - the status's second member, a CUDA driver `CUresult` ([`cu_result`]);
//! - negative returns of `cuFileRead`/`cuFileWrite`, of failed batch events and of
//!   stream-ordered requests, that are runtime statuses ([`cu_io`]);
//! - the driver properties, whose sizes are 32-bit ([`cuFileDriverGetProperties`]);
//! - the version, one number ([`cuFileGetVersion`]);
//! - which memory the calls accept: cuFile's rule (`MemoryTypes::CuFile`: device and host
//!   memory, managed memory unregistered), which the library chooses for its copy of the
//!   implementation when it is loaded ([`CHOOSE_CUFILES_MEMORY_RULE`]), where
//!   `libhipfile.so.0` keeps hipFile's (device memory only).
//!
//! Every other type is hipFile's (`types.rs` aliases them), so arguments pass on unchanged.
//!
//! Nothing depends on this crate; it is a leaf like `hipfile-c-hipfile`.
//!
//! # Safety
//!
//! Each wrapper passes its arguments on unchanged, so its contract is the contract of the
//! function it calls; those run inside the panic boundary and check every pointer. The ones
//! written out here run inside the same boundary and check their pointers for NULL (or, for
//! the batch events, read only what the callee reported writing).

// cuFile's names, used as they are.
#![allow(non_snake_case)]

pub mod cufile_json;
pub mod types;

use hipfile_c_shared as shared;
use hipfile_c_shared::panic::boundary;
use hipfile_c_shared::types::{hipFileDriverProps_t, hipFileError_t};
use std::ffi::{c_char, c_int, c_long, c_uint, c_void};
use types::*;

/// Chooses cuFile's memory rule for this library's copy of the implementation
/// (`hipfile_c_shared::choose_memory_types`), so that every driver it opens serves what NVIDIA's
/// cuFile serves: device memory, host memory (pinned, registered, or pageable), registered or
/// not, and managed memory unregistered (docs/decisions/memory-types.md).
extern "C" fn choose_cufiles_memory_rule() {
    shared::choose_memory_types(shared::MemoryTypes::CuFile);
}

/// Runs [`choose_cufiles_memory_rule`] when the library is loaded: the dynamic loader calls
/// every function of `.init_array` before `dlopen` returns (or, for a linked or preloaded
/// library, before `main`), so no cuFile call can come first. It only stores the choice.
#[used]
#[unsafe(link_section = ".init_array")]
pub static CHOOSE_CUFILES_MEMORY_RULE: extern "C" fn() = choose_cufiles_memory_rule;

/// The version `cuFileGetVersion` reports: cuFile 1.17 (1000 × major + 10 × minor), whose
/// every function this library exports (the cuFile that PyTorch's CUDA 13 wheels ship; the
/// CUDA 13.0 toolkit's is 1.15).
pub const CUFILE_VERSION: c_int = 1170;

const INTERNAL: CUfileError_t = CUfileError_t {
    err: CU_FILE_INTERNAL_ERROR,
    cu_err: CUDA_SUCCESS,
};

/// The `CUresult` for the runtime status `hip` that hipfile reports with
/// `hipFileHipDriverError` (a HIP status, or on NVIDIA a CUDA runtime or driver status).
/// The statuses whose number means the same in HIP, the CUDA runtime and the CUDA driver
/// API pass through; any other becomes `CUDA_ERROR_UNKNOWN`, since the number would mean
/// something else to the caller. 0 stays 0.
pub fn cu_result(hip: c_int) -> CUresult {
    match hip {
        0 | 1 | 2 | 3 | 4 | 100 | 101 | 201 | 400 | 500 | 600 | 700 | 712 | 713 | 719 | 801
        | 999 => hip,
        _ => CUDA_ERROR_UNKNOWN,
    }
}

/// cuFile's status for hipFile's: the code is the same number, the runtime status becomes a
/// `CUresult`.
pub fn cu(e: hipFileError_t) -> CUfileError_t {
    CUfileError_t {
        err: e.err,
        cu_err: cu_result(e.hip_drv_err),
    }
}

/// cuFile's return of a read or write for hipFile's: bytes, -1 with `errno` and negated
/// codes stay; a negated runtime status (between -1 and -5000, which hipFile returns when a
/// runtime call failed) becomes `-CU_FILE_CUDA_DRIVER_ERROR`, cuFile's code for it.
pub fn cu_io(r: isize) -> isize {
    if r < -1 && r > -(CUFILEOP_BASE_ERR as isize) {
        -(CU_FILE_CUDA_DRIVER_ERROR as isize)
    } else {
        r
    }
}

/// Returns the value unchanged (functions whose return cuFile and hipFile share).
fn same<T>(v: T) -> T {
    v
}

/// Exports each listed cuFile function over the `hipfile-c-shared` function after `=`, its
/// return translated by the function after `via`. `safe` functions take no pointer they
/// dereference; `unsafe` ones carry their callee's contract.
macro_rules! export {
    ($(safe fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? = $callee:ident via $conv:ident;)*
     $(unsafe fn $uname:ident($($uarg:ident: $uty:ty),*) $(-> $uret:ty)? = $ucallee:ident via $uconv:ident;)*) => {
        $(
            #[doc = concat!("`", stringify!($name), "`: `hipfile_c_shared::", stringify!($callee),
                "`, its return translated by `", stringify!($conv), "`.")]
            #[unsafe(no_mangle)]
            pub extern "C" fn $name($($arg: $ty),*) $(-> $ret)? {
                $conv(shared::$callee($($arg),*))
            }
        )*
        $(
            #[doc = concat!("`", stringify!($uname), "`: `hipfile_c_shared::", stringify!($ucallee),
                "`, its return translated by `", stringify!($uconv), "`.")]
            ///
            /// # Safety
            ///
            /// As the function called: cuFile's contract for this function is hipFile's
            /// for that one.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $uname($($uarg: $uty),*) $(-> $uret)? {
                // SAFETY: the arguments are passed on unchanged, under the same contract
                // (the types are hipFile's; `types.rs` aliases them).
                $uconv(unsafe { shared::$ucallee($($uarg),*) })
            }
        )*
    };
}

export! {
    safe fn cuFileDriverOpen() -> CUfileError_t = hipFileDriverOpen via cu;
    safe fn cuFileDriverClose() -> CUfileError_t = hipFileDriverClose via cu;
    safe fn cuFileDriverClose_v2() -> CUfileError_t = hipFileDriverClose via cu;
    safe fn cuFileUseCount() -> c_long = hipFileUseCount via same;
    safe fn cuFileHandleDeregister(fh: CUfileHandle_t) = hipFileHandleDeregister via same;
    safe fn cuFileBufDeregister(bufPtr_base: *const c_void) -> CUfileError_t = hipFileBufDeregister via cu;
    safe fn cuFileBatchIOCancel(batch_idp: CUfileBatchHandle_t) -> CUfileError_t = hipFileBatchIOCancel via cu;
    safe fn cuFileBatchIODestroy(batch_idp: CUfileBatchHandle_t) = hipFileBatchIODestroy via same;
    safe fn cuFileStreamRegister(stream: CUstream, flags: c_uint) -> CUfileError_t = hipFileStreamRegister via cu;
    safe fn cuFileStreamDeregister(stream: CUstream) -> CUfileError_t = hipFileStreamDeregister via cu;
    safe fn cuFileSetParameterSizeT(param: CUFileSizeTConfigParameter_t, value: usize) -> CUfileError_t = hipFileSetParameterSizeT via cu;
    safe fn cuFileSetParameterBool(param: CUFileBoolConfigParameter_t, value: bool) -> CUfileError_t = hipFileSetParameterBool via cu;
    safe fn cuFileDriverSetPollMode(poll: bool, poll_threshold_size: usize) -> CUfileError_t = hipFileDriverSetPollMode via cu;
    safe fn cuFileDriverSetMaxDirectIOSize(max_direct_io_size: usize) -> CUfileError_t = hipFileDriverSetMaxDirectIOSize via cu;
    safe fn cuFileDriverSetMaxCacheSize(max_cache_size: usize) -> CUfileError_t = hipFileDriverSetMaxCacheSize via cu;
    safe fn cuFileDriverSetMaxPinnedMemSize(max_pinned_size: usize) -> CUfileError_t = hipFileDriverSetMaxPinnedMemSize via cu;

    unsafe fn cuFileHandleRegister(fh: *mut CUfileHandle_t, descr: *mut CUfileDescr_t) -> CUfileError_t = hipFileHandleRegister via cu;
    unsafe fn cuFileBufRegister(bufPtr_base: *const c_void, length: usize, flags: c_int) -> CUfileError_t = hipFileBufRegister via cu;
    unsafe fn cuFileBatchIOSetUp(batch_idp: *mut CUfileBatchHandle_t, nr: c_uint) -> CUfileError_t = hipFileBatchIOSetUp via cu;
    unsafe fn cuFileBatchIOSubmit(batch_idp: CUfileBatchHandle_t, nr: c_uint, iocbp: *mut CUfileIOParams_t, flags: c_uint) -> CUfileError_t = hipFileBatchIOSubmit via cu;
    unsafe fn cuFileGetParameterSizeT(param: CUFileSizeTConfigParameter_t, value: *mut usize) -> CUfileError_t = hipFileGetParameterSizeT via cu;
    unsafe fn cuFileGetParameterBool(param: CUFileBoolConfigParameter_t, value: *mut bool) -> CUfileError_t = hipFileGetParameterBool via cu;
    unsafe fn cuFileGetParameterString(param: CUFileStringConfigParameter_t, desc_str: *mut c_char, len: c_int) -> CUfileError_t = hipFileGetParameterString via cu;
    unsafe fn cuFileSetParameterString(param: CUFileStringConfigParameter_t, desc_str: *const c_char) -> CUfileError_t = hipFileSetParameterString via cu;
    unsafe fn cuFileGetStatsL1(stats: *mut CUfileStatsLevel1_t) -> CUfileError_t = hipFileGetStatsL1 via cu;
    unsafe fn cuFileGetStatsL2(stats: *mut CUfileStatsLevel2_t) -> CUfileError_t = hipFileGetStatsL2 via cu;
    unsafe fn cuFileGetStatsL3(stats: *mut CUfileStatsLevel3_t) -> CUfileError_t = hipFileGetStatsL3 via cu;
}

/// cuFile's synchronous read or write of `size` bytes: the whole size, where one call of
/// hipFile's moves at most `MAX_IO_SIZE` (0x7ffff000) bytes. cuFile sets no such limit, and
/// its clients rely on that: PyTorch's `GdsFile` saves and loads a storage of any size in one
/// call and checks only that the return is not negative. `call(size, file_offset,
/// buffer_offset)` is the hipFile call; a size above the limit takes as many calls as it
/// needs, one after another. Each call asks for all that is left: hipFile checks the whole
/// of what it is asked against the buffer before it moves a byte, and then moves at most the
/// limit, so the first call refuses a request that leaves the buffer before any part of it
/// moves. It stops early at a short count (the end of the file), returning the bytes moved;
/// an error returns the error (translated by [`cu_io`]) even after earlier parts moved, so
/// that a failure is never taken for a short count. A panic becomes
/// `-CU_FILE_INTERNAL_ERROR`, as in every exported function.
fn whole(
    size: usize,
    file_offset: libc::off_t,
    buffer_offset: libc::off_t,
    mut call: impl FnMut(usize, libc::off_t, libc::off_t) -> isize,
) -> isize {
    // The callee has its own boundary; this one covers the splitting too.
    boundary(-(CU_FILE_INTERNAL_ERROR as isize), || {
        let max = usize::try_from(shared::MAX_IO_SIZE).unwrap_or(usize::MAX);
        if size <= max {
            return cu_io(call(size, file_offset, buffer_offset));
        }
        // The count returned must fit the return type.
        let size = size.min(isize::MAX.unsigned_abs());
        let mut done = 0usize;
        while done < size {
            let left = size - done;
            // What this call moves when nothing stops it: hipFile's most.
            let part = left.min(max);
            // `done` ≤ isize::MAX, so it is a valid offset; the sum may still overflow.
            let moved = done as libc::off_t;
            let (Some(at_file), Some(at_buffer)) = (
                file_offset.checked_add(moved),
                buffer_offset.checked_add(moved),
            ) else {
                return -(CU_FILE_INVALID_VALUE as isize);
            };
            let r = call(left, at_file, at_buffer);
            if r < 0 {
                return cu_io(r);
            }
            // A part never moves more than asked; a count above it is taken as the part.
            let got = r.unsigned_abs().min(part);
            done += got;
            if got < part {
                break;
            }
        }
        done as isize
    })
}

/// `ssize_t cuFileRead(CUfileHandle_t fh, void *bufPtr_base, size_t size, off_t
/// file_offset, off_t bufPtr_offset)` — `hipfile_c_shared::hipFileRead`, for the whole size
/// ([`whole`]), its return translated by [`cu_io`].
///
/// # Errors
///
/// As `hipfile_c_shared::hipFileRead`.
///
/// # Safety
///
/// As `hipfile_c_shared::hipFileRead`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFileRead(
    fh: CUfileHandle_t,
    bufPtr_base: *mut c_void,
    size: usize,
    file_offset: libc::off_t,
    bufPtr_offset: libc::off_t,
) -> isize {
    whole(
        size,
        file_offset,
        bufPtr_offset,
        |part, at_file, at_buffer| {
            // SAFETY: as this function's contract; each part lies within the range the caller
            // gave.
            unsafe { shared::hipFileRead(fh, bufPtr_base, part, at_file, at_buffer) }
        },
    )
}

/// `ssize_t cuFileWrite(CUfileHandle_t fh, const void *bufPtr_base, size_t size, off_t
/// file_offset, off_t bufPtr_offset)` — `hipfile_c_shared::hipFileWrite`, for the whole size
/// ([`whole`]), its return translated by [`cu_io`].
///
/// # Errors
///
/// As `hipfile_c_shared::hipFileWrite`.
///
/// # Safety
///
/// As `hipfile_c_shared::hipFileWrite`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFileWrite(
    fh: CUfileHandle_t,
    bufPtr_base: *const c_void,
    size: usize,
    file_offset: libc::off_t,
    bufPtr_offset: libc::off_t,
) -> isize {
    whole(
        size,
        file_offset,
        bufPtr_offset,
        |part, at_file, at_buffer| {
            // SAFETY: as this function's contract; each part lies within the range the caller
            // gave.
            unsafe { shared::hipFileWrite(fh, bufPtr_base, part, at_file, at_buffer) }
        },
    )
}

/// `CUfileError_t cuFileDriverGetProperties(CUfileDrvProps_t *props)` — hipFile's
/// properties of the open driver in cuFile's layout: the same values, sizes in KiB, those
/// after `nvfs` as 32-bit numbers (saturated, though none of hipfile's limits reaches
/// 2³² KiB).
///
/// # Errors
///
/// As `hipfile_c_shared::hipFileDriverGetProperties`: `CU_FILE_INVALID_VALUE` for NULL,
/// `CU_FILE_DRIVER_NOT_INITIALIZED` while the driver is closed.
///
/// # Safety
///
/// `props` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFileDriverGetProperties(props: *mut CUfileDrvProps_t) -> CUfileError_t {
    boundary(INTERNAL, || {
        if props.is_null() {
            return cu(hipFileError_t::code(CU_FILE_INVALID_VALUE));
        }
        let mut hip = hipFileDriverProps_t::default();
        // SAFETY: `hip` is a local the callee may write.
        let status = unsafe { shared::hipFileDriverGetProperties(&mut hip) };
        if status.err != CU_FILE_SUCCESS {
            return cu(status);
        }
        let narrow = |v: u64| c_uint::try_from(v).unwrap_or(c_uint::MAX);
        let out = CUfileDrvProps_t {
            nvfs: CUfileDrvPropsNvfs {
                major_version: hip.nvfs.major_version,
                minor_version: hip.nvfs.minor_version,
                poll_thresh_size: usize::try_from(hip.nvfs.poll_thresh_size).unwrap_or(usize::MAX),
                max_direct_io_size: usize::try_from(hip.nvfs.max_direct_io_size)
                    .unwrap_or(usize::MAX),
                dstatusflags: hip.nvfs.driver_status_flags,
                dcontrolflags: hip.nvfs.driver_control_flags,
            },
            fflags: hip.feature_flags,
            max_device_cache_size: narrow(hip.max_device_cache_size),
            per_buffer_cache_size: narrow(hip.per_buffer_cache_size),
            max_device_pinned_mem_size: narrow(hip.max_device_pinned_mem_size),
            max_batch_io_size: hip.max_batch_io_count,
            max_batch_io_timeout_msecs: hip.max_batch_io_timeout_msecs,
        };
        // SAFETY: non-NULL, and the caller vouches that it is writable.
        unsafe { props.write(out) };
        cu(hipFileError_t::SUCCESS)
    })
}

/// `CUfileError_t cuFileBatchIOGetStatus(CUfileBatchHandle_t batch_idp, unsigned min_nr,
/// unsigned *nr, CUfileIOEvents_t *iocbp, struct timespec *timeout)` —
/// `hipfile_c_shared::hipFileBatchIOGetStatus`, with each failed event's `ret` translated as
/// `cuFileRead`'s return is ([`cu_io`]).
///
/// # Errors
///
/// As `hipfile_c_shared::hipFileBatchIOGetStatus`.
///
/// # Safety
///
/// As `hipfile_c_shared::hipFileBatchIOGetStatus`: `nr` is NULL or writable, `iocbp` NULL or
/// `*nr` writable events, `timeout` NULL or a `struct timespec`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFileBatchIOGetStatus(
    batch_idp: CUfileBatchHandle_t,
    min_nr: c_uint,
    nr: *mut c_uint,
    iocbp: *mut CUfileIOEvents_t,
    timeout: *mut libc::timespec,
) -> CUfileError_t {
    boundary(INTERNAL, || {
        // SAFETY: the arguments are passed on unchanged, under the same contract.
        let status =
            unsafe { shared::hipFileBatchIOGetStatus(batch_idp, min_nr, nr, iocbp, timeout) };
        if status.err == CU_FILE_SUCCESS {
            // SAFETY: on success `nr` was non-NULL and now holds the number of events the
            // callee wrote at `iocbp`, which the caller vouched are writable.
            let count = unsafe { nr.read() } as usize;
            for i in 0..count {
                // SAFETY: as above: event `i` < `count` was written by the callee.
                let event = unsafe { &mut *iocbp.add(i) };
                if event.status == CUFILE_FAILED {
                    event.ret = cu_io(event.ret as isize) as usize;
                }
            }
        }
        cu(status)
    })
}

/// `CUfileError_t cuFileReadAsync(CUfileHandle_t fh, void *bufPtr_base, size_t *size_p,
/// off_t *file_offset_p, off_t *bufPtr_offset_p, ssize_t *bytes_read_p, CUstream stream)` —
/// `hipfile_c_shared::hipFileReadAsync`, with the result later written to `*bytes_read_p`
/// translated as `cuFileRead`'s return is ([`cu_io`]).
///
/// # Errors
///
/// As `hipfile_c_shared::hipFileReadAsync`.
///
/// # Safety
///
/// As `hipfile_c_shared::hipFileReadAsync`: the pointers stay valid until the stream has passed
/// the request.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFileReadAsync(
    fh: CUfileHandle_t,
    bufPtr_base: *mut c_void,
    size_p: *mut usize,
    file_offset_p: *mut libc::off_t,
    bufPtr_offset_p: *mut libc::off_t,
    bytes_read_p: *mut isize,
    stream: CUstream,
) -> CUfileError_t {
    let args = shared::Args {
        fh,
        buffer_base: bufPtr_base,
        size_p,
        file_offset_p,
        buffer_offset_p: bufPtr_offset_p,
        bytes_p: bytes_read_p,
        stream,
    };
    // SAFETY: the arguments are passed on unchanged, under the same contract.
    cu(unsafe { shared::order_async(shared::Op::Read, args, cu_io) })
}

/// `CUfileError_t cuFileWriteAsync(CUfileHandle_t fh, void *bufPtr_base, size_t *size_p,
/// off_t *file_offset_p, off_t *bufPtr_offset_p, ssize_t *bytes_written_p, CUstream stream)`
/// — `hipfile_c_shared::hipFileWriteAsync`, with the result later written to `*bytes_written_p`
/// translated as `cuFileWrite`'s return is ([`cu_io`]).
///
/// # Errors
///
/// As `hipfile_c_shared::hipFileWriteAsync`.
///
/// # Safety
///
/// As `hipfile_c_shared::hipFileWriteAsync`: the pointers stay valid until the stream has passed
/// the request.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFileWriteAsync(
    fh: CUfileHandle_t,
    bufPtr_base: *mut c_void,
    size_p: *mut usize,
    file_offset_p: *mut libc::off_t,
    bufPtr_offset_p: *mut libc::off_t,
    bytes_written_p: *mut isize,
    stream: CUstream,
) -> CUfileError_t {
    let args = shared::Args {
        fh,
        buffer_base: bufPtr_base,
        size_p,
        file_offset_p,
        buffer_offset_p: bufPtr_offset_p,
        bytes_p: bytes_written_p,
        stream,
    };
    // SAFETY: the arguments are passed on unchanged, under the same contract.
    cu(unsafe { shared::order_async(shared::Op::Write, args, cu_io) })
}

/// `CUfileError_t cuFileGetParameterMinMaxValue(CUFileSizeTConfigParameter_t param, size_t
/// *min_value, size_t *max_value)` — the least and greatest value
/// `cuFileSetParameterSizeT` accepts for `param` (`hipfile_c_shared::size_parameter_bounds`);
/// both are the value of a fixed parameter.
///
/// # Errors
///
/// `CU_FILE_INVALID_VALUE` for a NULL pointer or a value that is not one of the enum's.
///
/// # Safety
///
/// `min_value` and `max_value` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFileGetParameterMinMaxValue(
    param: CUFileSizeTConfigParameter_t,
    min_value: *mut usize,
    max_value: *mut usize,
) -> CUfileError_t {
    boundary(INTERNAL, || {
        if min_value.is_null() || max_value.is_null() {
            return cu(hipFileError_t::code(CU_FILE_INVALID_VALUE));
        }
        match shared::size_parameter_bounds(param) {
            Ok((min, max)) => {
                let fit = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
                // SAFETY: non-NULL, and the caller vouches that both are writable.
                unsafe {
                    min_value.write(fit(min));
                    max_value.write(fit(max));
                }
                cu(hipFileError_t::SUCCESS)
            }
            Err(e) => cu(e),
        }
    })
}

/// `CUfileError_t cuFileSetStatsLevel(int level)` — the statistics level of the next open
/// (0 none, 1 basic, 2 with size histograms, 3 with per-GPU figures), as
/// `cuFileSetParameterSizeT(CUFILE_PARAM_PROFILE_STATS, level)` sets it: hipfile fixes the
/// level when the driver opens.
///
/// # Errors
///
/// `CU_FILE_INVALID_VALUE` for a level outside 0..=3; `CU_FILE_DRIVER_ALREADY_OPEN` while
/// the driver is open.
#[unsafe(no_mangle)]
pub extern "C" fn cuFileSetStatsLevel(level: c_int) -> CUfileError_t {
    boundary(INTERNAL, || {
        let Ok(level @ 0..=3) = usize::try_from(level) else {
            return cu(hipFileError_t::code(CU_FILE_INVALID_VALUE));
        };
        cu(shared::hipFileSetParameterSizeT(
            CUFILE_PARAM_PROFILE_STATS,
            level,
        ))
    })
}

/// `CUfileError_t cuFileGetStatsLevel(int *level)` — the statistics level: the open driver's,
/// or while it is closed the next open's (`CUFILE_PARAM_PROFILE_STATS`, which
/// `HIPFILE_STATS_LEVEL` sets by default).
///
/// # Errors
///
/// `CU_FILE_INVALID_VALUE` for NULL.
///
/// # Safety
///
/// `level` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFileGetStatsLevel(level: *mut c_int) -> CUfileError_t {
    boundary(INTERNAL, || {
        if level.is_null() {
            return cu(hipFileError_t::code(CU_FILE_INVALID_VALUE));
        }
        let mut value = 0usize;
        // SAFETY: `value` is a local the callee may write.
        let status =
            unsafe { shared::hipFileGetParameterSizeT(CUFILE_PARAM_PROFILE_STATS, &mut value) };
        if status.err == CU_FILE_SUCCESS {
            // SAFETY: non-NULL, and the caller vouches that it is writable.
            unsafe { level.write(c_int::try_from(value).unwrap_or(c_int::MAX)) };
        }
        cu(status)
    })
}

/// `CUfileError_t cuFileGetVersion(int *version)` — stores [`CUFILE_VERSION`], the cuFile
/// interface this library implements. Does not open the driver.
///
/// # Errors
///
/// `CU_FILE_INVALID_VALUE` for NULL.
///
/// # Safety
///
/// `version` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFileGetVersion(version: *mut c_int) -> CUfileError_t {
    boundary(INTERNAL, || {
        if version.is_null() {
            return cu(hipFileError_t::code(CU_FILE_INVALID_VALUE));
        }
        // SAFETY: non-NULL, and the caller vouches that it is writable.
        unsafe { version.write(CUFILE_VERSION) };
        cu(hipFileError_t::SUCCESS)
    })
}

/// `CUfileError_t cuFileStatsStart(void)` — counting goes on for the open driver
/// (`hipfile_c_shared::stats_counting`): it runs from the open at every level above 0, so this
/// undoes a [`cuFileStatsStop`]. At level 0 nothing is counted either way.
///
/// # Errors
///
/// `CU_FILE_DRIVER_NOT_INITIALIZED` while the driver is closed.
#[unsafe(no_mangle)]
pub extern "C" fn cuFileStatsStart() -> CUfileError_t {
    cu(shared::stats_counting(true))
}

/// `CUfileError_t cuFileStatsStop(void)` — stops counting: what happens from now on is not
/// counted, and `cuFileGetStatsL1/2/3` keep reporting the figures so far.
///
/// # Errors
///
/// `CU_FILE_DRIVER_NOT_INITIALIZED` while the driver is closed.
#[unsafe(no_mangle)]
pub extern "C" fn cuFileStatsStop() -> CUfileError_t {
    cu(shared::stats_counting(false))
}

/// `CUfileError_t cuFileStatsReset(void)` — every counter of the open driver back to 0;
/// counting goes on (or stays stopped) as it was.
///
/// # Errors
///
/// `CU_FILE_DRIVER_NOT_INITIALIZED` while the driver is closed.
#[unsafe(no_mangle)]
pub extern "C" fn cuFileStatsReset() -> CUfileError_t {
    cu(shared::stats_reset())
}

/// `CUfileError_t cuFileGetBARSizeInKB(int gpuIndex, size_t *barSize)` — the BAR1 size of a
/// device in KiB, where the runtime can tell it (`hipfile_c_shared::bar_size_kib`): on NVIDIA
/// GPUs from NVML (`libnvidia-ml.so.1`, which comes with the driver), the device found by
/// its PCI bus id; HIP's runtime cannot tell it.
///
/// # Errors
///
/// `CU_FILE_INVALID_VALUE` for NULL or a device the runtime does not have;
/// `CU_FILE_DRIVER_NOT_INITIALIZED` while the driver is closed;
/// `CU_FILE_PLATFORM_NOT_SUPPORTED` where the size cannot be told (an AMD GPU, no NVML,
/// a device NVML does not report it for), leaving `*barSize` as it was.
///
/// # Safety
///
/// `barSize` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFileGetBARSizeInKB(
    gpuIndex: c_int,
    barSize: *mut usize,
) -> CUfileError_t {
    boundary(INTERNAL, || {
        if barSize.is_null() {
            return cu(hipFileError_t::code(CU_FILE_INVALID_VALUE));
        }
        match shared::bar_size_kib(gpuIndex) {
            Ok(kib) => {
                // SAFETY: non-NULL, and the caller vouches that it is writable.
                unsafe { barSize.write(usize::try_from(kib).unwrap_or(usize::MAX)) };
                cu(hipFileError_t::SUCCESS)
            }
            Err(e) => cu(e),
        }
    })
}

/// `CUfileError_t cuFileSetParameterPosixPoolSlabArray(const size_t *size_values, const
/// size_t *count_values, int len)` — the compatibility mode's host bounce buffers, for the
/// next open: their total (Σ size × count) bounds hipfile's staging pool, as the cache size
/// does; the slabs are reported back as given (`hipfile_c_shared::set_slab_array`).
///
/// # Errors
///
/// `CU_FILE_INVALID_VALUE` for NULL, `len` outside 1..=64, sizes that are not ascending
/// multiples of 4 KiB or a count of 0; `CU_FILE_DRIVER_ALREADY_OPEN` while the driver is
/// open; `CU_FILE_DRIVER_UNSUPPORTED_LIMIT` for a total outside 4 KiB to 64 GiB.
///
/// # Safety
///
/// Each pointer is NULL or points to `len` values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFileSetParameterPosixPoolSlabArray(
    size_values: *const usize,
    count_values: *const usize,
    len: c_int,
) -> CUfileError_t {
    // SAFETY: the arguments are passed on unchanged, under the same contract.
    cu(unsafe { shared::set_slab_array(shared::SlabPool::Posix, size_values, count_values, len) })
}

/// `CUfileError_t cuFileGetParameterPosixPoolSlabArray(size_t *size_values, size_t
/// *count_values, int len)` — the slabs set, or hipfile's staging pool as one slab (its
/// buffer size, and how many the pool holds); `len` must be their number.
///
/// # Errors
///
/// `CU_FILE_INVALID_VALUE` for NULL or a `len` other than the number of slabs.
///
/// # Safety
///
/// Each pointer is NULL or points to `len` writable values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFileGetParameterPosixPoolSlabArray(
    size_values: *mut usize,
    count_values: *mut usize,
    len: c_int,
) -> CUfileError_t {
    // SAFETY: the arguments are passed on unchanged, under the same contract.
    cu(unsafe { shared::get_slab_array(shared::SlabPool::Posix, size_values, count_values, len) })
}

/// `CUfileError_t cuFileSetParameterGpuBounceBufferSlabArray(const size_t *size_values,
/// const size_t *count_values, int len)` — GPU bounce-buffer slabs for the next open:
/// recorded and reported back (hipfile stages in pinned host memory, never in device
/// memory).
///
/// # Errors
///
/// As [`cuFileSetParameterPosixPoolSlabArray`], without a bound on the total.
///
/// # Safety
///
/// Each pointer is NULL or points to `len` values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFileSetParameterGpuBounceBufferSlabArray(
    size_values: *const usize,
    count_values: *const usize,
    len: c_int,
) -> CUfileError_t {
    // SAFETY: the arguments are passed on unchanged, under the same contract.
    cu(unsafe {
        shared::set_slab_array(shared::SlabPool::GpuBounce, size_values, count_values, len)
    })
}

/// `CUfileError_t cuFileGetParameterGpuBounceBufferSlabArray(size_t *size_values, size_t
/// *count_values, int len)` — the GPU bounce-buffer slabs recorded; none (`len` 0) until
/// some are set.
///
/// # Errors
///
/// `CU_FILE_INVALID_VALUE` for NULL or a `len` other than the number of slabs.
///
/// # Safety
///
/// Each pointer is NULL or points to `len` writable values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFileGetParameterGpuBounceBufferSlabArray(
    size_values: *mut usize,
    count_values: *mut usize,
    len: c_int,
) -> CUfileError_t {
    // SAFETY: the arguments are passed on unchanged, under the same contract.
    cu(unsafe {
        shared::get_slab_array(shared::SlabPool::GpuBounce, size_values, count_values, len)
    })
}

/// `CUfileError_t cuFileDriverGetP2PFlags(CUfileDriverStatusFlags_t status_flag,
/// CUfileP2PFlags_t *p2p_flags)` — the peer-to-peer flags of a kind of storage
/// (`hipfile_c_shared::p2p_flags`): P2PDMA for local NVMe where hipfile's fastpath serves.
///
/// # Errors
///
/// `CU_FILE_DRIVER_NOT_INITIALIZED` while the driver is closed; `CU_FILE_INVALID_VALUE` for
/// NULL or a value that is not a kind of storage.
///
/// # Safety
///
/// `p2p_flags` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFileDriverGetP2PFlags(
    status_flag: CUfileDriverStatusFlags_t,
    p2p_flags: *mut CUfileP2PFlags_t,
) -> CUfileError_t {
    boundary(INTERNAL, || {
        if p2p_flags.is_null() {
            return cu(hipFileError_t::code(CU_FILE_INVALID_VALUE));
        }
        match shared::p2p_flags(status_flag) {
            Ok(flags) => {
                // SAFETY: non-NULL, and the caller vouches that it is writable.
                unsafe { p2p_flags.write(flags as CUfileP2PFlags_t) };
                cu(hipFileError_t::SUCCESS)
            }
            Err(e) => cu(e),
        }
    })
}

/// `CUfileError_t cuFileDriverSetP2PFlags(CUfileDriverStatusFlags_t status_flag,
/// CUfileP2PFlags_t p2p_flags)` — records the flags of a kind of storage, which
/// [`cuFileDriverGetP2PFlags`] reports; as cuFile on x86-64, only
/// `CU_FILE_P2P_FLAG_PCI_P2PDMA` may be set.
///
/// # Errors
///
/// `CU_FILE_DRIVER_NOT_INITIALIZED` while the driver is closed; `CU_FILE_INVALID_VALUE` for
/// a value that is not a kind of storage or other flags.
#[unsafe(no_mangle)]
pub extern "C" fn cuFileDriverSetP2PFlags(
    status_flag: CUfileDriverStatusFlags_t,
    p2p_flags: CUfileP2PFlags_t,
) -> CUfileError_t {
    cu(shared::set_p2p_flags(status_flag, p2p_flags as c_uint))
}

/// `CUfileError_t cuFileExportPCIeTopology(const char *filename)` — hipfile detects no PCIe
/// topology, so there is nothing to export: cuFile's answer for a topology that is not
/// available (`hipfile_c_shared::export_topology`).
///
/// # Errors
///
/// `CU_FILE_INVALID_VALUE` for NULL or an empty name; `CU_FILE_INTERNAL_ERROR` otherwise.
///
/// # Safety
///
/// `filename` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFileExportPCIeTopology(filename: *const c_char) -> CUfileError_t {
    // SAFETY: the argument is passed on unchanged, under the same contract.
    cu(unsafe { shared::export_topology(filename) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_statuses_keep_only_numbers_cuda_shares() {
        assert_eq!(cu_result(0), CUDA_SUCCESS);
        assert_eq!(cu_result(2), 2);
        assert_eq!(cu_result(801), 801);
        // hipErrorInvalidDevicePointer: a CUDA runtime number, no CUresult.
        assert_eq!(cu_result(17), CUDA_ERROR_UNKNOWN);
        assert_eq!(cu_result(-1), CUDA_ERROR_UNKNOWN);
    }

    #[test]
    fn negated_runtime_statuses_become_cuda_driver_errors() {
        assert_eq!(cu_io(4096), 4096);
        assert_eq!(cu_io(0), 0);
        assert_eq!(cu_io(-1), -1);
        assert_eq!(cu_io(-999), -5011);
        assert_eq!(cu_io(-2), -5011);
        assert_eq!(cu_io(-5027), -5027);
    }

    const MAX: usize = 0x7fff_f000;

    /// What a hipFile call moves of `asked` bytes when nothing stops it.
    fn clamped(asked: usize) -> isize {
        asked.min(MAX) as isize
    }

    #[test]
    fn a_large_size_is_moved_in_parts_of_the_limit_each_asking_for_the_rest() {
        let mut calls = Vec::new();
        let r = whole(2 * MAX + 5, 10, 20, |asked, file, buffer| {
            calls.push((asked, file, buffer));
            clamped(asked)
        });
        assert_eq!(r, (2 * MAX + 5) as isize);
        let m = MAX as libc::off_t;
        assert_eq!(
            calls,
            [
                (2 * MAX + 5, 10, 20),
                (MAX + 5, 10 + m, 20 + m),
                (5, 10 + 2 * m, 20 + 2 * m)
            ]
        );
    }

    #[test]
    fn a_request_that_leaves_the_buffer_is_refused_before_a_part_moves() {
        // A buffer of MAX + 8 KiB: hipFile refuses a request that asks for more.
        let len = MAX + 8192;
        let mut moved = 0;
        let r = whole(2 * MAX, 0, 0, |asked, _, buffer| {
            if buffer as usize + asked > len {
                return -(CU_FILE_INVALID_VALUE as isize);
            }
            moved += clamped(asked);
            clamped(asked)
        });
        assert_eq!((r, moved), (-(CU_FILE_INVALID_VALUE as isize), 0));
    }

    #[test]
    fn a_short_part_ends_the_call_with_the_bytes_moved() {
        let mut calls = 0;
        let r = whole(3 * MAX, 0, 0, |asked, _, _| {
            calls += 1;
            if calls == 2 { 4096 } else { clamped(asked) }
        });
        assert_eq!((r, calls), ((MAX + 4096) as isize, 2));
    }

    #[test]
    fn an_error_after_moved_parts_is_the_error() {
        let mut calls = 0;
        let r = whole(2 * MAX, 0, 0, |asked, _, _| {
            calls += 1;
            if calls == 2 { -5 } else { clamped(asked) }
        });
        // A runtime status, translated as any read's.
        assert_eq!(r, -(CU_FILE_CUDA_DRIVER_ERROR as isize));
    }

    #[test]
    fn a_panic_while_splitting_is_an_internal_error() {
        let r = whole(2 * MAX, 0, 0, |_, _, _| panic!("a fault in a part"));
        assert_eq!(r, -(CU_FILE_INTERNAL_ERROR as isize));
    }

    #[test]
    fn a_count_above_the_part_counts_as_the_part() {
        let r = whole(2 * MAX + 1, 0, 0, |_, _, _| isize::MAX);
        assert_eq!(r, (2 * MAX + 1) as isize);
    }

    #[test]
    fn offsets_that_would_overflow_are_invalid() {
        let r = whole(2 * MAX, libc::off_t::MAX - 10, 0, |part, _, _| {
            part as isize
        });
        assert_eq!(r, -(CU_FILE_INVALID_VALUE as isize));
    }

    #[test]
    fn a_size_within_the_limit_is_one_call_unchanged() {
        let mut calls = Vec::new();
        let r = whole(MAX, -3, 7, |part, file, buffer| {
            calls.push((part, file, buffer));
            -22
        });
        assert_eq!(
            (r, calls),
            (-(CU_FILE_CUDA_DRIVER_ERROR as isize), vec![(MAX, -3, 7)])
        );
    }

    #[test]
    fn status_codes_pass_through() {
        let e = cu(hipFileError_t {
            err: CU_FILE_CUDA_DRIVER_ERROR,
            hip_drv_err: 2,
        });
        assert_eq!(
            e,
            CUfileError_t {
                err: 5011,
                cu_err: 2
            }
        );
        assert_eq!(cu(hipFileError_t::code(5027)).cu_err, 0);
    }
}
