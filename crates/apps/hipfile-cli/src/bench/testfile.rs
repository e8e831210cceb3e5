//! The test file: what becomes of it is decided before anything is written ([`plan_file`]),
//! then it is opened, created or overwritten with the pattern ([`prepare_file`]); and the
//! page-cache state each run starts in ([`set_cache`]). An existing file is changed only
//! with `--overwrite`, and a file this run created but could not finish is removed. Without
//! `--file` the test file has no name at all ([`temporary`]): nothing is left behind
//! however bench ends.

use super::args::{BenchArgs, Cache};
use super::common::{PAGE, RAW_IO, WARM_THREADS};
use super::common::{fill_pattern, raw_io};
use hipfile::Op;
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// What becomes of the test file, decided before anything is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FilePlan {
    /// It does not exist: create it and write the pattern.
    Create,
    /// A read benchmark of a file of the right size: read it as it is, read-only.
    Read,
    /// `--overwrite`: write the pattern over it when its size differs; the runs may write it.
    Overwrite,
    /// No `--file`: a temporary file without a name in the current directory, written with
    /// the pattern.
    Temporary,
}

/// What the report calls the test file: `--file`'s path, or the temporary file's directory.
pub(super) fn describe(file: Option<&Path>) -> String {
    match file {
        Some(path) => path.display().to_string(),
        None => format!("a temporary file in {}", current_dir().display()),
    }
}

/// The current directory, absolute where it can be found (for messages).
fn current_dir() -> std::path::PathBuf {
    std::env::current_dir().unwrap_or_else(|_| ".".into())
}

/// Decides what to do with the test file, changing nothing. An existing file is changed only
/// with `--overwrite`: it may hold data that is not bench's.
pub(super) fn plan_file(args: &BenchArgs) -> Result<FilePlan, String> {
    let Some(path) = &args.file else {
        return Ok(FilePlan::Temporary);
    };
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(FilePlan::Create),
        Err(e) => return Err(format!("cannot look at the test file {shown}: {e}")),
    };
    if !meta.file_type().is_file() {
        return Err(format!(
            "the test file {shown} is not a regular file; name a regular file, or a new one, \
             with --file"
        ));
    }
    let len = meta.len();
    let keep = "nothing was changed; name a new file with --file, or pass --overwrite to let \
                bench replace its contents";
    match args.op {
        Op::Read if len == args.size => Ok(FilePlan::Read),
        _ if args.overwrite => Ok(FilePlan::Overwrite),
        Op::Read => {
            let as_is = if len > 0 {
                format!(" (or read it as it is with --size {len})")
            } else {
                String::new()
            };
            Err(format!(
                "the test file {shown} exists with {len} bytes, not the {} of --size, and \
                 bench would write its pattern over it: {keep}{as_is}",
                args.size
            ))
        }
        Op::Write => Err(format!(
            "the test file {shown} exists, and a write benchmark writes over it: {keep}"
        )),
    }
}

/// Opens the test file as `plan` says, writing the pattern where it is needed. A file this
/// call created but could not finish is removed.
pub(super) fn prepare_file(path: Option<&Path>, size: u64, plan: FilePlan) -> Result<File, String> {
    let path = match (plan, path) {
        (FilePlan::Temporary, _) | (_, None) => {
            let dir = current_dir();
            let file = temporary(&dir)?;
            let shown = format!("a temporary test file in {}", dir.display());
            eprintln!("hipfile: writing {shown} ({size} bytes, removed when bench ends)");
            write_pattern(&file, &shown, size)?;
            return Ok(file);
        }
        (_, Some(path)) => path,
    };
    let shown = path.display();
    match plan {
        // Taken above.
        FilePlan::Temporary => Err("no test file was named".into()),
        FilePlan::Read => {
            // Read-only: whatever a read benchmark does, the file cannot be written.
            let file =
                File::open(path).map_err(|e| format!("cannot open the test file {shown}: {e}"))?;
            let meta = file
                .metadata()
                .map_err(|e| format!("cannot look at the test file {shown}: {e}"))?;
            if !meta.file_type().is_file() || meta.len() != size {
                return Err(format!(
                    "the test file {shown} changed while bench started; run it again"
                ));
            }
            eprintln!("hipfile: reusing the test file {shown} as it is ({size} bytes, read-only)");
            Ok(file)
        }
        FilePlan::Create => {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(path)
                .map_err(|e| format!("cannot create the test file {shown}: {e}"))?;
            eprintln!("hipfile: writing the test file {shown} ({size} bytes)");
            if let Err(message) = write_pattern(&file, &format!("the test file {shown}"), size) {
                return Err(format!("{message}; {}", remove_created(&file, path)));
            }
            Ok(file)
        }
        FilePlan::Overwrite => {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .map_err(|e| format!("cannot open the test file {shown} for writing: {e}"))?;
            let meta = file
                .metadata()
                .map_err(|e| format!("cannot look at the test file {shown}: {e}"))?;
            if !meta.file_type().is_file() {
                return Err(format!("the test file {shown} is not a regular file"));
            }
            if meta.len() == size {
                eprintln!(
                    "hipfile: --overwrite: writing over the test file {shown} ({size} bytes)"
                );
                return Ok(file);
            }
            eprintln!(
                "hipfile: --overwrite: writing the pattern over the test file {shown} ({size} bytes)"
            );
            write_pattern(&file, &format!("the test file {shown}"), size)
                .map_err(|message| format!("{message}; {shown} is left incomplete"))?;
            Ok(file)
        }
    }
}

