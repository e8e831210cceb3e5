//! `hipfile bench` run as a user runs it, on the emulated runtime (`--runtime emulated`) with
//! small files: the shape of its output, the runs and the bytes each backend served, the
//! limits, the cache states, several devices at once (`--devices`, with the emulated
//! runtime's `HIPFILE_EMU_DEVICES`), the test file it creates and reuses, and its exit
//! statuses.
//! Timings are only checked to be positive: they depend on the machine.

// Helpers too are test code: an unwrap that fails is a test failure with its location.
#![allow(clippy::unwrap_used)]

mod common;

use common::{MIB, Run, hipfile, keys, temp_dir};
use hipfile_testfs::{is_root, require};
use serde_json::Value;
use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

const SIZE: u64 = 8 * MIB as u64;

/// `hipfile bench --runtime emulated --size 8MiB --io-size 1MiB --runs 3 --file FILE EXTRA...`.
fn bench(file: &Path, extra: &[&str]) -> Run {
    bench_env(file, extra, &[])
}

/// [`bench`] with `env` set.
fn bench_env(file: &Path, extra: &[&str], env: &[(&str, &str)]) -> Run {
    let mut args: Vec<&OsStr> = [
        "bench",
        "--runtime",
        "emulated",
        "--size",
        "8MiB",
        "--io-size",
        "1MiB",
        "--runs",
        "3",
    ]
    .iter()
    .map(OsStr::new)
    .collect();
    args.push(OsStr::new("--file"));
    args.push(file.as_os_str());
    args.extend(extra.iter().map(OsStr::new));
    hipfile(&args, env)
}

/// `bench --json EXTRA...`, which must succeed with one well-formed object.
fn bench_json(file: &Path, extra: &[&str]) -> Value {
    bench_json_env(file, extra, &[])
}

/// [`bench_json`] with `env` set.
fn bench_json_env(file: &Path, extra: &[&str], env: &[(&str, &str)]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(extra);
    let run = bench_env(file, &all, env);
    assert_eq!(run.status, 0, "{extra:?}: {}", run.stderr);
    let v = run.one();
    assert_shape(&v);
    v
}

fn f64_of(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The keys of every case, and their types.
fn assert_shape(v: &Value) {
    let mut want = vec![
        "api",
        "backend",
        "cache",
        "file",
        "io_size",
        "max_gbps",
        "median_gbps",
        "min_gbps",
        "op",
        "pattern",
        "peak_rss_bytes",
        "queue_depth",
        "runs",
        "served",
        "size",
        "threads",
    ];
    if v.get("limits").is_some() {
        want.extend([
            "latency",
            "limits",
            "ratio",
            "serial_gbps",
            "staged",
            "vs_serial",
        ]);
    }
    if v.get("devices").is_some() {
        want.push("devices");
    }
    if v.get("request_threads").is_some() {
        want.push("request_threads");
    }
    want.sort_unstable();
    assert_eq!(keys(v), want, "{v}");
    assert_eq!(keys(&v["served"]), ["fallback_bytes", "fastpath_bytes"]);
    let runs = v["runs"].as_array().unwrap();
    assert!(runs.iter().all(|x| f64_of(x) > 0.0), "{v}");
    let (median, min, max) = (
        f64_of(&v["median_gbps"]),
        f64_of(&v["min_gbps"]),
        f64_of(&v["max_gbps"]),
    );
    assert!(0.0 < min && min <= median && median <= max, "{v}");
    assert!(v["peak_rss_bytes"].as_u64().unwrap() > 0, "{v}");
    assert!(["hot", "cold"].contains(&v["cache"].as_str().unwrap()));
}

fn served(v: &Value) -> (u64, u64) {
    (
        v["served"]["fastpath_bytes"].as_u64().unwrap(),
        v["served"]["fallback_bytes"].as_u64().unwrap(),
    )
}

#[test]
fn read_runs_three_times_over_the_whole_file() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    let v = bench_json(&file, &[]);
    assert_eq!(v["op"], "read");
    assert_eq!(v["size"], SIZE);
    assert_eq!(v["io_size"], MIB as u64);
    assert_eq!(v["threads"], 1);
    assert_eq!(v["cache"], "hot");
    assert_eq!(v["backend"], "auto");
    assert_eq!(v["runs"].as_array().unwrap().len(), 3);
    let (fast, slow) = served(&v);
    assert_eq!(fast + slow, 3 * SIZE, "{v}");
    assert!(v.get("limits").is_none());
    assert!(v.get("devices").is_none(), "only with --devices: {v}");
}

