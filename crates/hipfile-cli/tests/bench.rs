//! `hipfile bench` run as a user runs it, on the emulated runtime (`--runtime emulated`) with
//! small files: the shape of its output, the runs and the bytes each backend served, the
//! limits, the cache states, the test file it creates and reuses, and its exit statuses.
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
    hipfile(&args, &[])
}

/// `bench --json EXTRA...`, which must succeed with one well-formed object.
fn bench_json(file: &Path, extra: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(extra);
    let run = bench(file, &all);
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
        "backend",
        "cache",
        "file",
        "io_size",
        "max_gbps",
        "median_gbps",
        "min_gbps",
        "op",
        "peak_rss_bytes",
        "runs",
        "served",
        "size",
        "threads",
    ];
    if v.get("limits").is_some() {
        want.extend(["latency", "limits", "ratio"]);
        want.sort_unstable();
    }
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
    let file = dir.path().join("b.dat");
    for op in ["read", "write"] {
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
    let v = bench_json(&file, &["--cold", "--hot"]);
    assert_eq!(v["cache"], "hot", "the last of --cold and --hot wins");
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
    // A file of another size is rewritten to the size asked for.
    std::fs::write(&file, b"short").unwrap();
    let run = bench(&file, &["--runs", "1"]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("writing the test file"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::metadata(&file).unwrap().len(), SIZE);
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
        &["--size", "1T"],
        &["--backend", "gpu"],
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
