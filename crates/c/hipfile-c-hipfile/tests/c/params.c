/*
 * The driver properties, the four driver setters and the six parameter calls, from C:
 * their error paths (NULL, values outside the enums, a set while the driver is open, a
 * string buffer too short), get-after-set round trips, the properties following the
 * setters (at once while nothing uses the driver, at the next open otherwise), and a write
 * and read back, bytes checked, through a driver opened with a small direct I/O size, cache
 * and pinned memory. Usage: params DIR, where DIR is an empty directory for its files.
 * Exits 0 when every check passes. tests/basic.rs builds and runs it.
 */

#include "hipfile.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define N (256 * 1024)

static unsigned char pattern[N], back[N], zeros[N];

static size_t size_param(hipFileSizeTConfigParameter_t p)
{
    size_t v = 0xdeadbeef;
    CHECK(IS(hipFileGetParameterSizeT(p, &v), hipFileSuccess));
    return v;
}

static bool bool_param(hipFileBoolConfigParameter_t p)
{
    bool v = false;
    CHECK(IS(hipFileGetParameterBool(p, &v), hipFileSuccess));
    return v;
}

/* Whether the string parameter p reads as want. */
static int string_is(hipFileStringConfigParameter_t p, const char *want)
{
    char buf[256];
    memset(buf, 'x', sizeof buf);
    return IS(hipFileGetParameterString(p, buf, (int)sizeof buf), hipFileSuccess) &&
           strcmp(buf, want) == 0;
}

static hipFileDriverProps_t props(void)
{
    hipFileDriverProps_t p;
    memset(&p, 0xff, sizeof p);
    CHECK(IS(hipFileDriverGetProperties(&p), hipFileSuccess));
    return p;
}

