/* A stand-in for NVIDIA's libnvidia-ml.so.1, for tests on machines without an NVIDIA driver:
 * the five calls hipfile-sys makes, over two made-up devices. Built with NVIDIA's nvml.h
 * where the test finds it (-DWITH_NVML_H), so that every definition here must match the
 * header's declaration and the struct layout is the header's; otherwise with the
 * declarations below, copied from that header.
 *
 *   0000:C1:00.0  BAR1 of 256 GiB, 32 MiB of it mapped (as an H200 reports it)
 *   0000:C2:00.0  a device whose BAR1 NVML does not report (NVML_ERROR_NOT_SUPPORTED)
 *
 * Like NVML, it counts initialisations: every call but nvmlInit_v2 and nvmlErrorString
 * needs one, and nvmlShutdown gives one back. standin_nvml_sessions() tells the test how
 * many are open. */
#include <stdio.h>

#ifdef WITH_NVML_H
#include <nvml.h>
_Static_assert(sizeof(nvmlBAR1Memory_t) == 24, "nvmlBAR1Memory_t is three 64-bit fields");
_Static_assert(__builtin_offsetof(nvmlBAR1Memory_t, bar1Total) == 0, "bar1Total first");
_Static_assert(__builtin_offsetof(nvmlBAR1Memory_t, bar1Free) == 8, "bar1Free second");
_Static_assert(__builtin_offsetof(nvmlBAR1Memory_t, bar1Used) == 16, "bar1Used third");
_Static_assert(sizeof(nvmlReturn_t) == 4, "nvmlReturn_t is a 4-byte enum");
_Static_assert(NVML_SUCCESS == 0 && NVML_ERROR_UNINITIALIZED == 1 &&
                   NVML_ERROR_INVALID_ARGUMENT == 2 && NVML_ERROR_NOT_SUPPORTED == 3 &&
                   NVML_ERROR_NO_PERMISSION == 4 && NVML_ERROR_NOT_FOUND == 6 &&
                   NVML_ERROR_DRIVER_NOT_LOADED == 9 && NVML_ERROR_GPU_IS_LOST == 15 &&
                   NVML_ERROR_LIB_RM_VERSION_MISMATCH == 18 && NVML_ERROR_UNKNOWN == 999,
               "the codes hipfile-sys names");
#else
typedef enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned long long bar1Total;
    unsigned long long bar1Free;
    unsigned long long bar1Used;
} nvmlBAR1Memory_t;
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlShutdown(void);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1Memory);
const char *nvmlErrorString(nvmlReturn_t result);
#endif

int standin_nvml_sessions(void);

struct nvmlDevice_st {
    unsigned bus;
};

static struct nvmlDevice_st devices[] = {{0xc1}, {0xc2}};
static int sessions;

int standin_nvml_sessions(void) { return __atomic_load_n(&sessions, __ATOMIC_SEQ_CST); }

nvmlReturn_t nvmlInit_v2(void) {
    __atomic_add_fetch(&sessions, 1, __ATOMIC_SEQ_CST);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
    int open = __atomic_load_n(&sessions, __ATOMIC_SEQ_CST);
    while (open > 0) {
        if (__atomic_compare_exchange_n(&sessions, &open, open - 1, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_UNINITIALIZED;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device) {
    if (standin_nvml_sessions() == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    unsigned domain, bus, slot, function;
    char end;
    if (pciBusId == NULL || device == NULL ||
        sscanf(pciBusId, "%x:%x:%x.%x%c", &domain, &bus, &slot, &function, &end) != 4) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    for (unsigned i = 0; i < sizeof devices / sizeof devices[0]; i++) {
        if (domain == 0 && bus == devices[i].bus && slot == 0 && function == 0) {
            *device = &devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *bar1Memory) {
    if (standin_nvml_sessions() == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    if (bar1Memory == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (device == &devices[0]) {
        bar1Memory->bar1Total = 256ULL << 30;
        bar1Memory->bar1Used = 32ULL << 20;
        bar1Memory->bar1Free = bar1Memory->bar1Total - bar1Memory->bar1Used;
        return NVML_SUCCESS;
    }
    if (device == &devices[1]) {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    return NVML_ERROR_INVALID_ARGUMENT;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    default:
        return "Unknown Error";
    }
}
