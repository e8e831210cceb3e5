//! `hipfile cp` run as a user runs it, on the emulated runtime (`--runtime emulated`): real
//! files on real filesystems on loop devices (those tests need root and the mkfs tools, and
//! say SKIP without them), the configuration and the emulated runtime's faults in
//! environment variables, and the copy compared byte for byte with its source.

// Helpers too are test code: an unwrap that fails is a test failure with its location.
#![allow(clippy::unwrap_used)]

mod common;

use common::{MIB, Run, data_file, hipfile, keys, run_program, temp_dir};
use hipfile_testfs::{Ext4Data, MountedFs, loop_device, require};
use serde_json::Value;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

const CHUNK_64K: usize = 64 << 10;

/// The sizes every filesystem is tried with, each with the `--chunk` it is copied in (none:
/// the default, which is clamped to the source).
const CASES: [(usize, Option<&str>); 6] = [
    (0, None),
    (1, None),
    (4095, None),
    (4096, None),
    (MIB + 123, None),
    (3 * CHUNK_64K + 1, Some("64K")),
];

/// `hipfile cp --runtime emulated [EXTRA...] SRC DST` with `env`.
fn cp(src: &Path, dst: &Path, extra: &[&str], env: &[(&str, &str)]) -> Run {
    let mut args: Vec<&OsStr> = vec![OsStr::new("cp"), OsStr::new("--runtime=emulated")];
    args.extend(extra.iter().map(OsStr::new));
    args.push(src.as_os_str());
    args.push(dst.as_os_str());
    hipfile(&args, env)
}

/// `cp --json`, which must succeed with a well-formed object and an exact copy.
fn cp_json(src: &Path, dst: &Path, extra: &[&str], env: &[(&str, &str)]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(extra);
    let run = cp(src, dst, &all, env);
    assert_eq!(
        run.status, 0,
        "{src:?} -> {dst:?} {extra:?}: {}",
        run.stderr
    );
    let v = run.one();
    assert_shape(&v);
    assert_identical(src, dst);
    // Read, not asked: a block device's metadata gives no size.
    let size = std::fs::read(src).unwrap().len() as u64;
    assert_eq!(v["bytes"], size, "{v}");
    assert_eq!(total(&v, "read"), size, "every byte is read once: {v}");
    assert_eq!(
        total(&v, "write"),
        size,
        "every byte is written once, the padding to the alignment not counted: {v}"
    );
    v
}

/// The exact key set and the types of `cp --json`'s object.
fn assert_shape(v: &Value) {
    assert_eq!(
        keys(v),
        ["bytes", "gbps", "read", "seconds", "write"],
        "{v}"
    );
    assert!(v["bytes"].is_u64(), "{v}");
    assert!(v["seconds"].as_f64().unwrap() >= 0.0, "{v}");
    assert!(v["gbps"].as_f64().unwrap() >= 0.0, "{v}");
    for side in ["read", "write"] {
        assert_eq!(
            keys(&v[side]),
            ["fallback_bytes", "fastpath_bytes", "retries"],
            "{v}"
        );
        assert!(
            v[side].as_object().unwrap().values().all(Value::is_u64),
            "{v}"
        );
    }
}

fn count(v: &Value, side: &str, what: &str) -> u64 {
    v[side][what].as_u64().unwrap()
}

fn total(v: &Value, side: &str) -> u64 {
    count(v, side, "fastpath_bytes") + count(v, side, "fallback_bytes")
}

fn assert_identical(src: &Path, dst: &Path) {
    let a = std::fs::read(src).unwrap();
    let b = std::fs::read(dst).unwrap();
    assert_eq!(a.len(), b.len(), "{dst:?} has not the size of {src:?}");
    if let Some(i) = a.iter().zip(&b).position(|(x, y)| x != y) {
        panic!("{dst:?} differs from {src:?} first at byte {i}");
    }
}

/// Copies every size of [`CASES`] within `dir` and returns each size with its JSON.
fn copy_every_size(dir: &Path, env: &[(&str, &str)]) -> Vec<(u64, Value)> {
    CASES
        .iter()
        .map(|&(size, chunk)| {
            let src = data_file(dir, &format!("src-{size}"), size);
            let dst = dir.join(format!("dst-{size}"));
            let extra: Vec<&str> = chunk.map(|c| vec!["--chunk", c]).unwrap_or_default();
            let v = cp_json(&src, &dst, &extra, env);
            (size as u64, v)
        })
        .collect()
}

