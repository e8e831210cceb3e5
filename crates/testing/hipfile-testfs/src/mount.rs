//! Mounted filesystems: ext4 and xfs on loop devices, and tmpfs.

use crate::cmd::{run, run_ok};
use crate::host::{has_command, is_root, loop_devices};
use crate::loopdev::{LoopDevice, loop_device};
use crate::skip::Skip;
use crate::temp::TempDir;
use std::path::{Path, PathBuf};

/// The ext4 `data=` journaling mode to mount with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ext4Data {
    /// No `data=` option: ext4's default, ordered, which `/proc/self/mountinfo` then does not
    /// list.
    Ordered,
    /// `-o data=ordered`, which mountinfo then lists as `data=ordered`.
    OrderedExplicit,
    /// `-o data=journal` (ext4 then disables delayed allocation and direct I/O; mountinfo
    /// lists `nodioread_nolock,nodelalloc,data=journal`).
    Journal,
    /// `-o data=writeback`.
    Writeback,
}

impl Ext4Data {
    /// The journaling mode: `ordered`, `journal` or `writeback`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ext4Data::Ordered | Ext4Data::OrderedExplicit => "ordered",
            Ext4Data::Journal => "journal",
            Ext4Data::Writeback => "writeback",
        }
    }

    /// The mount option, if one is given.
    pub fn mount_option(self) -> Option<&'static str> {
        match self {
            Ext4Data::Ordered => None,
            Ext4Data::OrderedExplicit => Some("data=ordered"),
            Ext4Data::Journal => Some("data=journal"),
            Ext4Data::Writeback => Some("data=writeback"),
        }
    }
}

/// A filesystem mounted on a fresh directory. Drop unmounts it (lazily if a plain unmount
/// fails), then detaches its loop device, then removes the directory.
#[derive(Debug)]
pub struct MountedFs {
    mount_point: PathBuf,
    fs_type: &'static str,
    /// The `-o` options it was mounted with, to mount it again the same way.
    options: String,
    mounted: bool,
    // Field order is drop order: the device is detached before the directory goes.
    device: Option<LoopDevice>,
    _dir: TempDir,
}

impl MountedFs {
    /// ext4 of `size_mib` MiB on a loop device (`mkfs.ext4 -q -F`), mounted with
    /// [`Ext4Data::mount_option`].
    ///
    /// # Errors
    ///
    /// A [`Skip`] without root, loop devices, `mkfs.ext4` or kernel ext4 support.
    ///
    /// # Panics
    ///
    /// When a command fails although the capabilities are there.
    pub fn ext4(data: Ext4Data, size_mib: u64) -> Result<MountedFs, Skip> {
        preflight("mkfs.ext4")?;
        let device = loop_device(size_mib)?;
        run_ok(
            "mkfs.ext4",
            ["-q".as_ref(), "-F".as_ref(), device.path().as_os_str()],
        );
        MountedFs::mount(
            "ext4",
            Some(device),
            data.mount_option().unwrap_or("defaults"),
        )
    }

    /// xfs of `size_mib` MiB on a loop device (`mkfs.xfs -q -f`). Current xfsprogs refuse
    /// filesystems under 300 MiB; the image is sparse, so a large size costs little.
    ///
    /// # Errors
    ///
    /// A [`Skip`] without root, loop devices, `mkfs.xfs` or kernel xfs support.
    ///
    /// # Panics
    ///
    /// When a command fails although the capabilities are there.
    pub fn xfs(size_mib: u64) -> Result<MountedFs, Skip> {
        preflight("mkfs.xfs")?;
        let device = loop_device(size_mib)?;
        run_ok(
            "mkfs.xfs",
            ["-q".as_ref(), "-f".as_ref(), device.path().as_os_str()],
        );
        MountedFs::mount("xfs", Some(device), "defaults")
    }

    /// tmpfs limited to `size_mib` MiB.
    ///
    /// # Errors
    ///
    /// A [`Skip`] without root or the `mount` command.
    ///
    /// # Panics
    ///
    /// When `mount` fails although the capabilities are there.
    pub fn tmpfs(size_mib: u64) -> Result<MountedFs, Skip> {
        is_root()?;
        has_command("mount")?;
        MountedFs::mount("tmpfs", None, &format!("size={size_mib}m"))
    }

