//! The loader through the emulated runtime on real files written by the `safetensors`
//! crate: every dtype, empty tensors, unaligned sizes and several shards arrive byte for
//! byte; the filter, the options and the progress callback do what they say; and every bad
//! file fails the whole load with an error that names the shard and the problem.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile::{Config, ConfigBuilder, Driver, Platform};
use hipfile_safetensors::safetensors::{self, tensor::TensorView};
use hipfile_safetensors::{
    CacheState, Checkpoint, DEFAULT_COLD_IN_FLIGHT, DEFAULT_COLD_REQUEST_SIZE,
    DEFAULT_HOT_IN_FLIGHT, DEFAULT_REQUEST_SIZE, Dtype, LoadError, Loader,
};
use hipfile_testfs::{Ext4Data, MountedFs, Skip, TempDir, emulated_runtime, require};
use std::path::{Path, PathBuf};

fn config(settings: ConfigBuilder) -> Result<Config, Skip> {
    let lib = emulated_runtime()?;
    Ok(settings.hip_library(lib).build_with(|_| None).0)
}

fn driver() -> Result<Driver, Skip> {
    let d = Driver::open_private(config(ConfigBuilder::new())?).unwrap();
    assert_eq!(d.runtime().platform, Platform::Emulated);
    Ok(d)
}

/// Bytes that differ from one tensor to the next and from one offset to the next.
fn bytes(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| {
            (i.wrapping_add(seed.wrapping_mul(7919)))
                .wrapping_mul(2_654_435_761)
                .rotate_left(9) as u8
        })
        .collect()
}

/// A tensor to write: name, dtype, shape; its bytes follow from its index.
type Spec = (&'static str, Dtype, &'static [usize]);

fn byte_len(dtype: Dtype, shape: &[usize]) -> usize {
    shape.iter().product::<usize>() * dtype.bitsize() / 8
}

