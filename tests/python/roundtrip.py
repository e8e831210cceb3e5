"""A round trip through AMD's Python bindings for hipFile (PyPI's `hipfile` sdist), built
against this project's libhipfile.so.0 and run on the emulated HIP runtime.

`cargo xtask ci` builds the bindings against the tree `cargo xtask dist` lays out and runs
this script with LD_LIBRARY_PATH naming that tree's lib/ and the directory of the emulated
runtime under the names of a HIP runtime (libamdhip64.so.7, the soname libhipfile.so.0
depends on, and libamdhip64.so, which the bindings' hipMalloc helper loads), and nothing
else: no HIPFILE_HIP_LIBRARY, nothing preloaded. The bindings' extension calls
hipPeekAtLastError without linking the HIP runtime; it imports because libhipfile.so.0
brings the runtime as a dependency, as AMD's library does. Against a library without that
dependency (lib/portable/), the import fails with "undefined symbol: hipPeekAtLastError",
which `cargo xtask ci` also checks.

Checks: no HIP runtime is loaded before the import and exactly one after it, and still one
at the end (the helper's libamdhip64.so and the library's dependency are the same object);
then, through the bindings' own API: the version, the driver's use count, a file handle on a
real file, a buffer registered on memory from the runtime's hipMalloc, a write of a pattern
copied in with hipMemcpy, the file's bytes, a read back verified with hipMemcpy, the errors
of a second registration and of a read into host memory, deregistration and closing, an
asynchronous write and read back on a registered stream (read_async and write_async) and
driver_get_properties.

Exits 0 and prints "all checks passed" when everything holds.
"""

import ctypes
import os
import sys
import tempfile

# The sonames of the HIP runtime, newest first, as libhipfile.so.0 may depend on them.
HIP_SONAMES = ["libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"]

H2D, D2H = 1, 2
SIZE = 1 << 20

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"roundtrip: check failed: {what}", file=sys.stderr)


def loaded_runtime():
    """The HIP runtime the process has loaded, found by soname with RTLD_NOLOAD (which loads
    nothing), or None."""
    for soname in HIP_SONAMES:
        try:
            return ctypes.CDLL(soname, mode=os.RTLD_NOLOAD | os.RTLD_NOW)
        except OSError:
            continue
    return None


def runtime_files():
    """The files of the HIP runtimes mapped in this process (the emulated runtime's file is
    libhipfile_emu.so, whatever name it was loaded by)."""
    with open("/proc/self/maps") as maps:
        names = (line.split()[-1] for line in maps if len(line.split()) >= 6)
        return {n for n in names if "libamdhip64" in n or "libhipfile_emu" in n}


def with_signatures(hip):
    """The runtime's functions this script calls, typed."""
    hip.hipMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    hip.hipMemcpy.restype = ctypes.c_int
    hip.hipMemset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    hip.hipMemset.restype = ctypes.c_int
    hip.hipStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    hip.hipStreamCreate.restype = ctypes.c_int
    hip.hipStreamSynchronize.argtypes = [ctypes.c_void_p]
    hip.hipStreamSynchronize.restype = ctypes.c_int
    hip.hipStreamDestroy.argtypes = [ctypes.c_void_p]
    hip.hipStreamDestroy.restype = ctypes.c_int
    return hip


