/* NVIDIA's cufile_sample_015, for every kind of memory, on an NVIDIA GPU: built against
 * NVIDIA's own cufile.h and CUDA's runtime, run against hipfile's libcufile.so.0 (or, to see
 * what NVIDIA's library answers, against NVIDIA's). For cudaMalloc, cudaMallocManaged
 * (attached to the host, as the sample, and globally), cudaMallocHost, cudaHostAlloc,
 * cudaHostRegister'ed malloc memory, plain malloc and mmap memory: what cuFileBufRegister
 * answers, then, unregistered and (where the registration succeeded) registered, a 1 MiB
 * file read into the buffer and written from it to a second file (the sample), a batch of a
 * read and a write, and a stream-ordered read, with the bytes checked. Prints one line per
 * case and checks the registration answers against docs/decisions/memory-types.md:
 * every kind registers but managed memory (CU_FILE_CUDA_MEMORY_TYPE_INVALID). Ends with
 * "all checks passed" and exit 0. Not run by CI (it needs a GPU):
 *
 *   cc -I/usr/local/cuda/include tests/gpu/memtypes.c -L DIR -Wl,-rpath,DIR -lcufile \
 *      -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcudart -o memtypes
 *   ./memtypes /path/on/the/disk
 *
 * with DIR holding libcufile.so.0 and libcufile.so (cargo xtask dist's lib/). Against
 * NVIDIA's library: LD_LIBRARY_PATH=/usr/local/cuda/lib64 ./memtypes DIR with a build whose
 * rpath names CUDA's directory instead of DIR.
 */
#define _GNU_SOURCE /* O_DIRECT */
#include <cufile.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* From CUDA's runtime (cudaError_t is an int; cudaStream_t is CUstream). */
extern int cudaMalloc(void **ptr, size_t size);
extern int cudaMallocManaged(void **ptr, size_t size, unsigned flags);
extern int cudaMallocHost(void **ptr, size_t size);
extern int cudaHostAlloc(void **ptr, size_t size, unsigned flags);
extern int cudaHostRegister(void *ptr, size_t size, unsigned flags);
extern int cudaHostUnregister(void *ptr);
extern int cudaFree(void *ptr);
extern int cudaFreeHost(void *ptr);
extern int cudaMemcpy(void *dst, const void *src, size_t size, int kind);
extern int cudaMemset(void *ptr, int value, size_t size);
extern int cudaDeviceSynchronize(void);
extern int cudaStreamCreate(CUstream *stream);
extern int cudaStreamSynchronize(CUstream stream);
extern int cudaStreamDestroy(CUstream stream);
#define cudaSuccess 0
#define cudaMemcpyDefault 4
#define cudaMemAttachGlobal 1
#define cudaMemAttachHost 2
#define cudaHostAllocPortable 1

static int failures;
#define CHECK(c)                                                                          \
    do {                                                                                  \
        if (!(c)) {                                                                       \
            fprintf(stderr, "line %d: check failed: %s\n", __LINE__, #c);                 \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)
#define OK(e) ((e).err == CU_FILE_SUCCESS)
#define SIZE (1 << 20)

enum kind { DEVICE, MANAGED_HOST, MANAGED, PINNED, HOST_ALLOC, REGISTERED, PAGEABLE, MAPPED, KINDS };
static const char *const names[KINDS] = {
    "cudaMalloc",     "cudaMallocManaged(host)", "cudaMallocManaged(global)",
    "cudaMallocHost", "cudaHostAlloc",           "cudaHostRegister",
    "malloc",         "mmap"};

static unsigned char pattern[SIZE], back[SIZE];
static const char *dir;

static void *alloc(enum kind k)
{
    void *p = NULL;
    switch (k) {
    case DEVICE: CHECK(cudaMalloc(&p, SIZE) == cudaSuccess); break;
    case MANAGED_HOST: CHECK(cudaMallocManaged(&p, SIZE, cudaMemAttachHost) == cudaSuccess); break;
    case MANAGED: CHECK(cudaMallocManaged(&p, SIZE, cudaMemAttachGlobal) == cudaSuccess); break;
    case PINNED: CHECK(cudaMallocHost(&p, SIZE) == cudaSuccess); break;
    case HOST_ALLOC: CHECK(cudaHostAlloc(&p, SIZE, cudaHostAllocPortable) == cudaSuccess); break;
    case REGISTERED:
        p = aligned_alloc(4096, SIZE);
        CHECK(p && cudaHostRegister(p, SIZE, 0) == cudaSuccess);
        break;
    case PAGEABLE: p = malloc(SIZE); break;
    default:
        p = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) p = NULL;
    }
    CHECK(p != NULL);
    return p;
}

static void release(enum kind k, void *p)
{
    switch (k) {
    case DEVICE: case MANAGED_HOST: case MANAGED: CHECK(cudaFree(p) == cudaSuccess); break;
    case PINNED: case HOST_ALLOC: CHECK(cudaFreeHost(p) == cudaSuccess); break;
    case REGISTERED: CHECK(cudaHostUnregister(p) == cudaSuccess); free(p); break;
    case PAGEABLE: free(p); break;
    default: munmap(p, SIZE);
    }
}

static int open_registered(const char *name, int flags, CUfileHandle_t *fh)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, flags | O_DIRECT, 0644);
    if (fd < 0 && errno == EINVAL) fd = open(path, flags, 0644);
    CHECK(fd >= 0);
    CUfileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    d.handle.fd = fd;
    CHECK(OK(cuFileHandleRegister(fh, &d)));
    return fd;
}

