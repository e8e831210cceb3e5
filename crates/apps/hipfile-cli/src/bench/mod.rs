//! `hipfile bench`: its arguments, and the order of its jobs. It times whole-file reads or writes through GPU buffers with the library's
//! calls, and, with `--limits`, the raw bandwidths and latencies they are compared against,
//! measured in the same process on the same file.
//!
//! A case is one `--op`, `--size`, `--io-size`, `--threads`, cache state, `--backend` and
//! `--devices`. Each of its runs moves the whole file once per device, every device at once;
//! only those runs are timed and counted in `served`.
//! The limits use plain `pread`/`pwrite` (and, for cold reads, `O_DIRECT` reads) on the same
//! file and the facade's synchronous copies from pinned and from pageable host memory.
//!
//! The driver, the devices and the buffers are set up before the test file is touched. An
//! existing test file is written only with `--overwrite`; a read benchmark of its exact size
//! opens it read-only instead. A test file this run created but could not finish is removed.
//!
//! The jobs, one a module: [`testfile`] decides on and prepares the test file, [`measure`]
//! sets up the devices and times the case's runs, [`limits`] measures the raw baselines
//! (`pread`/`pwrite`, copies, latencies, upstream's serial fallback, the staged path at the
//! case's concurrency), [`apis`] runs one thread's requests through `--api async`, `batch`
//! or `stream`, and [`report`] writes
//! the result as a table or JSON. What they share (the case's file and buffers, host buffers,
//! the test file's pattern and raw `pread`/`pwrite`) is in [`common`], which uses none of
//! them.

mod apis;
mod common;
mod limits;
mod measure;
mod report;
mod testfile;

use crate::failure::Failure;
use crate::options;
use crate::runtime::RuntimeChoice;
use clap::{Args, ValueEnum};
use hipfile::{ConfigBuilder, Op};
use std::io::{self, Write};
use std::path::PathBuf;

/// Every run moved the whole file.
pub const EXIT_DONE: u8 = 0;
/// A request, the driver or a measurement failed.
pub const EXIT_FAILED: u8 = 1;
/// Bad arguments, a test file that cannot be created, or no emulated runtime.
pub const EXIT_USAGE: u8 = 2;

/// Request size of the raw `pread`/`pwrite` limits, and of the pattern writes.
const RAW_IO: u64 = 16 << 20;
/// Thread counts the raw limits are measured with; the best counts.
const RAW_THREADS: [usize; 4] = [1, 4, 8, 16];
/// Thread counts the raw `O_DIRECT` limit of cold reads is measured with; the best counts.
const RAW_DIRECT_THREADS: [usize; 2] = [4, 16];
/// Threads that fill the page cache before a hot run.
const WARM_THREADS: usize = 8;
/// Request sizes of the latency comparison.
const LATENCY_SIZES: [u64; 2] = [4 << 10, 64 << 10];
/// Requests per latency figure (the median is reported).
const LATENCY_ITERATIONS: usize = 1000;
/// Host buffers are aligned to this, as a page-aligned staging buffer would be.
const PAGE: usize = 4096;

/// Measure read or write bandwidth through GPU memory, and the limits
#[derive(Debug, Clone, PartialEq, Eq, Args)]
#[command(
    args_override_self = true,
    long_about = "\
Measure read or write bandwidth through GPU memory, and the limits

Opens the GPU runtime and checks the devices asked for, then creates the test file when it
does not exist (written with plain pwrite of a pattern), then runs the case --runs times:
--threads threads each move their own part of the file in requests of --io-size bytes
between the file and a GPU buffer of their own, with the library's reads or writes, until
the whole file has been moved once. Each run is timed; the median and the spread (min-max)
are reported in GB/s (10^9 bytes per second), with the bytes each backend served and the
peak resident memory of the process during the runs.

Without --file, the test file is a temporary file on the current directory's file system
(so that O_DIRECT and cold reads are those of that file system), with no name: nothing is
left behind, whether bench ends, fails or is interrupted. An existing --file is never
changed without --overwrite. A read benchmark reads a file of
exactly --size bytes as it is, opened read-only. A write benchmark, or a read benchmark of
a file of another size, would change the file's contents: it is refused (exit status 2)
unless --overwrite is given. A test file that bench created but could not finish writing
(on a full file system, say) is removed.

Before each run the page cache is emptied (--cold: fdatasync, then
posix_fadvise(DONTNEED) on the file, and /proc/sys/vm/drop_caches when run as root) or
filled (--hot: the file is read once with plain pread).

