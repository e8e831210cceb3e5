//! `cargo xtask sanitize [address|thread|all]`: the test suite under LLVM's sanitizers.
//!
//! - `address`: AddressSanitizer with LeakSanitizer (leaks are reported when each test
//!   process exits, and fail it) over the whole workspace's unit and integration tests;
//!   `xtask/lsan.supp` lists the leaks that are meant (a test that forgets a handle on
//!   purpose, the fallback's abandoned staging buffers) or not hipfile's (Debian's HIP
//!   runtime), each with its reason. The
//!   C libraries' integration tests are left out: they run C programs built by the system
//!   compiler, which cannot load a library instrumented by Rust's sanitizer runtime; their
//!   unit tests run. Test executables are linked with `-rdynamic`, so that the emulated
//!   runtime, instrumented too and loaded with `dlopen`, finds the sanitizer runtime in them.
//! - `thread`: ThreadSanitizer over the crates with threads of their own: the facade (engine,
//!   batches, stream-ordered requests), the fallback (its I/O threads and staging pool), the
//!   runtime layer and the emulated runtime (its stream workers). With the `rust-src`
//!   component of the nightly toolchain, the standard library is rebuilt instrumented
//!   (`-Zbuild-std`); without it, the uninstrumented standard library's own synchronisation
//!   (its `Mutex`, `Condvar`, channels, `Arc`) is invisible to the sanitizer, which then
//!   reports races inside `std` that are not races: the output says which build it was.
//!   The tests that fork are left out (the sanitizer does not support threads started after
//!   a multi-threaded process forks).
//!
//! Each sanitizer builds into a target directory of its own (`target/sanitize-<name>`) for
//! the host triple, so that build scripts and procedural macros are not instrumented. It needs
//! rustup's nightly toolchain (`rustup toolchain install nightly`), which CI does not fetch:
//! this command is run by hand, not by `cargo xtask ci`.

use std::process::Command;

/// The sanitizers this command runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sanitizer {
    Address,
    Thread,
}

impl Sanitizer {
    fn name(self) -> &'static str {
        match self {
            Sanitizer::Address => "address",
            Sanitizer::Thread => "thread",
        }
    }
}

/// Which sanitizers `args` ask for.
///
/// # Errors
///
/// A usage message for anything else.
pub fn parse(args: &[&str]) -> Result<Vec<Sanitizer>, String> {
    match args {
        [] | ["all"] => Ok(vec![Sanitizer::Address, Sanitizer::Thread]),
        ["address"] => Ok(vec![Sanitizer::Address]),
        ["thread"] => Ok(vec![Sanitizer::Thread]),
        _ => Err("usage: cargo xtask sanitize [address|thread|all]".into()),
    }
}

/// The host's target triple (rustc's own).
fn host_triple() -> Result<String, String> {
    let out = Command::new("rustc")
        .args(["+nightly", "-vV"])
        .output()
        .map_err(|e| format!("cannot run rustc +nightly: {e}"))?;
    if !out.status.success() {
        return Err(
            "the nightly toolchain is missing: rustup toolchain install nightly".to_owned(),
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .ok_or_else(|| "rustc +nightly -vV names no host".to_owned())
}

/// Whether the nightly toolchain has the standard library's sources (for `-Zbuild-std`).
fn has_rust_src() -> bool {
    Command::new("rustup")
        .args(["component", "list", "--toolchain", "nightly", "--installed"])
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.starts_with("rust-src"))
        })
}

/// The `cargo +nightly test` arguments of one run (after `test`), for `triple` and `target`.
pub fn test_args(s: Sanitizer, triple: &str, target: &str, build_std: bool) -> Vec<Vec<String>> {
    let common = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["test", "--locked", "--no-fail-fast", "--target", triple]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        v.extend(["--target-dir".to_owned(), target.to_owned()]);
        if build_std {
            v.push("-Zbuild-std".to_owned());
        }
        v.extend(extra.iter().map(|s| (*s).to_owned()));
        v
    };
    match s {
        Sanitizer::Address => vec![
            common(&[
                "--workspace",
                "--exclude",
                "hipfile-c-hipfile",
                "--exclude",
                "hipfile-c-cufile",
                "--exclude",
                "xtask",
            ]),
            common(&["-p", "hipfile-c-hipfile", "-p", "hipfile-c-cufile", "--lib"]),
        ],
        Sanitizer::Thread => vec![common(&[
            "-p",
            "hipfile",
            "-p",
            "hipfile-fallback",
            "-p",
            "hipfile-runtime",
            "-p",
            "hipfile-emu",
            "--",
            "--skip",
            "fork",
        ])],
    }
}

/// Runs `sanitizers` one after the other; fails if any run fails.
///
/// # Errors
///
/// A missing toolchain, or the runs that failed (a sanitizer report fails its test process).
pub fn run(sanitizers: &[Sanitizer], target_root: &str) -> Result<(), String> {
    let triple = host_triple()?;
    let mut failed = Vec::new();
    for &s in sanitizers {
        let build_std = s == Sanitizer::Thread && has_rust_src();
        if s == Sanitizer::Thread && !build_std {
            eprintln!(
                "xtask: the nightly toolchain has no rust-src: the standard library is not \
                 instrumented, and ThreadSanitizer reports races inside std that are not races \
                 (rustup component add rust-src --toolchain nightly)"
            );
        }
        let flags = format!("-Zsanitizer={} -Clink-arg=-rdynamic", s.name());
        let target = format!("{target_root}/sanitize-{}", s.name());
        for args in test_args(s, &triple, &target, build_std) {
            eprintln!(
                "xtask: running RUSTFLAGS=\"{flags}\" cargo +nightly {}",
                args.join(" ")
            );
            let status = Command::new("cargo")
                .arg("+nightly")
                .args(&args)
                .env("RUSTFLAGS", &flags)
                .env("RUSTDOCFLAGS", format!("-Zsanitizer={}", s.name()))
                .env("ASAN_OPTIONS", "detect_leaks=1")
                .env(
                    "LSAN_OPTIONS",
                    format!("suppressions={}/lsan.supp", env!("CARGO_MANIFEST_DIR")),
                )
                .env("TSAN_OPTIONS", "halt_on_error=0 second_deadlock_stack=1")
                .status()
                .map_err(|e| format!("cannot run cargo: {e}"))?;
            if !status.success() {
                failed.push(format!("{} ({status})", s.name()));
            }
        }
    }
    if failed.is_empty() {
        eprintln!("xtask: sanitize passed");
        Ok(())
    } else {
        Err(format!("sanitizer runs failed: {}", failed.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sanitizer_is_asked_for_by_name() {
        assert_eq!(parse(&[]).unwrap(), [Sanitizer::Address, Sanitizer::Thread]);
        assert_eq!(parse(&["thread"]).unwrap(), [Sanitizer::Thread]);
        assert!(parse(&["memory"]).is_err());
    }

    #[test]
    fn the_address_run_leaves_out_only_the_c_programs() {
        let runs = test_args(Sanitizer::Address, "x86_64-unknown-linux-gnu", "t", false);
        assert_eq!(runs.len(), 2);
        assert!(runs[0].contains(&"--workspace".to_owned()));
        assert!(runs[1].ends_with(&["--lib".to_owned()]));
        assert!(runs.iter().all(|r| !r.contains(&"-Zbuild-std".to_owned())));
        let thread = test_args(Sanitizer::Thread, "x86_64-unknown-linux-gnu", "t", true);
        assert!(thread[0].contains(&"-Zbuild-std".to_owned()));
    }
}
