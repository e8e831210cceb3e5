//! `hipfile check` run as a user runs it: the built binary, real files, real filesystems on
//! loop devices (those tests need root and the mkfs tools, and say SKIP without them), the
//! configuration in environment variables, output parsed as JSON.

// Helpers too are test code: an unwrap that fails is a test failure with its location.
#![allow(clippy::unwrap_used)]

mod common;

use common::{MIB, Run, assert_shape, check_json, data_file, hipfile, temp_dir};
use hipfile_testfs::{Ext4Data, MountedFs, fifo, loop_device, require};
use serde_json::{Value, json};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

fn reasons(v: &Value, backend: &str) -> Vec<String> {
    v[backend]["rejected_because"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_owned())
        .collect()
}

/// What the fastpath says about the runtime first: nothing on a runtime with AMD file I/O,
/// `runtime_lacks_amd_file_io` otherwise (every machine without ROCm 7.2 and its driver).
fn runtime_reasons(v: &Value) -> Vec<String> {
    if v["runtime"]["amd_file_io"].as_bool().unwrap() {
        vec![]
    } else {
        vec!["runtime_lacks_amd_file_io".into()]
    }
}

fn with(mut base: Vec<String>, more: &[&str]) -> Vec<String> {
    base.extend(more.iter().map(|s| s.to_string()));
    base
}

/// The status `hipfile check` must exit with for this one line.
fn expected_status(v: &Value) -> i32 {
    if v["selected"].is_null() { 1 } else { 0 }
}

/// Why the runtime `check` found can serve nothing, whatever the backends say: no runtime
/// loaded, or one that sees no device (both on machines without a GPU).
fn runtime_block(v: &Value) -> Option<&'static str> {
    if v["runtime"]["platform"] == "none" {
        Some("no_gpu_runtime")
    } else if v["runtime"]["devices"] == 0 {
        Some("no_gpu_device")
    } else {
        None
    }
}

/// The backend the scores choose (docs/BEHAVIOUR.md §1: the highest non-negative score).
fn chosen_by_score(v: &Value) -> Value {
    if v["fastpath"]["score"].as_i64().unwrap() >= 0 {
        "fastpath".into()
    } else if v["fallback"]["score"].as_i64().unwrap() >= 0 {
        "fallback".into()
    } else {
        Value::Null
    }
}

/// `backend` is what the scores choose, and what is selected unless the machine's runtime
/// cannot serve at all; then nothing is, `blocked` says why, and the status is 1.
fn assert_served_by(v: &Value, run: &Run, backend: &str) {
    assert_eq!(chosen_by_score(v), backend, "{v}");
    match runtime_block(v) {
        None => {
            assert_eq!(v["selected"], backend, "{v}");
            assert_eq!(v["blocked"], Value::Null, "{v}");
            assert_eq!(run.status, 0, "{}", run.stderr);
        }
        Some(code) => {
            assert_eq!(v["selected"], Value::Null, "{v}");
            assert_eq!(v["blocked"]["code"], code, "{v}");
            assert_eq!(run.status, 1, "{}", run.stderr);
        }
    }
}

// ---- Real filesystems (root, loop devices, mkfs) ----

#[test]
fn ext4_ordered_file_is_served_by_the_fallback_without_amd_file_io() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let path = data_file(fs.path(), "data", 4 * MIB);
    let (v, run) = check_json(&path, &[], &[]);
    let file = &v["file"];
    assert_eq!(file["kind"], "regular");
    assert_eq!(file["filesystem"], "ext4");
    assert_eq!(file["ext4_journal"], "ordered");
    assert_eq!(file["o_direct"], true);
    assert!(
        file["dio_mem_align"].as_u64().unwrap() > 0
            && file["dio_offset_align"].as_u64().unwrap() > 0,
        "{v}"
    );
    assert_eq!(reasons(&v, "fastpath"), runtime_reasons(&v));
    assert_eq!(v["fallback"]["score"], 1);
    assert_eq!(
        v["config"],
        json!({"allow_compat_mode": true, "force_compat_mode": false, "unsupported_file_systems": false})
    );
    assert_eq!(
        v["request"],
        json!({"op": "read", "size": MIB, "file_offset": 0, "buffer_offset": 0, "memory": "device"})
    );
    if v["runtime"]["amd_file_io"] == false {
        assert_eq!(v["fastpath"]["score"], -1);
        assert_served_by(&v, &run, "fallback");
    } else {
        assert_served_by(&v, &run, "fastpath");
    }
}

