//! The copy itself: the GPU buffer and registrations set up, the loop of reads and writes
//! through the buffer, padded to the destination's direct-I/O alignment, and the progress
//! line.

use super::args::{CHUNK_UNIT, CpArgs};
use crate::runtime::register_failed;
use crate::tally::Tally;
use hipfile::{ConfigBuilder, DeviceBuffer, Driver, FileHandle};
use rustix::io::Errno;
use serde::Serialize;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

/// The alignment a destination without direct I/O is written in.
pub(super) const DEFAULT_ALIGN: u64 = 4096;

/// How often the progress line is redrawn.
pub(super) const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// A finished copy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// The bytes read from the source, and now the size of the destination.
    pub bytes: u64,
    /// From the first read to the destination's flush.
    pub seconds: f64,
    /// What the reads moved.
    pub read: Tally,
    /// What the writes moved of the file's bytes; the padding to the alignment, cut off at
    /// the end, is not counted.
    pub write: Tally,
}

impl Summary {
    /// Gigabytes (10^9 bytes) per second; 0 when no time was measured.
    pub fn gbps(self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 / self.seconds / 1e9
        } else {
            0.0
        }
    }

    /// The `--json` object (no newline): `bytes`, `seconds`, `gbps`, `read`, `write`.
    pub fn to_json(self) -> String {
        /// The summary with its rate, in the order the output has always had.
        #[derive(Serialize)]
        struct Json {
            bytes: u64,
            seconds: f64,
            gbps: f64,
            read: Tally,
            write: Tally,
        }
        let json = Json {
            bytes: self.bytes,
            seconds: self.seconds,
            gbps: self.gbps(),
            read: self.read,
            write: self.write,
        };
        // Plain numbers and strings: serializing cannot fail.
        serde_json::to_string(&json).unwrap_or_default()
    }

    /// The one line of text (no newline).
    pub fn text(self) -> String {
        format!(
            "copied {} bytes in {:.3} s ({:.3} GB/s); read: {}; write: {}",
            self.bytes,
            self.seconds,
            self.gbps(),
            self.read.text(),
            self.write.text()
        )
    }
}

/// The zeros that pad a chunk to `align` in a buffer of `len` bytes.
fn zeros_for(align: u64, len: u64) -> Vec<u8> {
    vec![
        0u8;
        usize::try_from(align)
            .unwrap_or(usize::MAX)
            .min(len as usize)
    ]
}

/// `n` rounded up to a multiple of `align` (≥ 1), saturating.
pub fn round_up(n: u64, align: u64) -> u64 {
    n.div_ceil(align).saturating_mul(align)
}

/// The GPU buffer's size: `chunk`, but no more than the source needs (its size rounded up to
/// [`CHUNK_UNIT`]) and at least one unit.
pub fn buffer_len(chunk: u64, src_size: u64) -> u64 {
    chunk.min(round_up(src_size, CHUNK_UNIT)).max(CHUNK_UNIT)
}

/// The copy's GPU buffer for a source of `src_size` bytes and `--chunk` `chunk`
/// ([`buffer_len`]), allocated and registered, with its length.
pub(super) fn gpu_buffer(
    driver: &Driver,
    chunk: u64,
    src_size: u64,
) -> Result<(DeviceBuffer, u64), String> {
    let len = buffer_len(chunk, src_size);
    let alloc_len = usize::try_from(len).map_err(|_| format!("--chunk {len} is too large"))?;
    let runtime_note = crate::runtime::runtime_note(driver);
    let buf = driver
        .alloc(alloc_len)
        .map_err(|e| format!("cannot allocate a GPU buffer of {len} bytes: {e}{runtime_note}"))?;
    driver
        .register_buffer(&buf)
        .map_err(|e| format!("cannot register the GPU buffer of {len} bytes: {e}"))?;
    Ok((buf, len))
}

