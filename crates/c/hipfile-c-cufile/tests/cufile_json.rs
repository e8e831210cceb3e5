//! `cufile.json` through the library's behaviour: each test writes a real file, runs
//! `tests/c/config.c` (linked with `libcufile.so.0`, on the emulated runtime) with
//! `CUFILE_ENV_PATH_JSON` naming it, or with `HIPFILE_CUFILE_SYSTEM_JSON` standing in for
//! `/etc/cufile.json` (so no test depends on the machine's `/etc`), and reads what the
//! program saw: parameters before and after the open, the open's status, the properties, a
//! write's return; and what the library wrote to stderr.
//!
//! Skips when there is no `cc` or the emulated runtime was not built.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile_testfs::{Skip, TempDir, emulated_runtime, has_command, require};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// NVIDIA's default file in shape: `//` comments everywhere, a `/* */` one, keys that map
/// onto hipfile's settings with values other than the defaults, and many that do not apply.
const NVIDIA_STYLE: &str = r#"{
    // NOTE : Application can override custom configuration via export CUFILE_ENV_PATH_JSON=<filepath>
    "logging": {
        // log directory, if not enabled will create log file under current working directory
        //"dir": "/home/<xxxx>",
        // NOTICE|ERROR|WARN|INFO|DEBUG|TRACE (in decreasing order of severity)
        "level": "info"
    },
    "profile": {
        "nvtx": false,
        "cufile_stats": 1
    },
    "execution" : {
        "max_io_queue_depth": 64,
        "max_io_threads" : 3,
        "parallel_io" : false,
        "min_io_threshold_size_kb" : 512,
        "max_request_parallelism" : 4
    },
    "properties": {
        // max IO chunk size (parameter should be multiples of 64K) used by cuFileRead/Write internally per IO request
        "max_direct_io_size_kb" : 8192,
        /* device memory size for reserving bounce buffers
           for the entire GPU */
        "max_device_cache_size_kb" : 65536,
        "max_device_pinned_mem_size_kb" : 33554432,
        "use_poll_mode" : true,
        "poll_mode_max_size_kb": 16,
        "allow_compat_mode": true,
        "gds_rdma_write_support": true,
        "io_batchsize": 128,
        "io_priority": "default",
        "rdma_dev_addr_list": [ ],
        "rdma_load_balancing_policy": "RoundRobin",
        "rdma_dynamic_routing": false,
        "rdma_dynamic_routing_order": [ "GPU_MEM_NVLINKS", "GPU_MEM", "SYS_MEM", "P2P" ]
    },
    "fs": {
        "generic": {
            // for unaligned writes, setting it to true will, cuFileWrite use posix write internally
            "posix_unaligned_writes" : false
        },
        "lustre": {
            "posix_gds_min_kb" : 0
            // "mount_table" : { "/lustre/ai200_01/client" : { "rdma_dev_addr_list" : [] } }
        },
        "weka": { "rdma_write_support" : false }
    },
    "denylist": {
        "drivers":  [ ],
        "devices": [ ],
        "mounts": [ ],
        "filesystems": [ ]
    },
    "miscellaneous": {
        // enable only for enforcing strict checks at API level for debugging
        "api_check_aggressive": false
    }
}
"#;

/// What the program printed and wrote to stderr.
struct Run {
    values: BTreeMap<String, String>,
    stderr: String,
}

impl Run {
    fn get(&self, name: &str) -> &str {
        self.values
            .get(name)
            .unwrap_or_else(|| panic!("{name} not printed; stderr:\n{}", self.stderr))
    }
}

/// A scratch directory with the program built in it.
struct Program {
    dir: TempDir,
    exe: PathBuf,
    emu: PathBuf,
}

