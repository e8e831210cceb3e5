//! Test doubles for hipfile's tests: [`HostMemRuntime`], a [`GpuRuntime`] whose device memory
//! is host memory it allocates and tracks, with real file I/O behind `hipAmdFileRead`/
//! `hipAmdFileWrite`; [`Injected`], any runtime with faults in front of it; [`Fault`], one
//! way of making the N-th or every call of a kind fail, panic, move fewer bytes or wait at a
//! [`Gate`]; [`fixtures`], the file facts, buffers and requests that tests of the decision
//! path and the backends build; and [`page_cache`], which durability tests read.
//!
//! It is a dev-dependency only, never a dependency of library code (the layering check in
//! xtask enforces it), and it is not published. It does not emulate the HIP C ABI: the FFI
//! chain is tested against `hipfile-emu`. Nor does it check call sequences: tests that expect
//! exact calls use `hipfile_core::mock`'s mocks (`MockGpuRuntime`, `MockRuntime`).
//!
//! [`GpuRuntime`]: hipfile_core::GpuRuntime

mod cachestat;
mod fault;
pub mod fixtures;
mod host;
mod wrap;

pub use cachestat::{PageCache, page_cache};
pub use fault::{Action, Call, Effect, Fault, Faults, Gate, ReleaseOnDrop, Site};
pub use host::{ALIGN, Builder, HostMemRuntime, MAX_DEVICES};
pub use wrap::Injected;

#[cfg(test)]
mod tests;

// The Rust snippets of the README, compiled as doc tests so that they keep up with the API
// (`cargo xtask docs` checks that they are here).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