def main():
    if os.environ.get("HIPFILE_HIP_LIBRARY"):
        sys.exit("roundtrip: HIPFILE_HIP_LIBRARY is set; this script checks the runtime that "
                 "libhipfile.so.0 brings itself, so run it without")
    if loaded_runtime() is not None or runtime_files():
        sys.exit(f"roundtrip: a HIP runtime is loaded before the bindings: {runtime_files()}")
    try:
        import hipfile
    except ImportError as e:
        sys.exit(f"roundtrip: the bindings do not import: {e}\n(their extension calls "
                 "hipPeekAtLastError without linking HIP: libhipfile.so.0 must bring the "
                 "runtime as a dependency, as AMD's does)")
    from hipfile import Buffer, Driver, FileHandle, HipFileException, OpError, get_version
    from hipfile.hipMalloc import hipFree, hipMalloc

    hip = loaded_runtime()
    if hip is None:
        sys.exit("roundtrip: the bindings imported, but no HIP runtime is loaded")
    hip = with_signatures(hip)
    check(len(runtime_files()) == 1, f"one HIP runtime after the import: {runtime_files()}")

    check(get_version() == (0, 5, 0), f"get_version() is {get_version()}")
    check(Driver.use_count() == 0, "use count 0 before the driver opens")

    pattern = bytes((i * 29 + 11) & 0xFF for i in range(SIZE))
    back = ctypes.create_string_buffer(SIZE)
    device = hipMalloc(SIZE)
    with tempfile.TemporaryDirectory(prefix="hipfile-python-") as tmp:
        path = os.path.join(tmp, "data")
        with Driver() as driver:
            check(driver.use_count() == 1, "use count 1 with the driver open")
            with Buffer.from_ctypes_void_p(device, SIZE, 0) as buffer:
                try:
                    Buffer(device.value, SIZE, 0).register()
                    check(False, "a second registration of the same memory is refused")
                except HipFileException as e:
                    check(
                        e.hipfile_err == OpError.MEMORY_ALREADY_REGISTERED,
                        f"second registration: {e}",
                    )
                with FileHandle(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC) as fh:
                    check(hip.hipMemcpy(device, pattern, SIZE, H2D) == 0, "hipMemcpy in")
                    check(fh.write(buffer, SIZE, 0, 0) == SIZE, "write returns the size")
                    with open(path, "rb") as f:
                        check(f.read() == pattern, "the file holds the pattern")
                    check(hip.hipMemset(device, 0, SIZE) == 0, "hipMemset")
                    check(fh.read(buffer, SIZE, 0, 0) == SIZE, "read returns the size")
                    check(hip.hipMemcpy(back, device, SIZE, D2H) == 0, "hipMemcpy out")
                    check(back.raw == pattern, "the bytes read back are the pattern")
                    # Host memory is not device memory: refused, through their exception.
                    host = Buffer(ctypes.addressof(back), SIZE, 0)
                    try:
                        fh.read(host, SIZE, 0, 0)
                        check(False, "a read into host memory is refused")
                    except HipFileException as e:
                        check(
                            e.hipfile_err == OpError.HIP_MEMORY_TYPE_INVALID,
                            f"read into host memory: {e}",
                        )
                    async_round_trip(hip, hipfile, fh, buffer, device, pattern, back)
            props = hipfile.driver_get_properties()
            check(isinstance(props, dict) and props, f"driver properties: {props}")
        check(Driver.use_count() == 0, "use count 0 after the driver closes")
    hipFree(device)
    check(len(runtime_files()) == 1, f"one HIP runtime at the end: {runtime_files()}")

    if failures:
        sys.exit(f"roundtrip: {len(failures)} checks failed")
    print("roundtrip: all checks passed")


def async_round_trip(hip, hipfile, fh, buffer, device, pattern, back):
    """A write and a read on a registered stream, through the bindings' async API."""
    stream = ctypes.c_void_p()
    check(hip.hipStreamCreate(ctypes.byref(stream)) == 0, "hipStreamCreate")
    half = SIZE // 2
    with hipfile.Stream(stream.value) as st:
        written = fh.write_async(buffer, half, SIZE, 0, st.handle)
        check(hip.hipStreamSynchronize(stream) == 0, "hipStreamSynchronize after the write")
        check(written.bytes_done == half, f"async write moved {written.bytes_done}")
        check(hip.hipMemset(device, 0, SIZE) == 0, "hipMemset")
        read = fh.read_async(buffer, half, SIZE, half, st.handle)
        check(hip.hipStreamSynchronize(stream) == 0, "hipStreamSynchronize after the read")
        check(read.bytes_done == half, f"async read moved {read.bytes_done}")
    check(hip.hipMemcpy(back, device, SIZE, D2H) == 0, "hipMemcpy out")
    check(back.raw[half:] == pattern[:half], "the async bytes read back are the pattern")
    check(hip.hipStreamDestroy(stream) == 0, "hipStreamDestroy")


if __name__ == "__main__":
    main()
