/*
 * What a cuFile program sees of its configuration, printed as name=value lines for
 * tests/cufile_json.rs to compare: the parameters before the driver opens (what the next
 * open would use), the open's status, the open driver's properties and parameters, and a
 * write through a registered file of 4096 bytes of emulated device memory (its return).
 * Usage: config DIR [SET], where DIR is an empty directory for its file; with SET the
 * program first calls cuFileSetParameterSizeT(MAX_DIRECT_IO_SIZE_KB, 128) and
 * cuFileSetParameterBool(ALLOW_COMPAT_MODE, true). Exits 0 unless it could not run.
 */

#include "cufile.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static void size_param(const char *name, CUFileSizeTConfigParameter_t p)
{
    size_t v = 0;
    CUfileError_t e = cuFileGetParameterSizeT(p, &v);
    printf("%s=%zu\n", name, e.err == CU_FILE_SUCCESS ? v : (size_t)-1);
}

static void bool_param(const char *name, CUFileBoolConfigParameter_t p)
{
    bool v = false;
    CUfileError_t e = cuFileGetParameterBool(p, &v);
    printf("%s=%d\n", name, e.err == CU_FILE_SUCCESS ? (int)v : -1);
}

static void params(const char *when)
{
    char name[128];
#define SIZE(n, p) (snprintf(name, sizeof name, "%s.%s", when, n), size_param(name, p))
#define BOOL(n, p) (snprintf(name, sizeof name, "%s.%s", when, n), bool_param(name, p))
    SIZE("max_direct_io_size_kb", CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB);
    SIZE("max_device_cache_size_kb", CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB);
    SIZE("max_device_pinned_mem_size_kb", CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB);
    SIZE("max_io_threads", CUFILE_PARAM_EXECUTION_MAX_IO_THREADS);
    SIZE("max_io_queue_depth", CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH);
    SIZE("min_io_threshold_size_kb", CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB);
    SIZE("poll_mode_max_size_kb", CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB);
    SIZE("cufile_stats", CUFILE_PARAM_PROFILE_STATS);
    BOOL("use_poll_mode", CUFILE_PARAM_PROPERTIES_USE_POLL_MODE);
    BOOL("allow_compat_mode", CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE);
    BOOL("parallel_io", CUFILE_PARAM_EXECUTION_PARALLEL_IO);
    BOOL("nvtx", CUFILE_PARAM_PROFILE_NVTX);
#undef SIZE
#undef BOOL
    char level[64] = "";
    cuFileGetParameterString(CUFILE_PARAM_LOGGING_LEVEL, level, sizeof level);
    printf("%s.logging_level=%s\n", when, level);
    size_t sizes[8], counts[8];
    printf("%s.posix_slabs=", when);
    for (int len = 1; len <= 8; len++) {
        if (cuFileGetParameterPosixPoolSlabArray(sizes, counts, len).err == CU_FILE_SUCCESS) {
            for (int i = 0; i < len; i++)
                printf("%s%zu:%zu", i ? "," : "", sizes[i], counts[i]);
            break;
        }
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: config DIR [SET]\n");
        return 2;
    }
    if (argc > 2 && strcmp(argv[2], "SET") == 0) {
        CHECK(IS(cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, 128),
                 CU_FILE_SUCCESS));
        CHECK(IS(cuFileSetParameterBool(CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE, true),
                 CU_FILE_SUCCESS));
    }
    params("before");
    CUfileError_t opened = cuFileDriverOpen();
    printf("open=%d\n", (int)opened.err);
    if (opened.err != CU_FILE_SUCCESS) {
        /* Every open fails alike, the implicit one of a registration too. */
        CUfileDescr_t d;
        memset(&d, 0, sizeof d);
        d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
        d.handle.fd = 0;
        CUfileHandle_t fh = NULL;
        printf("register=%d\n", (int)cuFileHandleRegister(&fh, &d).err);
        return failures ? 1 : 0;
    }
    CUfileDrvProps_t props;
    CHECK(IS(cuFileDriverGetProperties(&props), CU_FILE_SUCCESS));
    printf("props.max_direct_io_size=%zu\n", props.nvfs.max_direct_io_size);
    printf("props.max_device_cache_size=%u\n", props.max_device_cache_size);
    printf("props.allow_compat_mode=%d\n",
           (props.nvfs.dcontrolflags >> CU_FILE_ALLOW_COMPAT_MODE) & 1);
    params("open");

    char path[4096];
    snprintf(path, sizeof path, "%s/data", argv[1]);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CUfileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    d.handle.fd = fd;
    CUfileHandle_t fh = NULL;
    CHECK(IS(cuFileHandleRegister(&fh, &d), CU_FILE_SUCCESS));
    void *dev = NULL;
    CHECK(hipMalloc(&dev, 4096) == 0);
    printf("write=%zd\n", cuFileWrite(fh, dev, 4096, 0, 0));
    cuFileHandleDeregister(fh);
    CHECK(hipFree(dev) == 0);
    close(fd);
    CHECK(IS(cuFileDriverClose(), CU_FILE_SUCCESS));
    printf("%s\n", failures ? "checks failed" : "all checks passed");
    return failures ? 1 : 0;
}
