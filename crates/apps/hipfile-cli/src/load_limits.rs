//! `hipfile load --limits`: what a load is compared against, measured in the same process
//! over the checkpoint's own shard files, as `bench --limits` measures one file.
//!
//! After each load, in the cache state the load found: one raw parallel `pread` of every
//! shard, whole (the threads take the shards' parts from one list, with no wait at the end
//! of a shard), and for a cold load also one of `O_DIRECT` reads (each from a cold cache;
//! the shards are left uncached for the next load). The thread counts are chosen after the
//! first load, each count tried once and the fastest kept, as bench does. Once, after the
//! first load: copies from pinned host memory to the device with one thread and with as
//! many threads as the load had requests in flight, the faster kept. The file-side limit is
//! the median of its runs (the better of buffered and `O_DIRECT` for a cold load); the ratio
//! is the median of the loads over the lower of that limit and the copies'.

use crate::bench::{
    Cache, RAW_DIRECT_THREADS, RAW_THREADS, fastest, gbps, parallel, partition, raw_direct_read,
    raw_io, set_cache, spread,
};
use hipfile::{Driver, Op};
use serde_json::{Value, json};
use std::fs::File;
use std::path::Path;
use std::time::Instant;

/// Bytes per copy of the copy limit: the loader's hot request size.
const COPY_IO: usize = 64 << 20;

/// The shards, opened for the raw reads, with their sizes.
pub(crate) struct Shards(Vec<(File, u64)>);

impl Shards {
    pub(crate) fn open<'a>(paths: impl Iterator<Item = &'a Path>) -> Result<Shards, String> {
        paths
            .map(|p| {
                let file = File::open(p)
                    .map_err(|e| format!("--limits: cannot open {}: {e}", p.display()))?;
                let size = file
                    .metadata()
                    .map_err(|e| format!("--limits: cannot stat {}: {e}", p.display()))?
                    .len();
                Ok((file, size))
            })
            .collect::<Result<_, String>>()
            .map(Shards)
    }

    fn bytes(&self) -> u64 {
        self.0.iter().map(|(_, size)| size).sum()
    }

    /// Empties the page cache of every shard.
    fn evict(&self) -> Result<(), String> {
        for (file, size) in &self.0 {
            set_cache(file, *size, Cache::Cold)?;
        }
        Ok(())
    }

    /// The shards as bench's raw reads take them.
    fn files(&self) -> Vec<(&File, u64)> {
        self.0.iter().map(|(file, size)| (file, *size)).collect()
    }

    /// One buffered read of every shard with `threads` threads, from a cold cache when
    /// `cold` (and left cold); GB/s.
    fn buffered(&self, threads: usize, cold: bool) -> Result<f64, String> {
        if cold {
            self.evict()?;
        }
        let (seconds, bytes) = self.read_all(threads)?;
        if cold {
            self.evict()?;
        }
        Ok(gbps(bytes, seconds))
    }

    /// Reads every shard whole with `threads` threads ([`raw_io`]: the threads take the
    /// shards' parts from one list, so none waits at the end of a shard for the others, as
    /// none does in a load). The seconds taken and the bytes read.
    fn read_all(&self, threads: usize) -> Result<(f64, u64), String> {
        raw_io(&self.files(), Op::Read, threads, false)
    }

    /// One `O_DIRECT` read of every shard with `threads` threads, from a cold cache; GB/s,
    /// or `None` when a shard's file system does no direct I/O.
    fn direct(&self, threads: usize) -> Result<Option<f64>, String> {
        self.evict()?;
        let seconds = raw_direct_read(&self.files(), threads)?;
        Ok(seconds.map(|s| gbps(self.bytes(), s)))
    }
}

/// The limits of one `hipfile load --limits`.
pub(crate) struct LoadLimits {
    cold: bool,
    threads: usize,
    direct_threads: Option<usize>,
    raw: Vec<f64>,
    direct: Vec<f64>,
    pinned_h2d: f64,
}

impl LoadLimits {
    /// Chooses the thread counts and measures the copies, after the first load, which found
    /// the shards `cold` or not; `in_flight` is that load's requests in flight.
    pub(crate) fn choose(
        shards: &Shards,
        cold: bool,
        driver: &Driver,
        device: Option<i32>,
        in_flight: usize,
    ) -> Result<LoadLimits, String> {
        let threads = fastest(&RAW_THREADS, |n| shards.buffered(n, cold).map(Some))?;
        let direct_threads = if cold {
            fastest(&RAW_DIRECT_THREADS, |n| shards.direct(n))?
        } else {
            None
        };
        let bytes = shards.bytes();
        let mut pinned_h2d = 0.0f64;
        for n in [1, in_flight.max(1)] {
            pinned_h2d = pinned_h2d.max(gbps(bytes, copies(driver, device, bytes, n)?));
        }
        Ok(LoadLimits {
            cold,
            threads: threads.unwrap_or(1),
            direct_threads,
            raw: Vec::new(),
            direct: Vec::new(),
            pinned_h2d,
        })
    }

