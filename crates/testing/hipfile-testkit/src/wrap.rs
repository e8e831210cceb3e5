//! [`Injected`]: any GPU runtime with [`Fault`](crate::Fault)s in front of it, for tests that
//! need a real runtime's behaviour (the emulated one, say) and one call to fail or to wait.
//!
//! Every call is counted and checked against the faults first; a call no fault hits goes to
//! the inner runtime unchanged. It has the capabilities the inner runtime has: its streams
//! and AMD file I/O are counted and faulted as the base is, and its host functions and stream
//! memory operations are the inner runtime's own, handed out as they are (no test injects
//! faults into them yet).
//!
//! # Safety
//!
//! The unsafe methods pass the caller's promises on to the inner runtime; a short file-I/O
//! transfer passes a smaller range, which the promise for the whole range covers.

#![allow(unsafe_code)]

use crate::fault::{Call, Effect, Faults, Site};
use hipfile_core::runtime::{
    AmdFileIo, EventHandle, FileIoError, HostFunc, HostFunctions, StreamHandle, StreamMemOps,
    Streams,
};
use hipfile_core::{DevicePtr, GpuRuntime, PointerInfo, RuntimeError};
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A runtime with faults in front of it. See the module documentation.
pub struct Injected {
    inner: Arc<dyn GpuRuntime>,
    faults: Faults,
    /// Bytes asked of `alloc_pinned`, failed calls included.
    pinned_bytes: AtomicU64,
}

impl std::fmt::Debug for Injected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Injected")
            .field("faults", &self.faults)
            .finish_non_exhaustive()
    }
}

impl Injected {
    /// `inner` with no faults yet.
    pub fn new(inner: Arc<dyn GpuRuntime>) -> Injected {
        Injected {
            inner,
            faults: Faults::default(),
            pinned_bytes: AtomicU64::new(0),
        }
    }

    /// The faults, to add or clear some while the runtime is in use.
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// How many calls of this kind were made, failed ones included.
    pub fn calls(&self, call: Call) -> usize {
        self.faults.calls(call)
    }

    /// The bytes of every pinned allocation asked for so far, failed ones included.
    pub fn pinned_bytes(&self) -> u64 {
        self.pinned_bytes.load(Ordering::SeqCst)
    }

    /// The runtime behind the faults.
    pub fn inner(&self) -> &Arc<dyn GpuRuntime> {
        &self.inner
    }

    /// The inner runtime's streams; an error where it has none (only reached through a
    /// capability handed out because it has them).
    fn inner_streams(&self) -> Result<&dyn Streams, RuntimeError> {
        self.inner.require_streams()
    }

    fn enter(&self, call: Call, site: Site) -> Result<(), RuntimeError> {
        match self.faults.hit(call, site) {
            None => Ok(()),
            Some(Effect::Fail { code, message }) => {
                Err(RuntimeError::new(call.runtime_name(), code, message))
            }
            Some(e) => unreachable!("{e:?} on {call:?}: `Faults::add` allows it on file I/O only"),
        }
    }

    /// Counts a file-I/O call and applies its fault: the bytes to pass on, or the error.
    fn file_io(&self, call: Call, addr: DevicePtr, size: u64) -> Result<u64, FileIoError> {
        let site = Site {
            stream: None,
            range: Some((addr.0, size)),
        };
        match self.faults.hit(call, site) {
            None => Ok(size),
            Some(Effect::Fail { code, message }) => Err(FileIoError::Runtime(RuntimeError::new(
                call.runtime_name(),
                code,
                message,
            ))),
            Some(Effect::Errno(e)) => Err(FileIoError::Errno(e)),
            Some(Effect::Unavailable) => Err(FileIoError::Unavailable),
            Some(Effect::Short(max)) => Ok(size.min(max)),
        }
    }
}

fn at(range: (u64, usize), stream: Option<StreamHandle>) -> Site {
    Site {
        stream,
        range: Some((range.0, range.1 as u64)),
    }
}

