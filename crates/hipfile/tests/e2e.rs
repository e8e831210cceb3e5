//! End to end through the emulated runtime on real filesystems: bytes round-trip, the backend
//! that serves is the one docs/BEHAVIOUR.md predicts, the retry rules hold with injected faults,
//! and bad input is a clear error.
//!
//! Fault cases run in child processes (this test binary re-run with `HIPFILE_EMU_FAULT` set
//! and an exact filter), because the emulated runtime reads its faults from its environment;
//! so do writes under a file-size limit, which holds for a whole process.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile::{BackendKind, ConfigBuilder, Driver, Error, FileHandle, Platform};
use hipfile_testfs::{Ext4Data, MountedFs, Skip, TempDir, emulated_runtime, require};
use hipfile_testkit::{Call, Fault, Gate, Injected};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn driver(settings: ConfigBuilder) -> Result<Driver, Skip> {
    let lib = emulated_runtime()?;
    let config = settings.hip_library(lib).build_with(|_| None).0;
    let d = Driver::open_private(config).unwrap();
    assert_eq!(d.runtime().platform, Platform::Emulated);
    assert!(d.runtime().amd_file_io);
    Ok(d)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(7) as u8 ^ seed)
        .collect()
}

fn write_file(path: &Path, data: &[u8]) {
    let mut f = File::create(path).unwrap();
    f.write_all(data).unwrap();
    f.sync_all().unwrap();
}

fn open_rw(path: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap()
}

fn stats(settings: ConfigBuilder) -> ConfigBuilder {
    settings.stats_level(1)
}

/// Reads `size` bytes at `offset` through hipfile and checks them against `data`.
fn read_and_check(
    fh: &FileHandle,
    d: &Driver,
    data: &[u8],
    size: usize,
    offset: usize,
    buffer_offset: usize,
) -> BackendKind {
    let mut buf = d.alloc(buffer_offset + size.max(1)).unwrap();
    let out = fh
        .read(&mut buf, size as u64, offset as i64, buffer_offset as i64)
        .unwrap();
    let expect_len = data.len().saturating_sub(offset).min(size);
    assert_eq!(out.bytes as usize, expect_len, "read of {size} at {offset}");
    let mut got = vec![0u8; expect_len];
    buf.copy_to_host(buffer_offset, &mut got).unwrap();
    let start = offset.min(data.len());
    assert!(
        got == data[start..start + expect_len],
        "bytes differ for {size} at {offset}"
    );
    out.backend
}

fn round_trips_on(fs: &MountedFs, aligned_backend: BackendKind) {
    let d = driver(stats(ConfigBuilder::new())).unwrap();
    let path = fs.path().join("data.bin");
    let data = pattern(3 * 1024 * 1024 + 123, 7);
    write_file(&path, &data);
    let file = open_rw(&path);
    let fh = d.register_file(&file).unwrap();
    // Aligned: the fastpath where the filesystem allows it.
    assert_eq!(
        read_and_check(&fh, &d, &data, 1 << 20, 0, 0),
        aligned_backend
    );
    assert_eq!(
        read_and_check(&fh, &d, &data, 1 << 20, 1 << 20, 4096),
        aligned_backend
    );
    // Unaligned size, offset or buffer address: the fallback.
    for (size, offset, boff) in [
        (1000, 0, 0),
        (4096, 17, 0),
        (4096, 4096, 1),
        (1, 5, 3),
        (0, 0, 0),
    ] {
        let backend = read_and_check(&fh, &d, &data, size, offset, boff);
        if size > 0 {
            assert_eq!(
                backend,
                BackendKind::Fallback,
                "size {size} offset {offset} boff {boff}"
            );
        }
    }
    // Short read at end of file (aligned request past EOF), and a read at EOF.
    read_and_check(&fh, &d, &data, 1 << 20, 3 << 20, 0);
    read_and_check(&fh, &d, &data, 4096, data.len() + 4096, 0);

    // Writes: aligned and unaligned, read back through a plain descriptor.
    let out_path = fs.path().join("out.bin");
    let out = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(&out_path)
        .unwrap();
    let oh = d.register_file(&out).unwrap();
    let src = pattern(2 << 20, 99);
    let mut buf = d.alloc(src.len()).unwrap();
    buf.copy_from_host(0, &src).unwrap();
    let w = oh.write(&buf, 1 << 20, 0, 0).unwrap();
    assert_eq!((w.bytes, w.backend), (1 << 20, aligned_backend));
    let w = oh.write(&buf, (1 << 20) - 5, 1 << 20, 1 << 20).unwrap();
    assert_eq!((w.bytes, w.backend), ((1 << 20) - 5, BackendKind::Fallback));
    let back = std::fs::read(&out_path).unwrap();
    assert_eq!(back.len(), (2 << 20) - 5);
    assert!(back[..] == src[..(2 << 20) - 5], "written bytes differ");

    let s = d.stats().unwrap();
    assert_eq!(s.retries, 0);
    assert!(s.fallback_ops > 0);
    if aligned_backend == BackendKind::Fastpath {
        assert_eq!(s.fastpath_ops, 5, "{s:?}");
    }
}

#[test]
fn ext4_ordered_round_trips_with_the_fastpath_for_aligned_requests() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    round_trips_on(&fs, BackendKind::Fastpath);
}

#[test]
fn ext4_journal_round_trips_through_the_fallback() {
    let fs = require!(MountedFs::ext4(Ext4Data::Journal, 64));
    round_trips_on(&fs, BackendKind::Fallback);
}

#[test]
fn xfs_round_trips_with_the_fastpath_for_aligned_requests() {
    let fs = require!(MountedFs::xfs(300));
    round_trips_on(&fs, BackendKind::Fastpath);
}

#[test]
fn tmpfs_round_trips_through_the_fallback() {
    let fs = require!(MountedFs::tmpfs(64));
    round_trips_on(&fs, BackendKind::Fallback);
}

#[test]
fn a_loop_block_device_round_trips_with_the_fastpath() {
    let dev = require!(hipfile_testfs::loop_device(16));
    let d = driver(ConfigBuilder::new()).unwrap();
    let data = pattern(8 << 20, 3);
    {
        let mut f = OpenOptions::new().write(true).open(dev.path()).unwrap();
        f.write_all(&data).unwrap();
        f.sync_all().unwrap();
    }
    let f = open_rw(dev.path());
    let fh = d.register_file(&f).unwrap();
    assert_eq!(
        read_and_check(&fh, &d, &data, 1 << 20, 4096, 0),
        BackendKind::Fastpath
    );
    assert_eq!(
        read_and_check(&fh, &d, &data, 100, 3, 0),
        BackendKind::Fallback
    );
}

// ---- retry rules with injected faults (children) ----

fn child(test: &str, envs: &[(&str, &str)]) -> (bool, String) {
    run_child(child_command(test, envs))
}

/// This test binary, to run `test` alone with `envs` (and the fault variables removed).
fn child_command(test: &str, envs: &[(&str, &str)]) -> Command {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args([
        "--exact",
        test,
        "--ignored",
        "--nocapture",
        "--test-threads",
        "1",
    ]);
    for var in [
        "HIPFILE_EMU_FAULT",
        "HIPFILE_ALLOW_COMPAT_MODE",
        "HIPFILE_FORCE_COMPAT_MODE",
    ] {
        cmd.env_remove(var);
    }
    cmd.envs(envs.iter().copied());
    cmd
}

