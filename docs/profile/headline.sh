#!/bin/bash
# Measures the headline cases of docs/BENCHMARKS.md's current-figures table in one call on
# the GPU machine, each beside the limit of the same run (docs/PERF.md gives the method):
#
#   docs/profile/headline.sh BIN [PART...]
#
# BIN holds a release `hipfile` and `libcufile.so.0`:
#   cargo build --release -p hipfile-cli -p hipfile-c-cufile
#   cp target/release/hipfile BIN/; cp target/release/libcufile.so BIN/libcufile.so.0
# The Python parts need hipfile_torch's wheel (`maturin build --release --strip --locked -m
# crates/python/hipfile-torch/Cargo.toml`) and the peers (kvikio-cu13, instanttensor)
# importable: `pip install --no-deps --target DIR ...whl`, then PYTHONPATH=DIR. Files are
# made under /tmp: the benchmark checkpoint (`hipfile checkpoint --out /tmp/ck`, kept if
# there) and the bench files. PARTs, in the order given (all by default):
#   loads    `hipfile load`, three fresh processes of three loads each
#   limits   bench against its limits: 1 GiB, 64 MiB 8 deep, 4 and 64 KiB random 32 deep
#            (then 2 callers of 16, 32 synchronous callers, batches of 32, 1 and 4 in
#            flight, and small_copies.cu: a 4 KiB staged read's runtime calls, variant by
#            variant),
#            durable writes; the raw staged pipeline (pagecache_dma.cu), loads after it
#   clients  bench 4 MiB at 1, 4 and 16 threads; KvikIO's CuFile.read with the same
#   torch    hipfile_torch beside `hipfile load` and the peer loaders, hot; first loads
#   cold     hipfile_torch, bench and `hipfile load` cold, between two measurements of the
#            disk over the checkpoint's files (disk_read.c); stream-ordered requests
# With BASE=DIR (another build's `hipfile`), every bench and `hipfile load` of the parts
# loads, limits, clients and cold runs with BASE's build right after BIN's, so that two builds
# meet the same state of the machine; a line "-- build: DIR" precedes each one's output.
# Prints a heading per case and one JSON object per measurement. Not run by CI.
set -u
BIN=$(cd "$1" && pwd); shift
PARTS=${*:-loads limits clients torch cold}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
H=$BIN/hipfile
BUILDS=("$BIN")
if [ -n "${BASE:-}" ]; then BUILDS+=("$(cd "$BASE" && pwd)"); fi
# `each bench|load ARGS`: the command with each build in turn, `$BEFORE` run before each.
each() {
    local cmd=$1
    shift
    for d in "${BUILDS[@]}"; do
        ${BEFORE:-:}
        echo "-- build: $d"
        "$d/hipfile" "$cmd" --json "$@"
    done
}
b() { each bench "$@"; }
l() { each load "$@"; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
hot() { cat $CK > /dev/null; }
# The disk's limit over the checkpoint's own files (disk_read.c), each mode from cold.
disk() {
    for m in "direct 4" "direct 16" "buffered 1" "buffered 16"; do drop; /tmp/disk_read $m 16 $CK; done
}
PY=$HERE/crates/python/hipfile-torch/scripts
GPU=$HERE/crates/c/hipfile-c-cufile/tests/gpu
export PYTHONUNBUFFERED=1
cd /tmp || exit 1
[ -d /tmp/ck ] || $H checkpoint --out /tmp/ck > /dev/null || exit 1
CK=$(ls /tmp/ck/*.safetensors)
S=$(echo "$CK" | head -1)
SZ=$(stat -c %s "$S")
for part in $PARTS; do
    case $part in
    loads)
        echo "== hipfile load, 3 processes"
        for _ in 1 2 3; do BEFORE=hot l --runs 3 $CK; done
        ;;
    limits)
        echo "== 1 GiB, hot"
        b --file "$S" --size "$SZ" --io-size 1GiB --hot --runs 3 --limits
        echo "== 64 MiB, async, 8 deep, hot"
        b --file /tmp/F --size 8GiB --io-size 64MiB --api async --queue-depth 8 --hot --runs 3 --limits
        echo "== 4 KiB random, async, 32 deep, hot"
        b --file /tmp/F4 --size 256MiB --io-size 4KiB --api async --queue-depth 32 --pattern random --hot --runs 5 --limits
        echo "== 4 KiB random, hot, the same 32 in flight from 2 callers, from 32 synchronous callers, as batches"
        b --file /tmp/F4 --size 256MiB --io-size 4KiB --api async --threads 2 --queue-depth 16 --pattern random --hot --runs 5
        b --file /tmp/F4 --size 256MiB --io-size 4KiB --threads 32 --pattern random --hot --runs 5
        b --file /tmp/F4 --size 256MiB --io-size 4KiB --api batch --queue-depth 32 --pattern random --hot --runs 5
        echo "== 4 KiB random, async, 1 and 4 in flight, hot"
        b --file /tmp/F4s --size 64MiB --io-size 4KiB --api async --queue-depth 1 --pattern random --hot --runs 3
        b --file /tmp/F4s --size 64MiB --io-size 4KiB --api async --queue-depth 4 --pattern random --hot --runs 5
        echo "== 4 KiB random, the runtime calls of a small staged read (small_copies.cu), 32 threads"
        nvcc -O2 -o /tmp/small_copies "$GPU/small_copies.cu" -lpthread && /tmp/small_copies /tmp/F4 32
        echo "== 64 KiB random, async, 32 deep, hot"
        b --file /tmp/F64 --size 1GiB --io-size 64KiB --api async --queue-depth 32 --pattern random --hot --runs 5 --limits
        echo "== durable write, 1 GiB"
        b --op write --file /tmp/W --overwrite --size 4GiB --io-size 1GiB --runs 3 --limits
        echo "== the raw staged pipeline, then hipfile load"
        nvcc -O2 -o /tmp/pagecache_dma "$GPU/pagecache_dma.cu" -lpthread && /tmp/pagecache_dma "$S" together
        BEFORE=hot l --runs 2 $CK
        ;;
    clients)
        echo "== 4 MiB, sync, 1 / 4 / 16 threads, then KvikIO with the same"
        for t in 1 4 16; do b --file /tmp/F --size 8GiB --io-size 4MiB --threads $t --hot --runs 3; done
        for t in 1 4 16; do
            KVIKIO_COMPAT_MODE=OFF LD_PRELOAD=$BIN/libcufile.so.0 python3 "$GPU/kvikio_read.py" /tmp/F $t 3
        done
        ;;
    torch)
        echo "== hipfile_torch, hot, two processes, each beside hipfile load"
        for _ in 1 2; do
            python3 "$PY/peers_load.py" --mode hot --runs 3 --loaders hipfile-torch $CK
            $H load --json --runs 2 $CK
        done
        echo "== the peers, hot, CRCs"
        python3 "$PY/peers_load.py" --mode hot --runs 2 --crc --loaders hipfile-torch,instanttensor-buffered,safetensors $CK
        echo "== first loads: steps, then load_file alone"
        python3 "$PY/first_load.py" steps $CK
        for _ in 1 2; do python3 "$PY/first_load.py" plain $CK; done
        ;;
    cold)
        echo "== cold: the disk over the checkpoint, hipfile_torch, hipfile load, the disk again, bench with its limits"
        gcc -O2 -o /tmp/disk_read "$HERE/docs/profile/disk_read.c" -lpthread && disk
        python3 "$PY/peers_load.py" --mode cold --runs 2 --loaders hipfile-torch $CK
        for _ in 1 2; do BEFORE=drop l --runs 1 $CK; done
        disk
        b --file "$S" --size "$SZ" --io-size 1GiB --cold --runs 2 --limits
        b --file /tmp/F --size 8GiB --io-size 64MiB --api async --queue-depth 8 --cold --runs 2 --limits
        echo "== stream-ordered, 64 MiB, 8 deep, hot"
        b --file /tmp/F --size 8GiB --io-size 64MiB --api stream --queue-depth 8 --hot --runs 2
        ;;
    *) echo "unknown part $part: give loads, limits, clients, torch or cold" >&2; exit 2 ;;
    esac
done
