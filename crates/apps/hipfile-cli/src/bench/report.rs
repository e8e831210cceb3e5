//! The result of a case ([`Report`]) and its two forms: the table, and the `--json` object
//! (serde_json, keys in the order they are inserted).

use super::args::{Api, BackendChoice, Cache, Pattern};
use super::common::{LATENCY_ITERATIONS, spread};
use crate::tally::Tally;
use hipfile::Op;
use serde_json::{Map, Value, json};

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
    /// the best of [`RAW_THREADS`](super::common::RAW_THREADS), in the case's cache state: the median of one run after
    /// each of the case's runs.
    pub raw_io_gbps: f64,
    /// Cold reads only: raw parallel `O_DIRECT` reads of the file into page-aligned memory
    /// with the best of [`RAW_DIRECT_THREADS`](super::common::RAW_DIRECT_THREADS), measured as `raw_io_gbps` is; `None` where
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
    /// The raw staged path at the case's concurrency: `--threads` × `--queue-depth` threads,
    /// each moving its part in `--io-size` requests through a pinned buffer of its own
    /// (`pread` and a synchronous copy to the device, or a copy and `pwrite`, and one
    /// `fdatasync` per thread), in the case's cache state, measured as `raw_io_gbps` is.
    pub staged_gbps: f64,
    /// The threads `staged_gbps` was measured with.
    pub staged_threads: usize,
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
    pub served: Tally,
    /// The highest `VmHWM` of the process during any of the case's runs, counted from the
    /// start of each run (so not the bench's own buffers of the limits or of the cache
    /// warming), when `/proc/self/clear_refs` and `/proc/self/status` allow.
    pub peak_rss_bytes: Option<u64>,
    /// With `--limits`.
    pub limits: Option<Limits>,
    /// `--api`.
    pub api: Api,
    /// `--queue-depth`.
    pub queue_depth: usize,
    /// `--request-threads`, when given.
    pub request_threads: Option<usize>,
    /// `--pattern`.
    pub pattern: Pattern,
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
        let mut o = Map::new();
        o.insert("op".into(), json!(self.op.as_str()));
        o.insert("size".into(), json!(self.size));
        o.insert("io_size".into(), json!(self.io_size));
        o.insert("threads".into(), json!(self.threads));
        o.insert("cache".into(), json!(self.cache.as_str()));
        o.insert("backend".into(), json!(self.backend.as_str()));
        o.insert("api".into(), json!(self.api.as_str()));
        o.insert("queue_depth".into(), json!(self.queue_depth));
        if let Some(n) = self.request_threads {
            o.insert("request_threads".into(), json!(n));
        }
        o.insert("pattern".into(), json!(self.pattern.as_str()));
        o.insert("file".into(), json!(self.file));
        o.insert("runs".into(), json!(self.runs));
        o.insert("median_gbps".into(), json!(median));
        o.insert("min_gbps".into(), json!(min));
        o.insert("max_gbps".into(), json!(max));
        if let Some(devices) = &self.devices {
            let devices: Vec<Value> = devices
                .iter()
                .map(|d| {
                    let (median, min, max) = spread(&d.runs);
                    json!({
                        "device": d.device,
                        "runs": d.runs,
                        "median_gbps": median,
                        "min_gbps": min,
                        "max_gbps": max,
                    })
                })
                .collect();
            o.insert("devices".into(), Value::Array(devices));
        }
        // The bytes only: a benchmark's retries are not what it measures.
        o.insert(
            "served".into(),
            json!({
                "fastpath_bytes": self.served.fastpath_bytes,
                "fallback_bytes": self.served.fallback_bytes,
            }),
        );
        o.insert("peak_rss_bytes".into(), json!(self.peak_rss_bytes));
        if let Some(l) = &self.limits {
            let limits = match self.op {
                Op::Read => json!({
                    "pread_gbps": l.raw_io_gbps,
                    "pread_direct_gbps": l.raw_direct_gbps,
                    "pageable_h2d_gbps": l.copy_gbps,
                    "pinned_h2d_gbps": l.pinned_copy_gbps,
                }),
                Op::Write => json!({
                    "pwrite_fsync_gbps": l.raw_io_gbps,
                    "pageable_d2h_gbps": l.copy_gbps,
                    "pinned_d2h_gbps": l.pinned_copy_gbps,
                }),
            };
            o.insert("limits".into(), limits);
            o.insert("ratio".into(), json!(self.ratio()));
            o.insert(
                "staged".into(),
                json!({
                    "threads": l.staged_threads,
                    "gbps": l.staged_gbps,
                    "ratio": (l.staged_gbps > 0.0).then(|| median / l.staged_gbps),
                }),
            );
            o.insert("serial_gbps".into(), json!(l.serial_gbps));
            o.insert(
                "vs_serial".into(),
                json!((l.serial_gbps > 0.0).then(|| median / l.serial_gbps)),
            );
            let latency: Vec<Value> = l
                .latency
                .iter()
                .map(|x| {
                    let ratio = if x.raw_us > 0.0 {
                        x.hipfile_us / x.raw_us
                    } else {
                        0.0
                    };
                    json!({
                        "size": x.size,
                        "raw_us": x.raw_us,
                        "hipfile_us": x.hipfile_us,
                        "ratio": ratio,
                    })
                })
                .collect();
            o.insert("latency".into(), Value::Array(latency));
        }
        Value::Object(o).to_string()
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
        let engine = self
            .request_threads
            .map(|n| format!(", {n} requests served at once"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "hipfile bench: {} {} in {} requests ({} {}, queue depth {}), {} thread{}{on}, {} cache, backend {}{engine}, file {}",
            self.op.as_str(),
            bytes_text(self.size),
            bytes_text(self.io_size),
            self.api.as_str(),
            self.pattern.as_str(),
            self.queue_depth,
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
            let staged = if l.staged_gbps > 0.0 {
                median / l.staged_gbps
            } else {
                0.0
            };
            let _ = writeln!(
                out,
                "  {:<28} {:>10.3}   {staged:.3}",
                format!("raw staged, {} threads", l.staged_threads),
                l.staged_gbps
            );
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

#[cfg(test)]
mod tests {
    use super::*;

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
            served: Tally {
                fastpath_bytes: 0,
                fallback_bytes: 24,
                ..Tally::default()
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
                staged_gbps: 8.0,
                staged_threads: 8,
            }),
            api: Api::Async,
            queue_depth: 4,
            request_threads: Some(16),
            pattern: Pattern::Random,
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
        assert_eq!(v["staged"]["ratio"], 0.25, "median 2.0 over the staged 8.0");
        assert_eq!(v["staged"]["threads"], 8);
        assert_eq!(v["request_threads"], 16);
        assert_eq!(
            (&v["api"], &v["queue_depth"], &v["pattern"]),
            (&"async".into(), &4.into(), &"random".into())
        );
        assert!(v.get("devices").is_none(), "only with --devices");
        assert!(r.text().contains("median"));
        let text = r.text();
        assert!(
            text.contains("backend auto, 16 requests served at once"),
            "{text}"
        );
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
            served: Tally::default(),
            peak_rss_bytes: None,
            limits: None,
            api: Api::Sync,
            queue_depth: 1,
            request_threads: None,
            pattern: Pattern::Seq,
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
