//! The client of a [`Location`]: object_store's S3 or HTTP store, configured from the
//! environment (S3) and from [`RemoteSettings`] (timeouts, retries).
//!
//! S3: `AmazonS3Builder::from_env` reads the `AWS_*` variables (the crate's documentation
//! lists them), then what [`S3Settings`](crate::S3Settings) gives in code replaces them.

use crate::error::RemoteError;
use crate::location::Location;
use crate::settings::RemoteSettings;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::http::HttpBuilder;
use object_store::path::Path;
use object_store::{BackoffConfig, ClientConfigKey, ClientOptions, ObjectStore, RetryConfig};
use std::sync::Arc;
use std::time::Duration;

/// The store that serves `location`, and the object's path in it.
pub(crate) fn connect(
    url: &str,
    location: &Location,
    settings: &RemoteSettings,
) -> Result<(Arc<dyn ObjectStore>, Path), RemoteError> {
    // Exponential backoff with jitter, as the AWS SDKs' standard retry mode, capped at 20 s.
    let retry = RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(20),
            base: 2.0,
        },
        max_retries: settings.retries,
        retry_timeout: settings.retry_timeout,
    };
    let client = ClientOptions::new()
        .with_timeout(settings.timeout)
        .with_connect_timeout(settings.connect_timeout);
    let failed = |e: object_store::Error| RemoteError::Url {
        url: url.to_owned(),
        why: format!("cannot set up its client: {e}"),
    };
    match location {
        Location::S3 { bucket, key } => {
            let given = &settings.s3;
            let mut builder = AmazonS3Builder::from_env().with_bucket_name(bucket);
            if let Some(v) = &given.endpoint {
                builder = builder.with_endpoint(v);
            }
            if let Some(v) = &given.region {
                builder = builder.with_region(v);
            }
            if let Some(v) = &given.access_key_id {
                builder = builder.with_access_key_id(v);
            }
            if let Some(v) = &given.secret_access_key {
                builder = builder.with_secret_access_key(v);
            }
            if let Some(v) = &given.session_token {
                builder = builder.with_token(v);
            }
            let http_endpoint = builder
                .get_config_value(&AmazonS3ConfigKey::Endpoint)
                .is_some_and(|e| e.starts_with("http://"));
            let allow_http = builder
                .get_config_value(&AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp))
                .is_some_and(|v| v.eq_ignore_ascii_case("true"));
            let store = builder
                .with_client_options(client.with_allow_http(http_endpoint || allow_http))
                .with_retry(retry)
                .build()
                .map_err(failed)?;
            Ok((Arc::new(store), Path::from(key.as_str())))
        }
        Location::Http { origin, path } => {
            let store = HttpBuilder::new()
                .with_url(origin)
                .with_client_options(client.with_allow_http(origin.starts_with("http://")))
                .with_retry(retry)
                .build()
                .map_err(failed)?;
            let path = Path::from_url_path(path).map_err(|e| RemoteError::Url {
                url: url.to_owned(),
                why: format!("its path is not valid: {e}"),
            })?;
            Ok((Arc::new(store), path))
        }
    }
}
