/*
 * hipfile.h: the C interface of libhipfile.so.0, GPU direct storage for AMD (and NVIDIA)
 * GPUs, compatible at the source and binary level with hipFile 0.5: the same function
 * names, enum values and struct layouts, so a program built against hipFile links against
 * this library unchanged.
 *
 * Which functions the library exports today is listed in crates/c/hipfile-c-hipfile/README.md;
 * every function of the interface is declared here. The semantics are those of
 * docs/BEHAVIOUR.md; docs/decisions/c-abi.md lists where they differ from hipFile's.
 *
 * HIP types. As hipFile's own header does, this one includes HIP's <hip/hip_runtime_api.h>,
 * so hipError_t and hipStream_t are HIP's, and HIP's headers may come before or after this
 * one. A plain C or C++ compiler (gcc, not hipcc) needs what HIP's header needs: HIP's
 * include directory (/opt/rocm/include; Debian's libamdhip64-dev installs it in
 * /usr/include) and the platform macro, -D__HIP_PLATFORM_AMD__ (hipcc and HIP's CMake
 * targets define it).
 *
 * Without HIP's headers, define HIPFILE_NO_HIP_HEADERS (-DHIPFILE_NO_HIP_HEADERS). This header
 * then includes nothing of HIP's: it uses HIP's types if HIP's header was included before it
 * (its include guard HIP_INCLUDE_HIP_HIP_RUNTIME_API_H, or HIP_VERSION_MAJOR from the
 * <hip/hip_version.h> it includes, is defined), and otherwise declares ABI-compatible ones
 * (hipError_t as int, hipStream_t as a pointer to the incomplete struct ihipStream_t) and
 * defines HIPFILE_DECLARED_HIP_TYPES, after which HIP's header cannot be included in the same
 * translation unit. HIPFILE_INCLUDE_HIP, which once asked for the include, is the default
 * now and has no effect.
 */

#ifndef HIPFILE_H
#define HIPFILE_H

#if !defined(HIPFILE_NO_HIP_HEADERS)
#include <hip/hip_runtime_api.h>
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

/* Declared here too, for the prototypes below, when the C library's headers keep them for
 * POSIX builds (strict -std=c99, say). */
struct sockaddr;
struct timespec;

#if defined(HIPFILE_NO_HIP_HEADERS) && !defined(HIP_INCLUDE_HIP_HIP_RUNTIME_API_H) &&        \
    !defined(HIP_VERSION_MAJOR) && !defined(HIPFILE_DECLARED_HIP_TYPES)
#define HIPFILE_DECLARED_HIP_TYPES 1
/* A HIP status code; 0 is success. HIP declares it as an enum, which has int's ABI. */
typedef int hipError_t;
/* A HIP stream; NULL is the null stream. */
typedef struct ihipStream_t *hipStream_t;
#endif

#if defined(__GNUC__)
#define HIPFILE_API __attribute__((visibility("default")))
#else
#define HIPFILE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Version of the hipFile interface this header describes (hipFileGetVersion reports it).
 * ------------------------------------------------------------------------------------- */

#define HIPFILE_VERSION_MAJOR 0
#define HIPFILE_VERSION_MINOR 5
#define HIPFILE_VERSION_PATCH 0

/* File offsets. */
typedef off_t hoff_t;

/* ---------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------- */

/* hipFile's own codes start above this value. */
#define HIPFILE_BASE_ERR 5000

/*
 * Status codes. Functions returning ssize_t return a code negated; -1 there means a system
 * error, with errno set. 5021 and 5032 are not used.
 */
