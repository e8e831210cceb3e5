//! Which GPU runtime to load, and what it offers (as `hipfile check` reports it): the one
//! policy of this crate. `HIP_PLATFORM` (through [`Config::platform`]) picks AMD or NVIDIA;
//! unset, a HIP runtime comes first, then CUDA, and a HIP runtime that sees no device gives way
//! to a CUDA runtime that sees one. The runtimes themselves (`hip.rs`, `cuda.rs`) decide
//! nothing.

use crate::cuda::CudaRuntime;
use crate::hip::{HipRuntime, RuntimeKind};
use hipfile_core::{Config, Error, GpuRuntime, PlatformChoice};
use hipfile_sys::{CudaLoadOptions, LoadError, LoadOptions, RuntimeVersion};
use std::path::PathBuf;
use std::sync::Arc;

/// Which GPU runtime was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Platform {
    /// AMD's HIP runtime (`libamdhip64`).
    Amd,
    /// The emulated runtime of `hipfile-emu` (tests and development only).
    Emulated,
    /// NVIDIA's CUDA runtime (no AMD file I/O: the fallback serves).
    Nvidia,
    /// No runtime could be loaded.
    #[default]
    None,
}

impl Platform {
    /// `amd`, `emulated`, `nvidia` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Amd => "amd",
            Platform::Emulated => "emulated",
            Platform::Nvidia => "nvidia",
            Platform::None => "none",
        }
    }
}

/// The runtime as found on this machine. The default is the report of no runtime.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RuntimeReport {
    /// Which runtime.
    pub platform: Platform,
    /// The library that was loaded.
    pub library: Option<PathBuf>,
    /// The runtime's version (`major.minor.patch`), when it answered.
    pub version: Option<String>,
    /// Whether `hipAmdFileRead` and `hipAmdFileWrite` are both available.
    pub amd_file_io: bool,
    /// GPU devices the runtime reports (0 when it reports none or failed).
    pub devices: u32,
    /// What went wrong, if anything: no library found (with what was tried), or the runtime's
    /// own error (for example no device).
    pub error: Option<String>,
}

/// Loads the runtime the way a driver would (`config`'s library path, `ROCM_PATH`, the usual
/// places) and reports what it offers. Never fails: problems are in [`RuntimeReport::error`].
pub fn inspect_runtime(config: &Config) -> RuntimeReport {
    match load_runtime(config) {
        Ok((_, report)) => report,
        Err(e) => RuntimeReport {
            platform: Platform::None,
            library: None,
            version: None,
            amd_file_io: false,
            devices: 0,
            error: Some(match e {
                Error::DriverOpen(source) => source.to_string(),
                other => other.to_string(),
            }),
        },
    }
}

/// Neither runtime could be loaded (`HIP_PLATFORM` unset): both loaders' errors, each with
/// every library it tried. [`source`](std::error::Error::source) is the HIP loader's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no GPU runtime found.\nAMD: {amd}\nNVIDIA: {nvidia}")]
pub struct NoRuntime {
    /// Why no HIP runtime loaded.
    #[source]
    pub amd: LoadError,
    /// Why no CUDA runtime loaded.
    pub nvidia: LoadError,
}

/// A runtime loaded but sees no GPU device (none installed, none visible to the process, or
/// the runtime refused to start): what `Driver::open` fails with, as the source of its
/// `Error::DriverOpen`. Its message names the runtime, says what it answered and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NoDevice {
    /// The runtime, as loaded (`devices` is 0; `error` is what it answered).
    pub runtime: RuntimeReport,
}

impl NoDevice {
    /// The error for `runtime`, which reports no device.
    pub fn new(runtime: RuntimeReport) -> NoDevice {
        NoDevice { runtime }
    }

    /// What to do, in words, for a program whose user chooses the runtime through the
    /// environment: for the emulated runtime, its device count; for another, making the GPU
    /// visible or, without one, naming the emulated runtime.
    pub fn advice(&self) -> &'static str {
        match self.runtime.platform {
            Platform::Emulated => {
                "the emulated runtime has the devices HIPFILE_EMU_DEVICES gives (1 when it \
                 is unset, up to 16), and none when one of its HIPFILE_EMU_* variables is \
                 invalid: unset HIPFILE_EMU_DEVICES or set it to 1 or more"
            }
            _ => {
                "check that the GPU and its driver are visible to this process (the \
                 device nodes, /dev/kfd and /dev/dri for AMD or /dev/nvidia* for NVIDIA, and \
                 HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES); on a machine without a GPU, \
                 name hipfile's emulated runtime in HIPFILE_HIP_LIBRARY (`cargo xtask \
                 emulated` builds it and prints its path; for tests and development only)"
            }
        }
    }

    /// What is missing, in words: which runtime sees no device, and what it answered.
    pub fn what(&self) -> String {
        let r = &self.runtime;
        let name = match r.platform {
            Platform::Amd => "the HIP runtime",
            Platform::Emulated => "the emulated runtime",
            Platform::Nvidia => "the CUDA runtime",
            Platform::None => "the GPU runtime",
        };
        let library = r
            .library
            .as_ref()
            .map(|l| format!(" {}", l.display()))
            .unwrap_or_default();
        let said = r
            .error
            .as_ref()
            .map(|e| format!(" ({e})"))
            .unwrap_or_default();
        format!("no GPU device: {name}{library} sees none{said}")
    }
}

