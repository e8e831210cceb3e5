//! The limits a case is compared against, measured in the same process on the same file:
//! raw parallel `pread`/`pwrite` (and, for cold reads, `O_DIRECT` reads), copies between
//! host memory (pinned and pageable) and the device buffers, the latency of single raw
//! requests beside the library's, and upstream hipFile's serial fallback.

use super::args::Cache;
use super::common::{Case, HostBuf, alloc, fill_pattern, raw_io};
use super::common::{
    LATENCY_ITERATIONS, LATENCY_SIZES, PAGE, RAW_DIRECT_THREADS, RAW_IO, RAW_THREADS, gbps,
    parallel, partition, spread,
};
use super::report::{Latency, Limits};
use super::testfile::set_cache;
use hipfile::{DeviceBuffer, Driver, Op};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::time::Instant;

/// The file-side figures (the raw limits, the raw staged path and upstream's serial
/// fallback), measured between the case's runs so that a disk or page cache whose speed
/// drifts during the bench (a virtual disk that is still writing back, say) moves them and
/// the case alike. The thread counts of the raw limits are chosen before the runs: each of
/// [`RAW_THREADS`] (and, for cold reads, [`RAW_DIRECT_THREADS`]) once, the fastest kept.
/// After each run of the case, one run of each figure; each is the median of its runs, as
/// the case's figure is the median of its own.
pub(super) struct FileLimits {
    pub(super) threads: usize,
    /// `None`: not a cold read, or the file system does no direct I/O.
    pub(super) direct_threads: Option<usize>,
    pub(super) raw: Vec<f64>,
    pub(super) direct: Vec<f64>,
    pub(super) serial: Vec<f64>,
    /// The raw staged path's runs, with the case's concurrency.
    pub(super) staged: Vec<f64>,
}

/// The count of `counts` whose one run by `measure` is the fastest; `None` when `measure`
/// has no figure (it is asked no further after the first `None`).
pub(crate) fn fastest(
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
    pub(super) fn choose(case: &Case<'_>) -> Result<FileLimits, String> {
        let threads = fastest(&RAW_THREADS, |n| case.raw_run(n).map(Some))?;
        let direct_threads = if case.args.op == Op::Read && case.args.cache() == Cache::Cold {
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
            staged: Vec::new(),
        })
    }

    /// One run of each figure, after a run of the case.
    pub(super) fn run(&mut self, case: &mut Case<'_>, driver: &Driver) -> Result<(), String> {
        self.raw.push(case.raw_run(self.threads)?);
        if let Some(n) = self.direct_threads {
            self.direct.extend(case.raw_direct_run(n)?);
        }
        set_cache(case.file, case.args.size, case.args.cache())?;
        self.serial
            .push(gbps(case.args.size, case.serial(case.args.op)?));
        // Its buffers are made for each run and freed after it: kept across runs, they
        // would count in the peak resident memory of the case's later runs.
        self.staged.push(gbps(
            case.args.size,
            case.staged(driver, case.staged_threads())?,
        ));
        Ok(())
    }

    pub(super) fn raw_gbps(&self) -> f64 {
        spread(&self.raw).0
    }

    pub(super) fn direct_gbps(&self) -> Option<f64> {
        (!self.direct.is_empty()).then(|| spread(&self.direct).0)
    }

    pub(super) fn serial_gbps(&self) -> f64 {
        spread(&self.serial).0
    }

    pub(super) fn staged_gbps(&self) -> f64 {
        spread(&self.staged).0
    }
}

