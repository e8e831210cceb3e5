/*
 * A C client as a HIP application is built: linked against the HIP runtime under its own
 * name (-lamdhip64; here the emulated runtime, whose soname is libamdhip64.so.7) and
 * against libhipfile.so.0, run WITHOUT HIPFILE_HIP_LIBRARY (and, by tests/basic.rs, with
 * ROCM_PATH naming another copy of the runtime). The library must find the runtime the
 * program already loaded (by its soname) and use that very instance: memory from the
 * program's hipMalloc is device memory to hipFile, which a second runtime would not know. Checks the HIP calls such a client makes (devices, hipMalloc/hipMemset/
 * hipMemcpy, streams, hipMemcpyAsync, hipDeviceSynchronize, error names and strings),
 * a hipMemset buffer written to a file through hipFile and a file read into hipMalloc'd
 * memory through hipFile, bytes verified, and that managed memory and host memory (pinned,
 * registered, pageable) are refused with hipFileHipMemoryTypeInvalid by registration, reads
 * and writes, batches and stream-ordered calls (hipFile takes device memory only).
 * Usage: hipruntime DIR. Exits 0 when every check passes. tests/basic.rs builds and runs it.
 */

#include "hipfile.h"

#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

/* The rest of HIP's API that this client uses, as libamdhip64 exports it. */
extern hipError_t hipGetDeviceCount(int *count);
extern hipError_t hipSetDevice(int device);
extern hipError_t hipGetDevice(int *device);
extern hipError_t hipMemset(void *dst, int value, size_t size);
extern hipError_t hipDeviceSynchronize(void);
extern hipError_t hipStreamCreate(hipStream_t *stream);
extern hipError_t hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags);
extern hipError_t hipStreamSynchronize(hipStream_t stream);
extern hipError_t hipStreamDestroy(hipStream_t stream);
extern hipError_t hipMemcpyAsync(void *dst, const void *src, size_t size, int kind,
                                 hipStream_t stream);
extern const char *hipGetErrorName(hipError_t error);
extern const char *hipGetErrorString(hipError_t error);
extern hipError_t hipHostMalloc(void **ptr, size_t size, unsigned int flags);
extern hipError_t hipHostFree(void *ptr);
extern hipError_t hipMallocManaged(void **ptr, size_t size, unsigned int flags);
extern hipError_t hipHostRegister(void *ptr, size_t size, unsigned int flags);
extern hipError_t hipHostUnregister(void *ptr);
#define hipErrorInvalidValue 1
#define hipMemAttachGlobal 1
#define hipStreamNonBlocking 1

#define N (1 << 20)

static unsigned char pattern[N], back[N], zeros[N];

