/*
 * A C program written against cuFile's interface (include/cufile.h) and run against
 * libcufile.so.0 on the emulated HIP runtime, whose hipMalloc memory stands for CUDA memory:
 * the version, parameters set before the driver opens, the driver's use count, its
 * properties in cuFile's layout (32-bit sizes), the statistics level and level-1 figures, a file registered as an opaque descriptor,
 * a registered buffer, a write and a read back with the bytes checked, cuFile's error codes
 * for bad input, a batch set up, submitted, collected and destroyed, stream-ordered writes
 * and reads, and the driver closed. Usage: basic DIR, where DIR is an empty directory for its
 * files. Exits 0 when every check passes; otherwise prints each failed check with its line
 * and exits 1. tests/basic.rs builds and runs it.
 */

#include "cufile.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define N 65536

static unsigned char pattern[N], back[N], zeros[N];

static CUfileDescr_t descr_of(int fd)
{
    CUfileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    d.handle.fd = fd;
    return d;
}

static size_t size_param(CUFileSizeTConfigParameter_t p)
{
    size_t v = (size_t)-1;
    CHECK(IS(cuFileGetParameterSizeT(p, &v), CU_FILE_SUCCESS));
    return v;
}

static CUfileIOParams_t op(CUfileHandle_t fh, CUfileOpcode_t opcode, void *base, off_t buf_off,
                           off_t file_off, size_t size, long cookie)
{
    CUfileIOParams_t p;
    memset(&p, 0, sizeof p);
    p.mode = CUFILE_BATCH;
    p.fh = fh;
    p.opcode = opcode;
    p.u.batch.devPtr_base = base;
    p.u.batch.devPtr_offset = buf_off;
    p.u.batch.file_offset = file_off;
    p.u.batch.size = size;
    p.cookie = (void *)cookie;
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: basic DIR\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/data", argv[1]);
    for (int i = 0; i < N; i++)
        pattern[i] = (unsigned char)(i * 29 + 3);

    /* The layout this program was compiled with is cuFile's. */
    CHECK(sizeof(CUfileError_t) == 8);
    CHECK(sizeof(CUfileDrvProps_t) == 56);
    CHECK(offsetof(CUfileDrvProps_t, max_device_pinned_mem_size) == 44);
    CHECK(sizeof(CUfileDescr_t) == 24);
    CHECK(sizeof(CUfileIOParams_t) == 64);

    /* Before anything is open: the version, and parameters for the next open. */
    int version = 0;
    CHECK(IS(cuFileGetVersion(&version), CU_FILE_SUCCESS));
    CHECK(version == 1170);
    CHECK(IS(cuFileGetVersion(NULL), CU_FILE_INVALID_VALUE));
    CHECK(cuFileUseCount() == 0);
    CHECK(IS(cuFileDriverClose(), CU_FILE_DRIVER_NOT_INITIALIZED));
    CHECK(IS(cuFileDriverClose_v2(), CU_FILE_DRIVER_NOT_INITIALIZED));
    CUfileDrvProps_t props;
    CHECK(IS(cuFileDriverGetProperties(&props), CU_FILE_DRIVER_NOT_INITIALIZED));
    errno = 0;
    CHECK(cuFileRead(NULL, NULL, 1, 0, 0) == -1 && errno == EINVAL);
    CHECK(IS(cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, 64),
             CU_FILE_SUCCESS));
    CHECK(IS(cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB, 2048),
             CU_FILE_SUCCESS));
    CHECK(IS(cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, 3),
             CU_FILE_DRIVER_UNSUPPORTED_LIMIT));
    CHECK(size_param(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB) == 64);
    size_t lo = 0, hi = 0;
    CHECK(IS(cuFileGetParameterMinMaxValue(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, &lo,
                                           &hi),
             CU_FILE_SUCCESS));
    CHECK(lo == 4 && hi == 1 << 20);
    CHECK(IS(cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, hi + 1),
             CU_FILE_DRIVER_UNSUPPORTED_LIMIT));
    CHECK(IS(cuFileGetParameterMinMaxValue(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE, &lo, &hi),
             CU_FILE_SUCCESS));
    CHECK(lo == 128 && hi == 128);
    CHECK(IS(cuFileGetParameterMinMaxValue(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE, NULL, &hi),
             CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileGetParameterMinMaxValue((CUFileSizeTConfigParameter_t)12, &lo, &hi),
             CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileSetParameterBool(CUFILE_PARAM_PROPERTIES_USE_POLL_MODE, true),
             CU_FILE_SUCCESS));
    bool b = false;
    CHECK(IS(cuFileGetParameterBool(CUFILE_PARAM_PROPERTIES_USE_POLL_MODE, &b),
             CU_FILE_SUCCESS) &&
          b);
    CHECK(IS(cuFileGetParameterBool((CUFileBoolConfigParameter_t)12, &b), CU_FILE_INVALID_VALUE));
    char level[64] = "";
    CHECK(IS(cuFileSetParameterString(CUFILE_PARAM_LOGGING_LEVEL, "info"), CU_FILE_SUCCESS));
    CHECK(IS(cuFileGetParameterString(CUFILE_PARAM_LOGGING_LEVEL, level, (int)sizeof level),
             CU_FILE_SUCCESS));
    CHECK(strcmp(level, "INFO") == 0);
    int stats_level = -1;
    CHECK(IS(cuFileGetStatsLevel(&stats_level), CU_FILE_SUCCESS) && stats_level == 0);
    CHECK(IS(cuFileGetStatsLevel(NULL), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileSetStatsLevel(4), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileSetStatsLevel(-1), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileSetStatsLevel(1), CU_FILE_SUCCESS));
    CHECK(IS(cuFileGetStatsLevel(&stats_level), CU_FILE_SUCCESS) && stats_level == 1);

    /* The use count. */
    CHECK(IS(cuFileDriverOpen(), CU_FILE_SUCCESS));
    CHECK(cuFileUseCount() == 1);
    CHECK(IS(cuFileDriverOpen(), CU_FILE_SUCCESS));
    CHECK(cuFileUseCount() == 2);
    CHECK(IS(cuFileDriverClose(), CU_FILE_SUCCESS));
    CHECK(cuFileUseCount() == 1);
    /* Parameters are fixed while the driver is open. */
    CHECK(IS(cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, 128),
             CU_FILE_DRIVER_ALREADY_OPEN));
    CHECK(IS(cuFileSetStatsLevel(2), CU_FILE_DRIVER_ALREADY_OPEN));
    CHECK(IS(cuFileGetStatsLevel(&stats_level), CU_FILE_SUCCESS) && stats_level == 1);

    /* Properties in cuFile's layout: every 32-bit field written, none beyond. */
    unsigned char raw[sizeof(CUfileDrvProps_t) + 8];
    memset(raw, 0xa5, sizeof raw);
    CUfileDrvProps_t *p = (CUfileDrvProps_t *)(void *)raw;
    CHECK(IS(cuFileDriverGetProperties(p), CU_FILE_SUCCESS));
    CHECK(IS(cuFileDriverGetProperties(NULL), CU_FILE_INVALID_VALUE));
    CHECK(p->nvfs.max_direct_io_size == 64);
    CHECK(p->nvfs.dcontrolflags & (1u << CU_FILE_USE_POLL_MODE));
    CHECK(p->fflags & (1u << CU_FILE_BATCH_IO_SUPPORTED));
    CHECK(p->max_device_cache_size == 2048);
    CHECK(p->max_device_cache_size == size_param(CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB));
    CHECK(p->per_buffer_cache_size ==
          size_param(CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB));
    CHECK(p->max_device_pinned_mem_size ==
          size_param(CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB));
    CHECK(p->max_batch_io_size == size_param(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE));
    CHECK(p->max_batch_io_size == 128);
    CHECK(p->max_batch_io_timeout_msecs ==
          size_param(CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS));
    for (size_t i = sizeof(CUfileDrvProps_t); i < sizeof raw; i++)
        CHECK(raw[i] == 0xa5);

    /* Files: bad input gives cuFile's codes. */
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CUfileDescr_t d = descr_of(fd);
    CUfileHandle_t fh = NULL;
    CHECK(IS(cuFileHandleRegister(NULL, &d), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileHandleRegister(&fh, NULL), CU_FILE_INVALID_VALUE));
    d.type = CU_FILE_HANDLE_TYPE_OPAQUE_WIN32;
    CHECK(IS(cuFileHandleRegister(&fh, &d), CU_FILE_IO_NOT_SUPPORTED));
    d.type = CU_FILE_HANDLE_TYPE_USERSPACE_FS;
    CHECK(IS(cuFileHandleRegister(&fh, &d), CU_FILE_IO_NOT_SUPPORTED));
    d = descr_of(fd);
    CHECK(IS(cuFileHandleRegister(&fh, &d), CU_FILE_SUCCESS));
    CHECK(fh != NULL);
    CUfileHandle_t again = NULL;
    CHECK(IS(cuFileHandleRegister(&again, &d), CU_FILE_HANDLE_ALREADY_REGISTERED));

    /* Buffers. */
    void *dev = NULL;
    CHECK(hipMalloc(&dev, N) == 0);
    CHECK(IS(cuFileBufRegister(NULL, N, 0), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileBufRegister(dev, N, 0), CU_FILE_SUCCESS));
    CHECK(IS(cuFileBufRegister(dev, N, 0), CU_FILE_MEMORY_ALREADY_REGISTERED));
    /* Host memory registers too, as in NVIDIA's cuFile (memtypes.c checks every kind). */
    CHECK(IS(cuFileBufRegister(pattern, N, 0), CU_FILE_SUCCESS));
    CHECK(IS(cuFileBufDeregister(pattern), CU_FILE_SUCCESS));
    CHECK(IS(cuFileBufDeregister(pattern), CU_FILE_MEMORY_NOT_REGISTERED));

    /* A write and a read back, bytes checked. */
    CHECK(hipMemcpy(dev, pattern, N, H2D) == 0);
    CHECK(cuFileWrite(fh, dev, N, 0, 0) == N);
    CHECK(hipMemcpy(dev, zeros, N, H2D) == 0);
    CHECK(cuFileRead(fh, dev, N, 0, 0) == N);
    CHECK(hipMemcpy(back, dev, N, D2H) == 0);
    CHECK(memcmp(back, pattern, N) == 0);
    /* At an offset in the buffer, and at the end of the file. */
    CHECK(cuFileRead(fh, dev, 4096, 8192, 4096) == 4096);
    CHECK(cuFileRead(fh, dev, 4096, N, 0) == 0);

    /* Errors of the I/O calls: negated cuFile codes. */
    int other = 0;
    CHECK(cuFileRead((CUfileHandle_t)&other, dev, 16, 0, 0) == -CU_FILE_HANDLE_NOT_REGISTERED);
    /* cuFile's macros take an int (NVIDIA's applies abs()); the texts are cuFile's. */
    int code = (int)cuFileRead((CUfileHandle_t)&other, dev, 16, 0, 0);
    CHECK(IS_CUFILE_ERR(code) && !IS_CUFILE_ERR(4096) && !IS_CUFILE_ERR(-1));
    CHECK(strcmp(CUFILE_ERRSTR(code), "file descriptor is not registered") == 0);
    CHECK(cuFileRead(fh, dev, N, 0, 1) == -CU_FILE_INVALID_VALUE);
    CHECK(cuFileWrite(fh, dev, 16, -1, 0) == -CU_FILE_INVALID_VALUE);

    /* A batch: two reads into the buffer, collected with their cookies. */
    CUfileBatchHandle_t batch = NULL;
    CHECK(IS(cuFileBatchIOSetUp(NULL, 4), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileBatchIOSetUp(&batch, 0), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileBatchIOSetUp(&batch, 4), CU_FILE_SUCCESS));
    CHECK(hipMemcpy(dev, zeros, N, H2D) == 0);
    CUfileIOParams_t ops[2] = {
        op(fh, CUFILE_READ, dev, 0, 0, N / 2, 11),
        op(fh, CUFILE_READ, dev, N / 2, N / 2, N / 2, 12),
    };
    CHECK(IS(cuFileBatchIOSubmit(batch, 2, ops, 0), CU_FILE_SUCCESS));
    CUfileIOEvents_t events[2];
    unsigned two = 2;
    CHECK(IS(cuFileBatchIOGetStatus(batch, 1, NULL, events, NULL), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileBatchIOGetStatus(batch, 1, &two, NULL, NULL), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileBatchIOGetStatus((CUfileBatchHandle_t)&other, 1, &two, events, NULL),
             CU_FILE_INVALID_VALUE));
    unsigned got = 0;
    for (int rounds = 0; got < 2 && rounds < 1000; rounds++) {
        unsigned nr = 2 - got;
        if (!IS(cuFileBatchIOGetStatus(batch, 1, &nr, events + got, NULL), CU_FILE_SUCCESS))
            break;
        got += nr;
    }
    CHECK(got == 2);
    for (unsigned i = 0; i < got; i++) {
        CHECK(events[i].status == CUFILE_COMPLETE);
        CHECK(events[i].ret == N / 2);
        CHECK(events[i].cookie == (void *)11 || events[i].cookie == (void *)12);
    }
    CHECK(hipMemcpy(back, dev, N, D2H) == 0);
    CHECK(memcmp(back, pattern, N) == 0);
    cuFileBatchIODestroy(batch);
    CHECK(IS(cuFileBatchIOCancel(batch), CU_FILE_INVALID_VALUE));

    /* Stream-ordered: a write of the pattern reversed, then a read back, on one stream. */
    CUstream s = NULL;
    CHECK(hipStreamCreate(&s) == 0);
    CHECK(IS(cuFileStreamRegister(s, 0x10), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileStreamRegister(s, CU_FILE_STREAM_FIXED_BUF_OFFSET |
                                         CU_FILE_STREAM_FIXED_FILE_OFFSET |
                                         CU_FILE_STREAM_FIXED_FILE_SIZE),
             CU_FILE_SUCCESS));
    for (int i = 0; i < N; i++)
        back[i] = pattern[N - 1 - i];
    CHECK(hipMemcpy(dev, back, N, H2D) == 0);
    size_t wsize = N, rsize = N;
    off_t wfo = N, wbo = 0, rfo = N, rbo = 0;
    ssize_t written = -7, nread = -7;
    CHECK(IS(cuFileWriteAsync(fh, dev, &wsize, &wfo, &wbo, &written, s), CU_FILE_SUCCESS));
    CHECK(IS(cuFileReadAsync(fh, dev, &rsize, &rfo, &rbo, &nread, s), CU_FILE_SUCCESS));
    CHECK(IS(cuFileReadAsync(fh, dev, NULL, &rfo, &rbo, &nread, s), CU_FILE_INVALID_VALUE));
    CHECK(hipStreamSynchronize(s) == 0);
    CHECK(written == N);
    CHECK(nread == N);
    unsigned char check[N];
    CHECK(pread(fd, check, N, N) == N);
    CHECK(memcmp(check, back, N) == 0);
    CHECK(IS(cuFileStreamDeregister(s), CU_FILE_SUCCESS));
    CHECK(IS(cuFileStreamDeregister(s), CU_FILE_INVALID_VALUE));
    CHECK(hipStreamDestroy(s) == 0);

    /* Statistics at the level set before the open, 1: the synchronous requests counted. */
    CUfileStatsLevel1_t l1;
    memset(&l1, 0, sizeof l1);
    CHECK(IS(cuFileGetStatsL1(&l1), CU_FILE_SUCCESS));
    CHECK(l1.write_bytes >= N && l1.read_bytes >= 2 * N);
    CHECK(l1.write_ops.ok >= 1 && l1.read_ops.ok >= 3 && l1.read_ops.err >= 1);
    CHECK(l1.hdl_register_ops.ok == 1 && l1.buf_register_ops.ok == 2);
    CHECK(IS(cuFileGetStatsL1(NULL), CU_FILE_INVALID_VALUE));
    CUfileStatsLevel2_t l2;
    CHECK(IS(cuFileGetStatsL2(&l2), CU_FILE_INVALID_VALUE));

    /* Deregistration, and the driver closed. */
    CHECK(IS(cuFileBufDeregister(dev), CU_FILE_SUCCESS));
    CHECK(IS(cuFileBufDeregister(dev), CU_FILE_MEMORY_NOT_REGISTERED));
    cuFileHandleDeregister(fh);
    cuFileHandleDeregister(NULL);
    CHECK(cuFileRead(fh, dev, 16, 0, 0) == -CU_FILE_HANDLE_NOT_REGISTERED);
    CHECK(IS(cuFileDriverClose_v2(), CU_FILE_SUCCESS));
    CHECK(cuFileUseCount() == 0);
    CHECK(IS(cuFileBufDeregister(dev), CU_FILE_DRIVER_CLOSING));
    CHECK(hipFree(dev) == 0);
    close(fd);

    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
