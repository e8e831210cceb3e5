/*
 * The stream-ordered calls from C, on the emulated HIP runtime: stream registration and its
 * errors, the first asynchronous call with the driver closed, a write and a read back on one
 * stream with and without the fixed flags (and on the null stream), parameters changed after
 * submission while the stream is held back by a host function (values not fixed are read
 * when the stream reaches the request; fixed ones are those of submission), the result in
 * *bytes_p, short reads at the end of the file, argument errors, errors reported through
 * *bytes_p, a registered buffer and file kept registered while a request uses them, stream
 * deregistration with a request in flight, and many requests on several streams from
 * threads. Usage: async DIR. Exits 0 when every check passes. tests/basic.rs builds and
 * runs it.
 */

#include "hipfile.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define N 65536
#define FILE_SIZE (4 * N)
#define BUF_SIZE (4 * N)
#define FIXED                                                                             \
    (HIPFILE_STREAM_FIXED_BUF_OFFSET | HIPFILE_STREAM_FIXED_FILE_OFFSET |                 \
     HIPFILE_STREAM_FIXED_FILE_SIZE)

#define THREADS 4
#define ROUNDS 8
#define CHUNK 8192

static hipFileHandle_t fh;
static int file_fd;
static void *dev; /* BUF_SIZE bytes, registered */
static unsigned char host[BUF_SIZE], zeros[BUF_SIZE];
static pthread_mutex_t check_lock = PTHREAD_MUTEX_INITIALIZER;

/* The byte a seed gives at offset i: the file's first FILE_SIZE bytes use seed 0. */
static unsigned char byte_at(size_t i, unsigned seed)
{
    return (unsigned char)(i * 131 + (i >> 8) * 7 + 3 + seed * 17);
}

static int same_as_pattern(const unsigned char *p, size_t n, size_t from, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != byte_at(from + i, seed))
            return 0;
    return 1;
}

/* Holds a stream back: a host function on it that waits until the gate opens. */
struct gate {
    atomic_int open;
};

static void wait_at_gate(void *arg)
{
    struct gate *g = arg;
    while (!atomic_load(&g->open))
        usleep(100);
}

static void hold(hipStream_t s, struct gate *g)
{
    atomic_store(&g->open, 0);
    CHECK(hipLaunchHostFunc(s, wait_at_gate, g) == 0);
}

static void release(struct gate *g)
{
    atomic_store(&g->open, 1);
}

static void zero_dev(void)
{
    CHECK(hipMemcpy(dev, zeros, BUF_SIZE, H2D) == 0);
}

/* A write of N bytes (seed `seed`) from dev[0..N) to the file at k*N, then a read of them
 * back into dev[N..2N), both queued on s before one synchronisation. */
static void round_trip(hipStream_t s, size_t k, unsigned seed)
{
    unsigned char src[N];
    for (size_t i = 0; i < N; i++)
        src[i] = byte_at(k * N + i, seed);
    zero_dev();
    CHECK(hipMemcpy(dev, src, N, H2D) == 0);
    size_t wsize = N, rsize = N;
    hoff_t wfo = (hoff_t)(k * N), rfo = (hoff_t)(k * N), wbo = 0, rbo = N;
    ssize_t written = -77, nread = -77;
    CHECK(IS(hipFileWriteAsync(fh, dev, &wsize, &wfo, &wbo, &written, s), hipFileSuccess));
    CHECK(IS(hipFileReadAsync(fh, dev, &rsize, &rfo, &rbo, &nread, s), hipFileSuccess));
    CHECK(hipStreamSynchronize(s) == 0);
    CHECK(written == N);
    CHECK(nread == N);
    CHECK(hipMemcpy(host, dev, 2 * N, D2H) == 0);
    CHECK(same_as_pattern(host + N, N, k * N, seed));
    /* Restore the file's bytes, seed 0, for the checks that follow. */
    unsigned char orig[N];
    for (size_t i = 0; i < N; i++)
        orig[i] = byte_at(k * N + i, 0);
    CHECK(hipMemcpy(dev, orig, N, H2D) == 0);
    CHECK(IS(hipFileWriteAsync(fh, dev, &wsize, &wfo, &wbo, &written, s), hipFileSuccess));
    CHECK(hipStreamSynchronize(s) == 0);
    CHECK(written == N);
}

