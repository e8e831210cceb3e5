//! Remote reads against a real S3-compatible server (`s3s-fs`) on loopback, into device
//! memory of the emulated runtime; faults a real server will not make on demand come from a
//! proxy in front of it.

mod common;

use common::proxy::{Fault, Proxy};
use common::{counting_driver, driver, pattern};
use hipfile::Driver;
use hipfile_remote::{RemoteError, RemoteFile, RemoteSettings, S3Settings};
use hipfile_testfs::{S3Server, require};
use std::time::{Duration, Instant};

/// Settings that reach `endpoint` with the server's keys, in small parts.
fn settings(endpoint: &str) -> RemoteSettings {
    RemoteSettings {
        request_size: 64 << 10,
        concurrency: 4,
        timeout: Duration::from_secs(10),
        retries: 3,
        retry_timeout: Duration::from_secs(10),
        s3: S3Settings {
            endpoint: Some(endpoint.to_owned()),
            region: Some("us-east-1".into()),
            access_key_id: Some(S3Server::KEY_ID.into()),
            secret_access_key: Some(S3Server::SECRET.into()),
            session_token: None,
        },
        ..RemoteSettings::default()
    }
}

fn url(key: &str) -> String {
    S3Server::url(key)
}

/// Reads all of `file` into a fresh device buffer and returns its bytes.
fn read_all(driver: &Driver, file: &RemoteFile) -> Result<Vec<u8>, RemoteError> {
    let mut gpu = driver
        .alloc(file.size() as usize)
        .expect("a device buffer of the object's size");
    let n = file.read(gpu.slice_mut(..).expect("all of it"), 0)?;
    assert_eq!(n, file.size());
    let mut out = vec![0; file.size() as usize];
    gpu.copy_to_host(0, &mut out).expect("copy back");
    Ok(out)
}

#[test]
fn an_object_reads_into_device_memory_whole_and_in_ranges() {
    let driver = require!(driver());
    let server = require!(S3Server::start());
    let bytes = pattern((5 << 20) + 123, 7);
    server.put("weights.bin", &bytes);
    let file =
        RemoteFile::open(&driver, &url("weights.bin"), settings(&server.endpoint())).unwrap();
    assert_eq!(file.size(), bytes.len() as u64);
    assert!(file.etag().is_some());
    assert_eq!(read_all(&driver, &file).unwrap(), bytes);

    // A range that starts and ends inside parts.
    let mut gpu = driver.alloc(3 << 20).unwrap();
    assert_eq!(
        file.read(gpu.slice_mut(..).unwrap(), 1000).unwrap(),
        3 << 20
    );
    let mut out = vec![0; 3 << 20];
    gpu.copy_to_host(0, &mut out).unwrap();
    assert_eq!(out, bytes[1000..1000 + (3 << 20)]);

    // At the end: what is left; past it: nothing.
    let tail = bytes.len() as u64 - 10;
    assert_eq!(file.read(gpu.slice_mut(..).unwrap(), tail).unwrap(), 10);
    let mut ten = [0; 10];
    gpu.copy_to_host(0, &mut ten).unwrap();
    assert_eq!(ten, bytes[bytes.len() - 10..]);
    assert_eq!(
        file.read(gpu.slice_mut(..).unwrap(), bytes.len() as u64)
            .unwrap(),
        0
    );

    // Into host memory, the same bytes.
    let mut host = vec![0; 200_000];
    assert_eq!(file.read_to_host(&mut host, 77).unwrap(), 200_000);
    assert_eq!(host, bytes[77..200_077]);
}

