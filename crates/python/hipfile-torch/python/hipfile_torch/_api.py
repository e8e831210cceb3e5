"""The package's functions: the tensors are allocated here, with PyTorch, and the native
module reads into (or writes from) their memory while they are held here."""

from __future__ import annotations

import fnmatch
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import torch

from ._native import Checkpoint as _Checkpoint
from ._native import CheckpointError
from ._native import prepare_staging as _prepare_staging
from ._native import read_into as _read_into
from ._native import save as _save
from ._native import use_platform as _use_platform

PathLike = Union[str, "os.PathLike[str]"]
Filter = Union[None, str, Iterable[str], Callable[[str], bool]]
Progress = Union[bool, Callable[[int, int], None]]

# safetensors' dtype names and PyTorch's dtypes, as safetensors.torch maps them.
_TYPES: Dict[str, torch.dtype] = {
    name: dtype
    for name, dtype in {
        "F64": torch.float64,
        "F32": torch.float32,
        "F16": torch.float16,
        "BF16": torch.bfloat16,
        "I64": torch.int64,
        "I32": torch.int32,
        "I16": torch.int16,
        "I8": torch.int8,
        "U8": torch.uint8,
        "BOOL": torch.bool,
        "C64": torch.complex64,
        "U64": getattr(torch, "uint64", None),
        "U32": getattr(torch, "uint32", None),
        "U16": getattr(torch, "uint16", None),
        "F8_E4M3": getattr(torch, "float8_e4m3fn", None),
        "F8_E4M3FNUZ": getattr(torch, "float8_e4m3fnuz", None),
        "F8_E5M2": getattr(torch, "float8_e5m2", None),
        "F8_E5M2FNUZ": getattr(torch, "float8_e5m2fnuz", None),
        "F8_E8M0": getattr(torch, "float8_e8m0fnu", None),
    }.items()
    if dtype is not None
}
_NAMES: Dict[torch.dtype, str] = {dtype: name for name, dtype in _TYPES.items()}


@dataclass(frozen=True)
class LoadReport:
    """What the last load in this process did: bytes read, and by which of hipfile's
    backends (the fastpath reads straight into GPU memory; the fallback goes through host
    staging buffers) or from object storage (``remote_bytes``, for URLs), requests made,
    whether the files were read as cold, and seconds."""

    bytes: int
    fastpath_bytes: int
    fallback_bytes: int
    remote_bytes: int
    requests: int
    cold: bool
    seconds: float

    @property
    def gbps(self) -> float:
        """Bytes read per second, in GB/s (10^9 bytes)."""
        return self.bytes / self.seconds / 1e9 if self.seconds > 0 else 0.0


_last: Optional[LoadReport] = None


def last_report() -> Optional[LoadReport]:
    """The report of the last ``load_file``, ``get_tensor`` or ``get_slice`` of this
    process, or None before the first."""
    return _last


def _paths(path_or_paths: Union[PathLike, Sequence[PathLike]]) -> List[str]:
    if isinstance(path_or_paths, (str, os.PathLike)):
        given = [path_or_paths]
    else:
        given = list(path_or_paths)
    if not given:
        raise ValueError("no safetensors file to load: the list of paths is empty")
    out = []
    for p in given:
        if not isinstance(p, (str, os.PathLike)):
            raise TypeError(f"a path must be a str or os.PathLike, not {type(p).__name__}")
        out.append(os.fspath(p))
    return out


def _device(device: Union[str, int, torch.device]) -> torch.device:
    if isinstance(device, int):
        return torch.device("cuda", device)
    d = torch.device(device)
    if d.type == "cuda" and d.index is None:
        d = torch.device("cuda", torch.cuda.current_device())
    if d.type not in ("cpu", "cuda"):
        raise ValueError(f"device {device!r}: hipfile_torch loads into 'cpu' or 'cuda' devices")
    return d


def _runtime_for(device: torch.device) -> None:
    """For GPU memory, has the driver (when it opens) load the runtime of this PyTorch
    build: ROCm's for a ROCm build, CUDA's for a CUDA one. ``HIPFILE_HIP_LIBRARY`` and
    ``HIP_PLATFORM`` still win."""
    if device.type == "cuda":
        _use_platform("amd" if torch.version.hip else "nvidia")


