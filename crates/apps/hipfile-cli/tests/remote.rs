//! `hipfile cp URL DST` and `hipfile bench --url URL` against a real S3-compatible server
//! (`s3s-fs`) on loopback, on the emulated runtime: credentials and endpoint in the `AWS_*`
//! variables, as a user gives them.

#![allow(clippy::unwrap_used)]

mod common;

use common::{Run, hipfile, keys, temp_dir};
use hipfile_testfs::{S3Server, require};
use std::ffi::OsStr;
use std::path::Path;

/// `hipfile cp --runtime emulated [EXTRA...] URL DST` with the server's keys (or `secret`).
fn cp(server: &S3Server, url: &str, dst: &Path, extra: &[&str], secret: &str) -> Run {
    let mut args: Vec<&OsStr> = vec![OsStr::new("cp"), OsStr::new("--runtime=emulated")];
    args.extend(extra.iter().map(OsStr::new));
    args.push(OsStr::new(url));
    args.push(dst.as_os_str());
    with_keys(server, &args, secret)
}

/// `hipfile ARGS` with the server's endpoint and keys (or `secret`) in the environment.
fn with_keys(server: &S3Server, args: &[&OsStr], secret: &str) -> Run {
    let endpoint = server.endpoint();
    hipfile(
        args,
        &[
            ("AWS_ENDPOINT_URL", endpoint.as_str()),
            ("AWS_ACCESS_KEY_ID", S3Server::KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", secret),
            ("AWS_REGION", "us-east-1"),
        ],
    )
}

fn object(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 % 253) as u8).collect()
}

#[test]
fn an_object_is_copied_through_the_gpu_buffer() {
    let server = require!(S3Server::start());
    let dir = temp_dir();
    for (len, chunk) in [
        (0usize, None),
        (1, None),
        (300_001, Some("64K")),
        (2 << 20, None),
    ] {
        let bytes = object(len);
        let key = format!("obj-{len}");
        server.put(&key, &bytes);
        let dst = dir.path().join(&key);
        let mut extra = vec!["--json"];
        if let Some(c) = chunk {
            extra.extend(["--chunk", c]);
        }
        let run = cp(
            &server,
            &S3Server::url(&key),
            &dst,
            &extra,
            S3Server::SECRET,
        );
        assert_eq!(run.status, 0, "{len}: {}", run.stderr);
        assert_eq!(std::fs::read(&dst).unwrap(), bytes, "{len}");
        let v = run.one();
        assert_eq!(
            keys(&v),
            ["bytes", "gbps", "read", "seconds", "write"],
            "{v}"
        );
        assert_eq!(v["bytes"], len as u64, "{v}");
        if len > 0 {
            assert_eq!(v["read"]["remote_bytes"], len as u64, "{v}");
        }
        let written = v["write"]["fastpath_bytes"].as_u64().unwrap()
            + v["write"]["fallback_bytes"].as_u64().unwrap();
        assert_eq!(written, len as u64, "{v}");
    }
}

#[test]
fn a_missing_object_or_wrong_keys_fail_and_leave_dst_as_it_was() {
    let server = require!(S3Server::start());
    server.put("present", &object(1000));
    let dir = temp_dir();
    let dst = dir.path().join("dst");
    std::fs::write(&dst, b"what was there").unwrap();

    let run = cp(
        &server,
        &S3Server::url("absent"),
        &dst,
        &[],
        S3Server::SECRET,
    );
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("s3://models/absent") && run.stderr.contains("no such object"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read(&dst).unwrap(), b"what was there");

    let run = cp(
        &server,
        &S3Server::url("present"),
        &dst,
        &[],
        "wrong-secret",
    );
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("access denied") && run.stderr.contains("AWS_SECRET_ACCESS_KEY"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read(&dst).unwrap(), b"what was there");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "a temporary file was left"
    );
}

#[test]
fn bench_times_an_object_into_gpu_and_host_memory() {
    let server = require!(S3Server::start());
    server.put("bench.bin", &object(3 << 20));
    let url = S3Server::url("bench.bin");
    let words = [
        "bench",
        "--runtime=emulated",
        "--url",
        &url,
        "--limits",
        "--json",
        "--runs",
        "2",
        "--request-size",
        "256K",
        "--in-flight",
        "4",
    ];
    let args: Vec<&OsStr> = words.iter().map(OsStr::new).collect();
    let run = with_keys(&server, &args, S3Server::SECRET);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let v = run.one();
    assert_eq!(v["bytes"], 3u64 << 20, "{v}");
    assert_eq!(v["request_size"], 256u64 << 10, "{v}");
    assert_eq!(v["in_flight"], 4, "{v}");
    assert_eq!(v["runs"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(v["limit_runs"].as_array().unwrap().len(), 2, "{v}");
    for key in ["gbps", "limit_gbps", "ratio"] {
        assert!(v[key].as_f64().unwrap() > 0.0, "{key}: {v}");
    }

    // What a remote bench cannot do is refused before any request.
    for extra in [
        &["--op", "write"][..],
        &["--threads", "2"],
        &["--api", "async"],
        &["--request-threads", "2"],
    ] {
        let words = ["bench", "--runtime=emulated", "--url", &url];
        let mut args: Vec<&OsStr> = words.iter().map(OsStr::new).collect();
        args.extend(extra.iter().map(OsStr::new));
        let run = with_keys(&server, &args, S3Server::SECRET);
        assert_eq!(run.status, 2, "{extra:?}: {}", run.stderr);
        assert!(run.stderr.contains("--url"), "{extra:?}: {}", run.stderr);
    }
}

#[test]
fn load_reads_a_checkpoint_from_a_prefix_as_from_its_folder() {
    let server = require!(S3Server::start());
    let dir = server.object_path("ck");
    let dir_arg = dir.display().to_string();
    let written = hipfile(
        &[
            "checkpoint",
            "--out",
            &dir_arg,
            "--layers",
            "4",
            "--scale",
            "0.005",
            "--shards",
            "2",
        ],
        &[],
    );
    assert_eq!(written.status, 0, "{}", written.stderr);
    let local = hipfile(
        &[
            "load",
            "--runtime=emulated",
            "--json",
            "--list",
            &format!("{dir_arg}/model.safetensors.index.json"),
        ],
        &[],
    );
    assert_eq!(local.status, 0, "{}", local.stderr);
    let local = local.one();

    let words = [
        "load",
        "--runtime=emulated",
        "--json",
        "--list",
        "s3://models/ck/",
    ];
    let args: Vec<&OsStr> = words.iter().map(OsStr::new).collect();
    let run = with_keys(&server, &args, S3Server::SECRET);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let remote = run.one();
    assert_eq!(remote["cache"], "remote", "{remote}");
    assert_eq!(remote["remote_bytes"], remote["bytes_read"], "{remote}");
    for key in ["shards", "tensors", "bytes"] {
        assert_eq!(remote[key], local[key], "{key}");
    }
    let names = |v: &serde_json::Value| -> Vec<String> {
        v["tensor_list"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&remote), names(&local));

    // Local shards and URLs together, and --verify with URLs, are refused before any load.
    let index = format!("{dir_arg}/model.safetensors.index.json");
    for words in [
        vec!["load", "--runtime=emulated", "s3://models/ck/", &index],
        vec!["load", "--runtime=emulated", "--verify", "s3://models/ck/"],
    ] {
        let args: Vec<&OsStr> = words.iter().map(OsStr::new).collect();
        let run = with_keys(&server, &args, S3Server::SECRET);
        assert_eq!(run.status, 2, "{words:?}: {}", run.stderr);
    }
}
