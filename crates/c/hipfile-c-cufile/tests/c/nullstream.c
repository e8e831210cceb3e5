/*
 * cuFile's requests start after the work the program queued on the null stream before them,
 * as fio's libcufile engine and NVIDIA's samples expect: a buffer filled by hipMemcpy from
 * pageable memory (which returns before the bytes are on the device) or by hipMemset, then
 * written with cuFileWrite; a buffer read into with cuFileRead while a copy into it is still
 * queued; the same through a batch; and a stream-ordered read on stream 0 itself, which runs
 * when the stream reaches it and must not wait for itself (NVIDIA's sample 031).
 *
 * Part one holds the null stream back with a host function, queues the copy behind it, makes
 * the request on another thread, and releases the stream once the request has ended or has
 * begun to wait for the null stream (hipfileEmuNullStreamUsers grows). Part two is fio's
 * pattern: 4 threads, each its own buffer and file region, 1 MiB blocks each filled by
 * hipMemcpy then written, with the null stream's copies delayed by the emulated runtime
 * (HIPFILE_EMU_NULL_STREAM_DELAY, set by tests/basic.rs); every block is read back and
 * compared. Usage: nullstream DIR. Exits 0 when every check passes.
 */

#include "cufile.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

extern int hipMemset(void *dst, int value, size_t size);
extern int hipLaunchHostFunc(CUstream stream, void (*fn)(void *), void *data);
extern uint64_t hipfileEmuNullStreamUsers(void);

#define N (1 << 20)
#define THREADS 4
#define BLOCKS 16

static CUfileHandle_t fh;
static int fd;

static unsigned char *pattern_of(int seed)
{
    unsigned char *p = malloc(N);
    for (size_t i = 0; i < N; i++)
        p[i] = (unsigned char)((i * 2654435761u) >> 7) ^ (unsigned char)seed;
    return p;
}

/* ---- holding the null stream ---- */

static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static int released;

static void held(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&hold_lock);
    while (!released)
        pthread_cond_wait(&hold_cond, &hold_lock);
    pthread_mutex_unlock(&hold_lock);
}

static void hold(void)
{
    released = 0;
    CHECK(hipLaunchHostFunc(NULL, held, NULL) == 0);
}

static void release(void)
{
    pthread_mutex_lock(&hold_lock);
    released = 1;
    pthread_cond_broadcast(&hold_cond);
    pthread_mutex_unlock(&hold_lock);
}

/* ---- one request on another thread ---- */

enum call { WRITE, READ, BATCH_WRITE, BATCH_READ };

struct request {
    enum call call;
    void *dev;
    ssize_t got;
    volatile int ended;
};

static ssize_t batch(CUfileOpcode_t opcode, void *dev)
{
    CUfileBatchHandle_t b;
    if (!IS(cuFileBatchIOSetUp(&b, 1), CU_FILE_SUCCESS))
        return -1;
    CUfileIOParams_t p;
    memset(&p, 0, sizeof p);
    p.mode = CUFILE_BATCH;
    p.fh = fh;
    p.opcode = opcode;
    p.u.batch.devPtr_base = dev;
    p.u.batch.size = N;
    p.cookie = (void *)7;
    ssize_t got = -1;
    if (IS(cuFileBatchIOSubmit(b, 1, &p, 0), CU_FILE_SUCCESS)) {
        CUfileIOEvents_t ev;
        unsigned nr = 1;
        struct timespec t = {60, 0};
        if (IS(cuFileBatchIOGetStatus(b, 1, &nr, &ev, &t), CU_FILE_SUCCESS) && nr == 1 &&
            ev.status == CUFILE_COMPLETE)
            got = (ssize_t)ev.ret;
    }
    cuFileBatchIODestroy(b);
    return got;
}

static void *run(void *arg)
{
    struct request *r = arg;
    switch (r->call) {
    case WRITE: r->got = cuFileWrite(fh, r->dev, N, 0, 0); break;
    case READ: r->got = cuFileRead(fh, r->dev, N, 0, 0); break;
    case BATCH_WRITE: r->got = batch(CUFILE_WRITE, r->dev); break;
    case BATCH_READ: r->got = batch(CUFILE_READ, r->dev); break;
    }
    r->ended = 1;
    return NULL;
}

