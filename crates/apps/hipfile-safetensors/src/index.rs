//! A checkpoint's index, Hugging Face's `model.safetensors.index.json`: `{"metadata": {...},
//! "weight_map": {"tensor": "shard file", ...}}`, the shards named relative to the index's
//! directory. The loader reads it in place of the shards it names.

use crate::error::LoadError;
use crate::header::{MAX_HEADER, open_checked};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// A checkpoint's index, read and checked: the shards it names and which tensor is in which.
///
/// [`Loader::load`](crate::Loader::load) reads a path whose name ends in `.json` as an
/// index and loads the shards it names; `Index` is what it reads, for a caller that wants
/// to see the shards first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Index {
    path: PathBuf,
    /// The shards, each once, in the order of their file names.
    shards: Vec<PathBuf>,
    /// Each tensor's shard, an index into `shards`.
    tensors: BTreeMap<String, usize>,
}

/// Whether [`Loader::load`](crate::Loader::load) reads `path` as an index: its name ends in
/// `.json` (`model.safetensors.index.json`), which no safetensors file's does.
pub fn is_index(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

impl Index {
    /// Reads the index at `path`. It must be a JSON object with a `weight_map` object whose
    /// values name the shards: relative paths that stay inside the index's directory (in
    /// practice file names), which are taken relative to that directory.
    ///
    /// # Errors
    ///
    /// [`LoadError::Io`] or [`LoadError::FileType`] when the file cannot be read (a FIFO is
    /// refused without waiting for a writer), [`LoadError::Index`] when it is not such an
    /// index.
    pub fn read(path: impl AsRef<Path>) -> Result<Index, LoadError> {
        let path = path.as_ref();
        let bad = |why: String| LoadError::Index {
            path: path.to_path_buf(),
            why,
        };
        let (file, size) = open_checked(path)?;
        if size > MAX_HEADER {
            return Err(bad(format!(
                "it has {size} bytes, more than the {MAX_HEADER} an index may have"
            )));
        }
        let mut text = String::new();
        file.take(MAX_HEADER + 1)
            .read_to_string(&mut text)
            .map_err(|source| LoadError::Io {
                path: path.to_path_buf(),
                what: "cannot read the index".into(),
                source,
            })?;
        Index::parse(path, &text)
    }

    /// The index at `path` whose text is `text`; its shards are named relative to `path`'s
    /// parent (a folder, or a URL's prefix).
    ///
    /// # Errors
    ///
    /// [`LoadError::Index`] when it is not such an index.
    pub fn parse(path: &Path, text: &str) -> Result<Index, LoadError> {
        let bad = |why: String| LoadError::Index {
            path: path.to_path_buf(),
            why,
        };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| bad(format!("it is not valid JSON: {e}")))?;
        let Some(map) = value.get("weight_map") else {
            return Err(bad(
                "it has no \"weight_map\" (the index of a checkpoint maps each tensor to its \
                 shard file)"
                    .into(),
            ));
        };
        let Some(map) = map.as_object() else {
            return Err(bad("its \"weight_map\" is not an object".into()));
        };
        if map.is_empty() {
            return Err(bad("its \"weight_map\" names no tensor".into()));
        }
        let dir = path.parent().unwrap_or(Path::new(""));
        let mut entries = Vec::with_capacity(map.len());
        let mut names = BTreeSet::new();
        for (tensor, shard) in map {
            let Some(shard) = shard.as_str() else {
                return Err(bad(format!(
                    "its \"weight_map\" gives {tensor:?} the value {shard}, which is not a file \
                     name"
                )));
            };
            let relative = Path::new(shard);
            let inside = !shard.is_empty()
                && relative
                    .components()
                    .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
            if !inside {
                return Err(bad(format!(
                    "it names the shard {shard:?} for {tensor:?}: a shard must be named by a \
                     relative path inside the index's directory"
                )));
            }
            names.insert(shard);
            entries.push((tensor.clone(), shard));
        }
        let shards: Vec<PathBuf> = names.iter().map(|n| dir.join(n)).collect();
        let position: BTreeMap<&str, usize> =
            names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let tensors = entries
            .into_iter()
            .map(|(tensor, shard)| (tensor, position[shard]))
            .collect();
        Ok(Index {
            path: path.to_path_buf(),
            shards,
            tensors,
        })
    }

    /// The index's own path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The shards it names, each once, in the order of their names, with the index's
    /// directory in front.
    pub fn shards(&self) -> &[PathBuf] {
        &self.shards
    }

    /// The shard that holds `tensor`, as the index says.
    pub fn shard_of(&self, tensor: &str) -> Option<&Path> {
        self.tensors
            .get(tensor)
            .and_then(|&i| self.shards.get(i))
            .map(PathBuf::as_path)
    }

    /// Every tensor it names, with its shard.
    pub fn tensors(&self) -> impl Iterator<Item = (&str, &Path)> + '_ {
        self.tensors
            .iter()
            .filter_map(|(t, &i)| Some((t.as_str(), self.shards.get(i)?.as_path())))
    }

    /// How many tensors it names.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether it names no tensor (never true of an index that [`read`](Index::read)
    /// accepted).
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_json_names_are_indexes() {
        assert!(is_index(Path::new("/m/model.safetensors.index.json")));
        assert!(is_index(Path::new("x.JSON")));
        assert!(!is_index(Path::new("model-00001-of-00002.safetensors")));
        assert!(!is_index(Path::new("json")));
    }
}
