//! `hipfile stats PID`: shows the statistics a running process that uses hipfile publishes
//! (`HIPFILE_STATS_LEVEL` ≥ 1), read from its channel with the library's reader
//! (`hipfile::read_published_stats`), as a table or as one JSON object.

use crate::failure::Failure;
use clap::Args;
use hipfile::{
    DeviceStats, DirectionStats, GpuDirectionStats, OpCount, PublishedStats, StatsSnapshot,
};
use serde::Serialize;
use std::io::{self, Write};

/// The figures were shown.
pub const EXIT_SHOWN: u8 = 0;
/// They cannot be read: no such process, one that does not publish, another user's, or a
/// record of another version.
pub const EXIT_UNREADABLE: u8 = 1;

/// Show the hipfile statistics of a running process
#[derive(Debug, Clone, PartialEq, Eq, Args)]
#[command(
    long_about = "\
Show the hipfile statistics of a running process

A process that uses hipfile (through the Rust library or libhipfile.so from C) publishes its
counters while its driver is open, when it was started with HIPFILE_STATS_LEVEL set to 1, 2
or 3: level 1 counts reads and writes (successful and failed), their bytes and the time spent
serving them, and the file and buffer registrations; level 2 adds histograms of request
sizes; level 3 adds the figures of each GPU. The channel is a file only the process's owner
(and root) can read, /dev/shm/hipfile-UID/stats.PID, updated within a tenth of a second of a
change; one that another user owns is refused.",
    after_long_help = "\
Histogram buckets: '<2K' holds requests below 2 KiB; bucket 'N K' holds requests of N KiB up
to twice that. Times are microseconds summed over the requests; rates are per second of that
time.

Exit status: 0 when the figures were shown; 1 when they cannot be read (no such process, a
process that does not publish them, another user's process, or a channel written by another
version of hipfile); 2 on bad arguments."
)]
pub struct StatsArgs {
    /// The process.
    #[arg(value_name = "PID")]
    pub pid: u32,

    /// Print the figures as one JSON object: pid, level, sequence, read and write (ok, err,
    /// bytes, latency_us, and size_histogram from level 2), registrations, fastpath,
    /// fallback, retries, errors, and gpus from level 3.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &StatsArgs) -> Result<u8, Failure> {
    let published =
        hipfile::read_published_stats(args.pid).map_err(|e| Failure::msg(EXIT_UNREADABLE, e))?;
    let mut out = io::stdout().lock();
    let written = if args.json {
        serde_json::to_writer(&mut out, &JsonStats::of(&published))
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        write_table(&mut out, &published)
    };
    written.map_err(|e| Failure::output(EXIT_UNREADABLE, e))?;
    Ok(EXIT_SHOWN)
}

#[derive(Serialize)]
struct JsonCount {
    ok: u64,
    err: u64,
}

impl From<OpCount> for JsonCount {
    fn from(c: OpCount) -> JsonCount {
        JsonCount {
            ok: c.ok,
            err: c.err,
        }
    }
}

#[derive(Serialize)]
struct JsonDirection {
    ok: u64,
    err: u64,
    bytes: u64,
    latency_us: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    size_histogram: Option<Vec<u64>>,
}

#[derive(Serialize)]
struct JsonRegistrations {
    file: JsonCount,
    file_deregister: JsonCount,
    buffer: JsonCount,
    buffer_deregister: JsonCount,
}

#[derive(Serialize)]
struct JsonBackend {
    ops: u64,
    bytes: u64,
}

#[derive(Serialize)]
struct JsonGpuDirection {
    bytes: u64,
    ops: u64,
    fastpath: u64,
    fallback: u64,
    errors: u64,
    duration_us: u64,
    unaligned: u64,
}

impl From<GpuDirectionStats> for JsonGpuDirection {
    fn from(g: GpuDirectionStats) -> JsonGpuDirection {
        JsonGpuDirection {
            bytes: g.bytes,
            ops: g.ops,
            fastpath: g.fastpath,
            fallback: g.fallback,
            errors: g.errors,
            duration_us: g.duration_us,
            unaligned: g.unaligned,
        }
    }
}

#[derive(Serialize)]
struct JsonGpu {
    device: i32,
    read: JsonGpuDirection,
    write: JsonGpuDirection,
}

#[derive(Serialize)]
struct JsonStats {
    pid: u32,
    level: u32,
    sequence: u64,
    read: JsonDirection,
    write: JsonDirection,
    registrations: JsonRegistrations,
    fastpath: JsonBackend,
    fallback: JsonBackend,
    retries: u64,
    errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    gpus: Option<Vec<JsonGpu>>,
}

