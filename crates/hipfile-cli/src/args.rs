//! Command-line parsing: the arguments become a [`Command`], or an [`ArgError`] that says what
//! was wrong. No I/O here; help texts are constants that `main` prints.

use hipfile::{MemoryKind, Op};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::PathBuf;

/// `hipfile --help`.
pub const MAIN_HELP: &str = "\
hipfile: GPU direct storage tools

Usage: hipfile <COMMAND> [OPTIONS]

Commands:
  check    Explain which backend would serve a request on each file, and why
  cp       Copy a file through GPU memory
  bench    Measure read or write bandwidth through GPU memory, and the limits

Options:
  -h, --help       Print this help
  -V, --version    Print the version

Run 'hipfile check --help', 'hipfile cp --help' or 'hipfile bench --help' for the options of
each command.
";

/// `hipfile check --help`.
pub const CHECK_HELP: &str = "\
hipfile check: explain which backend would serve a request on each file, and why

Usage: hipfile check [OPTIONS] PATH...

For each PATH, hipfile opens the file (never creating or changing it), probes it, and asks
both backends whether they would serve the request described by the options: the fastpath
(storage <-> GPU memory with no host copy, score 100) and the fallback (POSIX I/O through
host staging buffers, score 1). A backend that refuses scores -1 and gives every reason
that applies. Without a GPU runtime, or with one that reports no usable device, no backend
would serve anything whatever the scores, nor on a directory or a FIFO, which hipfile
refuses to register: the selection is then none, with the reason, and the runtime's error
follows the table.

Options:
      --json                 One JSON object per PATH, each on its own line
      --op read|write        Direction of the request [default: read]
      --size N               Bytes to transfer [default: 1MiB]
      --offset N             Byte offset in the file [default: 0]
      --buffer-offset N      Byte offset into the GPU buffer [default: 0]
      --buffer-align N       The buffer's address is a multiple of N (N >= 1; need not be a
                             power of two) [default: 4096]
      --memory device|host|managed
                             Kind of memory the buffer is [default: device]
      --runtime auto|emulated
                             The GPU runtime to ask: the one found on this machine, or
                             the emulated runtime libhipfile_emu.so in this program's
                             directory or its deps/ subdirectory (test and development
                             only) [default: auto]
  -h, --help                 Print this help

Numbers are whole numbers of bytes, optionally followed by a suffix that multiplies by a
power of 1024: K or KiB (1024), M or MiB (1024^2), G or GiB (1024^3); for example 4K, 1MiB.

The configuration comes from HIPFILE_ALLOW_COMPAT_MODE, HIPFILE_FORCE_COMPAT_MODE and
HIPFILE_UNSUPPORTED_FILE_SYSTEMS, as for any program using hipfile.

Exit status: 0 when a backend would serve the request on every PATH, 1 when none would on
some PATH (no backend accepts it, or no runtime or device serves anything), 2 on bad
arguments, a PATH that cannot be opened or probed, or an emulated runtime that is not found.
";

/// `hipfile cp --help`.
pub const CP_HELP: &str = "\
hipfile cp: copy a file through GPU memory

Usage: hipfile cp [OPTIONS] SRC DST

Reads SRC into one GPU buffer a chunk at a time and writes each chunk from the buffer to
DST, as an application using hipfile would. Each request is served by the fastpath
(storage <-> GPU memory with no host copy) when the file, the request and the runtime
allow it, and by the fallback (POSIX I/O through host staging buffers) otherwise; run
'hipfile check' on SRC and DST to see why. A fastpath request that fails with ENODEV or
EREMOTEIO is retried once on the fallback, as for any program using hipfile.

SRC is a regular file or a block device, opened read-only, and read to its end whatever
size it claims (a procfs file claims 0 bytes). The copy is written to a new file in DST's
directory, .NAME.hipfile-cp.PID.N.tmp, flushed to storage, and only then renamed over DST,
so that DST is at every moment either what it was or the whole copy. DST must be a regular
file or a new name, and must not be SRC. A new DST gets mode 0644, less the umask; an
existing one is replaced by a new file with its mode (and its owner and group where cp may
set them): other hard links to it keep the old contents. A symbolic link DST stays, and
the file it names is replaced. cp needs permission to create files in DST's directory.
Each chunk is written rounded up to DST's direct-I/O alignment, so that the fastpath can
take it, and the copy is then cut to the bytes read.

Options:
      --json                 Print the result as one JSON object: bytes, seconds, gbps, and
                             for read and write each: fastpath_bytes, fallback_bytes,
                             retries (bytes of the file, so that each side adds up to
                             bytes: the padding written up to DST's alignment, cut off at
                             the end, is not counted)
      --chunk N              Size of the GPU buffer, a multiple of 4096 [default: 64MiB];
                             never larger than SRC rounded up to 4096
      --runtime auto|emulated
                             The GPU runtime to use: the one found on this machine, or
                             the emulated runtime libhipfile_emu.so in this program's
                             directory or its deps/ subdirectory (test and development
                             only) [default: auto]
  -h, --help                 Print this help

Numbers are whole numbers of bytes, optionally followed by a suffix that multiplies by a
power of 1024: K or KiB (1024), M or MiB (1024^2), G or GiB (1024^3); for example 64K.

