//! Backend identities, eagerness scores and the stable rejection reason codes (docs/BEHAVIOUR.md
//! §5).

use std::fmt;

/// Which backend a verdict, an error or a counter belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackendKind {
    /// Storage ⇄ GPU memory with no host copy.
    Fastpath,
    /// POSIX I/O through host staging buffers (compat mode).
    Fallback,
}

impl BackendKind {
    /// The stable lower-case name: `fastpath` or `fallback`.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Fastpath => "fastpath",
            BackendKind::Fallback => "fallback",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a backend refused a request. The names are stable: they appear in errors, logs and
/// `hipfile check --json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Reason {
    /// Fastpath: `HIPFILE_FORCE_COMPAT_MODE` is true.
    ForceCompatMode,
    /// Fastpath: the runtime exposes no `hipAmdFileRead`/`hipAmdFileWrite`.
    RuntimeLacksAmdFileIo,
    /// Fastpath: the file has no usable `O_DIRECT` descriptor.
    NoODirectFd,
    /// Fastpath: the file is neither a regular file nor a block device.
    NotRegularFileOrBlockDevice,
    /// Fastpath: a regular file outside ext4 `data=ordered` and xfs.
    UnsupportedFileSystem,
    /// Both backends: the buffer is not device memory.
    BufferNotDeviceMemory,
    /// Fastpath: the file offset is not a multiple of the direct-I/O offset alignment.
    FileOffsetMisaligned,
    /// Fastpath: the size is not a multiple of the direct-I/O offset alignment.
    SizeMisaligned,
    /// Fastpath: the device address is not a multiple of the direct-I/O memory alignment.
    BufferAddressMisaligned,
    /// Fallback: `HIPFILE_ALLOW_COMPAT_MODE` is false.
    CompatModeDisallowed,
}

impl Reason {
    /// Every reason, in the order docs/BEHAVIOUR.md §5 lists them.
    pub const ALL: [Reason; 10] = [
        Reason::ForceCompatMode,
        Reason::RuntimeLacksAmdFileIo,
        Reason::NoODirectFd,
        Reason::NotRegularFileOrBlockDevice,
        Reason::UnsupportedFileSystem,
        Reason::BufferNotDeviceMemory,
        Reason::FileOffsetMisaligned,
        Reason::SizeMisaligned,
        Reason::BufferAddressMisaligned,
        Reason::CompatModeDisallowed,
    ];

    /// The stable snake_case code of docs/BEHAVIOUR.md §5.
    pub fn code(self) -> &'static str {
        match self {
            Reason::ForceCompatMode => "force_compat_mode",
            Reason::RuntimeLacksAmdFileIo => "runtime_lacks_amd_file_io",
            Reason::NoODirectFd => "no_o_direct_fd",
            Reason::NotRegularFileOrBlockDevice => "not_regular_file_or_block_device",
            Reason::UnsupportedFileSystem => "unsupported_file_system",
            Reason::BufferNotDeviceMemory => "buffer_not_device_memory",
            Reason::FileOffsetMisaligned => "file_offset_misaligned",
            Reason::SizeMisaligned => "size_misaligned",
            Reason::BufferAddressMisaligned => "buffer_address_misaligned",
            Reason::CompatModeDisallowed => "compat_mode_disallowed",
        }
    }

    /// The reason with this code, if any.
    pub fn from_code(code: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.code() == code)
    }

    /// One sentence for a person: what is wrong and what would change it.
    pub fn explain(self) -> &'static str {
        match self {
            Reason::ForceCompatMode => "HIPFILE_FORCE_COMPAT_MODE is true",
            Reason::RuntimeLacksAmdFileIo => {
                "the HIP runtime has no hipAmdFileRead/hipAmdFileWrite (ROCm >= 7.2 with the amdgpu P2P driver provides them)"
            }
            Reason::NoODirectFd => "the file cannot be opened with O_DIRECT on this filesystem",
            Reason::NotRegularFileOrBlockDevice => {
                "the file is neither a regular file nor a block device"
            }
            Reason::UnsupportedFileSystem => {
                "the filesystem is neither xfs nor ext4 with data=ordered (set HIPFILE_UNSUPPORTED_FILE_SYSTEMS=true to try anyway)"
            }
            Reason::BufferNotDeviceMemory => "the buffer is not GPU device memory",
            Reason::FileOffsetMisaligned => {
                "the file offset is not a multiple of the direct-I/O offset alignment"
            }
            Reason::SizeMisaligned => {
                "the size is not a multiple of the direct-I/O offset alignment"
            }
            Reason::BufferAddressMisaligned => {
                "the buffer address is not a multiple of the direct-I/O memory alignment"
            }
            Reason::CompatModeDisallowed => "HIPFILE_ALLOW_COMPAT_MODE is false",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// A backend's answer to "can you serve this request?".
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Accepted with this eagerness score (≥ 0; fastpath 100, fallback 1).
    Accept(u32),
    /// Refused (score -1), with every reason that applies, in [`Reason`] order.
    Reject(Vec<Reason>),
}

