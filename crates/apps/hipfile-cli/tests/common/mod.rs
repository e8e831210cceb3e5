//! What the command-line tests share: running the built `hipfile` with a clean
//! configuration and a deadline, `hipfile check --json` with its output's exact shape, and
//! data files.

// Each test binary uses a part of this module.
#![allow(dead_code)]

use hipfile_testfs::TempDir;
use serde_json::Value;
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What every run starts without: the configuration, and the emulated runtime's.
pub const CONFIG_VARS: [&str; 7] = [
    "HIPFILE_ALLOW_COMPAT_MODE",
    "HIPFILE_FORCE_COMPAT_MODE",
    "HIPFILE_UNSUPPORTED_FILE_SYSTEMS",
    "HIPFILE_STATS_LEVEL",
    "HIPFILE_EMU_FAULT",
    "HIPFILE_EMU_DEVICES",
    "HIPFILE_EMU_ROCM_VERSION",
];

/// No run may take this long: a FIFO that blocked the open would hang forever.
pub const DEADLINE: Duration = Duration::from_secs(60);

pub struct Run {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
            .collect()
    }

    pub fn one(&self) -> Value {
        let mut lines = self.lines();
        assert_eq!(
            lines.len(),
            1,
            "stdout: {}\nstderr: {}",
            self.stdout,
            self.stderr
        );
        lines.remove(0)
    }
}

/// Runs `hipfile` with `args`, with only the variables of [`CONFIG_VARS`] in `env` set.
pub fn hipfile<S: AsRef<OsStr>>(args: &[S], env: &[(&str, &str)]) -> Run {
    run_program(Path::new(env!("CARGO_BIN_EXE_hipfile")), args, env)
}

/// Runs `hipfile` as [`hipfile`] does, in the directory `cwd`.
pub fn hipfile_in<S: AsRef<OsStr>>(cwd: &Path, args: &[S], env: &[(&str, &str)]) -> Run {
    run_program_in(
        Path::new(env!("CARGO_BIN_EXE_hipfile")),
        args,
        env,
        Some(cwd),
    )
}

/// Runs `program` (a copy of `hipfile`, say) as [`hipfile`] runs the built one.
pub fn run_program<S: AsRef<OsStr>>(program: &Path, args: &[S], env: &[(&str, &str)]) -> Run {
    run_program_in(program, args, env, None)
}

/// [`run_program`] in the directory `cwd`, or in this process's.
fn run_program_in<S: AsRef<OsStr>>(
    program: &Path,
    args: &[S],
    env: &[(&str, &str)],
    cwd: Option<&Path>,
) -> Run {
    let mut cmd = Command::new(program);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in CONFIG_VARS {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = spawn(&mut cmd);
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                p.read_to_string(&mut text).expect("output is UTF-8");
            }
            text
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for hipfile") {
            break s;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "hipfile {:?} did not finish within {DEADLINE:?}",
                cmd.get_args().collect::<Vec<_>>()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Run {
        status: status.code().expect("hipfile exits normally"),
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    }
}

/// Starts `cmd`. A program copied just now can be busy for a moment: another test thread may
/// have forked while the copy was open for writing, and its child holds the descriptor until
/// it executes.
fn spawn(cmd: &mut Command) -> std::process::Child {
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other.expect("the hipfile binary runs"),
        }
    }
}

/// `hipfile check --json EXTRA... PATH` with `env`.
pub fn check_json(path: &Path, extra: &[&str], env: &[(&str, &str)]) -> (Value, Run) {
    let mut args: Vec<&OsStr> = vec![OsStr::new("check"), OsStr::new("--json")];
    args.extend(extra.iter().map(OsStr::new));
    args.push(path.as_os_str());
    let run = hipfile(&args, env);
    let v = run.one();
    assert_shape(&v);
    assert_eq!(v["path"], path.to_str().unwrap());
    (v, run)
}

pub fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    k.sort_unstable();
    k
}