/// Writes `specs` as one safetensors file with the crate's own writer; returns the file and
/// each tensor's bytes by name.
fn write_shard(
    dir: &Path,
    file: &str,
    specs: &[Spec],
    seed: u32,
) -> (PathBuf, Vec<(String, Vec<u8>)>) {
    let data: Vec<(String, Vec<u8>)> = specs
        .iter()
        .enumerate()
        .map(|(i, (name, dtype, shape))| {
            (
                (*name).to_owned(),
                bytes(byte_len(*dtype, shape), seed + i as u32),
            )
        })
        .collect();
    let views: Vec<(String, TensorView<'_>)> = specs
        .iter()
        .zip(&data)
        .map(|((name, dtype, shape), (_, d))| {
            (
                (*name).to_owned(),
                TensorView::new(*dtype, shape.to_vec(), d).unwrap(),
            )
        })
        .collect();
    let path = dir.join(file);
    safetensors::serialize_to_file(views, None, &path).unwrap();
    (path, data)
}

const SHARD_A: &[Spec] = &[
    ("a.f64", Dtype::F64, &[3, 5]),
    ("a.f32", Dtype::F32, &[7]),
    ("a.bf16", Dtype::BF16, &[13, 3]),
    ("a.f16", Dtype::F16, &[1]),
    ("a.i8", Dtype::I8, &[5, 5, 5]),
    ("a.empty_u8", Dtype::U8, &[0]),
    ("a.bool", Dtype::BOOL, &[3]),
    ("a.i64", Dtype::I64, &[2, 2]),
    ("a.empty_u16", Dtype::U16, &[4, 0]),
    ("a.f4", Dtype::F4, &[6]),
    ("a.fp8", Dtype::F8_E4M3, &[9]),
    ("a.scalar_i32", Dtype::I32, &[]),
    // Larger than several requests of 8 KiB, and not a multiple of 4 KiB.
    ("a.big", Dtype::U8, &[100_003]),
];

const SHARD_B: &[Spec] = &[
    ("b.u32", Dtype::U32, &[11, 13]),
    ("b.c64", Dtype::C64, &[3]),
    ("b.big", Dtype::BF16, &[3, 20_001]),
    ("b.u64", Dtype::U64, &[1]),
];

/// Every tensor of `expected` is in `ck` with its dtype, shape and bytes.
fn assert_loaded(ck: &Checkpoint, expected: &[(String, Vec<u8>)], specs: &[Spec]) {
    for ((name, data), (_, dtype, shape)) in expected.iter().zip(specs) {
        let t = ck.get(name).unwrap_or_else(|| panic!("{name} not loaded"));
        assert_eq!(t.name(), name);
        assert_eq!(t.dtype(), *dtype, "{name}");
        assert_eq!(t.shape(), *shape, "{name}");
        assert_eq!(t.byte_len(), data.len(), "{name}");
        let mut host = vec![0u8; data.len()];
        t.view().copy_to_host(&mut host).unwrap();
        assert!(
            host == *data,
            "{name}: the bytes in device memory differ from the file's"
        );
    }
}

/// Each tensor's name and bytes.
type Written = Vec<(String, Vec<u8>)>;

fn two_shards(dir: &TempDir) -> (Vec<PathBuf>, Written, Vec<Spec>) {
    let (a, da) = write_shard(dir.path(), "model-00001-of-00002.safetensors", SHARD_A, 1);
    let (b, db) = write_shard(dir.path(), "model-00002-of-00002.safetensors", SHARD_B, 100);
    let specs = SHARD_A.iter().chain(SHARD_B).copied().collect();
    (vec![a, b], da.into_iter().chain(db).collect(), specs)
}

#[test]
fn every_dtype_and_shape_arrives_byte_for_byte_from_several_shards() {
    let driver = require!(driver());
    let dir = TempDir::new("st-every-dtype");
    let (paths, expected, specs) = two_shards(&dir);
    for (state, in_flight) in [
        (CacheState::Hot, DEFAULT_HOT_IN_FLIGHT),
        (CacheState::Cold, DEFAULT_COLD_IN_FLIGHT),
    ] {
        let mut seen = Vec::new();
        let ck = Loader::new(&driver)
            .request_size(8192)
            .cache_state(state)
            .progress(|p| seen.push(p))
            .load(&paths)
            .unwrap();
        assert_eq!(ck.len(), specs.len());
        assert_loaded(&ck, &expected, &specs);
        let total: u64 = expected.iter().map(|(_, d)| d.len() as u64).sum();
        assert_eq!(ck.tensor_bytes(), total);
        let report = *ck.report();
        assert_eq!(report.in_flight, in_flight);
        assert_eq!(report.cold, state == CacheState::Cold);
        assert!(report.requests > 2 * 12, "{report:?}");
        // The backends moved what was needed, and at most the alignment past the end more.
        let moved = report.fastpath_bytes + report.fallback_bytes;
        assert!(
            moved >= report.bytes_read && moved < report.bytes_read + 2 * 4096,
            "{report:?}"
        );
        // Progress rises to the total, which is what was read.
        let last = *seen.last().unwrap();
        assert_eq!(last.done, last.total);
        assert_eq!(last.done, report.bytes_read);
        assert!(seen.windows(2).all(|w| w[0].done < w[1].done));
        assert!(report.bytes_read >= total);
        // Shard by shard, each in file order; the names are the shards' names.
        let order: Vec<(usize, u64)> = ck.iter().map(|t| (t.shard(), t.file_offset())).collect();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(order, sorted);
        assert_eq!(
            ck.iter().filter(|t| t.shard_path() == paths[1]).count(),
            SHARD_B.len()
        );
    }
}

#[test]
fn the_filter_loads_only_the_names_it_matches() {
    let driver = require!(driver());
    let dir = TempDir::new("st-filter");
    let (paths, expected, specs) = two_shards(&dir);
    let mut last = None;
    let ck = Loader::new(&driver)
        .filter("?.big")
        .progress(|p| last = Some(p))
        .load(&paths)
        .unwrap();
    let names: Vec<&str> = ck.iter().map(|t| t.name()).collect();
    assert_eq!(names, ["a.big", "b.big"]);
    let (want, want_specs): (Vec<_>, Vec<_>) = expected
        .into_iter()
        .zip(specs)
        .filter(|((n, _), _)| n.ends_with(".big"))
        .unzip();
    assert_loaded(&ck, &want, &want_specs);
    assert!(ck.get("a.f64").is_none());
    let last = last.unwrap();
    assert_eq!(last.done, last.total);

    // A filter that matches nothing loads nothing, and allocates nothing.
    let ck = Loader::new(&driver)
        .filter("nothing*")
        .load(&paths)
        .unwrap();
    assert!(ck.is_empty());
    assert!(ck.shard_buffer(0).is_none() && ck.shard_buffer(1).is_none());
}

#[test]
fn a_shard_of_only_empty_tensors_loads() {
    let driver = require!(driver());
    let dir = TempDir::new("st-empty");
    let specs: &[Spec] = &[("e.a", Dtype::F32, &[0, 3]), ("e.b", Dtype::U8, &[0])];
    let (path, expected) = write_shard(dir.path(), "empty.safetensors", specs, 5);
    let ck = Loader::new(&driver).load(&[&path]).unwrap();
    assert_eq!(ck.len(), 2);
    assert_loaded(&ck, &expected, specs);
    assert_eq!(ck.report().bytes_read, 0);
}

/// The message of the load of `paths`, which must fail.
fn load_error(driver: &Driver, paths: &[PathBuf]) -> (LoadError, String) {
    match Loader::new(driver).load(paths) {
        Ok(ck) => panic!("loaded {} tensors from a bad checkpoint", ck.len()),
        Err(e) => {
            let text = e.to_string();
            (e, text)
        }
    }
}

/// A good shard followed by `bad` (bytes written as they are): the load fails whole, and
/// the message names the bad shard and says `problem`.
fn refused(driver: &Driver, dir: &TempDir, name: &str, bad: &[u8], problem: &str) -> LoadError {
    let (good, _) = write_shard(dir.path(), "good.safetensors", SHARD_B, 3);
    let path = dir.path().join(name);
    std::fs::write(&path, bad).unwrap();
    let (e, text) = load_error(driver, &[good, path.clone()]);
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains(problem), "{problem:?} not in {text:?}");
    e
}

