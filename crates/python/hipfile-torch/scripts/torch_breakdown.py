"""Where hipfile_torch.load_file's time goes, hot: opening, allocating the tensors, reading.
Variants of the read: into separately allocated tensors (as load_file), into one buffer per
shard at the tensors' offsets (the same per-tensor requests, four allocations), with more in
flight, and the allocation alone (after empty_cache, and with the allocator's cache warm).

    python3 torch_breakdown.py RUNS /tmp/ck/*.safetensors

Not run by CI (it needs a GPU); the figures are in docs/BENCHMARKS.md.
"""
import json
import sys
import time

import torch
import hipfile_torch
from hipfile_torch import _api
from hipfile_torch._native import Checkpoint, read_into

runs = int(sys.argv[1])
files = sys.argv[2:]
torch.cuda.init()
torch.zeros(1, device="cuda:0")
dev = torch.device("cuda", 0)


def warm():
    for f in files:
        with open(f, "rb", buffering=0) as h:
            while h.read(64 << 20):
                pass


def out(**kw):
    print(json.dumps(kw), flush=True)


def alloc(ck):
    ts = {}
    for name, dtype, shape, _s, start, end in ck.tensors():
        ts[name] = torch.empty(shape, dtype=_api._TYPES[dtype], device=dev)
    return ts


def per_tensor_targets(ck, ts):
    return [(n, 0, e - s, ts[n].data_ptr(), e - s) for n, _d, _sh, _x, s, e in ck.tensors() if e > s]


def shard_buffers(ck):
    lo, hi = {}, {}
    for _n, _d, _sh, sh, s, e in ck.tensors():
        lo[sh] = min(lo.get(sh, s), s)
        hi[sh] = max(hi.get(sh, e), e)
    bufs = {sh: torch.empty(hi[sh] - lo[sh], dtype=torch.uint8, device=dev) for sh in lo}
    targets = [(n, 0, e - s, bufs[sh].data_ptr() + (s - lo[sh]), e - s)
               for n, _d, _sh, sh, s, e in ck.tensors() if e > s]
    return bufs, targets


for run in range(runs):
    warm()
    torch.cuda.empty_cache()
    t0 = time.perf_counter()
    ts = hipfile_torch.load_file(files, device="cuda:0")
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    r = hipfile_torch.last_report()
    out(case="load_file", run=run, wall=round(wall, 4), read=round(r.seconds, 4),
        gbps=round(r.bytes / wall / 1e9, 2), read_gbps=round(r.gbps, 2), requests=r.requests)
    nbytes = r.bytes
    del ts

    # The same steps, timed one by one.
    warm()
    torch.cuda.empty_cache()
    t0 = time.perf_counter()
    ck = Checkpoint(files)
    t1 = time.perf_counter()
    ts = alloc(ck)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    rep = read_into(ck, per_tensor_targets(ck, ts))
    t3 = time.perf_counter()
    out(case="steps", run=run, open=round(t1 - t0, 4), alloc=round(t2 - t1, 4),
        read=round(t3 - t2, 4), read_gbps=round(nbytes / (t3 - t2) / 1e9, 2),
        total_gbps=round(nbytes / (t3 - t0) / 1e9, 2))

    # The read again into the same tensors (allocation done), and with more in flight.
    for kw in ({}, {"in_flight": 16}, {"in_flight": 32}, {"request_size": 16 << 20, "in_flight": 32}):
        warm()
        t0 = time.perf_counter()
        rep = read_into(ck, per_tensor_targets(ck, ts), **kw)
        dt = time.perf_counter() - t0
        out(case="reread", run=run, kw=kw, read=round(dt, 4), gbps=round(nbytes / dt / 1e9, 2),
            requests=rep["requests"])
    del ts

    # Allocation alone: after empty_cache, then with the allocator's cache warm.
    torch.cuda.empty_cache()
    t0 = time.perf_counter()
    ts = alloc(ck)
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    del ts
    t2 = time.perf_counter()
    ts = alloc(ck)
    torch.cuda.synchronize()
    t3 = time.perf_counter()
    out(case="alloc", run=run, fresh=round(t1 - t0, 4), cached=round(t3 - t2, 4))
    del ts

    # One buffer per shard, the same per-tensor targets at the tensors' offsets in it.
    warm()
    torch.cuda.empty_cache()
    t0 = time.perf_counter()
    bufs, targets = shard_buffers(ck)
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    rep = read_into(ck, targets)
    t2 = time.perf_counter()
    out(case="shard_buffers", run=run, alloc=round(t1 - t0, 4), read=round(t2 - t1, 4),
        read_gbps=round(nbytes / (t2 - t1) / 1e9, 2), total_gbps=round(nbytes / (t2 - t0) / 1e9, 2))
    del bufs, targets
