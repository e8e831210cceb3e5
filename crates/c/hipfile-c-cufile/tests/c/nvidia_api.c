/*
 * A program written for NVIDIA's cufile.h (cuFile 1.17), as NVIDIA's samples are: it
 * includes CUDA's headers and cufile.h in the order INCLUDE_ORDER names, takes every
 * function of the interface into a pointer of exactly the type NVIDIA's header declares it
 * with (a declaration of another type is an error in C++ and, with -Werror, in C), and uses
 * the macros, types and values a cuFile program uses. tests/nvidia.rs compiles it against
 * NVIDIA's header (to show the program is right) and against ours, as C and as C++, in each
 * order, with CUDA's own headers on the include path. It is compiled, not run.
 */
#if INCLUDE_ORDER == 1 /* cufile.h first, then CUDA's driver and runtime headers */
#include <cufile.h>
#include <cuda.h>
#include <cuda_runtime.h>
#elif INCLUDE_ORDER == 2 /* CUDA's headers first */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cufile.h>
#elif INCLUDE_ORDER == 3 /* the runtime's header only, before cufile.h */
#include <cuda_runtime.h>
#include <cufile.h>
#else
#error "INCLUDE_ORDER must be 1, 2 or 3"
#endif

#include <stdio.h>

/* Every function, with NVIDIA's prototype. cuFileDriverClose is a macro for
 * cuFileDriverClose_v2 in NVIDIA's header, so both names give the same pointer here. */
