//! [`RemoteError`]: what failed, on which object and byte range, and what to do.

use std::ops::Range;

/// An error of a remote read. Each names the URL, and where a ranged GET failed, its byte
/// range; a read that fails has filled nothing it reports as read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// The URL cannot name an object.
    #[error("{url}: {why}")]
    Url {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// A setting is out of its range.
    #[error("{0}")]
    Settings(String),
    /// The store or server has no such object (HTTP 404).
    #[error("{url}: no such object (check the bucket, the key and AWS_ENDPOINT_URL)")]
    NotFound {
        /// The URL.
        url: String,
    },
    /// The store refused the credentials (HTTP 401 or 403).
    #[error(
        "{url}: access denied ({detail}); check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and \
         AWS_SESSION_TOKEN"
    )]
    Denied {
        /// The URL.
        url: String,
        /// What the client said.
        detail: String,
    },
    /// The object changed after it was opened: its ETag is not the one pinned at the start,
    /// so the bytes read so far and those still to read may come from different objects.
    #[error(
        "{url}: the object changed during the read (bytes {}..{}: ETag {pinned} at the start, \
         {now} now); read it again",
        range.start, range.end
    )]
    Changed {
        /// The URL.
        url: String,
        /// The range whose GET saw the change.
        range: Range<u64>,
        /// The ETag at the start.
        pinned: String,
        /// What the server answered for this range (`precondition failed` when it refused
        /// the request's `If-Match`).
        now: String,
    },
    /// A ranged GET returned another number of bytes than asked.
    #[error(
        "{url}: the GET of bytes {}..{} returned {got} bytes, not {}",
        range.start, range.end, range.end - range.start
    )]
    Short {
        /// The URL.
        url: String,
        /// The range asked for.
        range: Range<u64>,
        /// The bytes received.
        got: u64,
    },
    /// A request failed after its retries: a server error, a timeout, a refused or broken
    /// connection.
    #[error("{url}: {what} failed: {detail}")]
    Request {
        /// The URL.
        url: String,
        /// The request: `HEAD`, or `GET bytes A..B`.
        what: String,
        /// What the client said, the HTTP status and retries included.
        detail: String,
    },
    /// Copying to GPU memory, or allocating staging memory, failed.
    #[error("{url}: {source}")]
    Gpu {
        /// The URL.
        url: String,
        /// hipfile's error.
        #[source]
        source: hipfile::Error,
    },
    /// The crate's own runtime cannot serve the call.
    #[error("{0}")]
    Runtime(String),
}

impl RemoteError {
    /// Maps the client's error for the request `what` (with its range, where it is a GET) of
    /// `url`, pinned to `etag`.
    pub(crate) fn from_store(
        url: &str,
        what: &str,
        range: Option<Range<u64>>,
        etag: Option<&str>,
        e: object_store::Error,
    ) -> RemoteError {
        match e {
            object_store::Error::NotFound { .. } => RemoteError::NotFound {
                url: url.to_owned(),
            },
            object_store::Error::PermissionDenied { source, .. }
            | object_store::Error::Unauthenticated { source, .. } => RemoteError::Denied {
                url: url.to_owned(),
                detail: source.to_string(),
            },
            object_store::Error::Precondition { .. } => RemoteError::Changed {
                url: url.to_owned(),
                range: range.unwrap_or(0..0),
                pinned: etag.unwrap_or("(none)").to_owned(),
                now: "precondition failed".to_owned(),
            },
            other => RemoteError::Request {
                url: url.to_owned(),
                what: what.to_owned(),
                detail: with_causes(&other),
            },
        }
    }
}

/// `e`'s text followed by each cause's that it does not already say ("error sending
/// request" alone hides a timeout or a refused connection).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let said = c.to_string();
        if !said.is_empty() && !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Chain(&'static str, Option<Box<Chain>>);

    impl std::fmt::Display for Chain {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Chain {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|c| c as _)
        }
    }

    #[test]
    fn causes_are_added_once() {
        let e = Chain(
            "HTTP error: error sending request",
            Some(Box::new(Chain(
                "error sending request",
                Some(Box::new(Chain("operation timed out", None))),
            ))),
        );
        assert_eq!(
            with_causes(&e),
            "HTTP error: error sending request: operation timed out"
        );
    }
}
