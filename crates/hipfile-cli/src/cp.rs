//! `hipfile cp`: copies a file through one GPU buffer with the library's reads and writes,
//! then reports how many bytes each backend moved and how many requests were retried.
//!
//! The chunks are written rounded up to the destination's direct-I/O alignment, so that the
//! fastpath can take every one of them, the last included; the destination is cut to the
//! source's size afterwards. A copy is reported as done only when every byte of the source
//! was read and the destination has exactly the source's size; otherwise the incomplete
//! destination is removed (when this run created it) or emptied.

use crate::args::{CHUNK_UNIT, CpArgs};
use crate::json::Value;
use hipfile::{BackendKind, ConfigBuilder, DeviceBuffer, Driver, FileHandle, IoOutcome};
use rustix::fs::{FileType, Mode, OFlags, SeekFrom};
use rustix::io::Errno;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

/// The destination is a complete copy of the source.
pub const EXIT_COPIED: u8 = 0;
/// The copy failed.
pub const EXIT_FAILED: u8 = 1;
/// Bad arguments, or an emulated runtime that is not found.
pub const EXIT_USAGE: u8 = 2;

/// The alignment a destination without direct I/O is written in.
const DEFAULT_ALIGN: u64 = 4096;

/// How often the progress line is redrawn.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// What one direction of the copy moved, counted from each request's outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Moved {
    /// Bytes the fastpath moved.
    pub fastpath_bytes: u64,
    /// Bytes the fallback moved, retried requests included.
    pub fallback_bytes: u64,
    /// Requests the fallback served after the fastpath failed.
    pub retries: u64,
}

impl Moved {
    fn count(&mut self, outcome: &IoOutcome) {
        match outcome.backend {
            BackendKind::Fastpath => self.fastpath_bytes += outcome.bytes,
            BackendKind::Fallback => self.fallback_bytes += outcome.bytes,
        }
        if outcome.retried {
            self.retries += 1;
        }
    }

    fn total(&self) -> u64 {
        self.fastpath_bytes + self.fallback_bytes
    }

    fn to_json(self) -> Value {
        Value::Object(vec![
            ("fastpath_bytes", Value::UInt(self.fastpath_bytes)),
            ("fallback_bytes", Value::UInt(self.fallback_bytes)),
            ("retries", Value::UInt(self.retries)),
        ])
    }

    fn text(self) -> String {
        format!(
            "fastpath {}, fallback {}, retries {}",
            self.fastpath_bytes, self.fallback_bytes, self.retries
        )
    }
}

/// A finished copy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// The size of the source, and now of the destination.
    pub bytes: u64,
    /// From the first read to the destination's flush.
    pub seconds: f64,
    /// What the reads moved.
    pub read: Moved,
    /// What the writes moved, the padding to the alignment included.
    pub write: Moved,
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

    /// The `--json` object (no newline).
    pub fn to_json(self) -> String {
        Value::Object(vec![
            ("bytes", Value::UInt(self.bytes)),
            ("seconds", Value::Float(self.seconds)),
            ("gbps", Value::Float(self.gbps())),
            ("read", self.read.to_json()),
            ("write", self.write.to_json()),
        ])
        .to_json()
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

/// Runs `cp` and returns the exit status.
pub fn run(args: &CpArgs) -> u8 {
    let settings = match crate::runtime::settings(args.runtime) {
        Ok(s) => s,
        Err(message) => {
            eprintln!("hipfile: {message}");
            return EXIT_USAGE;
        }
    };
    let (src_fd, src_size) = match open_source(&args.src) {
        Ok(s) => s,
        Err(message) => return failed(&message),
    };
    if let Err(message) = refuse_same_file(&src_fd, &args.src, &args.dst) {
        return failed(&message);
    }
    let (dst_fd, created) = match create_destination(&args.dst) {
        Ok(d) => d,
        Err(message) => return failed(&message),
    };
    let copied = copy(args, settings, &src_fd, src_size, &dst_fd);
    let summary = match copied {
        Ok(s) => s,
        Err(message) => {
            eprintln!("hipfile: {message}");
            discard(&args.dst, &dst_fd, created);
            return EXIT_FAILED;
        }
    };
    let line = if args.json {
        summary.to_json()
    } else {
        summary.text()
    };
    let mut stdout = io::stdout().lock();
    match writeln!(stdout, "{line}").and_then(|()| stdout.flush()) {
        Ok(()) => EXIT_COPIED,
        Err(e) => {
            // The copy is complete; only its report is lost.
            if e.kind() != io::ErrorKind::BrokenPipe {
                eprintln!("hipfile: cannot write the output: {e}");
            }
            EXIT_FAILED
        }
    }
}

fn failed(message: &str) -> u8 {
    eprintln!("hipfile: {message}");
    EXIT_FAILED
}

/// Opens the source read-only and finds its size. Only regular files and block devices
/// have a size to copy.
fn open_source(path: &Path) -> Result<(OwnedFd, u64), String> {
    let cannot = |e: Errno| {
        format!(
            "cannot open {} for reading: {}",
            path.display(),
            io::Error::from(e)
        )
    };
    // `O_NONBLOCK` keeps a FIFO without a writer from blocking the open; it is refused below.
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(cannot)?;
    let stat = rustix::fs::fstat(&fd).map_err(cannot)?;
    let size = match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => u64::try_from(stat.st_size).unwrap_or(0),
        FileType::BlockDevice => rustix::fs::seek(&fd, SeekFrom::End(0)).map_err(|e| {
            format!(
                "cannot find the size of {}: {}",
                path.display(),
                io::Error::from(e)
            )
        })?,
        _ => {
            return Err(format!(
                "cannot copy {}: it is not a regular file or a block device",
                path.display()
            ));
        }
    };
    // The library reopens the file with this descriptor's flags.
    let flags = rustix::fs::fcntl_getfl(&fd).map_err(cannot)?;
    rustix::fs::fcntl_setfl(&fd, flags - OFlags::NONBLOCK).map_err(cannot)?;
    Ok((fd, size))
}