typedef enum hipFileOpError {
    hipFileSuccess = 0,
    hipFileDriverNotInitialized = 5001,   /* the driver is not open, or could not be opened */
    hipFileDriverInvalidProps = 5002,     /* a driver property is invalid */
    hipFileDriverUnsupportedLimit = 5003, /* a driver property value is not supported */
    hipFileDriverVersionMismatch = 5004,  /* library and driver versions differ */
    hipFileDriverVersionReadError = 5005, /* the driver version cannot be read */
    hipFileDriverClosing = 5006,          /* the driver is closed or closing */
    hipFilePlatformNotSupported = 5007,   /* this platform is not supported */
    hipFileIONotSupported = 5008,         /* no way to do this I/O on this file */
    hipFileDeviceNotSupported = 5009,     /* the GPU is not supported */
    hipFileDriverError = 5010,            /* the kernel driver failed */
    hipFileHipDriverError = 5011,         /* a HIP call failed: see hip_drv_err */
    hipFileHipPointerInvalid = 5012,      /* not a valid GPU pointer */
    hipFileHipMemoryTypeInvalid = 5013,   /* the memory is not GPU device memory */
    hipFileHipPointerRangeError = 5014,   /* the range leaves its allocation */
    hipFileHipContextMismatch = 5015,     /* GPU context mismatch */
    hipFileInvalidMappingSize = 5016,     /* beyond the pinned buffer */
    hipFileInvalidMappingRange = 5017,    /* beyond the mapped region */
    hipFileInvalidFileType = 5018,        /* the file type cannot be used */
    hipFileInvalidFileOpenFlag = 5019,    /* the descriptor's open flags cannot be used */
    hipFileDIONotSet = 5020,              /* O_DIRECT is not set */
    hipFileInvalidValue = 5022,           /* an argument is invalid */
    hipFileMemoryAlreadyRegistered = 5023,
    hipFileMemoryNotRegistered = 5024,
    hipFilePermissionDenied = 5025,
    hipFileDriverAlreadyOpen = 5026,
    hipFileHandleNotRegistered = 5027,
    hipFileHandleAlreadyRegistered = 5028,
    hipFileDeviceNotFound = 5029,
    hipFileInternalError = 5030, /* a fault inside the library */
    hipFileGetNewFDFailed = 5031,
    hipFileDriverSetupError = 5033,
    hipFileIODisabled = 5034,
    hipFileBatchSubmitFailed = 5035,
    hipFileGPUMemoryPinningFailed = 5036,
    hipFileBatchFull = 5037,
    hipFileAsyncNotSupported = 5038,
    hipFileIOMaxError = 5039 /* one past the largest code, not an error */
} hipFileOpError_t;

/* A static, NUL-terminated description of status; never NULL. */
HIPFILE_API const char *hipFileGetOpErrorString(hipFileOpError_t status);

/* What the functions that do not move bytes return: err, and the HIP status when err is
 * hipFileHipDriverError (0 otherwise). 8 bytes, returned by value. */
typedef struct hipFileError {
    hipFileOpError_t err;
    hipError_t hip_drv_err;
} hipFileError_t;

/* Whether x (a code, or the negative return of hipFileRead/hipFileWrite) is hipFile's. */
#define IS_HIPFILE_ERR(x) (abs(x) > HIPFILE_BASE_ERR)
/* The description of x, negated or not. */
#define HIPFILE_ERRSTR(x) hipFileGetOpErrorString((hipFileOpError_t)abs(x))
/* Whether the hipFileError_t e carries a HIP status, and that status. */
#ifndef IS_HIP_DRV_ERR
#define IS_HIP_DRV_ERR(e) ((e).err == hipFileHipDriverError)
#endif
#ifndef HIP_DRV_ERR
#define HIP_DRV_ERR(e) ((e).hip_drv_err)
#endif

/* ---------------------------------------------------------------------------------------
 * Driver
 * ------------------------------------------------------------------------------------- */

/* Storage kinds, as bit numbers of driver_status_flags. 10 is reserved. */
typedef enum hipFileDriverStatusFlags {
    hipFileLustreSupported = 0,
    hipFileWekaFSSupported = 1,
    hipFileNFSSupported = 2,
    hipFileGPFSSupported = 3,
    hipFileNVMeSupported = 4,
    hipFileNVMeoFSupported = 5,
    hipFileSCSISupported = 6,
    hipFileScaleFluxCSDSupported = 7,
    hipFileNVMeshSupported = 8,
    hipFileBeeGFSSupported = 9,
    hipFileNVMeP2PSupported = 11,
    hipFileScatefsSupported = 12
} hipFileDriverStatusFlags_t;