/// docs/BEHAVIOUR.md §1.7: without a usable `O_DIRECT` descriptor the fastpath gives
/// `no_o_direct_fd` and no alignment reason, but the filesystem rule still applies: ext4
/// `data=journal` is not a supported journaling mode.
#[test]
fn ext4_data_journal_has_no_o_direct_descriptor_and_an_unsupported_file_system() {
    let fs = require!(MountedFs::ext4(Ext4Data::Journal, 64));
    let path = data_file(fs.path(), "data", MIB);
    for extra in [&[][..], &["--offset", "1", "--size", "3"][..]] {
        let (v, run) = check_json(&path, extra, &[]);
        assert_eq!(v["file"]["filesystem"], "ext4");
        assert_eq!(v["file"]["ext4_journal"], "journal");
        assert_eq!(v["file"]["o_direct"], false);
        assert_eq!(
            (
                v["file"]["dio_mem_align"].as_u64(),
                v["file"]["dio_offset_align"].as_u64()
            ),
            (Some(0), Some(0))
        );
        assert_eq!(
            reasons(&v, "fastpath"),
            with(
                runtime_reasons(&v),
                &["no_o_direct_fd", "unsupported_file_system"]
            ),
            "{extra:?}"
        );
        assert_eq!(run.status, expected_status(&v));
    }
    // The filesystem reason goes when unsupported filesystems are allowed; the descriptor's
    // stays.
    let (v, _) = check_json(&path, &[], &[("HIPFILE_UNSUPPORTED_FILE_SYSTEMS", "true")]);
    assert_eq!(
        reasons(&v, "fastpath"),
        with(runtime_reasons(&v), &["no_o_direct_fd"])
    );
}

#[test]
fn ext4_data_writeback_is_an_unsupported_file_system_unless_allowed() {
    let fs = require!(MountedFs::ext4(Ext4Data::Writeback, 64));
    let path = data_file(fs.path(), "data", MIB);
    let (v, _) = check_json(&path, &[], &[]);
    assert_eq!(v["file"]["ext4_journal"], "writeback");
    assert_eq!(v["file"]["o_direct"], true);
    assert_eq!(
        reasons(&v, "fastpath"),
        with(runtime_reasons(&v), &["unsupported_file_system"])
    );

    let (v, _) = check_json(&path, &[], &[("HIPFILE_UNSUPPORTED_FILE_SYSTEMS", "true")]);
    assert_eq!(v["config"]["unsupported_file_systems"], true);
    assert_eq!(reasons(&v, "fastpath"), runtime_reasons(&v));
}

#[test]
fn xfs_file_has_o_direct_and_no_journal_mode() {
    let fs = require!(MountedFs::xfs(300));
    let path = data_file(fs.path(), "data", MIB);
    let (v, run) = check_json(&path, &[], &[]);
    assert_eq!(v["file"]["kind"], "regular");
    assert_eq!(v["file"]["filesystem"], "xfs");
    assert_eq!(v["file"]["ext4_journal"], Value::Null);
    assert_eq!(v["file"]["o_direct"], true);
    assert_eq!(reasons(&v, "fastpath"), runtime_reasons(&v));
    assert_eq!(run.status, expected_status(&v));
}

#[test]
fn tmpfs_reasons_follow_what_the_probe_reports() {
    let fs = require!(MountedFs::tmpfs(16));
    let path = data_file(fs.path(), "data", MIB);
    let (v, run) = check_json(&path, &[], &[]);
    assert_eq!(v["file"]["filesystem"], "tmpfs");
    assert_eq!(v["file"]["ext4_journal"], Value::Null);
    let fast = reasons(&v, "fastpath");
    if v["file"]["o_direct"] == true {
        assert!(fast.contains(&"unsupported_file_system".to_owned()), "{v}");
        assert!(!fast.contains(&"no_o_direct_fd".to_owned()), "{v}");
    } else {
        assert_eq!(
            fast,
            with(
                runtime_reasons(&v),
                &["no_o_direct_fd", "unsupported_file_system"]
            ),
            "{v}"
        );
    }
    assert_served_by(&v, &run, "fallback");
}

#[test]
fn a_loop_device_used_directly_is_a_block_device_with_o_direct() {
    let dev = require!(loop_device(16));
    let (v, run) = check_json(dev.path(), &[], &[]);
    assert_eq!(v["file"]["kind"], "block");
    assert_eq!(v["file"]["o_direct"], true);
    assert!(v["file"]["dio_offset_align"].as_u64().unwrap() > 0, "{v}");
    let fast = reasons(&v, "fastpath");
    assert!(!fast.contains(&"unsupported_file_system".to_owned()), "{v}");
    assert_eq!(fast, runtime_reasons(&v));
    assert_eq!(run.status, expected_status(&v));
}

