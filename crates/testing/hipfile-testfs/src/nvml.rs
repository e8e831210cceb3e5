//! A stand-in for NVIDIA's NVML (`libnvidia-ml.so.1`), built from `c/nvml_standin.c` with the
//! machine's C compiler, for the tests of the code that asks NVML a device's BAR1 size on
//! machines without an NVIDIA driver: the same five calls, over two made-up devices
//! ([`BAR1_BUS_ID`], [`NO_BAR1_BUS_ID`]). Where `cargo xtask ci` has fetched NVIDIA's
//! `nvml.h` (`<target>/nvidia-headers/nvml-13.0/include`), the stand-in is built against it,
//! so that its definitions must match NVML's declarations and its struct is NVML's.

use crate::host::has_command;
use crate::skip::Skip;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The bus id of the stand-in's device that reports a BAR1, as CUDA writes bus ids.
pub const BAR1_BUS_ID: &str = "0000:C1:00.0";

/// That device's BAR1 size: 256 GiB, as NVIDIA's H200 reports it.
pub const BAR1_BYTES: u64 = 256 << 30;

/// The bus id of the stand-in's device whose BAR1 NVML does not report
/// (`NVML_ERROR_NOT_SUPPORTED`).
pub const NO_BAR1_BUS_ID: &str = "0000:C2:00.0";

/// The name of the stand-in's extra function, `int standin_nvml_sessions(void)`: how many
/// `nvmlInit_v2` calls no `nvmlShutdown` has given back.
pub const SESSIONS_SYMBOL: &str = "standin_nvml_sessions";

/// A built stand-in.
#[derive(Debug, Clone)]
pub struct NvmlStandin {
    /// The shared library, to load by path.
    pub library: PathBuf,
    /// NVIDIA's `nvml.h` it was built against, if it was found.
    pub header: Option<PathBuf>,
}

/// Builds the stand-in into `dir` (each call a library of its own, with its own count of
/// sessions, however many tests of a process load one).
///
/// # Panics
///
/// When the compiler rejects the stand-in.
///
/// # Errors
///
/// A [`Skip`] when there is no `cc`.
pub fn nvml_standin(dir: &Path) -> Result<NvmlStandin, Skip> {
    has_command("cc")?;
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("c/nvml_standin.c");
    let library = dir.join("libnvidia-ml-standin.so");
    let header = nvml_include();
    let mut cc = Command::new("cc");
    cc.args([
        "-std=c11", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
    ]);
    if let Some(include) = &header {
        cc.arg("-DWITH_NVML_H").arg("-I").arg(include);
    }
    let out = cc
        .arg("-o")
        .arg(&library)
        .arg(&source)
        .output()
        .unwrap_or_else(|e| panic!("cannot run cc: {e}"));
    assert!(
        out.status.success(),
        "cc rejected {}:\n{}",
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(NvmlStandin {
        library,
        header: header.map(|d| d.join("nvml.h")),
    })
}

/// `<target>/nvidia-headers/nvml-13.0/include`, when it has `nvml.h`; the target directory
/// is found from the test binary (`<target>/<profile>/deps/<test>`).
fn nvml_include() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    exe.ancestors().skip(3).take(2).find_map(|target| {
        let include = target.join("nvidia-headers/nvml-13.0/include");
        include.join("nvml.h").is_file().then_some(include)
    })
}
