//! `hipfile bench`: times whole-file reads or writes through GPU buffers with the library's
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

use crate::args::{BackendChoice, BenchArgs, Cache, Devices};
use crate::json::Value;
use hipfile::{BackendKind, ConfigBuilder, DeviceBuffer, Driver, FileHandle, IoOutcome, Op};
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::time::Instant;

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

/// Bytes served by each backend, counted from the outcomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Served {
    /// Bytes the fastpath moved.
    pub fastpath_bytes: u64,
    /// Bytes the fallback moved.
    pub fallback_bytes: u64,
}

impl Served {
    fn count(&mut self, outcome: &IoOutcome) {
        match outcome.backend {
            BackendKind::Fastpath => self.fastpath_bytes += outcome.bytes,
            BackendKind::Fallback => self.fallback_bytes += outcome.bytes,
        }
    }

    fn add(&mut self, other: Served) {
        self.fastpath_bytes += other.fastpath_bytes;
        self.fallback_bytes += other.fallback_bytes;
    }

    fn to_json(self) -> Value {
        Value::Object(vec![
            ("fastpath_bytes", Value::UInt(self.fastpath_bytes)),
            ("fallback_bytes", Value::UInt(self.fallback_bytes)),
        ])
    }
}

/// The median latency of one request size, raw and through the library.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    /// Bytes per request.
    pub size: u64,
    /// Raw: `pread` + one synchronous host-to-device copy (reads), or one device-to-host
    /// copy + `pwrite` + `fdatasync` (writes), in microseconds.
    pub raw_us: f64,
    /// One library request of the same size, in microseconds.
    pub hipfile_us: f64,
}

/// The limits measured beside a case.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Raw parallel `pread` (reads) or `pwrite` + one `fdatasync` (writes) of the file with
    /// the best of [`RAW_THREADS`], in the case's cache state: the median of one run after
    /// each of the case's runs.
    pub raw_io_gbps: f64,
    /// Cold reads only: raw parallel `O_DIRECT` reads of the file into page-aligned memory
    /// with the best of [`RAW_DIRECT_THREADS`], measured as `raw_io_gbps` is; `None` where
    /// the file system does no direct I/O.
    pub raw_direct_gbps: Option<f64>,
    /// Synchronous copies between pageable host memory and the device buffers:
    /// host-to-device for reads, device-to-host for writes.
    pub copy_gbps: f64,
    /// The same copies from and to pinned host memory.
    pub pinned_copy_gbps: f64,
    /// Upstream hipFile's serial fallback, redone here in the case's cache state: one
    /// thread, 16 MiB chunks through one pageable buffer, a synchronous copy per chunk (and,
    /// for writes, an `fdatasync` per chunk), measured as `raw_io_gbps` is. Not a limit:
    /// the figure the ratio `vs_serial` is taken against.
    pub serial_gbps: f64,
    /// Latencies, on a hot cache.
    pub latency: Vec<Latency>,
}

impl Limits {
    /// The best raw file I/O: buffered, or direct where it was measured and is faster.
    pub fn raw_best(&self) -> f64 {
        self.raw_io_gbps.max(self.raw_direct_gbps.unwrap_or(0.0))
    }

    /// The lowest limit that applies to the fallback: the best raw file I/O or the pinned
    /// copy (the fallback stages through pinned memory, so pageable copies do not bound it).
    pub fn lowest(&self) -> f64 {
        self.raw_best().min(self.pinned_copy_gbps)
    }
}

/// The runs of one device of `--devices`.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceRuns {
    /// The device number.
    pub device: i32,
    /// GB/s of each run, in order: `size` over the time its last thread finished, counted
    /// from the start of the run.
    pub runs: Vec<f64>,
}

/// The result of one case.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Read or write.
    pub op: Op,
    /// Bytes of the file, moved once per run.
    pub size: u64,
    /// Bytes per request (clamped to `size`).
    pub io_size: u64,
    /// Threads that issued requests for each device (no more than there are requests in a
    /// run).
    pub threads: usize,
    /// The cache state of each run.
    pub cache: Cache,
    /// The backends allowed.
    pub backend: BackendChoice,
    /// The test file, as given.
    pub file: String,
    /// GB/s of each run, in order: of all devices together.
    pub runs: Vec<f64>,
    /// With `--devices`: the runs of each device, in the order given.
    pub devices: Option<Vec<DeviceRuns>>,
    /// What each backend served over all runs, of all devices.
    pub served: Served,
    /// The highest `VmHWM` of the process during any of the case's runs, counted from the
    /// start of each run (so not the bench's own buffers of the limits or of the cache
    /// warming), when `/proc/self/clear_refs` and `/proc/self/status` allow.
    pub peak_rss_bytes: Option<u64>,
    /// With `--limits`.
    pub limits: Option<Limits>,
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

impl Report {
    /// The median over the lowest limit, with `--limits`.
    pub fn ratio(&self) -> Option<f64> {
        let limits = self.limits.as_ref()?;
        let lowest = limits.lowest();
        (lowest > 0.0).then(|| spread(&self.runs).0 / lowest)
    }

