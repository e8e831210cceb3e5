//! On a machine without a GPU (the emulated runtime with `HIPFILE_EMU_DEVICES=0`, Debian's
//! ROCm runtime where it is installed, no runtime at all), `cp`, `load` and `bench` say what
//! is missing and what to do, instead of a failed allocation's `hipErrorInvalidDevice`;
//! `check` still runs and reports that no device serves.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

mod common;

use common::{Run, data_file, hipfile, temp_dir};
use std::path::Path;

/// Debian's ROCm 5 runtime: a real HIP runtime that sees no device on this machine.
const DEBIAN: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

/// `cp`, `load` and `bench` on a small file, each with `runtime` and `env`.
fn every_command(runtime: &str, env: &[(&str, &str)]) -> Vec<(&'static str, Run)> {
    let dir = temp_dir();
    let src = data_file(dir.path(), "src", 8192);
    let dst = dir.path().join("dst");
    let bench_file = dir.path().join("bench.dat");
    let runtime = format!("--runtime={runtime}");
    let cp = hipfile(
        &[
            "cp",
            runtime.as_str(),
            src.to_str().unwrap(),
            dst.to_str().unwrap(),
        ],
        env,
    );
    assert!(!dst.exists(), "cp wrote without a device");
    let load = hipfile(&["load", runtime.as_str(), src.to_str().unwrap()], env);
    let bench = hipfile(
        &[
            "bench",
            runtime.as_str(),
            "--size",
            "1MiB",
            "--file",
            bench_file.to_str().unwrap(),
        ],
        env,
    );
    assert!(!bench_file.exists(), "bench wrote without a device");
    vec![("cp", cp), ("load", load), ("bench", bench)]
}

/// Each run failed with status 1, saying once that there is no GPU device and `fix`.
fn assert_says(runs: &[(&str, Run)], fix: &str) {
    for (command, run) in runs {
        assert_eq!(run.status, 1, "{command}: {}", run.stderr);
        assert_eq!(run.stdout, "", "{command}");
        assert_eq!(
            run.stderr.matches("no GPU device").count(),
            1,
            "{command}: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains(fix),
            "{command}: {fix:?} not in {}",
            run.stderr
        );
        assert!(
            !run.stderr.contains("hipMalloc") && !run.stderr.contains("cannot allocate"),
            "{command}: it fails before any allocation: {}",
            run.stderr
        );
    }
}

#[test]
fn the_emulated_runtime_without_devices_names_the_variable() {
    let runs = every_command("emulated", &[("HIPFILE_EMU_DEVICES", "0")]);
    assert_says(&runs, "HIPFILE_EMU_DEVICES");
    for (command, run) in &runs {
        assert!(
            !run.stderr.contains("add --runtime emulated"),
            "{command}: it is already emulated: {}",
            run.stderr
        );
    }
    // Named through the environment, it is the same runtime, and the same advice.
    let emu = hipfile_testfs::emulated_runtime().unwrap();
    let runs = every_command(
        "auto",
        &[
            ("HIPFILE_EMU_DEVICES", "0"),
            ("HIPFILE_HIP_LIBRARY", emu.to_str().unwrap()),
        ],
    );
    assert_says(&runs, "HIPFILE_EMU_DEVICES");
}

#[test]
fn a_runtime_that_sees_no_device_suggests_the_emulated_runtime() {
    if !Path::new(DEBIAN).exists() {
        eprintln!("SKIP: {DEBIAN} is not installed (apt-get install libamdhip64-5)");
        return;
    }
    let runs = every_command("auto", &[("HIPFILE_HIP_LIBRARY", DEBIAN)]);
    assert_says(&runs, "--runtime emulated");
    for (command, run) in &runs {
        assert!(run.stderr.contains(DEBIAN), "{command}: {}", run.stderr);
    }
}

#[test]
fn no_runtime_at_all_suggests_the_emulated_runtime() {
    for (command, run) in every_command(
        "auto",
        &[("HIPFILE_HIP_LIBRARY", "/nonexistent/libamdhip64.so")],
    ) {
        assert_eq!(run.status, 1, "{command}: {}", run.stderr);
        assert!(
            run.stderr.contains("/nonexistent/libamdhip64.so")
                && run.stderr.contains("--runtime emulated"),
            "{command}: {}",
            run.stderr
        );
    }
}

/// `check` still runs without a device, reports it and says what to do.
#[test]
fn check_reports_no_device_and_what_to_do() {
    let dir = temp_dir();
    let src = data_file(dir.path(), "src", 8192);
    let (v, run) = common::check_json(
        &src,
        &["--runtime=emulated"],
        &[("HIPFILE_EMU_DEVICES", "0")],
    );
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert_eq!(v["blocked"]["code"], "no_gpu_device", "{v}");
    assert!(
        v["blocked"]["message"]
            .as_str()
            .unwrap()
            .contains("HIPFILE_EMU_DEVICES"),
        "{v}"
    );
    if Path::new(DEBIAN).exists() {
        let (v, _) = common::check_json(&src, &[], &[("HIPFILE_HIP_LIBRARY", DEBIAN)]);
        assert_eq!(v["blocked"]["code"], "no_gpu_device", "{v}");
        assert!(
            v["blocked"]["message"]
                .as_str()
                .unwrap()
                .contains("--runtime emulated"),
            "{v}"
        );
    }
}
