//! The statistics channel: a process whose driver counts (`HIPFILE_STATS_LEVEL` ≥ 1)
//! publishes its counters in `/dev/shm/hipfile-stats.<pid>`, a file only its owner can
//! open (mode 0600), for `hipfile stats PID` to read.
//!
//! Each publication writes a whole record to a private temporary file (created with
//! `O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600) and renames it over the channel, so a reader
//! opens either the previous record or the new one, never a torn one, without a lock or
//! shared memory (and without `unsafe`). A publisher thread writes a record when the
//! counters changed since the last one, at most every [`PERIOD`]; [`Driver::publish_stats`]
//! writes one at once. The channel is removed when the driver closes; one left by a process
//! that died is replaced by the next process with its pid, and a reader tells it from a
//! live one by the process start time the record carries.
//!
//! The record (version 1) is a sequence of little-endian `u64` words: a header (magic
//! `HIPFSTAT`, version, level, pid, process start time, publication number, word count,
//! reserved) and then the figures in the order [`encode`] writes them.
//!
//! [`Driver::publish_stats`]: crate::Driver::publish_stats

use crate::stats::{
    DeviceStats, DirectionStats, GpuDirectionStats, OpCount, STATS_HISTOGRAM_BUCKETS,
    STATS_MAX_GPUS, Stats, StatsSnapshot,
};
use std::fs::OpenOptions;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// The version of the record this library writes and reads.
pub const STATS_CHANNEL_VERSION: u64 = 1;

/// The first word of a record: `HIPFSTAT`.
const MAGIC: u64 = u64::from_le_bytes(*b"HIPFSTAT");

/// How often the publisher looks for news.
const PERIOD: Duration = Duration::from_millis(100);

const HEADER_WORDS: usize = 8;
const DIRECTION_WORDS: usize = 4 + STATS_HISTOGRAM_BUCKETS;
const GPU_WORDS: usize = 15;
const RECORD_WORDS: usize =
    HEADER_WORDS + 6 + 2 * DIRECTION_WORDS + 8 + 1 + STATS_MAX_GPUS * GPU_WORDS;

/// Whether a driver of this process publishes already: one channel a process.
static PUBLISHING: AtomicBool = AtomicBool::new(false);

/// The channel of process `pid`.
pub fn stats_channel_path(pid: u32) -> PathBuf {
    PathBuf::from(format!("/dev/shm/hipfile-stats.{pid}"))
}

fn temporary_path(pid: u32) -> PathBuf {
    PathBuf::from(format!("/dev/shm/.hipfile-stats.{pid}.tmp"))
}

