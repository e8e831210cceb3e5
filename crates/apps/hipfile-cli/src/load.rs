//! `hipfile load`: loads a safetensors checkpoint into GPU memory with
//! `hipfile-safetensors`, and reports how fast and through which backend; `--verify`
//! compares every tensor's bytes in GPU memory with the file's.

use crate::failure::Failure;
use crate::load_limits::{LoadLimits, Shards};
use crate::options;
use crate::runtime::{RuntimeChoice, open_driver, runtime_note};
use clap::{Args, ValueEnum};
use hipfile_safetensors::{
    CacheState, Checkpoint, Index, Loader, MAX_REQUEST_SIZE, Progress, RemoteSettings, is_index,
    is_url,
};
use serde_json::json;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Every tensor was loaded (and, with --verify, matches its file).
pub const EXIT_LOADED: u8 = 0;
/// The load failed: a bad shard, the driver, an allocation or a read.
pub const EXIT_FAILED: u8 = 1;
/// Bad arguments, or an emulated runtime that is not found.
pub const EXIT_USAGE: u8 = 2;
/// `--verify` found a tensor whose bytes in GPU memory differ from the file's.
pub const EXIT_MISMATCH: u8 = 3;

/// Bytes compared at a time by `--verify`, on each side: the host memory it uses.
const VERIFY_CHUNK: usize = 16 << 20;

/// How often the progress line is redrawn.
const PROGRESS_EVERY: Duration = Duration::from_millis(200);

/// Load a safetensors checkpoint into GPU memory
#[derive(Debug, Clone, PartialEq, Eq, Args)]
#[command(
    args_override_self = true,
    long_about = "\
Load a safetensors checkpoint into GPU memory

