//! A checkpoint's inventory: every shard opened and its header validated, names unique
//! across shards, indexes checked against the shards they name. What a framework needs to
//! allocate its own tensors before the bytes are read into them ([`Loader::read_into`]),
//! and what [`Loader::load`] starts from.
//!
//! [`Loader::read_into`]: crate::Loader::read_into
//! [`Loader::load`]: crate::Loader::load

use crate::error::LoadError;
use crate::header::{self, Shard};
use crate::index::{Index, is_index};
use hipfile::DeviceBuffer;
use safetensors::Dtype;
use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

/// The shards of a checkpoint, open, with valid headers. Made by [`Inventory::open`].
#[derive(Debug)]
pub struct Inventory {
    pub(crate) shards: Vec<Shard>,
    /// Each tensor's shard and its place in that shard's tensors.
    by_name: HashMap<String, (usize, usize)>,
}

/// One tensor as a shard's header describes it.
#[derive(Debug, Clone)]
pub struct TensorInfo<'i> {
    /// Its name.
    pub name: &'i str,
    /// Its element type.
    pub dtype: Dtype,
    /// Its shape.
    pub shape: &'i [usize],
    /// The shard that holds it (a number of [`Inventory::shard_paths`]).
    pub shard: usize,
    /// Its bytes in that file: offsets from the file's start.
    pub bytes: Range<u64>,
}

impl Inventory {
    /// Opens `paths` (files, or checkpoint indexes standing for the shards they name, as
    /// [`Loader::load`](crate::Loader::load) takes them) and validates every header, without
    /// reading any tensor data.
    ///
    /// # Errors
    ///
    /// [`LoadError`] naming the shard or index: a shard that cannot be opened or is not a
    /// valid safetensors file (truncated, overlapping tensors, an unknown dtype, a shape that
    /// disagrees with its bytes), a name in two shards, an index naming a tensor its shard
    /// lacks, or a shard an index names that does not exist.
    pub fn open<P: AsRef<Path>>(paths: &[P]) -> Result<Inventory, LoadError> {
        if paths.is_empty() {
            return Err(LoadError::NoShards);
        }
        let (paths, indexes) = expand(paths)?;
        let shards: Vec<Shard> = paths
            .iter()
            .map(|(p, from)| {
                header::open(p).map_err(|e| match (e, from) {
                    (LoadError::Io { path, what, source }, Some(i)) => LoadError::Io {
                        what: format!(
                            "{what} the shard that the index {} names",
                            indexes[*i].path().display()
                        ),
                        path,
                        source,
                    },
                    (e, _) => e,
                })
            })
            .collect::<Result<_, _>>()?;
        Inventory::from_shards(shards, &indexes)
    }

    /// The inventory of `shards`, whose headers are valid, checked against `indexes`.
    pub(crate) fn from_shards(
        shards: Vec<Shard>,
        indexes: &[Index],
    ) -> Result<Inventory, LoadError> {
        check_indexes(indexes, &shards)?;
        let mut by_name: HashMap<String, (usize, usize)> = HashMap::new();
        for (i, s) in shards.iter().enumerate() {
            for (t, tensor) in s.tensors.iter().enumerate() {
                if let Some(&(first, _)) = by_name.get(tensor.name.as_str()) {
                    return Err(LoadError::Duplicate {
                        name: tensor.name.clone(),
                        first: shards[first].path.clone(),
                        second: s.path.clone(),
                    });
                }
                by_name.insert(tensor.name.clone(), (i, t));
            }
        }
        Ok(Inventory { shards, by_name })
    }

    /// The shards, in the order they were given (an index's in the order it names them).
    pub fn shard_paths(&self) -> impl ExactSizeIterator<Item = &Path> + '_ {
        self.shards.iter().map(|s| s.path.as_path())
    }

    /// The `__metadata__` of shard `shard`'s header, if it has one (`None` too for a shard
    /// number out of range).
    pub fn metadata(&self, shard: usize) -> Option<&HashMap<String, String>> {
        self.shards.get(shard)?.metadata.as_ref()
    }

    /// Every tensor, shard by shard, each shard's in file order.
    pub fn tensors(&self) -> impl Iterator<Item = TensorInfo<'_>> + '_ {
        self.shards
            .iter()
            .enumerate()
            .flat_map(|(i, s)| s.tensors.iter().map(move |e| info(i, e)))
    }

    /// The tensor named `name`.
    pub fn get(&self, name: &str) -> Option<TensorInfo<'_>> {
        let &(shard, t) = self.by_name.get(name)?;
        Some(info(shard, &self.shards[shard].tensors[t]))
    }

    /// Whether the shards' tensor bytes are mostly outside the page cache, by the rule a
    /// load decides hot or cold with ([`CacheState::Detect`]); `None` where the kernel
    /// cannot say or a shard is not a local file.
    ///
    /// [`CacheState::Detect`]: crate::CacheState::Detect
    pub fn is_cold(&self) -> Option<bool> {
        let (mut cached, mut total) = (0u64, 0u64);
        for s in &self.shards {
            let (Some(first), Some(last)) = (s.tensors.first(), s.tensors.last()) else {
                continue;
            };
            // Without the `remote` feature, `Source` has one variant.
            #[allow(irrefutable_let_patterns)]
            let header::Source::File(file) = &s.source else {
                return None;
            };
            let len = last.end.saturating_sub(first.start);
            cached += crate::cache::cached_bytes(file, first.start, len)?;
            total += len;
        }
        Some(crate::cache::mostly_uncached(cached, total))
    }

    /// How many tensors the checkpoint has.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether it has none.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