/* A read of 4096 bytes at file offset 0 into dev[0..), submitted on s held back; then the
 * values are changed to 8192 bytes at file offset N into dev[2N..). Checks which were used:
 * size, file offset and buffer offset each fixed or not as `flags` says. */
static void changed_after_submission(hipStream_t s, unsigned flags)
{
    struct gate g;
    zero_dev();
    hold(s, &g);
    size_t size = 4096;
    hoff_t fo = 0, bo = 0;
    ssize_t nread = -77;
    CHECK(IS(hipFileReadAsync(fh, dev, &size, &fo, &bo, &nread, s), hipFileSuccess));
    CHECK(nread == 0); /* set at submission */
    size = 8192;
    fo = N;
    bo = 2 * N;
    release(&g);
    CHECK(hipStreamSynchronize(s) == 0);
    size_t used_size = (flags & HIPFILE_STREAM_FIXED_FILE_SIZE) ? 4096 : 8192;
    size_t used_fo = (flags & HIPFILE_STREAM_FIXED_FILE_OFFSET) ? 0 : N;
    size_t used_bo = (flags & HIPFILE_STREAM_FIXED_BUF_OFFSET) ? 0 : 2 * N;
    CHECK(nread == (ssize_t)used_size);
    CHECK(hipMemcpy(host, dev, BUF_SIZE, D2H) == 0);
    CHECK(same_as_pattern(host + used_bo, used_size, used_fo, 0));
    /* Nothing else was written. */
    for (size_t i = 0; i < BUF_SIZE; i++)
        if ((i < used_bo || i >= used_bo + used_size) && host[i] != 0) {
            CHECK(!"a byte outside the range read changed");
            break;
        }
}

/* A write submitted on s held back, its file offset then moved from 3N to 3N + 4096. */
static void write_moved_after_submission(hipStream_t s, int fixed)
{
    struct gate g;
    unsigned char src[4096];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = 0xA5;
    CHECK(hipMemcpy(dev, src, sizeof src, H2D) == 0);
    hold(s, &g);
    size_t size = sizeof src;
    hoff_t fo = 3 * N, bo = 0;
    ssize_t written = -77;
    CHECK(IS(hipFileWriteAsync(fh, dev, &size, &fo, &bo, &written, s), hipFileSuccess));
    fo = 3 * N + 4096;
    release(&g);
    CHECK(hipStreamSynchronize(s) == 0);
    CHECK(written == 4096);
    size_t at = fixed ? 3 * N : 3 * N + 4096, other = fixed ? 3 * N + 4096 : 3 * N;
    unsigned char back[4096];
    CHECK(pread(file_fd, back, sizeof back, (off_t)at) == (ssize_t)sizeof back);
    CHECK(memcmp(back, src, sizeof back) == 0);
    CHECK(pread(file_fd, back, sizeof back, (off_t)other) == (ssize_t)sizeof back);
    CHECK(same_as_pattern(back, sizeof back, other, 0));
    /* Back to seed 0. */
    for (size_t i = 0; i < sizeof back; i++)
        back[i] = byte_at(at + i, 0);
    CHECK(pwrite(file_fd, back, sizeof back, (off_t)at) == (ssize_t)sizeof back);
}

struct job {
    int t;
    void *buf; /* registered, 2 * ROUNDS * CHUNK bytes */
    int failed;
};

#define TCHECK(j, cond)                                                                   \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            pthread_mutex_lock(&check_lock);                                              \
            fprintf(stderr, "async.c:%d (thread %d): check failed: %s\n", __LINE__, (j)->t, \
                    #cond);                                                               \
            pthread_mutex_unlock(&check_lock);                                            \
            (j)->failed++;                                                                \
        }                                                                                 \
    } while (0)

/* ROUNDS writes, then ROUNDS reads back, queued on the thread's own stream before one
 * synchronisation; even threads' streams fix every value, odd ones none. */