/* Makes the request `call` on `dev` while the null stream is held behind `queue_work`, which
 * queues work into `dev` on it; releases the stream once the request ended or waits. */
static void behind_null_stream(enum call call, void *dev, void (*queue_work)(void *, int), int arg)
{
    hold();
    queue_work(dev, arg);
    uint64_t before = hipfileEmuNullStreamUsers();
    struct request r = {call, dev, -2, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, run, &r) == 0);
    for (int ms = 0; !r.ended && hipfileEmuNullStreamUsers() <= before; ms++) {
        if (ms > 60000) {
            fprintf(stderr, "the request neither ended nor waited\n");
            exit(1);
        }
        usleep(1000);
    }
    release();
    pthread_join(t, NULL);
    CHECK(r.got == N);
    CHECK(hipStreamSynchronize(NULL) == 0);
}

static void queue_copy(void *dev, int seed)
{
    unsigned char *p = pattern_of(seed);
    CHECK(hipMemcpy(dev, p, N, H2D) == 0); /* pageable: returns before the copy runs */
    memset(p, 0, N);                        /* the copy took the bytes as they were */
    free(p);
}

static void queue_memset(void *dev, int value)
{
    CHECK(hipMemset(dev, value, N) == 0);
}

static int file_is(const unsigned char *want)
{
    unsigned char *got = malloc(N);
    int same = pread(fd, got, N, 0) == N && memcmp(got, want, N) == 0;
    free(got);
    return same;
}

static int device_is(void *dev, const unsigned char *want)
{
    unsigned char *got = malloc(N);
    int same = hipMemcpy(got, dev, N, D2H) == 0 && memcmp(got, want, N) == 0;
    free(got);
    return same;
}

/* ---- part two: fio's pattern ---- */

struct worker {
    int index;
    int wrong;
};

