"""hipfile_torch against safetensors.torch, with device="cpu" (on the emulated runtime in
CI: HIPFILE_HIP_LIBRARY names it). Run: python -m unittest discover -s tests."""

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

import torch
import safetensors.torch as st

import hipfile_torch as ht


def tensors():
    g = torch.Generator().manual_seed(7)
    return {
        "embed.weight": torch.randn(300, 257, generator=g),
        "layer.0.bf16": torch.randn(33, 17, generator=g).to(torch.bfloat16),
        "layer.0.f16": torch.randn(5, 7, 3, generator=g).to(torch.float16),
        "layer.1.f64": torch.randn(11, generator=g).to(torch.float64),
        "layer.1.i64": torch.arange(-50, 50, dtype=torch.int64),
        "layer.1.i8": torch.randint(-128, 127, (13, 3), generator=g, dtype=torch.int8),
        "layer.1.u8": torch.randint(0, 255, (4097,), generator=g, dtype=torch.uint8),
        "mask": torch.rand(9, 9, generator=g) > 0.5,
        "scalar": torch.tensor(3.5),
        "empty": torch.empty(0, 4),
    }


def raw_file(path, header, data=b""):
    """A safetensors file from a header dict and data bytes, unchecked (for bad input)."""
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


class Staging(unittest.TestCase):
    def test_staging_is_pinned_ahead_only_where_loads_are_staged(self):
        code = "from hipfile_torch import _native; print(_native.prepare_staging())"

        def started(**env):
            r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env),
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            return r.stdout.strip()

        # The emulated runtime reads files into its memory itself (AMD file I/O): no staging.
        self.assertEqual(started(HIPFILE_FORCE_COMPAT_MODE="false"), "False")
        self.assertEqual(started(HIPFILE_FORCE_COMPAT_MODE="true"), "True")


