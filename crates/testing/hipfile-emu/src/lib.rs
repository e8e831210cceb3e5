//! An emulated HIP runtime, for tests and development: `libhipfile_emu.so` exports the HIP
//! runtime's C symbols that hipfile uses, so that hipfile runs end to end on a machine without
//! a GPU, loaded by path (`dlopen`) exactly as a real runtime is. Device memory is host memory
//! recorded in a table of allocations; `hipAmdFileRead`/`hipAmdFileWrite` (reachable only
//! through `hipGetProcAddress`, as in ROCm ≥ 7.2) really `pread`/`pwrite` an `O_DIRECT`
//! descriptor straight into it, so the kernel enforces the direct-I/O rules; faults can be
//! injected per operation; the emulated ROCm version selects the memory-type ABI.
//!
//! Streams are ordered and asynchronous ([`stream`], [`queue`]): each has a worker thread
//! that runs its operations in order; host functions and waits on memory words
//! (`hipStreamWaitValue32/64`) always run there, while a copy on an idle stream runs inline
//! before its call returns, as it always did. The null stream is HIP's legacy default stream:
//! it synchronises with the blocking streams, and a `hipMemcpy` from pageable memory to the
//! device, one between device allocations and a `hipMemset` of device memory return before
//! they are done, as on a GPU ([`copy`]), so that code which forgets to order its work after
//! them reads stale bytes here too.
//!
//! What it does not do: run kernels, do real DMA or peer-to-peer transfers, migrate managed
//! memory (`hipMallocManaged` memory is
//! one host allocation that every side may name), or stand in for HIP on NVIDIA. It is never
//! chosen silently: hipfile loads it only when it is given its path, or uses it when the
//! program itself has loaded it (linked as `libamdhip64`), and recognises it by
//! `hipfileEmuVersion` to report `platform: emulated`.
//!
//! Its soname is `libamdhip64.so.7`, a real runtime's (the emulated version is ROCm 7.2 by
//! default), so that a C program can link against it under the name `libamdhip64.so` and
//! hipfile, searching by soname, finds that very instance already loaded in the process
//! instead of loading a second runtime (the dynamic linker matches loaded objects by soname).
//! A program that links it by path records that soname too, and must find a
//! `libamdhip64.so.7` (a link to it) at run time.
//!
//! Where a real runtime would quietly go through peer access, it is stricter, so that tests of
//! multi-GPU routing can fail: streams and events belong to the device current at their
//! creation, and `hipMemcpyAsync` on a stream refuses device memory of another device
//! ([`copy`], [`stream`]). `hipfileEmuDeviceCopyBytes` counts the bytes copied into and out
//! of each device's memory ([`hooks`]).
//!
//! Who may depend on it: tests and tools only, and explicitly (by path or as a
//! dev-dependency). No library crate of the workspace depends on it, and it depends on none.
//!
//! The environment configures it ([`config`]): `HIPFILE_EMU_ROCM_VERSION`, `HIPFILE_EMU_DEVICES`,
//! `HIPFILE_EMU_FAULT`, `HIPFILE_EMU_STREAMS`, `HIPFILE_EMU_NULL_STREAM_DELAY`. The rlib exposes the same functions as ordinary Rust
//! functions, with the pure parts (fault parsing, pointer attributes under a given ABI, symbol
//! lookup for a given version) separate from the global state, for unit tests.
//!
//! # Safety
//!
//! Every exported function is a C entry point that must not unwind: none panics (poisoned locks
//! are recovered, arithmetic is checked), each checks its out-pointers for null, and memory is
//! written only through the caller's out-pointers, inside allocations the table knows (checked
//! before every copy and transfer), or in host ranges the caller passes outside every known
//! entry. Nothing is freed unless the table says this runtime allocated it. Operations that
//! run on a stream's worker, later, are checked again when they run, and run inside
//! `catch_unwind`. The modules that hold unsafe code say more: [`memory`], [`copy`],
//! [`fileio`], [`stream`].

// The exported functions carry the C names of the HIP API.
#![allow(non_snake_case)]

pub mod codes;
pub mod config;
pub mod copy;
pub mod device;
pub mod error;
pub mod fault;
pub mod fileio;
pub mod hooks;
pub mod memory;
pub mod proc_address;
pub mod queue;
pub mod stream;

pub use config::{Config, RocmVersion, StreamMode};
pub use fault::{Fault, FaultPlan, Op, parse_faults};
pub use fileio::{HipAmdFileHandle, HipAmdFileIoFn};
pub use memory::{HipPointerAttribute, MemoryAbi, MemoryType};