/* Bit numbers of driver_control_flags. */
typedef enum hipFileDriverControlFlags {
    hipFileUsePollMode = 0,
    hipFileAllowCompatMode = 1
} hipFileDriverControlFlags_t;

/* Bit numbers of feature_flags. */
typedef enum hipFileFeatureFlags {
    hipFileDynRoutingSupported = 0,
    hipFileBatchIOSupported = 1,
    hipFileStreamsSupported = 2,
    hipFileParallelIOSupported = 3
} hipFileFeatureFlags_t;

/* Driver properties. Sizes are in KiB. 72 bytes on x86-64. */
typedef struct hipFileDriverProps {
    struct {
        unsigned major_version;
        unsigned minor_version;
        uint64_t poll_thresh_size;
        uint64_t max_direct_io_size;
        unsigned driver_status_flags;
        unsigned driver_control_flags;
    } nvfs;
    unsigned feature_flags;
    uint64_t max_device_cache_size;
    uint64_t per_buffer_cache_size;
    uint64_t max_device_pinned_mem_size;
    unsigned max_batch_io_count;
    unsigned max_batch_io_timeout_msecs;
} hipFileDriverProps_t;

/* Opens the driver, or counts one more user of it: each successful call adds 1 to the use
 * count. Returns hipFileDriverNotInitialized when no GPU runtime can be loaded. */
HIPFILE_API hipFileError_t hipFileDriverOpen(void);

/* Counts one user less; when the count reaches 0, every buffer and then every file
 * registration ends. hipFileDriverNotInitialized when the count is already 0. */
HIPFILE_API hipFileError_t hipFileDriverClose(void);

/* The use count. */
HIPFILE_API int64_t hipFileUseCount(void);

/* The open driver's limits and settings, sizes in KiB. hipFileDriverNotInitialized while the
 * use count is 0. */
HIPFILE_API hipFileError_t hipFileDriverGetProperties(hipFileDriverProps_t *props);

/* The setters take sizes in KiB and apply to the next open of the driver, and at once while
 * nothing (no registration, batch or request) uses the open driver. A size out of bounds is
 * hipFileDriverUnsupportedLimit. Poll mode is recorded and reported only: requests complete
 * by waiting. */
HIPFILE_API hipFileError_t hipFileDriverSetPollMode(bool poll, size_t poll_threshold_size);
/* The largest piece a request is cut into: 4 KiB to 1 GiB. */
HIPFILE_API hipFileError_t hipFileDriverSetMaxDirectIOSize(size_t max_direct_io_size);
/* Limits on the staging (bounce) memory: 4 KiB to 64 GiB each; the smaller one applies. */
HIPFILE_API hipFileError_t hipFileDriverSetMaxCacheSize(size_t max_cache_size);
HIPFILE_API hipFileError_t hipFileDriverSetMaxPinnedMemSize(size_t max_pinned_size);

/* ---------------------------------------------------------------------------------------
 * Userspace file systems (accepted in the types, not supported)
 * ------------------------------------------------------------------------------------- */

typedef struct hipFileRDMAInfo {
    int version;
    int desc_len;
    const char *desc_str;
} hipFileRDMAInfo_t;

#define HIPFILE_RDMA_REGISTER 1
#define HIPFILE_RDMA_RELAXED_ORDERING (1 << 1)

typedef struct hipFileFSOps {
    const char *(*fs_type)(void *handle);
    int (*getRDMADeviceList)(void *handle, struct sockaddr **hostaddrs);
    int (*getRDMADevicePriority)(void *handle, char *, size_t, hoff_t, struct sockaddr *hostaddr);
    ssize_t (*read)(void *handle, char *, size_t, hoff_t, hipFileRDMAInfo_t *);
    ssize_t (*write)(void *handle, const char *, size_t, hoff_t, hipFileRDMAInfo_t *);
} hipFileFSOps_t;

/* ---------------------------------------------------------------------------------------
 * Files and buffers
 * ------------------------------------------------------------------------------------- */

