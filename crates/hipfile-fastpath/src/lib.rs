//! hipfile's fastpath backend: storage ⇄ GPU memory with no host copy, through the runtime's
//! `hipAmdFileRead`/`hipAmdFileWrite` on the file's `O_DIRECT` descriptor.
//!
//! It decides only whether it can serve a request ([`Fastpath::score`], SPEC.md §1 rules
//! 1–7); selection, validation and retry belong to `hipfile-core`. It reaches the GPU only
//! through `hipfile-core`'s `GpuRuntime` trait, never through `hipfile-sys`, and does not
//! depend on the fallback. The facade and tools depend on it.

#![forbid(unsafe_code)]

use hipfile_core::{
    Backend, BackendError, BackendKind, Config, IoTarget, MemoryKind, Reason, Submission, Verdict,
};
use hipfile_probe::{Ext4Journal, FileFacts, FileKind};

/// The fastpath backend.
#[derive(Debug, Clone)]
pub struct Fastpath {
    force_compat_mode: bool,
    unsupported_file_systems: bool,
    amd_file_io: bool,
}

impl Fastpath {
    /// A fastpath for `config`, on a runtime that does (or does not) expose both
    /// `hipAmdFileRead` and `hipAmdFileWrite`.
    pub fn new(config: &Config, amd_file_io: bool) -> Self {
        Fastpath {
            force_compat_mode: config.force_compat_mode,
            unsupported_file_systems: config.unsupported_file_systems,
            amd_file_io,
        }
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
        if direct {
            match s.file.kind {
                FileKind::Regular => {
                    if !self.unsupported_file_systems && !supported_file_system(s.file) {
                        reasons.push(Reason::UnsupportedFileSystem);
                    }
                }
                FileKind::BlockDevice => {}
                FileKind::Other => reasons.push(Reason::NotRegularFileOrBlockDevice),
            }
        } else {
            // SPEC.md §1.3 and §1.7: without a usable O_DIRECT descriptor this is the only
            // reason given for the file; there is no alignment to meet.
            reasons.push(Reason::NoODirectFd);
        }
        if s.buffer.memory != MemoryKind::Device {
            reasons.push(Reason::BufferNotDeviceMemory);
        }
        if direct {
            let offset_align = u64::from(s.file.dio_offset_align());
            let mem_align = u64::from(s.file.dio_mem_align());
            if !s.request.file_offset.is_multiple_of(offset_align) {
                reasons.push(Reason::FileOffsetMisaligned);
            }
            if !s.request.size.is_multiple_of(offset_align) {
                reasons.push(Reason::SizeMisaligned);
            }
            if !s.request.address.0.is_multiple_of(mem_align) {
                reasons.push(Reason::BufferAddressMisaligned);
            }
        }
        Verdict::from_reasons(Verdict::FASTPATH_SCORE, reasons)
    }

    fn io(&self, s: &Submission<'_>, _target: &IoTarget<'_>) -> Result<i64, BackendError> {
        Err(BackendError::Unsupported(format!(
            "the fastpath's {} is not built yet in this version of hipfile",
            s.request.op
        )))
    }
}
