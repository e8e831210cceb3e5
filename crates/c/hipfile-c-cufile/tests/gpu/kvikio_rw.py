"""KvikIO's CuFile on hipfile's libcufile.so.0 (issue 15's second client): writes N bytes
(default 8 GiB) of random device memory, reads them back three times, and prints one JSON
line with the rates, whether the bytes are identical, KvikIO's compatibility mode and which
libcufile the process mapped. Not run by CI (it needs a GPU). Through cuFile (hipfile):

    LD_PRELOAD=DIR/libcufile.so.0 KVIKIO_COMPAT_MODE=OFF python3 kvikio_rw.py [N]

against KvikIO's own POSIX path in the same call:

    KVIKIO_COMPAT_MODE=ON KVIKIO_NTHREADS=16 python3 kvikio_rw.py [N]
"""
import json, os, sys, time
import cupy, kvikio, kvikio.defaults

from hipfile_stats import hipfile_stats


n = int(sys.argv[1]) if len(sys.argv) > 1 else 8 << 30
d = "/tmp/kv"; os.makedirs(d, exist_ok=True); path = os.path.join(d, "k.bin")
a = cupy.random.randint(0, 256, n, dtype=cupy.uint8)
cupy.cuda.runtime.deviceSynchronize()
with kvikio.CuFile(path, "w") as f:
    t0 = time.perf_counter(); f.write(a); w = time.perf_counter() - t0
b = cupy.zeros_like(a)
rs = []
for _ in range(3):
    with kvikio.CuFile(path, "r") as f:
        t0 = time.perf_counter(); f.read(b); rs.append(time.perf_counter() - t0)
ok = bool((a == b).all())
stats = hipfile_stats()
maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if "cufile" in l})
print(json.dumps({"compat_mode": str(kvikio.defaults.get("compat_mode")),
                  "threads": kvikio.defaults.get("num_threads"),
                  "bytes": n, "write_gbps": round(n / w / 1e9, 2),
                  "read_gbps": [round(n / r / 1e9, 2) for r in rs], "identical": ok, "cufile_mapped": maps,
                  "hipfile_stats": stats}))