    /// The `--json` object (no newline).
    pub fn to_json(&self) -> String {
        let (median, min, max) = spread(&self.runs);
        let mut members = vec![
            ("op", Value::str(self.op.as_str())),
            ("size", Value::UInt(self.size)),
            ("io_size", Value::UInt(self.io_size)),
            ("threads", Value::UInt(self.threads as u64)),
            ("cache", Value::str(self.cache.as_str())),
            ("backend", Value::str(self.backend.as_str())),
            ("file", Value::str(self.file.clone())),
            (
                "runs",
                Value::Array(self.runs.iter().map(|&x| Value::Float(x)).collect()),
            ),
            ("median_gbps", Value::Float(median)),
            ("min_gbps", Value::Float(min)),
            ("max_gbps", Value::Float(max)),
        ];
        if let Some(devices) = &self.devices {
            let devices = devices
                .iter()
                .map(|d| {
                    let (median, min, max) = spread(&d.runs);
                    Value::Object(vec![
                        ("device", Value::Int(i64::from(d.device))),
                        (
                            "runs",
                            Value::Array(d.runs.iter().map(|&x| Value::Float(x)).collect()),
                        ),
                        ("median_gbps", Value::Float(median)),
                        ("min_gbps", Value::Float(min)),
                        ("max_gbps", Value::Float(max)),
                    ])
                })
                .collect();
            members.push(("devices", Value::Array(devices)));
        }
        members.extend([
            ("served", self.served.to_json()),
            (
                "peak_rss_bytes",
                self.peak_rss_bytes.map_or(Value::Null, Value::UInt),
            ),
        ]);
        if let Some(l) = &self.limits {
            let limits = match self.op {
                Op::Read => vec![
                    ("pread_gbps", Value::Float(l.raw_io_gbps)),
                    (
                        "pread_direct_gbps",
                        l.raw_direct_gbps.map_or(Value::Null, Value::Float),
                    ),
                    ("pageable_h2d_gbps", Value::Float(l.copy_gbps)),
                    ("pinned_h2d_gbps", Value::Float(l.pinned_copy_gbps)),
                ],
                Op::Write => vec![
                    ("pwrite_fsync_gbps", Value::Float(l.raw_io_gbps)),
                    ("pageable_d2h_gbps", Value::Float(l.copy_gbps)),
                    ("pinned_d2h_gbps", Value::Float(l.pinned_copy_gbps)),
                ],
            };
            members.push(("limits", Value::Object(limits)));
            members.push(("ratio", self.ratio().map_or(Value::Null, Value::Float)));
            members.push(("serial_gbps", Value::Float(l.serial_gbps)));
            members.push((
                "vs_serial",
                if l.serial_gbps > 0.0 {
                    Value::Float(median / l.serial_gbps)
                } else {
                    Value::Null
                },
            ));
            let latency = l
                .latency
                .iter()
                .map(|x| {
                    Value::Object(vec![
                        ("size", Value::UInt(x.size)),
                        ("raw_us", Value::Float(x.raw_us)),
                        ("hipfile_us", Value::Float(x.hipfile_us)),
                        (
                            "ratio",
                            Value::Float(if x.raw_us > 0.0 {
                                x.hipfile_us / x.raw_us
                            } else {
                                0.0
                            }),
                        ),
                    ])
                })
                .collect();
            members.push(("latency", Value::Array(latency)));
        }
        Value::Object(members).to_json()
    }

    /// The human-readable table (ends with a newline).
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let (median, min, max) = spread(&self.runs);
        let on = match &self.devices {
            Some(devices) => {
                let list: Vec<String> = devices.iter().map(|d| d.device.to_string()).collect();
                format!(
                    " per device on device{} {}",
                    if list.len() == 1 { "" } else { "s" },
                    list.join(",")
                )
            }
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "hipfile bench: {} {} in {} requests, {} thread{}{on}, {} cache, backend {}, file {}",
            self.op.as_str(),
            bytes_text(self.size),
            bytes_text(self.io_size),
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            self.cache.as_str(),
            self.backend.as_str(),
            self.file
        );
        let _ = writeln!(out, "  {:<28} {:>10}", "run", "GB/s");
        for (i, x) in self.runs.iter().enumerate() {
            let _ = writeln!(out, "  {:<28} {x:>10.3}", i + 1);
        }
        let _ = writeln!(
            out,
            "  {:<28} {median:>10.3}   (min {min:.3}, max {max:.3})",
            "median"
        );
        for d in self.devices.iter().flatten() {
            let (median, min, max) = spread(&d.runs);
            let _ = writeln!(
                out,
                "  {:<28} {median:>10.3}   (min {min:.3}, max {max:.3})",
                format!("device {}, median", d.device)
            );
        }
        let _ = writeln!(
            out,
            "  served: fastpath {} bytes, fallback {} bytes",
            self.served.fastpath_bytes, self.served.fallback_bytes
        );
        if let Some(l) = &self.limits {
            let (raw, copy, pinned) = match self.op {
                Op::Read => (
                    "pread, best of 1/4/8/16 thr",
                    "pageable host -> device",
                    "pinned host -> device",
                ),
                Op::Write => (
                    "pwrite + fdatasync, best",
                    "device -> pageable host",
                    "device -> pinned host",
                ),
            };
            let _ = writeln!(
                out,
                "limits, same run              {:>10}   median / limit",
                "GB/s"
            );
            let mut rows = vec![(raw, l.raw_io_gbps)];
            if let Some(d) = l.raw_direct_gbps {
                rows.push(("O_DIRECT read, best", d));
            }
            rows.extend([(copy, l.copy_gbps), (pinned, l.pinned_copy_gbps)]);
            for (name, x) in rows {
                let ratio = if x > 0.0 { median / x } else { 0.0 };
                let _ = writeln!(out, "  {name:<28} {x:>10.3}   {ratio:.3}");
            }
            if let Some(r) = self.ratio() {
                let _ = writeln!(out, "  {:<28} {:>10}   {r:.3}", "ratio to the lowest", "");
            }
            let times = if l.serial_gbps > 0.0 {
                median / l.serial_gbps
            } else {
                0.0
            };
            let _ = writeln!(
                out,
                "  {:<28} {:>10.3}   {times:.1}x (median / serial)",
                "upstream's serial fallback", l.serial_gbps
            );
            let _ = writeln!(
                out,
                "latency, hot, median of {LATENCY_ITERATIONS}    {:>10} {:>12} {:>8}",
                "raw us", "hipfile us", "ratio"
            );
            for x in &l.latency {
                let ratio = if x.raw_us > 0.0 {
                    x.hipfile_us / x.raw_us
                } else {
                    0.0
                };
                let _ = writeln!(
                    out,
                    "  {:<28} {:>10.1} {:>12.1} {ratio:>8.2}",
                    bytes_text(x.size),
                    x.raw_us,
                    x.hipfile_us
                );
            }
        }
        match self.peak_rss_bytes {
            Some(b) => {
                let _ = writeln!(out, "peak resident memory: {}", bytes_text(b));
            }
            None => {
                let _ = writeln!(out, "peak resident memory: unknown");
            }
        }
        out
    }
}

/// `n` bytes in the largest binary unit that divides it, else with two decimals.
pub fn bytes_text(n: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n >= 1 << shift {
            return if n.is_multiple_of(1 << shift) {
                format!("{} {unit}", n >> shift)
            } else {
                format!("{:.2} {unit}", n as f64 / (1u64 << shift) as f64)
            };
        }
    }
    format!("{n} B")
}