The configuration comes from HIPFILE_ALLOW_COMPAT_MODE, HIPFILE_FORCE_COMPAT_MODE and
HIPFILE_UNSUPPORTED_FILE_SYSTEMS, as for any program using hipfile. On a terminal, the
progress of a copy that takes more than a second is shown on stderr.

Exit status: 0 when DST is a complete copy of SRC; 1 when the copy failed: SRC or DST
cannot be opened (a missing SRC included), the driver cannot be opened, a file or the
buffer cannot be registered, a read or write fails, or the sizes do not match; 2 on bad
arguments or an emulated runtime that is not found. When the copy fails, its temporary
file is removed and DST is left as it was (or absent); a copy that is killed can leave
only its temporary file behind.
";

/// The largest `--chunk`: one request moves at most this many bytes (the kernel's
/// `MAX_RW_COUNT`, a multiple of 4096).
pub const MAX_CHUNK: u64 = 0x7fff_f000;

/// The unit `--chunk` is a multiple of.
pub const CHUNK_UNIT: u64 = 4096;

/// Which GPU runtime a command loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RuntimeChoice {
    /// The runtime the configuration finds on this machine.
    #[default]
    Auto,
    /// The emulated runtime beside this program.
    Emulated,
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Print [`MAIN_HELP`].
    Help,
    /// Print [`CHECK_HELP`].
    CheckHelp,
    /// Print the version.
    Version,
    /// Run `check`.
    Check(CheckArgs),
    /// Print [`CP_HELP`].
    CpHelp,
    /// Run `cp`.
    Cp(CpArgs),
    /// Print [`BENCH_HELP`].
    BenchHelp,
    /// Run `bench`.
    Bench(BenchArgs),
}

/// The options of `hipfile check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckArgs {
    /// JSON lines instead of a table.
    pub json: bool,
    /// Read or write.
    pub op: Op,
    /// Bytes to transfer.
    pub size: u64,
    /// Byte offset in the file.
    pub file_offset: u64,
    /// Byte offset into the buffer.
    pub buffer_offset: u64,
    /// The buffer's base address is a multiple of this (≥ 1).
    pub buffer_align: u64,
    /// The buffer's kind of memory.
    pub memory: MemoryKind,
    /// The runtime to ask.
    pub runtime: RuntimeChoice,
    /// The files to check, in order (at least one).
    pub paths: Vec<PathBuf>,
}

impl Default for CheckArgs {
    fn default() -> Self {
        CheckArgs {
            json: false,
            op: Op::Read,
            size: 1 << 20,
            file_offset: 0,
            buffer_offset: 0,
            buffer_align: 4096,
            memory: MemoryKind::Device,
            runtime: RuntimeChoice::Auto,
            paths: Vec::new(),
        }
    }
}

/// The options of `hipfile cp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpArgs {
    /// One JSON object instead of a line of text.
    pub json: bool,
    /// The runtime to use.
    pub runtime: RuntimeChoice,
    /// The GPU buffer's size: a non-zero multiple of [`CHUNK_UNIT`], at most [`MAX_CHUNK`].
    pub chunk: u64,
    /// The file to copy.
    pub src: PathBuf,
    /// The copy.
    pub dst: PathBuf,
}

impl CpArgs {
    /// The default `--chunk`: 64 MiB.
    pub const DEFAULT_CHUNK: u64 = 64 << 20;
}

/// `hipfile bench --help`.
pub const BENCH_HELP: &str = "\
hipfile bench: measure read or write bandwidth through GPU memory, and the limits

Usage: hipfile bench [OPTIONS]

Opens the GPU runtime and checks the devices asked for, then creates the test file when it
does not exist (written with plain pwrite of a pattern), then runs the case --runs times:
--threads threads each move their own part of the file in requests of --io-size bytes
between the file and a GPU buffer of their own, with the library's reads or writes, until
the whole file has been moved once. Each run is timed; the median and the spread (min-max)
are reported in GB/s (10^9 bytes per second), with the bytes each backend served and the
peak resident memory of the process during the runs.

An existing --file is never changed without --overwrite. A read benchmark reads a file of
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