#[test]
fn write_serves_every_byte_of_every_run() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    let v = bench_json(&file, &["--op", "write", "--threads", "3", "--runs=4"]);
    assert_eq!(v["op"], "write");
    assert_eq!(v["threads"], 3);
    assert_eq!(v["runs"].as_array().unwrap().len(), 4);
    let (fast, slow) = served(&v);
    assert_eq!(fast + slow, 4 * SIZE, "{v}");
    assert_eq!(std::fs::metadata(&file).unwrap().len(), SIZE);
}

#[test]
fn forced_fallback_serves_everything() {
    let dir = temp_dir();
    for op in ["read", "write"] {
        let file = dir.path().join(format!("{op}.dat"));
        let v = bench_json(&file, &["--backend", "fallback", "--op", op]);
        assert_eq!(v["backend"], "fallback");
        assert_eq!(served(&v), (0, 3 * SIZE), "{op}: {v}");
    }
}

#[test]
fn threads_are_capped_at_the_requests() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    let v = bench_json(&file, &["--threads", "64"]);
    assert_eq!(v["threads"], 8, "8 MiB in 1 MiB requests: {v}");
    let v = bench_json(&file, &["--io-size", "64MiB"]);
    assert_eq!(v["io_size"], SIZE, "clamped to --size: {v}");
    let (fast, slow) = served(&v);
    assert_eq!(fast + slow, 3 * SIZE);
}

#[test]
fn limits_are_measured_and_positive() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    let v = bench_json(&file, &["--limits"]);
    let limits = &v["limits"];
    assert_eq!(
        keys(limits),
        [
            "pageable_h2d_gbps",
            "pinned_h2d_gbps",
            "pread_direct_gbps",
            "pread_gbps"
        ],
        "{v}"
    );
    assert!(f64_of(&limits["pread_gbps"]) > 0.0, "{v}");
    assert!(f64_of(&limits["pageable_h2d_gbps"]) > 0.0, "{v}");
    assert!(f64_of(&limits["pinned_h2d_gbps"]) > 0.0, "{v}");
    assert!(
        limits["pread_direct_gbps"].is_null(),
        "measured for cold reads only: {v}"
    );
    assert!(f64_of(&v["ratio"]) > 0.0, "{v}");
    let latency = v["latency"].as_array().unwrap();
    assert_eq!(latency.len(), 2, "{v}");
    for (l, size) in latency.iter().zip([4096, 65536]) {
        assert_eq!(keys(l), ["hipfile_us", "ratio", "raw_us", "size"]);
        assert_eq!(l["size"], size);
        assert!(
            f64_of(&l["raw_us"]) > 0.0 && f64_of(&l["hipfile_us"]) > 0.0,
            "{v}"
        );
    }
    // The limits' own I/O is not counted as served.
    let (fast, slow) = served(&v);
    assert_eq!(fast + slow, 3 * SIZE, "{v}");
}

#[test]
fn write_limits_are_pwrite_and_device_to_host() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    let v = bench_json(&file, &["--limits", "--op", "write", "--runs", "1"]);
    let limits = &v["limits"];
    assert_eq!(
        keys(limits),
        ["pageable_d2h_gbps", "pinned_d2h_gbps", "pwrite_fsync_gbps"],
        "{v}"
    );
    assert!(f64_of(&limits["pwrite_fsync_gbps"]) > 0.0, "{v}");
    assert!(f64_of(&limits["pageable_d2h_gbps"]) > 0.0, "{v}");
    assert!(f64_of(&limits["pinned_d2h_gbps"]) > 0.0, "{v}");
    assert!(f64_of(&v["ratio"]) > 0.0, "{v}");
}