fn program() -> Result<Program, Skip> {
    has_command("cc")?;
    let emu = emulated_runtime()?;
    let lib = hipfile_testfs::cdylib("hipfile-c-cufile", "libcufile.so")?;
    let dir = TempDir::new("cufile-json");
    let libdir = dir.path().join("lib");
    let hipdir = dir.path().join("hip");
    for d in [&libdir, &hipdir] {
        std::fs::create_dir(d).unwrap();
    }
    for n in ["libcufile.so", "libcufile.so.0"] {
        std::os::unix::fs::symlink(&lib, libdir.join(n)).unwrap();
    }
    for n in ["libamdhip64.so", "libamdhip64.so.7"] {
        std::os::unix::fs::symlink(&emu, hipdir.join(n)).unwrap();
    }
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = dir.path().join("config");
    let built = Command::new("cc")
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-D_GNU_SOURCE",
            "-I",
        ])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c/config.c"))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-Wl,-rpath,{}", hipdir.display()))
        .arg(&emu)
        .arg(format!("-L{}", libdir.display()))
        .arg(format!("-Wl,-rpath,{}", libdir.display()))
        .arg("-lcufile")
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    Ok(Program { dir, exe, emu })
}

impl Program {
    /// Writes `text` to a file of the scratch directory; its path.
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Runs the program with `env` (`CUFILE_ENV_PATH_JSON` unset and the system-wide file
    /// absent unless `env` says otherwise) and `args` after its directory.
    fn run(&self, env: &[(&str, &Path)], args: &[&str]) -> Run {
        let work = TempDir::new("cufile-json-work");
        let mut cmd = Command::new(&self.exe);
        cmd.arg(work.path())
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HIPFILE_HIP_LIBRARY", &self.emu)
            .env(
                "HIPFILE_CUFILE_SYSTEM_JSON",
                self.dir.path().join("absent.json"),
            );
        for (k, v) in env {
            cmd.env(k, v);
        }
        let ran = cmd.output().unwrap();
        let stdout = String::from_utf8_lossy(&ran.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&ran.stderr).into_owned();
        assert!(ran.status.success(), "{}:\n{stdout}{stderr}", ran.status);
        let values = stdout
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Run { values, stderr }
    }
}

#[test]
fn nvidias_default_style_file_with_comments_configures_the_library() {
    let p = require!(program());
    let json = p.file("cufile.json", NVIDIA_STYLE);
    let r = p.run(&[("CUFILE_ENV_PATH_JSON", &json)], &[]);
    assert_eq!(r.get("open"), "0", "{}", r.stderr);
    for when in ["before", "open"] {
        let v = |n: &str| r.get(&format!("{when}.{n}")).to_string();
        assert_eq!(v("max_direct_io_size_kb"), "8192");
        assert_eq!(v("max_device_cache_size_kb"), "65536");
        // parallel_io false: one worker, whatever max_io_threads says.
        assert_eq!(v("max_io_threads"), "1");
        assert_eq!(v("parallel_io"), "0");
        assert_eq!(v("max_io_queue_depth"), "64");
        assert_eq!(v("min_io_threshold_size_kb"), "512");
        assert_eq!(v("poll_mode_max_size_kb"), "16");
        assert_eq!(v("cufile_stats"), "1");
        assert_eq!(v("use_poll_mode"), "1");
        assert_eq!(v("allow_compat_mode"), "1");
        assert_eq!(v("logging_level"), "INFO");
    }
    assert_eq!(r.get("props.max_direct_io_size"), "8192");
    assert_eq!(r.get("props.max_device_cache_size"), "65536");
    assert_eq!(r.get("write"), "4096");
    // One short line counts the keys that do not apply and names the first few, without
    // their values.
    let warnings: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("do not apply"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", r.stderr);
    let line = warnings[0];
    assert!(
        line.starts_with(&format!(
            "hipfile: warning: {}: 13 keys do not apply to hipfile and are ignored: \
             properties.gds_rdma_write_support, properties.io_priority, \
             properties.rdma_dev_addr_list and 10 more",
            json.display()
        )),
        "{line}"
    );
    for value in ["(true)", "(false)", "([])", "RoundRobin", "GPU_MEM_NVLINKS"] {
        assert!(!line.contains(value), "{value}: {line}");
    }
    // Keys that apply, and a fixed value confirmed, are not counted.
    for key in [
        "max_direct_io_size_kb",
        "io_batchsize",
        "api_check_aggressive",
        "nvtx",
    ] {
        assert!(!line.contains(key), "{key}: {line}");
    }
}

#[test]
fn the_environment_wins_over_the_file_and_the_parameter_calls_over_both() {
    let p = require!(program());
    let json = p.file(
        "cufile.json",
        r#"{ "properties": { "max_direct_io_size_kb": 8192, "allow_compat_mode": false } }"#,
    );
    let env_task = Path::new("64K");
    let r = p.run(
        &[
            ("CUFILE_ENV_PATH_JSON", &json),
            ("HIPFILE_TASK_SIZE", env_task),
        ],
        &[],
    );
    assert_eq!(r.get("before.max_direct_io_size_kb"), "64");
    assert_eq!(r.get("props.max_direct_io_size"), "64");
    assert_eq!(r.get("open.allow_compat_mode"), "0");
    let r = p.run(
        &[
            ("CUFILE_ENV_PATH_JSON", &json),
            ("HIPFILE_TASK_SIZE", env_task),
        ],
        &["SET"],
    );
    assert_eq!(r.get("before.max_direct_io_size_kb"), "128");
    assert_eq!(r.get("props.max_direct_io_size"), "128");
    assert_eq!(r.get("open.allow_compat_mode"), "1");
    assert_eq!(r.get("props.allow_compat_mode"), "1");
}

#[test]
fn allow_compat_mode_false_in_the_file_refuses_fallback_io() {
    let p = require!(program());
    let off = p.file(
        "off.json",
        "{ \"properties\": { // no compatibility mode\n \"allow_compat_mode\": false } }",
    );
    // The fastpath is kept out, so only the fallback could serve the write.
    let force = Path::new("true");
    let r = p.run(
        &[
            ("CUFILE_ENV_PATH_JSON", &off),
            ("HIPFILE_FORCE_COMPAT_MODE", force),
        ],
        &[],
    );
    assert_eq!(r.get("open"), "0");
    assert_eq!(r.get("props.allow_compat_mode"), "0");
    assert_eq!(r.get("write"), "-5008", "{}", r.stderr);
    // The same file with the variable saying otherwise: the variable wins, the write is
    // served.
    let r = p.run(
        &[
            ("CUFILE_ENV_PATH_JSON", &off),
            ("HIPFILE_FORCE_COMPAT_MODE", force),
            ("HIPFILE_ALLOW_COMPAT_MODE", Path::new("true")),
        ],
        &[],
    );
    assert_eq!(r.get("write"), "4096", "{}", r.stderr);
}

#[test]
fn a_malformed_file_fails_every_open_and_says_where() {
    let p = require!(program());
    // A trailing comma on line 4: NVIDIA's reader refuses it too.
    let bad = p.file(
        "bad.json",
        "{\n  // comment\n  \"properties\": {\n    \"allow_compat_mode\": true,\n  }\n}\n",
    );
    let r = p.run(&[("CUFILE_ENV_PATH_JSON", &bad)], &[]);
    assert_eq!(r.get("open"), "-22", "{}", r.stderr);
    assert_eq!(r.get("register"), "-22");
    let message = format!("{}:5:", bad.display());
    assert!(r.stderr.contains(&message), "{message}: {}", r.stderr);
    assert!(r.stderr.contains("not valid JSON"), "{}", r.stderr);
    assert_eq!(
        r.stderr.matches("hipfile: error:").count(),
        1,
        "{}",
        r.stderr
    );

    // A value of the wrong type, and one out of bounds: the key, the line, what it must be.
    let typed = p.file(
        "typed.json",
        "{\n \"properties\": {\n  \"max_direct_io_size_kb\": \"big\"\n }\n}\n",
    );
    let r = p.run(&[("CUFILE_ENV_PATH_JSON", &typed)], &[]);
    assert_eq!(r.get("open"), "-22");
    let message = format!(
        "{}:3: properties.max_direct_io_size_kb must be a non-negative integer",
        typed.display()
    );
    assert!(r.stderr.contains(&message), "{}", r.stderr);
    let bounds = p.file(
        "bounds.json",
        r#"{ "properties": { "max_direct_io_size_kb": 2 } }"#,
    );
    let r = p.run(&[("CUFILE_ENV_PATH_JSON", &bounds)], &[]);
    assert_eq!(r.get("open"), "-22");
    assert!(
        r.stderr
            .contains("properties.max_direct_io_size_kb: 2 (4 to 1048576) is outside the bounds"),
        "{}",
        r.stderr
    );
}

/// Builds `tests/c/write_marks.c`, which marks where each `write(2)` to stderr begins; its
/// path, to preload.
fn write_marks(p: &Program) -> PathBuf {
    let lib = p.dir.path().join("libwrite_marks.so");
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&lib)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/write_marks.c"))
        .arg("-ldl")
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    lib
}

#[test]
fn each_message_is_one_write_so_that_processes_do_not_split_its_line() {
    let p = require!(program());
    let marks = write_marks(&p);
    let good = p.file("cufile.json", NVIDIA_STYLE);
    let bad = p.file(
        "bad.json",
        "{ \"properties\": { \"allow_compat_mode\": true, } }",
    );
    let missing = p.dir.path().join("missing.json");
    for json in [&good, &bad, &missing] {
        let r = p.run(
            &[("CUFILE_ENV_PATH_JSON", json), ("LD_PRELOAD", &marks)],
            &[],
        );
        let messages: Vec<&str> = r
            .stderr
            .split("<w>")
            .filter(|w| w.contains("hipfile"))
            .collect();
        assert_eq!(messages.len(), 1, "{}", r.stderr);
        let m = messages[0];
        assert!(m.starts_with("hipfile: "), "{}", r.stderr);
        assert!(m.ends_with('\n'), "{}", r.stderr);
        assert_eq!(m.matches('\n').count(), 1, "{}", r.stderr);
    }
}

#[test]
fn a_named_file_that_is_missing_leaves_the_defaults_with_a_warning() {
    let p = require!(program());
    let missing = p.dir.path().join("missing.json");
    let r = p.run(&[("CUFILE_ENV_PATH_JSON", &missing)], &[]);
    assert_eq!(r.get("open"), "0");
    assert_eq!(r.get("props.max_direct_io_size"), "4096");
    assert_eq!(r.get("write"), "4096");
    assert!(
        r.stderr.contains(&format!(
            "CUFILE_ENV_PATH_JSON names {}, which cannot be read",
            missing.display()
        )),
        "{}",
        r.stderr
    );
    // No file at all, none named: the defaults, silently.
    let r = p.run(&[], &[]);
    assert_eq!(r.get("props.max_direct_io_size"), "4096");
    assert!(!r.stderr.contains("hipfile:"), "{}", r.stderr);
}

#[test]
fn the_system_wide_file_is_read_when_none_is_named() {
    let p = require!(program());
    let system = p.file(
        "system.json",
        r#"{ "properties": { "posix_pool_slab_size_kb": [4, 1024], "posix_pool_slab_count": [16, 2] } }"#,
    );
    let r = p.run(&[("HIPFILE_CUFILE_SYSTEM_JSON", &system)], &[]);
    assert_eq!(r.get("before.posix_slabs"), "4:16,1024:2");
    // Their total, 4 × 16 + 1024 × 2 KiB, bounds the staging pool.
    assert_eq!(r.get("props.max_device_cache_size"), "2112");
    assert_eq!(r.get("write"), "4096");
    // A named file wins over it.
    let named = p.file("named.json", r#"{ "logging": { "level": "DEBUG" } }"#);
    let r = p.run(
        &[
            ("HIPFILE_CUFILE_SYSTEM_JSON", &system),
            ("CUFILE_ENV_PATH_JSON", &named),
        ],
        &[],
    );
    assert_eq!(r.get("open.logging_level"), "DEBUG");
    assert_ne!(r.get("before.posix_slabs"), "4:16,1024:2");
}
