/*
 * The `app.c` of the README's "C programs" example: `cargo xtask ci` builds it with the
 * README's `cc` line as written (a plain C compiler, -D__HIP_PLATFORM_AMD__, `pkg-config
 * --cflags --libs hipfile` for the tree `cargo xtask dist` lays out, and -lamdhip64), and
 * runs it on the emulated runtime. hipfile.h from include/ comes before HIP's header, as in
 * hipFile's examples; libhipfile.so from lib/. Writes a pattern from device memory to a
 * file through hipFile and reads it back into other device memory, bytes verified, checks
 * that the process holds one HIP runtime, and prints the libhipfile.so.0 the dynamic linker
 * found ("dist_smoke: libhipfile: PATH"). Usage: dist_smoke DIR, DIR an empty directory for
 * its file. Prints "all checks passed" and exits 0 when everything holds.
 */

#define _GNU_SOURCE

#include <hipfile.h>
#include <hip/hip_runtime_api.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define N (256 * 1024)

static unsigned char pattern[N], back[N];

/* Counts the loaded objects that are a HIP runtime: named libamdhip64 (as the dynamic linker
 * loaded it), or the emulated runtime's own file name. */
static int count_runtimes(struct dl_phdr_info *info, size_t size, void *count)
{
    (void)size;
    if (info->dlpi_name != NULL && (strstr(info->dlpi_name, "libamdhip64") != NULL ||
                                    strstr(info->dlpi_name, "libhipfile_emu") != NULL))
        (*(int *)count)++;
    return 0;
}

static int ok(hipFileError_t e, const char *what)
{
    if (e.err != hipFileSuccess) {
        fprintf(stderr, "dist_smoke: %s: %s (hip %d)\n", what, hipFileGetOpErrorString(e.err),
                (int)e.hip_drv_err);
        return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: dist_smoke DIR\n");
        return 2;
    }
    /* Which libhipfile.so.0 the dynamic linker found, for the check to compare. */
    Dl_info info;
    if (dladdr((void *)hipFileDriverOpen, &info) != 0 && info.dli_fname != NULL)
        printf("dist_smoke: libhipfile: %s\n", info.dli_fname);
    char path[4096];
    snprintf(path, sizeof path, "%s/data", argv[1]);
    for (int i = 0; i < N; i++)
        pattern[i] = (unsigned char)(i * 7 + 3);

    void *src = NULL, *dst = NULL;
    if (hipMalloc(&src, N) != 0 || hipMalloc(&dst, N) != 0 ||
        hipMemcpy(src, pattern, N, hipMemcpyHostToDevice) != 0) {
        fprintf(stderr, "dist_smoke: HIP allocation or copy failed\n");
        return 1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror("dist_smoke: open");
        return 1;
    }
    hipFileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = hipFileHandleTypeOpaqueFD;
    d.handle.fd = fd;
    hipFileHandle_t fh = NULL;
    if (!ok(hipFileDriverOpen(), "hipFileDriverOpen") ||
        !ok(hipFileHandleRegister(&fh, &d), "hipFileHandleRegister") ||
        !ok(hipFileBufRegister(src, N, 0), "hipFileBufRegister") ||
        !ok(hipFileBufRegister(dst, N, 0), "hipFileBufRegister"))
        return 1;
    ssize_t written = hipFileWrite(fh, src, N, 0, 0);
    ssize_t read = hipFileRead(fh, dst, N, 0, 0);
    if (written != N || read != N) {
        fprintf(stderr, "dist_smoke: wrote %zd, read %zd of %d bytes\n", written, read, N);
        return 1;
    }
    if (hipMemcpy(back, dst, N, hipMemcpyDeviceToHost) != 0 || memcmp(back, pattern, N) != 0) {
        fprintf(stderr, "dist_smoke: the bytes read back differ\n");
        return 1;
    }
    if (!ok(hipFileBufDeregister(src), "hipFileBufDeregister") ||
        !ok(hipFileBufDeregister(dst), "hipFileBufDeregister"))
        return 1;
    hipFileHandleDeregister(fh);
    if (!ok(hipFileDriverClose(), "hipFileDriverClose"))
        return 1;
    close(fd);
    if (hipFree(src) != hipSuccess || hipFree(dst) != hipSuccess) {
        fprintf(stderr, "dist_smoke: hipFree failed\n");
        return 1;
    }
    int runtimes = 0;
    dl_iterate_phdr(count_runtimes, &runtimes);
    if (runtimes != 1) {
        fprintf(stderr, "dist_smoke: %d HIP runtimes are loaded, not 1\n", runtimes);
        return 1;
    }
    printf("dist_smoke: all checks passed\n");
    return 0;
}
