//! `hipfile bench`'s arguments ([`BenchArgs`]) and the choices they name: cache state, API,
//! request pattern, backend and devices, each parsed and checked here.

use crate::options;
use crate::runtime::RuntimeChoice;
use clap::{Args, ValueEnum};
use hipfile::Op;
use std::path::PathBuf;

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
pwrite), once after each of the case's runs as the file-side limits are, reported as
staged (the median of those runs) with the case's median's ratio to it.

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
    /// Requests the library's engine serves at once (futures, batch entries), 1 to 1024
    /// [default: the fallback's I/O threads, at most 8]
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024)
    )]
    pub request_threads: Option<usize>,
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
    /// Read an object instead of a local file: s3://BUCKET/KEY (endpoint, region and
    /// credentials from the AWS_* variables) or http(s)://HOST/PATH. Each run reads it whole
    /// into GPU memory with ranged GETs; --limits reads it into host memory with the same
    /// GETs, in the same process
    #[arg(
        long,
        value_name = "URL",
        conflicts_with_all = ["file", "overwrite", "cold", "hot", "devices"]
    )]
    pub url: Option<String>,
    /// With --url: bytes per ranged GET
    #[arg(long, value_name = "N", default_value = "8MiB", value_parser = io_size, requires = "url")]
    pub request_size: u64,
    /// With --url: ranged GETs in flight
    #[arg(
        long,
        value_name = "N",
        default_value = "16",
        value_parser = clap::value_parser!(u32).range(1..=256),
        requires = "url"
    )]
    pub in_flight: u32,
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

#[cfg(test)]
mod tests {
    use super::*;

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