/// Refuses a destination that is the source under another name: truncating it would destroy
/// what is to be copied.
fn refuse_same_file(src: &OwnedFd, src_path: &Path, dst_path: &Path) -> Result<(), String> {
    let Ok(dst) = rustix::fs::stat(dst_path) else {
        // Absent (or not reachable): opening it will say so.
        return Ok(());
    };
    let src_stat = rustix::fs::fstat(src).map_err(|e| {
        format!(
            "cannot look at {}: {}",
            src_path.display(),
            io::Error::from(e)
        )
    })?;
    if (dst.st_dev, dst.st_ino) == (src_stat.st_dev, src_stat.st_ino) {
        return Err(format!(
            "{} and {} are the same file; nothing was copied",
            src_path.display(),
            dst_path.display()
        ));
    }
    Ok(())
}

/// Creates the destination, or truncates it when it exists. Also says whether this run
/// created it, which decides what happens to it when the copy fails.
fn create_destination(path: &Path) -> Result<(OwnedFd, bool), String> {
    let cannot = |e: Errno| {
        format!(
            "cannot open {} for writing: {}",
            path.display(),
            io::Error::from(e)
        )
    };
    let common = OFlags::RDWR | OFlags::CREATE | OFlags::CLOEXEC | OFlags::NOCTTY;
    let mode = Mode::from_raw_mode(0o644);
    let (fd, created) = match rustix::fs::open(path, common | OFlags::EXCL, mode) {
        Ok(fd) => (fd, true),
        Err(Errno::EXIST) => (
            rustix::fs::open(path, common | OFlags::TRUNC, mode).map_err(cannot)?,
            false,
        ),
        Err(e) => return Err(cannot(e)),
    };
    let stat = rustix::fs::fstat(&fd).map_err(cannot)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(format!(
            "cannot copy to {}: it is not a regular file",
            path.display()
        ));
    }
    Ok((fd, created))
}

/// Leaves no incomplete destination that looks like a copy: removes it when this run created
/// it, else empties it (its old contents went when it was truncated).
fn discard(path: &Path, fd: &OwnedFd, created: bool) {
    let outcome = if created {
        rustix::fs::unlink(path).map(|()| "removed")
    } else {
        rustix::fs::ftruncate(fd, 0).map(|()| "emptied")
    };
    match outcome {
        Ok(what) => eprintln!("hipfile: {what} the incomplete {}", path.display()),
        Err(e) => eprintln!(
            "hipfile: warning: {} is incomplete and could not be {}: {}",
            path.display(),
            if created { "removed" } else { "emptied" },
            io::Error::from(e)
        ),
    }
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

fn file_offset(offset: u64) -> Result<i64, String> {
    i64::try_from(offset).map_err(|_| format!("offset {offset} is beyond the largest file offset"))
}

/// The registered files and buffer of one copy, with their paths for messages.
struct CopyJob<'a> {
    src: FileHandle,
    dst: FileHandle,
    buf: DeviceBuffer,
    src_path: &'a Path,
    dst_path: &'a Path,
}