class Platform(unittest.TestCase):
    """GPU loads open the runtime of PyTorch's own build (`_native.use_platform`), unless the
    environment names one."""

    def open_with(self, platform, **env):
        code = (
            "import sys\n"
            "from hipfile_torch import _native\n"
            f"_native.use_platform({platform!r})\n"
            "try:\n"
            "    _native.prepare_staging()\n"
            "    print('opened')\n"
            "except RuntimeError as e:\n"
            "    print(e)\n"
        )
        clean = {k: v for k, v in os.environ.items() if k not in ("HIPFILE_HIP_LIBRARY", "HIP_PLATFORM")}
        r = subprocess.run([sys.executable, "-c", code], env=dict(clean, **env),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_the_platform_chosen_is_the_only_one_tried(self):
        # No GPU here: each choice fails, on its own runtime only.
        nvidia = self.open_with("nvidia")
        self.assertIn("CUDA", nvidia)
        self.assertNotIn("HIP runtime", nvidia)
        amd = self.open_with("amd")
        self.assertIn("HIP runtime", amd)
        self.assertNotIn("CUDA runtime", amd)

    def test_the_environment_wins(self):
        emulated = os.environ["HIPFILE_HIP_LIBRARY"]
        self.assertEqual(self.open_with("nvidia", HIPFILE_HIP_LIBRARY=emulated).strip(), "opened")
        self.assertIn("HIP runtime", self.open_with("nvidia", HIP_PLATFORM="amd"))

    def test_an_unknown_platform_is_refused(self):
        from hipfile_torch import _native

        with self.assertRaisesRegex(ValueError, "amd"):
            _native.use_platform("intel")


class Base(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="hipfile-torch-")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def path(self, name):
        return os.path.join(self.dir, name)

    def assertSameTensors(self, got, want):
        self.assertEqual(sorted(got), sorted(want))
        for k in want:
            self.assertEqual(got[k].dtype, want[k].dtype, k)
            self.assertEqual(got[k].shape, want[k].shape, k)
            self.assertTrue(torch.equal(got[k], want[k]), k)


class LoadFile(Base):
    def test_one_file_equals_safetensors(self):
        p = self.path("model.safetensors")
        st.save_file(tensors(), p, metadata={"format": "pt"})
        got = ht.load_file(p, device="cpu")
        self.assertSameTensors(got, st.load_file(p))
        report = ht.last_report()
        want = sum(t.numel() * t.element_size() for t in tensors().values())
        self.assertEqual(report.bytes, want)
        self.assertEqual(report.fastpath_bytes + report.fallback_bytes, want)

    def test_each_tensor_owns_its_memory(self):
        p = self.path("model.safetensors")
        st.save_file(tensors(), p)
        got = ht.load_file(p, device="cpu")
        pointers = [t.untyped_storage().data_ptr() for t in got.values() if t.numel()]
        self.assertEqual(len(pointers), len(set(pointers)))

    def test_shards_and_index_equal_safetensors(self):
        all_ = tensors()
        names = sorted(all_)
        halves = [names[: len(names) // 2], names[len(names) // 2 :]]
        weight_map = {}
        for i, half in enumerate(halves):
            shard = f"model-0000{i + 1}-of-00002.safetensors"
            st.save_file({n: all_[n] for n in half}, self.path(shard))
            weight_map.update({n: shard for n in half})
        index = self.path("model.safetensors.index.json")
        with open(index, "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
        want = {}
        for i in range(2):
            want.update(st.load_file(self.path(f"model-0000{i + 1}-of-00002.safetensors")))
        self.assertSameTensors(ht.load_file(index, device="cpu"), want)
        shards = [self.path(f"model-0000{i + 1}-of-00002.safetensors") for i in range(2)]
        self.assertSameTensors(ht.load_file(shards, device="cpu"), want)

    def test_filter_by_glob_names_and_function(self):
        p = self.path("model.safetensors")
        st.save_file(tensors(), p)
        self.assertEqual(sorted(ht.load_file(p, "cpu", filter="layer.1.*")), ["layer.1.f64", "layer.1.i64", "layer.1.i8", "layer.1.u8"])
        self.assertEqual(sorted(ht.load_file(p, "cpu", filter=["mask", "scalar"])), ["mask", "scalar"])
        self.assertEqual(list(ht.load_file(p, "cpu", filter=lambda n: n.endswith("bf16"))), ["layer.0.bf16"])

    def test_progress_is_called_and_ends_at_the_total(self):
        p = self.path("model.safetensors")
        st.save_file(tensors(), p)
        calls = []
        ht.load_file(p, "cpu", progress=lambda done, total: calls.append((done, total)))
        self.assertTrue(calls)
        self.assertEqual(calls[-1][0], calls[-1][1])
        self.assertEqual(calls[-1][1], ht.last_report().bytes)

    def test_an_exception_in_the_progress_function_is_raised(self):
        p = self.path("model.safetensors")
        st.save_file(tensors(), p)

        def boom(done, total):
            raise KeyError("from the callback")

        with self.assertRaises(KeyError):
            ht.load_file(p, "cpu", progress=boom)


class Batches(Base):
    """load_file reads a batch of tensors while it allocates the next; every read has ended
    when it returns or raises."""

    def two_shards(self):
        all_ = tensors()
        names = sorted(all_)
        paths = []
        for i, half in enumerate([names[: len(names) // 2], names[len(names) // 2 :]]):
            paths.append(self.path(f"model-0000{i + 1}-of-00002.safetensors"))
            st.save_file({n: all_[n] for n in half}, paths[-1])
        want = {}
        for p in paths:
            want.update(st.load_file(p))
        return paths, want

    def test_the_first_read_starts_before_the_last_tensor_is_allocated(self):
        from unittest import mock
        from hipfile_torch import _api

        paths, want = self.two_shards()
        allocated = []
        seen_by_reads = []
        real_empty, real_read = torch.empty, _api._read_into

        def empty(*a, **k):
            allocated.append(1)
            return real_empty(*a, **k)

        def read(*a, **k):
            seen_by_reads.append(len(allocated))
            return real_read(*a, **k)

        with mock.patch.object(torch, "empty", empty), mock.patch.object(_api, "_read_into", read):
            got = ht.load_file(paths, device="cpu")
        self.assertSameTensors(got, want)
        self.assertEqual(len(seen_by_reads), 2, "one read per shard")
        self.assertLess(seen_by_reads[0], len(want), "the first shard is read before the second is allocated")

    def test_batches_of_one_shard_read_at_once_equal_safetensors(self):
        from unittest import mock
        from hipfile_torch import _api

        p = self.path("model.safetensors")
        st.save_file(tensors(), p)
        with mock.patch.object(_api, "_BATCH_BYTES", 4096):
            batches = list(_api._batches([(n, None, (), 0, 3000) for n in "abc"], [0, 0, 0], whole=False))
            self.assertEqual([len(b) for b in batches], [1, 1, 1])
            self.assertEqual(len(list(_api._batches([(n, None, (), 0, 1000) for n in "abc"], [0, 0, 0], whole=False))), 1)
            self.assertEqual(len(list(_api._batches([(n, None, (), i, 10) for i, n in enumerate("ab")], [0, 0], whole=False))), 2)
            self.assertEqual(len(list(_api._batches([(n, None, (), i, 10) for i, n in enumerate("ab")], [0, 0], whole=True))), 1)
            # Several batches of the one shard, two read at a time, each registering the file.
            for _ in range(5):
                self.assertSameTensors(ht.load_file(p, device="cpu"), st.load_file(p))
                self.assertEqual(ht.last_report().bytes, sum(t.numel() * t.element_size() for t in tensors().values()))

    def test_a_failed_read_raises_after_every_read_has_ended(self):
        from unittest import mock
        from hipfile_torch import _api

        paths, _ = self.two_shards()
        ended = []
        real_read = _api._read_into
        calls = []

        def read(*a, **k):
            calls.append(1)
            if len(calls) == 1:
                time.sleep(0.3)
                out = real_read(*a, **k)
                ended.append(1)
                return out
            raise OSError("injected: the second shard cannot be read")

        with mock.patch.object(_api, "_read_into", read):
            with self.assertRaisesRegex(OSError, "injected"):
                ht.load_file(paths, device="cpu")
            self.assertEqual(ended, [1], "load_file raised while a read was still running")

    def test_a_dtype_torch_lacks_is_refused_before_anything_is_read(self):
        from unittest import mock
        from hipfile_torch import _api

        paths, _ = self.two_shards()
        reads = []
        types = {k: v for k, v in _api._TYPES.items() if k != "U8"}
        with mock.patch.object(_api, "_TYPES", types), mock.patch.object(
            _api, "_read_into", lambda *a, **k: reads.append(1)
        ):
            with self.assertRaisesRegex(ht.CheckpointError, "U8"):
                ht.load_file(paths, device="cpu")
        self.assertEqual(reads, [])

    def test_a_cold_checkpoint_is_read_a_batch_at_a_time(self):
        import threading
        from unittest import mock
        from hipfile_torch import _api, _native

        paths, mapped = self.two_shards()
        # safetensors' tensors map the files: dropped, so that the pages can go.
        del mapped
        want = tensors()
        for p in paths:
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
        cold = _native.Checkpoint(paths).cold()
        if not cold:
            self.skipTest(f"the page cache kept the files here (cold() is {cold})")
        running, most = [0], [0]
        lock = threading.Lock()
        real_read = _api._read_into

        def read(*a, **k):
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            try:
                time.sleep(0.2)
                return real_read(*a, **k)
            finally:
                with lock:
                    running[0] -= 1

        with mock.patch.object(_api, "_read_into", read):
            got = ht.load_file(paths, device="cpu")
        self.assertSameTensors(got, want)
        self.assertEqual(most[0], 1, "two batches of a cold checkpoint were read at once")

    def test_threads_reading_one_open_checkpoint(self):
        import threading

        p = self.path("model.safetensors")
        want = tensors()
        st.save_file(want, p)
        errors = []
        with ht.safe_open(p, device="cpu") as f:

            def each():
                try:
                    for _ in range(20):
                        for k in want:
                            if not torch.equal(f.get_tensor(k), want[k]):
                                errors.append(f"{k} differs")
                except Exception as e:  # noqa: BLE001 - reported below
                    errors.append(repr(e))

            threads = [threading.Thread(target=each) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        self.assertEqual(errors, [])


class Reservation(Base):
    """Each batch's GPU memory taken from PyTorch's caching allocator as one block, for the
    tensors to be cut from, rather than a device allocation per tensor."""

    def test_the_block_holds_the_large_pools_tensors_rounded_as_pytorch_rounds_them(self):
        from hipfile_torch import _api

        mib = 1 << 20
        # 100 bytes and 1 MiB come from the small pool; 1 MiB + 1 and 3,000,000 bytes from
        # the large one, each rounded up to 512.
        self.assertEqual(_api._reservation([0, 100, mib, mib + 1, 3_000_000]), (mib + 512) + 3_000_320)
        # One large tensor is one allocation, block or not.
        self.assertEqual(_api._reservation([100, 5 * mib]), 0)
        self.assertEqual(_api._reservation([]), 0)

    def test_only_gpu_loads_through_a_caching_allocator_that_splits_blocks_reserve(self):
        from unittest import mock
        from hipfile_torch import _api

        unlimited = {"max_split_size": -1, "reserved_bytes.all.current": 0, "allocated_bytes.all.current": 0}

        def reserves(stats=unlimited, backend="native", env=None, device=torch.device("cuda", 0)):
            with mock.patch.object(torch.cuda, "memory_stats", lambda d=None: stats), mock.patch.object(
                torch.cuda.memory, "get_allocator_backend", lambda: backend
            ), mock.patch.dict(os.environ):
                for v in _api._NO_CACHING:
                    os.environ.pop(v, None)
                os.environ.update(env or {})
                return _api._reserves(device, 1 << 30)

        self.assertTrue(reserves())
        # A device not used yet has no statistics: its cache is empty.
        self.assertTrue(reserves(stats={}))
        self.assertFalse(reserves(device=torch.device("cpu")))
        self.assertFalse(reserves(backend="cudaMallocAsync"))
        self.assertFalse(reserves(env={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}))
        self.assertFalse(reserves(env={"PYTORCH_NO_HIP_MEMORY_CACHING": "1"}))
        # max_split_size_mb: a block above it is never split for smaller tensors.
        self.assertFalse(reserves(stats=dict(unlimited, max_split_size=512 << 20)))
        # The cache already holds the load's bytes free: it serves the tensors.
        cached = {"reserved_bytes.all.current": 3 << 30, "allocated_bytes.all.current": 1 << 30}
        self.assertFalse(reserves(stats=dict(unlimited, **cached)))

    def test_a_load_reserves_each_batch_before_allocating_it(self):
        from unittest import mock
        from hipfile_torch import _api

        g = torch.Generator().manual_seed(3)
        p = self.path("model.safetensors")
        st.save_file({n: torch.randn(rows, 1000, generator=g) for n, rows in
                      (("a", 300), ("b", 400), ("c", 1), ("d", 500))}, p)
        events = []
        real_empty = torch.empty

        def empty(*a, **k):
            events.append("tensor")
            return real_empty(*a, **k)

        with mock.patch.object(_api, "_reserves", lambda device, total: True), mock.patch.object(
            _api, "_reserve", lambda device, n: events.append(n)
        ), mock.patch.object(_api, "_BATCH_BYTES", 3 << 20), mock.patch.object(torch, "empty", empty):
            got = ht.load_file(p, device="cpu")
        self.assertSameTensors(got, st.load_file(p))
        # a, b and c (1.2 MB, 1.6 MB, 4 KB) then d (2 MB) alone: a's and b's bytes, rounded
        # to 512, are reserved before the first batch is allocated; d alone needs no block.
        self.assertEqual(events, [1_200_128 + 1_600_000, "tensor", "tensor", "tensor", 0, "tensor"])


class BadInput(Base):
    def assertRefused(self, paths, kind, words):
        with self.assertRaises(kind) as caught:
            ht.load_file(paths, device="cpu")
        text = str(caught.exception)
        for w in words:
            self.assertIn(w, text)

    def test_truncated_shard(self):
        p = self.path("model.safetensors")
        st.save_file(tensors(), p)
        size = os.path.getsize(p)
        with open(p, "r+b") as f:
            f.truncate(size - 100)
        self.assertRefused(p, ht.CheckpointError, ["model.safetensors", "truncated"])

    def test_overlapping_tensors(self):
        p = self.path("overlap.safetensors")
        raw_file(p, {
            "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
            "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]},
        }, bytes(24))
        self.assertRefused(p, ht.CheckpointError, ["overlap.safetensors"])

    def test_unknown_dtype(self):
        p = self.path("dtype.safetensors")
        raw_file(p, {"a": {"dtype": "F33", "shape": [4], "data_offsets": [0, 16]}}, bytes(16))
        self.assertRefused(p, ht.CheckpointError, ["dtype.safetensors"])

    def test_shape_disagreeing_with_its_bytes(self):
        p = self.path("shape.safetensors")
        raw_file(p, {"a": {"dtype": "F32", "shape": [5], "data_offsets": [0, 16]}}, bytes(16))
        self.assertRefused(p, ht.CheckpointError, ["shape.safetensors"])

    def test_missing_shard_named_by_the_index(self):
        st.save_file({"a": torch.ones(3)}, self.path("one.safetensors"))
        index = self.path("model.safetensors.index.json")
        with open(index, "w") as f:
            json.dump({"weight_map": {"a": "one.safetensors", "b": "two.safetensors"}}, f)
        self.assertRefused(index, FileNotFoundError, ["two.safetensors", "index"])

    def test_tensor_in_two_shards(self):
        st.save_file({"a": torch.ones(3)}, self.path("one.safetensors"))
        st.save_file({"a": torch.zeros(3)}, self.path("two.safetensors"))
        self.assertRefused([self.path("one.safetensors"), self.path("two.safetensors")], ht.CheckpointError, ['"a"'])

    def test_no_paths_and_not_a_file(self):
        with self.assertRaises(ValueError):
            ht.load_file([], device="cpu")
        self.assertRefused(self.path("absent.safetensors"), FileNotFoundError, ["absent.safetensors"])
        self.assertRefused(self.dir, ht.CheckpointError, ["directory"])


class SafeOpen(Base):
    def test_keys_metadata_tensors_and_slices(self):
        p = self.path("model.safetensors")
        want = tensors()
        st.save_file(want, p, metadata={"format": "pt", "note": "x"})
        with ht.safe_open(p, framework="pt", device="cpu") as f, st.safe_open(p, framework="pt") as ref:
            self.assertEqual(f.keys(), sorted(ref.keys()))
            self.assertEqual(f.metadata(), ref.metadata())
            for k in ref.keys():
                self.assertTrue(torch.equal(f.get_tensor(k), ref.get_tensor(k)), k)
            s = f.get_slice("embed.weight")
            self.assertEqual(s.get_shape(), [300, 257])
            self.assertEqual(s.get_dtype(), "F32")
            e = want["embed.weight"]
            for index in [slice(10, 20), slice(290, None), slice(None, None, 7), 5, -1,
                          (slice(3, 9), slice(100, 120)), (slice(None), 4), slice(400, 500)]:
                got = s[index]
                self.assertTrue(torch.equal(got, e[index]), index)
                self.assertTrue(got.is_contiguous())
            with self.assertRaises(IndexError):
                s[300]
            with self.assertRaises(ValueError):
                s[::-1]
        with self.assertRaises(RuntimeError):
            f.get_tensor("mask")

    def test_a_slice_reads_only_its_rows(self):
        p = self.path("model.safetensors")
        st.save_file(tensors(), p)
        with ht.safe_open(p, device="cpu") as f:
            f.get_slice("embed.weight")[100:110]
            self.assertEqual(ht.last_report().bytes, 10 * 257 * 4)


class SaveFile(Base):
    def test_byte_identical_to_safetensors(self):
        for metadata in (None, {"format": "pt"}):
            a, b = self.path("ours.safetensors"), self.path("theirs.safetensors")
            ht.save_file(tensors(), a, metadata=metadata)
            st.save_file(tensors(), b, metadata=metadata)
            with open(a, "rb") as x, open(b, "rb") as y:
                self.assertEqual(x.read(), y.read())
            self.assertFalse([n for n in os.listdir(self.dir) if n.endswith(".tmp")])

    def test_several_metadata_keys_give_the_same_header(self):
        # safetensors writes __metadata__ in a hash map's order, which changes from one
        # process to the next: the same header, not the same bytes.
        metadata = {"format": "pt", "z": "last", "a": "first", "q": "1"}
        a, b = self.path("ours.safetensors"), self.path("theirs.safetensors")
        ht.save_file(tensors(), a, metadata=metadata)
        st.save_file(tensors(), b, metadata=metadata)

        def parts(path):
            with open(path, "rb") as f:
                data = f.read()
            n = struct.unpack("<Q", data[:8])[0]
            return n, json.loads(data[8 : 8 + n]), data[8 + n :]

        self.assertEqual(parts(a), parts(b))

    def test_refuses_what_safetensors_refuses(self):
        p = self.path("x.safetensors")
        with self.assertRaises(ValueError):
            ht.save_file({"t": torch.ones(4, 4).t()}, p)
        base = torch.ones(10)
        with self.assertRaises(RuntimeError):
            ht.save_file({"a": base, "b": base[2:5]}, p)
        self.assertFalse(os.path.exists(p))

    def test_a_failed_save_leaves_the_old_file(self):
        p = self.path("x.safetensors")
        st.save_file({"a": torch.ones(3)}, p)
        with open(p, "rb") as f:
            before = f.read()
        with self.assertRaises(ValueError):
            ht.save_file({"a": torch.ones(3), "b": "not a tensor"}, p)
        with self.assertRaises(OSError):
            ht.save_file({"a": torch.ones(3)}, self.path("no/such/dir/x.safetensors"))
        with open(p, "rb") as f:
            self.assertEqual(f.read(), before)

    def test_round_trip(self):
        p = self.path("x.safetensors")
        ht.save_file(tensors(), p)
        self.assertSameTensors(ht.load_file(p, device="cpu"), tensors())


# What both ranks' scripts start with: the group, safetensors' own load of every shard the
# index names, and the comparison with it.
RANK_PRELUDE = r"""
import json, os, sys, torch, torch.distributed as dist
import safetensors.torch as st
import hipfile_torch as ht
dist.init_process_group("gloo", rank=int(sys.argv[1]), world_size=2)
index = sys.argv[2]


def reference():
    want = {}
    for shard in sorted({v for v in json.load(open(index))["weight_map"].values()}):
        want.update(st.load_file(os.path.join(os.path.dirname(index), shard)))
    return want


def same(got, want):
    return sorted(got) == sorted(want) and all(
        got[k].dtype == want[k].dtype and got[k].shape == want[k].shape
        and torch.equal(got[k], want[k]) for k in want)
"""

RANK = RANK_PRELUDE + r"""
got = ht.load_file(index, device="cpu", process_group=dist.group.WORLD)
print(json.dumps({"same": same(got, reference()), "read": ht.last_report().bytes}))
dist.destroy_process_group()
"""

TP_RANK = RANK_PRELUDE + r"""
sharded = set(sys.argv[3:])
tp, rank = dist.get_world_size(), dist.get_rank()
# As the package's README has a tensor-parallel rank do it.
state = ht.load_file(index, device="cpu", filter=lambda name: name not in sharded,
                     process_group=dist.group.WORLD)
shared = ht.last_report().bytes
sliced = 0
with ht.safe_open(index, device="cpu") as f:
    for name in sorted(sharded):
        s = f.get_slice(name)
        rows = s.get_shape()[0] // tp
        state[name] = s[rank * rows:(rank + 1) * rows]
        sliced += ht.last_report().bytes
want = reference()
for name in sharded:
    rows = want[name].shape[0] // tp
    want[name] = want[name][rank * rows:(rank + 1) * rows]
print(json.dumps({"same": same(state, want), "shared": shared, "sliced": sliced}))
dist.destroy_process_group()
"""


class Distributed(Base):
    def index_of(self, all_, parts):
        weight_map = {}
        for i, part in enumerate(parts):
            shard = f"model-0000{i + 1}-of-0000{len(parts)}.safetensors"
            st.save_file({n: all_[n] for n in part}, self.path(shard))
            weight_map.update({n: shard for n in part})
        index = self.path("model.safetensors.index.json")
        with open(index, "w") as f:
            json.dump({"weight_map": weight_map}, f)
        return index

    def ranks(self, script, *args):
        """Runs `script` as two gloo ranks on loopback; their last lines, as JSON."""
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        ranks = [
            subprocess.Popen([sys.executable, "-c", script, str(r), *args], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for r in range(2)
        ]
        results = []
        for p in ranks:
            out, err = p.communicate(timeout=240)
            self.assertEqual(p.returncode, 0, err)
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results

    def test_two_gloo_ranks_each_read_part_and_end_equal(self):
        all_ = tensors()
        names = sorted(all_)
        results = self.ranks(RANK, self.index_of(all_, (names[:4], names[4:])))
        total = sum(t.numel() * t.element_size() for t in all_.values())
        self.assertTrue(all(r["same"] for r in results), results)
        self.assertEqual(sum(r["read"] for r in results), total)
        self.assertTrue(all(0 < r["read"] < total for r in results), results)

    def test_tensor_parallel_ranks_slice_their_rows_and_share_the_rest(self):
        all_ = tensors()
        index = self.index_of(all_, (sorted(all_),))
        sharded = ["embed.weight", "layer.1.i8"]
        results = self.ranks(TP_RANK, index, *sharded)
        self.assertTrue(all(r["same"] for r in results), results)
        nbytes = {n: t.numel() * t.element_size() for n, t in all_.items()}
        # The replicated tensors are read once among the ranks; each rank reads only its
        # own rows of the sharded ones.
        self.assertEqual(sum(r["shared"] for r in results),
                         sum(n for k, n in nbytes.items() if k not in sharded))
        own_rows = sum(nbytes[k] // all_[k].shape[0] * (all_[k].shape[0] // 2) for k in sharded)
        self.assertTrue(all(r["sliced"] == own_rows for r in results), results)


class ObjectStorage(Base):
    """URLs against a real S3-compatible server (s3s-fs, from crates.io) on loopback."""

    KEYS = {"AWS_ACCESS_KEY_ID": "hipfile-test-key", "AWS_SECRET_ACCESS_KEY": "hipfile-test-secret",
            "AWS_REGION": "us-east-1"}

    def setUp(self):
        super().setUp()
        if shutil.which("s3s-fs") is None:
            self.skipTest("s3s-fs is not on PATH (cargo install --locked s3s-fs@0.14.1 --features binary)")
        self.root = os.path.join(self.dir, "s3")
        os.makedirs(os.path.join(self.root, "models"))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.server = subprocess.Popen(
            ["s3s-fs", "--host", "127.0.0.1", "--port", str(port),
             "--access-key", self.KEYS["AWS_ACCESS_KEY_ID"],
             "--secret-key", self.KEYS["AWS_SECRET_ACCESS_KEY"], self.root],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(1000):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.02)
        self.saved = {k: os.environ.get(k) for k in [*self.KEYS, "AWS_ENDPOINT_URL"]}
        os.environ.update(self.KEYS, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")

    def tearDown(self):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self.server.kill()
        self.server.wait()
        super().tearDown()

    def object(self, key):
        path = os.path.join(self.root, "models", key)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def test_a_file_and_a_prefix_equal_safetensors(self):
        want = tensors()
        st.save_file(want, self.object("one.safetensors"))
        got = ht.load_file("s3://models/one.safetensors", device="cpu")
        self.assertSameTensors(got, want)
        report = ht.last_report()
        self.assertEqual(report.remote_bytes, report.bytes)
        self.assertEqual(report.fastpath_bytes + report.fallback_bytes, 0)

        names = sorted(want)
        weight_map = {}
        for i, part in enumerate((names[:5], names[5:])):
            shard = f"model-0000{i + 1}-of-00002.safetensors"
            st.save_file({n: want[n] for n in part}, self.object(f"ck/{shard}"))
            weight_map.update({n: shard for n in part})
        with open(self.object("ck/model.safetensors.index.json"), "w") as f:
            json.dump({"weight_map": weight_map}, f)
        self.assertSameTensors(ht.load_file("s3://models/ck/", device="cpu"), want)
        some = ht.load_file("s3://models/ck/", device="cpu", filter="layer.1.*")
        self.assertEqual(sorted(some), [n for n in names if n.startswith("layer.1.")])

    def test_missing_objects_wrong_keys_and_mixed_paths_raise(self):
        st.save_file(tensors(), self.object("one.safetensors"))
        with self.assertRaises(FileNotFoundError) as e:
            ht.load_file("s3://models/absent.safetensors", device="cpu")
        self.assertIn("s3://models/absent.safetensors", str(e.exception))
        os.environ["AWS_SECRET_ACCESS_KEY"] = "wrong"
        with self.assertRaises(PermissionError):
            ht.load_file("s3://models/one.safetensors", device="cpu")
        with self.assertRaises(ht.CheckpointError):
            ht.load_file(["s3://models/one.safetensors", self.object("one.safetensors")],
                         device="cpu")


if __name__ == "__main__":
    unittest.main()
