//! The ground floor of the crate: the plain values every other module names (an address,
//! the direction of a request, the kind of memory). It imports nothing from the crate, so any
//! module may use it without making a cycle.

use std::fmt;

/// A device (or unified) address, as the runtime sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DevicePtr(pub u64);

impl DevicePtr {
    /// Whether the address is null.
    pub fn is_null(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Display for DevicePtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// Direction of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// File → GPU buffer.
    Read,
    /// GPU buffer → file.
    Write,
}

impl Op {
    /// `read` or `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What kind of memory a buffer is, as the runtime's pointer attributes say, decoded
/// independently of the runtime's ABI version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryKind {
    /// GPU device memory (`hipMemoryTypeDevice`): the only kind either backend serves.
    Device,
    /// Pinned or registered host memory.
    Host,
    /// Managed (unified-addressing, migratable) memory.
    Managed,
    /// Plain host memory the runtime does not know.
    Unregistered,
    /// A HIP array.
    Array,
    /// Unified memory (ROCm's `hipMemoryTypeUnified`).
    Unified,
}

impl MemoryKind {
    /// Lower-case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryKind::Device => "device",
            MemoryKind::Host => "host",
            MemoryKind::Managed => "managed",
            MemoryKind::Unregistered => "unregistered",
            MemoryKind::Array => "array",
            MemoryKind::Unified => "unified",
        }
    }

    /// Whether it is host memory (pinned or registered with the runtime, or pageable): memory
    /// the CPU reads and writes in place, which the fallback's `pread`/`pwrite` reach
    /// directly. Managed memory is not: its pages may be on a GPU, and the runtime's copies
    /// reach it.
    pub fn is_host(self) -> bool {
        matches!(self, MemoryKind::Host | MemoryKind::Unregistered)
    }
}
