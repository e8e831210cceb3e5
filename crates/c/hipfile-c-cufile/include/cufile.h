/*
 * cufile.h: the C interface of hipfile's libcufile.so.0, declared compatibly with NVIDIA's
 * cuFile 1.17 (the cuFile of PyTorch's CUDA 13 wheels; CUDA 13.0's toolkit has 1.15, whose
 * layouts are the same): the same function names, enum values and struct layouts, so a
 * program built against NVIDIA's cufile.h links against, or loads, this library unchanged. Every request is served by hipfile (on NVIDIA GPUs by its fallback:
 * no GPUDirect peer-to-peer).
 *
 * Which functions the library exports is listed in crates/c/hipfile-c-cufile/README.md; only
 * those are declared here. docs/decisions/cufile-abi.md says what differs from
 * NVIDIA's library.
 *
 * CUDA types. The header needs CUresult and CUstream from CUDA. Where the compiler finds
 * CUDA's <cuda.h> (__has_include), this header includes it, as NVIDIA's does, so CUDA's own
 * types are used and <cuda.h> or <cuda_runtime.h> may come before or after this header.
 * Where it does not (no CUDA toolkit on the include path, or a compiler without
 * __has_include and no <cuda.h> included first), this header declares ABI-compatible
 * stand-ins (CUresult as int, CUstream as a pointer to the incomplete struct CUstream_st, as
 * CUDA does) and defines HIPFILE_CUFILE_DECLARED_CUDA_TYPES.
 */

#ifndef HIPFILE_CUFILE_H
#define HIPFILE_CUFILE_H

#include <arpa/inet.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

struct sockaddr;
struct timespec;

/* A socket address, as the user-space file-system operations name it. */
typedef struct sockaddr sockaddr_t;

#if !defined(__cuda_cuda_h__) && defined(__has_include)
#if __has_include(<cuda.h>)
#include <cuda.h>
#endif
#endif

#if !defined(__cuda_cuda_h__) && !defined(HIPFILE_CUFILE_DECLARED_CUDA_TYPES)
#define HIPFILE_CUFILE_DECLARED_CUDA_TYPES 1
/* A CUDA driver API status; 0 (CUDA_SUCCESS) is success. An enum in CUDA, with int's ABI. */
typedef int CUresult;
/* A CUDA stream; NULL is the null stream. */
typedef struct CUstream_st *CUstream;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------- */

/* cuFile's own codes start above this value. */
#define CUFILEOP_BASE_ERR 5000

/*
 * Status codes, hipFile's numbers one for one. Functions returning ssize_t return a code
 * negated; -1 there means a system error, with errno set. 5021 and 5032 are not used.
 */