/// Runs a child made by [`child_command`]: whether its one test passed, and its output.
fn run_child(mut cmd: Command) -> (bool, String) {
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success() && text.contains("1 passed"), text)
}

fn fault_fs() -> Result<MountedFs, Skip> {
    MountedFs::ext4(Ext4Data::Ordered, 64)
}

/// A child: reads 1 MiB aligned and reports what served it, with the settings the parent
/// passed in the environment (read here through the facade's config, the one env reader).
fn fault_child(expect: &str) {
    let fs = require!(fault_fs());
    let lib = require!(emulated_runtime());
    let config = ConfigBuilder::new()
        .hip_library(lib)
        .stats_level(1)
        .build_from_env();
    let d = Driver::open_private(config).unwrap();
    let path = fs.path().join("f.bin");
    let data = pattern(2 << 20, 1);
    write_file(&path, &data);
    let file = open_rw(&path);
    let fh = d.register_file(&file).unwrap();
    let mut buf = d.alloc(2 << 20).unwrap();
    let r = fh.read(&mut buf, 1 << 20, 0, 0);
    let w = fh.write(&buf, 1 << 20, 1 << 20, 0);
    match expect {
        "retried" => {
            let r = r.unwrap();
            assert_eq!(
                (r.backend, r.retried, r.bytes),
                (BackendKind::Fallback, true, 1 << 20)
            );
            let mut got = vec![0u8; 1 << 20];
            buf.copy_to_host(0, &mut got).unwrap();
            assert!(got[..] == data[..1 << 20]);
            let w = w.unwrap();
            assert_eq!((w.backend, w.retried), (BackendKind::Fallback, true));
            assert_eq!(std::fs::read(&path).unwrap()[1 << 20..], data[..1 << 20]);
            assert_eq!(d.stats().unwrap().retries, 2);
        }
        "read_fails_eio" => {
            let e = r.unwrap_err();
            assert_eq!(e.errno(), Some(libc_eio()), "{e}");
            assert!(w.is_ok());
        }
        "read_fails_enodev" => {
            let e = r.unwrap_err();
            assert_eq!(e.errno(), Some(19), "{e}");
            assert!(e.to_string().contains("compat_mode_disallowed"), "{e}");
        }
        "fallback_only" => {
            let r = r.unwrap();
            assert_eq!((r.backend, r.retried), (BackendKind::Fallback, false));
            let s = d.stats().unwrap();
            assert_eq!(s.fastpath_ops, 0);
        }
        other => panic!("unknown expectation {other}"),
    }
}

fn libc_eio() -> i32 {
    libc::EIO
}

#[test]
#[ignore = "run by faults_follow_the_retry_rules in a child process"]
fn child_retried() {
    fault_child("retried");
}

#[test]
#[ignore = "run by faults_follow_the_retry_rules in a child process"]
fn child_read_fails_eio() {
    fault_child("read_fails_eio");
}

#[test]
#[ignore = "run by faults_follow_the_retry_rules in a child process"]
fn child_read_fails_enodev() {
    fault_child("read_fails_enodev");
}

#[test]
#[ignore = "run by faults_follow_the_retry_rules in a child process"]
fn child_fallback_only() {
    fault_child("fallback_only");
}

#[test]
fn faults_follow_the_retry_rules() {
    require!(fault_fs().map(drop));
    require!(emulated_runtime().map(drop));
    let cases: &[(&str, &[(&str, &str)])] = &[
        (
            "child_retried",
            &[("HIPFILE_EMU_FAULT", "read:ENODEV,write:EREMOTEIO")],
        ),
        (
            "child_retried",
            &[("HIPFILE_EMU_FAULT", "read:EREMOTEIO:1,write:ENODEV:1")],
        ),
        ("child_read_fails_eio", &[("HIPFILE_EMU_FAULT", "read:EIO")]),
        (
            "child_read_fails_enodev",
            &[
                ("HIPFILE_EMU_FAULT", "read:ENODEV"),
                ("HIPFILE_ALLOW_COMPAT_MODE", "false"),
            ],
        ),
        // FORCE_COMPAT_MODE never touches the fastpath, so even an always-failing fastpath
        // is never seen.
        (
            "child_fallback_only",
            &[
                ("HIPFILE_EMU_FAULT", "read:EIO,write:EIO"),
                ("HIPFILE_FORCE_COMPAT_MODE", "true"),
            ],
        ),
    ];
    for (test, envs) in cases {
        let (ok, text) = child(test, envs);
        assert!(ok, "{test} with {envs:?} failed:\n{text}");
    }
}

// ---- writes under a file-size limit (children: the limit holds for a whole process) ----

/// `RLIMIT_FSIZE` of [`child_fsize_limit`]: a multiple of neither 4096 nor any chunk.
const FSIZE_LIMIT: u64 = (3 << 20) + 12345;

/// The dirty and under-writeback pages of `file`, or `None` where the kernel cannot say.
fn unwritten_pages(file: &File) -> Option<u64> {
    hipfile_testkit::page_cache(file).map(|c| c.unwritten())
}

/// A child under a file-size limit of [`FSIZE_LIMIT`] with `SIGXFSZ` ignored (the parent
/// sets both): fallback writes that cross the limit, on the caller's thread and through the
/// I/O threads, return exactly the bytes below it, which are in the file and durable; writes
/// that start at or past it are `EFBIG`.
#[test]
#[ignore = "run by writes_crossing_a_file_size_limit_return_the_bytes_below_it in a child process"]
fn child_fsize_limit() {
    let lib = require!(emulated_runtime());
    // 256 KiB chunks; a request above 1 MiB is cut into one task per thread (2 MiB for
    // 8 MiB, the limit in the second of four).
    let config = ConfigBuilder::new()
        .hip_library(lib)
        .force_compat_mode(true)
        .io_threads(4)
        .task_size(256 << 10)
        .build_with(|_| None)
        .0;
    let d = Driver::open_private(config).unwrap();
    let dir = TempDir::new("hipfile-fsize");
    let size = 8 << 20;
    let data = pattern(size, 21);
    let mut buf = d.alloc(size).unwrap();
    buf.copy_from_host(0, &data).unwrap();
    let limit = FSIZE_LIMIT as usize;

    // Whether the kernel shows dirty pages here: a plain write leaves some.
    let control = open_new(&dir.path().join("control"));
    std::os::unix::fs::FileExt::write_all_at(&control, &data[..1 << 20], 0).unwrap();
    let measurable = unwritten_pages(&control).is_some_and(|n| n > 0);

    for (i, (offset, len)) in [
        (limit - 100_000, 512 << 10),
        (limit - (1 << 20) + 7, 1 << 20),
        (0, size),
        (limit - 5000, 4 << 20),
        (limit, 1000),
        (limit, 4 << 20),
        (limit + 8192, 2 << 20),
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.path().join(format!("f{i}"));
        let file = open_new(&path);
        let fh = d.register_file(&file).unwrap();
        let result = fh.write(&buf, len as u64, offset as i64, 0);
        let what = format!("a write of {len} bytes at {offset}");
        if offset >= limit {
            let e = result.unwrap_err();
            assert_eq!(e.errno(), Some(libc::EFBIG), "{what}: {e}");
            assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "{what}");
            continue;
        }
        let w = result.unwrap();
        assert_eq!(w.backend, BackendKind::Fallback, "{what}");
        assert_eq!(w.bytes as usize, limit - offset, "{what}");
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!(on_disk.len(), limit, "{what}");
        assert!(on_disk[offset..] == data[..limit - offset], "{what}");
        if measurable {
            assert_eq!(unwritten_pages(&file), Some(0), "{what}: not synced");
        }
    }
    if !measurable {
        eprintln!("note: cachestat cannot show dirty pages here; checking the data only");
    }
}

