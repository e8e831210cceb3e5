/* Preloaded into a test's program: marks where each write(2) to stderr begins, by writing
 * "<w>" before its bytes, so that a test can see whether a message came out in one write
 * (its lines cannot then be split by another process's) or in pieces. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <unistd.h>

typedef ssize_t (*write_fn)(int, const void *, size_t);

static write_fn real_write;

__attribute__((constructor)) static void find_write(void) {
    real_write = (write_fn)dlsym(RTLD_NEXT, "write");
}

ssize_t write(int fd, const void *buf, size_t count) {
    if (fd == 2) {
        real_write(2, "<w>", 3);
    }
    return real_write(fd, buf, count);
}