/// Runs `bench` and returns the exit status.
pub fn run(args: &BenchArgs) -> u8 {
    let settings = match crate::runtime::settings(args.runtime) {
        Ok(s) => s,
        Err(message) => {
            eprintln!("hipfile: {message}");
            return EXIT_USAGE;
        }
    };
    let settings = backend_settings(settings, args.backend);
    // Nothing is created or written before the arguments, the runtime and the devices are
    // known to be usable: a bench that cannot run must leave the file system as it was.
    let plan = match plan_file(args) {
        Ok(p) => p,
        Err(message) => {
            eprintln!("hipfile: {message}");
            return EXIT_USAGE;
        }
    };
    let setup = match Setup::new(args, settings) {
        Ok(s) => s,
        Err(message) => {
            eprintln!("hipfile: {message}");
            return EXIT_FAILED;
        }
    };
    let file = match prepare_file(&args.file, args.size, plan) {
        Ok(f) => f,
        Err(message) => {
            eprintln!("hipfile: {message}");
            return EXIT_USAGE;
        }
    };
    let report = match measure(args, setup, &file) {
        Ok(r) => r,
        Err(message) => {
            eprintln!("hipfile: {message}");
            return EXIT_FAILED;
        }
    };
    let text = if args.json {
        format!("{}\n", report.to_json())
    } else {
        report.text()
    };
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => EXIT_DONE,
        Err(e) => {
            if e.kind() != io::ErrorKind::BrokenPipe {
                eprintln!("hipfile: cannot write the output: {e}");
            }
            EXIT_FAILED
        }
    }
}

/// The settings for `--backend`.
pub fn backend_settings(settings: ConfigBuilder, choice: BackendChoice) -> ConfigBuilder {
    match choice {
        BackendChoice::Auto => settings,
        BackendChoice::Fallback => settings.force_compat_mode(true),
        BackendChoice::Fastpath => settings.allow_compat_mode(false),
    }
}

/// The byte at `offset` of the test file: not zero anywhere in a page, so that nothing can
/// be stored sparsely, and different from page to page.
fn pattern_byte(offset: u64) -> u8 {
    let word = offset / 8;
    (word.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8 | 1
}

fn fill_pattern(buf: &mut [u8], offset: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern_byte(offset + i as u64);
    }
}

/// What becomes of the test file, decided before anything is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FilePlan {
    /// It does not exist: create it and write the pattern.
    Create,
    /// A read benchmark of a file of the right size: read it as it is, read-only.
    Read,
    /// `--overwrite`: write the pattern over it when its size differs; the runs may write it.
    Overwrite,
}

/// Decides what to do with the test file, changing nothing. An existing file is changed only
/// with `--overwrite`: it may hold data that is not bench's.
fn plan_file(args: &BenchArgs) -> Result<FilePlan, String> {
    let shown = args.file.display();
    let meta = match std::fs::metadata(&args.file) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(FilePlan::Create),
        Err(e) => return Err(format!("cannot look at the test file {shown}: {e}")),
    };
    if !meta.file_type().is_file() {
        return Err(format!(
            "the test file {shown} is not a regular file; name a regular file, or a new one, \
             with --file"
        ));
    }
    let len = meta.len();
    let keep = "nothing was changed; name a new file with --file, or pass --overwrite to let \
                bench replace its contents";
    match args.op {
        Op::Read if len == args.size => Ok(FilePlan::Read),
        _ if args.overwrite => Ok(FilePlan::Overwrite),
        Op::Read => {
            let as_is = if len > 0 {
                format!(" (or read it as it is with --size {len})")
            } else {
                String::new()
            };
            Err(format!(
                "the test file {shown} exists with {len} bytes, not the {} of --size, and \
                 bench would write its pattern over it: {keep}{as_is}",
                args.size
            ))
        }
        Op::Write => Err(format!(
            "the test file {shown} exists, and a write benchmark writes over it: {keep}"
        )),
    }
}

/// Opens the test file as `plan` says, writing the pattern where it is needed. A file this
/// call created but could not finish is removed.
fn prepare_file(path: &Path, size: u64, plan: FilePlan) -> Result<File, String> {
    let shown = path.display();
    match plan {
        FilePlan::Read => {
            // Read-only: whatever a read benchmark does, the file cannot be written.
            let file =
                File::open(path).map_err(|e| format!("cannot open the test file {shown}: {e}"))?;
            let meta = file
                .metadata()
                .map_err(|e| format!("cannot look at the test file {shown}: {e}"))?;
            if !meta.file_type().is_file() || meta.len() != size {
                return Err(format!(
                    "the test file {shown} changed while bench started; run it again"
                ));
            }
            eprintln!("hipfile: reusing the test file {shown} as it is ({size} bytes, read-only)");
            Ok(file)
        }
        FilePlan::Create => {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(path)
                .map_err(|e| format!("cannot create the test file {shown}: {e}"))?;
            eprintln!("hipfile: writing the test file {shown} ({size} bytes)");
            if let Err(message) = write_pattern(&file, path, size) {
                return Err(format!("{message}; {}", remove_created(&file, path)));
            }
            Ok(file)
        }
        FilePlan::Overwrite => {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .map_err(|e| format!("cannot open the test file {shown} for writing: {e}"))?;
            let meta = file
                .metadata()
                .map_err(|e| format!("cannot look at the test file {shown}: {e}"))?;
            if !meta.file_type().is_file() {
                return Err(format!("the test file {shown} is not a regular file"));
            }
            if meta.len() == size {
                eprintln!(
                    "hipfile: --overwrite: writing over the test file {shown} ({size} bytes)"
                );
                return Ok(file);
            }
            eprintln!(
                "hipfile: --overwrite: writing the pattern over the test file {shown} ({size} bytes)"
            );
            write_pattern(&file, path, size)
                .map_err(|message| format!("{message}; {shown} is left incomplete"))?;
            Ok(file)
        }
    }
}

/// Writes the pattern over the whole of `file` and cuts it to `size`.
fn write_pattern(file: &File, path: &Path, size: u64) -> Result<(), String> {
    let shown = path.display();
    let mut buf = vec![0u8; usize::try_from(RAW_IO.min(size)).unwrap_or(PAGE)];
    let mut offset = 0u64;
    while offset < size {
        let n = (size - offset).min(buf.len() as u64) as usize;
        fill_pattern(&mut buf[..n], offset);
        file.write_all_at(&buf[..n], offset)
            .map_err(|e| format!("cannot write the test file {shown} at {offset}: {e}"))?;
        offset += n as u64;
    }
    file.set_len(size)
        .and_then(|()| file.sync_data())
        .map_err(|e| format!("cannot finish the test file {shown}: {e}"))
}

