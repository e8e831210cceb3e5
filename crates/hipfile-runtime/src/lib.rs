//! hipfile's GPU runtimes: implementations of `hipfile-core`'s `GpuRuntime` and its
//! capabilities over the runtimes `hipfile-sys` loads. [`HipRuntime`] serves AMD's
//! `libamdhip64` and any library with the same ABI (the emulated runtime of `hipfile-emu`
//! among them), and hands out each optional capability (host functions, stream memory
//! operations, AMD file I/O) where the library has its entry points; [`CudaRuntime`] maps the
//! same calls onto NVIDIA's CUDA runtime, as HIP itself does on NVIDIA (it has no AMD file
//! I/O, so the fastpath refuses there).
//!
//! Each method translates one call: the ABI-dependent parts (memory-type numbering by
//! runtime version, ROCm 5's error for unknown host pointers) are decoded here so that the
//! layers above see one meaning. It validates nothing (core does), and the runtimes decide
//! nothing (the backends do). Two choices are made here: which runtime to load
//! ([`load_runtime`]: `HIP_PLATFORM`, HIP before CUDA, a runtime with a device before one
//! without), with what it offers ([`inspect_runtime`], [`RuntimeReport`]); and how pinned
//! memory is made (from 2 MiB up, a mapping of hipfile's own, faulted in on several threads
//! and registered, which is several times quicker than the runtime's allocation). A CUDA
//! device's BAR1 size comes from NVIDIA's NVML, loaded when first asked for, through the
//! device's PCI bus id (`bar1.rs`); HIP cannot tell one. It depends on `hipfile-core` and
//! `hipfile-sys`; only the facade and tools depend on it.
//!
//! # Safety
//!
//! The `unsafe` here forwards the `unsafe fn`s of `GpuRuntime` and its capabilities to the
//! matching `hipfile-sys` wrappers under the same contract, and converts opaque handles to
//! and from integers. `pinned.rs` maps, advises and unmaps memory that only it and the
//! runtime it registers the memory with know of, and unmaps a region only after the runtime
//! has unregistered it.

#![deny(unsafe_code)]

mod bar1;
mod choose;
mod cuda;
mod hip;
mod pinned;
mod shared;
mod sync_copy;

pub use choose::{NoDevice, NoRuntime, Platform, RuntimeReport, inspect_runtime, load_runtime};

pub use cuda::CudaRuntime;
pub use hip::{HipRuntime, RuntimeKind};
