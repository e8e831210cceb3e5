//! What the other jobs share, and the ground they stand on: the case's registered file and
//! device buffers ([`Case`]), page-aligned host buffers ([`HostBuf`]), the test file's byte
//! pattern ([`fill_pattern`]) and raw parallel `pread`/`pwrite` of the whole file
//! ([`raw_io`]), which the limits time and the cache warming uses. It uses none of the
//! other jobs' modules.

use super::{BenchArgs, PAGE, RAW_IO, parallel, partition};
use hipfile::{DeviceBuffer, Driver, FileHandle, Op};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::Instant;

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

/// A page-aligned host buffer of `len` bytes, in ordinary (pageable) memory.
pub(super) struct HostBuf {
    pub(super) v: Vec<u8>,
    pub(super) start: usize,
    pub(super) len: usize,
}

impl HostBuf {
    pub(super) fn new(len: usize) -> HostBuf {
        let v = vec![0u8; len + PAGE];
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

/// Raw parallel `pread` or `pwrite` (+ one `fdatasync`) of the whole file in [`RAW_IO`]
/// requests with `threads` threads; returns the seconds taken. `direct`: `file` was opened
/// with `O_DIRECT`, for reads only, so requests are whole pages into page-aligned memory.
pub(super) fn raw_io(
    file: &File,
    op: Op,
    size: u64,
    threads: usize,
    direct: bool,
) -> Result<f64, String> {
    let parts = partition(size, RAW_IO, threads);
    // Direct reads move whole pages: the last one is rounded up and comes back short.
    let page = if direct { PAGE } else { 1 };
    let io = RAW_IO.min(size.div_ceil(page as u64) * page as u64) as usize;
    let mut bufs: Vec<HostBuf> = parts.iter().map(|_| HostBuf::new(io)).collect();
    if op == Op::Write {
        for (b, &(start, _)) in bufs.iter_mut().zip(&parts) {
            fill_pattern(b.get_mut(), start);
        }
    }
    let bufs: Vec<std::sync::Mutex<HostBuf>> =
        bufs.into_iter().map(std::sync::Mutex::new).collect();
    let start = Instant::now();
    parallel(&parts, |i, from, to| {
        let mut guard = bufs[i]
            .lock()
            .map_err(|_| "a host buffer is unusable".to_owned())?;
        let buf = guard.get_mut();
        let mut at = from;
        while at < to {
            let n = ((to - at).min(buf.len() as u64) as usize).div_ceil(page) * page;
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
        }
        Ok(())
    })?;
    if op == Op::Write {
        file.sync_data()
            .map_err(|e| format!("fdatasync of the test file failed: {e}"))?;
    }
    Ok(start.elapsed().as_secs_f64())
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

    #[test]
    fn the_pattern_has_no_zero_byte() {
        let mut b = vec![0u8; 8192];
        fill_pattern(&mut b, 4096);
        assert!(b.iter().all(|&x| x != 0));
        assert_ne!(b[..4096], b[4096..]);
    }
}
