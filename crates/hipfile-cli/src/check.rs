//! `hipfile check`: opens each path without changing it, probes it, asks the backends, and
//! prints what they said.

use crate::args::CheckArgs;
use crate::report::{Context, Report, table};
use hipfile::{BufferFacts, Config, DevicePtr, Op, Request, RuntimeReport};
use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

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
pub fn run(args: &CheckArgs) -> u8 {
    let config = match crate::runtime::settings(args.runtime) {
        Ok(settings) => settings.build_from_env(),
        Err(message) => {
            eprintln!("hipfile: {message}");
            return EXIT_ERROR;
        }
    };
    let (request, buffer) = match request(args) {
        Ok(r) => r,
        Err(message) => {
            eprintln!("hipfile: {message}");
            return EXIT_ERROR;
        }
    };
    let runtime = hipfile::inspect_runtime(&config);
    let ctx = Context::new(&config, runtime, request, args.memory);

    let mut status = EXIT_SERVED;
    let mut reports = Vec::new();
    let mut stdout = io::stdout().lock();
    for path in &args.paths {
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
            // Each line goes out as soon as it is known, so that a slow path does not hold
            // back the others.
            let line = report.to_json(&ctx);
            if let Err(e) = writeln!(stdout, "{line}").and_then(|()| stdout.flush()) {
                return output_failed(&e);
            }
        } else {
            reports.push(report);
        }
    }
    if !args.json && !reports.is_empty() {
        let text = table(&ctx, &reports);
        if let Err(e) = stdout
            .write_all(text.as_bytes())
            .and_then(|()| stdout.flush())
        {
            return output_failed(&e);
        }
    }
    status
}

fn output_failed(e: &io::Error) -> u8 {
    if e.kind() != io::ErrorKind::BrokenPipe {
        eprintln!("hipfile: cannot write the output: {e}");
    }
    EXIT_ERROR
}

/// The request and the synthetic buffer the options describe, validated.
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
    Ok(Report::new(path, &facts, &decision, runtime))
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

    fn args() -> CheckArgs {
        CheckArgs {
            paths: vec![PathBuf::from("x")],
            ..CheckArgs::default()
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