static CUfileError_t (*const handle_register)(CUfileHandle_t *, CUfileDescr_t *) = cuFileHandleRegister;
static void (*const handle_deregister)(CUfileHandle_t) = cuFileHandleDeregister;
static CUfileError_t (*const buf_register)(const void *, size_t, int) = cuFileBufRegister;
static CUfileError_t (*const buf_deregister)(const void *) = cuFileBufDeregister;
static ssize_t (*const read_fn)(CUfileHandle_t, void *, size_t, off_t, off_t) = cuFileRead;
static ssize_t (*const write_fn)(CUfileHandle_t, const void *, size_t, off_t, off_t) = cuFileWrite;
static CUfileError_t (*const driver_open)(void) = cuFileDriverOpen;
static CUfileError_t (*const driver_close)(void) = cuFileDriverClose;
static CUfileError_t (*const driver_close_v2)(void) = cuFileDriverClose_v2;
static long (*const use_count)(void) = cuFileUseCount;
static CUfileError_t (*const get_properties)(CUfileDrvProps_t *) = cuFileDriverGetProperties;
static CUfileError_t (*const set_poll_mode)(bool, size_t) = cuFileDriverSetPollMode;
static CUfileError_t (*const set_max_direct_io)(size_t) = cuFileDriverSetMaxDirectIOSize;
static CUfileError_t (*const set_max_cache)(size_t) = cuFileDriverSetMaxCacheSize;
static CUfileError_t (*const set_max_pinned)(size_t) = cuFileDriverSetMaxPinnedMemSize;
static CUfileError_t (*const batch_setup)(CUfileBatchHandle_t *, unsigned) = cuFileBatchIOSetUp;
static CUfileError_t (*const batch_submit)(CUfileBatchHandle_t, unsigned, CUfileIOParams_t *, unsigned int) = cuFileBatchIOSubmit;
static CUfileError_t (*const batch_status)(CUfileBatchHandle_t, unsigned, unsigned *, CUfileIOEvents_t *, struct timespec *) = cuFileBatchIOGetStatus;
static CUfileError_t (*const batch_cancel)(CUfileBatchHandle_t) = cuFileBatchIOCancel;
static void (*const batch_destroy)(CUfileBatchHandle_t) = cuFileBatchIODestroy;
static CUfileError_t (*const read_async)(CUfileHandle_t, void *, size_t *, off_t *, off_t *, ssize_t *, CUstream) = cuFileReadAsync;
static CUfileError_t (*const write_async)(CUfileHandle_t, void *, size_t *, off_t *, off_t *, ssize_t *, CUstream) = cuFileWriteAsync;
static CUfileError_t (*const stream_register)(CUstream, unsigned) = cuFileStreamRegister;
static CUfileError_t (*const stream_deregister)(CUstream) = cuFileStreamDeregister;
static CUfileError_t (*const get_version)(int *) = cuFileGetVersion;
static CUfileError_t (*const get_size_t)(CUFileSizeTConfigParameter_t, size_t *) = cuFileGetParameterSizeT;
static CUfileError_t (*const get_bool)(CUFileBoolConfigParameter_t, bool *) = cuFileGetParameterBool;
static CUfileError_t (*const get_string)(CUFileStringConfigParameter_t, char *, int) = cuFileGetParameterString;
static CUfileError_t (*const get_min_max)(CUFileSizeTConfigParameter_t, size_t *, size_t *) = cuFileGetParameterMinMaxValue;
static CUfileError_t (*const set_size_t)(CUFileSizeTConfigParameter_t, size_t) = cuFileSetParameterSizeT;
static CUfileError_t (*const set_bool)(CUFileBoolConfigParameter_t, bool) = cuFileSetParameterBool;
static CUfileError_t (*const set_string)(CUFileStringConfigParameter_t, const char *) = cuFileSetParameterString;
static CUfileError_t (*const set_stats_level)(int) = cuFileSetStatsLevel;
static CUfileError_t (*const get_stats_level)(int *) = cuFileGetStatsLevel;
static CUfileError_t (*const get_stats_l1)(CUfileStatsLevel1_t *) = cuFileGetStatsL1;
static CUfileError_t (*const get_stats_l2)(CUfileStatsLevel2_t *) = cuFileGetStatsL2;
static CUfileError_t (*const get_stats_l3)(CUfileStatsLevel3_t *) = cuFileGetStatsL3;
static CUfileError_t (*const stats_start)(void) = cuFileStatsStart;
static CUfileError_t (*const stats_stop)(void) = cuFileStatsStop;
static CUfileError_t (*const stats_reset)(void) = cuFileStatsReset;
static CUfileError_t (*const bar_size)(int, size_t *) = cuFileGetBARSizeInKB;
static CUfileError_t (*const set_posix_slabs)(const size_t *, const size_t *, int) = cuFileSetParameterPosixPoolSlabArray;
static CUfileError_t (*const get_posix_slabs)(size_t *, size_t *, int) = cuFileGetParameterPosixPoolSlabArray;
static CUfileError_t (*const set_gpu_slabs)(const size_t *, const size_t *, int) = cuFileSetParameterGpuBounceBufferSlabArray;
static CUfileError_t (*const get_gpu_slabs)(size_t *, size_t *, int) = cuFileGetParameterGpuBounceBufferSlabArray;
static CUfileError_t (*const get_p2p)(CUfileDriverStatusFlags_t, CUfileP2PFlags_t *) = cuFileDriverGetP2PFlags;
static CUfileError_t (*const set_p2p)(CUfileDriverStatusFlags_t, CUfileP2PFlags_t) = cuFileDriverSetP2PFlags;
static CUfileError_t (*const export_topology)(const char *) = cuFileExportPCIeTopology;

/* A user-space file system's operations, typed as cuFile 1.17 types them. */
static const char *fs_type(const void *handle)
{
    (void)handle;
    return "none";
}

static ssize_t fs_read(const void *handle, char *buf, size_t size, loff_t offset,
                       const cufileRDMAInfo_t *info)
{
    (void)handle, (void)buf, (void)size, (void)offset, (void)info;
    return -1;
}