/// The entries of `"devices"`, each with its keys and positive figures, and the device
/// numbers in order.
fn devices_of(v: &Value) -> (Vec<&Value>, Vec<u64>) {
    let entries: Vec<&Value> = v["devices"].as_array().unwrap().iter().collect();
    let runs = v["runs"].as_array().unwrap();
    for d in &entries {
        assert_eq!(
            keys(d),
            ["device", "max_gbps", "median_gbps", "min_gbps", "runs"],
            "{v}"
        );
        let each = d["runs"].as_array().unwrap();
        assert_eq!(each.len(), runs.len(), "{v}");
        assert!(each.iter().all(|x| f64_of(x) > 0.0), "{v}");
        let (median, min, max) = (
            f64_of(&d["median_gbps"]),
            f64_of(&d["min_gbps"]),
            f64_of(&d["max_gbps"]),
        );
        assert!(0.0 < min && min <= median && median <= max, "{v}");
        // A device finished no later than the whole run, which moved the file once per
        // device.
        for (x, total) in each.iter().zip(runs) {
            assert!(
                f64_of(x) * 1.000_001 >= f64_of(total) / entries.len() as f64,
                "{v}"
            );
        }
    }
    let numbers = entries
        .iter()
        .map(|d| d["device"].as_u64().unwrap())
        .collect();
    (entries, numbers)
}

#[test]
fn all_devices_read_the_whole_file_at_once() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    let env = [("HIPFILE_EMU_DEVICES", "3")];
    let v = bench_json_env(&file, &["--devices", "all", "--threads", "2"], &env);
    assert_eq!(v["threads"], 2, "per device: {v}");
    assert_eq!(v["runs"].as_array().unwrap().len(), 3);
    let (_, numbers) = devices_of(&v);
    assert_eq!(numbers, [0, 1, 2], "{v}");
    let (fast, slow) = served(&v);
    assert_eq!(fast + slow, 3 * SIZE * 3, "every device, every run: {v}");
    // Without --devices, one device still, with 3 present.
    let v = bench_json_env(&file, &[], &env);
    assert!(v.get("devices").is_none(), "{v}");
    let (fast, slow) = served(&v);
    assert_eq!(fast + slow, 3 * SIZE, "{v}");
}

#[test]
fn listed_devices_write_with_limits() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    let env = [("HIPFILE_EMU_DEVICES", "3")];
    let v = bench_json_env(&file, &["--devices", "0,2"], &env);
    let (_, numbers) = devices_of(&v);
    assert_eq!(numbers, [0, 2], "{v}");
    let (fast, slow) = served(&v);
    assert_eq!(fast + slow, 2 * SIZE * 3, "{v}");
    let v = bench_json_env(
        &file,
        &[
            "--devices=2,1",
            "--op",
            "write",
            "--limits",
            "--runs",
            "1",
            "--overwrite",
        ],
        &env,
    );
    assert_eq!(v["op"], "write");
    let (_, numbers) = devices_of(&v);
    assert_eq!(numbers, [2, 1], "in the order given: {v}");
    let (fast, slow) = served(&v);
    assert_eq!(fast + slow, 2 * SIZE, "{v}");
    assert!(f64_of(&v["limits"]["pinned_d2h_gbps"]) > 0.0, "{v}");
    assert!(f64_of(&v["ratio"]) > 0.0, "{v}");
    assert_eq!(std::fs::metadata(&file).unwrap().len(), SIZE);
}

#[test]
fn the_table_has_a_line_per_device() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    let run = bench_env(
        &file,
        &["--devices", "1,0"],
        &[("HIPFILE_EMU_DEVICES", "2")],
    );
    assert_eq!(run.status, 0, "{}", run.stderr);
    for word in [
        "1 thread per device on devices 1,0",
        "device 1, median",
        "device 0, median",
        "served:",
    ] {
        assert!(run.stdout.contains(word), "{word}: {}", run.stdout);
    }
}