/// The alignment the destination is written in: its direct-I/O offset alignment, or
/// [`DEFAULT_ALIGN`] without direct I/O.
pub fn write_align(dio_offset_align: u32) -> u64 {
    match dio_offset_align {
        0 => DEFAULT_ALIGN,
        a => u64::from(a),
    }
}

/// How many bytes to write for a chunk of `n` bytes: `n` rounded up to `align`, within the
/// buffer of `len` bytes (a request beyond it would be refused; an unaligned one is only
/// refused by the fastpath).
pub fn padded_len(n: u64, align: u64, len: u64) -> u64 {
    round_up(n, align).min(len)
}

/// The driver, the registered source and the registered GPU buffer: all that can fail before
/// anything is written.
pub(super) struct Setup {
    driver: Driver,
    src: FileHandle,
    buf: DeviceBuffer,
    len: u64,
}

impl Setup {
    pub(super) fn new(
        args: &CpArgs,
        settings: ConfigBuilder,
        src_fd: &OwnedFd,
        src_size: u64,
    ) -> Result<Setup, String> {
        let driver = crate::runtime::open_driver(settings, args.runtime)?;
        let src = driver
            .register_file(src_fd)
            .map_err(|e| register_failed(&args.src.display().to_string(), &e))?;
        let (buf, len) = gpu_buffer(
            &driver,
            args.chunk.unwrap_or(super::args::DEFAULT_CHUNK),
            src_size,
        )?;
        Ok(Setup {
            driver,
            src,
            buf,
            len,
        })
    }

    /// Copies the source into `dst_fd` (the temporary file, named `dst_path` in messages)
    /// and flushes it.
    pub(super) fn copy_into(
        self,
        src_fd: &OwnedFd,
        src_size: u64,
        dst_fd: &OwnedFd,
        src_path: &Path,
        dst_path: &Path,
    ) -> Result<Summary, String> {
        let job = CopyJob {
            src: self.src,
            dst: Sink::open(&self.driver, dst_fd, dst_path, self.len)?,
            buf: self.buf,
            src_path,
        };
        job.run(self.len, src_fd, src_size)
    }
}

/// The registered files and buffer of one copy, with their paths for messages.
pub(super) struct CopyJob<'a> {
    src: FileHandle,
    dst: Sink<'a>,
    buf: DeviceBuffer,
    src_path: &'a Path,
}

impl CopyJob<'_> {
    /// Copies until a read returns no byte, then cuts the copy to the bytes read and flushes
    /// it. `src_size` (what the source claimed) only sizes the progress line.
    fn run(self, len: u64, src_fd: &OwnedFd, src_size: u64) -> Result<Summary, String> {
        let CopyJob {
            src,
            mut dst,
            mut buf,
            src_path,
        } = self;
        let mut read = Tally::default();
        let mut progress = Progress::new(src_size);
        let start = Instant::now();
        let mut offset = 0u64;
        loop {
            // The buffer is `len` bytes long: each read asks for all of it.
            let outcome = src.read_at(&mut buf, offset).map_err(|e| {
                format!(
                    "cannot read {} ({len} bytes at offset {offset}): {e}",
                    src_path.display()
                )
            })?;
            read.count(&outcome);
            let n = outcome.bytes;
            if n == 0 {
                break;
            }
            dst.put(&mut buf, n, offset)?;
            offset += n;
            progress.update(offset);
            // A short read is the end of a file whose size is right; procfs files and the
            // like also read short before it. A read of the library at the unaligned offset
            // that follows would be refused where only the fastpath is allowed, so a byte of
            // plain `pread` says whether there is more.
            if n < len && !has_more(src_fd, offset, src_path)? {
                break;
            }
        }
        progress.finish();
        let (seconds, write) = dst.finish(offset, &src_path.display().to_string(), start)?;
        Ok(Summary {
            bytes: offset,
            seconds,
            read,
            write,
        })
    }
}

/// The copy's destination: the temporary file, registered, written in its direct-I/O
/// alignment from the GPU buffer, with what the writes moved.
pub(super) struct Sink<'a> {
    handle: FileHandle,
    fd: &'a OwnedFd,
    path: &'a Path,
    align: u64,
    zeros: Vec<u8>,
    len: u64,
    written: Tally,
}