int main(void)
{
    const void *const functions[] = {
        (const void *)handle_register, (const void *)handle_deregister,
        (const void *)buf_register, (const void *)buf_deregister, (const void *)read_fn,
        (const void *)write_fn, (const void *)driver_open, (const void *)driver_close,
        (const void *)driver_close_v2, (const void *)use_count, (const void *)get_properties,
        (const void *)set_poll_mode, (const void *)set_max_direct_io,
        (const void *)set_max_cache, (const void *)set_max_pinned, (const void *)batch_setup,
        (const void *)batch_submit, (const void *)batch_status, (const void *)batch_cancel,
        (const void *)batch_destroy, (const void *)read_async, (const void *)write_async,
        (const void *)stream_register, (const void *)stream_deregister,
        (const void *)get_version, (const void *)get_size_t, (const void *)get_bool,
        (const void *)get_string, (const void *)get_min_max, (const void *)set_size_t,
        (const void *)set_bool, (const void *)set_string, (const void *)set_stats_level,
        (const void *)get_stats_level, (const void *)get_stats_l1, (const void *)get_stats_l2,
        (const void *)get_stats_l3,
        (const void *)stats_start, (const void *)stats_stop, (const void *)stats_reset,
        (const void *)bar_size, (const void *)set_posix_slabs, (const void *)get_posix_slabs,
        (const void *)set_gpu_slabs, (const void *)get_gpu_slabs, (const void *)get_p2p,
        (const void *)set_p2p, (const void *)export_topology,
    };

    /* The status macros, on a status and on a negated read return. */
    CUfileError_t status = {CU_FILE_CUDA_DRIVER_ERROR, CUDA_ERROR_INVALID_VALUE};
    int code = status.err;
    int ret = -CU_FILE_INVALID_VALUE;
    if (!IS_CUFILE_ERR(code) || !IS_CUDA_ERR(status) ||
        CU_FILE_CUDA_ERR(status) != CUDA_ERROR_INVALID_VALUE || !IS_CUFILE_ERR(ret))
        return 1;
    printf("%s; %s; %s\n", CUFILE_ERRSTR(code), CUFILE_ERRSTR(ret),
           cufileop_status_error(CU_FILE_SUCCESS));

    /* The types a program fills in, with cuFile's names. */
    CUfileDescr_t descr = {CU_FILE_HANDLE_TYPE_OPAQUE_FD, {0}, NULL};
    CUfileFSOps_t ops = {fs_type, NULL, NULL, fs_read, NULL};
    CUfileIOParams_t params;
    params.mode = CUFILE_BATCH;
    params.opcode = CUFILE_READ;
    params.u.batch.devPtr_base = NULL;
    CUfileIOEvents_t event = {NULL, CUFILE_COMPLETE, 0};
    CUfileDrvProps_t props;
    props.nvfs.dcontrolflags = 1u << CU_FILE_ALLOW_COMPAT_MODE;
    props.fflags = 1u << CU_FILE_BATCH_IO_SUPPORTED;
    CUfileStatsLevel3_t stats;
    stats.num_gpus = 0;
    sockaddr_t *address = NULL;
    cufileRDMAInfo_t rdma = {1, 0, NULL};
    unsigned flags = CU_FILE_STREAM_FIXED_BUF_OFFSET | CU_FILE_STREAM_PAGE_ALIGNED_INPUTS;
    CUfileP2PFlags_t p2p = CU_FILE_P2P_FLAG_PCI_P2PDMA;
    CUFileArrayConfigParameter_t array = CUFILE_PARAM_POSIX_POOL_SLAB_COUNT;
    CUfileDriverStatusFlags_t kind = CU_FILE_VIRTIOFS_SUPPORTED;
    (void)p2p, (void)array, (void)kind;
    descr.fs_ops = &ops;
    cudaStream_t runtime_stream = NULL;
    CUstream driver_stream = runtime_stream;
    (void)driver_stream, (void)params, (void)event, (void)props, (void)stats, (void)address;
    (void)rdma, (void)flags, (void)descr;
    return (int)(sizeof functions / sizeof functions[0]) > 0 ? 0 : 1;
}
