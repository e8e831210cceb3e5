// Reads of one file into one device buffer from THREADS threads, BLOCK bytes each, taken in
// order from a shared counter, through cuFile (fastsafetensors' GDS shape); REG=1 registers
// the buffer first (cuFileBufRegister), DIRECT=1 opens the file O_DIRECT. Prints GB/s of 3 runs.
// Not run by CI (it needs a GPU). Against hipfile's libcufile.so.0 in DIR:
//   nvcc -O2 -o registered_reads registered_reads.c -LDIR -l:libcufile.so.0 -lpthread -lcudart
//   LD_LIBRARY_PATH=DIR ./registered_reads FILE THREADS BLOCK REG DIRECT
#define _GNU_SOURCE
#include <cuda_runtime.h>
#include <cufile.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
static CUfileHandle_t fh; static char *dev; static size_t size, block; static atomic_size_t next;
static void *worker(void *a) {
  (void)a;
  for (;;) {
    size_t off = atomic_fetch_add(&next, block);
    if (off >= size) return NULL;
    size_t n = size - off < block ? size - off : block;
    ssize_t r = cuFileRead(fh, dev, n, (off_t)off, (off_t)off);
    if (r != (ssize_t)n) { fprintf(stderr, "read %zd at %zu\n", r, off); exit(1); }
  }
}
int main(int argc, char **argv) {
  const char *path = argv[1]; int threads = atoi(argv[2]); block = strtoull(argv[3], 0, 0);
  int reg = atoi(argv[4]), direct = atoi(argv[5]);
  struct stat st; stat(path, &st); size = st.st_size;
  cudaSetDevice(0); cudaFree(0);
  if (cudaMalloc((void **)&dev, size)) return 2;
  if (cuFileDriverOpen().err) return 3;
  int fd = open(path, O_RDONLY | (direct ? O_DIRECT : 0));
  CUfileDescr_t d = {0}; d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD; d.handle.fd = fd;
  if (cuFileHandleRegister(&fh, &d).err) return 4;
  if (reg && cuFileBufRegister(dev, size, 0).err) return 5;
  for (int run = 0; run < 3; run++) {
    atomic_store(&next, 0);
    struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
    pthread_t t[64];
    for (int i = 0; i < threads; i++) pthread_create(&t[i], 0, worker, 0);
    for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
    printf("threads %d block %zu reg %d direct %d run %d: %.2f GB/s\n", threads, block, reg, direct, run, size / s / 1e9);
  }
  if (reg) cuFileBufDeregister(dev);
  cuFileHandleDeregister(fh); close(fd); cuFileDriverClose();
  return 0;
}