fn copy(
    args: &CpArgs,
    settings: ConfigBuilder,
    src_fd: &OwnedFd,
    src_size: u64,
    dst_fd: &OwnedFd,
) -> Result<Summary, String> {
    let driver =
        Driver::open_with(settings).map_err(|e| format!("cannot open the hipfile driver: {e}"))?;
    let register = |fd: &OwnedFd, path: &Path| {
        driver
            .register_file(fd)
            .map_err(|e| format!("cannot register {} for GPU I/O: {e}", path.display()))
    };
    let src = register(src_fd, &args.src)?;
    let dst = register(dst_fd, &args.dst)?;
    let len = buffer_len(args.chunk, src_size);
    let alloc_len = usize::try_from(len).map_err(|_| format!("--chunk {len} is too large"))?;
    // Why the runtime has no usable device, if it said so when it was loaded.
    let runtime_note = driver
        .runtime()
        .error
        .as_ref()
        .map(|e| format!(" (the runtime reported: {e})"))
        .unwrap_or_default();
    let buf = driver
        .alloc(alloc_len)
        .map_err(|e| format!("cannot allocate a GPU buffer of {len} bytes: {e}{runtime_note}"))?;
    driver
        .register_buffer(&buf)
        .map_err(|e| format!("cannot register the GPU buffer of {len} bytes: {e}"))?;
    let job = CopyJob {
        src,
        dst,
        buf,
        src_path: &args.src,
        dst_path: &args.dst,
    };
    job.run(len, src_size, dst_fd)
}

impl CopyJob<'_> {
    fn run(&self, len: u64, src_size: u64, dst_fd: &OwnedFd) -> Result<Summary, String> {
        let align = write_align(self.dst.facts().dio_offset_align());
        let zeros = vec![
            0u8;
            usize::try_from(align)
                .unwrap_or(usize::MAX)
                .min(len as usize)
        ];
        let mut read = Moved::default();
        let mut write = Moved::default();
        let mut progress = Progress::new(src_size);
        let start = Instant::now();
        let mut offset = 0u64;
        while offset < src_size {
            let outcome = self
                .src
                .read(&self.buf, len, file_offset(offset)?, 0)
                .map_err(|e| {
                    format!(
                        "cannot read {} ({len} bytes at offset {offset}): {e}",
                        self.src_path.display()
                    )
                })?;
            read.count(&outcome);
            let n = outcome.bytes;
            if n == 0 {
                // The source ended early; the check below says so.
                break;
            }
            let padded = padded_len(n, align, len);
            if padded > n {
                // Stale bytes of an earlier chunk must not reach the destination, even
                // briefly: the tail is cut off only at the end.
                let fill = usize::try_from(padded - n).unwrap_or(usize::MAX);
                self.buf
                    .copy_from_host(n as usize, &zeros[..fill])
                    .map_err(|e| format!("cannot clear the GPU buffer's tail: {e}"))?;
            }
            self.write_chunk(padded, offset, &mut write)?;
            // A short read before the end moves the next offset; the loop goes on from there.
            offset += n;
            progress.update(offset);
        }
        progress.finish();
        if offset != src_size || read.total() != src_size {
            return Err(format!(
                "read {} bytes of {}, which had {src_size} bytes when the copy began: it \
                 changed during the copy",
                read.total(),
                self.src_path.display()
            ));
        }
        let dst = self.dst_path.display();
        rustix::fs::ftruncate(dst_fd, src_size).map_err(|e| {
            format!(
                "cannot set the size of {dst} to {src_size} bytes: {}",
                io::Error::from(e)
            )
        })?;
        rustix::fs::fdatasync(dst_fd)
            .map_err(|e| format!("cannot flush {dst} to storage: {}", io::Error::from(e)))?;
        let seconds = start.elapsed().as_secs_f64();
        let stat = rustix::fs::fstat(dst_fd)
            .map_err(|e| format!("cannot look at {dst}: {}", io::Error::from(e)))?;
        let dst_size = u64::try_from(stat.st_size).unwrap_or(0);
        if dst_size != src_size {
            return Err(format!(
                "{dst} has {dst_size} bytes after the copy, but {} has {src_size}",
                self.src_path.display()
            ));
        }
        Ok(Summary {
            bytes: src_size,
            seconds,
            read,
            write,
        })
    }

    /// Writes the buffer's first `size` bytes at `offset`, going on after short writes.
    fn write_chunk(&self, size: u64, offset: u64, moved: &mut Moved) -> Result<(), String> {
        let mut done = 0u64;
        while done < size {
            let at = offset + done;
            let cannot = |what: String| {
                format!(
                    "cannot write {} ({} bytes at offset {at}): {what}",
                    self.dst_path.display(),
                    size - done
                )
            };
            let outcome = self
                .dst
                .write(&self.buf, size - done, file_offset(at)?, file_offset(done)?)
                .map_err(|e| cannot(e.to_string()))?;
            moved.count(&outcome);
            if outcome.bytes == 0 {
                return Err(cannot("no byte was written".into()));
            }
            done += outcome.bytes;
        }
        Ok(())
    }
}