Reads and validates the header of every SHARD (the .safetensors files of one checkpoint, or
its index, model.safetensors.index.json, which stands for the shards it names), refusing a
bad file or a tensor name found in two shards before anything is allocated,
then reads each shard's tensor data into one GPU buffer in large requests, many in flight
at once, through the fastpath where the file system allows it and the fallback otherwise.
Prints the tensors and bytes loaded, the time and the bandwidth (GB/s: 10^9 bytes per
second of the tensors' bytes), and the bytes each backend moved. The time runs from after
the GPU runtime has made its context on the device (before the headers are read) to the
last byte in GPU memory, as Python loaders' figures run from after CUDA's start.

With --verify, every tensor's bytes are then copied back from the GPU and their CRC-32
(IEEE, as Python's zlib.crc32) compared with that of the file's bytes, read with pread;
each mismatch is reported. With --json the CRC-32 of every tensor is printed too.

By default the page cache decides how the checkpoint is read (cachestat): a hot one with
8 requests of 64 MiB in flight, every shard at once; a cold one with 1 request of 1 GiB at
a time, in file order.",
    after_long_help = "\
Numbers are whole numbers of bytes, optionally followed by a suffix that multiplies by a
power of 1024: K, KB or KiB (1024), M, MB or MiB (1024^2), G, GB or GiB (1024^3); for
example 64M.

A progress line is shown on stderr when stderr is a terminal.

Exit status: 0 when every tensor was loaded (and matches, with --verify); 1 when the load
failed (a bad shard, the driver, an allocation or a read); 2 on bad arguments or an
emulated runtime that is not found; 3 when --verify found a mismatch."
)]
pub struct LoadArgs {
    /// Print one JSON object: shards, tensors, bytes, bytes_read, seconds, gbps,
    /// fastpath_bytes, fallback_bytes, requests, in_flight, request_size, cache,
    /// peak_rss_bytes (the process's peak resident memory during the load, or null), runs
    /// (each load's seconds, gbps, read_seconds (the part spent reading, after the headers,
    /// the plan and the allocations) and peak_rss_bytes; the figures above are the first's),
    /// with --verify mismatches and crc32 (by tensor name), and with --limits limits and
    /// ratio
    #[arg(long)]
    pub json: bool,
    /// The GPU to load into [default: the current device]
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::builder::RangedI64ValueParser::<i32>::new().range(0..=1023)
    )]
    pub device: Option<i32>,
    /// Load only the tensors whose names match GLOB (`*`: any characters, `?`: one)
    #[arg(long, value_name = "GLOB")]
    pub filter: Option<String>,
    /// Compare every loaded tensor's CRC-32 in GPU memory with the file's
    #[arg(long)]
    pub verify: bool,
    /// Also list every loaded tensor: name, dtype, shape, bytes, shard (with --json, as
    /// tensor_list)
    #[arg(long)]
    pub list: bool,
    /// Also measure what the load is compared against, over the same shard files in the
    /// cache state the load found: raw parallel pread of every shard after each load (and,
    /// cold, O_DIRECT reads), with the fastest of 1, 4, 8 and 16 threads (4 and 16 for
    /// O_DIRECT), each tried once after the first load, and copies from pinned memory to
    /// the device; reports them as limits, and the median load over the lower of the
    /// file's limit and the copies' as ratio. A cold load's shards are left uncached for
    /// the next load
    #[arg(long)]
    pub limits: bool,
    /// Bytes per request, a multiple of 4096 up to 1GiB [default: 64MiB hot, 1GiB cold]
    #[arg(long, value_name = "N", value_parser = request_size)]
    pub request_size: Option<u64>,
    /// Requests in flight, 1 to 1024 [default: 8 hot, 1 cold]
    #[arg(
        long,
        value_name = "N",
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024)
    )]
    pub in_flight: Option<usize>,
    /// Whether the checkpoint is read as cached (hot) or not (cold); auto asks the kernel
    #[arg(long, value_name = "STATE", value_enum, default_value_t)]
    pub cache: CacheChoice,
    /// Load the checkpoint this many times in this process, one after another (each load's
    /// GPU memory freed before the next), reporting each: the first pays for the staging
    /// memory's pinning, the later ones find it ready, as a program that loads more than
    /// once does. The peer loaders' figures in docs/BENCHMARKS.md are taken the same way.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100)
    )]
    pub runs: usize,
    /// The GPU runtime to use: the one found on this machine, or the emulated runtime
    /// libhipfile_emu.so in this program's directory or its deps/ subdirectory (test and
    /// development only)
    #[arg(long, value_name = "RUNTIME", value_enum, default_value_t)]
    pub runtime: RuntimeChoice,
    /// The checkpoint's .safetensors files; a path ending in .json is the checkpoint's
    /// index (model.safetensors.index.json), read in place of the shards it names (relative
    /// to its directory). Or URLs: s3://BUCKET/KEY, http(s)://HOST/PATH (shards or the
    /// index), or s3://BUCKET/PREFIX/ (its index, else its .safetensors objects), read by
    /// ranged GETs with endpoint and keys from the AWS_* variables
    #[arg(value_name = "SHARD", required = true)]
    pub shards: Vec<PathBuf>,
}

/// `--cache`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum CacheChoice {
    /// Ask the kernel how much of the checkpoint is cached.
    #[default]
    Auto,
    /// Read it as cached.
    Hot,
    /// Read it as uncached.
    Cold,
}

/// `--request-size`: a byte count, a non-zero multiple of 4096, at most 1 GiB.
fn request_size(text: &str) -> Result<u64, String> {
    let n = options::bytes(text)?;
    if n == 0 || n % 4096 != 0 || n > MAX_REQUEST_SIZE {
        return Err(format!(
            "{text:?} is not valid; expected a number of bytes, a multiple of 4096 from 4096 \
             to {MAX_REQUEST_SIZE}"
        ));
    }
    Ok(n)
}

/// A tensor whose bytes in GPU memory differ from the file's.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mismatch {
    name: String,
    file_crc: u32,
    gpu_crc: u32,
}