/// One raw request of `host.len()` bytes at `at` through `host` and the start of `buf`: a
/// `pread` and a synchronous copy to the device (reads), or a synchronous copy from the
/// device, a `pwrite` and an `fdatasync` (writes).
pub(super) fn raw_request(
    file: &File,
    buf: &mut DeviceBuffer,
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
pub(super) enum Host {
    Pinned(hipfile::PinnedHostBuffer),
    Pageable(HostBuf),
}

impl Host {
    pub(super) fn get(&self) -> &[u8] {
        match self {
            Host::Pinned(p) => p,
            Host::Pageable(h) => h.get(),
        }
    }

    pub(super) fn get_mut(&mut self) -> &mut [u8] {
        match self {
            Host::Pinned(p) => p,
            Host::Pageable(h) => h.get_mut(),
        }
    }
}

/// Raw parallel `O_DIRECT` reads of the whole of `files` in [`RAW_IO`] requests with
/// `threads` threads into page-aligned memory, as [`raw_io`] reads them; returns the
/// seconds taken. The last request of a file is rounded up to the page and may come back
/// short at its end. `None` when a file's file system does no direct I/O. Each file is
/// reopened through its descriptor (`/proc/self/fd/N`), which works for a test file without
/// a name too.
pub(crate) fn raw_direct_read(
    files: &[(&File, u64)],
    threads: usize,
) -> Result<Option<f64>, String> {
    let mut direct = Vec::with_capacity(files.len());
    for &(file, size) in files {
        let path = std::path::PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
            .open(&path)
        {
            Ok(f) => direct.push((f, size)),
            Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) => {
                return Ok(None);
            }
            Err(e) => return Err(format!("cannot reopen the test file with O_DIRECT: {e}")),
        }
    }
    let direct: Vec<(&File, u64)> = direct.iter().map(|(f, size)| (f, *size)).collect();
    raw_io(&direct, Op::Read, threads, true).map(|(seconds, _)| Some(seconds))
}

