/*
 * hipFile's requests start after the work the program queued on the null stream before them:
 * a buffer filled by hipMemcpy from pageable memory (which returns before the bytes are on
 * the device) or by hipMemset and then written with hipFileWrite, or through a batch; a
 * buffer read into with hipFileRead while a copy into it is still queued; two reads into
 * halves of one registered buffer, which wait for the null stream at the same time; and a
 * stream-ordered read on stream 0 itself, which runs when the stream reaches it and must not
 * wait for itself.
 *
 * Each case holds the null stream back with a host function, queues the copy or memset
 * behind it, makes the request on another thread, and releases the stream once the request
 * has ended or has begun to wait for the null stream (hipfileEmuNullStreamUsers grows).
 * Usage: nullstream DIR. Exits 0 when every check passes. tests/basic.rs runs it on the
 * fallback and, on xfs, on the fastpath.
 */

#include "hipfile.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

extern hipError_t hipMemset(void *dst, int value, size_t size);
extern uint64_t hipfileEmuNullStreamUsers(void);

#define N (1 << 20)

static hipFileHandle_t fh;
static int fd;

static unsigned char *pattern_of(int seed)
{
    unsigned char *p = malloc(N);
    for (size_t i = 0; i < N; i++)
        p[i] = (unsigned char)((i * 2654435761u) >> 7) ^ (unsigned char)seed;
    return p;
}

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

enum call { WRITE, READ, BATCH_WRITE, READ_LOW, READ_HIGH };

struct request {
    enum call call;
    void *dev;
    ssize_t got;
    volatile int ended;
};

static ssize_t batch_write(void *dev)
{
    hipFileBatchHandle_t b;
    if (!IS(hipFileBatchIOSetUp(&b, 1), hipFileSuccess))
        return -1;
    hipFileIOParams_t p;
    memset(&p, 0, sizeof p);
    p.mode = hipFileBatch;
    p.opcode = hipFileBatchWrite;
    p.fh = fh;
    p.u.batch.devPtr_base = dev;
    p.u.batch.size = N;
    ssize_t got = -1;
    if (IS(hipFileBatchIOSubmit(b, 1, &p, 0), hipFileSuccess)) {
        hipFileIOEvents_t ev;
        unsigned nr = 1;
        if (IS(hipFileBatchIOGetStatus(b, 1, &nr, &ev, NULL), hipFileSuccess) && nr == 1 &&
            ev.status == hipFileComplete)
            got = (ssize_t)ev.ret;
    }
    hipFileBatchIODestroy(b);
    return got;
}

static void *run(void *arg)
{
    struct request *r = arg;
    switch (r->call) {
    case WRITE: r->got = hipFileWrite(fh, r->dev, N, 0, 0); break;
    case READ: r->got = hipFileRead(fh, r->dev, N, 0, 0); break;
    case BATCH_WRITE: r->got = batch_write(r->dev); break;
    case READ_LOW: r->got = hipFileRead(fh, r->dev, N / 2, 0, 0); break;
    case READ_HIGH: r->got = hipFileRead(fh, r->dev, N / 2, N / 2, N / 2); break;
    }
    r->ended = 1;
    return NULL;
}

static void queue_copy(void *dev, int seed)
{
    unsigned char *p = pattern_of(seed);
    CHECK(hipMemcpy(dev, p, N, H2D) == 0); /* pageable: returns before the copy runs */
    free(p);
}

static void queue_memset(void *dev, int value)
{
    CHECK(hipMemset(dev, value, N) == 0);
}

/* The request `call` on `dev`, made while the null stream holds the work `queue_work`
 * queued into `dev`. */
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