/* How many loaded objects are a HIP runtime (their path names libamdhip64). */
static int runtimes_loaded(struct dl_phdr_info *info, size_t size, void *count)
{
    (void)size;
    if (info->dlpi_name != NULL && strstr(info->dlpi_name, "libamdhip64") != NULL)
        (*(int *)count)++;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: hipruntime DIR\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/data", argv[1]);
    for (int i = 0; i < N; i++)
        pattern[i] = (unsigned char)(i * 13 + 5);
    /* The runtime must come from the program's own link, not from a path given to hipFile. */
    CHECK(getenv("HIPFILE_HIP_LIBRARY") == NULL);

    /* Devices. */
    int count = 0, device = -1;
    CHECK(hipGetDeviceCount(&count) == 0 && count >= 1);
    CHECK(hipSetDevice(0) == 0);
    CHECK(hipGetDevice(&device) == 0 && device == 0);

    /* Error names and strings. */
    CHECK(strcmp(hipGetErrorName(0), "hipSuccess") == 0);
    CHECK(hipMalloc(NULL, 16) == hipErrorInvalidValue);
    CHECK(strcmp(hipGetErrorName(hipErrorInvalidValue), "hipErrorInvalidValue") == 0);
    CHECK(strlen(hipGetErrorString(hipErrorInvalidValue)) > 0);

    /* Device memory, set on the device. */
    void *dev = NULL;
    CHECK(hipMalloc(&dev, N) == 0 && dev != NULL);
    CHECK(hipMemset(dev, 0xab, N) == 0);
    CHECK(hipDeviceSynchronize() == 0);

    /* hipFile, on the runtime this program loaded. */
    CHECK(IS(hipFileDriverOpen(), hipFileSuccess));
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    hipFileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = hipFileHandleTypeOpaqueFD;
    d.handle.fd = fd;
    hipFileHandle_t fh = NULL;
    CHECK(IS(hipFileHandleRegister(&fh, &d), hipFileSuccess));
    CHECK(IS(hipFileBufRegister(dev, N, 0), hipFileSuccess));

    /* The memset bytes, written through hipFile, are in the file. */
    CHECK(hipFileWrite(fh, dev, N, 0, 0) == N);
    CHECK(pread(fd, back, N, 0) == N);
    int all_ab = 1;
    for (int i = 0; i < N; i++)
        all_ab &= back[i] == 0xab;
    CHECK(all_ab);

    /* A file read into the device memory through hipFile, copied back by the program. */
    CHECK(pwrite(fd, pattern, N, N) == N);
    CHECK(hipFileRead(fh, dev, N, N, 0) == N);
    memset(back, 0, N);
    CHECK(hipMemcpy(back, dev, N, D2H) == 0);
    CHECK(memcmp(back, pattern, N) == 0);

    /* The same bytes through a stream. */
    hipStream_t s = NULL, s2 = NULL;
    CHECK(hipStreamCreate(&s) == 0 && s != NULL);
    CHECK(hipStreamCreateWithFlags(&s2, hipStreamNonBlocking) == 0 && s2 != NULL);
    memset(back, 0, N);
    CHECK(hipMemcpyAsync(back, dev, N, D2H, s) == 0);
    CHECK(hipStreamSynchronize(s) == 0);
    CHECK(memcmp(back, pattern, N) == 0);
    CHECK(hipMemcpyAsync(dev, zeros, N, H2D, s2) == 0);
    CHECK(hipDeviceSynchronize() == 0);
    CHECK(hipFileRead(fh, dev, N / 2, N, N / 2) == N / 2);
    CHECK(hipMemcpy(back, dev, N, D2H) == 0);
    int zeros_kept = 1;
    for (int i = 0; i < N / 2; i++)
        zeros_kept &= back[i] == 0;
    CHECK(zeros_kept);
    CHECK(memcmp(back + N / 2, pattern, N / 2) == 0);
    CHECK(hipStreamDestroy(s) == 0);
    CHECK(hipStreamDestroy(s2) == 0);

    /* Managed, pinned, registered and pageable host memory: hipFile takes device memory
     * only, in every call (upstream's rules 18 and 22), where libcufile.so.0 serves them. */
    void *managed = NULL, *pinned = NULL, *registered = aligned_alloc(4096, N),
         *pageable = malloc(N);
    CHECK(hipMallocManaged(&managed, N, hipMemAttachGlobal) == 0 && managed != NULL);
    CHECK(hipHostMalloc(&pinned, N, 0) == 0 && pinned != NULL);
    CHECK(registered != NULL && hipHostRegister(registered, N, 0) == 0);
    CHECK(pageable != NULL);
    void *refused[] = {managed, pinned, registered, pageable};
    hipFileBatchHandle_t batch = NULL;
    CHECK(IS(hipFileBatchIOSetUp(&batch, 1), hipFileSuccess));
    for (int i = 0; i < 4; i++) {
        void *p = refused[i];
        CHECK(IS(hipFileBufRegister(p, N, 0), hipFileHipMemoryTypeInvalid));
        CHECK(hipFileRead(fh, p, N, 0, 0) == -hipFileHipMemoryTypeInvalid);
        CHECK(hipFileWrite(fh, p, N, 0, 0) == -hipFileHipMemoryTypeInvalid);
        hipFileIOParams_t io;
        memset(&io, 0, sizeof io);
        io.mode = hipFileBatch;
        io.fh = fh;
        io.opcode = i % 2 ? hipFileBatchWrite : hipFileBatchRead;
        io.u.batch.devPtr_base = p;
        io.u.batch.size = 4096;
        CHECK(IS(hipFileBatchIOSubmit(batch, 1, &io, 0), hipFileHipMemoryTypeInvalid));
        size_t size = 4096;
        hoff_t file_offset = 0, buffer_offset = 0;
        ssize_t moved = -7;
        CHECK(IS(hipFileReadAsync(fh, p, &size, &file_offset, &buffer_offset, &moved, NULL),
                 hipFileHipMemoryTypeInvalid));
        CHECK(IS(hipFileWriteAsync(fh, p, &size, &file_offset, &buffer_offset, &moved, NULL),
                 hipFileHipMemoryTypeInvalid));
    }
    hipFileBatchIODestroy(batch);
    CHECK(hipHostUnregister(registered) == 0);
    free(registered);
    free(pageable);
    CHECK(hipHostFree(pinned) == 0);
    CHECK(hipFree(managed) == 0);

    /* One runtime in the process: hipFile loaded none of its own. */
    int runtimes = 0;
    dl_iterate_phdr(runtimes_loaded, &runtimes);
    CHECK(runtimes == 1);

    CHECK(IS(hipFileBufDeregister(dev), hipFileSuccess));
    hipFileHandleDeregister(fh);
    CHECK(IS(hipFileDriverClose(), hipFileSuccess));
    CHECK(close(fd) == 0);
    CHECK(hipFree(dev) == 0);

    if (failures != 0) {
        fprintf(stderr, "hipruntime: %d checks failed\n", failures);
        return 1;
    }
    printf("hipruntime: all checks passed\n");
    return 0;
}
