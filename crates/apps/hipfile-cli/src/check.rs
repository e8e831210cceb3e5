//! `hipfile check`: opens each path without changing it, probes it, asks the backends, and
//! prints what they said.

use crate::failure::Failure;
use crate::options;
use crate::report::{Blocked, Context, Report, table};
use crate::runtime::RuntimeChoice;
use clap::Args;
use hipfile::{BufferFacts, Config, DevicePtr, MemoryKind, Op, Request, RuntimeReport};
use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

/// Explain which backend would serve a request on each file, and why
#[derive(Debug, Clone, PartialEq, Eq, Args)]
#[command(
    args_override_self = true,
    long_about = "\
Explain which backend would serve a request on each file, and why

For each PATH, hipfile opens the file (never creating or changing it), probes it, and asks
both backends whether they would serve the request described by the options: the fastpath
(storage <-> GPU memory with no host copy, score 100) and the fallback (POSIX I/O through
host staging buffers, score 1). A backend that refuses scores -1 and gives every reason
that applies. Without a GPU runtime, or with one that reports no usable device, no backend
would serve anything whatever the scores, nor on a directory or a FIFO, which hipfile
refuses to register, nor on a character device without file offsets (a terminal), where
every read or write fails with ESPIPE: the selection is then none, with the reason, and the
runtime's error follows the table. Other character devices are served as pread and pwrite
serve them there (/dev/null: the fallback), and 'hipfile cp' copies from them.",
    after_long_help = "\
Numbers are whole numbers of bytes, optionally followed by a suffix that multiplies by a
power of 1024: K, KB or KiB (1024), M, MB or MiB (1024^2), G, GB or GiB (1024^3), T, TB or
TiB (1024^4); for example 4K, 1MiB. The environment's sizes take the same grammar.

The configuration comes from HIPFILE_ALLOW_COMPAT_MODE, HIPFILE_FORCE_COMPAT_MODE and
HIPFILE_UNSUPPORTED_FILE_SYSTEMS, as for any program using hipfile.

Exit status: 0 when a backend would serve the request on every PATH, 1 when none would on
some PATH (no backend accepts it, or no runtime or device serves anything), 2 on bad
arguments, a PATH that cannot be opened or probed, or an emulated runtime that is not found."
)]
pub struct CheckArgs {
    /// One JSON object per PATH, each on its own line
    #[arg(long)]
    pub json: bool,
    /// Direction of the request
    #[arg(long, value_name = "OP", default_value = "read", value_parser = options::op())]
    pub op: Op,
    /// Bytes to transfer
    #[arg(long, value_name = "N", default_value = "1MiB", value_parser = options::bytes)]
    pub size: u64,
    /// Byte offset in the file
    #[arg(long = "offset", value_name = "N", default_value = "0", value_parser = options::bytes)]
    pub file_offset: u64,
    /// Byte offset into the GPU buffer
    #[arg(long, value_name = "N", default_value = "0", value_parser = options::bytes)]
    pub buffer_offset: u64,
    /// The buffer's address is a multiple of N (N >= 1; need not be a power of two)
    #[arg(long, value_name = "N", default_value = "4096", value_parser = buffer_align)]
    pub buffer_align: u64,
    /// Kind of memory the buffer is
    #[arg(long, value_name = "MEMORY", default_value = "device", value_parser = options::memory())]
    pub memory: MemoryKind,
    /// The GPU runtime to ask: the one found on this machine, or the emulated runtime
    /// libhipfile_emu.so in this program's directory or its deps/ subdirectory (test and
    /// development only)
    #[arg(long, value_name = "RUNTIME", value_enum, default_value_t)]
    pub runtime: RuntimeChoice,
    /// The files to check, in order
    #[arg(value_name = "PATH", required = true)]
    pub paths: Vec<PathBuf>,
}

fn buffer_align(text: &str) -> Result<u64, String> {
    match options::bytes(text)? {
        0 => Err("expected a number of bytes, at least 1".into()),
        n => Ok(n),
    }
}

/// A backend would serve the request on every path.
pub const EXIT_SERVED: u8 = 0;
/// Every path was probed, and on some no backend would serve the request: none accepts it,
/// or something blocks every request (no GPU runtime, no device).
pub const EXIT_NO_BACKEND: u8 = 1;
/// Bad arguments, an invalid request, a path that could not be opened or probed, or an
/// emulated runtime that is not found.
pub const EXIT_ERROR: u8 = 2;