#[test]
fn misaligned_requests_on_ext4_give_each_alignment_reason() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let path = data_file(fs.path(), "data", MIB);
    let (v, run) = check_json(
        &path,
        &["--offset", "512", "--size", "1000", "--buffer-offset", "1"],
        &[],
    );
    assert_eq!(
        v["request"],
        json!({"op": "read", "size": 1000, "file_offset": 512, "buffer_offset": 1, "memory": "device"})
    );
    let offset_align = v["file"]["dio_offset_align"].as_u64().unwrap();
    let mem_align = v["file"]["dio_mem_align"].as_u64().unwrap();
    assert!(offset_align > 0 && mem_align > 0, "{v}");
    // The buffer's base is a multiple of 4096 (the default --buffer-align) and no larger power
    // of two, so base + 1 is misaligned for any memory alignment above 1.
    let mut expected = runtime_reasons(&v);
    if 512 % offset_align != 0 {
        expected.push("file_offset_misaligned".into());
    }
    if 1000 % offset_align != 0 {
        expected.push("size_misaligned".into());
    }
    if mem_align > 1 {
        expected.push("buffer_address_misaligned".into());
    }
    assert!(expected.contains(&"size_misaligned".to_owned()), "{v}");
    assert_eq!(reasons(&v, "fastpath"), expected, "{v}");
    assert_served_by(&v, &run, "fallback");
}

#[test]
fn buffer_alignment_below_the_memory_alignment_is_misaligned() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let path = data_file(fs.path(), "data", MIB);
    let (v, _) = check_json(&path, &[], &[]);
    let mem_align = v["file"]["dio_mem_align"].as_u64().unwrap();
    if mem_align < 2 {
        return;
    }
    let half = (mem_align / 2).to_string();
    let (v, _) = check_json(&path, &["--buffer-align", &half], &[]);
    assert_eq!(
        reasons(&v, "fastpath"),
        with(runtime_reasons(&v), &["buffer_address_misaligned"]),
        "{v}"
    );
    let exact = mem_align.to_string();
    let (v, _) = check_json(&path, &["--buffer-align", &exact], &[]);
    assert_eq!(reasons(&v, "fastpath"), runtime_reasons(&v), "{v}");
}

#[test]
fn write_on_ext4_changes_nothing() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let path = data_file(fs.path(), "data", MIB);
    assert_unchanged_by_write_check(&path);
}

#[test]
fn the_emulated_runtime_on_ext4_ordered_selects_the_fastpath() {
    let fs = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let path = data_file(fs.path(), "data", MIB);
    let (v, run) = check_json(&path, &["--runtime", "emulated"], &[]);
    assert_eq!(v["runtime"]["platform"], "emulated", "{v}");
    assert_eq!(v["runtime"]["amd_file_io"], true, "{v}");
    assert_eq!(v["file"]["ext4_journal"], "ordered");
    assert_eq!(v["fastpath"]["score"], 100, "{v}");
    assert_eq!(v["selected"], "fastpath", "{v}");
    assert_eq!(run.status, 0, "{}", run.stderr);
    // The configuration still applies to the emulated runtime.
    let (v, _) = check_json(
        &path,
        &["--runtime", "emulated"],
        &[("HIPFILE_FORCE_COMPAT_MODE", "true")],
    );
    assert_eq!(reasons(&v, "fastpath"), ["force_compat_mode"], "{v}");
    assert_eq!(v["selected"], "fallback");
}

// ---- Files anywhere (no root needed) ----

/// Where the binary looks for the emulated runtime: beside itself, then in `deps/`.
fn emulated_candidates() -> [PathBuf; 2] {
    let dir = Path::new(env!("CARGO_BIN_EXE_hipfile")).parent().unwrap();
    [
        dir.join("libhipfile_emu.so"),
        dir.join("deps").join("libhipfile_emu.so"),
    ]
}

#[test]
fn the_emulated_runtime_is_found_beside_the_binary() {
    let candidates = emulated_candidates();
    assert!(
        candidates.iter().any(|p| p.is_file()),
        "the dev-dependency on hipfile-emu should have built one of {candidates:?}"
    );
    let dir = temp_dir();
    let path = data_file(dir.path(), "data", 4096);
    let (v, run) = check_json(&path, &["--runtime", "emulated"], &[]);
    let rt = &v["runtime"];
    assert_eq!(rt["platform"], "emulated", "{v}");
    assert_eq!(rt["amd_file_io"], true, "{v}");
    assert!(rt["devices"].as_u64().unwrap() >= 1, "{v}");
    assert_eq!(rt["error"], Value::Null, "{v}");
    assert!(rt["version"].as_str().unwrap().starts_with("7.2"), "{v}");
    let library = PathBuf::from(rt["library"].as_str().unwrap());
    assert!(
        candidates.contains(&library),
        "{library:?} not in {candidates:?}"
    );
    assert!(
        run.stderr.contains(&format!(
            "hipfile: using the emulated runtime {} (test and development only)",
            library.display()
        )),
        "{}",
        run.stderr
    );
    assert!(
        reasons(&v, "fastpath")
            .iter()
            .all(|r| r != "runtime_lacks_amd_file_io")
    );

    let run = hipfile(
        &[
            OsStr::new("check"),
            OsStr::new("--runtime=emulated"),
            path.as_os_str(),
        ],
        &[],
    );
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert!(
        run.stdout.starts_with("runtime: emulated 7.2") && run.stdout.contains(", AMD file I/O"),
        "{}",
        run.stdout
    );
}

