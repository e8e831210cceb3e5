//! `hipfile cp`: copies a file through one GPU buffer with the library's reads and writes,
//! then reports how many bytes each backend moved and how many requests were retried. A
//! source that is a URL (`s3://BUCKET/KEY`, `http(s)://HOST/PATH`) is read with ranged GETs
//! into the buffer instead ([`remote`]).
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

mod args;
mod copy;
mod files;
mod remote;

pub use args::{CpArgs, MAX_CHUNK};
use copy::Setup;
use files::{Destination, TempFile, open_source, refuse_same_file, sync_directory};
use remote::{RemoteSetup, remote_url};

use crate::failure::Failure;
use std::io::{self, Write};

/// The destination is a complete copy of the source.
pub const EXIT_COPIED: u8 = 0;
/// The copy failed.
pub const EXIT_FAILED: u8 = 1;
/// Bad arguments, or an emulated runtime that is not found.
pub const EXIT_USAGE: u8 = 2;

/// Runs `cp` and returns the exit status.
pub fn run(args: &CpArgs) -> Result<u8, Failure> {
    let failed = |message: String| Failure::msg(EXIT_FAILED, message);
    let settings =
        crate::runtime::settings(args.runtime).map_err(|m| Failure::msg(EXIT_USAGE, m))?;
    let (dest, temp, copied) = if let Some(url) = remote_url(&args.src) {
        let dest = Destination::find(&args.dst).map_err(failed)?;
        let setup = RemoteSetup::new(args, settings, url).map_err(failed)?;
        let temp = TempFile::create(&dest, &args.dst).map_err(failed)?;
        let copied = setup.copy_into(&temp.fd, &args.dst);
        (dest, temp, copied)
    } else {
        let (src_fd, src_size) = open_source(&args.src).map_err(failed)?;
        refuse_same_file(&src_fd, &args.src, &args.dst).map_err(failed)?;
        let dest = Destination::find(&args.dst).map_err(failed)?;
        let setup = Setup::new(args, settings, &src_fd, src_size).map_err(failed)?;
        let temp = TempFile::create(&dest, &args.dst).map_err(failed)?;
        let copied = setup.copy_into(&src_fd, src_size, &temp.fd, &args.src, &args.dst);
        (dest, temp, copied)
    };
    let copied = copied.and_then(|summary| temp.take_place_of(&dest, &args.dst).map(|()| summary));
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

#[cfg(test)]
mod tests {
    use super::copy::*;
    use super::files::*;
    use super::*;
    use crate::runtime::RuntimeChoice;
    use crate::tally::Tally;
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStrExt;
    use std::path::PathBuf;

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
                remote_bytes: 0,
            },
            write: Tally {
                fastpath_bytes: 1_999_995_904,
                fallback_bytes: 4096,
                retries: 1,
                remote_bytes: 0,
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
                chunk: None,
                src: PathBuf::from("a"),
                dst: PathBuf::from("b"),
            }
        );
        let c = cp(&["--json", "a", "--chunk", "64K", "b", "--runtime=emulated"]);
        assert!(c.json);
        assert_eq!(c.chunk, Some(65536));
        assert_eq!(c.runtime, RuntimeChoice::Emulated);
        assert_eq!((c.src, c.dst), (PathBuf::from("a"), PathBuf::from("b")));
        let c = cp(&["--chunk=4096", "--", "-a", "--json"]);
        assert!(!c.json);
        assert_eq!(c.chunk, Some(4096));
        assert_eq!(
            (c.src, c.dst),
            (PathBuf::from("-a"), PathBuf::from("--json"))
        );
        assert_eq!(
            cp(&["--chunk", "2147479552", "a", "b"]).chunk,
            Some(MAX_CHUNK)
        );
        assert_eq!(cp(&["--chunk", "4MB", "a", "b"]).chunk, Some(4_194_304));
        assert_eq!(cp(&["--chunk", "4MiB", "a", "b"]).chunk, Some(4_194_304));
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
