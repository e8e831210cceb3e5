/*
 * What NVIDIA's cufile_sample_015 does, for every kind of memory cuFile 1.15 serves, against
 * libcufile.so.0 on the emulated HIP runtime (its calls stand for CUDA's: hipMalloc for
 * cudaMalloc, hipMallocManaged for cudaMallocManaged, hipHostMalloc for cudaMallocHost and
 * cudaHostAlloc, hipHostRegister for cudaHostRegister): a 1 MiB file of a pattern is read
 * into the buffer with cuFileRead and written from it to a second file with cuFileWrite, and
 * the bytes are compared; then a read at an offset, a batch of a read and a write, and a
 * stream-ordered read and write, each checked. Each kind runs unregistered and, where cuFile
 * registers it, registered with cuFileBufRegister; registering managed memory is refused with
 * CU_FILE_CUDA_MEMORY_TYPE_INVALID, as NVIDIA's library refuses it. Usage: memtypes DIR, where
 * DIR is an empty directory for its files. Exits 0 when every check passes; otherwise prints
 * each failed check with its line and exits 1. tests/basic.rs builds and runs it.
 */

#include "cufile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

/* The emulated runtime's allocations of other kinds (HIP's signatures). */
extern int hipMallocManaged(void **ptr, size_t size, unsigned int flags);
extern int hipHostMalloc(void **ptr, size_t size, unsigned int flags);
extern int hipHostFree(void *ptr);
extern int hipHostRegister(void *ptr, size_t size, unsigned int flags);
extern int hipHostUnregister(void *ptr);
extern int hipMemset(void *dst, int value, size_t size);
#define hipMemAttachHost 2
#define hipHostMallocPortable 1

#define SIZE (1 << 20)

enum kind { DEVICE, MANAGED, PINNED, HOST_ALLOC, HOST_REGISTERED, PAGEABLE, KINDS };
static const char *const names[KINDS] = {"cudaMalloc",       "cudaMallocManaged",
                                         "cudaMallocHost",   "cudaHostAlloc",
                                         "cudaHostRegister", "malloc"};

static unsigned char pattern[SIZE], back[SIZE];
static char dir[3000];

static void *alloc(enum kind k)
{
    void *p = NULL;
    switch (k) {
    case DEVICE:
        CHECK(hipMalloc(&p, SIZE) == 0);
        break;
    case MANAGED:
        /* As the sample: attached to the host. */
        CHECK(hipMallocManaged(&p, SIZE, hipMemAttachHost) == 0);
        break;
    case PINNED:
        CHECK(hipHostMalloc(&p, SIZE, 0) == 0);
        break;
    case HOST_ALLOC:
        CHECK(hipHostMalloc(&p, SIZE, hipHostMallocPortable) == 0);
        break;
    case HOST_REGISTERED:
        p = aligned_alloc(4096, SIZE);
        CHECK(p != NULL && hipHostRegister(p, SIZE, 0) == 0);
        break;
    default:
        p = malloc(SIZE);
        CHECK(p != NULL);
    }
    return p;
}

static void release(enum kind k, void *p)
{
    switch (k) {
    case DEVICE:
    case MANAGED:
        CHECK(hipFree(p) == 0);
        break;
    case PINNED:
    case HOST_ALLOC:
        CHECK(hipHostFree(p) == 0);
        break;
    case HOST_REGISTERED:
        CHECK(hipHostUnregister(p) == 0);
        free(p);
        break;
    default:
        free(p);
    }
}

/* Sets the buffer's bytes, as the sample does: the runtime's memset for memory of the
 * runtime's allocators, the C library's for host memory. */
static void set(enum kind k, void *p, int value)
{
    if (k == DEVICE || k == MANAGED)
        CHECK(hipMemset(p, value, SIZE) == 0);
    else
        memset(p, value, SIZE);
}

/* The buffer's bytes, in `back`. */
static void get(enum kind k, const void *p)
{
    if (k == DEVICE)
        CHECK(hipMemcpy(back, p, SIZE, D2H) == 0);
    else
        memcpy(back, p, SIZE);
}

/* A file registered with cuFile: opened with O_DIRECT as the sample does, without it where
 * the file system refuses it. */
static int open_file(const char *name, int flags, CUfileHandle_t *fh)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, flags | O_DIRECT, 0644);
    if (fd < 0 && errno == EINVAL)
        fd = open(path, flags, 0644);
    CHECK(fd >= 0);
    CUfileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    d.handle.fd = fd;
    CHECK(IS(cuFileHandleRegister(fh, &d), CU_FILE_SUCCESS));
    return fd;
}

/* Whether `len` bytes at `offset` of the file `name` are `expected`, read through a
 * descriptor of its own (the test's may have O_DIRECT, which wants aligned buffers). */