fn raw(header: &str, data_len: usize) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend(std::iter::repeat_n(0u8, data_len));
    out
}

#[test]
fn a_header_that_is_not_json_names_the_shard() {
    let driver = require!(driver());
    let dir = TempDir::new("st-bad-json");
    let e = refused(
        &driver,
        &dir,
        "bad-json.safetensors",
        &raw("{\"x\": [1, 2", 16),
        "invalid JSON in header",
    );
    assert!(matches!(e, LoadError::Format { .. }), "{e:?}");
}

#[test]
fn a_header_longer_than_the_file_names_the_shard() {
    let driver = require!(driver());
    let dir = TempDir::new("st-long-header");
    let mut bytes = raw("{}", 0);
    bytes[..8].copy_from_slice(&1000u64.to_le_bytes());
    refused(
        &driver,
        &dir,
        "long.safetensors",
        &bytes,
        "the header's length is 1000 bytes but the file has only 2",
    );
    refused(
        &driver,
        &dir,
        "tiny.safetensors",
        b"abc",
        "fewer than the 8",
    );
    let mut huge = raw("{}", 0);
    huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    refused(
        &driver,
        &dir,
        "huge.safetensors",
        &huge,
        "more than the format's",
    );
}

#[test]
fn a_header_that_claims_more_data_than_the_file_has_names_the_shard() {
    let driver = require!(driver());
    let dir = TempDir::new("st-truncated");
    let header = r#"{"t":{"dtype":"F32","shape":[4,4],"data_offsets":[0,64]}}"#;
    refused(
        &driver,
        &dir,
        "short.safetensors",
        &raw(header, 40),
        "describes 64 bytes of tensor data but the file has only 40",
    );
    refused(
        &driver,
        &dir,
        "long.safetensors",
        &raw(header, 70),
        "6 bytes after the last tensor's data",
    );
}

#[test]
fn offsets_that_disagree_with_the_shape_or_overlap_name_the_shard() {
    let driver = require!(driver());
    let dir = TempDir::new("st-offsets");
    let wrong_size = r#"{"t":{"dtype":"F32","shape":[4],"data_offsets":[0,12]}}"#;
    let e = refused(
        &driver,
        &dir,
        "size.safetensors",
        &raw(wrong_size, 12),
        "invalid JSON in header",
    );
    assert!(
        e.to_string()
            .contains("invalid shape, data type, or offset"),
        "{e}"
    );
    let overlap = r#"{"t":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"u":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}}"#;
    let e = refused(
        &driver,
        &dir,
        "overlap.safetensors",
        &raw(overlap, 12),
        "invalid offset for tensor",
    );
    assert!(matches!(e, LoadError::Format { .. }), "{e:?}");
    let bad_dtype = r#"{"t":{"dtype":"F99","shape":[1],"data_offsets":[0,1]}}"#;
    refused(
        &driver,
        &dir,
        "dtype.safetensors",
        &raw(bad_dtype, 1),
        "F99",
    );
}

