//! `hipfile cp`: copies a file through one GPU buffer with the library's reads and writes,
//! then reports how many bytes each backend moved and how many requests were retried.
//!
//! The source is read to its end: until a read returns no byte, or comes back short where a
//! byte of plain `pread` finds nothing more. A file whose metadata gives no size or a wrong
//! one (procfs gives 0) is copied whole; the copy has the bytes read. The copy is
//! written into a new temporary file in the destination's directory, flushed to storage, and
//! only then renamed over the destination (and the directory flushed), so that the
//! destination is at every moment either what it was or the whole copy: a copy that fails
//! removes its temporary file, and one that is killed can leave only that file behind.
//! The chunks are written rounded up to the destination's direct-I/O alignment, so that the
//! fastpath can take every one of them, the last included; the copy is cut to the bytes
//! read afterwards.

use crate::failure::Failure;
use crate::options;
use crate::runtime::{RuntimeChoice, register_failed};
use crate::tally::Tally;
use clap::Args;
use hipfile::probe::Unusable;
use hipfile::{ConfigBuilder, DeviceBuffer, Driver, FileHandle};
use rustix::fs::{FileType, Mode, OFlags, SeekFrom};
use rustix::io::Errno;
use serde::Serialize;
use std::ffi::OsString;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The unit `--chunk` is a multiple of.
pub const CHUNK_UNIT: u64 = 4096;

/// The largest `--chunk`: one request moves at most this many bytes (the kernel's
/// `MAX_RW_COUNT`, a multiple of 4096).
pub const MAX_CHUNK: u64 = hipfile::core::MAX_IO_SIZE;

/// Copy a file through GPU memory
#[derive(Debug, Clone, PartialEq, Eq, Args)]
#[command(
    args_override_self = true,
    long_about = "\
Copy a file through GPU memory

Reads SRC into one GPU buffer a chunk at a time and writes each chunk from the buffer to
DST, as an application using hipfile would. Each request is served by the fastpath
(storage <-> GPU memory with no host copy) when the file, the request and the runtime
allow it, and by the fallback (POSIX I/O through host staging buffers) otherwise; run
'hipfile check' on SRC and DST to see why. A fastpath request that fails with ENODEV or
EREMOTEIO is retried once on the fallback, as for any program using hipfile.

SRC is a regular file, a block device or a character device (what the library registers:
a character device is read as pread reads it there, so /dev/null gives an empty copy),
opened read-only, and read to its end whatever size it claims (a procfs file claims 0
bytes); a directory, a FIFO or a socket is refused, as 'hipfile check' says. The copy is written to a new file in DST's
directory, .NAME.hipfile-cp.PID.N.tmp, flushed to storage, and only then renamed over DST,
so that DST is at every moment either what it was or the whole copy. DST must be a regular
file or a new name, and must not be SRC. A new DST gets mode 0644, less the umask; an
existing one is replaced by a new file with its mode (and its owner and group where cp may
set them): other hard links to it keep the old contents. A symbolic link DST stays, and
the file it names is replaced. cp needs permission to create files in DST's directory.
Each chunk is written rounded up to DST's direct-I/O alignment, so that the fastpath can
take it, and the copy is then cut to the bytes read.",
    after_long_help = "\
Numbers are whole numbers of bytes, optionally followed by a suffix that multiplies by a
power of 1024: K, KB or KiB (1024), M, MB or MiB (1024^2), G, GB or GiB (1024^3), T, TB or
TiB (1024^4); for example 64K.

The configuration comes from HIPFILE_ALLOW_COMPAT_MODE, HIPFILE_FORCE_COMPAT_MODE and
HIPFILE_UNSUPPORTED_FILE_SYSTEMS, as for any program using hipfile. On a terminal, the
progress of a copy that takes more than a second is shown on stderr.