/// The exact key set and the types of every value.
pub fn assert_shape(v: &Value) {
    assert_eq!(
        keys(v),
        [
            "blocked", "config", "fallback", "fastpath", "file", "path", "request", "runtime",
            "selected"
        ],
        "{v}"
    );
    let file = &v["file"];
    assert_eq!(
        keys(file),
        [
            "dio_mem_align",
            "dio_offset_align",
            "ext4_journal",
            "filesystem",
            "kind",
            "o_direct",
            "unusable"
        ]
    );
    assert!(
        file["unusable"].is_null()
            || [
                "directory",
                "fifo",
                "socket",
                "symlink",
                "o_path_descriptor"
            ]
            .contains(&file["unusable"].as_str().unwrap()),
        "{v}"
    );
    assert!(
        ["regular", "block", "other"].contains(&file["kind"].as_str().unwrap()),
        "{v}"
    );
    assert!(
        file["filesystem"].is_string() || file["filesystem"].is_null(),
        "{v}"
    );
    assert!(
        file["ext4_journal"].is_null()
            || ["ordered", "journal", "writeback", "unknown"]
                .contains(&file["ext4_journal"].as_str().unwrap())
    );
    assert!(
        file["o_direct"].is_boolean()
            && file["dio_mem_align"].is_u64()
            && file["dio_offset_align"].is_u64()
    );
    assert_eq!(
        keys(&v["config"]),
        [
            "allow_compat_mode",
            "force_compat_mode",
            "unsupported_file_systems"
        ]
    );
    assert!(
        v["config"]
            .as_object()
            .unwrap()
            .values()
            .all(Value::is_boolean),
        "{v}"
    );
    let rt = &v["runtime"];
    assert_eq!(
        keys(rt),
        [
            "amd_file_io",
            "devices",
            "error",
            "library",
            "platform",
            "version"
        ]
    );
    assert!(
        ["amd", "emulated", "nvidia", "none"].contains(&rt["platform"].as_str().unwrap()),
        "{v}"
    );
    assert!(rt["amd_file_io"].is_boolean());
    assert!(rt["devices"].is_u64(), "{v}");
    for k in ["library", "version", "error"] {
        assert!(rt[k].is_string() || rt[k].is_null(), "{v}");
    }
    let q = &v["request"];
    assert_eq!(
        keys(q),
        ["buffer_offset", "file_offset", "memory", "op", "size"]
    );
    assert!(["read", "write"].contains(&q["op"].as_str().unwrap()));
    assert!(["device", "host", "managed"].contains(&q["memory"].as_str().unwrap()));
    for (backend, accept) in [("fastpath", 100), ("fallback", 1)] {
        let b = &v[backend];
        assert_eq!(keys(b), ["rejected_because", "score"], "{v}");
        let reasons = b["rejected_because"].as_array().unwrap();
        let score = b["score"].as_i64().unwrap();
        assert_eq!(score, if reasons.is_empty() { accept } else { -1 }, "{v}");
    }
    let selected = &v["selected"];
    assert!(
        selected.is_null() || ["fastpath", "fallback"].contains(&selected.as_str().unwrap()),
        "{v}"
    );
    let blocked = &v["blocked"];
    if !blocked.is_null() {
        assert_eq!(keys(blocked), ["code", "message"], "{v}");
        assert!(
            [
                "no_gpu_runtime",
                "no_gpu_device",
                "unusable_file",
                "no_file_offsets"
            ]
            .contains(&blocked["code"].as_str().unwrap()),
            "{v}"
        );
        assert!(!blocked["message"].as_str().unwrap().is_empty(), "{v}");
        assert!(selected.is_null(), "nothing is selected when blocked: {v}");
    }
}

/// A fresh temporary directory, removed on drop.
pub fn temp_dir() -> TempDir {
    TempDir::new("cli")
}

pub fn data_file(dir: &Path, name: &str, len: usize) -> PathBuf {
    let path = dir.join(name);
    let bytes: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, bytes).unwrap();
    path
}

pub const MIB: usize = 1 << 20;