#[test]
fn an_unknown_device_fails_naming_it() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    // The list, the device count, and the device the message names.
    for (devices, env, unknown) in [("3", "2", 3), ("0,3", "2", 3), ("1", "1", 1)] {
        let run = bench_env(
            &file,
            &["--devices", devices],
            &[("HIPFILE_EMU_DEVICES", env)],
        );
        assert_eq!(run.status, 1, "{devices} of {env}: {}", run.stderr);
        let named = format!("device {unknown} does not exist");
        assert!(
            run.stderr.contains(&named) && run.stderr.contains(&format!("sees {env} device")),
            "{devices} of {env}: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty());
    }
}

#[test]
fn malformed_device_lists_are_usage_errors() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    for (devices, why) in [
        ("", "empty"),
        ("1,1", "device 1 is named twice"),
        ("x", "\"x\" is not a device number"),
        ("0,,1", "\"\" is not a device number"),
        ("1024", "\"1024\" is not a device number"),
    ] {
        let run = bench_env(
            &file,
            &["--devices", devices],
            &[("HIPFILE_EMU_DEVICES", "2")],
        );
        assert_eq!(run.status, 2, "{devices:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("--devices")
                && run.stderr.contains(why)
                && run.stderr.contains("hipfile bench --help"),
            "{devices:?}: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty(), "{devices:?}");
    }
    assert!(!file.exists(), "bad arguments create nothing");
}

#[test]
fn cold_runs_drop_the_cache() {
    require!(is_root());
    // On ext4, which does direct I/O: the cold limits include raw O_DIRECT reads.
    let fs = require!(hipfile_testfs::MountedFs::ext4(
        hipfile_testfs::Ext4Data::Ordered,
        64
    ));
    let file = fs.path().join("b.dat");
    let v = bench_json(&file, &["--cold", "--limits"]);
    assert_eq!(v["cache"], "cold");
    assert!(f64_of(&v["limits"]["pread_direct_gbps"]) > 0.0, "{v}");
    let (fast, slow) = served(&v);
    assert_eq!(fast + slow, 3 * SIZE, "{v}");
}

#[test]
fn cold_and_hot_together_are_refused() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    let run = bench(&file, &["--cold", "--hot"]);
    assert_eq!(run.status, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("--cold") && run.stderr.contains("--hot"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty());
    assert!(!file.exists(), "bad arguments create nothing");
}

#[test]
fn the_file_is_created_with_its_size_and_reused() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    let run = bench(&file, &["--runs", "1"]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("writing the test file"),
        "{}",
        run.stderr
    );
    let first = std::fs::metadata(&file).unwrap();
    assert_eq!(first.len(), SIZE);
    let bytes = std::fs::read(&file).unwrap();
    assert!(
        bytes.iter().all(|&b| b != 0),
        "the pattern leaves no hole or zero byte"
    );
    let run = bench(&file, &["--runs", "1"]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("reusing the test file"),
        "{}",
        run.stderr
    );
    let again = std::fs::metadata(&file).unwrap();
    assert_eq!(
        (again.ino(), again.mtime_nsec()),
        (first.ino(), first.mtime_nsec())
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        bytes,
        "a read run changes nothing"
    );
    // A file of another size is rewritten to the size asked for, when bench may.
    std::fs::write(&file, b"short").unwrap();
    let run = bench(&file, &["--runs", "1"]);
    assert_eq!(run.status, 2, "{}", run.stderr);
    assert_eq!(std::fs::read(&file).unwrap(), b"short");
    let run = bench(&file, &["--runs", "1", "--overwrite"]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("writing the pattern over the test file"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read(&file).unwrap(), bytes);
}

#[test]
fn the_table_names_the_case_and_the_median() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    let run = bench(&file, &["--limits"]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    for word in [
        "read 8 MiB in 1 MiB requests",
        "median",
        "served:",
        "pread",
        "latency",
        "peak",
    ] {
        assert!(run.stdout.contains(word), "{word}: {}", run.stdout);
    }
}

#[test]
fn a_missing_directory_is_a_usage_error() {
    let dir = temp_dir();
    let file = dir.path().join("missing").join("b.dat");
    let run = bench(&file, &[]);
    assert_eq!(run.status, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("cannot create the test file"),
        "{}",
        run.stderr
    );
    assert!(run.stdout.is_empty());
}