fn open_new(path: &Path) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .unwrap()
}

#[test]
fn writes_crossing_a_file_size_limit_return_the_bytes_below_it() {
    require!(emulated_runtime().map(drop));
    let mut cmd = child_command("child_fsize_limit", &[]);
    // SAFETY: the closure runs in the child between `fork` and `exec`, and calls only
    // `setrlimit` and `signal`, which are async-signal-safe, on values on its stack.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: FSIZE_LIMIT,
                rlim_max: FSIZE_LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0
                || libc::signal(libc::SIGXFSZ, libc::SIG_IGN) == libc::SIG_ERR
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let (ok, text) = run_child(cmd);
    assert!(ok, "child_fsize_limit failed:\n{text}");
}

// ---- the ROCm 5 and ROCm >= 6 ABIs, through the emulated runtime (children) ----

/// A child: with the emulated ROCm version the parent set, device memory is told from host
/// memory, and the backend follows from the runtime's capabilities.
fn abi_child(expect_amd_file_io: bool) {
    let fs = require!(fault_fs());
    let lib = require!(emulated_runtime());
    let config = ConfigBuilder::new().hip_library(lib).build_from_env();
    let d = Driver::open_private(config).unwrap();
    assert_eq!(
        d.runtime().amd_file_io,
        expect_amd_file_io,
        "{:?}",
        d.runtime()
    );
    let path = fs.path().join("abi.bin");
    let data = pattern(1 << 20, 9);
    write_file(&path, &data);
    let file = open_rw(&path);
    let fh = d.register_file(&file).unwrap();
    let buf = d.alloc(1 << 20).unwrap();
    d.register_buffer(&buf).unwrap();
    let backend = read_and_check(&fh, &d, &data, 1 << 20, 0, 0);
    let expect = if expect_amd_file_io {
        BackendKind::Fastpath
    } else {
        BackendKind::Fallback
    };
    assert_eq!(backend, expect);
    // Plain host memory: ROCm 5 answers hipErrorInvalidValue, ROCm >= 6 "unregistered"; both
    // must come out as "not device memory" for both backends, and refuse registration.
    let host = vec![0u8; 4096];
    // SAFETY: the buffer is only handed to calls that refuse it; nothing writes through it.
    #[allow(unsafe_code)]
    let mut hb = unsafe {
        hipfile::DeviceBuffer::from_raw(&d, hipfile::DevicePtr(host.as_ptr() as u64), host.len())
    };
    let e = fh.read(&mut hb, 4096, 0, 0).unwrap_err();
    assert!(e.to_string().contains("buffer_not_device_memory"), "{e}");
    assert!(matches!(
        d.register_buffer(&hb),
        Err(Error::MemoryTypeInvalid { .. })
    ));
}

#[test]
#[ignore = "run by both_memory_type_abis_decode in a child process"]
fn child_abi_with_file_io() {
    abi_child(true);
}

#[test]
#[ignore = "run by both_memory_type_abis_decode in a child process"]
fn child_abi_without_file_io() {
    abi_child(false);
}

#[test]
fn both_memory_type_abis_decode() {
    require!(fault_fs().map(drop));
    require!(emulated_runtime().map(drop));
    for (test, version) in [
        ("child_abi_without_file_io", "5.7"),
        ("child_abi_without_file_io", "5.2"),
        ("child_abi_without_file_io", "6.4"),
        ("child_abi_with_file_io", "7.2"),
    ] {
        let (ok, text) = child(test, &[("HIPFILE_EMU_ROCM_VERSION", version)]);
        assert!(ok, "{test} with ROCm {version} failed:\n{text}");
    }
}

/// A child with a malformed `HIPFILE_EMU_FAULT` (the parent names it in the environment): the
/// runtime refuses to initialise, and its error (from `hipGetErrorString`) reaches the caller
/// as the runtime's, naming the variable, the bad entry and the syntax; no request gets as far
/// as a backend.
#[test]
#[ignore = "run by a_malformed_fault_list_is_a_runtime_error_not_a_backend_failure in a child process"]
fn child_malformed_fault_list() {
    let lib = require!(emulated_runtime());
    let d =
        Driver::open_private(ConfigBuilder::new().hip_library(lib).build_with(|_| None).0).unwrap();
    let report = d.runtime();
    assert_eq!(report.platform, Platform::Emulated);
    assert_eq!(report.devices, 0, "{report:?}");
    let error = report.error.clone().unwrap_or_default();
    let alloc = d.alloc(4096).map(|_| ()).unwrap_err();
    assert!(matches!(alloc, Error::Runtime(_)), "{alloc:?}");
    for text in [error, alloc.to_string()] {
        for needle in ["HIPFILE_EMU_FAULT", "bad entry `", "op:ERRNO[:N]"] {
            assert!(text.contains(needle), "{needle:?} not in {text:?}");
        }
        assert!(!text.contains("fastpath"), "{text}");
        assert!(!text.contains("hipAmdFile"), "{text}");
        // The parent checks that the entry named is the one it set.
        println!("ERROR: {text}");
    }
}

#[test]
fn a_malformed_fault_list_is_a_runtime_error_not_a_backend_failure() {
    for entry in ["read:EBOGUS", "nonsense"] {
        let (ok, text) = child(
            "child_malformed_fault_list",
            &[("HIPFILE_EMU_FAULT", &format!("write:EIO:1,{entry}"))],
        );
        assert!(
            ok,
            "child_malformed_fault_list with {entry} failed:\n{text}"
        );
        // The harness may print the child's own "test ... " before its first line.
        let errors: Vec<&str> = text
            .lines()
            .filter_map(|l| l.find("ERROR: ").map(|at| &l[at..]))
            .collect();
        assert_eq!(errors.len(), 2, "{text}");
        for e in errors {
            assert!(e.contains(&format!("`{entry}`")), "{e}");
        }
    }
}

#[test]
#[ignore = "run by the_first_registration_opens_the_process_wide_driver in a child process"]
fn child_implicit_open() {
    let dir = TempDir::new("hipfile-implicit");
    let path = dir.path().join("i.bin");
    write_file(&path, &pattern(8192, 2));
    let file = open_rw(&path);
    let fh = hipfile::register_file(&file).unwrap();
    assert_eq!(fh.driver().runtime().platform, Platform::Emulated);
    let again = Driver::open().unwrap();
    assert!(again.same_as(fh.driver()), "one process-wide driver");
    let mut buf = again.alloc(8192).unwrap();
    assert_eq!(fh.read(&mut buf, 8192, 0, 0).unwrap().bytes, 8192);
    // Another configuration cannot be forced on the open driver.
    assert!(matches!(
        Driver::open_with(ConfigBuilder::new().force_compat_mode(true)),
        Err(Error::DriverAlreadyOpen)
    ));
    let first = fh.driver().clone();
    drop((fh, buf, again));
    // `first` still holds it open; once it goes, the next open makes a new driver.
    let held = Driver::open().unwrap();
    assert!(held.same_as(&first));
    drop((held, first));
    let fresh = Driver::open().unwrap();
    assert_eq!(fresh.runtime().platform, Platform::Emulated);
}

