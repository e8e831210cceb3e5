// CHECK(call): a CUDA runtime call that must succeed; on failure the program says where and
// why on stderr and exits with status 1. Shared by the standalone CUDA programs here
// (pagecache_dma.cu, small_copies.cu), each built with one nvcc line.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(x)                                                                        \
    do {                                                                                \
        cudaError_t e_ = (x);                                                           \
        if (e_ != cudaSuccess) {                                                        \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)