/// The progress line on stderr: only on a terminal, and only once a copy has taken a while.
struct Progress {
    total: u64,
    on: bool,
    last: Instant,
    shown: bool,
}

impl Progress {
    fn new(total: u64) -> Progress {
        Progress {
            total,
            on: rustix::termios::isatty(io::stderr().as_fd()),
            last: Instant::now(),
            shown: false,
        }
    }

    fn update(&mut self, done: u64) {
        if !self.on || self.last.elapsed() < PROGRESS_EVERY {
            return;
        }
        self.last = Instant::now();
        self.shown = true;
        let percent = if self.total == 0 {
            100
        } else {
            u128::from(done) * 100 / u128::from(self.total)
        };
        let mut err = io::stderr().lock();
        let _ = write!(
            err,
            "\rhipfile: copying: {percent:>3}% ({done} of {} bytes)",
            self.total
        );
        let _ = err.flush();
    }

    fn finish(&mut self) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buffer_fits_the_source() {
        assert_eq!(buffer_len(64 << 20, 0), 4096);
        assert_eq!(buffer_len(64 << 20, 1), 4096);
        assert_eq!(buffer_len(64 << 20, 4096), 4096);
        assert_eq!(buffer_len(64 << 20, 4097), 8192);
        assert_eq!(buffer_len(64 << 20, (1 << 20) + 123), (1 << 20) + 4096);
        assert_eq!(buffer_len(65536, 3 * 65536 + 1), 65536);
        assert_eq!(buffer_len(4096, u64::MAX), 4096);
    }

    #[test]
    fn writes_are_padded_to_the_alignment_within_the_buffer() {
        assert_eq!(write_align(0), 4096);
        assert_eq!(write_align(512), 512);
        assert_eq!(padded_len(1, 512, 4096), 512);
        assert_eq!(padded_len(4095, 4096, 4096), 4096);
        assert_eq!(padded_len(4096, 4096, 4096), 4096);
        assert_eq!(padded_len(123, 512, 1 << 20), 512);
        assert_eq!(padded_len(4097, 8192, 12288), 8192);
        // An alignment the buffer is no multiple of: the write stays inside the buffer.
        assert_eq!(padded_len(12000, 8192, 12288), 12288);
        assert_eq!(round_up(0, 4096), 0);
        assert_eq!(round_up(u64::MAX, 4096), u64::MAX);
    }

    #[test]
    fn outcomes_are_counted_per_backend() {
        let mut m = Moved::default();
        for (bytes, backend, retried) in [
            (4096, BackendKind::Fastpath, false),
            (100, BackendKind::Fallback, true),
            (8, BackendKind::Fallback, false),
        ] {
            m.count(&IoOutcome {
                bytes,
                backend,
                retried,
            });
        }
        assert_eq!(
            m,
            Moved {
                fastpath_bytes: 4096,
                fallback_bytes: 108,
                retries: 1
            }
        );
        assert_eq!(m.total(), 4204);
    }

    #[test]
    fn summary_json_has_exactly_the_documented_keys() {
        let s = Summary {
            bytes: 2_000_000_000,
            seconds: 0.5,
            read: Moved {
                fastpath_bytes: 2_000_000_000,
                fallback_bytes: 0,
                retries: 0,
            },
            write: Moved {
                fastpath_bytes: 1_999_999_488,
                fallback_bytes: 4096,
                retries: 1,
            },
        };
        let v: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "bytes": 2_000_000_000u64,
                "seconds": 0.5,
                "gbps": 4.0,
                "read": {"fastpath_bytes": 2_000_000_000u64, "fallback_bytes": 0, "retries": 0},
                "write": {"fastpath_bytes": 1_999_999_488u64, "fallback_bytes": 4096, "retries": 1},
            })
        );
        assert_eq!(
            s.text(),
            "copied 2000000000 bytes in 0.500 s (4.000 GB/s); read: fastpath 2000000000, \
             fallback 0, retries 0; write: fastpath 1999999488, fallback 4096, retries 1"
        );
        let none = Summary { seconds: 0.0, ..s };
        assert_eq!(none.gbps(), 0.0);
    }
}