#[test]
fn ranges_read_together_and_asynchronously_and_are_counted_as_reads() {
    let driver = require!(counting_driver(3));
    let server = require!(S3Server::start());
    let bytes = pattern((1 << 20) + 5, 3);
    server.put("shard.bin", &bytes);
    let file = RemoteFile::open(&driver, &url("shard.bin"), settings(&server.endpoint())).unwrap();

    // Three ranges of one object in one window: the middle one crosses parts, the last
    // runs past the end.
    let mut gpu = driver.alloc(3 << 20).unwrap();
    let (a, rest) = gpu.slice_mut(..).unwrap().split_at(100).unwrap();
    let (b, c) = rest.split_at(300 << 10).unwrap();
    let got = file
        .read_many(vec![(a, 7), (b, 500_000), (c, (1 << 20) - 20)])
        .unwrap();
    assert_eq!(got, [100, 300 << 10, 25]);
    let mut out = vec![0; 100 + (300 << 10) + 25];
    gpu.copy_to_host(0, &mut out).unwrap();
    assert_eq!(out[..100], bytes[7..107]);
    assert_eq!(
        out[100..100 + (300 << 10)],
        bytes[500_000..500_000 + (300 << 10)]
    );
    assert_eq!(out[100 + (300 << 10)..], bytes[bytes.len() - 25..]);

    // The asynchronous read, awaited on an executor that is not the crate's runtime.
    let read = file.read_async(gpu.slice_mut(..1 << 20).unwrap(), 5);
    assert_eq!(futures::executor::block_on(read).unwrap(), 1 << 20);
    let mut out = vec![0; 1 << 20];
    gpu.copy_to_host(0, &mut out).unwrap();
    assert_eq!(out, bytes[5..]);

    // Every read is in the driver's statistics, as a read of the device, by no backend.
    let stats = driver.stats().expect("counting");
    let moved = 100 + (300 << 10) + 25 + (1 << 20);
    assert_eq!((stats.remote_bytes, stats.remote_ops), (moved, 4));
    assert_eq!((stats.read.bytes, stats.read.ops.ok), (moved, 4));
    assert_eq!((stats.fastpath_bytes, stats.fallback_bytes), (0, 0));
    assert_eq!(stats.gpus.iter().map(|g| g.read.bytes).sum::<u64>(), moved);

    // A failed read is counted as one.
    server.put("shard.bin", b"replaced");
    let err = file.read(gpu.slice_mut(..64).unwrap(), 0).unwrap_err();
    assert!(matches!(err, RemoteError::Changed { .. }), "{err}");
    assert_eq!(driver.stats().unwrap().read.ops.err, 1);
}

#[test]
fn neighbouring_small_ranges_share_one_get() {
    let driver = require!(driver());
    let server = require!(S3Server::start());
    let bytes = pattern(4 << 20, 5);
    server.put("small.bin", &bytes);
    let proxy = Proxy::start(server.port(), |_, _| Fault::Pass);
    let file = RemoteFile::open(&driver, &url("small.bin"), settings(&proxy.endpoint())).unwrap();

    // Eight 1000-byte ranges 3000 bytes apart (small tensors with a header between), given
    // out of order, then one 3 MiB further on: two GETs for the nine ranges, not nine.
    let mut gpu = driver.alloc(9000).unwrap();
    let mut reads = Vec::new();
    let mut rest = gpu.slice_mut(..).unwrap();
    let offsets = [9000, 0, 3000, 6000, 12_000, 15_000, 18_000, 21_000, 3 << 20];
    for &offset in &offsets {
        let (view, tail) = rest.split_at(1000).unwrap();
        reads.push((view, offset));
        rest = tail;
    }
    assert_eq!(file.read_many(reads).unwrap(), [1000; 9]);
    let mut out = vec![0; 9000];
    gpu.copy_to_host(0, &mut out).unwrap();
    for (i, &offset) in offsets.iter().enumerate() {
        let at = offset as usize;
        assert!(
            out[i * 1000..(i + 1) * 1000] == bytes[at..at + 1000],
            "range {i}"
        );
    }
    let gets = proxy.methods().iter().filter(|m| *m == "GET").count();
    assert_eq!(gets, 2, "{:?}", proxy.methods());
    assert_eq!(file.gets(), 2);
}

#[test]
fn a_missing_object_and_wrong_keys_are_named() {
    let driver = require!(driver());
    let server = require!(S3Server::start());
    server.put("present", b"x");
    let e = RemoteFile::open(
        &driver,
        &url("absent.safetensors"),
        settings(&server.endpoint()),
    )
    .unwrap_err();
    assert!(matches!(e, RemoteError::NotFound { .. }), "{e:?}");
    assert!(
        e.to_string().contains("s3://models/absent.safetensors"),
        "{e}"
    );

    let mut wrong = settings(&server.endpoint());
    wrong.s3.secret_access_key = Some("not-the-secret".into());
    let e = RemoteFile::open(&driver, &url("present"), wrong).unwrap_err();
    assert!(matches!(e, RemoteError::Denied { .. }), "{e:?}");
    assert!(e.to_string().contains("AWS_SECRET_ACCESS_KEY"), "{e}");
}

#[test]
fn a_plain_http_url_reads_from_an_anonymous_server() {
    let driver = require!(driver());
    let server = require!(S3Server::anonymous());
    let bytes = pattern(300_000, 3);
    server.put("open.bin", &bytes);
    let http = format!("{}/{}/open.bin", server.endpoint(), S3Server::BUCKET);
    let file = RemoteFile::open(&driver, &http, settings(&server.endpoint())).unwrap();
    assert_eq!(file.size(), bytes.len() as u64);
    assert_eq!(read_all(&driver, &file).unwrap(), bytes);
}

#[test]
fn an_object_replaced_after_open_fails_the_read() {
    let driver = require!(driver());
    let server = require!(S3Server::start());
    server.put("ckpt", &pattern(1 << 20, 1));
    let file = RemoteFile::open(&driver, &url("ckpt"), settings(&server.endpoint())).unwrap();
    server.put("ckpt", &pattern(1 << 20, 2));
    let e = read_all(&driver, &file).unwrap_err();
    assert!(matches!(e, RemoteError::Changed { .. }), "{e:?}");
    assert!(e.to_string().contains("changed during the read"), "{e}");
}