/// Where the synthetic buffer's address is put: a user-space-looking address, rounded to the
/// requested alignment.
const BUFFER_AREA: u64 = 0x7f00_0000_0000;

/// Runs `check` and returns the exit status.
pub fn run(args: &CheckArgs) -> Result<u8, Failure> {
    let config = crate::runtime::settings(args.runtime)
        .map_err(|e| Failure::msg(EXIT_ERROR, e))?
        .build_from_env();
    let (request, buffer) = request(args).map_err(|m| Failure::msg(EXIT_ERROR, m))?;
    let runtime = hipfile::inspect_runtime(&config);
    let ctx = Context::new(&config, runtime, request, args.memory);

    let mut status = EXIT_SERVED;
    let mut reports = Vec::new();
    let mut stdout = io::stdout().lock();
    for path in &args.paths {
        // One PATH that cannot be looked at does not stop the others: said here, counted in
        // the status.
        let report = match examine(&config, &ctx.runtime, path, &request, &buffer) {
            Ok(r) => r,
            Err(message) => {
                eprintln!("hipfile: {}: {message}", path.display());
                status = EXIT_ERROR;
                continue;
            }
        };
        if report.selected.is_none() && status == EXIT_SERVED {
            status = EXIT_NO_BACKEND;
        }
        if args.json {
            let line = report.to_json(&ctx);
            writeln!(stdout, "{line}")
                .and_then(|()| stdout.flush())
                .map_err(|e| Failure::output(EXIT_ERROR, e))?;
        } else {
            reports.push(report);
        }
    }
    if !args.json && !reports.is_empty() {
        let text = table(&ctx, &reports);
        stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(|e| Failure::output(EXIT_ERROR, e))?;
    }
    Ok(status)
}

fn request(args: &CheckArgs) -> Result<(Request, BufferFacts), String> {
    let len = args
        .buffer_offset
        .checked_add(args.size.max(1))
        .ok_or_else(|| {
            format!(
                "--buffer-offset {} + --size {} overflows",
                args.buffer_offset, args.size
            )
        })?;
    let base = buffer_base(args.buffer_align).ok_or_else(|| {
        format!(
            "--buffer-align {} is not usable: it must be at least 1",
            args.buffer_align
        )
    })?;
    let buffer = BufferFacts {
        base: DevicePtr(base),
        len,
        memory: args.memory,
        device: 0,
    };
    let request = Request {
        op: args.op,
        size: args.size,
        file_offset: args.file_offset,
        buffer_offset: args.buffer_offset,
    };
    request.validate(&buffer).map_err(|e| e.to_string())?;
    Ok((request, buffer))
}

/// A buffer address that is a multiple of `align` and, for a power of two, of no larger power
/// of two: an odd multiple of `align` near [`BUFFER_AREA`]. `None` for 0.
fn buffer_base(align: u64) -> Option<u64> {
    if align == 0 {
        return None;
    }
    let k = (BUFFER_AREA / align) | 1;
    // k * align <= BUFFER_AREA + align, which only overflows when k is 1.
    Some(k.checked_mul(align).unwrap_or(align))
}

/// Opens, probes and scores one path, on the runtime found.
fn examine(
    config: &Config,
    runtime: &RuntimeReport,
    path: &Path,
    request: &Request,
    buffer: &BufferFacts,
) -> Result<Report, String> {
    let fd = open(path, request.op).map_err(|e| format!("cannot open: {}", io::Error::from(e)))?;
    let facts = hipfile::probe::file_facts(fd.as_fd()).map_err(|e| format!("cannot probe: {e}"))?;
    let decision = hipfile::explain(config, runtime.amd_file_io, &facts, request, buffer)
        .map_err(|e| e.to_string())?;
    Ok(Report::new(path, &facts, &decision, runtime)
        .blocked_at_io(lacks_file_offsets(&fd).then_some(Blocked::NoFileOffsets)))
}

/// Whether `fd` is a character device without file offsets, on which every `pread` and
/// `pwrite` fails with `ESPIPE`: the kernel takes offsets from a device that does not refuse
/// `lseek` (a terminal refuses it). `lseek` to the current position changes nothing.
fn lacks_file_offsets(fd: &OwnedFd) -> bool {
    let char_device = rustix::fs::fstat(fd)
        .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::CharacterDevice);
    char_device && rustix::fs::seek(fd, rustix::fs::SeekFrom::Current(0)) == Err(Errno::SPIPE)
}

