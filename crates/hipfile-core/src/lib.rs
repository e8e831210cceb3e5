//! hipfile's decision engine: the configuration (the only place that reads the environment),
//! request validation, the rejection reasons, the [`Backend`] trait, backend selection by
//! score, and the retry rules of docs/BEHAVIOUR.md §1. It also states the narrow [`GpuRuntime`]
//! trait that backends use to reach the GPU, and the optional capabilities a runtime hands
//! out ([`runtime`]).
//!
//! It does no I/O of its own and loads no runtime: it must not depend on `hipfile-sys`, on
//! either backend crate or on the facade. It may depend on `hipfile-probe` (file facts are
//! its input). Backends, the facade and the tools depend on it.

#![deny(unsafe_code)]

pub mod backend;
pub mod buffer;
pub mod code;
pub mod config;
pub mod diag;
pub mod error;
#[cfg(any(test, feature = "mock"))]
pub mod mock;
pub mod outcome;
pub mod pinned;
pub mod process;
pub mod reason;
pub mod request;
pub mod runtime;
pub mod select;
pub mod stream;
pub mod types;

pub use backend::{Backend, BackendError, IoTarget, StreamOrderedIo, Submission};
pub use buffer::{BufferUse, check_buffer, inspect_buffer};
pub use config::{
    Config, ConfigBuilder, ConfigWarning, FallbackKnobs, MemoryTypes, PlatformChoice, SizeError,
    parse_size,
};
pub use error::{Error, ErrorCode, HipFileCode};
pub use outcome::IoOutcome;
pub use pinned::PinnedMemory;
pub use reason::{BackendKind, Reason, Verdict};
pub use request::{BufferFacts, CheckedBuffer, MAX_IO_SIZE, Request, ValidRequest, check_access};
pub use runtime::{GpuRuntime, PointerInfo, RuntimeError};
pub use select::{Decision, decide, stream_path, submit};
pub use stream::Served;
pub use types::{DevicePtr, MemoryKind, Op};