/// A new file in `dir` without a name, so that nothing is left in `dir` however the process
/// ends (its blocks are freed when its last descriptor closes, a kill included):
/// `O_TMPFILE`, or, where the file system lacks it, a new file removed as soon as it is
/// made.
pub(super) fn temporary(dir: &Path) -> Result<File, String> {
    use rustix::fs::{Mode, OFlags};
    use rustix::io::Errno;
    let cannot = |e: Errno| {
        format!(
            "cannot create a temporary test file in {} (name one with --file): {}",
            dir.display(),
            io::Error::from(e)
        )
    };
    let mode = Mode::from_raw_mode(0o600);
    match rustix::fs::open(dir, OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC, mode) {
        Ok(fd) => return Ok(File::from(fd)),
        // No O_TMPFILE on this file system (or kernel): a name, at once removed.
        Err(Errno::OPNOTSUPP | Errno::ISDIR | Errno::INVAL) => {}
        Err(e) => return Err(cannot(e)),
    }
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC;
    for n in 0..100 {
        let path = dir.join(format!(".hipfile-bench.{}.{n}.tmp", std::process::id()));
        match rustix::fs::open(&path, flags, mode) {
            Ok(fd) => {
                rustix::fs::unlink(&path).map_err(cannot)?;
                return Ok(File::from(fd));
            }
            Err(Errno::EXIST) => continue,
            Err(e) => return Err(cannot(e)),
        }
    }
    Err(cannot(Errno::EXIST))
}

/// Writes the pattern over the whole of `file` (`shown` in messages) and cuts it to `size`.
pub(super) fn write_pattern(file: &File, shown: &str, size: u64) -> Result<(), String> {
    let mut buf = vec![0u8; usize::try_from(RAW_IO.min(size)).unwrap_or(PAGE)];
    let mut offset = 0u64;
    while offset < size {
        let n = (size - offset).min(buf.len() as u64) as usize;
        fill_pattern(&mut buf[..n], offset);
        file.write_all_at(&buf[..n], offset)
            .map_err(|e| format!("cannot write {shown} at {offset}: {e}"))?;
        offset += n as u64;
    }
    file.set_len(size)
        .and_then(|()| file.sync_data())
        .map_err(|e| format!("cannot finish {shown}: {e}"))
}

/// Removes the test file this run created at `path` (and only if `path` still names it);
/// says what was done.
pub(super) fn remove_created(file: &File, path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let shown = path.display();
    let ours = match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    };
    if !ours {
        return format!("{shown} is no longer the file bench created, so it was left alone");
    }
    match std::fs::remove_file(path) {
        Ok(()) => format!("removed the incomplete test file {shown}"),
        Err(e) => format!("the incomplete test file {shown} could not be removed: {e}"),
    }
}

/// Empties (`Cold`) or fills (`Hot`) the page cache of `file`.
pub(crate) fn set_cache(file: &File, size: u64, cache: Cache) -> Result<(), String> {
    match cache {
        Cache::Cold => {
            // Dirty pages cannot be dropped: write them first.
            file.sync_data()
                .map_err(|e| format!("cannot flush the test file: {e}"))?;
            rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::DontNeed).map_err(|e| {
                format!(
                    "posix_fadvise(DONTNEED) on the test file failed: {}",
                    io::Error::from(e)
                )
            })?;
            if rustix::process::geteuid().is_root() {
                // Best effort: the fadvise above is what is relied on.
                let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
            }
            Ok(())
        }
        Cache::Hot => raw_io(&[(file, size)], Op::Read, WARM_THREADS, false).map(|_| ()),
    }
}