typedef enum hipFileFileHandleType {
    hipFileHandleTypeOpaqueFD = 1,    /* a Linux file descriptor: the only one supported */
    hipFileHandleTypeOpaqueWin32 = 2, /* not supported */
    hipFileHandleTypeUserspaceFS = 3  /* not supported */
} hipFileFileHandleType_t;

/* What to register. 24 bytes on x86-64. */
typedef struct hipFileDescr {
    hipFileFileHandleType_t type;
    union {
        int fd;
        void *hFile;
    } handle;
    const hipFileFSOps_t *fs_ops; /* ignored */
} hipFileDescr_t;

/* A registered file. Opaque; valid from hipFileHandleRegister until hipFileHandleDeregister
 * or the hipFileDriverClose that brings the use count to 0. */
typedef void *hipFileHandle_t;

/* Registers the open descriptor descr->handle.fd and stores its handle in *fh. The
 * descriptor is duplicated, so the caller may close its own afterwards. Opens the driver
 * (use count 0 to 1) when it is not open. */
HIPFILE_API hipFileError_t hipFileHandleRegister(hipFileHandle_t *fh, hipFileDescr_t *descr);

/* Ends a file's registration. Silent for NULL, an unknown handle, or a file with I/O in
 * flight (which stays registered). */
HIPFILE_API void hipFileHandleDeregister(hipFileHandle_t fh);

/* Registers length bytes of device memory at buffer_base (optional: I/O validates an
 * unregistered pointer on every call). The memory must stay allocated until it is
 * deregistered. flags is ignored. Opens the driver when it is not open. */
HIPFILE_API hipFileError_t hipFileBufRegister(const void *buffer_base, size_t length, int flags);

/* Ends a buffer's registration. */
HIPFILE_API hipFileError_t hipFileBufDeregister(const void *buffer_base);

/*
 * Read: up to size bytes of the file at file_offset into buffer_base + buffer_offset.
 * Write: size bytes from buffer_base + buffer_offset to the file at file_offset, on stable
 * storage when the call returns.
 * At most 0x7ffff000 bytes move per call. Returns the bytes moved (fewer at end of file);
 * -1 with errno set for a system error; otherwise a hipFileOpError_t or a hipError_t, negated.
 */
HIPFILE_API ssize_t hipFileRead(hipFileHandle_t fh, void *buffer_base, size_t size,
                                hoff_t file_offset, hoff_t buffer_offset);
HIPFILE_API ssize_t hipFileWrite(hipFileHandle_t fh, const void *buffer_base, size_t size,
                                 hoff_t file_offset, hoff_t buffer_offset);

/* ---------------------------------------------------------------------------------------
 * Batches
 * ------------------------------------------------------------------------------------- */

typedef enum hipFileOpcode {
    hipFileBatchRead = 0,
    hipFileBatchWrite = 1
} hipFileOpcode_t;

typedef enum hipFileStatus {
    hipFileWaiting = 1 << 0,
    hipFilePending = 1 << 1,
    hipFileInvalid = 1 << 2,
    hipFileCanceled = 1 << 3,
    hipFileComplete = 1 << 4,
    hipFileTimeout = 1 << 5,
    hipFileFailed = 1 << 6
} hipFileStatus_t;

typedef enum hipFileBatchMode {
    hipFileBatch = 1
} hipFileBatchMode_t;

/* One request of a batch. 64 bytes on x86-64. */
typedef struct hipFileIOParams {
    hipFileBatchMode_t mode;
    union {
        struct {
            void *devPtr_base;
            int64_t file_offset;
            int64_t devPtr_offset;
            size_t size;
        } batch;
    } u;
    hipFileHandle_t fh;
    hipFileOpcode_t opcode;
    void *cookie;
} hipFileIOParams_t;

/* One completion. 24 bytes on x86-64. */
typedef struct hipFileIOEvents {
    void *cookie;
    hipFileStatus_t status;
    size_t ret;
} hipFileIOEvents_t;

typedef void *hipFileBatchHandle_t;

HIPFILE_API hipFileError_t hipFileBatchIOSetUp(hipFileBatchHandle_t *batch_idp, unsigned max_nr);
HIPFILE_API hipFileError_t hipFileBatchIOSubmit(hipFileBatchHandle_t batch_idp, unsigned nr,
                                                hipFileIOParams_t *iocbp, unsigned flags);