/// Every read and every write went through the fastpath, none retried.
fn assert_all_fastpath(results: &[(u64, Value)]) {
    for (size, v) in results {
        assert_eq!(count(v, "read", "fastpath_bytes"), *size, "{size}: {v}");
        assert_eq!(count(v, "read", "fallback_bytes"), 0, "{size}: {v}");
        assert_eq!(count(v, "write", "fallback_bytes"), 0, "{size}: {v}");
        assert_eq!(
            count(v, "read", "retries") + count(v, "write", "retries"),
            0
        );
        if *size == 0 {
            assert_eq!(count(v, "write", "fastpath_bytes"), 0, "{v}");
        }
    }
}

/// Every read and every write went through the fallback, none retried.
fn assert_all_fallback(results: &[(u64, Value)]) {
    for (size, v) in results {
        assert_eq!(count(v, "read", "fallback_bytes"), *size, "{size}: {v}");
        assert_eq!(count(v, "read", "fastpath_bytes"), 0, "{size}: {v}");
        assert_eq!(count(v, "write", "fastpath_bytes"), 0, "{size}: {v}");
        assert_eq!(
            count(v, "read", "retries") + count(v, "write", "retries"),
            0
        );
    }
}

// ---- Real filesystems (root, loop devices, mkfs) ----

#[test]
fn ext4_ordered_copies_every_size_through_the_fastpath() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    assert_all_fastpath(&copy_every_size(fs.path(), &[]));
}

#[test]
fn xfs_copies_every_size_through_the_fastpath() {
    let fs = require!(MountedFs::xfs(300));
    assert_all_fastpath(&copy_every_size(fs.path(), &[]));
}

#[test]
fn ext4_data_journal_copies_every_size_through_the_fallback() {
    let fs = require!(MountedFs::ext4(Ext4Data::Journal, 64));
    assert_all_fallback(&copy_every_size(fs.path(), &[]));
}

#[test]
fn tmpfs_copies_every_size_through_the_fallback() {
    let fs = require!(MountedFs::tmpfs(16));
    assert_all_fallback(&copy_every_size(fs.path(), &[]));
}

#[test]
fn force_compat_mode_copies_through_the_fallback() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let results = copy_every_size(fs.path(), &[("HIPFILE_FORCE_COMPAT_MODE", "true")]);
    assert_all_fallback(&results);
}

#[test]
fn a_block_device_is_a_source_of_its_whole_size() {
    let dev = require!(loop_device(4));
    let dir = temp_dir();
    let pattern = std::fs::read(data_file(dir.path(), "pattern", 4 * MIB)).unwrap();
    std::fs::write(dev.path(), &pattern).unwrap();
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let dst = fs.path().join("copy");
    let v = cp_json(dev.path(), &dst, &["--chunk", "1M"], &[]);
    assert_eq!(v["bytes"], 4 * MIB, "{v}");
    assert_eq!(count(&v, "read", "fastpath_bytes"), 4 * MIB as u64, "{v}");
    assert_eq!(std::fs::read(&dst).unwrap(), pattern);
}

/// A source of three chunks and one byte on ext4 `data=ordered`, and where to copy it.
fn four_chunks(fs: &MountedFs) -> (PathBuf, PathBuf, u64) {
    let size = 3 * CHUNK_64K + 1;
    let src = data_file(fs.path(), "src", size);
    (src, fs.path().join("dst"), size as u64)
}

#[test]
fn enodev_on_every_fastpath_read_is_retried_on_the_fallback() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let (src, dst, size) = four_chunks(&fs);
    let v = cp_json(
        &src,
        &dst,
        &["--chunk", "64K"],
        &[("HIPFILE_EMU_FAULT", "read:ENODEV")],
    );
    assert_eq!(count(&v, "read", "retries"), 4, "one per chunk: {v}");
    assert_eq!(count(&v, "read", "fallback_bytes"), size, "{v}");
    assert_eq!(count(&v, "read", "fastpath_bytes"), 0, "{v}");
    assert_eq!(count(&v, "write", "retries"), 0, "{v}");
    assert_eq!(count(&v, "write", "fallback_bytes"), 0, "{v}");
}

