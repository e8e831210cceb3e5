//! The statistics channel: a process whose driver counts (`HIPFILE_STATS_LEVEL` ≥ 1)
//! publishes its counters in `/dev/shm/hipfile-<uid>/stats.<pid>`, a file in a directory of
//! its user's own that only its owner can open (mode 0600), for `hipfile stats PID` to read.
//!
//! `/dev/shm` is shared by every user, so no name there is trusted: another user could
//! take one first, to plant a record or to keep the process from publishing. A user's
//! directory is used only if it is a real directory (not a link) owned by that user (made
//! with mode 0700) that nobody else can write; when another user took `hipfile-<uid>`, the
//! next of `hipfile-<uid>.1` … `.7` that is the user's own, or free to make, is used, and
//! readers look through the same names. Inside it, each publication writes a whole record
//! to a private temporary file (`O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600) and renames it over
//! the channel, so a reader opens either the previous record or the new one, never a torn
//! one, without a lock or shared memory (and without `unsafe`). A reader accepts a channel
//! only from a directory and a file owned by the user the process runs as (or by root), and
//! says so when it refuses one.
//!
//! A publisher thread writes a record when the counters changed since the last one, at most
//! every [`PERIOD`]; [`Driver::publish_stats`] writes one at once. The channel is removed
//! when the driver closes; one left by a process that died is replaced by the next process
//! with its pid, and a reader tells it from a live one by the process start time the record
//! carries.
//!
//! The record (version 1) is a sequence of little-endian `u64` words: a header (magic
//! `HIPFSTAT`, version, level, pid, process start time, publication number, word count,
//! reserved) and then the figures in the order [`encode`] writes them. [`decode`] takes any
//! bytes: a malformed record is an error, never a panic.
//!
//! [`Driver::publish_stats`]: crate::Driver::publish_stats

use crate::stats::{
    DeviceStats, DirectionStats, GpuDirectionStats, OpCount, STATS_HISTOGRAM_BUCKETS,
    STATS_MAX_GPUS, Stats, StatsSnapshot,
};
use std::fs::{Metadata, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
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

/// How many directories a user's channels may be in: `hipfile-<uid>` and, when another
/// user took that name first, `hipfile-<uid>.1` to `.7`.
const USER_DIRS: u32 = 8;

/// The directories, in order, where the channels of user `uid` may be.
fn channel_dirs(uid: u32) -> impl Iterator<Item = PathBuf> {
    (0..USER_DIRS).map(move |n| match n {
        0 => PathBuf::from(format!("/dev/shm/hipfile-{uid}")),
        n => PathBuf::from(format!("/dev/shm/hipfile-{uid}.{n}")),
    })
}

/// Whether the owner and mode in `meta` are `uid`'s (or root's) and nobody else can write.
fn owned_by(meta: &Metadata, uid: u32) -> bool {
    (meta.uid() == uid || meta.uid() == 0) && meta.mode() & 0o022 == 0
}

/// Whether `meta` (from `lstat`) is a directory that may hold `uid`'s channels.
fn trusted_dir(meta: &Metadata, uid: u32) -> bool {
    meta.file_type().is_dir() && owned_by(meta, uid)
}

fn channel_name(pid: u32) -> String {
    format!("stats.{pid}")
}

/// Where the channel of process `pid` is now: `/dev/shm/hipfile-<uid>/stats.<pid>` (or in
/// another directory of its user's, see the module documentation), when the process exists
/// and publishes one that its user owns; `None` otherwise.
pub fn stats_channel_path(pid: u32) -> Option<PathBuf> {
    let uid = std::fs::metadata(format!("/proc/{pid}")).ok()?.uid();
    channel_dirs(uid)
        .filter(|d| std::fs::symlink_metadata(d).is_ok_and(|m| trusted_dir(&m, uid)))
        .map(|d| d.join(channel_name(pid)))
        .find(|f| {
            std::fs::symlink_metadata(f).is_ok_and(|m| m.file_type().is_file() && owned_by(&m, uid))
        })
}

/// The directory of the calling user's channels: the first of [`channel_dirs`] that is its
/// own, or that it can make.
///
/// # Errors
///
/// When another user took every name, or a directory cannot be made or looked at.
fn own_channel_dir() -> std::io::Result<PathBuf> {
    let uid = rustix::process::geteuid().as_raw();
    let mut taken = Vec::new();
    for dir in channel_dirs(uid) {
        let meta = match std::fs::symlink_metadata(&dir) {
            Ok(m) => m,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                    // Made now with this mode, so ours alone.
                    Ok(()) => return Ok(dir),
                    // Made by someone in between: look at what it is.
                    Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                        std::fs::symlink_metadata(&dir)?
                    }
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        if trusted_dir(&meta, uid) && meta.uid() == uid {
            return Ok(dir);
        }
        taken.push(format!("{} (user {})", dir.display(), meta.uid()));
    }
    Err(std::io::Error::other(format!(
        "another user took every name for user {uid}'s statistics in /dev/shm: {}",
        taken.join(", ")
    )))
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
    /// A channel for the process was found where its user's is, but another user owns it
    /// (or its directory), or others may write it: it may have been planted, and is not
    /// read.
    Untrusted {
        /// The pid asked for.
        pid: u32,
        /// The file refused.
        path: PathBuf,
        /// The user that owns it (or its directory).
        owner: u32,
        /// The user the process runs as.
        expected: u32,
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
            ReadStatsError::Untrusted {
                pid,
                path,
                owner,
                expected,
            } => write!(
                f,
                "refusing {}: the statistics of process {pid} must belong to user {expected}, \
                 whom it runs as (or root), and this belongs to user {owner} or can be \
                 written by others; another user may have planted it",
                path.display()
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
                ops: read.ops.saturating_add(write.ops),
                read,
                write,
            });
        }
    }
    Ok((pid, words[4], words[5], snap))
}