#[test]
fn the_first_registration_opens_the_process_wide_driver() {
    let lib = require!(emulated_runtime());
    let lib = lib.to_string_lossy().into_owned();
    let (ok, text) = child(
        "child_implicit_open",
        &[("HIPFILE_HIP_LIBRARY", lib.as_str())],
    );
    assert!(ok, "child_implicit_open failed:\n{text}");
}

#[test]
fn handles_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Driver>();
    check::<FileHandle>();
    check::<hipfile::DeviceBuffer>();
}

// ---- bad input ----

#[test]
fn bad_input_is_a_clear_error() {
    let dir = TempDir::new("hipfile-bad-input");
    let d = driver(ConfigBuilder::new()).unwrap();
    assert_eq!(d.stats(), None, "no counters at HIPFILE_STATS_LEVEL=0");
    let path: PathBuf = dir.path().join("f.bin");
    write_file(&path, &pattern(8192, 0));
    let file = open_rw(&path);
    let fh = d.register_file(&file).unwrap();
    // The same descriptor twice.
    assert!(matches!(
        d.register_file(&file),
        Err(Error::HandleAlreadyRegistered { .. })
    ));
    let mut buf = d.alloc(4096).unwrap();
    // Buffer offset past the end, size beyond the buffer, negative offsets.
    for (size, off, boff) in [
        (1u64, 0i64, 4096i64),
        (4097, 0, 0),
        (10, 0, 4090),
        (1, -1, 0),
        (1, 0, -1),
    ] {
        let e = fh.read(&mut buf, size, off, boff).unwrap_err();
        assert!(
            matches!(e, Error::InvalidValue { .. }),
            "{size} {off} {boff}: {e}"
        );
    }
    // Registering a buffer twice, deregistering an unknown one.
    d.register_buffer(&buf).unwrap();
    assert!(matches!(
        d.register_buffer(&buf),
        Err(Error::MemoryAlreadyRegistered { .. })
    ));
    d.deregister_buffer(&buf).unwrap();
    assert!(matches!(
        d.deregister_buffer(&buf),
        Err(Error::MemoryNotRegistered { .. })
    ));
    // Host memory: both backends refuse, with their reasons.
    let host = vec![0u8; 4096];
    // SAFETY: the buffer is only used for a read that every backend refuses; the emulated
    // runtime reports plain host memory as unregistered.
    #[allow(unsafe_code)]
    let mut hb = unsafe {
        hipfile::DeviceBuffer::from_raw(&d, hipfile::DevicePtr(host.as_ptr() as u64), host.len())
    };
    let e = fh.read(&mut hb, 4096, 0, 0).unwrap_err();
    assert!(matches!(e, Error::NoBackend { .. }), "{e}");
    assert!(e.to_string().contains("buffer_not_device_memory"), "{e}");
    // A deregistered handle.
    fh.deregister().unwrap();
    assert!(matches!(
        fh.read(&mut buf, 4096, 0, 0),
        Err(Error::HandleNotRegistered)
    ));
    // The descriptor can be registered again once deregistered.
    let again = d.register_file(&file).unwrap();
    drop(again);
    // A file opened write-only, then read.
    let wo = OpenOptions::new().write(true).open(&path).unwrap();
    let wh = d.register_file(&wo).unwrap();
    let e = wh.read(&mut buf, 100, 1, 0).unwrap_err();
    assert_eq!(e.errno(), Some(9), "EBADF expected: {e}");
}

/// A write that fills the file system returns the bytes that fit, the file's first bytes
/// (docs/BEHAVIOUR.md §3.2); a write where nothing fits is `ENOSPC`. The request runs on the
/// caller's thread, so that what fits is written in order.
#[test]
fn a_write_that_fills_the_filesystem_returns_what_fits() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 8));
    let d = driver(ConfigBuilder::new().small_io_threshold(32 << 20)).unwrap();
    let path = fs.path().join("big.bin");
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let fh = d.register_file(&f).unwrap();
    let size = (16 << 20) - 1;
    let data = pattern(size, 8);
    let mut buf = d.alloc(size).unwrap();
    buf.copy_from_host(0, &data).unwrap();
    // Unaligned so the fallback serves it.
    let w = fh.write(&buf, size as u64, 0, 0).unwrap();
    let n = w.bytes as usize;
    assert_eq!(w.backend, BackendKind::Fallback);
    assert!(n > 0 && n < size, "{n} of {size} bytes");
    let on_disk = std::fs::read(&path).unwrap();
    assert_eq!(on_disk.len(), n);
    assert!(on_disk[..] == data[..n]);
    let e = fh.write(&buf, 1 << 20, 32 << 20, 0).unwrap_err();
    assert_eq!(e.errno(), Some(28), "ENOSPC expected: {e}");
}

#[test]
fn a_file_truncated_during_reads_gives_short_counts_not_garbage() {
    let dir = TempDir::new("hipfile-truncate");
    let d = driver(ConfigBuilder::new()).unwrap();
    let path = dir.path().join("t.bin");
    let data = pattern(1 << 20, 5);
    write_file(&path, &data);
    let f = open_rw(&path);
    let fh = d.register_file(&f).unwrap();
    f.set_len(5000).unwrap();
    let mut buf = d.alloc(1 << 20).unwrap();
    let out = fh.read(&mut buf, 1 << 20, 0, 0).unwrap();
    assert_eq!(out.bytes, 5000);
    let mut got = vec![0u8; 5000];
    buf.copy_to_host(0, &mut got).unwrap();
    assert!(got[..] == data[..5000]);
}

/// A task size that overflows any arithmetic on it warns, naming the variable, the value and
/// what is used instead, and the driver still opens and serves large requests through the
/// fallback's I/O threads.
#[test]
fn an_overflowing_task_size_warns_and_the_driver_serves() {
    let lib = require!(emulated_runtime());
    let value = u64::MAX.to_string();
    let (config, warnings) = ConfigBuilder::new()
        .hip_library(lib)
        .force_compat_mode(true)
        .build_with(|k| (k == "HIPFILE_TASK_SIZE").then(|| value.clone()));
    let [warning] = &warnings[..] else {
        panic!("one warning expected: {warnings:?}");
    };
    let text = warning.to_string();
    for needle in ["HIPFILE_TASK_SIZE", value.as_str(), "using 1073741824"] {
        assert!(text.contains(needle), "{needle:?} missing from {text:?}");
    }
    let d = Driver::open_private(config).unwrap();
    let dir = TempDir::new("hipfile-task-size");
    let path = dir.path().join("t.bin");
    let size = 5_000_000;
    let data = pattern(size, 12);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let fh = d.register_file(&f).unwrap();
    let mut buf = d.alloc(size + 3).unwrap();
    buf.copy_from_host(3, &data).unwrap();
    let w = fh.write(&buf, size as u64, 7, 3).unwrap();
    assert_eq!((w.bytes, w.backend), (size as u64, BackendKind::Fallback));
    assert!(std::fs::read(&path).unwrap()[7..] == data[..]);
    let mut back = d.alloc(size).unwrap();
    let r = fh.read(&mut back, size as u64, 7, 0).unwrap();
    assert_eq!((r.bytes, r.backend), (size as u64, BackendKind::Fallback));
    let mut got = vec![0u8; size];
    back.copy_to_host(0, &mut got).unwrap();
    assert!(got == data);
}

