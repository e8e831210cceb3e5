//! GPU direct storage for Rust: read files straight into GPU memory and write GPU memory to
//! files, through the fastpath (no host copy) when the file, the buffer and the runtime allow
//! it, and through the fallback (host staging) otherwise.
//!
//! This facade is one of the two public API boundaries (the other is `hipfile-sys`, for FFI
//! reuse). It composes the layers: `hipfile-probe` (file facts), `hipfile-core` (configuration,
//! scoring, retry), the two backends, and `hipfile-sys` (the runtime). It adds no policy of its
//! own. Only tools and applications depend on it.
//!
//! Open a [`Driver`], register files ([`Driver::register_file`]) and use device buffers
//! ([`Driver::alloc`], or [`DeviceBuffer::from_raw`] for memory allocated elsewhere), then
//! read into views of them and write from them: [`FileHandle::read_exact_at`] and
//! [`FileHandle::write_all_at`] move a whole range or fail; [`FileHandle::read_at`] and
//! [`FileHandle::write_at`] make one request and say how many bytes it moved.
//! [`FileHandle::read`] and [`FileHandle::write`] are hipFile's own call, with its signed
//! offsets. [`explain`] answers "which backend would serve this request, and why?" without
//! moving a byte.
//!
//! Requests that do not block their caller run on the driver's engine, with every rule of
//! the synchronous calls: [`FileHandle::read_at_async`] / [`write_at_async`] return an [`Io`]
//! (a `Future` with a blocking `wait`), [`FileHandle::read_owned`] / [`write_owned`] take the
//! buffer and give it back, [`Driver::batch`] is cuFile's batch API, and
//! [`FileHandle::read_on`] / [`write_on`] order a request on a GPU [`Stream`].
//!
//! With `HIPFILE_STATS_LEVEL` set, the driver counts every request ([`Driver::stats`]) and
//! publishes the counters for other processes of its user; [`read_published_stats`] reads
//! them (as `hipfile stats PID` does).
//!
//! [`write_at_async`]: FileHandle::write_at_async
//! [`write_owned`]: FileHandle::write_owned
//! [`write_on`]: FileHandle::write_on
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # // Runs only with a runtime named (as `cargo xtask ci` does); compiles in any case.
//! # if std::env::var_os("HIPFILE_HIP_LIBRARY").is_none() { return Ok(()); }
//! # let path = std::env::temp_dir().join(format!("hipfile-doc-crate-{}", std::process::id()));
//! # std::fs::write(&path, vec![42u8; 3 << 20])?;
//! let driver = hipfile::Driver::open()?;
//! let file = std::fs::File::open(&path)?;
//! let fh = driver.register_file(&file)?;
//!
//! // The file's first 2 MiB into the second half of a 4 MiB buffer.
//! let mut weights = driver.alloc(4 << 20)?;
//! fh.read_exact_at(&mut weights.slice_mut(2 << 20..)?, 0)?;
//!
//! // One request that may come back short: the outcome says how much came, and from where.
//! let got = fh.read_at(&mut weights.slice_mut(..)?, 1 << 20)?;
//! println!("{} bytes through the {}", got.bytes, got.backend);
//!
//! // Views copy exactly their own length.
//! let mut head = vec![0u8; 16];
//! weights.slice(..16)?.copy_to_host(&mut head)?;
//! assert_eq!(head, [42u8; 16]);
//! # std::fs::remove_file(&path)?;
//! # Ok(())
//! # }
//! ```
//!
//! Without a GPU, name the emulated runtime (`hipfile-emu`, built by `cargo xtask emulated` in
//! a checkout of hipfile's repository, which prints the path of `libhipfile_emu.so`): set
//! `HIPFILE_HIP_LIBRARY` to that path, or pass it to [`ConfigBuilder::hip_library`] and
//! [`Driver::open_with`]. hipfile never picks the emulated runtime on its own. The examples in
//! this documentation that need a runtime run when `HIPFILE_HIP_LIBRARY` is set (as `cargo
//! xtask ci` sets it) and return early otherwise; the crate's `examples/` are whole programs.
//!
//! The only `unsafe` here is [`DeviceBuffer`]'s copies and its `from_raw` constructor, the
//! stream-ordered calls (whose stream handle the caller vouches for) and the gate words
//! streams wait on.
//!
//! # Stable and unstable surface
//!
//! Everything named at the crate root is this crate's API: the driver, file handles, device
//! buffers and their views, the configuration, the errors, and the types their signatures use.
//! Errors, reasons, outcomes and configuration are `#[non_exhaustive]`, so adding a variant
//! or a field is not a breaking change; match them with a wildcard arm.
//!
//! ## Unstable
//!
//! [`core`], [`probe`] and [`sys`] re-export the layers below the facade for tools that need
//! more than the facade offers (`hipfile check` reads the probe's facts, for example). Their
//! contents follow those crates' own versions and may change in any release of this one.
//! The backends themselves are not re-exported; an application that wants them depends on
//! `hipfile-fastpath` or `hipfile-fallback` directly.

