//! `hipfile stats PID` against live processes: this test process opens a driver counting at
//! level 3, does known I/O and publishes, and the `hipfile` binary, run as a child, reads the
//! figures back (JSON and table); a process that does not publish, one that does not exist,
//! another user's (when run as root: the reader runs as `nobody`), and the channel's mode
//! (0600, its owner's only).

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

mod common;

use common::hipfile;
use hipfile::{ConfigBuilder, Driver, stats_channel_path};
use hipfile_testfs::{TempDir, emulated_runtime, require};
use serde_json::Value;
use std::fs::OpenOptions;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};

/// Kills and reaps the child when dropped, so that a failed assertion leaves no process.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn shows_what_a_process_did_at_level_three() {
    let lib = require!(emulated_runtime());
    let config = ConfigBuilder::new()
        .stats_level(3)
        .hip_library(lib)
        .build_with(|_| None)
        .0;
    let d = Driver::open_private(config).unwrap();
    let pid = std::process::id();
    let mode = std::fs::metadata(stats_channel_path(pid).unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "only the owner may read the channel");

    let dir = TempDir::new("cli-stats");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.path().join("data"))
        .unwrap();
    let fh = d.register_file(&file).unwrap();
    let mut buf = d.alloc(64 << 10).unwrap();
    assert_eq!(fh.write(&buf, 64 << 10, 0, 0).unwrap().bytes, 64 << 10);
    assert_eq!(fh.write(&buf, 4096, 64 << 10, 0).unwrap().bytes, 4096);
    assert_eq!(fh.read(&mut buf, 1000, 0, 0).unwrap().bytes, 1000);
    assert!(fh.read(&mut buf, 10, -1, 0).is_err());
    assert!(d.publish_stats().unwrap());

    let run = hipfile(&["stats", &pid.to_string(), "--json"], &[]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let j: Value = run.one();
    assert_eq!(j["pid"], pid);
    assert_eq!(j["level"], 3);
    assert_eq!(j["read"]["ok"], 1);
    assert_eq!(j["read"]["err"], 1);
    assert_eq!(j["read"]["bytes"], 1000);
    assert_eq!(j["write"]["ok"], 2);
    assert_eq!(j["write"]["err"], 0);
    assert_eq!(j["write"]["bytes"], (64 << 10) + 4096);
    assert_eq!(j["registrations"]["file"]["ok"], 1);
    assert_eq!(j["errors"], 1);
    let hist = j["write"]["size_histogram"].as_array().unwrap();
    assert_eq!(hist.len(), 32);
    assert_eq!((&hist[2], &hist[6]), (&Value::from(1), &Value::from(1)));
    assert_eq!(j["read"]["size_histogram"][0], 1);
    let gpus = j["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 1);
    assert_eq!(gpus[0]["device"], 0);
    assert_eq!(gpus[0]["read"]["ops"], 1);
    assert_eq!(gpus[0]["read"]["errors"], 1);
    assert_eq!(gpus[0]["write"]["bytes"], (64 << 10) + 4096);

    let table = hipfile(&["stats", &pid.to_string()], &[]);
    assert_eq!(table.status, 0, "{}", table.stderr);
    assert!(
        table.stdout.contains(&format!("process {pid} (level 3")),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains("write sizes: 4K: 1, 64K: 1"),
        "{}",
        table.stdout
    );
    assert!(
        table.stdout.contains("GPU 0 writes: 2 ok"),
        "{}",
        table.stdout
    );

    another_user_is_refused(pid);

    drop((fh, buf, d));
    let closed = hipfile(&["stats", &pid.to_string()], &[]);
    assert_eq!(closed.status, 1);
    assert!(
        closed.stderr.contains("HIPFILE_STATS_LEVEL"),
        "{}",
        closed.stderr
    );
}

/// A copy of the built `hipfile` that any user can run, in a fresh directory of the
/// system's temporary directory: the checkout (and so `target/`) may be where other users
/// cannot go, a clone under a mode-700 `/root` for one.
fn binary_for_anyone(dir: &TempDir) -> std::path::PathBuf {
    let set_mode = |path: &std::path::Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    set_mode(dir.path(), 0o755);
    let program = dir.path().join("hipfile");
    std::fs::copy(env!("CARGO_BIN_EXE_hipfile"), &program).unwrap();
    set_mode(&program, 0o755);
    for ancestor in dir.path().ancestors().skip(1) {
        let mode = std::fs::metadata(ancestor).unwrap().permissions().mode();
        assert!(
            mode & 0o001 != 0,
            "{} (mode {mode:o}) is not traversable by other users: point TMPDIR at a \
             directory they can reach to run this test",
            ancestor.display()
        );
    }
    program
}

/// As root, runs `hipfile stats PID` as `nobody`, which the channel's mode must refuse
/// (root itself passes every permission check, so only a second user shows it). The reader
/// is a copy of the binary that `nobody` can reach ([`binary_for_anyone`]).
fn another_user_is_refused(pid: u32) {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::process::CommandExt;
    if std::fs::metadata("/proc/self").map(|m| m.uid()).ok() != Some(0) {
        eprintln!("skipped: another user's process needs root to run the reader as nobody");
        return;
    }
    let dir = TempDir::new("cli-stats-reader");
    let program = binary_for_anyone(&dir);
    let mut tries = 0;
    let run = loop {
        // A copy made just now can be busy for a moment: another test thread may have forked
        // while it was open for writing.
        match Command::new(&program)
            .args(["stats", &pid.to_string()])
            .uid(65534)
            .gid(65534)
            .stdin(Stdio::null())
            .output()
        {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => break other.unwrap(),
        }
    };
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(run.stdout.is_empty());
    assert!(stderr.contains("permission denied"), "{stderr}");
}

#[test]
fn a_process_without_statistics_or_without_life_is_a_clear_error() {
    let child = Reaped(
        Command::new("sleep")
            .arg("60")
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let run = hipfile(&["stats", &child.0.id().to_string()], &[]);
    assert_eq!(run.status, 1);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert!(
        run.stderr.contains("publishes no hipfile statistics")
            && run.stderr.contains("HIPFILE_STATS_LEVEL"),
        "{}",
        run.stderr
    );
    drop(child);

    let mut gone = Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    let run = hipfile(&["stats", &pid.to_string(), "--json"], &[]);
    assert_eq!(run.status, 1);
    assert!(
        run.stderr.contains(&format!("no process has pid {pid}")),
        "{}",
        run.stderr
    );
}