typedef enum CUfileOpError {
    CU_FILE_SUCCESS = 0,
    CU_FILE_DRIVER_NOT_INITIALIZED = 5001,
    CU_FILE_DRIVER_INVALID_PROPS = 5002,
    CU_FILE_DRIVER_UNSUPPORTED_LIMIT = 5003,
    CU_FILE_DRIVER_VERSION_MISMATCH = 5004,
    CU_FILE_DRIVER_VERSION_READ_ERROR = 5005,
    CU_FILE_DRIVER_CLOSING = 5006,
    CU_FILE_PLATFORM_NOT_SUPPORTED = 5007,
    CU_FILE_IO_NOT_SUPPORTED = 5008,
    CU_FILE_DEVICE_NOT_SUPPORTED = 5009,
    CU_FILE_NVFS_DRIVER_ERROR = 5010,
    CU_FILE_CUDA_DRIVER_ERROR = 5011, /* cu_err holds the CUresult */
    CU_FILE_CUDA_POINTER_INVALID = 5012,
    CU_FILE_CUDA_MEMORY_TYPE_INVALID = 5013,
    CU_FILE_CUDA_POINTER_RANGE_ERROR = 5014,
    CU_FILE_CUDA_CONTEXT_MISMATCH = 5015,
    CU_FILE_INVALID_MAPPING_SIZE = 5016,
    CU_FILE_INVALID_MAPPING_RANGE = 5017,
    CU_FILE_INVALID_FILE_TYPE = 5018,
    CU_FILE_INVALID_FILE_OPEN_FLAG = 5019,
    CU_FILE_DIO_NOT_SET = 5020,
    CU_FILE_INVALID_VALUE = 5022,
    CU_FILE_MEMORY_ALREADY_REGISTERED = 5023,
    CU_FILE_MEMORY_NOT_REGISTERED = 5024,
    CU_FILE_PERMISSION_DENIED = 5025,
    CU_FILE_DRIVER_ALREADY_OPEN = 5026,
    CU_FILE_HANDLE_NOT_REGISTERED = 5027,
    CU_FILE_HANDLE_ALREADY_REGISTERED = 5028,
    CU_FILE_DEVICE_NOT_FOUND = 5029,
    CU_FILE_INTERNAL_ERROR = 5030,
    CU_FILE_GETNEWFD_FAILED = 5031,
    CU_FILE_NVFS_SETUP_ERROR = 5033,
    CU_FILE_IO_DISABLED = 5034,
    CU_FILE_BATCH_SUBMIT_FAILED = 5035,
    CU_FILE_GPU_MEMORY_PINNING_FAILED = 5036,
    CU_FILE_BATCH_FULL = 5037,
    CU_FILE_ASYNC_NOT_SUPPORTED = 5038,
    CU_FILE_INTERNAL_BATCH_SETUP_ERROR = 5039,
    CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR = 5040,
    CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR = 5041,
    CU_FILE_INTERNAL_BATCH_CANCEL_ERROR = 5042,
    CU_FILE_NOMEM_ERROR = 5043,
    CU_FILE_IO_ERROR = 5044,
    CU_FILE_INTERNAL_BUF_REGISTER_ERROR = 5045,
    CU_FILE_HASH_OPR_ERROR = 5046,
    CU_FILE_INVALID_CONTEXT_ERROR = 5047,
    CU_FILE_NVFS_INTERNAL_DRIVER_ERROR = 5048,
    CU_FILE_BATCH_NOCOMPAT_ERROR = 5049,
    CU_FILE_IO_MAX_ERROR = 5050
} CUfileOpError;

/* What the functions that do not move bytes return, by value. */
typedef struct CUfileError {
    CUfileOpError err;
    CUresult cu_err; /* CUDA's status when err is CU_FILE_CUDA_DRIVER_ERROR, else 0 */
} CUfileError_t;

