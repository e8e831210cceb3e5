//! Checkpoints at URLs (the `remote` feature): shards and indexes of S3-compatible stores
//! and HTTP(S) servers, their headers read with ranged GETs and their tensor data read
//! straight into the parts' device buffers by `hipfile-remote`.

use crate::error::LoadError;
use crate::header::{self, Shard, Source};
use crate::index::{Index, is_index};
use crate::inventory::Inventory;
use crate::load::{Checkpoint, Loader};
use hipfile::Driver;
use hipfile_remote::{RemoteFile, RemoteSettings};
use std::path::{Path, PathBuf};

/// The index's name that a prefix's listing is loaded through, when the prefix has one.
const INDEX_NAME: &str = "model.safetensors.index.json";

impl Inventory {
    /// Opens the checkpoint at `urls` and validates every header (ranged GETs of the header
    /// alone, no tensor data): each URL a shard, an index (`…/model.safetensors.index.json`,
    /// standing for the shards it names beside it), or an `s3://BUCKET/PREFIX/` prefix,
    /// which stands for its `model.safetensors.index.json` if it has one, else for its
    /// `*.safetensors` objects in name order (its own objects, not those of the folders
    /// below it).
    ///
    /// # Errors
    ///
    /// [`LoadError::Remote`] for what the server refused or could not serve;
    /// [`LoadError`]s of the headers and indexes as for local files.
    pub fn open_urls(
        driver: &Driver,
        urls: &[&str],
        settings: &RemoteSettings,
    ) -> Result<Inventory, LoadError> {
        if urls.is_empty() {
            return Err(LoadError::NoShards);
        }
        let mut shard_urls: Vec<String> = Vec::new();
        let mut indexes = Vec::new();
        for &url in urls {
            if url.ends_with('/') {
                // The prefix's own objects: those of folders below it are another model's.
                let listed: Vec<String> = hipfile_remote::list(url, settings)?
                    .into_iter()
                    .filter(|u| u.strip_prefix(url).is_some_and(|name| !name.contains('/')))
                    .collect();
                if let Some(index) = listed
                    .iter()
                    .find(|u| u.ends_with(&format!("/{INDEX_NAME}")))
                {
                    let index = read_index(driver, index, settings)?;
                    shard_urls.extend(index.shards().iter().map(|p| p.display().to_string()));
                    indexes.push(index);
                } else {
                    let shards: Vec<String> = listed
                        .into_iter()
                        .filter(|u| u.ends_with(".safetensors"))
                        .collect();
                    if shards.is_empty() {
                        return Err(LoadError::Option(format!(
                            "{url} holds no {INDEX_NAME} and no .safetensors object"
                        )));
                    }
                    shard_urls.extend(shards);
                }
            } else if is_index(Path::new(url)) {
                let index = read_index(driver, url, settings)?;
                shard_urls.extend(index.shards().iter().map(|p| p.display().to_string()));
                indexes.push(index);
            } else {
                shard_urls.push(url.to_owned());
            }
        }
        let shards = shard_urls
            .iter()
            .map(|url| open_shard(driver, url, settings))
            .collect::<Result<Vec<_>, _>>()?;
        Inventory::from_shards(shards, &indexes)
    }
}

/// Reads and parses the index at `url`.
fn read_index(driver: &Driver, url: &str, settings: &RemoteSettings) -> Result<Index, LoadError> {
    let object = RemoteFile::open(driver, url, settings.clone())?;
    let path = PathBuf::from(url);
    if object.size() > header::MAX_HEADER {
        return Err(LoadError::Index {
            path,
            why: format!(
                "it has {} bytes, more than the {} an index may have",
                object.size(),
                header::MAX_HEADER
            ),
        });
    }
    let mut bytes = vec![0u8; object.size() as usize];
    object.read_to_host(&mut bytes, 0)?;
    let text = String::from_utf8(bytes).map_err(|e| LoadError::Index {
        path: path.clone(),
        why: format!("it is not UTF-8: {e}"),
    })?;
    Index::parse(&path, &text)
}

/// Opens the shard at `url` and validates its header.
fn open_shard(driver: &Driver, url: &str, settings: &RemoteSettings) -> Result<Shard, LoadError> {
    let object = RemoteFile::open(driver, url, settings.clone())?;
    let path = PathBuf::from(url);
    let (tensors, metadata) = header::parse(&path, object.size(), |buf, at| {
        let n = object.read_to_host(buf, at)?;
        if n == buf.len() as u64 {
            Ok(())
        } else {
            Err(LoadError::Short {
                path: path.clone(),
                at: at + n,
                expected: at + buf.len() as u64,
            })
        }
    })?;
    Ok(Shard {
        path,
        source: Source::Remote(Box::new(object)),
        tensors,
        metadata,
    })
}

impl Loader<'_> {
    /// Loads the checkpoint at `urls` (as [`Inventory::open_urls`] takes them) as
    /// [`load`](Loader::load) loads local shards: every header first, then one device buffer
    /// per part, filled by ranged GETs of the tensors' bytes (`settings`: their size, how
    /// many in flight, timeouts and retries).
    ///
    /// # Errors
    ///
    /// As [`Inventory::open_urls`], and [`LoadError::Remote`] for a GET that failed (an
    /// object replaced during the load among them): nothing is returned then.
    pub fn load_urls(
        self,
        urls: &[&str],
        settings: &RemoteSettings,
    ) -> Result<Checkpoint, LoadError> {
        let opened = Inventory::open_urls(self.driver(), urls, settings)?.shards;
        self.load_opened(opened)
    }
}
