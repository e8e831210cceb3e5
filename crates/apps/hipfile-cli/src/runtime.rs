//! `--runtime`: the settings that make a command load the GPU runtime asked for. `auto`
//! leaves the choice to the configuration (the environment, then the usual places);
//! `emulated` names the emulated runtime that is installed beside this program. Also the
//! driver's opening and the files' registration, with messages that say each thing once.

use hipfile::{ConfigBuilder, Driver, Error, NoDevice, Platform};
use std::path::{Path, PathBuf};

/// Which GPU runtime a command loads (`--runtime`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum RuntimeChoice {
    /// The runtime the configuration finds on this machine.
    #[default]
    Auto,
    /// The emulated runtime beside this program.
    Emulated,
}

/// The file name of the emulated runtime.
pub const EMULATED_LIBRARY: &str = "libhipfile_emu.so";

/// The settings for `choice`. For the emulated runtime, says on stderr which library is used,
/// so that no one mistakes its results for a GPU's.
///
/// # Errors
///
/// For `emulated`, when the library is not found: the message names every place looked at.
pub fn settings(choice: RuntimeChoice) -> Result<ConfigBuilder, String> {
    match choice {
        RuntimeChoice::Auto => Ok(ConfigBuilder::new()),
        RuntimeChoice::Emulated => {
            let path = find_emulated()?;
            eprintln!(
                "hipfile: using the emulated runtime {} (test and development only)",
                path.display()
            );
            Ok(ConfigBuilder::new().hip_library(path))
        }
    }
}

/// Where the emulated runtime may be, in order, for a program in `dir`: beside it (where
/// `cargo build` puts a library), then in `deps/` (where a dependency's library lies while
/// the program is built for tests).
pub fn emulated_candidates(dir: &Path) -> [PathBuf; 2] {
    [
        dir.join(EMULATED_LIBRARY),
        dir.join("deps").join(EMULATED_LIBRARY),
    ]
}

fn find_emulated() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| {
        format!("--runtime emulated: cannot find where this program is, to look beside it: {e}")
    })?;
    let Some(dir) = exe.parent() else {
        return Err(format!(
            "--runtime emulated: {} has no directory to look in",
            exe.display()
        ));
    };
    let candidates = emulated_candidates(dir);
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
    Err(format!(
        "--runtime emulated: {EMULATED_LIBRARY} not found (looked at {})",
        tried.join(" and ")
    ))
}

/// Opens the driver with `settings`, made for `choice`.
///
/// # Errors
///
/// The message of [`driver_open_failed`], with what to do without a GPU
/// ([`without_a_gpu`]).
pub fn open_driver(settings: ConfigBuilder, choice: RuntimeChoice) -> Result<Driver, String> {
    Driver::open_with(settings).map_err(|e| without_a_gpu(&e, choice))
}

/// What to do on a machine without a GPU, for the tools: `--runtime emulated`.
const TRY_EMULATED: &str = "on a machine without a GPU, add --runtime emulated to run on \
                            hipfile's emulated runtime (test and development only)";

/// Why the driver could not be opened, and what to do: for a runtime that sees no device,
/// which runtime and what it answered, then (the emulated runtime) its device count or
/// (another) making the GPU visible or, without one, `--runtime emulated`; for no runtime,
/// the loader's message and, unless the emulated runtime was asked for, `--runtime
/// emulated`.
pub fn without_a_gpu(e: &Error, choice: RuntimeChoice) -> String {
    let no_device = match e {
        Error::DriverOpen(source) => source.downcast_ref::<NoDevice>(),
        _ => None,
    };
    match (no_device, choice) {
        (Some(d), _) if d.runtime.platform == Platform::Emulated => {
            format!("{}; {}", d.what(), d.advice())
        }
        (Some(d), _) => format!(
            "{}; check that the GPU and its driver are visible to this process (the device \
             nodes, /dev/kfd and /dev/dri for AMD or /dev/nvidia* for NVIDIA, and \
             HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES); {TRY_EMULATED}",
            d.what()
        ),
        (None, RuntimeChoice::Auto) if matches!(e, Error::DriverOpen(_)) => {
            format!("{}\n{TRY_EMULATED}", driver_open_failed(e))
        }
        (None, _) => driver_open_failed(e),
    }
}

/// What to do about `blocked`'s want of a runtime or device, for `hipfile check`: the
/// emulated runtime's device count, or `--runtime emulated`.
pub fn no_gpu_advice(platform: Platform) -> &'static str {
    match platform {
        Platform::Emulated => {
            "the emulated runtime has the devices HIPFILE_EMU_DEVICES gives (1 when it is \
             unset, up to 16): unset it or set it to 1 or more"
        }
        _ => TRY_EMULATED,
    }
}

/// Why the runtime has no usable device, if it said so when it was loaded, as a note to add
/// to an allocation error: ` (the runtime reported: …)`, or nothing.
pub fn runtime_note(driver: &Driver) -> String {
    driver
        .runtime()
        .error
        .as_ref()
        .map(|e| format!(" (the runtime reported: {e})"))
        .unwrap_or_default()
}

/// Says that the driver could not be opened, and why: [`Error::DriverOpen`]'s own message
/// already starts with "cannot open the hipfile driver".
pub fn driver_open_failed(e: &Error) -> String {
    match e {
        Error::DriverOpen(_) => e.to_string(),
        other => format!("cannot open the hipfile driver: {other}"),
    }
}

/// Says that `what` could not be registered, and why: the probe's error alone, without
/// [`Error::Probe`]'s own "cannot register the file".
pub fn register_failed(what: &str, e: &Error) -> String {
    match e {
        Error::Probe(probe) => format!("cannot register {what} for GPU I/O: {probe}"),
        other => format!("cannot register {what} for GPU I/O: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_and_registration_messages_say_each_thing_once() {
        let e = Error::DriverOpen("no HIP runtime found".into());
        assert_eq!(
            driver_open_failed(&e),
            "cannot open the hipfile driver: no HIP runtime found"
        );
        let e = driver_open_failed(&Error::DriverAlreadyOpen);
        assert!(
            e.starts_with("cannot open the hipfile driver: the hipfile driver is already open"),
            "{e}"
        );
        let probe = hipfile::probe::ProbeError::GetFlags {
            fd: 7,
            errno: rustix::io::Errno::BADF,
        };
        let e = register_failed("/data/w.bin", &Error::Probe(probe));
        assert!(
            e.starts_with(
                "cannot register /data/w.bin for GPU I/O: fcntl(F_GETFL) on descriptor 7"
            ),
            "{e}"
        );
        assert_eq!(e.matches("cannot register").count(), 1, "{e}");
        let e = register_failed("the test file", &Error::HandleNotRegistered);
        assert!(
            e.starts_with("cannot register the test file for GPU I/O: "),
            "{e}"
        );
    }

    #[test]
    fn looks_beside_the_program_then_in_deps() {
        assert_eq!(
            emulated_candidates(Path::new("/t/debug")),
            [
                PathBuf::from("/t/debug/libhipfile_emu.so"),
                PathBuf::from("/t/debug/deps/libhipfile_emu.so")
            ]
        );
    }

    #[test]
    fn auto_changes_nothing() {
        assert_eq!(settings(RuntimeChoice::Auto), Ok(ConfigBuilder::new()));
    }
}
