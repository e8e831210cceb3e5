//! Per-process counters (`HIPFILE_STATS_LEVEL` ≥ 1).

use hipfile_core::{BackendKind, Op};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

#[derive(Debug, Default)]
pub(crate) struct Stats {
    fastpath_bytes: AtomicU64,
    fastpath_ops: AtomicU64,
    fallback_bytes: AtomicU64,
    fallback_ops: AtomicU64,
    retries: AtomicU64,
    errors: AtomicU64,
    devices: Mutex<BTreeMap<i32, DeviceStats>>,
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
}

/// Counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatsSnapshot {
    /// Bytes moved by the fastpath.
    pub fastpath_bytes: u64,
    /// Requests served by the fastpath.
    pub fastpath_ops: u64,
    /// Bytes moved by the fallback.
    pub fallback_bytes: u64,
    /// Requests served by the fallback (retries included).
    pub fallback_ops: u64,
    /// Requests the fallback served after the fastpath failed.
    pub retries: u64,
    /// Requests that failed.
    pub errors: u64,
}

impl Stats {
    pub(crate) fn served(&self, backend: BackendKind, bytes: u64, retried: bool) {
        let (b, o) = match backend {
            BackendKind::Fastpath => (&self.fastpath_bytes, &self.fastpath_ops),
            BackendKind::Fallback => (&self.fallback_bytes, &self.fallback_ops),
        };
        b.fetch_add(bytes, Ordering::Relaxed);
        o.fetch_add(1, Ordering::Relaxed);
        if retried {
            self.retries.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a served request for a buffer of `device`.
    pub(crate) fn served_device(&self, device: i32, op: Op, bytes: u64) {
        let mut map = self.devices.lock().unwrap_or_else(PoisonError::into_inner);
        let d = map.entry(device).or_insert(DeviceStats {
            device,
            ..DeviceStats::default()
        });
        match op {
            Op::Read => d.read_bytes += bytes,
            Op::Write => d.write_bytes += bytes,
        }
        d.ops += 1;
    }

    /// Every device served so far, by device number.
    pub(crate) fn devices(&self) -> Vec<DeviceStats> {
        let map = self.devices.lock().unwrap_or_else(PoisonError::into_inner);
        map.values().copied().collect()
    }

    pub(crate) fn failed(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            fastpath_bytes: self.fastpath_bytes.load(Ordering::Relaxed),
            fastpath_ops: self.fastpath_ops.load(Ordering::Relaxed),
            fallback_bytes: self.fallback_bytes.load(Ordering::Relaxed),
            fallback_ops: self.fallback_ops.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }
}