/// Removes the test file this run created at `path` (and only if `path` still names it);
/// says what was done.
fn remove_created(file: &File, path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let shown = path.display();
    let ours = match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    };
    if !ours {
        return format!("{shown} is no longer the file bench created, so it was left alone");
    }
    match std::fs::remove_file(path) {
        Ok(()) => format!("removed the incomplete test file {shown}"),
        Err(e) => format!("the incomplete test file {shown} could not be removed: {e}"),
    }
}

/// Empties (`Cold`) or fills (`Hot`) the page cache of `file`.
fn set_cache(file: &File, size: u64, cache: Cache) -> Result<(), String> {
    match cache {
        Cache::Cold => {
            // Dirty pages cannot be dropped: write them first.
            file.sync_data()
                .map_err(|e| format!("cannot flush the test file: {e}"))?;
            rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed).map_err(|e| {
                format!(
                    "posix_fadvise(DONTNEED) on the test file failed: {}",
                    io::Error::from(e)
                )
            })?;
            if rustix::process::geteuid().is_root() {
                // Best effort: the fadvise above is what is relied on.
                let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
            }
            Ok(())
        }
        Cache::Hot => raw_io(file, Op::Read, size, WARM_THREADS, false).map(|_| ()),
    }
}

/// A page-aligned host buffer of `len` bytes, in ordinary (pageable) memory.
struct HostBuf {
    v: Vec<u8>,
    start: usize,
    len: usize,
}

impl HostBuf {
    fn new(len: usize) -> HostBuf {
        let v = vec![0u8; len + PAGE];
        let start = v.as_ptr().align_offset(PAGE);
        // `align_offset` may decline to compute; unaligned memory still works.
        let start = if start < PAGE { start } else { 0 };
        HostBuf { v, start, len }
    }

    fn get(&self) -> &[u8] {
        &self.v[self.start..self.start + self.len]
    }

    fn get_mut(&mut self) -> &mut [u8] {
        &mut self.v[self.start..self.start + self.len]
    }
}

/// The file-side figures (the raw limits and upstream's serial fallback), measured between
/// the case's runs so that a disk or page cache whose speed drifts during the bench (a
/// virtual disk that is still writing back, say) moves them and the case alike. The thread
/// counts of the raw limits are chosen before the runs: each of [`RAW_THREADS`] (and, for
/// cold reads, [`RAW_DIRECT_THREADS`]) once, the fastest kept. After each run of the case,
/// one run of each figure; each is the median of its runs, as the case's figure is the
/// median of its own.
struct FileLimits {
    threads: usize,
    /// `None`: not a cold read, or the file system does no direct I/O.
    direct_threads: Option<usize>,
    raw: Vec<f64>,
    direct: Vec<f64>,
    serial: Vec<f64>,
}

/// The count of `counts` whose one run by `measure` is the fastest; `None` when `measure`
/// has no figure (it is asked no further after the first `None`).
fn fastest(
    counts: &[usize],
    mut measure: impl FnMut(usize) -> Result<Option<f64>, String>,
) -> Result<Option<usize>, String> {
    let mut best: Option<(usize, f64)> = None;
    for &n in counts {
        let Some(x) = measure(n)? else {
            return Ok(None);
        };
        if best.is_none_or(|(_, b)| x > b) {
            best = Some((n, x));
        }
    }
    Ok(best.map(|(n, _)| n))
}

impl FileLimits {
    fn choose(case: &Case<'_>) -> Result<FileLimits, String> {
        let threads = fastest(&RAW_THREADS, |n| case.raw_run(n).map(Some))?;
        let direct_threads = if case.args.op == Op::Read && case.args.cache == Cache::Cold {
            fastest(&RAW_DIRECT_THREADS, |n| case.raw_direct_run(n))?
        } else {
            None
        };
        Ok(FileLimits {
            threads: threads.unwrap_or(1),
            direct_threads,
            raw: Vec::new(),
            direct: Vec::new(),
            serial: Vec::new(),
        })
    }

    /// One run of each figure, after a run of the case.
    fn run(&mut self, case: &Case<'_>) -> Result<(), String> {
        self.raw.push(case.raw_run(self.threads)?);
        if let Some(n) = self.direct_threads {
            self.direct.extend(case.raw_direct_run(n)?);
        }
        set_cache(case.file, case.args.size, case.args.cache)?;
        self.serial
            .push(gbps(case.args.size, case.serial(case.args.op)?));
        Ok(())
    }

    fn raw_gbps(&self) -> f64 {
        spread(&self.raw).0
    }

    fn direct_gbps(&self) -> Option<f64> {
        (!self.direct.is_empty()).then(|| spread(&self.direct).0)
    }

    fn serial_gbps(&self) -> f64 {
        spread(&self.serial).0
    }
}

/// One raw request of `host.len()` bytes at `at` through `host` and the start of `buf`: a
/// `pread` and a synchronous copy to the device (reads), or a synchronous copy from the
/// device, a `pwrite` and an `fdatasync` (writes).
fn raw_request(
    file: &File,
    buf: &DeviceBuffer,
    op: Op,
    host: &mut [u8],
    at: u64,
) -> Result<(), String> {
    let n = host.len();
    match op {
        Op::Read => {
            file.read_exact_at(host, at)
                .map_err(|e| format!("pread at {at} failed: {e}"))?;
            buf.copy_from_host(0, host)
                .map_err(|e| format!("copy of {n} bytes failed: {e}"))
        }
        Op::Write => {
            buf.copy_to_host(0, host)
                .map_err(|e| format!("copy of {n} bytes failed: {e}"))?;
            file.write_all_at(host, at)
                .and_then(|()| file.sync_data())
                .map_err(|e| format!("pwrite + fdatasync at {at} failed: {e}"))
        }
    }
}

/// Host memory for the copy limits: the runtime's pinned memory, or pageable.
enum Host {
    Pinned(hipfile::PinnedHostBuffer),
    Pageable(HostBuf),
}

impl Host {
    fn get(&self) -> &[u8] {
        match self {
            Host::Pinned(p) => p,
            Host::Pageable(h) => h.get(),
        }
    }