/* The text of a status code: cuFile's own words for each code. */
static inline const char *cufileop_status_error(CUfileOpError status)
{
    switch (status) {
    case CU_FILE_SUCCESS: return "cufile success";
    case CU_FILE_DRIVER_NOT_INITIALIZED:
        return "nvidia-fs driver is not loaded. Set allow_compat_mode to true in cufile.json "
               "file to enable compatible mode";
    case CU_FILE_DRIVER_INVALID_PROPS: return "invalid property";
    case CU_FILE_DRIVER_UNSUPPORTED_LIMIT: return "property range error";
    case CU_FILE_DRIVER_VERSION_MISMATCH: return "nvidia-fs driver version mismatch";
    case CU_FILE_DRIVER_VERSION_READ_ERROR: return "nvidia-fs driver version read error";
    case CU_FILE_DRIVER_CLOSING: return "driver shutdown in progress";
    case CU_FILE_PLATFORM_NOT_SUPPORTED:
        return "GPUDirect Storage not supported on current platform";
    case CU_FILE_IO_NOT_SUPPORTED: return "GPUDirect Storage not supported on current file";
    case CU_FILE_DEVICE_NOT_SUPPORTED: return "GPUDirect Storage not supported on current GPU";
    case CU_FILE_NVFS_DRIVER_ERROR: return "nvidia-fs driver ioctl error";
    case CU_FILE_CUDA_DRIVER_ERROR: return "CUDA Driver API error";
    case CU_FILE_CUDA_POINTER_INVALID: return "invalid device pointer";
    case CU_FILE_CUDA_MEMORY_TYPE_INVALID: return "invalid pointer memory type";
    case CU_FILE_CUDA_POINTER_RANGE_ERROR:
        return "pointer range exceeds allocated address range";
    case CU_FILE_CUDA_CONTEXT_MISMATCH: return "cuda context mismatch";
    case CU_FILE_INVALID_MAPPING_SIZE: return "access beyond maximum pinned size";
    case CU_FILE_INVALID_MAPPING_RANGE: return "access beyond mapped size";
    case CU_FILE_INVALID_FILE_TYPE: return "unsupported file type";
    case CU_FILE_INVALID_FILE_OPEN_FLAG: return "unsupported file open flags";
    case CU_FILE_DIO_NOT_SET: return "fd direct IO not set";
    case CU_FILE_INVALID_VALUE: return "invalid arguments";
    case CU_FILE_MEMORY_ALREADY_REGISTERED: return "device pointer already registered";
    case CU_FILE_MEMORY_NOT_REGISTERED: return "device pointer lookup failure";
    case CU_FILE_PERMISSION_DENIED: return "driver or file access error";
    case CU_FILE_DRIVER_ALREADY_OPEN: return "driver is already open";
    case CU_FILE_HANDLE_NOT_REGISTERED: return "file descriptor is not registered";
    case CU_FILE_HANDLE_ALREADY_REGISTERED: return "file descriptor is already registered";
    case CU_FILE_DEVICE_NOT_FOUND: return "GPU device not found";
    case CU_FILE_INTERNAL_ERROR: return "internal error";
    case CU_FILE_GETNEWFD_FAILED: return "failed to obtain new file descriptor";
    case CU_FILE_NVFS_SETUP_ERROR: return "NVFS driver initialization error";
    case CU_FILE_IO_DISABLED:
        return "GPUDirect Storage disabled by config on current file";
    case CU_FILE_BATCH_SUBMIT_FAILED: return "failed to submit batch operation";
    case CU_FILE_GPU_MEMORY_PINNING_FAILED: return "failed to allocate pinned GPU Memory";
    case CU_FILE_BATCH_FULL: return "queue full for batch operation";
    case CU_FILE_ASYNC_NOT_SUPPORTED: return "cuFile stream operation not supported";
    case CU_FILE_INTERNAL_BATCH_SETUP_ERROR: return "batch setup internal error - retry later";
    case CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR: return "batch submit internal error - retry later";
    case CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR:
        return "batch get status internal error - retry later";
    case CU_FILE_INTERNAL_BATCH_CANCEL_ERROR: return "batch cancel internal error - retry later";
    case CU_FILE_NOMEM_ERROR: return "cufile no memory error - retry later";
    case CU_FILE_IO_ERROR: return "cufile io error";
    case CU_FILE_INTERNAL_BUF_REGISTER_ERROR: return "cufile buf registration error";
    case CU_FILE_HASH_OPR_ERROR: return "cufile hash operation error";
    case CU_FILE_INVALID_CONTEXT_ERROR: return "cufile invalid context error";
    case CU_FILE_NVFS_INTERNAL_DRIVER_ERROR: return "nvfs internal driver error";
    case CU_FILE_BATCH_NOCOMPAT_ERROR: return "compat mode off error";
    case CU_FILE_IO_MAX_ERROR: return "GPUDirect Storage Max Error";
    default: return "unknown cufile error";
    }
}

/* Whether a return (a status code, or a ssize_t) is a cuFile code, negated or not. */
#define IS_CUFILE_ERR(err)                                                                    \
    ((long long)(err) > CUFILEOP_BASE_ERR || (long long)(err) < -CUFILEOP_BASE_ERR)
/* The text of a return that is a status code, negated or not (a ssize_t of cuFileRead). */
#define CUFILE_ERRSTR(err)                                                                    \
    cufileop_status_error(                                                                \
        (CUfileOpError)((long long)(err) < 0 ? -(long long)(err) : (long long)(err)))
