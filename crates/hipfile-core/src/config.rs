//! The configuration: the variables of docs/BEHAVIOUR.md §2, read once, overridable from code.
//!
//! This is the only module of hipfile that reads the environment (clippy's
//! `disallowed-methods` enforces it elsewhere). Besides the four backend and statistics variables
//! (docs/BEHAVIOUR.md §2) it reads the runtime-location variables that the loader needs:
//! `HIPFILE_HIP_LIBRARY` (an explicit path to the HIP runtime) and `ROCM_PATH`, and the fallback's
//! sizing knobs ([`FallbackKnobs`]): `HIPFILE_IO_THREADS`, `HIPFILE_TASK_SIZE`,
//! `HIPFILE_STAGING_MEMORY` and `HIPFILE_SMALL_IO_THRESHOLD`.

use crate::types::MemoryKind;
use std::collections::HashSet;
use std::fmt;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock, PoisonError};

/// `HIPFILE_ALLOW_COMPAT_MODE`: false disables the fallback (and so every retry).
pub const ENV_ALLOW_COMPAT_MODE: &str = "HIPFILE_ALLOW_COMPAT_MODE";
/// `HIPFILE_FORCE_COMPAT_MODE`: true disables the fastpath.
pub const ENV_FORCE_COMPAT_MODE: &str = "HIPFILE_FORCE_COMPAT_MODE";
/// `HIPFILE_UNSUPPORTED_FILE_SYSTEMS`: true lets the fastpath take regular files on any
/// filesystem.
pub const ENV_UNSUPPORTED_FILE_SYSTEMS: &str = "HIPFILE_UNSUPPORTED_FILE_SYSTEMS";
/// `HIPFILE_STATS_LEVEL`: 0 off, ≥ 1 counts bytes and operations per backend.
pub const ENV_STATS_LEVEL: &str = "HIPFILE_STATS_LEVEL";
/// `HIPFILE_HIP_LIBRARY`: an explicit path to the HIP runtime library.
pub const ENV_HIP_LIBRARY: &str = "HIPFILE_HIP_LIBRARY";
/// `ROCM_PATH`: the ROCm installation whose `lib/` is searched first.
pub const ENV_ROCM_PATH: &str = "ROCM_PATH";
/// `HIP_PLATFORM`: HIP's own switch, `amd` or `nvidia`; unset means try AMD, then NVIDIA.
pub const ENV_HIP_PLATFORM: &str = "HIP_PLATFORM";

/// `HIPFILE_IO_THREADS`: the fallback's I/O worker threads per driver.
pub const ENV_IO_THREADS: &str = "HIPFILE_IO_THREADS";
/// `HIPFILE_TASK_SIZE`: bytes per task a large fallback request is split into.
pub const ENV_TASK_SIZE: &str = "HIPFILE_TASK_SIZE";
/// `HIPFILE_STAGING_MEMORY`: the most pinned staging bytes the fallback of one driver holds.
pub const ENV_STAGING_MEMORY: &str = "HIPFILE_STAGING_MEMORY";
/// `HIPFILE_SMALL_IO_THRESHOLD`: fallback requests of at most this many bytes run on the
/// caller's thread.
pub const ENV_SMALL_IO_THRESHOLD: &str = "HIPFILE_SMALL_IO_THRESHOLD";
/// `HIPFILE_DURABLE_WRITES`: whether a write is on stable storage when the call returns (one
/// `fdatasync` per call, on either backend).
pub const ENV_DURABLE_WRITES: &str = "HIPFILE_DURABLE_WRITES";
/// `HIPFILE_COLD_DIRECT_READS`: whether large fallback reads take what the page cache does
/// not hold with `O_DIRECT`.
pub const ENV_COLD_DIRECT_READS: &str = "HIPFILE_COLD_DIRECT_READS";

/// `CUFILE_ENV_PATH_JSON`: NVIDIA cuFile's variable naming its configuration file, which
/// only `libcufile.so.0` reads ([`cufile_json_path`]).
pub const ENV_CUFILE_JSON: &str = "CUFILE_ENV_PATH_JSON";
/// `HIPFILE_CUFILE_SYSTEM_JSON`: the file `libcufile.so.0` reads when `CUFILE_ENV_PATH_JSON`
/// is unset, in place of [`CUFILE_SYSTEM_JSON`] (for tests, which must not depend on the
/// machine's `/etc`).
pub const ENV_CUFILE_SYSTEM_JSON: &str = "HIPFILE_CUFILE_SYSTEM_JSON";
/// NVIDIA cuFile's system-wide configuration file.
pub const CUFILE_SYSTEM_JSON: &str = "/etc/cufile.json";

/// Where cuFile's configuration file is, and whether a variable named it: the path in
/// `CUFILE_ENV_PATH_JSON` when it is set and not empty (`true`), else `/etc/cufile.json`, or
/// the path in `HIPFILE_CUFILE_SYSTEM_JSON` in its place (`false`). Only the cuFile library
/// asks (docs/decisions/cufile-json.md).
pub fn cufile_json_path() -> (PathBuf, bool) {
    cufile_json_path_with(read_process_env)
}

fn cufile_json_path_with(lookup: impl Fn(&str) -> Option<String>) -> (PathBuf, bool) {
    if let Some(p) = lookup(ENV_CUFILE_JSON).filter(|p| !p.is_empty()) {
        return (PathBuf::from(p), true);
    }
    let system = lookup(ENV_CUFILE_SYSTEM_JSON)
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| CUFILE_SYSTEM_JSON.to_string());
    (PathBuf::from(system), false)
}

/// How the fallback backend sizes its work: worker threads, task size, pinned memory and the
/// size below which a request is not handed off at all.
///
/// Sizes are bytes; in the environment they may end in `K`, `M` or `G` (binary: 1024,
/// 1024², 1024³, case-insensitive, an optional `iB`/`B` after it). Each size has bounds
/// (the `MIN_*`/`MAX_*` constants): a value outside them in the environment warns and the
/// nearest bound is used; [`ConfigBuilder`]'s setters clamp to the same bounds. The fields
/// themselves are plain numbers: code that fills them in directly gets what it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct FallbackKnobs {
    /// I/O worker threads, created on the first large request and kept until the driver
    /// closes. Default: the machine's available parallelism clamped to
    /// 1..=[`FallbackKnobs::MAX_DEFAULT_IO_THREADS`] (docs/BENCHMARKS.md's reference measurements:
    /// page-cache reads scale to about 8–16 threads and stop there). Accepted:
    /// 1..=[`FallbackKnobs::MAX_IO_THREADS`].
    pub io_threads: usize,
    /// Bytes per task: a large request is cut at file offsets that are multiples of this
    /// (rounded up to 4096 by the fallback). Default [`FallbackKnobs::DEFAULT_TASK_SIZE`];
    /// accepted: [`FallbackKnobs::MIN_TASK_SIZE`]..=[`FallbackKnobs::MAX_TASK_SIZE`].
    pub task_size: u64,
    /// The most pinned staging memory the fallback of one driver holds, all threads and
    /// callers together; buffers are allocated as requests need them, up to this. Default
    /// [`FallbackKnobs::DEFAULT_STAGING_MEMORY`]; accepted:
    /// [`FallbackKnobs::MIN_STAGING_MEMORY`]..=[`FallbackKnobs::MAX_STAGING_MEMORY`].
    pub staging_memory: u64,
    /// Requests of at most this many bytes run on the caller's thread, with no hand-off to
    /// the workers. Default [`FallbackKnobs::DEFAULT_SMALL_IO_THRESHOLD`]; 0 hands off
    /// every request; accepted: up to [`FallbackKnobs::MAX_SMALL_IO_THRESHOLD`].
    pub small_io_threshold: u64,
    /// Whether a read above the small-request threshold takes the parts that are not in the
    /// page cache from the disk with `O_DIRECT` (aligned middle; head and tail buffered),
    /// when the file has a direct descriptor and the request's tasks are short (below
    /// 16 MiB per worker; along longer ones the kernel's readahead does better). Default on:
    /// measured on the GPU machine's disk, direct reads moved 64 MiB requests of an uncached
    /// file 18 % faster than buffered ones (docs/BENCHMARKS.md). Such reads leave the page
    /// cache as it was.
    pub cold_direct_reads: bool,
}