#[test]
fn a_name_in_two_shards_names_both() {
    let driver = require!(driver());
    let dir = TempDir::new("st-duplicate");
    let (a, _) = write_shard(dir.path(), "one.safetensors", SHARD_B, 1);
    let (b, _) = write_shard(dir.path(), "two.safetensors", &SHARD_B[2..3], 2);
    let (e, text) = load_error(&driver, &[a.clone(), b.clone()]);
    assert!(matches!(e, LoadError::Duplicate { .. }), "{e:?}");
    assert!(text.contains("\"b.big\""), "{text}");
    assert!(
        text.contains(&a.display().to_string()) && text.contains(&b.display().to_string()),
        "{text}"
    );
}

#[test]
fn a_missing_shard_and_bad_options_are_errors() {
    let driver = require!(driver());
    let dir = TempDir::new("st-missing");
    let missing = dir.path().join("nope.safetensors");
    let (_, text) = load_error(&driver, std::slice::from_ref(&missing));
    assert!(
        text.contains(&missing.display().to_string()) && text.contains("cannot open"),
        "{text}"
    );
    assert!(matches!(
        Loader::new(&driver).load::<PathBuf>(&[]),
        Err(LoadError::NoShards)
    ));
    let (good, _) = write_shard(dir.path(), "good.safetensors", SHARD_B, 3);
    for bad in [0, 4095, 4097, 2 << 30] {
        let e = Loader::new(&driver)
            .request_size(bad)
            .load(&[&good])
            .unwrap_err();
        assert!(matches!(e, LoadError::Option(_)), "{bad}: {e:?}");
    }
    let e = Loader::new(&driver)
        .in_flight(0)
        .load(&[&good])
        .unwrap_err();
    assert!(matches!(e, LoadError::Option(_)), "{e:?}");
}

#[test]
fn a_device_that_does_not_exist_fails_the_load_naming_the_shard() {
    let driver = require!(driver());
    let dir = TempDir::new("st-device");
    let (a, expected) = write_shard(dir.path(), "a.safetensors", SHARD_B, 1);
    let ck = Loader::new(&driver).device(0).load(&[&a]).unwrap();
    assert_loaded(&ck, &expected, SHARD_B);
    assert_eq!(ck.shard_device(0), Some(0));
    let e = Loader::new(&driver)
        .device_per_shard(|i, _| 40 + i as i32)
        .load(&[&a])
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains(&a.display().to_string()) && text.contains("device 40"),
        "{text}"
    );
}

#[test]
fn the_device_of_a_shard_is_asked_once_per_shard() {
    let driver = require!(driver());
    let dir = TempDir::new("st-device-once");
    let (paths, expected, specs) = two_shards(&dir);
    let calls = std::cell::Cell::new(0);
    let ck = Loader::new(&driver)
        .device_per_shard(|_, _| {
            calls.set(calls.get() + 1);
            0
        })
        .load(&paths)
        .unwrap();
    assert_loaded(&ck, &expected, &specs);
    assert_eq!(calls.get(), 2);
    assert_eq!((ck.shard_device(0), ck.shard_device(1)), (Some(0), Some(0)));
}

/// Through the fallback, a load with requests spread over the I/O threads has their staging
/// buffers pinned while it allocates device memory: after it, what requests of the load's
/// size keep busy on every thread exists (here one 1 MiB buffer per thread: 8 MiB requests
/// are 1 MiB tasks of one chunk), made by one allocation.
#[test]
fn a_load_through_the_fallback_prepares_the_staging_of_every_io_thread() {
    use hipfile_testkit::{Call, Injected};
    use std::sync::Arc;
    let settings = ConfigBuilder::new()
        .force_compat_mode(true)
        .io_threads(8)
        .task_size(1 << 20);
    let base = Driver::open_private(require!(config(settings))).unwrap();
    let rt = Arc::new(Injected::new(base.tuning().gpu().clone()));
    let driver = Driver::with_runtime(base.config().clone(), rt.clone(), base.runtime().clone());
    drop(base);
    let dir = TempDir::new("st-prepared");
    const BIG: &[Spec] = &[("big", Dtype::U8, &[3 << 20]), ("small", Dtype::F32, &[5])];
    let (path, expected) = write_shard(dir.path(), "big.safetensors", BIG, 3);
    let ck = Loader::new(&driver)
        .cache_state(CacheState::Hot)
        .request_size(8 << 20)
        .load(&[&path])
        .unwrap();
    assert_loaded(&ck, &expected, BIG);
    assert_eq!(rt.calls(Call::AllocPinned), 1);
    // One per I/O thread exists already (the 3 MiB request itself keeps only three busy):
    // asking for them pins nothing.
    assert_eq!(driver.tuning().prepare_staging(8 << 20), 8);
    assert_eq!(rt.calls(Call::AllocPinned), 1);
}

