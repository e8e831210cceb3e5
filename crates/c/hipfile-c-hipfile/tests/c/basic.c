/*
 * A C program using only include/hipfile.h against libhipfile.so.0, on the emulated HIP
 * runtime (whose hipMalloc and hipMemcpy it declares itself): the use count, file and
 * buffer registration, a write and a read back through hipfile with the bytes checked, and
 * each return convention of the functions exported so far. Usage: basic DIR, where DIR is
 * an empty directory for its files. Exits 0 when every check passes; otherwise prints each
 * failed check with its line and exits 1. tests/basic.rs builds and runs it.
 */

#include "hipfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

/* A ssize_t return of -1 with errno e. */
#define ERRNO_IS(call, e) (errno = 0, (call) == -1 && errno == (e))
#define N 65536

static unsigned char pattern[N], back[N], zeros[N];

static hipFileDescr_t descr_of(int fd)
{
    hipFileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = hipFileHandleTypeOpaqueFD;
    d.handle.fd = fd;
    return d;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: basic DIR\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/data", argv[1]);
    for (int i = 0; i < N; i++)
        pattern[i] = (unsigned char)(i * 31 + 7);

    /* Before anything is open. */
    unsigned major = 99, minor = 99, patch = 99;
    CHECK(IS(hipFileGetVersion(&major, &minor, &patch), hipFileSuccess));
    CHECK(major == HIPFILE_VERSION_MAJOR && minor == HIPFILE_VERSION_MINOR &&
          patch == HIPFILE_VERSION_PATCH);
    CHECK(IS(hipFileGetVersion(NULL, NULL, NULL), hipFileSuccess));
    CHECK(hipFileUseCount() == 0);
    CHECK(IS(hipFileDriverClose(), hipFileDriverNotInitialized));
    CHECK(ERRNO_IS(hipFileRead(NULL, NULL, 1, 0, 0), EINVAL));
    CHECK(IS(hipFileBufDeregister(NULL), hipFileDriverClosing));
    CHECK(hipFileUseCount() == 0);

    /* Error strings. */
    CHECK(strlen(hipFileGetOpErrorString(hipFileHandleNotRegistered)) > 0);
    CHECK(strcmp(HIPFILE_ERRSTR(-hipFileInvalidValue),
                 hipFileGetOpErrorString(hipFileInvalidValue)) == 0);
    CHECK(strcmp(hipFileGetOpErrorString((hipFileOpError_t)5021), "Unknown hipFile error") == 0);
    CHECK(IS_HIPFILE_ERR(-hipFileInvalidValue) && !IS_HIPFILE_ERR(-1));

    /* The use count. */
    CHECK(IS(hipFileDriverOpen(), hipFileSuccess));
    CHECK(hipFileUseCount() == 1);
    CHECK(IS(hipFileDriverOpen(), hipFileSuccess));
    CHECK(hipFileUseCount() == 2);

    /* Files. */
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    hipFileDescr_t d = descr_of(fd);
    hipFileHandle_t fh = NULL;
    CHECK(IS(hipFileHandleRegister(NULL, &d), hipFileInvalidValue));
    CHECK(IS(hipFileHandleRegister(&fh, NULL), hipFileInvalidValue));
    d.type = hipFileHandleTypeOpaqueWin32;
    CHECK(IS(hipFileHandleRegister(&fh, &d), hipFileIONotSupported));
    d.type = (hipFileFileHandleType_t)7;
    CHECK(IS(hipFileHandleRegister(&fh, &d), hipFileIONotSupported));
    d = descr_of(-1);
    CHECK(IS(hipFileHandleRegister(&fh, &d), hipFileInternalError));
    d = descr_of(fd);
    CHECK(IS(hipFileHandleRegister(&fh, &d), hipFileSuccess));
    CHECK(fh != NULL);
    hipFileHandle_t again = NULL;
    CHECK(IS(hipFileHandleRegister(&again, &d), hipFileHandleAlreadyRegistered));
    CHECK(hipFileUseCount() == 2);

    /* Buffers. */
    void *dev = NULL, *dev2 = NULL;
    CHECK(hipMalloc(&dev, MiB) == 0);
    CHECK(hipMalloc(&dev2, MiB) == 0);
    CHECK(IS(hipFileBufRegister(NULL, MiB, 0), hipFileInvalidValue));
    CHECK(IS(hipFileBufRegister(dev, 0, 0), hipFileInvalidValue));
    CHECK(IS(hipFileBufRegister(pattern, N, 0), hipFileHipMemoryTypeInvalid));
    CHECK(IS(hipFileBufRegister((char *)dev + 4096, MiB, 0), hipFileHipPointerRangeError));
    CHECK(IS(hipFileBufRegister(dev, MiB, 0), hipFileSuccess));
    CHECK(IS(hipFileBufRegister(dev, MiB, 0), hipFileMemoryAlreadyRegistered));
    CHECK(hipFileUseCount() == 2);

    /* Write, then read back into the zeroed buffer, through the registered buffer. */
    CHECK(hipMemcpy(dev, pattern, N, H2D) == 0);
    CHECK(hipFileWrite(fh, dev, N, 0, 0) == N);
    CHECK(pread(fd, back, N, 0) == N && memcmp(back, pattern, N) == 0);
    CHECK(hipMemcpy(dev, zeros, N, H2D) == 0);
    CHECK(hipFileRead(fh, dev, N, 0, 0) == N);
    memset(back, 0, N);
    CHECK(hipMemcpy(back, dev, N, D2H) == 0);
    CHECK(memcmp(back, pattern, N) == 0);
    /* At a buffer offset, and a short read at the end of the file. */
    CHECK(hipFileRead(fh, dev, N, 4096, 8192) == N - 4096);
    memset(back, 0, N);
    CHECK(hipMemcpy(back, (char *)dev + 8192, N - 4096, D2H) == 0);
    CHECK(memcmp(back, pattern + 4096, N - 4096) == 0);
    CHECK(hipFileRead(fh, dev, 4096, N, 0) == 0);
    CHECK(hipFileRead(fh, dev, 4096, 10 * N, 0) == 0);
    CHECK(hipFileRead(fh, dev, 0, 0, 0) == 0);

    /* An unregistered pointer, inside its allocation: it runs to the allocation's end. */
    CHECK(hipFileRead(fh, (char *)dev2 + 4096, 8192, 0, 0) == 8192);
    memset(back, 0, N);
    CHECK(hipMemcpy(back, (char *)dev2 + 4096, 8192, D2H) == 0);
    CHECK(memcmp(back, pattern, 8192) == 0);
    CHECK(hipFileWrite(fh, (char *)dev2 + 4096, 8192, N, 0) == 8192);
    CHECK(hipFileRead(fh, (char *)dev2 + 4096, MiB - 4096 + 1, 0, 0) == -hipFileInvalidValue);

    /* The return conventions. */
    int bogus = 0;
    CHECK(hipFileRead((hipFileHandle_t)&bogus, dev, N, 0, 0) == -hipFileHandleNotRegistered);
    CHECK(hipFileWrite(NULL, dev, N, 0, 0) == -hipFileHandleNotRegistered);
    CHECK(hipFileRead(fh, NULL, N, 0, 0) == -hipFileInvalidValue);
    CHECK(hipFileRead(fh, dev, N, -1, 0) == -hipFileInvalidValue);
    CHECK(hipFileRead(fh, dev, N, 0, -1) == -hipFileInvalidValue);
    CHECK(hipFileRead(fh, dev, 1, 0, MiB) == -hipFileInvalidValue);
    CHECK(hipFileRead(fh, dev, MiB + 1, 0, 0) == -hipFileInvalidValue);
    /* Any size beyond the buffer is refused before a byte moves, however large. */
    CHECK(hipFileRead(fh, dev, SIZE_MAX, 0, 0) == -hipFileInvalidValue);
    CHECK(hipFileWrite(fh, dev, SIZE_MAX, 0, 0) == -hipFileInvalidValue);
    CHECK(hipFileRead(fh, dev, (size_t)1 << 40, 0, 0) == -hipFileInvalidValue);
    CHECK(hipFileRead(fh, pattern, N, 0, 0) == -hipFileHipMemoryTypeInvalid);
    /* A system error: -1 with errno. A write through a read-only descriptor is EBADF. */
    int ro = open(path, O_RDONLY);
    CHECK(ro >= 0);
    hipFileDescr_t dro = descr_of(ro);
    hipFileHandle_t fro = NULL;
    CHECK(IS(hipFileHandleRegister(&fro, &dro), hipFileSuccess));
    CHECK(ERRNO_IS(hipFileWrite(fro, dev, N, 0, 0), EBADF));
    CHECK(hipFileRead(fro, dev, N, 0, 0) == N);

    /* Deregistration. */
    CHECK(IS(hipFileBufDeregister(dev), hipFileSuccess));
    CHECK(IS(hipFileBufDeregister(dev), hipFileMemoryNotRegistered));
    CHECK(IS(hipFileBufDeregister(NULL), hipFileMemoryNotRegistered));
    CHECK(IS(hipFileBufDeregister((char *)dev2 + 4096), hipFileMemoryNotRegistered));
    CHECK(hipFileRead(fh, dev, N, 0, 0) == N); /* unregistered now, still device memory */
    hipFileHandleDeregister(fro);
    hipFileHandleDeregister(fro);
    hipFileHandleDeregister(NULL);
    hipFileHandleDeregister((hipFileHandle_t)&bogus);
    CHECK(hipFileRead(fro, dev, N, 0, 0) == -hipFileHandleNotRegistered);
    CHECK(IS(hipFileHandleRegister(&fro, &dro), hipFileSuccess)); /* the fd is free again */
    hipFileHandleDeregister(fro);
    CHECK(hipFileUseCount() == 2);

    /* Closing: 2 -> 1 keeps registrations; 1 -> 0 ends them. */
    CHECK(IS(hipFileBufRegister(dev, MiB, 0), hipFileSuccess));
    CHECK(IS(hipFileDriverClose(), hipFileSuccess));
    CHECK(hipFileUseCount() == 1);
    CHECK(hipFileRead(fh, dev, N, 0, 0) == N);
    CHECK(IS(hipFileDriverClose(), hipFileSuccess));
    CHECK(hipFileUseCount() == 0);
    CHECK(ERRNO_IS(hipFileRead(fh, dev, N, 0, 0), EINVAL));
    CHECK(IS(hipFileBufDeregister(dev), hipFileDriverClosing));

    /* Implicit opens: a registration opens the driver once (0 -> 1, never further). */
    CHECK(IS(hipFileBufRegister(NULL, MiB, 0), hipFileInvalidValue));
    CHECK(hipFileUseCount() == 1);
    CHECK(IS(hipFileBufRegister(dev, MiB, 0), hipFileSuccess)); /* the close ended the old one */
    CHECK(hipFileRead(fh, dev, N, 0, 0) == -hipFileHandleNotRegistered); /* so did it for fh */
    CHECK(IS(hipFileHandleRegister(&fh, &d), hipFileSuccess));
    CHECK(hipFileUseCount() == 1);
    CHECK(IS(hipFileDriverOpen(), hipFileSuccess));
    CHECK(hipFileUseCount() == 2);
    CHECK(hipFileRead(fh, dev, N, 0, 0) == N);
    CHECK(IS(hipFileDriverClose(), hipFileSuccess));
    CHECK(IS(hipFileDriverClose(), hipFileSuccess));
    CHECK(hipFileUseCount() == 0);
    CHECK(IS(hipFileHandleRegister(NULL, &d), hipFileInvalidValue));
    CHECK(hipFileUseCount() == 0); /* a failed file registration opens nothing */
    CHECK(IS(hipFileHandleRegister(&fh, &d), hipFileSuccess));
    CHECK(hipFileUseCount() == 1);
    hipFileHandleDeregister(fh);
    CHECK(hipFileUseCount() == 1); /* deregistration never changes the count */
    CHECK(IS(hipFileDriverClose(), hipFileSuccess));

    /* The caller's descriptors stay open and usable. */
    CHECK(pread(fd, back, 16, 0) == 16 && memcmp(back, pattern, 16) == 0);
    close(ro);
    close(fd);
    CHECK(hipFree(dev) == 0 && hipFree(dev2) == 0);

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("basic: all checks passed\n");
    return 0;
}
