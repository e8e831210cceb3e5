//! hipfile's fastpath backend: storage ⇄ GPU memory with no host copy, through the runtime's
//! `hipAmdFileRead`/`hipAmdFileWrite` on the file's `O_DIRECT` descriptor.
//!
//! It decides whether it can serve a request ([`Fastpath::score`], docs/BEHAVIOUR.md §1.1–§1.7)
//! and serves it with one runtime call ([`Fastpath::io`]), a write followed by one
//! `fdatasync` of the direct descriptor unless durable writes are turned off; selection,
//! validation and retry belong to `hipfile-core`. It does not split, align or retry requests: the
//! kernel driver decides what a transfer may be, and its errno goes back to core unchanged
//! (`ENODEV` and `EREMOTEIO` are what core retries on the fallback). It reaches the GPU only
//! through `hipfile-core`'s `GpuRuntime` trait, never through `hipfile-sys`, and does not depend on
//! the fallback. The facade and tools depend on it.

#![deny(unsafe_code)]

mod io;

use hipfile_core::{
    Backend, BackendError, BackendKind, Config, GpuRuntime, IoTarget, MemoryKind, Reason,
    Submission, Verdict,
};
use hipfile_probe::{Ext4Journal, FileFacts, FileKind};
use std::fmt;
use std::sync::Arc;

/// The fastpath backend.
#[derive(Clone)]
pub struct Fastpath {
    force_compat_mode: bool,
    unsupported_file_systems: bool,
    amd_file_io: bool,
    /// `None` for a fastpath that only scores.
    io: Option<io::FileIo>,
}

impl Fastpath {
    /// A fastpath for `config` that only scores, on a runtime that does (or does not) expose
    /// both `hipAmdFileRead` and `hipAmdFileWrite`. Its [`Backend::io`] fails with
    /// [`BackendError::Unsupported`]: it has no runtime to move bytes with.
    pub fn new(config: &Config, amd_file_io: bool) -> Self {
        Fastpath {
            force_compat_mode: config.force_compat_mode,
            unsupported_file_systems: config.unsupported_file_systems,
            amd_file_io,
            io: None,
        }
    }

    /// A fastpath for `config` that serves requests through `runtime`; whether the runtime
    /// has AMD file I/O is asked once, here.
    pub fn with_runtime(config: &Config, runtime: Arc<dyn GpuRuntime>) -> Self {
        Fastpath {
            amd_file_io: runtime.amd_file_io().is_some(),
            io: Some(io::FileIo::new(runtime, config.durable_writes)),
            ..Fastpath::new(config, false)
        }
    }
}

impl fmt::Debug for Fastpath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fastpath")
            .field("force_compat_mode", &self.force_compat_mode)
            .field("unsupported_file_systems", &self.unsupported_file_systems)
            .field("amd_file_io", &self.amd_file_io)
            .field("has_runtime", &self.io.is_some())
            .finish()
    }
}

/// Whether a regular file's filesystem is one the fastpath supports: ext4 with ordered
/// journaling, or xfs. An unknown filesystem is unsupported.
pub fn supported_file_system(file: &FileFacts) -> bool {
    match file.fs_type() {
        Some("xfs") => true,
        Some("ext4") => file.ext4_journal() == Some(Ext4Journal::Ordered),
        _ => false,
    }
}

impl Backend for Fastpath {
    fn kind(&self) -> BackendKind {
        BackendKind::Fastpath
    }

    fn score(&self, s: &Submission<'_>) -> Verdict {
        let mut reasons = Vec::new();
        if self.force_compat_mode {
            reasons.push(Reason::ForceCompatMode);
        }
        if !self.amd_file_io {
            reasons.push(Reason::RuntimeLacksAmdFileIo);
        }
        let direct = s.file.has_direct_io();
        if !direct {
            reasons.push(Reason::NoODirectFd);
        }
        // docs/BEHAVIOUR.md §1.7: the type and filesystem rules apply with or without a direct
        // descriptor.
        match s.file.kind {
            FileKind::Regular => {
                if !self.unsupported_file_systems && !supported_file_system(s.file) {
                    reasons.push(Reason::UnsupportedFileSystem);
                }
            }
            FileKind::BlockDevice => {}
            FileKind::Other => reasons.push(Reason::NotRegularFileOrBlockDevice),
        }
        if s.buffer.memory != MemoryKind::Device {
            reasons.push(Reason::BufferNotDeviceMemory);
        }
        // Without a usable direct descriptor there is no alignment to meet (docs/BEHAVIOUR.md
        // §1.7).
        if direct {
            let offset_align = u64::from(s.file.dio_offset_align());
            let mem_align = u64::from(s.file.dio_mem_align());
            if !s.request.file_offset().is_multiple_of(offset_align) {
                reasons.push(Reason::FileOffsetMisaligned);
            }
            if !s.request.size().is_multiple_of(offset_align) {
                reasons.push(Reason::SizeMisaligned);
            }
            if !s.request.address().0.is_multiple_of(mem_align) {
                reasons.push(Reason::BufferAddressMisaligned);
            }
        }
        Verdict::from_reasons(Verdict::FASTPATH_SCORE, reasons)
    }

    /// One `hipAmdFileRead`/`hipAmdFileWrite` on the `O_DIRECT` descriptor, after `hipInit`
    /// once per thread. Returns the count the runtime reports, which may be short; size 0
    /// returns 0 without calling the runtime.
    ///
    /// # Errors
    ///
    /// - a fastpath made with [`Fastpath::new`] (no runtime), or a file without an `O_DIRECT`
    ///   descriptor: [`BackendError::Unsupported`];
    /// - the kernel driver's errno: [`BackendError::Os`] with the call's name;
    /// - the runtime's own failure, also of `hipInit`: [`BackendError::Runtime`].
    fn io(&self, s: &Submission<'_>, target: &IoTarget<'_>) -> Result<u64, BackendError> {
        let Some(io) = &self.io else {
            return Err(BackendError::Unsupported(format!(
                "the fastpath cannot {}: it was made for scoring only, without a GPU runtime",
                s.request.op()
            )));
        };
        if !s.request.is_checked() {
            return Err(BackendError::unchecked(s.request.op()));
        }
        if s.request.memory() != MemoryKind::Device {
            return Err(BackendError::Unsupported(format!(
                "the fastpath cannot {} {} memory: hipAmdFileRead and hipAmdFileWrite reach \
                 GPU device memory only",
                s.request.op(),
                s.request.memory().as_str()
            )));
        }
        io.transfer(s.request, target)
    }
}
