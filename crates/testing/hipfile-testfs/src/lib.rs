//! Test fixtures for real filesystems on loop devices: sparse image files attached with
//! `losetup`, formatted with `mkfs.ext4` or `mkfs.xfs` and mounted in a fresh temporary
//! directory; tmpfs mounts; FIFOs; the process's memory mappings ([`maps`]); a stand-in for
//! NVIDIA's NVML ([`nvml`]); and the capability checks (root, loop devices, commands) that
//! let a test say it skipped instead of failing where the machine cannot run it.
//!
//! It is a dev-dependency only and never a dependency of library code: it shells out to
//! `losetup`, `mkfs.*`, `mount` and `umount`, panics when a command that should work fails
//! (a test must not pass silently), and cleans up in `Drop`.
//!
//! Fixtures are safe to use from many test threads and several test processes at once: every
//! name is unique (process id, a counter and the clock), and `losetup --find --show` is
//! retried when another process takes the same free device first.
//!
//! Set `HIPFILE_TEST_STRICT=1` to turn every skip into a failure (for CI machines that are
//! expected to have every capability).

#![forbid(unsafe_code)]

pub mod clib;
mod cmd;
mod loopdev;
pub mod maps;
mod mount;
pub mod nvml;
mod temp;

use std::fmt;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

pub use loopdev::{LoopDevice, loop_device};
pub use mount::{Ext4Data, MountedFs};
pub use temp::TempDir;

/// Why a test cannot run on this machine: a missing capability, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip(pub String);

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether skips are failures: `HIPFILE_TEST_STRICT=1` in the environment.
pub fn strict() -> bool {
    // The workspace reads the environment in one library module only; this is test-fixture
    // code, and the strictness switch has to come from the environment of `cargo test`.
    #[allow(clippy::disallowed_methods)]
    let value = std::env::var_os("HIPFILE_TEST_STRICT");
    value.is_some_and(|v| v == "1")
}

/// Unwraps a `Result<T, Skip>` inside a test returning `()`: `Ok(v)` gives `v`; `Err(skip)`
/// prints `SKIP <test>: <reason>` and returns from the test, or panics when [`strict`] is on.
#[macro_export]
macro_rules! require {
    ($capability:expr) => {
        match $capability {
            ::core::result::Result::Ok(value) => value,
            ::core::result::Result::Err(skip) => {
                $crate::skipped(skip, ::core::module_path!());
                return;
            }
        }
    };
}

/// What [`require!`] does with a [`Skip`]: panic when [`strict`], otherwise say so on stderr.
#[doc(hidden)]
pub fn skipped(skip: Skip, module: &str) {
    if strict() {
        panic!("required capability missing: {skip}");
    }
    let thread = std::thread::current();
    // libtest names each test's thread after the test; with one test thread it runs on `main`.
    let test = thread.name().filter(|n| *n != "main").unwrap_or(module);
    // Written to the stderr handle, not with `eprintln!`, which the test harness captures:
    // a skip must show in the output of a passing run.
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {skip}");
}

/// Ok when the effective user is root (mounting and `losetup` need it).
pub fn is_root() -> Result<(), Skip> {
    let euid = rustix::process::geteuid();
    if euid.is_root() {
        Ok(())
    } else {
        Err(Skip(format!(
            "needs root (effective uid is {})",
            euid.as_raw()
        )))
    }
}

/// Ok when `name` is a command found on `PATH`.
pub fn has_command(name: &str) -> Result<(), Skip> {
    let found = std::process::Command::new("sh")
        .args(["-c", "command -v \"$1\" >/dev/null 2>&1", "sh", name])
        .status()
        .map_err(|e| Skip(format!("cannot run sh to look for `{name}`: {e}")))?;
    if found.success() {
        Ok(())
    } else {
        Err(Skip(format!("needs the `{name}` command on PATH")))
    }
}

/// Ok when loop devices can be created: `/dev/loop-control` opens read-write and `losetup`
/// exists.
pub fn loop_devices() -> Result<(), Skip> {
    const CONTROL: &str = "/dev/loop-control";
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(CONTROL)
        .map_err(|e| Skip(format!("needs loop devices: cannot open {CONTROL}: {e}")))?;
    has_command("losetup")
}

/// Creates a FIFO (mode 0600) with a fresh name in `dir` and returns its path.
///
/// # Panics
///
/// When `mkfifo` fails.
pub fn fifo(dir: &Path) -> PathBuf {
    let path = dir.join(unique_name("fifo"));
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &path,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap_or_else(|e| panic!("mkfifo {} failed: {e}", path.display()));
    path
}

/// `hipfile-testfs-<what>-<pid>-<counter>-<nanoseconds>`: unique across threads and processes.
pub(crate) fn unique_name(what: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("hipfile-testfs-{what}-{}-{n}-{nanos}", std::process::id())
}

