//! The files of a copy: the source opened and sized (refusing what cannot be read as a plain
//! file), the destination checked against the source, and the temporary file the copy is
//! written into, flushed, and renamed over the destination.

use hipfile::probe::Unusable;
use rustix::fs::{FileType, Mode, OFlags, SeekFrom};
use rustix::io::Errno;
use std::ffi::OsString;
use std::io::{self};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Opens the source read-only and finds the size it claims, which only sizes the buffer: the
/// copy reads to the end whatever it is. What the library registers is copied: regular
/// files, block devices and character devices (read as `pread` reads them there: `/dev/null`
/// gives 0 bytes, one without file offsets fails with `ESPIPE`, docs/BEHAVIOUR.md §3.5);
/// what it refuses (a directory, a FIFO, a socket) is refused here, in its words, without
/// waiting for a FIFO's writer.
pub(super) fn open_source(path: &Path) -> Result<(OwnedFd, u64), String> {
    let cannot = |e: Errno| {
        format!(
            "cannot open {} for reading: {}",
            path.display(),
            io::Error::from(e)
        )
    };
    // `O_NONBLOCK` keeps a FIFO without a writer from blocking the open; it is refused below.
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(cannot)?;
    let stat = rustix::fs::fstat(&fd).map_err(cannot)?;
    let size = match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => u64::try_from(stat.st_size).unwrap_or(0),
        FileType::BlockDevice => rustix::fs::seek(&fd, SeekFrom::End(0)).map_err(|e| {
            format!(
                "cannot find the size of {}: {}",
                path.display(),
                io::Error::from(e)
            )
        })?,
        FileType::CharacterDevice => 0,
        other => {
            let why = match other {
                FileType::Directory => Unusable::Directory,
                FileType::Fifo => Unusable::Fifo,
                FileType::Socket => Unusable::Socket,
                _ => Unusable::Symlink,
            };
            return Err(format!(
                "cannot copy {}: {}",
                path.display(),
                why.describe()
            ));
        }
    };
    // The library reopens the file with this descriptor's flags.
    let flags = rustix::fs::fcntl_getfl(&fd).map_err(cannot)?;
    rustix::fs::fcntl_setfl(&fd, flags - OFlags::NONBLOCK).map_err(cannot)?;
    Ok((fd, size))
}

/// Refuses a destination that is the source under another name: the copy would take the
/// place of what it copies, and through a hard link or a symbolic link destroy it.
pub(super) fn refuse_same_file(
    src: &OwnedFd,
    src_path: &Path,
    dst_path: &Path,
) -> Result<(), String> {
    let Ok(dst) = rustix::fs::stat(dst_path) else {
        // Absent (or not reachable): opening it will say so.
        return Ok(());
    };
    let src_stat = rustix::fs::fstat(src).map_err(|e| {
        format!(
            "cannot look at {}: {}",
            src_path.display(),
            io::Error::from(e)
        )
    })?;
    if (dst.st_dev, dst.st_ino) == (src_stat.st_dev, src_stat.st_ino) {
        return Err(format!(
            "{} and {} are the same file; nothing was copied",
            src_path.display(),
            dst_path.display()
        ));
    }
    Ok(())
}

/// Where the copy goes, and what it takes over from the file it replaces.
pub(super) struct Destination {
    /// The path the copy is renamed to: DST, or the file a symbolic link DST names.
    path: PathBuf,
    /// The directory of `path`, where the temporary file is made.
    pub(super) dir: PathBuf,
    /// The file now at `path`, if any.
    existing: Option<Existing>,
}

/// What the copy keeps of the file it replaces.
#[derive(Debug, Clone, Copy)]
pub(super) struct Existing {
    /// Permission bits.
    mode: u32,
    uid: u32,
    gid: u32,
}

impl Destination {
    /// Looks at DST, changing nothing. A symbolic link stays: the file it names is replaced,
    /// as writing through the link would replace its contents.
    pub(super) fn find(dst: &Path) -> Result<Destination, String> {
        let cannot = |why: String| format!("cannot open {} for writing: {why}", dst.display());
        let path = match rustix::fs::lstat(dst) {
            Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                std::fs::canonicalize(dst).map_err(|e| {
                    cannot(format!(
                        "it is a symbolic link to a file that cannot be reached ({e}); copy to \
                         the file it should name instead"
                    ))
                })?
            }
            Ok(_) | Err(Errno::NOENT) => dst.to_path_buf(),
            Err(e) => return Err(cannot(io::Error::from(e).to_string())),
        };
        let existing = match rustix::fs::stat(&path) {
            Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                FileType::RegularFile => Some(Existing {
                    mode: st.st_mode & 0o777,
                    uid: st.st_uid,
                    gid: st.st_gid,
                }),
                FileType::Directory => return Err(cannot("it is a directory".into())),
                _ => return Err(cannot("it is not a regular file".into())),
            },
            Err(Errno::NOENT) => None,
            Err(e) => return Err(cannot(io::Error::from(e).to_string())),
        };
        if existing.is_some() {
            // Renaming over a file needs no permission on the file itself; writing into it,
            // which is what replacing its contents stands for, does.
            rustix::fs::accessat(
                rustix::fs::CWD,
                &path,
                rustix::fs::Access::WRITE_OK,
                rustix::fs::AtFlags::EACCESS,
            )
            .map_err(|e| cannot(io::Error::from(e).to_string()))?;
        }
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Ok(Destination {
            path,
            dir,
            existing,
        })
    }
}