impl FallbackKnobs {
    /// 16: the default thread count never exceeds it, however many cores the machine has
    /// (docs/BENCHMARKS.md's reference measurements: 40.1 GB/s at 8 threads, 40.9 at 16).
    pub const MAX_DEFAULT_IO_THREADS: usize = 16;
    /// 1024: the most threads accepted from the environment.
    pub const MAX_IO_THREADS: usize = 1024;
    /// 4 MiB, the low end of the 4–16 MiB suggested beside docs/BENCHMARKS.md's reference
    /// measurements: a 64 MiB request keeps 16 workers busy. Measured on the H200 machine
    /// (docs/BENCHMARKS.md): 33.6 GB/s hot against 28.1 with 8 MiB and 29.4 with 2 MiB. The
    /// staging chunk is as large (4 MiB): such a task is one `pread` and one copy, and longer
    /// tasks alternate two buffers.
    pub const DEFAULT_TASK_SIZE: u64 = 4 << 20;
    /// 256 MiB of pinned memory per driver.
    pub const DEFAULT_STAGING_MEMORY: u64 = 256 << 20;
    /// 1 MiB: below this the hand-off to a worker and back costs more than it saves.
    pub const DEFAULT_SMALL_IO_THRESHOLD: u64 = 1 << 20;

    /// 4 KiB, the smallest task: tasks are cut at multiples of 4096 in file offsets.
    pub const MIN_TASK_SIZE: u64 = 4 << 10;
    /// 1 GiB, the largest task: half the most one call moves (`MAX_IO_SIZE`, just under
    /// 2 GiB), so that a request can still be split; larger tasks only keep workers from
    /// sharing a request.
    pub const MAX_TASK_SIZE: u64 = 1 << 30;
    /// 4 KiB, the smallest staging budget: one page-sized buffer.
    pub const MIN_STAGING_MEMORY: u64 = 4 << 10;
    /// 64 GiB, the largest staging budget: twice what the most workers can hold at once
    /// (1024 threads × 2 buffers × 16 MiB chunks), the rest for callers' small requests.
    /// Pinned memory cannot be swapped out; a budget beyond this would let a typo lock the
    /// machine's memory.
    pub const MAX_STAGING_MEMORY: u64 = 64 << 30;
    /// 1 GiB, the largest small-request threshold: larger requests are always spread over
    /// the workers (`HIPFILE_IO_THREADS=1` serves them on one worker, still overlapping
    /// file I/O with copies).
    pub const MAX_SMALL_IO_THRESHOLD: u64 = 1 << 30;

    /// The default thread count for this machine, found once per process:
    /// `available_parallelism` reads the cgroup limits, about 37 µs a call on the CPU
    /// machine, which was most of the cost of settling a `Config`.
    pub fn default_io_threads() -> usize {
        static THREADS: OnceLock<usize> = OnceLock::new();
        *THREADS.get_or_init(|| {
            std::thread::available_parallelism()
                .map_or(1, usize::from)
                .clamp(1, Self::MAX_DEFAULT_IO_THREADS)
        })
    }
}

impl Default for FallbackKnobs {
    fn default() -> Self {
        FallbackKnobs {
            io_threads: Self::default_io_threads(),
            task_size: Self::DEFAULT_TASK_SIZE,
            staging_memory: Self::DEFAULT_STAGING_MEMORY,
            small_io_threshold: Self::DEFAULT_SMALL_IO_THRESHOLD,
            cold_direct_reads: true,
        }
    }
}

/// Why a text is not a byte count ([`parse_size`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum SizeError {
    /// Nothing but whitespace.
    #[error("empty")]
    Empty,
    /// It does not start with an ASCII digit (a sign, a letter, a decimal point first).
    #[error("not a whole number")]
    NotAWholeNumber,
    /// Digits followed by something that is not one of the suffixes.
    #[error("unknown suffix")]
    UnknownSuffix,
    /// More than `u64::MAX` bytes.
    #[error("too large")]
    TooLarge,
}

/// Parses a byte count, the one grammar of the environment and the command line: ASCII
/// digits, then optionally a suffix `K`, `KB`, `KiB`, `M`, `MB`, `MiB`, `G`, `GB`, `GiB`, `T`,
/// `TB` or `TiB` in any case, each a power of 1024; surrounding whitespace is ignored.
///
/// `KB` means 1024 as in cuFile's and hipFile's own configuration, so that a value copied from
/// theirs means the same here (docs/decisions/byte-size-grammar.md).
///
/// # Errors
///
/// [`SizeError`] says why the text is not a byte count.
pub fn parse_size(value: &str) -> Result<u64, SizeError> {
    let text = value.trim();
    if text.is_empty() {
        return Err(SizeError::Empty);
    }
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, suffix) = text.split_at(digits_end);
    if digits.is_empty() {
        return Err(SizeError::NotAWholeNumber);
    }
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(SizeError::UnknownSuffix),
    };
    // Only digits remain, so the one way `parse` fails is an overflow.
    let n: u64 = digits.parse().map_err(|_| SizeError::TooLarge)?;
    n.checked_mul(1 << shift).ok_or(SizeError::TooLarge)
}

/// Which GPU platform to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum PlatformChoice {
    /// AMD's runtime if one loads, else NVIDIA's.
    #[default]
    Auto,
    /// Only AMD's HIP runtime (or a library with its ABI, such as the emulated one).
    Amd,
    /// Only NVIDIA's CUDA runtime.
    Nvidia,
}

/// Which kinds of memory a driver's requests may use, and which of them may be registered:
/// the rule of the library a driver serves (docs/BEHAVIOUR.md §3.6). Set in code only
/// ([`ConfigBuilder::memory_types`]): it is a library's contract with its callers, not a
/// setting of the machine, so no environment variable changes it.
///
/// The fastpath serves device memory only, whatever the rule (`hipAmdFileRead` moves data
/// between storage and GPU memory); the rule decides what the fallback serves and what
/// registration accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum MemoryTypes {
    /// hipFile's rule (the default, and `libhipfile.so.0`'s): device memory only, registered
    /// or not. Registering other memory is [`Error::MemoryTypeInvalid`](crate::Error), and
    /// both backends refuse requests on it (`buffer_not_device_memory`).
    #[default]
    HipFile,
    /// NVIDIA cuFile's rule (as of cuFile 1.15, `libcufile.so.0`'s): device memory and host
    /// memory (pinned by the runtime, registered with it, or plain pageable memory), registered
    /// or not; managed memory unregistered only (registering it is
    /// [`Error::MemoryTypeInvalid`](crate::Error)). The fallback reads and writes host memory
    /// in place and moves managed memory through its staging buffers with the runtime's
    /// copies, as it does device memory. docs/decisions/memory-types.md gives NVIDIA's
    /// behaviour this follows.
    CuFile,
}

