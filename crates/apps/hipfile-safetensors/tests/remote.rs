//! Checkpoints at URLs (the `remote` feature) against a real S3-compatible server (`s3s-fs`)
//! on loopback: every tensor arrives as a load of the same files from disk gives it.

#![cfg(feature = "remote")]
#![allow(clippy::unwrap_used)]

use hipfile::{Config, ConfigBuilder, Driver};
use hipfile_safetensors::safetensors::tensor::TensorView;
use hipfile_safetensors::{
    Checkpoint, Dtype, Inventory, LoadError, Loader, RemoteError, RemoteSettings, S3Settings,
    Target,
};
use hipfile_testfs::{S3Server, Skip, emulated_runtime, require};

fn driver() -> Result<Driver, Skip> {
    let lib = emulated_runtime()?;
    let config: Config = ConfigBuilder::new().hip_library(lib).build_with(|_| None).0;
    Ok(Driver::open_private(config).unwrap())
}

fn settings(server: &S3Server) -> RemoteSettings {
    RemoteSettings {
        request_size: 64 << 10,
        concurrency: 4,
        s3: S3Settings {
            endpoint: Some(server.endpoint()),
            region: Some("us-east-1".into()),
            access_key_id: Some(S3Server::KEY_ID.into()),
            secret_access_key: Some(S3Server::SECRET.into()),
            session_token: None,
        },
        ..RemoteSettings::default()
    }
}

