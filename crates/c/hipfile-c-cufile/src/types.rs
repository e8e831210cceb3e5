//! cuFile's C declarations in Rust, as `include/cufile.h` declares them: NVIDIA's names,
//! values and layouts (cuFile 1.17; the layouts are those of 1.15, CUDA 13.0, as well), checked against the header by
//! `tests/layout.rs`.
//!
//! Where cuFile's layout is hipFile's, the type is an alias of `hipfile-c-shared`'s: the
//! descriptor, the batch parameters and events, the statistics, the file-system operations
//! (field names differ in places, offsets do not). Two layouts are cuFile's own: the status
//! [`CUfileError_t`] (its second member is a CUDA driver `CUresult`, not a HIP status) and the
//! driver properties [`CUfileDrvProps_t`] (32-bit sizes where hipFile has 64-bit ones).
//! Enums are plain integers, as in `hipfile-c-shared`: a caller may pass any value.

#![allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    missing_docs
)]

use hipfile_c_shared::types as hip;
use std::ffi::{c_int, c_uint, c_void};

/// `CUresult`: the CUDA driver API's status.
pub type CUresult = c_int;
pub const CUDA_SUCCESS: CUresult = 0;
pub const CUDA_ERROR_UNKNOWN: CUresult = 999;

/// `CUstream`: an opaque CUDA stream (a pointer, as `hipStream_t` is).
pub type CUstream = *mut c_void;

/// `CUfileOpError`: cuFile's codes, hipFile's one for one up to 5038.
pub type CUfileOpError = c_int;
pub const CUFILEOP_BASE_ERR: c_int = 5000;
/// Its values, `CU_FILE_SUCCESS` to `CU_FILE_IO_MAX_ERROR`, from the one table of codes and
/// texts (`hipfile_c_shared::codes`).
pub use hipfile_c_shared::codes::cufile_h::*;

/// `CUfileError_t`: returned by value by the functions that do not move bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CUfileError_t {
    pub err: CUfileOpError,
    pub cu_err: CUresult,
}

pub type CUfileDriverStatusFlags_t = c_int;
pub const CU_FILE_LUSTRE_SUPPORTED: CUfileDriverStatusFlags_t = 0;
pub const CU_FILE_WEKAFS_SUPPORTED: CUfileDriverStatusFlags_t = 1;
pub const CU_FILE_NFS_SUPPORTED: CUfileDriverStatusFlags_t = 2;
pub const CU_FILE_GPFS_SUPPORTED: CUfileDriverStatusFlags_t = 3;
pub const CU_FILE_NVME_SUPPORTED: CUfileDriverStatusFlags_t = 4;
pub const CU_FILE_NVMEOF_SUPPORTED: CUfileDriverStatusFlags_t = 5;
pub const CU_FILE_SCSI_SUPPORTED: CUfileDriverStatusFlags_t = 6;
pub const CU_FILE_SCALEFLUX_CSD_SUPPORTED: CUfileDriverStatusFlags_t = 7;
pub const CU_FILE_NVMESH_SUPPORTED: CUfileDriverStatusFlags_t = 8;
pub const CU_FILE_BEEGFS_SUPPORTED: CUfileDriverStatusFlags_t = 9;
pub const CU_FILE_NVME_P2P_SUPPORTED: CUfileDriverStatusFlags_t = 11;
pub const CU_FILE_SCATEFS_SUPPORTED: CUfileDriverStatusFlags_t = 12;
pub const CU_FILE_VIRTIOFS_SUPPORTED: CUfileDriverStatusFlags_t = 13;
pub const CU_FILE_MAX_TARGET_TYPES: CUfileDriverStatusFlags_t = 14;

pub type CUfileDriverControlFlags_t = c_int;
pub const CU_FILE_USE_POLL_MODE: CUfileDriverControlFlags_t = 0;
pub const CU_FILE_ALLOW_COMPAT_MODE: CUfileDriverControlFlags_t = 1;
pub const CU_FILE_POSIX_IO_MODE: CUfileDriverControlFlags_t = 2;
pub const CU_FILE_FALLBACK_IO_MODE: CUfileDriverControlFlags_t = 4;

pub type CUfileFeatureFlags_t = c_int;
pub const CU_FILE_DYN_ROUTING_SUPPORTED: CUfileFeatureFlags_t = 0;
pub const CU_FILE_BATCH_IO_SUPPORTED: CUfileFeatureFlags_t = 1;
pub const CU_FILE_STREAMS_SUPPORTED: CUfileFeatureFlags_t = 2;
pub const CU_FILE_PARALLEL_IO_SUPPORTED: CUfileFeatureFlags_t = 3;
pub const CU_FILE_P2P_SUPPORTED: CUfileFeatureFlags_t = 4;

