//! The C declarations of `hipfile-c-hipfile`'s `include/hipfile.h` in Rust: every struct with its
//! exact layout and every constant with its value (that crate's `tests/layout.rs` checks both
//! against the header, compiled by the system C compiler).
//!
//! Enums that C passes in are plain integers here (`i32`/`u32` aliases and constants), never
//! Rust enums: a caller may pass any value, and an unknown one must be an error, not
//! undefined behaviour. The names are the header's.

#![allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    missing_docs
)]

use std::ffi::{c_char, c_int, c_uint, c_void};

/// `hipError_t`: HIP's status code.
pub type hipError_t = c_int;
/// `hipStream_t`: an opaque HIP stream.
pub type hipStream_t = *mut c_void;
/// `hoff_t`: a file offset (`off_t`).
pub type hoff_t = libc::off_t;

pub const HIPFILE_VERSION_MAJOR: c_uint = 0;
pub const HIPFILE_VERSION_MINOR: c_uint = 5;
pub const HIPFILE_VERSION_PATCH: c_uint = 0;

pub const HIPFILE_BASE_ERR: c_int = 5000;

/// `hipFileOpError_t`.
pub type hipFileOpError_t = c_int;
/// Its values, `hipFileSuccess` to `hipFileIOMaxError`, from the one table of codes and texts
/// (`hipfile_core::code`).
pub use facade::core::code::hipfile_h::*;

/// `hipFileError_t`: returned by value by the functions that do not move bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct hipFileError_t {
    pub err: hipFileOpError_t,
    pub hip_drv_err: hipError_t,
}

impl hipFileError_t {
    /// `{err, 0}`.
    pub const fn code(err: hipFileOpError_t) -> hipFileError_t {
        hipFileError_t {
            err,
            hip_drv_err: 0,
        }
    }

    /// `{hipFileSuccess, 0}`.
    pub const SUCCESS: hipFileError_t = hipFileError_t::code(hipFileSuccess);
}

pub type hipFileDriverStatusFlags_t = c_int;
pub const hipFileLustreSupported: hipFileDriverStatusFlags_t = 0;
pub const hipFileWekaFSSupported: hipFileDriverStatusFlags_t = 1;
pub const hipFileNFSSupported: hipFileDriverStatusFlags_t = 2;
pub const hipFileGPFSSupported: hipFileDriverStatusFlags_t = 3;
pub const hipFileNVMeSupported: hipFileDriverStatusFlags_t = 4;
pub const hipFileNVMeoFSupported: hipFileDriverStatusFlags_t = 5;
pub const hipFileSCSISupported: hipFileDriverStatusFlags_t = 6;
pub const hipFileScaleFluxCSDSupported: hipFileDriverStatusFlags_t = 7;
pub const hipFileNVMeshSupported: hipFileDriverStatusFlags_t = 8;
pub const hipFileBeeGFSSupported: hipFileDriverStatusFlags_t = 9;
pub const hipFileNVMeP2PSupported: hipFileDriverStatusFlags_t = 11;
pub const hipFileScatefsSupported: hipFileDriverStatusFlags_t = 12;

pub type hipFileDriverControlFlags_t = c_int;
pub const hipFileUsePollMode: hipFileDriverControlFlags_t = 0;
pub const hipFileAllowCompatMode: hipFileDriverControlFlags_t = 1;

pub type hipFileFeatureFlags_t = c_int;
pub const hipFileDynRoutingSupported: hipFileFeatureFlags_t = 0;
pub const hipFileBatchIOSupported: hipFileFeatureFlags_t = 1;
pub const hipFileStreamsSupported: hipFileFeatureFlags_t = 2;
pub const hipFileParallelIOSupported: hipFileFeatureFlags_t = 3;

/// The `nvfs` member of [`hipFileDriverProps_t`] (an anonymous struct in C).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct hipFileDriverPropsNvfs {
    pub major_version: c_uint,
    pub minor_version: c_uint,
    pub poll_thresh_size: u64,
    pub max_direct_io_size: u64,
    pub driver_status_flags: c_uint,
    pub driver_control_flags: c_uint,
}