#[test]
fn a_counted_enodev_fault_retries_only_those_reads() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let (src, dst, size) = four_chunks(&fs);
    let v = cp_json(
        &src,
        &dst,
        &["--chunk", "64K"],
        &[("HIPFILE_EMU_FAULT", "read:ENODEV:2")],
    );
    let chunk = CHUNK_64K as u64;
    assert_eq!(count(&v, "read", "retries"), 2, "{v}");
    assert_eq!(count(&v, "read", "fallback_bytes"), 2 * chunk, "{v}");
    assert_eq!(count(&v, "read", "fastpath_bytes"), size - 2 * chunk, "{v}");
}

#[test]
fn eremoteio_on_fastpath_writes_is_retried_on_the_fallback() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let (src, dst, size) = four_chunks(&fs);
    let v = cp_json(
        &src,
        &dst,
        &["--chunk", "64K"],
        &[("HIPFILE_EMU_FAULT", "write:EREMOTEIO")],
    );
    assert_eq!(count(&v, "write", "retries"), 4, "{v}");
    assert_eq!(count(&v, "write", "fastpath_bytes"), 0, "{v}");
    assert_eq!(count(&v, "write", "fallback_bytes"), size, "{v}");
    assert_eq!(count(&v, "read", "fastpath_bytes"), size, "{v}");
    assert_eq!(count(&v, "read", "retries"), 0, "{v}");
}

/// A copy that must fail: exit 1, a message naming `named` and `words`, nothing on stdout.
fn assert_fails(run: &Run, named: &Path, words: &[&str]) {
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert_eq!(run.stdout, "");
    assert!(
        run.stderr.contains(named.to_str().unwrap()),
        "{}",
        run.stderr
    );
    for w in words {
        assert!(run.stderr.contains(w), "stderr lacks {w:?}: {}", run.stderr);
    }
}

#[test]
fn eio_on_a_fastpath_read_fails_the_copy_and_removes_the_destination() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let (src, dst, _) = four_chunks(&fs);
    for json in [&["--json"][..], &[][..]] {
        let mut extra = vec!["--chunk", "64K"];
        extra.extend_from_slice(json);
        let run = cp(&src, &dst, &extra, &[("HIPFILE_EMU_FAULT", "read:EIO")]);
        assert_fails(&run, &src, &["cannot read", "offset 0", "removed"]);
        assert!(!dst.exists(), "the incomplete copy was left behind");
        assert_only(fs.path(), &["src"]);
    }
}

/// `dir` holds exactly `names` (and an ext4 root's `lost+found`): no temporary file is left.
fn assert_only(dir: &Path, names: &[&str]) {
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "lost+found")
        .collect();
    found.sort_unstable();
    let mut want: Vec<&str> = names.to_vec();
    want.sort_unstable();
    assert_eq!(found, want, "in {dir:?}");
}

#[test]
fn a_failing_copy_leaves_an_existing_destination_as_it_was() {
    use std::os::unix::fs::PermissionsExt;
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let (src, dst, _) = four_chunks(&fs);
    for (fault, words) in [
        // The first chunk is retried on the fallback and written; the second fails.
        (
            "write:ENODEV:1,write:EIO",
            &["cannot write", "offset 65536"][..],
        ),
        ("read:EIO", &["cannot read", "offset 0"]),
    ] {
        std::fs::write(&dst, b"old contents").unwrap();
        std::fs::set_permissions(&dst, std::fs::Permissions::from_mode(0o640)).unwrap();
        let run = cp(
            &src,
            &dst,
            &["--chunk", "64K"],
            &[("HIPFILE_EMU_FAULT", fault)],
        );
        assert_eq!(std::fs::read(&dst).unwrap(), b"old contents", "{fault}");
        let mut all = words.to_vec();
        all.extend(["removed the incomplete copy", "is unchanged"]);
        assert_fails(&run, &dst, &all);
        let mode = std::fs::metadata(&dst).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640, "{fault}");
        assert_only(fs.path(), &["src", "dst"]);
    }
}