#[test]
fn a_device_per_tensor_that_does_not_exist_fails_the_load_naming_the_shard() {
    let driver = require!(driver());
    let dir = TempDir::new("st-device-per-tensor");
    let (a, _) = write_shard(dir.path(), "a.safetensors", SHARD_B, 1);
    let e = Loader::new(&driver)
        .device_per_tensor(|name, _| if name == "b.big" { 40 } else { 0 })
        .load(&[&a])
        .unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(e, LoadError::Gpu { .. })
            && text.contains(&a.display().to_string())
            && text.contains("device 40"),
        "{text}"
    );
}

/// Runs the ignored test `name` of this binary alone in a child process with `envs`:
/// whether it passed, and its output.
fn child(name: &str, envs: &[(&str, &str)]) -> (bool, String) {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .envs(envs.iter().copied())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success() && text.contains("1 passed"), text)
}

#[test]
fn tensors_go_to_the_device_each_one_is_given() {
    require!(driver());
    let (ok, text) = child(
        "child_tensors_on_three_devices",
        &[("HIPFILE_EMU_DEVICES", "3")],
    );
    assert!(ok, "{text}");
}

/// The device of each tensor of [`two_shards`] in `child_tensors_on_three_devices`: the
/// first shard split between devices 0 and 2, the second whole on device 1.
fn device_of(name: &str, shard: usize) -> i32 {
    match (shard, name.contains("big")) {
        (0, true) => 2,
        (0, false) => 0,
        _ => 1,
    }
}

#[test]
#[ignore = "run by tensors_go_to_the_device_each_one_is_given in a child process"]
fn child_tensors_on_three_devices() {
    let driver = require!(driver());
    let dir = TempDir::new("st-three-devices");
    let (paths, expected, specs) = two_shards(&dir);
    let order: Vec<String> = Loader::new(&driver)
        .load(&paths)
        .unwrap()
        .iter()
        .map(|t| t.name().to_owned())
        .collect();
    for state in [CacheState::Hot, CacheState::Cold] {
        let ck = Loader::new(&driver)
            .device_per_tensor(device_of)
            .cache_state(state)
            .request_size(8192)
            .load(&paths)
            .unwrap();
        assert_loaded(&ck, &expected, &specs);
        for t in ck.iter() {
            assert_eq!(
                t.device(),
                Some(device_of(t.name(), t.shard())),
                "{}",
                t.name()
            );
        }
        assert_eq!(
            ck.iter().map(|t| t.name().to_owned()).collect::<Vec<_>>(),
            order,
            "tensors are listed shard by shard in file order, wherever they went"
        );
        let buffers: Vec<(usize, Option<i32>)> = ck
            .buffers()
            .map(|(shard, device, _)| (shard, device))
            .collect();
        assert_eq!(buffers, [(0, Some(0)), (0, Some(2)), (1, Some(1))]);
        assert_eq!((ck.shard_device(0), ck.shard_device(1)), (None, Some(1)));
        assert!(ck.shard_buffer(0).is_none() && ck.shard_buffer(1).is_some());
    }
}

/// A checkpoint just written is in the page cache and read as hot; once its pages are
/// dropped it is read as cold, in file order with few requests in flight.
#[test]
fn the_page_cache_decides_hot_or_cold() {
    let driver = require!(driver());
    let dir = TempDir::new("st-cold");
    let (path, expected) = write_shard(dir.path(), "cold.safetensors", SHARD_A, 4);
    let file = std::fs::File::open(&path).unwrap();
    let len = file.metadata().unwrap().len();
    let cold = require!(
        hipfile_safetensors::is_cold(&file, 0, len)
            .ok_or_else(|| Skip("this kernel has no cachestat(2)".into()))
    );
    assert!(!cold, "a file just written is cached");
    let inventory = hipfile_safetensors::Inventory::open(&[&path]).unwrap();
    assert_eq!(inventory.is_cold(), Some(false));
    let ck = Loader::new(&driver).load(&[&path]).unwrap();
    assert!(!ck.report().cold, "{:?}", ck.report());
    assert_eq!(ck.report().in_flight, DEFAULT_HOT_IN_FLIGHT);
    assert_eq!(ck.report().request_size, DEFAULT_REQUEST_SIZE);
    drop(ck);

    file.sync_all().unwrap();
    rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
    assert_eq!(hipfile_safetensors::is_cold(&file, 0, len), Some(true));
    assert_eq!(
        inventory.is_cold(),
        Some(true),
        "the inventory tells as the loader does"
    );
    let ck = Loader::new(&driver).load(&[&path]).unwrap();
    assert!(ck.report().cold, "{:?}", ck.report());
    assert_eq!(ck.report().in_flight, DEFAULT_COLD_IN_FLIGHT);
    assert_eq!(ck.report().request_size, DEFAULT_COLD_REQUEST_SIZE);
    assert_loaded(&ck, &expected, SHARD_A);
}