/// Runs `hipfile load`.
pub fn run(args: &LoadArgs) -> Result<u8, Failure> {
    let failed = |message: String| Failure::msg(EXIT_FAILED, message);
    let settings =
        crate::runtime::settings(args.runtime).map_err(|m| Failure::msg(EXIT_USAGE, m))?;
    let driver = open_driver(settings, args.runtime).map_err(failed)?;

    // The runtime makes the device's context on its first allocation (a tenth of a second
    // on the GPU machine): made now, it is not counted as loading, as the Python loaders'
    // own figures do not count CUDA's start. A failure here is the load's to report.
    drop(match args.device {
        Some(d) => driver.alloc_on(d, 4096),
        None => driver.alloc(4096),
    });
    // An index is loaded as the shards it names: say so, as the output counts shards. One
    // that cannot be read is the load's to report.
    for index in args.shards.iter().filter(|p| is_index(p)) {
        if let Ok(read) = Index::read(index) {
            eprintln!(
                "hipfile: {} is a checkpoint index: loading the {} shards it names",
                index.display(),
                read.shards().len()
            );
        }
    }
    // Shards at URLs are read with ranged GETs; all of them, or none.
    let urls: Vec<&str> = args
        .shards
        .iter()
        .filter_map(|p| p.to_str().filter(|t| is_url(t)))
        .collect();
    if !urls.is_empty() && urls.len() != args.shards.len() {
        return Err(Failure::msg(
            EXIT_USAGE,
            "give local shards or URLs (s3://, http://, https://), not both".to_owned(),
        ));
    }
    if !urls.is_empty() && args.limits {
        return Err(Failure::msg(
            EXIT_USAGE,
            "--limits reads local files: it is not available for URLs".to_owned(),
        ));
    }
    if !urls.is_empty() && args.verify {
        return Err(Failure::msg(
            EXIT_USAGE,
            "--verify compares with local files: it is not available for URLs".to_owned(),
        ));
    }
    let mut runs = Vec::with_capacity(args.runs);
    let mut checkpoint = None;
    let mut limits: Option<(Shards, LoadLimits)> = None;
    for _ in 0..args.runs {
        // The last load's GPU memory goes before the next is allocated.
        drop(checkpoint.take());
        let mut bar = Bar::new();
        let loader = loader_for(&driver, args, &mut bar);
        // The peak is the load's own (the host memory a load needs is bounded by the
        // staging pool, not by the checkpoint): counted from here, where the kernel allows
        // a reset.
        let peak_reset = crate::rss::reset_peak_rss();
        let start = Instant::now();
        let loaded = if urls.is_empty() {
            loader.load(&args.shards)
        } else {
            loader.load_urls(&urls, &RemoteSettings::default())
        };
        let seconds = start.elapsed().as_secs_f64();
        let peak = crate::rss::peak_rss().filter(|_| peak_reset);
        bar.finish();
        checkpoint = Some(loaded.map_err(|e| {
            failed(format!(
                "cannot load the checkpoint: {e}{}",
                if matches!(e, hipfile_safetensors::LoadError::Gpu { .. }) {
                    runtime_note(&driver)
                } else {
                    String::new()
                }
            ))
        })?);
        let read_seconds = checkpoint
            .as_ref()
            .map_or(0.0, |ck| ck.report().read_time.as_secs_f64());
        runs.push(Timing {
            seconds,
            read_seconds,
            peak,
        });
        if let (true, Some(ck)) = (args.limits, &checkpoint) {
            let (shards, figures) = match limits.as_mut() {
                Some((shards, figures)) => (&*shards, figures),
                None => {
                    let shards = Shards::open(ck.shard_paths()).map_err(failed)?;
                    let r = ck.report();
                    let figures =
                        LoadLimits::choose(&shards, r.cold, &driver, args.device, r.in_flight)
                            .map_err(failed)?;
                    let (shards, figures) = limits.insert((shards, figures));
                    (&*shards, figures)
                }
            };
            figures.run(shards).map_err(failed)?;
        }
    }
    let Some(checkpoint) = checkpoint else {
        return Err(failed("no load was made (--runs 0)".to_owned()));
    };

    let verified = if args.verify {
        Some(verify(&checkpoint).map_err(failed)?)
    } else {
        None
    };
    let limits = limits.map(|(_, figures)| figures);
    let shown = Shown {
        ck: &checkpoint,
        runs: &runs,
        verified: verified.as_ref(),
        list: args.list,
        limits: limits.as_ref(),
    };
    let text = if args.json {
        to_json(shown)
    } else {
        to_text(shown)
    };
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{text}")
        .and_then(|()| stdout.flush())
        .map_err(|e| Failure::output(EXIT_FAILED, e))?;
    match verified {
        Some((_, mismatches)) if !mismatches.is_empty() => {
            for m in &mismatches {
                eprintln!(
                    "hipfile: {}: the bytes in GPU memory (CRC-32 {:08x}) differ from the file's ({:08x})",
                    m.name, m.gpu_crc, m.file_crc
                );
            }
            Ok(EXIT_MISMATCH)
        }
        _ => Ok(EXIT_LOADED),
    }
}