#[test]
fn without_compat_mode_enodev_is_not_retried_and_the_copy_fails() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let (src, dst, _) = four_chunks(&fs);
    let run = cp(
        &src,
        &dst,
        &["--json"],
        &[
            ("HIPFILE_ALLOW_COMPAT_MODE", "false"),
            ("HIPFILE_EMU_FAULT", "read:ENODEV"),
        ],
    );
    assert_fails(&run, &src, &["cannot read"]);
    assert!(!dst.exists());
    // Without the fault, the same configuration copies through the fastpath alone.
    let v = cp_json(&src, &dst, &[], &[("HIPFILE_ALLOW_COMPAT_MODE", "false")]);
    assert_eq!(count(&v, "read", "fallback_bytes"), 0, "{v}");
}

/// `hipfile cp --runtime emulated EXTRA... SRC DST` with a file-size limit (`RLIMIT_FSIZE`) of
/// `limit` bytes, and `SIGXFSZ` ignored so that a write past the limit fails with `EFBIG`
/// rather than killing the process (an ignored signal stays ignored across `exec`).
fn cp_with_file_size_limit(
    limit: u64,
    src: &Path,
    dst: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> Run {
    let limit = limit.to_string();
    let mut args: Vec<&OsStr> = [
        "-c",
        "trap '' XFSZ; limit=$1; shift; exec prlimit --fsize=\"$limit\" -- \"$@\"",
        "sh",
        &limit,
        env!("CARGO_BIN_EXE_hipfile"),
        "cp",
        "--runtime=emulated",
    ]
    .into_iter()
    .map(OsStr::new)
    .collect();
    args.extend(extra.iter().map(OsStr::new));
    args.push(src.as_os_str());
    args.push(dst.as_os_str());
    run_program(Path::new("/bin/sh"), &args, env)
}

#[test]
fn a_copy_past_the_file_size_limit_fails_with_efbig_and_changes_nothing() {
    require!(hipfile_testfs::has_command("prlimit"));
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let (src, dst, _) = four_chunks(&fs);
    // The limit falls inside the second chunk: its write comes back short (the fastpath's
    // after 32 KiB, as pwrite's would), and the write of the rest fails with EFBIG.
    let limit = (CHUNK_64K + CHUNK_64K / 2) as u64;
    for (backend, env) in [
        ("fastpath", &[][..]),
        ("fallback", &[("HIPFILE_FORCE_COMPAT_MODE", "true")]),
    ] {
        std::fs::write(&dst, b"old contents").unwrap();
        let run = cp_with_file_size_limit(limit, &src, &dst, &["--chunk", "64K"], env);
        assert_eq!(std::fs::read(&dst).unwrap(), b"old contents", "{backend}");
        assert_only(fs.path(), &["src", "dst"]);
        assert_fails(
            &run,
            &dst,
            &[
                "cannot write the copy",
                "File too large",
                "file-size limit",
                "removed the incomplete copy",
                "is unchanged",
            ],
        );
        if backend == "fastpath" {
            // Where the short write stopped: the loop went on from there.
            assert!(run.stderr.contains("at offset 98304"), "{}", run.stderr);
        }
    }
}

// ---- Files anywhere (no root needed) ----

#[test]
fn a_copy_prints_one_line_of_counts() {
    let dir = temp_dir();
    let src = data_file(dir.path(), "src", MIB + 5);
    let dst = dir.path().join("dst");
    let run = cp(&src, &dst, &[], &[]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_identical(&src, &dst);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", run.stdout);
    let line = lines[0];
    let prefix = format!("copied {} bytes in ", MIB + 5);
    assert!(line.starts_with(&prefix), "{line}");
    let s = line.find(" s (").unwrap();
    let g = line.find(" GB/s); read: fastpath ").unwrap();
    line[prefix.len()..s].parse::<f64>().unwrap();
    line[s + 4..g].parse::<f64>().unwrap();
    let counts: Vec<u64> = line[g..]
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse().unwrap())
        .collect();
    assert_eq!(counts.len(), 6, "{line}");
    assert_eq!(counts[0] + counts[1], (MIB + 5) as u64, "{line}");
    assert_eq!(counts[3] + counts[4], (MIB + 5) as u64, "{line}");
    assert!(
        line.contains("; write: fastpath ")
            && line.contains(", fallback ")
            && line.contains(", retries "),
        "{line}"
    );
    assert!(
        run.stderr.contains("using the emulated runtime"),
        "{}",
        run.stderr
    );
}

#[test]
fn an_existing_destination_is_replaced_with_the_exact_size() {
    let dir = temp_dir();
    let src = data_file(dir.path(), "src", 5000);
    let dst = data_file(dir.path(), "dst", 3 * MIB);
    cp_json(&src, &dst, &[], &[]);
    assert_eq!(std::fs::metadata(&dst).unwrap().len(), 5000);
}

#[test]
fn the_bytes_written_are_those_of_the_file() {
    let dir = temp_dir();
    // Not a multiple of any alignment: the last chunk is written with padding.
    let src = data_file(dir.path(), "src", 1_000_000);
    let dst = dir.path().join("dst");
    for chunk in ["64K", "1M"] {
        let v = cp_json(&src, &dst, &["--chunk", chunk], &[]);
        assert_eq!(total(&v, "write"), 1_000_000, "--chunk {chunk}: {v}");
    }
}

#[test]
fn a_driver_that_cannot_be_opened_is_said_once() {
    let dir = temp_dir();
    let src = data_file(dir.path(), "src", 10);
    let dst = dir.path().join("dst");
    let run = hipfile(
        &[
            OsStr::new("cp"),
            OsStr::new("--runtime=auto"),
            src.as_os_str(),
            dst.as_os_str(),
        ],
        &[("HIPFILE_HIP_LIBRARY", "/nonexistent/libamdhip64.so")],
    );
    assert_fails(&run, Path::new("/nonexistent/libamdhip64.so"), &[]);
    assert_eq!(
        run.stderr.matches("cannot open the hipfile driver").count(),
        1,
        "{}",
        run.stderr
    );
    assert!(!dst.exists());
    assert_only(dir.path(), &["src"]);
}

#[test]
fn a_procfs_file_is_copied_to_its_end() {
    let dir = temp_dir();
    let src = Path::new("/proc/version");
    // The premise: procfs gives no size, so the size cannot be what ends the copy.
    assert_eq!(std::fs::metadata(src).unwrap().len(), 0);
    let want = std::fs::read(src).unwrap();
    assert!(!want.is_empty());
    let dst = dir.path().join("version");
    let run = cp(src, &dst, &["--json"], &[]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let v = run.one();
    assert_eq!(std::fs::read(&dst).unwrap(), want);
    assert_eq!(v["bytes"], want.len(), "{v}");
    assert_eq!(total(&v, "read"), want.len() as u64, "{v}");
}

#[test]
fn an_existing_destination_keeps_its_mode_and_a_link_to_it_stays() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir();
    let src = data_file(dir.path(), "src", 5000);
    let target = data_file(dir.path(), "target", 70_000);
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o751)).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink("target", &link).unwrap();
    cp_json(&src, &link, &[], &[]);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the link was replaced"
    );
    assert_identical(&src, &target);
    let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o751);
    assert_only(dir.path(), &["src", "target", "link"]);
}

