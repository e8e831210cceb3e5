//! The `GpuRuntime` and `Streams` bodies that the HIP and CUDA runtimes share, written once
//! over the few primitives in which they differ ([`Primitives`]: each runtime's
//! registration, allocation and asynchronous copy calls, with its own names in errors):
//!
//! - pinned memory: from 2 MiB up a mapping of hipfile's own, registered (`pinned.rs`), else
//!   the runtime's allocation; freed by whichever made it;
//! - copies: an asynchronous one on the caller's stream; a synchronous one on a non-blocking
//!   stream of the memory's device, waited for (`sync_copy.rs`).
//!
//! # Safety
//!
//! Each body forwards to the primitives under the contract of the `GpuRuntime` or `Streams`
//! method it implements, which its caller upholds (the same ranges, the same ownership).

#![allow(unsafe_code)]

use crate::pinned::Regions;
use crate::sync_copy::SyncStreams;
use hipfile_core::runtime::{StreamHandle, Streams};
use hipfile_core::{DevicePtr, GpuRuntime, RuntimeError};
use hipfile_sys::{hipMemcpyKind, memcpy_kind};
use std::ffi::c_void;

/// The calls in which the HIP and CUDA runtimes differ, for the bodies here.
pub(crate) trait Primitives: GpuRuntime + Streams {
    /// The pinned regions hipfile mapped and registered.
    fn regions(&self) -> &Regions;

    /// The streams of synchronous copies.
    fn sync_streams(&self) -> &SyncStreams;

    /// Registers `p..p + len` (a mapping of [`Primitives::regions`]) as pinned, portable and
    /// mapped memory; whether the runtime took it.
    ///
    /// # Safety
    ///
    /// The range is mapped, and unregistered before it is unmapped.
    unsafe fn register_host(&self, p: *mut c_void, len: usize) -> bool;

    /// Unregisters memory that [`Primitives::register_host`] registered.
    ///
    /// # Safety
    ///
    /// `p` was registered and is unused.
    unsafe fn unregister_host(&self, p: *mut c_void) -> Result<(), RuntimeError>;

    /// The runtime's own pinned, portable allocation of `len` bytes.
    fn alloc_host(&self, len: usize) -> Result<*mut u8, RuntimeError>;

    /// Frees memory that [`Primitives::alloc_host`] allocated.
    ///
    /// # Safety
    ///
    /// `p` came from `alloc_host` and is unused.
    unsafe fn free_host(&self, p: *mut u8) -> Result<(), RuntimeError>;

    /// An asynchronous copy of `len` bytes on `stream`, `kind` saying which way (CUDA's
    /// `cudaMemcpyKind` has HIP's values).
    ///
    /// # Safety
    ///
    /// Both ranges are valid for the copy until the stream has done it.
    unsafe fn memcpy_async(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        len: usize,
        kind: hipMemcpyKind,
        stream: StreamHandle,
    ) -> Result<(), RuntimeError>;
}

/// `GpuRuntime::alloc_pinned`: a registered mapping of hipfile's own where the size and the
/// runtime allow, else the runtime's allocation.
pub(crate) fn alloc_pinned(rt: &impl Primitives, len: usize) -> Result<*mut u8, RuntimeError> {
    let registered = rt.regions().pin(len, |p, len| {
        // SAFETY: `p..p + len` is a mapping of `regions`, unregistered before it is unmapped
        // (`free_pinned`).
        unsafe { rt.register_host(p, len) }
    });
    match registered {
        Some(p) => Ok(p),
        None => rt.alloc_host(len),
    }
}

/// `GpuRuntime::free_pinned`.
///
/// # Safety
///
/// `p` came from [`alloc_pinned`] of `rt` and is unused.
pub(crate) unsafe fn free_pinned(rt: &impl Primitives, p: *mut u8) -> Result<(), RuntimeError> {
    let unregister = |p| {
        // SAFETY: the caller guarantees `p` came from `alloc_pinned` and is unused.
        unsafe { rt.unregister_host(p) }
    };
    if let Some(done) = rt.regions().unpin(p, unregister) {
        return done;
    }
    // SAFETY: as above; memory not of `regions` came from the runtime's allocation.
    unsafe { rt.free_host(p) }
}

/// `GpuRuntime::copy_to_device`: synchronously, on a non-blocking stream of the memory's
/// device.
///
/// # Safety
///
/// `GpuRuntime::copy_to_device`'s.
pub(crate) unsafe fn copy_to_device(
    rt: &impl Primitives,
    dst: DevicePtr,
    src: *const u8,
    len: usize,
) -> Result<(), RuntimeError> {
    // SAFETY: the caller guarantees both ranges for the call's duration; the copy is on a
    // stream of the pool, waited for before returning.
    rt.sync_streams().run(rt, dst, |s| unsafe {
        copy_to_device_async(rt, dst, src, len, s)
    })
}

/// `GpuRuntime::copy_to_host`, as [`copy_to_device`] the other way.
///
/// # Safety
///
/// `GpuRuntime::copy_to_host`'s.
pub(crate) unsafe fn copy_to_host(
    rt: &impl Primitives,
    dst: *mut u8,
    src: DevicePtr,
    len: usize,
) -> Result<(), RuntimeError> {
    // SAFETY: as for `copy_to_device`.
    rt.sync_streams().run(rt, src, |s| unsafe {
        copy_to_host_async(rt, dst, src, len, s)
    })
}