impl JsonStats {
    fn of(p: &PublishedStats) -> JsonStats {
        let s: &StatsSnapshot = &p.stats;
        let direction = |d: &DirectionStats| JsonDirection {
            ok: d.ops.ok,
            err: d.ops.err,
            bytes: d.bytes,
            latency_us: d.latency_us,
            size_histogram: (s.level >= 2).then(|| d.size_histogram.to_vec()),
        };
        JsonStats {
            pid: p.pid,
            level: s.level,
            sequence: p.sequence,
            read: direction(&s.read),
            write: direction(&s.write),
            registrations: JsonRegistrations {
                file: s.file_registrations.into(),
                file_deregister: s.file_deregistrations.into(),
                buffer: s.buffer_registrations.into(),
                buffer_deregister: s.buffer_deregistrations.into(),
            },
            fastpath: JsonBackend {
                ops: s.fastpath_ops,
                bytes: s.fastpath_bytes,
            },
            fallback: JsonBackend {
                ops: s.fallback_ops,
                bytes: s.fallback_bytes,
            },
            retries: s.retries,
            errors: s.errors,
            gpus: (s.level >= 3).then(|| {
                s.gpus
                    .iter()
                    .map(|g: &DeviceStats| JsonGpu {
                        device: g.device,
                        read: g.read.into(),
                        write: g.write.into(),
                    })
                    .collect()
            }),
        }
    }
}

/// `n` per second of `us` microseconds, or 0.
fn per_second(n: u64, us: u64) -> u64 {
    if us == 0 {
        return 0;
    }
    u64::try_from(u128::from(n) * 1_000_000 / u128::from(us)).unwrap_or(u64::MAX)
}

/// The name of histogram bucket `i`.
fn bucket_name(i: usize) -> String {
    if i == 0 {
        "<2K".to_owned()
    } else if i < 10 {
        format!("{}K", 1u64 << i)
    } else if i < 20 {
        format!("{}M", 1u64 << (i - 10))
    } else {
        format!("{}G", 1u64 << (i - 20))
    }
}

fn write_table(out: &mut impl Write, p: &PublishedStats) -> io::Result<()> {
    let s = &p.stats;
    writeln!(
        out,
        "hipfile statistics of process {} (level {}, update {})",
        p.pid, s.level, p.sequence
    )?;
    writeln!(
        out,
        "{:<8} {:>10} {:>8} {:>16} {:>14} {:>14}",
        "", "ok", "failed", "bytes", "time (us)", "bytes/s"
    )?;
    for (name, d) in [("reads", &s.read), ("writes", &s.write)] {
        writeln!(
            out,
            "{:<8} {:>10} {:>8} {:>16} {:>14} {:>14}",
            name,
            d.ops.ok,
            d.ops.err,
            d.bytes,
            d.latency_us,
            per_second(d.bytes, d.latency_us)
        )?;
    }
    writeln!(
        out,
        "backends: fastpath {} requests ({} bytes), fallback {} requests ({} bytes), {} retried",
        s.fastpath_ops, s.fastpath_bytes, s.fallback_ops, s.fallback_bytes, s.retries
    )?;
    let pair = |c: OpCount| format!("{} ok, {} failed", c.ok, c.err);
    writeln!(
        out,
        "files: registered {}; deregistered {}",
        pair(s.file_registrations),
        pair(s.file_deregistrations)
    )?;
    writeln!(
        out,
        "buffers: registered {}; deregistered {}",
        pair(s.buffer_registrations),
        pair(s.buffer_deregistrations)
    )?;
    if s.level >= 2 {
        for (name, d) in [("read sizes", &s.read), ("write sizes", &s.write)] {
            let buckets: Vec<String> = d
                .size_histogram
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, n)| format!("{}: {n}", bucket_name(i)))
                .collect();
            let shown = if buckets.is_empty() {
                "none".to_owned()
            } else {
                buckets.join(", ")
            };
            writeln!(out, "{name}: {shown}")?;
        }
    }
    if s.level >= 3 {
        if s.gpus.is_empty() {
            writeln!(out, "GPUs: none used yet")?;
        }
        for g in &s.gpus {
            for (name, d) in [("reads", g.read), ("writes", g.write)] {
                writeln!(
                    out,
                    "GPU {} {name}: {} ok ({} fastpath, {} fallback, {} unaligned), {} failed, {} bytes, \
                     {} us",
                    g.device,
                    d.ops,
                    d.fastpath,
                    d.fallback,
                    d.unaligned,
                    d.errors,
                    d.bytes,
                    d.duration_us
                )?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Command;
    use crate::tests::{error, parse};

    #[test]
    fn takes_a_pid_and_json() {
        let Command::Stats(a) = parse(&["stats", "42", "--json"]).unwrap() else {
            panic!("not stats")
        };
        assert_eq!((a.pid, a.json), (42, true));
        let e = error(&["stats"]);
        assert!(e.contains("PID"), "{e}");
        let e = error(&["stats", "-3"]);
        assert!(e.contains("-3"), "{e}");
    }

    #[test]
    fn buckets_are_named_by_size() {
        assert_eq!(bucket_name(0), "<2K");
        assert_eq!(bucket_name(2), "4K");
        assert_eq!(bucket_name(10), "1M");
        assert_eq!(bucket_name(31), "2048G");
    }
}
