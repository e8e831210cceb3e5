//! The case's set-up and runs: the driver, the devices and the registered GPU buffers are
//! set up before the test file is touched ([`Setup`]); then each run moves the whole file
//! once per device, every thread of every device started together, timed and counted per
//! backend ([`measure`]), with the peak resident memory of the runs.

use super::apis::Thread;
use super::args::{Api, BenchArgs, Devices};
use super::common::{Case, Group, HostBuf, alloc, fill_pattern};
use super::common::{RAW_IO, gbps, parallel, partition, requests};
use super::limits::FileLimits;
use super::report::{DeviceRuns, Report};
use super::testfile::set_cache;
use crate::rss::{peak_rss, reset_peak_rss};
use crate::tally::Tally;
use hipfile::{ConfigBuilder, DeviceBuffer, Driver, Op};
use std::fs::File;
use std::sync::Mutex;
use std::time::Instant;

/// The devices of `--devices`, checked against the runtime's count; `[None]` (the current
/// device) without it.
pub(super) fn devices(
    driver: &Driver,
    asked: Option<&Devices>,
) -> Result<Vec<Option<i32>>, String> {
    let Some(asked) = asked else {
        return Ok(vec![None]);
    };
    let count = driver
        .device_count()
        .map_err(|e| format!("cannot count the GPU devices for --devices: {e}"))?;
    if count < 1 {
        return Err(format!(
            "--devices: the runtime sees no GPU device (a count of {count})"
        ));
    }
    let seen = match count {
        1 => "1 device (device 0)".to_owned(),
        n => format!("{n} devices (0 to {})", n - 1),
    };
    match asked {
        Devices::All => Ok((0..count).map(Some).collect()),
        Devices::List(list) if list.is_empty() => {
            Err("--devices names no device; name at least one, or use --devices all".to_owned())
        }
        Devices::List(list) => {
            if let Some(&d) = list.iter().find(|&&d| d >= count) {
                return Err(format!(
                    "--devices: device {d} does not exist; the runtime sees {seen}; \
                     name devices below {count}, or use --devices all"
                ));
            }
            Ok(list.iter().copied().map(Some).collect())
        }
    }
}

/// The driver and the registered device buffers of a case: all that can be checked before
/// the test file is touched.
pub(super) struct Setup {
    pub(super) driver: Driver,
    /// One per device, in the order of `--devices`; the first is the one the limits use.
    pub(super) groups: Vec<Group>,
    pub(super) parts: Vec<(u64, u64)>,
    pub(super) io: u64,
}

impl Setup {
    /// Opens the driver, checks the devices and allocates, registers and fills the buffers.
    pub(super) fn new(args: &BenchArgs, settings: ConfigBuilder) -> Result<Setup, String> {
        let driver = crate::runtime::open_driver(settings, args.runtime)?;
        let io = args.io_size.min(args.size);
        let parts = partition(args.size, io, args.threads);
        let runtime_note = crate::runtime::runtime_note(&driver);
        let len = usize::try_from(io).map_err(|_| format!("--io-size {io} is too large"))?;
        // The pattern is made a piece at a time, so that the bench's own memory stays small
        // beside the library's in the peak resident memory it reports.
        let mut pattern = HostBuf::new(len.min(RAW_IO as usize));
        let mut groups = Vec::new();
        for device in devices(&driver, args.devices.as_ref())? {
            let on = device
                .map(|d| format!(" on device {d}"))
                .unwrap_or_default();
            let mut bufs = Vec::with_capacity(parts.len());
            for &(start, _) in &parts {
                let mut buf = alloc(&driver, device, len).map_err(|e| {
                    format!("cannot allocate a GPU buffer of {len} bytes{on}: {e}{runtime_note}")
                })?;
                driver
                    .register_buffer(&buf)
                    .map_err(|e| format!("cannot register a GPU buffer of {len} bytes{on}: {e}"))?;
                // What writes write: the file's own pattern.
                let mut at = 0;
                while at < len {
                    let piece = &mut pattern.get_mut()[..(len - at).min(RAW_IO as usize)];
                    fill_pattern(piece, start + at as u64);
                    buf.copy_from_host(at, piece)
                        .map_err(|e| format!("cannot fill a GPU buffer{on}: {e}"))?;
                    at += piece.len();
                }
                bufs.push(buf);
            }
            let mut slots = Vec::new();
            if args.api != Api::Sync {
                for _ in &parts {
                    let mut own = Vec::with_capacity(args.queue_depth);
                    for _ in 0..args.queue_depth {
                        let buf = alloc(&driver, device, len).map_err(|e| {
                            format!(
                                "cannot allocate a GPU buffer of {len} bytes{on} for a \
                                 request in flight: {e}{runtime_note}"
                            )
                        })?;
                        driver.register_buffer(&buf).map_err(|e| {
                            format!("cannot register a GPU buffer of {len} bytes{on}: {e}")
                        })?;
                        own.push(buf);
                    }
                    slots.push(own);
                }
            }
            groups.push(Group {
                device,
                bufs,
                slots,
            });
        }
        Ok(Setup {
            driver,
            groups,
            parts,
            io,
        })
    }
}

