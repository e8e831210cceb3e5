//! Objects of S3-compatible stores and files of HTTP(S) servers read straight into GPU
//! memory: many concurrent ranged GETs into bounded pinned staging, each part copied to the
//! device as it arrives.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use hipfile::Driver;
//! use hipfile_remote::{RemoteFile, RemoteSettings};
//!
//! let driver = Driver::open()?;
//! // Credentials and the endpoint come from AWS_* variables (see `RemoteFile::open`).
//! let object = RemoteFile::open(&driver, "s3://models/llama/model.safetensors", RemoteSettings::default())?;
//! let mut gpu = driver.alloc(object.size() as usize)?;
//! let n = object.read(gpu.slice_mut(..)?, 0)?;
//! assert_eq!(n, object.size());
//! # Ok(())
//! # }
//! ```
//!
//! The client is the `object_store` crate (S3: SigV4, path-style requests for S3-compatible
//! endpoints, retries with backoff; HTTP), in this crate only, so that local-only users
//! build no HTTP stack.
//!
//! # Credentials
//!
//! What [`S3Settings`] gives in code is used first. The rest comes from the environment: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN`, `AWS_REGION` (us-east-1 when unset), and `AWS_ENDPOINT_URL` for an
//! S3-compatible server, addressed path-style (`ENDPOINT/BUCKET/KEY`); without keys, the web
//! identity (`AWS_WEB_IDENTITY_TOKEN_FILE`, `AWS_ROLE_ARN`), the ECS task role and the EC2
//! instance metadata service. The AWS CLI's files (`~/.aws/config`, `~/.aws/credentials`,
//! `AWS_PROFILE`) are not read: the client does not support them. An `http://` endpoint is
//! used only when it is given as such (`AWS_ENDPOINT_URL=http://...` or
//! [`S3Settings::endpoint`]), or with `AWS_ALLOW_HTTP=true`.

#![forbid(unsafe_code)]

mod error;
mod file;
mod list;
mod location;
mod runtime;
mod settings;
mod store;

pub use error::RemoteError;
pub use file::RemoteFile;
pub use list::list;
pub use location::{Location, is_url};
pub use settings::{MAX_CONCURRENCY, MAX_REQUEST_SIZE, RemoteSettings, S3Settings};

// The README's examples, compiled as doc tests (`cargo xtask docs` checks that they are here).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
