//! [`RemoteSettings`]: how large and how many ranged GETs, and how long each may take.

use crate::error::RemoteError;
use std::time::Duration;

/// What S3 is reached with, given in code; each one given wins over its `AWS_*` variable,
/// each one left `None` comes from the environment (see the crate's documentation).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct S3Settings {
    /// The endpoint of an S3-compatible server (`AWS_ENDPOINT_URL`); requests to it are
    /// path-style. `http://` is allowed when given here.
    pub endpoint: Option<String>,
    /// The region (`AWS_REGION`).
    pub region: Option<String>,
    /// The access key id (`AWS_ACCESS_KEY_ID`).
    pub access_key_id: Option<String>,
    /// The secret access key (`AWS_SECRET_ACCESS_KEY`).
    pub secret_access_key: Option<String>,
    /// The session token (`AWS_SESSION_TOKEN`).
    pub session_token: Option<String>,
}

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |v: &Option<String>| v.as_ref().map(|_| "(given)");
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &hidden(&self.secret_access_key))
            .field("session_token", &hidden(&self.session_token))
            .finish()
    }
}

/// How a remote read is cut into ranged GETs, and the limits on each. Staging memory is
/// `concurrency × request_size` bytes of pinned host memory at most, per read in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteSettings {
    /// Bytes per ranged GET (default 8 MiB).
    pub request_size: usize,
    /// Ranged GETs in flight at once (default 16).
    pub concurrency: usize,
    /// The longest one request may take, its body included, before it fails (and is retried
    /// while retries are left; default 30 s).
    pub timeout: Duration,
    /// The longest connecting may take (default 5 s).
    pub connect_timeout: Duration,
    /// Retries of a request that failed with a server error (5xx), throttling (429), a
    /// timeout or a broken connection, with exponential backoff and jitter (default 3).
    pub retries: usize,
    /// No retry starts after this long since the request's first try (default 60 s).
    pub retry_timeout: Duration,
    /// S3's endpoint, region and credentials where given in code.
    pub s3: S3Settings,
}

/// The largest request size: 1 GiB.
pub const MAX_REQUEST_SIZE: usize = 1 << 30;
/// The most requests in flight: 256.
pub const MAX_CONCURRENCY: usize = 256;

impl Default for RemoteSettings {
    fn default() -> RemoteSettings {
        RemoteSettings {
            request_size: 8 << 20,
            concurrency: 16,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            retries: 3,
            retry_timeout: Duration::from_secs(60),
            s3: S3Settings::default(),
        }
    }
}

impl RemoteSettings {
    /// Checks the settings' ranges.
    ///
    /// # Errors
    ///
    /// [`RemoteError::Settings`] naming the setting, its value and its range.
    pub fn check(&self) -> Result<(), RemoteError> {
        if !(4096..=MAX_REQUEST_SIZE).contains(&self.request_size) {
            return Err(RemoteError::Settings(format!(
                "request size {} is outside 4096..={MAX_REQUEST_SIZE} bytes",
                self.request_size
            )));
        }
        if !(1..=MAX_CONCURRENCY).contains(&self.concurrency) {
            return Err(RemoteError::Settings(format!(
                "concurrency {} is outside 1..={MAX_CONCURRENCY}",
                self.concurrency
            )));
        }
        if self.timeout.is_zero() || self.connect_timeout.is_zero() {
            return Err(RemoteError::Settings(
                "a timeout of 0 would fail every request: give a positive duration".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_stay_out_of_debug() {
        let s = S3Settings {
            access_key_id: Some("AKID".into()),
            secret_access_key: Some("very-secret".into()),
            session_token: Some("token-secret".into()),
            ..S3Settings::default()
        };
        let shown = format!("{s:?}");
        assert!(shown.contains("AKID"), "{shown}");
        assert!(!shown.contains("secret\""), "{shown}");
        assert!(
            !shown.contains("very-secret") && !shown.contains("token-secret"),
            "{shown}"
        );
    }

    #[test]
    fn defaults_pass_and_bad_values_are_named() {
        assert!(RemoteSettings::default().check().is_ok());
        let e = RemoteSettings {
            request_size: 100,
            ..RemoteSettings::default()
        }
        .check()
        .unwrap_err()
        .to_string();
        assert!(e.contains("request size 100"), "{e}");
        let e = RemoteSettings {
            concurrency: 0,
            ..RemoteSettings::default()
        }
        .check()
        .unwrap_err()
        .to_string();
        assert!(e.contains("concurrency 0"), "{e}");
        assert!(
            RemoteSettings {
                timeout: Duration::ZERO,
                ..RemoteSettings::default()
            }
            .check()
            .is_err()
        );
    }
}
