/*
 * A C program using hipFile's batch calls against libhipfile.so.0, on the emulated HIP
 * runtime (whose hipMalloc and hipMemcpy it declares itself): 16 reads of a file it wrote,
 * some into one registered buffer at different offsets and some into an unregistered
 * pointer, collected by hipFileBatchIOGetStatus with each event's cookie, status and byte
 * count and the bytes checked; a write; a request that fails alone; the refusals (over capacity, bad requests, an
 * unregistered file handle, NULL arguments); an idle poll; cancel and destroy. Usage:
 * batch DIR, where DIR is an empty directory for its files. Exits 0 when every check
 * passes; otherwise prints each failed check with its line and exits 1. tests/basic.rs
 * builds and runs it.
 */

#include "hipfile.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define CHUNK 4096
#define OPS 16
#define FILE_LEN (OPS * CHUNK)

static unsigned char pattern[FILE_LEN], back[FILE_LEN], zeros[FILE_LEN];

static hipFileIOParams_t op(hipFileOpcode_t opcode, hipFileHandle_t fh, void *base,
                            int64_t buf_off, int64_t file_off, size_t size, uintptr_t cookie)
{
    hipFileIOParams_t p;
    memset(&p, 0, sizeof p);
    p.mode = hipFileBatch;
    p.opcode = opcode;
    p.fh = fh;
    p.u.batch.devPtr_base = base;
    p.u.batch.devPtr_offset = buf_off;
    p.u.batch.file_offset = file_off;
    p.u.batch.size = size;
    p.cookie = (void *)cookie;
    return p;
}