The default request size, 1 GiB, is that of a loader reading a checkpoint shard or a large
tensor in one call (KvikIO's own benchmark reads its whole file in one call); with smaller
requests a single caller pays the pipeline's fill and drain once per request
(docs/BENCHMARKS.md).

Options:
      --op read|write        Direction [default: read]
      --size N               Size of the test file [default: 8GiB]
      --io-size N            Bytes per request, at most 2147479552; never more than --size
                             [default: 1GiB]
      --threads N            Threads issuing requests, 1 to 1024; per device with
                             --devices [default: 1]
      --devices all|N,N,...  Run on these devices at once: all the runtime sees, or a list
                             of device numbers from 0 to 1023, each once, separated by
                             commas [default: the current device, alone]
      --cold                 Empty the page cache of the file before each run
      --hot                  Read the file once before each run [default]
      --backend auto|fallback|fastpath
                             auto: the configuration decides; fallback: force
                             compatibility mode; fastpath: compatibility mode not allowed
                             [default: auto]
      --limits               Also measure the limits, and report each ratio
      --json                 Print one JSON object
      --file PATH            The test file [default: hipfile-bench.dat]
      --overwrite            Let bench write its pattern or its write runs over an
                             existing --file (its contents are lost)
      --runs N               Timed runs, 1 to 1000 [default: 3]
      --runtime auto|emulated
                             The GPU runtime to use: the one found on this machine, or
                             the emulated runtime libhipfile_emu.so in this program's
                             directory or its deps/ subdirectory (test and development
                             only; its limit is the host memory bandwidth) [default: auto]
  -h, --help                 Print this help

Numbers are whole numbers of bytes, optionally followed by a suffix that multiplies by a
power of 1024: K or KiB (1024), M or MiB (1024^2), G or GiB (1024^3); for example 64K.

Exit status: 0 when every run moved the whole file; 1 when a request, the driver or a
measurement failed, or a device of --devices does not exist; 2 on bad arguments, an
existing --file that would be changed without --overwrite, a test file that cannot be
created or written, or an emulated runtime that is not found.
";

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

/// Which backends a benchmark lets serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// The configuration's defaults.
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

/// The options of `hipfile bench`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchArgs {
    /// Read or write.
    pub op: Op,
    /// Size of the test file (≥ 1).
    pub size: u64,
    /// Bytes per request as asked (≥ 1, at most [`MAX_CHUNK`]); clamped to `size` when used.
    pub io_size: u64,
    /// Threads issuing requests (1 to [`BenchArgs::MAX_THREADS`]), per device.
    pub threads: usize,
    /// With `--devices`: the devices that each move the whole file at once; `None`: the
    /// current device alone.
    pub devices: Option<Devices>,
    /// The page-cache state each run starts in.
    pub cache: Cache,
    /// Which backends may serve.
    pub backend: BackendChoice,
    /// Also measure the limits.
    pub limits: bool,
    /// One JSON object instead of a table.
    pub json: bool,
    /// The test file.
    pub file: PathBuf,
    /// Bench may write over an existing test file that it would otherwise refuse to change.
    pub overwrite: bool,
    /// Timed runs (1 to [`BenchArgs::MAX_RUNS`]).
    pub runs: u32,
    /// The runtime to use.
    pub runtime: RuntimeChoice,
}

impl BenchArgs {
    /// The most `--threads`.
    pub const MAX_THREADS: usize = 1024;
    /// The most `--runs`.
    pub const MAX_RUNS: u32 = 1000;
    /// The highest device number `--devices` takes.
    pub const MAX_DEVICE: i32 = 1023;
}

impl Default for BenchArgs {
    fn default() -> Self {
        BenchArgs {
            op: Op::Read,
            size: 8 << 30,
            io_size: 1 << 30,
            threads: 1,
            devices: None,
            cache: Cache::Hot,
            backend: BackendChoice::Auto,
            limits: false,
            json: false,
            file: PathBuf::from("hipfile-bench.dat"),
            overwrite: false,
            runs: 3,
            runtime: RuntimeChoice::Auto,
        }
    }
}

/// A command line that cannot be run, with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError {
    /// What was wrong.
    pub message: String,
    /// The help to point at: `hipfile --help`, `hipfile check --help` or `hipfile cp --help`.
    pub help: &'static str,
}

impl ArgError {
    fn main(message: String) -> ArgError {
        ArgError {
            message,
            help: "hipfile --help",
        }
    }

    fn check(message: String) -> ArgError {
        ArgError {
            message,
            help: "hipfile check --help",
        }
    }

    fn cp(message: String) -> ArgError {
        ArgError {
            message,
            help: "hipfile cp --help",
        }
    }

    fn bench(message: String) -> ArgError {
        ArgError {
            message,
            help: "hipfile bench --help",
        }
    }
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}\nRun '{}' for usage.", self.message, self.help)
    }
}

/// Parses the arguments that follow the program name.
///
/// # Errors
///
/// [`ArgError`] for an unknown command or option, a missing or bad value, or missing or extra
/// paths.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command, ArgError> {
    let mut args = args.into_iter();
    let Some(first) = args.next() else {
        return Err(ArgError::main(format!("no command given; {COMMANDS}")));
    };
    match first.to_str() {
        Some("-h" | "--help" | "help") => Ok(Command::Help),
        Some("-V" | "--version") => Ok(Command::Version),
        Some("check") => parse_check(args),
        Some("cp") => parse_cp(args),
        Some("bench") => parse_bench(args),
        _ => Err(ArgError::main(format!(
            "unknown command {}; {COMMANDS}",
            quote(&first)
        ))),
    }
}

const COMMANDS: &str = "the commands are 'check', 'cp' and 'bench'";

/// One command-line word after the command: a path, the end of options, or an option with
/// its inline value (`--name=value`).
enum Word {
    Path(OsString),
    EndOfOptions,
    Option {
        name: String,
        inline: Option<String>,
    },
}

/// Classifies `arg`; `only_paths` after `--`. An option that is not valid text is an error.
fn word(arg: OsString, only_paths: bool, error: fn(String) -> ArgError) -> Result<Word, ArgError> {
    let bytes = arg.as_encoded_bytes();
    if only_paths || bytes == b"-" || !bytes.starts_with(b"-") {
        return Ok(Word::Path(arg));
    }
    if bytes == b"--" {
        return Ok(Word::EndOfOptions);
    }
    let Some(text) = arg.to_str() else {
        return Err(error(format!("unknown option {}", quote(&arg))));
    };
    Ok(match text.split_once('=') {
        Some((name, value)) if name.starts_with("--") => Word::Option {
            name: name.to_owned(),
            inline: Some(value.to_owned()),
        },
        _ => Word::Option {
            name: text.to_owned(),
            inline: None,
        },
    })
}

