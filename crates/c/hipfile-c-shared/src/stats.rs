//! The statistics calls, `hipFileGetStatsL1/L2/L3`: the facade's counters
//! (`Driver::stats`) in hipFile's structs.
//!
//! Figures the facade does not count stay 0, as hipFile leaves them: the batch block of
//! level 1 (batch requests are counted with the reads and writes), the GPU UUIDs,
//! utilisation, nvidia-fs, direct, sparse, inline and mmap counts and `reg_bytes` of level 3. Rates are
//! per second of the time spent serving requests (bytes or requests × 10⁶ / the summed
//! microseconds), 0 while no time was counted.
//!
//! # Safety
//!
//! Each call writes one struct through the pointer it is given, after checking it for NULL.

use crate::panic::boundary;
use crate::state;
use crate::types::*;
use facade::{DirectionStats, GpuDirectionStats, OpCount, StatsSnapshot};

const INTERNAL: hipFileError_t = hipFileError_t::code(hipFileInternalError);

fn counter(c: OpCount) -> hipFileOpCounter_t {
    hipFileOpCounter_t {
        ok: c.ok,
        err: c.err,
    }
}

/// `n` per second of `us` microseconds; 0 when `us` is 0.
fn per_second(n: u64, us: u64) -> u64 {
    if us == 0 {
        return 0;
    }
    u64::try_from(u128::from(n) * 1_000_000 / u128::from(us)).unwrap_or(u64::MAX)
}

/// The counters at `level` or more, or the error to return: the driver must be open and
/// count at `level` at least (cuFile's rule: `hipFileInvalidValue` below it).
fn snapshot(level: u32) -> Result<StatsSnapshot, hipFileError_t> {
    let driver = state::lock().driver.clone();
    let Some(driver) = driver else {
        return Err(hipFileError_t::code(hipFileDriverNotInitialized));
    };
    match driver.stats() {
        Some(s) if s.level >= level => Ok(s),
        _ => Err(hipFileError_t::code(hipFileInvalidValue)),
    }
}

fn level1(s: &StatsSnapshot) -> hipFileStatsLevel1_t {
    let (r, w): (&DirectionStats, &DirectionStats) = (&s.read, &s.write);
    hipFileStatsLevel1_t {
        read_ops: counter(r.ops),
        write_ops: counter(w.ops),
        hdl_register_ops: counter(s.file_registrations),
        hdl_deregister_ops: counter(s.file_deregistrations),
        buf_register_ops: counter(s.buffer_registrations),
        buf_deregister_ops: counter(s.buffer_deregistrations),
        read_bytes: r.bytes,
        write_bytes: w.bytes,
        read_bw_bytes_per_sec: per_second(r.bytes, r.latency_us),
        write_bw_bytes_per_sec: per_second(w.bytes, w.latency_us),
        read_lat_avg_us: r.latency_us.checked_div(r.ops.ok).unwrap_or(0),
        write_lat_avg_us: w.latency_us.checked_div(w.ops.ok).unwrap_or(0),
        read_ops_per_sec: per_second(r.ops.ok, r.latency_us),
        write_ops_per_sec: per_second(w.ops.ok, w.latency_us),
        read_lat_sum_us: r.latency_us,
        write_lat_sum_us: w.latency_us,
        ..hipFileStatsLevel1_t::default()
    }
}

fn level2(s: &StatsSnapshot) -> hipFileStatsLevel2_t {
    hipFileStatsLevel2_t {
        basic: level1(s),
        read_size_kb_hist: s.read.size_histogram,
        write_size_kb_hist: s.write.size_histogram,
    }
}