#[test]
fn a_new_destination_has_mode_0644_less_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir();
    let src = data_file(dir.path(), "src", 10);
    let dst = dir.path().join("dst");
    cp_json(&src, &dst, &[], &[]);
    let mode = std::fs::metadata(&dst).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode & !0o644, 0, "{mode:o}");
    assert_ne!(mode & 0o600, 0, "{mode:o}");
}

#[test]
fn a_missing_source_exits_1_naming_it_and_creates_nothing() {
    let dir = temp_dir();
    let src = dir.path().join("missing");
    let dst = dir.path().join("dst");
    let run = cp(&src, &dst, &[], &[]);
    assert_fails(&run, &src, &["cannot open", "No such file or directory"]);
    assert!(!dst.exists());
}

#[test]
fn a_source_that_is_not_a_file_is_refused() {
    let dir = temp_dir();
    let dst = dir.path().join("dst");
    let run = cp(dir.path(), &dst, &[], &[]);
    assert_fails(&run, dir.path(), &["cannot copy", "it is a directory"]);
    assert!(!dst.exists());
}

/// `hipfile check SRC` says what `hipfile cp SRC DST` does with a source that is not a
/// regular file: the library registers a character device and serves it as `pread` does
/// there (docs/BEHAVIOUR.md §3.5), so `/dev/null` is copied (0 bytes) and check names the
/// fallback; a directory or a FIFO is refused by both; a character device without file
/// offsets (a pseudo-terminal's master, `/dev/ptmx`) fails every read with `ESPIPE`, and
/// check says that nothing would be served.
#[test]
fn check_says_what_cp_does_with_devices_and_other_files() {
    let dir = temp_dir();
    let fifo = hipfile_testfs::fifo(dir.path());
    let mut sources = vec![
        PathBuf::from("/dev/null"),
        dir.path().to_path_buf(),
        fifo.clone(),
    ];
    let ptmx = Path::new("/dev/ptmx");
    if std::fs::File::open(ptmx).is_ok() {
        sources.push(ptmx.to_path_buf());
    } else {
        eprintln!("no /dev/ptmx here: a character device without offsets is not tried");
    }
    for src in &sources {
        let check = hipfile(
            &[
                OsStr::new("check"),
                OsStr::new("--json"),
                OsStr::new("--runtime=emulated"),
                src.as_os_str(),
            ],
            &[],
        );
        let v = check.one();
        let dst = dir.path().join("copy");
        let copy = cp(src, &dst, &[], &[]);
        assert!(
            [0, 1].contains(&check.status) && [0, 1].contains(&copy.status),
            "{src:?}: check {} {}, cp {} {}",
            check.status,
            check.stderr,
            copy.status,
            copy.stderr
        );
        assert_eq!(
            check.status == 0,
            copy.status == 0,
            "{src:?}: check says {v}, cp exited {}: {}",
            copy.status,
            copy.stderr
        );
        assert_eq!(v["selected"].is_string(), copy.status == 0, "{src:?}: {v}");
        if copy.status == 0 {
            assert_eq!(std::fs::read(&dst).unwrap(), b"", "{src:?}");
            std::fs::remove_file(&dst).unwrap();
        } else {
            assert!(!dst.exists(), "{src:?}");
        }
    }
    // What each is.
    let (v, _) = common::check_json(Path::new("/dev/null"), &["--runtime=emulated"], &[]);
    assert_eq!(v["selected"], "fallback", "{v}");
    let (v, _) = common::check_json(&fifo, &["--runtime=emulated"], &[]);
    assert_eq!(v["blocked"]["code"], "unusable_file", "{v}");
    if sources.iter().any(|s| s == ptmx) {
        let (v, _) = common::check_json(ptmx, &["--runtime=emulated"], &[]);
        assert_eq!(v["blocked"]["code"], "no_file_offsets", "{v}");
        assert!(
            v["blocked"]["message"].as_str().unwrap().contains("ESPIPE"),
            "{v}"
        );
        let run = cp(ptmx, &dir.path().join("copy"), &[], &[]);
        assert_fails(&run, ptmx, &["Illegal seek"]);
    }
}