/// The value of option `name`: its inline value, or the next argument.
fn value(
    name: &str,
    inline: Option<String>,
    args: &mut impl Iterator<Item = OsString>,
    error: fn(String) -> ArgError,
) -> Result<String, ArgError> {
    if let Some(v) = inline {
        return Ok(v);
    }
    match args.next() {
        Some(v) => v
            .into_string()
            .map_err(|v| error(format!("{name}: {} is not valid text", quote(&v)))),
        None => Err(error(format!("{name} needs a value ({})", expected(name)))),
    }
}

fn no_value(
    name: &str,
    inline: Option<&String>,
    error: fn(String) -> ArgError,
) -> Result<(), ArgError> {
    match inline {
        Some(_) => Err(error(format!("{name} takes no value"))),
        None => Ok(()),
    }
}

fn runtime_choice(value: &str, error: fn(String) -> ArgError) -> Result<RuntimeChoice, ArgError> {
    match value {
        "auto" => Ok(RuntimeChoice::Auto),
        "emulated" => Ok(RuntimeChoice::Emulated),
        _ => Err(error(format!(
            "--runtime: {value:?} is not valid; expected {}",
            expected("--runtime")
        ))),
    }
}

fn parse_cp(mut args: impl Iterator<Item = OsString>) -> Result<Command, ArgError> {
    let mut json = false;
    let mut runtime = RuntimeChoice::Auto;
    let mut chunk = CpArgs::DEFAULT_CHUNK;
    let mut paths = Vec::new();
    let mut only_paths = false;
    while let Some(arg) = args.next() {
        let (name, inline) = match word(arg, only_paths, ArgError::cp)? {
            Word::Path(p) => {
                paths.push(PathBuf::from(p));
                continue;
            }
            Word::EndOfOptions => {
                only_paths = true;
                continue;
            }
            Word::Option { name, inline } => (name, inline),
        };
        match name.as_str() {
            "-h" | "--help" => return Ok(Command::CpHelp),
            "--json" => {
                no_value(&name, inline.as_ref(), ArgError::cp)?;
                json = true;
            }
            "--runtime" => {
                let v = value(&name, inline, &mut args, ArgError::cp)?;
                runtime = runtime_choice(&v, ArgError::cp)?;
            }
            "--chunk" => {
                let v = value(&name, inline, &mut args, ArgError::cp)?;
                chunk = parse_chunk(&v)?;
            }
            _ => return Err(ArgError::cp(format!("unknown option {name:?}"))),
        }
    }
    let mut paths = paths.into_iter();
    match (paths.next(), paths.next(), paths.next()) {
        (Some(src), Some(dst), None) => Ok(Command::Cp(CpArgs {
            json,
            runtime,
            chunk,
            src,
            dst,
        })),
        (None, _, _) => Err(ArgError::cp("cp needs SRC and DST".into())),
        (Some(_), None, _) => Err(ArgError::cp("cp needs DST after SRC".into())),
        (Some(_), Some(_), Some(extra)) => Err(ArgError::cp(format!(
            "cp takes one SRC and one DST; {} is one path too many",
            quote(extra.as_os_str())
        ))),
    }
}

fn parse_chunk(value: &str) -> Result<u64, ArgError> {
    let n = parse_size(value).map_err(|why| {
        ArgError::cp(format!(
            "--chunk: {value:?} is not a number of bytes ({why}); use a whole number, \
             optionally followed by K, KiB, M, MiB, G or GiB"
        ))
    })?;
    if n == 0 || n % CHUNK_UNIT != 0 || n > MAX_CHUNK {
        return Err(ArgError::cp(format!(
            "--chunk: {value:?} is not valid; expected {}",
            expected("--chunk")
        )));
    }
    Ok(n)
}

fn parse_bench(mut args: impl Iterator<Item = OsString>) -> Result<Command, ArgError> {
    let mut out = BenchArgs::default();
    while let Some(arg) = args.next() {
        let (name, inline) = match word(arg, false, ArgError::bench)? {
            Word::Path(p) => {
                return Err(ArgError::bench(format!(
                    "bench takes no PATH ({}); use --file PATH",
                    quote(&p)
                )));
            }
            Word::EndOfOptions => {
                return Err(ArgError::bench(
                    "bench takes no PATH; use --file PATH".into(),
                ));
            }
            Word::Option { name, inline } => (name, inline),
        };
        let flag = |set: &mut bool| {
            no_value(&name, inline.as_ref(), ArgError::bench)?;
            *set = true;
            Ok::<(), ArgError>(())
        };
        match name.as_str() {
            "-h" | "--help" => return Ok(Command::BenchHelp),
            "--json" => flag(&mut out.json)?,
            "--limits" => flag(&mut out.limits)?,
            "--overwrite" => flag(&mut out.overwrite)?,
            "--cold" | "--hot" => {
                no_value(&name, inline.as_ref(), ArgError::bench)?;
                out.cache = if name == "--cold" {
                    Cache::Cold
                } else {
                    Cache::Hot
                };
            }
            "--file" => {
                let v = path_value(&name, inline, &mut args)?;
                if v.is_empty() {
                    return Err(ArgError::bench("--file needs a non-empty PATH".into()));
                }
                out.file = PathBuf::from(v);
            }
            "--op" | "--backend" | "--runtime" | "--size" | "--io-size" | "--threads"
            | "--runs" | "--devices" => {
                let v = value(&name, inline, &mut args, ArgError::bench)?;
                set_bench(&mut out, &name, &v)?;
            }
            _ => return Err(ArgError::bench(format!("unknown option {name:?}"))),
        }
    }
    Ok(Command::Bench(out))
}

