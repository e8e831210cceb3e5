// cuFile's order after the legacy null stream, on a real GPU: each thread fills its own
// registered device buffer on stream 0 (cudaMemcpy from pageable memory, cudaMemset, or a
// kernel), then writes it with cuFileWrite at its own file offset, block after block; every
// block is read back with pread and compared. The read case fills the buffer on stream 0 with
// other bytes just before cuFileRead and compares what cudaMemcpy brings back. A block is wrong
// when the request did not see (or was overwritten by) the null stream's earlier work.
//
//   nvcc -O2 -o nullstream nullstream.cu -lcufile -lcuda            (against NVIDIA's cufile.h)
//   nullstream check FILE        every fill x {1,4,16} threads x {1,4} MiB, writes and reads
//   nullstream cost FILE         cuFileRead latency (4 KiB) and throughput (64 MiB), hot
//
// Prints one line per case; exits 1 when a block was wrong.
#include <cuda_runtime.h>
#include <cufile.h>

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                   \
    do {                                                                        \
        if (!(x)) {                                                             \
            fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #x);     \
            exit(2);                                                            \
        }                                                                       \
    } while (0)

__global__ void fill(unsigned char* p, unsigned char v, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}

enum Fill { MEMCPY, MEMSET, KERNEL };
static const char* fill_names[] = {"memcpy", "memset", "kernel"};

static CUfileHandle_t fh;
static int fd;

struct Job {
    int thread, blocks;
    size_t block;
    Fill how;
    bool read;
    int wrong;
};

static unsigned char value_of(int thread, int b, bool other)
{
    return (unsigned char)((thread * 131 + b * 7 + (other ? 91 : 0)) % 251 + 1);
}

static void put(Fill how, void* dev, unsigned char v, size_t n, unsigned char* host)
{
    switch (how) {
    case MEMCPY:
        memset(host, v, n);
        CK(cudaMemcpy(dev, host, n, cudaMemcpyHostToDevice) == cudaSuccess);
        break;
    case MEMSET: CK(cudaMemset(dev, v, n) == cudaSuccess); break;
    case KERNEL:
        fill<<<132, 256>>>((unsigned char*)dev, v, n);  // the legacy null stream
        CK(cudaGetLastError() == cudaSuccess);
        break;
    }
}

static void* run(void* arg)
{
    Job* j = (Job*)arg;
    void* dev;
    CK(cudaMalloc(&dev, j->block) == cudaSuccess);
    CK(cuFileBufRegister(dev, j->block, 0).err == CU_FILE_SUCCESS);
    unsigned char* host = (unsigned char*)malloc(j->block);
    for (int b = 0; b < j->blocks; b++) {
        off_t at = ((off_t)j->thread * j->blocks + b) * (off_t)j->block;
        if (!j->read) {
            put(j->how, dev, value_of(j->thread, b, false), j->block, host);
            CK(cuFileWrite(fh, dev, j->block, at, 0) == (ssize_t)j->block);
        } else {
            put(j->how, dev, value_of(j->thread, b, true), j->block, host);
            CK(cuFileRead(fh, dev, j->block, at, 0) == (ssize_t)j->block);
            CK(cudaMemcpy(host, dev, j->block, cudaMemcpyDeviceToHost) == cudaSuccess);
            unsigned char want = value_of(j->thread, b, false);
            bool same = true;
            for (size_t i = 0; same && i < j->block; i++) same = host[i] == want;
            j->wrong += !same;
        }
    }
    if (!j->read) {
        CK(cudaDeviceSynchronize() == cudaSuccess);
        for (int b = 0; b < j->blocks; b++) {
            off_t at = ((off_t)j->thread * j->blocks + b) * (off_t)j->block;
            CK(pread(fd, host, j->block, at) == (ssize_t)j->block);
            unsigned char want = value_of(j->thread, b, false);
            bool same = true;
            for (size_t i = 0; same && i < j->block; i++) same = host[i] == want;
            j->wrong += !same;
        }
    }
    free(host);
    CK(cuFileBufDeregister(dev).err == CU_FILE_SUCCESS);
    CK(cudaFree(dev) == cudaSuccess);
    return nullptr;
}

static int check()
{
    int failed = 0;
    for (bool read : {false, true})
        for (size_t mib : {1, 4})
            for (int threads : {1, 4, 16})
                for (Fill how : {MEMCPY, MEMSET, KERNEL}) {
                    size_t block = mib << 20;
                    int total = mib == 4 ? 512 : 2048;
                    int per = total / threads;
                    if (read) {
                        std::vector<unsigned char> bytes(block);
                        for (int t = 0; t < threads; t++)
                            for (int b = 0; b < per; b++) {
                                memset(bytes.data(), value_of(t, b, false), block);
                                off_t at = ((off_t)t * per + b) * (off_t)block;
                                CK(pwrite(fd, bytes.data(), block, at) == (ssize_t)block);
                            }
                    }
                    std::vector<Job> jobs(threads);
                    std::vector<pthread_t> ts(threads);
                    for (int t = 0; t < threads; t++) {
                        jobs[t] = Job{t, per, block, how, read, 0};
                        CK(pthread_create(&ts[t], nullptr, run, &jobs[t]) == 0);
                    }
                    int wrong = 0;
                    for (int t = 0; t < threads; t++) {
                        pthread_join(ts[t], nullptr);
                        wrong += jobs[t].wrong;
                    }
                    printf("%s fill=%s threads=%d block=%zuMiB: %d of %d blocks wrong\n",
                           read ? "read " : "write", fill_names[how], threads, mib, wrong,
                           per * threads);
                    fflush(stdout);
                    failed += wrong != 0;
                }
    return failed ? 1 : 0;
}

static int cost()
{
    const size_t small = 4096, big = 64 << 20;
    void* dev;
    CK(cudaMalloc(&dev, big) == cudaSuccess);
    CK(cuFileBufRegister(dev, big, 0).err == CU_FILE_SUCCESS);
    for (int round = 0; round < 3; round++) {
        const int n = 20000;
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < n; i++) {
            off_t at = (off_t)((i * 7919u) % 65536u) * small;
            CK(cuFileRead(fh, dev, small, at, 0) == (ssize_t)small);
        }
        double us = std::chrono::duration<double, std::micro>(
                        std::chrono::steady_clock::now() - t0).count() / n;
        const int m = 64;
        t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < m; i++)
            CK(cuFileRead(fh, dev, big, (off_t)(i % 32) * big, 0) == (ssize_t)big);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        printf("cost round %d: 4KiB cuFileRead %.2f us/call; 64MiB cuFileRead %.2f GB/s\n",
               round, us, m * (double)big / s / 1e9);
        fflush(stdout);
    }
    CK(cuFileBufDeregister(dev).err == CU_FILE_SUCCESS);
    return 0;
}

int main(int argc, char** argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: nullstream check|cost FILE\n");
        return 2;
    }
    bool is_cost = !strcmp(argv[1], "cost");
    fd = open(argv[2], O_RDWR | O_CREAT, 0644);
    CK(fd >= 0);
    CK(ftruncate(fd, (off_t)2 << 30) == 0);
    CK(cudaFree(nullptr) == cudaSuccess);
    CK(cuFileDriverOpen().err == CU_FILE_SUCCESS);
    CUfileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    d.handle.fd = fd;
    CK(cuFileHandleRegister(&fh, &d).err == CU_FILE_SUCCESS);
    int rc = is_cost ? cost() : check();
    cuFileHandleDeregister(fh);
    cuFileDriverClose();
    close(fd);
    return rc;
}
