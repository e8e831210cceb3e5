//! The statistics channel of `hipfile stats PID`, read back in the process that publishes
//! it: a driver that counts publishes its counters in a file only its owner can open, the
//! record reads back as the driver's snapshot, and the channel goes when the driver closes.
//! One test in its own binary: a process has one channel.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile::{ConfigBuilder, Driver, ReadStatsError, read_published_stats, stats_channel_path};
use hipfile_testfs::{TempDir, emulated_runtime, require};
use std::fs::OpenOptions;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};

#[test]
fn a_counting_driver_publishes_its_counters_to_its_owner_only() {
    let lib = require!(emulated_runtime());
    let pid = std::process::id();
    // This user's directory, as a publisher makes it.
    let uid = std::fs::metadata("/proc/self").unwrap().uid();
    let user_dir = std::path::PathBuf::from(format!("/dev/shm/hipfile-{uid}"));
    if std::fs::symlink_metadata(&user_dir).is_err() {
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&user_dir)
            .unwrap();
    }
    let path = user_dir.join(format!("stats.{pid}"));
    let config = ConfigBuilder::new()
        .stats_level(3)
        .hip_library(lib)
        .build_with(|_| None)
        .0;
    // Left by an earlier process with this pid: a record to replace, and a link where the
    // temporary file goes, which must be removed, not followed.
    let dir = TempDir::new("stats-channel");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"untouched").unwrap();
    std::fs::write(&path, b"stale garbage").unwrap();
    let tmp = user_dir.join(format!(".stats.{pid}.tmp"));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&victim, &tmp).unwrap();
    let e = read_published_stats(pid).unwrap_err();
    assert!(matches!(e, ReadStatsError::Malformed { .. }), "{e}");

    let d = Driver::open_private(config).unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"untouched");
    assert!(std::fs::symlink_metadata(&tmp).is_err(), "the link is gone");
    // Published from the open on, with nothing counted yet.
    assert_eq!(stats_channel_path(pid), Some(path.clone()));
    let first = read_published_stats(pid).unwrap();
    assert_eq!(first.stats.read.ops.ok, 0);
    assert_eq!(first.stats.level, 3);
    let mode = std::fs::symlink_metadata(&path)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "the channel is its owner's only");

    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.path().join("data"))
        .unwrap();
    let fh = d.register_file(&file).unwrap();
    let mut buf = d.alloc(8192).unwrap();
    assert_eq!(fh.write(&buf, 8192, 0, 0).unwrap().bytes, 8192);
    assert_eq!(fh.read(&mut buf, 4096, 0, 0).unwrap().bytes, 4096);
    assert!(d.publish_stats().unwrap());
    let read = read_published_stats(pid).unwrap();
    assert!(read.sequence > first.sequence);
    assert_eq!(read.stats, d.stats().unwrap());
    assert_eq!(
        (read.stats.read.bytes, read.stats.write.bytes),
        (4096, 8192)
    );
    assert_eq!(read.stats.gpus.len(), 1);

    // The same record as an earlier process with this pid would have left it: another
    // start time (word 4).
    let mut stale = std::fs::read(&path).unwrap();
    stale[32] ^= 1;

    drop((fh, buf, d));
    assert!(!path.exists(), "the channel goes with the driver");
    assert_eq!(stats_channel_path(pid), None);
    std::fs::write(&path, &stale).unwrap();
    let e = read_published_stats(pid).unwrap_err();
    assert!(matches!(e, ReadStatsError::NotPublishing { .. }), "{e}");
    std::fs::remove_file(&path).unwrap();
    let e = read_published_stats(pid).unwrap_err();
    assert!(matches!(e, ReadStatsError::NotPublishing { .. }), "{e}");
    assert!(e.to_string().contains("HIPFILE_STATS_LEVEL"), "{e}");

    let mut child = std::process::Command::new("true").spawn().unwrap();
    let gone = child.id();
    child.wait().unwrap();
    let e = read_published_stats(gone).unwrap_err();
    assert!(matches!(e, ReadStatsError::NoSuchProcess { .. }), "{e}");
}