/// The file the copy is written into, beside the destination.
pub(super) struct TempFile {
    path: PathBuf,
    pub(super) fd: OwnedFd,
}

/// Tries at most this many names for the temporary file.
pub(super) const TEMP_NAMES: u32 = 100;

/// The longest part of the destination's name that goes into the temporary file's name, so
/// that the latter stays within `NAME_MAX` (255 bytes).
pub(super) const TEMP_NAME_KEEPS: usize = 200;

/// The temporary file's name for `dst_name`, attempt `n`: hidden, and naming cp, so that one
/// left by a killed copy can be told for what it is.
pub fn temp_name(dst_name: &[u8], pid: u32, n: u32) -> OsString {
    let kept = &dst_name[..dst_name.len().min(TEMP_NAME_KEEPS)];
    let mut name = b".".to_vec();
    name.extend_from_slice(kept);
    name.extend_from_slice(format!(".hipfile-cp.{pid}.{n}.tmp").as_bytes());
    OsString::from_vec(name)
}

impl TempFile {
    /// Creates a new, empty file in the destination's directory (`O_EXCL`, so that no file
    /// of someone else's is taken): mode 0644 less the umask for a new destination, else
    /// readable by its owner only until the copy is complete and gets the old file's mode.
    pub(super) fn create(dest: &Destination, dst: &Path) -> Result<TempFile, String> {
        let dst_name = dest.path.file_name().map_or(&b"copy"[..], |n| n.as_bytes());
        let mode = match dest.existing {
            None => 0o644,
            Some(_) => 0o600,
        };
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC | OFlags::NOCTTY;
        let pid = std::process::id();
        for n in 0..TEMP_NAMES {
            let path = dest.dir.join(temp_name(dst_name, pid, n));
            match rustix::fs::open(&path, flags, Mode::from_raw_mode(mode)) {
                Ok(fd) => return Ok(TempFile { path, fd }),
                // Left by an earlier copy of the same process number, or another's: not ours.
                Err(Errno::EXIST) => continue,
                Err(e) => {
                    return Err(format!(
                        "cannot create a file in {} to copy into before it replaces {}: {}",
                        dest.dir.display(),
                        dst.display(),
                        io::Error::from(e)
                    ));
                }
            }
        }
        Err(format!(
            "cannot create a file in {} to copy into before it replaces {}: {TEMP_NAMES} \
             names were taken; remove the .*.hipfile-cp.*.tmp files left there",
            dest.dir.display(),
            dst.display()
        ))
    }

    /// Gives the complete, flushed copy the old file's mode (and, where allowed, its owner
    /// and group), then renames it over the destination.
    pub(super) fn take_place_of(&self, dest: &Destination, dst: &Path) -> Result<(), String> {
        if let Some(old) = dest.existing {
            // Best effort: only root, or an owner moving the file to one of their groups, may;
            // otherwise the copy belongs to whoever made it, as a new file would.
            let _ = rustix::fs::fchown(
                &self.fd,
                Some(rustix::fs::Uid::from_raw(old.uid)),
                Some(rustix::fs::Gid::from_raw(old.gid)),
            );
            rustix::fs::fchmod(&self.fd, Mode::from_raw_mode(old.mode)).map_err(|e| {
                format!(
                    "cannot give the copy the mode {:o} of {}: {}",
                    old.mode,
                    dst.display(),
                    io::Error::from(e)
                )
            })?;
        }
        rustix::fs::rename(&self.path, &dest.path).map_err(|e| {
            format!(
                "cannot rename the copy to {}: {}",
                dst.display(),
                io::Error::from(e)
            )
        })
    }

    /// Removes the incomplete copy; the destination was never touched.
    pub(super) fn discard(self, dest: &Destination, dst: &Path) {
        let dst_now = if dest.existing.is_some() {
            format!("{} is unchanged", dst.display())
        } else {
            format!("{} was not created", dst.display())
        };
        match rustix::fs::unlink(&self.path) {
            Ok(()) => eprintln!("hipfile: removed the incomplete copy; {dst_now}"),
            Err(e) => eprintln!(
                "hipfile: warning: the incomplete copy {} could not be removed: {}; {dst_now}",
                self.path.display(),
                io::Error::from(e)
            ),
        }
    }
}

/// Flushes `dir`, so that a rename in it survives a crash.
pub(super) fn sync_directory(dir: &Path) -> Result<(), String> {
    let cannot = |e: Errno| {
        format!(
            "{} could not be flushed to storage: {}",
            dir.display(),
            io::Error::from(e)
        )
    };
    let fd = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(cannot)?;
    rustix::fs::fsync(&fd).map_err(cannot)
}
