"""What the first hipfile_torch.load_file of a process spends before and around its reads,
hot: `steps` times opening the checkpoint, opening the driver and starting the staging's
pinning (`_native.prepare_staging`), allocating every tensor and reading them, one step
after the other, in a fresh process; `ready` opens the driver and lets the pinning end
(0.5 s) before a timed load_file; `plain` is load_file alone. One JSON line per case.

    python3 first_load.py steps|ready|plain /tmp/ck/*.safetensors

Not run by CI (it needs a GPU); the figures are in docs/BENCHMARKS.md.
"""
import json
import sys
import time

import torch

import hipfile_torch
from hipfile_torch import _api, _native

case, files = sys.argv[1], sys.argv[2:]
torch.cuda.init()
torch.zeros(1, device="cuda:0")
dev = torch.device("cuda", 0)
# As load_file does before it opens the driver: the runtime of this PyTorch build (without
# it, `steps` and `ready` opened the driver with the automatic choice, which tries HIP's
# library first).
_api._runtime_for(dev)
for f in files:
    with open(f, "rb", buffering=0) as h:
        while h.read(64 << 20):
            pass


def ms(a, b):
    return round((b - a) * 1e3, 1)


if case == "steps":
    t0 = time.perf_counter()
    ck = _native.Checkpoint(files)
    t1 = time.perf_counter()
    _native.prepare_staging()
    t2 = time.perf_counter()
    ts = {n: torch.empty(sh, dtype=_api._TYPES[d], device=dev) for n, d, sh, _s, a, b in ck.tensors()}
    torch.cuda.current_stream(dev).synchronize()
    t3 = time.perf_counter()
    targets = [(n, 0, b - a, ts[n].data_ptr(), b - a) for n, _d, _sh, _s, a, b in ck.tensors() if b > a]
    rep = _native.read_into(ck, targets)
    t4 = time.perf_counter()
    total = sum(b - a for *_x, a, b in ck.tensors())
    print(json.dumps({"case": case, "open_ms": ms(t0, t1), "driver_and_pin_start_ms": ms(t1, t2),
                      "alloc_ms": ms(t2, t3), "read_ms": ms(t3, t4), "total_ms": ms(t0, t4),
                      "gbps": round(total / (t4 - t0) / 1e9, 2), "read_gbps": round(total / (t4 - t3) / 1e9, 2)}))
else:
    if case == "ready":
        _native.prepare_staging()
        time.sleep(0.5)
    for run in range(2):
        t0 = time.perf_counter()
        out = hipfile_torch.load_file(files, device="cuda:0")
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        r = hipfile_torch.last_report()
        print(json.dumps({"case": case, "run": run, "total_ms": ms(t0, t1), "read_span_ms": round(r.seconds * 1e3, 1),
                          "gbps": round(r.bytes / (t1 - t0) / 1e9, 2)}))
        del out
        torch.cuda.empty_cache()
