/*
 * A program that forks after using the library: in the child, the parent's driver,
 * registrations and batches do not carry over, so a read fails at once (-1 with errno
 * EINVAL, as before any open) instead of waiting for the parent's threads, and the parent's
 * batch is unknown; the child opens the driver again,
 * registers the file again and reads; the parent's library still works. Usage: fork DIR.
 * Exits 0 when every check passes.
 */

#include "hipfile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define LEN (16 * MiB)

static int read_all(hipFileHandle_t fh, void *dev)
{
    return hipFileRead(fh, dev, LEN, 0, 0) == LEN;
}

static int descr_register(hipFileHandle_t *fh, int fd)
{
    hipFileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = hipFileHandleTypeOpaqueFD;
    d.handle.fd = fd;
    return IS(hipFileHandleRegister(fh, &d), hipFileSuccess);
}

/* The child's steps; its exit status is the first that failed. */
static int child(hipFileHandle_t inherited, hipFileBatchHandle_t batch, void *dev, int fd)
{
    errno = 0;
    if (hipFileRead(inherited, dev, LEN, 0, 0) != -1 || errno != EINVAL)
        return 1;
    if (hipFileUseCount() != 0)
        return 2;
    if (!IS(hipFileBatchIOCancel(batch), hipFileInvalidValue))
        return 7;
    if (!IS(hipFileDriverOpen(), hipFileSuccess))
        return 3;
    hipFileHandle_t fh;
    if (!descr_register(&fh, fd))
        return 4;
    if (!read_all(fh, dev))
        return 5;
    hipFileHandleDeregister(fh);
    if (!IS(hipFileDriverClose(), hipFileSuccess))
        return 6;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2 || chdir(argv[1]) != 0) {
        fprintf(stderr, "usage: fork DIR\n");
        return 2;
    }
    alarm(120); /* a hang ends the program, not the test run */
    int fd = open("fork.bin", O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    unsigned char *bytes = malloc(LEN);
    memset(bytes, 0x5a, LEN);
    CHECK(pwrite(fd, bytes, LEN, 0) == LEN);
    CHECK(IS(hipFileDriverOpen(), hipFileSuccess));
    hipFileHandle_t fh;
    CHECK(descr_register(&fh, fd));
    void *dev;
    CHECK(hipMalloc(&dev, LEN) == 0);
    CHECK(IS(hipFileBufRegister(dev, LEN, 0), hipFileSuccess));
    /* A large read first, so that the library's threads exist. */
    CHECK(read_all(fh, dev));
    hipFileBatchHandle_t batch;
    CHECK(IS(hipFileBatchIOSetUp(&batch, 4), hipFileSuccess));

    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        alarm(60); /* alarms do not carry over fork: a hung child ends too */
        _exit(child(fh, batch, dev, fd));
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "child ended with status %#x\n", status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* The parent's registrations and batch still serve. */
    CHECK(IS(hipFileBatchIOCancel(batch), hipFileSuccess));
    hipFileBatchIODestroy(batch);
    CHECK(read_all(fh, dev));
    memset(bytes, 0, LEN);
    CHECK(hipMemcpy(bytes, dev, LEN, D2H) == 0);
    CHECK(bytes[0] == 0x5a && bytes[LEN - 1] == 0x5a);
    CHECK(IS(hipFileBufDeregister(dev), hipFileSuccess));
    hipFileHandleDeregister(fh);
    CHECK(IS(hipFileDriverClose(), hipFileSuccess));
    CHECK(hipFree(dev) == 0);
    free(bytes);
    close(fd);
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("all checks passed\n");
    return 0;
}