#[test]
fn a_destination_that_cannot_be_opened_is_named() {
    let dir = temp_dir();
    let src = data_file(dir.path(), "src", 10);
    let run = cp(&src, dir.path(), &[], &[]);
    assert_fails(&run, dir.path(), &["cannot open", "for writing"]);
    let nowhere = dir.path().join("no").join("dst");
    let run = cp(&src, &nowhere, &[], &[]);
    assert_fails(&run, &nowhere, &["No such file or directory"]);
}

#[test]
fn copying_a_file_onto_itself_is_refused_and_changes_nothing() {
    let dir = temp_dir();
    let src = data_file(dir.path(), "src", 9000);
    let before = std::fs::read(&src).unwrap();
    let other_name = dir.path().join(".").join("src");
    let run = cp(&src, &other_name, &[], &[]);
    assert_fails(&run, &src, &["same file"]);
    assert_eq!(std::fs::read(&src).unwrap(), before);
}

#[test]
fn without_the_emulated_runtime_beside_it_the_binary_exits_2_saying_where_it_looked() {
    let dir = temp_dir();
    let program = dir.path().join("hipfile");
    std::fs::copy(env!("CARGO_BIN_EXE_hipfile"), &program).unwrap();
    let src = data_file(dir.path(), "src", 10);
    let dst = dir.path().join("dst");
    for command in ["cp", "check"] {
        let mut args = vec![
            OsStr::new(command),
            OsStr::new("--runtime"),
            OsStr::new("emulated"),
        ];
        args.push(src.as_os_str());
        if command == "cp" {
            args.push(dst.as_os_str());
        }
        let run = run_program(&program, &args, &[]);
        assert_eq!(run.status, 2, "{command}: {}", run.stderr);
        assert_eq!(run.stdout, "");
        for looked in [
            dir.path().join("libhipfile_emu.so"),
            dir.path().join("deps").join("libhipfile_emu.so"),
        ] {
            assert!(
                run.stderr.contains(looked.to_str().unwrap()),
                "{command}: {}",
                run.stderr
            );
        }
        assert!(!dst.exists());
    }

    // Beside the binary, it is found.
    let built = [Path::new(env!("CARGO_BIN_EXE_hipfile")).parent().unwrap()]
        .iter()
        .flat_map(|d| {
            [
                d.join("libhipfile_emu.so"),
                d.join("deps").join("libhipfile_emu.so"),
            ]
        })
        .find(|p| p.is_file())
        .expect("the emulated runtime was built");
    let beside = dir.path().join("libhipfile_emu.so");
    std::os::unix::fs::symlink(&built, &beside).unwrap();
    let args = [
        OsStr::new("cp"),
        OsStr::new("--runtime=emulated"),
        src.as_os_str(),
        dst.as_os_str(),
    ];
    let run = run_program(&program, &args, &[]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("using the emulated runtime {}", beside.display())),
        "{}",
        run.stderr
    );
    assert_identical(&src, &dst);
}

