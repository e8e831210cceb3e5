//! What the other jobs share, and the ground they stand on: the case's registered file and
//! device buffers ([`Case`]), page-aligned host buffers ([`HostBuf`]), the test file's byte
//! pattern ([`fill_pattern`]) and raw parallel `pread`/`pwrite` of the whole file
//! ([`raw_io`]), which the limits time and the cache warming uses; the measurement constants,
//! the request lists ([`requests`], [`partition`]), the threads of a part ([`parallel`]) and
//! the figures' arithmetic ([`spread`], [`gbps`]). It uses none of the other jobs' modules,
//! only the arguments ([`super::args`]).

use super::args::{BackendChoice, BenchArgs, Pattern};
use hipfile::{ConfigBuilder, DeviceBuffer, Driver, FileHandle, Op};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// Request size of the raw `pread`/`pwrite` limits, and of the pattern writes.
pub(crate) const RAW_IO: u64 = 16 << 20;
/// Thread counts the raw limits are measured with; the best counts.
pub(crate) const RAW_THREADS: [usize; 4] = [1, 4, 8, 16];
/// Thread counts the raw `O_DIRECT` limit of cold reads is measured with; the best counts.
pub(crate) const RAW_DIRECT_THREADS: [usize; 2] = [4, 16];
/// Threads that fill the page cache before a hot run.
pub(super) const WARM_THREADS: usize = 8;
/// Request sizes of the latency comparison.
pub(super) const LATENCY_SIZES: [u64; 2] = [4 << 10, 64 << 10];
/// Requests per latency figure (the median is reported).
pub(super) const LATENCY_ITERATIONS: usize = 1000;
/// Host buffers are aligned to this, as a page-aligned staging buffer would be.
pub(super) const PAGE: usize = 4096;

/// The requests of the part `from..to` in `io`-byte pieces (the last one shorter), in the
/// order `pattern` says; `seed` picks the shuffle.
pub fn requests(from: u64, to: u64, io: u64, pattern: Pattern, seed: u64) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = (from..to)
        .step_by(io.max(1) as usize)
        .map(|at| (at, (to - at).min(io)))
        .collect();
    if pattern == Pattern::Random {
        // A small xorshift, so that every run and every build shuffles the same way.
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for i in (1..out.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.swap(i, (x % (i as u64 + 1)) as usize);
        }
    }
    out
}

