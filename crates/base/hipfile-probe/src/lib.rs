//! File facts for hipfile: what kind of file a descriptor refers to, which filesystem holds
//! it (and, for ext4, its `data=` journaling mode), whether it can be opened for direct I/O,
//! and the direct-I/O alignments the kernel demands.
//!
//! It does not decide anything: scoring lives in `hipfile-core` and the backends. It knows
//! nothing of GPUs and must never depend on `hipfile-sys` or any other hipfile crate; every
//! hipfile crate may depend on it.
//!
//! - [`probe_fd`] is the registration-time probe (docs/BEHAVIOUR.md §1.3–§1.5 and §1.7):
//!   `statx`, `fcntl(F_GETFL)`, `fstatfs`, `/proc/thread-self/mountinfo`, the
//!   `/proc/thread-self/fd/N` reopen with `O_DIRECT` (or without it, when the caller's
//!   descriptor has it) and `STATX_DIOALIGN`. It returns [`FileFacts`] and the descriptors to
//!   do direct and buffered I/O through.
//! - [`mountinfo`] is a pure parser of `/proc/thread-self/mountinfo` text.
//! - [`magic_name`] names `fstatfs` magic numbers.
//!
//! Answers are data, not errors: a filesystem without direct I/O, a kernel that reports no
//! alignment, a device missing from mountinfo all end up in [`FileFacts`]. A [`ProbeError`]
//! means a call failed that should not have (a closed descriptor, no procfs, a refused
//! reopen). Nothing is cached across calls: mounts and files change while a process runs.
//!
//! - [`page_cache`] asks `cachestat(2)` how much of a file range is in the page cache.
//!
//! System calls go through rustix, except `cachestat`, which rustix lacks: its one raw call
//! is the crate's only `unsafe` (`cache.rs`).

#![deny(unsafe_code)]

mod cache;
mod error;
mod facts;
mod magic;
pub mod mountinfo;
mod probe;

pub use cache::{PageCache, page_cache};
pub use error::ProbeError;
pub use facts::{
    AlignSource, DirectIo, Ext4Journal, FileFacts, FileKind, Filesystem, NoDirectReason, Unusable,
};
pub use magic::magic_name;
pub use probe::{
    ASSUMED_ALIGN, Descriptor, ProbedFile, classify_direct_reopen, direct_io, duplicate,
    file_facts, probe_fd, reopen_flags,
};