#[test]
fn bad_arguments_exit_2() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    for extra in [
        &["--op", "copy"][..],
        &["--threads", "0"],
        &["--threads", "x"],
        &["--runs", "0"],
        &["--io-size", "0"],
        &["--size", "0"],
        &["--size", "1P"],
        &["--backend", "gpu"],
        &["--devices", ""],
        &["--devices", "1,1"],
        &["--devices", "x"],
        &["--frobnicate"],
        &["--json=1"],
        &["stray"],
        &["--runs"],
    ] {
        let run = bench(&file, extra);
        assert_eq!(run.status, 2, "{extra:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("hipfile bench --help"),
            "{extra:?}: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty(), "{extra:?}");
    }
    assert!(!file.exists(), "bad arguments create nothing");
    let run = hipfile(&["bench", "--help"], &[]);
    assert_eq!(run.status, 0);
    assert!(run.stdout.contains("Usage: hipfile bench"));
}

/// The device buffers of a write run hold the file's own pattern (made a piece at a time):
/// writing a 40 MiB file of zeros in one request gives the bytes of a freshly made test file.
#[test]
fn a_write_run_writes_the_test_files_pattern() {
    let dir = temp_dir();
    let fresh = dir.path().join("fresh.dat");
    let zeros = dir.path().join("zeros.dat");
    let big = ["--size", "40MiB", "--io-size", "40MiB", "--runs", "1"];
    bench_json(&fresh, &big);
    std::fs::write(&zeros, vec![0u8; 40 << 20]).unwrap();
    let mut write = vec!["--op", "write", "--overwrite"];
    write.extend_from_slice(&big);
    bench_json(&zeros, &write);
    assert!(std::fs::read(&zeros).unwrap() == std::fs::read(&fresh).unwrap());
}