/// The emulated runtime `libhipfile_emu.so` built for this test run: next to the test
/// executable's directory (`target/<profile>/deps/`, where cargo puts a dev-dependency's
/// cdylib) or one level up (`target/<profile>/`, after `cargo build`).
///
/// # Errors
///
/// A [`Skip`] naming the places looked at, when the crate under test does not dev-depend on
/// `hipfile-emu` or it was not built.
pub fn emulated_runtime() -> Result<PathBuf, Skip> {
    let exe = std::env::current_exe().map_err(|e| Skip(format!("current_exe: {e}")))?;
    let mut tried = Vec::new();
    let mut dir = exe.parent();
    for _ in 0..2 {
        let Some(d) = dir else { break };
        for candidate in [
            d.join("libhipfile_emu.so"),
            d.join("deps").join("libhipfile_emu.so"),
        ] {
            if candidate.is_file() {
                return Ok(candidate);
            }
            tried.push(candidate.display().to_string());
        }
        dir = d.parent();
    }
    Err(Skip(format!(
        "libhipfile_emu.so not found (looked at {})",
        tried.join(", ")
    )))
}

/// The shared library `file` (`libhipfile.so`, say) of the `cdylib`-only crate `package`,
/// built for the running test's profile into its target directory: cargo builds no cdylib
/// for a crate's integration tests, so the test asks cargo for it (once per package and test
/// process; quick when it is up to date).
///
/// # Panics
///
/// When cargo fails to build it: a library that does not build is a failure, not a missing
/// capability.
///
/// # Errors
///
/// A [`Skip`] when the test's target directory cannot be found, or the library is not where
/// cargo puts it.
pub fn cdylib(package: &str, file: &str) -> Result<PathBuf, Skip> {
    static BUILT: std::sync::Mutex<Vec<(String, Result<(), String>)>> =
        std::sync::Mutex::new(Vec::new());
    let exe = std::env::current_exe().map_err(|e| Skip(format!("current_exe: {e}")))?;
    // `target/<profile>/deps/<test>`.
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| Skip(format!("{} has no profile directory", exe.display())))?;
    let built = {
        let mut built = BUILT
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match built.iter().find(|(p, _)| p == package) {
            Some((_, r)) => r.clone(),
            None => {
                let r = build_cdylib(package, profile_dir);
                built.push((package.to_owned(), r.clone()));
                r
            }
        }
    };
    if let Err(e) = built {
        panic!("{e}");
    }
    let mut tried = Vec::new();
    for dir in exe.ancestors().skip(1).take(2) {
        let candidate = dir.join(file);
        if candidate.is_file() {
            return Ok(candidate);
        }
        tried.push(candidate.display().to_string());
    }
    Err(Skip(format!(
        "{file} not found (looked at {}); build it with `cargo build -p {package}`",
        tried.join(", ")
    )))
}

fn build_cdylib(package: &str, profile_dir: &Path) -> Result<(), String> {
    let mut cargo = std::process::Command::new(env!("CARGO"));
    cargo.args(["build", "--quiet", "--locked", "-p", package, "--lib"]);
    if let Some(target) = profile_dir.parent() {
        cargo.arg("--target-dir").arg(target);
    }
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        cargo.arg("--release");
    }
    match cargo.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("cargo build -p {package} failed: {s}")),
        Err(e) => Err(format!("cannot run cargo: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_differ() {
        let a = unique_name("x");
        let b = unique_name("x");
        assert_ne!(a, b);
        assert!(
            a.starts_with(&format!("hipfile-testfs-x-{}-", std::process::id())),
            "{a}"
        );
    }

    #[test]
    fn has_command_finds_sh_and_not_nonsense() {
        assert_eq!(has_command("sh"), Ok(()));
        let missing = has_command("hipfile-testfs-no-such-command").unwrap_err();
        assert!(
            missing.0.contains("hipfile-testfs-no-such-command"),
            "{missing}"
        );
    }

    #[test]
    fn has_command_does_not_run_shell_code_in_the_name() {
        let dir = TempDir::new("cmd");
        let marker = dir.path().join("ran");
        let name = format!("x; touch {}", marker.display());
        assert!(has_command(&name).is_err());
        assert!(!marker.exists());
    }

    #[test]
    fn fifo_is_a_fifo_in_the_directory() {
        use std::os::unix::fs::FileTypeExt;
        let dir = TempDir::new("fifo");
        let a = fifo(dir.path());
        let b = fifo(dir.path());
        assert_ne!(a, b);
        assert_eq!(a.parent(), Some(dir.path()));
        assert!(std::fs::metadata(&a).unwrap().file_type().is_fifo());
    }

    #[test]
    fn require_returns_the_value_or_returns_from_the_test() {
        fn body(reached: &mut bool, r: Result<u32, Skip>) {
            let v = require!(r);
            assert_eq!(v, 7);
            *reached = true;
        }
        let mut reached = false;
        body(&mut reached, Ok(7));
        assert!(reached);
        if !strict() {
            let mut reached = false;
            body(&mut reached, Err(Skip("no such capability".into())));
            assert!(!reached);
        }
    }

    #[test]
    fn capability_checks_agree_with_the_machine() {
        assert_eq!(is_root().is_ok(), rustix::process::geteuid().is_root());
        if let Err(skip) = loop_devices() {
            assert!(
                skip.0.contains("loop") || skip.0.contains("losetup"),
                "{skip}"
            );
        }
    }
}
