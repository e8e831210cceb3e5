//! `Driver::bar1_size`: the device's BAR1 where the runtime tells it, an invalid device
//! refused before the runtime is asked, and a runtime that cannot tell it (the emulated HIP
//! runtime, as AMD's) saying so. NVML's side is tested in `hipfile-sys` and
//! `hipfile-runtime`, over a stand-in NVML.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile::{ConfigBuilder, Driver, Error, RuntimeReport};
use hipfile_testfs::{emulated_runtime, require};
use hipfile_testkit::HostMemRuntime;
use std::sync::Arc;

fn driver_over(runtime: HostMemRuntime) -> Driver {
    let config = ConfigBuilder::new().build_with(|_| None).0;
    Driver::with_runtime(config, Arc::new(runtime), RuntimeReport::default())
}

#[test]
fn a_runtime_that_tells_it_gives_each_devices_bar1() {
    let d = driver_over(
        HostMemRuntime::builder()
            .devices(2)
            .bar1_size(256 << 30)
            .build(),
    );
    assert_eq!(d.bar1_size(0).unwrap(), 256 << 30);
    assert_eq!(d.bar1_size(1).unwrap(), 256 << 30);
    for bad in [2, -1] {
        match d.bar1_size(bad) {
            Err(Error::InvalidValue { what, .. }) => {
                assert!(what.contains(&format!("device {bad}")), "{what}");
                assert!(what.contains("2 device(s)"), "{what}");
            }
            other => panic!("device {bad}: {other:?}"),
        }
    }
}

#[test]
fn a_runtime_that_cannot_tell_it_says_so() {
    let d = driver_over(HostMemRuntime::new());
    match d.bar1_size(0) {
        Err(Error::Runtime(e)) => assert!(e.is_unsupported(), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_emulated_hip_runtime_cannot_tell_it_as_amds_cannot() {
    let lib = require!(emulated_runtime());
    let config = ConfigBuilder::new().hip_library(lib).build_with(|_| None).0;
    let d = Driver::open_private(config).unwrap();
    match d.bar1_size(0) {
        Err(Error::Runtime(e)) => {
            assert!(e.is_unsupported(), "{e}");
            assert!(e.message.contains("HIP runtime tells no BAR size"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        d.bar1_size(d.device_count().unwrap()),
        Err(Error::InvalidValue { .. })
    ));
}