fn info(shard: usize, e: &header::Entry) -> TensorInfo<'_> {
    TensorInfo {
        name: &e.name,
        dtype: e.info.dtype,
        shape: &e.info.shape,
        shard,
        bytes: e.start..e.end,
    }
}

/// Memory the caller allocated for some of a tensor's bytes: what
/// [`Loader::read_into`](crate::Loader::read_into) reads into.
#[derive(Debug)]
pub struct Target {
    pub(crate) shard: usize,
    pub(crate) bytes: Range<u64>,
    pub(crate) buffer: DeviceBuffer,
}

impl Target {
    /// The bytes `within` (offsets from the tensor's first byte) of the tensor `name`, to be
    /// read into the start of `buffer`.
    ///
    /// # Errors
    ///
    /// [`LoadError::Option`] when the inventory has no such tensor, `within` is not inside
    /// the tensor's bytes, or `buffer` is shorter than `within`.
    pub fn new(
        inventory: &Inventory,
        name: &str,
        within: Range<u64>,
        buffer: DeviceBuffer,
    ) -> Result<Target, LoadError> {
        let t = inventory
            .get(name)
            .ok_or_else(|| LoadError::Option(format!("the checkpoint has no tensor {name:?}")))?;
        let len = t.bytes.end - t.bytes.start;
        if within.start > within.end || within.end > len {
            return Err(LoadError::Option(format!(
                "bytes {}..{} are not inside tensor {name:?}, which has {len}",
                within.start, within.end
            )));
        }
        if (buffer.len() as u64) < within.end - within.start {
            return Err(LoadError::Option(format!(
                "a buffer of {} bytes cannot hold bytes {}..{} of tensor {name:?}",
                buffer.len(),
                within.start,
                within.end
            )));
        }
        Ok(Target {
            shard: t.shard,
            bytes: t.bytes.start + within.start..t.bytes.start + within.end,
            buffer,
        })
    }

    /// The memory the bytes are read into.
    pub fn buffer(&self) -> &DeviceBuffer {
        &self.buffer
    }

    /// The memory, given back.
    pub fn into_buffer(self) -> DeviceBuffer {
        self.buffer
    }
}

/// A shard to open, and the number of the index that named it, if one did.
type ToOpen = (PathBuf, Option<usize>);

/// The shards to open, in order: each path given, or, for an index ([`is_index`]), the
/// shards it names; and the indexes read.
fn expand<P: AsRef<Path>>(given: &[P]) -> Result<(Vec<ToOpen>, Vec<Index>), LoadError> {
    let mut paths = Vec::with_capacity(given.len());
    let mut indexes = Vec::new();
    for p in given {
        let p = p.as_ref();
        if is_index(p) {
            let index = Index::read(p)?;
            let i = indexes.len();
            paths.extend(index.shards().iter().map(|s| (s.clone(), Some(i))));
            indexes.push(index);
        } else {
            paths.push((p.to_path_buf(), None));
        }
    }
    Ok((paths, indexes))
}

/// Every tensor each index names is in the shard it names it in.
fn check_indexes(indexes: &[Index], opened: &[Shard]) -> Result<(), LoadError> {
    if indexes.is_empty() {
        return Ok(());
    }
    let mut names: HashMap<&Path, HashSet<&str>> = HashMap::new();
    for s in opened {
        names
            .entry(s.path.as_path())
            .or_insert_with(|| s.tensors.iter().map(|t| t.name.as_str()).collect());
    }
    for index in indexes {
        for (tensor, shard) in index.tensors() {
            if !names.get(shard).is_some_and(|n| n.contains(tensor)) {
                return Err(LoadError::Index {
                    path: index.path().to_path_buf(),
                    why: format!(
                        "it names the tensor {tensor:?} in {}, which has no such tensor",
                        shard.display()
                    ),
                });
            }
        }
    }
    Ok(())
}