#[test]
fn server_errors_are_retried_and_then_named() {
    let driver = require!(driver());
    let server = require!(S3Server::start());
    let bytes = pattern(1 << 20, 4);
    server.put("flaky", &bytes);

    // The first two GETs get 503: retried, the read succeeds.
    let proxy = Proxy::start(server.port(), |method, n| {
        if method == "GET" && n <= 2 {
            Fault::Status(503)
        } else {
            Fault::Pass
        }
    });
    let file = RemoteFile::open(&driver, &url("flaky"), settings(&proxy.endpoint())).unwrap();
    assert_eq!(read_all(&driver, &file).unwrap(), bytes);
    let gets = proxy.methods().iter().filter(|m| *m == "GET").count();
    assert!(gets >= 16 + 2, "{gets} GETs for 16 parts and 2 retried");

    // Every GET gets 500: the read fails after its retries, naming a range.
    let broken = Proxy::start(server.port(), |method, _| {
        if method == "GET" {
            Fault::Status(500)
        } else {
            Fault::Pass
        }
    });
    let mut quick = settings(&broken.endpoint());
    quick.retries = 1;
    let file = RemoteFile::open(&driver, &url("flaky"), quick).unwrap();
    let e = read_all(&driver, &file).unwrap_err();
    assert!(matches!(e, RemoteError::Request { .. }), "{e:?}");
    assert!(e.to_string().contains("GET bytes "), "{e}");
}

#[test]
fn a_slow_answer_times_out() {
    let driver = require!(driver());
    let server = require!(S3Server::start());
    server.put("slow", &pattern(100_000, 5));
    let proxy = Proxy::start(server.port(), |method, _| {
        if method == "GET" {
            Fault::Delay(Duration::from_secs(3))
        } else {
            Fault::Pass
        }
    });
    let mut s = settings(&proxy.endpoint());
    s.timeout = Duration::from_millis(500);
    s.retries = 0;
    let file = RemoteFile::open(&driver, &url("slow"), s).unwrap();
    let started = Instant::now();
    let e = read_all(&driver, &file).unwrap_err();
    assert!(matches!(e, RemoteError::Request { .. }), "{e:?}");
    assert!(e.to_string().contains("timed out"), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_short_ranged_get_is_an_error_naming_its_range() {
    let driver = require!(driver());
    let server = require!(S3Server::start());
    server.put("cut", &pattern(256 << 10, 6));
    let proxy = Proxy::start(server.port(), |method, _| {
        if method == "GET" {
            Fault::Shorten(1000)
        } else {
            Fault::Pass
        }
    });
    let mut s = settings(&proxy.endpoint());
    s.retries = 0;
    let file = RemoteFile::open(&driver, &url("cut"), s).unwrap();
    let e = read_all(&driver, &file).unwrap_err();
    // The client sees the answer's range differ from the one asked; the error names it.
    let text = e.to_string();
    assert!(
        text.contains("s3://models/cut: GET bytes ") && text.contains("failed"),
        "{e:?}"
    );
}

#[test]
fn a_server_stopped_mid_read_fails_the_read() {
    let driver = require!(driver());
    let mut server = require!(S3Server::start());
    let bytes = pattern(2 << 20, 8);
    server.put("big", &bytes);
    let proxy = Proxy::start(server.port(), |method, _| {
        if method == "GET" {
            Fault::Delay(Duration::from_millis(100))
        } else {
            Fault::Pass
        }
    });
    let mut s = settings(&proxy.endpoint());
    s.concurrency = 2;
    s.retries = 2;
    s.retry_timeout = Duration::from_secs(2);
    let file = RemoteFile::open(&driver, &url("big"), s).unwrap();
    let reader = std::thread::spawn(move || read_all(&driver, &file).map(|b| b.len()));
    std::thread::sleep(Duration::from_millis(350));
    server.stop();
    let e = reader.join().unwrap().unwrap_err();
    assert!(e.to_string().contains("s3://models/big: GET bytes "), "{e}");
    assert!(matches!(e, RemoteError::Request { .. }), "{e:?}");
}

#[test]
fn a_server_with_weak_etags_is_read_without_if_match() {
    let driver = require!(driver());
    let server = require!(S3Server::start());
    let bytes = pattern(300_000, 9);
    server.put("weak", &bytes);
    let proxy = Proxy::start(server.port(), |_, _| Fault::WeakEtag);
    let file = RemoteFile::open(&driver, &url("weak"), settings(&proxy.endpoint())).unwrap();
    assert!(
        file.etag().is_some_and(|e| e.starts_with("W/")),
        "{:?}",
        file.etag()
    );
    assert_eq!(read_all(&driver, &file).unwrap(), bytes);
}