/// The loader `args` ask for, reporting progress to `bar`.
fn loader_for<'a>(driver: &'a hipfile::Driver, args: &LoadArgs, bar: &'a mut Bar) -> Loader<'a> {
    let mut loader = Loader::new(driver)
        .cache_state(match args.cache {
            CacheChoice::Auto => CacheState::Detect,
            CacheChoice::Hot => CacheState::Hot,
            CacheChoice::Cold => CacheState::Cold,
        })
        .progress(|p| bar.update(p));
    if let Some(glob) = &args.filter {
        loader = loader.filter(glob);
    }
    if let Some(d) = args.device {
        loader = loader.device(d);
    }
    if let Some(n) = args.request_size {
        loader = loader.request_size(n);
    }
    if let Some(n) = args.in_flight {
        loader = loader.in_flight(n);
    }
    loader
}

/// The first load's time and peak: the figures of a program that loads once.
fn first(runs: &[Timing]) -> (f64, Option<u64>) {
    runs.first().map_or((0.0, None), |t| (t.seconds, t.peak))
}

/// One load's time, the part of it spent reading (the rest went to the headers, the plan
/// and the allocations), and the process's peak resident memory during it (when the kernel
/// let the peak be reset).
struct Timing {
    seconds: f64,
    read_seconds: f64,
    peak: Option<u64>,
}

/// Every tensor's CRC-32 from GPU memory (in the checkpoint's order), and those that differ
/// from the file's.
fn verify(checkpoint: &Checkpoint) -> Result<Verified, String> {
    let files: Vec<(PathBuf, File)> = checkpoint
        .shard_paths()
        .map(|p| {
            File::open(p)
                .map(|f| (p.to_path_buf(), f))
                .map_err(|e| format!("--verify: cannot open {}: {e}", p.display()))
        })
        .collect::<Result<_, _>>()?;
    let mut host = vec![0u8; VERIFY_CHUNK.min(checkpoint.tensor_bytes() as usize)];
    let mut disk = vec![0u8; host.len()];
    let (mut crcs, mut mismatches) = (Vec::new(), Vec::new());
    for t in checkpoint.iter() {
        let (path, file) = &files[t.shard()];
        let (mut gpu, mut ondisk) = (crc32fast::Hasher::new(), crc32fast::Hasher::new());
        let mut at = 0;
        while at < t.byte_len() {
            let n = (t.byte_len() - at).min(host.len());
            let view = t
                .view()
                .slice(at..at + n)
                .map_err(|e| format!("--verify: {}: {e}", t.name()))?;
            view.copy_to_host(&mut host[..n])
                .map_err(|e| format!("--verify: cannot copy {} from the GPU: {e}", t.name()))?;
            file.read_exact_at(&mut disk[..n], t.file_offset() + at as u64)
                .map_err(|e| format!("--verify: cannot read {}: {e}", path.display()))?;
            gpu.update(&host[..n]);
            ondisk.update(&disk[..n]);
            at += n;
        }
        let (gpu_crc, file_crc) = (gpu.finalize(), ondisk.finalize());
        if gpu_crc != file_crc {
            mismatches.push(Mismatch {
                name: t.name().to_owned(),
                file_crc,
                gpu_crc,
            });
        }
        crcs.push((t.name().to_owned(), gpu_crc));
    }
    Ok((crcs, mismatches))
}

fn gbps(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 / seconds / 1e9
    } else {
        0.0
    }
}

type Verified = (Vec<(String, u32)>, Vec<Mismatch>);

/// What the output shows: the last load's checkpoint, every load's timing, and what
/// --verify and --limits found.
#[derive(Clone, Copy)]
struct Shown<'a> {
    ck: &'a Checkpoint,
    runs: &'a [Timing],
    verified: Option<&'a Verified>,
    list: bool,
    limits: Option<&'a LoadLimits>,
}