    fn get_mut(&mut self) -> &mut [u8] {
        match self {
            Host::Pinned(p) => p,
            Host::Pageable(h) => h.get_mut(),
        }
    }
}

/// Raw parallel `O_DIRECT` reads of the whole file at `path` in [`RAW_IO`] requests with
/// `threads` threads into page-aligned memory; returns the seconds taken. The last request
/// is rounded up to the page and may come back short at the end of the file. `None` when
/// the file system does no direct I/O.
fn raw_direct_read(path: &Path, size: u64, threads: usize) -> Result<Option<f64>, String> {
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) => {
            return Ok(None);
        }
        Err(e) => return Err(format!("cannot open {} with O_DIRECT: {e}", path.display())),
    };
    raw_io(&file, Op::Read, size, threads, true).map(Some)
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

/// Raw parallel `pread` or `pwrite` (+ one `fdatasync`) of the whole file in [`RAW_IO`]
/// requests with `threads` threads; returns the seconds taken. `direct`: `file` was opened
/// with `O_DIRECT`, for reads only, so requests are whole pages into page-aligned memory.
fn raw_io(file: &File, op: Op, size: u64, threads: usize, direct: bool) -> Result<f64, String> {
    let parts = partition(size, RAW_IO, threads);
    // Direct reads move whole pages: the last one is rounded up and comes back short.
    let page = if direct { PAGE } else { 1 };
    let io = RAW_IO.min(size.div_ceil(page as u64) * page as u64) as usize;
    let mut bufs: Vec<HostBuf> = parts.iter().map(|_| HostBuf::new(io)).collect();
    if op == Op::Write {
        for (b, &(start, _)) in bufs.iter_mut().zip(&parts) {
            fill_pattern(b.get_mut(), start);
        }
    }
    let bufs: Vec<std::sync::Mutex<HostBuf>> =
        bufs.into_iter().map(std::sync::Mutex::new).collect();
    let start = Instant::now();
    parallel(&parts, |i, from, to| {
        let mut guard = bufs[i]
            .lock()
            .map_err(|_| "a host buffer is unusable".to_owned())?;
        let buf = guard.get_mut();
        let mut at = from;
        while at < to {
            let n = ((to - at).min(buf.len() as u64) as usize).div_ceil(page) * page;
            let moved = match op {
                Op::Read if direct => file.read_at(&mut buf[..n], at),
                Op::Read => file.read_exact_at(&mut buf[..n], at).map(|()| n),
                Op::Write => file.write_all_at(&buf[..n], at).map(|()| n),
            }
            .map_err(|e| {
                let how = if direct { " (O_DIRECT)" } else { "" };
                format!("raw {}{how} at {at} failed: {e}", op_call(op))
            })?;
            if moved == 0 {
                break;
            }
            at += moved as u64;
        }
        Ok(())
    })?;
    if op == Op::Write {
        file.sync_data()
            .map_err(|e| format!("fdatasync of the test file failed: {e}"))?;
    }
    Ok(start.elapsed().as_secs_f64())
}

fn op_call(op: Op) -> &'static str {
    match op {
        Op::Read => "pread",
        Op::Write => "pwrite",
    }
}

fn file_offset(offset: u64) -> Result<i64, String> {
    i64::try_from(offset).map_err(|_| format!("offset {offset} is beyond the largest file offset"))
}

/// The buffers of one device: one per part of the file, registered.
struct Group {
    /// The device, with `--devices`; `None`: the current device.
    device: Option<i32>,
    /// The buffer of each part.
    bufs: Vec<DeviceBuffer>,
}

/// The registered file, the per-thread device buffers of each device, and the case.
struct Case<'a> {
    args: &'a BenchArgs,
    file: &'a File,
    handle: FileHandle,
    /// One per device, in the order of `--devices`; the first is the one the limits use.
    groups: Vec<Group>,
    parts: Vec<(u64, u64)>,
    io: u64,
}

/// `len` bytes of device memory on `device`, or on the current device.
fn alloc(driver: &Driver, device: Option<i32>, len: usize) -> Result<DeviceBuffer, hipfile::Error> {
    match device {
        Some(d) => driver.alloc_on(d, len),
        None => driver.alloc(len),
    }
}

/// The devices of `--devices`, checked against the runtime's count; `[None]` (the current
/// device) without it.
fn devices(driver: &Driver, asked: Option<&Devices>) -> Result<Vec<Option<i32>>, String> {
    let Some(asked) = asked else {
        return Ok(vec![None]);
    };
    let count = driver
        .device_count()
        .map_err(|e| format!("cannot count the GPU devices for --devices: {e}"))?;
    if count < 1 {
        return Err(format!(
            "--devices: the runtime sees no GPU device (a count of {count})"
        ));
    }
    let seen = match count {
        1 => "1 device (device 0)".to_owned(),
        n => format!("{n} devices (0 to {})", n - 1),
    };
    match asked {
        Devices::All => Ok((0..count).map(Some).collect()),
        Devices::List(list) if list.is_empty() => {
            Err("--devices names no device; name at least one, or use --devices all".to_owned())
        }
        Devices::List(list) => {
            if let Some(&d) = list.iter().find(|&&d| d >= count) {
                return Err(format!(
                    "--devices: device {d} does not exist; the runtime sees {seen}; \
                     name devices below {count}, or use --devices all"
                ));
            }
            Ok(list.iter().copied().map(Some).collect())
        }
    }
}

/// The driver and the registered device buffers of a case: all that can be checked before
/// the test file is touched.
struct Setup {
    driver: Driver,
    /// One per device, in the order of `--devices`; the first is the one the limits use.
    groups: Vec<Group>,
    parts: Vec<(u64, u64)>,
    io: u64,
}

