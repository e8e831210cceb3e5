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
//! `tests/python/roundtrip.py` then runs a round trip through the bindings' API; it says
//! which functions the bindings call that the library does not export yet.

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

fn run(program: &Path, args: &[String], env: &[(&str, &str)]) -> Result<(), String> {
    eprintln!("xtask: running {} {}", program.display(), args.join(" "));
    let status = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .status()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} {} failed ({status})",
            program.display(),
            args.join(" ")
        ))
    }
}

/// Creates a fresh virtual environment in `target/python-venv`, builds the bindings into it
/// against `checked.tree`, and runs [`SCRIPT`] with the tree's `lib/` and the emulated
/// runtime's directory in `LD_LIBRARY_PATH` and the runtime in `HIPFILE_HIP_LIBRARY`.
///
/// # Errors
///
/// Any step failing, a missing `python3` included.
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
    let library_path = format!(
        "{}:{}",
        utf8(&checked.tree.join("lib"))?,
        utf8(&checked.runtime)?
    );
    let emu = checked.runtime.join(crate::emulated::LIBRARY);
    let script = Path::new(root).join(SCRIPT);
    run(
        &python,
        &[utf8(&script)?.into()],
        &[
            ("LD_LIBRARY_PATH", library_path.as_str()),
            ("HIPFILE_HIP_LIBRARY", utf8(&emu)?),
        ],
    )?;
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