#[test]
fn many_threads_read_and_write_disjoint_ranges() {
    let dir = TempDir::new("hipfile-threads");
    let d = driver(stats(ConfigBuilder::new())).unwrap();
    let path = dir.path().join("c.bin");
    let chunk = 256 * 1024;
    let threads = 8;
    let data = pattern(chunk * threads, 11);
    write_file(&path, &data);
    let f = open_rw(&path);
    let fh = d.register_file(&f).unwrap();
    let mut buf = d.alloc(chunk * threads).unwrap();
    d.register_buffer(&buf).unwrap();
    // One view of the registered buffer per thread: each thread's range is its own.
    let views = buf.slice_mut(..).unwrap().chunks(chunk).unwrap();
    std::thread::scope(|s| {
        for (t, mut view) in views.into_iter().enumerate() {
            let fh = &fh;
            s.spawn(move || {
                for round in 0..4 {
                    // Alternate aligned (fastpath) and unaligned (fallback) requests.
                    let size = if round % 2 == 0 { chunk } else { chunk - 1 };
                    let off = (t * chunk) as u64;
                    let mut part = view.slice_mut(..size).unwrap();
                    let r = fh.read_at(&mut part, off).unwrap();
                    assert_eq!(r.bytes as usize, size);
                    let w = fh.write_at(&part, off).unwrap();
                    assert_eq!(w.bytes as usize, size);
                }
            });
        }
    });
    let mut got = vec![0u8; data.len()];
    buf.copy_to_host(0, &mut got).unwrap();
    assert!(got == data);
    assert!(std::fs::read(&path).unwrap() == data);
    let s = d.stats().unwrap();
    assert_eq!(
        s.fastpath_ops + s.fallback_ops,
        (threads * 4 * 2) as u64,
        "{s:?}"
    );
    let expect_bytes: u64 = (threads * 2 * 2) as u64 * (chunk as u64 + chunk as u64 - 1);
    assert_eq!(s.fastpath_bytes + s.fallback_bytes, expect_bytes, "{s:?}");
}

#[test]
fn deregistration_while_in_flight_is_refused() {
    let dir = TempDir::new("hipfile-inflight");
    let d = driver(ConfigBuilder::new()).unwrap();
    let path = dir.path().join("i.bin");
    write_file(&path, &pattern(64 << 20, 1));
    let f = open_rw(&path);
    let fh = d.register_file(&f).unwrap();
    let mut buf = d.alloc(64 << 20).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let started = std::sync::atomic::AtomicBool::new(false);
    let mut refused = 0;
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                started.store(true, std::sync::atomic::Ordering::SeqCst);
                // Whole until deregistration succeeds, refused after it.
                match fh.read(&mut buf, 64 << 20, 0, 0) {
                    Ok(o) => assert_eq!(o.bytes, 64 << 20),
                    Err(Error::HandleNotRegistered) => {}
                    Err(e) => panic!("{e}"),
                }
            }
        });
        while !started.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::yield_now();
        }
        // Reads back to back leave gaps of microseconds between requests of milliseconds.
        std::thread::sleep(std::time::Duration::from_millis(5));
        for _ in 0..2000 {
            match fh.deregister() {
                Err(Error::InUse { what: "file", .. }) => refused += 1,
                Ok(()) => break,
                Err(e) => panic!("{e}"),
            }
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        reader.join().unwrap();
    });
    assert!(
        refused > 0,
        "a deregistration must have met a request in flight"
    );
}

/// Pinned host memory from the runtime: zeroed, usable as a slice, a source and target of
/// device copies; a size of 0 is refused.
#[test]
fn pinned_host_buffers_copy_to_and_from_the_device() {
    let d = require!(driver(ConfigBuilder::new()));
    let mut host = d.alloc_pinned(3 * 4096 + 5).unwrap();
    assert_eq!(host.len(), 3 * 4096 + 5);
    assert!(host.iter().all(|&b| b == 0), "not zeroed");
    host.copy_from_slice(&pattern(3 * 4096 + 5, 9));
    let mut dev = d.alloc(4 * 4096).unwrap();
    dev.copy_from_host(100, &host).unwrap();
    let mut back = d.alloc_pinned(3 * 4096 + 5).unwrap();
    dev.copy_to_host(100, &mut back).unwrap();
    assert!(back[..] == host[..]);
    assert!(matches!(
        d.alloc_pinned(0),
        Err(hipfile::Error::InvalidValue { .. })
    ));
}

// ---- several devices (children: the emulated device count is read from the environment) ----

/// A child with `HIPFILE_EMU_DEVICES=4`: one file on ext4 read into a buffer on every device
/// at once by a caller per device, through the fallback (forced) or with the fastpath for
/// aligned requests, in requests large enough for the I/O threads and small ones; then
/// written from each device. The emulated runtime refuses a copy on a stream of another
/// device than its memory's, so a misrouted copy fails the request. Bytes are the file's and
/// each device's counters show its own bytes.
fn devices_child(force_fallback: bool) {
    const DEVICES: i32 = 4;
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 128));
    let d = require!(driver(
        ConfigBuilder::new()
            .stats_level(1)
            .force_compat_mode(force_fallback)
    ));
    assert_eq!(d.device_count().unwrap(), DEVICES);
    let path = fs.path().join("shard.bin");
    let size = 24 << 20;
    let data = pattern(size, 41);
    write_file(&path, &data);
    let file = open_rw(&path);
    let fh = d.register_file(&file).unwrap();
    std::thread::scope(|s| {
        for dev in 0..DEVICES {
            let (d, fh, data) = (&d, &fh, &data);
            s.spawn(move || {
                let mut buf = d.alloc_on(dev, size).unwrap();
                d.register_buffer(&buf).unwrap();
                let small = fh.read(&mut buf, 4096, 8192, 4096).unwrap();
                assert_eq!(small.bytes, 4096);
                let mut got = vec![0u8; 4096];
                buf.copy_to_host(4096, &mut got).unwrap();
                assert!(got[..] == data[8192..12288], "device {dev}");
                let r = fh.read(&mut buf, size as u64, 0, 0).unwrap();
                assert_eq!(r.bytes, size as u64, "device {dev}");
                // Waiting for the buffer's null stream made its device current only for a
                // while.
                assert_eq!(
                    d.tuning().gpu().current_device().unwrap(),
                    0,
                    "device {dev}"
                );
                let mut got = vec![0u8; size];
                buf.copy_to_host(0, &mut got).unwrap();
                assert!(got == *data, "device {dev}");
                // Each device writes its quarter back, unchanged.
                let quarter = size / DEVICES as usize;
                let at = dev as usize * quarter;
                let w = fh
                    .write(&buf, quarter as u64, at as i64, at as i64)
                    .unwrap();
                assert_eq!(w.bytes, quarter as u64);
            });
        }
    });
    assert!(std::fs::read(&path).unwrap() == data);
    let per_device = d.device_stats().unwrap();
    assert_eq!(
        per_device.iter().map(|s| s.device).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    for s in &per_device {
        assert_eq!(s.read_bytes, (size + 4096) as u64, "{s:?}");
        assert_eq!(s.write_bytes, (size / 4) as u64, "{s:?}");
        assert_eq!(s.ops, 3, "{s:?}");
    }
    if force_fallback {
        assert_eq!(d.stats().unwrap().fastpath_ops, 0);
    }
}