/// On ext4 (data=ordered) the fastpath serves the aligned requests: the loader's plan keeps
/// file offsets, sizes and device offsets aligned alike, even though the data section
/// starts at an unaligned offset.
#[test]
fn on_ext4_the_fastpath_serves_the_aligned_requests() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let driver = require!(driver());
    let (path, expected) = write_shard(fs.path(), "ext4.safetensors", SHARD_A, 9);
    let ck = Loader::new(&driver)
        .request_size(16384)
        .load(&[&path])
        .unwrap();
    assert_loaded(&ck, &expected, SHARD_A);
    let report = ck.report();
    assert!(report.fastpath_bytes > 0, "{report:?}");
    assert_eq!(report.fallback_bytes, 0, "{report:?}");
}

/// Runs `load` on a thread of its own and gives its result, or, when it has not returned
/// within [`DEADLINE`], releases it (a writer opens `fifo`, which ends an open blocked on
/// it) and fails: a load blocked on a FIFO would otherwise hang the test forever. A
/// deadline, not a timing: the load takes milliseconds.
fn load_or_hang<T: Send + 'static>(fifo: &Path, load: impl FnOnce() -> T + Send + 'static) -> T {
    const DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(load());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(result) => result,
        Err(_) => {
            let _writer = std::fs::OpenOptions::new().write(true).open(fifo);
            panic!(
                "the load of {} did not return within {DEADLINE:?}: it blocked on the FIFO",
                fifo.display()
            );
        }
    }
}

/// A FIFO among the shards is refused at once, by name, before anything is allocated; the
/// load never waits for a writer that will not come.
#[test]
fn a_fifo_shard_is_refused_without_waiting_for_a_writer() {
    let driver = require!(driver());
    let dir = TempDir::new("st-fifo");
    let (good, _) = write_shard(dir.path(), "good.safetensors", SHARD_B, 3);
    let fifo = hipfile_testfs::fifo(dir.path());
    let paths = vec![good, fifo.clone()];
    let loading = driver.clone();
    let result = load_or_hang(&fifo, move || {
        Loader::new(&loading).load(&paths).map(|ck| ck.len())
    });
    let e = result.expect_err("a FIFO is not a shard");
    let text = e.to_string();
    assert!(matches!(e, LoadError::FileType { .. }), "{e:?}");
    assert!(text.contains(&fifo.display().to_string()), "{text}");
    assert!(text.contains("FIFO"), "{text}");
    assert!(text.contains("regular file or a block device"), "{text}");
}

/// A shard on a block device (a loop device whose bytes are a safetensors file that ends
/// exactly at the device's end) loads as a file does.
#[test]
fn a_shard_on_a_block_device_loads() {
    let driver = require!(driver());
    let dev = require!(hipfile_testfs::loop_device(1));
    let total = 1usize << 20;
    let mut header =
        String::from("{\"blk.u8\":{\"dtype\":\"U8\",\"shape\":[LEN],\"data_offsets\":[0,LEN]}}");
    // The header's length depends on LEN's digits, which depend on the header's length:
    // a fixed width of 7 digits, and spaces (which the format allows) to a multiple of 8.
    let len_of = |h: &str| total - 8 - h.len();
    header = header.replace("LEN", "0000000");
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let n = len_of(&header);
    let header = header.replace("0000000", &format!("{n:07}"));
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    let data: Vec<u8> = (0..n).map(|i| (i % 253) as u8).collect();
    bytes.extend_from_slice(&data);
    assert_eq!(bytes.len(), total);
    std::fs::write(dev.path(), &bytes).unwrap();
    let ck = Loader::new(&driver).load(&[dev.path()]).unwrap();
    let t = ck.get("blk.u8").unwrap();
    let mut host = vec![0u8; n];
    t.view().copy_to_host(&mut host).unwrap();
    assert!(
        host == data,
        "the bytes in device memory differ from the device's"
    );
}