/// The value of `--file`, which need not be valid text.
fn path_value(
    name: &str,
    inline: Option<String>,
    args: &mut impl Iterator<Item = OsString>,
) -> Result<OsString, ArgError> {
    match inline {
        Some(v) => Ok(OsString::from(v)),
        None => args
            .next()
            .ok_or_else(|| ArgError::bench(format!("{name} needs a value (a PATH)"))),
    }
}

fn set_bench(out: &mut BenchArgs, name: &str, value: &str) -> Result<(), ArgError> {
    let bad = || {
        ArgError::bench(format!(
            "{name}: {value:?} is not valid; expected {}",
            expected(name)
        ))
    };
    let bytes = || {
        parse_size(value).map_err(|why| {
            ArgError::bench(format!(
                "{name}: {value:?} is not a number of bytes ({why}); use a whole number, \
                 optionally followed by K, KiB, M, MiB, G or GiB"
            ))
        })
    };
    match name {
        "--op" => out.op = op_named(value).ok_or_else(bad)?,
        "--backend" => {
            out.backend = match value {
                "auto" => BackendChoice::Auto,
                "fallback" => BackendChoice::Fallback,
                "fastpath" => BackendChoice::Fastpath,
                _ => return Err(bad()),
            }
        }
        "--runtime" => out.runtime = runtime_choice(value, ArgError::bench)?,
        "--size" => {
            out.size = bytes()?;
            if out.size == 0 || out.size > i64::MAX as u64 {
                return Err(ArgError::bench(format!(
                    "--size: {value:?} is not valid; expected a number of bytes, at least 1"
                )));
            }
        }
        "--io-size" => {
            out.io_size = bytes()?;
            if out.io_size == 0 || out.io_size > MAX_CHUNK {
                return Err(bad());
            }
        }
        "--threads" => {
            out.threads = value
                .parse()
                .ok()
                .filter(|n| (1..=BenchArgs::MAX_THREADS).contains(n))
                .ok_or_else(bad)?;
        }
        "--runs" => {
            out.runs = value
                .parse()
                .ok()
                .filter(|n| (1..=BenchArgs::MAX_RUNS).contains(n))
                .ok_or_else(bad)?;
        }
        "--devices" => out.devices = Some(parse_devices(value)?),
        _ => return Err(ArgError::bench(format!("unknown option {name:?}"))),
    }
    Ok(())
}

