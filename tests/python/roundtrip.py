"""A round trip through AMD's Python bindings for hipFile (PyPI's `hipfile` sdist), built
against this project's libhipfile.so.0 and run on the emulated HIP runtime.

`cargo xtask ci` builds the bindings against the tree `cargo xtask dist` lays out and runs
this script with:

- LD_LIBRARY_PATH naming that tree's lib/ and a directory holding the emulated runtime
  as libamdhip64.so (the bindings' hipMalloc helper loads the HIP runtime by that name);
- HIPFILE_HIP_LIBRARY naming the emulated runtime, the same file, so that the library
  and the program share one runtime instance.

Checks, through the bindings' own API: the version, the driver's use count, a file handle
on a real file, a buffer registered on memory from the runtime's hipMalloc, a write of a
pattern copied in with hipMemcpy, the file's bytes, a read back verified with hipMemcpy,
the errors of a second registration and of a read into host memory, deregistration and
closing, an asynchronous write and read back on a registered stream (read_async and
write_async) and driver_get_properties. PENDING lists the functions the bindings reference
that the library does not export yet (none now), and the script fails both when one outside
that list is missing and when one in it has appeared (so that the list shrinks and the
checks that need it run).

Exits 0 and prints "all checks passed" when everything holds.
"""

import ctypes
import os
import sys
import tempfile

# Every hipFile function the bindings' extension module calls (its undefined symbols).
REFERENCED = [
    "hipFileBufDeregister",
    "hipFileBufRegister",
    "hipFileDriverClose",
    "hipFileDriverOpen",
    "hipFileGetOpErrorString",
    "hipFileGetVersion",
    "hipFileHandleDeregister",
    "hipFileHandleRegister",
    "hipFileRead",
    "hipFileReadAsync",
    "hipFileStreamDeregister",
    "hipFileStreamRegister",
    "hipFileUseCount",
    "hipFileWrite",
    "hipFileWriteAsync",
]

# Referenced but not exported by libhipfile.so.0 yet. Remove a name when it is exported:
# the checks that need it then run.
PENDING: set = set()

H2D, D2H = 1, 2
SIZE = 1 << 20

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"roundtrip: check failed: {what}", file=sys.stderr)


def hip_runtime():
    """The emulated runtime, loaded RTLD_GLOBAL: the bindings' extension leaves
    hipPeekAtLastError to the process's HIP runtime and does not link one itself."""
    path = os.environ.get("HIPFILE_HIP_LIBRARY")
    if not path:
        sys.exit("roundtrip: HIPFILE_HIP_LIBRARY must name the emulated runtime")
    hip = ctypes.CDLL(path, mode=os.RTLD_GLOBAL | os.RTLD_NOW)
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


def missing_symbols():
    """The functions of REFERENCED that libhipfile.so.0 does not export."""
    lib = ctypes.CDLL("libhipfile.so.0")
    return {name for name in REFERENCED if not hasattr(lib, name)}


def main():
    missing = missing_symbols()
    unexpected = missing - PENDING
    if unexpected:
        sys.exit(f"roundtrip: libhipfile.so.0 lacks {sorted(unexpected)}, which the bindings call")
    arrived = PENDING - missing
    if arrived:
        sys.exit(
            f"roundtrip: libhipfile.so.0 now exports {sorted(arrived)}: remove them from "
            "PENDING in tests/python/roundtrip.py so that their checks run"
        )
    if missing:
        print(f"roundtrip: not exported yet, their checks wait: {sorted(missing)}")
    hip = hip_runtime()
    # Python binds an extension's symbols at import (RTLD_NOW); while some are missing, bind
    # lazily so that the rest can be checked. Calling a missing one would end the process.
    if missing:
        sys.setdlopenflags(os.RTLD_LAZY | os.RTLD_GLOBAL)

    import hipfile
    from hipfile import Buffer, Driver, FileHandle, HipFileException, OpError, get_version
    from hipfile.hipMalloc import hipFree, hipMalloc

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
                    if not PENDING & {"hipFileStreamRegister", "hipFileReadAsync",
                                      "hipFileWriteAsync", "hipFileStreamDeregister"}:
                        async_round_trip(hip, hipfile, fh, buffer, device, pattern, back)
            if "hipFileDriverGetProperties" not in PENDING:
                props = hipfile.driver_get_properties()
                check(isinstance(props, dict) and props, f"driver properties: {props}")
        check(Driver.use_count() == 0, "use count 0 after the driver closes")
    hipFree(device)

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