#define IS_CUDA_ERR(status) ((status).err == CU_FILE_CUDA_DRIVER_ERROR)
#define CU_FILE_CUDA_ERR(status) ((status).cu_err)

/* ---------------------------------------------------------------------------------------
 * Driver
 * ------------------------------------------------------------------------------------- */

/* Bits of CUfileDrvProps_t.nvfs.dstatusflags (bit numbers). */
typedef enum CUfileDriverStatusFlags {
    CU_FILE_LUSTRE_SUPPORTED = 0,
    CU_FILE_WEKAFS_SUPPORTED = 1,
    CU_FILE_NFS_SUPPORTED = 2,
    CU_FILE_GPFS_SUPPORTED = 3,
    CU_FILE_NVME_SUPPORTED = 4,
    CU_FILE_NVMEOF_SUPPORTED = 5,
    CU_FILE_SCSI_SUPPORTED = 6,
    CU_FILE_SCALEFLUX_CSD_SUPPORTED = 7,
    CU_FILE_NVMESH_SUPPORTED = 8,
    CU_FILE_BEEGFS_SUPPORTED = 9,
    CU_FILE_NVME_P2P_SUPPORTED = 11,
    CU_FILE_SCATEFS_SUPPORTED = 12,
    CU_FILE_VIRTIOFS_SUPPORTED = 13,
    CU_FILE_MAX_TARGET_TYPES = 14 /* how many kinds there are */
} CUfileDriverStatusFlags_t;

/* Bits of CUfileDrvProps_t.nvfs.dcontrolflags. */
typedef enum CUfileDriverControlFlags {
    CU_FILE_USE_POLL_MODE = 0,
    CU_FILE_ALLOW_COMPAT_MODE = 1,
    CU_FILE_POSIX_IO_MODE = 2,
    CU_FILE_FALLBACK_IO_MODE = 4
} CUfileDriverControlFlags_t;

/* Bits of CUfileDrvProps_t.fflags. */
typedef enum CUfileFeatureFlags {
    CU_FILE_DYN_ROUTING_SUPPORTED = 0,
    CU_FILE_BATCH_IO_SUPPORTED = 1,
    CU_FILE_STREAMS_SUPPORTED = 2,
    CU_FILE_PARALLEL_IO_SUPPORTED = 3,
    CU_FILE_P2P_SUPPORTED = 4
} CUfileFeatureFlags_t;

/* Bit numbers of a kind of storage's peer-to-peer flags (cuFileDriverGetP2PFlags). */
typedef enum CUfileP2PFlags {
    CUFILE_P2PDMA = 0,
    CUFILE_NVFS = 1,
    CUFILE_DMABUF = 2,
    CUFILE_C2C = 3,
    CUFILE_NVIDIA_PEERMEM = 4
} CUfileP2PFlags_t;

#define CU_FILE_P2P_FLAG_PCI_P2PDMA ((CUfileP2PFlags_t)(1 << CUFILE_P2PDMA))
#define CU_FILE_P2P_FLAG_NVFS ((CUfileP2PFlags_t)(1 << CUFILE_NVFS))
#define CU_FILE_P2P_FLAG_DMABUF ((CUfileP2PFlags_t)(1 << CUFILE_DMABUF))
#define CU_FILE_P2P_FLAG_C2C ((CUfileP2PFlags_t)(1 << CUFILE_C2C))

/* The open driver's properties. Sizes in KiB; those after nvfs are 32-bit (hipFile's are
 * 64-bit: the one layout of the two interfaces that differs). */
typedef struct CUfileDrvProps {
    struct {
        unsigned int major_version;
        unsigned int minor_version;
        size_t poll_thresh_size;
        size_t max_direct_io_size;
        unsigned int dstatusflags;
        unsigned int dcontrolflags;
    } nvfs;
    unsigned int fflags;
    unsigned int max_device_cache_size;
    unsigned int per_buffer_cache_size;
    unsigned int max_device_pinned_mem_size;
    unsigned int max_batch_io_size;
    unsigned int max_batch_io_timeout_msecs;
} CUfileDrvProps_t;