/// `CUfileP2PFlags_t`: bit numbers of a kind of storage's peer-to-peer flags (cuFile 1.17).
pub type CUfileP2PFlags_t = c_int;
pub const CUFILE_P2PDMA: CUfileP2PFlags_t = 0;
pub const CUFILE_NVFS: CUfileP2PFlags_t = 1;
pub const CUFILE_DMABUF: CUfileP2PFlags_t = 2;
pub const CUFILE_C2C: CUfileP2PFlags_t = 3;
pub const CUFILE_NVIDIA_PEERMEM: CUfileP2PFlags_t = 4;
pub const CU_FILE_P2P_FLAG_PCI_P2PDMA: CUfileP2PFlags_t = 1 << CUFILE_P2PDMA;
pub const CU_FILE_P2P_FLAG_NVFS: CUfileP2PFlags_t = 1 << CUFILE_NVFS;
pub const CU_FILE_P2P_FLAG_DMABUF: CUfileP2PFlags_t = 1 << CUFILE_DMABUF;
pub const CU_FILE_P2P_FLAG_C2C: CUfileP2PFlags_t = 1 << CUFILE_C2C;

/// The `nvfs` member of [`CUfileDrvProps_t`] (an anonymous struct in C): hipFile's layout.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CUfileDrvPropsNvfs {
    pub major_version: c_uint,
    pub minor_version: c_uint,
    pub poll_thresh_size: usize,
    pub max_direct_io_size: usize,
    pub dstatusflags: c_uint,
    pub dcontrolflags: c_uint,
}

/// `CUfileDrvProps_t`: hipFile's `hipFileDriverProps_t` with 32-bit sizes after `nvfs`
/// (56 bytes where hipFile's is 72).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CUfileDrvProps_t {
    pub nvfs: CUfileDrvPropsNvfs,
    pub fflags: c_uint,
    pub max_device_cache_size: c_uint,
    pub per_buffer_cache_size: c_uint,
    pub max_device_pinned_mem_size: c_uint,
    pub max_batch_io_size: c_uint,
    pub max_batch_io_timeout_msecs: c_uint,
}

pub type cufileRDMAInfo_t = hip::hipFileRDMAInfo_t;
pub const CU_FILE_RDMA_REGISTER: c_int = 1;
pub const CU_FILE_RDMA_RELAXED_ORDERING: c_int = 1 << 1;
pub type CUfileFSOps_t = hip::hipFileFSOps_t;

pub type CUfileFileHandleType = c_int;
pub const CU_FILE_HANDLE_TYPE_OPAQUE_FD: CUfileFileHandleType = 1;
pub const CU_FILE_HANDLE_TYPE_OPAQUE_WIN32: CUfileFileHandleType = 2;
pub const CU_FILE_HANDLE_TYPE_USERSPACE_FS: CUfileFileHandleType = 3;

/// `CUfileDescr_t`: hipFile's layout (C calls the pointer member of the union `handle`).
pub type CUfileDescr_t = hip::hipFileDescr_t;
pub type CUfileHandle_t = *mut c_void;

pub type CUfileOpcode_t = c_int;
pub const CUFILE_READ: CUfileOpcode_t = 0;
pub const CUFILE_WRITE: CUfileOpcode_t = 1;

pub type CUfileStatus_t = c_int;
pub const CUFILE_WAITING: CUfileStatus_t = 1 << 0;
pub const CUFILE_PENDING: CUfileStatus_t = 1 << 1;
pub const CUFILE_INVALID: CUfileStatus_t = 1 << 2;
pub const CUFILE_CANCELED: CUfileStatus_t = 1 << 3;
pub const CUFILE_COMPLETE: CUfileStatus_t = 1 << 4;
pub const CUFILE_TIMEOUT: CUfileStatus_t = 1 << 5;
pub const CUFILE_FAILED: CUfileStatus_t = 1 << 6;

pub type CUfileBatchMode_t = c_int;
pub const CUFILE_BATCH: CUfileBatchMode_t = 1;

pub type CUfileIOParams_t = hip::hipFileIOParams_t;
pub type CUfileIOEvents_t = hip::hipFileIOEvents_t;
pub type CUfileBatchHandle_t = *mut c_void;

pub const CU_FILE_STREAM_FIXED_BUF_OFFSET: c_uint = 1;
pub const CU_FILE_STREAM_FIXED_FILE_OFFSET: c_uint = 1 << 1;
pub const CU_FILE_STREAM_FIXED_FILE_SIZE: c_uint = 1 << 2;
pub const CU_FILE_STREAM_PAGE_ALIGNED_INPUTS: c_uint = 1 << 3;

