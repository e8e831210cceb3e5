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
//! [`FileHandle::read`] and [`FileHandle::write`]. [`explain`] answers "which backend would
//! serve this request, and why?" without moving a byte.
//!
//! Without a GPU, name the emulated runtime (`hipfile-emu`, built by `cargo xtask emulated` in
//! a checkout of hipfile's repository, which prints the path of `libhipfile_emu.so`): set
//! `HIPFILE_HIP_LIBRARY` to that path, or pass it to [`ConfigBuilder::hip_library`] and
//! [`Driver::open_with`]. hipfile never picks the emulated runtime on its own. The examples in
//! this documentation that need a runtime run when `HIPFILE_HIP_LIBRARY` is set (as `cargo
//! xtask ci` sets it) and return early otherwise; the crate's `examples/` are whole programs.
//!
//! The only `unsafe` here is [`DeviceBuffer`]'s copies and its `from_raw` constructor.

#![deny(unsafe_code)]

mod buffer;
mod driver;
mod file;
mod stats;
mod view;

pub use hipfile_core as core;
pub use hipfile_fallback::Fallback;
pub use hipfile_fastpath::Fastpath;
pub use hipfile_probe as probe;
pub use hipfile_sys as sys;

pub use buffer::{DeviceBuffer, PinnedHostBuffer};
pub use driver::Driver;
pub use file::{FileHandle, IoOutcome};
pub use hipfile_core::{
    BackendKind, BufferFacts, Config, ConfigBuilder, ConfigWarning, Decision, DevicePtr, Error,
    ErrorCode, HipFileCode, MemoryKind, Op, Reason, Request, SizeError, Verdict, parse_size,
};
pub use hipfile_runtime::{Platform, RuntimeReport, inspect_runtime, load_runtime};
pub use stats::{DeviceStats, StatsSnapshot};
pub use view::{DeviceBuf, DeviceBufMut, DeviceSlice, DeviceSliceMut};

use hipfile_core::{Backend, Submission, decide};
use hipfile_probe::FileFacts;

/// Registers `file` with the process-wide driver, opening it first if it is not open (as
/// hipFile's first registration does). The handle keeps the driver open.
///
/// # Errors
///
/// As [`Driver::open`] and [`Driver::register_file`].
pub fn register_file(file: &impl std::os::fd::AsFd) -> Result<FileHandle, Error> {
    Driver::open()?.register_file(file)
}

/// The backends of a driver for `config`, in registration order (fastpath first).
pub fn backends(config: &Config, amd_file_io: bool) -> (Fastpath, Fallback) {
    (Fastpath::new(config, amd_file_io), Fallback::new(config))
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
    let (fast, slow) = backends(config, amd_file_io);
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
