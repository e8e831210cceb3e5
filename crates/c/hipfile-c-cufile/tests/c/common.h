/* What the cuFile test programs share: the emulated HIP runtime's few calls they use (its
 * streams are pointers, as CUDA's CUstream is), and the checks that count failures. Included
 * once, by one .c file. */
#ifndef HIPFILE_CUFILE_TEST_COMMON_H
#define HIPFILE_CUFILE_TEST_COMMON_H

#include <stdio.h>

#include "cufile.h"

/* From the HIP runtime (the emulated one here); hipError_t is an int. */
extern int hipMalloc(void **ptr, size_t size);
extern int hipFree(void *ptr);
extern int hipMemcpy(void *dst, const void *src, size_t size, int kind);
extern int hipStreamCreate(CUstream *stream);
extern int hipStreamSynchronize(CUstream stream);
extern int hipStreamDestroy(CUstream stream);
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
static inline int IS(CUfileError_t e, CUfileOpError code)
{
    return e.err == code && e.cu_err == 0;
}

#endif