/// A file of `len` bytes of a user's data (not bench's pattern), and its bytes.
fn user_file(dir: &Path, len: usize) -> (std::path::PathBuf, Vec<u8>) {
    let path = common::data_file(dir, "weights.bin", len);
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

/// A refusal to change an existing file: exit status 2, a message that names the file and
/// `--overwrite`, nothing on stdout.
fn assert_refused(run: &Run, file: &Path) {
    assert_eq!(run.status, 2, "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        run.stderr.contains(file.to_str().unwrap())
            && run.stderr.contains("--overwrite")
            && run.stderr.contains("nothing was changed"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_write_bench_leaves_an_existing_file_alone_without_overwrite() {
    let dir = temp_dir();
    // Of the very size of the bench: the size is not what protects it.
    let (file, bytes) = user_file(dir.path(), SIZE as usize);
    for extra in [&["--op", "write"][..], &["--op", "write", "--limits"]] {
        let run = bench(&file, extra);
        assert_refused(&run, &file);
        assert!(
            std::fs::read(&file).unwrap() == bytes,
            "{extra:?} changed it"
        );
    }
    // Asked for, the write bench writes over it.
    let v = bench_json(&file, &["--op", "write", "--overwrite", "--runs", "1"]);
    assert_eq!(served(&v).0 + served(&v).1, SIZE, "{v}");
    assert_eq!(std::fs::metadata(&file).unwrap().len(), SIZE);
    assert!(
        std::fs::read(&file).unwrap() != bytes,
        "the write runs wrote"
    );
}

#[test]
fn a_read_bench_reads_an_existing_file_as_it_is_and_changes_no_byte() {
    let dir = temp_dir();
    // Another size than the bench's: its pattern would have to be written.
    let (file, bytes) = user_file(dir.path(), MIB + 5);
    let run = bench(&file, &[]);
    assert_refused(&run, &file);
    assert!(
        run.stderr.contains(&format!("--size {}", MIB + 5)),
        "{}",
        run.stderr
    );
    assert!(std::fs::read(&file).unwrap() == bytes);
    // Of the bench's size, it is read as it is, cold and with the limits too.
    let (file, bytes) = user_file(dir.path(), SIZE as usize);
    for extra in [&[][..], &["--cold", "--limits", "--runs", "1"]] {
        let v = bench_json(&file, extra);
        assert_eq!(
            served(&v).0 + served(&v).1,
            v["runs"].as_array().unwrap().len() as u64 * SIZE
        );
        assert!(
            std::fs::read(&file).unwrap() == bytes,
            "{extra:?} changed it"
        );
    }
}

#[test]
fn bad_devices_or_runtime_create_no_test_file() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    for (extra, env) in [
        (&["--devices", "99"][..], &[][..]),
        (&["--devices", "1"], &[("HIPFILE_EMU_DEVICES", "1")]),
        // No runtime at all: the driver cannot be opened.
        (
            &["--op", "write", "--runtime", "auto"],
            &[("HIPFILE_HIP_LIBRARY", "/nonexistent/libamdhip64.so")],
        ),
    ] {
        let run = bench_env(&file, extra, env);
        assert_eq!(run.status, 1, "{extra:?} {env:?}: {}", run.stderr);
        assert!(!file.exists(), "{extra:?} {env:?} created the test file");
    }
    // An existing file is not touched either.
    let (file, bytes) = user_file(dir.path(), MIB);
    let run = bench_env(&file, &["--devices", "5", "--overwrite"], &[]);
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert!(std::fs::read(&file).unwrap() == bytes);
}

#[test]
fn a_test_file_that_cannot_be_finished_is_removed() {
    let fs = require!(hipfile_testfs::MountedFs::tmpfs(16));
    let file = fs.path().join("b.dat");
    let run = bench(&file, &["--size", "32MiB"]);
    assert_eq!(run.status, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("No space left on device")
            && run.stderr.contains("removed the incomplete test file"),
        "{}",
        run.stderr
    );
    assert!(!file.exists(), "the incomplete test file was left behind");
    assert!(run.stdout.is_empty());
}

#[test]
fn a_driver_that_cannot_be_opened_is_said_once() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    let run = bench_env(
        &file,
        &["--runtime", "auto"],
        &[("HIPFILE_HIP_LIBRARY", "/nonexistent/libamdhip64.so")],
    );
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("/nonexistent/libamdhip64.so"),
        "{}",
        run.stderr
    );
    assert_eq!(
        run.stderr.matches("cannot open the hipfile driver").count(),
        1,
        "{}",
        run.stderr
    );
    assert!(!file.exists());
}

#[test]
fn every_api_moves_every_byte_with_requests_in_flight() {
    let dir = temp_dir();
    for op in ["read", "write"] {
        for api in ["async", "batch", "stream"] {
            let file = dir.path().join(format!("{op}-{api}.dat"));
            let v = bench_json(
                &file,
                &[
                    "--op",
                    op,
                    "--api",
                    api,
                    "--queue-depth",
                    "4",
                    "--threads",
                    "2",
                    "--io-size",
                    "256KiB",
                    "--pattern",
                    "random",
                ],
            );
            assert_eq!(v["api"], api, "{v}");
            assert_eq!(v["queue_depth"], 4, "{v}");
            assert_eq!(v["pattern"], "random", "{v}");
            let (fast, slow) = served(&v);
            assert_eq!(fast + slow, 3 * SIZE, "{op} {api}: {v}");
        }
    }
}

#[test]
fn the_staged_limit_runs_at_the_cases_concurrency() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    let v = bench_json(
        &file,
        &[
            "--api",
            "async",
            "--queue-depth",
            "3",
            "--threads",
            "2",
            "--limits",
        ],
    );
    assert_eq!(v["staged"]["threads"], 6, "{v}");
    assert!(f64_of(&v["staged"]["gbps"]) > 0.0, "{v}");
    assert!(f64_of(&v["staged"]["ratio"]) > 0.0, "{v}");
}

#[test]
fn a_queue_depth_needs_an_api_that_keeps_requests_in_flight() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    let run = bench(&file, &["--queue-depth", "2"]);
    assert_eq!(run.status, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--queue-depth"), "{}", run.stderr);
    assert!(run.stderr.contains("--api"), "{}", run.stderr);
    assert!(!file.exists(), "a refused bench created its file");
}

