//! Per-process counters (`HIPFILE_STATS_LEVEL` ≥ 1), kept with atomics so that counting a
//! request costs a few relaxed additions and never a lock.
//!
//! The levels are cuFile's and hipFile's: 1 counts requests (ok and failed), bytes and the
//! time spent serving them, and the registrations; 2 adds request-size histograms; 3 adds the
//! figures of each GPU. At level 0 nothing is counted and nothing is published.

pub(crate) mod publish;

use hipfile_core::{BackendKind, Op};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The GPUs counted one by one at level 3, as `HIPFILE_MAX_GPUS` in hipFile's header; the
/// buffers of a device numbered beyond count in the totals only.
pub const STATS_MAX_GPUS: usize = 16;

/// The buckets of a size histogram, as hipFile's `read_size_kb_hist`.
pub const STATS_HISTOGRAM_BUCKETS: usize = 32;

/// The bucket of a request of `bytes`: 0 for less than 2 KiB, then one bucket per power of
/// two of the size in KiB (bucket `i` holds sizes of `2^i` KiB up to, not including,
/// `2^(i+1)` KiB), the last one holding everything larger.
pub fn histogram_bucket(bytes: u64) -> usize {
    let kib = bytes >> 10;
    if kib == 0 {
        return 0;
    }
    (kib.ilog2() as usize).min(STATS_HISTOGRAM_BUCKETS - 1)
}

impl OpCount {
    /// `ok` successes and `err` failures.
    pub const fn new(ok: u64, err: u64) -> OpCount {
        OpCount { ok, err }
    }
}

#[derive(Debug, Default)]
struct Pair {
    ok: AtomicU64,
    err: AtomicU64,
}

impl Pair {
    fn load(&self) -> OpCount {
        OpCount {
            ok: self.ok.load(Ordering::Relaxed),
            err: self.err.load(Ordering::Relaxed),
        }
    }
}

#[derive(Debug, Default)]
struct Direction {
    ops: Pair,
    bytes: AtomicU64,
    latency_us: AtomicU64,
    histogram: [AtomicU64; STATS_HISTOGRAM_BUCKETS],
}

#[derive(Debug, Default)]
struct GpuDirection {
    bytes: AtomicU64,
    ops: AtomicU64,
    fastpath: AtomicU64,
    fallback: AtomicU64,
    errors: AtomicU64,
    duration_us: AtomicU64,
    unaligned: AtomicU64,
}

#[derive(Debug, Default)]
struct Gpu {
    read: GpuDirection,
    write: GpuDirection,
}

#[derive(Debug, Default)]
pub(crate) struct Stats {
    level: u32,
    fastpath_bytes: AtomicU64,
    fastpath_ops: AtomicU64,
    fallback_bytes: AtomicU64,
    fallback_ops: AtomicU64,
    remote_bytes: AtomicU64,
    remote_ops: AtomicU64,
    retries: AtomicU64,
    errors: AtomicU64,
    read: Direction,
    write: Direction,
    file_register: Pair,
    file_deregister: Pair,
    buffer_register: Pair,
    buffer_deregister: Pair,
    gpus: [Gpu; STATS_MAX_GPUS],
    /// Raised by every change, so that a publisher can tell whether there is news.
    changes: AtomicU64,
    /// Whether counting is stopped ([`Stats::set_counting`]): nothing is added meanwhile.
    stopped: AtomicBool,
}

/// Successful and failed operations of one kind (hipFile's `hipFileOpCounter_t`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpCount {
    /// Operations that succeeded.
    pub ok: u64,
    /// Operations that failed.
    pub err: u64,
}

/// The requests of one direction (reads or writes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DirectionStats {
    /// Requests served and requests that failed.
    pub ops: OpCount,
    /// Bytes moved by the requests served.
    pub bytes: u64,
    /// Microseconds spent serving them (from validation to the last byte), summed.
    pub latency_us: u64,
    /// Requests served by size ([`histogram_bucket`]); zero below level 2.
    pub size_histogram: [u64; STATS_HISTOGRAM_BUCKETS],
}