/// A shard of `tensors` (name, element count of f32) with bytes from `seed`.
fn shard(tensors: &[(&str, usize)], seed: u8) -> Vec<u8> {
    let data: Vec<Vec<u8>> = tensors
        .iter()
        .enumerate()
        .map(|(i, (_, n))| {
            (0..n * 4)
                .map(|j| (j as u8).wrapping_mul(31).wrapping_add(seed + i as u8))
                .collect()
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .zip(&data)
        .map(|((name, n), d)| {
            (
                (*name).to_owned(),
                TensorView::new(Dtype::F32, vec![*n], d).unwrap(),
            )
        })
        .collect();
    hipfile_safetensors::safetensors::serialize(views, None).unwrap()
}

const A: &[(&str, usize)] = &[("embed", 70_000), ("layer.0.q", 1000), ("norm", 7)];
const B: &[(&str, usize)] = &[("layer.1.q", 50_001), ("head", 12_345)];

fn index() -> String {
    let mut map = serde_json::Map::new();
    for (name, _) in A {
        map.insert((*name).into(), "a.safetensors".into());
    }
    for (name, _) in B {
        map.insert((*name).into(), "b.safetensors".into());
    }
    serde_json::json!({ "metadata": {}, "weight_map": map }).to_string()
}

/// Every tensor of `remote` equals the one of `local`, and they hold the same names.
fn assert_same(remote: &Checkpoint, local: &Checkpoint) {
    assert_eq!(remote.len(), local.len());
    for t in local.iter() {
        let r = remote
            .get(t.name())
            .unwrap_or_else(|| panic!("{} is missing", t.name()));
        assert_eq!(
            (r.dtype(), r.shape()),
            (t.dtype(), t.shape()),
            "{}",
            t.name()
        );
        let (mut a, mut b) = (vec![0; t.byte_len()], vec![0; r.byte_len()]);
        t.view().copy_to_host(&mut a).unwrap();
        r.view().copy_to_host(&mut b).unwrap();
        assert!(a == b, "{} differs", t.name());
    }
}

#[test]
fn a_prefix_with_an_index_loads_as_the_files_do() {
    let driver = require!(driver());
    let server = require!(S3Server::start());
    std::fs::create_dir(server.object_path("ck")).unwrap();
    server.put("ck/a.safetensors", &shard(A, 1));
    server.put("ck/b.safetensors", &shard(B, 2));
    server.put("ck/model.safetensors.index.json", index().as_bytes());
    let local = Loader::new(&driver)
        .load(&[server.object_path("ck/model.safetensors.index.json")])
        .unwrap();
    for urls in [
        vec!["s3://models/ck/".to_owned()],
        vec![S3Server::url("ck/model.safetensors.index.json")],
        vec![
            S3Server::url("ck/a.safetensors"),
            S3Server::url("ck/b.safetensors"),
        ],
    ] {
        let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
        let remote = Loader::new(&driver)
            .load_urls(&urls, &settings(&server))
            .unwrap();
        assert_same(&remote, &local);
        let report = remote.report();
        assert_eq!(report.remote_bytes, report.bytes_read, "{report:?}");
        assert_eq!((report.fastpath_bytes, report.fallback_bytes), (0, 0));
        assert_eq!(remote.shard_paths().count(), 2);
    }

    // Progress comes part by part (64 KiB GETs here), not once an object, and ends at the
    // total.
    let mut steps = Vec::new();
    let remote = Loader::new(&driver)
        .progress(|p| steps.push((p.done, p.total)))
        .load_urls(&["s3://models/ck/"], &settings(&server))
        .unwrap();
    let total = remote.report().bytes_read;
    assert!(steps.len() > 4, "{steps:?}");
    assert!(steps.windows(2).all(|w| w[0].0 < w[1].0), "{steps:?}");
    assert_eq!(steps.last(), Some(&(total, total)));

    // The filter reads only what it selects.
    let some = Loader::new(&driver)
        .filter("layer.*")
        .load_urls(&["s3://models/ck/"], &settings(&server))
        .unwrap();
    assert_eq!(some.len(), 2);
    assert!(some.get("layer.1.q").is_some() && some.get("embed").is_none());
}

#[test]
fn a_prefix_without_an_index_loads_its_safetensors_objects() {
    let driver = require!(driver());
    let server = require!(S3Server::start());
    std::fs::create_dir(server.object_path("plain")).unwrap();
    server.put("plain/b.safetensors", &shard(B, 2));
    server.put("plain/a.safetensors", &shard(A, 1));
    server.put("plain/README.md", b"not a shard");
    // Another model below the prefix is not part of it.
    std::fs::create_dir(server.object_path("plain/other")).unwrap();
    server.put("plain/other/model.safetensors.index.json", b"{}");
    server.put("plain/other/c.safetensors", b"not a shard either");
    let ck = Loader::new(&driver)
        .load_urls(&["s3://models/plain/"], &settings(&server))
        .unwrap();
    assert_eq!(ck.len(), A.len() + B.len());
    let shards: Vec<String> = ck.shard_paths().map(|p| p.display().to_string()).collect();
    assert_eq!(
        shards,
        [
            "s3://models/plain/a.safetensors",
            "s3://models/plain/b.safetensors"
        ]
    );
    let e = Loader::new(&driver)
        .load_urls(&["s3://models/nothing-here/"], &settings(&server))
        .unwrap_err();
    assert!(
        e.to_string().contains("no model.safetensors.index.json"),
        "{e}"
    );
}

#[test]
fn bad_remote_checkpoints_are_refused_naming_the_object() {
    let driver = require!(driver());
    let server = require!(S3Server::start());
    std::fs::create_dir(server.object_path("bad")).unwrap();
    // An index naming a shard that is not there.
    server.put("bad/model.safetensors.index.json", index().as_bytes());
    server.put("bad/a.safetensors", &shard(A, 1));
    let e = Loader::new(&driver)
        .load_urls(&["s3://models/bad/"], &settings(&server))
        .unwrap_err();
    assert!(
        matches!(e, LoadError::Remote(RemoteError::NotFound { .. })),
        "{e:?}"
    );
    assert!(
        e.to_string().contains("s3://models/bad/b.safetensors"),
        "{e}"
    );

    // A truncated shard.
    let mut cut = shard(B, 2);
    cut.truncate(cut.len() - 100);
    server.put("bad/cut.safetensors", &cut);
    let e = Loader::new(&driver)
        .load_urls(&[&S3Server::url("bad/cut.safetensors")], &settings(&server))
        .unwrap_err();
    assert!(matches!(e, LoadError::Invalid { .. }), "{e:?}");
    assert!(
        e.to_string().contains("s3://models/bad/cut.safetensors"),
        "{e}"
    );
}

#[test]
fn a_shard_replaced_after_its_header_was_read_fails_the_read() {
    let driver = require!(driver());
    let server = require!(S3Server::start());
    server.put("swap.safetensors", &shard(A, 1));
    let inventory = Inventory::open_urls(
        &driver,
        &[&S3Server::url("swap.safetensors")],
        &settings(&server),
    )
    .unwrap();
    let embed = inventory.get("embed").unwrap().bytes;
    let len = embed.end - embed.start;
    let mut targets = vec![
        Target::new(
            &inventory,
            "embed",
            0..len,
            driver.alloc(len as usize).unwrap(),
        )
        .unwrap(),
    ];
    server.put("swap.safetensors", &shard(A, 9));
    let e = Loader::new(&driver)
        .read_into(&inventory, &mut targets)
        .unwrap_err();
    assert!(
        matches!(e, LoadError::Remote(RemoteError::Changed { .. })),
        "{e:?}"
    );
}

#[test]
fn a_load_of_several_objects_holds_one_objects_staging() {
    let base = require!(driver());
    let injected = std::sync::Arc::new(hipfile_testkit::Injected::new(base.tuning().gpu().clone()));
    let driver = Driver::with_runtime(
        base.config().clone(),
        injected.clone(),
        base.runtime().clone(),
    );
    let server = require!(S3Server::start());
    std::fs::create_dir(server.object_path("two")).unwrap();
    server.put("two/a.safetensors", &shard(A, 1));
    server.put("two/b.safetensors", &shard(B, 2));
    let settings = settings(&server);
    let ck = Loader::new(&driver)
        .load_urls(&["s3://models/two/"], &settings)
        .unwrap();
    assert_eq!(ck.len(), A.len() + B.len());
    // Each object needs all `concurrency` slots; the second reuses the first's.
    let one_object = (settings.concurrency * settings.request_size) as u64;
    let pinned = injected.pinned_bytes();
    assert!(
        pinned <= one_object,
        "a load of two objects pinned {pinned} bytes of staging, one object's is {one_object}"
    );
}