pub(super) fn measure(args: &BenchArgs, setup: Setup, file: &File) -> Result<Report, String> {
    let Setup {
        driver,
        groups,
        parts,
        io,
    } = setup;
    let handle = driver
        .register_file(file)
        .map_err(|e| crate::runtime::register_failed("the test file", &e))?;
    let mut case = Case {
        args,
        file,
        handle,
        groups,
        parts,
        io,
    };
    // Every device moves the whole file in each run.
    let total = args.size.saturating_mul(case.groups.len() as u64);
    let mut runs = Vec::new();
    let mut device_runs: Vec<Vec<f64>> = case.groups.iter().map(|_| Vec::new()).collect();
    let mut served = Tally::default();
    let mut file_limits = if args.limits {
        Some(FileLimits::choose(&case)?)
    } else {
        None
    };
    let mut peak_rss_bytes = Some(0u64);
    for _ in 0..args.runs {
        set_cache(file, args.size, args.cache())?;
        // The peak of the run alone: not the bench's own buffers of the limits or of the
        // cache warming before it.
        let peak_reset = reset_peak_rss();
        let (seconds, each, s) = case.timed_run()?;
        peak_rss_bytes = match (peak_reset, peak_rss_bytes, peak_rss()) {
            (true, Some(most), Some(now)) => Some(most.max(now)),
            _ => None,
        };
        runs.push(gbps(total, seconds));
        for (r, &t) in device_runs.iter_mut().zip(&each) {
            r.push(gbps(args.size, t));
        }
        served.add(s);
        if let Some(f) = file_limits.as_mut() {
            f.run(&mut case, &driver)?;
        }
    }
    let device_runs = args.devices.is_some().then(|| {
        case.groups
            .iter()
            .zip(device_runs)
            .filter_map(|(g, runs)| g.device.map(|device| DeviceRuns { device, runs }))
            .collect()
    });
    let limits = match &file_limits {
        Some(f) => Some(case.limits(&driver, f)?),
        None => None,
    };
    Ok(Report {
        op: args.op,
        size: args.size,
        io_size: io,
        threads: case.parts.len(),
        cache: args.cache(),
        backend: args.backend,
        file: super::testfile::describe(args.file.as_deref()),
        runs,
        devices: device_runs,
        served,
        peak_rss_bytes,
        limits,
        api: args.api,
        queue_depth: args.queue_depth,
        request_threads: args.request_threads,
        pattern: args.pattern,
    })
}

