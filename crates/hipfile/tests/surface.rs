//! The crate root names every type that the facade's public signatures use, so that a user
//! never needs the unstable `core`/`probe`/`sys` paths to write down a type they were handed.
//! This file compiles only while that holds; the one test checks the errors' sources.

#![allow(dead_code)] // The functions exist to be type-checked.

use std::sync::Arc;

// Driver and file handles: what they take and return.
fn driver(
    d: &hipfile::Driver,
    c: hipfile::Config,
    b: hipfile::ConfigBuilder,
    r: hipfile::RuntimeReport,
    g: Arc<dyn hipfile::GpuRuntime>,
) -> (
    Option<hipfile::StatsSnapshot>,
    Option<Vec<hipfile::DeviceStats>>,
    hipfile::Platform,
) {
    let _ = (c, b, g, d.config(), d.runtime());
    (d.stats(), d.device_stats(), r.platform)
}

fn file(fh: &hipfile::FileHandle) -> (&hipfile::FileFacts, Option<hipfile::IoOutcome>) {
    (fh.facts(), None)
}

fn views(
    b: &mut hipfile::DeviceBuffer,
) -> Result<(hipfile::DeviceSlice<'_>, hipfile::DevicePtr), hipfile::Error> {
    let p = b.ptr();
    Ok((b.slice(..)?, p))
}

fn view_mut(b: &mut hipfile::DeviceBuffer) -> Result<hipfile::DeviceSliceMut<'_>, hipfile::Error> {
    b.slice_mut(..)
}

fn pinned(p: hipfile::PinnedHostBuffer) -> usize {
    p.len()
}

// Configuration.
fn config(c: &hipfile::Config) -> (hipfile::PlatformChoice, hipfile::FallbackKnobs) {
    (c.platform, c.fallback)
}

fn warnings(w: hipfile::ConfigWarning) -> hipfile::ConfigWarning {
    w
}

// `explain` and what it answers.
fn explain(
    c: &hipfile::Config,
    f: &hipfile::FileFacts,
    r: &hipfile::Request,
    b: &hipfile::BufferFacts,
) -> Result<hipfile::Decision, hipfile::Error> {
    hipfile::explain(c, true, f, r, b)
}

fn verdict(v: hipfile::Verdict, k: hipfile::BackendKind, r: hipfile::Reason, o: hipfile::Op) {
    let _ = (v, k, r, o, hipfile::MemoryKind::Device);
}

// Every error a variant of `Error` carries.
fn errors(
    e: &hipfile::Error,
    b: hipfile::BackendError,
    r: hipfile::RuntimeError,
    f: hipfile::FileIoError,
    p: hipfile::ProbeError,
    u: hipfile::Unusable,
    (n, d): (hipfile::NoRuntime, hipfile::NoDevice),
) -> (hipfile::ErrorCode, Option<hipfile::HipFileCode>) {
    let _ = (b, r, f, p, u, n, d);
    (e.code(), None)
}

#[test]
fn every_error_with_a_cause_returns_it_as_its_source() {
    let e = hipfile::Error::Runtime(hipfile::core::RuntimeError::new(
        "hipMemcpy",
        1,
        "invalid value",
    ));
    assert!(std::error::Error::source(&e).is_some());
    let e = hipfile::Error::DriverOpen("no runtime".into());
    assert_eq!(
        std::error::Error::source(&e).map(ToString::to_string),
        Some("no runtime".to_string())
    );
}