/// One direction of one GPU's figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GpuDirectionStats {
    /// Bytes moved.
    pub bytes: u64,
    /// Requests served.
    pub ops: u64,
    /// Of those, requests the fastpath served (hipFile's `n_p2p_*`).
    pub fastpath: u64,
    /// Of those, requests the fallback served (hipFile's `n_posix_*`).
    pub fallback: u64,
    /// Requests that failed.
    pub errors: u64,
    /// Microseconds spent serving them, summed.
    pub duration_us: u64,
    /// Of those served, requests whose file offset, size or memory address missed the
    /// file's direct-I/O alignment (or whose file has no direct descriptor): hipFile's
    /// `n_unaligned_*`.
    pub unaligned: u64,
}

/// What was served for buffers of one device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceStats {
    /// The device, as the runtime numbers it.
    pub device: i32,
    /// Bytes read into its memory.
    pub read_bytes: u64,
    /// Bytes written from its memory.
    pub write_bytes: u64,
    /// Requests served.
    pub ops: u64,
    /// Its reads in detail.
    pub read: GpuDirectionStats,
    /// Its writes in detail.
    pub write: GpuDirectionStats,
}

/// Counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatsSnapshot {
    /// The level they were counted at (`HIPFILE_STATS_LEVEL`, at most 3).
    pub level: u32,
    /// Bytes moved by the fastpath.
    pub fastpath_bytes: u64,
    /// Requests served by the fastpath.
    pub fastpath_ops: u64,
    /// Bytes moved by the fallback.
    pub fallback_bytes: u64,
    /// Requests served by the fallback (retries included).
    pub fallback_ops: u64,
    /// Bytes read from object storage into the driver's memory (reads that a reader
    /// outside the engine served and counted: [`Driver::count_remote_read`]); they are in
    /// [`read`](Self::read) too.
    ///
    /// [`Driver::count_remote_read`]: crate::Driver::count_remote_read
    pub remote_bytes: u64,
    /// Reads from object storage that succeeded.
    pub remote_ops: u64,
    /// Requests the fallback served after the fastpath failed.
    pub retries: u64,
    /// Requests that failed.
    pub errors: u64,
    /// Reads: counts, bytes, time and (level 2) sizes.
    pub read: DirectionStats,
    /// Writes.
    pub write: DirectionStats,
    /// File registrations.
    pub file_registrations: OpCount,
    /// File deregistrations.
    pub file_deregistrations: OpCount,
    /// Buffer registrations.
    pub buffer_registrations: OpCount,
    /// Buffer deregistrations.
    pub buffer_deregistrations: OpCount,
    /// At level 3, each device whose buffers were used (by device number, below
    /// [`STATS_MAX_GPUS`]); empty below.
    pub gpus: Vec<DeviceStats>,
}

/// A request served, as the counters take it.
pub(crate) use hipfile_core::Served;

/// Which registration call [`Stats::registration`] counts.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Registration {
    FileRegister,
    FileDeregister,
    BufferRegister,
    BufferDeregister,
}