/* Opens the driver (use count + 1). */
CUfileError_t cuFileDriverOpen(void);
/* Closes it (use count - 1); at 0 every buffer, then every file registration ends. The two
 * names are one function; as in NVIDIA's header, a call of cuFileDriverClose compiles to
 * cuFileDriverClose_v2. */
CUfileError_t cuFileDriverClose(void);
CUfileError_t cuFileDriverClose_v2(void);
#define cuFileDriverClose cuFileDriverClose_v2
/* The use count. */
long cuFileUseCount(void);
CUfileError_t cuFileDriverGetProperties(CUfileDrvProps_t *props);
CUfileError_t cuFileDriverSetPollMode(bool poll, size_t poll_threshold_size);
CUfileError_t cuFileDriverSetMaxDirectIOSize(size_t max_direct_io_size);
CUfileError_t cuFileDriverSetMaxCacheSize(size_t max_cache_size);
CUfileError_t cuFileDriverSetMaxPinnedMemSize(size_t max_pinned_size);
/* The cuFile interface version, 1000 * major + 10 * minor (1170 here). */
CUfileError_t cuFileGetVersion(int *version);
/* The PCIe topology as JSON: hipfile detects none, so this returns CU_FILE_INTERNAL_ERROR
 * (CU_FILE_INVALID_VALUE for NULL or ""). */
CUfileError_t cuFileExportPCIeTopology(const char *filename);
/* The peer-to-peer flags of a kind of storage (a CUfileDriverStatusFlags_t value): P2PDMA
 * for local NVMe where hipfile's fastpath serves, else 0, or what was set. Setting records
 * the flags (only CU_FILE_P2P_FLAG_PCI_P2PDMA, or 0). Both need the driver open. */
CUfileError_t cuFileDriverGetP2PFlags(CUfileDriverStatusFlags_t status_flag,
                                      CUfileP2PFlags_t *p2p_flags);
CUfileError_t cuFileDriverSetP2PFlags(CUfileDriverStatusFlags_t status_flag,
                                      CUfileP2PFlags_t p2p_flags);

/* ---------------------------------------------------------------------------------------
 * Files and buffers
 * ------------------------------------------------------------------------------------- */

typedef struct cufileRDMAInfo {
    int version;
    int desc_len;
    const char *desc_str;
} cufileRDMAInfo_t;

#define CU_FILE_RDMA_REGISTER 1
#define CU_FILE_RDMA_RELAXED_ORDERING (1 << 1)

/* A user-space file system's operations (never called by this library), as cuFile 1.17
 * types them. cuFile writes loff_t for the offsets, the same 64-bit type as off_t on Linux. */
typedef struct CUfileFSOps {
    const char *(*fs_type)(const void *handle);
    int (*getRDMADeviceList)(const void *handle, sockaddr_t **hostaddrs);
    int (*getRDMADevicePriority)(const void *handle, char *, size_t, off_t,
                                 const sockaddr_t *hostaddr);
    ssize_t (*read)(const void *handle, char *, size_t, off_t, const cufileRDMAInfo_t *);
    ssize_t (*write)(const void *handle, const char *, size_t, off_t, const cufileRDMAInfo_t *);
} CUfileFSOps_t;

enum CUfileFileHandleType {
    CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1,    /* a Linux descriptor: the only one served */
    CU_FILE_HANDLE_TYPE_OPAQUE_WIN32 = 2,
    CU_FILE_HANDLE_TYPE_USERSPACE_FS = 3
};

/* What to register; zero it first. */
typedef struct CUfileDescr_t {
    enum CUfileFileHandleType type;
    union {
        int fd;
        void *handle;
    } handle;
    const CUfileFSOps_t *fs_ops;
} CUfileDescr_t;

/* A registered file. */
typedef void *CUfileHandle_t;