Exit status: 0 when DST is a complete copy of SRC; 1 when the copy failed: SRC or DST
cannot be opened (a missing SRC included), the driver cannot be opened, a file or the
buffer cannot be registered, a read or write fails, or the sizes do not match; 2 on bad
arguments or an emulated runtime that is not found. When the copy fails, its temporary
file is removed and DST is left as it was (or absent); a copy that is killed can leave
only its temporary file behind."
)]
pub struct CpArgs {
    /// Print the result as one JSON object: bytes, seconds, gbps, and for read and write
    /// each: fastpath_bytes, fallback_bytes, retries (bytes of the file, so that each side
    /// adds up to bytes: the padding written up to DST's alignment, cut off at the end, is
    /// not counted)
    #[arg(long)]
    pub json: bool,
    /// Size of the GPU buffer, a multiple of 4096; never larger than SRC rounded up to 4096
    #[arg(long, value_name = "N", default_value = "64MiB", value_parser = chunk)]
    pub chunk: u64,
    /// The GPU runtime to use: the one found on this machine, or the emulated runtime
    /// libhipfile_emu.so in this program's directory or its deps/ subdirectory (test and
    /// development only)
    #[arg(long, value_name = "RUNTIME", value_enum, default_value_t)]
    pub runtime: RuntimeChoice,
    /// The file to copy
    #[arg(value_name = "SRC")]
    pub src: PathBuf,
    /// The copy
    #[arg(value_name = "DST")]
    pub dst: PathBuf,
}

/// `--chunk`: a byte count, a non-zero multiple of [`CHUNK_UNIT`], at most [`MAX_CHUNK`].
fn chunk(text: &str) -> Result<u64, String> {
    let n = options::bytes(text)?;
    if n == 0 || n % CHUNK_UNIT != 0 || n > MAX_CHUNK {
        return Err(format!(
            "{text:?} is not valid; expected a number of bytes, a multiple of 4096 from 4096 \
             to {MAX_CHUNK}"
        ));
    }
    Ok(n)
}

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

/// Runs `cp` and returns the exit status.
pub fn run(args: &CpArgs) -> Result<u8, Failure> {
    let failed = |message: String| Failure::msg(EXIT_FAILED, message);
    let settings =
        crate::runtime::settings(args.runtime).map_err(|m| Failure::msg(EXIT_USAGE, m))?;
    let (src_fd, src_size) = open_source(&args.src).map_err(failed)?;
    refuse_same_file(&src_fd, &args.src, &args.dst).map_err(failed)?;
    let dest = Destination::find(&args.dst).map_err(failed)?;
    let setup = Setup::new(args, settings, &src_fd, src_size).map_err(failed)?;
    let temp = TempFile::create(&dest, &args.dst).map_err(failed)?;
    let copied = setup
        .copy_into(&src_fd, src_size, &temp.fd, &args.src, &args.dst)
        .and_then(|summary| temp.take_place_of(&dest, &args.dst).map(|()| summary));
    let summary = match copied {
        Ok(s) => s,
        Err(message) => {
            // The reason first, then what became of DST.
            eprintln!("hipfile: {message}");
            temp.discard(&dest, &args.dst);
            return Err(Failure {
                status: EXIT_FAILED,
                error: None,
            });
        }
    };
    sync_directory(&dest.dir).map_err(|message| {
        failed(format!(
            "{} holds the whole copy, but {message}: the copy may not survive a crash",
            args.dst.display()
        ))
    })?;
    let line = if args.json {
        summary.to_json()
    } else {
        summary.text()
    };
    let mut stdout = io::stdout().lock();
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .map_err(|e| Failure::output(EXIT_FAILED, e))?;
    Ok(EXIT_COPIED)
}

/// Opens the source read-only and finds the size it claims, which only sizes the buffer: the
/// copy reads to the end whatever it is. What the library registers is copied: regular
/// files, block devices and character devices (read as `pread` reads them there: `/dev/null`
/// gives 0 bytes, one without file offsets fails with `ESPIPE`, docs/BEHAVIOUR.md §3.5);
/// what it refuses (a directory, a FIFO, a socket) is refused here, in its words, without
/// waiting for a FIFO's writer.
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
        FileType::CharacterDevice => 0,
        other => {
            let why = match other {
                FileType::Directory => Unusable::Directory,
                FileType::Fifo => Unusable::Fifo,
                FileType::Socket => Unusable::Socket,
                _ => Unusable::Symlink,
            };
            return Err(format!(
                "cannot copy {}: {}",
                path.display(),
                why.describe()
            ));
        }
    };
    // The library reopens the file with this descriptor's flags.
    let flags = rustix::fs::fcntl_getfl(&fd).map_err(cannot)?;
    rustix::fs::fcntl_setfl(&fd, flags - OFlags::NONBLOCK).map_err(cannot)?;
    Ok((fd, size))
}