#![deny(unsafe_code)]

mod api;
mod engine;
mod requests;
mod stats;

/// Unstable: the decision engine (`hipfile-core`). See [the crate documentation](crate#unstable).
pub use hipfile_core as core;
/// Unstable: file facts (`hipfile-probe`). See [the crate documentation](crate#unstable).
pub use hipfile_probe as probe;
/// Unstable: the raw runtime bindings (`hipfile-sys`). See [the crate documentation](crate#unstable).
pub use hipfile_sys as sys;

pub use api::buffer::{DeviceBuffer, PinnedHostBuffer};
pub use api::driver::{Driver, Tuning};
pub use api::file::FileHandle;
pub use engine::IoState;
pub use hipfile_core::runtime::{FileIoError, StreamHandle};
pub use hipfile_core::{
    BackendError, BackendKind, BufferFacts, Config, ConfigBuilder, ConfigWarning, Decision,
    DevicePtr, Error, ErrorCode, FallbackKnobs, GpuRuntime, HipFileCode, IoOutcome, MemoryKind,
    MemoryTypes, Op, PlatformChoice, Reason, Request, RuntimeError, SizeError, Verdict, parse_size,
};
pub use hipfile_probe::{FileFacts, ProbeError, Unusable};
pub use hipfile_runtime::{
    NoDevice, NoRuntime, Platform, RuntimeReport, inspect_runtime, load_runtime,
};
pub use requests::batch::{Batch, BatchEvent, BatchIo, BatchStatus, MAX_BATCH_CAPACITY};
pub use requests::ordered::Stream;
#[doc(hidden)]
pub use requests::ordered::StreamParams;

pub use api::view::{DeviceBuf, DeviceBufMut, DeviceSlice, DeviceSliceMut};
#[doc(hidden)]
pub use hipfile_core::stream::Report;
pub use requests::pending::{Io, IoOwned, IoOwnedFuture};
pub use stats::publish::{
    PublishedStats, ReadStatsError, STATS_CHANNEL_VERSION, read_published_stats, stats_channel_path,
};
pub use stats::{
    DeviceStats, DirectionStats, GpuDirectionStats, OpCount, STATS_HISTOGRAM_BUCKETS,
    STATS_MAX_GPUS, StatsSnapshot, histogram_bucket,
};

use hipfile_core::{Backend, Submission, decide};
use hipfile_fallback::Fallback;
use hipfile_fastpath::Fastpath;

/// Registers `file` with the process-wide driver, opening it first if it is not open (as
/// hipFile's first registration does). The handle keeps the driver open.
///
/// # Errors
///
/// As [`Driver::open`] and [`Driver::register_file`].
pub fn register_file(file: &impl std::os::fd::AsFd) -> Result<FileHandle, Error> {
    Driver::open()?.register_file(file)
}

/// Which backend would serve `request` on `file` into `buffer`, with every backend's
/// verdict. `amd_file_io` says whether the runtime has `hipAmdFileRead`/`hipAmdFileWrite`.
///
/// # Errors
///
/// [`Error::InvalidValue`] when the request fails validation (docs/BEHAVIOUR.md §3.1); no backend
/// is asked then.
pub fn explain(
    config: &Config,
    amd_file_io: bool,
    file: &FileFacts,
    request: &Request,
    buffer: &BufferFacts,
) -> Result<Decision, Error> {
    let valid = request.validate(buffer)?;
    let (fast, slow) = (Fastpath::new(config, amd_file_io), Fallback::new(config));
    let list: [&dyn Backend; 2] = [&fast, &slow];
    Ok(decide(
        &list,
        &Submission {
            request: &valid,
            file,
            buffer,
        },
    ))
}

// The Rust snippets of this crate's README and of the repository's README, compiled as doc
// tests so that they keep up with the API (`cargo xtask docs` checks that they are here).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct RepositoryReadmeDoctests;