/// The settings for `--backend`.
pub fn backend_settings(settings: ConfigBuilder, choice: BackendChoice) -> ConfigBuilder {
    match choice {
        BackendChoice::Auto => settings,
        BackendChoice::Fallback => settings.force_compat_mode(true),
        BackendChoice::Fastpath => settings.allow_compat_mode(false),
    }
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
pub(crate) fn parallel<T: Send>(
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

/// The buffers of one device: one per part of the file, registered.
pub(super) struct Group {
    /// The device, with `--devices`; `None`: the current device.
    pub(super) device: Option<i32>,
    /// The buffer of each part.
    pub(super) bufs: Vec<DeviceBuffer>,
    /// With `--api` other than sync: the `--queue-depth` buffers of each part, one per
    /// request in flight.
    pub(super) slots: Vec<Vec<DeviceBuffer>>,
}

/// The registered file, the per-thread device buffers of each device, and the case.
pub(super) struct Case<'a> {
    pub(super) args: &'a BenchArgs,
    pub(super) file: &'a File,
    pub(super) handle: FileHandle,
    /// One per device, in the order of `--devices`; the first is the one the limits use.
    pub(super) groups: Vec<Group>,
    pub(super) parts: Vec<(u64, u64)>,
    pub(super) io: u64,
}

/// `len` bytes of device memory on `device`, or on the current device.
pub(super) fn alloc(
    driver: &Driver,
    device: Option<i32>,
    len: usize,
) -> Result<DeviceBuffer, hipfile::Error> {
    match device {
        Some(d) => driver.alloc_on(d, len),
        None => driver.alloc(len),
    }
}

/// A page-aligned host buffer of `len` bytes, in ordinary (pageable) memory, in memory from
/// the start: the raw limits time their reads and copies alone, not the kernel faulting in
/// fresh pages under the first `pread` (which held bench's `pread` limit well below what
/// the page cache gives).
pub(super) struct HostBuf {
    pub(super) v: Vec<u8>,
    pub(super) start: usize,
    pub(super) len: usize,
}

impl HostBuf {
    pub(super) fn new(len: usize) -> HostBuf {
        // Not zeros: zeroed memory comes from the kernel unmapped, and its pages would be
        // faulted in by the first use. Filling it brings every page in now.
        let v = vec![0xa5u8; len + PAGE];
        let start = v.as_ptr().align_offset(PAGE);
        // `align_offset` may decline to compute; unaligned memory still works.
        let start = if start < PAGE { start } else { 0 };
        HostBuf { v, start, len }
    }

    pub(super) fn get(&self) -> &[u8] {
        &self.v[self.start..self.start + self.len]
    }

    pub(super) fn get_mut(&mut self) -> &mut [u8] {
        &mut self.v[self.start..self.start + self.len]
    }
}

/// The byte at `offset` of the test file: not zero anywhere in a page, so that nothing can
/// be stored sparsely, and different from page to page.
pub(super) fn pattern_byte(offset: u64) -> u8 {
    let word = offset / 8;
    (word.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8 | 1
}

pub(super) fn fill_pattern(buf: &mut [u8], offset: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern_byte(offset + i as u64);
    }
}

/// Raw parallel `pread` or `pwrite` (+ one `fdatasync` per file) of whole files in
/// [`RAW_IO`] requests with `threads` threads; returns the seconds taken and the bytes
/// moved. Each file is cut into one contiguous part per thread, and the threads take the
/// parts of all the files from one list in order, so that with one file each thread has
/// one part, and with several no thread waits at the end of a file for the others.
/// `direct`: the files were opened with `O_DIRECT`, for reads only, so requests are whole
/// pages into page-aligned memory.
pub(crate) fn raw_io(
    files: &[(&File, u64)],
    op: Op,
    threads: usize,
    direct: bool,
) -> Result<(f64, u64), String> {
    let parts: Vec<(&File, u64, u64)> = files
        .iter()
        .flat_map(|&(file, size)| {
            partition(size, RAW_IO, threads)
                .into_iter()
                .map(move |(from, to)| (file, from, to))
        })
        .collect();
    // Direct reads move whole pages: the last one is rounded up and comes back short.
    let page = if direct { PAGE } else { 1 };
    let largest = files.iter().map(|&(_, size)| size).max().unwrap_or(0);
    let io = RAW_IO.min(largest.div_ceil(page as u64) * page as u64) as usize;
    let workers = threads.clamp(1, parts.len().max(1));
    let mut bufs: Vec<HostBuf> = (0..workers).map(|_| HostBuf::new(io)).collect();
    if op == Op::Write {
        for (b, &(_, start, _)) in bufs.iter_mut().zip(&parts) {
            fill_pattern(b.get_mut(), start);
        }
    }
    let next = AtomicUsize::new(0);
    let start = Instant::now();
    let moved: Vec<Result<u64, String>> = std::thread::scope(|s| {
        let workers: Vec<_> = bufs
            .iter_mut()
            .map(|buf| {
                let (parts, next) = (&parts, &next);
                s.spawn(move || {
                    let buf = buf.get_mut();
                    let mut bytes = 0u64;
                    while let Some(&(file, from, to)) =
                        parts.get(next.fetch_add(1, Ordering::Relaxed))
                    {
                        let mut at = from;
                        while at < to {
                            let n =
                                ((to - at).min(buf.len() as u64) as usize).div_ceil(page) * page;
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
                            bytes += moved as u64;
                        }
                    }
                    Ok(bytes)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err("a raw I/O thread panicked".into()))
            })
            .collect()
    });
    let mut bytes = 0;
    for m in moved {
        bytes += m?;
    }
    if op == Op::Write {
        for &(file, _) in files {
            file.sync_data()
                .map_err(|e| format!("fdatasync of the test file failed: {e}"))?;
        }
    }
    Ok((start.elapsed().as_secs_f64(), bytes))
}

pub(super) fn op_call(op: Op) -> &'static str {
    match op {
        Op::Read => "pread",
        Op::Write => "pwrite",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The raw limits time the file I/O alone: a buffer is in memory before the clock
    /// starts, not faulted in by the first `pread` into it.
    #[test]
    fn a_host_buffer_is_in_memory_when_made() {
        let len = 8 << 20;
        let buf = HostBuf::new(len);
        let at = buf.get().as_ptr() as usize;
        let mapping = hipfile_testfs::maps::mapping_at(at).expect("the buffer is mapped");
        assert!(
            mapping.rss_kib * 1024 >= len as u64,
            "{} KiB of {len} bytes in memory",
            mapping.rss_kib
        );
    }

    #[test]
    fn requests_cover_the_part_once_in_either_order() {
        let seq = requests(1000, 1000 + 10 * 64 + 5, 64, Pattern::Seq, 1);
        assert_eq!(seq.len(), 11);
        assert_eq!(seq[0], (1000, 64));
        assert_eq!(seq[10], (1000 + 640, 5));
        assert!(seq.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
        let mut random = requests(1000, 1000 + 10 * 64 + 5, 64, Pattern::Random, 1);
        assert_ne!(random, seq, "a shuffle of 11 requests left them in order");
        assert_eq!(random, requests(1000, 1000 + 645, 64, Pattern::Random, 1));
        random.sort_unstable();
        assert_eq!(random, seq);
    }

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
    fn spread_is_median_min_max() {
        assert_eq!(spread(&[3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(spread(&[4.0, 1.0, 2.0, 3.0]), (2.5, 1.0, 4.0));
        assert_eq!(spread(&[]), (0.0, 0.0, 0.0));
        assert_eq!(gbps(2_000_000_000, 0.5), 4.0);
        assert_eq!(gbps(1, 0.0), 0.0);
    }

    #[test]
    fn the_pattern_has_no_zero_byte() {
        let mut b = vec![0u8; 8192];
        fill_pattern(&mut b, 4096);
        assert!(b.iter().all(|&x| x != 0));
        assert_ne!(b[..4096], b[4096..]);
    }
}
