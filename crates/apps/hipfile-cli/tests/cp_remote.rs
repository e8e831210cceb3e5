//! `hipfile cp URL DST` against a real S3-compatible server (`s3s-fs`) on loopback, on the
//! emulated runtime: credentials and endpoint in the `AWS_*` variables, as a user gives them.

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
    let endpoint = server.endpoint();
    hipfile(
        &args,
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
