//! AMD's Python bindings for hipFile (PyPI's `hipfile` sdist, a Cython extension built with
//! scikit-build-core and CMake), built against this project's C library and run on the
//! emulated runtime: the check `cargo xtask ci` ends with.
//!
//! The bindings' CMake build looks for `hipfile.h`, `libhipfile.so` and HIP's
//! `hip/hip_runtime_api.h` (Debian's `libamdhip64-dev` in CI); the first two are given as
//! `HIPFILE_INCLUDE_DIR` and `HIPFILE_LIBRARY`, pointing into the tree `cargo xtask dist`
//! laid out. The build needs Python's headers (`python3-dev`), `venv` (`python3-venv`) and
//! PyPI, from which pip fetches the sdist and its build requirements (scikit-build-core,
//! Cython, and CMake when the machine has none). Every step must succeed: a failure to
//! create the environment or to install is a failure, never a skip.
//!
//! `tests/python/roundtrip.py` then runs a round trip through the bindings' API, as a user's
//! program would run: the tree's `lib/` and the emulated runtime's directory (the runtime
//! under a HIP runtime's names) in `LD_LIBRARY_PATH`, nothing preloaded and no
//! `HIPFILE_HIP_LIBRARY`. The bindings' extension calls `hipPeekAtLastError` without linking
//! HIP, so it imports only because `libhipfile.so.0` brings the runtime as a dependency. The
//! same script is then run with `lib/portable/` (the library without that dependency) first
//! in the path, where it must fail with `undefined symbol: hipPeekAtLastError`: the check
//! can fail, and fails for that reason.

use crate::dist::{Checked, utf8};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The sdist, pinned: the bindings are experimental and their API changes between releases.
pub const REQUIREMENT: &str = "hipfile==0.4.0.dev0";
/// The round trip, from the workspace root.
pub const SCRIPT: &str = "tests/python/roundtrip.py";

/// The `pip install` arguments that build [`REQUIREMENT`] from source against the tree
/// `tree`, every time anew (the library may have changed since the last build).
pub fn pip_args(tree: &Path) -> Result<Vec<String>, String> {
    let include = format!(
        "cmake.define.HIPFILE_INCLUDE_DIR={}",
        utf8(&tree.join("include"))?
    );
    let library = format!(
        "cmake.define.HIPFILE_LIBRARY={}",
        utf8(&tree.join("lib").join(crate::dist::LINK_NAME))?
    );
    Ok([
        "-m",
        "pip",
        "install",
        "--no-cache-dir",
        "--force-reinstall",
        "--no-binary",
        "hipfile",
        "--config-settings",
        &include,
        "--config-settings",
        &library,
        REQUIREMENT,
    ]
    .map(String::from)
    .to_vec())
}

fn command(program: &Path, args: &[String], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(program);
    command
        .args(args)
        .env_remove("HIPFILE_HIP_LIBRARY")
        .env_remove("LD_PRELOAD")
        .envs(env.iter().copied());
    command
}

fn run(program: &Path, args: &[String], env: &[(&str, &str)]) -> Result<(), String> {
    run_command(command(program, args, env), program, args)
}

/// Runs `command` (`program` with `args`, said on stderr first), which must succeed.
pub fn run_command<S: AsRef<str>>(
    mut command: Command,
    program: &Path,
    args: &[S],
) -> Result<(), String> {
    let said: Vec<&str> = args.iter().map(AsRef::as_ref).collect();
    let said = said.join(" ");
    eprintln!("xtask: running {} {said}", program.display());
    let status = command
        .status()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{} {said} failed ({status})", program.display()))
    }
}

/// What the bindings say when the library does not bring the HIP runtime.
pub const UNDEFINED_RUNTIME_SYMBOL: &str = "undefined symbol: hipPeekAtLastError";

/// Creates a fresh virtual environment in `target/python-venv`, builds the bindings into it
/// against `checked.tree`, and runs [`SCRIPT`] with the tree's `lib/` and the emulated
/// runtime's directory in `LD_LIBRARY_PATH`, nothing else: it must pass. Then again with
/// `lib/portable/` first, where it must fail with [`UNDEFINED_RUNTIME_SYMBOL`].
///
/// # Errors
///
/// Any step failing, a missing `python3` included, or the second run passing or failing
/// for another reason.
pub fn check(metadata: &Value, checked: &Checked) -> Result<(), String> {
    let target = metadata["target_directory"]
        .as_str()
        .ok_or("cargo metadata names no target directory")?;
    let root = metadata["workspace_root"]
        .as_str()
        .ok_or("cargo metadata names no workspace root")?;
    let venv = Path::new(target).join("python-venv");
    run(
        Path::new("python3"),
        &[
            "-m".into(),
            "venv".into(),
            "--clear".into(),
            utf8(&venv)?.into(),
        ],
        &[],
    )?;
    let python = venv.join("bin").join("python");
    run(&python, &pip_args(&checked.tree)?, &[])?;
    let lib = checked.tree.join("lib");
    let script = [utf8(&Path::new(root).join(SCRIPT))?.to_owned()];
    let library_path = format!("{}:{}", utf8(&lib)?, utf8(&checked.runtime)?);
    run(
        &python,
        &script,
        &[("LD_LIBRARY_PATH", library_path.as_str())],
    )?;

    let portable = format!(
        "{}:{library_path}",
        utf8(&lib.join(crate::dist::PORTABLE_DIR))?
    );
    eprintln!(
        "xtask: running {} with LD_LIBRARY_PATH={portable}, which must fail",
        script[0]
    );
    let out = command(&python, &script, &[("LD_LIBRARY_PATH", portable.as_str())])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() || !text.contains(UNDEFINED_RUNTIME_SYMBOL) {
        return Err(format!(
            "on the library without the runtime dependency the bindings were expected to fail \
             with {UNDEFINED_RUNTIME_SYMBOL:?} ({}):\n{text}",
            out.status
        ));
    }
    eprintln!("xtask: Python bindings check passed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pip_builds_the_pinned_sdist_against_the_tree() {
        let args = pip_args(Path::new("/d")).unwrap();
        let joined = args.join(" ");
        assert!(
            joined.contains("--no-binary hipfile"),
            "from source: {joined}"
        );
        assert!(joined.contains("--force-reinstall"), "{joined}");
        assert!(
            joined.contains("cmake.define.HIPFILE_INCLUDE_DIR=/d/include"),
            "{joined}"
        );
        assert!(
            joined.contains("cmake.define.HIPFILE_LIBRARY=/d/lib/libhipfile.so"),
            "{joined}"
        );
        assert_eq!(args.last().map(String::as_str), Some(REQUIREMENT));
    }

    #[test]
    fn the_script_exists() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        assert!(root.join(SCRIPT).is_file());
    }
}