/// The start time of process `pid` (clock ticks after boot, field 22 of `/proc/PID/stat`),
/// which tells a process from an earlier one with the same pid.
fn start_time(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold anything: count after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The record of `snap`.
fn encode(snap: &StatsSnapshot, pid: u32, start: u64, sequence: u64) -> Vec<u8> {
    let mut w: Vec<u64> = Vec::with_capacity(RECORD_WORDS);
    w.extend([
        MAGIC,
        STATS_CHANNEL_VERSION,
        u64::from(snap.level),
        u64::from(pid),
        start,
        sequence,
        RECORD_WORDS as u64,
        0,
    ]);
    w.extend([
        snap.fastpath_bytes,
        snap.fastpath_ops,
        snap.fallback_bytes,
        snap.fallback_ops,
        snap.retries,
        snap.errors,
    ]);
    for d in [&snap.read, &snap.write] {
        w.extend([d.ops.ok, d.ops.err, d.bytes, d.latency_us]);
        w.extend(d.size_histogram);
    }
    for c in [
        snap.file_registrations,
        snap.file_deregistrations,
        snap.buffer_registrations,
        snap.buffer_deregistrations,
    ] {
        w.extend([c.ok, c.err]);
    }
    let gpus = &snap.gpus[..snap.gpus.len().min(STATS_MAX_GPUS)];
    w.push(gpus.len() as u64);
    for i in 0..STATS_MAX_GPUS {
        let g = gpus.get(i).copied().unwrap_or_default();
        w.push(g.device as u64);
        for d in [g.read, g.write] {
            w.extend([
                d.bytes,
                d.ops,
                d.fastpath,
                d.fallback,
                d.errors,
                d.duration_us,
                d.unaligned,
            ]);
        }
    }
    debug_assert_eq!(w.len(), RECORD_WORDS);
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A record read back.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PublishedStats {
    /// The publishing process.
    pub pid: u32,
    /// Which publication of the process this is (1 for the first).
    pub sequence: u64,
    /// The counters.
    pub stats: StatsSnapshot,
}

/// Why the statistics of a process cannot be read.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReadStatsError {
    /// There is no process with that pid.
    NoSuchProcess {
        /// The pid asked for.
        pid: u32,
    },
    /// The process does not publish: it does not use hipfile, its driver is closed, or it
    /// counts nothing (`HIPFILE_STATS_LEVEL` unset or 0).
    NotPublishing {
        /// The pid asked for.
        pid: u32,
    },
    /// The channel belongs to another user.
    PermissionDenied {
        /// The pid asked for.
        pid: u32,
    },
    /// The channel was written by a version of hipfile that writes another record.
    VersionMismatch {
        /// The version found.
        found: u64,
        /// The version this library reads.
        expected: u64,
    },
    /// The channel is not a record this library understands.
    Malformed {
        /// What is wrong with it.
        what: String,
    },
    /// The channel could not be read.
    Io(std::io::Error),
}

impl std::fmt::Display for ReadStatsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadStatsError::NoSuchProcess { pid } => write!(f, "no process has pid {pid}"),
            ReadStatsError::NotPublishing { pid } => write!(
                f,
                "process {pid} publishes no hipfile statistics: it does not use hipfile, its \
                 driver is closed, or it counts nothing (start it with HIPFILE_STATS_LEVEL=1, \
                 2 or 3)"
            ),
            ReadStatsError::PermissionDenied { pid } => write!(
                f,
                "permission denied: the statistics of process {pid} can be read only by the \
                 user it runs as"
            ),
            ReadStatsError::VersionMismatch { found, expected } => write!(
                f,
                "the process publishes statistics in version {found} of the record, and this \
                 hipfile reads version {expected}: use the hipfile of the same release"
            ),
            ReadStatsError::Malformed { what } => {
                write!(f, "the statistics channel is not a hipfile record: {what}")
            }
            ReadStatsError::Io(e) => write!(f, "cannot read the statistics channel: {e}"),
        }
    }
}

impl std::error::Error for ReadStatsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadStatsError::Io(e) => Some(e),
            _ => None,
        }
    }
}

fn malformed(what: impl Into<String>) -> ReadStatsError {
    ReadStatsError::Malformed { what: what.into() }
}

/// Reads `bytes` as a record: `(pid, start time, sequence, snapshot)`.
fn decode(bytes: &[u8]) -> Result<(u32, u64, u64, StatsSnapshot), ReadStatsError> {
    if !bytes.len().is_multiple_of(8) || bytes.len() < HEADER_WORDS * 8 {
        return Err(malformed(format!("{} bytes", bytes.len())));
    }
    let words: Vec<u64> = bytes
        .chunks_exact(8)
        .map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            u64::from_le_bytes(b)
        })
        .collect();
    if words[0] != MAGIC {
        return Err(malformed("no magic number"));
    }
    if words[1] != STATS_CHANNEL_VERSION {
        return Err(ReadStatsError::VersionMismatch {
            found: words[1],
            expected: STATS_CHANNEL_VERSION,
        });
    }
    if words.len() != RECORD_WORDS || words[6] != RECORD_WORDS as u64 {
        return Err(malformed(format!("{} words", words.len())));
    }
    let level = u32::try_from(words[2]).map_err(|_| malformed("level out of range"))?;
    let pid = u32::try_from(words[3]).map_err(|_| malformed("pid out of range"))?;
    let mut it = words[HEADER_WORDS..].iter().copied();
    // The length was checked: every `next` below has a word.
    let mut next = || it.next().unwrap_or(0);
    let mut snap = StatsSnapshot {
        level,
        fastpath_bytes: next(),
        fastpath_ops: next(),
        fallback_bytes: next(),
        fallback_ops: next(),
        retries: next(),
        errors: next(),
        ..StatsSnapshot::default()
    };
    let direction = |next: &mut dyn FnMut() -> u64| {
        let mut d = DirectionStats {
            ops: OpCount {
                ok: next(),
                err: next(),
            },
            bytes: next(),
            latency_us: next(),
            ..DirectionStats::default()
        };
        for b in &mut d.size_histogram {
            *b = next();
        }
        d
    };
    snap.read = direction(&mut next);
    snap.write = direction(&mut next);
    let count = |next: &mut dyn FnMut() -> u64| OpCount {
        ok: next(),
        err: next(),
    };
    snap.file_registrations = count(&mut next);
    snap.file_deregistrations = count(&mut next);
    snap.buffer_registrations = count(&mut next);
    snap.buffer_deregistrations = count(&mut next);
    let gpus = next();
    if gpus > STATS_MAX_GPUS as u64 {
        return Err(malformed(format!("{gpus} GPUs")));
    }
    for i in 0..STATS_MAX_GPUS as u64 {
        let device = next();
        let gpu = |next: &mut dyn FnMut() -> u64| GpuDirectionStats {
            bytes: next(),
            ops: next(),
            fastpath: next(),
            fallback: next(),
            errors: next(),
            duration_us: next(),
            unaligned: next(),
        };
        let read = gpu(&mut next);
        let write = gpu(&mut next);
        if i < gpus {
            snap.gpus.push(DeviceStats {
                device: i32::try_from(device).map_err(|_| malformed("device out of range"))?,
                read_bytes: read.bytes,
                write_bytes: write.bytes,
                ops: read.ops + write.ops,
                read,
                write,
            });
        }
    }
    Ok((pid, words[4], words[5], snap))
}