static void *work(void *arg)
{
    struct job *j = arg;
    hipStream_t s;
    TCHECK(j, hipStreamCreate(&s) == 0);
    TCHECK(j, IS(hipFileStreamRegister(s, j->t % 2 ? 0 : FIXED), hipFileSuccess));
    size_t base = FILE_SIZE + (size_t)j->t * ROUNDS * CHUNK;
    static _Thread_local unsigned char src[ROUNDS * CHUNK], back[ROUNDS * CHUNK];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = byte_at(base + i, 5);
    TCHECK(j, hipMemcpy(j->buf, src, sizeof src, H2D) == 0);
    size_t size[2 * ROUNDS];
    hoff_t fo[2 * ROUNDS], bo[2 * ROUNDS];
    ssize_t bytes[2 * ROUNDS];
    for (int i = 0; i < ROUNDS; i++) {
        size[i] = CHUNK;
        fo[i] = (hoff_t)(base + (size_t)i * CHUNK);
        bo[i] = (hoff_t)i * CHUNK;
        bytes[i] = -77;
        TCHECK(j, IS(hipFileWriteAsync(fh, j->buf, &size[i], &fo[i], &bo[i], &bytes[i], s),
                     hipFileSuccess));
    }
    for (int i = 0; i < ROUNDS; i++) {
        int r = ROUNDS + i;
        size[r] = CHUNK;
        fo[r] = (hoff_t)(base + (size_t)i * CHUNK);
        bo[r] = (hoff_t)(ROUNDS * CHUNK + (size_t)i * CHUNK);
        bytes[r] = -77;
        TCHECK(j, IS(hipFileReadAsync(fh, j->buf, &size[r], &fo[r], &bo[r], &bytes[r], s),
                     hipFileSuccess));
    }
    TCHECK(j, hipStreamSynchronize(s) == 0);
    for (int i = 0; i < 2 * ROUNDS; i++)
        TCHECK(j, bytes[i] == CHUNK);
    TCHECK(j, hipMemcpy(back, (char *)j->buf + ROUNDS * CHUNK, sizeof back, D2H) == 0);
    TCHECK(j, memcmp(back, src, sizeof back) == 0);
    TCHECK(j, IS(hipFileStreamDeregister(s), hipFileSuccess));
    TCHECK(j, hipStreamDestroy(s) == 0);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: async DIR\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/data", argv[1]);

    hipStream_t s_fixed, s_def, s_part, s_unreg;
    CHECK(hipStreamCreate(&s_fixed) == 0);
    CHECK(hipStreamCreate(&s_def) == 0);
    CHECK(hipStreamCreate(&s_part) == 0);
    CHECK(hipStreamCreate(&s_unreg) == 0);

    /* Stream registration, with the driver closed: it does not open it. */
    CHECK(hipFileUseCount() == 0);
    CHECK(IS(hipFileStreamRegister(s_fixed, 0x10), hipFileInvalidValue));
    CHECK(IS(hipFileStreamRegister(s_fixed, 0xffffffffu), hipFileInvalidValue));
    CHECK(IS(hipFileStreamRegister(s_fixed, HIPFILE_STREAM_FLAGS_MASK), hipFileSuccess));
    CHECK(IS(hipFileStreamRegister(s_fixed, HIPFILE_STREAM_FLAGS_MASK), hipFileInvalidValue));
    CHECK(IS(hipFileStreamRegister(s_fixed, 0), hipFileInvalidValue));
    CHECK(IS(hipFileStreamDeregister(s_fixed), hipFileSuccess));
    CHECK(IS(hipFileStreamDeregister(s_fixed), hipFileInvalidValue));
    CHECK(IS(hipFileStreamDeregister(s_unreg), hipFileInvalidValue));
    CHECK(IS(hipFileStreamRegister(NULL, 0), hipFileSuccess)); /* the null stream */
    CHECK(IS(hipFileStreamDeregister(NULL), hipFileSuccess));
    CHECK(IS(hipFileStreamDeregister(NULL), hipFileInvalidValue));
    CHECK(IS(hipFileStreamRegister(s_fixed, FIXED), hipFileSuccess));
    CHECK(IS(hipFileStreamRegister(s_def, 0), hipFileSuccess));
    CHECK(IS(hipFileStreamRegister(s_part, HIPFILE_STREAM_FIXED_FILE_OFFSET), hipFileSuccess));
    CHECK(hipFileUseCount() == 0);

    /* The first asynchronous call with the driver closed opens it and fails, whatever its
     * arguments (hipFile's rule). */
    CHECK(IS(hipFileReadAsync(NULL, NULL, NULL, NULL, NULL, NULL, NULL), hipFileInvalidValue));
    CHECK(hipFileUseCount() == 1);
    CHECK(IS(hipFileWriteAsync(NULL, NULL, NULL, NULL, NULL, NULL, NULL), hipFileInvalidValue));
    CHECK(hipFileUseCount() == 1);
    CHECK(IS(hipFileDriverClose(), hipFileSuccess));
    CHECK(hipFileUseCount() == 0);
    CHECK(IS(hipFileStreamRegister(s_fixed, 0), hipFileInvalidValue)); /* still registered */

    /* A file of FILE_SIZE bytes of seed 0, a handle, a registered buffer. */
    int fd = file_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    for (size_t i = 0; i < FILE_SIZE; i++)
        host[i] = byte_at(i, 0);
    CHECK(pwrite(fd, host, FILE_SIZE, 0) == FILE_SIZE);
    hipFileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = hipFileHandleTypeOpaqueFD;
    d.handle.fd = fd;
    CHECK(IS(hipFileHandleRegister(&fh, &d), hipFileSuccess));
    CHECK(hipMalloc(&dev, BUF_SIZE) == 0);
    CHECK(IS(hipFileBufRegister(dev, BUF_SIZE, 0), hipFileSuccess));
    CHECK(hipFileUseCount() == 1);

    /* Round trips: fixed, deferred, partly fixed, unregistered, the null stream registered
     * and not. */
    round_trip(s_fixed, 0, 1);
    round_trip(s_def, 1, 2);
    round_trip(s_part, 2, 3);
    round_trip(s_unreg, 3, 4);
    CHECK(IS(hipFileStreamRegister(NULL, FIXED), hipFileSuccess));
    round_trip(NULL, 1, 6);
    CHECK(IS(hipFileStreamDeregister(NULL), hipFileSuccess));
    round_trip(NULL, 2, 7);

    /* Values changed after submission, before the stream reaches the request. */
    changed_after_submission(s_fixed, FIXED);
    changed_after_submission(s_def, 0);
    changed_after_submission(s_part, HIPFILE_STREAM_FIXED_FILE_OFFSET);
    changed_after_submission(s_unreg, 0);
    write_moved_after_submission(s_fixed, 1);
    write_moved_after_submission(s_def, 0);

    /* Short reads at the end of the file, and none past it. */
    hipStream_t eof_streams[] = {s_fixed, s_def};
    for (int i = 0; i < 2; i++) {
        size_t size = N;
        hoff_t fo = FILE_SIZE - 1000, bo = 0;
        ssize_t nread = -77;
        zero_dev();
        CHECK(IS(hipFileReadAsync(fh, dev, &size, &fo, &bo, &nread, eof_streams[i]),
                 hipFileSuccess));
        CHECK(hipStreamSynchronize(eof_streams[i]) == 0);
        CHECK(nread == 1000);
        CHECK(hipMemcpy(host, dev, N, D2H) == 0);
        CHECK(same_as_pattern(host, 1000, FILE_SIZE - 1000, 0));
        CHECK(memcmp(host + 1000, zeros, N - 1000) == 0);
        fo = FILE_SIZE + N;
        nread = -77;
        CHECK(IS(hipFileReadAsync(fh, dev, &size, &fo, &bo, &nread, eof_streams[i]),
                 hipFileSuccess));
        CHECK(hipStreamSynchronize(eof_streams[i]) == 0);
        CHECK(nread == 0);
    }

    /* Argument errors, returned at once. */
    {
        size_t size = N;
        hoff_t fo = 0, bo = 0;
        ssize_t bytes = -77;
        int not_a_handle;
        for (int w = 0; w < 2; w++) {
            hipFileError_t (*call)(hipFileHandle_t, void *, size_t *, hoff_t *, hoff_t *,
                                   ssize_t *, hipStream_t) =
                w ? hipFileWriteAsync : hipFileReadAsync;
            CHECK(IS(call(fh, NULL, &size, &fo, &bo, &bytes, s_def), hipFileInvalidValue));
            CHECK(IS(call(fh, dev, NULL, &fo, &bo, &bytes, s_def), hipFileInvalidValue));
            CHECK(IS(call(fh, dev, &size, NULL, &bo, &bytes, s_def), hipFileInvalidValue));
            CHECK(IS(call(fh, dev, &size, &fo, NULL, &bytes, s_def), hipFileInvalidValue));
            CHECK(IS(call(fh, dev, &size, &fo, &bo, NULL, s_def), hipFileInvalidValue));
            CHECK(IS(call((hipFileHandle_t)&not_a_handle, dev, &size, &fo, &bo, &bytes, s_def),
                     hipFileHandleNotRegistered));
            fo = -1;
            CHECK(IS(call(fh, dev, &size, &fo, &bo, &bytes, s_fixed), hipFileInvalidValue));
            fo = 0;
            bo = -1;
            CHECK(IS(call(fh, dev, &size, &fo, &bo, &bytes, s_fixed), hipFileInvalidValue));
            bo = BUF_SIZE;
            CHECK(IS(call(fh, dev, &size, &fo, &bo, &bytes, s_def), hipFileInvalidValue));
            bo = 1;
            size = BUF_SIZE;
            CHECK(IS(call(fh, dev, &size, &fo, &bo, &bytes, s_def), hipFileInvalidValue));
            CHECK(bytes == -77); /* untouched by a refused call */
            /* Host memory is not device memory. */
            bo = 0;
            size = 16;
            CHECK(IS(call(fh, host, &size, &fo, &bo, &bytes, s_def), hipFileHipMemoryTypeInvalid));
            /* Size 0: success, *bytes 0, nothing queued. */
            size = 0;
            CHECK(IS(call(fh, dev, &size, &fo, &bo, &bytes, s_def), hipFileSuccess));
            CHECK(bytes == 0);
            CHECK(hipStreamSynchronize(s_def) == 0);
            CHECK(bytes == 0);
            size = N;
            bytes = -77;
        }
    }

    /* Errors found when the stream reaches the request go to *bytes_p, as hipFileRead would
     * return them; fixed values cannot change. */
    {
        struct gate g;
        size_t size = 4096;
        hoff_t fo = 0, bo = 0;
        ssize_t nread = -77;
        hold(s_def, &g);
        CHECK(IS(hipFileReadAsync(fh, dev, &size, &fo, &bo, &nread, s_def), hipFileSuccess));
        fo = -1;
        release(&g);
        CHECK(hipStreamSynchronize(s_def) == 0);
        CHECK(nread == -hipFileInvalidValue);
        fo = 0;
        hold(s_def, &g);
        CHECK(IS(hipFileReadAsync(fh, dev, &size, &fo, &bo, &nread, s_def), hipFileSuccess));
        size = 2 * BUF_SIZE; /* beyond the buffer */
        release(&g);
        CHECK(hipStreamSynchronize(s_def) == 0);
        CHECK(nread == -hipFileInvalidValue);
        size = 4096;
        hold(s_fixed, &g);
        CHECK(IS(hipFileReadAsync(fh, dev, &size, &fo, &bo, &nread, s_fixed), hipFileSuccess));
        fo = -1;
        size = 2 * BUF_SIZE;
        release(&g);
        CHECK(hipStreamSynchronize(s_fixed) == 0);
        CHECK(nread == 4096);
    }

    /* An unregistered device pointer, inside its allocation. */
    {
        void *other;
        CHECK(hipMalloc(&other, 2 * N) == 0);
        CHECK(hipMemcpy(other, zeros, 2 * N, H2D) == 0);
        size_t size = N;
        hoff_t fo = 0, bo = 0;
        ssize_t nread = -77;
        CHECK(IS(hipFileReadAsync(fh, (char *)other + 4096, &size, &fo, &bo, &nread, s_def),
                 hipFileSuccess));
        CHECK(hipStreamSynchronize(s_def) == 0);
        CHECK(nread == N);
        CHECK(hipMemcpy(host, (char *)other + 4096, N, D2H) == 0);
        CHECK(same_as_pattern(host, N, 0, 0));
        size = 2 * N; /* past the allocation's end from there */
        CHECK(IS(hipFileReadAsync(fh, (char *)other + 4096, &size, &fo, &bo, &nread, s_def),
                 hipFileInvalidValue));
        CHECK(hipFree(other) == 0);
    }

    /* A registered buffer stays registered while a request uses it. */
    {
        struct gate g;
        size_t size = 4096;
        hoff_t fo = 0, bo = 0;
        ssize_t nread = -77;
        hold(s_def, &g);
        CHECK(IS(hipFileReadAsync(fh, dev, &size, &fo, &bo, &nread, s_def), hipFileSuccess));
        CHECK(IS(hipFileBufDeregister(dev), hipFileInvalidValue));
        hipFileHandleDeregister(fh); /* silently refused: the request holds the file */
        /* Deregistering the stream does not wait, and the request goes on. */
        CHECK(IS(hipFileStreamDeregister(s_def), hipFileSuccess));
        release(&g);
        CHECK(hipStreamSynchronize(s_def) == 0);
        CHECK(nread == 4096);
        CHECK(hipFileRead(fh, dev, 16, 0, 0) == 16); /* still registered */
        CHECK(IS(hipFileBufDeregister(dev), hipFileSuccess));
        CHECK(IS(hipFileBufRegister(dev, BUF_SIZE, 0), hipFileSuccess));
        CHECK(IS(hipFileStreamRegister(s_def, 0), hipFileSuccess));
    }

    /* Many requests on several streams from threads. */
    {
        void *tbuf;
        CHECK(hipMalloc(&tbuf, (size_t)THREADS * 2 * ROUNDS * CHUNK) == 0);
        CHECK(IS(hipFileBufRegister(tbuf, (size_t)THREADS * 2 * ROUNDS * CHUNK, 0),
                 hipFileSuccess));
        pthread_t threads[THREADS];
        struct job jobs[THREADS];
        for (int t = 0; t < THREADS; t++) {
            jobs[t].t = t;
            jobs[t].buf = (char *)tbuf + (size_t)t * 2 * ROUNDS * CHUNK;
            jobs[t].failed = 0;
        }
        /* Odd threads use their slice of tbuf, an interior pointer that the library treats
         * as unregistered; even threads get registered buffers of their own. */
        void *own[THREADS] = {0};
        for (int t = 0; t < THREADS; t += 2) {
            CHECK(hipMalloc(&own[t], 2 * ROUNDS * CHUNK) == 0);
            CHECK(IS(hipFileBufRegister(own[t], 2 * ROUNDS * CHUNK, 0), hipFileSuccess));
            jobs[t].buf = own[t];
        }
        for (int t = 0; t < THREADS; t++)
            CHECK(pthread_create(&threads[t], NULL, work, &jobs[t]) == 0);
        for (int t = 0; t < THREADS; t++) {
            CHECK(pthread_join(threads[t], NULL) == 0);
            failures += jobs[t].failed;
        }
        for (int t = 0; t < THREADS; t += 2) {
            CHECK(IS(hipFileBufDeregister(own[t]), hipFileSuccess));
            CHECK(hipFree(own[t]) == 0);
        }
        CHECK(IS(hipFileBufDeregister(tbuf), hipFileSuccess));
        CHECK(hipFree(tbuf) == 0);
    }

    /* The end: registrations go, the caller's descriptor stays. */
    CHECK(IS(hipFileBufDeregister(dev), hipFileSuccess));
    hipFileHandleDeregister(fh); /* no request holds the file any more */
    CHECK(hipFileRead(fh, dev, N, 0, 0) == -hipFileHandleNotRegistered);
    CHECK(IS(hipFileDriverClose(), hipFileSuccess));
    CHECK(hipFileUseCount() == 0);
    CHECK(IS(hipFileStreamDeregister(s_fixed), hipFileSuccess));
    CHECK(IS(hipFileStreamDeregister(s_def), hipFileSuccess));
    CHECK(IS(hipFileStreamDeregister(s_part), hipFileSuccess));
    CHECK(IS(hipFileStreamDeregister(s_unreg), hipFileInvalidValue));
    hipStream_t all[] = {s_fixed, s_def, s_part, s_unreg};
    for (int i = 0; i < 4; i++)
        CHECK(hipStreamDestroy(all[i]) == 0);
    CHECK(hipFree(dev) == 0);
    close(fd);

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("async: all checks passed\n");
    return 0;
}