impl Case<'_> {
    /// One run: every thread of every device moves its part, all started together; returns
    /// the seconds of the whole run, those of each device (until its last thread finished),
    /// and what was served.
    pub(super) fn timed_run(&mut self) -> Result<(f64, Vec<f64>, Tally), String> {
        if self.args.api != Api::Sync {
            return self.timed_queued_run();
        }
        let op = self.args.op;
        let per_device = self.parts.len();
        let (handle, io) = (&self.handle, self.io);
        // The parts of every device, one after the other: thread `i` is device
        // `i / per_device`'s part `i % per_device`.
        let all: Vec<(u64, u64)> = self
            .groups
            .iter()
            .flat_map(|_| self.parts.iter().copied())
            .collect();
        // Thread `i` alone uses buffer `i`, in the same order; a read needs it `&mut`, and
        // the lock, never contended, is what hands it over.
        let bufs: Vec<Mutex<&mut DeviceBuffer>> = self
            .groups
            .iter_mut()
            .flat_map(|g| g.bufs.iter_mut())
            .map(Mutex::new)
            .collect();
        let start = Instant::now();
        let finished = parallel(&all, |i, from, to| {
            let mut buf = bufs[i]
                .lock()
                .map_err(|_| "a GPU buffer is unusable".to_owned())?;
            let mut served = Tally::default();
            let mut at = from;
            while at < to {
                let len = (to - at).min(io);
                let mut done = 0u64;
                while done < len {
                    let offset = at + done;
                    let cannot = |e: hipfile::Error| {
                        format!(
                            "cannot {} the test file ({} bytes at offset {offset}): {e}",
                            op.as_str(),
                            len - done
                        )
                    };
                    // Within the buffer, whose length is a usize: `len` is at most `io`.
                    let range = done as usize..len as usize;
                    let outcome = match op {
                        Op::Read => buf
                            .slice_mut(range)
                            .and_then(|mut part| handle.read_at(&mut part, offset)),
                        Op::Write => buf
                            .slice(range)
                            .and_then(|part| handle.write_at(&part, offset)),
                    }
                    .map_err(cannot)?;
                    served.count(&outcome);
                    if outcome.bytes == 0 {
                        return Err(format!(
                            "the test file ended at {offset}: it changed during the run"
                        ));
                    }
                    done += outcome.bytes;
                }
                at += len;
            }
            Ok((served, start.elapsed().as_secs_f64()))
        })?;
        let seconds = start.elapsed().as_secs_f64();
        let mut total = Tally::default();
        let mut each = Vec::with_capacity(self.groups.len());
        for device in finished.chunks(per_device.max(1)) {
            let mut last = 0.0f64;
            for &(s, t) in device {
                total.add(s);
                last = last.max(t);
            }
            each.push(last);
        }
        Ok((seconds, each, total))
    }
}

impl Case<'_> {
    /// A run with `--api` async, batch or stream: as [`Case::timed_run`], each thread with
    /// `--queue-depth` requests in flight over its own buffers, in the order of `--pattern`.
    fn timed_queued_run(&mut self) -> Result<(f64, Vec<f64>, Tally), String> {
        let args = self.args;
        let per_device = self.parts.len();
        let devices: Vec<Option<i32>> = self.groups.iter().map(|g| g.device).collect();
        let all: Vec<(u64, u64)> = self
            .groups
            .iter()
            .flat_map(|_| self.parts.iter().copied())
            .collect();
        let requests: Vec<Vec<(u64, u64)>> = all
            .iter()
            .enumerate()
            .map(|(i, &(from, to))| requests(from, to, self.io, args.pattern, i as u64 + 1))
            .collect();
        // Thread `i` alone uses the buffers of part `i`; the lock hands them over.
        let slots: Vec<Mutex<Vec<DeviceBuffer>>> = self
            .groups
            .iter_mut()
            .flat_map(|g| g.slots.drain(..))
            .map(Mutex::new)
            .collect();
        let (driver, handle) = (self.handle.driver(), &self.handle);
        let start = Instant::now();
        let finished = parallel(&all, |i, _, _| {
            let mut bufs = slots[i]
                .lock()
                .map_err(|_| "a GPU buffer is unusable".to_owned())?;
            let thread = Thread {
                api: args.api,
                op: args.op,
                driver,
                handle,
                device: devices[i / per_device.max(1)],
                requests: &requests[i],
            };
            let served = thread.run(&mut bufs)?;
            Ok((served, start.elapsed().as_secs_f64()))
        });
        let seconds = start.elapsed().as_secs_f64();
        // The buffers go back to their parts, for the next run.
        let mut slots = slots
            .into_iter()
            .map(|m| m.into_inner().unwrap_or_default());
        for g in &mut self.groups {
            g.slots = slots.by_ref().take(per_device).collect();
        }
        let finished = finished?;
        let mut total = Tally::default();
        let mut each = Vec::with_capacity(self.groups.len());
        for device in finished.chunks(per_device.max(1)) {
            let mut last = 0.0f64;
            for &(s, t) in device {
                total.add(s);
                last = last.max(t);
            }
            each.push(last);
        }
        Ok((seconds, each, total))
    }
}
