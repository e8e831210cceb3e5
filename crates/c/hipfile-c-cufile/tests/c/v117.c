/*
 * The calls cuFile 1.15 and 1.17 added, as a cuFile program makes them, run against
 * libcufile.so.0 on the emulated HIP runtime: the version; the POSIX pool slabs (their total
 * bounds the staging pool, which the properties show) and the GPU bounce-buffer slabs
 * (reported back); statistics stopped, started again and reset, as the level-1 figures
 * show; the BAR size; the peer-to-peer flags of kinds of storage; the PCIe topology; and
 * each call's errors (closed driver, NULL, bad values). Usage: v117 DIR, where DIR is an
 * empty directory for its files. Exits 0 when every check passes. tests/basic.rs builds it
 * against our cufile.h and NVIDIA's 1.17.
 */

#include "cufile.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define N 4096

static unsigned char pattern[N];

static size_t size_param(CUFileSizeTConfigParameter_t p)
{
    size_t v = (size_t)-1;
    CHECK(IS(cuFileGetParameterSizeT(p, &v), CU_FILE_SUCCESS));
    return v;
}

static CUfileStatsLevel1_t level1(void)
{
    CUfileStatsLevel1_t s;
    memset(&s, 0xff, sizeof s);
    CHECK(IS(cuFileGetStatsL1(&s), CU_FILE_SUCCESS));
    return s;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: v117 DIR\n");
        return 2;
    }
    char path[4096], topology[4096];
    snprintf(path, sizeof path, "%s/data", argv[1]);
    snprintf(topology, sizeof topology, "%s/topology.json", argv[1]);

    int version = 0;
    CHECK(IS(cuFileGetVersion(&version), CU_FILE_SUCCESS) && version == 1170);

    /* With the driver closed: the calls that need it say so. */
    size_t bar = 7;
    CUfileP2PFlags_t flags = (CUfileP2PFlags_t)7;
    CHECK(IS(cuFileStatsStart(), CU_FILE_DRIVER_NOT_INITIALIZED));
    CHECK(IS(cuFileStatsStop(), CU_FILE_DRIVER_NOT_INITIALIZED));
    CHECK(IS(cuFileStatsReset(), CU_FILE_DRIVER_NOT_INITIALIZED));
    CHECK(IS(cuFileGetBARSizeInKB(0, &bar), CU_FILE_DRIVER_NOT_INITIALIZED) && bar == 7);
    CHECK(IS(cuFileGetBARSizeInKB(0, NULL), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileDriverGetP2PFlags(CU_FILE_NVME_SUPPORTED, &flags),
             CU_FILE_DRIVER_NOT_INITIALIZED));
    CHECK(IS(cuFileDriverSetP2PFlags(CU_FILE_NVME_SUPPORTED, CU_FILE_P2P_FLAG_PCI_P2PDMA),
             CU_FILE_DRIVER_NOT_INITIALIZED));
    CHECK(IS(cuFileExportPCIeTopology(NULL), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileExportPCIeTopology(""), CU_FILE_INVALID_VALUE));
    /* No topology is detected: nothing to export, and no file is made. */
    struct stat st;
    CHECK(IS(cuFileExportPCIeTopology(topology), CU_FILE_INTERNAL_ERROR));
    CHECK(stat(topology, &st) != 0);

    /* The POSIX pool, unset: hipfile's staging pool as one slab of staging buffers. */
    size_t sizes[3] = {0}, counts[3] = {0};
    CHECK(IS(cuFileGetParameterPosixPoolSlabArray(sizes, counts, 1), CU_FILE_SUCCESS));
    CHECK(sizes[0] == size_param(CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB));
    CHECK(sizes[0] * counts[0] <= size_param(CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB));
    CHECK(IS(cuFileGetParameterPosixPoolSlabArray(sizes, counts, 2), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileGetParameterPosixPoolSlabArray(NULL, counts, 1), CU_FILE_INVALID_VALUE));
    /* Set: ascending multiples of 4 KiB, counts above 0, a total within the pool's bounds. */
    const size_t set_sizes[2] = {4, 64}, set_counts[2] = {16, 2};
    const size_t bad_order[2] = {64, 4}, bad_counts[2] = {1, 0}, odd[1] = {6}, one[1] = {1};
    const size_t huge[1] = {1u << 24}, many[1] = {4097};
    CHECK(IS(cuFileSetParameterPosixPoolSlabArray(bad_order, set_counts, 2),
             CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileSetParameterPosixPoolSlabArray(set_sizes, bad_counts, 2),
             CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileSetParameterPosixPoolSlabArray(odd, one, 1), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileSetParameterPosixPoolSlabArray(set_sizes, set_counts, 0),
             CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileSetParameterPosixPoolSlabArray(NULL, set_counts, 2), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileSetParameterPosixPoolSlabArray(huge, many, 1),
             CU_FILE_DRIVER_UNSUPPORTED_LIMIT));
    CHECK(IS(cuFileSetParameterPosixPoolSlabArray(set_sizes, set_counts, 2), CU_FILE_SUCCESS));
    CHECK(IS(cuFileGetParameterPosixPoolSlabArray(sizes, counts, 2), CU_FILE_SUCCESS));
    CHECK(sizes[0] == 4 && sizes[1] == 64 && counts[0] == 16 && counts[1] == 2);

    /* GPU bounce buffers: none until set, then reported back. */
    CHECK(IS(cuFileGetParameterGpuBounceBufferSlabArray(NULL, NULL, 0), CU_FILE_SUCCESS));
    CHECK(IS(cuFileGetParameterGpuBounceBufferSlabArray(sizes, counts, 1),
             CU_FILE_INVALID_VALUE));
    const size_t gpu_sizes[3] = {64, 1024, 16384}, gpu_counts[3] = {128, 16, 4};
    CHECK(IS(cuFileSetParameterGpuBounceBufferSlabArray(gpu_sizes, gpu_counts, 3),
             CU_FILE_SUCCESS));
    CHECK(IS(cuFileGetParameterGpuBounceBufferSlabArray(sizes, counts, 3), CU_FILE_SUCCESS));
    CHECK(sizes[2] == 16384 && counts[0] == 128 && counts[2] == 4);

    /* Open: the staging pool holds what the POSIX slabs add up to, 4 × 16 + 64 × 2 KiB. */
    CHECK(IS(cuFileSetStatsLevel(1), CU_FILE_SUCCESS));
    CHECK(IS(cuFileDriverOpen(), CU_FILE_SUCCESS));
    CUfileDrvProps_t props;
    CHECK(IS(cuFileDriverGetProperties(&props), CU_FILE_SUCCESS));
    CHECK(props.max_device_cache_size == 192);
    CHECK(size_param(CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB) == 192);
    CHECK(IS(cuFileSetParameterPosixPoolSlabArray(set_sizes, set_counts, 2),
             CU_FILE_DRIVER_ALREADY_OPEN));
    CHECK(IS(cuFileSetParameterGpuBounceBufferSlabArray(gpu_sizes, gpu_counts, 3),
             CU_FILE_DRIVER_ALREADY_OPEN));
    CHECK(IS(cuFileGetParameterPosixPoolSlabArray(sizes, counts, 2), CU_FILE_SUCCESS));
    CHECK(sizes[1] == 64 && counts[1] == 2);

    /* The BAR size: the runtime cannot tell it; no such device is invalid. */
    CHECK(IS(cuFileGetBARSizeInKB(0, &bar), CU_FILE_PLATFORM_NOT_SUPPORTED) && bar == 7);
    CHECK(IS(cuFileGetBARSizeInKB(99, &bar), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileGetBARSizeInKB(-1, &bar), CU_FILE_INVALID_VALUE));

    /* Peer-to-peer flags: P2PDMA for local NVMe (the emulated runtime has AMD's file I/O),
     * none for the others, what was set once set; only P2PDMA may be set. */
    CHECK(IS(cuFileDriverGetP2PFlags(CU_FILE_NVME_SUPPORTED, &flags), CU_FILE_SUCCESS));
    CHECK(flags == CU_FILE_P2P_FLAG_PCI_P2PDMA);
    CHECK(IS(cuFileDriverGetP2PFlags(CU_FILE_LUSTRE_SUPPORTED, &flags), CU_FILE_SUCCESS));
    CHECK(flags == 0);
    CHECK(IS(cuFileDriverGetP2PFlags(CU_FILE_LUSTRE_SUPPORTED, NULL), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileDriverGetP2PFlags((CUfileDriverStatusFlags_t)10, &flags),
             CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileDriverGetP2PFlags(CU_FILE_MAX_TARGET_TYPES, &flags), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileDriverSetP2PFlags(CU_FILE_LUSTRE_SUPPORTED, CU_FILE_P2P_FLAG_PCI_P2PDMA),
             CU_FILE_SUCCESS));
    CHECK(IS(cuFileDriverGetP2PFlags(CU_FILE_LUSTRE_SUPPORTED, &flags), CU_FILE_SUCCESS));
    CHECK(flags == CU_FILE_P2P_FLAG_PCI_P2PDMA);
    CHECK(IS(cuFileDriverSetP2PFlags(CU_FILE_NVME_SUPPORTED, CU_FILE_P2P_FLAG_NVFS),
             CU_FILE_INVALID_VALUE));

    /* Statistics: counted from the open; stopped, nothing more is counted; started again;
     * reset to 0, and counted on. */
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CUfileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    d.handle.fd = fd;
    CUfileHandle_t fh = NULL;
    CHECK(IS(cuFileHandleRegister(&fh, &d), CU_FILE_SUCCESS));
    void *dev = NULL;
    CHECK(hipMalloc(&dev, N) == 0);
    CHECK(hipMemcpy(dev, pattern, N, H2D) == 0);
    CHECK(cuFileWrite(fh, dev, N, 0, 0) == N);
    CUfileStatsLevel1_t s = level1();
    CHECK(s.write_ops.ok == 1 && s.write_bytes == N && s.hdl_register_ops.ok == 1);
    CHECK(IS(cuFileStatsStop(), CU_FILE_SUCCESS));
    CHECK(cuFileWrite(fh, dev, N, N, 0) == N);
    CHECK(cuFileRead(fh, dev, N, 0, 0) == N);
    s = level1();
    CHECK(s.write_ops.ok == 1 && s.write_bytes == N && s.read_ops.ok == 0);
    CHECK(IS(cuFileStatsStart(), CU_FILE_SUCCESS));
    CHECK(IS(cuFileStatsStart(), CU_FILE_SUCCESS));
    CHECK(cuFileRead(fh, dev, N, 0, 0) == N);
    s = level1();
    CHECK(s.write_ops.ok == 1 && s.read_ops.ok == 1 && s.read_bytes == N);
    CHECK(IS(cuFileStatsReset(), CU_FILE_SUCCESS));
    s = level1();
    CHECK(s.write_ops.ok == 0 && s.read_ops.ok == 0 && s.read_bytes == 0 &&
          s.hdl_register_ops.ok == 0 && s.read_lat_sum_us == 0);
    CHECK(cuFileRead(fh, dev, N, 0, 0) == N);
    s = level1();
    CHECK(s.read_ops.ok == 1 && s.read_bytes == N && s.write_ops.ok == 0);

    cuFileHandleDeregister(fh);
    CHECK(hipFree(dev) == 0);
    close(fd);
    CHECK(IS(cuFileDriverClose(), CU_FILE_SUCCESS));
    CHECK(IS(cuFileStatsReset(), CU_FILE_DRIVER_NOT_INITIALIZED));

    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