/// `hipFileDriverProps_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct hipFileDriverProps_t {
    pub nvfs: hipFileDriverPropsNvfs,
    pub feature_flags: c_uint,
    pub max_device_cache_size: u64,
    pub per_buffer_cache_size: u64,
    pub max_device_pinned_mem_size: u64,
    pub max_batch_io_count: c_uint,
    pub max_batch_io_timeout_msecs: c_uint,
}

/// `hipFileRDMAInfo_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipFileRDMAInfo_t {
    pub version: c_int,
    pub desc_len: c_int,
    pub desc_str: *const c_char,
}

pub const HIPFILE_RDMA_REGISTER: c_int = 1;
pub const HIPFILE_RDMA_RELAXED_ORDERING: c_int = 1 << 1;

/// `hipFileFSOps_t`: never called by this library.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipFileFSOps_t {
    pub fs_type: Option<unsafe extern "C" fn(handle: *mut c_void) -> *const c_char>,
    pub getRDMADeviceList: Option<
        unsafe extern "C" fn(handle: *mut c_void, hostaddrs: *mut *mut libc::sockaddr) -> c_int,
    >,
    pub getRDMADevicePriority: Option<
        unsafe extern "C" fn(
            handle: *mut c_void,
            *mut c_char,
            usize,
            hoff_t,
            hostaddr: *mut libc::sockaddr,
        ) -> c_int,
    >,
    pub read: Option<
        unsafe extern "C" fn(
            handle: *mut c_void,
            *mut c_char,
            usize,
            hoff_t,
            *mut hipFileRDMAInfo_t,
        ) -> isize,
    >,
    pub write: Option<
        unsafe extern "C" fn(
            handle: *mut c_void,
            *const c_char,
            usize,
            hoff_t,
            *mut hipFileRDMAInfo_t,
        ) -> isize,
    >,
}

pub type hipFileFileHandleType_t = c_int;
pub const hipFileHandleTypeOpaqueFD: hipFileFileHandleType_t = 1;
pub const hipFileHandleTypeOpaqueWin32: hipFileFileHandleType_t = 2;
pub const hipFileHandleTypeUserspaceFS: hipFileFileHandleType_t = 3;

/// The `handle` member of [`hipFileDescr_t`].
#[repr(C)]
#[derive(Clone, Copy)]
pub union hipFileDescrHandle {
    pub fd: c_int,
    pub hFile: *mut c_void,
}

/// `hipFileDescr_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct hipFileDescr_t {
    pub type_: hipFileFileHandleType_t,
    pub handle: hipFileDescrHandle,
    pub fs_ops: *const hipFileFSOps_t,
}

/// `hipFileHandle_t`: an opaque registered file.
pub type hipFileHandle_t = *mut c_void;

pub type hipFileOpcode_t = c_int;
pub const hipFileBatchRead: hipFileOpcode_t = 0;
pub const hipFileBatchWrite: hipFileOpcode_t = 1;

pub type hipFileStatus_t = c_int;
pub const hipFileWaiting: hipFileStatus_t = 1 << 0;
pub const hipFilePending: hipFileStatus_t = 1 << 1;
pub const hipFileInvalid: hipFileStatus_t = 1 << 2;
pub const hipFileCanceled: hipFileStatus_t = 1 << 3;
pub const hipFileComplete: hipFileStatus_t = 1 << 4;
pub const hipFileTimeout: hipFileStatus_t = 1 << 5;
pub const hipFileFailed: hipFileStatus_t = 1 << 6;

pub type hipFileBatchMode_t = c_int;
pub const hipFileBatch: hipFileBatchMode_t = 1;

/// The `u.batch` member of [`hipFileIOParams_t`].
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipFileIOParamsBatch {
    pub devPtr_base: *mut c_void,
    pub file_offset: i64,
    pub devPtr_offset: i64,
    pub size: usize,
}

/// The `u` member of [`hipFileIOParams_t`].
#[repr(C)]
#[derive(Clone, Copy)]
pub union hipFileIOParamsU {
    pub batch: hipFileIOParamsBatch,
}

/// `hipFileIOParams_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct hipFileIOParams_t {
    pub mode: hipFileBatchMode_t,
    pub u: hipFileIOParamsU,
    pub fh: hipFileHandle_t,
    pub opcode: hipFileOpcode_t,
    pub cookie: *mut c_void,
}

