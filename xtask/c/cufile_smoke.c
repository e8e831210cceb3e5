/*
 * The cuFile C program `cargo xtask ci` builds against the tree `cargo xtask dist` lays out
 * with nothing but `pkg-config --cflags --libs cufile`: cufile.h from
 * include/hipfile-cufile/, libcufile.so from lib/. Opens the driver (on the HIP runtime
 * named in HIPFILE_HIP_LIBRARY: the emulated one in CI), reads the version and the use count
 * and closes it, and prints the file its functions came from ("library: PATH"). Prints "all
 * checks passed" and exits 0 when everything holds.
 */

#define _GNU_SOURCE

#include <cufile.h>

#include <dlfcn.h>
#include <stdio.h>

static int failures;

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

int main(void)
{
    Dl_info info;
    if (dladdr((void *)cuFileDriverOpen, &info) != 0 && info.dli_fname != NULL)
        printf("library: %s\n", info.dli_fname);
    int version = 0;
    CHECK(cuFileGetVersion(&version).err == CU_FILE_SUCCESS && version > 0);
    CHECK(cuFileUseCount() == 0);
    CHECK(cuFileDriverOpen().err == CU_FILE_SUCCESS);
    CHECK(cuFileUseCount() == 1);
    CHECK(cuFileDriverClose().err == CU_FILE_SUCCESS);
    CHECK(cuFileUseCount() == 0);
    if (failures != 0) {
        fprintf(stderr, "cufile_smoke: %d checks failed\n", failures);
        return 1;
    }
    printf("cufile_smoke: all checks passed\n");
    return 0;
}
