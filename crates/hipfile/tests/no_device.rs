//! Without a GPU device: `Driver::open` and `Driver::open_with` fail at once, saying what is
//! missing and what to do (`NoDevice` as the error's source), instead of a driver whose
//! first allocation fails with `hipErrorInvalidDevice`; `Driver::open_allowing_no_device`
//! opens anyway, as the C libraries' `hipFileDriverOpen` does; and the examples say what is
//! wrong in words, never with a debug dump of the error. Runtimes without a device: Debian's
//! ROCm 5 runtime where it is installed (a real one, on a machine without an AMD GPU), and
//! the emulated runtime with `HIPFILE_EMU_DEVICES=0`.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile::{ConfigBuilder, Driver, Error, NoDevice, Platform};
use hipfile_testfs::{Skip, emulated_runtime, require};
use std::path::{Path, PathBuf};
use std::process::Command;

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

/// The `NoDevice` an open failed with, and the error's message.
fn no_device(result: Result<Driver, Error>) -> (NoDevice, String) {
    let e = result.map(|d| d.runtime().clone()).unwrap_err();
    assert!(matches!(e, Error::DriverOpen(_)), "{e:?}");
    let source = std::error::Error::source(&e).expect("DriverOpen has a source");
    let cause = source
        .downcast_ref::<NoDevice>()
        .unwrap_or_else(|| panic!("not NoDevice: {source:?}"))
        .clone();
    (cause, e.to_string())
}

#[test]
fn a_runtime_that_sees_no_device_fails_the_open_and_says_what_to_do() {
    require!(debian_runtime());
    let settings = || ConfigBuilder::new().hip_library(DEBIAN);
    let (cause, text) = no_device(Driver::open_with(settings()));
    assert_eq!(cause.runtime.platform, Platform::Amd);
    assert_eq!(cause.runtime.devices, 0);
    for needle in [
        "no GPU device",
        DEBIAN,
        "HIPFILE_HIP_LIBRARY",
        "cargo xtask emulated",
    ] {
        assert!(text.contains(needle), "{needle:?} not in {text}");
    }
    // As hipFileDriverOpen does, it opens when asked to; nothing is served without a device.
    let d = Driver::open_allowing_no_device(settings()).unwrap();
    assert_eq!(d.runtime().devices, 0);
    assert!(d.alloc(4096).is_err());
    // While it is open, Driver::open_with shares it, as it shares any open driver.
    let again = Driver::open_with(settings()).unwrap();
    assert!(again.same_as(&d));
}

#[test]
#[ignore = "run by the_emulated_runtime_without_devices_fails_the_open in a child process"]
fn child_emulated_without_devices() {
    let lib = require!(emulated_runtime());
    let (cause, text) = no_device(Driver::open_with(ConfigBuilder::new().hip_library(&lib)));
    assert_eq!(cause.runtime.platform, Platform::Emulated);
    for needle in ["no GPU device", "HIPFILE_EMU_DEVICES"] {
        assert!(text.contains(needle), "{needle:?} not in {text}");
    }
    let (_, text) = no_device(Driver::open());
    assert!(text.contains("HIPFILE_EMU_DEVICES"), "{text}");
}

#[test]
fn the_emulated_runtime_without_devices_fails_the_open() {
    let lib = require!(emulated_runtime());
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_emulated_without_devices",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("HIPFILE_EMU_DEVICES", "0")
        .env("HIPFILE_HIP_LIBRARY", &lib)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
}

/// The examples of this crate, built for this test's profile (cargo builds them for `cargo
/// test`, but not for `cargo test --test no_device`): their directory.
fn examples() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test>
    let profile = exe.parent().and_then(Path::parent).unwrap();
    let mut cargo = Command::new(env!("CARGO"));
    cargo.args([
        "build",
        "--quiet",
        "--locked",
        "-p",
        "hipfile",
        "--examples",
    ]);
    if let Some(dir) = profile.parent() {
        // A build for an explicit target (as `cargo xtask sanitize` makes) lies under
        // target/<triple>/<profile>: build the examples for the same triple there.
        let triple = dir
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| n.matches('-').count() >= 2);
        match (triple, dir.parent()) {
            (Some(triple), Some(root)) => {
                cargo
                    .arg("--target")
                    .arg(triple)
                    .arg("--target-dir")
                    .arg(root);
            }
            _ => {
                cargo.arg("--target-dir").arg(dir);
            }
        }
    }
    if profile.file_name().is_some_and(|n| n == "release") {
        cargo.arg("--release");
    }
    assert!(
        cargo.status().unwrap().success(),
        "the examples do not build"
    );
    profile.join("examples")
}

const EXAMPLES: [&str; 6] = [
    "read_verify",
    "copy_through_gpu",
    "parallel_read",
    "foreign_memory",
    "many_in_flight",
    "stream_then_use",
];

/// Runs example `name` with `env`; its exit status and stderr. Its temporary directory is a
/// fresh one, which must be empty again when it ends: an example that fails leaves none of
/// the files it wrote for itself.
fn run_example(dir: &Path, name: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let tmp = hipfile_testfs::TempDir::new("example-tmp");
    let mut cmd = Command::new(dir.join(name));
    for var in [
        "HIPFILE_HIP_LIBRARY",
        "HIPFILE_EMU_DEVICES",
        "HIPFILE_EMU_FAULT",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("TMPDIR", tmp.path());
    let out = cmd.envs(env.iter().copied()).output().unwrap();
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "{name} left {left:?} behind");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every example, on a machine without a device or without a runtime, exits with status 1
/// and one message that names the problem and the fix: no `Error: DriverOpen(...)` dump.
#[test]
fn the_examples_say_what_is_missing_and_what_to_do() {
    let lib = require!(emulated_runtime());
    let lib = lib.to_str().unwrap();
    let dir = examples();
    for name in EXAMPLES {
        for (env, needles) in [
            (
                &[("HIPFILE_HIP_LIBRARY", lib), ("HIPFILE_EMU_DEVICES", "0")][..],
                &["no GPU device", "HIPFILE_EMU_DEVICES"][..],
            ),
            (
                &[("HIPFILE_HIP_LIBRARY", "/nonexistent/libamdhip64.so")][..],
                &["/nonexistent/libamdhip64.so", "cargo xtask emulated"][..],
            ),
        ] {
            let (status, stderr) = run_example(&dir, name, env);
            assert_eq!(status, Some(1), "{name} {env:?}: {stderr}");
            assert!(stderr.starts_with(&format!("{name}: ")), "{name}: {stderr}");
            for needle in needles {
                assert!(
                    stderr.contains(needle),
                    "{name}: {needle:?} not in {stderr}"
                );
            }
            for dump in ["Error: ", "DriverOpen(", "Runtime(", "{ "] {
                assert!(!stderr.contains(dump), "{name}: a debug dump: {stderr}");
            }
        }
    }
}