With --limits the same run also measures what the case is compared against: raw pread
(reads) or pwrite + fdatasync (writes) bandwidth of the same file in 16 MiB requests, in
the same cache state, and for cold reads raw O_DIRECT reads; each with the fastest of 1, 4,
8 and 16 threads (4 and 16 for O_DIRECT), tried once each before the case's runs, then run
once after each of them, so that a disk whose speed drifts moves the case and its limit
alike; the limit is the median of those runs. Then host <-> device copy bandwidth from
pinned and from pageable memory; and the median latency of 1000 raw requests (pread + one
synchronous copy from pinned memory, or copy + pwrite + fdatasync) of 4 KiB and 64 KiB
beside the library's, on a hot cache. The ratio is the median over the lowest limit of the
staged path: the best raw file I/O or the pinned copy.
It also runs upstream hipFile's serial fallback (one thread, 16 MiB chunks through one
pageable buffer, a synchronous copy per chunk, and an fdatasync per chunk for writes) in
the same cache state once after each of the case's runs, and reports the median over its
median (vs_serial).

With --devices every listed device moves the whole file in each run, all at once: each with
--threads threads over the same parts of the file and GPU buffers of its own, allocated on
that device; every thread of every device starts together. The runs and the median are
then the total (the devices times --size over the time of the whole run), and each device
gets its own runs and median (--size over the time its last thread finished, counted from
the common start); the bytes served count every device. The limits are measured once, as
with one device: the host's raw file I/O, and copies to and from the first listed device.
With several devices the file-side limit (the host's page cache or disk) is shared by all
of them, so the ratio is that of the aggregate.

With --api async, batch or stream each thread keeps --queue-depth requests in flight, each
with a GPU buffer of its own: async keeps its queue full with futures over owned buffers
(a new request as soon as one ends), batch submits --queue-depth requests as one batch and
polls until all have ended, and stream orders --queue-depth requests on as many GPU streams
of the thread (one each: requests on one stream run one after another) and waits for them. --pattern random makes each thread's requests in a shuffled
order (the same in every run). With --limits the raw staged path is also measured at the
same concurrency: --threads x --queue-depth threads, each moving its part in --io-size
requests through a pinned buffer of its own (pread and a synchronous copy, or a copy and
pwrite), reported as staged with the median's ratio to it.

The default request size, 1 GiB, is that of a loader reading a checkpoint shard or a large
tensor in one call (KvikIO's own benchmark reads its whole file in one call); with smaller
requests a single caller pays the pipeline's fill and drain once per request
(docs/BENCHMARKS.md).",
    after_long_help = "\
Numbers are whole numbers of bytes, optionally followed by a suffix that multiplies by a
power of 1024: K, KB or KiB (1024), M, MB or MiB (1024^2), G, GB or GiB (1024^3), T, TB or
TiB (1024^4); for example 64K.

Exit status: 0 when every run moved the whole file; 1 when a request, the driver or a
measurement failed, or a device of --devices does not exist; 2 on bad arguments, an
existing --file that would be changed without --overwrite, a test file that cannot be
created or written, or an emulated runtime that is not found."
)]
pub struct BenchArgs {
    /// Direction
    #[arg(long, value_name = "OP", default_value = "read", value_parser = options::op())]
    pub op: Op,
    /// Size of the test file
    #[arg(long, value_name = "N", default_value = "8GiB", value_parser = file_size)]
    pub size: u64,
    /// Bytes per request, at most 2147479552; never more than --size
    #[arg(long, value_name = "N", default_value = "1GiB", value_parser = io_size)]
    pub io_size: u64,
    /// Threads issuing requests, 1 to 1024; per device with --devices
    #[arg(
        long,
        value_name = "N",
        default_value = "1",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024)
    )]
    pub threads: usize,
    /// Run on these devices at once: all the runtime sees, or a list of device numbers from
    /// 0 to 1023, each once, separated by commas [default: the current device, alone]
    // A value that starts with a dash is still its value, refused with the reason.
    #[arg(long, value_name = "all|N,N,...", value_parser = devices, allow_hyphen_values = true)]
    pub devices: Option<Devices>,
    /// Empty the page cache of the file before each run
    #[arg(long, conflicts_with = "hot")]
    pub cold: bool,
    /// Read the file once before each run (the default)
    #[arg(long)]
    pub hot: bool,
    /// auto: the configuration decides; fallback: force compatibility mode; fastpath:
    /// compatibility mode not allowed
    #[arg(long, value_name = "BACKEND", value_enum, default_value_t)]
    pub backend: BackendChoice,
    /// Also measure the limits, and report each ratio
    #[arg(long)]
    pub limits: bool,
    /// Print one JSON object
    #[arg(long)]
    pub json: bool,
    /// How requests are made: sync (blocking calls), async (futures over owned buffers, a
    /// queue kept full), batch (batches of --queue-depth requests), stream (--queue-depth
    /// requests, each ordered on a GPU stream of its own, then waited for)
    #[arg(long, value_name = "API", value_enum, default_value_t)]
    pub api: Api,
    /// Requests in flight per thread, 1 to 1024 (with --api async, batch or stream)
    #[arg(
        long,
        value_name = "N",
        default_value = "1",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024)
    )]
    pub queue_depth: usize,
    /// The order of each thread's requests within its part of the file
    #[arg(long, value_name = "PATTERN", value_enum, default_value_t)]
    pub pattern: Pattern,
    /// The test file [default: a temporary file on the current directory's file system,
    /// removed when bench ends]
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// Let bench write its pattern or its write runs over an existing --file (its contents
    /// are lost)
    #[arg(long, requires = "file")]
    pub overwrite: bool,
    /// Timed runs, 1 to 1000
    #[arg(
        long,
        value_name = "N",
        default_value = "3",
        value_parser = clap::value_parser!(u32).range(1..=1000)
    )]
    pub runs: u32,
    /// The GPU runtime to use: the one found on this machine, or the emulated runtime
    /// libhipfile_emu.so in this program's directory or its deps/ subdirectory (test and
    /// development only; its limit is the host memory bandwidth)
    #[arg(long, value_name = "RUNTIME", value_enum, default_value_t)]
    pub runtime: RuntimeChoice,
}