/// `hipFileIOEvents_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipFileIOEvents_t {
    pub cookie: *mut c_void,
    pub status: hipFileStatus_t,
    pub ret: usize,
}

/// `hipFileBatchHandle_t`.
pub type hipFileBatchHandle_t = *mut c_void;

pub const HIPFILE_STREAM_FIXED_BUF_OFFSET: c_uint = 1;
pub const HIPFILE_STREAM_FIXED_FILE_OFFSET: c_uint = 1 << 1;
pub const HIPFILE_STREAM_FIXED_FILE_SIZE: c_uint = 1 << 2;
pub const HIPFILE_STREAM_PAGE_ALIGNED_INPUTS: c_uint = 1 << 3;
pub const HIPFILE_STREAM_FLAGS_MASK: c_uint = 0xf;

pub type hipFileSizeTConfigParameter_t = c_int;
pub const hipFileParamProfileStats: hipFileSizeTConfigParameter_t = 0;
pub const hipFileParamExecutionMaxIOQueueDepth: hipFileSizeTConfigParameter_t = 1;
pub const hipFileParamExecutionMaxIOThreads: hipFileSizeTConfigParameter_t = 2;
pub const hipFileParamExecutionMinIOThresholdSizeKB: hipFileSizeTConfigParameter_t = 3;
pub const hipFileParamExecutionMaxRequestParallelism: hipFileSizeTConfigParameter_t = 4;
pub const hipFileParamPropertiesMaxDirectIOSizeKB: hipFileSizeTConfigParameter_t = 5;
pub const hipFileParamPropertiesMaxDeviceCacheSizeKB: hipFileSizeTConfigParameter_t = 6;
pub const hipFileParamPropertiesPerBufferCacheSizeKB: hipFileSizeTConfigParameter_t = 7;
pub const hipFileParamPropertiesMaxDevicePinnedMemSizeKB: hipFileSizeTConfigParameter_t = 8;
pub const hipFileParamPropertiesIOBatchsize: hipFileSizeTConfigParameter_t = 9;
pub const hipFileParamPollthresholdSizeKB: hipFileSizeTConfigParameter_t = 10;
pub const hipFileParamPropertiesBatchIOTimeoutMs: hipFileSizeTConfigParameter_t = 11;

pub type hipFileBoolConfigParameter_t = c_int;
pub const hipFileParamPropertiesUsePollMode: hipFileBoolConfigParameter_t = 0;
pub const hipFileParamPropertiesAllowCompatMode: hipFileBoolConfigParameter_t = 1;
pub const hipFileParamForceCompatMode: hipFileBoolConfigParameter_t = 2;
pub const hipFileParamFsMiscApiCheckAggressive: hipFileBoolConfigParameter_t = 3;
pub const hipFileParamExecutionParallelIO: hipFileBoolConfigParameter_t = 4;
pub const hipFileParamProfileNvtx: hipFileBoolConfigParameter_t = 5;
pub const hipFileParamPropertiesAllowSystemMemory: hipFileBoolConfigParameter_t = 6;
pub const hipFileParamUsePcip2pdma: hipFileBoolConfigParameter_t = 7;
pub const hipFileParamPreferIOUring: hipFileBoolConfigParameter_t = 8;
pub const hipFileParamForceOdirectMode: hipFileBoolConfigParameter_t = 9;
pub const hipFileParamSkipTopologyDetection: hipFileBoolConfigParameter_t = 10;
pub const hipFileParamStreamMemopsBypass: hipFileBoolConfigParameter_t = 11;

pub type hipFileStringConfigParameter_t = c_int;
pub const hipFileParamLoggingLevel: hipFileStringConfigParameter_t = 0;
pub const hipFileParamEnvLogfilePath: hipFileStringConfigParameter_t = 1;
pub const hipFileParamLogDir: hipFileStringConfigParameter_t = 2;

pub const HIPFILE_GPU_UUID_LEN: usize = 16;
pub const HIPFILE_MAX_GPUS: usize = 16;

/// `hipFileOpCounter_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct hipFileOpCounter_t {
    pub ok: u64,
    pub err: u64,
}

