//! What the GPU runtime on this machine offers, as `hipfile check` reports it.

use hipfile_core::Config;
use hipfile_sys::{Hip, LoadOptions, RuntimeVersion};
use std::path::PathBuf;

/// Which GPU runtime was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    /// AMD's HIP runtime (`libamdhip64`).
    Amd,
    /// No runtime could be loaded.
    None,
}

impl Platform {
    /// `amd` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Amd => "amd",
            Platform::None => "none",
        }
    }
}

/// The runtime as found on this machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeReport {
    /// Which runtime.
    pub platform: Platform,
    /// The library that was loaded.
    pub library: Option<PathBuf>,
    /// The runtime's version (`major.minor.patch`), when it answered.
    pub version: Option<String>,
    /// Whether `hipAmdFileRead` and `hipAmdFileWrite` are both available.
    pub amd_file_io: bool,
    /// What went wrong, if anything: no library found (with what was tried), or the runtime's
    /// own error (for example no device).
    pub error: Option<String>,
}

/// Loads the runtime the way a driver would (`config`'s library path, `ROCM_PATH`, the usual
/// places) and reports what it offers. Never fails: problems are in [`RuntimeReport::error`].
pub fn inspect_runtime(config: &Config) -> RuntimeReport {
    let options = LoadOptions {
        explicit_path: config.hip_library.clone(),
        rocm_path: config.rocm_path.clone(),
    };
    let hip = match Hip::load(&options) {
        Ok(hip) => hip,
        Err(e) => {
            return RuntimeReport {
                platform: Platform::None,
                library: None,
                version: None,
                amd_file_io: false,
                error: Some(e.to_string()),
            };
        }
    };
    let version = hip
        .runtime_version()
        .ok()
        .map(|v| RuntimeVersion(v).to_string());
    let error = match hip.device_count() {
        Ok(n) if n > 0 => None,
        Ok(_) => Some("the runtime reports no GPU device".to_string()),
        Err(e) => {
            let text = hip.error_string(e);
            Some(if text.is_empty() || text == hip.error_name(e) {
                format!("hipGetDeviceCount failed: {e}")
            } else {
                format!("hipGetDeviceCount failed: {e}: {text}")
            })
        }
    };
    RuntimeReport {
        platform: Platform::Amd,
        library: Some(hip.library_path().to_path_buf()),
        version,
        amd_file_io: hip.has_amd_file_io(),
        error,
    }
}