/// Writes Hugging Face's index for `shards` (every tensor of each, by file name) beside them.
fn write_index(dir: &Path, name: &str, shards: &[(&Path, &[Spec])]) -> PathBuf {
    let mut map = serde_json::Map::new();
    for (path, specs) in shards {
        let file = path.file_name().unwrap().to_str().unwrap();
        for (tensor, ..) in specs.iter() {
            map.insert((*tensor).to_owned(), file.into());
        }
    }
    let index = serde_json::json!({"metadata": {"total_size": 0}, "weight_map": map});
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_string_pretty(&index).unwrap()).unwrap();
    path
}

/// An index (`model.safetensors.index.json`) loads the shards it names, from its own
/// directory, whatever the current directory; what it says is checked against the shards.
#[test]
fn an_index_loads_the_shards_it_names() {
    let driver = require!(driver());
    let dir = TempDir::new("st-index");
    let (paths, expected, specs) = two_shards(&dir);
    let index = write_index(
        dir.path(),
        "model.safetensors.index.json",
        &[(&paths[0], SHARD_A), (&paths[1], SHARD_B)],
    );
    let ck = Loader::new(&driver).load(&[&index]).unwrap();
    assert_eq!(ck.len(), specs.len());
    assert_loaded(&ck, &expected, &specs);
    let shards: Vec<&Path> = ck.shard_paths().collect();
    assert_eq!(shards, [paths[0].as_path(), paths[1].as_path()]);

    let read = hipfile_safetensors::Index::read(&index).unwrap();
    assert_eq!(read.shards(), paths.as_slice());
    assert_eq!(read.shard_of("b.big"), Some(paths[1].as_path()));
    assert_eq!(read.len(), specs.len());
}

/// A shard the index names that is not there is an error naming it and the index; so is
/// an index that is not one, and one that names a tensor its shard does not hold.
#[test]
fn an_index_with_a_missing_shard_or_a_wrong_entry_names_the_problem() {
    let driver = require!(driver());
    let dir = TempDir::new("st-index-bad");
    let (paths, ..) = two_shards(&dir);
    let gone = dir.path().join("model-00003-of-00003.safetensors");
    let index = write_index(
        dir.path(),
        "model.safetensors.index.json",
        &[(&paths[0], SHARD_A), (&gone, SHARD_B)],
    );
    let (e, text) = load_error(&driver, std::slice::from_ref(&index));
    assert!(matches!(e, LoadError::Io { .. }), "{e:?}");
    assert!(text.contains(&gone.display().to_string()), "{text}");
    assert!(text.contains(&index.display().to_string()), "{text}");
    assert!(text.contains("No such file"), "{text}");

    // It names b.big in the first shard, which does not have it.
    let wrong = dir.path().join("wrong.index.json");
    std::fs::write(
        &wrong,
        r#"{"weight_map": {"a.f64": "model-00001-of-00002.safetensors", "b.big": "model-00001-of-00002.safetensors"}}"#,
    )
    .unwrap();
    let (e, text) = load_error(&driver, std::slice::from_ref(&wrong));
    assert!(matches!(e, LoadError::Index { .. }), "{e:?}");
    assert!(text.contains(&wrong.display().to_string()), "{text}");
    assert!(text.contains("\"b.big\""), "{text}");

    for (name, body, problem) in [
        (
            "config.json",
            r#"{"hidden_size": 4096}"#,
            "no \"weight_map\"",
        ),
        ("broken.index.json", "{\"weight_map\": ", "not valid JSON"),
        (
            "outside.index.json",
            r#"{"weight_map": {"x": "../x.safetensors"}}"#,
            "inside the index's directory",
        ),
        (
            "number.index.json",
            r#"{"weight_map": {"x": 3}}"#,
            "not a file name",
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        let (e, text) = load_error(&driver, std::slice::from_ref(&path));
        assert!(matches!(e, LoadError::Index { .. }), "{name}: {e:?}");
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains(problem), "{problem:?} not in {text}");
    }
}

