/*
 * A HIP application (linked with -lamdhip64: the emulated runtime, soname libamdhip64.so.7)
 * run with HIPFILE_HIP_LIBRARY naming a file: hipFile must never load that file beside the
 * runtime the program has loaded. Usage: oneruntime DIR open|refused. With "open" the file
 * is the loaded runtime under another name: the driver opens on that runtime, which knows
 * the program's hipMalloc memory (a buffer registers, a write and a read back move the
 * bytes). With "refused" it is another file: hipFileDriverOpen fails with
 * hipFileDriverNotInitialized (the library says why on stderr) and nothing is loaded. Either
 * way exactly one HIP runtime is loaded at the end. Exits 0 when every check passes;
 * tests/one_runtime.rs builds and runs it.
 */

#include "hipfile.h"

#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define N (64 * 1024)

static unsigned char pattern[N], back[N];

/* How many loaded objects are a HIP runtime: named libamdhip64, or the emulated runtime's
 * file. */
static int runtimes_loaded(struct dl_phdr_info *info, size_t size, void *count)
{
    (void)size;
    if (info->dlpi_name != NULL && (strstr(info->dlpi_name, "libamdhip64") != NULL ||
                                    strstr(info->dlpi_name, "libhipfile_emu") != NULL))
        (*(int *)count)++;
    return 0;
}

static void round_trip(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/data", dir);
    for (int i = 0; i < N; i++)
        pattern[i] = (unsigned char)(i * 11 + 1);
    void *dev = NULL;
    CHECK(hipMalloc(&dev, N) == 0);
    CHECK(hipMemcpy(dev, pattern, N, H2D) == 0);
    CHECK(IS(hipFileBufRegister(dev, N, 0), hipFileSuccess));
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    hipFileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = hipFileHandleTypeOpaqueFD;
    d.handle.fd = fd;
    hipFileHandle_t fh = NULL;
    CHECK(IS(hipFileHandleRegister(&fh, &d), hipFileSuccess));
    CHECK(hipFileWrite(fh, dev, N, 0, 0) == N);
    CHECK(hipMemcpy(dev, back, N, H2D) == 0); /* zeros over the pattern */
    CHECK(hipFileRead(fh, dev, N, 0, 0) == N);
    CHECK(hipMemcpy(back, dev, N, D2H) == 0);
    CHECK(memcmp(back, pattern, N) == 0);
    hipFileHandleDeregister(fh);
    CHECK(IS(hipFileBufDeregister(dev), hipFileSuccess));
    close(fd);
    CHECK(hipFree(dev) == 0);
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[2], "open") != 0 && strcmp(argv[2], "refused") != 0)) {
        fprintf(stderr, "usage: oneruntime DIR open|refused\n");
        return 2;
    }
    int refused = strcmp(argv[2], "refused") == 0;
    CHECK(getenv("HIPFILE_HIP_LIBRARY") != NULL);

    /* The program's runtime is in use before hipFile starts. */
    void *first = NULL;
    CHECK(hipMalloc(&first, 4096) == 0);

    hipFileError_t e = hipFileDriverOpen();
    if (refused) {
        CHECK(IS(e, hipFileDriverNotInitialized));
        CHECK(hipFileUseCount() == 0);
        /* A registration's implicit open is refused the same way. */
        CHECK(IS(hipFileBufRegister(first, 4096, 0), hipFileDriverNotInitialized));
    } else {
        CHECK(IS(e, hipFileSuccess));
        round_trip(argv[1]);
        CHECK(IS(hipFileDriverClose(), hipFileSuccess));
    }
    CHECK(hipFree(first) == 0);

    int runtimes = 0;
    dl_iterate_phdr(runtimes_loaded, &runtimes);
    CHECK(runtimes == 1);

    if (failures != 0) {
        fprintf(stderr, "oneruntime: %d checks failed\n", failures);
        return 1;
    }
    printf("oneruntime: all checks passed\n");
    return 0;
}
