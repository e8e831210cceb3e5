// Page-cache DMA as an alternative to staging for hot files: the file is mapped, the mapping
// registered with the runtime (cudaHostRegisterReadOnly), and the device copies straight
// from the page cache. Measured end to end (registration, copies, unregistration) beside
// this process's own limits on the same file: parallel pread into host memory and copies
// from pinned memory. Variants: the whole file registered once (and copied twice), and
// windows registered by several threads, each window's copy queued as soon as it is
// registered and the window unregistered once its copy has ended.
//
//   nvcc -O2 -o /tmp/pagecache_dma pagecache_dma.cu -lpthread && /tmp/pagecache_dma FILE
//   /tmp/pagecache_dma FILE together    # pread and copies at once; the raw staged pipeline
//   /tmp/pagecache_dma FILE together MIB THREADS   # the pipeline with other chunks and lanes
//                                       # (default 8 MiB chunks, 16 threads)
//
// Not run by CI (it needs a GPU); the figures are in docs/BENCHMARKS.md.
#include "cuda_check.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static size_t size_of(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) {
        perror("fstat");
        exit(1);
    }
    return (size_t)st.st_size;
}

// Reads the whole file once (hot afterwards) and returns pread's rate with `threads` threads
// of 8 MiB requests into host memory of their own.
static double pread_rate(int fd, size_t size, int threads) {
    const size_t chunk = 8 << 20;
    std::atomic<size_t> next{0};
    double t0 = now();
    std::vector<std::thread> ts;
    for (int i = 0; i < threads; i++) {
        ts.emplace_back([&] {
            char *buf = (char *)aligned_alloc(4096, chunk);
            memset(buf, 0, chunk);
            for (;;) {
                size_t at = next.fetch_add(chunk);
                if (at >= size) break;
                size_t n = size - at < chunk ? size - at : chunk;
                if (pread(fd, buf, n, (off_t)at) != (ssize_t)n) {
                    perror("pread");
                    exit(1);
                }
            }
            free(buf);
        });
    }
    for (auto &t : ts) t.join();
    return size / (now() - t0) / 1e9;
}

// Copies from one pinned buffer of `chunk` bytes to the device, `size` bytes in all, from
// `streams` streams at once.
static double pinned_rate(char *dev, size_t size, int streams) {
    const size_t chunk = 64 << 20;
    std::vector<char *> hosts(streams);
    std::vector<cudaStream_t> ss(streams);
    for (int i = 0; i < streams; i++) {
        CHECK(cudaHostAlloc((void **)&hosts[i], chunk, cudaHostAllocDefault));
        memset(hosts[i], 1, chunk);
        CHECK(cudaStreamCreateWithFlags(&ss[i], cudaStreamNonBlocking));
    }
    double t0 = now();
    size_t at = 0;
    for (int k = 0; at < size; k++) {
        size_t n = size - at < chunk ? size - at : chunk;
        CHECK(cudaMemcpyAsync(dev + at, hosts[k % streams], n, cudaMemcpyHostToDevice, ss[k % streams]));
        at += n;
    }
    for (auto s : ss) CHECK(cudaStreamSynchronize(s));
    double r = size / (now() - t0) / 1e9;
    for (int i = 0; i < streams; i++) {
        CHECK(cudaFreeHost(hosts[i]));
        CHECK(cudaStreamDestroy(ss[i]));
    }
    return r;
}

// The whole mapping registered once, copied twice, unregistered.
static void whole(const char *map, char *dev, size_t size) {
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    double t0 = now();
    CHECK(cudaHostRegister((void *)map, size, cudaHostRegisterReadOnly));
    double t1 = now();
    CHECK(cudaMemcpyAsync(dev, map, size, cudaMemcpyHostToDevice, s));
    CHECK(cudaStreamSynchronize(s));
    double t2 = now();
    CHECK(cudaMemcpyAsync(dev, map, size, cudaMemcpyHostToDevice, s));
    CHECK(cudaStreamSynchronize(s));
    double t3 = now();
    CHECK(cudaHostUnregister((void *)map));
    double t4 = now();
    printf("{\"case\": \"whole\", \"register_s\": %.4f, \"copy_s\": %.4f, \"copy_gbps\": %.2f, "
           "\"second_copy_gbps\": %.2f, \"unregister_s\": %.4f, \"end_to_end_gbps\": %.2f, "
           "\"with_unregister_gbps\": %.2f}\n",
           t1 - t0, t2 - t1, size / (t2 - t1) / 1e9, size / (t3 - t2) / 1e9, t4 - t3,
           size / (t2 - t0) / 1e9, size / ((t2 - t0) + (t4 - t3)) / 1e9);
    CHECK(cudaStreamDestroy(s));
}