#[test]
fn runtime_auto_is_the_default() {
    let dir = temp_dir();
    let path = data_file(dir.path(), "data", 4096);
    let (v, run) = check_json(&path, &["--runtime", "auto"], &[]);
    assert!(!run.stderr.contains("emulated runtime"), "{}", run.stderr);
    let (plain, _) = check_json(&path, &[], &[]);
    assert_eq!(v["runtime"], plain["runtime"]);
}

#[test]
fn host_memory_is_refused_by_both_backends() {
    let dir = temp_dir();
    let path = data_file(dir.path(), "data", MIB);
    for memory in ["host", "managed"] {
        let (v, run) = check_json(&path, &["--memory", memory], &[]);
        assert_eq!(v["request"]["memory"], memory);
        assert!(
            reasons(&v, "fastpath").contains(&"buffer_not_device_memory".to_owned()),
            "{v}"
        );
        assert_eq!(reasons(&v, "fallback"), ["buffer_not_device_memory"]);
        assert_eq!(v["fallback"]["score"], -1);
        assert_eq!(v["selected"], Value::Null);
        assert_eq!(run.status, 1);
    }
}

#[test]
fn force_compat_mode_refuses_the_fastpath() {
    let dir = temp_dir();
    let path = data_file(dir.path(), "data", MIB);
    let (v, run) = check_json(&path, &[], &[("HIPFILE_FORCE_COMPAT_MODE", "true")]);
    assert_eq!(v["config"]["force_compat_mode"], true);
    assert_eq!(reasons(&v, "fastpath")[0], "force_compat_mode");
    assert_served_by(&v, &run, "fallback");
}

#[test]
fn force_without_allow_leaves_no_backend() {
    let dir = temp_dir();
    let path = data_file(dir.path(), "data", MIB);
    let env = [
        ("HIPFILE_FORCE_COMPAT_MODE", "true"),
        ("HIPFILE_ALLOW_COMPAT_MODE", "false"),
    ];
    let (v, run) = check_json(&path, &[], &env);
    assert_eq!(v["config"]["allow_compat_mode"], false);
    assert!(
        reasons(&v, "fastpath").contains(&"force_compat_mode".to_owned()),
        "{v}"
    );
    assert_eq!(reasons(&v, "fallback"), ["compat_mode_disallowed"]);
    assert_eq!(v["selected"], Value::Null);
    assert_eq!(run.status, 1);
    assert!(
        run.stderr.contains("no I/O can be served"),
        "{}",
        run.stderr
    );
}

#[test]
fn allow_compat_mode_zero_disallows_the_fallback() {
    let dir = temp_dir();
    let path = data_file(dir.path(), "data", MIB);
    let (v, run) = check_json(&path, &[], &[("HIPFILE_ALLOW_COMPAT_MODE", "0")]);
    assert_eq!(v["config"]["allow_compat_mode"], false);
    assert_eq!(reasons(&v, "fallback"), ["compat_mode_disallowed"]);
    assert_eq!(v["fallback"]["score"], -1);
    assert_eq!(run.status, expected_status(&v));
}

