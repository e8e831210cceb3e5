//! The loader's one error type. Every variant about a file names it: a checkpoint has many
//! shards, and "invalid header" alone would leave the user to find which.

use std::path::PathBuf;

/// Why a checkpoint could not be loaded. Nothing is returned when any part fails: the
/// device memory of a failed load is freed before the error comes back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// No shard was given.
    #[error("no safetensors file to load")]
    NoShards,
    /// An option is out of its range.
    #[error("invalid loader option: {0}")]
    Option(String),
    /// A shard cannot be opened, measured or read.
    #[error("{}: {what}: {source}", path.display())]
    Io {
        /// The shard.
        path: PathBuf,
        /// What was being done.
        what: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// A shard is neither a regular file nor a block device (a FIFO, a directory, a
    /// character device, a socket): nothing that can be read at an offset. Refused before
    /// the file is read, and without waiting for a FIFO's writer.
    #[error("{}: cannot load a {kind}: a shard must be a regular file or a block device", path.display())]
    FileType {
        /// The path given.
        path: PathBuf,
        /// What it is, in words (`FIFO`, `directory`, ...).
        kind: &'static str,
    },
    /// A checkpoint's index (`model.safetensors.index.json`) is not one, or does not agree
    /// with the shards it names: the problem in words.
    #[error("{}: not a usable checkpoint index: {why}", path.display())]
    Index {
        /// The index.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// A shard is not a valid safetensors file: the problem in words.
    #[error("{}: not a valid safetensors file: {why}", path.display())]
    Invalid {
        /// The shard.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The safetensors crate refused a shard's header.
    #[error("{}: not a valid safetensors file: {source}", path.display())]
    Format {
        /// The shard.
        path: PathBuf,
        /// The format's own error.
        #[source]
        source: safetensors::SafeTensorError,
    },
    /// Two shards hold a tensor of the same name.
    #[error("tensor {name:?} is in both {} and {}", first.display(), second.display())]
    Duplicate {
        /// The tensor's name.
        name: String,
        /// The shard it was first found in.
        first: PathBuf,
        /// The other shard.
        second: PathBuf,
    },
    /// The driver refused a shard or its memory: registration, allocation or a read.
    #[error("{}: {what}: {source}", path.display())]
    Gpu {
        /// The shard.
        path: PathBuf,
        /// What was being done.
        what: String,
        /// hipfile's error (boxed: it is large, and errors are the rare path).
        #[source]
        source: Box<hipfile::Error>,
    },
    /// A shard or index at a URL could not be listed, opened or read (the error names the
    /// URL and the range).
    #[cfg(feature = "remote")]
    #[error(transparent)]
    Remote(#[from] hipfile_remote::RemoteError),
    /// A shard ended before the bytes its header promises (it changed during the load).
    #[error("{}: the file ended at byte {at}, before the tensor data its header describes (up to byte {expected}); was it changed while loading?", path.display())]
    Short {
        /// The shard.
        path: PathBuf,
        /// Where the file ended.
        at: u64,
        /// Where the data should have ended.
        expected: u64,
    },
}
