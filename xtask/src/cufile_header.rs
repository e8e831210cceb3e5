//! NVIDIA's own `cufile.h`, for the test that compares `libcufile.so.0`'s declarations with
//! it (`crates/hipfile-cufile/tests/layout.rs`, `nvidias_cufile_h_agrees`). Where CUDA is
//! installed the header is `/usr/local/cuda/include/cufile.h`; elsewhere `ci` takes it from
//! NVIDIA's PyPI package [`REQUIREMENT`] (pinned), which ships it, into
//! `<target>/nvidia-cufile/include/cufile.h`, where the test looks next. Only the header is
//! kept; nothing of it is committed or linked. A failure to fetch it is a failure of `ci`,
//! which would otherwise fail on the test's missing capability anyway.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The package, pinned: cuFile 1.15, CUDA 13.0's, whose layouts `libcufile.so.0` follows.
/// Later releases grew the statistics structs (1.19 added `readv`/`writev` counters at the
/// end of `CUfileStatsLevel1_t`, moving everything of levels 2 and 3); see
/// docs/DECISIONS.md, "cuFile's ABI".
pub const REQUIREMENT: &str = "nvidia-cufile==1.15.1.6";
/// The header's path inside the package's wheel.
const IN_WHEEL: &str = "nvidia/cu13/include/cufile.h";

/// Where the test finds the header taken from the package, under the target directory.
pub fn include_dir(target: &Path) -> PathBuf {
    target.join("nvidia-cufile").join("include")
}

/// Makes sure the header is where the test looks: nothing to do where CUDA installed it or
/// an earlier run fetched it; otherwise the wheel is downloaded with pip and the header
/// taken out of it.
pub fn fetch(target: &Path) -> Result<(), String> {
    let header = include_dir(target).join("cufile.h");
    if Path::new("/usr/local/cuda/include/cufile.h").is_file() || header.is_file() {
        return Ok(());
    }
    let wheels = target.join("nvidia-cufile").join("wheel");
    let wheels_arg = crate::dist::utf8(&wheels)?;
    let header_arg = crate::dist::utf8(&header)?;
    python(&[
        "-m",
        "pip",
        "download",
        "--quiet",
        "--no-deps",
        "--only-binary=:all:",
        "--dest",
        wheels_arg,
        REQUIREMENT,
    ])?;
    // The wheel is a zip file: Python's own zipfile takes the header out.
    let script = format!(
        "import glob, os, sys, zipfile\n\
         wheels = glob.glob(os.path.join(sys.argv[1], '*.whl'))\n\
         if len(wheels) != 1: sys.exit('expected one wheel in ' + sys.argv[1] + ', found ' + str(wheels))\n\
         data = zipfile.ZipFile(wheels[0]).read('{IN_WHEEL}')\n\
         os.makedirs(os.path.dirname(sys.argv[2]), exist_ok=True)\n\
         open(sys.argv[2], 'wb').write(data)\n"
    );
    python(&["-c", &script, wheels_arg, header_arg])?;
    if header.is_file() {
        Ok(())
    } else {
        Err(format!("{} was not written", header.display()))
    }
}

fn python(args: &[&str]) -> Result<(), String> {
    eprintln!("xtask: running python3 {}", args.join(" "));
    let status = Command::new("python3")
        .args(args)
        .status()
        .map_err(|e| format!("cannot run python3: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("python3 {} failed ({status})", args.join(" ")))
    }
}