#[test]
fn bad_arguments_exit_2_and_say_what_was_wrong() {
    let dir = temp_dir();
    let src = data_file(dir.path(), "src", 10);
    let s = src.to_str().unwrap();
    let dst = dir.path().join("dst");
    let d = dst.to_str().unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (&["cp"], &["<SRC>", "<DST>", "hipfile cp --help"]),
        (&["cp", s], &["DST"]),
        (&["cp", s, d, "extra"], &["'extra'", "unexpected argument"]),
        (
            &["cp", "--chunk", "1000", s, d],
            &["--chunk", "multiple of 4096"],
        ),
        (
            &["cp", "--chunk", "0", s, d],
            &["--chunk", "multiple of 4096"],
        ),
        (&["cp", "--chunk", "lots", s, d], &["--chunk", "\"lots\""]),
        (&["cp", s, d, "--chunk"], &["--chunk", "value is required"]),
        (
            &["cp", "--runtime", "gpu", s, d],
            &["--runtime", "auto, emulated"],
        ),
        (
            &["cp", "--frobnicate", s, d],
            &["--frobnicate", "hipfile cp --help"],
        ),
    ];
    for (args, needles) in cases {
        let run = hipfile(args, &[]);
        assert_eq!(run.status, 2, "{args:?}: {}", run.stderr);
        assert_eq!(run.stdout, "", "{args:?}");
        for n in *needles {
            assert!(
                run.stderr.contains(n),
                "{args:?}: stderr {:?} lacks {n:?}",
                run.stderr
            );
        }
        assert!(!dst.exists(), "{args:?} created DST");
    }
}

#[test]
fn help_names_every_option_and_the_exit_statuses() {
    let run = hipfile(&["cp", "--help"], &[]);
    assert_eq!(run.status, 0);
    for needle in [
        "Usage: hipfile cp [OPTIONS] <SRC> <DST>",
        "--json",
        "--chunk",
        "--runtime",
        "64MiB",
        "4096",
        "fastpath_bytes",
        "fallback_bytes",
        "retries",
        "Exit status",
        "a missing SRC",
        "removed",
    ] {
        assert!(run.stdout.contains(needle), "cp --help lacks {needle:?}");
    }
    let run = hipfile(&["--help"], &[]);
    assert!(run.stdout.contains("cp "), "{}", run.stdout);
}