impl std::fmt::Display for NoDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}; {}", self.what(), self.advice())
    }
}

impl std::error::Error for NoDevice {}

fn driver_open(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::DriverOpen(Box::new(e))
}

/// Loads the runtime `config` names, as a [`GpuRuntime`] with its report: `HIP_PLATFORM=amd`
/// loads only a HIP runtime, `nvidia` only CUDA, and unset tries HIP first, then CUDA (also
/// when the HIP runtime loads but sees no device while CUDA sees one).
///
/// # Errors
///
/// [`Error::DriverOpen`] when none loads; its source is the loader's [`LoadError`] (or
/// [`NoRuntime`] when both platforms were tried), with every path tried.
pub fn load_runtime(config: &Config) -> Result<(Arc<dyn GpuRuntime>, RuntimeReport), Error> {
    let amd = || {
        let options = LoadOptions {
            explicit_path: config.hip_library.clone(),
            rocm_path: config.rocm_path.clone(),
        };
        HipRuntime::load(&options).map(hip_report)
    };
    let nvidia = || CudaRuntime::load(&CudaLoadOptions::default()).map(cuda_report);
    match config.platform {
        PlatformChoice::Amd => amd().map_err(driver_open),
        PlatformChoice::Nvidia => nvidia().map_err(driver_open),
        // An explicit HIP library means the caller wants that one: no silent switch to CUDA.
        _ if config.hip_library.is_some() => amd().map_err(driver_open),
        // `Auto` (and any choice added later that names no platform): a HIP runtime that
        // loads but sees no device (a ROCm library installed on an NVIDIA machine, say) gives
        // way to a CUDA runtime that sees one.
        _ => match amd() {
            Ok(hip) if hip.1.devices > 0 => Ok(hip),
            Ok(hip) => match nvidia() {
                Ok(cuda) if cuda.1.devices > 0 => Ok(cuda),
                _ => Ok(hip),
            },
            Err(amd) => nvidia().map_err(|nvidia| driver_open(NoRuntime { amd, nvidia })),
        },
    }
}

fn device_error(call: &str, result: Result<i32, String>) -> (u32, Option<String>) {
    match result {
        Ok(n) if n > 0 => (u32::try_from(n).unwrap_or(0), None),
        Ok(_) => (0, Some("the runtime reports no GPU device".to_string())),
        Err(e) => (0, Some(format!("{call} failed: {e}"))),
    }
}

fn hip_report(hip: HipRuntime) -> (Arc<dyn GpuRuntime>, RuntimeReport) {
    let raw = hip.hip();
    let version = raw
        .runtime_version()
        .ok()
        .map(|v| RuntimeVersion(v).to_string());
    let count = raw.device_count().map_err(|e| {
        let text = raw.error_string(e);
        if text.is_empty() || text == raw.error_name(e) {
            e.to_string()
        } else {
            format!("{e}: {text}")
        }
    });
    let (devices, error) = device_error("hipGetDeviceCount", count);
    let report = RuntimeReport {
        platform: match hip.kind() {
            RuntimeKind::Amd => Platform::Amd,
            RuntimeKind::Emulated => Platform::Emulated,
        },
        library: Some(raw.library_path().to_path_buf()),
        version,
        amd_file_io: hip.amd_file_io().is_some(),
        devices,
        error,
    };
    (Arc::new(hip), report)
}

fn cuda_report(cuda: CudaRuntime) -> (Arc<dyn GpuRuntime>, RuntimeReport) {
    let count = cuda.device_count().map_err(|e| e.to_string());
    let (devices, error) = device_error("cudaGetDeviceCount", count);
    let report = RuntimeReport {
        platform: Platform::Nvidia,
        library: Some(cuda.cuda().library_path().to_path_buf()),
        version: Some(cuda.version().to_string()),
        amd_file_io: false,
        devices,
        error,
    };
    (Arc::new(cuda), report)
}