// SAFETY: every answer is the inner runtime's (whose promises hold) or an error; faults only
// fail, delay or shorten calls, and a shortened transfer touches a part of its range. It hands
// out a capability only where the inner runtime has it.
unsafe impl GpuRuntime for Injected {
    fn thread_init(&self) -> Result<(), RuntimeError> {
        self.enter(Call::ThreadInit, Site::default())?;
        self.inner.thread_init()
    }
    fn device_count(&self) -> Result<i32, RuntimeError> {
        self.enter(Call::DeviceCount, Site::default())?;
        self.inner.device_count()
    }
    fn current_device(&self) -> Result<i32, RuntimeError> {
        self.enter(Call::CurrentDevice, Site::default())?;
        self.inner.current_device()
    }
    fn set_device(&self, device: i32) -> Result<(), RuntimeError> {
        self.enter(Call::SetDevice, Site::default())?;
        self.inner.set_device(device)
    }
    fn pointer_info(&self, ptr: DevicePtr) -> Result<PointerInfo, RuntimeError> {
        self.enter(Call::PointerInfo, Site::default())?;
        self.inner.pointer_info(ptr)
    }
    fn address_range(&self, ptr: DevicePtr) -> Result<(DevicePtr, u64), RuntimeError> {
        self.enter(Call::AddressRange, Site::default())?;
        self.inner.address_range(ptr)
    }
    fn bar1_size(&self, device: i32) -> Result<u64, RuntimeError> {
        self.inner.bar1_size(device)
    }
    fn alloc_device(&self, len: usize) -> Result<DevicePtr, RuntimeError> {
        self.enter(Call::AllocDevice, Site::default())?;
        self.inner.alloc_device(len)
    }
    unsafe fn free_device(&self, ptr: DevicePtr) -> Result<(), RuntimeError> {
        self.enter(Call::FreeDevice, Site::default())?;
        // SAFETY: the caller's promise, passed on.
        unsafe { self.inner.free_device(ptr) }
    }
    fn alloc_pinned(&self, len: usize) -> Result<*mut u8, RuntimeError> {
        self.pinned_bytes
            .fetch_add(u64::try_from(len).unwrap_or(u64::MAX), Ordering::SeqCst);
        self.enter(Call::AllocPinned, Site::default())?;
        self.inner.alloc_pinned(len)
    }
    unsafe fn free_pinned(&self, ptr: *mut u8) -> Result<(), RuntimeError> {
        self.enter(Call::FreePinned, Site::default())?;
        // SAFETY: the caller's promise, passed on.
        unsafe { self.inner.free_pinned(ptr) }
    }
    unsafe fn copy_to_device(
        &self,
        dst: DevicePtr,
        src: *const u8,
        len: usize,
    ) -> Result<(), RuntimeError> {
        self.enter(Call::CopyToDevice, at((dst.0, len), None))?;
        // SAFETY: the caller's promise, passed on.
        unsafe { self.inner.copy_to_device(dst, src, len) }
    }
    unsafe fn copy_to_host(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
    ) -> Result<(), RuntimeError> {
        self.enter(Call::CopyToHost, at((src.0, len), None))?;
        // SAFETY: the caller's promise, passed on.
        unsafe { self.inner.copy_to_host(dst, src, len) }
    }
    // The synchronous copies to a named device count (and fail) as synchronous copies.
    unsafe fn copy_to_device_of(
        &self,
        device: i32,
        dst: DevicePtr,
        src: *const u8,
        len: usize,
    ) -> Result<(), RuntimeError> {
        self.enter(Call::CopyToDevice, at((dst.0, len), None))?;
        // SAFETY: the caller's promise, passed on.
        unsafe { self.inner.copy_to_device_of(device, dst, src, len) }
    }
    unsafe fn copy_to_host_of(
        &self,
        device: i32,
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
    ) -> Result<(), RuntimeError> {
        self.enter(Call::CopyToHost, at((src.0, len), None))?;
        // SAFETY: the caller's promise, passed on.
        unsafe { self.inner.copy_to_host_of(device, dst, src, len) }
    }
    fn streams(&self) -> Option<&dyn Streams> {
        self.inner.streams().map(|_| self as &dyn Streams)
    }
    fn amd_file_io(&self) -> Option<&dyn AmdFileIo> {
        self.inner.amd_file_io().map(|_| self as &dyn AmdFileIo)
    }
}

