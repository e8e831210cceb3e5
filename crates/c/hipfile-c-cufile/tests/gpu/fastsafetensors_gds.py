"""fastsafetensors with GDS on (nogds=False) on hipfile's libcufile.so.0 (issue 15's third
client), against its own nogds=True path in the same call: loads a checkpoint (the files
given; `hipfile checkpoint --out DIR` writes the benchmark one) hot, twice each way, and
prints one JSON line per run with the rate and, for the first run of each way, a CRC-32
over every tensor's bytes, which must agree between the two ways. Not run by CI (it needs a GPU):

    LD_PRELOAD=DIR/libcufile.so.0 LD_LIBRARY_PATH=DIR python3 fastsafetensors_gds.py FILE...

with DIR holding hipfile's libcufile.so.0 and its libcufile.so link.
"""
import json
import sys
import time
import zlib

import torch
from fastsafetensors import SafeTensorsFileLoader, SingleGroup

from hipfile_stats import hipfile_stats



def load(files, nogds, check):
    loader = SafeTensorsFileLoader(SingleGroup(), device="cuda:0", nogds=nogds)
    loader.add_filenames({0: files})
    t0 = time.perf_counter()
    fb = loader.copy_files_to_device()
    tensors = {k: fb.get_tensor(k) for k in fb.key_to_rank_lidx.keys()}
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    crc = None if not check else 0
    for name in sorted(tensors) if check else ():
        t = tensors[name]
        if t.numel():
            crc = zlib.crc32(t.contiguous().view(torch.uint8).cpu().numpy().tobytes(), crc)
    nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
    stats = hipfile_stats() if not nogds else None
    fb.close()
    loader.close()
    return {"nogds": nogds, "tensors": len(tensors), "bytes": nbytes,
            "seconds": round(dt, 4), "gbps": round(nbytes / dt / 1e9, 3), "crc32": crc,
            "hipfile_stats": stats}


def main():
    files = sys.argv[1:]
    for f in files:
        with open(f, "rb", buffering=0) as h:
            while h.read(64 << 20):
                pass
    torch.zeros(1, device="cuda:0")
    # The first run of each way also checksums every tensor (copied back to the host).
    for i, nogds in enumerate((False, True, False, True)):
        print(json.dumps(load(files, nogds, check=i < 2)), flush=True)
    maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if "cufile" in l})
    print(json.dumps({"cufile_mapped": maps}))


if __name__ == "__main__":
    main()