impl MemoryTypes {
    /// Whether requests may use memory of `kind`, registered or not.
    pub fn serves(self, kind: MemoryKind) -> bool {
        match self {
            MemoryTypes::HipFile => kind == MemoryKind::Device,
            MemoryTypes::CuFile => !matches!(kind, MemoryKind::Array),
        }
    }

    /// Whether memory of `kind` may be registered.
    pub fn registers(self, kind: MemoryKind) -> bool {
        match self {
            MemoryTypes::HipFile => kind == MemoryKind::Device,
            MemoryTypes::CuFile => matches!(
                kind,
                MemoryKind::Device | MemoryKind::Host | MemoryKind::Unregistered
            ),
        }
    }

    /// Why memory of `kind` cannot be registered under this rule, for an error message (the
    /// rule accepts the kind: an empty text).
    pub fn refusal(self, kind: MemoryKind) -> &'static str {
        match (self, kind) {
            _ if self.registers(kind) => "",
            (MemoryTypes::CuFile, MemoryKind::Managed | MemoryKind::Unified) => {
                "managed memory cannot be registered (its pages move between host and GPU); \
                 pass it to reads and writes unregistered"
            }
            (MemoryTypes::CuFile, _) => "only device and host memory can be registered",
            (MemoryTypes::HipFile, _) => "only GPU device memory can be registered",
        }
    }

    /// `hipfile` or `cufile`: the library whose rule it is.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryTypes::HipFile => "hipfile",
            MemoryTypes::CuFile => "cufile",
        }
    }
}

/// The settled configuration of one driver.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// Whether the fallback backend may serve requests (and retries).
    pub allow_compat_mode: bool,
    /// Whether the fastpath is disabled.
    pub force_compat_mode: bool,
    /// Whether the fastpath accepts regular files on filesystems other than ext4
    /// `data=ordered` and xfs.
    pub unsupported_file_systems: bool,
    /// 0: no counters; ≥ 1: bytes and operations per backend.
    pub stats_level: u32,
    /// An explicit HIP runtime library to load instead of searching.
    pub hip_library: Option<PathBuf>,
    /// A ROCm installation to search first.
    pub rocm_path: Option<PathBuf>,
    /// Which platform to load.
    pub platform: PlatformChoice,
    /// Whether a write is durable when the call returns: one `fdatasync` per write call on
    /// the descriptor written, on either backend (docs/BEHAVIOUR.md §3.3). `O_DIRECT` alone
    /// bypasses the page cache but neither flushes the device's write cache nor makes an allocating
    /// write's metadata durable. Default true; false leaves flushing to the caller, as a plain
    /// `pwrite` does.
    pub durable_writes: bool,
    /// The fallback's threads, task size, staging memory and small-request threshold.
    pub fallback: FallbackKnobs,
    /// How many requests that do not block their caller (futures, batches, stream-ordered)
    /// are served at once: the facade's request threads. `None`: as many as the fallback's
    /// I/O threads, at most [`Config::DEFAULT_MAX_REQUEST_THREADS`]
    /// ([`Config::request_thread_count`]). Set in code only
    /// ([`ConfigBuilder::request_threads`]).
    pub request_threads: Option<usize>,
    /// Which kinds of memory requests may use and registration accepts. Default
    /// [`MemoryTypes::HipFile`] (device memory only). Set in code only
    /// ([`ConfigBuilder::memory_types`]).
    pub memory_types: MemoryTypes,
}

impl Default for Config {
    /// The defaults of docs/BEHAVIOUR.md §2, without looking at the environment.
    fn default() -> Self {
        Config {
            allow_compat_mode: true,
            force_compat_mode: false,
            unsupported_file_systems: false,
            stats_level: 0,
            hip_library: None,
            rocm_path: None,
            platform: PlatformChoice::Auto,
            durable_writes: true,
            fallback: FallbackKnobs::default(),
            request_threads: None,
            memory_types: MemoryTypes::HipFile,
        }
    }
}

impl Config {
    /// The configuration from the process environment, with the default for every invalid
    /// value; each warning is written to stderr once per process.
    pub fn from_env() -> Config {
        ConfigBuilder::new().build_from_env()
    }

    /// Whether this configuration leaves no backend at all (`FORCE=true` with `ALLOW=false`).
    pub fn leaves_no_backend(&self) -> bool {
        self.force_compat_mode && !self.allow_compat_mode
    }

    /// The fallback's sizing knobs.
    pub fn fallback_knobs(&self) -> FallbackKnobs {
        self.fallback
    }

    /// 8: the most requests that do not block their caller served at once by default. A
    /// small request holds its thread through its copy, and the runtime spins while it
    /// waits for one: on the 16-core GPU machine, 4 KiB random reads with 32 in flight ran
    /// at 0.88–0.90 of 32 raw threads with 8 at once, against 0.61–0.67 with 16 and
    /// 0.51–0.56 with 4 in the same call (docs/BENCHMARKS.md).
    pub const DEFAULT_MAX_REQUEST_THREADS: usize = 8;

    /// How many requests that do not block their caller a driver serves at once (at least
    /// one): [`Config::request_threads`] when set, else the fallback's I/O threads up to
    /// [`Config::DEFAULT_MAX_REQUEST_THREADS`]. The engine itself has as many threads as
    /// the larger of this and the I/O threads.
    pub fn request_thread_count(&self) -> usize {
        self.request_threads
            .unwrap_or_else(|| {
                self.fallback
                    .io_threads
                    .min(Self::DEFAULT_MAX_REQUEST_THREADS)
            })
            .max(1)
    }
}

/// A problem found while settling the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ConfigWarning {
    /// A variable held a value that is not one of the accepted spellings; the default applies.
    InvalidValue {
        /// The variable's name.
        variable: &'static str,
        /// What it held.
        value: String,
        /// What was used instead, as text.
        used: String,
        /// The accepted spellings.
        expected: &'static str,
        /// Why the value was refused, where the parser says more than "not valid".
        reason: Option<String>,
    },
    /// `HIPFILE_FORCE_COMPAT_MODE` is true and `HIPFILE_ALLOW_COMPAT_MODE` is false: no
    /// request can be served.
    NoBackend,
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigWarning::InvalidValue {
                variable,
                value,
                used,
                expected,
                reason: None,
            } => write!(
                f,
                "{variable}={value:?} is not valid (expected {expected}); using {used}"
            ),
            ConfigWarning::InvalidValue {
                variable,
                value,
                used,
                expected,
                reason: Some(reason),
            } => write!(
                f,
                "{variable}={value:?} is not valid ({reason}; expected {expected}); using {used}"
            ),
            ConfigWarning::NoBackend => f.write_str(
                "HIPFILE_FORCE_COMPAT_MODE=true disables the fastpath and HIPFILE_ALLOW_COMPAT_MODE=false \
                 disables the fallback: no I/O can be served; unset one of them",
            ),
        }
    }
}

const BOOL_SPELLINGS: &str = "true/false, 1/0, yes/no or on/off";