/// Refuses a destination that is the source under another name: the copy would take the
/// place of what it copies, and through a hard link or a symbolic link destroy it.
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

/// Where the copy goes, and what it takes over from the file it replaces.
struct Destination {
    /// The path the copy is renamed to: DST, or the file a symbolic link DST names.
    path: PathBuf,
    /// The directory of `path`, where the temporary file is made.
    dir: PathBuf,
    /// The file now at `path`, if any.
    existing: Option<Existing>,
}

/// What the copy keeps of the file it replaces.
#[derive(Debug, Clone, Copy)]
struct Existing {
    /// Permission bits.
    mode: u32,
    uid: u32,
    gid: u32,
}

impl Destination {
    /// Looks at DST, changing nothing. A symbolic link stays: the file it names is replaced,
    /// as writing through the link would replace its contents.
    fn find(dst: &Path) -> Result<Destination, String> {
        let cannot = |why: String| format!("cannot open {} for writing: {why}", dst.display());
        let path = match rustix::fs::lstat(dst) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                std::fs::canonicalize(dst).map_err(|e| {
                    cannot(format!(
                        "it is a symbolic link to a file that cannot be reached ({e}); copy to \
                         the file it should name instead"
                    ))
                })?
            }
            Ok(_) | Err(Errno::NOENT) => dst.to_path_buf(),
            Err(e) => return Err(cannot(io::Error::from(e).to_string())),
        };
        let existing = match rustix::fs::stat(&path) {
            Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                FileType::RegularFile => Some(Existing {
                    mode: st.st_mode & 0o777,
                    uid: st.st_uid,
                    gid: st.st_gid,
                }),
                FileType::Directory => return Err(cannot("it is a directory".into())),
                _ => return Err(cannot("it is not a regular file".into())),
            },
            Err(Errno::NOENT) => None,
            Err(e) => return Err(cannot(io::Error::from(e).to_string())),
        };
        if existing.is_some() {
            // Renaming over a file needs no permission on the file itself; writing into it,
            // which is what replacing its contents stands for, does.
            rustix::fs::accessat(
                rustix::fs::CWD,
                &path,
                rustix::fs::Access::WRITE_OK,
                rustix::fs::AtFlags::EACCESS,
            )
            .map_err(|e| cannot(io::Error::from(e).to_string()))?;
        }
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Ok(Destination {
            path,
            dir,
            existing,
        })
    }
}

/// The file the copy is written into, beside the destination.
struct TempFile {
    path: PathBuf,
    fd: OwnedFd,
}

/// Tries at most this many names for the temporary file.
const TEMP_NAMES: u32 = 100;

/// The longest part of the destination's name that goes into the temporary file's name, so
/// that the latter stays within `NAME_MAX` (255 bytes).
const TEMP_NAME_KEEPS: usize = 200;

/// The temporary file's name for `dst_name`, attempt `n`: hidden, and naming cp, so that one
/// left by a killed copy can be told for what it is.
pub fn temp_name(dst_name: &[u8], pid: u32, n: u32) -> OsString {
    let kept = &dst_name[..dst_name.len().min(TEMP_NAME_KEEPS)];
    let mut name = b".".to_vec();
    name.extend_from_slice(kept);
    name.extend_from_slice(format!(".hipfile-cp.{pid}.{n}.tmp").as_bytes());
    OsString::from_vec(name)
}

