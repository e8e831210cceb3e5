//! hipfile's fallback backend (compat mode): POSIX `pread`/`pwrite` through host staging
//! buffers plus GPU memory copies.
//!
//! It decides only whether it can serve a request ([`Fallback::score`], SPEC.md §1);
//! selection, validation and retry belong to `hipfile-core`. It reaches the GPU only through
//! `hipfile-core`'s `GpuRuntime` trait, never through `hipfile-sys`, and does not depend on
//! the fastpath. The facade and tools depend on it.

#![forbid(unsafe_code)]

use hipfile_core::{
    Backend, BackendError, BackendKind, Config, IoTarget, MemoryKind, Reason, Submission, Verdict,
};

/// The fallback backend.
#[derive(Debug, Clone)]
pub struct Fallback {
    allow_compat_mode: bool,
}

impl Fallback {
    /// A fallback for `config`.
    pub fn new(config: &Config) -> Self {
        Fallback {
            allow_compat_mode: config.allow_compat_mode,
        }
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

    fn io(&self, s: &Submission<'_>, _target: &IoTarget<'_>) -> Result<i64, BackendError> {
        Err(BackendError::Unsupported(format!(
            "the fallback's {} is not built yet in this version of hipfile",
            s.request.op
        )))
    }
}