// Windows of `window` bytes: `threads` threads each take the next window, register it,
// queue its copy on the thread's stream, and unregister the window before last once the
// copy after it is queued (each thread keeps two windows registered at most).
static void windows(const char *map, char *dev, size_t size, size_t window, int threads) {
    std::atomic<size_t> next{0};
    std::atomic<long> reg_us{0}, unreg_us{0};
    double t0 = now();
    double copies_done = 0;
    std::vector<double> ends(threads);
    std::vector<std::thread> ts;
    for (int i = 0; i < threads; i++) {
        ts.emplace_back([&, i] {
            cudaStream_t s;
            CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
            std::vector<std::pair<size_t, size_t>> pending;
            std::vector<cudaEvent_t> events;
            for (;;) {
                size_t at = next.fetch_add(window);
                if (at >= size) break;
                size_t n = size - at < window ? size - at : window;
                double a = now();
                CHECK(cudaHostRegister((void *)(map + at), n, cudaHostRegisterReadOnly));
                reg_us += (long)((now() - a) * 1e6);
                CHECK(cudaMemcpyAsync(dev + at, map + at, n, cudaMemcpyHostToDevice, s));
                cudaEvent_t e;
                CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
                CHECK(cudaEventRecord(e, s));
                pending.push_back({at, n});
                events.push_back(e);
                if (pending.size() > 2) {
                    CHECK(cudaEventSynchronize(events.front()));
                    double b = now();
                    CHECK(cudaHostUnregister((void *)(map + pending.front().first)));
                    unreg_us += (long)((now() - b) * 1e6);
                    CHECK(cudaEventDestroy(events.front()));
                    pending.erase(pending.begin());
                    events.erase(events.begin());
                }
            }
            CHECK(cudaStreamSynchronize(s));
            ends[i] = now();
            for (size_t k = 0; k < pending.size(); k++) {
                double b = now();
                CHECK(cudaHostUnregister((void *)(map + pending[k].first)));
                unreg_us += (long)((now() - b) * 1e6);
                CHECK(cudaEventDestroy(events[k]));
            }
            CHECK(cudaStreamDestroy(s));
        });
    }
    for (auto &t : ts) t.join();
    double t1 = now();
    for (double e : ends) copies_done = e > copies_done ? e : copies_done;
    printf("{\"case\": \"windows\", \"window_mib\": %zu, \"threads\": %d, \"copied_gbps\": %.2f, "
           "\"with_unregister_gbps\": %.2f, \"register_s_summed\": %.4f, \"unregister_s_summed\": %.4f}\n",
           window >> 20, threads, size / (copies_done - t0) / 1e9, size / (t1 - t0) / 1e9,
           reg_us.load() / 1e6, unreg_us.load() / 1e6);
}

