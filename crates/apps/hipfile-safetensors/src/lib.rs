//! Loads safetensors checkpoints into GPU memory through hipfile, faster than reading them
//! into host memory first: each shard's tensor data is read straight into one device buffer
//! per shard (per shard and device, with a device per tensor), in large requests with many in flight at once on the driver's engine
//! ([`hipfile::FileHandle::read_at_async`]).
//!
//! The format is the `safetensors` crate's: headers are parsed and validated by its
//! [`safetensors::tensor::Metadata`], from the header bytes alone (read with `pread`), so this
//! crate accepts and refuses what the format's reference does. It adds what a loader needs:
//! every shard validated before anything is allocated, duplicate names across shards
//! refused, a read plan that keeps the fastpath's alignment, and all-or-nothing errors that
//! name the shard.
//!
//! A framework that allocates its own tensors opens the checkpoint's [`Inventory`] (every
//! header validated, nothing allocated), allocates, and has [`Loader::read_into`] read each
//! tensor, or a range of one ([`Target`]), into its memory with the same requests and window.
//!
//! It does not convert dtypes, build framework tensors or write checkpoints; it never holds
//! tensor data in host memory (the fallback's staging pool bounds the host memory a load
//! uses, whatever the checkpoint's size). It depends on the `hipfile` facade only.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # // Runs only with a runtime named (as `cargo xtask ci` does); compiles in any case.
//! # if std::env::var_os("HIPFILE_HIP_LIBRARY").is_none() { return Ok(()); }
//! # let dir = std::env::temp_dir().join(format!("hipfile-doc-st-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir)?;
//! # let path = dir.join("model.safetensors");
//! # let data: Vec<u8> = (0..4096u32).map(|i| i as u8).collect();
//! # let view = safetensors::tensor::TensorView::new(safetensors::Dtype::BF16, vec![32, 64], &data)?;
//! # safetensors::serialize_to_file([("model.embed.weight", view)], None, &path)?;
//! use hipfile_safetensors::Loader;
//!
//! let driver = hipfile::Driver::open()?;
//! let checkpoint = Loader::new(&driver)
//!     .filter("model.*")
//!     .progress(|p| eprintln!("{} of {} bytes", p.done, p.total))
//!     .load(&[&path])?;
//! let embed = checkpoint.get("model.embed.weight").ok_or("not loaded")?;
//! assert_eq!(embed.shape(), [32, 64]);
//! // The tensor's bytes, in device memory.
//! let mut host = vec![0u8; embed.byte_len()];
//! embed.view().copy_to_host(&mut host)?;
//! assert_eq!(host, data);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```

#![deny(unsafe_code)]

mod cache;
mod error;
#[cfg(feature = "remote")]
mod fetch;
mod glob;
mod header;
mod index;
mod inventory;
mod load;
mod plan;
#[cfg(feature = "remote")]
mod remote;
mod report;
mod views;

pub use error::LoadError;
pub use glob::Glob;
#[cfg(feature = "remote")]
pub use hipfile_remote::{RemoteError, RemoteSettings, S3Settings, is_url};
pub use index::{Index, is_index};
pub use inventory::{Inventory, Target, TensorInfo};
pub use load::{
    COLD_BELOW, CacheState, Checkpoint, DEFAULT_COLD_IN_FLIGHT, DEFAULT_COLD_REQUEST_SIZE,
    DEFAULT_HOT_IN_FLIGHT, DEFAULT_REQUEST_SIZE, LoadReport, Loader, MAX_REQUEST_SIZE, Progress,
    Tensor,
};
/// The safetensors crate this one reads the format with (for its [`Dtype`] and writers).
pub use safetensors;
pub use safetensors::Dtype;

/// Whether `file`'s bytes `offset..offset + len` are mostly outside the page cache, as the
/// loader decides it ([`CacheState::Detect`]); `None` where the kernel cannot say.
pub fn is_cold(file: &std::fs::File, offset: u64, len: u64) -> Option<bool> {
    cache::cached_bytes(file, offset, len).map(|c| cache::mostly_uncached(c, len))
}

// The Rust snippets of the README, compiled as doc tests so that they keep up with the API
// (`cargo xtask docs` checks that they are here).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
