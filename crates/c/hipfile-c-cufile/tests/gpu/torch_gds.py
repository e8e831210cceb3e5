"""PyTorch's GdsFile on hipfile's libcufile.so.0 (issue 15's first client): saves a tensor of
N bytes (default 4 GiB) of random bytes with save_storage, loads it back with load_storage,
and prints one JSON line with both rates, whether the bytes are identical, and which
libcufile the process mapped. Not run by CI (it needs a GPU):

    LD_PRELOAD=DIR/libcufile.so.0 python3 torch_gds.py [N]

With HIPFILE_STATS_LEVEL=1 and HIPFILE_BIN naming the hipfile command, it also prints the
bytes hipfile counted (`hipfile stats`).

with DIR holding hipfile's libcufile.so.0 (cargo xtask dist's lib/). Without LD_PRELOAD it
uses NVIDIA's library, which fails where nvidia-fs is missing.
"""
import json, os, sys, time
import torch
from torch.cuda.gds import GdsFile

from hipfile_stats import hipfile_stats


d = "/tmp/gds"; os.makedirs(d, exist_ok=True)
path = os.path.join(d, "t.bin")
n = int(sys.argv[1]) if len(sys.argv) > 1 else 4 << 30
t = torch.randint(0, 256, (n,), dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
f = GdsFile(path, os.O_CREAT | os.O_RDWR)
maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if "cufile" in l})
t0 = time.perf_counter(); f.save_storage(t.untyped_storage(), 0); torch.cuda.synchronize(); w = time.perf_counter() - t0
u = torch.zeros_like(t)
t0 = time.perf_counter(); f.load_storage(u.untyped_storage(), 0); torch.cuda.synchronize(); r = time.perf_counter() - t0
ok = bool(torch.equal(t, u))
stats = hipfile_stats()
del f
print(json.dumps({"bytes": n, "save_s": round(w, 3), "save_gbps": round(n / w / 1e9, 2),
                  "load_s": round(r, 3), "load_gbps": round(n / r / 1e9, 2), "identical": ok,
                  "cufile_mapped": maps, "hipfile_stats": stats}))
