//! Loads Debian's ROCm 5.2 runtime (`libamdhip64-5`) and checks what it reports on a machine
//! that may have no GPU.
//!
//! Observed on a host without a GPU (no `/dev/kfd`): loading prints nothing and takes a few
//! milliseconds; `hipInit(0)` returns `hipErrorInvalidDevice` (101) and does not crash or
//! hang; `hipGetDeviceCount` returns `hipErrorNoDevice` (100) with a count of 0;
//! `hipRuntimeGetVersion` succeeds with 50221153 (5.2.21153) even without a device.
//!
//! Capability-gated: without the library the tests print `SKIP` and pass, unless
//! `HIPFILE_TEST_STRICT=1`, which turns the missing capability into a failure.
//!
//! # Safety
//!
//! The only `unsafe` calls are wrappers whose capability is absent in ROCm 5.2, so they
//! return before reaching the runtime; each block says so.

use hipfile_sys::{CandidateOrigin, Hip, HipError, LoadOptions, RuntimeVersion};
use std::path::Path;

const DEBIAN_LIBRARY: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

// Tests may read the environment: this switch belongs to the test harness, not the library.
#[allow(clippy::disallowed_methods)]
fn strict() -> bool {
    std::env::var_os("HIPFILE_TEST_STRICT").is_some_and(|v| v == "1")
}

/// Whether Debian's runtime is installed; prints `SKIP` (or panics in strict mode) if not.
fn require_libamdhip64_5(test: &str) -> bool {
    if Path::new(DEBIAN_LIBRARY).exists() {
        return true;
    }
    let message =
        format!("SKIP {test}: libamdhip64.so.5 not installed (apt-get install libamdhip64-5)");
    assert!(!strict(), "{message}");
    eprintln!("{message}");
    false
}

fn load_debian() -> Hip {
    match Hip::load_path(Path::new(DEBIAN_LIBRARY)) {
        Ok(hip) => hip,
        Err(e) => panic!("{DEBIAN_LIBRARY} is installed but did not load:\n{e}"),
    }
}

#[test]
fn loads_by_path() {
    if !require_libamdhip64_5("loads_by_path") {
        return;
    }
    let hip = load_debian();
    eprintln!("loaded {}", hip.library_path().display());
    assert_eq!(hip.candidate().origin, CandidateOrigin::Explicit);
    assert!(
        hip.library_path()
            .to_string_lossy()
            .contains("libamdhip64.so.5"),
        "{}",
        hip.library_path().display()
    );
    // ROCm 5.2 has neither hipGetProcAddress nor the AMD file entry points.
    assert!(hip.fns().hipGetProcAddress.is_none());
    assert!(!hip.has_amd_file_io());
    assert!(hip.amd_file_fns().is_none());
}

#[test]
fn loads_by_soname_search() {
    if !require_libamdhip64_5("loads_by_soname_search") {
        return;
    }
    assert!(Hip::is_present(&LoadOptions::default()));
    let hip = match Hip::load(&LoadOptions::default()) {
        Ok(hip) => hip,
        Err(e) => panic!("the search did not find the installed runtime:\n{e}"),
    };
    eprintln!(
        "search loaded {} (as {})",
        hip.library_path().display(),
        hip.candidate()
    );
    // A newer ROCm elsewhere on this machine would be found first; only the Debian one is
    // known to lack the AMD file entry points.
    if hip.library_path() == Path::new(DEBIAN_LIBRARY)
        || hip.candidate().path == Path::new("libamdhip64.so.5")
    {
        assert!(!hip.has_amd_file_io());
    }
}

#[test]
fn versions_without_a_device() {
    if !require_libamdhip64_5("versions_without_a_device") {
        return;
    }
    let hip = load_debian();
    let runtime = hip.runtime_version();
    let driver = hip.driver_version();
    eprintln!("hipRuntimeGetVersion: {runtime:?}; hipDriverGetVersion: {driver:?}");
    if let Ok(v) = runtime {
        eprintln!("runtime {}", RuntimeVersion(v));
        assert_eq!(RuntimeVersion(v).major(), 5);
    }
}

#[test]
fn init_and_device_count_do_not_crash() {
    if !require_libamdhip64_5("init_and_device_count_do_not_crash") {
        return;
    }
    let hip = load_debian();
    let init = hip.init();
    eprintln!("hipInit(0): {init:?}");
    if let Err(e) = init {
        eprintln!("  {} / {}", hip.error_name(e), hip.error_string(e));
    }
    match hip.device_count() {
        Ok(n) => {
            eprintln!("hipGetDeviceCount: {n} device(s)");
            assert!(n >= 0);
        }
        Err(e) => eprintln!("hipGetDeviceCount: {e} ({})", hip.error_string(e)),
    }
    eprintln!("hipGetDevice: {:?}", hip.get_device());
    // Without a device, queries must fail cleanly rather than crash.
    let local = 0u64;
    let attrs = hip.pointer_attributes((&raw const local).cast());
    eprintln!("hipPointerGetAttributes(stack address): {attrs:?}");
    let range = hip.mem_get_address_range((&raw const local).cast());
    eprintln!("hipMemGetAddressRange(stack address): {range:?}");
    assert!(range.is_err() || hip.device_count().is_ok_and(|n| n > 0));
}

#[test]
fn error_strings_come_from_the_runtime() {
    if !require_libamdhip64_5("error_strings_come_from_the_runtime") {
        return;
    }
    let hip = load_debian();
    let text = hip.error_string(HipError::NO_DEVICE);
    eprintln!("hipGetErrorString(100) = {text:?}");
    assert!(!text.is_empty());
    assert_eq!(hip.error_name(HipError::NO_DEVICE), "hipErrorNoDevice");
    // An unknown code must not crash the runtime's lookup either.
    eprintln!(
        "hipGetErrorString(12345) = {:?}",
        hip.error_string(HipError(12345))
    );
}

#[test]
fn optional_symbols_of_rocm_5_2() {
    if !require_libamdhip64_5("optional_symbols_of_rocm_5_2") {
        return;
    }
    let hip = load_debian();
    // `hipLaunchHostFunc` is not exported by Debian's 5.2 build; the wrapper says so.
    if !hip.has_launch_host_func() {
        // SAFETY: the wrapper returns before calling anything when the symbol is absent.
        let r = unsafe {
            hip.launch_host_func(hipfile_sys::hipStream_t::NULL, None, std::ptr::null_mut())
        };
        assert_eq!(r, Err(HipError::NOT_SUPPORTED));
    }
    // The stream memory operations and queries are there (since HIP 4.2 and 4.4), although
    // the host functions that go with them in hipfile's pattern are not.
    assert!(hip.has_stream_wait_value());
    let fns = hip.fns();
    assert!(fns.hipStreamWaitValue64.is_some() && fns.hipStreamWriteValue64.is_some());
    assert!(fns.hipStreamQuery.is_some() && fns.hipEventQuery.is_some());
    let handle = hipfile_sys::hipAmdFileHandle_t::from_fd(-1);
    // SAFETY: the capability is absent, so nothing is called.
    let r = unsafe { hip.amd_file_read(handle, std::ptr::null_mut(), 4096, 0) };
    assert_eq!(r, Err(hipfile_sys::AmdFileIoError::Unavailable));
}