static int file_holds(const char *name, off_t at, const unsigned char *expected, size_t len)
{
    static unsigned char got[SIZE];
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? pread(fd, got, len, at) : -1;
    if (fd >= 0) close(fd);
    return n == (ssize_t)len && memcmp(got, expected, len) == 0;
}

/* cudaMemcpyDefault: unified addressing tells the runtime what each pointer is. */
static void get(const void *p) { CHECK(cudaMemcpy(back, p, SIZE, cudaMemcpyDefault) == cudaSuccess); }
static void clear(void *p) { CHECK(cudaMemcpy(p, memset(back, 0, SIZE), SIZE, cudaMemcpyDefault) == cudaSuccess); }

static void exercise(enum kind k, void *buf, int registered)
{
    int before = failures;
    char out[64];
    snprintf(out, sizeof out, "memtypes-out-%d-%d", (int)k, registered);
    CUfileHandle_t in_fh, out_fh;
    int in_fd = open_registered("memtypes-in", O_RDONLY, &in_fh);
    int out_fd = open_registered(out, O_CREAT | O_RDWR | O_TRUNC, &out_fh);

    clear(buf);
    ssize_t r = cuFileRead(in_fh, buf, SIZE, 0, 0), w = -1;
    CHECK(r == SIZE);
    get(buf);
    CHECK(memcmp(back, pattern, SIZE) == 0);
    w = cuFileWrite(out_fh, buf, SIZE, 0, 0);
    CHECK(w == SIZE);
    CHECK(file_holds(out, 0, pattern, SIZE));

    clear(buf);
    CUfileBatchHandle_t b;
    CHECK(OK(cuFileBatchIOSetUp(&b, 2)));
    CUfileIOParams_t ops[2];
    memset(ops, 0, sizeof ops);
    for (int i = 0; i < 2; i++) {
        ops[i].mode = CUFILE_BATCH;
        ops[i].fh = i ? out_fh : in_fh;
        ops[i].opcode = i ? CUFILE_WRITE : CUFILE_READ;
        ops[i].u.batch.devPtr_base = buf;
        ops[i].u.batch.devPtr_offset = i * (SIZE / 2);
        ops[i].u.batch.file_offset = i ? SIZE : 0;
        ops[i].u.batch.size = SIZE / 2;
        ops[i].cookie = (void *)(long)(i + 1);
    }
    CHECK(OK(cuFileBatchIOSubmit(b, 2, ops, 0)));
    CUfileIOEvents_t ev[2];
    unsigned got = 0;
    for (int rounds = 0; rounds < 100000 && got < 2; rounds++) {
        unsigned nr = 2 - got;
        if (!OK(cuFileBatchIOGetStatus(b, 1, &nr, ev + got, NULL))) break;
        got += nr;
    }
    CHECK(got == 2);
    for (unsigned i = 0; i < got; i++) CHECK(ev[i].status == CUFILE_COMPLETE && ev[i].ret == SIZE / 2);
    cuFileBatchIODestroy(b);
    get(buf);
    CHECK(memcmp(back, pattern, SIZE / 2) == 0);

    CUstream s;
    CHECK(cudaStreamCreate(&s) == cudaSuccess);
    clear(buf);
    size_t sz = SIZE; off_t fo = 0, bo = 0; ssize_t nread = -7;
    CHECK(OK(cuFileReadAsync(in_fh, buf, &sz, &fo, &bo, &nread, s)));
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);
    CHECK(nread == SIZE);
    get(buf);
    CHECK(memcmp(back, pattern, SIZE) == 0);
    CHECK(cudaStreamDestroy(s) == cudaSuccess);

    cuFileHandleDeregister(in_fh);
    cuFileHandleDeregister(out_fh);
    close(in_fd);
    close(out_fd);
    printf("%-26s %-12s read %zd write %zd: %s\n", names[k], registered ? "registered" : "unregistered",
           r, w, failures == before ? "ok" : "FAILED");
}

int main(int argc, char **argv)
{
    dir = argc > 1 ? argv[1] : "/tmp";
    for (int i = 0; i < SIZE; i++) pattern[i] = (unsigned char)(i * 131 + 7);
    char in[4096];
    snprintf(in, sizeof in, "%s/memtypes-in", dir);
    int fd = open(in, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, pattern, SIZE) == SIZE && fsync(fd) == 0 && close(fd) == 0);
    CHECK(OK(cuFileDriverOpen()));
    for (int k = 0; k < KINDS; k++) {
        void *buf = alloc((enum kind)k);
        if (!buf) continue;
        CUfileError_t e = cuFileBufRegister(buf, SIZE, 0);
        printf("%-26s cuFileBufRegister: err %d cu_err %d\n", names[k], e.err, (int)e.cu_err);
        int managed = k == MANAGED_HOST || k == MANAGED;
        CHECK(managed ? e.err == CU_FILE_CUDA_MEMORY_TYPE_INVALID : OK(e));
        if (OK(e)) CHECK(OK(cuFileBufDeregister(buf)));
        exercise((enum kind)k, buf, 0);
        if (OK(e)) {
            CHECK(OK(cuFileBufRegister(buf, SIZE, 0)));
            exercise((enum kind)k, buf, 1);
            CHECK(OK(cuFileBufDeregister(buf)));
        }
        release((enum kind)k, buf);
    }
    CHECK(OK(cuFileDriverClose()));
    if (failures) { printf("%d checks failed\n", failures); return 1; }
    printf("all checks passed\n");
    return 0;
}