HIPFILE_API hipFileError_t hipFileBatchIOGetStatus(hipFileBatchHandle_t batch_idp, unsigned min_nr,
                                                   unsigned *nr, hipFileIOEvents_t *iocbp,
                                                   struct timespec *timeout);
HIPFILE_API hipFileError_t hipFileBatchIOCancel(hipFileBatchHandle_t batch_idp);
HIPFILE_API void hipFileBatchIODestroy(hipFileBatchHandle_t batch_idp);

/* ---------------------------------------------------------------------------------------
 * Stream-ordered I/O
 * ------------------------------------------------------------------------------------- */

/* hipFileStreamRegister flags: which arguments are read at submission rather than when the
 * stream reaches the request. */
#define HIPFILE_STREAM_FIXED_BUF_OFFSET 1
#define HIPFILE_STREAM_FIXED_FILE_OFFSET (1 << 1)
#define HIPFILE_STREAM_FIXED_FILE_SIZE (1 << 2)
#define HIPFILE_STREAM_PAGE_ALIGNED_INPUTS (1 << 3)
#define HIPFILE_STREAM_FLAGS_MASK 0xf

/* Queue a read (write) on stream, NULL meaning the null stream, and return at once: it runs
 * when the stream reaches it, after the stream's earlier work, and the stream's later work
 * waits for it. *bytes_read_p (*bytes_written_p) is 0 on return and holds what hipFileRead
 * (hipFileWrite) would return once the stream has passed the request. The size and offsets
 * are read through their pointers when the stream reaches the request, except those the
 * stream's registration fixes (read at submission); so the pointers, and bytes_read_p, stay
 * valid until then. With the use count 0 the call opens the driver and returns
 * hipFileInvalidValue. NULL pointers, negative offsets and ranges outside the buffer (with
 * the values at submission) are hipFileInvalidValue; an unknown fh is
 * hipFileHandleNotRegistered; a size of 0 queues nothing. */
HIPFILE_API hipFileError_t hipFileReadAsync(hipFileHandle_t fh, void *buffer_base, size_t *size_p,
                                            hoff_t *file_offset_p, hoff_t *buffer_offset_p,
                                            ssize_t *bytes_read_p, hipStream_t stream);
HIPFILE_API hipFileError_t hipFileWriteAsync(hipFileHandle_t fh, void *buffer_base, size_t *size_p,
                                             hoff_t *file_offset_p, hoff_t *buffer_offset_p,
                                             ssize_t *bytes_written_p, hipStream_t stream);
/* Record stream's flags (HIPFILE_STREAM_*; PAGE_ALIGNED_INPUTS changes nothing); an
 * unregistered stream fixes nothing. Flags outside the mask, a second registration, and
 * deregistering a stream not registered are hipFileInvalidValue. Neither opens the driver.
 * Deregistering returns at once: requests already queued go on as submitted. */
HIPFILE_API hipFileError_t hipFileStreamRegister(hipStream_t stream, unsigned flags);
HIPFILE_API hipFileError_t hipFileStreamDeregister(hipStream_t stream);

/* ---------------------------------------------------------------------------------------
 * Version and parameters
 * ------------------------------------------------------------------------------------- */

/* Stores the interface version in each non-NULL argument. Does not open the driver. */
HIPFILE_API hipFileError_t hipFileGetVersion(unsigned *major, unsigned *minor, unsigned *patch);

typedef enum hipFileSizeTConfigParameter_t {
    hipFileParamProfileStats = 0,
    hipFileParamExecutionMaxIOQueueDepth = 1,
    hipFileParamExecutionMaxIOThreads = 2,
    hipFileParamExecutionMinIOThresholdSizeKB = 3,
    hipFileParamExecutionMaxRequestParallelism = 4,
    hipFileParamPropertiesMaxDirectIOSizeKB = 5,
    hipFileParamPropertiesMaxDeviceCacheSizeKB = 6,
    hipFileParamPropertiesPerBufferCacheSizeKB = 7,
    hipFileParamPropertiesMaxDevicePinnedMemSizeKB = 8,
    hipFileParamPropertiesIOBatchsize = 9,
    hipFileParamPollthresholdSizeKB = 10,
    hipFileParamPropertiesBatchIOTimeoutMs = 11
} hipFileSizeTConfigParameter_t;