/* Writes the pattern through fh from dev and reads it back into dev, bytes checked. */
static void round_trip(hipFileHandle_t fh, void *dev, int fd)
{
    CHECK(hipMemcpy(dev, pattern, N, H2D) == 0);
    CHECK(hipFileWrite(fh, dev, N, 0, 0) == N);
    CHECK(pread(fd, back, N, 0) == N && memcmp(back, pattern, N) == 0);
    CHECK(hipMemcpy(dev, zeros, N, H2D) == 0);
    CHECK(hipFileRead(fh, dev, N, 0, 0) == N);
    memset(back, 0, N);
    CHECK(hipMemcpy(back, dev, N, D2H) == 0);
    CHECK(memcmp(back, pattern, N) == 0);
    /* An unaligned piece in the middle. */
    CHECK(hipFileRead(fh, dev, N - 12345, 4321, 0) == N - 12345);
    memset(back, 0, N);
    CHECK(hipMemcpy(back, dev, N - 12345, D2H) == 0);
    CHECK(memcmp(back, pattern + 4321, N - 12345) == 0);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: params DIR\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/data", argv[1]);
    for (int i = 0; i < N; i++)
        pattern[i] = (unsigned char)(i * 131 + 17);

    size_t sz = 0;
    bool b = false;
    char buf[64];
    hipFileDriverProps_t p;

    /* Driver closed: properties need an open driver; parameters work. */
    CHECK(hipFileUseCount() == 0);
    CHECK(IS(hipFileDriverGetProperties(&p), hipFileDriverNotInitialized));
    CHECK(IS(hipFileDriverGetProperties(NULL), hipFileInvalidValue));

    /* NULL and values outside the enums. */
    CHECK(IS(hipFileGetParameterSizeT(hipFileParamProfileStats, NULL), hipFileInvalidValue));
    CHECK(IS(hipFileGetParameterBool(hipFileParamForceCompatMode, NULL), hipFileInvalidValue));
    CHECK(IS(hipFileGetParameterString(hipFileParamLogDir, NULL, 64), hipFileInvalidValue));
    CHECK(IS(hipFileSetParameterString(hipFileParamLogDir, NULL), hipFileInvalidValue));
    CHECK(IS(hipFileGetParameterSizeT((hipFileSizeTConfigParameter_t)12, &sz),
             hipFileInvalidValue));
    CHECK(IS(hipFileGetParameterSizeT((hipFileSizeTConfigParameter_t)-1, &sz),
             hipFileInvalidValue));
    CHECK(IS(hipFileSetParameterSizeT((hipFileSizeTConfigParameter_t)12, 1), hipFileInvalidValue));
    CHECK(IS(hipFileGetParameterBool((hipFileBoolConfigParameter_t)12, &b), hipFileInvalidValue));
    CHECK(IS(hipFileSetParameterBool((hipFileBoolConfigParameter_t)-3, true), hipFileInvalidValue));
    CHECK(IS(hipFileGetParameterString((hipFileStringConfigParameter_t)3, buf, 64),
             hipFileInvalidValue));
    CHECK(IS(hipFileSetParameterString((hipFileStringConfigParameter_t)3, "x"),
             hipFileInvalidValue));

    /* Fixed values: a set may only confirm them. */
    CHECK(size_param(hipFileParamPropertiesIOBatchsize) == 128);
    CHECK(IS(hipFileSetParameterSizeT(hipFileParamPropertiesIOBatchsize, 128), hipFileSuccess));
    CHECK(IS(hipFileSetParameterSizeT(hipFileParamPropertiesIOBatchsize, 64),
             hipFileDriverUnsupportedLimit));
    CHECK(!bool_param(hipFileParamPropertiesAllowSystemMemory));
    CHECK(IS(hipFileSetParameterBool(hipFileParamPropertiesAllowSystemMemory, true),
             hipFileDriverUnsupportedLimit));
    CHECK(IS(hipFileSetParameterBool(hipFileParamPreferIOUring, true),
             hipFileDriverUnsupportedLimit));
    CHECK(IS(hipFileSetParameterBool(hipFileParamPreferIOUring, false), hipFileSuccess));

    /* size_t round trips (sizes in KiB). */
    struct {
        hipFileSizeTConfigParameter_t param;
        size_t value;
    } sizes[] = {
        {hipFileParamProfileStats, 1},
        {hipFileParamExecutionMaxIOQueueDepth, 64},
        {hipFileParamExecutionMaxIOThreads, 3},
        {hipFileParamExecutionMinIOThresholdSizeKB, 16},
        {hipFileParamExecutionMaxRequestParallelism, 2},
        {hipFileParamPropertiesMaxDirectIOSizeKB, 64},
        {hipFileParamPropertiesMaxDeviceCacheSizeKB, 512},
        {hipFileParamPropertiesMaxDevicePinnedMemSizeKB, 1024},
        {hipFileParamPollthresholdSizeKB, 8},
        {hipFileParamPropertiesBatchIOTimeoutMs, 1000},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        CHECK(IS(hipFileSetParameterSizeT(sizes[i].param, sizes[i].value), hipFileSuccess));
        CHECK(size_param(sizes[i].param) == sizes[i].value);
    }
    /* Out of bounds: refused, and the value stays. */
    CHECK(IS(hipFileSetParameterSizeT(hipFileParamPropertiesMaxDirectIOSizeKB, 0),
             hipFileDriverUnsupportedLimit));
    CHECK(IS(hipFileSetParameterSizeT(hipFileParamPropertiesMaxDirectIOSizeKB, 3),
             hipFileDriverUnsupportedLimit));
    CHECK(IS(hipFileSetParameterSizeT(hipFileParamPropertiesMaxDirectIOSizeKB, (size_t)-1),
             hipFileDriverUnsupportedLimit));
    CHECK(IS(hipFileSetParameterSizeT(hipFileParamExecutionMaxIOThreads, 0),
             hipFileDriverUnsupportedLimit));
    CHECK(size_param(hipFileParamPropertiesMaxDirectIOSizeKB) == 64);
    CHECK(size_param(hipFileParamExecutionMaxIOThreads) == 3);
    /* One staging buffer follows from the task size and the pool: a 64 KiB task here. */
    size_t chunk = size_param(hipFileParamPropertiesPerBufferCacheSizeKB);
    CHECK(chunk == 64);
    CHECK(IS(hipFileSetParameterSizeT(hipFileParamPropertiesPerBufferCacheSizeKB, chunk),
             hipFileSuccess));
    CHECK(IS(hipFileSetParameterSizeT(hipFileParamPropertiesPerBufferCacheSizeKB, chunk + 4),
             hipFileDriverUnsupportedLimit));

    /* bool round trips. */
    hipFileBoolConfigParameter_t recorded[] = {
        hipFileParamFsMiscApiCheckAggressive, hipFileParamProfileNvtx,
        hipFileParamForceOdirectMode, hipFileParamSkipTopologyDetection,
        hipFileParamStreamMemopsBypass, hipFileParamPropertiesUsePollMode,
    };
    for (size_t i = 0; i < sizeof recorded / sizeof recorded[0]; i++) {
        CHECK(IS(hipFileSetParameterBool(recorded[i], true), hipFileSuccess));
        CHECK(bool_param(recorded[i]));
        CHECK(IS(hipFileSetParameterBool(recorded[i], false), hipFileSuccess));
        CHECK(!bool_param(recorded[i]));
    }
    CHECK(IS(hipFileSetParameterBool(hipFileParamForceCompatMode, true), hipFileSuccess));
    CHECK(bool_param(hipFileParamForceCompatMode));
    CHECK(!bool_param(hipFileParamUsePcip2pdma));
    CHECK(IS(hipFileSetParameterBool(hipFileParamUsePcip2pdma, true), hipFileSuccess));
    CHECK(!bool_param(hipFileParamForceCompatMode));
    CHECK(IS(hipFileSetParameterBool(hipFileParamPropertiesAllowCompatMode, true),
             hipFileSuccess));
    CHECK(bool_param(hipFileParamPropertiesAllowCompatMode));
    CHECK(IS(hipFileSetParameterBool(hipFileParamExecutionParallelIO, false), hipFileSuccess));
    CHECK(!bool_param(hipFileParamExecutionParallelIO));
    CHECK(size_param(hipFileParamExecutionMaxIOThreads) == 1);
    CHECK(IS(hipFileSetParameterBool(hipFileParamExecutionParallelIO, true), hipFileSuccess));
    CHECK(size_param(hipFileParamExecutionMaxIOThreads) == 3);

    /* Strings: defaults, round trips, a buffer too short. */
    CHECK(string_is(hipFileParamLoggingLevel, "WARN"));
    CHECK(string_is(hipFileParamLogDir, ""));
    CHECK(IS(hipFileSetParameterString(hipFileParamLoggingLevel, "debug"), hipFileSuccess));
    CHECK(string_is(hipFileParamLoggingLevel, "DEBUG"));
    CHECK(IS(hipFileSetParameterString(hipFileParamLoggingLevel, "LOUD"), hipFileInvalidValue));
    CHECK(string_is(hipFileParamLoggingLevel, "DEBUG"));
    memset(buf, 'x', sizeof buf);
    CHECK(IS(hipFileGetParameterString(hipFileParamLoggingLevel, buf, 5), hipFileInvalidValue));
    CHECK(buf[0] == 'x'); /* nothing written */
    CHECK(IS(hipFileGetParameterString(hipFileParamLoggingLevel, buf, 0), hipFileInvalidValue));
    CHECK(IS(hipFileGetParameterString(hipFileParamLoggingLevel, buf, -1), hipFileInvalidValue));
    CHECK(IS(hipFileGetParameterString(hipFileParamLoggingLevel, buf, 6), hipFileSuccess));
    CHECK(strcmp(buf, "DEBUG") == 0);
    CHECK(IS(hipFileSetParameterString(hipFileParamEnvLogfilePath, "/tmp/hipfile.log"),
             hipFileSuccess));
    CHECK(string_is(hipFileParamEnvLogfilePath, "/tmp/hipfile.log"));
    CHECK(IS(hipFileSetParameterString(hipFileParamLogDir, "/tmp"), hipFileSuccess));
    CHECK(string_is(hipFileParamLogDir, "/tmp"));

    /* Driver setters before an open: stored for it. */
    CHECK(IS(hipFileDriverSetMaxDirectIOSize(0), hipFileDriverUnsupportedLimit));
    CHECK(IS(hipFileDriverSetMaxDirectIOSize((size_t)2 << 20), hipFileDriverUnsupportedLimit));
    CHECK(IS(hipFileDriverSetMaxCacheSize(2), hipFileDriverUnsupportedLimit));
    CHECK(IS(hipFileDriverSetMaxPinnedMemSize(0), hipFileDriverUnsupportedLimit));
    CHECK(IS(hipFileDriverSetMaxDirectIOSize(16), hipFileSuccess));
    CHECK(size_param(hipFileParamPropertiesMaxDirectIOSizeKB) == 16);
    CHECK(IS(hipFileDriverSetPollMode(true, 32), hipFileSuccess));
    CHECK(bool_param(hipFileParamPropertiesUsePollMode));
    CHECK(size_param(hipFileParamPollthresholdSizeKB) == 32);
    CHECK(hipFileUseCount() == 0); /* none of this opened the driver */

    /* Open: the properties are the settings. */
    CHECK(IS(hipFileDriverOpen(), hipFileSuccess));
    p = props();
    CHECK(p.nvfs.major_version == HIPFILE_VERSION_MAJOR);
    CHECK(p.nvfs.minor_version == HIPFILE_VERSION_MINOR);
    CHECK(p.nvfs.max_direct_io_size == 16);
    CHECK(p.nvfs.poll_thresh_size == 32);
    CHECK(p.nvfs.driver_control_flags ==
          ((1u << hipFileUsePollMode) | (1u << hipFileAllowCompatMode)));
    /* The emulated runtime has AMD's file I/O calls: the fastpath can serve local NVMe. */
    CHECK(p.nvfs.driver_status_flags == (1u << hipFileNVMeSupported));
    /* The emulated runtime can order requests on streams. */
    CHECK(p.feature_flags == ((1u << hipFileBatchIOSupported) | (1u << hipFileStreamsSupported) |
                              (1u << hipFileParallelIOSupported)));
    CHECK(p.max_device_cache_size == 512);
    CHECK(p.max_device_pinned_mem_size == 1024);
    CHECK(p.per_buffer_cache_size == size_param(hipFileParamPropertiesPerBufferCacheSizeKB));
    CHECK(p.max_batch_io_count == 128);
    CHECK(p.max_batch_io_timeout_msecs == 1000);
    CHECK(IS(hipFileDriverGetProperties(NULL), hipFileInvalidValue));

    /* Parameters cannot be set while the driver is open; they can be read. */
    CHECK(IS(hipFileSetParameterSizeT(hipFileParamExecutionMaxIOThreads, 2),
             hipFileDriverAlreadyOpen));
    CHECK(IS(hipFileSetParameterBool(hipFileParamForceCompatMode, true), hipFileDriverAlreadyOpen));
    CHECK(IS(hipFileSetParameterString(hipFileParamLogDir, "/"), hipFileDriverAlreadyOpen));
    CHECK(IS(hipFileSetParameterSizeT((hipFileSizeTConfigParameter_t)99, 2), hipFileInvalidValue));
    CHECK(size_param(hipFileParamExecutionMaxIOThreads) == 3);
    CHECK(!bool_param(hipFileParamForceCompatMode));
    CHECK(string_is(hipFileParamLogDir, "/tmp"));

    /* Nothing uses the driver yet: the setters take effect at once. */
    CHECK(IS(hipFileDriverSetMaxDirectIOSize(8), hipFileSuccess));
    CHECK(IS(hipFileDriverSetMaxCacheSize(16), hipFileSuccess));
    CHECK(IS(hipFileDriverSetMaxPinnedMemSize(32), hipFileSuccess));
    CHECK(IS(hipFileDriverSetMaxCacheSize(1), hipFileDriverUnsupportedLimit));
    CHECK(hipFileUseCount() == 1);
    p = props();
    CHECK(p.nvfs.max_direct_io_size == 8);
    CHECK(p.max_device_cache_size == 16);
    CHECK(p.max_device_pinned_mem_size == 32);
    CHECK(p.per_buffer_cache_size == 4); /* a 16 KiB pool over 3 workers x 2 buffers */
    CHECK(p.nvfs.poll_thresh_size == 32); /* the driver was opened again, settings kept */
    CHECK(size_param(hipFileParamPropertiesMaxDirectIOSizeKB) == 8);
    CHECK(IS(hipFileDriverSetPollMode(false, 4), hipFileSuccess));
    p = props();
    CHECK(p.nvfs.driver_control_flags == (1u << hipFileAllowCompatMode));
    CHECK(p.nvfs.poll_thresh_size == 4);

    /* Bytes through the small pieces and the small staging pool. */
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    hipFileDescr_t d;
    memset(&d, 0, sizeof d);
    d.type = hipFileHandleTypeOpaqueFD;
    d.handle.fd = fd;
    hipFileHandle_t fh = NULL;
    CHECK(IS(hipFileHandleRegister(&fh, &d), hipFileSuccess));
    void *dev = NULL;
    CHECK(hipMalloc(&dev, N) == 0);
    round_trip(fh, dev, fd);
    CHECK(IS(hipFileBufRegister(dev, N, 0), hipFileSuccess));
    round_trip(fh, dev, fd);

    /* Registrations hold the driver: a setter now applies at the next open. */
    CHECK(IS(hipFileDriverSetMaxDirectIOSize(32), hipFileSuccess));
    CHECK(props().nvfs.max_direct_io_size == 8);
    CHECK(size_param(hipFileParamPropertiesMaxDirectIOSizeKB) == 8);
    CHECK(IS(hipFileBufDeregister(dev), hipFileSuccess));
    hipFileHandleDeregister(fh);
    CHECK(IS(hipFileDriverClose(), hipFileSuccess));
    CHECK(hipFileUseCount() == 0);
    CHECK(size_param(hipFileParamPropertiesMaxDirectIOSizeKB) == 32); /* the next open's */
    CHECK(IS(hipFileDriverGetProperties(&p), hipFileDriverNotInitialized));

    /* An implicit open takes the settings too. */
    CHECK(IS(hipFileHandleRegister(&fh, &d), hipFileSuccess));
    CHECK(hipFileUseCount() == 1);
    p = props();
    CHECK(p.nvfs.max_direct_io_size == 32);
    CHECK(p.max_device_cache_size == 16);
    round_trip(fh, dev, fd);
    hipFileHandleDeregister(fh);
    CHECK(IS(hipFileDriverClose(), hipFileSuccess));

    /* Compat mode forced: no fastpath, so no storage kind; the fallback still serves. */
    CHECK(IS(hipFileSetParameterBool(hipFileParamForceCompatMode, true), hipFileSuccess));
    CHECK(IS(hipFileHandleRegister(&fh, &d), hipFileSuccess));
    p = props();
    CHECK(p.nvfs.driver_status_flags == 0);
    CHECK(bool_param(hipFileParamForceCompatMode) && !bool_param(hipFileParamUsePcip2pdma));
    round_trip(fh, dev, fd);
    hipFileHandleDeregister(fh);
    CHECK(IS(hipFileDriverClose(), hipFileSuccess));

    close(fd);
    CHECK(hipFree(dev) == 0);

    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("params: all checks passed\n");
    return 0;
}