impl Setup {
    /// Opens the driver, checks the devices and allocates, registers and fills the buffers.
    fn new(args: &BenchArgs, settings: ConfigBuilder) -> Result<Setup, String> {
        let driver = crate::runtime::open_driver(settings)?;
        let io = args.io_size.min(args.size);
        let parts = partition(args.size, io, args.threads);
        let runtime_note = crate::runtime::runtime_note(&driver);
        let len = usize::try_from(io).map_err(|_| format!("--io-size {io} is too large"))?;
        // The pattern is made a piece at a time, so that the bench's own memory stays small
        // beside the library's in the peak resident memory it reports.
        let mut pattern = HostBuf::new(len.min(RAW_IO as usize));
        let mut groups = Vec::new();
        for device in devices(&driver, args.devices.as_ref())? {
            let on = device
                .map(|d| format!(" on device {d}"))
                .unwrap_or_default();
            let mut bufs = Vec::with_capacity(parts.len());
            for &(start, _) in &parts {
                let buf = alloc(&driver, device, len).map_err(|e| {
                    format!("cannot allocate a GPU buffer of {len} bytes{on}: {e}{runtime_note}")
                })?;
                driver
                    .register_buffer(&buf)
                    .map_err(|e| format!("cannot register a GPU buffer of {len} bytes{on}: {e}"))?;
                // What writes write: the file's own pattern.
                let mut at = 0;
                while at < len {
                    let piece = &mut pattern.get_mut()[..(len - at).min(RAW_IO as usize)];
                    fill_pattern(piece, start + at as u64);
                    buf.copy_from_host(at, piece)
                        .map_err(|e| format!("cannot fill a GPU buffer{on}: {e}"))?;
                    at += piece.len();
                }
                bufs.push(buf);
            }
            groups.push(Group { device, bufs });
        }
        Ok(Setup {
            driver,
            groups,
            parts,
            io,
        })
    }
}

fn measure(args: &BenchArgs, setup: Setup, file: &File) -> Result<Report, String> {
    let Setup {
        driver,
        groups,
        parts,
        io,
    } = setup;
    let handle = driver
        .register_file(file)
        .map_err(|e| crate::runtime::register_failed("the test file", &e))?;
    let case = Case {
        args,
        file,
        handle,
        groups,
        parts,
        io,
    };
    // Every device moves the whole file in each run.
    let total = args.size.saturating_mul(case.groups.len() as u64);
    let mut runs = Vec::new();
    let mut device_runs: Vec<Vec<f64>> = case.groups.iter().map(|_| Vec::new()).collect();
    let mut served = Served::default();
    let mut file_limits = if args.limits {
        Some(FileLimits::choose(&case)?)
    } else {
        None
    };
    let mut peak_rss_bytes = Some(0u64);
    for _ in 0..args.runs {
        set_cache(file, args.size, args.cache)?;
        // The peak of the run alone: not the bench's own buffers of the limits or of the
        // cache warming before it.
        let peak_reset = reset_peak_rss();
        let (seconds, each, s) = case.timed_run()?;
        peak_rss_bytes = match (peak_reset, peak_rss_bytes, peak_rss()) {
            (true, Some(most), Some(now)) => Some(most.max(now)),
            _ => None,
        };
        runs.push(gbps(total, seconds));
        for (r, &t) in device_runs.iter_mut().zip(&each) {
            r.push(gbps(args.size, t));
        }
        served.add(s);
        if let Some(f) = file_limits.as_mut() {
            f.run(&case)?;
        }
    }
    let device_runs = args.devices.is_some().then(|| {
        case.groups
            .iter()
            .zip(device_runs)
            .filter_map(|(g, runs)| g.device.map(|device| DeviceRuns { device, runs }))
            .collect()
    });
    let limits = match &file_limits {
        Some(f) => Some(case.limits(&driver, f)?),
        None => None,
    };
    Ok(Report {
        op: args.op,
        size: args.size,
        io_size: io,
        threads: case.parts.len(),
        cache: args.cache,
        backend: args.backend,
        file: args.file.display().to_string(),
        runs,
        devices: device_runs,
        served,
        peak_rss_bytes,
        limits,
    })
}

