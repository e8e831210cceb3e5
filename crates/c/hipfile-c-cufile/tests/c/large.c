/*
 * cuFileRead and cuFileWrite of more than the kernel's 0x7ffff000 bytes in one call, as
 * PyTorch's GdsFile makes them for a tensor of several GiB: cuFile moves the whole size and
 * returns it (PyTorch checks only that the return is not negative), where hipFile's calls
 * stop at 0x7ffff000. Writes N bytes (just over that) from emulated device memory, reads
 * them back into the same buffer after zeroing it, and checks the counts and bytes; then a
 * read across the end of the file returns the bytes up to it, and an unregistered buffer
 * moves the whole size too; a request that leaves the buffer, of any size, moves nothing.
 * Usage: large DIR. Exits 0 when every check passes. tests/basic.rs
 * builds and runs it.
 */

#include "cufile.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

extern int hipMemset(void *dst, int value, size_t size);

#define MAX_RW 0x7ffff000UL
/* Over the limit by two pages and a few bytes, so the last part is neither a whole page nor
 * the size of the first. */
#define N (MAX_RW + 2 * 4096 + 100)

static unsigned char value(size_t i)
{
    return (unsigned char)((i >> 12) * 7 + i * 13);
}

/* The first index where host differs from the pattern, or n. */
static size_t first_difference(const unsigned char *host, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (host[i] != value(i))
            return i;
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: large DIR\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/large", argv[1]);
    unsigned char *host = malloc(N);
    void *dev = NULL;
    CHECK(host != NULL);
    CHECK(hipMalloc(&dev, N) == 0);
    if (host == NULL || dev == NULL)
        return 1;
    for (size_t i = 0; i < N; i++)
        host[i] = value(i);
    CHECK(hipMemcpy(dev, host, N, H2D) == 0);

    CHECK(IS(cuFileDriverOpen(), CU_FILE_SUCCESS));
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CUfileDescr_t descr;
    memset(&descr, 0, sizeof descr);
    descr.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    descr.handle.fd = fd;
    CUfileHandle_t fh = NULL;
    CHECK(IS(cuFileHandleRegister(&fh, &descr), CU_FILE_SUCCESS));
    CHECK(IS(cuFileBufRegister(dev, N, 0), CU_FILE_SUCCESS));

    /* The whole size, written and read back in one call each. */
    ssize_t written = cuFileWrite(fh, dev, N, 0, 0);
    CHECK(written == (ssize_t)N);
    CHECK(lseek(fd, 0, SEEK_END) == (off_t)N);
    memset(host, 0, N);
    CHECK(hipMemcpy(dev, host, N, H2D) == 0);
    ssize_t got = cuFileRead(fh, dev, N, 0, 0);
    CHECK(got == (ssize_t)N);
    CHECK(hipMemcpy(host, dev, N, D2H) == 0);
    CHECK(first_difference(host, N) == N);

    /* Across the end of the file: the bytes up to it, from a buffer offset past the limit. */
    off_t start = 4096;
    got = cuFileRead(fh, dev, N, start, 0);
    CHECK(got == (ssize_t)(N - start));

    /* A request that leaves the buffer moves nothing, whatever its size: the whole of it is
     * checked before any byte moves. */
    CHECK(hipMemset(dev, 0x11, N) == 0);
    CHECK(cuFileRead(fh, dev, SIZE_MAX, 0, 0) == -(ssize_t)CU_FILE_INVALID_VALUE);
    CHECK(cuFileRead(fh, dev, 2 * N, 0, 0) == -(ssize_t)CU_FILE_INVALID_VALUE);
    CHECK(cuFileRead(fh, dev, N, 0, 4096) == -(ssize_t)CU_FILE_INVALID_VALUE);
    CHECK(hipMemcpy(host, dev, 8192, D2H) == 0);
    int untouched = 1;
    for (size_t i = 0; i < 8192; i++)
        untouched &= host[i] == 0x11;
    CHECK(untouched);
    CHECK(cuFileWrite(fh, dev, 2 * N, N, 0) == -(ssize_t)CU_FILE_INVALID_VALUE);
    CHECK(cuFileWrite(fh, dev, N, 0, 4096) == -(ssize_t)CU_FILE_INVALID_VALUE);
    CHECK(lseek(fd, 0, SEEK_END) == (off_t)N);
    CHECK(pread(fd, host, 8192, 0) == 8192 && first_difference(host, 8192) == 8192);

    /* An unregistered buffer moves the whole size too. */
    CHECK(IS(cuFileBufDeregister(dev), CU_FILE_SUCCESS));
    memset(host, 0, N);
    CHECK(hipMemcpy(dev, host, N, H2D) == 0);
    got = cuFileRead(fh, dev, N, 0, 0);
    CHECK(got == (ssize_t)N);
    CHECK(hipMemcpy(host, dev, N, D2H) == 0);
    CHECK(first_difference(host, N) == N);

    cuFileHandleDeregister(fh);
    close(fd);
    unlink(path);
    CHECK(IS(cuFileDriverClose(), CU_FILE_SUCCESS));
    hipFree(dev);
    free(host);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