/// Parses the value of `--devices`: `all`, or distinct device numbers from 0 to
/// [`BenchArgs::MAX_DEVICE`] separated by commas.
fn parse_devices(value: &str) -> Result<Devices, ArgError> {
    let bad = |why: String| {
        ArgError::bench(format!(
            "--devices: {value:?} is not valid ({why}); expected {}",
            expected("--devices")
        ))
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

fn parse_check(mut args: impl Iterator<Item = OsString>) -> Result<Command, ArgError> {
    let mut out = CheckArgs::default();
    let mut only_paths = false;
    while let Some(arg) = args.next() {
        let (name, inline) = match word(arg, only_paths, ArgError::check)? {
            Word::Path(p) => {
                out.paths.push(PathBuf::from(p));
                continue;
            }
            Word::EndOfOptions => {
                only_paths = true;
                continue;
            }
            Word::Option { name, inline } => (name, inline),
        };
        match name.as_str() {
            "-h" | "--help" => return Ok(Command::CheckHelp),
            "--json" => {
                no_value(&name, inline.as_ref(), ArgError::check)?;
                out.json = true;
            }
            "--runtime" => {
                let v = value(&name, inline, &mut args, ArgError::check)?;
                out.runtime = runtime_choice(&v, ArgError::check)?;
            }
            "--op" | "--size" | "--offset" | "--buffer-offset" | "--buffer-align" | "--memory" => {
                let v = value(&name, inline, &mut args, ArgError::check)?;
                set(&mut out, &name, &v)?;
            }
            _ => return Err(ArgError::check(format!("unknown option {name:?}"))),
        }
    }
    if out.paths.is_empty() {
        return Err(ArgError::check("check needs at least one PATH".into()));
    }
    Ok(Command::Check(out))
}

fn expected(name: &str) -> &'static str {
    match name {
        "--op" => "read or write",
        "--memory" => "device, host or managed",
        "--buffer-align" => "a number of bytes, at least 1",
        "--runtime" => "auto or emulated",
        "--chunk" => "a number of bytes, a multiple of 4096 from 4096 to 2147479552",
        "--io-size" => "a number of bytes from 1 to 2147479552",
        "--threads" => "a whole number from 1 to 1024",
        "--runs" => "a whole number from 1 to 1000",
        "--devices" => "all, or device numbers from 0 to 1023 separated by commas, each once",
        "--backend" => "auto, fallback or fastpath",
        _ => "a number of bytes",
    }
}

/// The direction spelled `value` (`read` or `write`, as `Op::as_str` spells it).
fn op_named(value: &str) -> Option<Op> {
    [Op::Read, Op::Write]
        .into_iter()
        .find(|op| op.as_str() == value)
}

fn set(out: &mut CheckArgs, name: &str, value: &str) -> Result<(), ArgError> {
    let bad = || {
        ArgError::check(format!(
            "{name}: {value:?} is not valid; expected {}",
            expected(name)
        ))
    };
    match name {
        "--op" => out.op = op_named(value).ok_or_else(bad)?,
        "--memory" => {
            out.memory = match value {
                "device" => MemoryKind::Device,
                "host" => MemoryKind::Host,
                "managed" => MemoryKind::Managed,
                _ => return Err(bad()),
            }
        }
        _ => {
            let n = parse_size(value).map_err(|why| {
                ArgError::check(format!(
                    "{name}: {value:?} is not a number of bytes ({why}); use a whole number, \
                     optionally followed by K, KiB, M, MiB, G or GiB"
                ))
            })?;
            match name {
                "--size" => out.size = n,
                "--offset" => out.file_offset = n,
                "--buffer-offset" => out.buffer_offset = n,
                _ if n == 0 => return Err(bad()),
                _ => out.buffer_align = n,
            }
        }
    }
    Ok(())
}

/// Parses a byte count: ASCII digits, then optionally `K`/`KiB`, `M`/`MiB` or `G`/`GiB`
/// (case-insensitive), each a power of 1024.
///
/// # Errors
///
/// Says why the text is not a byte count: empty, not digits, an unknown suffix, or too large.
pub fn parse_size(text: &str) -> Result<u64, &'static str> {
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(digits_end);
    if digits.is_empty() {
        return Err(if text.is_empty() {
            "empty"
        } else {
            "not a whole number"
        });
    }
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" => 0,
        "k" | "kib" => 10,
        "m" | "mib" => 20,
        "g" | "gib" => 30,
        _ => return Err("unknown suffix"),
    };
    let n: u64 = digits.parse().map_err(|_| "too large")?;
    n.checked_mul(1 << shift).ok_or("too large")
}

