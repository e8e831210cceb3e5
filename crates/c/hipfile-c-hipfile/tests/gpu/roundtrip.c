/* A C program of hipFile's API on an NVIDIA GPU (HIP_PLATFORM=nvidia): writes a file of
 * SIZE GiB from CUDA memory with hipFileWrite, reads it back into other CUDA memory with
 * hipFileRead, in requests of CHUNK MiB, and checks every byte. It prints each phase's
 * throughput (GB/s, 10^9 bytes per second); the reads run RUNS times from the page cache
 * and the median is reported. Not run by CI (it needs a GPU): docs/BENCHMARKS.md has the
 * command and the figures.
 *
 *   cc -O2 -DHIPFILE_NO_HIP_HEADERS -I include tests/gpu/roundtrip.c -L DIR -lhipfile \
 *      -L CUDA/lib64 -lcudart
 *   HIP_PLATFORM=nvidia ./a.out PATH SIZE_GIB CHUNK_MIB RUNS
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hipfile.h"

extern int cudaMalloc(void **ptr, size_t size);
extern int cudaFree(void *ptr);
extern int cudaMemcpy(void *dst, const void *src, size_t size, int kind);
#define H2D 1
#define D2H 2

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Moves size bytes in requests of chunk; 0 on success. */
static int move(hipFileHandle_t fh, void *dev, size_t size, size_t chunk, int write)
{
    for (size_t off = 0; off < size; off += chunk) {
        size_t n = size - off < chunk ? size - off : chunk;
        ssize_t got = write ? hipFileWrite(fh, dev, n, (hoff_t)off, (hoff_t)off)
                            : hipFileRead(fh, dev, n, (hoff_t)off, (hoff_t)off);
        if (got != (ssize_t)n) {
            fprintf(stderr, "%s at %zu: returned %zd\n", write ? "write" : "read", off, got);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s PATH SIZE_GIB CHUNK_MIB RUNS\n", argv[0]);
        return 2;
    }
    size_t size = strtoull(argv[2], NULL, 10) << 30;
    size_t chunk = strtoull(argv[3], NULL, 10) << 20;
    int runs = atoi(argv[4]);
    if (size == 0 || chunk == 0 || runs < 1 || runs > 15) {
        fprintf(stderr, "sizes must be positive and RUNS 1..15\n");
        return 2;
    }
    uint8_t *host = malloc(size);
    if (host == NULL) {
        fprintf(stderr, "cannot allocate %zu host bytes\n", size);
        return 1;
    }
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < size / 8; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        memcpy(host + 8 * i, &x, 8);
    }
    void *src, *dst;
    if (cudaMalloc(&src, size) || cudaMalloc(&dst, size)) {
        fprintf(stderr, "cudaMalloc failed\n");
        return 1;
    }
    cudaMemcpy(src, host, size, H2D);
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror("open");
        return 1;
    }
    hipFileDescr_t descr;
    memset(&descr, 0, sizeof descr);
    descr.type = hipFileHandleTypeOpaqueFD;
    descr.handle.fd = fd;
    hipFileHandle_t fh;
    hipFileError_t e = hipFileHandleRegister(&fh, &descr);
    if (e.err != hipFileSuccess) {
        fprintf(stderr, "hipFileHandleRegister: %d/%d\n", e.err, e.hip_drv_err);
        return 1;
    }
    double t0 = now();
    if (move(fh, src, size, chunk, 1))
        return 1;
    double wt = now() - t0;
    printf("{\"size\": %zu, \"chunk\": %zu, \"write_gbps\": %.2f", size, chunk, size / wt / 1e9);
    double rates[15];
    for (int r = 0; r < runs; r++) {
        t0 = now();
        if (move(fh, dst, size, chunk, 0))
            return 1;
        rates[r] = size / (now() - t0) / 1e9;
    }
    qsort(rates, runs, sizeof rates[0], cmp);
    printf(", \"read_gbps_runs\": [");
    for (int r = 0; r < runs; r++)
        printf("%s%.2f", r ? ", " : "", rates[r]);
    printf("], \"read_gbps_median\": %.2f", rates[runs / 2]);
    uint8_t *back = malloc(size);
    if (back == NULL)
        return 1;
    cudaMemcpy(back, dst, size, D2H);
    int same = memcmp(back, host, size) == 0;
    printf(", \"bytes_identical\": %s}\n", same ? "true" : "false");
    hipFileHandleDeregister(fh);
    close(fd);
    cudaFree(src);
    cudaFree(dst);
    return same ? 0 : 1;
}
