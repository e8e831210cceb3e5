# Times device allocations of a checkpoint's shards' tensor bytes (one allocation per shard)
# and of one block of their sum, each fresh from the driver (the caching allocator emptied
# between), after the context exists: what allocating a checkpoint's GPU memory costs a load.
#   python3 docs/profile/alloc_time.py SHARD.safetensors...
import json
import os
import struct
import sys
import time

import torch


def tensor_bytes(path):
    """The bytes of a safetensors file's tensor data: what follows its header."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
    ends = [t["data_offsets"][1] for name, t in header.items() if name != "__metadata__"]
    data = os.path.getsize(path) - 8 - header_len
    if max(ends, default=0) > data:
        sys.exit(f"{path}: the header names bytes past the end of the file")
    return max(ends, default=0)


def timed_ms(make):
    """Milliseconds to allocate what `make` returns, its memory given back after."""
    start = time.perf_counter()
    held = make()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - start) * 1e3
    del held
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    return ms


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: alloc_time.py SHARD.safetensors...")
    shard_bytes = [tensor_bytes(p) for p in sys.argv[1:]]
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    for rep in range(4):
        shards = timed_ms(lambda: [torch.empty(n, dtype=torch.uint8, device="cuda") for n in shard_bytes])
        one = timed_ms(lambda: torch.empty(sum(shard_bytes), dtype=torch.uint8, device="cuda"))
        print({"rep": rep, "per_shard_ms": round(shards, 2), "one_alloc_ms": round(one, 2),
               "gb": round(sum(shard_bytes) / 1e9, 2)})


if __name__ == "__main__":
    main()
