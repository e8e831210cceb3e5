# Times device allocations of the benchmark checkpoint's shard sizes (4 x 2.41 GB) and of one
# block of their sum, each fresh from the driver (the caching allocator emptied between),
# after the context exists: what allocating a checkpoint's GPU memory costs a load.
#   python3 docs/profile/alloc_time.py
import time

import torch

SHARD_BYTES = [2411907072 - 8 * 2**20] * 4


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
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    for rep in range(4):
        four = timed_ms(lambda: [torch.empty(n, dtype=torch.uint8, device="cuda") for n in SHARD_BYTES])
        one = timed_ms(lambda: torch.empty(sum(SHARD_BYTES), dtype=torch.uint8, device="cuda"))
        print({"rep": rep, "four_allocs_ms": round(four, 2), "one_alloc_ms": round(one, 2),
               "gb": round(sum(SHARD_BYTES) / 1e9, 2)})


if __name__ == "__main__":
    main()