fn add(a: &AtomicU64, n: u64) {
    a.fetch_add(n, Ordering::Relaxed);
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl Stats {
    /// Counters for `level` (0: count nothing).
    pub(crate) fn new(level: u32) -> Stats {
        Stats {
            level: level.min(3),
            ..Stats::default()
        }
    }

    /// The level counted at.
    pub(crate) fn level(&self) -> u32 {
        self.level
    }

    /// Whether anything is counted now: a level above 0, and counting not stopped.
    fn counting(&self) -> bool {
        self.level > 0 && !self.stopped.load(Ordering::Relaxed)
    }

    /// Stops counting (`false`: what happens from now on is not counted; the figures so far
    /// stay) or starts it again (`true`).
    pub(crate) fn set_counting(&self, on: bool) {
        self.stopped.store(!on, Ordering::Relaxed);
    }

    /// Sets every counter to 0, as if nothing had been counted yet. A request being counted
    /// meanwhile may be counted in part; the publisher sees a change.
    pub(crate) fn reset(&self) {
        let zero = |a: &AtomicU64| a.store(0, Ordering::Relaxed);
        let zero_pair = |p: &Pair| {
            zero(&p.ok);
            zero(&p.err);
        };
        for a in [
            &self.fastpath_bytes,
            &self.fastpath_ops,
            &self.fallback_bytes,
            &self.fallback_ops,
            &self.remote_bytes,
            &self.remote_ops,
            &self.retries,
            &self.errors,
        ] {
            zero(a);
        }
        for d in [&self.read, &self.write] {
            zero_pair(&d.ops);
            zero(&d.bytes);
            zero(&d.latency_us);
            d.histogram.iter().for_each(zero);
        }
        for p in [
            &self.file_register,
            &self.file_deregister,
            &self.buffer_register,
            &self.buffer_deregister,
        ] {
            zero_pair(p);
        }
        for g in &self.gpus {
            for d in [&g.read, &g.write] {
                for a in [
                    &d.bytes,
                    &d.ops,
                    &d.fastpath,
                    &d.fallback,
                    &d.errors,
                    &d.duration_us,
                    &d.unaligned,
                ] {
                    zero(a);
                }
            }
        }
        add(&self.changes, 1);
    }

    fn direction(&self, op: Op) -> &Direction {
        match op {
            Op::Read => &self.read,
            Op::Write => &self.write,
        }
    }

    /// Devices are counted at every level (a few additions more), so that
    /// [`Driver::device_stats`](crate::Driver::device_stats) answers from level 1; the
    /// snapshot shows them from level 3, as hipFile's level 3 does.
    fn gpu(&self, device: i32, op: Op) -> Option<&GpuDirection> {
        let gpu = self.gpus.get(usize::try_from(device).ok()?)?;
        Some(match op {
            Op::Read => &gpu.read,
            Op::Write => &gpu.write,
        })
    }

    /// Counts a request `served`.
    pub(crate) fn served(&self, served: &Served) {
        let Served {
            op,
            device,
            backend,
            bytes,
            size,
            retried,
            aligned,
            took,
        } = *served;
        if !self.counting() {
            return;
        }
        let (b, o) = match backend {
            BackendKind::Fastpath => (&self.fastpath_bytes, &self.fastpath_ops),
            BackendKind::Fallback => (&self.fallback_bytes, &self.fallback_ops),
        };
        add(b, bytes);
        add(o, 1);
        if retried {
            add(&self.retries, 1);
        }
        if let Some(g) = self.moved(op, device, bytes, size, took) {
            if !aligned {
                add(&g.unaligned, 1);
            }
            match backend {
                BackendKind::Fastpath => add(&g.fastpath, 1),
                BackendKind::Fallback => add(&g.fallback, 1),
            }
        }
        add(&self.changes, 1);
    }

    /// Counts a read from object storage of `bytes` (of `size` asked for) into memory of
    /// `device`, served in `took`: as a read (count, bytes, time, size), as the device's
    /// read, and in the remote figures; by neither backend.
    pub(crate) fn remote_read(&self, device: i32, bytes: u64, size: u64, took: Duration) {
        if !self.counting() {
            return;
        }
        add(&self.remote_bytes, bytes);
        add(&self.remote_ops, 1);
        self.moved(Op::Read, device, bytes, size, took);
        add(&self.changes, 1);
    }

    /// Counts `bytes` moved by one request of `size` in `took`, whoever served it: in its
    /// direction, and in the figures of `device`, which it returns for the rest.
    fn moved(
        &self,
        op: Op,
        device: i32,
        bytes: u64,
        size: u64,
        took: Duration,
    ) -> Option<&GpuDirection> {
        let us = micros(took);
        let dir = self.direction(op);
        add(&dir.ops.ok, 1);
        add(&dir.bytes, bytes);
        add(&dir.latency_us, us);
        if self.level >= 2 {
            add(&dir.histogram[histogram_bucket(size)], 1);
        }
        let g = self.gpu(device, op)?;
        add(&g.bytes, bytes);
        add(&g.ops, 1);
        add(&g.duration_us, us);
        Some(g)
    }

    /// Counts a request that failed; `device` when its buffer was known.
    pub(crate) fn failed(&self, op: Op, device: Option<i32>) {
        if !self.counting() {
            return;
        }
        add(&self.errors, 1);
        add(&self.direction(op).ops.err, 1);
        if let Some(g) = device.and_then(|d| self.gpu(d, op)) {
            add(&g.errors, 1);
        }
        add(&self.changes, 1);
    }

    /// Counts a registration call that succeeded (`ok`) or failed.
    pub(crate) fn registration(&self, which: Registration, ok: bool) {
        if !self.counting() {
            return;
        }
        let pair = match which {
            Registration::FileRegister => &self.file_register,
            Registration::FileDeregister => &self.file_deregister,
            Registration::BufferRegister => &self.buffer_register,
            Registration::BufferDeregister => &self.buffer_deregister,
        };
        add(if ok { &pair.ok } else { &pair.err }, 1);
        add(&self.changes, 1);
    }

    /// How many changes were counted so far.
    pub(crate) fn changes(&self) -> u64 {
        self.changes.load(Ordering::Relaxed)
    }

    fn load_direction(&self, d: &Direction) -> DirectionStats {
        DirectionStats {
            ops: d.ops.load(),
            bytes: d.bytes.load(Ordering::Relaxed),
            latency_us: d.latency_us.load(Ordering::Relaxed),
            size_histogram: std::array::from_fn(|i| d.histogram[i].load(Ordering::Relaxed)),
        }
    }

    /// Every device counted so far, by device number.
    pub(crate) fn devices(&self) -> Vec<DeviceStats> {
        let load = |g: &GpuDirection| GpuDirectionStats {
            bytes: g.bytes.load(Ordering::Relaxed),
            ops: g.ops.load(Ordering::Relaxed),
            fastpath: g.fastpath.load(Ordering::Relaxed),
            fallback: g.fallback.load(Ordering::Relaxed),
            errors: g.errors.load(Ordering::Relaxed),
            duration_us: g.duration_us.load(Ordering::Relaxed),
            unaligned: g.unaligned.load(Ordering::Relaxed),
        };
        self.gpus
            .iter()
            .enumerate()
            .filter_map(|(i, g)| {
                let (read, write) = (load(&g.read), load(&g.write));
                let used = read.ops + read.errors + write.ops + write.errors > 0;
                used.then(|| DeviceStats {
                    device: i as i32,
                    read_bytes: read.bytes,
                    write_bytes: write.bytes,
                    ops: read.ops + write.ops,
                    read,
                    write,
                })
            })
            .collect()
    }

    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            level: self.level,
            fastpath_bytes: self.fastpath_bytes.load(Ordering::Relaxed),
            fastpath_ops: self.fastpath_ops.load(Ordering::Relaxed),
            fallback_bytes: self.fallback_bytes.load(Ordering::Relaxed),
            fallback_ops: self.fallback_ops.load(Ordering::Relaxed),
            remote_bytes: self.remote_bytes.load(Ordering::Relaxed),
            remote_ops: self.remote_ops.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            read: self.load_direction(&self.read),
            write: self.load_direction(&self.write),
            file_registrations: self.file_register.load(),
            file_deregistrations: self.file_deregister.load(),
            buffer_registrations: self.buffer_register.load(),
            buffer_deregistrations: self.buffer_deregister.load(),
            gpus: if self.level >= 3 {
                self.devices()
            } else {
                Vec::new()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two_of_kib() {
        assert_eq!(histogram_bucket(0), 0);
        assert_eq!(histogram_bucket(1023), 0);
        assert_eq!(histogram_bucket(1024), 0);
        assert_eq!(histogram_bucket(2048), 1);
        assert_eq!(histogram_bucket(4096), 2);
        assert_eq!(histogram_bucket(4096 * 2 - 1), 2);
        assert_eq!(histogram_bucket(1 << 20), 10);
        assert_eq!(histogram_bucket(u64::MAX), 31);
    }

    #[test]
    fn stopped_counting_adds_nothing_and_reset_zeroes_everything() {
        let s = Stats::new(3);
        let read = Served {
            op: Op::Read,
            device: 1,
            backend: BackendKind::Fallback,
            bytes: 4096,
            size: 4096,
            retried: true,
            aligned: false,
            took: Duration::from_micros(7),
        };
        s.served(&read);
        s.failed(Op::Write, Some(1));
        s.registration(Registration::BufferRegister, true);
        let counted = s.snapshot();
        assert_eq!(counted.read.ops, OpCount::new(1, 0));
        assert_eq!(counted.gpus.len(), 1);
        s.set_counting(false);
        s.served(&read);
        s.failed(Op::Read, None);
        s.registration(Registration::FileRegister, false);
        assert_eq!(s.snapshot(), counted, "nothing counted while stopped");
        s.set_counting(true);
        s.served(&read);
        assert_eq!(s.snapshot().read.ops, OpCount::new(2, 0));
        let before = s.changes();
        s.reset();
        assert!(s.changes() > before, "a reset is news for the publisher");
        assert_eq!(
            s.snapshot(),
            StatsSnapshot {
                level: 3,
                ..StatsSnapshot::default()
            }
        );
        s.served(&read);
        assert_eq!(
            s.snapshot().read.bytes,
            4096,
            "counting goes on after a reset"
        );
    }

    #[test]
    fn remote_reads_count_as_reads_of_neither_backend() {
        let s = Stats::new(3);
        s.remote_read(0, 4096, 8192, Duration::from_micros(9));
        s.remote_read(-1, 10, 10, Duration::from_micros(1));
        let snap = s.snapshot();
        assert_eq!((snap.remote_bytes, snap.remote_ops), (4106, 2));
        assert_eq!(snap.read.ops, OpCount::new(2, 0));
        assert_eq!((snap.read.bytes, snap.read.latency_us), (4106, 10));
        assert_eq!(snap.read.size_histogram[3], 1);
        assert_eq!((snap.fastpath_bytes, snap.fallback_bytes), (0, 0));
        assert_eq!(snap.gpus.len(), 1, "host memory is no device");
        let g = snap.gpus[0].read;
        assert_eq!((g.bytes, g.ops, g.fastpath, g.fallback), (4096, 1, 0, 0));
        s.reset();
        assert_eq!(s.snapshot().remote_bytes, 0);
        let off = Stats::new(0);
        off.remote_read(0, 1, 1, Duration::ZERO);
        assert_eq!(off.snapshot(), StatsSnapshot::default());
    }

    #[test]
    fn level_zero_counts_nothing() {
        let s = Stats::new(0);
        s.served(&Served {
            op: Op::Read,
            device: 0,
            backend: BackendKind::Fallback,
            bytes: 10,
            size: 10,
            retried: false,
            aligned: true,
            took: Duration::ZERO,
        });
        s.failed(Op::Write, Some(0));
        s.registration(Registration::FileRegister, true);
        assert_eq!(s.snapshot(), StatsSnapshot::default());
        assert_eq!(s.changes(), 0);
    }

    #[test]
    fn levels_add_histograms_then_gpus() {
        for level in 1..=3 {
            let s = Stats::new(level);
            s.served(&Served {
                op: Op::Read,
                device: 1,
                backend: BackendKind::Fastpath,
                bytes: 4096,
                size: 8192,
                retried: false,
                aligned: false,
                took: Duration::from_micros(5),
            });
            s.failed(Op::Read, Some(1));
            let snap = s.snapshot();
            assert_eq!(snap.read.ops, OpCount { ok: 1, err: 1 });
            assert_eq!(snap.read.bytes, 4096);
            assert_eq!(snap.read.latency_us, 5);
            assert_eq!(snap.read.size_histogram[3], u64::from(level >= 2));
            assert_eq!(snap.gpus.len(), usize::from(level >= 3));
            if level == 3 {
                let g = snap.gpus[0];
                assert_eq!((g.device, g.read.ops, g.read.fastpath), (1, 1, 1));
                assert_eq!((g.read.errors, g.read.bytes), (1, 4096));
                assert_eq!(g.read.unaligned, 1);
            }
        }
    }
}