static void *fio_job(void *arg)
{
    struct worker *w = arg;
    void *dev;
    CHECK(hipMalloc(&dev, N) == 0);
    unsigned char *block = malloc(N);
    for (int b = 0; b < BLOCKS; b++) {
        off_t at = ((off_t)w->index * BLOCKS + b) * N;
        memset(block, 0x40 + w->index * BLOCKS + b, N);
        CHECK(hipMemcpy(dev, block, N, H2D) == 0);
        CHECK(cuFileWrite(fh, dev, N, at, 0) == N);
    }
    for (int b = 0; b < BLOCKS; b++) {
        off_t at = ((off_t)w->index * BLOCKS + b) * N;
        unsigned char want = (unsigned char)(0x40 + w->index * BLOCKS + b);
        int same = pread(fd, block, N, at) == N;
        for (size_t i = 0; same && i < N; i++)
            same = block[i] == want;
        w->wrong += !same;
    }
    free(block);
    CHECK(hipFree(dev) == 0);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2 || chdir(argv[1]) != 0) {
        fprintf(stderr, "usage: nullstream DIR\n");
        return 2;
    }
    alarm(300); /* a request that waits for itself ends the program, not the test run */
    fd = open("nullstream.bin", O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, (off_t)THREADS * BLOCKS * N) == 0);
    CHECK(IS(cuFileDriverOpen(), CU_FILE_SUCCESS));
    CUfileDescr_t descr;
    memset(&descr, 0, sizeof descr);
    descr.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    descr.handle.fd = fd;
    CHECK(IS(cuFileHandleRegister(&fh, &descr), CU_FILE_SUCCESS));
    void *dev;
    CHECK(hipMalloc(&dev, N) == 0);

    /* Writes see the bytes of a copy from pageable memory and of a memset. */
    unsigned char *p5 = pattern_of(5), *ones = malloc(N);
    memset(ones, 0x77, N);
    behind_null_stream(WRITE, dev, queue_copy, 5);
    CHECK(file_is(p5));
    behind_null_stream(WRITE, dev, queue_memset, 0x77);
    CHECK(file_is(ones));
    behind_null_stream(BATCH_WRITE, dev, queue_copy, 5);
    CHECK(file_is(p5));

    /* Reads land after the copy queued before them. */
    behind_null_stream(READ, dev, queue_copy, 6);
    CHECK(device_is(dev, p5));
    behind_null_stream(BATCH_READ, dev, queue_memset, 0x11);
    CHECK(device_is(dev, p5));

    /* The same with the buffer registered. */
    CHECK(IS(cuFileBufRegister(dev, N, 0), CU_FILE_SUCCESS));
    behind_null_stream(WRITE, dev, queue_memset, 0x77);
    CHECK(file_is(ones));
    behind_null_stream(READ, dev, queue_copy, 6);
    CHECK(device_is(dev, ones));
    CHECK(IS(cuFileBufDeregister(dev), CU_FILE_SUCCESS));

    /* A buffer a synchronous read is filling cannot be deregistered: CU_FILE_INVALID_VALUE,
     * the buffer stays registered, and the read completes into it. The read is held behind
     * the null stream until the refusal has been seen. */
    CHECK(IS(cuFileBufRegister(dev, N, 0), CU_FILE_SUCCESS));
    hold();
    queue_copy(dev, 9);
    uint64_t users = hipfileEmuNullStreamUsers();
    struct request r = {READ, dev, -2, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, run, &r) == 0);
    for (int ms = 0; !r.ended && hipfileEmuNullStreamUsers() <= users; ms++) {
        if (ms > 60000) {
            fprintf(stderr, "the read neither ended nor waited\n");
            exit(1);
        }
        usleep(1000);
    }
    CHECK(!r.ended);
    CHECK(IS(cuFileBufDeregister(dev), CU_FILE_INVALID_VALUE));
    release();
    pthread_join(t, NULL);
    CHECK(r.got == N);
    CHECK(device_is(dev, ones));
    CHECK(IS(cuFileBufDeregister(dev), CU_FILE_SUCCESS));

    /* A buffer a batch request uses cannot be deregistered until the batch has reported
     * it: CU_FILE_INVALID_VALUE, and the buffer stays registered. */
    CHECK(IS(cuFileBufRegister(dev, N, 0), CU_FILE_SUCCESS));
    CUfileBatchHandle_t b;
    CHECK(IS(cuFileBatchIOSetUp(&b, 1), CU_FILE_SUCCESS));
    CUfileIOParams_t p;
    memset(&p, 0, sizeof p);
    p.mode = CUFILE_BATCH;
    p.fh = fh;
    p.opcode = CUFILE_READ;
    p.u.batch.devPtr_base = dev;
    p.u.batch.size = N;
    hold();
    CHECK(IS(cuFileBatchIOSubmit(b, 1, &p, 0), CU_FILE_SUCCESS));
    CHECK(IS(cuFileBufDeregister(dev), CU_FILE_INVALID_VALUE));
    release();
    CUfileIOEvents_t ev;
    unsigned nr = 1;
    /* The longest timeout a timespec can say waits, rather than overflowing. */
    struct timespec forever = {INT64_MAX, 0};
    CHECK(IS(cuFileBatchIOGetStatus(b, 1, &nr, &ev, &forever), CU_FILE_SUCCESS));
    CHECK(nr == 1 && ev.status == CUFILE_COMPLETE && ev.ret == N);
    cuFileBatchIODestroy(b);
    CHECK(hipStreamSynchronize(NULL) == 0);
    CHECK(IS(cuFileBufDeregister(dev), CU_FILE_SUCCESS));

    /* Sample 031: a stream-ordered read on stream 0, behind a copy on stream 0. */
    hold();
    queue_copy(dev, 8);
    size_t size = N;
    off_t file_off = 0, buf_off = 0;
    ssize_t nread = -2;
    CHECK(IS(cuFileReadAsync(fh, dev, &size, &file_off, &buf_off, &nread, NULL),
             CU_FILE_SUCCESS));
    release();
    CHECK(hipStreamSynchronize(NULL) == 0);
    CHECK(nread == N);
    CHECK(device_is(dev, ones));

    /* fio's pattern, with the null stream's copies delayed. */
    struct worker workers[THREADS];
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (struct worker){i, 0};
        CHECK(pthread_create(&threads[i], NULL, fio_job, &workers[i]) == 0);
    }
    int wrong = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        wrong += workers[i].wrong;
    }
    printf("fio pattern: %d of %d blocks wrong\n", wrong, THREADS * BLOCKS);
    CHECK(wrong == 0);

    CHECK(hipFree(dev) == 0);
    free(p5);
    free(ones);
    cuFileHandleDeregister(fh);
    CHECK(IS(cuFileDriverClose(), CU_FILE_SUCCESS));
    close(fd);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