#[test]
fn an_invalid_boolean_warns_and_the_default_applies() {
    let dir = temp_dir();
    let path = data_file(dir.path(), "data", MIB);
    let (v, run) = check_json(&path, &[], &[("HIPFILE_FORCE_COMPAT_MODE", "ture")]);
    assert!(
        run.stderr.contains("HIPFILE_FORCE_COMPAT_MODE") && run.stderr.contains("ture"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("warning"), "{}", run.stderr);
    assert_eq!(v["config"]["force_compat_mode"], false);
    assert!(
        !reasons(&v, "fastpath").contains(&"force_compat_mode".to_owned()),
        "{v}"
    );
    assert_eq!(run.status, expected_status(&v));
}

/// A FIFO and a directory can never be read or written at an offset, and the library
/// refuses to register them: nothing would be served. The verdicts stay those of the file
/// (`no_o_direct_fd` and `not_regular_file_or_block_device`; the fallback's rules do not look
/// at the file); the selection is none, `blocked` and the line after the table say why.
#[test]
fn a_fifo_and_a_directory_are_not_served_and_say_why() {
    let dir = temp_dir();
    let pipe = fifo(dir.path());
    for op in ["read", "write"] {
        for (path, unusable, what) in [
            (pipe.as_path(), "fifo", "it is a FIFO or pipe"),
            (dir.path(), "directory", "it is a directory"),
        ] {
            let (v, run) = check_json(path, &["--op", op, "--runtime", "emulated"], &[]);
            assert_eq!(v["file"]["kind"], "other", "{v}");
            assert_eq!(v["file"]["unusable"], unusable, "{v}");
            assert_eq!(v["file"]["o_direct"], false);
            assert_eq!(
                (
                    v["file"]["dio_mem_align"].as_u64(),
                    v["file"]["dio_offset_align"].as_u64()
                ),
                (Some(0), Some(0))
            );
            assert_eq!(
                reasons(&v, "fastpath"),
                ["no_o_direct_fd", "not_regular_file_or_block_device"],
                "{v}"
            );
            assert_eq!(v["fallback"]["score"], 1);
            assert_eq!(v["selected"], Value::Null, "{v}");
            assert_eq!(v["blocked"]["code"], "unusable_file", "{v}");
            let message = v["blocked"]["message"].as_str().unwrap();
            assert!(message.contains(what), "{message}");
            assert_eq!(run.status, 1, "{}", run.stderr);

            let run = hipfile(
                &[
                    OsStr::new("check"),
                    OsStr::new("--runtime=emulated"),
                    OsStr::new("--op"),
                    OsStr::new(op),
                    path.as_os_str(),
                ],
                &[],
            );
            assert_eq!(run.status, 1);
            let lines: Vec<&str> = run.stdout.lines().collect();
            assert!(lines[2].ends_with("none (unusable_file)"), "{}", run.stdout);
            assert_eq!(
                lines[3],
                format!("{}: nothing would be served: {message}", path.display()),
                "{}",
                run.stdout
            );
        }
    }
}

/// `/dev/null` is not refused: positional reads and writes work on it. Through the library
/// a read returns 0 bytes and a write succeeds, on the fallback (a test of `hipfile`'s own
/// shows it), so naming the fallback is the truth.
#[test]
fn dev_null_is_served_by_the_fallback() {
    for op in ["read", "write"] {
        let (v, run) = check_json(
            Path::new("/dev/null"),
            &["--op", op, "--runtime", "emulated"],
            &[],
        );
        assert_eq!(v["file"]["unusable"], Value::Null, "{v}");
        assert_eq!(v["blocked"], Value::Null, "{v}");
        assert_eq!(v["selected"], "fallback", "{v}");
        assert_eq!(run.status, 0, "{}", run.stderr);
    }
}

/// A character device has no direct descriptor (none is attempted) and is neither a regular
/// file nor a block device: both reasons are listed (docs/BEHAVIOUR.md §1.7), and no alignment
/// reason.
#[test]
fn dev_null_is_not_a_regular_file_and_has_no_o_direct_descriptor() {
    for op in ["read", "write"] {
        let (v, _) = check_json(
            Path::new("/dev/null"),
            &["--op", op, "--offset", "1", "--size", "3"],
            &[],
        );
        assert_eq!(v["file"]["kind"], "other", "{v}");
        assert_eq!(v["file"]["o_direct"], false, "{v}");
        assert_eq!(
            reasons(&v, "fastpath"),
            with(
                runtime_reasons(&v),
                &["no_o_direct_fd", "not_regular_file_or_block_device"]
            ),
            "{op}: {v}"
        );
    }
}

/// procfs files are regular files to `statx`, on a filesystem that does no direct I/O: the
/// fastpath gives `no_o_direct_fd` and, since the type rule passes, the filesystem rule's
/// `unsupported_file_system`.
#[test]
fn a_procfs_file_has_no_o_direct_descriptor_and_an_unsupported_file_system() {
    let path = Path::new("/proc/self/status");
    let (v, _) = check_json(path, &[], &[]);
    assert_eq!(v["file"]["kind"], "regular", "{v}");
    assert_eq!(v["file"]["filesystem"], "proc", "{v}");
    assert_eq!(v["file"]["o_direct"], false, "{v}");
    assert_eq!(
        reasons(&v, "fastpath"),
        with(
            runtime_reasons(&v),
            &["no_o_direct_fd", "unsupported_file_system"]
        ),
        "{v}"
    );
    // With unsupported filesystems allowed only the descriptor's reason is left.
    let (v, _) = check_json(path, &[], &[("HIPFILE_UNSUPPORTED_FILE_SYSTEMS", "true")]);
    assert_eq!(
        reasons(&v, "fastpath"),
        with(runtime_reasons(&v), &["no_o_direct_fd"]),
        "{v}"
    );
}

fn assert_unchanged_by_write_check(path: &Path) {
    let before = std::fs::read(path).unwrap();
    let mtime = std::fs::metadata(path).unwrap().modified().unwrap();
    let (v, run) = check_json(path, &["--op", "write", "--size", "4K"], &[]);
    assert_eq!(v["request"]["op"], "write");
    assert_eq!(run.status, expected_status(&v));
    assert_eq!(
        std::fs::read(path).unwrap(),
        before,
        "the file's bytes changed"
    );
    assert_eq!(
        std::fs::metadata(path).unwrap().modified().unwrap(),
        mtime,
        "the file's mtime changed"
    );
}

#[test]
fn write_checks_change_nothing_and_create_nothing() {
    let dir = temp_dir();
    let path = data_file(dir.path(), "data", 3 * MIB + 17);
    assert_unchanged_by_write_check(&path);

    let absent = dir.path().join("absent");
    let run = hipfile(
        &[
            OsStr::new("check"),
            OsStr::new("--op"),
            OsStr::new("write"),
            absent.as_os_str(),
        ],
        &[],
    );
    assert_eq!(run.status, 2);
    assert!(!absent.exists(), "a write check created the file");
}

#[test]
fn several_paths_one_line_each_in_order_and_a_missing_one_is_named() {
    let dir = temp_dir();
    let a = data_file(dir.path(), "a", 4096);
    let b = data_file(dir.path(), "b", 8192);
    let missing = dir.path().join("missing");
    let args = [
        OsStr::new("check"),
        OsStr::new("--json"),
        a.as_os_str(),
        missing.as_os_str(),
        dir.path().as_os_str(),
        b.as_os_str(),
    ];
    let run = hipfile(&args, &[]);
    let lines = run.lines();
    let paths: Vec<&str> = lines.iter().map(|v| v["path"].as_str().unwrap()).collect();
    assert_eq!(
        paths,
        [
            a.to_str().unwrap(),
            dir.path().to_str().unwrap(),
            b.to_str().unwrap()
        ]
    );
    for v in &lines {
        assert_shape(v);
    }
    assert_eq!(run.status, 2);
    assert!(
        run.stderr.contains(missing.to_str().unwrap()),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("No such file or directory"),
        "{}",
        run.stderr
    );

    let run = hipfile(
        &[
            OsStr::new("check"),
            OsStr::new("--json"),
            OsStr::new("--runtime=emulated"),
            a.as_os_str(),
            b.as_os_str(),
        ],
        &[],
    );
    assert_eq!(run.lines().len(), 2);
    assert_eq!(run.status, 0, "{}", run.stderr);
}

#[test]
fn a_path_that_cannot_be_opened_is_reported() {
    let dir = temp_dir();
    let missing = dir.path().join("nope");
    let run = hipfile(&[OsStr::new("check"), missing.as_os_str()], &[]);
    assert_eq!(run.status, 2);
    assert!(
        run.stderr.contains(missing.to_str().unwrap()) && run.stderr.contains("cannot open"),
        "{}",
        run.stderr
    );
    assert_eq!(run.stdout, "");
}

#[test]
fn json_strings_are_escaped() {
    let dir = temp_dir();
    let path = data_file(dir.path(), "we\"ird\\name\twith\nnewline", 4096);
    let (v, _) = check_json(&path, &[], &[]);
    assert_eq!(v["path"], path.to_str().unwrap());
}

#[test]
fn human_output_reports_the_fallback_knobs() {
    let dir = temp_dir();
    let path = data_file(dir.path(), "data", MIB);
    let run = hipfile(
        &[
            OsStr::new("check"),
            OsStr::new("--runtime=emulated"),
            path.as_os_str(),
        ],
        &[
            ("HIPFILE_IO_THREADS", "3"),
            ("HIPFILE_TASK_SIZE", "2MiB"),
            ("HIPFILE_COLD_DIRECT_READS", "0"),
        ],
    );
    assert_eq!(run.status, 0, "{}", run.stderr);
    let header = run.stdout.lines().next().unwrap_or_default();
    assert!(
        header.contains("io_threads=3")
            && header.contains("task_size=2097152")
            && header.contains("cold_direct_reads=false"),
        "{header}"
    );
    assert!(
        header.contains("staging_memory=") && header.contains("small_io_threshold="),
        "{header}"
    );
}

#[test]
fn human_output_shows_reasons_and_the_selection() {
    let dir = temp_dir();
    let path = data_file(dir.path(), "data", MIB);
    // The emulated runtime has a device and no error to show after the table.
    let run = hipfile(
        &[
            OsStr::new("check"),
            OsStr::new("--runtime=emulated"),
            path.as_os_str(),
        ],
        &[("HIPFILE_FORCE_COMPAT_MODE", "1")],
    );
    assert_eq!(run.status, 0, "{}", run.stderr);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", run.stdout);
    assert!(
        lines[0].starts_with("runtime: ") && lines[0].contains("force_compat_mode=true"),
        "{}",
        run.stdout
    );
    assert!(
        lines[1].starts_with("PATH") && lines[1].contains("SELECTED"),
        "{}",
        run.stdout
    );
    assert!(
        lines[2].starts_with(path.to_str().unwrap()),
        "{}",
        run.stdout
    );
    assert!(
        lines[2].contains("force_compat_mode") && lines[2].ends_with("fallback"),
        "{}",
        run.stdout
    );

    let run = hipfile(
        &[
            OsStr::new("check"),
            OsStr::new("--runtime=emulated"),
            OsStr::new("--memory"),
            OsStr::new("host"),
            path.as_os_str(),
        ],
        &[],
    );
    assert_eq!(run.status, 1);
    assert!(
        run.stdout.contains("buffer_not_device_memory") && run.stdout.trim_end().ends_with("none"),
        "{}",
        run.stdout
    );
}

/// What makes `check` find no runtime at all: only a library that does not exist is tried.
const NO_RUNTIME: [(&str, &str); 2] = [
    ("HIPFILE_HIP_LIBRARY", "/nonexistent/libamdhip64.so"),
    ("HIP_PLATFORM", "amd"),
];

/// Without a runtime nothing can be served, whatever the backends' rules say: the driver
/// cannot open, and the fallback too copies through the runtime. The verdicts stay those of
/// the file and the request; the selection is none, `blocked` says why, the status is 1.
#[test]
fn without_a_runtime_nothing_is_served_and_the_reason_is_given() {
    let dir = temp_dir();
    let a = data_file(dir.path(), "a", MIB);
    let b = data_file(dir.path(), "b", MIB);
    let run = hipfile(
        &[
            OsStr::new("check"),
            OsStr::new("--json"),
            a.as_os_str(),
            b.as_os_str(),
        ],
        &NO_RUNTIME,
    );
    let lines = run.lines();
    assert_eq!(lines.len(), 2, "{}", run.stdout);
    for v in &lines {
        assert_shape(v);
        assert_eq!(v["runtime"]["platform"], "none", "{v}");
        assert!(
            reasons(v, "fastpath").contains(&"runtime_lacks_amd_file_io".to_owned()),
            "{v}"
        );
        assert_eq!(v["fallback"]["score"], 1, "{v}");
        assert_eq!(chosen_by_score(v), "fallback", "{v}");
        assert_eq!(v["selected"], Value::Null, "{v}");
        assert_eq!(v["blocked"]["code"], "no_gpu_runtime", "{v}");
        let message = v["blocked"]["message"].as_str().unwrap();
        assert!(message.contains("no GPU runtime"), "{message}");
    }
    assert_eq!(run.status, 1, "{}", run.stderr);

    let run = hipfile(&[OsStr::new("check"), a.as_os_str()], &NO_RUNTIME);
    assert_eq!(run.status, 1);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(
        lines[2].ends_with("none (no_gpu_runtime)"),
        "{}",
        run.stdout
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("nothing would be served: no GPU runtime")),
        "{}",
        run.stdout
    );
}

