// The disk's limit for reading a whole checkpoint: every byte of FILE... read once with
// plain reads into host memory, by THREADS threads that take the next BLOCK-byte piece in
// file order (file after file), through O_DIRECT (`direct`) or the page cache
// (`buffered`). The same bytes in the same order as a cold `hipfile load`, so that the load
// is compared with the disk over its own files rather than over one file's first
// gigabytes. Empty the page cache before a run (`sync; echo 3 > /proc/sys/vm/drop_caches`).
//
//   gcc -O2 -o disk_read docs/profile/disk_read.c -lpthread
//   disk_read direct|buffered THREADS BLOCK_MIB FILE...
//
// Prints one JSON object: mode, threads, block, bytes, seconds, gbps (10^9 bytes/s).
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct piece {
    int fd;
    off_t offset;
    size_t len;
};

static struct piece *pieces;
static size_t count;
static atomic_size_t next_piece;
static size_t block;
static atomic_int failed;

static void *reader(void *arg) {
    (void)arg;
    void *buf = NULL;
    if (posix_memalign(&buf, 1 << 21, block) != 0) {
        atomic_store(&failed, 1);
        return NULL;
    }
    for (;;) {
        size_t i = atomic_fetch_add(&next_piece, 1);
        if (i >= count) break;
        struct piece p = pieces[i];
        size_t done = 0;
        while (done < p.len) {
            // O_DIRECT wants whole blocks: the last piece of a file is read rounded up.
            size_t want = (p.len - done + 4095) & ~(size_t)4095;
            ssize_t n = pread(p.fd, (char *)buf + done, want, p.offset + (off_t)done);
            if (n < 0) {
                perror("pread");
                atomic_store(&failed, 1);
                free(buf);
                return NULL;
            }
            if (n == 0) break;
            done += (size_t)n;
        }
    }
    free(buf);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s direct|buffered THREADS BLOCK_MIB FILE...\n", argv[0]);
        return 2;
    }
    int direct = strcmp(argv[1], "direct") == 0;
    if (!direct && strcmp(argv[1], "buffered") != 0) {
        fprintf(stderr, "mode must be direct or buffered, not %s\n", argv[1]);
        return 2;
    }
    int threads = atoi(argv[2]);
    block = (size_t)atoi(argv[3]) << 20;
    if (threads < 1 || threads > 256 || block == 0) {
        fprintf(stderr, "THREADS must be 1 to 256 and BLOCK_MIB at least 1\n");
        return 2;
    }
    size_t cap = 1024;
    pieces = malloc(cap * sizeof *pieces);
    if (!pieces) {
        perror("malloc");
        return 1;
    }
    unsigned long long total = 0;
    for (int a = 4; a < argc; a++) {
        int fd = open(argv[a], O_RDONLY | (direct ? O_DIRECT : 0));
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0) {
            perror(argv[a]);
            return 1;
        }
        if (!direct) posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
        for (off_t o = 0; o < st.st_size; o += (off_t)block) {
            if (count == cap) {
                struct piece *more = realloc(pieces, (cap *= 2) * sizeof *pieces);
                if (!more) {
                    perror("realloc");
                    return 1;
                }
                pieces = more;
            }
            size_t len = (size_t)(st.st_size - o) < block ? (size_t)(st.st_size - o) : block;
            pieces[count++] = (struct piece){fd, o, len};
        }
        total += (unsigned long long)st.st_size;
    }
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, reader, NULL);
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    if (atomic_load(&failed)) return 1;
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    printf("{\"mode\":\"%s\",\"threads\":%d,\"block\":%zu,\"bytes\":%llu,\"seconds\":%.4f,"
           "\"gbps\":%.4f}\n",
           argv[1], threads, block, total, s, (double)total / s / 1e9);
    return 0;
}
