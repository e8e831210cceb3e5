/* A C program of cuFile's API on an NVIDIA GPU, built against NVIDIA's own cufile.h and CUDA's
 * runtime, run against hipfile's libcufile.so.0: the version and driver properties, a 4 MiB
 * write from registered CUDA memory and a read back (bytes checked), a read into unregistered
 * CUDA memory, a batch of two reads, and a stream-ordered write and read on a CUDA stream.
 * Prints what it saw, then "all checks passed", and exits 0. Not run by CI (it needs a GPU):
 *
 *   cc -I/usr/local/cuda/include tests/gpu/roundtrip.c -L DIR -Wl,-rpath,DIR -lcufile \
 *      -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcudart
 *   ./a.out /path/on/the/disk/data.bin
 *
 * with DIR holding libcufile.so.0 and libcufile.so (cargo xtask dist's lib/); `ldd ./a.out`
 * should show that libcufile.so.0 is DIR's.
 */
#include <cufile.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* From CUDA's runtime (cudaError_t is an int; cudaStream_t is CUstream). */
extern int cudaMalloc(void **ptr, size_t size);
extern int cudaMemcpy(void *dst, const void *src, size_t size, int kind);
extern int cudaMemset(void *ptr, int value, size_t size);
extern int cudaMemsetAsync(void *ptr, int value, size_t size, CUstream stream);
extern int cudaStreamCreate(CUstream *stream);
extern int cudaStreamSynchronize(CUstream stream);
#define cudaSuccess 0
#define cudaMemcpyHostToDevice 1
#define cudaMemcpyDeviceToHost 2

static int failures;
#define CHECK(c)                                                                          \
    do {                                                                                  \
        if (!(c)) {                                                                       \
            fprintf(stderr, "line %d: check failed: %s\n", __LINE__, #c);                 \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)
#define OK(e) ((e).err == CU_FILE_SUCCESS)
#define N (4 << 20)

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "/tmp/cufile-rt.bin";
    unsigned char *pattern = malloc(N), *back = malloc(N);
    for (int i = 0; i < N; i++) pattern[i] = (unsigned char)(i * 131 + 17);
    int v = 0;
    CHECK(OK(cuFileGetVersion(&v)));
    printf("version %d\n", v);
    CHECK(OK(cuFileDriverOpen()));
    CUfileDrvProps_t props;
    memset(&props, 0, sizeof props);
    CHECK(OK(cuFileDriverGetProperties(&props)));
    printf("props: max_direct_io %zu KiB, cache %u KiB, pinned %u KiB, batch %u, fflags %#x\n",
           props.nvfs.max_direct_io_size, props.max_device_cache_size,
           props.max_device_pinned_mem_size, props.max_batch_io_size, props.fflags);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CUfileDescr_t d;
    memset(&d, 0, sizeof d);
    d.handle.fd = fd;
    d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    CUfileHandle_t fh;
    CHECK(OK(cuFileHandleRegister(&fh, &d)));
    void *dev = NULL;
    CHECK(cudaMalloc(&dev, N) == cudaSuccess);
    CHECK(OK(cuFileBufRegister(dev, N, 0)));
    CUfileError_t e = cuFileBufRegister(pattern, N, 0);
    printf("host buffer register: err %d cu_err %d\n", e.err, (int)e.cu_err);
    CHECK(cudaMemcpy(dev, pattern, N, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(cuFileWrite(fh, dev, N, 0, 0) == N);
    CHECK(cudaMemset(dev, 0, N) == cudaSuccess);
    CHECK(cuFileRead(fh, dev, N, 0, 0) == N);
    CHECK(cudaMemcpy(back, dev, N, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(memcmp(back, pattern, N) == 0);
    /* Unregistered device memory. */
    void *dev2 = NULL;
    CHECK(cudaMalloc(&dev2, N) == cudaSuccess);
    CHECK(cuFileRead(fh, dev2, N, 0, 0) == N);
    CHECK(cudaMemcpy(back, dev2, N, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(memcmp(back, pattern, N) == 0);
    /* Batch. */
    CUfileBatchHandle_t b;
    CHECK(OK(cuFileBatchIOSetUp(&b, 2)));
    CUfileIOParams_t ops[2];
    memset(ops, 0, sizeof ops);
    for (int i = 0; i < 2; i++) {
        ops[i].mode = CUFILE_BATCH;
        ops[i].fh = fh;
        ops[i].opcode = CUFILE_READ;
        ops[i].u.batch.devPtr_base = dev;
        ops[i].u.batch.devPtr_offset = i * (N / 2);
        ops[i].u.batch.file_offset = i * (N / 2);
        ops[i].u.batch.size = N / 2;
        ops[i].cookie = (void *)(long)(i + 1);
    }
    CHECK(cudaMemset(dev, 0, N) == cudaSuccess);
    CHECK(OK(cuFileBatchIOSubmit(b, 2, ops, 0)));
    CUfileIOEvents_t ev[2];
    unsigned got = 0;
    for (int r = 0; r < 1000 && got < 2; r++) {
        unsigned nr = 2 - got;
        if (!OK(cuFileBatchIOGetStatus(b, 1, &nr, ev + got, NULL))) break;
        got += nr;
    }
    CHECK(got == 2);
    for (unsigned i = 0; i < got; i++) CHECK(ev[i].status == CUFILE_COMPLETE && ev[i].ret == N / 2);
    cuFileBatchIODestroy(b);
    CHECK(cudaMemcpy(back, dev, N, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(memcmp(back, pattern, N) == 0);
    /* Stream-ordered. */
    CUstream s;
    CHECK(cudaStreamCreate(&s) == cudaSuccess);
    e = cuFileStreamRegister(s, 15);
    printf("stream register: err %d\n", e.err);
    size_t sz = N; off_t fo = N, bo = 0; ssize_t written = -7, nread = -7;
    e = cuFileWriteAsync(fh, dev, &sz, &fo, &bo, &written, s);
    printf("write async: err %d\n", e.err);
    CHECK(OK(e));
    CHECK(cudaMemsetAsync(dev, 0, N, s) == cudaSuccess);
    e = cuFileReadAsync(fh, dev, &sz, &fo, &bo, &nread, s);
    CHECK(OK(e));
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    printf("async: written %zd read %zd\n", written, nread);
    CHECK(written == N && nread == N);
    CHECK(cudaMemcpy(back, dev, N, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(memcmp(back, pattern, N) == 0);
    CHECK(OK(cuFileStreamDeregister(s)));
    CHECK(OK(cuFileBufDeregister(dev)));
    cuFileHandleDeregister(fh);
    CHECK(OK(cuFileDriverClose()));
    printf("use count %ld\n", cuFileUseCount());
    close(fd);
    if (failures) { printf("%d checks failed\n", failures); return 1; }
    printf("all checks passed\n");
    return 0;
}
