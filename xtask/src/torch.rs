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
//!
//! Disk: PyPI's torch and its CUDA wheels take about 5.5 GiB installed, and pip keeps the
//! downloaded wheels (about 3.5 GiB more) until it has installed them all. A first install
//! checks that the venv's filesystem has room and says so when it does not, and pip's
//! scratch files go to `/dev/shm` when that tmpfs has room, so the disk holds only what
//! stays installed.

use crate::dist::utf8;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The package, from the workspace root.
pub const PACKAGE: &str = "crates/python/hipfile-torch";
/// What the tests need from PyPI.
pub const REQUIREMENTS: &[&str] = &["torch", "numpy", "safetensors", "maturin>=1.7,<2"];

const GIB: u64 = 1 << 30;
/// Free space a first install needs where the venv lives: what PyPI's torch and its CUDA
/// wheels take installed (5.5 GiB with torch 2.15), with a margin.
const INSTALL_NEEDS: u64 = 6 * GIB;
/// Free space pip's scratch needs to go to `/dev/shm`: the downloaded wheels, with a margin.
const SCRATCH_NEEDS: u64 = 5 * GIB;

/// Bytes free on the filesystem holding `path`, as POSIX `df` reports them; `None` when
/// `df` cannot tell.
fn free_bytes(path: &Path) -> Option<u64> {
    let out = Command::new("df")
        .arg("-P")
        .arg("-k")
        .arg(path)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    available(&String::from_utf8_lossy(&out.stdout))
}

/// The bytes available in `df -P -k`'s report: the fourth field of its second line, in KiB.
fn available(report: &str) -> Option<u64> {
    let kib: u64 = report
        .lines()
        .nth(1)?
        .split_whitespace()
        .nth(3)?
        .parse()
        .ok()?;
    Some(kib.saturating_mul(1024))
}

/// Whether the venv already holds PyTorch (then pip only checks versions).
fn has_torch(venv: &Path) -> bool {
    std::fs::read_dir(venv.join("lib")).is_ok_and(|dirs| {
        dirs.filter_map(Result::ok)
            .any(|d| d.path().join("site-packages").join("torch").is_dir())
    })
}

/// A scratch directory for pip on `/dev/shm`, when that tmpfs has room for the downloads;
/// `None` leaves pip on the default temporary directory.
fn pip_scratch() -> Option<PathBuf> {
    let shm = Path::new("/dev/shm");
    if free_bytes(shm)? < SCRATCH_NEEDS {
        return None;
    }
    let dir = shm.join(format!("hipfile-torch-pip-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

/// Installs [`REQUIREMENTS`] into the venv whose interpreter is `python`.
fn install_requirements(venv: &Path, python: &Path) -> Result<(), String> {
    if !has_torch(venv) {
        let parent = venv.parent().unwrap_or(venv);
        if let Some(free) = free_bytes(parent).filter(|&free| free < INSTALL_NEEDS) {
            return Err(format!(
                "installing PyTorch from PyPI into {} needs about {} GiB free there; {:.1} GiB \
                 are free: make room (`cargo clean` frees the build) and run again",
                venv.display(),
                INSTALL_NEEDS / GIB,
                free as f64 / GIB as f64
            ));
        }
    }
    let mut install = vec!["-m", "pip", "install", "--quiet", "--no-cache-dir"];
    install.extend(REQUIREMENTS);
    let scratch = pip_scratch();
    let env = match &scratch {
        Some(dir) => vec![("TMPDIR", utf8(dir)?)],
        None => Vec::new(),
    };
    let result = run(python, &install, None, &env);
    if let Some(dir) = &scratch {
        // Best effort: a leftover scratch directory on a tmpfs goes with the next reboot.
        let _ = std::fs::remove_dir_all(dir);
    }
    result
}

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
    install_requirements(&venv, &python)?;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn df_reports_parse() {
        let report = "Filesystem     1024-blocks     Used Available Capacity Mounted on\n\
                      /dev/vda         263174212 41943040  53477376      44% /\n";
        assert_eq!(available(report), Some(53_477_376 * 1024));
        assert_eq!(available("Filesystem 1024-blocks Used Available\n"), None);
        assert_eq!(available("header\n/dev/x 1 2 lots 4% /\n"), None);
    }

    #[test]
    fn this_filesystem_has_a_size() {
        assert!(free_bytes(Path::new(".")).is_some());
        assert!(free_bytes(Path::new("/no/such/place")).is_none());
    }

    #[test]
    fn a_venv_without_torch_is_told_apart() {
        let dir = std::env::temp_dir().join(format!("xtask-torch-venv-{}", std::process::id()));
        let site = dir.join("lib").join("python3.11").join("site-packages");
        std::fs::create_dir_all(&site).unwrap();
        assert!(!has_torch(&dir));
        std::fs::create_dir(site.join("torch")).unwrap();
        assert!(has_torch(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
