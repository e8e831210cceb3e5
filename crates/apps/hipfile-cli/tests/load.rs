//! `hipfile checkpoint` and `hipfile load` run as a user runs them, on the emulated runtime:
//! a generated checkpoint loads and verifies, its CRC-32s are the files' own, the filter
//! selects, and a bad shard or a failing read fails the command with the shard named.

#![allow(clippy::unwrap_used)]

mod common;

use common::{Run, hipfile, temp_dir};
use hipfile_safetensors::safetensors::SafeTensors;
use hipfile_testfs::{Ext4Data, MountedFs, require};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// `hipfile checkpoint --out DIR` with a small scale: the model's four stages (one embedding
/// each) and `layers` layers in all, split into `shards` files; the shards it wrote.
fn generate(dir: &Path, shards: usize, layers: usize) -> Vec<PathBuf> {
    let run = hipfile(
        &[
            "checkpoint",
            "--json",
            "--out",
            dir.to_str().unwrap(),
            "--shards",
            &shards.to_string(),
            "--layers",
            &layers.to_string(),
            "--scale",
            "0.002",
        ],
        &[],
    );
    assert_eq!(run.status, 0, "{}", run.stderr);
    // What it will write is said before it writes.
    assert!(
        run.stderr.contains(&format!(
            "hipfile: writing {shards} shards, {} tensors, ",
            4 + 8 * layers
        )),
        "{}",
        run.stderr
    );
    let v = run.one();
    assert_eq!(v["tensors"], 4 + 8 * layers, "{v}");
    let files: Vec<PathBuf> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| PathBuf::from(f.as_str().unwrap()))
        .collect();
    assert_eq!(files.len(), shards);
    assert!(dir.join("model.safetensors.index.json").is_file());
    files
}

fn load(extra: &[&str], shards: &[PathBuf], env: &[(&str, &str)]) -> Run {
    let mut args: Vec<String> = vec!["load".into(), "--runtime=emulated".into()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(shards.iter().map(|p| p.display().to_string()));
    hipfile(&args, env)
}

/// Every tensor of `shards` with its CRC-32, computed here from the files.
fn file_crcs(shards: &[PathBuf]) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for s in shards {
        let bytes = std::fs::read(s).unwrap();
        let st = SafeTensors::deserialize(&bytes).unwrap();
        for (name, view) in st.tensors() {
            out.push((name, crc32fast::hash(view.data())));
        }
    }
    out
}