impl TempFile {
    /// Creates a new, empty file in the destination's directory (`O_EXCL`, so that no file
    /// of someone else's is taken): mode 0644 less the umask for a new destination, else
    /// readable by its owner only until the copy is complete and gets the old file's mode.
    fn create(dest: &Destination, dst: &Path) -> Result<TempFile, String> {
        let dst_name = dest.path.file_name().map_or(&b"copy"[..], |n| n.as_bytes());
        let mode = match dest.existing {
            None => 0o644,
            Some(_) => 0o600,
        };
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOCTTY;
        let pid = std::process::id();
        for n in 0..TEMP_NAMES {
            let path = dest.dir.join(temp_name(dst_name, pid, n));
            match rustix::fs::open(&path, flags, Mode::from_raw_mode(mode)) {
                Ok(fd) => return Ok(TempFile { path, fd }),
                // Left by an earlier copy of the same process number, or another's: not ours.
                Err(Errno::EXIST) => continue,
                Err(e) => {
                    return Err(format!(
                        "cannot create a file in {} to copy into before it replaces {}: {}",
                        dest.dir.display(),
                        dst.display(),
                        io::Error::from(e)
                    ));
                }
            }
        }
        Err(format!(
            "cannot create a file in {} to copy into before it replaces {}: {TEMP_NAMES} \
             names were taken; remove the .*.hipfile-cp.*.tmp files left there",
            dest.dir.display(),
            dst.display()
        ))
    }

    /// Gives the complete, flushed copy the old file's mode (and, where allowed, its owner
    /// and group), then renames it over the destination.
    fn take_place_of(&self, dest: &Destination, dst: &Path) -> Result<(), String> {
        if let Some(old) = dest.existing {
            // Best effort: only root, or an owner moving the file to one of their groups, may;
            // otherwise the copy belongs to whoever made it, as a new file would.
            let _ = rustix::fs::fchown(
                &self.fd,
                Some(rustix::fs::Uid::from_raw(old.uid)),
                Some(rustix::fs::Gid::from_raw(old.gid)),
            );
            rustix::fs::fchmod(&self.fd, Mode::from_raw_mode(old.mode)).map_err(|e| {
                format!(
                    "cannot give the copy the mode {:o} of {}: {}",
                    old.mode,
                    dst.display(),
                    io::Error::from(e)
                )
            })?;
        }
        rustix::fs::rename(&self.path, &dest.path).map_err(|e| {
            format!(
                "cannot rename the copy to {}: {}",
                dst.display(),
                io::Error::from(e)
            )
        })
    }

    /// Removes the incomplete copy; the destination was never touched.
    fn discard(self, dest: &Destination, dst: &Path) {
        let dst_now = if dest.existing.is_some() {
            format!("{} is unchanged", dst.display())
        } else {
            format!("{} was not created", dst.display())
        };
        match rustix::fs::unlink(&self.path) {
            Ok(()) => eprintln!("hipfile: removed the incomplete copy; {dst_now}"),
            Err(e) => eprintln!(
                "hipfile: warning: the incomplete copy {} could not be removed: {}; {dst_now}",
                self.path.display(),
                io::Error::from(e)
            ),
        }
    }
}

/// Flushes `dir`, so that a rename in it survives a crash.
fn sync_directory(dir: &Path) -> Result<(), String> {
    let cannot = |e: Errno| {
        format!(
            "{} could not be flushed to storage: {}",
            dir.display(),
            io::Error::from(e)
        )
    };
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(cannot)?;
    rustix::fs::fsync(&fd).map_err(cannot)
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

/// The driver, the registered source and the registered GPU buffer: all that can fail before
/// anything is written.
struct Setup {
    driver: Driver,
    src: FileHandle,
    buf: DeviceBuffer,
    len: u64,
}

impl Setup {
    fn new(
        args: &CpArgs,
        settings: ConfigBuilder,
        src_fd: &OwnedFd,
        src_size: u64,
    ) -> Result<Setup, String> {
        let driver = crate::runtime::open_driver(settings, args.runtime)?;
        let src = driver
            .register_file(src_fd)
            .map_err(|e| register_failed(&args.src.display().to_string(), &e))?;
        let len = buffer_len(args.chunk, src_size);
        let alloc_len = usize::try_from(len).map_err(|_| format!("--chunk {len} is too large"))?;
        let runtime_note = crate::runtime::runtime_note(&driver);
        let buf = driver.alloc(alloc_len).map_err(|e| {
            format!("cannot allocate a GPU buffer of {len} bytes: {e}{runtime_note}")
        })?;
        driver
            .register_buffer(&buf)
            .map_err(|e| format!("cannot register the GPU buffer of {len} bytes: {e}"))?;
        Ok(Setup {
            driver,
            src,
            buf,
            len,
        })
    }

    /// Copies the source into `dst_fd` (the temporary file, named `dst_path` in messages)
    /// and flushes it.
    fn copy_into(
        self,
        src_fd: &OwnedFd,
        src_size: u64,
        dst_fd: &OwnedFd,
        src_path: &Path,
        dst_path: &Path,
    ) -> Result<Summary, String> {
        let dst = self
            .driver
            .register_file(dst_fd)
            .map_err(|e| register_failed(&dst_path.display().to_string(), &e))?;
        let mut job = CopyJob {
            src: self.src,
            dst,
            buf: self.buf,
            src_path,
            dst_path,
        };
        job.run(self.len, src_fd, src_size, dst_fd)
    }
}

/// The registered files and buffer of one copy, with their paths for messages.
struct CopyJob<'a> {
    src: FileHandle,
    dst: FileHandle,
    buf: DeviceBuffer,
    src_path: &'a Path,
    dst_path: &'a Path,
}

