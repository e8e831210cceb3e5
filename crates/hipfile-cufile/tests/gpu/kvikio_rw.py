"""KvikIO's CuFile on hipfile's libcufile.so.0 (issue 15's second client): writes N bytes
(default 8 GiB) of random device memory, reads them back three times, and prints one JSON
line with the rates, whether the bytes are identical, KvikIO's compatibility mode and which
libcufile the process mapped. Not run by CI (it needs a GPU). Through cuFile (hipfile):

    LD_PRELOAD=DIR/libcufile.so.0 KVIKIO_COMPAT_MODE=OFF python3 kvikio_rw.py [N]

against KvikIO's own POSIX path in the same call:

    KVIKIO_COMPAT_MODE=ON KVIKIO_NTHREADS=16 python3 kvikio_rw.py [N]
"""
import json, os, subprocess, sys, time
import cupy, kvikio, kvikio.defaults


def hipfile_stats():
    """The read and write bytes hipfile counted in this process, when HIPFILE_BIN names the
    hipfile command and HIPFILE_STATS_LEVEL is 1 or more (the proof that hipfile served the
    calls); None otherwise, or why the figures could not be read."""
    exe = os.environ.get("HIPFILE_BIN")
    if not exe:
        return None
    time.sleep(0.3)  # the channel is updated within a tenth of a second
    r = subprocess.run([exe, "stats", "--json", str(os.getpid())], capture_output=True, text=True)
    if r.returncode:
        return r.stderr.strip()[-200:]
    d = json.loads(r.stdout)
    return {"read_bytes": d.get("read", {}).get("bytes"), "write_bytes": d.get("write", {}).get("bytes")}

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