fn quote(s: &OsStr) -> String {
    format!("{:?}", s.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_strs(args: &[&str]) -> Result<Command, ArgError> {
        parse(args.iter().map(OsString::from))
    }

    fn check(args: &[&str]) -> CheckArgs {
        let mut all = vec!["check"];
        all.extend_from_slice(args);
        match parse_strs(&all) {
            Ok(Command::Check(c)) => c,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn error(args: &[&str]) -> String {
        match parse_strs(args) {
            Err(e) => e.to_string(),
            Ok(c) => panic!("{args:?} parsed as {c:?}"),
        }
    }

    #[test]
    fn defaults_are_a_1mib_device_read_at_offset_0() {
        let c = check(&["f"]);
        assert_eq!(
            c,
            CheckArgs {
                paths: vec![PathBuf::from("f")],
                ..CheckArgs::default()
            }
        );
        assert_eq!(
            (c.size, c.file_offset, c.buffer_offset, c.buffer_align),
            (1 << 20, 0, 0, 4096)
        );
        assert_eq!(
            (c.op, c.memory, c.json),
            (Op::Read, MemoryKind::Device, false)
        );
    }

    #[test]
    fn every_option_with_separate_or_inline_values() {
        let c = check(&[
            "--json",
            "a",
            "--op",
            "write",
            "--size=4K",
            "--offset",
            "512",
            "--buffer-offset=1",
            "--buffer-align",
            "3",
            "--memory",
            "managed",
            "b",
        ]);
        assert!(c.json);
        assert_eq!(c.op, Op::Write);
        assert_eq!(
            (c.size, c.file_offset, c.buffer_offset, c.buffer_align),
            (4096, 512, 1, 3)
        );
        assert_eq!(c.memory, MemoryKind::Managed);
        assert_eq!(c.paths, [PathBuf::from("a"), PathBuf::from("b")]);
        assert_eq!(check(&["--memory=host", "x"]).memory, MemoryKind::Host);
    }

    #[test]
    fn double_dash_ends_options() {
        let c = check(&["--", "--json", "-"]);
        assert!(!c.json);
        assert_eq!(c.paths, [PathBuf::from("--json"), PathBuf::from("-")]);
    }

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("123"), Ok(123));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("1mib"), Ok(1 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
    }

    #[test]
    fn bad_sizes_say_why() {
        assert_eq!(parse_size(""), Err("empty"));
        assert_eq!(parse_size("abc"), Err("not a whole number"));
        assert_eq!(parse_size("-1"), Err("not a whole number"));
        assert_eq!(parse_size("+1"), Err("not a whole number"));
        assert_eq!(parse_size(" 1"), Err("not a whole number"));
        assert_eq!(parse_size("1.5M"), Err("unknown suffix"));
        assert_eq!(parse_size("1T"), Err("unknown suffix"));
        assert_eq!(parse_size("1 K"), Err("unknown suffix"));
        assert_eq!(parse_size("18446744073709551616"), Err("too large"));
        assert_eq!(parse_size("17179869184G"), Err("too large"));
    }

    #[test]
    fn help_and_version() {
        assert_eq!(parse_strs(&["--help"]), Ok(Command::Help));
        assert_eq!(parse_strs(&["-h"]), Ok(Command::Help));
        assert_eq!(parse_strs(&["help"]), Ok(Command::Help));
        assert_eq!(parse_strs(&["--version"]), Ok(Command::Version));
        assert_eq!(parse_strs(&["-V"]), Ok(Command::Version));
        assert_eq!(parse_strs(&["check", "--help"]), Ok(Command::CheckHelp));
        assert_eq!(parse_strs(&["check", "x", "-h"]), Ok(Command::CheckHelp));
    }

    #[test]
    fn errors_name_the_problem() {
        let e = error(&[]);
        assert!(
            e.contains("no command") && e.contains("hipfile --help"),
            "{e}"
        );
        let e = error(&["chek"]);
        assert!(e.contains("unknown command \"chek\""), "{e}");
        let e = error(&["check", "--frobnicate", "x"]);
        assert!(
            e.contains("unknown option \"--frobnicate\"") && e.contains("hipfile check --help"),
            "{e}"
        );
        let e = error(&["check", "-j", "x"]);
        assert!(e.contains("unknown option \"-j\""), "{e}");
        let e = error(&["check", "--size", "abc", "x"]);
        assert!(e.contains("--size") && e.contains("\"abc\""), "{e}");
        let e = error(&["check", "--memory", "gpu", "x"]);
        assert!(
            e.contains("--memory")
                && e.contains("\"gpu\"")
                && e.contains("device, host or managed"),
            "{e}"
        );
        let e = error(&["check", "--op", "copy", "x"]);
        assert!(
            e.contains("--op") && e.contains("\"copy\"") && e.contains("read or write"),
            "{e}"
        );
        let e = error(&["check", "x", "--offset"]);
        assert!(e.contains("--offset needs a value"), "{e}");
        let e = error(&["check", "--buffer-align", "0", "x"]);
        assert!(
            e.contains("--buffer-align") && e.contains("at least 1"),
            "{e}"
        );
        let e = error(&["check", "--json=yes", "x"]);
        assert!(e.contains("--json takes no value"), "{e}");
        let e = error(&["check", "--json"]);
        assert!(e.contains("at least one PATH"), "{e}");
        let e = error(&["check"]);
        assert!(e.contains("at least one PATH"), "{e}");
    }

    fn cp(args: &[&str]) -> CpArgs {
        let mut all = vec!["cp"];
        all.extend_from_slice(args);
        match parse_strs(&all) {
            Ok(Command::Cp(c)) => c,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn runtime_is_auto_unless_asked() {
        assert_eq!(check(&["f"]).runtime, RuntimeChoice::Auto);
        assert_eq!(
            check(&["--runtime", "emulated", "f"]).runtime,
            RuntimeChoice::Emulated
        );
        assert_eq!(check(&["--runtime=auto", "f"]).runtime, RuntimeChoice::Auto);
        let e = error(&["check", "--runtime", "cuda", "f"]);
        assert!(
            e.contains("--runtime") && e.contains("\"cuda\"") && e.contains("auto or emulated"),
            "{e}"
        );
    }

    #[test]
    fn cp_takes_src_dst_and_options_anywhere() {
        let c = cp(&["a", "b"]);
        assert_eq!(
            c,
            CpArgs {
                json: false,
                runtime: RuntimeChoice::Auto,
                chunk: 64 << 20,
                src: PathBuf::from("a"),
                dst: PathBuf::from("b"),
            }
        );
        let c = cp(&["--json", "a", "--chunk", "64K", "b", "--runtime=emulated"]);
        assert!(c.json);
        assert_eq!(c.chunk, 65536);
        assert_eq!(c.runtime, RuntimeChoice::Emulated);
        assert_eq!((c.src, c.dst), (PathBuf::from("a"), PathBuf::from("b")));
        let c = cp(&["--chunk=4096", "--", "-a", "--json"]);
        assert!(!c.json);
        assert_eq!(c.chunk, 4096);
        assert_eq!(
            (c.src, c.dst),
            (PathBuf::from("-a"), PathBuf::from("--json"))
        );
        assert_eq!(cp(&["--chunk", "2147479552", "a", "b"]).chunk, MAX_CHUNK);
        assert_eq!(parse_strs(&["cp", "--help"]), Ok(Command::CpHelp));
        assert_eq!(parse_strs(&["cp", "a", "-h"]), Ok(Command::CpHelp));
    }

    #[test]
    fn cp_errors_name_the_problem() {
        for chunk in ["0", "1000", "4097", "2147483648", "4G"] {
            let e = error(&["cp", "--chunk", chunk, "a", "b"]);
            assert!(
                e.contains("--chunk")
                    && e.contains("multiple of 4096")
                    && e.contains("hipfile cp --help"),
                "{chunk}: {e}"
            );
        }
        let e = error(&["cp", "--chunk", "x", "a", "b"]);
        assert!(e.contains("--chunk") && e.contains("\"x\""), "{e}");
        let e = error(&["cp", "a", "b", "--chunk"]);
        assert!(e.contains("--chunk needs a value"), "{e}");
        let e = error(&["cp"]);
        assert!(e.contains("SRC and DST"), "{e}");
        let e = error(&["cp", "a"]);
        assert!(e.contains("needs DST"), "{e}");
        let e = error(&["cp", "a", "b", "c"]);
        assert!(e.contains("\"c\"") && e.contains("too many"), "{e}");
        let e = error(&["cp", "--op", "read", "a", "b"]);
        assert!(e.contains("unknown option \"--op\""), "{e}");
        let e = error(&["cp", "--json=1", "a", "b"]);
        assert!(e.contains("--json takes no value"), "{e}");
        let e = error(&["cp", "--runtime", "x", "a", "b"]);
        assert!(
            e.contains("auto or emulated") && e.contains("hipfile cp --help"),
            "{e}"
        );
    }

    fn bench(args: &[&str]) -> BenchArgs {
        let mut all = vec!["bench"];
        all.extend_from_slice(args);
        match parse_strs(&all) {
            Ok(Command::Bench(b)) => b,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn bench_defaults_and_options() {
        assert_eq!(bench(&[]), BenchArgs::default());
        let d = BenchArgs::default();
        assert_eq!(
            (d.size, d.io_size, d.threads, d.runs),
            (8 << 30, 1 << 30, 1, 3)
        );
        assert_eq!((d.cache, d.backend), (Cache::Hot, BackendChoice::Auto));
        assert_eq!(d.file, PathBuf::from("hipfile-bench.dat"));
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
            b,
            BenchArgs {
                op: Op::Write,
                size: 8 << 20,
                io_size: 1 << 20,
                threads: 4,
                devices: Some(Devices::List(vec![2, 0])),
                cache: Cache::Cold,
                backend: BackendChoice::Fallback,
                limits: true,
                json: true,
                file: PathBuf::from("x.dat"),
                overwrite: true,
                runs: 5,
                runtime: RuntimeChoice::Emulated,
            }
        );
        assert_eq!(bench(&["--cold", "--hot"]).cache, Cache::Hot);
        assert_eq!(
            bench(&["--backend=fastpath"]).backend,
            BackendChoice::Fastpath
        );
        assert_eq!(parse_strs(&["bench", "--help"]), Ok(Command::BenchHelp));
    }

    #[test]
    fn bench_devices_are_all_or_a_list() {
        assert_eq!(bench(&[]).devices, None);
        assert_eq!(bench(&["--devices", "all"]).devices, Some(Devices::All));
        assert_eq!(
            bench(&["--devices=3"]).devices,
            Some(Devices::List(vec![3]))
        );
        assert_eq!(
            bench(&["--devices", "0,1,3"]).devices,
            Some(Devices::List(vec![0, 1, 3]))
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
    fn bench_errors_name_the_problem() {
        for (args, want) in [
            (&["--threads", "0"][..], "from 1 to 1024"),
            (&["--threads", "1025"], "from 1 to 1024"),
            (&["--runs", "0"], "from 1 to 1000"),
            (&["--io-size", "0"], "from 1 to 2147479552"),
            (&["--io-size", "4G"], "from 1 to 2147479552"),
            (&["--size", "0"], "at least 1"),
            (&["--size", "x"], "not a number of bytes"),
            (&["--backend", "gpu"], "auto, fallback or fastpath"),
            (&["--op", "copy"], "read or write"),
            (&["--runtime", "cuda"], "auto or emulated"),
            (&["--devices", ""], "(empty)"),
            (&["--devices", "1,1"], "device 1 is named twice"),
            (&["--devices", "x"], "\"x\" is not a device number"),
            (&["--devices", "0,"], "\"\" is not a device number"),
            (&["--devices", ",0"], "\"\" is not a device number"),
            (&["--devices", "0, 1"], "\" 1\" is not a device number"),
            (&["--devices", "-1"], "\"-1\" is not a device number"),
            (&["--devices", "+1"], "\"+1\" is not a device number"),
            (&["--devices", "1024"], "\"1024\" is not a device number"),
            (&["--devices", "99999999999"], "from 0 to 1023"),
            (&["--devices", "ALL"], "from 0 to 1023"),
            (
                &["--devices"],
                "--devices needs a value (all, or device numbers",
            ),
            (&["--file", ""], "non-empty PATH"),
            (&["--file"], "--file needs a value"),
            (&["--cold=1"], "--cold takes no value"),
            (&["--overwrite=yes"], "--overwrite takes no value"),
            (&["--frob", "1"], "unknown option \"--frob\""),
            (&["x"], "takes no PATH"),
            (&["--", "x"], "takes no PATH"),
        ] {
            let mut all = vec!["bench"];
            all.extend_from_slice(args);
            let e = error(&all);
            assert!(
                e.contains(want) && e.contains("hipfile bench --help"),
                "{args:?}: {e}"
            );
        }
    }

    #[test]
    fn non_utf8_paths_are_kept() {
        use std::os::unix::ffi::OsStringExt;
        let raw = OsString::from_vec(vec![b'a', 0xff, b'b']);
        let got = parse([OsString::from("check"), raw.clone()]).unwrap();
        let Command::Check(c) = got else {
            panic!("{got:?}")
        };
        assert_eq!(c.paths, [PathBuf::from(raw)]);
    }
}