    /// One run of each file-side figure, after a load.
    pub(crate) fn run(&mut self, shards: &Shards) -> Result<(), String> {
        self.raw.push(shards.buffered(self.threads, self.cold)?);
        if let Some(n) = self.direct_threads {
            self.direct.extend(shards.direct(n)?);
        }
        Ok(())
    }

    /// The file-side limit: the median of the buffered runs, or of the `O_DIRECT` runs
    /// when those are faster.
    fn file_gbps(&self) -> f64 {
        let raw = spread(&self.raw).0;
        if self.direct.is_empty() {
            raw
        } else {
            raw.max(spread(&self.direct).0)
        }
    }

    /// The median of `loads` (GB/s) over the lower limit.
    pub(crate) fn ratio(&self, loads: &[f64]) -> Option<f64> {
        let lowest = self.file_gbps().min(self.pinned_h2d);
        (lowest > 0.0).then(|| spread(loads).0 / lowest)
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({
            "pread_gbps": spread(&self.raw).0,
            "pread_runs": self.raw,
            "pread_threads": self.threads,
            "pread_direct_gbps": (!self.direct.is_empty()).then(|| spread(&self.direct).0),
            "pread_direct_runs": self.direct,
            "pread_direct_threads": self.direct_threads,
            "pinned_h2d_gbps": self.pinned_h2d,
        })
    }

    pub(crate) fn text(&self, loads: &[f64]) -> String {
        let direct = if self.direct.is_empty() {
            String::new()
        } else {
            format!(
                ", O_DIRECT {:.2} ({} threads)",
                spread(&self.direct).0,
                self.direct_threads.unwrap_or(0)
            )
        };
        let ratio = self
            .ratio(loads)
            .map_or_else(String::new, |r| format!(": ratio {r:.3} (median load)"));
        format!(
            "limits: pread {:.2} GB/s ({} threads, {} cache){direct}, pinned copy to the device {:.2}{ratio}",
            spread(&self.raw).0,
            self.threads,
            if self.cold { "cold" } else { "hot" },
            self.pinned_h2d
        )
    }
}

/// Copies `bytes` from pinned host memory to the device in [`COPY_IO`] copies with
/// `threads` threads, each through a pinned and a device buffer of its own; the seconds
/// taken.
fn copies(driver: &Driver, device: Option<i32>, bytes: u64, threads: usize) -> Result<f64, String> {
    let parts = partition(bytes, COPY_IO as u64, threads);
    let len = usize::try_from(bytes).map_or(COPY_IO, |b| b.clamp(1, COPY_IO));
    let mut pairs = Vec::with_capacity(parts.len());
    for _ in &parts {
        let host = driver
            .alloc_pinned(len)
            .map_err(|e| format!("--limits: cannot allocate {len} bytes of pinned memory: {e}"))?;
        let buf = match device {
            Some(d) => driver.alloc_on(d, len),
            None => driver.alloc(len),
        }
        .map_err(|e| format!("--limits: cannot allocate {len} bytes of device memory: {e}"))?;
        // Each thread copies through its own pair; the locks are never contended.
        pairs.push(std::sync::Mutex::new((host, buf)));
    }
    let start = Instant::now();
    parallel(&parts, |i, from, to| {
        let mut pair = pairs[i]
            .lock()
            .map_err(|_| "a copy buffer is unusable".to_owned())?;
        let (host, buf) = &mut *pair;
        let mut at = from;
        while at < to {
            let n = (to - at).min(len as u64) as usize;
            buf.copy_from_host(0, &host[..n])
                .map_err(|e| format!("--limits: copy of {n} bytes failed: {e}"))?;
            at += n as u64;
        }
        Ok(())
    })?;
    Ok(start.elapsed().as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::RAW_IO;

    #[test]
    fn the_raw_read_takes_every_byte_of_every_shard_once() {
        let dir = hipfile_testfs::TempDir::new("load-limits");
        let raw = RAW_IO as usize;
        let sizes = [0, 1, raw + 5, 3 * raw, raw - 1];
        let paths: Vec<_> = sizes
            .iter()
            .enumerate()
            .map(|(i, &len)| {
                let path = dir.path().join(format!("shard{i}"));
                std::fs::write(&path, vec![i as u8; len]).expect("a shard written");
                path
            })
            .collect();
        let shards = Shards::open(paths.iter().map(|p| p.as_path())).expect("the shards open");
        for threads in [1, 3, 16] {
            let (_, bytes) = shards.read_all(threads).expect("the shards read");
            assert_eq!(
                bytes,
                sizes.iter().sum::<usize>() as u64,
                "{threads} threads"
            );
        }
    }
}