/// Parses a boolean in any of the spellings of docs/BEHAVIOUR.md §2, case-insensitively, ignoring
/// surrounding whitespace. `None` for anything else.
pub fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// Programmatic settings, which win over the environment; and, through
/// [`ConfigBuilder::defaults`], values the environment wins over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigBuilder {
    /// Values used where neither an override of this builder nor the environment gives one.
    defaults: Option<Box<ConfigBuilder>>,
    allow_compat_mode: Option<bool>,
    force_compat_mode: Option<bool>,
    unsupported_file_systems: Option<bool>,
    stats_level: Option<u32>,
    hip_library: Option<PathBuf>,
    rocm_path: Option<PathBuf>,
    platform: Option<PlatformChoice>,
    durable_writes: Option<bool>,
    io_threads: Option<usize>,
    task_size: Option<u64>,
    staging_memory: Option<u64>,
    small_io_threshold: Option<u64>,
    cold_direct_reads: Option<bool>,
    request_threads: Option<usize>,
    memory_types: Option<MemoryTypes>,
}

impl ConfigBuilder {
    /// No overrides: everything comes from the environment or the defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Values used where neither this builder's overrides nor the environment give one,
    /// instead of the built-in defaults (a configuration file's, below the environment). Its
    /// own values are settled as overrides are, clamped to the same bounds; its defaults, if
    /// any, are ignored.
    pub fn defaults(mut self, defaults: ConfigBuilder) -> Self {
        self.defaults = Some(Box::new(ConfigBuilder {
            defaults: None,
            ..defaults
        }));
        self
    }

    /// Overrides `HIPFILE_ALLOW_COMPAT_MODE`.
    pub fn allow_compat_mode(mut self, on: bool) -> Self {
        self.allow_compat_mode = Some(on);
        self
    }

    /// Overrides `HIPFILE_FORCE_COMPAT_MODE`.
    pub fn force_compat_mode(mut self, on: bool) -> Self {
        self.force_compat_mode = Some(on);
        self
    }

    /// Overrides `HIPFILE_UNSUPPORTED_FILE_SYSTEMS`.
    pub fn unsupported_file_systems(mut self, on: bool) -> Self {
        self.unsupported_file_systems = Some(on);
        self
    }

    /// Overrides `HIPFILE_STATS_LEVEL`.
    pub fn stats_level(mut self, level: u32) -> Self {
        self.stats_level = Some(level);
        self
    }

    /// Overrides `HIPFILE_HIP_LIBRARY`.
    pub fn hip_library(mut self, path: impl Into<PathBuf>) -> Self {
        self.hip_library = Some(path.into());
        self
    }