def _selector(filter: Filter) -> Callable[[str], bool]:
    if filter is None:
        return lambda name: True
    if isinstance(filter, str):
        return lambda name: fnmatch.fnmatchcase(name, filter)
    if callable(filter):
        return filter
    names = set(filter)
    return lambda name: name in names


def _torch_dtype(name: str, tensor: str) -> torch.dtype:
    dtype = _TYPES.get(name)
    if dtype is None:
        raise CheckpointError(
            f"tensor {tensor!r} has dtype {name}, which this PyTorch ({torch.__version__}) "
            "has no dtype for"
        )
    return dtype


def _bar(done: int, total: int, started: float) -> None:
    elapsed = max(time.perf_counter() - started, 1e-9)
    width = 30
    filled = width * done // total if total else width
    sys.stderr.write(
        f"\rhipfile: [{'#' * filled}{'.' * (width - filled)}] "
        f"{done / 1e9:.2f}/{total / 1e9:.2f} GB {done / elapsed / 1e9:.2f} GB/s"
    )
    sys.stderr.flush()


def _read(
    checkpoint: "_Checkpoint",
    targets: List[Tuple[str, int, int, int, int]],
    device: torch.device,
) -> LoadReport:
    """Reads the targets (name, start, end, address, length) into memory allocated on
    `device`, whose current stream is first synchronised: PyTorch may hand out memory that
    work queued on it still uses. For `safe_open`'s reads, which take no progress."""
    global _last
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()
    _last = LoadReport(**_read_into(checkpoint, targets))
    return _last


def load_file(
    path_or_paths: Union[PathLike, Sequence[PathLike]],
    device: Union[str, int, torch.device] = "cuda:0",
    *,
    filter: Filter = None,
    progress: Progress = False,
    process_group=None,
) -> Dict[str, torch.Tensor]:
    """Loads a safetensors checkpoint: one file, a list of shards, or a
    ``model.safetensors.index.json`` (the shards it names); or the same at URLs:
    ``s3://BUCKET/KEY``, ``http(s)://HOST/PATH``, or ``s3://BUCKET/PREFIX/`` (its index, else
    its ``.safetensors`` objects), read by ranged GETs pinned to each object's ETag, with the
    endpoint and keys from ``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``,
    ``AWS_SECRET_ACCESS_KEY`` and ``AWS_SESSION_TOKEN``. Returns what
    ``safetensors.torch.load_file`` returns for the same files, each tensor in memory that
    PyTorch allocated on ``device`` (``"cuda:N"``, a device number, or ``"cpu"``), read
    there by hipfile.

    ``filter`` keeps some tensors only: a glob pattern (``"model.layers.0.*"``), a
    collection of names, or a function of the name. ``progress=True`` shows a bar with the
    rate on stderr and a summary at the end; a function is called with (bytes done, bytes
    in all). ``last_report()`` then says what the load did.

    With ``process_group`` (a ``torch.distributed`` group; every rank calls with the same
    files and filter), each rank reads about 1/N of the bytes from storage, tensor by
    tensor, and every tensor is then broadcast from the rank that read it with
    ``torch.distributed`` (NCCL or RCCL for GPU tensors, gloo for CPU ones): each rank ends
    with what a single-process load returns. ``last_report()`` counts this rank's reads.

    Every shard's header is validated before anything is allocated: a truncated shard,
    overlapping tensors, an unknown dtype, a shape that disagrees with its bytes, a tensor
    in two shards or a shard an index names that is missing raises ``CheckpointError`` (or
    ``FileNotFoundError``/``OSError``), and nothing is returned.

    Local files are read batch by batch (a shard, or a GiB of one), each batch while the
    next is allocated; every read has ended when ``load_file`` returns or raises.
    """
    dev = _device(device)
    _runtime_for(dev)
    paths = _paths(path_or_paths)
    checkpoint = _Checkpoint(paths)
    remote = any("://" in p for p in paths)
    if dev.type == "cuda" and not remote:
        # Pinned while the tensors are allocated, rather than by the first reads.
        _prepare_staging()
    keep = _selector(filter)
    # Every dtype is known before anything is allocated or read.
    kept = [
        (name, _torch_dtype(dtype, name), shape, shard, end - start)
        for name, dtype, shape, shard, start, end in checkpoint.tensors()
        if keep(name)
    ]
    wanted = [(name, n) for name, _dtype, _shape, _shard, n in kept]
    owners = _owners(wanted, process_group)
    me = _rank(process_group)
    tensors: Dict[str, torch.Tensor] = {}
    reserve = _reserves(dev, sum(n for _name, n in wanted))
    reads = _Reads(
        checkpoint,
        dev,
        progress,
        sum(n for (_name, n), owner in zip(wanted, owners) if owner == me),
        # A cold checkpoint is read from the disk in file order, a batch at a time.
        at_once=1 if checkpoint.cold() else _READS_AT_ONCE,
    )
    try:
        for batch in _batches(kept, owners, whole=remote):
            if reserve:
                _reserve(dev, _reservation([entry[4] for entry, _owner in batch]))
            held = []
            for (name, dtype, shape, _shard, n), owner in batch:
                t = torch.empty(shape, dtype=dtype, device=dev)
                tensors[name] = t
                if n > 0 and owner == me:
                    held.append((t, name))
            if not reads.submit(held):
                break
    except BaseException:
        reads.wait()
        raise
    reads.finish()
    if process_group is not None:
        _share(tensors, wanted, owners, process_group)
    return tensors


