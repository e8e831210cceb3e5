//! Libraries of this workspace that tests load: the emulated runtime, and `cdylib`-only
//! crates, which cargo builds on request for the test that needs them.

use crate::skip::Skip;
use std::path::{Path, PathBuf};

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