/// `hipFileStatsLevel1_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct hipFileStatsLevel1_t {
    pub read_ops: hipFileOpCounter_t,
    pub write_ops: hipFileOpCounter_t,
    pub hdl_register_ops: hipFileOpCounter_t,
    pub hdl_deregister_ops: hipFileOpCounter_t,
    pub buf_register_ops: hipFileOpCounter_t,
    pub buf_deregister_ops: hipFileOpCounter_t,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub read_bw_bytes_per_sec: u64,
    pub write_bw_bytes_per_sec: u64,
    pub read_lat_avg_us: u64,
    pub write_lat_avg_us: u64,
    pub read_ops_per_sec: u64,
    pub write_ops_per_sec: u64,
    pub read_lat_sum_us: u64,
    pub write_lat_sum_us: u64,
    pub batch_submit_ops: hipFileOpCounter_t,
    pub batch_complete_ops: hipFileOpCounter_t,
    pub batch_setup_ops: hipFileOpCounter_t,
    pub batch_cancel_ops: hipFileOpCounter_t,
    pub batch_destroy_ops: hipFileOpCounter_t,
    pub batch_enqueued_ops: hipFileOpCounter_t,
    pub batch_posix_enqueued_ops: hipFileOpCounter_t,
    pub batch_processed_ops: hipFileOpCounter_t,
    pub batch_posix_processed_ops: hipFileOpCounter_t,
    pub batch_nvfs_submit_ops: hipFileOpCounter_t,
    pub batch_p2p_submit_ops: hipFileOpCounter_t,
    pub batch_aio_submit_ops: hipFileOpCounter_t,
    pub batch_iouring_submit_ops: hipFileOpCounter_t,
    pub batch_mixed_io_submit_ops: hipFileOpCounter_t,
    pub batch_total_submit_ops: hipFileOpCounter_t,
    pub batch_read_bytes: u64,
    pub batch_write_bytes: u64,
    pub batch_read_bw_bytes: u64,
    pub batch_write_bw_bytes: u64,
    pub batch_submit_lat_avg_us: u64,
    pub batch_completion_lat_avg_us: u64,
    pub batch_submit_ops_per_sec: u64,
    pub batch_complete_ops_per_sec: u64,
    pub batch_submit_lat_sum_us: u64,
    pub batch_completion_lat_sum_us: u64,
    pub last_batch_read_bytes: u64,
    pub last_batch_write_bytes: u64,
}

/// `hipFileStatsLevel2_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipFileStatsLevel2_t {
    pub basic: hipFileStatsLevel1_t,
    pub read_size_kb_hist: [u64; 32],
    pub write_size_kb_hist: [u64; 32],
}

/// `hipFilePerGpuStats_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct hipFilePerGpuStats_t {
    pub uuid: [c_char; HIPFILE_GPU_UUID_LEN],
    pub read_bytes: u64,
    pub read_bw_bytes_per_sec: u64,
    pub read_utilization: u64,
    pub read_duration_us: u64,
    pub n_total_reads: u64,
    pub n_p2p_reads: u64,
    pub n_nvfs_reads: u64,
    pub n_posix_reads: u64,
    pub n_unaligned_reads: u64,
    pub n_dr_reads: u64,
    pub n_sparse_regions: u64,
    pub n_inline_regions: u64,
    pub n_reads_err: u64,
    pub write_bytes: u64,
    pub write_bw_bytes_per_sec: u64,
    pub write_utilization: u64,
    pub write_duration_us: u64,
    pub n_total_writes: u64,
    pub n_p2p_writes: u64,
    pub n_nvfs_writes: u64,
    pub n_posix_writes: u64,
    pub n_unaligned_writes: u64,
    pub n_dr_writes: u64,
    pub n_writes_err: u64,
    pub n_mmap: u64,
    pub n_mmap_ok: u64,
    pub n_mmap_err: u64,
    pub n_mmap_free: u64,
    pub reg_bytes: u64,
}

/// `hipFileStatsLevel3_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipFileStatsLevel3_t {
    pub detailed: hipFileStatsLevel2_t,
    pub num_gpus: u32,
    pub per_gpu_stats: [hipFilePerGpuStats_t; HIPFILE_MAX_GPUS],
}