/* Polls until `want` events have come, at least one per call; returns how many came. */
static unsigned collect(hipFileBatchHandle_t b, hipFileIOEvents_t *events, unsigned want)
{
    unsigned got = 0;
    for (int rounds = 0; got < want && rounds < 1000; rounds++) {
        unsigned nr = want - got;
        hipFileError_t e = hipFileBatchIOGetStatus(b, 1, &nr, events + got, NULL);
        if (!IS(e, hipFileSuccess))
            break;
        got += nr;
    }
    return got;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: batch DIR\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/data", argv[1]);
    for (int i = 0; i < FILE_LEN; i++)
        pattern[i] = (unsigned char)(i * 13 + 5);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CHECK(pwrite(fd, pattern, FILE_LEN, 0) == FILE_LEN);

    /* Set-up refusals. */
    hipFileBatchHandle_t b = NULL;
    CHECK(IS(hipFileBatchIOSetUp(NULL, 16), hipFileInvalidValue));
    CHECK(IS(hipFileBatchIOSetUp(&b, 0), hipFileInvalidValue));
    CHECK(IS(hipFileBatchIOSetUp(&b, 129), hipFileInvalidValue));
    CHECK(b == NULL);
    CHECK(hipFileUseCount() == 0);

    /* A batch of 16: its set-up opens the driver, as a registration does. */
    CHECK(IS(hipFileBatchIOSetUp(&b, OPS), hipFileSuccess));
    CHECK(b != NULL);
    CHECK(hipFileUseCount() == 1);

    hipFileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = hipFileHandleTypeOpaqueFD;
    d.handle.fd = fd;
    hipFileHandle_t fh = NULL;
    CHECK(IS(hipFileHandleRegister(&fh, &d), hipFileSuccess));

    void *reg = NULL, *unreg = NULL;
    CHECK(hipMalloc(&reg, MiB) == 0);
    CHECK(hipMalloc(&unreg, MiB) == 0);
    CHECK(hipMemcpy(reg, zeros, FILE_LEN, H2D) == 0);
    CHECK(hipMemcpy(unreg, zeros, FILE_LEN, H2D) == 0);
    CHECK(IS(hipFileBufRegister(reg, MiB, 0), hipFileSuccess));

    /* 16 reads, chunk i of the file: even ones into the registered buffer at offset
     * 8192 + i * CHUNK, odd ones into the unregistered pointer at unreg + 4096, offset
     * i * CHUNK. The cookie is 100 + i. */
    hipFileIOParams_t ops[OPS + 1];
    for (int i = 0; i < OPS; i++) {
        if (i % 2 == 0)
            ops[i] = op(hipFileBatchRead, fh, reg, 8192 + i * CHUNK, i * CHUNK, CHUNK, 100 + i);
        else
            ops[i] = op(hipFileBatchRead, fh, (char *)unreg + 4096, i * CHUNK, i * CHUNK, CHUNK,
                        100 + i);
    }
    CHECK(IS(hipFileBatchIOSubmit(b, OPS + 1, ops, 0), hipFileInvalidValue)); /* over capacity */
    CHECK(IS(hipFileBatchIOSubmit(b, OPS, ops, 0), hipFileSuccess));
    CHECK(IS(hipFileBatchIOSubmit(b, 1, ops, 0), hipFileInvalidValue)); /* full now */

    hipFileIOEvents_t events[OPS];
    memset(events, 0, sizeof events);
    CHECK(collect(b, events, OPS) == OPS);
    unsigned seen = 0;
    for (int i = 0; i < OPS; i++) {
        uintptr_t cookie = (uintptr_t)events[i].cookie;
        CHECK(cookie >= 100 && cookie < 100 + OPS);
        if (cookie >= 100 && cookie < 100 + OPS)
            seen |= 1u << (cookie - 100);
        CHECK(events[i].status == hipFileComplete);
        CHECK(events[i].ret == CHUNK);
    }
    CHECK(seen == (1u << OPS) - 1);
    for (int i = 0; i < OPS; i++) {
        const char *src = i % 2 == 0 ? (char *)reg + 8192 : (char *)unreg + 4096;
        memset(back, 0, CHUNK);
        CHECK(hipMemcpy(back, src + i * CHUNK, CHUNK, D2H) == 0);
        CHECK(memcmp(back, pattern + i * CHUNK, CHUNK) == 0);
    }

    /* An idle batch: a 0 timeout returns no event at once. */
    struct timespec zero = {0, 0};
    unsigned nr = OPS;
    CHECK(IS(hipFileBatchIOGetStatus(b, 0, &nr, events, &zero), hipFileSuccess));
    CHECK(nr == 0);
    nr = OPS;
    CHECK(IS(hipFileBatchIOGetStatus(b, 1, &nr, events, &zero), hipFileSuccess));
    CHECK(nr == 0);

    /* A write from the registered buffer at offset 8192 (chunk 0, and chunk 1's unused
     * slot) to the end of the file, then a short read at the new end of the file. */
    ops[0] = op(hipFileBatchWrite, fh, reg, 8192, FILE_LEN, 2 * CHUNK, 7);
    CHECK(IS(hipFileBatchIOSubmit(b, 1, ops, 0), hipFileSuccess));
    CHECK(collect(b, events, 1) == 1);
    CHECK((uintptr_t)events[0].cookie == 7 && events[0].status == hipFileComplete &&
          events[0].ret == 2 * CHUNK);
    ops[0] = op(hipFileBatchRead, fh, unreg, 0, FILE_LEN + 2 * CHUNK - 100, CHUNK, 8);
    CHECK(IS(hipFileBatchIOSubmit(b, 1, ops, 0), hipFileSuccess));
    /* A timeout too long for any clock is no deadline: it waits for the request. */
    struct timespec forever = {INT64_MAX, 999999999};
    nr = 1;
    CHECK(IS(hipFileBatchIOGetStatus(b, 1, &nr, events, &forever), hipFileSuccess));
    CHECK(nr == 1);
    CHECK((uintptr_t)events[0].cookie == 8 && events[0].status == hipFileComplete &&
          events[0].ret == 100);
    /* And the whole seconds alone, as {INT64_MAX, 0}. */
    CHECK(IS(hipFileBatchIOSubmit(b, 1, ops, 0), hipFileSuccess));
    struct timespec seconds_only = {INT64_MAX, 0};
    nr = 1;
    CHECK(IS(hipFileBatchIOGetStatus(b, 1, &nr, events, &seconds_only), hipFileSuccess));
    CHECK(nr == 1 && (uintptr_t)events[0].cookie == 8 && events[0].ret == 100);
    CHECK(pread(fd, back, 2 * CHUNK, FILE_LEN) == 2 * CHUNK);
    /* Chunk 0, then the slot of chunk 1, which went to the unregistered pointer. */
    CHECK(memcmp(back, pattern, CHUNK) == 0 && memcmp(back + CHUNK, zeros, CHUNK) == 0);

    /* A request that fails alone: a write through a read-only descriptor ends as failed,
     * with what hipFileWrite returns (-1; errno EBADF, set by the GetStatus that
     * reported it, may be overwritten by a later one). */
    int ro = open(path, O_RDONLY);
    CHECK(ro >= 0);
    hipFileDescr_t dro = d;
    dro.handle.fd = ro;
    hipFileHandle_t fro = NULL;
    CHECK(IS(hipFileHandleRegister(&fro, &dro), hipFileSuccess));
    ops[0] = op(hipFileBatchWrite, fro, reg, 0, 0, CHUNK, 9);
    ops[1] = op(hipFileBatchRead, fro, reg, 0, 0, CHUNK, 10);
    CHECK(IS(hipFileBatchIOSubmit(b, 2, ops, 0), hipFileSuccess));
    CHECK(collect(b, events, 2) == 2);
    for (int i = 0; i < 2; i++) {
        if ((uintptr_t)events[i].cookie == 9)
            CHECK(events[i].status == hipFileFailed && (ssize_t)events[i].ret == -1);
        else
            CHECK((uintptr_t)events[i].cookie == 10 && events[i].status == hipFileComplete &&
                  events[i].ret == CHUNK);
    }
    hipFileHandleDeregister(fro);
    close(ro);

    /* Bad requests: nothing is queued. */
    int bogus = 0;
    hipFileIOParams_t bad[2];
    bad[0] = op(hipFileBatchRead, fh, reg, 0, 0, CHUNK, 1);
    bad[1] = op(hipFileBatchRead, (hipFileHandle_t)&bogus, reg, 0, 0, CHUNK, 2);
    CHECK(IS(hipFileBatchIOSubmit(b, 2, bad, 0), hipFileInternalError)); /* unregistered fh */
    bad[1] = op(hipFileBatchRead, NULL, reg, 0, 0, CHUNK, 2);
    CHECK(IS(hipFileBatchIOSubmit(b, 2, bad, 0), hipFileInternalError)); /* NULL fh */
    bad[1] = op(hipFileBatchRead, fh, reg, 0, 0, CHUNK, 2);
    bad[1].mode = (hipFileBatchMode_t)0;
    CHECK(IS(hipFileBatchIOSubmit(b, 2, bad, 0), hipFileInvalidValue));
    bad[1] = op((hipFileOpcode_t)2, fh, reg, 0, 0, CHUNK, 2);
    CHECK(IS(hipFileBatchIOSubmit(b, 2, bad, 0), hipFileInvalidValue));
    bad[1] = op(hipFileBatchRead, fh, NULL, 0, 0, CHUNK, 2);
    CHECK(IS(hipFileBatchIOSubmit(b, 2, bad, 0), hipFileInvalidValue));
    bad[1] = op(hipFileBatchRead, fh, reg, -1, 0, CHUNK, 2);
    CHECK(IS(hipFileBatchIOSubmit(b, 2, bad, 0), hipFileInvalidValue));
    bad[1] = op(hipFileBatchRead, fh, reg, MiB, 0, 0, 2);
    CHECK(IS(hipFileBatchIOSubmit(b, 2, bad, 0), hipFileInvalidValue));
    bad[1] = op(hipFileBatchRead, fh, reg, 0, 0, MiB + 1, 2);
    CHECK(IS(hipFileBatchIOSubmit(b, 2, bad, 0), hipFileInvalidValue));
    bad[1] = op(hipFileBatchRead, fh, reg, 0, -1, CHUNK, 2);
    CHECK(IS(hipFileBatchIOSubmit(b, 2, bad, 0), hipFileInvalidValue));
    bad[1] = op(hipFileBatchRead, fh, pattern, 0, 0, CHUNK, 2);
    CHECK(IS(hipFileBatchIOSubmit(b, 2, bad, 0), hipFileHipMemoryTypeInvalid));
    nr = OPS;
    CHECK(IS(hipFileBatchIOGetStatus(b, 0, &nr, events, &zero), hipFileSuccess));
    CHECK(nr == 0); /* none of those was queued */

    /* NULL and unknown arguments. */
    CHECK(IS(hipFileBatchIOSubmit(NULL, 1, ops, 0), hipFileInvalidValue));
    CHECK(IS(hipFileBatchIOSubmit((hipFileBatchHandle_t)&bogus, 1, ops, 0), hipFileInvalidValue));
    CHECK(IS(hipFileBatchIOSubmit(b, 1, NULL, 0), hipFileInvalidValue));
    CHECK(IS(hipFileBatchIOSubmit(b, 0, NULL, 0), hipFileSuccess));
    nr = 1;
    CHECK(IS(hipFileBatchIOGetStatus(NULL, 0, &nr, events, &zero), hipFileInvalidValue));
    CHECK(IS(hipFileBatchIOGetStatus(b, 0, NULL, events, &zero), hipFileInvalidValue));
    CHECK(IS(hipFileBatchIOGetStatus(b, 0, &nr, NULL, &zero), hipFileInvalidValue));
    CHECK(IS(hipFileBatchIOGetStatus(b, 2, &nr, events, &zero), hipFileInvalidValue));
    struct timespec negative = {-1, 0};
    CHECK(IS(hipFileBatchIOGetStatus(b, 0, &nr, events, &negative), hipFileInvalidValue));
    CHECK(IS(hipFileBatchIOCancel(NULL), hipFileInvalidValue));
    CHECK(IS(hipFileBatchIOCancel((hipFileBatchHandle_t)&bogus), hipFileInvalidValue));
    hipFileBatchIODestroy(NULL);
    hipFileBatchIODestroy((hipFileBatchHandle_t)&bogus);

    /* Cancel: requests end as complete (started already) or cancelled; each is reported. */
    for (int i = 0; i < OPS; i++)
        ops[i] = op(hipFileBatchRead, fh, reg, i * CHUNK, i * CHUNK, CHUNK, 200 + i);
    CHECK(IS(hipFileBatchIOSubmit(b, OPS, ops, 0), hipFileSuccess));
    CHECK(IS(hipFileBatchIOCancel(b), hipFileSuccess));
    CHECK(collect(b, events, OPS) == OPS);
    for (int i = 0; i < OPS; i++) {
        CHECK((uintptr_t)events[i].cookie >= 200 && (uintptr_t)events[i].cookie < 200 + OPS);
        CHECK((events[i].status == hipFileComplete && events[i].ret == CHUNK) ||
              (events[i].status == hipFileCanceled && events[i].ret == 0));
    }

    /* Destroy with requests outstanding: it waits for them; the handle is unknown after. */
    CHECK(IS(hipFileBatchIOSubmit(b, 4, ops, 0), hipFileSuccess));
    hipFileBatchIODestroy(b);
    CHECK(IS(hipFileBatchIOCancel(b), hipFileInvalidValue));
    nr = 1;
    CHECK(IS(hipFileBatchIOGetStatus(b, 0, &nr, events, &zero), hipFileInvalidValue));
    hipFileBatchIODestroy(b);

    CHECK(IS(hipFileBufDeregister(reg), hipFileSuccess));
    hipFileHandleDeregister(fh);
    CHECK(IS(hipFileDriverClose(), hipFileSuccess));
    CHECK(hipFileUseCount() == 0);
    close(fd);
    CHECK(hipFree(reg) == 0 && hipFree(unreg) == 0);

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("batch: all checks passed\n");
    return 0;
}