typedef enum hipFileBoolConfigParameter_t {
    hipFileParamPropertiesUsePollMode = 0,
    hipFileParamPropertiesAllowCompatMode = 1,
    hipFileParamForceCompatMode = 2,
    hipFileParamFsMiscApiCheckAggressive = 3,
    hipFileParamExecutionParallelIO = 4,
    hipFileParamProfileNvtx = 5,
    hipFileParamPropertiesAllowSystemMemory = 6,
    hipFileParamUsePcip2pdma = 7,
    hipFileParamPreferIOUring = 8,
    hipFileParamForceOdirectMode = 9,
    hipFileParamSkipTopologyDetection = 10,
    hipFileParamStreamMemopsBypass = 11
} hipFileBoolConfigParameter_t;

typedef enum hipFileStringConfigParameter_t {
    hipFileParamLoggingLevel = 0,
    hipFileParamEnvLogfilePath = 1,
    hipFileParamLogDir = 2
} hipFileStringConfigParameter_t;

/* Getting works at any time: the open driver's value, or the one the next open would use.
 * Setting works only while the driver is closed (hipFileDriverAlreadyOpen otherwise) and
 * applies at the next open. ...KB values are in KiB. A param outside its enum or a NULL
 * pointer is hipFileInvalidValue; a value out of bounds is hipFileDriverUnsupportedLimit.
 * hipFileGetParameterString writes the value and its NUL only if len holds both. */
HIPFILE_API hipFileError_t hipFileGetParameterSizeT(hipFileSizeTConfigParameter_t param, size_t *value);
HIPFILE_API hipFileError_t hipFileGetParameterBool(hipFileBoolConfigParameter_t param, bool *value);
HIPFILE_API hipFileError_t hipFileGetParameterString(hipFileStringConfigParameter_t param,
                                                     char *desc_str, int len);
HIPFILE_API hipFileError_t hipFileSetParameterSizeT(hipFileSizeTConfigParameter_t param, size_t value);
HIPFILE_API hipFileError_t hipFileSetParameterBool(hipFileBoolConfigParameter_t param, bool value);
HIPFILE_API hipFileError_t hipFileSetParameterString(hipFileStringConfigParameter_t param,
                                                     const char *desc_str);

/* ---------------------------------------------------------------------------------------
 * Statistics
 * ------------------------------------------------------------------------------------- */

#define HIPFILE_GPU_UUID_LEN 16
#define HIPFILE_MAX_GPUS 16

/* Successful and failed operations. */
typedef struct hipFileOpCounter {
    uint64_t ok;
    uint64_t err;
} hipFileOpCounter_t;

/* Level 1: operation counts, bytes, rates and latencies. */
typedef struct hipFileStatsLevel1 {
    hipFileOpCounter_t read_ops;
    hipFileOpCounter_t write_ops;
    hipFileOpCounter_t hdl_register_ops;
    hipFileOpCounter_t hdl_deregister_ops;
    hipFileOpCounter_t buf_register_ops;
    hipFileOpCounter_t buf_deregister_ops;
    uint64_t read_bytes;
    uint64_t write_bytes;
    uint64_t read_bw_bytes_per_sec;
    uint64_t write_bw_bytes_per_sec;
    uint64_t read_lat_avg_us;
    uint64_t write_lat_avg_us;
    uint64_t read_ops_per_sec;
    uint64_t write_ops_per_sec;
    uint64_t read_lat_sum_us;
    uint64_t write_lat_sum_us;
    hipFileOpCounter_t batch_submit_ops;
    hipFileOpCounter_t batch_complete_ops;
    hipFileOpCounter_t batch_setup_ops;
    hipFileOpCounter_t batch_cancel_ops;
    hipFileOpCounter_t batch_destroy_ops;
    hipFileOpCounter_t batch_enqueued_ops;
    hipFileOpCounter_t batch_posix_enqueued_ops;
    hipFileOpCounter_t batch_processed_ops;
    hipFileOpCounter_t batch_posix_processed_ops;
    hipFileOpCounter_t batch_nvfs_submit_ops;
    hipFileOpCounter_t batch_p2p_submit_ops;
    hipFileOpCounter_t batch_aio_submit_ops;
    hipFileOpCounter_t batch_iouring_submit_ops;
    hipFileOpCounter_t batch_mixed_io_submit_ops;
    hipFileOpCounter_t batch_total_submit_ops;
    uint64_t batch_read_bytes;
    uint64_t batch_write_bytes;
    uint64_t batch_read_bw_bytes;
    uint64_t batch_write_bw_bytes;
    uint64_t batch_submit_lat_avg_us;
    uint64_t batch_completion_lat_avg_us;
    uint64_t batch_submit_ops_per_sec;
    uint64_t batch_complete_ops_per_sec;
    uint64_t batch_submit_lat_sum_us;
    uint64_t batch_completion_lat_sum_us;
    uint64_t last_batch_read_bytes;
    uint64_t last_batch_write_bytes;
} hipFileStatsLevel1_t;