impl BenchArgs {
    /// The highest device number `--devices` takes.
    pub const MAX_DEVICE: i32 = 1023;

    /// The page-cache state each run starts in: hot unless `--cold`.
    pub fn cache(&self) -> Cache {
        if self.cold { Cache::Cold } else { Cache::Hot }
    }
}

/// `--size`: at least one byte, and a size a file can have.
fn file_size(text: &str) -> Result<u64, String> {
    match options::bytes(text)? {
        n if n == 0 || n > i64::MAX as u64 => Err(format!(
            "{text:?} is not valid; expected a number of bytes, at least 1"
        )),
        n => Ok(n),
    }
}

/// `--io-size`: one request, at most the kernel's `MAX_RW_COUNT`.
fn io_size(text: &str) -> Result<u64, String> {
    match options::bytes(text)? {
        n if n == 0 || n > crate::cp::MAX_CHUNK => Err(format!(
            "{text:?} is not valid; expected a number of bytes from 1 to {}",
            crate::cp::MAX_CHUNK
        )),
        n => Ok(n),
    }
}

/// Whether a benchmark run starts with the file in the page cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cache {
    /// Read once before each run.
    Hot,
    /// Dropped before each run.
    Cold,
}

impl Cache {
    /// The name used in the output.
    pub fn as_str(self) -> &'static str {
        match self {
            Cache::Hot => "hot",
            Cache::Cold => "cold",
        }
    }
}

/// How a benchmark makes its requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Api {
    /// Blocking calls (`read_at`, `write_at`), one request at a time per thread.
    #[default]
    Sync,
    /// Futures over owned buffers (`read_owned`, `write_owned`): each thread keeps
    /// --queue-depth requests in flight, making a new one as each ends.
    Async,
    /// Batches (`Driver::batch`): each thread submits --queue-depth requests, polls until
    /// they have all ended, and goes on.
    Batch,
    /// Stream-ordered requests (`read_on`, `write_on`): --queue-depth requests, each on a
    /// stream of its own (requests on one stream run one after another), then waited for.
    Stream,
}

impl Api {
    /// The name used in the output.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Sync => "sync",
            Api::Async => "async",
            Api::Batch => "batch",
            Api::Stream => "stream",
        }
    }
}

/// The order of each thread's requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Pattern {
    /// From the start of the thread's part to its end.
    #[default]
    Seq,
    /// Every request of the part once, in a shuffled order (the same in every run).
    Random,
}