/// A runtime that loads but sees no device (here the emulated one with
/// `HIPFILE_EMU_DEVICES=0`) serves nothing either; the verdicts are those it gives with a
/// device.
#[test]
fn without_a_device_nothing_is_served_and_the_reason_is_given() {
    let dir = temp_dir();
    let path = data_file(dir.path(), "data", MIB);
    let emulated = ["--runtime", "emulated"];
    let (with_device, _) = check_json(&path, &emulated, &[]);
    let (v, run) = check_json(&path, &emulated, &[("HIPFILE_EMU_DEVICES", "0")]);
    assert_eq!(v["runtime"]["platform"], "emulated", "{v}");
    assert_eq!(v["runtime"]["devices"], 0, "{v}");
    let error = v["runtime"]["error"].as_str().unwrap();
    assert!(error.contains("hipErrorNoDevice"), "{error}");
    assert_eq!(v["fastpath"], with_device["fastpath"]);
    assert_eq!(v["fallback"], with_device["fallback"]);
    assert!(!chosen_by_score(&v).is_null(), "{v}");
    assert_eq!(v["selected"], Value::Null, "{v}");
    assert_eq!(v["blocked"]["code"], "no_gpu_device", "{v}");
    assert!(
        v["blocked"]["message"]
            .as_str()
            .unwrap()
            .contains("no usable GPU device"),
        "{v}"
    );
    assert_eq!(run.status, 1, "{}", run.stderr);
    assert_eq!(with_device["blocked"], Value::Null);

    let run = hipfile(
        &[
            OsStr::new("check"),
            OsStr::new("--runtime=emulated"),
            path.as_os_str(),
        ],
        &[("HIPFILE_EMU_DEVICES", "0")],
    );
    assert_eq!(run.status, 1);
    assert!(
        run.stdout
            .lines()
            .nth(2)
            .unwrap()
            .ends_with("none (no_gpu_device)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .lines()
            .any(|l| l.starts_with("nothing would be served: the GPU runtime reports no usable")),
        "{}",
        run.stdout
    );
}

/// A malformed `HIPFILE_EMU_FAULT` makes the emulated runtime refuse to initialise: `check`
/// serves nothing and shows the runtime's error, which names the variable and the entry.
#[test]
fn a_malformed_emulated_fault_list_serves_nothing_and_says_why() {
    let dir = temp_dir();
    let path = data_file(dir.path(), "data", MIB);
    let (v, run) = check_json(
        &path,
        &["--runtime", "emulated"],
        &[("HIPFILE_EMU_FAULT", "nonsense")],
    );
    assert_eq!(v["selected"], Value::Null, "{v}");
    assert_eq!(v["blocked"]["code"], "no_gpu_device", "{v}");
    let error = v["runtime"]["error"].as_str().unwrap();
    for needle in ["HIPFILE_EMU_FAULT", "`nonsense`", "op:ERRNO[:N]"] {
        assert!(error.contains(needle), "{needle:?} not in {error:?}");
    }
    assert_eq!(run.status, 1, "{}", run.stderr);
}

/// The loader's message is several lines long: the table shows it after the rows, each of its
/// lines on a line of its own, indented, and never inside the header or a row; the JSON keeps
/// it as one string.
#[test]
fn the_runtime_error_is_printed_on_lines_of_its_own_after_the_table() {
    let dir = temp_dir();
    let path = data_file(dir.path(), "data", 4096);
    let (v, _) = check_json(&path, &[], &NO_RUNTIME);
    let error = v["runtime"]["error"].as_str().unwrap().to_owned();
    let error_lines: Vec<&str> = error.lines().collect();
    assert!(
        error_lines.len() >= 2,
        "a message of several lines: {error:?}"
    );
    assert!(error.contains("/nonexistent/libamdhip64.so"), "{error}");

    let run = hipfile(&[OsStr::new("check"), path.as_os_str()], &NO_RUNTIME);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert!(lines[0].starts_with("runtime: none"), "{}", run.stdout);
    assert!(lines[1].starts_with("PATH"), "{}", run.stdout);
    assert!(
        lines[2].starts_with(path.to_str().unwrap()),
        "{}",
        run.stdout
    );
    for line in &lines[..3] {
        assert!(!line.contains("nonexistent"), "{line}");
    }
    assert!(!run.stdout.contains("\\n"), "{}", run.stdout);
    let at = lines
        .iter()
        .position(|l| *l == "runtime error:")
        .unwrap_or_else(|| panic!("no runtime error section:\n{}", run.stdout));
    assert!(at > 2, "{}", run.stdout);
    let shown: Vec<String> = lines[at + 1..at + 1 + error_lines.len()]
        .iter()
        .map(|l| l.to_string())
        .collect();
    let expected: Vec<String> = error_lines.iter().map(|l| format!("    {l}")).collect();
    assert_eq!(shown, expected, "{}", run.stdout);
}

#[test]
fn bad_arguments_exit_2_and_say_what_was_wrong() {
    let dir = temp_dir();
    let path = data_file(dir.path(), "data", 4096);
    let p = path.to_str().unwrap();
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["check", "--frobnicate", p],
            &["--frobnicate", "hipfile check --help"],
        ),
        (&["check", "--size", "abc", p], &["--size", "abc"]),
        (
            &["check", "--memory", "gpu", p],
            &["--memory", "gpu", "device, host, managed"],
        ),
        (
            &["check", "--op", "copy", p],
            &["--op", "copy", "read, write"],
        ),
        (
            &["check", p, "--offset"],
            &["--offset", "value is required"],
        ),
        (&["check", "--buffer-align", "0", p], &["--buffer-align"]),
        (
            &["check", "--runtime", "cuda", p],
            &["--runtime", "cuda", "auto, emulated"],
        ),
        (
            &["check", p, "--runtime"],
            &["--runtime", "value is required"],
        ),
        (&["check"], &["PATH"]),
        (&["check", "--json"], &["PATH"]),
        (&[], &["command"]),
        (&["frobnicate"], &["frobnicate"]),
        (
            &["check", "--offset", "9223372036854775808", p],
            &["9223372036854775808", "overflows"],
        ),
        (
            &["check", "--offset", "9223372036854775807", p],
            &["overflows"],
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
    }
}

