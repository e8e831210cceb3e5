//! `inspect_runtime` against real libraries: Debian's ROCm 5.2 runtime (no device here, no
//! AMD file I/O) and a path that does not exist.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile::{ConfigBuilder, Platform, inspect_runtime};
use hipfile_testfs::{Skip, require};
use std::path::Path;

const DEBIAN: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

fn debian_runtime() -> Result<(), Skip> {
    if Path::new(DEBIAN).exists() {
        Ok(())
    } else {
        Err(Skip(format!(
            "{DEBIAN} is not installed (apt-get install libamdhip64-5)"
        )))
    }
}

#[test]
fn debian_rocm5_loads_and_reports_no_device_and_no_amd_file_io() {
    require!(debian_runtime());
    let config = ConfigBuilder::new()
        .hip_library(DEBIAN)
        .build_with(|_| None)
        .0;
    let r = inspect_runtime(&config);
    assert_eq!(r.platform, Platform::Amd, "{r:?}");
    assert_eq!(r.library.as_deref(), Some(Path::new(DEBIAN)));
    assert!(
        r.version.as_deref().is_some_and(|v| v.starts_with("5.")),
        "{r:?}"
    );
    assert!(!r.amd_file_io);
    let error = r.error.unwrap();
    assert!(error.to_lowercase().contains("device"), "{error}");
}

#[test]
fn a_missing_explicit_library_is_reported_with_the_path() {
    let config = ConfigBuilder::new()
        .hip_library("/nonexistent/libamdhip64.so")
        .build_with(|_| None)
        .0;
    let r = inspect_runtime(&config);
    assert_eq!(r.platform, Platform::None);
    assert!(!r.amd_file_io && r.library.is_none() && r.version.is_none());
    assert!(r.error.unwrap().contains("/nonexistent/libamdhip64.so"));
}

#[test]
fn a_driver_that_cannot_load_its_runtime_keeps_the_loaders_error_as_its_source() {
    let config = ConfigBuilder::new()
        .hip_library("/nonexistent/libamdhip64.so")
        .build_with(|_| None)
        .0;
    let e = hipfile::Driver::open_private(config).unwrap_err();
    assert!(matches!(e, hipfile::Error::DriverOpen(_)), "{e:?}");
    let source = std::error::Error::source(&e).expect("DriverOpen has a source");
    let load = source
        .downcast_ref::<hipfile::sys::LoadError>()
        .expect("the source is the loader's error");
    assert!(
        load.to_string().contains("/nonexistent/libamdhip64.so"),
        "{load}"
    );
    // The message still says what was tried, for callers that only print it.
    assert!(e.to_string().contains("/nonexistent/libamdhip64.so"), "{e}");
}