#[test]
#[ignore = "run by buffers_on_every_device_are_served_at_once in a child process"]
fn child_devices_fallback() {
    devices_child(true);
}

#[test]
#[ignore = "run by buffers_on_every_device_are_served_at_once in a child process"]
fn child_devices_auto() {
    devices_child(false);
}

#[test]
fn buffers_on_every_device_are_served_at_once() {
    require!(emulated_runtime().map(drop));
    for test in ["child_devices_fallback", "child_devices_auto"] {
        let (ok, text) = child(test, &[("HIPFILE_EMU_DEVICES", "4")]);
        assert!(ok, "{test} failed:\n{text}");
    }
}

/// An unknown device is an error that names it, and the caller's current device is kept.
#[test]
fn allocating_on_a_device_that_does_not_exist_fails() {
    let d = require!(driver(ConfigBuilder::new()));
    let e = d.alloc_on(7, 4096).unwrap_err();
    assert!(matches!(e, Error::Runtime(_)), "{e}");
    assert!(d.alloc_on(0, 4096).is_ok());
}

// ---- descriptors, registrations and what safe code can reach ----

/// A write at an offset lands at that offset, also through a descriptor opened with
/// `O_APPEND` (Linux appends whatever offset `pwrite` is given on such a descriptor).
fn writes_land_at_their_offset_on_an_append_descriptor(fs_path: &Path, aligned: BackendKind) {
    let d = driver(ConfigBuilder::new()).unwrap();
    let path = fs_path.join("append.bin");
    let old = pattern(16384, 5);
    write_file(&path, &old);
    let file = OpenOptions::new()
        .read(true)
        .append(true)
        .open(&path)
        .unwrap();
    let fh = d.register_file(&file).unwrap();
    let src = pattern(8192, 77);
    let mut buf = d.alloc(src.len()).unwrap();
    buf.copy_from_host(0, &src).unwrap();
    let small = fh.write(&buf, 10, 100, 0).unwrap();
    assert_eq!((small.bytes, small.backend), (10, BackendKind::Fallback));
    let big = fh.write(&buf, 4096, 8192, 4096).unwrap();
    assert_eq!((big.bytes, big.backend), (4096, aligned));
    let mut want = old;
    want[100..110].copy_from_slice(&src[..10]);
    want[8192..12288].copy_from_slice(&src[4096..]);
    let back = std::fs::read(&path).unwrap();
    assert_eq!(back.len(), want.len(), "nothing was appended");
    assert!(back == want, "the bytes are where the writes asked");
}

#[test]
fn writes_land_at_their_offset_on_an_append_descriptor_on_xfs() {
    let fs = require!(MountedFs::xfs(300));
    writes_land_at_their_offset_on_an_append_descriptor(fs.path(), BackendKind::Fastpath);
}

#[test]
fn writes_land_at_their_offset_on_an_append_descriptor_on_tmpfs() {
    let fs = require!(MountedFs::tmpfs(16));
    writes_land_at_their_offset_on_an_append_descriptor(fs.path(), BackendKind::Fallback);
}

/// Descriptors no request could ever use are refused at registration, each with its reason
/// and hipFile's code; nothing stays registered.
#[test]
fn descriptors_that_can_never_do_io_are_not_registered() {
    use hipfile::core::HipFileCode;
    let dir = TempDir::new("hipfile-unusable");
    let d = driver(ConfigBuilder::new()).unwrap();
    let path = dir.path().join("f.bin");
    write_file(&path, &pattern(4096, 1));
    let fifo = hipfile_testfs::fifo(dir.path());
    let open = |p: &Path, flags: i32| {
        OpenOptions::new()
            .read(true)
            .custom_flags(flags)
            .open(p)
            .unwrap()
    };
    let o_path = rustix::fs::open(
        &path,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let (socket, _peer) = std::os::unix::net::UnixStream::pair().unwrap();
    let cases: Vec<(Box<dyn std::os::fd::AsFd>, &str, HipFileCode)> = vec![
        (
            Box::new(open(dir.path(), libc::O_DIRECTORY)),
            "directory",
            HipFileCode::InvalidFileType,
        ),
        (
            Box::new(open(&fifo, libc::O_NONBLOCK)),
            "FIFO",
            HipFileCode::InvalidFileType,
        ),
        (Box::new(socket), "socket", HipFileCode::InvalidFileType),
        (Box::new(o_path), "O_PATH", HipFileCode::InvalidFileOpenFlag),
    ];
    for (fd, what, code) in cases {
        let e = d.register_file(&fd.as_fd()).unwrap_err();
        assert!(matches!(e, Error::UnusableFile(_)), "{what}: {e:?}");
        assert!(e.to_string().contains(what), "{what}: {e}");
        assert_eq!(e.code(), hipfile::ErrorCode::HipFile(code), "{what}");
        // Refused, so not registered: the same descriptor is refused again for the same
        // reason, not as registered twice.
        let again = d.register_file(&fd.as_fd()).unwrap_err();
        assert!(matches!(again, Error::UnusableFile(_)), "{what}: {again:?}");
    }
}

/// `/dev/null` is a character device, which registration accepts: positional I/O works on
/// it. What `hipfile check` says of it (the fallback serves) is what happens: a read returns 0
/// bytes, as at end of file, and a write succeeds with every byte, both on the fallback.
#[test]
fn dev_null_is_served_by_the_fallback() {
    let d = driver(ConfigBuilder::new()).unwrap();
    let null = open_rw(Path::new("/dev/null"));
    let fh = d.register_file(&null).unwrap();
    assert!(fh.facts().unusable().is_none());
    let mut buf = d.alloc(1 << 20).unwrap();
    buf.copy_from_host(0, &pattern(1 << 20, 3)).unwrap();
    for (offset, size) in [(0, 4096), (12_345, 1 << 20)] {
        let r = fh.read(&mut buf, size, offset, 0).unwrap();
        assert_eq!(
            (r.bytes, r.backend, r.retried),
            (0, BackendKind::Fallback, false)
        );
        let w = fh.write(&buf, size, offset, 0).unwrap();
        assert_eq!(
            (w.bytes, w.backend, w.retried),
            (size, BackendKind::Fallback, false)
        );
    }
}

#[test]
fn a_closed_descriptor_is_ebadf_said_once() {
    let d = driver(ConfigBuilder::new()).unwrap();
    let file = File::open("/dev/null").unwrap();
    let number = std::os::fd::AsRawFd::as_raw_fd(&file);
    drop(file);
    // SAFETY: the number is closed; registration only duplicates it, which fails with EBADF
    // without touching anything else.
    #[allow(unsafe_code)]
    let closed = unsafe { std::os::fd::BorrowedFd::borrow_raw(number) };
    let e = d.register_file(&closed).unwrap_err();
    assert_eq!(e.errno(), Some(libc::EBADF), "{e}");
    let text = e.to_string();
    assert!(!text.contains("driver"), "{text}");
    assert_eq!(text.matches("Bad file descriptor").count(), 1, "{text}");
}

/// A refused deregistration changes nothing: with one request held in flight, every
/// deregistration from two threads is refused as in use, and the small reads that other
/// threads make meanwhile all succeed.
#[test]
fn a_refused_deregistration_changes_nothing() {
    let base = driver(ConfigBuilder::new()).unwrap();
    // The emulated runtime, with one request parked inside its first synchronous copy to the
    // device once armed, until released: a request held in flight for as long as the test
    // needs.
    let parking = std::sync::Arc::new(Injected::new(base.tuning().gpu().clone()));
    let gate = Gate::new();
    let d = Driver::with_runtime(
        base.config().clone(),
        parking.clone(),
        base.runtime().clone(),
    );
    let dir = TempDir::new("hipfile-refused");
    let path = dir.path().join("r.bin");
    let data = pattern(1 << 16, 9);
    write_file(&path, &data);
    let file = File::open(&path).unwrap();
    let fh = d.register_file(&file).unwrap();
    const READERS: usize = 2;
    const READS: usize = 3000;
    let reading = std::sync::atomic::AtomicUsize::new(READERS);
    std::thread::scope(|s| {
        let held = s.spawn(|| {
            let mut buf = d.alloc(4096).unwrap();
            parking.faults().add(
                Fault::on(Call::CopyToDevice)
                    .synchronous()
                    .once()
                    .park(&gate),
            );
            // Unaligned, so the fallback serves it and copies to the device synchronously.
            fh.read(&mut buf, 4000, 0, 0).map(|o| o.bytes)
        });
        // Released however this scope ends, so that a failed assertion fails the test
        // instead of leaving the held request parked for ever.
        let _release = gate.release_on_drop();
        gate.wait_parked(|| held.is_finished());
        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                s.spawn(|| {
                    let mut buf = d.alloc(4096).unwrap();
                    let failed = (0..READS)
                        .filter(|i| fh.read(&mut buf, 100, (*i % 1000) as i64, 0).is_err())
                        .count();
                    reading.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                    failed
                })
            })
            .collect();
        // Deregistrations from two threads for as long as the reads go on.
        let deregisterers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut not_refused = 0;
                    while reading.load(std::sync::atomic::Ordering::SeqCst) > 0 {
                        if !matches!(fh.deregister(), Err(Error::InUse { .. })) {
                            not_refused += 1;
                        }
                    }
                    not_refused
                })
            })
            .collect();
        for r in readers {
            assert_eq!(r.join().unwrap(), 0, "reads failed while registered");
        }
        for t in deregisterers {
            assert_eq!(
                t.join().unwrap(),
                0,
                "a deregistration was not refused as in use"
            );
        }
        gate.release();
        assert_eq!(held.join().unwrap().unwrap(), 4000);
    });
    // Nothing in flight now: the handle deregisters once, then is not registered.
    fh.deregister().unwrap();
    assert!(matches!(fh.deregister(), Err(Error::HandleNotRegistered)));
}

