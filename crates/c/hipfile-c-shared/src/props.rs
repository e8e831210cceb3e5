//! `hipFileDriverGetProperties` and the four driver setters: `SetPollMode`,
//! `SetMaxDirectIOSize`, `SetMaxCacheSize` and `SetMaxPinnedMemSize`. Sizes are in KiB, as
//! in cuFile.
//!
//! A setter changes the settings of the next open (`params.rs`) at any time. While the
//! driver is open it also takes effect at once when nothing else uses the driver (no file,
//! buffer, batch or request holds it): the driver is closed and opened again with the new
//! settings, between two calls of the program's. Otherwise the open driver keeps its
//! configuration, which registrations and requests in flight rely on, and the value applies
//! at the next open; the setter still returns success, as cuFile's does on an open driver.
//! Poll mode is recorded and reported only: requests complete by waiting.
//!
//! # Safety
//!
//! The one pointer, `props`, is checked for NULL before it is written.

use crate::codes::status;
use crate::panic::boundary;
use crate::settings::{
    KIB, MAX_BATCH_IO, Settings, cache_bytes, chunk_bytes, pinned_bytes, set_cache_kib,
    set_pinned_kib, set_task_kib,
};
use crate::state;
use crate::types::*;
use facade::Driver;
use facade::core::runtime::StreamOrdering;
use std::ffi::c_uint;

const INTERNAL: hipFileError_t = hipFileError_t::code(hipFileInternalError);

/// Changes the settings with `change`: always those of the next open, and the open driver's
/// too when it is the only user of the driver (by opening it again with them).
fn apply(change: impl FnOnce(&mut Settings) -> Result<(), hipFileOpError_t>) -> hipFileError_t {
    let mut st = state::lock();
    let mut next = st.params.pending.clone();
    if let Err(code) = change(&mut next) {
        return hipFileError_t::code(code);
    }
    st.params.pending = next.clone();
    if st.count == 0 {
        return hipFileError_t::SUCCESS;
    }
    let Some(old) = st.driver.take() else {
        return hipFileError_t::SUCCESS;
    };
    if !old.is_only_handle() {
        st.driver = Some(old);
        return hipFileError_t::SUCCESS;
    }
    drop(old);
    match Driver::open_allowing_no_device(st.params.builder(&next)) {
        Ok(d) => {
            st.driver = Some(d);
            st.params.live = next;
            hipFileError_t::SUCCESS
        }
        Err(e) => {
            // The runtime loaded a moment ago, so this is all but impossible; put a driver
            // with the old settings back, or, failing that, end the open state cleanly.
            let back = Driver::open_allowing_no_device(st.params.builder(&st.params.live))
                .or_else(|_| Driver::open());
            match back {
                Ok(d) => st.driver = Some(d),
                Err(_) => {
                    st.count = 0;
                    drop(st.clear());
                }
            }
            status(&e)
        }
    }
}

/// The properties of the open driver.
fn properties(st: &state::State) -> hipFileDriverProps_t {
    let (config, s) = st.current();
    let knobs = config.fallback;
    let mut control = 0;
    if s.poll_mode {
        control |= 1 << hipFileUsePollMode;
    }
    if config.allow_compat_mode {
        control |= 1 << hipFileAllowCompatMode;
    }
    let mut features = 1 << hipFileBatchIOSupported;
    if s.parallel_io != Some(false) && knobs.io_threads > 1 {
        features |= 1 << hipFileParallelIOSupported;
    }
    // Stream-ordered requests need host functions and stream wait-value operations.
    if st
        .driver
        .as_ref()
        .is_some_and(|d| StreamOrdering::of(d.tuning().gpu().as_ref()).is_some())
    {
        features |= 1 << hipFileStreamsSupported;
    }
    // The fastpath moves local NVMe data peer to peer when the runtime has AMD's file I/O
    // calls and compat mode is not forced; the other kinds are not ours.
    let fastpath = st
        .driver
        .as_ref()
        .is_some_and(|d| d.runtime().amd_file_io && !config.force_compat_mode);
    let status = if fastpath {
        1 << hipFileNVMeSupported
    } else {
        0
    };
    let kib = |bytes: u64| bytes / KIB;
    let c32 = |v: u64| c_uint::try_from(v).unwrap_or(c_uint::MAX);
    hipFileDriverProps_t {
        nvfs: hipFileDriverPropsNvfs {
            major_version: HIPFILE_VERSION_MAJOR,
            minor_version: HIPFILE_VERSION_MINOR,
            poll_thresh_size: s.poll_threshold_kib,
            max_direct_io_size: kib(knobs.task_size),
            driver_status_flags: status,
            driver_control_flags: control,
        },
        feature_flags: features,
        max_device_cache_size: kib(cache_bytes(&config, s)),
        per_buffer_cache_size: kib(chunk_bytes(&config)),
        max_device_pinned_mem_size: kib(pinned_bytes(&config, s)),
        max_batch_io_count: c32(MAX_BATCH_IO),
        max_batch_io_timeout_msecs: c32(s.batch_timeout_ms),
    }
}

