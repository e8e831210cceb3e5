"""Loads a safetensors checkpoint into GPU memory with the peer loaders, for `hipfile load`'s
comparison in docs/BENCHMARKS.md: safetensors' load_file, fastsafetensors (nogds: GDS needs
nvidia-fs), InstantTensor (default, direct I/O, and BackendPolicy.BUFFERED), and hipfile's
own PyTorch package (hipfile_torch.load_file, `hipfile-torch`). Prints one JSON
line per run: loader, cache state, tensors, bytes, seconds, GB/s.

CUDA is started and every loader's module imported before the clock (as `hipfile load`
makes its context before its own, and a program imports its loader at its start); each
run first drops the files from the page cache (--mode cold: fsync, POSIX_FADV_DONTNEED, and
/proc/sys/vm/drop_caches when allowed) or reads them once (--mode hot).

    python3 peers_load.py --mode hot --runs 2 /tmp/ck/*.safetensors
"""
import argparse
import importlib
import json
import os
import time
import zlib

import torch


def drop(files):
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as p:
            p.write("3\n")
    except OSError:
        pass


def warm(files):
    for f in files:
        with open(f, "rb", buffering=0) as h:
            while h.read(64 << 20):
                pass


def load_safetensors(files):
    from safetensors.torch import load_file
    out = {}
    for f in files:
        out.update(load_file(f, device="cuda:0"))
    return out


def load_fastsafetensors(files):
    from fastsafetensors import SafeTensorsFileLoader, SingleGroup
    loader = SafeTensorsFileLoader(SingleGroup(), device="cuda:0", nogds=True)
    loader.add_filenames({0: files})
    fb = loader.copy_files_to_device()
    out = {k: fb.get_tensor(k) for k in fb.key_to_rank_lidx.keys()}
    return out, (fb, loader)


def load_instant(files, buffered):
    from instanttensor import BackendPolicy, safe_open
    kw = {"backend": BackendPolicy.BUFFERED} if buffered else {}
    out = {}
    with safe_open(files, framework="pt", device=0, **kw) as f:
        for name, t in f.tensors():
            out[name] = t
    return out


def load_hipfile_torch(files):
    import hipfile_torch
    return hipfile_torch.load_file(files, device="cuda:0")


# The module each loader imports, imported before the clock.
MODULES = {
    "hipfile-torch": "hipfile_torch",
    "safetensors": "safetensors.torch",
    "fastsafetensors": "fastsafetensors",
    "instanttensor": "instanttensor",
    "instanttensor-buffered": "instanttensor",
}

LOADERS = {
    "hipfile-torch": lambda fs: (load_hipfile_torch(fs), None),
    "safetensors": lambda fs: (load_safetensors(fs), None),
    "fastsafetensors": load_fastsafetensors,
    "instanttensor": lambda fs: (load_instant(fs, False), None),
    "instanttensor-buffered": lambda fs: (load_instant(fs, True), None),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["hot", "cold"], required=True)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--loaders", default=",".join(LOADERS))
    ap.add_argument("--crc", action="store_true", help="print a CRC-32 per tensor of the first run")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    total = sum(os.path.getsize(f) for f in a.files)
    torch.cuda.init()
    torch.zeros(1, device="cuda:0")
    for name in a.loaders.split(","):
        try:
            importlib.import_module(MODULES[name])
        except Exception:  # reported by the run below, which imports it again
            pass
        for run in range(a.runs):
            (drop if a.mode == "cold" else warm)(a.files)
            try:
                t0 = time.perf_counter()
                tensors, keep = LOADERS[name](a.files)
                torch.cuda.synchronize()
                dt = time.perf_counter() - t0
            except Exception as e:  # a peer that cannot run here is reported, not fatal
                print(json.dumps({"loader": name, "mode": a.mode, "error": repr(e)[:300]}), flush=True)
                break
            nbytes = sum(t.numel() * t.element_size() for t in tensors.values())
            rec = {"loader": name, "mode": a.mode, "run": run, "tensors": len(tensors),
                   "bytes": nbytes, "file_bytes": total, "seconds": round(dt, 4),
                   "gbps": round(nbytes / dt / 1e9, 3)}
            if name == "hipfile-torch":
                import hipfile_torch
                # The reads' span; the rest of the load's time is what they did not hide.
                rec["read_seconds"] = round(hipfile_torch.last_report().seconds, 4)
            if a.crc and run == 0:
                rec["crc32_xor"] = 0
                for k, t in tensors.items():
                    b = t.contiguous().view(torch.uint8).cpu().numpy().tobytes() if t.numel() else b""
                    rec["crc32_xor"] ^= zlib.crc32(b) ^ zlib.crc32(k.encode())
            print(json.dumps(rec), flush=True)
            del tensors, keep
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
