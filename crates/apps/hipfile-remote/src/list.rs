//! The objects under an S3 prefix (`s3://BUCKET/PREFIX/`), for loading a checkpoint's shards
//! by their folder.

use crate::error::RemoteError;
use crate::location::Location;
use crate::runtime::block_on;
use crate::settings::RemoteSettings;
use crate::store::connect;
use futures::StreamExt;

/// The URLs of the objects under `prefix` (`s3://BUCKET/` or `s3://BUCKET/PREFIX/`, ending in
/// `/`), sorted, each `s3://BUCKET/KEY`.
///
/// # Errors
///
/// [`RemoteError::Url`] for another URL (plain HTTP servers cannot be listed: name the files
/// or the index); the listing's errors ([`RemoteError::Denied`], [`RemoteError::Request`]).
pub fn list(prefix: &str, settings: &RemoteSettings) -> Result<Vec<String>, RemoteError> {
    settings.check()?;
    let bad = |why: &str| RemoteError::Url {
        url: prefix.to_owned(),
        why: why.to_owned(),
    };
    let rest = prefix.strip_prefix("s3://").ok_or_else(|| {
        bad("only an s3:// prefix can be listed: name the files or the checkpoint's index")
    })?;
    let (bucket, key_prefix) = rest
        .split_once('/')
        .ok_or_else(|| bad("write s3://BUCKET/PREFIX/"))?;
    if bucket.is_empty() || !prefix.ends_with('/') {
        return Err(bad("write s3://BUCKET/PREFIX/ (a prefix ends in /)"));
    }
    let location = Location::S3 {
        bucket: bucket.to_owned(),
        key: format!("{key_prefix}listing"),
    };
    let (store, _) = connect(prefix, &location, settings)?;
    let under = object_store::path::Path::from(key_prefix.trim_end_matches('/'));
    let listed: Vec<Result<object_store::ObjectMeta, object_store::Error>> =
        block_on(store.list(Some(&under)).collect())?;
    let mut urls = Vec::with_capacity(listed.len());
    for meta in listed {
        let meta = meta.map_err(|e| RemoteError::from_store(prefix, "LIST", None, None, e))?;
        urls.push(format!("s3://{bucket}/{}", meta.location));
    }
    urls.sort();
    Ok(urls)
}
