/*
 * How PyTorch, KvikIO and other cuFile users load the library: at run time, by its soname,
 * with dlopen("libcufile.so.0") and dlsym; the program is not linked with it. Whichever
 * library the loader finds by that name (through LD_LIBRARY_PATH, or the one LD_PRELOAD has
 * loaded already, whose soname matches) serves it. The program prints the file the
 * functions came from ("library: PATH", for tests/basic.rs to compare) and does a write and
 * a read back through them, bytes checked, on the emulated HIP runtime's memory, which only
 * hipfile's library can use. Usage: dlopen DIR. Exits 0 when every check passes.
 */

#include "cufile.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define N 16384

static unsigned char pattern[N], back[N], zeros[N];

/* Looks up `name`, failing the program when it is missing. */
static void *sym(void *lib, const char *name)
{
    void *f = dlsym(lib, name);
    if (f == NULL) {
        fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
        failures++;
    }
    return f;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: dlopen DIR\n");
        return 2;
    }
    void *lib = dlopen("libcufile.so.0", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        fprintf(stderr, "dlopen libcufile.so.0: %s\n", dlerror());
        return 1;
    }
    CUfileError_t (*get_version)(int *) = (CUfileError_t(*)(int *))sym(lib, "cuFileGetVersion");
    CUfileError_t (*open_driver)(void) = (CUfileError_t(*)(void))sym(lib, "cuFileDriverOpen");
    CUfileError_t (*close_driver)(void) = (CUfileError_t(*)(void))sym(lib, "cuFileDriverClose_v2");
    CUfileError_t (*handle_register)(CUfileHandle_t *, CUfileDescr_t *) =
        (CUfileError_t(*)(CUfileHandle_t *, CUfileDescr_t *))sym(lib, "cuFileHandleRegister");
    void (*handle_deregister)(CUfileHandle_t) =
        (void (*)(CUfileHandle_t))sym(lib, "cuFileHandleDeregister");
    CUfileError_t (*buf_register)(const void *, size_t, int) =
        (CUfileError_t(*)(const void *, size_t, int))sym(lib, "cuFileBufRegister");
    CUfileError_t (*buf_deregister)(const void *) =
        (CUfileError_t(*)(const void *))sym(lib, "cuFileBufDeregister");
    ssize_t (*read_fn)(CUfileHandle_t, void *, size_t, off_t, off_t) =
        (ssize_t(*)(CUfileHandle_t, void *, size_t, off_t, off_t))sym(lib, "cuFileRead");
    ssize_t (*write_fn)(CUfileHandle_t, const void *, size_t, off_t, off_t) =
        (ssize_t(*)(CUfileHandle_t, const void *, size_t, off_t, off_t))sym(lib, "cuFileWrite");
    if (failures)
        return 1;

    Dl_info info;
    CHECK(dladdr((void *)read_fn, &info) != 0 && info.dli_fname != NULL);
    printf("library: %s\n", info.dli_fname);
    /* hipfile's own names are not there: this library exports cuFile's only. */
    CHECK(dlsym(lib, "hipFileRead") == NULL);

    int version = 0;
    CHECK(IS(get_version(&version), CU_FILE_SUCCESS) && version == 1170);

    char path[4096];
    snprintf(path, sizeof path, "%s/data", argv[1]);
    for (int i = 0; i < N; i++)
        pattern[i] = (unsigned char)(i * 7 + 1);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CHECK(IS(open_driver(), CU_FILE_SUCCESS));
    CUfileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    d.handle.fd = fd;
    CUfileHandle_t fh = NULL;
    CHECK(IS(handle_register(&fh, &d), CU_FILE_SUCCESS));
    void *dev = NULL;
    CHECK(hipMalloc(&dev, N) == 0);
    CHECK(IS(buf_register(dev, N, 0), CU_FILE_SUCCESS));
    CHECK(hipMemcpy(dev, pattern, N, H2D) == 0);
    CHECK(write_fn(fh, dev, N, 0, 0) == N);
    CHECK(hipMemcpy(dev, zeros, N, H2D) == 0);
    CHECK(read_fn(fh, dev, N, 0, 0) == N);
    CHECK(hipMemcpy(back, dev, N, D2H) == 0);
    CHECK(memcmp(back, pattern, N) == 0);
    CHECK(pread(fd, back, N, 0) == N && memcmp(back, pattern, N) == 0);
    CHECK(IS(buf_deregister(dev), CU_FILE_SUCCESS));
    handle_deregister(fh);
    CHECK(IS(close_driver(), CU_FILE_SUCCESS));
    CHECK(hipFree(dev) == 0);
    close(fd);
    dlclose(lib);

    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
