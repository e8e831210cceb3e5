/*
 * The library from many threads at once, on the emulated HIP runtime: first registrations
 * racing each other open the driver once (the use count ends at 1), and each thread then
 * writes and reads back its own file through its own registered buffer, through one buffer
 * registered for all of them, and through an unregistered pointer, checking every byte.
 * Usage: threads DIR. Exits 0 when every check passes. tests/basic.rs builds and runs it.
 */

#include "hipfile.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

extern hipError_t hipMalloc(void **ptr, size_t size);
extern hipError_t hipFree(void *ptr);
extern hipError_t hipMemcpy(void *dst, const void *src, size_t size, int kind);
#define H2D 1
#define D2H 2

#define THREADS 8
#define ROUNDS 10
#define N 65536

static const char *dir;
static void *shared_buf; /* THREADS * N bytes, registered once */
static int failed[THREADS];

#define CHECK(t, cond)                                                                    \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "threads.c:%d (thread %d): check failed: %s\n", __LINE__, t, #cond); \
            failed[t]++;                                                                  \
        }                                                                                 \
    } while (0)

struct job {
    int t;
    int fd;
    hipFileHandle_t fh;
};

static void *register_file(void *arg)
{
    struct job *j = arg;
    char path[4096];
    snprintf(path, sizeof path, "%s/file%d", dir, j->t);
    j->fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(j->t, j->fd >= 0);
    hipFileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = hipFileHandleTypeOpaqueFD;
    d.handle.fd = j->fd;
    hipFileError_t e = hipFileHandleRegister(&j->fh, &d);
    CHECK(j->t, e.err == hipFileSuccess);
    return NULL;
}

/* Writes N bytes of pattern from buf, reads them back into buf after zeroing it, and
 * compares. */
static void round_trip(int t, hipFileHandle_t fh, void *buf, unsigned seed)
{
    static const unsigned char zeros[N];
    unsigned char pattern[N], back[N];
    for (int i = 0; i < N; i++)
        pattern[i] = (unsigned char)(i * 131 + seed);
    CHECK(t, hipMemcpy(buf, pattern, N, H2D) == 0);
    CHECK(t, hipFileWrite(fh, buf, N, 0, 0) == N);
    CHECK(t, hipMemcpy(buf, zeros, N, H2D) == 0);
    CHECK(t, hipFileRead(fh, buf, N, 0, 0) == N);
    CHECK(t, hipMemcpy(back, buf, N, D2H) == 0);
    CHECK(t, memcmp(back, pattern, N) == 0);
}

static void *work(void *arg)
{
    struct job *j = arg;
    int t = j->t;
    void *own = NULL, *loose = NULL;
    CHECK(t, hipMalloc(&own, N) == 0);
    CHECK(t, hipMalloc(&loose, 2 * N) == 0);
    CHECK(t, hipFileBufRegister(own, N, 0).err == hipFileSuccess);
    for (int r = 0; r < ROUNDS; r++) {
        round_trip(t, j->fh, own, (unsigned)(t * 7 + r));
        /* A slice of the shared registered buffer: the registration is of its base, so this
         * is an interior pointer, checked per call. */
        round_trip(t, j->fh, (char *)shared_buf + (size_t)t * N, (unsigned)(t * 11 + r));
        round_trip(t, j->fh, (char *)loose + N, (unsigned)(t * 13 + r));
    }
    /* The shared buffer's base, registered: the threads use it at their own offsets. */
    unsigned char pattern[N], back[N];
    for (int i = 0; i < N; i++)
        pattern[i] = (unsigned char)(i + t);
    CHECK(t, hipMemcpy((char *)shared_buf + (size_t)t * N, pattern, N, H2D) == 0);
    CHECK(t, hipFileWrite(j->fh, shared_buf, N, N, (hoff_t)t * N) == N);
    CHECK(t, pread(j->fd, back, N, N) == N && memcmp(back, pattern, N) == 0);
    CHECK(t, hipFileRead(j->fh, shared_buf, N, 0, (hoff_t)t * N) == N);
    CHECK(t, hipFileBufDeregister(own).err == hipFileSuccess);
    CHECK(t, hipFree(own) == 0 && hipFree(loose) == 0);
    return NULL;
}

static int run(void *(*fn)(void *), struct job *jobs)
{
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        if (pthread_create(&th[t], NULL, fn, &jobs[t]) != 0)
            return -1;
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: threads DIR\n");
        return 2;
    }
    dir = argv[1];
    struct job jobs[THREADS];
    for (int t = 0; t < THREADS; t++)
        jobs[t].t = t;

    int bad = 0;
    if (hipFileUseCount() != 0)
        bad++;
    if (run(register_file, jobs) != 0)
        return 2;
    if (hipFileUseCount() != 1) {
        fprintf(stderr, "use count after racing registrations: %lld\n", (long long)hipFileUseCount());
        bad++;
    }
    if (hipMalloc(&shared_buf, (size_t)THREADS * N) != 0 ||
        hipFileBufRegister(shared_buf, (size_t)THREADS * N, 0).err != hipFileSuccess)
        return 2;
    if (run(work, jobs) != 0)
        return 2;
    if (hipFileBufDeregister(shared_buf).err != hipFileSuccess)
        bad++;
    for (int t = 0; t < THREADS; t++) {
        hipFileHandleDeregister(jobs[t].fh);
        close(jobs[t].fd);
        bad += failed[t];
    }
    if (hipFileDriverClose().err != hipFileSuccess || hipFileUseCount() != 0)
        bad++;
    hipFree(shared_buf);
    if (bad) {
        fprintf(stderr, "%d check(s) failed\n", bad);
        return 1;
    }
    printf("threads: all checks passed\n");
    return 0;
}