impl CopyJob<'_> {
    /// Copies until a read returns no byte, then cuts the copy to the bytes read and flushes
    /// it. `src_size` (what the source claimed) only sizes the progress line.
    fn run(
        &mut self,
        len: u64,
        src_fd: &OwnedFd,
        src_size: u64,
        dst_fd: &OwnedFd,
    ) -> Result<Summary, String> {
        let align = write_align(self.dst.facts().dio_offset_align());
        let zeros = vec![
            0u8;
            usize::try_from(align)
                .unwrap_or(usize::MAX)
                .min(len as usize)
        ];
        let mut read = Tally::default();
        let mut write = Tally::default();
        let mut progress = Progress::new(src_size);
        let start = Instant::now();
        let mut offset = 0u64;
        loop {
            // The buffer is `len` bytes long: each read asks for all of it.
            let outcome = self.src.read_at(&mut self.buf, offset).map_err(|e| {
                format!(
                    "cannot read {} ({len} bytes at offset {offset}): {e}",
                    self.src_path.display()
                )
            })?;
            read.count(&outcome);
            let n = outcome.bytes;
            if n == 0 {
                break;
            }
            let padded = padded_len(n, align, len);
            if padded > n {
                // Stale bytes of an earlier chunk must not reach the copy, even briefly: the
                // tail is cut off only at the end.
                let fill = usize::try_from(padded - n).unwrap_or(usize::MAX);
                self.buf
                    .copy_from_host(n as usize, &zeros[..fill])
                    .map_err(|e| format!("cannot clear the GPU buffer's tail: {e}"))?;
            }
            self.write_chunk(n, padded, offset, &mut write)?;
            offset += n;
            progress.update(offset);
            // A short read is the end of a file whose size is right; procfs files and the
            // like also read short before it. A read of the library at the unaligned offset
            // that follows would be refused where only the fastpath is allowed, so a byte of
            // plain `pread` says whether there is more.
            if n < len && !has_more(src_fd, offset, self.src_path)? {
                break;
            }
        }
        progress.finish();
        let dst = self.dst_path.display();
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
                 were read from {}",
                self.src_path.display()
            ));
        }
        Ok(Summary {
            bytes: offset,
            seconds,
            read,
            write,
        })
    }

    /// Writes the buffer's first `size` bytes at `offset`, going on after short writes: the
    /// chunk's `data` bytes and the padding after them. Only the data bytes count in `moved`,
    /// so that its totals are the file's size. A write that fails part-way comes back short
    /// (as `pwrite` does: the bytes written, if any, else the error), so the error is that of
    /// the write of the rest; a write that moves nothing fails the copy too.
    fn write_chunk(
        &self,
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
                    self.dst_path.display(),
                    size - done
                )
            };
            // Both ends are inside the buffer, whose length is a usize.
            let part = self
                .buf
                .slice(done as usize..size as usize)
                .map_err(|e| cannot(e.to_string()))?;
            let outcome = self
                .dst
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
fn has_more(fd: &OwnedFd, offset: u64, path: &Path) -> Result<bool, String> {
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
    fn temporary_names_are_hidden_and_short_enough() {
        assert_eq!(
            temp_name(b"weights.bin", 42, 3),
            OsString::from(".weights.bin.hipfile-cp.42.3.tmp")
        );
        let long = temp_name(&[b'x'; 255], u32::MAX, TEMP_NAMES);
        assert!(long.len() <= 255, "{}", long.len());
        assert!(long.as_bytes().ends_with(b".hipfile-cp.4294967295.100.tmp"));
    }

    #[test]
    fn a_full_or_limited_file_system_is_named() {
        assert!(write_hint(Some(27)).contains("ulimit -f"));
        assert!(write_hint(Some(28)).contains("full"));
        assert!(write_hint(Some(122)).contains("quota"));
        assert_eq!(write_hint(Some(5)), "");
        assert_eq!(write_hint(None), "");
    }

    #[test]
    fn summary_json_has_exactly_the_documented_keys() {
        let s = Summary {
            bytes: 2_000_000_000,
            seconds: 0.5,
            read: Tally {
                fastpath_bytes: 2_000_000_000,
                fallback_bytes: 0,
                retries: 0,
            },
            write: Tally {
                fastpath_bytes: 1_999_995_904,
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
                "write": {"fastpath_bytes": 1_999_995_904u64, "fallback_bytes": 4096, "retries": 1},
            })
        );
        assert_eq!(
            s.text(),
            "copied 2000000000 bytes in 0.500 s (4.000 GB/s); read: fastpath 2000000000, \
             fallback 0, retries 0; write: fastpath 1999995904, fallback 4096, retries 1"
        );
        let none = Summary { seconds: 0.0, ..s };
        assert_eq!(none.gbps(), 0.0);
    }

    /// `hipfile cp ARGS`, parsed.
    fn cp(args: &[&str]) -> CpArgs {
        let all: Vec<&str> = ["cp"].iter().chain(args).copied().collect();
        match crate::tests::parse(&all) {
            Ok(crate::Command::Cp(c)) => c,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn cp_takes_src_dst_and_options_anywhere() {
        let c = cp(&["a", "b"]);
        assert_eq!(
            c,
            CpArgs {
                json: false,
                runtime: RuntimeChoice::Auto,
                chunk: 64 << 20,
                src: PathBuf::from("a"),
                dst: PathBuf::from("b"),
            }
        );
        let c = cp(&["--json", "a", "--chunk", "64K", "b", "--runtime=emulated"]);
        assert!(c.json);
        assert_eq!(c.chunk, 65536);
        assert_eq!(c.runtime, RuntimeChoice::Emulated);
        assert_eq!((c.src, c.dst), (PathBuf::from("a"), PathBuf::from("b")));
        let c = cp(&["--chunk=4096", "--", "-a", "--json"]);
        assert!(!c.json);
        assert_eq!(c.chunk, 4096);
        assert_eq!(
            (c.src, c.dst),
            (PathBuf::from("-a"), PathBuf::from("--json"))
        );
        assert_eq!(cp(&["--chunk", "2147479552", "a", "b"]).chunk, MAX_CHUNK);
        assert_eq!(cp(&["--chunk", "4MB", "a", "b"]).chunk, 4_194_304);
        assert_eq!(cp(&["--chunk", "4MiB", "a", "b"]).chunk, 4_194_304);
    }

    #[test]
    fn cp_refusals_name_the_option() {
        use crate::tests::error;
        for chunk in ["0", "1000", "4097", "2147483648", "4G"] {
            let e = error(&["cp", "--chunk", chunk, "a", "b"]);
            assert!(
                e.contains("--chunk") && e.contains("multiple of 4096"),
                "{chunk}: {e}"
            );
        }
        for (args, want) in [
            (
                &["cp", "--chunk", "x", "a", "b"][..],
                &["--chunk", "\"x\""][..],
            ),
            (&["cp", "a", "b", "--chunk"], &["--chunk"]),
            (&["cp"], &["<SRC>", "<DST>"]),
            (&["cp", "a"], &["<DST>"]),
            (&["cp", "a", "b", "c"], &["'c'"]),
            (&["cp", "--op", "read", "a", "b"], &["--op"]),
            (&["cp", "--json=1", "a", "b"], &["--json"]),
            (&["cp", "--runtime", "x", "a", "b"], &["auto, emulated"]),
        ] {
            let e = error(args);
            for w in want {
                assert!(e.contains(w), "{args:?}: {e}");
            }
        }
    }
}