#[test]
fn sizes_accept_binary_suffixes() {
    let dir = temp_dir();
    let path = data_file(dir.path(), "data", 4096);
    let (v, _) = check_json(
        &path,
        &["--size", "2MiB", "--offset=4K", "--buffer-offset", "1G"],
        &[],
    );
    assert_eq!(v["request"]["size"], 2 * MIB);
    assert_eq!(v["request"]["file_offset"], 4096);
    assert_eq!(v["request"]["buffer_offset"], 1 << 30);
}

#[test]
fn help_and_version() {
    let run = hipfile(&["--help"], &[]);
    assert_eq!(run.status, 0);
    assert!(run.stdout.contains("check"), "{}", run.stdout);
    assert!(run.stdout.contains("cp"), "{}", run.stdout);
    let run = hipfile(&["check", "--help"], &[]);
    assert_eq!(run.status, 0);
    for option in [
        "--json",
        "--op",
        "--size",
        "--offset",
        "--buffer-offset",
        "--buffer-align",
        "--memory",
        "--runtime",
        "emulated",
        "KiB",
        "MiB",
        "GiB",
        "1024",
    ] {
        assert!(run.stdout.contains(option), "check --help lacks {option}");
    }
    // clap's help command shows a command's whole help, as --help does.
    let run = hipfile(&["help", "check"], &[]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_eq!(run.stdout, hipfile(&["check", "--help"], &[]).stdout);
    assert!(
        run.stdout.contains("Usage: hipfile check"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("For each PATH"), "{}", run.stdout);
    let run = hipfile(&["--version"], &[]);
    assert_eq!(run.status, 0);
    assert_eq!(
        run.stdout.trim(),
        format!("hipfile {}", env!("CARGO_PKG_VERSION"))
    );
}