static int file_holds(const char *name, off_t offset, const unsigned char *expected, size_t len)
{
    static unsigned char got[SIZE];
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? pread(fd, got, len, offset) : -1;
    if (fd >= 0)
        close(fd);
    return n == (ssize_t)len && memcmp(got, expected, len) == 0;
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

/* Every call on one buffer of kind k, registered or not. */
static void exercise(enum kind k, int registered)
{
    int before = failures;
    void *buf = alloc(k);
    if (buf == NULL)
        return;
    if (registered)
        CHECK(IS(cuFileBufRegister(buf, SIZE, 0), CU_FILE_SUCCESS));

    /* cufile_sample_015: the file read into the buffer, the buffer written to a new file. */
    char out[64];
    snprintf(out, sizeof out, "out-%d-%d", (int)k, registered);
    CUfileHandle_t in_fh, out_fh;
    int in_fd = open_file("in", O_RDONLY, &in_fh);
    int out_fd = open_file(out, O_CREAT | O_RDWR | O_TRUNC, &out_fh);
    set(k, buf, 0);
    CHECK(cuFileRead(in_fh, buf, SIZE, 0, 0) == SIZE);
    get(k, buf);
    CHECK(memcmp(back, pattern, SIZE) == 0);
    CHECK(cuFileWrite(out_fh, buf, SIZE, 0, 0) == SIZE);
    CHECK(file_holds(out, 0, pattern, SIZE));

    /* At an offset in the buffer and the file; past the end of the file. */
    set(k, buf, 0);
    CHECK(cuFileRead(in_fh, buf, 4096, 8192, 4096) == 4096);
    get(k, buf);
    CHECK(memcmp(back + 4096, pattern + 8192, 4096) == 0 && back[0] == 0 && back[8192] == 0);
    CHECK(cuFileRead(in_fh, buf, 4096, SIZE, 0) == 0);

    /* A batch: the first half read in, the second half written out at the file's end. */
    set(k, buf, 0x5a);
    CUfileBatchHandle_t batch = NULL;
    CHECK(IS(cuFileBatchIOSetUp(&batch, 2), CU_FILE_SUCCESS));
    CUfileIOParams_t ops[2] = {
        op(in_fh, CUFILE_READ, buf, 0, 0, SIZE / 2, 1),
        op(out_fh, CUFILE_WRITE, buf, SIZE / 2, SIZE, SIZE / 2, 2),
    };
    CHECK(IS(cuFileBatchIOSubmit(batch, 2, ops, 0), CU_FILE_SUCCESS));
    CUfileIOEvents_t events[2];
    unsigned got = 0;
    for (int rounds = 0; got < 2 && rounds < 1000; rounds++) {
        unsigned nr = 2 - got;
        if (!IS(cuFileBatchIOGetStatus(batch, 1, &nr, events + got, NULL), CU_FILE_SUCCESS))
            break;
        got += nr;
    }
    CHECK(got == 2);
    for (unsigned i = 0; i < got; i++)
        CHECK(events[i].status == CUFILE_COMPLETE && events[i].ret == SIZE / 2);
    cuFileBatchIODestroy(batch);
    get(k, buf);
    CHECK(memcmp(back, pattern, SIZE / 2) == 0);
    static unsigned char fives[SIZE / 2];
    memset(fives, 0x5a, sizeof fives);
    CHECK(file_holds(out, SIZE, fives, SIZE / 2));

    /* Stream-ordered: a read of the file's second half, then a write of it, on one stream. */
    CUstream s = NULL;
    CHECK(hipStreamCreate(&s) == 0);
    set(k, buf, 0);
    size_t rsize = SIZE / 2, wsize = SIZE / 2;
    off_t rfo = SIZE / 2, rbo = 0, wfo = 3 * SIZE / 2, wbo = 0;
    ssize_t nread = -7, written = -7;
    CHECK(IS(cuFileReadAsync(in_fh, buf, &rsize, &rfo, &rbo, &nread, s), CU_FILE_SUCCESS));
    CHECK(IS(cuFileWriteAsync(out_fh, buf, &wsize, &wfo, &wbo, &written, s), CU_FILE_SUCCESS));
    CHECK(hipStreamSynchronize(s) == 0);
    CHECK(nread == SIZE / 2 && written == SIZE / 2);
    CHECK(file_holds(out, 3 * SIZE / 2, pattern + SIZE / 2, SIZE / 2));
    CHECK(hipStreamDestroy(s) == 0);

    cuFileHandleDeregister(in_fh);
    cuFileHandleDeregister(out_fh);
    close(in_fd);
    close(out_fd);
    if (registered)
        CHECK(IS(cuFileBufDeregister(buf), CU_FILE_SUCCESS));
    release(k, buf);
    if (failures != before)
        fprintf(stderr, "  (%s, %s)\n", names[k], registered ? "registered" : "unregistered");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: memtypes DIR\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    for (int i = 0; i < SIZE; i++)
        pattern[i] = (unsigned char)(i * 131 + 7);
    char in[4096];
    snprintf(in, sizeof in, "%s/in", dir);
    int fd = open(in, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, pattern, SIZE) == SIZE && close(fd) == 0);
    CHECK(IS(cuFileDriverOpen(), CU_FILE_SUCCESS));

    for (int k = 0; k < KINDS; k++) {
        exercise((enum kind)k, 0);
        if (k != MANAGED)
            exercise((enum kind)k, 1);
    }

    /* Managed memory cannot be registered: NVIDIA's library refuses it, and so does this one. */
    void *managed = alloc(MANAGED);
    CHECK(IS(cuFileBufRegister(managed, SIZE, 0), CU_FILE_CUDA_MEMORY_TYPE_INVALID));
    CHECK(IS(cuFileBufDeregister(managed), CU_FILE_MEMORY_NOT_REGISTERED));
    release(MANAGED, managed);

    CHECK(IS(cuFileDriverClose(), CU_FILE_SUCCESS));
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