impl Case<'_> {
    /// One run: every thread of every device moves its part, all started together; returns
    /// the seconds of the whole run, those of each device (until its last thread finished),
    /// and what was served.
    fn timed_run(&self) -> Result<(f64, Vec<f64>, Served), String> {
        let op = self.args.op;
        let per_device = self.parts.len();
        // The parts of every device, one after the other: thread `i` is device
        // `i / per_device`'s part `i % per_device`.
        let all: Vec<(u64, u64)> = self
            .groups
            .iter()
            .flat_map(|_| self.parts.iter().copied())
            .collect();
        let start = Instant::now();
        let finished = parallel(&all, |i, from, to| {
            let buf = &self.groups[i / per_device].bufs[i % per_device];
            let mut served = Served::default();
            let mut at = from;
            while at < to {
                let len = (to - at).min(self.io);
                let mut done = 0u64;
                while done < len {
                    let offset = at + done;
                    let outcome = match op {
                        Op::Read => self.handle.read(
                            buf,
                            len - done,
                            file_offset(offset)?,
                            file_offset(done)?,
                        ),
                        Op::Write => self.handle.write(
                            buf,
                            len - done,
                            file_offset(offset)?,
                            file_offset(done)?,
                        ),
                    }
                    .map_err(|e| {
                        format!(
                            "cannot {} the test file ({} bytes at offset {offset}): {e}",
                            op.as_str(),
                            len - done
                        )
                    })?;
                    served.count(&outcome);
                    if outcome.bytes == 0 {
                        return Err(format!(
                            "the test file ended at {offset}: it changed during the run"
                        ));
                    }
                    done += outcome.bytes;
                }
                at += len;
            }
            Ok((served, start.elapsed().as_secs_f64()))
        })?;
        let seconds = start.elapsed().as_secs_f64();
        let mut total = Served::default();
        let mut each = Vec::with_capacity(self.groups.len());
        for device in finished.chunks(per_device.max(1)) {
            let mut last = 0.0f64;
            for &(s, t) in device {
                total.add(s);
                last = last.max(t);
            }
            each.push(last);
        }
        Ok((seconds, each, total))
    }

    /// One raw run of the file-side limit with `threads` threads, in the case's cache state.
    fn raw_run(&self, threads: usize) -> Result<f64, String> {
        let size = self.args.size;
        set_cache(self.file, size, self.args.cache)?;
        let seconds = raw_io(self.file, self.args.op, size, threads, false)?;
        Ok(gbps(size, seconds))
    }

    /// One raw run of `O_DIRECT` reads with `threads` threads on a cold cache; `None` when
    /// the file system does no direct I/O.
    fn raw_direct_run(&self, threads: usize) -> Result<Option<f64>, String> {
        let size = self.args.size;
        set_cache(self.file, size, Cache::Cold)?;
        Ok(raw_direct_read(&self.args.file, size, threads)?.map(|s| gbps(size, s)))
    }

    fn limits(&self, driver: &Driver, file_limits: &FileLimits) -> Result<Limits, String> {
        let size = self.args.size;
        let op = self.args.op;
        let raw_best = file_limits.raw_gbps();
        let raw_direct_gbps = file_limits.direct_gbps();
        let mut copy_best = 0.0f64;
        let mut pinned_best = 0.0f64;
        for parts in [1, self.parts.len()] {
            copy_best = copy_best.max(gbps(size, self.copies(driver, op, parts, false)?));
            pinned_best = pinned_best.max(gbps(size, self.copies(driver, op, parts, true)?));
        }
        let serial_gbps = file_limits.serial_gbps();
        let latency = self.latencies(driver)?;
        Ok(Limits {
            raw_io_gbps: raw_best,
            raw_direct_gbps,
            copy_gbps: copy_best,
            pinned_copy_gbps: pinned_best,
            serial_gbps,
            latency,
        })
    }

    /// Upstream hipFile's serial fallback over the whole file (see [`Limits::serial_gbps`])
    /// with the first device buffer; returns the seconds taken.
    fn serial(&self, op: Op) -> Result<f64, String> {
        let size = self.args.size;
        let buf = &self.groups[0].bufs[0];
        let chunk = RAW_IO.min(self.io).min(size) as usize;
        let mut host = HostBuf::new(chunk);
        if op == Op::Write {
            fill_pattern(host.get_mut(), 0);
        }
        let start = Instant::now();
        let mut at = 0u64;
        while at < size {
            let n = (size - at).min(chunk as u64) as usize;
            raw_request(self.file, buf, op, &mut host.get_mut()[..n], at)?;
            at += n as u64;
        }
        Ok(start.elapsed().as_secs_f64())
    }

    /// Copies `size` bytes between host memory (pinned, or pageable) and the device buffers
    /// of the first device in requests of the case's size with `threads` threads; returns the
    /// seconds taken.
    fn copies(&self, driver: &Driver, op: Op, threads: usize, pinned: bool) -> Result<f64, String> {
        let parts = partition(self.args.size, self.io, threads);
        let len = self.io as usize;
        let mut hosts = Vec::with_capacity(parts.len());
        for _ in &parts {
            hosts.push(std::sync::Mutex::new(if pinned {
                Host::Pinned(driver.alloc_pinned(len).map_err(|e| {
                    format!("cannot allocate {len} bytes of pinned host memory: {e}")
                })?)
            } else {
                Host::Pageable(HostBuf::new(len))
            }));
        }
        let bufs = &self.groups[0].bufs;
        let start = Instant::now();
        parallel(&parts, |i, from, to| {
            let mut host = hosts[i]
                .lock()
                .map_err(|_| "a host buffer is unusable".to_owned())?;
            let buf = &bufs[i];
            let mut at = from;
            while at < to {
                let n = (to - at).min(self.io) as usize;
                match op {
                    Op::Read => buf.copy_from_host(0, &host.get()[..n]),
                    Op::Write => buf.copy_to_host(0, &mut host.get_mut()[..n]),
                }
                .map_err(|e| format!("copy of {n} bytes failed: {e}"))?;
                at += n as u64;
            }
            Ok(())
        })?;
        Ok(start.elapsed().as_secs_f64())
    }

    /// Median latencies of raw and library requests of each of [`LATENCY_SIZES`] no larger
    /// than the file, on a hot cache, with a buffer on the first device.
    fn latencies(&self, driver: &Driver) -> Result<Vec<Latency>, String> {
        let size = self.args.size;
        let largest = LATENCY_SIZES.iter().copied().max().unwrap_or(PAGE as u64);
        let buf = alloc(driver, self.groups[0].device, largest as usize)
            .map_err(|e| format!("cannot allocate a GPU buffer of {largest} bytes: {e}"))?;
        driver
            .register_buffer(&buf)
            .map_err(|e| format!("cannot register a GPU buffer of {largest} bytes: {e}"))?;
        // The raw path at its best: pinned memory, so that its copy is the fastest there is.
        let mut host =
            Host::Pinned(driver.alloc_pinned(largest as usize).map_err(|e| {
                format!("cannot allocate {largest} bytes of pinned host memory: {e}")
            })?);
        fill_pattern(host.get_mut(), 0);
        buf.copy_from_host(0, host.get())
            .map_err(|e| format!("cannot fill a GPU buffer: {e}"))?;
        let op = self.args.op;
        let mut out = Vec::new();
        for n in LATENCY_SIZES.into_iter().filter(|&n| n <= size) {
            let slots = size / n;
            let offsets: Vec<u64> = (0..LATENCY_ITERATIONS as u64)
                .map(|i| (i % slots) * n)
                .collect();
            let len = n as usize;
            // Hot: every offset is read once before either is timed.
            for &at in &offsets {
                self.file
                    .read_exact_at(&mut host.get_mut()[..len], at)
                    .map_err(|e| format!("pread at {at} failed: {e}"))?;
            }
            let mut raw = Vec::with_capacity(offsets.len());
            for &at in &offsets {
                let t = Instant::now();
                raw_request(self.file, &buf, op, &mut host.get_mut()[..len], at)?;
                raw.push(t.elapsed().as_secs_f64() * 1e6);
            }
            let mut lib = Vec::with_capacity(offsets.len());
            for &at in &offsets {
                let t = Instant::now();
                let outcome = match op {
                    Op::Read => self.handle.read(&buf, n, file_offset(at)?, 0),
                    Op::Write => self.handle.write(&buf, n, file_offset(at)?, 0),
                }
                .map_err(|e| format!("cannot {} {n} bytes at {at}: {e}", op.as_str()))?;
                lib.push(t.elapsed().as_secs_f64() * 1e6);
                if outcome.bytes != n {
                    return Err(format!(
                        "{} of {n} bytes at {at} moved {} bytes",
                        op.as_str(),
                        outcome.bytes
                    ));
                }
            }
            out.push(Latency {
                size: n,
                raw_us: spread(&raw).0,
                hipfile_us: spread(&lib).0,
            });
        }
        Ok(out)
    }
}

/// `VmHWM` from `/proc/self/status`, in bytes.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_hwm(&status)
}