# A load into memory is read in batches: one is read while the next is allocated, and two
# are read at once (one at a time when the checkpoint is cold), so that one's last requests
# overlap the next one's first. A batch ends at its shard's end or once it holds this many
# bytes.
_BATCH_BYTES = 1 << 30
_READS_AT_ONCE = 2


# PyTorch's caching allocator (CUDA's and ROCm's alike) serves a request above 1 MiB from its
# large pool, rounded up to 512 bytes: from a cached block it splits, when one is free and
# large enough, else from a device allocation of its own. A checkpoint's hundreds of tensors
# made hundreds of device allocations while the reads ran, and a load took 1.2 times as long
# as with one block per batch (docs/decisions/hipfile-torch.md).
_LARGE_POOL_ABOVE = 1 << 20
_ROUNDING = 512
# Set to 1, either turns the caching off (CUDA's name, ROCm's name).
_NO_CACHING = ("PYTORCH_NO_CUDA_MEMORY_CACHING", "PYTORCH_NO_HIP_MEMORY_CACHING")


def _reservation(sizes: Sequence[int]) -> int:
    """The bytes of one block that the caching allocator can cut every tensor of a batch
    from, given their byte sizes: those its large pool serves, each rounded as it rounds
    them; 0 where fewer than two tensors would come from it (no allocation to save)."""
    large = [-(-n // _ROUNDING) * _ROUNDING for n in sizes if n > _LARGE_POOL_ABOVE]
    return sum(large) if len(large) > 1 else 0


def _reserves(device: torch.device, total: int) -> bool:
    """Whether a load of `total` bytes into `device` has PyTorch's allocator take each
    batch's memory at once (`_reserve`): only for GPU memory, with PyTorch's own caching
    allocator, caching on, blocks split whatever their size (a `max_split_size_mb` keeps
    large blocks whole, so that a block reserved would stay unused), and less than `total`
    already free in its cache (which then serves the tensors without new allocations)."""
    if device.type != "cuda":
        return False
    if any(os.environ.get(v) == "1" for v in _NO_CACHING):
        return False
    backend = getattr(torch.cuda.memory, "get_allocator_backend", lambda: "native")()
    if backend != "native":
        return False
    stats = torch.cuda.memory_stats(device)
    if stats.get("max_split_size", -1) > 0:
        return False
    cached = stats.get("reserved_bytes.all.current", 0) - stats.get("allocated_bytes.all.current", 0)
    return cached < total


def _reserve(device: torch.device, nbytes: int) -> None:
    """Has the caching allocator take `nbytes` of `device` memory as one block and keep it
    cached, for the batch's tensors to be cut from: the tensors still own their memory one
    by one, and `torch.cuda.empty_cache()` returns the block once they are all freed. Where
    the device has no such block free, the tensors are allocated one by one as before."""
    if nbytes == 0:
        return
    try:
        torch.empty(nbytes, dtype=torch.uint8, device=device)
    except torch.cuda.OutOfMemoryError:
        pass


def _batches(kept, owners, whole: bool):
    """`kept` (name, dtype, shape, shard, bytes) with each one's owner, cut into batches of
    one shard and at most `_BATCH_BYTES` (a tensor larger than that is a batch of its own);
    one batch when `whole`."""
    batch: list = []
    size = 0
    for entry, owner in zip(kept, owners):
        shard, n = entry[3], entry[4]
        if batch and not whole and (batch[-1][0][3] != shard or size + n > _BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append((entry, owner))
        size += n
    if batch:
        yield batch


class _Reads:
    """The reads of one load: each batch read on a thread of its own pool, at most
    `at_once` at a time, its tensors held by the read until it ends (so that no
    memory being written is freed, whatever the caller does meanwhile). `finish` waits for
    every read and raises the first error; the report is the sum of the batches'."""

    def __init__(
        self,
        checkpoint: "_Checkpoint",
        device: torch.device,
        progress: Progress,
        total: int,
        at_once: int = _READS_AT_ONCE,
    ):
        if progress not in (False, None, True) and not callable(progress):
            raise TypeError("progress must be a bool or a callable taking (done, total)")
        self._checkpoint = checkpoint
        self._device = device
        self._pool = ThreadPoolExecutor(max_workers=at_once, thread_name_prefix="hipfile-torch-read")
        self._futures: list = []
        self._started: Optional[float] = None
        self._done: Dict[int, int] = {}
        self._total = total
        self._last_call = 0.0
        self._user = progress

    def _progress(self, batch: int):
        def each(done: int, _total: int) -> None:
            self._done[batch] = done
            done_all = sum(self._done.values())
            now = time.perf_counter()
            # At most ten times a second, and once at the end, as one read reports.
            if done_all < self._total and now - self._last_call < 0.1:
                return
            self._last_call = now
            if self._user is True:
                _bar(done_all, self._total, self._started or now)
            else:
                self._user(done_all, self._total)

        return each

    def submit(self, held: List[Tuple[torch.Tensor, str]]) -> bool:
        """Starts reading the tensors `held` (tensor, name) into their memory; False once a
        read has failed (nothing more is worth reading)."""
        if any(f.done() and f.exception() is not None for f in self._futures):
            return False
        if self._device.type == "cuda":
            # Memory PyTorch hands out may still be used by work queued on its stream.
            torch.cuda.current_stream(self._device).synchronize()
        if not held:
            return True
        if self._started is None:
            self._started = time.perf_counter()
        targets = [(name, 0, _nbytes(t), t.data_ptr(), _nbytes(t)) for t, name in held]
        callback = None if self._user in (False, None) else self._progress(len(self._futures))
        checkpoint, device = self._checkpoint, self._device

        def read(held=held):
            # `held` keeps the tensors alive until their read has ended. The copies that
            # run on this thread go to the tensors' device as its current one.
            if device.type == "cuda":
                torch.cuda.set_device(device)
            return _read_into(checkpoint, targets, progress=callback)

        self._futures.append(self._pool.submit(read))
        return True

    def wait(self) -> None:
        """Waits for every read, whatever their outcome."""
        self._pool.shutdown(wait=True)

    def finish(self) -> LoadReport:
        global _last
        self.wait()
        for f in self._futures:
            if f.exception() is not None:
                raise f.exception()
        parts = [f.result() for f in self._futures]
        seconds = time.perf_counter() - self._started if self._started is not None else 0.0
        _last = LoadReport(
            bytes=sum(p["bytes"] for p in parts),
            fastpath_bytes=sum(p["fastpath_bytes"] for p in parts),
            fallback_bytes=sum(p["fallback_bytes"] for p in parts),
            remote_bytes=sum(p["remote_bytes"] for p in parts),
            requests=sum(p["requests"] for p in parts),
            cold=any(p["cold"] for p in parts),
            seconds=seconds,
        )
        if self._user is True:
            sys.stderr.write(
                f"\nhipfile: {_last.bytes / 1e9:.2f} GB in {_last.seconds:.2f} s "
                f"({_last.gbps:.2f} GB/s): fastpath {_last.fastpath_bytes} bytes, fallback "
                f"{_last.fallback_bytes} bytes, remote {_last.remote_bytes} bytes, "
                f"{_last.requests} requests\n"
            )
        return _last


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _rank(group) -> int:
    if group is None:
        return 0
    import torch.distributed as dist

    return dist.get_rank(group)


def _owners(wanted: List[Tuple[str, int]], group) -> List[int]:
    """The rank (in `group`) that reads each tensor: the largest first, each to the rank
    with the fewest bytes so far (ties to the lowest rank), the same on every rank."""
    if group is None:
        return [0] * len(wanted)
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError("process_group is given but torch.distributed is not initialised")
    size = dist.get_world_size(group)
    load = [0] * size
    owners = [0] * len(wanted)
    for i in sorted(range(len(wanted)), key=lambda i: (-wanted[i][1], wanted[i][0])):
        r = min(range(size), key=lambda r: (load[r], r))
        owners[i] = r
        load[r] += wanted[i][1]
    return owners


def _share(tensors, wanted, owners, group) -> None:
    """Broadcasts each tensor from the rank that read it, as bytes (every backend moves
    uint8; views of the tensors' own memory, so nothing is copied on the way)."""
    import torch.distributed as dist

    for (name, n), owner in zip(wanted, owners):
        if n == 0:
            continue
        t = tensors[name]
        as_bytes = t.reshape(-1).view(torch.uint8)
        dist.broadcast(as_bytes, src=dist.get_global_rank(group, owner), group=group)


class _Slice:
    """A tensor of an open checkpoint, read only when indexed (``safe_open.get_slice``)."""

    def __init__(self, owner: "safe_open", name: str):
        self._owner = owner
        self._name = name
        self._info = owner._info(name)

    def get_shape(self) -> List[int]:
        return list(self._info[2])

    def get_dtype(self) -> str:
        return self._info[1]

    def __getitem__(self, index) -> torch.Tensor:
        return self._owner._read_slice(self._name, index)


class safe_open:
    """Like ``safetensors.safe_open``, for one file, a list of shards or an index:
    ``keys()``, ``metadata()``, ``get_tensor(name)`` and ``get_slice(name)[...]``. A slice
    reads only the rows (along the first dimension) that it needs, so a tensor-parallel
    rank reads its own part of a tensor; slicing along a later dimension reads whole rows
    and slices them on the device."""

    def __init__(
        self,
        paths: Union[PathLike, Sequence[PathLike]],
        framework: str = "pt",
        device: Union[str, int, torch.device] = "cpu",
    ):
        if framework not in ("pt", "torch", "pytorch"):
            raise ValueError(f"framework {framework!r}: hipfile_torch makes PyTorch tensors ('pt')")
        self._device = _device(device)
        _runtime_for(self._device)
        self._checkpoint = _Checkpoint(_paths(paths))
        self._tensors = {t[0]: t for t in self._checkpoint.tensors()}

    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *exc) -> None:
        self._checkpoint = None

    def _open(self) -> "_Checkpoint":
        if self._checkpoint is None:
            raise RuntimeError("the checkpoint is closed: use it inside its `with` block")
        return self._checkpoint

    def _info(self, name: str):
        self._open()
        try:
            return self._tensors[name]
        except KeyError:
            raise KeyError(f"the checkpoint has no tensor {name!r}") from None

    def keys(self) -> List[str]:
        """The tensors' names, sorted."""
        self._open()
        return sorted(self._tensors)

    def offset_keys(self) -> List[str]:
        """The tensors' names in file order, shard by shard."""
        self._open()
        return list(self._tensors)

    def metadata(self) -> Optional[Dict[str, str]]:
        """The first shard's ``__metadata__``, or None."""
        return self._open().metadata(0)

    def get_tensor(self, name: str) -> torch.Tensor:
        """The tensor ``name``, read into memory allocated on the device."""
        _, dtype, shape, _, start, end = self._info(name)
        t = torch.empty(shape, dtype=_torch_dtype(dtype, name), device=self._device)
        if end > start:
            _read(self._open(), [(name, 0, end - start, t.data_ptr(), end - start)], self._device)
        return t

    def get_slice(self, name: str) -> _Slice:
        """The tensor ``name`` as a slice to index: ``get_slice(name)[a:b]`` reads rows
        ``a..b`` only."""
        return _Slice(self, name)

    def _read_slice(self, name: str, index) -> torch.Tensor:
        _, dtype, shape, _, start, end = self._info(name)
        torch_dtype = _torch_dtype(dtype, name)
        if not isinstance(index, tuple):
            index = (index,)
        if not shape:
            return self.get_tensor(name)[index]
        first, rest = index[0], index[1:]
        rows = shape[0]
        row_bytes = (end - start) // rows if rows else 0
        if isinstance(first, int):
            i = first + rows if first < 0 else first
            if not 0 <= i < rows:
                raise IndexError(f"index {first} is out of range for dimension 0 of size {rows}")
            lo, hi, local = i, i + 1, 0
        elif isinstance(first, slice):
            if first.step is not None and first.step <= 0:
                raise ValueError("a slice's step must be positive (PyTorch tensors have no negative strides)")
            picked = range(*first.indices(rows))
            if len(picked) == 0:
                lo = hi = 0
                local = slice(0, 0)
            else:
                lo, hi = picked[0], picked[-1] + 1
                local = slice(0, hi - lo, picked.step)
        elif first is Ellipsis:
            return self.get_tensor(name)[index]
        else:
            raise TypeError(f"cannot index dimension 0 with {type(first).__name__}")
        block = torch.empty([hi - lo, *shape[1:]], dtype=torch_dtype, device=self._device)
        if hi > lo and row_bytes:
            nbytes = (hi - lo) * row_bytes
            _read(
                self._open(),
                [(name, lo * row_bytes, hi * row_bytes, block.data_ptr(), nbytes)],
                self._device,
            )
        out = block[(local, *rest)]
        # A view of part of the block would keep all of it alive: give back its own copy.
        return out if out.numel() == block.numel() and out.is_contiguous() else out.clone(memory_format=torch.contiguous_format)


def _check_for_save(tensors: Mapping[str, torch.Tensor]) -> None:
    """What safetensors.torch.save_file refuses, refused the same way."""
    if not isinstance(tensors, dict):
        raise ValueError(f"Expected a dict of [str, torch.Tensor] but received {type(tensors)}")
    by_storage: Dict[tuple, List[Tuple[int, int, str]]] = {}
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"Key `{name}` is invalid, expected torch.Tensor but received {type(t)}")
        if t.layout != torch.strided:
            raise ValueError(f"You are trying to save a sparse tensor: `{name}`; make it dense first")
        if not t.is_contiguous():
            raise ValueError(
                f"You are trying to save a non contiguous tensor: `{name}`; call `.contiguous()` first"
            )
        if t.dtype not in _NAMES:
            raise ValueError(f"tensor `{name}` has dtype {t.dtype}, which safetensors cannot store")
        if t.device.type not in ("cpu", "cuda"):
            raise ValueError(f"tensor `{name}` is on {t.device}: hipfile_torch saves cpu and cuda tensors")
        storage = t.untyped_storage()
        if storage.data_ptr() and storage.nbytes():
            nbytes = t.numel() * t.element_size()
            by_storage.setdefault((t.device, storage.data_ptr()), []).append(
                (t.data_ptr(), t.data_ptr() + max(nbytes, 1), name)
            )
    shared = []
    for areas in by_storage.values():
        areas.sort()
        for (s0, e0, n0), (s1, e1, n1) in zip(areas, areas[1:]):
            if s1 < e0:
                shared.append({n0, n1})
    if shared:
        raise RuntimeError(
            f"Some tensors share memory, this will lead to duplicate memory on disk: {shared}; "
            "save each storage once (safetensors' save_model) or clone them"
        )


def save_file(
    tensors: Dict[str, torch.Tensor],
    filename: PathLike,
    metadata: Optional[Dict[str, str]] = None,
) -> None:
    """Writes ``tensors`` (cpu or cuda, contiguous, dense) to ``filename`` as
    ``safetensors.torch.save_file`` writes them, byte for byte, through hipfile, and makes
    the file durable before returning. The file is written under a temporary name beside
    ``filename`` and renamed over it, so a failure leaves what was at ``filename`` as it
    was."""
    _check_for_save(tensors)
    if metadata is not None and not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise ValueError("metadata must map str to str")
    for device in {t.device for t in tensors.values() if t.device.type == "cuda"}:
        _runtime_for(device)
        torch.cuda.current_stream(device).synchronize()
    described = [
        (name, _NAMES[t.dtype], list(t.shape), t.data_ptr(), t.numel() * t.element_size())
        for name, t in tensors.items()
    ]
    _save(os.fspath(filename), described, metadata)