#[test]
fn a_generated_checkpoint_loads_and_verifies_with_the_files_crcs() {
    let dir = temp_dir();
    let shards = generate(dir.path(), 3, 6);
    let run = load(&["--verify", "--json"], &shards, &[]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let v = run.one();
    assert_eq!(v["tensors"], 4 + 8 * 6, "{v}");
    assert_eq!(v["shards"], 3, "{v}");
    assert_eq!(v["mismatches"], Value::Array(vec![]), "{v}");
    let expected = file_crcs(&shards);
    let crcs = v["crc32"].as_object().unwrap();
    assert_eq!(crcs.len(), expected.len());
    for (name, crc) in &expected {
        assert_eq!(crcs[name], *crc, "{name}");
    }
    let data: u64 = shards
        .iter()
        .map(|s| {
            let bytes = std::fs::read(s).unwrap();
            let (n, _) = SafeTensors::read_metadata(&bytes).unwrap();
            (bytes.len() - 8 - n) as u64
        })
        .sum();
    assert_eq!(v["bytes"], data, "{v}");
    let moved = v["fastpath_bytes"].as_u64().unwrap() + v["fallback_bytes"].as_u64().unwrap();
    assert!(moved >= data, "{v}");
    for key in [
        "seconds",
        "gbps",
        "requests",
        "in_flight",
        "request_size",
        "cache",
        "bytes_read",
        "peak_rss_bytes",
    ] {
        assert!(v.get(key).is_some(), "{key} missing: {v}");
    }
    // Linux resets the peak on request (since 4.0): the load's own peak is then a number.
    assert!(v["peak_rss_bytes"].as_u64().is_some_and(|b| b > 0), "{v}");

    // The text form says the same.
    let run = load(&["--verify", "--cache", "cold"], &shards, &[]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(run.stdout.contains("loaded 52 tensors"), "{}", run.stdout);
    assert!(run.stdout.contains("(cold, "), "{}", run.stdout);
    assert!(
        run.stdout
            .contains("peak resident memory during the load: "),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("verify: 52 of 52 tensors match"),
        "{}",
        run.stdout
    );
}

#[test]
fn runs_load_the_checkpoint_again_in_the_same_process() {
    let dir = temp_dir();
    let shards = generate(dir.path(), 2, 2);
    let run = load(&["--json", "--verify", "--runs", "3"], &shards, &[]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let v = run.one();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "{v}");
    assert_eq!(
        runs[0]["seconds"], v["seconds"],
        "the top level is the first load's: {v}"
    );
    for r in runs {
        assert!(r["gbps"].as_f64().is_some_and(|g| g > 0.0), "{v}");
        // The reads are part of the load, and take some of its time.
        let (all, read) = (r["seconds"].as_f64().unwrap(), r["read_seconds"].as_f64());
        assert!(read.is_some_and(|s| s > 0.0 && s <= all), "{v}");
    }
    // The last load is the one verified, and it holds every tensor.
    assert_eq!(v["tensors"], 4 + 8 * 2, "{v}");
    assert_eq!(v["mismatches"], Value::Array(vec![]), "{v}");

    let run = load(&["--runs", "2"], &shards, &[]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(run.stdout.contains("\nrun 1: "), "{}", run.stdout);
    assert!(run.stdout.contains(" (reading 0."), "{}", run.stdout);
    assert!(run.stdout.contains("\nrun 2: "), "{}", run.stdout);

    let run = load(&["--runs", "0"], &shards, &[]);
    assert_eq!(run.status, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--runs"), "{}", run.stderr);
}

#[test]
fn the_filter_loads_only_matching_tensors() {
    let dir = temp_dir();
    let shards = generate(dir.path(), 2, 4);
    let run = load(
        &["--json", "--verify", "--list", "--filter", "*.mlp.*"],
        &shards,
        &[],
    );
    assert_eq!(run.status, 0, "{}", run.stderr);
    let v = run.one();
    assert_eq!(v["tensors"], 2 * 2 * 3, "{v}");
    let crcs = v["crc32"].as_object().unwrap();
    assert!(crcs.keys().all(|k| k.contains(".mlp.")), "{v}");
    let list = v["tensor_list"].as_array().unwrap();
    assert_eq!(list.len(), 12, "{v}");
    assert_eq!(
        list[0]["name"], "model.layers.0.mlp.gate_proj.weight",
        "{v}"
    );
    assert_eq!(list[0]["dtype"], "BF16", "{v}");
    assert_eq!(list[0]["shape"], serde_json::json!([10, 2048]), "{v}");
    assert_eq!(list[0]["bytes"], 10 * 2048 * 2, "{v}");

    let run = load(&["--list", "--filter", "*.down_proj.*"], &shards, &[]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .starts_with("model.layers.0.mlp.down_proj.weight BF16 [4, 5120] 40960 bytes ("),
        "{}",
        run.stdout
    );
}

#[test]
fn a_bad_shard_fails_the_load_naming_it() {
    let dir = temp_dir();
    let mut shards = generate(dir.path(), 2, 2);
    let bad = dir.path().join("bad.safetensors");
    std::fs::write(&bad, b"\x05\0\0\0\0\0\0\0{oops").unwrap();
    shards.push(bad.clone());
    let run = load(&["--json"], &shards, &[]);
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains(&bad.display().to_string()),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("invalid JSON in header"),
        "{}",
        run.stderr
    );

    // A tensor in two shards: both are named.
    let again = generate(&dir.path().join("again"), 1, 2);
    let run = load(&[], &[shards[0].clone(), again[0].clone()], &[]);
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert!(run.stderr.contains("is in both"), "{}", run.stderr);
}

#[test]
fn checkpoint_never_overwrites() {
    let dir = temp_dir();
    generate(dir.path(), 1, 2);
    let run = hipfile(
        &[
            "checkpoint",
            "--out",
            dir.path().to_str().unwrap(),
            "--shards",
            "1",
            "--layers",
            "2",
            "--scale",
            "0.002",
        ],
        &[],
    );
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert!(run.stderr.contains("File exists"), "{}", run.stderr);
}

/// On ext4 the fastpath serves the reads; a read it fails with ENODEV is served by the
/// fallback; when it fails with EIO the load fails (exit 1), naming the shard, and prints
/// no result.
#[test]
fn a_failing_read_fails_the_load() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let shards = generate(fs.path(), 2, 2);
    let run = load(&["--json", "--verify"], &shards, &[]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let v = run.one();
    assert_eq!(v["fallback_bytes"], 0, "{v}");
    assert!(v["fastpath_bytes"].as_u64().unwrap() > 0, "{v}");
    // ENODEV is retried on the fallback: the load succeeds, and says which backend moved what.
    let run = load(
        &["--json", "--verify"],
        &shards,
        &[("HIPFILE_EMU_FAULT", "read:ENODEV:1")],
    );
    assert_eq!(run.status, 0, "{}", run.stderr);
    let v = run.one();
    assert!(v["fallback_bytes"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["mismatches"], Value::Array(vec![]), "{v}");
    let run = load(&["--json"], &shards, &[("HIPFILE_EMU_FAULT", "read:EIO")]);
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains("cannot load the checkpoint"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(".safetensors: reading bytes"),
        "{}",
        run.stderr
    );
}

/// `--limits` measures the shards after each load in the state the load found them, and a
/// cold load's shards are left uncached for the next one.
#[test]
fn limits_read_the_shards_in_the_state_each_load_found() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let shards = generate(fs.path(), 2, 2);
    let positive = |v: &Value| v.as_f64().is_some_and(|x| x > 0.0);

    let run = load(
        &["--json", "--limits", "--runs", "2", "--cache", "hot"],
        &shards,
        &[],
    );
    assert_eq!(run.status, 0, "{}", run.stderr);
    let v = run.one();
    let l = &v["limits"];
    assert_eq!(
        l["pread_runs"].as_array().unwrap().len(),
        2,
        "one after each load: {v}"
    );
    assert!(
        positive(&l["pread_gbps"]) && positive(&l["pinned_h2d_gbps"]),
        "{v}"
    );
    assert!(
        l["pread_direct_gbps"].is_null(),
        "direct reads only for a cold load: {v}"
    );
    assert!(positive(&v["ratio"]), "{v}");
    // The shards were read whole, so the loader finds them cached.
    let v = load(&["--json"], &shards, &[]).one();
    assert_eq!(v["cache"], "hot", "{v}");

    let run = load(
        &["--json", "--limits", "--runs", "2", "--cache", "cold"],
        &shards,
        &[],
    );
    assert_eq!(run.status, 0, "{}", run.stderr);
    let v = run.one();
    let l = &v["limits"];
    assert_eq!(l["pread_runs"].as_array().unwrap().len(), 2, "{v}");
    assert_eq!(
        l["pread_direct_runs"].as_array().unwrap().len(),
        2,
        "ext4 reads O_DIRECT: {v}"
    );
    assert!(positive(&l["pread_direct_gbps"]), "{v}");
    assert!(positive(&v["ratio"]), "{v}");
    let v = load(&["--json"], &shards, &[]).one();
    assert_eq!(
        v["cache"], "cold",
        "the measurement left the shards uncached: {v}"
    );

    let run = load(&["--limits"], &shards, &[]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(run.stdout.contains("\nlimits: pread "), "{}", run.stdout);
}

#[test]
fn limits_are_refused_for_urls() {
    let run = load(
        &["--limits"],
        &[PathBuf::from("s3://bucket/model.safetensors")],
        &[],
    );
    assert_eq!(run.status, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--limits"), "{}", run.stderr);
}

/// A FIFO given as a shard is refused at once, by name, with exit status 1: the command
/// does not wait for a writer (the run's deadline fails a command that would).
#[test]
fn a_fifo_shard_is_refused_without_waiting_for_a_writer() {
    let dir = temp_dir();
    let mut shards = generate(dir.path(), 1, 2);
    let fifo = hipfile_testfs::fifo(dir.path());
    shards.push(fifo.clone());
    let run = load(&["--json"], &shards, &[]);
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains(&format!(
            "{}: cannot load a FIFO: a shard must be a regular file or a block device",
            fifo.display()
        )),
        "{}",
        run.stderr
    );
}

/// `hipfile load DIR/model.safetensors.index.json` says it read the index and loads the
/// shards it names, as loading the shards themselves does; a shard the index names that is
/// gone fails the load, naming it.
#[test]
fn the_index_loads_the_shards_it_names() {
    let dir = temp_dir();
    let shards = generate(dir.path(), 3, 6);
    let index = dir.path().join("model.safetensors.index.json");
    let run = load(&["--json", "--verify"], std::slice::from_ref(&index), &[]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let v = run.one();
    assert_eq!(v["shards"], 3, "{v}");
    assert_eq!(v["mismatches"], Value::Array(vec![]), "{v}");
    assert!(
        run.stderr.contains(&format!(
            "{} is a checkpoint index: loading the 3 shards it names",
            index.display()
        )),
        "{}",
        run.stderr
    );
    let direct = load(&["--json"], &shards, &[]).one();
    assert_eq!(direct["tensors"], v["tensors"]);
    assert_eq!(direct["bytes"], v["bytes"]);

    std::fs::remove_file(&shards[1]).unwrap();
    let run = load(&[], std::slice::from_ref(&index), &[]);
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(&shards[1].display().to_string())
            && run.stderr.contains(&index.display().to_string()),
        "{}",
        run.stderr
    );
}

/// `--shards` splits one model into that many files: the same tensors, with the same bytes
/// (CRC-32s), whatever the number of shards; `--layers` counts the model's layers in all.
#[test]
fn shards_split_the_same_model() {
    let dir = temp_dir();
    let mut seen: Vec<Value> = Vec::new();
    for shards in [1, 3, 52] {
        let files = generate(&dir.path().join(format!("in{shards}")), shards, 6);
        let run = load(&["--json", "--verify"], &files, &[]);
        assert_eq!(run.status, 0, "{}", run.stderr);
        let v = run.one();
        assert_eq!(v["shards"], shards, "{v}");
        assert_eq!(v["tensors"], 4 + 8 * 6, "{v}");
        if let Some(first) = seen.first() {
            assert_eq!(v["bytes"], first["bytes"], "{v}");
            assert_eq!(v["crc32"], first["crc32"], "{v}");
        }
        seen.push(v);
    }
}

/// More shards than the model has tensors is refused (exit 2) before anything is written,
/// and says how many it has: `--shards 1000 --scale 0.01` wrote 24 GB when each shard was a
/// model of its own.
#[test]
fn more_shards_than_tensors_is_refused_before_writing() {
    let dir = temp_dir();
    let out = dir.path().join("ck");
    let run = hipfile(
        &[
            "checkpoint",
            "--out",
            out.to_str().unwrap(),
            "--shards",
            "1000",
            "--scale",
            "0.01",
        ],
        &[],
    );
    assert_eq!(run.status, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("644 tensors") && run.stderr.contains("--shards"),
        "{}",
        run.stderr
    );
    assert!(!out.exists(), "nothing is written");
}

/// A checkpoint that does not fit in the target's free space is refused (exit 2) before
/// anything is written: the message says how much it needs and how much is free.
#[test]
fn a_checkpoint_larger_than_the_free_space_is_refused_before_writing() {
    let fs = require!(hipfile_testfs::MountedFs::tmpfs(16));
    let out = fs.path().join("ck");
    let run = hipfile(&["checkpoint", "--out", out.to_str().unwrap()], &[]);
    assert_eq!(run.status, 2, "{}", run.stderr);
    assert!(
        run.stderr.contains("9.65 GB") && run.stderr.contains("free"),
        "{}",
        run.stderr
    );
    assert!(!out.exists(), "nothing is written");
    assert_eq!(std::fs::read_dir(fs.path()).unwrap().count(), 0);
}
