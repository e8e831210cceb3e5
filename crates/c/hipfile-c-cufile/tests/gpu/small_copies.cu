// What a small staged read costs in runtime calls: THREADS threads each read 4 KiB at random
// offsets of a hot FILE with pread into a pinned buffer of their own and copy it to the
// device, the same requests (a shuffled list, taken in turn) for every variant:
//
//   memcpy       cudaMemcpy: bench's staged raw limit
//   async        cudaMemcpyAsync on the thread's own non-blocking stream, then
//                cudaStreamSynchronize: how the fallback serves a small request
//   async+query  cudaStreamQuery on the legacy null stream first (a request's order after
//                the null stream, taken once per request), then as async
//   async+event  cudaMemcpyAsync, cudaEventRecord, cudaEventSynchronize: a pipeline's chunk
//   async+record cudaEventRecord of the thread's own event on the legacy null stream first (a
//                marker of the request's order point, queried later), then as async
//   async+record+query  the same, then cudaEventQuery of that event
//   async+query/32  as async+query, but one request in 32 queries (requests that share
//                one query)
//
// Each variant runs twice, in turn, after one pass that warms the page cache. Prints one JSON
// object per run: variant, threads, requests, seconds, gbps, requests per second.
//
//   nvcc -O2 -o /tmp/small_copies crates/c/hipfile-c-cufile/tests/gpu/small_copies.cu -lpthread
//   /tmp/small_copies FILE [THREADS]
//
// Not run by CI (it needs a GPU); the figures go in docs/BENCHMARKS.md.
#include "cuda_check.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <random>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

static const size_t IO = 4096;

enum Variant {
    MEMCPY,
    ASYNC,
    ASYNC_QUERY,
    ASYNC_EVENT,
    ASYNC_RECORD,
    ASYNC_RECORD_QUERY,
    ASYNC_QUERY32,
};
static const char *NAMES[] = {"memcpy",       "async",
                              "async+query",  "async+event",
                              "async+record", "async+record+query",
                              "async+query/32"};

static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Serves every request of `offsets` once with `threads` threads; returns the seconds taken.
static double run(int fd, const std::vector<off_t> &offsets, int threads, Variant v, char *device) {
    std::atomic<size_t> next{0};
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> ts;
    double t0 = 0;
    for (int i = 0; i < threads; i++) {
        ts.emplace_back([&, i] {
            CHECK(cudaSetDevice(0));
            char *pinned;
            CHECK(cudaHostAlloc((void **)&pinned, IO, cudaHostAllocPortable));
            cudaStream_t s;
            CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
            cudaEvent_t e, marker;
            CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
            CHECK(cudaEventCreateWithFlags(&marker, cudaEventDisableTiming));
            char *dst = device + (size_t)i * IO;
            ready++;
            while (!go.load()) {
            }
            for (;;) {
                size_t k = next++;
                if (k >= offsets.size()) break;
                if (pread(fd, pinned, IO, offsets[k]) != (ssize_t)IO) {
                    perror("pread");
                    exit(1);
                }
                switch (v) {
                case MEMCPY:
                    CHECK(cudaMemcpy(dst, pinned, IO, cudaMemcpyHostToDevice));
                    break;
                case ASYNC_RECORD_QUERY: {
                    CHECK(cudaEventRecord(marker, 0));
                    cudaError_t q = cudaEventQuery(marker);
                    if (q != cudaSuccess && q != cudaErrorNotReady) CHECK(q);
                    CHECK(cudaMemcpyAsync(dst, pinned, IO, cudaMemcpyHostToDevice, s));
                    CHECK(cudaStreamSynchronize(s));
                    break;
                }
                case ASYNC_RECORD:
                    CHECK(cudaEventRecord(marker, 0));
                    CHECK(cudaMemcpyAsync(dst, pinned, IO, cudaMemcpyHostToDevice, s));
                    CHECK(cudaStreamSynchronize(s));
                    break;
                case ASYNC_QUERY32:
                    if (k % 32 != 0) {
                        CHECK(cudaMemcpyAsync(dst, pinned, IO, cudaMemcpyHostToDevice, s));
                        CHECK(cudaStreamSynchronize(s));
                        break;
                    }
                    // fall through
                case ASYNC_QUERY: {
                    cudaError_t q = cudaStreamQuery(0);
                    if (q != cudaSuccess && q != cudaErrorNotReady) CHECK(q);
                }
                    // fall through
                case ASYNC:
                    CHECK(cudaMemcpyAsync(dst, pinned, IO, cudaMemcpyHostToDevice, s));
                    CHECK(cudaStreamSynchronize(s));
                    break;
                case ASYNC_EVENT:
                    CHECK(cudaMemcpyAsync(dst, pinned, IO, cudaMemcpyHostToDevice, s));
                    CHECK(cudaEventRecord(e, s));
                    CHECK(cudaEventSynchronize(e));
                    break;
                }
            }
            CHECK(cudaEventDestroy(marker));
            CHECK(cudaEventDestroy(e));
            CHECK(cudaStreamDestroy(s));
            CHECK(cudaFreeHost(pinned));
        });
    }
    while (ready.load() < threads) {
    }
    t0 = now();
    go = true;
    for (auto &t : ts) t.join();
    return now() - t0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE [THREADS]\n", argv[0]);
        return 2;
    }
    int threads = argc > 2 ? atoi(argv[2]) : 32;
    if (threads < 1 || threads > 1024) {
        fprintf(stderr, "THREADS must be 1 to 1024\n");
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || (size_t)st.st_size < IO) {
        perror(argv[1]);
        return 1;
    }
    std::vector<off_t> offsets;
    for (off_t o = 0; o + (off_t)IO <= st.st_size; o += IO) offsets.push_back(o);
    std::shuffle(offsets.begin(), offsets.end(), std::mt19937_64(42));
    char *device;
    CHECK(cudaMalloc((void **)&device, (size_t)threads * IO));
    run(fd, offsets, threads, MEMCPY, device);  // the page cache and the runtime warmed
    for (int round = 0; round < 2; round++) {
        for (Variant v : {MEMCPY, ASYNC, ASYNC_QUERY, ASYNC_EVENT, ASYNC_RECORD, ASYNC_RECORD_QUERY,
                          ASYNC_QUERY32}) {
            double s = run(fd, offsets, threads, v, device);
            double n = (double)offsets.size();
            printf("{\"variant\":\"%s\",\"threads\":%d,\"requests\":%zu,\"seconds\":%.4f,"
                   "\"gbps\":%.4f,\"requests_per_s\":%.0f}\n",
                   NAMES[v], threads, offsets.size(), s, n * IO / s / 1e9, n / s);
            fflush(stdout);
        }
    }
    CHECK(cudaFree(device));
    return 0;
}
