//! The `hipfile-torch` Python package (`crates/python/hipfile-torch`), built and tested with
//! PyTorch from PyPI on the emulated runtime: the last check of `cargo xtask ci`.
//!
//! A virtual environment in `target/torch-venv` (made once, kept between runs: PyTorch is
//! large) gets PyTorch, NumPy (safetensors.torch saves through it), safetensors and maturin
//! from PyPI; maturin builds the package's abi3 wheel (checking it against its manylinux
//! policy) into `target/torch-wheel`, whose version must be the workspace's, the wheel is
//! installed, and the package's tests (`tests/`, Python's unittest) run with
//! `HIPFILE_HIP_LIBRARY` naming the emulated runtime. PyPI's torch makes no GPU tensors
//! here, so the tests load with `device="cpu"` and compare with `safetensors.torch`. Every
//! step must succeed: a failure to install is a failure, never a skip.

use crate::dist::utf8;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The package, from the workspace root.
pub const PACKAGE: &str = "crates/python/hipfile-torch";
/// What the tests need from PyPI.
pub const REQUIREMENTS: &[&str] = &["torch", "numpy", "safetensors", "maturin>=1.7,<2"];

fn run(
    program: &Path,
    args: &[&str],
    dir: Option<&Path>,
    env: &[(&str, &str)],
) -> Result<(), String> {
    let mut command = Command::new(program);
    command
        .args(args)
        .env_remove("LD_PRELOAD")
        .envs(env.iter().copied());
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    crate::python::run_command(command, program, args)
}

/// Builds the package's wheel, installs it into `target/torch-venv` and runs its tests on
/// the emulated runtime `emulated`.
///
/// # Errors
///
/// Any step failing, a missing `python3` included.
pub fn check(metadata: &Value, emulated: &Path) -> Result<(), String> {
    let target = metadata["target_directory"]
        .as_str()
        .ok_or("cargo metadata names no target directory")?;
    let root = metadata["workspace_root"]
        .as_str()
        .ok_or("cargo metadata names no workspace root")?;
    let venv = Path::new(target).join("torch-venv");
    let python = venv.join("bin").join("python");
    if !python.is_file() {
        run(
            Path::new("python3"),
            &["-m", "venv", utf8(&venv)?],
            None,
            &[],
        )?;
    }
    let mut install = vec!["-m", "pip", "install", "--quiet", "--no-cache-dir"];
    install.extend(REQUIREMENTS);
    run(&python, &install, None, &[])?;

    let wheels = Path::new(target).join("torch-wheel");
    if wheels.exists() {
        std::fs::remove_dir_all(&wheels)
            .map_err(|e| format!("cannot empty {}: {e}", wheels.display()))?;
    }
    let package = Path::new(root).join(PACKAGE);
    let manifest = package.join("Cargo.toml");
    run(
        &python,
        &[
            "-m",
            "maturin",
            "build",
            "--locked",
            "-m",
            utf8(&manifest)?,
            "-o",
            utf8(&wheels)?,
        ],
        None,
        &[],
    )?;
    let wheel = std::fs::read_dir(&wheels)
        .map_err(|e| format!("cannot list {}: {e}", wheels.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .ok_or_else(|| format!("maturin wrote no wheel into {}", wheels.display()))?;
    let name = wheel
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let version = metadata["packages"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "hipfile-torch"))
        .and_then(|p| p["version"].as_str())
        .ok_or("cargo metadata has no hipfile-torch package")?;
    if !(name.starts_with(&format!("hipfile_torch-{version}-"))
        && name.contains("-abi3-")
        && name.contains("manylinux"))
    {
        return Err(format!(
            "{name} is not an abi3 manylinux wheel of hipfile-torch {version}, the workspace's version"
        ));
    }
    run(
        &python,
        &[
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--force-reinstall",
            utf8(&wheel)?,
        ],
        None,
        &[],
    )?;
    run(
        &python,
        &["-m", "unittest", "discover", "-v", "-s", "tests"],
        Some(&package),
        &[("HIPFILE_HIP_LIBRARY", utf8(emulated)?)],
    )
}
