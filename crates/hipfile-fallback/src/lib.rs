//! hipfile's fallback backend (compat mode): POSIX `pread`/`pwrite` through host staging
//! buffers plus GPU memory copies.
//!
//! It decides whether it can serve a request ([`Fallback::score`], SPEC.md §1) and serves it
//! ([`Fallback::io`]) through a bounded pool of pinned staging buffers ([`StagingPool`]),
//! allocated once per driver and shared by its requests. Selection, validation and retry
//! belong to `hipfile-core`. It reaches the GPU only through `hipfile-core`'s `GpuRuntime`
//! trait, never through `hipfile-sys`, and does not depend on the fastpath. The facade and
//! tools depend on it.

#![deny(unsafe_code)]

mod staging;
mod transfer;

pub use staging::{StagingConfig, StagingGuard, StagingPool};

use hipfile_core::{
    Backend, BackendError, BackendKind, Config, GpuRuntime, IoTarget, MemoryKind, Reason,
    Submission, Verdict,
};
use std::fmt;
use std::sync::Arc;

/// The fallback backend. Clones share the staging pool.
#[derive(Clone)]
pub struct Fallback {
    allow_compat_mode: bool,
    /// `None` for a fallback that only scores.
    staging: Option<Arc<StagingPool>>,
}

impl Fallback {
    /// A fallback for `config` that only scores. Its [`Backend::io`] fails with
    /// [`BackendError::Unsupported`]: it has no runtime to move bytes with.
    pub fn new(config: &Config) -> Self {
        Fallback {
            allow_compat_mode: config.allow_compat_mode,
            staging: None,
        }
    }

    /// A fallback for `config` that serves requests through `runtime`, with a staging pool
    /// of the given sizes (nothing is allocated before the first request).
    pub fn with_runtime(
        config: &Config,
        runtime: Arc<dyn GpuRuntime>,
        staging: StagingConfig,
    ) -> Self {
        Fallback {
            staging: Some(Arc::new(StagingPool::new(runtime, staging))),
            ..Fallback::new(config)
        }
    }

    /// The staging pool, for a fallback made with a runtime.
    pub fn staging(&self) -> Option<&StagingPool> {
        self.staging.as_deref()
    }
}

impl fmt::Debug for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fallback")
            .field("allow_compat_mode", &self.allow_compat_mode)
            .field("staging", &self.staging)
            .finish()
    }
}

impl Backend for Fallback {
    fn kind(&self) -> BackendKind {
        BackendKind::Fallback
    }

    fn score(&self, s: &Submission<'_>) -> Verdict {
        let mut reasons = Vec::new();
        if !self.allow_compat_mode {
            reasons.push(Reason::CompatModeDisallowed);
        }
        if s.buffer.memory != MemoryKind::Device {
            reasons.push(Reason::BufferNotDeviceMemory);
        }
        Verdict::from_reasons(Verdict::FALLBACK_SCORE, reasons)
    }

    /// Reads with `pread` on the buffered descriptor into a staging buffer, then copies to
    /// the device; writes copy from the device, then `pwrite`, and end with one `fdatasync`
    /// (SPEC.md §3: durable on return). Chunks are at most the pool's `chunk_size`. Returns
    /// the bytes moved, short only for a read that reaches the end of the file; size 0
    /// returns 0.
    ///
    /// # Errors
    ///
    /// - a fallback made with [`Fallback::new`] (no runtime): [`BackendError::Unsupported`];
    /// - a failed `pread`, `pwrite` or `fdatasync`: [`BackendError::Os`] with its errno
    ///   (`EINTR` is reissued, never reported; a `pwrite` that writes nothing is `EIO`;
    ///   `EINVAL` from `fdatasync`, a file with nothing to synchronise such as a character
    ///   device, is not an error);
    /// - a failed copy or pinned allocation: [`BackendError::Runtime`].
    ///
    /// A write that fails part-way is an error even though earlier chunks may be in the file.
    fn io(&self, s: &Submission<'_>, target: &IoTarget<'_>) -> Result<i64, BackendError> {
        let Some(pool) = &self.staging else {
            return Err(BackendError::Unsupported(format!(
                "the fallback cannot {}: it was made for scoring only, without a GPU runtime",
                s.request.op
            )));
        };
        let moved = transfer::serve(pool, s.request, target.buffered)?;
        // At most `MAX_IO_SIZE`, so it fits.
        Ok(i64::try_from(moved).unwrap_or(i64::MAX))
    }
}