/// `GpuRuntime::copy_to_device_of`: synchronously, on a non-blocking stream of `device`.
///
/// # Safety
///
/// `GpuRuntime::copy_to_device`'s.
pub(crate) unsafe fn copy_to_device_of(
    rt: &impl Primitives,
    device: i32,
    dst: DevicePtr,
    src: *const u8,
    len: usize,
) -> Result<(), RuntimeError> {
    // SAFETY: the caller's guarantees are `copy_to_device`'s; on a stream of the pool,
    // waited for before returning.
    rt.sync_streams().run_on(rt, device, |s| unsafe {
        copy_to_device_async(rt, dst, src, len, s)
    })
}

/// `GpuRuntime::copy_to_host_of`, as [`copy_to_device_of`] the other way.
///
/// # Safety
///
/// `GpuRuntime::copy_to_host`'s.
pub(crate) unsafe fn copy_to_host_of(
    rt: &impl Primitives,
    device: i32,
    dst: *mut u8,
    src: DevicePtr,
    len: usize,
) -> Result<(), RuntimeError> {
    // SAFETY: as for `copy_to_device_of`.
    rt.sync_streams().run_on(rt, device, |s| unsafe {
        copy_to_host_async(rt, dst, src, len, s)
    })
}

/// `Streams::copy_to_device_async`.
///
/// # Safety
///
/// `Streams::copy_to_device_async`'s.
pub(crate) unsafe fn copy_to_device_async(
    rt: &impl Primitives,
    dst: DevicePtr,
    src: *const u8,
    len: usize,
    stream: StreamHandle,
) -> Result<(), RuntimeError> {
    let dst_ptr = dst.0 as usize as *mut c_void;
    // SAFETY: the caller guarantees both ranges until the copy completes.
    unsafe {
        rt.memcpy_async(
            dst_ptr,
            src.cast(),
            len,
            memcpy_kind::HOST_TO_DEVICE,
            stream,
        )
    }
}

/// `Streams::copy_to_host_async`.
///
/// # Safety
///
/// `Streams::copy_to_host_async`'s.
pub(crate) unsafe fn copy_to_host_async(
    rt: &impl Primitives,
    dst: *mut u8,
    src: DevicePtr,
    len: usize,
    stream: StreamHandle,
) -> Result<(), RuntimeError> {
    let src_ptr = src.0 as usize as *const c_void;
    // SAFETY: the caller guarantees both ranges until the copy completes.
    unsafe {
        rt.memcpy_async(
            dst.cast(),
            src_ptr,
            len,
            memcpy_kind::DEVICE_TO_HOST,
            stream,
        )
    }
}

/// The methods whose bodies are in this module, for a type that implements [`Primitives`]:
/// `shared_methods!(base)` in its `impl GpuRuntime` (`alloc_pinned`, `free_pinned` and the
/// four synchronous copies), `shared_methods!(streams)` in its `impl Streams` (the two
/// asynchronous copies).
macro_rules! shared_methods {
    (base) => {
        fn alloc_pinned(&self, len: usize) -> Result<*mut u8, RuntimeError> {
            crate::shared::alloc_pinned(self, len)
        }

        unsafe fn free_pinned(&self, p: *mut u8) -> Result<(), RuntimeError> {
            // SAFETY: the caller's guarantees are `free_pinned`'s.
            unsafe { crate::shared::free_pinned(self, p) }
        }

        unsafe fn copy_to_device(
            &self,
            dst: DevicePtr,
            src: *const u8,
            len: usize,
        ) -> Result<(), RuntimeError> {
            // SAFETY: the caller's guarantees are `copy_to_device`'s.
            unsafe { crate::shared::copy_to_device(self, dst, src, len) }
        }

        unsafe fn copy_to_host(
            &self,
            dst: *mut u8,
            src: DevicePtr,
            len: usize,
        ) -> Result<(), RuntimeError> {
            // SAFETY: the caller's guarantees are `copy_to_host`'s.
            unsafe { crate::shared::copy_to_host(self, dst, src, len) }
        }

        unsafe fn copy_to_device_of(
            &self,
            device: i32,
            dst: DevicePtr,
            src: *const u8,
            len: usize,
        ) -> Result<(), RuntimeError> {
            // SAFETY: the caller's guarantees are `copy_to_device`'s.
            unsafe { crate::shared::copy_to_device_of(self, device, dst, src, len) }
        }

        unsafe fn copy_to_host_of(
            &self,
            device: i32,
            dst: *mut u8,
            src: DevicePtr,
            len: usize,
        ) -> Result<(), RuntimeError> {
            // SAFETY: the caller's guarantees are `copy_to_host`'s.
            unsafe { crate::shared::copy_to_host_of(self, device, dst, src, len) }
        }
    };
    (streams) => {
        unsafe fn copy_to_device_async(
            &self,
            dst: DevicePtr,
            src: *const u8,
            len: usize,
            stream: StreamHandle,
        ) -> Result<(), RuntimeError> {
            // SAFETY: the caller's guarantees are `copy_to_device_async`'s.
            unsafe { crate::shared::copy_to_device_async(self, dst, src, len, stream) }
        }

        unsafe fn copy_to_host_async(
            &self,
            dst: *mut u8,
            src: DevicePtr,
            len: usize,
            stream: StreamHandle,
        ) -> Result<(), RuntimeError> {
            // SAFETY: the caller's guarantees are `copy_to_host_async`'s.
            unsafe { crate::shared::copy_to_host_async(self, dst, src, len, stream) }
        }
    };
}
pub(crate) use shared_methods;