CUfileError_t cuFileHandleRegister(CUfileHandle_t *fh, CUfileDescr_t *descr);
void cuFileHandleDeregister(CUfileHandle_t fh);
CUfileError_t cuFileBufRegister(const void *bufPtr_base, size_t length, int flags);
CUfileError_t cuFileBufDeregister(const void *bufPtr_base);

/* ---------------------------------------------------------------------------------------
 * Synchronous I/O: bytes moved, or -1 with errno, or a negated CUfileOpError. The whole
 * size moves (fewer bytes only at the end of the file), also beyond 2 GiB.
 * ------------------------------------------------------------------------------------- */

ssize_t cuFileRead(CUfileHandle_t fh, void *bufPtr_base, size_t size, off_t file_offset,
                   off_t bufPtr_offset);
ssize_t cuFileWrite(CUfileHandle_t fh, const void *bufPtr_base, size_t size, off_t file_offset,
                    off_t bufPtr_offset);

/* ---------------------------------------------------------------------------------------
 * Batch I/O
 * ------------------------------------------------------------------------------------- */

typedef enum CUfileOpcode { CUFILE_READ = 0, CUFILE_WRITE = 1 } CUfileOpcode_t;

typedef enum CUFILEStatus_enum {
    CUFILE_WAITING = 0x01,
    CUFILE_PENDING = 0x02,
    CUFILE_INVALID = 0x04,
    CUFILE_CANCELED = 0x08,
    CUFILE_COMPLETE = 0x10,
    CUFILE_TIMEOUT = 0x20,
    CUFILE_FAILED = 0x40
} CUfileStatus_t;

typedef enum cufileBatchMode { CUFILE_BATCH = 1 } CUfileBatchMode_t;

typedef struct CUfileIOParams {
    CUfileBatchMode_t mode;
    union {
        struct {
            void *devPtr_base;
            off_t file_offset;
            off_t devPtr_offset;
            size_t size;
        } batch;
    } u;
    CUfileHandle_t fh;
    CUfileOpcode_t opcode;
    void *cookie;
} CUfileIOParams_t;

typedef struct CUfileIOEvents {
    void *cookie;
    CUfileStatus_t status;
    size_t ret; /* bytes moved, or a negated code as cuFileRead returns it */
} CUfileIOEvents_t;

typedef void *CUfileBatchHandle_t;

CUfileError_t cuFileBatchIOSetUp(CUfileBatchHandle_t *batch_idp, unsigned nr);
CUfileError_t cuFileBatchIOSubmit(CUfileBatchHandle_t batch_idp, unsigned nr,
                                  CUfileIOParams_t *iocbp, unsigned int flags);
CUfileError_t cuFileBatchIOGetStatus(CUfileBatchHandle_t batch_idp, unsigned min_nr,
                                     unsigned *nr, CUfileIOEvents_t *iocbp,
                                     struct timespec *timeout);
CUfileError_t cuFileBatchIOCancel(CUfileBatchHandle_t batch_idp);
void cuFileBatchIODestroy(CUfileBatchHandle_t batch_idp);

/* ---------------------------------------------------------------------------------------
 * Stream-ordered I/O
 * ------------------------------------------------------------------------------------- */

#define CU_FILE_STREAM_FIXED_BUF_OFFSET 1
#define CU_FILE_STREAM_FIXED_FILE_OFFSET 2
#define CU_FILE_STREAM_FIXED_FILE_SIZE 4
#define CU_FILE_STREAM_PAGE_ALIGNED_INPUTS 8

CUfileError_t cuFileReadAsync(CUfileHandle_t fh, void *bufPtr_base, size_t *size_p,
                              off_t *file_offset_p, off_t *bufPtr_offset_p,
                              ssize_t *bytes_read_p, CUstream stream);
CUfileError_t cuFileWriteAsync(CUfileHandle_t fh, void *bufPtr_base, size_t *size_p,
                               off_t *file_offset_p, off_t *bufPtr_offset_p,
                               ssize_t *bytes_written_p, CUstream stream);
