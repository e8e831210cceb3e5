//! A shard's header: read with `pread` (the 8-byte length, then the JSON), parsed and
//! validated by the safetensors crate's [`Metadata`], and checked against the file's size.
//! Only the header is read into host memory, never the tensor data.

use crate::error::LoadError;
use rustix::fs::OFlags;
use safetensors::tensor::{Metadata, TensorInfo};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The safetensors crate's own bound on a header (100 MB), which it keeps private.
pub const MAX_HEADER: u64 = 100_000_000;

/// One tensor of a shard, as its header describes it, with offsets in the file.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    pub info: TensorInfo,
    /// File offset of the first byte.
    pub start: u64,
    /// File offset past the last byte.
    pub end: u64,
}

/// An open shard whose header is valid.
#[derive(Debug)]
pub struct Shard {
    pub path: PathBuf,
    pub source: Source,
    /// The tensors in file order.
    pub tensors: Vec<Entry>,
    /// The header's `__metadata__`, when it has one.
    pub metadata: Option<std::collections::HashMap<String, String>>,
}

fn io(path: &Path, what: &str) -> impl FnOnce(std::io::Error) -> LoadError {
    let path = path.to_path_buf();
    let what = what.to_owned();
    move |source| LoadError::Io { path, what, source }
}

fn invalid(path: &Path, why: String) -> LoadError {
    LoadError::Invalid {
        path: path.to_path_buf(),
        why,
    }
}

/// Opens `path` for reading, refusing what is not a regular file or a block device before
/// anything is read from it. The open has `O_NONBLOCK`, so that a FIFO without a writer is
/// refused at once instead of blocking the open; the flag is cleared again for the file
/// (the driver reopens a registered file with its descriptor's flags). Returns the file and
/// its size (a block device's from `lseek`).
pub fn open_checked(path: &Path) -> Result<(File, u64), LoadError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags((OFlags::NONBLOCK | OFlags::NOCTTY).bits() as i32)
        .open(path)
        .map_err(io(path, "cannot open"))?;
    let meta = file.metadata().map_err(io(path, "cannot stat"))?;
    let kind = meta.file_type();
    let size = if kind.is_file() {
        meta.len()
    } else if kind.is_block_device() {
        (&file)
            .seek(SeekFrom::End(0))
            .map_err(io(path, "cannot find the size of the block device"))?
    } else {
        return Err(LoadError::FileType {
            path: path.to_path_buf(),
            kind: kind_name(&kind),
        });
    };
    let flags = rustix::fs::fcntl_getfl(&file)
        .and_then(|f| rustix::fs::fcntl_setfl(&file, f - OFlags::NONBLOCK))
        .map_err(|e| LoadError::Io {
            path: path.to_path_buf(),
            what: "cannot clear O_NONBLOCK".into(),
            source: e.into(),
        });
    flags.map(|()| (file, size))
}

/// What a file that is neither regular nor a block device is, in words.
fn kind_name(kind: &std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        "directory"
    } else if kind.is_fifo() {
        "FIFO"
    } else if kind.is_socket() {
        "socket"
    } else if kind.is_char_device() {
        "character device"
    } else if kind.is_symlink() {
        "symbolic link"
    } else {
        "file of an unknown type"
    }
}

/// A header's `__metadata__`.
pub type HeaderMetadata = std::collections::HashMap<String, String>;

/// Where a shard's bytes are: a local file, or an object read by ranged GETs.
#[derive(Debug)]
pub enum Source {
    /// A regular file or a block device.
    File(File),
    /// An object of an S3-compatible store or an HTTP(S) server.
    #[cfg(feature = "remote")]
    Remote(Box<hipfile_remote::RemoteFile>),
}

/// Opens `path` and validates its header: the length within the file, the JSON as the
/// safetensors crate reads it (dtypes, shapes against offsets, offsets contiguous from 0,
/// so no two tensors overlap), and the data section ending exactly at the end of the file.
/// Only regular files and block devices are read ([`open_checked`]).
pub fn open(path: &Path) -> Result<Shard, LoadError> {
    let (file, size) = open_checked(path)?;
    let (tensors, metadata) = parse(path, size, |buf, at| {
        file.read_exact_at(buf, at).map_err(io(
            path,
            if at == 0 {
                "cannot read the header's length"
            } else {
                "cannot read the header"
            },
        ))
    })?;
    Ok(Shard {
        path: path.to_path_buf(),
        source: Source::File(file),
        tensors,
        metadata,
    })
}

/// The tensors and `__metadata__` of the shard named `path` of `size` bytes, whose bytes
/// `read_at(buf, offset)` fills exactly, validated as [`open`] says.
pub fn parse(
    path: &Path,
    size: u64,
    mut read_at: impl FnMut(&mut [u8], u64) -> Result<(), LoadError>,
) -> Result<(Vec<Entry>, Option<HeaderMetadata>), LoadError> {
    if size < 8 {
        return Err(invalid(
            path,
            format!("the file has {size} bytes, fewer than the 8 of the header's length"),
        ));
    }
    let mut len = [0u8; 8];
    read_at(&mut len, 0)?;
    let n = u64::from_le_bytes(len);
    // A JSON file (an index under another name, most likely) gives a length from its first
    // eight characters that makes no sense: say what the file looks like.
    let looks_like_json = if len[0] == b'{' {
        "; the file starts with `{`, as JSON does: a checkpoint's index \
         (model.safetensors.index.json) is read as one when its name ends in .json"
    } else {
        ""
    };
    if n > MAX_HEADER {
        return Err(invalid(
            path,
            format!(
                "the header's length is {n} bytes, more than the format's {MAX_HEADER}\
                 {looks_like_json}"
            ),
        ));
    }
    if n > size - 8 {
        return Err(invalid(
            path,
            format!(
                "the header's length is {n} bytes but the file has only {} after the length\
                 {looks_like_json}",
                size - 8
            ),
        ));
    }
    // n <= MAX_HEADER, so it fits in memory and in usize.
    let mut json = vec![0u8; n as usize];
    read_at(&mut json, 8)?;
    let text = std::str::from_utf8(&json).map_err(|e| LoadError::Format {
        path: path.to_path_buf(),
        source: safetensors::SafeTensorError::InvalidHeader(e),
    })?;
    let metadata: Metadata = serde_json::from_str(text).map_err(|e| LoadError::Format {
        path: path.to_path_buf(),
        source: safetensors::SafeTensorError::InvalidHeaderDeserialization(e),
    })?;
    let data_start = 8 + n;
    let data_len = metadata.data_len() as u64;
    let have = size - data_start;
    if data_len > have {
        return Err(invalid(
            path,
            format!(
                "the header describes {data_len} bytes of tensor data but the file has only {have} after the header (truncated?)"
            ),
        ));
    }
    if data_len < have {
        return Err(invalid(
            path,
            format!(
                "the file has {} bytes after the last tensor's data (the format allows none)",
                have - data_len
            ),
        ));
    }
    let tensors = metadata
        .offset_keys()
        .into_iter()
        .filter_map(|name| {
            let info = metadata.info(&name)?.clone();
            let (s, e) = info.data_offsets;
            Some(Entry {
                start: data_start + s as u64,
                end: data_start + e as u64,
                name,
                info,
            })
        })
        .collect();
    Ok((tensors, metadata.metadata().clone()))
}