/// Reads the statistics that process `pid` publishes (what `hipfile stats PID` shows).
///
/// # Errors
///
/// [`ReadStatsError`]: no such process, a process that does not publish (or a channel left
/// by an earlier process with its pid), another user's process, a record of another
/// version, or a failed read.
pub fn read_published_stats(pid: u32) -> Result<PublishedStats, ReadStatsError> {
    let proc_dir = format!("/proc/{pid}");
    if pid == 0 || std::fs::metadata(&proc_dir).is_err() {
        return Err(ReadStatsError::NoSuchProcess { pid });
    }
    let path = stats_channel_path(pid);
    // Never through a link someone else planted.
    let mut file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(ReadStatsError::NotPublishing { pid });
        }
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            return Err(ReadStatsError::PermissionDenied { pid });
        }
        Err(e) => return Err(ReadStatsError::Io(e)),
    };
    let mut bytes = Vec::with_capacity(RECORD_WORDS * 8);
    Read::by_ref(&mut file)
        .take((RECORD_WORDS * 8 + 8) as u64)
        .read_to_end(&mut bytes)
        .map_err(ReadStatsError::Io)?;
    let (owner, start, sequence, stats) = decode(&bytes)?;
    if owner != pid {
        return Err(malformed(format!("it names process {owner}")));
    }
    // A channel left by a process that died, whose pid a later process has now.
    if start_time(&pid.to_string()) != Some(start) {
        return Err(ReadStatsError::NotPublishing { pid });
    }
    Ok(PublishedStats {
        pid,
        sequence,
        stats,
    })
}

/// Writes the records of one process.
struct Writer {
    pid: u32,
    start: u64,
    sequence: u64,
    /// The change count of the last record written.
    published: Option<u64>,
    /// Whether a record was written (so that the channel is ours to remove).
    wrote: bool,
    /// Set after a failure: the channel is given up, with one warning.
    broken: bool,
}

impl Writer {
    fn write(&mut self, stats: &Stats) -> std::io::Result<()> {
        if self.broken {
            return Err(std::io::Error::other("the statistics channel was given up"));
        }
        let changes = stats.changes();
        self.sequence += 1;
        let record = encode(&stats.snapshot(), self.pid, self.start, self.sequence);
        let result = self.replace(&record);
        match &result {
            Ok(()) => {
                self.published = Some(changes);
                self.wrote = true;
            }
            Err(e) => {
                self.broken = true;
                eprintln!(
                    "hipfile: cannot publish statistics in {}: {e}; `hipfile stats {}` will not \
                     see them",
                    stats_channel_path(self.pid).display(),
                    self.pid
                );
            }
        }
        result
    }