impl Verdict {
    /// Eagerness score of the fastpath when it accepts.
    pub const FASTPATH_SCORE: u32 = 100;
    /// Eagerness score of the fallback when it accepts.
    pub const FALLBACK_SCORE: u32 = 1;
    /// The score reported for a refusal.
    pub const REJECTED: i32 = -1;

    /// Accept with `score` when `reasons` is empty, else reject with them, in the order
    /// given (each backend reports in the order docs/BEHAVIOUR.md §5 lists its codes), duplicates
    /// dropped.
    pub fn from_reasons(score: u32, reasons: Vec<Reason>) -> Verdict {
        if reasons.is_empty() {
            return Verdict::Accept(score);
        }
        let mut unique = Vec::with_capacity(reasons.len());
        for r in reasons {
            if !unique.contains(&r) {
                unique.push(r);
            }
        }
        Verdict::Reject(unique)
    }

    /// The numeric score: the accepted score, or -1.
    pub fn score(&self) -> i32 {
        match self {
            Verdict::Accept(s) => i32::try_from(*s).unwrap_or(i32::MAX),
            Verdict::Reject(_) => Verdict::REJECTED,
        }
    }

    /// Whether the backend accepted.
    pub fn accepted(&self) -> bool {
        matches!(self, Verdict::Accept(_))
    }

    /// The reasons of a refusal; empty when accepted.
    pub fn reasons(&self) -> &[Reason] {
        match self {
            Verdict::Accept(_) => &[],
            Verdict::Reject(r) => r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_spec_names_and_round_trip() {
        let codes: Vec<&str> = Reason::ALL.iter().map(|r| r.code()).collect();
        assert_eq!(
            codes,
            [
                "force_compat_mode",
                "runtime_lacks_amd_file_io",
                "no_o_direct_fd",
                "not_regular_file_or_block_device",
                "unsupported_file_system",
                "buffer_not_device_memory",
                "file_offset_misaligned",
                "size_misaligned",
                "buffer_address_misaligned",
                "compat_mode_disallowed",
            ]
        );
        for r in Reason::ALL {
            assert_eq!(Reason::from_code(r.code()), Some(r));
        }
        assert_eq!(Reason::from_code("nope"), None);
    }

    #[test]
    fn verdict_scores() {
        assert_eq!(Verdict::from_reasons(100, vec![]).score(), 100);
        let v = Verdict::from_reasons(
            1,
            vec![
                Reason::CompatModeDisallowed,
                Reason::BufferNotDeviceMemory,
                Reason::CompatModeDisallowed,
            ],
        );
        assert_eq!(v.score(), -1);
        assert_eq!(
            v.reasons(),
            &[Reason::CompatModeDisallowed, Reason::BufferNotDeviceMemory]
        );
    }
}
