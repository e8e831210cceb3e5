/* What the C test programs share: the emulated HIP runtime's few calls they use, the copy
 * directions, and the checks that count failures (each program prints its own file name
 * with the line of a failed check, through __FILE__). Included once, by one .c file. */
#ifndef HIPFILE_TEST_COMMON_H
#define HIPFILE_TEST_COMMON_H

#include <stdio.h>

#include "hipfile.h"

/* From the HIP runtime (the emulated one here). */
extern hipError_t hipMalloc(void **ptr, size_t size);
extern hipError_t hipFree(void *ptr);
extern hipError_t hipMemcpy(void *dst, const void *src, size_t size, int kind);
extern hipError_t hipStreamCreate(hipStream_t *stream);
extern hipError_t hipStreamSynchronize(hipStream_t stream);
extern hipError_t hipStreamDestroy(hipStream_t stream);
extern hipError_t hipLaunchHostFunc(hipStream_t stream, void (*fn)(void *), void *user_data);
#define H2D 1
#define D2H 2

static int failures;

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);      \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

/* Whether e is {code, 0}. A function, so that the call in e runs once. */
static inline int IS(hipFileError_t e, hipFileOpError_t code)
{
    return e.err == code && e.hip_drv_err == 0;
}

#define MiB (1 << 20)

#endif