    /// Writes `record` to a new private file and renames it over the channel.
    fn replace(&self, record: &[u8]) -> std::io::Result<()> {
        let tmp = temporary_path(self.pid);
        let create = || {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)
        };
        let mut file = match create() {
            Ok(f) => f,
            // Left by a process that had this pid (ours is removed after each rename):
            // unlinking removes the name, never what a link points to.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                std::fs::remove_file(&tmp)?;
                create()?
            }
            Err(e) => return Err(e),
        };
        let written = file.write_all(record);
        drop(file);
        if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, stats_channel_path(self.pid))) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        Ok(())
    }
}

struct Shared {
    stop: Mutex<bool>,
    wake: Condvar,
    writer: Mutex<Writer>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Publishes one driver's counters while it lives.
pub(crate) struct Publisher {
    stats: Arc<Stats>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Publisher {
    /// Starts publishing `stats`, unless they count nothing or another driver of this
    /// process publishes already.
    pub(crate) fn start(stats: &Arc<Stats>) -> Option<Publisher> {
        if stats.level() == 0 || PUBLISHING.swap(true, Ordering::AcqRel) {
            return None;
        }
        let pid = std::process::id();
        let mut writer = Writer {
            pid,
            start: start_time("self").unwrap_or(0),
            sequence: 0,
            published: None,
            wrote: false,
            broken: false,
        };
        // The channel exists from the open on: a reader sees zeros, not "not publishing".
        let _ = writer.write(stats);
        let shared = Arc::new(Shared {
            stop: Mutex::new(false),
            wake: Condvar::new(),
            writer: Mutex::new(writer),
        });
        let thread = {
            let (stats, shared) = (Arc::clone(stats), Arc::clone(&shared));
            std::thread::Builder::new()
                .name("hipfile-stats".into())
                .spawn(move || run(&stats, &shared))
                .ok()
        };
        Some(Publisher {
            stats: Arc::clone(stats),
            shared,
            thread,
        })
    }

    /// Writes a record now.
    pub(crate) fn publish_now(&self) -> std::io::Result<()> {
        lock(&self.shared.writer).write(&self.stats)
    }
}

/// The publisher thread: a record whenever the counters changed, until told to stop.
fn run(stats: &Stats, shared: &Shared) {
    let mut stop = lock(&shared.stop);
    loop {
        stop = shared
            .wake
            .wait_timeout(stop, PERIOD)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
        if *stop {
            return;
        }
        let mut writer = lock(&shared.writer);
        if !writer.broken && writer.published != Some(stats.changes()) {
            let _ = writer.write(stats);
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        *lock(&self.shared.stop) = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if lock(&self.shared.writer).wrote {
            let _ = std::fs::remove_file(stats_channel_path(std::process::id()));
        }
        PUBLISHING.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_written() {
        let mut snap = StatsSnapshot {
            level: 3,
            fastpath_bytes: 1,
            errors: 2,
            ..StatsSnapshot::default()
        };
        snap.read.size_histogram[5] = 7;
        snap.write.ops.err = 3;
        snap.buffer_deregistrations.ok = 4;
        snap.gpus.push(DeviceStats {
            device: 2,
            read_bytes: 9,
            write_bytes: 0,
            ops: 1,
            read: GpuDirectionStats {
                bytes: 9,
                ops: 1,
                fallback: 1,
                ..GpuDirectionStats::default()
            },
            write: GpuDirectionStats::default(),
        });
        let bytes = encode(&snap, 42, 5, 6);
        assert_eq!(bytes.len(), RECORD_WORDS * 8);
        let (pid, start, seq, back) = decode(&bytes).unwrap();
        assert_eq!((pid, start, seq), (42, 5, 6));
        assert_eq!(back, snap);
    }

    #[test]
    fn another_version_or_garbage_is_refused() {
        let mut bytes = encode(&StatsSnapshot::default(), 1, 0, 1);
        bytes[8] = 9;
        assert!(matches!(
            decode(&bytes),
            Err(ReadStatsError::VersionMismatch {
                found: 9,
                expected: 1
            })
        ));
        assert!(matches!(
            decode(b"not a record...."),
            Err(ReadStatsError::Malformed { .. })
        ));
        assert!(matches!(
            decode(&bytes[..64]),
            Err(ReadStatsError::Malformed { .. }) | Err(ReadStatsError::VersionMismatch { .. })
        ));
    }
}