/// Registrations end with the memory they describe: a buffer registers only with its own
/// driver, and one made with `from_raw` is deregistered when dropped, so a later buffer at
/// the same address is not taken for it.
#[test]
fn registrations_do_not_outlive_their_buffers() {
    let a = driver(ConfigBuilder::new()).unwrap();
    let b = driver(ConfigBuilder::new()).unwrap();
    let owned = a.alloc(1 << 20).unwrap();
    let e = b.register_buffer(&owned).unwrap_err();
    assert!(matches!(e, Error::InvalidValue { .. }), "{e:?}");
    assert!(e.to_string().contains("another driver"), "{e}");

    // A view of the first 64 KiB, registered, then dropped.
    // SAFETY: `owned` outlives the views, which only describe part of it.
    #[allow(unsafe_code)]
    let view = |len| unsafe { hipfile::DeviceBuffer::from_raw(&a, owned.ptr(), len) };
    let first = view(64 << 10);
    a.register_buffer(&first).unwrap();
    // Another buffer at the same address is not the registered one.
    let alias = view(4096);
    assert!(matches!(
        a.deregister_buffer(&alias),
        Err(Error::MemoryNotRegistered { .. })
    ));
    drop(first);
    // The registration went with it: the address registers afresh, with the new length.
    let second = view(4096);
    a.register_buffer(&second).unwrap();
    a.deregister_buffer(&second).unwrap();

    // A request through an alias of a registered buffer is validated against the alias's
    // own length, not the registration's.
    let mut big = view(1 << 20);
    a.register_buffer(&big).unwrap();
    let dir = TempDir::new("hipfile-alias");
    let path = dir.path().join("a.bin");
    write_file(&path, &pattern(1 << 20, 2));
    let file = File::open(&path).unwrap();
    let fh = a.register_file(&file).unwrap();
    let mut small = view(4096);
    let e = fh.read(&mut small, 8192, 0, 0).unwrap_err();
    assert!(matches!(e, Error::InvalidValue { .. }), "{e:?}");
    assert_eq!(fh.read(&mut big, 8192, 0, 0).unwrap().bytes, 8192);
}

// ---- durability ----

/// Writes are on stable storage when the call returns, whichever backend served them: a new
/// file written through the fastpath (aligned) and one through the fallback (unaligned)
/// are whole after the filesystem is shut down without flushing its log and mounted again.
fn writes_survive_a_crash(mut fs: MountedFs) {
    let d = driver(ConfigBuilder::new()).unwrap();
    let data = pattern(8 << 20, 21);
    let mut buf = d.alloc(data.len()).unwrap();
    buf.copy_from_host(0, &data).unwrap();
    // The fastpath's write comes last: a later `fdatasync` on the same filesystem commits
    // its journal, and with it the metadata of earlier writes.
    let cases = [
        ("slow.bin", data.len() - 3, BackendKind::Fallback),
        ("fast.bin", data.len(), BackendKind::Fastpath),
    ];
    for (name, len, backend) in cases {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(fs.path().join(name))
            .unwrap();
        let fh = d.register_file(&file).unwrap();
        let out = fh.write(&buf, len as u64, 0, 0).unwrap();
        assert_eq!((out.bytes, out.backend), (len as u64, backend), "{name}");
    }
    drop(buf);
    drop(d);
    require!(fs.crash_and_remount());
    for (name, len, _) in cases {
        let back = std::fs::read(fs.path().join(name)).unwrap();
        assert_eq!(back.len(), len, "{name} lost bytes in the crash");
        assert!(back[..] == data[..len], "{name} differs after the crash");
    }
}

#[test]
fn writes_survive_a_crash_on_xfs() {
    writes_survive_a_crash(require!(MountedFs::xfs(300)));
}

#[test]
fn writes_survive_a_crash_on_ext4() {
    writes_survive_a_crash(require!(MountedFs::ext4(Ext4Data::Ordered, 64)));
}