/// An index given as a shard under another name is not read as a safetensors header of
/// absurd length without a word: the error says the file looks like JSON.
#[test]
fn json_given_as_a_shard_is_said_to_look_like_json() {
    let driver = require!(driver());
    let dir = TempDir::new("st-index-renamed");
    let path = dir.path().join("index.safetensors");
    std::fs::write(&path, r#"{"metadata": {}, "weight_map": {}}"#).unwrap();
    let (_, text) = load_error(&driver, std::slice::from_ref(&path));
    assert!(text.contains("JSON"), "{text}");
    assert!(text.contains(".json"), "{text}");
}

/// A target per non-empty tensor of `expected`, each into a buffer of its own, and the
/// bytes each must hold.
fn whole_tensors(
    driver: &Driver,
    inventory: &hipfile_safetensors::Inventory,
    expected: &[(String, Vec<u8>)],
) -> (Vec<hipfile_safetensors::Target>, Vec<Vec<u8>>) {
    expected
        .iter()
        .filter(|(_, d)| !d.is_empty())
        .map(|(name, data)| {
            let buffer = driver.alloc(data.len()).unwrap();
            let target =
                hipfile_safetensors::Target::new(inventory, name, 0..data.len() as u64, buffer)
                    .unwrap();
            (target, data.clone())
        })
        .unzip()
}

#[test]
fn read_into_fills_memory_the_caller_allocated_with_whole_tensors_and_ranges() {
    use hipfile_safetensors::{Inventory, Target};
    let driver = require!(driver());
    let dir = TempDir::new("st-read-into");
    let (paths, expected, specs) = two_shards(&dir);
    let inventory = Inventory::open(&paths).unwrap();
    assert_eq!(inventory.len(), specs.len());
    assert_eq!(inventory.shard_paths().collect::<Vec<_>>(), paths);
    let info = inventory.get("b.u64").unwrap();
    assert_eq!(
        (info.dtype, info.shard, info.shape),
        (Dtype::U64, 1, &[1usize][..])
    );
    assert!(inventory.get("no such tensor").is_none());

    // Whole tensors, and bytes 3..17 of the first, each into a buffer of its own.
    let (mut targets, mut wanted) = whole_tensors(&driver, &inventory, &expected);
    let (first, data) = &expected[0];
    let part = driver.alloc(14).unwrap();
    targets.push(Target::new(&inventory, first, 3..17, part).unwrap());
    wanted.push(data[3..17].to_vec());
    let report = Loader::new(&driver)
        .request_size(8192)
        .read_into(&inventory, &mut targets)
        .unwrap();
    assert_eq!(
        report.bytes_read,
        wanted.iter().map(|w| w.len() as u64).sum::<u64>()
    );
    for (target, want) in targets.iter().zip(&wanted) {
        let mut host = vec![0u8; want.len()];
        target.buffer().copy_to_host(0, &mut host).unwrap();
        assert!(host == *want, "the bytes read differ from the file's");
    }

    // A range outside the tensor, a short buffer or an unknown name is refused.
    let len = data.len() as u64;
    for (name, range) in [
        (first.as_str(), 0..len + 1),
        (first.as_str(), 0..8),
        ("nope", 0..1),
    ] {
        let small = driver.alloc(4).unwrap();
        let e = Target::new(&inventory, name, range, small).unwrap_err();
        assert!(matches!(e, LoadError::Option(_)), "{e}");
    }
}

#[test]
fn reads_of_one_inventory_at_the_same_time_each_register_the_shard() {
    use hipfile_safetensors::Inventory;
    let driver = require!(driver());
    let dir = TempDir::new("st-read-into-twice");
    let (paths, expected, _) = two_shards(&dir);
    let inventory = Inventory::open(&paths).unwrap();
    let (mut outer, _) = whole_tensors(&driver, &inventory, &expected);
    let (mut inner, wanted) = whole_tensors(&driver, &inventory, &expected);
    // A second read of the same inventory starts while the first holds its shards
    // registered (as a reader's threads each calling `get_tensor` do).
    let mut nested = None;
    Loader::new(&driver)
        .progress(|_| {
            if nested.is_none() {
                nested = Some(Loader::new(&driver).read_into(&inventory, &mut inner));
            }
        })
        .read_into(&inventory, &mut outer)
        .unwrap();
    let report = nested.expect("the progress callback ran").unwrap();
    assert!(report.bytes_read > 0);
    for (target, want) in inner.iter().zip(&wanted) {
        let mut host = vec![0u8; want.len()];
        target.buffer().copy_to_host(0, &mut host).unwrap();
        assert!(
            host == *want,
            "the nested read's bytes differ from the file's"
        );
    }
}