/// Opens `path` for `op` without creating, truncating or otherwise changing it.
///
/// `O_NONBLOCK` keeps a FIFO without a peer from blocking the open; it is cleared again for
/// everything else, since the probe reopens with the descriptor's flags. What cannot be opened
/// for writing only because of what it is (a directory, a FIFO with no reader) is opened
/// read-only, just to be reported.
fn open(path: &Path, op: Op) -> Result<OwnedFd, Errno> {
    let common = OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    let fd = match op {
        Op::Read => rustix::fs::open(path, OFlags::RDONLY | common, Mode::empty())?,
        Op::Write => match rustix::fs::open(path, OFlags::WRONLY | common, Mode::empty()) {
            Err(Errno::ISDIR | Errno::NXIO) => {
                rustix::fs::open(path, OFlags::RDONLY | common, Mode::empty())?
            }
            other => other?,
        },
    };
    let stat = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::Fifo {
        let flags = rustix::fs::fcntl_getfl(&fd)?;
        rustix::fs::fcntl_setfl(&fd, flags - OFlags::NONBLOCK)?;
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hipfile::MemoryKind;
    use std::path::PathBuf;

    /// `hipfile check ARGS`, parsed.
    fn check(args: &[&str]) -> CheckArgs {
        let all: Vec<&str> = ["check"].iter().chain(args).copied().collect();
        match crate::tests::parse(&all) {
            Ok(crate::Command::Check(c)) => c,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    fn args() -> CheckArgs {
        check(&["x"])
    }

    #[test]
    fn defaults_are_a_1mib_device_read_at_offset_0() {
        let c = args();
        assert_eq!(
            (c.size, c.file_offset, c.buffer_offset, c.buffer_align),
            (1 << 20, 0, 0, 4096)
        );
        assert_eq!(
            (c.op, c.memory, c.json, c.runtime),
            (Op::Read, MemoryKind::Device, false, RuntimeChoice::Auto)
        );
        assert_eq!(c.paths, [PathBuf::from("x")]);
    }

    #[test]
    fn every_option_with_separate_or_inline_values() {
        let c = check(&[
            "--json",
            "a",
            "--op",
            "write",
            "--size=4K",
            "--offset",
            "512",
            "--buffer-offset=1",
            "--buffer-align",
            "3",
            "--memory",
            "managed",
            "--runtime=emulated",
            "b",
        ]);
        assert!(c.json);
        assert_eq!(c.op, Op::Write);
        assert_eq!(
            (c.size, c.file_offset, c.buffer_offset, c.buffer_align),
            (4096, 512, 1, 3)
        );
        assert_eq!(
            (c.memory, c.runtime),
            (MemoryKind::Managed, RuntimeChoice::Emulated)
        );
        assert_eq!(c.paths, [PathBuf::from("a"), PathBuf::from("b")]);
        assert_eq!(check(&["--memory=host", "x"]).memory, MemoryKind::Host);
        assert_eq!(check(&["--size", "4MB", "x"]).size, 4_194_304);
        assert_eq!(check(&["--size", "4MiB", "x"]).size, 4_194_304);
    }

    #[test]
    fn double_dash_ends_options() {
        let c = check(&["--", "--json", "-"]);
        assert!(!c.json);
        assert_eq!(c.paths, [PathBuf::from("--json"), PathBuf::from("-")]);
    }

    #[test]
    fn non_utf8_paths_are_kept() {
        use clap::Parser;
        use std::os::unix::ffi::OsStringExt;
        let raw = std::ffi::OsString::from_vec(vec![b'a', 0xff, b'b']);
        let cli = crate::Cli::try_parse_from(["hipfile".into(), "check".into(), raw.clone()]);
        let Ok(crate::Cli {
            command: crate::Command::Check(c),
        }) = cli
        else {
            panic!("{cli:?}")
        };
        assert_eq!(c.paths, [PathBuf::from(raw)]);
    }

    #[test]
    fn bad_values_are_refused_naming_the_option() {
        use crate::tests::error;
        for (args, want) in [
            (&["check", "--frobnicate", "x"][..], &["--frobnicate"][..]),
            (
                &["check", "--size", "abc", "x"],
                &["--size", "\"abc\"", "not a whole number"],
            ),
            (
                &["check", "--size", "1.5M", "x"],
                &["--size", "unknown suffix"],
            ),
            (
                &["check", "--size", "99999999999999999999", "x"],
                &["too large"],
            ),
            (
                &["check", "--memory", "gpu", "x"],
                &["--memory", "gpu", "device, host, managed"],
            ),
            (
                &["check", "--op", "copy", "x"],
                &["--op", "copy", "read, write"],
            ),
            (
                &["check", "--runtime", "cuda", "x"],
                &["--runtime", "cuda", "auto, emulated"],
            ),
            (&["check", "x", "--offset"], &["--offset"]),
            (
                &["check", "--buffer-align", "0", "x"],
                &["--buffer-align", "at least 1"],
            ),
            (&["check", "--json=yes", "x"], &["--json"]),
            (&["check", "--json"], &["PATH"]),
            (&["check"], &["PATH"]),
        ] {
            let e = error(args);
            for w in want {
                assert!(e.contains(w), "{args:?}: {e}");
            }
        }
    }

    #[test]
    fn help_check_shows_checks_long_help() {
        let e = crate::tests::parse(&["help", "check"]).expect_err("help");
        let text = e.render().to_string();
        for want in [
            "Explain which backend",
            "For each PATH, hipfile opens the file",
            "Usage: hipfile check",
            "--buffer-align",
            "KiB",
            "Exit status",
        ] {
            assert!(text.contains(want), "{want}: {text}");
        }
    }

    #[test]
    fn buffer_base_is_exactly_aligned() {
        assert_eq!(buffer_base(4096), Some(BUFFER_AREA + 4096));
        for align in [1u64, 2, 512, 4096, 1 << 21, 1 << 40, 1 << 62] {
            let base = buffer_base(align).unwrap();
            assert_eq!(base % align, 0, "{align}");
            assert_ne!(base % (align * 2), 0, "{align}: {base:#x}");
        }
        for align in [3u64, 1000, 4097, 1 << 63, u64::MAX] {
            assert_eq!(buffer_base(align).unwrap() % align, 0, "{align}");
        }
        assert_eq!(buffer_base(0), None);
    }

    #[test]
    fn default_request_is_valid() {
        let (r, b) = request(&args()).unwrap();
        assert_eq!(
            r,
            Request {
                op: Op::Read,
                size: 1 << 20,
                file_offset: 0,
                buffer_offset: 0
            }
        );
        assert_eq!(
            (b.base, b.len, b.memory),
            (DevicePtr(BASE_4096), 1 << 20, MemoryKind::Device)
        );
    }

    const BASE_4096: u64 = BUFFER_AREA + 4096;

    #[test]
    fn the_buffer_holds_the_request() {
        let (_, b) = request(&CheckArgs {
            size: 0,
            buffer_offset: 7,
            ..args()
        })
        .unwrap();
        assert_eq!(b.len, 8);
        let (_, b) = request(&CheckArgs {
            size: 10,
            buffer_offset: 7,
            ..args()
        })
        .unwrap();
        assert_eq!(b.len, 17);
    }

    #[test]
    fn out_of_range_requests_are_refused_with_a_message() {
        let e = request(&CheckArgs {
            file_offset: 1 << 63,
            ..args()
        })
        .unwrap_err();
        assert!(
            e.contains("file range 9223372036854775808 + 1048576 overflows"),
            "{e}"
        );
        let e = request(&CheckArgs {
            file_offset: i64::MAX as u64,
            ..args()
        })
        .unwrap_err();
        assert!(e.contains("overflows the largest file offset"), "{e}");
        assert!(
            request(&CheckArgs {
                file_offset: i64::MAX as u64,
                size: 0,
                ..args()
            })
            .is_ok()
        );
        // A buffer offset is a `u64`, as large as the (synthetic) buffer's address allows.
        assert!(
            request(&CheckArgs {
                buffer_offset: 1 << 63,
                ..args()
            })
            .is_ok()
        );
        let e = request(&CheckArgs {
            buffer_offset: u64::MAX - 8,
            size: 1,
            ..args()
        })
        .unwrap_err();
        assert!(e.contains("buffer address"), "{e}");
        let e = request(&CheckArgs {
            buffer_offset: 1 << 62,
            size: u64::MAX,
            ..args()
        })
        .unwrap_err();
        assert!(e.contains("overflows"), "{e}");
    }
}