impl Case<'_> {
    /// One raw run of the file-side limit with `threads` threads, in the case's cache state.
    pub(super) fn raw_run(&self, threads: usize) -> Result<f64, String> {
        let size = self.args.size;
        set_cache(self.file, size, self.args.cache())?;
        let (seconds, _) = raw_io(&[(self.file, size)], self.args.op, threads, false)?;
        Ok(gbps(size, seconds))
    }

    /// One raw run of `O_DIRECT` reads with `threads` threads on a cold cache; `None` when
    /// the file system does no direct I/O.
    pub(super) fn raw_direct_run(&self, threads: usize) -> Result<Option<f64>, String> {
        let size = self.args.size;
        set_cache(self.file, size, Cache::Cold)?;
        Ok(raw_direct_read(&[(self.file, size)], threads)?.map(|s| gbps(size, s)))
    }

    pub(super) fn limits(
        &mut self,
        driver: &Driver,
        file_limits: &FileLimits,
    ) -> Result<Limits, String> {
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
            staged_gbps: file_limits.staged_gbps(),
            staged_threads: self.staged_threads(),
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
    pub(super) fn serial(&mut self, op: Op) -> Result<f64, String> {
        let size = self.args.size;
        let file = self.file;
        let buf = &mut self.groups[0].bufs[0];
        let chunk = RAW_IO.min(self.io).min(size) as usize;
        let mut host = HostBuf::new(chunk);
        if op == Op::Write {
            fill_pattern(host.get_mut(), 0);
        }
        let start = Instant::now();
        let mut at = 0u64;
        while at < size {
            let n = (size - at).min(chunk as u64) as usize;
            raw_request(file, buf, op, &mut host.get_mut()[..n], at)?;
            at += n as u64;
        }
        Ok(start.elapsed().as_secs_f64())
    }

    /// Copies `size` bytes between host memory (pinned, or pageable) and the device buffers
    /// of the first device in requests of the case's size with `threads` threads; returns the
    /// seconds taken.
    pub(super) fn copies(
        &mut self,
        driver: &Driver,
        op: Op,
        threads: usize,
        pinned: bool,
    ) -> Result<f64, String> {
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
        let io = self.io;
        // Each thread copies through its own buffer; the locks are never contended.
        let bufs: Vec<std::sync::Mutex<&mut DeviceBuffer>> = self.groups[0]
            .bufs
            .iter_mut()
            .map(std::sync::Mutex::new)
            .collect();
        let start = Instant::now();
        parallel(&parts, |i, from, to| {
            let mut host = hosts[i]
                .lock()
                .map_err(|_| "a host buffer is unusable".to_owned())?;
            let mut buf = bufs[i]
                .lock()
                .map_err(|_| "a GPU buffer is unusable".to_owned())?;
            let mut at = from;
            while at < to {
                let n = (to - at).min(io) as usize;
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

    /// The raw staged path's threads: as many as the case keeps requests in flight.
    pub(super) fn staged_threads(&self) -> usize {
        self.parts.len() * self.args.queue_depth
    }

    /// The raw staged path with `threads` threads (see [`Limits::staged_gbps`]); returns the
    /// seconds taken.
    pub(super) fn staged(&self, driver: &Driver, threads: usize) -> Result<f64, String> {
        let (size, op, io) = (self.args.size, self.args.op, self.io);
        let parts = partition(size, io, threads);
        let device = self.groups[0].device;
        let len = io as usize;
        let mut pairs = Vec::with_capacity(parts.len());
        for &(start, _) in &parts {
            let buf = alloc(driver, device, len)
                .map_err(|e| format!("cannot allocate a GPU buffer of {len} bytes: {e}"))?;
            let mut host = driver
                .alloc_pinned(len)
                .map_err(|e| format!("cannot allocate {len} bytes of pinned host memory: {e}"))?;
            fill_pattern(&mut host, start);
            pairs.push(std::sync::Mutex::new((buf, host)));
        }
        set_cache(self.file, size, self.args.cache())?;
        let file = self.file;
        let start = Instant::now();
        parallel(&parts, |i, from, to| {
            let mut pair = pairs[i]
                .lock()
                .map_err(|_| "a buffer is unusable".to_owned())?;
            let (buf, host) = &mut *pair;
            let mut at = from;
            while at < to {
                let n = (to - at).min(io) as usize;
                match op {
                    Op::Read => {
                        file.read_exact_at(&mut host[..n], at)
                            .map_err(|e| format!("pread at {at} failed: {e}"))?;
                        buf.copy_from_host(0, &host[..n])
                    }
                    Op::Write => {
                        buf.copy_to_host(0, &mut host[..n])
                            .map_err(|e| format!("copy of {n} bytes failed: {e}"))?;
                        file.write_all_at(&host[..n], at)
                            .map_err(|e| format!("pwrite at {at} failed: {e}"))?;
                        Ok(())
                    }
                }
                .map_err(|e| format!("copy of {n} bytes failed: {e}"))?;
                at += n as u64;
            }
            if op == Op::Write {
                file.sync_data()
                    .map_err(|e| format!("fdatasync of the test file failed: {e}"))?;
            }
            Ok(())
        })?;
        Ok(start.elapsed().as_secs_f64())
    }

    /// Median latencies of raw and library requests of each of [`LATENCY_SIZES`] no larger
    /// than the file, on a hot cache, with a buffer on the first device.
    pub(super) fn latencies(&self, driver: &Driver) -> Result<Vec<Latency>, String> {
        let size = self.args.size;
        let largest = LATENCY_SIZES.iter().copied().max().unwrap_or(PAGE as u64);
        let mut buf = alloc(driver, self.groups[0].device, largest as usize)
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
                raw_request(self.file, &mut buf, op, &mut host.get_mut()[..len], at)?;
                raw.push(t.elapsed().as_secs_f64() * 1e6);
            }
            let mut lib = Vec::with_capacity(offsets.len());
            for &at in &offsets {
                let t = Instant::now();
                let outcome = match op {
                    Op::Read => buf
                        .slice_mut(..len)
                        .and_then(|mut part| self.handle.read_at(&mut part, at)),
                    Op::Write => buf
                        .slice(..len)
                        .and_then(|part| self.handle.write_at(&part, at)),
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

#[cfg(test)]
mod tests {
    use super::*;

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
            staged: vec![1.8, 1.6, 1.9],
        };
        assert_eq!(limits.raw_gbps(), 1.7);
        assert_eq!(limits.direct_gbps(), Some(2.0));
        assert_eq!(limits.serial_gbps(), 0.5);
        assert_eq!(limits.staged_gbps(), 1.8);
        let buffered_only = FileLimits {
            direct_threads: None,
            direct: Vec::new(),
            ..limits
        };
        assert_eq!(buffered_only.direct_gbps(), None);
    }
}
