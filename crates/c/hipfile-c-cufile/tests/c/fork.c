/*
 * A program that forks after using cuFile, as fork.c of hipfile.h does: in the child, the
 * parent's driver and registrations do not carry over, so a read fails at once (-1 with
 * errno EINVAL, as before any open) instead of waiting for the parent's threads; the child
 * opens the driver again, registers the file again and reads; the parent's library still
 * works. Usage: fork DIR. Exits 0 when every check passes. tests/basic.rs builds and runs
 * it.
 */

#include "cufile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define MiB (1024 * 1024)
#define LEN (16 * MiB)

static int read_all(CUfileHandle_t fh, void *dev)
{
    return cuFileRead(fh, dev, LEN, 0, 0) == LEN;
}

static int descr_register(CUfileHandle_t *fh, int fd)
{
    CUfileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = CU_FILE_HANDLE_TYPE_OPAQUE_FD;
    d.handle.fd = fd;
    return IS(cuFileHandleRegister(fh, &d), CU_FILE_SUCCESS);
}

/* The child's steps; its exit status is the first that failed. */
static int child(CUfileHandle_t inherited, void *dev, int fd)
{
    errno = 0;
    if (cuFileRead(inherited, dev, LEN, 0, 0) != -1 || errno != EINVAL)
        return 1;
    if (!IS(cuFileDriverOpen(), CU_FILE_SUCCESS))
        return 3;
    CUfileHandle_t fh;
    if (!descr_register(&fh, fd))
        return 4;
    if (!read_all(fh, dev))
        return 5;
    cuFileHandleDeregister(fh);
    if (!IS(cuFileDriverClose(), CU_FILE_SUCCESS))
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
    CHECK(bytes != NULL);
    if (fd < 0 || bytes == NULL)
        return 1;
    memset(bytes, 0x5a, LEN);
    CHECK(pwrite(fd, bytes, LEN, 0) == LEN);
    CHECK(IS(cuFileDriverOpen(), CU_FILE_SUCCESS));
    CUfileHandle_t fh;
    CHECK(descr_register(&fh, fd));
    void *dev;
    CHECK(hipMalloc(&dev, LEN) == 0);
    CHECK(IS(cuFileBufRegister(dev, LEN, 0), CU_FILE_SUCCESS));
    /* A large read first, so that the library's threads exist. */
    CHECK(read_all(fh, dev));

    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        alarm(60); /* alarms do not carry over fork: a hung child ends too */
        _exit(child(fh, dev, fd));
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "child ended with status %#x\n", status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* The parent's registrations still serve. */
    CHECK(read_all(fh, dev));
    memset(bytes, 0, LEN);
    CHECK(hipMemcpy(bytes, dev, LEN, D2H) == 0);
    CHECK(bytes[0] == 0x5a && bytes[LEN - 1] == 0x5a);
    CHECK(IS(cuFileBufDeregister(dev), CU_FILE_SUCCESS));
    cuFileHandleDeregister(fh);
    CHECK(IS(cuFileDriverClose(), CU_FILE_SUCCESS));
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