    /// Overrides `ROCM_PATH`.
    pub fn rocm_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.rocm_path = Some(path.into());
        self
    }

    /// Overrides `HIP_PLATFORM`.
    pub fn platform(mut self, platform: PlatformChoice) -> Self {
        self.platform = Some(platform);
        self
    }

    /// Sets [`Config::request_threads`], clamped to 1..=[`FallbackKnobs::MAX_IO_THREADS`]:
    /// how many requests that do not block their caller are served at once.
    pub fn request_threads(mut self, threads: usize) -> Self {
        self.request_threads = Some(threads.clamp(1, FallbackKnobs::MAX_IO_THREADS));
        self
    }

    /// Sets [`Config::memory_types`]: which kinds of memory requests may use and registration
    /// accepts ([`MemoryTypes::HipFile`] unless set).
    pub fn memory_types(mut self, rule: MemoryTypes) -> Self {
        self.memory_types = Some(rule);
        self
    }

    /// Overrides `HIPFILE_IO_THREADS`, clamped to 1..=[`FallbackKnobs::MAX_IO_THREADS`].
    pub fn io_threads(mut self, threads: usize) -> Self {
        self.io_threads = Some(threads.clamp(1, FallbackKnobs::MAX_IO_THREADS));
        self
    }

    /// Overrides `HIPFILE_TASK_SIZE`, in bytes, clamped to
    /// [`FallbackKnobs::MIN_TASK_SIZE`]..=[`FallbackKnobs::MAX_TASK_SIZE`] (the fallback
    /// rounds up to 4096).
    pub fn task_size(mut self, bytes: u64) -> Self {
        self.task_size =
            Some(bytes.clamp(FallbackKnobs::MIN_TASK_SIZE, FallbackKnobs::MAX_TASK_SIZE));
        self
    }

    /// Overrides `HIPFILE_STAGING_MEMORY`, in bytes, clamped to
    /// [`FallbackKnobs::MIN_STAGING_MEMORY`]..=[`FallbackKnobs::MAX_STAGING_MEMORY`].
    pub fn staging_memory(mut self, bytes: u64) -> Self {
        self.staging_memory = Some(bytes.clamp(
            FallbackKnobs::MIN_STAGING_MEMORY,
            FallbackKnobs::MAX_STAGING_MEMORY,
        ));
        self
    }

    /// Overrides `HIPFILE_SMALL_IO_THRESHOLD`, in bytes, at most
    /// [`FallbackKnobs::MAX_SMALL_IO_THRESHOLD`].
    pub fn small_io_threshold(mut self, bytes: u64) -> Self {
        self.small_io_threshold = Some(bytes.min(FallbackKnobs::MAX_SMALL_IO_THRESHOLD));
        self
    }

    /// Overrides `HIPFILE_DURABLE_WRITES`.
    pub fn durable_writes(mut self, on: bool) -> Self {
        self.durable_writes = Some(on);
        self
    }

    /// Overrides `HIPFILE_COLD_DIRECT_READS`.
    pub fn cold_direct_reads(mut self, on: bool) -> Self {
        self.cold_direct_reads = Some(on);
        self
    }

    /// Settles the configuration from the process environment; warnings go to stderr, each
    /// one once per process.
    pub fn build_from_env(self) -> Config {
        let (config, warnings) = self.build_with(read_process_env);
        for w in &warnings {
            warn_once(w);
        }
        config
    }

    /// Settles the configuration from `lookup` (a variable's name → its value), returning
    /// every warning instead of printing it. Overrides win; a variable that is overridden is
    /// not even parsed.
    pub fn build_with(
        self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> (Config, Vec<ConfigWarning>) {
        let mut warnings = Vec::new();
        let defaults = match self.defaults {
            Some(d) => d.build_with(no_environment).0,
            None => Config::default(),
        };
        let mut boolean = |over: Option<bool>, variable: &'static str, default: bool| {
            over.unwrap_or_else(|| match lookup(variable) {
                None => default,
                Some(v) => parse_bool(&v).unwrap_or_else(|| {
                    warnings.push(ConfigWarning::InvalidValue {
                        variable,
                        value: v,
                        used: default.to_string(),
                        expected: BOOL_SPELLINGS,
                        reason: None,
                    });
                    default
                }),
            })
        };
        let allow_compat_mode = boolean(
            self.allow_compat_mode,
            ENV_ALLOW_COMPAT_MODE,
            defaults.allow_compat_mode,
        );
        let force_compat_mode = boolean(
            self.force_compat_mode,
            ENV_FORCE_COMPAT_MODE,
            defaults.force_compat_mode,
        );
        let unsupported_file_systems = boolean(
            self.unsupported_file_systems,
            ENV_UNSUPPORTED_FILE_SYSTEMS,
            defaults.unsupported_file_systems,
        );
        let durable_writes = boolean(
            self.durable_writes,
            ENV_DURABLE_WRITES,
            defaults.durable_writes,
        );
        let cold_direct_reads = boolean(
            self.cold_direct_reads,
            ENV_COLD_DIRECT_READS,
            defaults.fallback.cold_direct_reads,
        );
        let stats_level = self
            .stats_level
            .unwrap_or_else(|| match lookup(ENV_STATS_LEVEL) {
                None => defaults.stats_level,
                Some(v) => v.trim().parse::<u32>().unwrap_or_else(|_| {
                    warnings.push(ConfigWarning::InvalidValue {
                        variable: ENV_STATS_LEVEL,
                        value: v,
                        used: defaults.stats_level.to_string(),
                        expected: "a non-negative integer",
                        reason: None,
                    });
                    defaults.stats_level
                }),
            });
        let path = |over: Option<PathBuf>, variable: &str, default: Option<PathBuf>| {
            over.or_else(|| {
                lookup(variable)
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            })
            .or(default)
        };
        let platform = self
            .platform
            .unwrap_or_else(|| match lookup(ENV_HIP_PLATFORM) {
                None => defaults.platform,
                Some(v) => match v.trim().to_ascii_lowercase().as_str() {
                    "" => defaults.platform,
                    "amd" | "hcc" => PlatformChoice::Amd,
                    "nvidia" | "nvcc" => PlatformChoice::Nvidia,
                    _ => {
                        warnings.push(ConfigWarning::InvalidValue {
                            variable: ENV_HIP_PLATFORM,
                            value: v,
                            used: "automatic (AMD, then NVIDIA)".into(),
                            expected: "amd or nvidia",
                            reason: None,
                        });
                        PlatformChoice::Auto
                    }
                },
            });
        let knobs = defaults.fallback;
        // A value that does not parse keeps the default; one that parses but lies outside
        // `bounds` is replaced by the nearest bound. Both warn; the first with the parser's
        // reason when it gives one.
        let mut number = |over: Option<u64>,
                          variable: &'static str,
                          default: u64,
                          parse: fn(&str) -> Result<u64, Option<String>>,
                          bounds: (u64, u64),
                          expected: &'static str| {
            over.unwrap_or_else(|| match lookup(variable) {
                None => default,
                Some(v) => {
                    let (used, valid, reason) = match parse(&v) {
                        Err(reason) => (default, false, reason),
                        Ok(n) => {
                            let clamped = n.clamp(bounds.0, bounds.1);
                            (clamped, clamped == n, None)
                        }
                    };
                    if !valid {
                        warnings.push(ConfigWarning::InvalidValue {
                            variable,
                            value: v,
                            used: used.to_string(),
                            expected,
                            reason,
                        });
                    }
                    used
                }
            })
        };
        let threads = |v: &str| {
            v.trim()
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=FallbackKnobs::MAX_IO_THREADS as u64).contains(n))
                .ok_or(None)
        };
        let size = |v: &str| parse_size(v).map_err(|e| Some(e.to_string()));
        let io_threads = number(
            self.io_threads.map(|n| n as u64),
            ENV_IO_THREADS,
            knobs.io_threads as u64,
            threads,
            (1, FallbackKnobs::MAX_IO_THREADS as u64),
            "an integer from 1 to 1024",
        ) as usize;
        let task_size = number(
            self.task_size,
            ENV_TASK_SIZE,
            knobs.task_size,
            size,
            (FallbackKnobs::MIN_TASK_SIZE, FallbackKnobs::MAX_TASK_SIZE),
            "a byte count from 4K to 1G, optionally with a K, M, G or T suffix",
        );
        let staging_memory = number(
            self.staging_memory,
            ENV_STAGING_MEMORY,
            knobs.staging_memory,
            size,
            (
                FallbackKnobs::MIN_STAGING_MEMORY,
                FallbackKnobs::MAX_STAGING_MEMORY,
            ),
            "a byte count from 4K to 64G, optionally with a K, M, G or T suffix",
        );
        let small_io_threshold = number(
            self.small_io_threshold,
            ENV_SMALL_IO_THRESHOLD,
            knobs.small_io_threshold,
            size,
            (0, FallbackKnobs::MAX_SMALL_IO_THRESHOLD),
            "a byte count up to 1G, optionally with a K, M, G or T suffix",
        );
        let config = Config {
            allow_compat_mode,
            force_compat_mode,
            unsupported_file_systems,
            stats_level,
            hip_library: path(
                self.hip_library,
                ENV_HIP_LIBRARY,
                defaults.hip_library.clone(),
            ),
            rocm_path: path(self.rocm_path, ENV_ROCM_PATH, defaults.rocm_path.clone()),
            platform,
            durable_writes,
            fallback: FallbackKnobs {
                io_threads,
                task_size,
                staging_memory,
                small_io_threshold,
                cold_direct_reads,
            },
            request_threads: self.request_threads.or(defaults.request_threads),
            memory_types: self.memory_types.unwrap_or(defaults.memory_types),
        };
        if config.leaves_no_backend() {
            warnings.push(ConfigWarning::NoBackend);
        }
        (config, warnings)
    }
}

/// An environment with no variables (for settling [`ConfigBuilder::defaults`]).
fn no_environment(_: &str) -> Option<String> {
    None
}