impl Pattern {
    /// The name used in the output.
    pub fn as_str(self) -> &'static str {
        match self {
            Pattern::Seq => "seq",
            Pattern::Random => "random",
        }
    }
}

/// The requests of the part `from..to` in `io`-byte pieces (the last one shorter), in the
/// order `pattern` says; `seed` picks the shuffle.
pub fn requests(from: u64, to: u64, io: u64, pattern: Pattern, seed: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = (from..to)
        .step_by(io.max(1) as usize)
        .map(|at| (at, (to - at).min(io)))
        .collect();
    if pattern == Pattern::Random {
        // A small xorshift, so that every run and every build shuffles the same way.
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for i in (1..out.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.swap(i, (x % (i as u64 + 1)) as usize);
        }
    }
    out
}

/// Which backends a benchmark lets serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum BackendChoice {
    /// The configuration's defaults.
    #[default]
    Auto,
    /// Compatibility mode forced: only the fallback.
    Fallback,
    /// Compatibility mode not allowed: only the fastpath.
    Fastpath,
}

impl BackendChoice {
    /// The name used in the output.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Fallback => "fallback",
            BackendChoice::Fastpath => "fastpath",
        }
    }
}

/// The devices of `hipfile bench --devices`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Devices {
    /// Every device the runtime sees: `0..Driver::device_count()`.
    All,
    /// These devices, in the order given: at least one, each once, each at most
    /// [`BenchArgs::MAX_DEVICE`].
    List(Vec<i32>),
}

/// Parses the value of `--devices`: `all`, or distinct device numbers from 0 to
/// [`BenchArgs::MAX_DEVICE`] separated by commas.
fn devices(value: &str) -> Result<Devices, String> {
    let bad = |why: String| {
        format!(
            "{value:?} is not valid ({why}); expected all, or device numbers from 0 to 1023 \
             separated by commas, each once"
        )
    };
    if value == "all" {
        return Ok(Devices::All);
    }
    if value.is_empty() {
        return Err(bad("empty".into()));
    }
    let mut list = Vec::new();
    for item in value.split(',') {
        let device = Some(item)
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<i32>().ok())
            .filter(|n| (0..=BenchArgs::MAX_DEVICE).contains(n))
            .ok_or_else(|| bad(format!("{item:?} is not a device number")))?;
        if list.contains(&device) {
            return Err(bad(format!("device {device} is named twice")));
        }
        list.push(device);
    }
    Ok(Devices::List(list))
}

/// Runs `bench` and returns the exit status.
pub fn run(args: &BenchArgs) -> Result<u8, Failure> {
    let usage = |message: String| Failure::msg(EXIT_USAGE, message);
    let failed = |message: String| Failure::msg(EXIT_FAILED, message);
    if args.api == Api::Sync && args.queue_depth > 1 {
        return Err(usage(format!(
            "--queue-depth {} needs --api async, batch or stream: a blocking call has one \
             request in flight",
            args.queue_depth
        )));
    }
    let settings = crate::runtime::settings(args.runtime).map_err(usage)?;
    let settings = backend_settings(settings, args.backend);
    // Nothing is created or written before the arguments, the runtime and the devices are
    // known to be usable: a bench that cannot run must leave the file system as it was.
    let plan = testfile::plan_file(args).map_err(usage)?;
    let setup = measure::Setup::new(args, settings).map_err(failed)?;
    let file = testfile::prepare_file(args.file.as_deref(), args.size, plan).map_err(usage)?;
    let report = measure::measure(args, setup, &file).map_err(failed)?;
    let text = if args.json {
        format!("{}\n", report.to_json())
    } else {
        report.text()
    };
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| Failure::output(EXIT_FAILED, e))?;
    Ok(EXIT_DONE)
}

/// The settings for `--backend`.
pub fn backend_settings(settings: ConfigBuilder, choice: BackendChoice) -> ConfigBuilder {
    match choice {
        BackendChoice::Auto => settings,
        BackendChoice::Fallback => settings.force_compat_mode(true),
        BackendChoice::Fastpath => settings.allow_compat_mode(false),
    }
}

/// Median, minimum and maximum of `xs` (zeros when empty).
pub fn spread(xs: &[f64]) -> (f64, f64, f64) {
    let mut v: Vec<f64> = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let Some((&min, &max)) = v.first().zip(v.last()) else {
        return (0.0, 0.0, 0.0);
    };
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (median, min, max)
}