/// Sets the process's peak resident memory to what it holds now (Linux 4.0:
/// `/proc/self/clear_refs`, value 5); false when the kernel refused.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The `VmHWM:` line of a `/proc/PID/status` text, in bytes.
pub fn parse_vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let mut words = line["VmHWM:".len()..].split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => n.checked_mul(1024),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn the_fastest_count_is_chosen_from_one_run_of_each() {
        let mut calls = Vec::new();
        let got = fastest(&[1, 4, 8], |n| {
            calls.push(n);
            Ok(Some(if n == 4 { 9.0 } else { n as f64 }))
        })
        .unwrap();
        assert_eq!(got, Some(4));
        assert_eq!(calls, [1, 4, 8]);
        let mut asked = 0;
        let none = fastest(&[1, 2], |_| {
            asked += 1;
            Ok(None)
        });
        assert_eq!(none.unwrap(), None);
        assert_eq!(asked, 1, "no figure: the other counts are not tried");
        assert!(fastest(&[1], |_| Err("broken".to_owned())).is_err());
    }

    #[test]
    fn a_file_limit_is_the_median_of_its_runs_between_the_cases() {
        let limits = FileLimits {
            threads: 4,
            direct_threads: Some(16),
            raw: vec![1.9, 1.5, 1.7],
            direct: vec![2.0, 2.2, 1.0],
            serial: vec![0.4, 0.6, 0.5],
        };
        assert_eq!(limits.raw_gbps(), 1.7);
        assert_eq!(limits.direct_gbps(), Some(2.0));
        assert_eq!(limits.serial_gbps(), 0.5);
        let buffered_only = FileLimits {
            direct_threads: None,
            direct: Vec::new(),
            ..limits
        };
        assert_eq!(buffered_only.direct_gbps(), None);
    }

    #[test]
    fn spread_is_median_min_max() {
        assert_eq!(spread(&[3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(spread(&[4.0, 1.0, 2.0, 3.0]), (2.5, 1.0, 4.0));
        assert_eq!(spread(&[]), (0.0, 0.0, 0.0));
        assert_eq!(gbps(2_000_000_000, 0.5), 4.0);
        assert_eq!(gbps(1, 0.0), 0.0);
    }

    #[test]
    fn vm_hwm_is_read_in_bytes() {
        let s = "Name:\thipfile\nVmPeak:\t  9000 kB\nVmHWM:\t    1234 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(parse_vm_hwm(s), Some(1234 * 1024));
        assert_eq!(parse_vm_hwm("VmRSS: 1 kB\n"), None);
        assert_eq!(parse_vm_hwm("VmHWM: x kB\n"), None);
    }

    #[test]
    fn the_pattern_has_no_zero_byte() {
        let mut b = vec![0u8; 8192];
        fill_pattern(&mut b, 4096);
        assert!(b.iter().all(|&x| x != 0));
        assert_ne!(b[..4096], b[4096..]);
    }

    #[test]
    fn sizes_are_written_in_binary_units() {
        assert_eq!(bytes_text(8 << 30), "8 GiB");
        assert_eq!(bytes_text(64 << 20), "64 MiB");
        assert_eq!(bytes_text(4096), "4 KiB");
        assert_eq!(bytes_text(1536), "1.50 KiB");
        assert_eq!(bytes_text(12), "12 B");
    }

    #[test]
    fn json_has_the_documented_keys() {
        let r = Report {
            op: Op::Read,
            size: 8,
            io_size: 4,
            threads: 2,
            cache: Cache::Hot,
            backend: BackendChoice::Auto,
            file: "f".into(),
            runs: vec![1.0, 2.0, 3.0],
            devices: None,
            served: Served {
                fastpath_bytes: 0,
                fallback_bytes: 24,
            },
            peak_rss_bytes: Some(4096),
            limits: Some(Limits {
                raw_io_gbps: 4.0,
                raw_direct_gbps: Some(5.0),
                copy_gbps: 8.0,
                pinned_copy_gbps: 6.0,
                serial_gbps: 0.5,
                latency: vec![Latency {
                    size: 4096,
                    raw_us: 2.0,
                    hipfile_us: 3.0,
                }],
            }),
        };
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(v["median_gbps"], 2.0);
        // The lowest limit: the better raw read (direct, 5) below the pinned copy (6); the
        // pageable copy does not bound the fallback.
        assert_eq!(v["ratio"], 0.4);
        assert_eq!(v["limits"]["pread_gbps"], 4.0);
        assert_eq!(v["limits"]["pread_direct_gbps"], 5.0);
        assert_eq!(v["limits"]["pageable_h2d_gbps"], 8.0);
        assert_eq!(v["limits"]["pinned_h2d_gbps"], 6.0);
        assert_eq!(v["serial_gbps"], 0.5);
        assert_eq!(v["vs_serial"], 4.0, "median 2.0 over the serial 0.5");
        assert_eq!(v["latency"][0]["ratio"], 1.5);
        assert!(v.get("devices").is_none(), "only with --devices");
        assert!(r.text().contains("median"));
        let text = r.text();
        assert!(!text.contains("per device"), "{text}");
        assert!(!text.lines().any(|l| l.starts_with("  device ")), "{text}");
    }

    #[test]
    fn each_device_has_its_runs_and_spread() {
        let r = Report {
            op: Op::Read,
            size: 8,
            io_size: 4,
            threads: 2,
            cache: Cache::Hot,
            backend: BackendChoice::Auto,
            file: "f".into(),
            runs: vec![4.0, 6.0],
            devices: Some(vec![
                DeviceRuns {
                    device: 0,
                    runs: vec![2.0, 3.0],
                },
                DeviceRuns {
                    device: 3,
                    runs: vec![2.5, 4.5],
                },
            ]),
            served: Served::default(),
            peak_rss_bytes: None,
            limits: None,
        };
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(v["median_gbps"], 5.0, "the total");
        assert_eq!(v["threads"], 2, "per device");
        let d = v["devices"].as_array().unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d[1]["device"], 3);
        assert_eq!(d[1]["runs"], serde_json::json!([2.5, 4.5]));
        assert_eq!(
            (&d[1]["median_gbps"], &d[1]["min_gbps"], &d[1]["max_gbps"]),
            (&3.5.into(), &2.5.into(), &4.5.into())
        );
        let text = r.text();
        assert!(
            text.contains("2 threads per device on devices 0,3"),
            "{text}"
        );
        assert!(
            text.contains("device 3, median") && text.contains("(min 2.500, max 4.500)"),
            "{text}"
        );
    }
}