impl<'a> Sink<'a> {
    /// Registers `fd` (named `path` in messages) for writes from a buffer of `len` bytes.
    pub(super) fn open(
        driver: &Driver,
        fd: &'a OwnedFd,
        path: &'a Path,
        len: u64,
    ) -> Result<Sink<'a>, String> {
        let handle = driver
            .register_file(fd)
            .map_err(|e| register_failed(&path.display().to_string(), &e))?;
        let align = write_align(handle.facts().dio_offset_align());
        Ok(Sink {
            handle,
            fd,
            path,
            align,
            zeros: zeros_for(align, len),
            len,
            written: Tally::default(),
        })
    }

    /// Writes the buffer's first `n` bytes at `offset`, padded to the alignment.
    pub(super) fn put(
        &mut self,
        buf: &mut DeviceBuffer,
        n: u64,
        offset: u64,
    ) -> Result<(), String> {
        let padded = pad_chunk(buf, n, self.align, self.len, &self.zeros)?;
        write_chunk(
            &self.handle,
            buf,
            self.path,
            n,
            padded,
            offset,
            &mut self.written,
        )
    }

    /// Cuts the copy to the `offset` bytes read from `src_name`, flushes and checks it;
    /// returns the seconds since `start` and what the writes moved.
    pub(super) fn finish(
        self,
        offset: u64,
        src_name: &str,
        start: Instant,
    ) -> Result<(f64, Tally), String> {
        let seconds = finish_copy(self.fd, offset, self.path, src_name, start)?;
        Ok((seconds, self.written))
    }
}

/// Zeroes the buffer from `n` up to `n` rounded up to `align` (within its `len` bytes), and
/// returns that rounded length: stale bytes of an earlier chunk must not reach the copy, even
/// briefly (the tail is cut off only at the end). `zeros` holds at least `align` zeros, or
/// `len`.
fn pad_chunk(
    buf: &mut DeviceBuffer,
    n: u64,
    align: u64,
    len: u64,
    zeros: &[u8],
) -> Result<u64, String> {
    let padded = padded_len(n, align, len);
    if padded > n {
        let fill = usize::try_from(padded - n).unwrap_or(usize::MAX);
        buf.copy_from_host(n as usize, &zeros[..fill])
            .map_err(|e| format!("cannot clear the GPU buffer's tail: {e}"))?;
    }
    Ok(padded)
}

/// Cuts the copy in `dst_fd` (named `dst_path`) to the `offset` bytes read from `src_name`,
/// flushes it and checks its size; returns the seconds since `start`.
fn finish_copy(
    dst_fd: &OwnedFd,
    offset: u64,
    dst_path: &Path,
    src_name: &str,
    start: Instant,
) -> Result<f64, String> {
    let dst = dst_path.display();
    rustix::fs::ftruncate(dst_fd, offset).map_err(|e| {
        format!(
            "cannot set the size of the copy to {dst} to {offset} bytes: {}{}",
            io::Error::from(e),
            write_hint(Some(e.raw_os_error()))
        )
    })?;
    // Where blocks are allocated at writeback, a full file system is only found here.
    rustix::fs::fdatasync(dst_fd).map_err(|e| {
        format!(
            "cannot flush the copy to {dst} to storage: {}{}",
            io::Error::from(e),
            write_hint(Some(e.raw_os_error()))
        )
    })?;
    let seconds = start.elapsed().as_secs_f64();
    let stat = rustix::fs::fstat(dst_fd)
        .map_err(|e| format!("cannot look at the copy to {dst}: {}", io::Error::from(e)))?;
    let dst_size = u64::try_from(stat.st_size).unwrap_or(0);
    if dst_size != offset {
        return Err(format!(
            "the copy to {dst} has {dst_size} bytes after the copy, but {offset} bytes \
             were read from {src_name}"
        ));
    }
    Ok(seconds)
}