fn level3(s: &StatsSnapshot) -> hipFileStatsLevel3_t {
    let mut out = hipFileStatsLevel3_t {
        detailed: level2(s),
        num_gpus: 0,
        per_gpu_stats: [hipFilePerGpuStats_t::default(); HIPFILE_MAX_GPUS],
    };
    // Entry `i` is device `i`, as hipFile indexes them; `num_gpus` covers the last one used.
    for g in &s.gpus {
        let Some(slot) = usize::try_from(g.device)
            .ok()
            .and_then(|i| out.per_gpu_stats.get_mut(i))
        else {
            continue;
        };
        let (r, w): (&GpuDirectionStats, &GpuDirectionStats) = (&g.read, &g.write);
        *slot = hipFilePerGpuStats_t {
            read_bytes: r.bytes,
            read_bw_bytes_per_sec: per_second(r.bytes, r.duration_us),
            read_duration_us: r.duration_us,
            n_total_reads: r.ops,
            n_p2p_reads: r.fastpath,
            n_posix_reads: r.fallback,
            n_unaligned_reads: r.unaligned,
            n_reads_err: r.errors,
            write_bytes: w.bytes,
            write_bw_bytes_per_sec: per_second(w.bytes, w.duration_us),
            write_duration_us: w.duration_us,
            n_total_writes: w.ops,
            n_p2p_writes: w.fastpath,
            n_posix_writes: w.fallback,
            n_unaligned_writes: w.unaligned,
            n_writes_err: w.errors,
            ..hipFilePerGpuStats_t::default()
        };
        out.num_gpus = out.num_gpus.max(g.device as u32 + 1);
    }
    out
}

/// Writes the figures `fill` makes from the counters at `level` to `out`.
///
/// # Safety
///
/// `out` is NULL or writable for a `T`.
unsafe fn get<T>(out: *mut T, level: u32, fill: fn(&StatsSnapshot) -> T) -> hipFileError_t {
    boundary(INTERNAL, || {
        if out.is_null() {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        match snapshot(level) {
            Ok(s) => {
                // SAFETY: non-NULL, and the caller vouches that it is writable.
                unsafe { out.write(fill(&s)) };
                hipFileError_t::SUCCESS
            }
            Err(e) => e,
        }
    })
}

/// `hipFileError_t hipFileGetStatsL1(hipFileStatsLevel1_t *stats)` — the level-1 figures:
/// requests ok and failed, bytes, time, rates and registrations.
///
/// # Errors
///
/// `hipFileInvalidValue` for NULL, or when the driver counts below level 1
/// (`HIPFILE_STATS_LEVEL` unset or 0); `hipFileDriverNotInitialized` when the driver is not
/// open.
///
/// # Safety
///
/// `stats` is NULL or writable.
pub unsafe extern "C" fn hipFileGetStatsL1(stats: *mut hipFileStatsLevel1_t) -> hipFileError_t {
    // SAFETY: as this function's contract.
    unsafe { get(stats, 1, level1) }
}

/// `hipFileError_t hipFileGetStatsL2(hipFileStatsLevel2_t *stats)` — level 1 and the
/// request-size histograms (bucket 0: below 2 KiB; bucket `i`: `2^i` KiB up to `2^(i+1)`;
/// the last: everything larger).
///
/// # Errors
///
/// As [`hipFileGetStatsL1`], with level 2.
///
/// # Safety
///
/// `stats` is NULL or writable.
pub unsafe extern "C" fn hipFileGetStatsL2(stats: *mut hipFileStatsLevel2_t) -> hipFileError_t {
    // SAFETY: as this function's contract.
    unsafe { get(stats, 2, level2) }
}

/// `hipFileError_t hipFileGetStatsL3(hipFileStatsLevel3_t *stats)` — level 2 and each
/// device's figures, entry `i` for device `i` (the first 16), `num_gpus` one past the
/// last device used.
///
/// # Errors
///
/// As [`hipFileGetStatsL1`], with level 3.
///
/// # Safety
///
/// `stats` is NULL or writable.
pub unsafe extern "C" fn hipFileGetStatsL3(stats: *mut hipFileStatsLevel3_t) -> hipFileError_t {
    // SAFETY: as this function's contract.
    unsafe { get(stats, 3, level3) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_need_time() {
        assert_eq!(per_second(10, 0), 0);
        assert_eq!(per_second(1_000_000, 1_000_000), 1_000_000);
        assert_eq!(per_second(u64::MAX, 1), u64::MAX);
    }
}