/// `CUFileSizeTConfigParameter_t`: hipFile's values.
pub type CUFileSizeTConfigParameter_t = c_int;
pub const CUFILE_PARAM_PROFILE_STATS: CUFileSizeTConfigParameter_t = 0;
pub const CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH: CUFileSizeTConfigParameter_t = 1;
pub const CUFILE_PARAM_EXECUTION_MAX_IO_THREADS: CUFileSizeTConfigParameter_t = 2;
pub const CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB: CUFileSizeTConfigParameter_t = 3;
pub const CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM: CUFileSizeTConfigParameter_t = 4;
pub const CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB: CUFileSizeTConfigParameter_t = 5;
pub const CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB: CUFileSizeTConfigParameter_t = 6;
pub const CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB: CUFileSizeTConfigParameter_t = 7;
pub const CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB: CUFileSizeTConfigParameter_t = 8;
pub const CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE: CUFileSizeTConfigParameter_t = 9;
pub const CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB: CUFileSizeTConfigParameter_t = 10;
pub const CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS: CUFileSizeTConfigParameter_t = 11;

/// `CUFileBoolConfigParameter_t`: hipFile's values.
pub type CUFileBoolConfigParameter_t = c_int;
pub const CUFILE_PARAM_PROPERTIES_USE_POLL_MODE: CUFileBoolConfigParameter_t = 0;
pub const CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE: CUFileBoolConfigParameter_t = 1;
pub const CUFILE_PARAM_FORCE_COMPAT_MODE: CUFileBoolConfigParameter_t = 2;
pub const CUFILE_PARAM_FS_MISC_API_CHECK_AGGRESSIVE: CUFileBoolConfigParameter_t = 3;
pub const CUFILE_PARAM_EXECUTION_PARALLEL_IO: CUFileBoolConfigParameter_t = 4;
pub const CUFILE_PARAM_PROFILE_NVTX: CUFileBoolConfigParameter_t = 5;
pub const CUFILE_PARAM_PROPERTIES_ALLOW_SYSTEM_MEMORY: CUFileBoolConfigParameter_t = 6;
pub const CUFILE_PARAM_USE_PCIP2PDMA: CUFileBoolConfigParameter_t = 7;
pub const CUFILE_PARAM_PREFER_IO_URING: CUFileBoolConfigParameter_t = 8;
pub const CUFILE_PARAM_FORCE_ODIRECT_MODE: CUFileBoolConfigParameter_t = 9;
pub const CUFILE_PARAM_SKIP_TOPOLOGY_DETECTION: CUFileBoolConfigParameter_t = 10;
pub const CUFILE_PARAM_STREAM_MEMOPS_BYPASS: CUFileBoolConfigParameter_t = 11;

/// `CUFileStringConfigParameter_t`: hipFile's values.
pub type CUFileStringConfigParameter_t = c_int;
pub const CUFILE_PARAM_LOGGING_LEVEL: CUFileStringConfigParameter_t = 0;
pub const CUFILE_PARAM_ENV_LOGFILE_PATH: CUFileStringConfigParameter_t = 1;
pub const CUFILE_PARAM_LOG_DIR: CUFileStringConfigParameter_t = 2;

/// `CUFileArrayConfigParameter_t` (cuFile 1.15; the GPU bounce buffers 1.17).
pub type CUFileArrayConfigParameter_t = c_int;
pub const CUFILE_PARAM_POSIX_POOL_SLAB_SIZE_KB: CUFileArrayConfigParameter_t = 0;
pub const CUFILE_PARAM_POSIX_POOL_SLAB_COUNT: CUFileArrayConfigParameter_t = 1;
pub const CUFILE_PARAM_GPU_BOUNCE_BUFFER_SLAB_SIZE_KB: CUFileArrayConfigParameter_t = 2;
pub const CUFILE_PARAM_GPU_BOUNCE_BUFFER_SLAB_COUNT: CUFileArrayConfigParameter_t = 3;

pub const CUFILE_GPU_UUID_LEN: usize = 16;
pub type CUfileOpCounter_t = hip::hipFileOpCounter_t;
pub type CUfileStatsLevel1_t = hip::hipFileStatsLevel1_t;
pub type CUfileStatsLevel2_t = hip::hipFileStatsLevel2_t;
pub type CUfilePerGpuStats_t = hip::hipFilePerGpuStats_t;
pub type CUfileStatsLevel3_t = hip::hipFileStatsLevel3_t;
