//! Fresh names: directories under the system's temporary directory, and FIFOs.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// `hipfile-testfs-<what>-<pid>-<counter>-<nanoseconds>`: unique across threads and processes.
pub(crate) fn unique_name(what: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("hipfile-testfs-{what}-{}-{n}-{nanos}", std::process::id())
}

/// A directory created empty under [`std::env::temp_dir`] with a unique name, removed with
/// everything in it on drop.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `hipfile-testfs-<what>-<unique>` in the temporary directory.
    ///
    /// # Panics
    ///
    /// When the directory cannot be created.
    pub fn new(what: &str) -> TempDir {
        let path = std::env::temp_dir().join(unique_name(what));
        std::fs::create_dir(&path)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", path.display()));
        TempDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            eprintln!("warning: cannot remove {}: {e}", self.path.display());
        }
    }
}

/// Creates a FIFO (mode 0600) with a fresh name in `dir` and returns its path.
///
/// # Panics
///
/// When `mkfifo` fails.
pub fn fifo(dir: &Path) -> PathBuf {
    let path = dir.join(unique_name("fifo"));
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &path,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap_or_else(|e| panic!("mkfifo {} failed: {e}", path.display()));
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_names_differ() {
        let a = unique_name("x");
        let b = unique_name("x");
        assert_ne!(a, b);
        assert!(
            a.starts_with(&format!("hipfile-testfs-x-{}-", std::process::id())),
            "{a}"
        );
    }

    #[test]
    fn fifo_is_a_fifo_in_the_directory() {
        use std::os::unix::fs::FileTypeExt;
        let dir = TempDir::new("fifo");
        let a = fifo(dir.path());
        let b = fifo(dir.path());
        assert_ne!(a, b);
        assert_eq!(a.parent(), Some(dir.path()));
        assert!(std::fs::metadata(&a).unwrap().file_type().is_fifo());
    }
}