// pread (16 threads, 8 MiB into host memory of their own) and copies from pinned memory (4
// streams of 64 MiB) running at the same time for `seconds`, each at its own pace: what each
// gets while the other runs, the bound of a pipeline that does both. Then the raw staged
// pipeline: 16 threads, each a pread of 8 MiB into pinned memory and its copy, alternating
// two buffers so that the pread of one overlaps the copy of the other.
static void together(int fd, char *dev, size_t size, double seconds, size_t chunk, int threads) {
    const size_t big = 64 << 20;
    std::atomic<bool> stop{false};
    std::atomic<size_t> read_bytes{0}, copied{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < 16; i++) {
        ts.emplace_back([&, i] {
            char *buf = (char *)aligned_alloc(4096, chunk);
            memset(buf, 0, chunk);
            size_t at = (size_t)i * chunk % size;
            while (!stop) {
                size_t n = size - at < chunk ? size - at : chunk;
                if (pread(fd, buf, n, (off_t)at) != (ssize_t)n) {
                    perror("pread");
                    exit(1);
                }
                read_bytes += n;
                at = (at + 16 * chunk) % (size - chunk);
            }
            free(buf);
        });
    }
    for (int i = 0; i < 4; i++) {
        ts.emplace_back([&, i] {
            char *host;
            cudaStream_t s;
            CHECK(cudaHostAlloc((void **)&host, big, cudaHostAllocDefault));
            memset(host, 1, big);
            CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
            size_t at = (size_t)i * big;
            while (!stop) {
                CHECK(cudaMemcpyAsync(dev + at % (size - big), host, big, cudaMemcpyHostToDevice, s));
                CHECK(cudaStreamSynchronize(s));
                copied += big;
                at += 4 * big;
            }
            CHECK(cudaFreeHost(host));
            CHECK(cudaStreamDestroy(s));
        });
    }
    double t0 = now();
    usleep((useconds_t)(seconds * 1e6));
    stop = true;
    double dt = now() - t0;
    for (auto &t : ts) t.join();
    printf("{\"case\": \"together\", \"pread_gbps\": %.2f, \"copy_gbps\": %.2f}\n",
           read_bytes.load() / dt / 1e9, copied.load() / dt / 1e9);

    // The staged pipeline's buffers and streams first, out of its timing.
    struct Lane {
        char *host[2];
        cudaEvent_t done[2];
        cudaStream_t s;
    };
    std::vector<Lane> lanes((size_t)threads);
    for (auto &l : lanes) {
        CHECK(cudaStreamCreateWithFlags(&l.s, cudaStreamNonBlocking));
        for (int k = 0; k < 2; k++) {
            CHECK(cudaHostAlloc((void **)&l.host[k], chunk, cudaHostAllocDefault));
            memset(l.host[k], 0, chunk);
            CHECK(cudaEventCreateWithFlags(&l.done[k], cudaEventDisableTiming));
            CHECK(cudaEventRecord(l.done[k], l.s));
        }
    }
    CHECK(cudaDeviceSynchronize());
    std::atomic<size_t> next{0};
    std::vector<std::thread> ws;
    double s0 = now();
    for (auto &l : lanes) {
        ws.emplace_back([&, lp = &l] {
            for (int k = 0;; k ^= 1) {
                size_t at = next.fetch_add(chunk);
                if (at >= size) break;
                size_t n = size - at < chunk ? size - at : chunk;
                CHECK(cudaEventSynchronize(lp->done[k]));
                if (pread(fd, lp->host[k], n, (off_t)at) != (ssize_t)n) {
                    perror("pread");
                    exit(1);
                }
                CHECK(cudaMemcpyAsync(dev + at, lp->host[k], n, cudaMemcpyHostToDevice, lp->s));
                CHECK(cudaEventRecord(lp->done[k], lp->s));
            }
            CHECK(cudaStreamSynchronize(lp->s));
        });
    }
    for (auto &t : ws) t.join();
    printf("{\"case\": \"staged\", \"threads\": %d, \"chunk_mib\": %zu, \"gbps\": %.2f}\n",
           threads, chunk >> 20, size / (now() - s0) / 1e9);
    for (auto &l : lanes) {
        for (int k = 0; k < 2; k++) {
            CHECK(cudaFreeHost(l.host[k]));
            CHECK(cudaEventDestroy(l.done[k]));
        }
        CHECK(cudaStreamDestroy(l.s));
    }
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE\n", argv[0]);
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    size_t size = size_of(fd) & ~(size_t)4095;
    char *dev;
    CHECK(cudaMalloc((void **)&dev, size));
    pread_rate(fd, size, 16);  // hot from here on
    if (argc > 2 && strcmp(argv[2], "together") == 0) {
        size_t mib = argc > 3 ? strtoul(argv[3], nullptr, 10) : 8;
        int threads = argc > 4 ? atoi(argv[4]) : 16;
        if (mib < 1 || mib > 256 || threads < 1 || threads > 256) {
            fprintf(stderr, "together: MIB 1..256, THREADS 1..256\n");
            return 2;
        }
        for (int round = 0; round < 3; round++) together(fd, dev, size, 1.0, mib << 20, threads);
        CHECK(cudaFree(dev));
        close(fd);
        return 0;
    }
    for (int round = 0; round < 2; round++) {
        printf("{\"case\": \"limits\", \"pread16_gbps\": %.2f, \"pinned_copy_gbps\": %.2f, "
               "\"pinned_copy_4streams_gbps\": %.2f}\n",
               pread_rate(fd, size, 16), pinned_rate(dev, size, 1), pinned_rate(dev, size, 4));
        char *map = (char *)mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
        if (map == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
        whole(map, dev, size);
        munmap(map, size);
        for (size_t w : {(size_t)64 << 20, (size_t)256 << 20}) {
            for (int t : {1, 2, 4, 8}) {
                map = (char *)mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
                windows(map, dev, size, w, t);
                munmap(map, size);
            }
        }
        // The mapping's page tables filled first (MAP_POPULATE), then registered whole: how
        // much of the registration is faulting the pages in.
        double p0 = now();
        map = (char *)mmap(nullptr, size, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
        double a = now();
        CHECK(cudaHostRegister((void *)map, size, cudaHostRegisterReadOnly));
        printf("{\"case\": \"populated\", \"populate_s\": %.4f, \"register_s\": %.4f}\n", a - p0, now() - a);
        CHECK(cudaHostUnregister((void *)map));
        munmap(map, size);
    }
    CHECK(cudaFree(dev));
    close(fd);
    return 0;
}
