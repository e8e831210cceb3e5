/*
 * hipFileDriverOpen on a runtime that sees no device (the emulated runtime with
 * HIPFILE_EMU_DEVICES=0): as hipFile documents, the open succeeds and counts, closing ends
 * it, and a file registers; only what needs device memory fails (hipMalloc here). Usage:
 * nodevice DIR. Exits 0 when every check passes. tests/basic.rs builds and runs it.
 */

#include "hipfile.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: nodevice DIR\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/data", argv[1]);

    CHECK(IS(hipFileDriverOpen(), hipFileSuccess));
    CHECK(hipFileUseCount() == 1);

    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    hipFileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = hipFileHandleTypeOpaqueFD;
    d.handle.fd = fd;
    hipFileHandle_t fh = NULL;
    CHECK(IS(hipFileHandleRegister(&fh, &d), hipFileSuccess));
    hipFileHandleDeregister(fh);
    close(fd);

    void *dev = NULL;
    CHECK(hipMalloc(&dev, 4096) != 0);

    CHECK(IS(hipFileDriverClose(), hipFileSuccess));
    CHECK(hipFileUseCount() == 0);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
