/*
 * The statistics calls from C: hipFileGetStatsL1/L2/L3 after known reads and writes, with
 * the counts and bytes checked exactly. Usage: stats DIR LEVEL, where DIR is an empty
 * directory for its files and LEVEL the HIPFILE_STATS_LEVEL the program runs under (3: every
 * level answers; 1: level 1 answers and levels 2 and 3 are refused). Exits 0 when every
 * check passes; otherwise prints each failed check with its line and exits 1. Also checks
 * the channel `hipfile stats PID` reads: /dev/shm/hipfile-UID/stats.PID, mode 0600, while the
 * driver is open, and gone once it is closed.
 * tests/basic.rs builds and runs it.
 */

#include "hipfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define N 65536

static unsigned char pattern[N];

static hipFileDescr_t descr_of(int fd)
{
    hipFileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = hipFileHandleTypeOpaqueFD;
    d.handle.fd = fd;
    return d;
}

/* The histogram bucket of a request of n bytes: below 2 KiB → 0, else log2 of the KiB. */
static int bucket(size_t n)
{
    size_t kib = n >> 10;
    int b = 0;
    while (kib > 1 && b < 31) {
        kib >>= 1;
        b++;
    }
    return b;
}

static uint64_t sum(const uint64_t *h)
{
    uint64_t s = 0;
    for (int i = 0; i < 32; i++)
        s += h[i];
    return s;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: stats DIR LEVEL\n");
        return 2;
    }
    int level = atoi(argv[2]);
    char path[4096];
    snprintf(path, sizeof path, "%s/data", argv[1]);
    for (int i = 0; i < N; i++)
        pattern[i] = (unsigned char)(i * 13 + 1);

    hipFileStatsLevel1_t l1;
    static hipFileStatsLevel2_t l2;
    static hipFileStatsLevel3_t l3;

    /* Before the driver is open, and NULL. */
    CHECK(IS(hipFileGetStatsL1(&l1), hipFileDriverNotInitialized));
    CHECK(IS(hipFileDriverOpen(), hipFileSuccess));
    char channel[64];
    snprintf(channel, sizeof channel, "/dev/shm/hipfile-%u/stats.%d", (unsigned)getuid(),
             (int)getpid());
    struct stat st;
    CHECK(lstat(channel, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600 &&
          st.st_uid == getuid());
    CHECK(IS(hipFileGetStatsL1(NULL), hipFileInvalidValue));
    CHECK(IS(hipFileGetStatsL2(NULL), hipFileInvalidValue));
    CHECK(IS(hipFileGetStatsL3(NULL), hipFileInvalidValue));

    /* Nothing done yet: all zero. */
    memset(&l1, 0xff, sizeof l1);
    CHECK(IS(hipFileGetStatsL1(&l1), hipFileSuccess));
    CHECK(l1.read_ops.ok == 0 && l1.write_ops.ok == 0 && l1.read_bytes == 0);

    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    hipFileDescr_t d = descr_of(fd);
    hipFileHandle_t fh = NULL;
    CHECK(IS(hipFileHandleRegister(&fh, &d), hipFileSuccess));
    void *dev = NULL;
    CHECK(hipMalloc(&dev, N) == 0);
    CHECK(hipMemcpy(dev, pattern, N, H2D) == 0);
    CHECK(IS(hipFileBufRegister(dev, N, 0), hipFileSuccess));
    CHECK(IS(hipFileBufRegister(dev, N, 0), hipFileMemoryAlreadyRegistered));

    /* Two writes (64 KiB, 4 KiB), three reads (64 KiB, 1000 bytes, 0 at the end of the file),
     * one read refused (negative offset). */
    CHECK(hipFileWrite(fh, dev, N, 0, 0) == N);
    CHECK(hipFileWrite(fh, dev, 4096, N, 0) == 4096);
    CHECK(hipFileRead(fh, dev, N, 0, 0) == N);
    CHECK(hipFileRead(fh, dev, 1000, 0, 4096) == 1000);
    CHECK(hipFileRead(fh, dev, 10, N + 8192, 0) == 0);
    CHECK(hipFileRead(fh, dev, 10, -1, 0) == -hipFileInvalidValue);

    CHECK(IS(hipFileGetStatsL1(&l1), hipFileSuccess));
    CHECK(l1.read_ops.ok == 3 && l1.read_ops.err == 1);
    CHECK(l1.write_ops.ok == 2 && l1.write_ops.err == 0);
    CHECK(l1.read_bytes == N + 1000);
    CHECK(l1.write_bytes == N + 4096);
    CHECK(l1.hdl_register_ops.ok == 1 && l1.hdl_register_ops.err == 0);
    CHECK(l1.buf_register_ops.ok == 1);
    CHECK(l1.read_lat_avg_us == (l1.read_ops.ok ? l1.read_lat_sum_us / l1.read_ops.ok : 0));
    CHECK(l1.batch_submit_ops.ok == 0);

    if (level >= 3) {
        memset(&l2, 0xff, sizeof l2);
        CHECK(IS(hipFileGetStatsL2(&l2), hipFileSuccess));
        CHECK(memcmp(&l2.basic.read_ops, &l1.read_ops, sizeof l1.read_ops) == 0);
        CHECK(l2.basic.write_bytes == N + 4096);
        CHECK(sum(l2.read_size_kb_hist) == 3 && sum(l2.write_size_kb_hist) == 2);
        CHECK(l2.read_size_kb_hist[bucket(N)] == 1);
        CHECK(l2.read_size_kb_hist[0] == 2); /* 1000 and 10 bytes */
        CHECK(l2.write_size_kb_hist[bucket(N)] == 1 && bucket(N) == 6);
        CHECK(l2.write_size_kb_hist[bucket(4096)] == 1 && bucket(4096) == 2);

        memset(&l3, 0xff, sizeof l3);
        CHECK(IS(hipFileGetStatsL3(&l3), hipFileSuccess));
        CHECK(l3.detailed.basic.read_bytes == N + 1000);
        CHECK(sum(l3.detailed.read_size_kb_hist) == 3);
        CHECK(l3.num_gpus == 1);
        hipFilePerGpuStats_t *g = &l3.per_gpu_stats[0];
        CHECK(g->read_bytes == N + 1000 && g->write_bytes == N + 4096);
        CHECK(g->n_total_reads == 3 && g->n_total_writes == 2);
        CHECK(g->n_p2p_reads + g->n_posix_reads == 3);
        CHECK(g->n_p2p_writes + g->n_posix_writes == 2);
        CHECK(g->n_reads_err == 1 && g->n_writes_err == 0);
        /* 1000 bytes and 10 at an odd offset miss every alignment; 64 KiB at 0 meets it
         * only where the file has a direct descriptor. */
        CHECK(g->n_unaligned_reads == 2 || g->n_unaligned_reads == 3);
        CHECK(l3.per_gpu_stats[1].n_total_reads == 0);
        for (int i = 0; i < HIPFILE_GPU_UUID_LEN; i++)
            CHECK(g->uuid[i] == 0);
    } else {
        CHECK(IS(hipFileGetStatsL2(&l2), hipFileInvalidValue));
        CHECK(IS(hipFileGetStatsL3(&l3), hipFileInvalidValue));
    }

    CHECK(IS(hipFileBufDeregister(dev), hipFileSuccess));
    hipFileHandleDeregister(fh);
    CHECK(IS(hipFileGetStatsL1(&l1), hipFileSuccess));
    CHECK(l1.buf_deregister_ops.ok == 1 && l1.hdl_deregister_ops.ok == 1);
    CHECK(IS(hipFileDriverClose(), hipFileSuccess));
    CHECK(IS(hipFileGetStatsL1(&l1), hipFileDriverNotInitialized));
    errno = 0;
    CHECK(lstat(channel, &st) == -1 && errno == ENOENT);
    CHECK(hipFree(dev) == 0);
    close(fd);

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
