//! How the examples end: an error is printed in words, `NAME: message` (never the debug
//! dump that `main` returning `Result` prints), with what to do when the driver cannot open
//! for want of a runtime, and the exit status is 1. A runtime that sees no device says what
//! to do in its own message (`hipfile::NoDevice`).

use std::error::Error;
use std::process::ExitCode;

/// Runs example `name`'s body and ends the process as above.
pub fn main(name: &str, body: impl FnOnce() -> Result<(), Box<dyn Error>>) -> ExitCode {
    match body() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            if let Some(hint) = hint(name, &*e) {
                eprintln!("{name}: {hint}");
            }
            ExitCode::FAILURE
        }
    }
}

/// What to do when no runtime could be loaded: the emulated one, on a machine without a GPU.
fn hint(name: &str, e: &(dyn Error + 'static)) -> Option<String> {
    let Some(hipfile::Error::DriverOpen(source)) = e.downcast_ref::<hipfile::Error>() else {
        return None;
    };
    if source.downcast_ref::<hipfile::NoDevice>().is_some() {
        return None;
    }
    Some(format!(
        "on a machine without a GPU, run it on hipfile's emulated runtime: \
         HIPFILE_HIP_LIBRARY=$(cargo xtask emulated) cargo run -p hipfile --example {name}"
    ))
}

/// A file the example wrote for itself, removed when this goes (on an error too).
#[allow(dead_code)] // Not every example writes one.
pub struct Scratch(pub std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