/* Level 2: level 1 and request-size histograms (KiB buckets). */
typedef struct hipFileStatsLevel2 {
    hipFileStatsLevel1_t basic;
    uint64_t read_size_kb_hist[32];
    uint64_t write_size_kb_hist[32];
} hipFileStatsLevel2_t;

/* One GPU's counters. */
typedef struct hipFilePerGpuStats {
    char uuid[HIPFILE_GPU_UUID_LEN];
    uint64_t read_bytes;
    uint64_t read_bw_bytes_per_sec;
    uint64_t read_utilization;
    uint64_t read_duration_us;
    uint64_t n_total_reads;
    uint64_t n_p2p_reads;
    uint64_t n_nvfs_reads;
    uint64_t n_posix_reads;
    uint64_t n_unaligned_reads;
    uint64_t n_dr_reads;
    uint64_t n_sparse_regions;
    uint64_t n_inline_regions;
    uint64_t n_reads_err;
    uint64_t write_bytes;
    uint64_t write_bw_bytes_per_sec;
    uint64_t write_utilization;
    uint64_t write_duration_us;
    uint64_t n_total_writes;
    uint64_t n_p2p_writes;
    uint64_t n_nvfs_writes;
    uint64_t n_posix_writes;
    uint64_t n_unaligned_writes;
    uint64_t n_dr_writes;
    uint64_t n_writes_err;
    uint64_t n_mmap;
    uint64_t n_mmap_ok;
    uint64_t n_mmap_err;
    uint64_t n_mmap_free;
    uint64_t reg_bytes;
} hipFilePerGpuStats_t;

/* Level 3: level 2 and per-GPU counters for the first num_gpus entries. */
typedef struct hipFileStatsLevel3 {
    hipFileStatsLevel2_t detailed;
    uint32_t num_gpus;
    hipFilePerGpuStats_t per_gpu_stats[HIPFILE_MAX_GPUS];
} hipFileStatsLevel3_t;

/* The counters of HIPFILE_STATS_LEVEL (read when the driver opens): level 1 counts requests,
 * bytes, time and registrations, 2 adds the size histograms (bucket 0: below 2 KiB; bucket i:
 * 2^i KiB up to 2^(i+1) KiB; the last: everything larger), 3 each GPU (entry i is device i).
 * Figures not counted (batch, UUID, utilisation, nvfs, direct, sparse, inline, mmap, reg_bytes)
 * are 0. Errors: hipFileInvalidValue for
 * NULL or a level below the one asked for, hipFileDriverNotInitialized while the driver is
 * not open. */
HIPFILE_API hipFileError_t hipFileGetStatsL1(hipFileStatsLevel1_t *stats);
HIPFILE_API hipFileError_t hipFileGetStatsL2(hipFileStatsLevel2_t *stats);
HIPFILE_API hipFileError_t hipFileGetStatsL3(hipFileStatsLevel3_t *stats);

#ifdef __cplusplus
}
#endif

#endif /* HIPFILE_H */