CUfileError_t cuFileStreamRegister(CUstream stream, unsigned flags);
CUfileError_t cuFileStreamDeregister(CUstream stream);

/* ---------------------------------------------------------------------------------------
 * Parameters
 * ------------------------------------------------------------------------------------- */

typedef enum CUFileSizeTConfigParameter_t {
    CUFILE_PARAM_PROFILE_STATS = 0,
    CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH = 1,
    CUFILE_PARAM_EXECUTION_MAX_IO_THREADS = 2,
    CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB = 3,
    CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM = 4,
    CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB = 5,
    CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB = 6,
    CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB = 7,
    CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB = 8,
    CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE = 9,
    CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB = 10,
    CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS = 11
} CUFileSizeTConfigParameter_t;

typedef enum CUFileBoolConfigParameter_t {
    CUFILE_PARAM_PROPERTIES_USE_POLL_MODE = 0,
    CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE = 1,
    CUFILE_PARAM_FORCE_COMPAT_MODE = 2,
    CUFILE_PARAM_FS_MISC_API_CHECK_AGGRESSIVE = 3,
    CUFILE_PARAM_EXECUTION_PARALLEL_IO = 4,
    CUFILE_PARAM_PROFILE_NVTX = 5,
    CUFILE_PARAM_PROPERTIES_ALLOW_SYSTEM_MEMORY = 6,
    CUFILE_PARAM_USE_PCIP2PDMA = 7,
    CUFILE_PARAM_PREFER_IO_URING = 8,
    CUFILE_PARAM_FORCE_ODIRECT_MODE = 9,
    CUFILE_PARAM_SKIP_TOPOLOGY_DETECTION = 10,
    CUFILE_PARAM_STREAM_MEMOPS_BYPASS = 11
} CUFileBoolConfigParameter_t;

typedef enum CUFileStringConfigParameter_t {
    CUFILE_PARAM_LOGGING_LEVEL = 0,
    CUFILE_PARAM_ENV_LOGFILE_PATH = 1,
    CUFILE_PARAM_LOG_DIR = 2
} CUFileStringConfigParameter_t;

typedef enum CUFileArrayConfigParameter_t {
    CUFILE_PARAM_POSIX_POOL_SLAB_SIZE_KB = 0,
    CUFILE_PARAM_POSIX_POOL_SLAB_COUNT = 1,
    CUFILE_PARAM_GPU_BOUNCE_BUFFER_SLAB_SIZE_KB = 2,
    CUFILE_PARAM_GPU_BOUNCE_BUFFER_SLAB_COUNT = 3
} CUFileArrayConfigParameter_t;

CUfileError_t cuFileGetParameterSizeT(CUFileSizeTConfigParameter_t param, size_t *value);
CUfileError_t cuFileGetParameterBool(CUFileBoolConfigParameter_t param, bool *value);
CUfileError_t cuFileGetParameterString(CUFileStringConfigParameter_t param, char *desc_str,
                                       int len);
/* The least and greatest value cuFileSetParameterSizeT accepts (both the value of a fixed
 * parameter). */
CUfileError_t cuFileGetParameterMinMaxValue(CUFileSizeTConfigParameter_t param,
                                            size_t *min_value, size_t *max_value);
CUfileError_t cuFileSetParameterSizeT(CUFileSizeTConfigParameter_t param, size_t value);
CUfileError_t cuFileSetParameterBool(CUFileBoolConfigParameter_t param, bool value);
CUfileError_t cuFileSetParameterString(CUFileStringConfigParameter_t param,
                                       const char *desc_str);

/* Slab arrays: len sizes (KiB, ascending multiples of 4) and counts (above 0), set before
 * the driver opens; a get's len must be the number of slabs. The POSIX pool's total bounds
 * hipfile's staging pool (unset, it reports that pool as one slab); GPU bounce-buffer slabs
 * are recorded and reported back (none until set). */
CUfileError_t cuFileSetParameterPosixPoolSlabArray(const size_t *size_values,
                                                   const size_t *count_values, int len);