#[test]
fn requests_served_at_once_are_set_for_requests_in_flight_only() {
    let dir = temp_dir();
    let file = dir.path().join("b.dat");
    let run = bench(&file, &["--request-threads", "2"]);
    assert_eq!(run.status, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--request-threads 2"), "{}", run.stderr);
    assert!(run.stderr.contains("--api"), "{}", run.stderr);
    assert!(!file.exists(), "a refused bench created its file");

    let v = bench_json(
        &file,
        &[
            "--api",
            "async",
            "--queue-depth",
            "4",
            "--request-threads",
            "2",
            "--io-size",
            "256KiB",
        ],
    );
    assert_eq!(v["request_threads"], 2, "{v}");
    let (fast, slow) = served(&v);
    assert_eq!(fast + slow, 3 * SIZE, "{v}");
}

/// The arguments of a bench without `--file`, with `extra`.
fn without_file(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "bench",
        "--runtime",
        "emulated",
        "--size",
        "8MiB",
        "--io-size",
        "1MiB",
        "--runs",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// What is in `dir`.
fn entries(dir: &Path) -> Vec<std::ffi::OsString> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect()
}

/// Without `--file`, bench writes its test file on the current directory's file system and
/// leaves nothing there: after a run, after a run that fails, for reads and writes.
#[test]
fn without_file_the_test_file_is_temporary_and_leaves_nothing() {
    let dir = temp_dir();
    for op in ["read", "write"] {
        let run = common::hipfile_in(dir.path(), &without_file(&["--json", "--op", op]), &[]);
        assert_eq!(run.status, 0, "{}", run.stderr);
        let v = run.one();
        assert_shape(&v);
        let here = dir.path().display().to_string();
        assert_eq!(v["file"], format!("a temporary file in {here}"), "{v}");
        assert!(
            run.stderr
                .contains(&format!("a temporary test file in {here}")),
            "{}",
            run.stderr
        );
        assert_eq!(
            entries(dir.path()),
            Vec::<std::ffi::OsString>::new(),
            "{op}"
        );
    }
    // A run that fails after the file was written: every fastpath read fails with EIO.
    let run = common::hipfile_in(
        dir.path(),
        &without_file(&["--backend", "fastpath"]),
        &[("HIPFILE_EMU_FAULT", "read:EIO")],
    );
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert_eq!(entries(dir.path()), Vec::<std::ffi::OsString>::new());
    // --overwrite is about a --file.
    let run = common::hipfile_in(dir.path(), &without_file(&["--overwrite"]), &[]);
    assert_eq!(run.status, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--file"), "{}", run.stderr);
}

/// Interrupted (SIGINT, Ctrl-C) while it runs, bench without `--file` leaves no test file.
#[test]
fn without_file_an_interrupted_bench_leaves_nothing() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = temp_dir();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hipfile"))
        .args(without_file(&[
            "--runs", "1000", "--size", "64MiB", "--cold",
        ]))
        .current_dir(dir.path())
        .env_remove("HIPFILE_EMU_FAULT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once it says it is writing the test file, the file is there: interrupt it then.
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.by_ref() {
            let line = line.unwrap_or_default();
            let writing = line.contains("test file");
            let _ = tx.send(line);
            if writing {
                break;
            }
        }
        for _ in lines {}
    });
    let mut said = Vec::new();
    loop {
        match rx.recv_timeout(common::DEADLINE) {
            Ok(line) if line.contains("test file") => break,
            Ok(line) => said.push(line),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("bench never said it was writing its test file ({e}): {said:?}");
            }
        }
    }
    let pid = rustix::process::Pid::from_child(&child);
    // A process started in the background of a non-interactive shell (`nohup cmd &`)
    // ignores SIGINT, and so do its children: then SIGTERM, whose default is the same.
    let signal = if sigint_ignored() {
        rustix::process::Signal::TERM
    } else {
        rustix::process::Signal::INT
    };
    rustix::process::kill_process(pid, signal).unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "{status:?} after {signal:?}");
    assert_eq!(entries(dir.path()), Vec::<std::ffi::OsString>::new());
}

/// Whether this process ignores SIGINT (`SigIgn` of /proc/self/status), which a child
/// inherits across `exec`.
fn sigint_ignored() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (rustix::process::Signal::INT.as_raw() - 1)) != 0)
}