// SAFETY: as for `GpuRuntime`; handed out only where the inner runtime has streams.
unsafe impl Streams for Injected {
    fn stream_create(&self) -> Result<StreamHandle, RuntimeError> {
        self.enter(Call::StreamCreate, Site::default())?;
        self.inner_streams()?.stream_create()
    }
    fn stream_destroy(&self, stream: StreamHandle) -> Result<(), RuntimeError> {
        self.enter(Call::StreamDestroy, Site::default())?;
        self.inner_streams()?.stream_destroy(stream)
    }
    fn stream_synchronize(&self, stream: StreamHandle) -> Result<(), RuntimeError> {
        let site = Site {
            stream: Some(stream),
            range: None,
        };
        self.enter(Call::StreamSynchronize, site)?;
        self.inner_streams()?.stream_synchronize(stream)
    }
    // The queries pass through uncounted: no test injects faults into them yet.
    fn stream_query(&self, stream: StreamHandle) -> Result<bool, RuntimeError> {
        self.inner_streams()?.stream_query(stream)
    }
    fn event_create(&self) -> Result<EventHandle, RuntimeError> {
        self.enter(Call::EventCreate, Site::default())?;
        self.inner_streams()?.event_create()
    }
    fn event_record(&self, event: EventHandle, stream: StreamHandle) -> Result<(), RuntimeError> {
        let site = Site {
            stream: Some(stream),
            range: None,
        };
        self.enter(Call::EventRecord, site)?;
        self.inner_streams()?.event_record(event, stream)
    }
    fn event_synchronize(&self, event: EventHandle) -> Result<(), RuntimeError> {
        self.enter(Call::EventSynchronize, Site::default())?;
        self.inner_streams()?.event_synchronize(event)
    }
    fn event_query(&self, event: EventHandle) -> Result<bool, RuntimeError> {
        self.inner_streams()?.event_query(event)
    }
    fn event_destroy(&self, event: EventHandle) -> Result<(), RuntimeError> {
        self.enter(Call::EventDestroy, Site::default())?;
        self.inner_streams()?.event_destroy(event)
    }
    unsafe fn copy_to_device_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        len: usize,
        stream: StreamHandle,
    ) -> Result<(), RuntimeError> {
        self.enter(Call::CopyToDevice, at((dst.0, len), Some(stream)))?;
        // SAFETY: the caller's promise, passed on.
        unsafe {
            self.inner_streams()?
                .copy_to_device_async(dst, src, len, stream)
        }
    }
    unsafe fn copy_to_host_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
        stream: StreamHandle,
    ) -> Result<(), RuntimeError> {
        self.enter(Call::CopyToHost, at((src.0, len), Some(stream)))?;
        // SAFETY: the caller's promise, passed on.
        unsafe {
            self.inner_streams()?
                .copy_to_host_async(dst, src, len, stream)
        }
    }
    // Host functions are counted where the inner runtime has them; the stream memory
    // operations are the inner runtime's, uncounted.
    fn host_functions(&self) -> Option<&dyn HostFunctions> {
        self.inner.streams()?.host_functions()?;
        Some(self)
    }
    fn stream_mem_ops(&self) -> Option<&dyn StreamMemOps> {
        self.inner.streams()?.stream_mem_ops()
    }
}

// SAFETY: the inner runtime's host functions, counted; handed out only where it has them.
unsafe impl HostFunctions for Injected {
    fn launch_host_func(&self, stream: StreamHandle, f: HostFunc) -> Result<(), RuntimeError> {
        let site = Site {
            stream: Some(stream),
            range: None,
        };
        self.enter(Call::LaunchHostFunc, site)?;
        self.inner_streams()?
            .host_functions()
            .ok_or_else(|| RuntimeError::unsupported("hipLaunchHostFunc"))?
            .launch_host_func(stream, f)
    }
}

// SAFETY: as for `GpuRuntime`; handed out only where the inner runtime has AMD file I/O.
unsafe impl AmdFileIo for Injected {
    unsafe fn amd_file_read(
        &self,
        fd: RawFd,
        dst: DevicePtr,
        size: u64,
        offset: i64,
    ) -> Result<u64, FileIoError> {
        let size = self.file_io(Call::AmdFileRead, dst, size)?;
        let inner = self.inner.amd_file_io().ok_or(FileIoError::Unavailable)?;
        // SAFETY: the caller's promise, for at most the range it was made for.
        unsafe { inner.amd_file_read(fd, dst, size, offset) }
    }
    unsafe fn amd_file_write(
        &self,
        fd: RawFd,
        src: DevicePtr,
        size: u64,
        offset: i64,
    ) -> Result<u64, FileIoError> {
        let size = self.file_io(Call::AmdFileWrite, src, size)?;
        let inner = self.inner.amd_file_io().ok_or(FileIoError::Unavailable)?;
        // SAFETY: the caller's promise, for at most the range it was made for.
        unsafe { inner.amd_file_write(fd, src, size, offset) }
    }
}
