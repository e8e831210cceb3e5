//! Where an object is: `s3://BUCKET/KEY` or `http(s)://HOST[:PORT]/PATH`, parsed and checked
//! before any request is made.

use crate::error::RemoteError;

/// A parsed remote location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// An object of an S3-compatible store; the endpoint, region and credentials come from
    /// the environment.
    S3 {
        /// The bucket.
        bucket: String,
        /// The object's key (no leading `/`).
        key: String,
    },
    /// A file served over HTTP or HTTPS.
    Http {
        /// `scheme://host[:port]`.
        origin: String,
        /// The path on that server, percent-encoded as given, without the leading `/`.
        path: String,
    },
}

/// The schemes [`Location::parse`] reads.
pub const SCHEMES: [&str; 3] = ["s3://", "http://", "https://"];

/// Whether `text` is a URL this crate reads (`s3://`, `http://`, `https://`), as opposed to
/// a local path: what the loader, the CLI and the Python package tell them apart with.
pub fn is_url(text: &str) -> bool {
    SCHEMES.iter().any(|scheme| text.starts_with(scheme))
}

impl Location {
    /// Parses `url`.
    ///
    /// # Errors
    ///
    /// [`RemoteError::Url`] saying what is wrong: another scheme, no bucket or host, no key
    /// or path, or a key that names a prefix (ends in `/`).
    pub fn parse(url: &str) -> Result<Location, RemoteError> {
        let bad = |why: &str| RemoteError::Url {
            url: url.to_owned(),
            why: why.to_owned(),
        };
        if let Some(rest) = url.strip_prefix("s3://") {
            let (bucket, key) = rest
                .split_once('/')
                .ok_or_else(|| bad("no key: write s3://BUCKET/KEY"))?;
            if bucket.is_empty() {
                return Err(bad("no bucket: write s3://BUCKET/KEY"));
            }
            if key.is_empty() || key.ends_with('/') {
                return Err(bad(
                    "the key names no object (empty, or a prefix ending in /)",
                ));
            }
            return Ok(Location::S3 {
                bucket: bucket.to_owned(),
                key: key.to_owned(),
            });
        }
        let scheme = if url.starts_with("http://") {
            "http://"
        } else if url.starts_with("https://") {
            "https://"
        } else {
            return Err(bad(
                "not a remote URL: write s3://BUCKET/KEY, http://HOST/PATH or https://HOST/PATH",
            ));
        };
        let rest = &url[scheme.len()..];
        let (host, path) = rest
            .split_once('/')
            .ok_or_else(|| bad("no path after the host"))?;
        if host.is_empty() {
            return Err(bad("no host"));
        }
        if path.is_empty() || path.ends_with('/') {
            return Err(bad(
                "the path names no file (empty, or a directory ending in /)",
            ));
        }
        if path.contains(['?', '#']) {
            return Err(bad("a query or fragment is not supported in the URL"));
        }
        Ok(Location::Http {
            origin: format!("{scheme}{host}"),
            path: path.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths() {
        assert!(is_url("s3://b/k") && is_url("https://h/p") && is_url("http://h/p"));
        assert!(!is_url("/tmp/s3://x") && !is_url("./s3:/b/k") && !is_url("model.safetensors"));
    }

    #[test]
    fn s3_urls() {
        assert_eq!(
            Location::parse("s3://models/llama/model-00001.safetensors").unwrap(),
            Location::S3 {
                bucket: "models".into(),
                key: "llama/model-00001.safetensors".into()
            }
        );
        for bad in [
            "s3://",
            "s3://bucket",
            "s3:///key",
            "s3://bucket/",
            "s3://b/dir/",
        ] {
            let e = Location::parse(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn http_urls() {
        assert_eq!(
            Location::parse("http://127.0.0.1:9000/files/a%20b.bin").unwrap(),
            Location::Http {
                origin: "http://127.0.0.1:9000".into(),
                path: "files/a%20b.bin".into()
            }
        );
        assert!(matches!(
            Location::parse("https://example.com/x").unwrap(),
            Location::Http { .. }
        ));
        for bad in [
            "http://",
            "http://host",
            "https:///x",
            "http://host/dir/",
            "http://host/x?y=1",
            "ftp://host/x",
            "/local/file",
        ] {
            assert!(Location::parse(bad).is_err(), "{bad}");
        }
    }
}
