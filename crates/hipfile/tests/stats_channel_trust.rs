//! The statistics channel against another user of the machine (run as root, with `nobody`
//! as the other user): a record another user planted where `hipfile stats` looks is never
//! taken for the process's own, and names another user took first in `/dev/shm` do not stop
//! the process from publishing. One test in its own binary: a process has one channel.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile::{ConfigBuilder, Driver, read_published_stats};
use hipfile_testfs::{emulated_runtime, is_root, require};
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

const NOBODY: u32 = 65534;

/// A well-formed record (version 1, level 1, all counters 0) that names this process, with
/// its start time, as the documented layout has it: 335 little-endian words.
fn record_naming_this_process() -> Vec<u8> {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let start: u64 = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap();
    let mut words = vec![0u64; 335];
    words[..8].copy_from_slice(&[
        u64::from_le_bytes(*b"HIPFSTAT"),
        1,
        1,
        u64::from(std::process::id()),
        start,
        1,
        335,
        0,
    ]);
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// Writes `bytes` at `path` as `nobody`'s file.
fn plant(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).unwrap();
    std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).unwrap();
}

/// Removes what the test planted or the driver left, whoever owns it.
struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_dir_all(p).or_else(|_| std::fs::remove_file(p));
        }
    }
}

#[test]
fn another_users_files_neither_speak_for_a_process_nor_silence_it() {
    require!(is_root());
    let lib = require!(emulated_runtime());
    let pid = std::process::id();
    let uid = std::fs::metadata("/proc/self").unwrap().uid();
    let record = record_naming_this_process();
    // Where a reader or a writer of this or an earlier version looks first.
    let flat = PathBuf::from(format!("/dev/shm/hipfile-stats.{pid}"));
    let flat_tmp = PathBuf::from(format!("/dev/shm/.hipfile-stats.{pid}.tmp"));
    let user_dir = PathBuf::from(format!("/dev/shm/hipfile-{uid}"));
    let mut cleanup = Cleanup(vec![flat.clone(), flat_tmp.clone(), user_dir.clone()]);
    cleanup
        .0
        .extend((1..8).map(|n| PathBuf::from(format!("/dev/shm/hipfile-{uid}.{n}"))));
    for p in &cleanup.0 {
        let _ = std::fs::remove_dir_all(p).or_else(|_| std::fs::remove_file(p));
    }
    plant(&flat, &record);
    plant(&flat_tmp, b"taken");
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(&user_dir)
        .unwrap();
    std::os::unix::fs::chown(&user_dir, Some(NOBODY), Some(NOBODY)).unwrap();
    plant(&user_dir.join(format!("stats.{pid}")), &record);
    plant(&user_dir.join(format!(".stats.{pid}.tmp")), b"taken");

    // This process publishes nothing: whatever another user planted is refused.
    match read_published_stats(pid) {
        Ok(p) => panic!("another user's record was taken for this process's: {p:?}"),
        Err(e) => eprintln!("refused as it must be: {e}"),
    }

    // Publishing goes on around the names another user took.
    let config = ConfigBuilder::new()
        .stats_level(1)
        .hip_library(lib)
        .build_with(|_| None)
        .0;
    let d = Driver::open_private(config).unwrap();
    assert!(d.publish_stats().unwrap(), "this driver publishes");
    let read = read_published_stats(pid).unwrap();
    assert_eq!(read.pid, pid);
    assert_eq!(read.stats, d.stats().unwrap());
    // Another user's files are left as they were.
    assert_eq!(std::fs::read(&flat).unwrap(), record);
    assert_eq!(std::fs::metadata(&user_dir).unwrap().uid(), NOBODY);
    drop(d);
    assert!(
        read_published_stats(pid).is_err(),
        "the channel goes with the driver"
    );
}

/// The user the publishing child runs as: not root, whom the sticky bit of `/dev/shm` does
/// not stop, and not `nobody`, who plays the other user.
const PUBLISHER: u32 = 1;

#[test]
#[ignore = "run by an_unprivileged_process_publishes_beside_names_another_user_took as another user"]
fn child_publishes_beside_names_another_user_took() {
    // Waits until the parent has planted its files under this process's pid.
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    #[allow(clippy::disallowed_methods)] // the parent names the runtime's copy
    let lib = std::env::var_os("HIPFILE_HIP_LIBRARY").unwrap();
    let config = ConfigBuilder::new()
        .stats_level(1)
        .hip_library(lib)
        .build_with(|_| None)
        .0;
    let d = Driver::open_private(config).unwrap();
    assert!(d.publish_stats().unwrap(), "this driver publishes");
    let read = read_published_stats(std::process::id()).unwrap();
    assert_eq!(read.stats, d.stats().unwrap());
}

#[test]
fn an_unprivileged_process_publishes_beside_names_another_user_took() {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    require!(is_root());
    let lib = require!(emulated_runtime());
    // The child's binary and runtime where its user can reach them, whatever the mode of
    // the checkout's directories.
    let dir = hipfile_testfs::TempDir::new("stats-publisher");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = dir.path().join("publisher");
    let runtime = dir.path().join("libhipfile_emu.so");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::copy(&lib, &runtime).unwrap();
    for f in [&exe, &runtime] {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let user_dirs: Vec<PathBuf> = std::iter::once(format!("/dev/shm/hipfile-{PUBLISHER}"))
        .chain((1..8).map(|n| format!("/dev/shm/hipfile-{PUBLISHER}.{n}")))
        .map(PathBuf::from)
        .collect();
    let mut cleanup = Cleanup(user_dirs.clone());
    for p in &cleanup.0 {
        let _ = std::fs::remove_dir_all(p).or_else(|_| std::fs::remove_file(p));
    }
    // Another user took the first directory's name.
    std::fs::DirBuilder::new()
        .mode(0o755)
        .create(&user_dirs[0])
        .unwrap();
    std::os::unix::fs::chown(&user_dirs[0], Some(NOBODY), Some(NOBODY)).unwrap();

    let mut child = std::process::Command::new(&exe)
        .args([
            "--exact",
            "child_publishes_beside_names_another_user_took",
            "--ignored",
            "--nocapture",
        ])
        .env("HIPFILE_HIP_LIBRARY", &runtime)
        .env_remove("HIPFILE_STATS_LEVEL")
        .current_dir(dir.path())
        .uid(PUBLISHER)
        .gid(PUBLISHER)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // And every name in /dev/shm itself that a publisher could pick for this pid.
    let pid = child.id();
    for name in [
        format!("hipfile-stats.{pid}"),
        format!(".hipfile-stats.{pid}.tmp"),
    ] {
        let path = PathBuf::from("/dev/shm").join(name);
        plant(&path, b"taken");
        cleanup.0.push(path);
    }
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the publisher failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
