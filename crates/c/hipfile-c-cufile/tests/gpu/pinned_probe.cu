// Build and run on a GPU machine: nvcc -O2 -o /tmp/pinned_probe pinned_probe.cu -lcuda && /tmp/pinned_probe
//
// Does a pinned allocation (or registration, or free) wait for streams parked on a
// stream wait-value operation? Each operation runs while two streams (one blocking, one
// non-blocking) wait for a host word that a watchdog thread sets 2 s later.
#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>

static volatile unsigned *word;
static CUdeviceptr dword;

#define CK(x) do { auto e_ = (x); if ((int)e_ != 0) { printf("FAIL %s = %d\n", #x, (int)e_); return 1; } } while (0)

static int phase(const char *name, unsigned target, cudaStream_t a, cudaStream_t b,
                 std::function<int()> op) {
  CK(cuStreamWaitValue32((CUstream)a, dword, target, CU_STREAM_WAIT_VALUE_GEQ));
  CK(cuStreamWaitValue32((CUstream)b, dword, target, CU_STREAM_WAIT_VALUE_GEQ));
  std::thread release([target] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    __atomic_store_n(word, target, __ATOMIC_SEQ_CST);
  });
  auto t0 = std::chrono::steady_clock::now();
  int rc = op();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bool parked = __atomic_load_n(word, __ATOMIC_SEQ_CST) < target;
  printf("%-44s rc=%d %.3f s, streams still parked on return: %s\n", name, rc, s,
         parked ? "yes (did not wait)" : "no (waited for them)");
  release.join();
  cudaDeviceSynchronize();
  return 0;
}

int main() {
  CK(cudaSetDevice(0));
  CK(cudaFree(0));
  void *w;
  CK(cudaHostAlloc(&w, 4096, cudaHostAllocPortable | cudaHostAllocMapped));
  word = (volatile unsigned *)w;
  *word = 0;
  void *dw;
  CK(cudaHostGetDevicePointer(&dw, w, 0));
  dword = (CUdeviceptr)dw;
  cudaStream_t nb, bl;
  CK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
  CK(cudaStreamCreate(&bl));
  const size_t len = 64 << 20;
  void *kept = nullptr, *kept2 = nullptr;
  void *map = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  memset(map, 1, len);
  unsigned t = 0;
  phase("cudaHostAlloc 64 MiB portable", ++t, nb, bl,
        [&] { return (int)cudaHostAlloc(&kept, len, cudaHostAllocPortable); });
  phase("cudaHostAlloc 64 MiB portable|mapped", ++t, nb, bl,
        [&] { return (int)cudaHostAlloc(&kept2, len, cudaHostAllocPortable | cudaHostAllocMapped); });
  phase("cudaHostRegister 64 MiB portable|mapped", ++t, nb, bl,
        [&] { return (int)cudaHostRegister(map, len, cudaHostRegisterPortable | cudaHostRegisterMapped); });
  phase("cudaMallocHost 4 MiB", ++t, nb, bl, [&] { void *p; return (int)cudaMallocHost(&p, 4 << 20); });
  phase("cudaHostUnregister 64 MiB", ++t, nb, bl, [&] { return (int)cudaHostUnregister(map); });
  phase("cudaFreeHost 64 MiB", ++t, nb, bl, [&] { return (int)cudaFreeHost(kept); });
  // Device side: does a copy queued on a third stream after an allocation wait for the
  // parked streams (the guide's implicit synchronisation, on the device)?
  cudaStream_t third;
  CK(cudaStreamCreateWithFlags(&third, cudaStreamNonBlocking));
  void *dev, *src;
  CK(cudaMalloc(&dev, 1 << 20));
  CK(cudaHostAlloc(&src, 1 << 20, cudaHostAllocPortable));
  phase("cudaHostAlloc 16 MiB, then a copy on a 3rd stream", ++t, nb, bl, [&] {
    void *p;
    int rc = (int)cudaHostAlloc(&p, 16 << 20, cudaHostAllocPortable);
    if (rc) return rc;
    rc = (int)cudaMemcpyAsync(dev, src, 1 << 20, cudaMemcpyHostToDevice, third);
    return rc ? rc : (int)cudaStreamSynchronize(third);
  });
  void *map2 = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  memset(map2, 1, len);
  phase("cudaHostRegister 64 MiB, then a copy on a 3rd stream", ++t, nb, bl, [&] {
    int rc = (int)cudaHostRegister(map2, len, cudaHostRegisterPortable | cudaHostRegisterMapped);
    if (rc) return rc;
    rc = (int)cudaMemcpyAsync(dev, map2, 1 << 20, cudaMemcpyHostToDevice, third);
    return rc ? rc : (int)cudaStreamSynchronize(third);
  });
  phase("cudaMalloc 64 MiB (device)", ++t, nb, bl, [&] { void *p; return (int)cudaMalloc(&p, len); });
  return 0;
}
