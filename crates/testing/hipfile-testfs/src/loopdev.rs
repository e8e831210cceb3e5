//! Loop devices backed by sparse image files.

use crate::cmd::run;
use crate::host::{is_root, loop_devices};
use crate::skip::Skip;
use crate::temp::TempDir;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How many times `losetup --find --show` is tried: between finding a free device and
/// configuring it another process may take it, and losetup then reports the device busy.
const ATTACH_ATTEMPTS: u32 = 5;

/// A loop device attached to a sparse image file in its own temporary directory. Drop
/// detaches it (`losetup -d`) and removes the image.
#[derive(Debug)]
pub struct LoopDevice {
    device: PathBuf,
    image: PathBuf,
    // Dropped after `Drop::drop` detached the device.
    _dir: TempDir,
}

/// Attaches a fresh sparse image of `size_mib` MiB to a free loop device.
///
/// # Errors
///
/// A [`Skip`] when the process is not root or loop devices are unavailable.
///
/// # Panics
///
/// When the capabilities are there but the image cannot be made or `losetup` fails.
pub fn loop_device(size_mib: u64) -> Result<LoopDevice, Skip> {
    is_root()?;
    loop_devices()?;
    let dir = TempDir::new("loop");
    let image = dir.path().join("image");
    let file = std::fs::File::create(&image)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", image.display()));
    file.set_len(size_mib << 20)
        .unwrap_or_else(|e| panic!("cannot size {} to {size_mib} MiB: {e}", image.display()));
    drop(file);
    let device = attach(&image);
    Ok(LoopDevice {
        device,
        image,
        _dir: dir,
    })
}

fn attach(image: &Path) -> PathBuf {
    let mut attempt = 1;
    loop {
        let out = run(
            "losetup",
            ["--find".as_ref(), "--show".as_ref(), image.as_os_str()],
        );
        if out.success {
            let device = out.stdout.trim();
            assert!(
                device.starts_with("/dev/"),
                "{} printed {device:?}, not a device",
                out.line
            );
            return PathBuf::from(device);
        }
        let busy = out.stderr.contains("busy");
        if !busy || attempt == ATTACH_ATTEMPTS {
            panic!(
                "{} failed (attempt {attempt}): {}",
                out.line,
                out.stderr.trim()
            );
        }
        std::thread::sleep(Duration::from_millis(20 * u64::from(attempt)));
        attempt += 1;
    }
}

impl LoopDevice {
    /// The device node, for example `/dev/loop3`.
    pub fn path(&self) -> &Path {
        &self.device
    }

    /// The backing image file.
    pub fn image(&self) -> &Path {
        &self.image
    }

    /// The device's major and minor numbers, from `stat` of its node.
    ///
    /// # Panics
    ///
    /// When the node cannot be stat'ed.
    pub fn rdev(&self) -> (u32, u32) {
        let st = rustix::fs::stat(&self.device)
            .unwrap_or_else(|e| panic!("cannot stat {}: {e}", self.device.display()));
        (rustix::fs::major(st.st_rdev), rustix::fs::minor(st.st_rdev))
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        // No panic here: a drop may run while a failing test unwinds.
        let out = run("losetup", ["-d".as_ref(), self.device.as_os_str()]);
        if !out.success {
            eprintln!("warning: {} failed: {}", out.line, out.stderr.trim());
        }
    }
}