/// Gigabytes (10^9 bytes) per second; 0 when no time was measured.
pub fn gbps(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 / seconds / 1e9
    } else {
        0.0
    }
}

/// The byte ranges of `threads` threads over `size` bytes in `io`-byte requests: request
/// indices split into contiguous parts, one per thread, none empty.
pub fn partition(size: u64, io: u64, threads: usize) -> Vec<(u64, u64)> {
    let requests = size.div_ceil(io.max(1));
    let threads = (threads as u64).clamp(1, requests.max(1));
    (0..threads)
        .map(|t| {
            let first = t * requests / threads;
            let end = (t + 1) * requests / threads;
            (first * io, (end * io).min(size))
        })
        .filter(|(a, b)| b > a)
        .collect()
}

/// Runs `work` on one scoped thread per part and waits for all; the first error wins.
fn parallel<T: Send>(
    parts: &[(u64, u64)],
    work: impl Fn(usize, u64, u64) -> Result<T, String> + Sync,
) -> Result<Vec<T>, String> {
    std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(parts.len());
        for (i, &(start, end)) in parts.iter().enumerate() {
            let work = &work;
            let h = std::thread::Builder::new()
                .spawn_scoped(s, move || work(i, start, end))
                .map_err(|e| format!("cannot start a thread: {e}"))?;
            handles.push(h);
        }
        let mut out = Vec::with_capacity(handles.len());
        let mut first_error = None;
        for h in handles {
            match h.join() {
                Ok(Ok(x)) => out.push(x),
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(_) => {
                    first_error.get_or_insert_with(|| "a benchmark thread failed".to_owned());
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(out),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_cover_the_part_once_in_either_order() {
        let seq = requests(1000, 1000 + 10 * 64 + 5, 64, Pattern::Seq, 1);
        assert_eq!(seq.len(), 11);
        assert_eq!(seq[0], (1000, 64));
        assert_eq!(seq[10], (1000 + 640, 5));
        assert!(seq.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
        let mut random = requests(1000, 1000 + 10 * 64 + 5, 64, Pattern::Random, 1);
        assert_ne!(random, seq, "a shuffle of 11 requests left them in order");
        assert_eq!(random, requests(1000, 1000 + 645, 64, Pattern::Random, 1));
        random.sort_unstable();
        assert_eq!(random, seq);
    }

    #[test]
    fn parts_are_disjoint_and_cover_the_file() {
        assert_eq!(partition(10, 4, 1), [(0, 10)]);
        assert_eq!(partition(10, 4, 2), [(0, 4), (4, 10)]);
        assert_eq!(partition(10, 4, 8), [(0, 4), (4, 8), (8, 10)]);
        assert_eq!(partition(8 << 20, 1 << 20, 3).len(), 3);
        for (size, io, t) in [
            (8u64 << 20, 1u64 << 20, 3usize),
            (12345, 100, 7),
            (1, 64, 4),
        ] {
            let p = partition(size, io, t);
            assert_eq!(p.first().map(|x| x.0), Some(0));
            assert_eq!(p.last().map(|x| x.1), Some(size));
            for w in p.windows(2) {
                assert_eq!(w[0].1, w[1].0);
                assert_eq!(w[0].1 % io, 0, "parts start on request boundaries");
            }
        }
    }

    #[test]
    fn spread_is_median_min_max() {
        assert_eq!(spread(&[3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(spread(&[4.0, 1.0, 2.0, 3.0]), (2.5, 1.0, 4.0));
        assert_eq!(spread(&[]), (0.0, 0.0, 0.0));
        assert_eq!(gbps(2_000_000_000, 0.5), 4.0);
        assert_eq!(gbps(1, 0.0), 0.0);
    }

    /// `hipfile bench ARGS`, parsed.
    fn bench(args: &[&str]) -> BenchArgs {
        let all: Vec<&str> = ["bench"].iter().chain(args).copied().collect();
        match crate::tests::parse(&all) {
            Ok(crate::Command::Bench(b)) => b,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn bench_defaults_and_options() {
        let d = bench(&[]);
        assert_eq!(
            (d.size, d.io_size, d.threads, d.runs),
            (8 << 30, 1 << 30, 1, 3)
        );
        assert_eq!((d.cache(), d.backend), (Cache::Hot, BackendChoice::Auto));
        assert_eq!(
            (d.op, d.devices, d.runtime),
            (Op::Read, None, RuntimeChoice::Auto)
        );
        assert!(!d.limits && !d.json && !d.overwrite);
        assert_eq!(d.file, None);
        let b = bench(&[
            "--op=write",
            "--size",
            "8MiB",
            "--io-size=1M",
            "--threads",
            "4",
            "--devices",
            "2,0",
            "--cold",
            "--backend",
            "fallback",
            "--limits",
            "--json",
            "--file",
            "x.dat",
            "--overwrite",
            "--runs",
            "5",
            "--runtime",
            "emulated",
        ]);
        assert_eq!(
            (b.op, b.size, b.io_size, b.threads, b.runs),
            (Op::Write, 8 << 20, 1 << 20, 4, 5)
        );
        assert_eq!(b.devices, Some(Devices::List(vec![2, 0])));
        assert_eq!(
            (b.cache(), b.backend),
            (Cache::Cold, BackendChoice::Fallback)
        );
        assert!(b.limits && b.json && b.overwrite);
        assert_eq!(
            (b.file, b.runtime),
            (Some(PathBuf::from("x.dat")), RuntimeChoice::Emulated)
        );
        assert_eq!(bench(&["--hot"]).cache(), Cache::Hot);
        assert_eq!(
            bench(&["--backend=fastpath"]).backend,
            BackendChoice::Fastpath
        );
        assert_eq!(bench(&["--size", "4MB"]).size, 4_194_304);
        assert_eq!(bench(&["--io-size", "4MiB"]).io_size, 4_194_304);
        assert_eq!(
            bench(&["--runs", "1", "--runs", "2"]).runs,
            2,
            "the last one wins"
        );
    }

    #[test]
    fn bench_devices_are_all_or_a_list() {
        assert_eq!(bench(&["--devices", "all"]).devices, Some(Devices::All));
        assert_eq!(
            bench(&["--devices=3"]).devices,
            Some(Devices::List(vec![3]))
        );
        assert_eq!(
            bench(&["--devices", "1023,0"]).devices,
            Some(Devices::List(vec![1023, 0]))
        );
        assert_eq!(
            bench(&["--devices", "0", "--devices", "all"]).devices,
            Some(Devices::All),
            "the last one wins"
        );
    }

    #[test]
    fn contradictions_and_bad_values_are_refused() {
        use crate::tests::error;
        for (args, want) in [
            (
                &["--cold", "--hot"][..],
                &["--cold", "--hot", "cannot be used with"][..],
            ),
            (
                &["--hot", "--cold"],
                &["--cold", "--hot", "cannot be used with"],
            ),
            (&["--threads", "0"], &["--threads", "1..=1024"]),
            (&["--threads", "1025"], &["--threads", "1..=1024"]),
            (&["--runs", "0"], &["--runs", "1..=1000"]),
            (&["--io-size", "0"], &["--io-size", "from 1 to 2147479552"]),
            (&["--io-size", "4G"], &["--io-size", "from 1 to 2147479552"]),
            (&["--size", "0"], &["--size", "at least 1"]),
            (&["--size", "x"], &["--size", "not a number of bytes"]),
            (&["--size", "1P"], &["--size", "unknown suffix"]),
            (
                &["--backend", "gpu"],
                &["--backend", "auto, fallback, fastpath"],
            ),
            (&["--op", "copy"], &["--op", "read, write"]),
            (&["--runtime", "cuda"], &["auto, emulated"]),
            (&["--devices", ""], &["--devices", "(empty)"]),
            (&["--devices", "1,1"], &["device 1 is named twice"]),
            (&["--devices", "x"], &["\"x\" is not a device number"]),
            (&["--devices", "0,"], &["\"\" is not a device number"]),
            (&["--devices", "0, 1"], &["\" 1\" is not a device number"]),
            (&["--devices", "-1"], &["\"-1\" is not a device number"]),
            (&["--devices", "1024"], &["\"1024\" is not a device number"]),
            (&["--devices", "ALL"], &["from 0 to 1023"]),
            (&["--devices"], &["--devices"]),
            (&["--file", ""], &["--file"]),
            (&["--cold=1"], &["--cold"]),
            (&["--frob", "1"], &["--frob"]),
            (&["x"], &["'x'"]),
            (&["--", "x"], &["'x'"]),
        ] {
            let all: Vec<&str> = ["bench"].iter().chain(args).copied().collect();
            let e = error(&all);
            for w in want {
                assert!(e.contains(w), "{args:?}: {e}");
            }
        }
    }
}