/// Writes the buffer's first `size` bytes at `offset`, going on after short writes: the
/// chunk's `data` bytes and the padding after them. Only the data bytes count in `moved`,
/// so that its totals are the file's size. A write that fails part-way comes back short
/// (as `pwrite` does: the bytes written, if any, else the error), so the error is that of
/// the write of the rest; a write that moves nothing fails the copy too.
fn write_chunk(
    dst: &FileHandle,
    buf: &DeviceBuffer,
    dst_path: &Path,
    data: u64,
    size: u64,
    offset: u64,
    moved: &mut Tally,
) -> Result<(), String> {
    let mut done = 0u64;
    while done < size {
        let at = offset + done;
        let cannot = |what: String| {
            format!(
                "cannot write the copy to {} ({} bytes at offset {at}): {what}",
                dst_path.display(),
                size - done
            )
        };
        // Both ends are inside the buffer, whose length is a usize.
        let part = buf
            .slice(done as usize..size as usize)
            .map_err(|e| cannot(e.to_string()))?;
        let outcome = dst
            .write_at(&part, at)
            .map_err(|e| cannot(format!("{e}{}", write_hint(e.errno()))))?;
        // The padding to DST's alignment is not the file's data.
        moved.count_bytes(&outcome, outcome.bytes.min(data.saturating_sub(done)));
        if outcome.bytes == 0 {
            return Err(cannot("no byte was written".into()));
        }
        done += outcome.bytes;
    }
    Ok(())
}

/// What to do about a write to the copy that failed with `errno`, where the file system or a
/// limit is the cause; empty otherwise.
pub fn write_hint(errno: Option<i32>) -> &'static str {
    match errno.map(Errno::from_raw_os_error) {
        Some(Errno::FBIG) => {
            "; the file-size limit of this process (ulimit -f) or DST's file system does not \
             allow a file this large"
        }
        Some(Errno::NOSPC) => "; DST's file system is full: make room there, or copy elsewhere",
        Some(Errno::DQUOT) => {
            "; the disk quota on DST's file system is used up: make room, or copy elsewhere"
        }
        _ => "",
    }
}

/// Whether `fd` has a byte at `offset`.
pub(super) fn has_more(fd: &OwnedFd, offset: u64, path: &Path) -> Result<bool, String> {
    let mut byte = [0u8; 1];
    loop {
        match rustix::io::pread(fd, &mut byte, offset) {
            Ok(n) => return Ok(n > 0),
            Err(Errno::INTR) => continue,
            Err(e) => {
                return Err(format!(
                    "cannot read {} (1 byte at offset {offset}): {}",
                    path.display(),
                    io::Error::from(e)
                ));
            }
        }
    }
}

/// The progress line on stderr: only on a terminal, and only once a copy has taken a while.
pub(super) struct Progress {
    total: u64,
    on: bool,
    last: Instant,
    shown: bool,
}

impl Progress {
    pub(super) fn new(total: u64) -> Progress {
        Progress {
            total,
            on: rustix::termios::isatty(io::stderr().as_fd()),
            last: Instant::now(),
            shown: false,
        }
    }

    pub(super) fn update(&mut self, done: u64) {
        if !self.on || self.last.elapsed() < PROGRESS_EVERY {
            return;
        }
        self.last = Instant::now();
        self.shown = true;
        let mut err = io::stderr().lock();
        // The source's claimed size may be wrong (procfs says 0): past it, only the count.
        let _ = if done <= self.total {
            let percent = u128::from(done) * 100 / u128::from(self.total);
            write!(
                err,
                "\rhipfile: copying: {percent:>3}% ({done} of {} bytes)",
                self.total
            )
        } else {
            write!(err, "\rhipfile: copying: {done} bytes\x1b[K")
        };
        let _ = err.flush();
    }

    pub(super) fn finish(&mut self) {
        if self.shown {
            // Carriage return, then erase the line, so that what follows starts clean.
            let mut err = io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.shown = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        // An error message must not land at the end of the progress line.
        self.finish();
    }
}