#[allow(clippy::disallowed_methods)] // The one place that reads the environment.
fn read_process_env(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

static WARNED: Mutex<Option<HashSet<ConfigWarning>>> = Mutex::new(None);

/// Writes `warning` to stderr unless this process already wrote the same one. Returns whether
/// it was written.
pub fn warn_once(warning: &ConfigWarning) -> bool {
    let mut guard = WARNED.lock().unwrap_or_else(PoisonError::into_inner);
    let first = guard
        .get_or_insert_with(HashSet::new)
        .insert(warning.clone());
    if first {
        crate::diag::line(&format!("hipfile: warning: {warning}"));
    }
    first
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn defaults_lie_below_the_environment_and_overrides() {
        let file = ConfigBuilder::new()
            .allow_compat_mode(false)
            .task_size(8 << 10)
            .io_threads(3)
            .stats_level(2);
        // Alone, the defaults replace the built-in ones.
        let (c, w) = ConfigBuilder::new()
            .defaults(file.clone())
            .build_with(env(&[]));
        assert!(w.is_empty(), "{w:?}");
        assert!(!c.allow_compat_mode);
        assert_eq!(c.fallback.task_size, 8 << 10);
        assert_eq!(c.fallback.io_threads, 3);
        assert_eq!(c.stats_level, 2);
        assert_eq!(
            c.fallback.staging_memory,
            FallbackKnobs::DEFAULT_STAGING_MEMORY
        );
        // The environment wins over them, an override over both.
        let (c, _) = ConfigBuilder::new()
            .io_threads(5)
            .defaults(file.clone())
            .build_with(env(&[
                (ENV_ALLOW_COMPAT_MODE, "true"),
                (ENV_IO_THREADS, "9"),
            ]));
        assert!(c.allow_compat_mode);
        assert_eq!(c.fallback.io_threads, 5);
        assert_eq!(c.fallback.task_size, 8 << 10);
        // An invalid variable falls back to the defaults' value, and says so.
        let (c, w) = ConfigBuilder::new()
            .defaults(file)
            .build_with(env(&[(ENV_TASK_SIZE, "lots")]));
        assert_eq!(c.fallback.task_size, 8 << 10);
        assert!(matches!(&w[..], [ConfigWarning::InvalidValue { used, .. }] if used == "8192"));
    }

    #[test]
    fn cufiles_file_is_named_by_its_variable_or_is_the_system_ones() {
        assert_eq!(
            cufile_json_path_with(env(&[])),
            (PathBuf::from("/etc/cufile.json"), false)
        );
        assert_eq!(
            cufile_json_path_with(env(&[(ENV_CUFILE_JSON, "/home/me/c.json")])),
            (PathBuf::from("/home/me/c.json"), true)
        );
        assert_eq!(
            cufile_json_path_with(env(&[
                (ENV_CUFILE_JSON, ""),
                (ENV_CUFILE_SYSTEM_JSON, "/t/s.json")
            ])),
            (PathBuf::from("/t/s.json"), false)
        );
    }

    #[test]
    fn durable_writes_are_on_unless_turned_off() {
        let (c, w) = ConfigBuilder::new().build_with(env(&[]));
        assert!(c.durable_writes && w.is_empty());
        let (c, _) = ConfigBuilder::new().build_with(env(&[(ENV_DURABLE_WRITES, "off")]));
        assert!(!c.durable_writes);
        let (c, _) = ConfigBuilder::new()
            .durable_writes(true)
            .build_with(env(&[(ENV_DURABLE_WRITES, "0")]));
        assert!(c.durable_writes, "code wins over the environment");
        let (c, w) = ConfigBuilder::new().build_with(env(&[(ENV_DURABLE_WRITES, "sometimes")]));
        assert!(c.durable_writes);
        assert_eq!(w.len(), 1, "{w:?}");
    }

    #[test]
    fn memory_types_are_hipfiles_rule_unless_set_in_code() {
        assert_eq!(
            ConfigBuilder::new().build_with(env(&[])).0.memory_types,
            MemoryTypes::HipFile
        );
        assert_eq!(
            ConfigBuilder::new()
                .memory_types(MemoryTypes::CuFile)
                .build_with(env(&[]))
                .0
                .memory_types,
            MemoryTypes::CuFile
        );
    }

    #[test]
    fn each_rule_serves_and_registers_its_librarys_memory_kinds() {
        use MemoryKind::*;
        // (kind, hipFile serves, hipFile registers, cuFile serves, cuFile registers)
        let table = [
            (Device, true, true, true, true),
            (Host, false, false, true, true),
            (Unregistered, false, false, true, true),
            (Managed, false, false, true, false),
            (Unified, false, false, true, false),
            (Array, false, false, false, false),
        ];
        for (kind, hs, hr, cs, cr) in table {
            assert_eq!(MemoryTypes::HipFile.serves(kind), hs, "{kind:?}");
            assert_eq!(MemoryTypes::HipFile.registers(kind), hr, "{kind:?}");
            assert_eq!(MemoryTypes::CuFile.serves(kind), cs, "{kind:?}");
            assert_eq!(MemoryTypes::CuFile.registers(kind), cr, "{kind:?}");
            for rule in [MemoryTypes::HipFile, MemoryTypes::CuFile] {
                // A refusal says why exactly when the rule refuses.
                assert_eq!(
                    rule.refusal(kind).is_empty(),
                    rule.registers(kind),
                    "{kind:?}"
                );
                // Whatever may be registered may be used.
                assert!(!rule.registers(kind) || rule.serves(kind), "{kind:?}");
            }
        }
        assert!(
            MemoryTypes::CuFile
                .refusal(Managed)
                .contains("unregistered")
        );
    }

    #[test]
    fn request_threads_follow_the_io_threads_up_to_eight_unless_set() {
        let count = |io: &str, set: Option<usize>| {
            let mut b = ConfigBuilder::new();
            if let Some(n) = set {
                b = b.request_threads(n);
            }
            b.build_with(env(&[(ENV_IO_THREADS, io)]))
                .0
                .request_thread_count()
        };
        assert_eq!(count("2", None), 2);
        assert_eq!(count("8", None), 8);
        assert_eq!(count("16", None), 8);
        assert_eq!(count("64", None), 8);
        assert_eq!(count("16", Some(16)), 16);
        assert_eq!(count("2", Some(0)), 1);
    }

    #[test]
    fn defaults_without_environment() {
        let (c, w) = ConfigBuilder::new().build_with(env(&[]));
        assert_eq!(c, Config::default());
        assert!(c.allow_compat_mode && !c.force_compat_mode && !c.unsupported_file_systems);
        assert_eq!(c.stats_level, 0);
        assert!(w.is_empty());
    }

    #[test]
    fn every_accepted_spelling() {
        let truths = [
            "true", "TRUE", "True", "1", "yes", "YES", "on", "On", " true ",
        ];
        let falses = [
            "false",
            "FALSE",
            "False",
            "0",
            "no",
            "NO",
            "off",
            "OFF",
            "\tfalse\n",
        ];
        for var in [
            ENV_ALLOW_COMPAT_MODE,
            ENV_FORCE_COMPAT_MODE,
            ENV_UNSUPPORTED_FILE_SYSTEMS,
        ] {
            for t in truths {
                let (c, w) = ConfigBuilder::new().build_with(env(&[(var, t)]));
                let got = match var {
                    ENV_ALLOW_COMPAT_MODE => c.allow_compat_mode,
                    ENV_FORCE_COMPAT_MODE => c.force_compat_mode,
                    _ => c.unsupported_file_systems,
                };
                assert!(got, "{var}={t:?} must read as true");
                assert!(
                    w.iter().all(|w| *w == ConfigWarning::NoBackend),
                    "{var}={t:?}: {w:?}"
                );
            }
            for f in falses {
                let (c, w) = ConfigBuilder::new().build_with(env(&[(var, f)]));
                let got = match var {
                    ENV_ALLOW_COMPAT_MODE => c.allow_compat_mode,
                    ENV_FORCE_COMPAT_MODE => c.force_compat_mode,
                    _ => c.unsupported_file_systems,
                };
                assert!(!got, "{var}={f:?} must read as false");
                assert!(w.is_empty(), "{var}={f:?}: {w:?}");
            }
        }
    }

    #[test]
    fn invalid_values_fall_back_to_the_default_and_warn() {
        for bad in ["ture", "", "2", "enable", "yess", "t", "-1"] {
            let (c, w) = ConfigBuilder::new().build_with(env(&[
                (ENV_ALLOW_COMPAT_MODE, bad),
                (ENV_FORCE_COMPAT_MODE, bad),
                (ENV_UNSUPPORTED_FILE_SYSTEMS, bad),
            ]));
            assert_eq!(c, Config::default(), "value {bad:?}");
            assert_eq!(w.len(), 3, "one warning per variable for {bad:?}: {w:?}");
            for (warning, var) in w.iter().zip([
                ENV_ALLOW_COMPAT_MODE,
                ENV_FORCE_COMPAT_MODE,
                ENV_UNSUPPORTED_FILE_SYSTEMS,
            ]) {
                let text = warning.to_string();
                assert!(
                    text.contains(var) && text.contains(&format!("{bad:?}")),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn stats_level_parsing() {
        let (c, w) = ConfigBuilder::new().build_with(env(&[(ENV_STATS_LEVEL, "2")]));
        assert_eq!((c.stats_level, w.len()), (2, 0));
        let (c, w) = ConfigBuilder::new().build_with(env(&[(ENV_STATS_LEVEL, "lots")]));
        assert_eq!(c.stats_level, 0);
        assert!(matches!(
            &w[..],
            [ConfigWarning::InvalidValue {
                variable: ENV_STATS_LEVEL,
                ..
            }]
        ));
    }

    #[test]
    fn programmatic_settings_override_the_environment() {
        let e = env(&[
            (ENV_ALLOW_COMPAT_MODE, "false"),
            (ENV_FORCE_COMPAT_MODE, "true"),
            (ENV_UNSUPPORTED_FILE_SYSTEMS, "true"),
            (ENV_STATS_LEVEL, "3"),
            (ENV_HIP_LIBRARY, "/env/libamdhip64.so"),
            (ENV_ROCM_PATH, "/env/rocm"),
        ]);
        let (c, w) = ConfigBuilder::new()
            .allow_compat_mode(true)
            .force_compat_mode(false)
            .unsupported_file_systems(false)
            .stats_level(1)
            .hip_library("/code/lib.so")
            .rocm_path("/code/rocm")
            .build_with(e);
        assert!(c.allow_compat_mode && !c.force_compat_mode && !c.unsupported_file_systems);
        assert_eq!(c.stats_level, 1);
        assert_eq!(
            c.hip_library.as_deref(),
            Some(std::path::Path::new("/code/lib.so"))
        );
        assert_eq!(
            c.rocm_path.as_deref(),
            Some(std::path::Path::new("/code/rocm"))
        );
        assert!(w.is_empty());
    }

    #[test]
    fn an_overridden_variable_is_not_parsed() {
        let (c, w) = ConfigBuilder::new()
            .force_compat_mode(true)
            .build_with(env(&[(ENV_FORCE_COMPAT_MODE, "garbage")]));
        assert!(c.force_compat_mode);
        assert!(w.is_empty());
    }

    #[test]
    fn paths_come_from_the_environment_and_empty_means_unset() {
        let (c, _) = ConfigBuilder::new().build_with(env(&[
            (ENV_HIP_LIBRARY, "/opt/x/libamdhip64.so.7"),
            (ENV_ROCM_PATH, ""),
        ]));
        assert_eq!(
            c.hip_library,
            Some(PathBuf::from("/opt/x/libamdhip64.so.7"))
        );
        assert_eq!(c.rocm_path, None);
    }

    #[test]
    fn hip_platform() {
        let p = |v: &str| ConfigBuilder::new().build_with(env(&[(ENV_HIP_PLATFORM, v)]));
        assert_eq!(p("amd").0.platform, PlatformChoice::Amd);
        assert_eq!(p("NVIDIA").0.platform, PlatformChoice::Nvidia);
        assert_eq!(p("").0.platform, PlatformChoice::Auto);
        let (c, w) = p("intel");
        assert_eq!(c.platform, PlatformChoice::Auto);
        assert!(w[0].to_string().contains("HIP_PLATFORM"));
        let (c, _) = ConfigBuilder::new()
            .platform(PlatformChoice::Amd)
            .build_with(env(&[(ENV_HIP_PLATFORM, "nvidia")]));
        assert_eq!(c.platform, PlatformChoice::Amd);
    }

    #[test]
    fn no_backend_is_reported() {
        let (c, w) = ConfigBuilder::new().build_with(env(&[
            (ENV_ALLOW_COMPAT_MODE, "off"),
            (ENV_FORCE_COMPAT_MODE, "on"),
        ]));
        assert!(c.leaves_no_backend());
        assert_eq!(w, vec![ConfigWarning::NoBackend]);
        assert!(w[0].to_string().contains("no I/O can be served"));
        let (c, w) = ConfigBuilder::new().build_with(env(&[(ENV_FORCE_COMPAT_MODE, "on")]));
        assert!(!c.leaves_no_backend() && w.is_empty());
    }

    #[test]
    fn fallback_knob_defaults() {
        let (c, w) = ConfigBuilder::new().build_with(env(&[]));
        let k = c.fallback_knobs();
        assert!(w.is_empty());
        assert!((1..=16).contains(&k.io_threads));
        assert_eq!(k.io_threads, FallbackKnobs::default_io_threads());
        assert_eq!(k.task_size, 4 << 20);
        assert_eq!(k.staging_memory, 256 << 20);
        assert_eq!(k.small_io_threshold, 1 << 20);
        assert!(k.cold_direct_reads);
    }

    #[test]
    fn fallback_knobs_from_the_environment() {
        let (c, w) = ConfigBuilder::new().build_with(env(&[
            (ENV_IO_THREADS, " 4 "),
            (ENV_TASK_SIZE, "64K"),
            (ENV_STAGING_MEMORY, "1g"),
            (ENV_SMALL_IO_THRESHOLD, "0"),
            (ENV_COLD_DIRECT_READS, "off"),
        ]));
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            c.fallback,
            FallbackKnobs {
                io_threads: 4,
                task_size: 64 << 10,
                staging_memory: 1 << 30,
                small_io_threshold: 0,
                cold_direct_reads: false,
            }
        );
        for (text, n) in [
            ("4096", 4096),
            ("2M", 2 << 20),
            ("2MiB", 2 << 20),
            ("3kb", 3 << 10),
            ("1G", 1 << 30),
        ] {
            assert_eq!(parse_size(text), Ok(n), "{text}");
        }
        for bad in ["", "M", "-1", "1.5M", "1P", "lots", "99999999999999999999G"] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn sizes_take_every_suffix_as_a_power_of_1024() {
        for (text, n) in [
            ("0", 0),
            ("123", 123),
            ("4K", 4 << 10),
            ("4kb", 4 << 10),
            ("4KiB", 4 << 10),
            ("4M", 4 << 20),
            ("4MB", 4 << 20),
            ("4MiB", 4 << 20),
            ("4mib", 4 << 20),
            ("2G", 2 << 30),
            ("2GB", 2 << 30),
            ("2gIb", 2 << 30),
            ("3T", 3 << 40),
            ("3TB", 3 << 40),
            ("3TiB", 3 << 40),
            (" \t4MB\n", 4 << 20),
            ("18446744073709551615", u64::MAX),
        ] {
            assert_eq!(parse_size(text), Ok(n), "{text:?}");
        }
    }

    #[test]
    fn bad_sizes_say_why() {
        for (text, why) in [
            ("", SizeError::Empty),
            ("  ", SizeError::Empty),
            ("abc", SizeError::NotAWholeNumber),
            ("-1", SizeError::NotAWholeNumber),
            ("+1", SizeError::NotAWholeNumber),
            ("K", SizeError::NotAWholeNumber),
            ("1.5M", SizeError::UnknownSuffix),
            ("1P", SizeError::UnknownSuffix),
            ("1 K", SizeError::UnknownSuffix),
            ("1KiBB", SizeError::UnknownSuffix),
            ("1iB", SizeError::UnknownSuffix),
            ("18446744073709551616", SizeError::TooLarge),
            ("17179869184G", SizeError::TooLarge),
            ("16777216T", SizeError::TooLarge),
        ] {
            assert_eq!(parse_size(text), Err(why), "{text:?}");
        }
    }

    #[test]
    fn a_bad_size_in_the_environment_warns_with_the_reason() {
        let (c, w) = ConfigBuilder::new().build_with(env(&[(ENV_TASK_SIZE, "4QB")]));
        assert_eq!(c.fallback.task_size, FallbackKnobs::DEFAULT_TASK_SIZE);
        let text = w.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert!(
            matches!(&text[..], [t] if t.contains("HIPFILE_TASK_SIZE") && t.contains("unknown suffix")),
            "{text:?}"
        );
        // Not the default, so that reading it is seen.
        for text in ["4MB", " 4MiB ", "4m"] {
            let (c, w) = ConfigBuilder::new().build_with(env(&[(ENV_STAGING_MEMORY, text)]));
            assert_eq!(
                (c.fallback.staging_memory, w.len()),
                (4_194_304, 0),
                "{text:?}"
            );
        }
    }

    proptest::proptest! {
        /// Every count written with any suffix reads back as that count times its power.
        #[test]
        fn any_count_with_any_suffix_reads_back(
            n in 0u64..(1 << 20),
            unit in 0usize..12,
            upper in proptest::bool::ANY,
        ) {
            let (suffix, shift) = [
                ("k", 10), ("kb", 10), ("kib", 10), ("m", 20), ("mb", 20), ("mib", 20),
                ("g", 30), ("gb", 30), ("gib", 30), ("t", 40), ("tb", 40), ("tib", 40),
            ][unit];
            let suffix = if upper { suffix.to_ascii_uppercase() } else { suffix.to_owned() };
            proptest::prop_assert_eq!(parse_size(&format!("{n}{suffix}")), Ok(n << shift));
        }

        /// No text makes the parser panic, and whatever it accepts is its own digits.
        #[test]
        fn any_text_is_a_count_or_a_reason(text in "\\PC{0,12}") {
            if let Ok(n) = parse_size(&text) {
                proptest::prop_assert!(text.trim().starts_with(|c: char| c.is_ascii_digit()), "{} {}", text, n);
            }
        }
    }

    #[test]
    fn invalid_fallback_knobs_fall_back_to_the_default_and_warn() {
        let (c, w) = ConfigBuilder::new().build_with(env(&[
            (ENV_IO_THREADS, "0"),
            (ENV_TASK_SIZE, "1.5M"),
            (ENV_STAGING_MEMORY, "big"),
            (ENV_SMALL_IO_THRESHOLD, "-5"),
            (ENV_COLD_DIRECT_READS, "sometimes"),
        ]));
        assert_eq!(c.fallback, FallbackKnobs::default());
        assert_eq!(w.len(), 5, "{w:?}");
        for (warning, var) in w.iter().zip([
            ENV_COLD_DIRECT_READS,
            ENV_IO_THREADS,
            ENV_TASK_SIZE,
            ENV_STAGING_MEMORY,
            ENV_SMALL_IO_THRESHOLD,
        ]) {
            assert!(warning.to_string().contains(var), "{warning}");
        }
        let (c, _) = ConfigBuilder::new().build_with(env(&[(ENV_IO_THREADS, "5000")]));
        assert_eq!(c.fallback.io_threads, FallbackKnobs::default_io_threads());
    }

    #[test]
    fn sizes_out_of_bounds_warn_and_use_the_nearest_bound() {
        const GIB: u64 = 1 << 30;
        for (variable, value, used) in [
            (ENV_TASK_SIZE, "18446744073709551615", GIB),
            (ENV_TASK_SIZE, "64G", GIB),
            (ENV_TASK_SIZE, "0", 4096),
            (ENV_TASK_SIZE, "4095", 4096),
            (ENV_STAGING_MEMORY, "18446744073709551615", 64 * GIB),
            (ENV_STAGING_MEMORY, "65G", 64 * GIB),
            (ENV_STAGING_MEMORY, "1", 4096),
            (ENV_SMALL_IO_THRESHOLD, "18446744073709551615", GIB),
            (ENV_SMALL_IO_THRESHOLD, "1025M", GIB),
        ] {
            let (c, w) = ConfigBuilder::new().build_with(env(&[(variable, value)]));
            let got = match variable {
                ENV_TASK_SIZE => c.fallback.task_size,
                ENV_STAGING_MEMORY => c.fallback.staging_memory,
                _ => c.fallback.small_io_threshold,
            };
            assert_eq!(got, used, "{variable}={value}");
            let [warning] = &w[..] else {
                panic!("{variable}={value}: one warning expected, got {w:?}");
            };
            let text = warning.to_string();
            for needle in [
                variable.to_string(),
                format!("{value:?}"),
                format!("using {used}"),
            ] {
                assert!(text.contains(&needle), "{needle:?} missing from {text:?}");
            }
        }
        // The bounds themselves are accepted silently.
        let (c, w) = ConfigBuilder::new().build_with(env(&[
            (ENV_TASK_SIZE, "1G"),
            (ENV_STAGING_MEMORY, "64G"),
            (ENV_SMALL_IO_THRESHOLD, "1G"),
        ]));
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            (
                c.fallback.task_size,
                c.fallback.staging_memory,
                c.fallback.small_io_threshold
            ),
            (GIB, 64 * GIB, GIB)
        );
        let (c, w) = ConfigBuilder::new()
            .build_with(env(&[(ENV_TASK_SIZE, "4K"), (ENV_STAGING_MEMORY, "4K")]));
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            (c.fallback.task_size, c.fallback.staging_memory),
            (4096, 4096)
        );
    }

    #[test]
    fn setters_clamp_to_the_same_bounds() {
        let k = |b: ConfigBuilder| b.build_with(env(&[])).0.fallback;
        let high = k(ConfigBuilder::new()
            .io_threads(usize::MAX)
            .task_size(u64::MAX)
            .staging_memory(u64::MAX)
            .small_io_threshold(u64::MAX));
        assert_eq!(
            (
                high.io_threads,
                high.task_size,
                high.staging_memory,
                high.small_io_threshold
            ),
            (1024, 1 << 30, 64 << 30, 1 << 30)
        );
        let low = k(ConfigBuilder::new()
            .io_threads(0)
            .task_size(0)
            .staging_memory(0)
            .small_io_threshold(0));
        assert_eq!(
            (
                low.io_threads,
                low.task_size,
                low.staging_memory,
                low.small_io_threshold
            ),
            (1, 4096, 4096, 0)
        );
    }

    #[test]
    fn fallback_knobs_are_overridable() {
        let (c, w) = ConfigBuilder::new()
            .io_threads(3)
            .task_size(1 << 16)
            .staging_memory(1 << 24)
            .small_io_threshold(7)
            .cold_direct_reads(false)
            .build_with(env(&[
                (ENV_COLD_DIRECT_READS, "1"),
                (ENV_IO_THREADS, "garbage"),
                (ENV_TASK_SIZE, "1M"),
                (ENV_STAGING_MEMORY, "1M"),
                (ENV_SMALL_IO_THRESHOLD, "1M"),
            ]));
        assert!(w.is_empty());
        assert_eq!(
            c.fallback_knobs(),
            FallbackKnobs {
                io_threads: 3,
                task_size: 1 << 16,
                staging_memory: 1 << 24,
                small_io_threshold: 7,
                cold_direct_reads: false,
            }
        );
    }

    #[test]
    fn warnings_are_printed_once_per_process() {
        let w = ConfigWarning::InvalidValue {
            variable: ENV_STATS_LEVEL,
            value: "unique-value-for-this-test".into(),
            used: "0".into(),
            expected: "a non-negative integer",
            reason: None,
        };
        assert!(warn_once(&w));
        assert!(!warn_once(&w));
        assert!(!warn_once(&w.clone()));
    }
}
