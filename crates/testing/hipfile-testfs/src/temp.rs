//! Fresh directories under the system's temporary directory.

use std::path::{Path, PathBuf};

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
        let path = std::env::temp_dir().join(crate::unique_name(what));
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