fn to_json(shown: Shown<'_>) -> String {
    let Shown {
        ck,
        runs,
        verified,
        list,
        limits,
    } = shown;
    let r = ck.report();
    let (seconds, peak) = first(runs);
    let mut v = json!({
        "shards": ck.shard_paths().count(),
        "tensors": ck.len(),
        "bytes": ck.tensor_bytes(),
        "bytes_read": r.bytes_read,
        "seconds": seconds,
        "gbps": gbps(ck.tensor_bytes(), seconds),
        "fastpath_bytes": r.fastpath_bytes,
        "fallback_bytes": r.fallback_bytes,
        "requests": r.requests,
        "in_flight": r.in_flight,
        "request_size": r.request_size,
        "cache": if r.cold { "cold" } else { "hot" },
        "peak_rss_bytes": peak,
        "runs": runs
            .iter()
            .map(|t| json!({
                "seconds": t.seconds,
                "gbps": gbps(ck.tensor_bytes(), t.seconds),
                "read_seconds": t.read_seconds,
                "peak_rss_bytes": t.peak,
            }))
            .collect::<Vec<_>>(),
    });
    if list {
        v["tensor_list"] = ck
            .iter()
            .map(|t| {
                json!({
                    "name": t.name(),
                    "dtype": format!("{:?}", t.dtype()),
                    "shape": t.shape(),
                    "bytes": t.byte_len(),
                    "shard": t.shard_path().display().to_string(),
                })
            })
            .collect::<Vec<_>>()
            .into();
    }
    if let Some((crcs, mismatches)) = verified {
        v["crc32"] = crcs
            .iter()
            .map(|(name, crc)| (name.clone(), json!(crc)))
            .collect::<serde_json::Map<_, _>>()
            .into();
        v["mismatches"] = mismatches
            .iter()
            .map(|m| json!({"name": m.name, "file_crc32": m.file_crc, "gpu_crc32": m.gpu_crc}))
            .collect::<Vec<_>>()
            .into();
    }
    if r.remote_bytes > 0 {
        v["remote_bytes"] = r.remote_bytes.into();
        v["cache"] = "remote".into();
    }
    if let Some(l) = limits {
        v["limits"] = l.to_json();
        v["ratio"] = l.ratio(&loads_gbps(ck, runs)).into();
    }
    v.to_string()
}

fn to_text(shown: Shown<'_>) -> String {
    let Shown {
        ck,
        runs,
        verified,
        list,
        limits,
    } = shown;
    let r = ck.report();
    let (seconds, peak) = first(runs);
    let mut out = String::new();
    if list {
        for t in ck.iter() {
            out.push_str(&format!(
                "{} {:?} {:?} {} bytes ({})\n",
                t.name(),
                t.dtype(),
                t.shape(),
                t.byte_len(),
                t.shard_path().display()
            ));
        }
    }
    out += &format!(
        "loaded {} tensors, {} bytes from {} shards in {seconds:.3} s: {:.2} GB/s ({}, {} requests of up to {} bytes, {} in flight)\n\
         {}fastpath {} bytes, fallback {} bytes",
        ck.len(),
        ck.tensor_bytes(),
        ck.shard_paths().count(),
        gbps(ck.tensor_bytes(), seconds),
        if r.remote_bytes > 0 {
            "remote"
        } else if r.cold {
            "cold"
        } else {
            "hot"
        },
        r.requests,
        r.request_size,
        r.in_flight,
        if r.remote_bytes > 0 {
            format!("remote {} bytes, ", r.remote_bytes)
        } else {
            String::new()
        },
        r.fastpath_bytes,
        r.fallback_bytes,
    );
    if let Some(bytes) = peak {
        out.push_str(&format!(
            "\npeak resident memory during the load: {:.1} MiB",
            bytes as f64 / f64::from(1 << 20)
        ));
    }
    if runs.len() > 1 {
        for (i, t) in runs.iter().enumerate() {
            out.push_str(&format!(
                "\nrun {}: {:.3} s, {:.2} GB/s (reading {:.3} s)",
                i + 1,
                t.seconds,
                gbps(ck.tensor_bytes(), t.seconds),
                t.read_seconds
            ));
        }
    }
    if let Some((crcs, mismatches)) = verified {
        out.push_str(&format!(
            "\nverify: {} of {} tensors match their files (CRC-32)",
            crcs.len() - mismatches.len(),
            crcs.len()
        ));
    }
    if let Some(l) = limits {
        out.push('\n');
        out.push_str(&l.text(&loads_gbps(ck, runs)));
    }
    out
}