int main(int argc, char **argv)
{
    if (argc != 2 || chdir(argv[1]) != 0) {
        fprintf(stderr, "usage: nullstream DIR\n");
        return 2;
    }
    alarm(300); /* a request that waits for itself ends the program, not the test run */
    fd = open("nullstream.bin", O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, N) == 0);
    CHECK(IS(hipFileDriverOpen(), hipFileSuccess));
    hipFileDescr_t descr;
    memset(&descr, 0, sizeof descr);
    descr.type = hipFileHandleTypeOpaqueFD;
    descr.handle.fd = fd;
    CHECK(IS(hipFileHandleRegister(&fh, &descr), hipFileSuccess));
    void *dev;
    CHECK(hipMalloc(&dev, N) == 0);
    unsigned char *p5 = pattern_of(5), *sevens = malloc(N);
    memset(sevens, 0x77, N);

    behind_null_stream(WRITE, dev, queue_copy, 5);
    CHECK(file_is(p5));
    behind_null_stream(WRITE, dev, queue_memset, 0x77);
    CHECK(file_is(sevens));
    behind_null_stream(BATCH_WRITE, dev, queue_copy, 5);
    CHECK(file_is(p5));
    behind_null_stream(READ, dev, queue_memset, 0x11);
    CHECK(device_is(dev, p5));

    CHECK(IS(hipFileBufRegister(dev, N, 0), hipFileSuccess));
    behind_null_stream(WRITE, dev, queue_memset, 0x77);
    CHECK(file_is(sevens));
    behind_null_stream(READ, dev, queue_copy, 6);
    CHECK(device_is(dev, sevens));
    CHECK(IS(hipFileBufDeregister(dev), hipFileSuccess));

    /* A buffer that a request uses cannot be deregistered (hipFileInvalidValue), whether
     * the request is synchronous or a batch's; it stays registered, the request completes,
     * and then the buffer deregisters. Each request is held behind the null stream. */
    CHECK(IS(hipFileBufRegister(dev, N, 0), hipFileSuccess));
    hold();
    queue_copy(dev, 9);
    uint64_t before = hipfileEmuNullStreamUsers();
    struct request r = {READ, dev, -2, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, run, &r) == 0);
    while (!r.ended && hipfileEmuNullStreamUsers() <= before)
        usleep(1000);
    CHECK(IS(hipFileBufDeregister(dev), hipFileInvalidValue));
    release();
    pthread_join(t, NULL);
    CHECK(r.got == N);
    CHECK(device_is(dev, sevens));

    /* Reads into one registered buffer run at once (cuFile clients such as fastsafetensors
     * read a file into one registered buffer from many threads): while the read of one
     * half waits for the null stream, the read of the other half begins to wait too. */
    hold();
    before = hipfileEmuNullStreamUsers();
    struct request halves[2] = {{READ_LOW, dev, -2, 0}, {READ_HIGH, dev, -2, 0}};
    pthread_t ht[2];
    for (int i = 0; i < 2; i++) {
        CHECK(pthread_create(&ht[i], NULL, run, &halves[i]) == 0);
        for (int ms = 0; hipfileEmuNullStreamUsers() < before + 1 + (uint64_t)i; ms++) {
            if (ms > 60000) {
                fprintf(stderr, "read %d into the registered buffer did not start while "
                                "another read into it waited\n", i);
                exit(1);
            }
            usleep(1000);
        }
    }
    release();
    for (int i = 0; i < 2; i++) {
        pthread_join(ht[i], NULL);
        CHECK(halves[i].got == N / 2);
    }
    CHECK(device_is(dev, sevens));

    hipFileBatchHandle_t b;
    CHECK(IS(hipFileBatchIOSetUp(&b, 1), hipFileSuccess));
    hipFileIOParams_t p;
    memset(&p, 0, sizeof p);
    p.mode = hipFileBatch;
    p.opcode = hipFileBatchRead;
    p.fh = fh;
    p.u.batch.devPtr_base = dev;
    p.u.batch.size = N;
    hold();
    CHECK(IS(hipFileBatchIOSubmit(b, 1, &p, 0), hipFileSuccess));
    CHECK(IS(hipFileBufDeregister(dev), hipFileInvalidValue));
    release();
    hipFileIOEvents_t ev;
    unsigned nr = 1;
    CHECK(IS(hipFileBatchIOGetStatus(b, 1, &nr, &ev, NULL), hipFileSuccess));
    CHECK(nr == 1 && ev.status == hipFileComplete && ev.ret == N);
    hipFileBatchIODestroy(b);
    CHECK(hipStreamSynchronize(NULL) == 0);
    CHECK(IS(hipFileBufDeregister(dev), hipFileSuccess));

    /* A stream-ordered read on stream 0, behind a copy on stream 0. */
    hold();
    queue_copy(dev, 8);
    size_t size = N;
    hoff_t file_off = 0, buf_off = 0;
    ssize_t nread = -2;
    CHECK(IS(hipFileReadAsync(fh, dev, &size, &file_off, &buf_off, &nread, NULL),
             hipFileSuccess));
    release();
    CHECK(hipStreamSynchronize(NULL) == 0);
    CHECK(nread == N);
    CHECK(device_is(dev, sevens));

    CHECK(hipFree(dev) == 0);
    free(p5);
    free(sevens);
    hipFileHandleDeregister(fh);
    CHECK(IS(hipFileDriverClose(), hipFileSuccess));
    close(fd);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