/// A thread with a descriptor table of its own (`unshare(CLONE_FILES)`) whose number is
/// another file in the process's table reads and writes its own file, also with requests
/// large enough for the fallback's I/O threads, which were started from the main thread.
#[test]
fn a_thread_with_its_own_descriptor_table_moves_its_own_files_bytes() {
    let dir = TempDir::new("hipfile-unshared");
    let d = driver(ConfigBuilder::new().force_compat_mode(true)).unwrap();
    let main_data = pattern(8 << 20, 1);
    let own_data = pattern(8 << 20, 2);
    let main_path = dir.path().join("main.bin");
    let own_path = dir.path().join("own.bin");
    write_file(&main_path, &main_data);
    write_file(&own_path, &own_data);
    let main_file = File::open(&main_path).unwrap();
    // Start the I/O threads here, in the process's table.
    {
        let fh = d.register_file(&main_file).unwrap();
        let mut buf = d.alloc(8 << 20).unwrap();
        assert_eq!(fh.read(&mut buf, 8 << 20, 0, 0).unwrap().bytes, 8 << 20);
    }
    let number = std::os::fd::AsRawFd::as_raw_fd(&main_file);
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: gives this thread a private copy of the descriptor table; no pointers.
            #[allow(unsafe_code)]
            let r = unsafe { libc::unshare(libc::CLONE_FILES) };
            assert_eq!(r, 0, "unshare: {}", std::io::Error::last_os_error());
            let own = open_rw(&own_path);
            // SAFETY: in this table `number` is a copy of `main.bin` that nothing here owns;
            // `slot` becomes its only owner.
            #[allow(unsafe_code)]
            let mut slot =
                unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(number) };
            rustix::io::dup2(&own, &mut slot).unwrap();
            let fh = d.register_file(&slot).unwrap();
            let mut buf = d.alloc(8 << 20).unwrap();
            for (size, offset) in [(8 << 20, 0), (4096, 8192)] {
                let out = fh.read(&mut buf, size, offset, 0).unwrap();
                assert_eq!(out.bytes, size);
                let mut got = vec![0u8; size as usize];
                buf.copy_to_host(0, &mut got).unwrap();
                let at = offset as usize;
                assert!(
                    got[..] == own_data[at..at + size as usize],
                    "{size} at {offset}"
                );
            }
            let new = pattern(4 << 20, 3);
            buf.copy_from_host(0, &new).unwrap();
            assert_eq!(fh.write(&buf, 4 << 20, 0, 0).unwrap().bytes, 4 << 20);
            drop(fh);
            let back = std::fs::read(&own_path).unwrap();
            assert!(
                back[..4 << 20] == new[..],
                "the thread's own file was written"
            );
        });
    });
    assert!(
        std::fs::read(&main_path).unwrap() == main_data,
        "the process's file is unchanged"
    );
}

/// A handle on a read-only descriptor refuses writes, and one on a write-only descriptor
/// refuses reads, before any backend runs, with an error that says how the file was opened.
#[test]
fn the_access_mode_of_the_descriptor_is_said() {
    let dir = TempDir::new("hipfile-access");
    let d = driver(ConfigBuilder::new()).unwrap();
    let path = dir.path().join("f.bin");
    let data = pattern(8192, 4);
    write_file(&path, &data);
    let mut buf = d.alloc(8192).unwrap();
    let ro = File::open(&path).unwrap();
    let rh = d.register_file(&ro).unwrap();
    for size in [8192, 100] {
        let e = rh.write(&buf, size, 0, 0).unwrap_err();
        assert!(matches!(e, Error::AccessMode { .. }), "{e:?}");
        assert!(e.to_string().contains("read-only (O_RDONLY)"), "{e}");
        assert_eq!(e.errno(), Some(libc::EBADF));
    }
    assert!(std::fs::read(&path).unwrap() == data);
    let wo = OpenOptions::new().write(true).open(&path).unwrap();
    let wh = d.register_file(&wo).unwrap();
    let e = wh.read(&mut buf, 4096, 0, 0).unwrap_err();
    assert!(e.to_string().contains("write-only (O_WRONLY)"), "{e}");
    assert_eq!(e.errno(), Some(libc::EBADF));
}

// ---- views ----

/// Views of a buffer carry their own pointer and length: `read_at`/`write_at` move one
/// request of the view's size, `read_exact_at`/`write_all_at` the whole view, and a read
/// that meets the end of the file early says so with the bytes it got.
#[test]
fn views_read_and_write_their_own_range() {
    use hipfile::{DeviceBuf, DeviceSlice};
    let dir = TempDir::new("hipfile-views");
    let d = driver(ConfigBuilder::new()).unwrap();
    let path = dir.path().join("v.bin");
    let data = pattern((3 << 20) + 123, 8);
    write_file(&path, &data);
    let file = open_rw(&path);
    let fh = d.register_file(&file).unwrap();
    let mut buf = d.alloc(4 << 20).unwrap();
    d.register_buffer(&buf).unwrap();

    // One request into the middle of the buffer: the view's length is the size.
    let mut view = buf.slice_mut(4096..4096 + (1 << 20)).unwrap();
    assert_eq!(view.byte_len(), 1 << 20);
    let out = fh.read_at(&mut view, 8192).unwrap();
    assert_eq!(out.bytes, 1 << 20);
    let mut got = vec![0u8; 1 << 20];
    view.copy_to_host(&mut got).unwrap();
    assert!(got[..] == data[8192..8192 + (1 << 20)]);
    // A narrower view of the view.
    let mut inner = view.slice_mut(10..20).unwrap();
    let mut ten = [0u8; 10];
    inner.copy_to_host(&mut ten).unwrap();
    assert_eq!(ten[..], data[8202..8212]);
    inner.copy_from_host(&[7; 10]).unwrap();
    inner.copy_to_host(&mut ten).unwrap();
    assert_eq!(ten, [7; 10]);
    assert!(
        inner.copy_to_host(&mut [0u8; 9]).is_err(),
        "lengths must match"
    );

    // The whole file through read_exact_at, which then fails for a range past its end.
    let mut whole = buf.slice_mut(..data.len()).unwrap();
    fh.read_exact_at(&mut whole, 0).unwrap();
    let mut back = vec![0u8; data.len()];
    whole.copy_to_host(&mut back).unwrap();
    assert!(back == data);
    let mut past = buf.slice_mut(..1 << 20).unwrap();
    let e = fh.read_exact_at(&mut past, (3 << 20) - 100).unwrap_err();
    match &e {
        Error::Incomplete {
            op, wanted, done, ..
        } => assert_eq!((*op, *wanted, *done), (hipfile::Op::Read, 1 << 20, 223)),
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("ends before"), "{e}");

    // write_all_at from a view, then read back through a plain descriptor.
    let src: DeviceSlice<'_> = buf.slice(4096..4096 + 5000).unwrap();
    fh.write_all_at(&src, 100).unwrap();
    let on_disk = std::fs::read(&path).unwrap();
    // The whole-file read above put the file's own bytes at 4096.. of the buffer.
    assert!(on_disk[100..5100] == data[4096..4096 + 5000]);
    assert_eq!(fh.write_at(&src.slice(..0).unwrap(), 0).unwrap().bytes, 0);

    // Ranges outside the buffer are refused, not clamped.
    assert!(buf.slice(..(4 << 20) + 1).is_err());
    let (from, to) = (5, 4);
    assert!(
        buf.slice_mut(from..to).is_err(),
        "a range that ends before it starts"
    );
    let e = fh.read_at(&mut buf, u64::MAX).unwrap_err();
    assert!(matches!(e, Error::InvalidValue { .. }), "{e:?}");
    d.deregister_buffer(&buf).unwrap();
}