/// Each load's GB/s.
fn loads_gbps(ck: &Checkpoint, runs: &[Timing]) -> Vec<f64> {
    runs.iter()
        .map(|t| gbps(ck.tensor_bytes(), t.seconds))
        .collect()
}

/// The progress bar on stderr: only on a terminal.
struct Bar {
    on: bool,
    last: Option<Instant>,
    shown: bool,
}

impl Bar {
    fn new() -> Bar {
        Bar {
            on: rustix::termios::isatty(io::stderr().as_fd()),
            last: None,
            shown: false,
        }
    }

    fn update(&mut self, p: Progress) {
        if !self.on || self.last.is_some_and(|t| t.elapsed() < PROGRESS_EVERY) || p.total == 0 {
            return;
        }
        self.last = Some(Instant::now());
        self.shown = true;
        const WIDTH: u64 = 30;
        let filled = (u128::from(p.done) * u128::from(WIDTH) / u128::from(p.total)) as usize;
        let percent = u128::from(p.done) * 100 / u128::from(p.total);
        let mut err = io::stderr().lock();
        let _ = write!(
            err,
            "\rhipfile: loading [{:<width$}] {percent:>3}% ({} of {} MB)",
            "#".repeat(filled),
            p.done / 1_000_000,
            p.total / 1_000_000,
            width = WIDTH as usize
        );
        let _ = err.flush();
    }

    fn finish(&mut self) {
        if self.shown {
            let mut err = io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.shown = false;
        }
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use crate::Command;
    use crate::tests::{error, parse};

    #[test]
    fn options_parse_and_bad_values_say_why() {
        let Ok(Command::Load(a)) = parse(&[
            "load",
            "--verify",
            "--filter",
            "*.q_proj.*",
            "--request-size",
            "128M",
            "--in-flight",
            "4",
            "--cache",
            "cold",
            "a.safetensors",
            "b.safetensors",
        ]) else {
            panic!("load did not parse");
        };
        assert!(a.verify && !a.json);
        assert_eq!(a.filter.as_deref(), Some("*.q_proj.*"));
        assert_eq!(a.request_size, Some(128 << 20));
        assert_eq!(a.in_flight, Some(4));
        assert_eq!(a.shards.len(), 2);
        let e = error(&["load"]);
        assert!(e.contains("SHARD"), "{e}");
        let e = error(&["load", "--request-size", "1000", "x"]);
        assert!(e.contains("multiple of 4096"), "{e}");
        let e = error(&["load", "--request-size", "2G", "x"]);
        assert!(e.contains("multiple of 4096"), "{e}");
        let e = error(&["load", "--in-flight", "0", "x"]);
        assert!(e.contains("--in-flight"), "{e}");
    }

    /// The defaults that `load --help` states are the loader's.
    #[test]
    fn help_states_the_loaders_defaults() {
        use hipfile_safetensors::{
            DEFAULT_COLD_IN_FLIGHT, DEFAULT_COLD_REQUEST_SIZE, DEFAULT_HOT_IN_FLIGHT,
            DEFAULT_REQUEST_SIZE,
        };
        let text = parse(&["load", "--help"])
            .expect_err("help")
            .render()
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let size = format!(
            "[default: {}MiB hot, {}GiB cold]",
            DEFAULT_REQUEST_SIZE >> 20,
            DEFAULT_COLD_REQUEST_SIZE >> 30
        );
        let depth =
            format!("[default: {DEFAULT_HOT_IN_FLIGHT} hot, {DEFAULT_COLD_IN_FLIGHT} cold]");
        for want in [size, depth] {
            assert!(text.contains(&want), "{want}: {text}");
        }
    }
}