/// Opens the channel of process `pid`, which runs as `uid`: the first `stats.<pid>` in a
/// directory of `uid`'s (see the module documentation) that `uid` or root owns and nobody
/// else can write.
///
/// # Errors
///
/// [`ReadStatsError::Untrusted`] when the only channel found is another user's;
/// [`ReadStatsError::NotPublishing`] when there is none; [`ReadStatsError::PermissionDenied`]
/// when the caller may not open it.
fn open_channel(pid: u32, uid: u32) -> Result<std::fs::File, ReadStatsError> {
    let mut refused = None;
    for dir in channel_dirs(uid) {
        let Ok(meta) = std::fs::symlink_metadata(&dir) else {
            continue;
        };
        let path = dir.join(channel_name(pid));
        if !trusted_dir(&meta, uid) {
            if std::fs::symlink_metadata(&path).is_ok() {
                refused.get_or_insert((path, meta.uid()));
            }
            continue;
        }
        // Never through a link.
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) if e.kind() == ErrorKind::PermissionDenied => {
                return Err(ReadStatsError::PermissionDenied { pid });
            }
            Err(e) => return Err(ReadStatsError::Io(e)),
        };
        let meta = file.metadata().map_err(ReadStatsError::Io)?;
        if meta.file_type().is_file() && owned_by(&meta, uid) {
            return Ok(file);
        }
        refused.get_or_insert((path, meta.uid()));
    }
    Err(match refused {
        Some((path, owner)) => ReadStatsError::Untrusted {
            pid,
            path,
            owner,
            expected: uid,
        },
        None => ReadStatsError::NotPublishing { pid },
    })
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
    let uid = match std::fs::metadata(&proc_dir) {
        Ok(m) if pid != 0 => m.uid(),
        _ => return Err(ReadStatsError::NoSuchProcess { pid }),
    };
    let mut file = open_channel(pid, uid)?;
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
    /// The directory of the user's channels, found at the first publication.
    dir: Option<PathBuf>,
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
                hipfile_core::diag::line(&format!(
                    "hipfile: cannot publish statistics: {e}; `hipfile stats {}` will not see \
                     them",
                    self.pid
                ));
            }
        }
        result
    }

    /// Writes `record` to a new private file and renames it over the channel, in the
    /// user's directory.
    fn replace(&mut self, record: &[u8]) -> std::io::Result<()> {
        let dir = match &self.dir {
            Some(dir) => dir.clone(),
            None => self.dir.insert(own_channel_dir()?).clone(),
        };
        let tmp = dir.join(format!(".{}.tmp", channel_name(self.pid)));
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
            // Left by a process that had this pid (ours is removed after each rename), in
            // a directory only this user can write: unlinking removes the name, never what
            // a link points to.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                std::fs::remove_file(&tmp)?;
                create()?
            }
            Err(e) => return Err(e),
        };
        let written = file.write_all(record);
        drop(file);
        let channel = dir.join(channel_name(self.pid));
        if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, &channel)) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        Ok(())
    }

    /// Removes the channel, if this writer wrote one.
    fn remove(&self) {
        if let (true, Some(dir)) = (self.wrote, &self.dir) {
            let _ = std::fs::remove_file(dir.join(channel_name(self.pid)));
        }
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
            dir: None,
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
        lock(&self.shared.writer).remove();
        PUBLISHING.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Where the number of GPUs sits in a record.
    const GPUS_AT: usize = HEADER_WORDS + 6 + 2 * DIRECTION_WORDS + 8;

    fn bytes_of(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    proptest! {
        /// Whatever a channel holds, reading it gives a record or an error, never a panic.
        #[test]
        fn any_bytes_decode_without_panicking(
            bytes in proptest::collection::vec(any::<u8>(), 0..4096),
        ) {
            let _ = decode(&bytes);
        }

        /// A record with a good header and any figures (any GPU count up to the most it
        /// holds) reads back, or is refused, without arithmetic that overflows.
        #[test]
        fn any_figures_decode_without_panicking(
            figures in proptest::collection::vec(any::<u64>(), RECORD_WORDS - HEADER_WORDS),
            gpus in 0..=STATS_MAX_GPUS as u64,
            level in 0..4u64,
            pid in 0..=u64::from(u32::MAX),
        ) {
            let mut words = vec![
                MAGIC, STATS_CHANNEL_VERSION, level, pid, 0, 1, RECORD_WORDS as u64, 0,
            ];
            words.extend(figures);
            words[GPUS_AT] = gpus;
            for i in 0..STATS_MAX_GPUS {
                words[GPUS_AT + 1 + i * GPU_WORDS] = i as u64;
            }
            if let Ok((_, _, _, snap)) = decode(&bytes_of(&words)) {
                prop_assert_eq!(snap.gpus.len() as u64, gpus);
            }
        }
    }

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
