//! What a load tells its caller: [`Progress`] as it goes, [`LoadReport`] at the end. Below
//! the ways of reading, so that each fills them without importing the loader.

use std::time::Duration;

/// Bytes read so far and in all, as the progress callback gets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Bytes read so far.
    pub done: u64,
    /// Bytes the load reads in all (the selected tensors' data and what lies between
    /// neighbours read as one request).
    pub total: u64,
}

/// The progress callback.
pub(crate) type ProgressFn<'a> = Box<dyn FnMut(Progress) + 'a>;

/// How a load went: bytes per backend, requests, and how it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LoadReport {
    /// Bytes read from the files that the load needed (tensor data, and the gaps read with
    /// it).
    pub bytes_read: u64,
    /// Bytes the fastpath moved (file to GPU memory, no host copy).
    pub fastpath_bytes: u64,
    /// Bytes the fallback moved (through host staging buffers).
    pub fallback_bytes: u64,
    /// Bytes read from object storage or HTTP(S) servers (shards at URLs).
    pub remote_bytes: u64,
    /// Requests made.
    pub requests: usize,
    /// Whether the checkpoint was read as cold.
    pub cold: bool,
    /// Bytes per request.
    pub request_size: u64,
    /// Requests in flight at once.
    pub in_flight: usize,
    /// How long the reads took, from registering the shards to the last byte in place:
    /// the load's time without reading the headers, planning and allocating (device memory
    /// and pinned staging), which come before.
    pub read_time: Duration,
}