    fn mount(
        fs_type: &'static str,
        device: Option<LoopDevice>,
        options: &str,
    ) -> Result<MountedFs, Skip> {
        let dir = TempDir::new(fs_type);
        let mount_point = dir.path().join("mnt");
        std::fs::create_dir(&mount_point)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", mount_point.display()));
        let source = device
            .as_ref()
            .map_or_else(|| "hipfile-testfs".into(), |d| d.path().to_owned());
        let out = run(
            "mount",
            [
                "-t".as_ref(),
                fs_type.as_ref(),
                "-o".as_ref(),
                options.as_ref(),
                source.as_os_str(),
                mount_point.as_os_str(),
            ],
        );
        if !out.success {
            if out.stderr.contains("unknown filesystem type") {
                return Err(Skip(format!(
                    "the kernel does not support {fs_type}: {}",
                    out.stderr.trim()
                )));
            }
            panic!("{} failed: {}", out.line, out.stderr.trim());
        }
        Ok(MountedFs {
            mount_point,
            fs_type,
            options: options.to_owned(),
            mounted: true,
            device,
            _dir: dir,
        })
    }

    /// The mount point: an empty directory right after mounting.
    pub fn path(&self) -> &Path {
        &self.mount_point
    }

    /// The mount type: `ext4`, `xfs` or `tmpfs`.
    pub fn fs_type(&self) -> &str {
        self.fs_type
    }

    /// The loop device holding the filesystem; `None` for tmpfs.
    pub fn loop_device(&self) -> Option<&LoopDevice> {
        self.device.as_ref()
    }

    /// What a crash does to the filesystem: shuts it down at once without flushing its log
    /// (`xfs_io -x -c shutdown`, which ext4 takes too), so that whatever was not made
    /// durable is lost, then unmounts it and mounts the same device again, as after a
    /// reboot. Every file on it must be closed first.
    ///
    /// # Errors
    ///
    /// A [`Skip`] for tmpfs (nothing survives) or without `xfs_io`.
    ///
    /// # Panics
    ///
    /// When a command fails although the capabilities are there (a file still open, say).
    pub fn crash_and_remount(&mut self) -> Result<(), Skip> {
        let Some(device) = self.device.as_ref() else {
            return Err(Skip("a tmpfs keeps nothing across a crash".into()));
        };
        has_command("xfs_io")?;
        run_ok(
            "xfs_io",
            [
                "-x".as_ref(),
                "-c".as_ref(),
                "shutdown".as_ref(),
                self.mount_point.as_os_str(),
            ],
        );
        run_ok("umount", [self.mount_point.as_os_str()]);
        self.mounted = false;
        run_ok(
            "mount",
            [
                "-t".as_ref(),
                self.fs_type.as_ref(),
                "-o".as_ref(),
                self.options.as_ref(),
                device.path().as_os_str(),
                self.mount_point.as_os_str(),
            ],
        );
        self.mounted = true;
        Ok(())
    }

    /// Unmounts now instead of at drop.
    ///
    /// # Panics
    ///
    /// When `umount` fails (for example because a file on it is still open).
    pub fn unmount(&mut self) {
        if self.mounted {
            run_ok("umount", [self.mount_point.as_os_str()]);
            self.mounted = false;
        }
    }
}

impl Drop for MountedFs {
    fn drop(&mut self) {
        if !self.mounted {
            return;
        }
        // No panic here: a drop may run while a failing test unwinds.
        let out = run("umount", [self.mount_point.as_os_str()]);
        if out.success {
            return;
        }
        let lazy = run("umount", ["-l".as_ref(), self.mount_point.as_os_str()]);
        if !lazy.success {
            eprintln!(
                "warning: {} failed ({}), and so did {}: {}",
                out.line,
                out.stderr.trim(),
                lazy.line,
                lazy.stderr.trim()
            );
        }
    }
}

/// Root, loop devices, `mount` and the filesystem's `mkfs`.
fn preflight(mkfs: &str) -> Result<(), Skip> {
    is_root()?;
    loop_devices()?;
    has_command("mount")?;
    has_command(mkfs)
}
