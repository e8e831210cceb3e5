"""KvikIO's CuFile.read of a whole file into one CuPy buffer with N threads (KvikIO's own
task size), hot: the file is read once before each timed run. Run on hipfile's
libcufile.so.0 with KvikIO's compatibility mode off, so that every read is a cuFileRead:

    KVIKIO_COMPAT_MODE=OFF LD_PRELOAD=libcufile.so.0 python3 kvikio_read.py FILE THREADS RUNS

Prints one JSON line: threads, KvikIO's compatibility mode and task size, GB/s per run.
Not run by CI (it needs a GPU); the figures are in docs/BENCHMARKS.md.
"""
import json
import os
import sys
import time

import cupy
import kvikio
import kvikio.defaults

path, threads, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
size = os.path.getsize(path)
buf = cupy.empty(size, dtype=cupy.uint8)
rates = []
with kvikio.defaults.set({"num_threads": threads}):
    f = kvikio.CuFile(path, "r")
    for _ in range(runs):
        with open(path, "rb", buffering=0) as h:
            while h.read(64 << 20):
                pass
        t0 = time.perf_counter()
        n = f.read(buf)
        cupy.cuda.runtime.deviceSynchronize()
        rates.append(round(n / (time.perf_counter() - t0) / 1e9, 2))
    f.close()
mode = kvikio.defaults.get("compat_mode")
print(json.dumps({"threads": threads, "compat_mode": getattr(mode, "name", str(mode)),
                  "task_size": kvikio.defaults.get("task_size"), "gbps": rates}))
