/* cuFileGetBARSizeInKB on an NVIDIA GPU, built against NVIDIA's own cufile.h and CUDA's
 * runtime, run against hipfile's libcufile.so.0: for each CUDA device, its PCI bus id and the
 * BAR1 size the library reports (from NVML, libnvidia-ml.so.1), to compare with what
 * nvidia-smi says; and the errors around it (driver closed, NULL, an index past the last
 * device). Given the expected BAR1 of device 0 in MiB, it checks that too. Prints one line
 * per device, then "all checks passed", and exits 0. Not run by CI (it needs a GPU):
 *
 *   cargo xtask dist --out DIR
 *   cc -I/usr/local/cuda/include tests/gpu/bar_size.c -L DIR/lib -Wl,-rpath,DIR/lib -lcufile \
 *      -L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcudart -o bar_size
 *   nvidia-smi -q -d MEMORY | grep -A 3 'BAR1 Memory Usage'   # Total: 262144 MiB on an H200
 *   ./bar_size 262144
 *   CUDA_VISIBLE_DEVICES=0 ./bar_size 262144   # the ordinal goes through the bus id
 *
 * (run from crates/c/hipfile-c-cufile). On a machine of several GPUs, CUDA_VISIBLE_DEVICES=N
 * makes device 0 the N-th: its line should show that GPU's bus id and BAR1, as
 * `nvidia-smi -q -i N -d MEMORY,PCI` does.
 */
#include <cufile.h>
#include <stdio.h>
#include <stdlib.h>

/* From CUDA's runtime (cudaError_t is an int). */
extern int cudaGetDeviceCount(int *count);
extern int cudaDeviceGetPCIBusId(char *pciBusId, int len, int device);
#define cudaSuccess 0

static int failures;
#define CHECK(c)                                                                          \
    do {                                                                                  \
        if (!(c)) {                                                                       \
            fprintf(stderr, "line %d: check failed: %s\n", __LINE__, #c);                 \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)
#define IS(e, code) ((e).err == (code))

int main(int argc, char **argv) {
    unsigned long long expected_mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 0;
    int count = 0;
    CHECK(cudaGetDeviceCount(&count) == cudaSuccess && count > 0);

    size_t kib = 7;
    CHECK(IS(cuFileGetBARSizeInKB(0, &kib), CU_FILE_DRIVER_NOT_INITIALIZED) && kib == 7);
    CHECK(IS(cuFileDriverOpen(), CU_FILE_SUCCESS));
    CHECK(IS(cuFileGetBARSizeInKB(0, NULL), CU_FILE_INVALID_VALUE));
    CHECK(IS(cuFileGetBARSizeInKB(count, &kib), CU_FILE_INVALID_VALUE) && kib == 7);
    CHECK(IS(cuFileGetBARSizeInKB(-1, &kib), CU_FILE_INVALID_VALUE) && kib == 7);

    for (int device = 0; device < count; device++) {
        char bus[32] = "?";
        CHECK(cudaDeviceGetPCIBusId(bus, (int)sizeof bus, device) == cudaSuccess);
        kib = 0;
        CUfileError_t status = cuFileGetBARSizeInKB(device, &kib);
        if (IS(status, CU_FILE_SUCCESS)) {
            printf("device %d (%s): BAR1 %zu KiB = %zu MiB\n", device, bus, kib, kib / 1024);
            CHECK(kib > 0);
        } else {
            printf("device %d (%s): no BAR1 size (%d: %s)\n", device, bus, status.err,
                   CUFILE_ERRSTR(status.err));
            CHECK(IS(status, CU_FILE_PLATFORM_NOT_SUPPORTED));
        }
        if (device == 0 && expected_mib > 0) {
            CHECK(IS(status, CU_FILE_SUCCESS) && kib == expected_mib * 1024);
        }
    }
    CHECK(IS(cuFileDriverClose(), CU_FILE_SUCCESS));
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