CUfileError_t cuFileGetParameterPosixPoolSlabArray(size_t *size_values, size_t *count_values,
                                                   int len);
CUfileError_t cuFileSetParameterGpuBounceBufferSlabArray(const size_t *size_values,
                                                         const size_t *count_values, int len);
CUfileError_t cuFileGetParameterGpuBounceBufferSlabArray(size_t *size_values,
                                                         size_t *count_values, int len);

/* ---------------------------------------------------------------------------------------
 * Statistics. The level (0 to 3) is fixed when the driver opens: HIPFILE_STATS_LEVEL's,
 * unless cuFileSetStatsLevel (or CUFILE_PARAM_PROFILE_STATS) set another before the open.
 * ------------------------------------------------------------------------------------- */

CUfileError_t cuFileSetStatsLevel(int level);
CUfileError_t cuFileGetStatsLevel(int *level);

#define CUFILE_GPU_UUID_LEN 16

typedef struct CUfileOpCounter {
    uint64_t ok;
    uint64_t err;
} CUfileOpCounter_t;

typedef struct CUfileStatsLevel1 {
    CUfileOpCounter_t read_ops;
    CUfileOpCounter_t write_ops;
    CUfileOpCounter_t hdl_register_ops;
    CUfileOpCounter_t hdl_deregister_ops;
    CUfileOpCounter_t buf_register_ops;
    CUfileOpCounter_t buf_deregister_ops;
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
    CUfileOpCounter_t batch_submit_ops;
    CUfileOpCounter_t batch_complete_ops;
    CUfileOpCounter_t batch_setup_ops;
    CUfileOpCounter_t batch_cancel_ops;
    CUfileOpCounter_t batch_destroy_ops;
    CUfileOpCounter_t batch_enqueued_ops;
    CUfileOpCounter_t batch_posix_enqueued_ops;
    CUfileOpCounter_t batch_processed_ops;
    CUfileOpCounter_t batch_posix_processed_ops;
    CUfileOpCounter_t batch_nvfs_submit_ops;
    CUfileOpCounter_t batch_p2p_submit_ops;
    CUfileOpCounter_t batch_aio_submit_ops;
    CUfileOpCounter_t batch_iouring_submit_ops;
    CUfileOpCounter_t batch_mixed_io_submit_ops;
    CUfileOpCounter_t batch_total_submit_ops;
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
} CUfileStatsLevel1_t;

typedef struct CUfileStatsLevel2 {
    CUfileStatsLevel1_t basic;
    uint64_t read_size_kb_hist[32];
    uint64_t write_size_kb_hist[32];
} CUfileStatsLevel2_t;

typedef struct CUfilePerGpuStats {
    char uuid[CUFILE_GPU_UUID_LEN];
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
    uint64_t writes_bytes;
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
} CUfilePerGpuStats_t;

typedef struct CUfileStatsLevel3 {
    CUfileStatsLevel2_t detailed;
    uint32_t num_gpus;
    CUfilePerGpuStats_t per_gpu_stats[16];
} CUfileStatsLevel3_t;

/* Counting runs from the open at every level above 0. Stop pauses it (the figures so far
 * stay), Start resumes it, Reset sets every counter to 0. Each needs the driver open. */
CUfileError_t cuFileStatsStart(void);
CUfileError_t cuFileStatsStop(void);
CUfileError_t cuFileStatsReset(void);

CUfileError_t cuFileGetStatsL1(CUfileStatsLevel1_t *stats);
CUfileError_t cuFileGetStatsL2(CUfileStatsLevel2_t *stats);
CUfileError_t cuFileGetStatsL3(CUfileStatsLevel3_t *stats);

/* The BAR1 size of a device in KiB: neither CUDA's runtime nor HIP's tells it, so for a
 * device that exists this returns CU_FILE_PLATFORM_NOT_SUPPORTED. */
CUfileError_t cuFileGetBARSizeInKB(int gpuIndex, size_t *barSize);

#ifdef __cplusplus
}
#endif

#endif /* HIPFILE_CUFILE_H */
