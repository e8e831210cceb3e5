//! Test fixtures for real filesystems on loop devices: sparse image files attached with
//! `losetup`, formatted with `mkfs.ext4` or `mkfs.xfs` and mounted in a fresh temporary
//! directory; tmpfs mounts; FIFOs; the process's memory mappings ([`maps`]); a stand-in for
//! NVIDIA's NVML ([`nvml`]); a real S3-compatible server on loopback ([`S3Server`]); and the
//! capability checks (root, loop devices, commands) that
//! let a test say it skipped instead of failing where the machine cannot run it.
//!
//! It is a dev-dependency only and never a dependency of library code: it shells out to
//! `losetup`, `mkfs.*`, `mount` and `umount`, panics when a command that should work fails
//! (a test must not pass silently), and cleans up in `Drop`.
//!
//! Fixtures are safe to use from many test threads and several test processes at once: every
//! name is unique (process id, a counter and the clock), and `losetup --find --show` is
//! retried when another process takes the same free device first.
//!
//! Set `HIPFILE_TEST_STRICT=1` to turn every skip into a failure (for CI machines that are
//! expected to have every capability).

#![forbid(unsafe_code)]

mod built;
pub mod clib;
mod cmd;
mod host;
mod loopdev;
pub mod maps;
mod mount;
pub mod nvml;
mod s3;
mod skip;
mod temp;

pub use built::{cdylib, emulated_runtime};
pub use host::{has_command, is_root, loop_devices};
pub use loopdev::{LoopDevice, loop_device};
pub use mount::{Ext4Data, MountedFs};
pub use s3::{S3Server, free_port, wait_for};
#[doc(hidden)]
pub use skip::skipped;
pub use skip::{Skip, strict};
pub use temp::{TempDir, fifo};