/// `hipFileError_t hipFileDriverGetProperties(hipFileDriverProps_t *props)` — fills
/// `*props` with the open driver's limits and settings, sizes in KiB: the version is the
/// interface's; `max_direct_io_size` the task size; `max_device_cache_size` and
/// `max_device_pinned_mem_size` the staging pool's limits; `per_buffer_cache_size` one
/// staging buffer; `max_batch_io_count` 128. The one storage-kind status bit is NVMe, set
/// when the fastpath can serve (the runtime has AMD's file I/O calls and compat mode is
/// not forced); the features are batch I/O, streams when the runtime can order requests on
/// them (host functions and stream wait-value operations), and parallel I/O when more than
/// one I/O worker serves.
///
/// # Errors
///
/// `hipFileInvalidValue` for NULL; `hipFileDriverNotInitialized` when the driver is not
/// open (use count 0), as in cuFile.
///
/// # Safety
///
/// `props` is NULL or writable.
pub unsafe extern "C" fn hipFileDriverGetProperties(
    props: *mut hipFileDriverProps_t,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        if props.is_null() {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        let st = state::lock();
        if st.count == 0 || st.driver.is_none() {
            return hipFileError_t::code(hipFileDriverNotInitialized);
        }
        let p = properties(&st);
        // SAFETY: non-NULL, and the caller vouches that it is writable.
        unsafe { props.write(p) };
        hipFileError_t::SUCCESS
    })
}

/// `hipFileError_t hipFileDriverSetPollMode(bool poll, size_t poll_threshold_size)` —
/// records poll mode and its threshold (KiB), reported by the properties and parameters.
/// Requests complete by waiting (blocking on the worker or the runtime), never by polling,
/// so neither changes how I/O runs. Takes effect at once.
pub extern "C" fn hipFileDriverSetPollMode(
    poll: bool,
    poll_threshold_size: usize,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        let mut st = state::lock();
        let params = &mut st.params;
        for s in [&mut params.pending, &mut params.live] {
            s.poll_mode = poll;
            s.poll_threshold_kib = poll_threshold_size as u64;
        }
        hipFileError_t::SUCCESS
    })
}

/// `hipFileError_t hipFileDriverSetMaxDirectIOSize(size_t max_direct_io_size)` — the
/// largest piece one request is cut into, in KiB (the task size: 4 KiB to 1 GiB).
///
/// # Errors
///
/// `hipFileDriverUnsupportedLimit` outside 4..=1048576 KiB; nothing changes then.
pub extern "C" fn hipFileDriverSetMaxDirectIOSize(max_direct_io_size: usize) -> hipFileError_t {
    boundary(INTERNAL, || {
        apply(|s| set_task_kib(s, max_direct_io_size as u64))
    })
}

/// `hipFileError_t hipFileDriverSetMaxCacheSize(size_t max_cache_size)` — a limit, in KiB,
/// on the staging memory the fallback holds (4 KiB to 64 GiB); the pool holds at most the
/// smaller of this and the pinned memory limit.
///
/// # Errors
///
/// `hipFileDriverUnsupportedLimit` outside 4..=67108864 KiB; nothing changes then.
pub extern "C" fn hipFileDriverSetMaxCacheSize(max_cache_size: usize) -> hipFileError_t {
    boundary(INTERNAL, || {
        apply(|s| set_cache_kib(s, max_cache_size as u64))
    })
}

/// `hipFileError_t hipFileDriverSetMaxPinnedMemSize(size_t max_pinned_size)` — the most
/// pinned host memory, in KiB, the fallback's staging pool holds (4 KiB to 64 GiB).
///
/// # Errors
///
/// `hipFileDriverUnsupportedLimit` outside 4..=67108864 KiB; nothing changes then.
pub extern "C" fn hipFileDriverSetMaxPinnedMemSize(max_pinned_size: usize) -> hipFileError_t {
    boundary(INTERNAL, || {
        apply(|s| set_pinned_kib(s, max_pinned_size as u64))
    })
}
