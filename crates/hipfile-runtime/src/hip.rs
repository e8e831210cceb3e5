//! [`GpuRuntime`] over a loaded HIP runtime, with streams ([`Streams`]), and the capabilities
//! the runtime's optional entry points give where it has them: host functions
//! ([`HostFunctions`]), stream memory operations ([`StreamMemOps`]) and AMD file I/O
//! ([`AmdFileIo`]).
//!
//! # Safety
//!
//! Every `unsafe` block forwards a call whose contract the caller of the `GpuRuntime` (or
//! capability) method already upholds (the same ranges, the same ownership), or hands the
//! runtime pointers to valid locals.
//!
//! A host function crosses the C ABI as a leaked `Box<HostFunc>` and comes back once, in
//! [`host_func_trampoline`], which owns it again and catches any panic: nothing unwinds into
//! the runtime's thread. When the launch fails the box is reclaimed at once.

#![allow(unsafe_code)]

use crate::pinned::{REGISTER_FLAGS, Regions};
use crate::shared::Primitives;
use crate::sync_copy::SyncStreams;
use hipfile_core::runtime::{
    AmdFileIo, EventHandle, FileIoError, HostFunc, HostFunctions, StreamHandle, StreamMemOps,
    Streams,
};
use hipfile_core::{DevicePtr, GpuRuntime, MemoryKind, PointerInfo, RuntimeError};
use hipfile_sys::{
    AmdFileIoError, Hip, HipError, LoadError, LoadOptions, MemoryType, hipAmdFileHandle_t,
    hipEvent_t, hipStream_t, host_malloc_flags, stream_flags, stream_wait_value,
};
use std::ffi::c_void;
use std::os::fd::RawFd;
use std::path::Path;

/// What kind of HIP-ABI library was loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeKind {
    /// AMD's runtime.
    Amd,
    /// `hipfile-emu`, recognised by its `hipfileEmuVersion` marker symbol.
    Emulated,
}

/// A loaded HIP runtime as a [`GpuRuntime`].
pub struct HipRuntime {
    hip: Hip,
    version: i32,
    kind: RuntimeKind,
    /// The streams of synchronous copies (`sync_copy.rs`).
    sync: SyncStreams,
    /// Large pinned allocations, mapped by hipfile and registered (`pinned.rs`).
    regions: Regions,
}

impl std::fmt::Debug for HipRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HipRuntime")
            .field("library", &self.hip.library_path())
            .field("version", &self.version)
            .field("kind", &self.kind)
            .finish()
    }
}

impl HipRuntime {
    /// Searches for and loads the runtime (see `hipfile_sys::candidates`).
    ///
    /// # Errors
    ///
    /// The loader's error, naming every path tried.
    pub fn load(options: &LoadOptions) -> Result<HipRuntime, LoadError> {
        Hip::load(options).map(HipRuntime::new)
    }

    /// Loads the runtime at `path`.
    ///
    /// # Errors
    ///
    /// The loader's error.
    pub fn load_path(path: &Path) -> Result<HipRuntime, LoadError> {
        Hip::load_path(path).map(HipRuntime::new)
    }

    /// Wraps an already loaded runtime.
    pub fn new(hip: Hip) -> HipRuntime {
        // A runtime that cannot say its version is treated as the newest ABI: ROCm 5 is the
        // exception, and it answers.
        let version = hip.runtime_version().unwrap_or(i32::MAX);
        let kind = if hip.has_symbol(c"hipfileEmuVersion") {
            RuntimeKind::Emulated
        } else {
            RuntimeKind::Amd
        };
        HipRuntime {
            hip,
            version,
            kind,
            sync: SyncStreams::default(),
            regions: Regions::default(),
        }
    }

    /// The raw `hipRuntimeGetVersion` value (`i32::MAX` when the runtime would not say).
    pub fn version(&self) -> i32 {
        self.version
    }

    /// AMD's runtime or the emulated one.
    pub fn kind(&self) -> RuntimeKind {
        self.kind
    }

    /// The loaded runtime's raw FFI layer.
    pub fn hip(&self) -> &Hip {
        &self.hip
    }

    fn error(&self, call: &'static str, e: HipError) -> RuntimeError {
        RuntimeError::new(call, e.0, self.hip.error_string(e))
    }
}

fn kind_of(t: MemoryType) -> MemoryKind {
    match t {
        MemoryType::Device => MemoryKind::Device,
        MemoryType::Host => MemoryKind::Host,
        MemoryType::Managed => MemoryKind::Managed,
        MemoryType::Array => MemoryKind::Array,
        MemoryType::Unified => MemoryKind::Unified,
        // An unknown value is not device memory as far as hipfile can tell.
        _ => MemoryKind::Unregistered,
    }
}

fn ptr(p: DevicePtr) -> *mut c_void {
    p.0 as usize as *mut c_void
}

/// The C side of [`HostFunctions::launch_host_func`]: runs and frees the boxed closure that
/// `user_data` carries, catching a panic (which must not unwind into the runtime).
///
/// # Safety
///
/// `user_data` is a `Box<HostFunc>` leaked with `Box::into_raw`, and this is its only use.
pub(crate) unsafe extern "C" fn host_func_trampoline(user_data: *mut c_void) {
    // SAFETY: the caller's promise: a leaked `Box<HostFunc>`, reclaimed once, here.
    let f = unsafe { Box::from_raw(user_data.cast::<HostFunc>()) };
    // A panic has nowhere to go: the closure's owner learns of it through what the closure
    // failed to do.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
}

/// Leaks `f` for [`host_func_trampoline`], calls `launch` with the pointer, and reclaims the
/// closure if `launch` fails (the runtime then never calls the trampoline).
pub(crate) fn launch_boxed<E>(
    f: HostFunc,
    launch: impl FnOnce(*mut c_void) -> Result<(), E>,
) -> Result<(), E> {
    let raw = Box::into_raw(Box::new(f));
    let result = launch(raw.cast());
    if result.is_err() {
        // SAFETY: the launch failed, so the runtime holds no reference to `raw`, which came
        // from `Box::into_raw` above.
        drop(unsafe { Box::from_raw(raw) });
    }
    result
}

fn file_io(e: AmdFileIoError, rt: &HipRuntime, call: &'static str) -> FileIoError {
    match e {
        AmdFileIoError::Status(errno) => FileIoError::Errno(errno),
        AmdFileIoError::Hip(h) => FileIoError::Runtime(rt.error(call, h)),
        AmdFileIoError::Unavailable => FileIoError::Unavailable,
    }
}

impl Drop for HipRuntime {
    fn drop(&mut self) {
        self.sync.destroy_all(self);
    }
}

// SAFETY: each method is one call of the loaded HIP runtime, which allocates, describes and
// copies memory as HIP documents (`hipMalloc`, `hipHostMalloc` page-aligned,
// `hipHostRegister` of hipfile's page-aligned mappings (`pinned.rs`),
// `hipPointerGetAttributes`, `hipMemGetAddressRange`, `hipMemcpy*`), from any thread; the
// memory-type codes are decoded for the runtime's ABI version, so `Device` means device
// memory. The runtime is trusted as the process's GPU driver is.
unsafe impl GpuRuntime for HipRuntime {
    fn thread_init(&self) -> Result<(), RuntimeError> {
        self.hip.init().map_err(|e| self.error("hipInit", e))
    }

    fn device_count(&self) -> Result<i32, RuntimeError> {
        self.hip
            .device_count()
            .map_err(|e| self.error("hipGetDeviceCount", e))
    }

    fn current_device(&self) -> Result<i32, RuntimeError> {
        self.hip
            .get_device()
            .map_err(|e| self.error("hipGetDevice", e))
    }

    fn set_device(&self, device: i32) -> Result<(), RuntimeError> {
        self.hip
            .set_device(device)
            .map_err(|e| self.error("hipSetDevice", e))
    }

    fn pointer_info(&self, p: DevicePtr) -> Result<PointerInfo, RuntimeError> {
        match self.hip.pointer_attributes(ptr(p)) {
            Ok(a) => Ok(PointerInfo {
                memory: kind_of(a.memory_type(self.version)),
                device: a.device,
            }),
            // ROCm 5 answers hipErrorInvalidValue for memory it does not know; ROCm >= 6
            // reports it as Unregistered. Both mean the same here.
            Err(HipError::INVALID_VALUE) if self.version < 60_000_000 => Ok(PointerInfo {
                memory: MemoryKind::Unregistered,
                device: -2,
            }),
            Err(e) => Err(self.error("hipPointerGetAttributes", e)),
        }
    }

    fn address_range(&self, p: DevicePtr) -> Result<(DevicePtr, u64), RuntimeError> {
        let (base, len) = self
            .hip
            .mem_get_address_range(ptr(p))
            .map_err(|e| self.error("hipMemGetAddressRange", e))?;
        Ok((DevicePtr(base as usize as u64), len as u64))
    }

    /// HIP cannot tell it (docs/decisions/cufile-abi.md): it has no call or device
    /// attribute for a BAR size (`hipDeviceAttributeIsLargeBar` is a yes or no).
    fn bar1_size(&self, _device: i32) -> Result<u64, RuntimeError> {
        Err(RuntimeError::unsupported_because(
            "bar1_size",
            "the HIP runtime tells no BAR size: it has no call or device attribute for one",
        ))
    }

    fn alloc_device(&self, len: usize) -> Result<DevicePtr, RuntimeError> {
        // SAFETY: the memory is owned by the caller, who frees it through `free_device`.
        let p = unsafe { self.hip.malloc(len) }.map_err(|e| self.error("hipMalloc", e))?;
        Ok(DevicePtr(p as usize as u64))
    }

    unsafe fn free_device(&self, p: DevicePtr) -> Result<(), RuntimeError> {
        // SAFETY: the caller guarantees `p` came from `alloc_device` and is unused.
        unsafe { self.hip.free(ptr(p)) }.map_err(|e| self.error("hipFree", e))
    }

    crate::shared::shared_methods!(base);

    fn streams(&self) -> Option<&dyn Streams> {
        Some(self)
    }

    /// Where the runtime has both `hipAmdFileRead` and `hipAmdFileWrite` (ROCm 7.2 and later).
    fn amd_file_io(&self) -> Option<&dyn AmdFileIo> {
        self.hip.has_amd_file_io().then_some(self as &dyn AmdFileIo)
    }
}

// SAFETY: each method is one call of the loaded HIP runtime on its streams and events
// (`hipStream*`, `hipEvent*`, `hipMemcpyAsync`), which run their work in order, from any
// thread; host functions and stream memory operations are handed out only where the runtime
// has them.
unsafe impl Streams for HipRuntime {
    fn stream_create(&self) -> Result<StreamHandle, RuntimeError> {
        // SAFETY: the stream is owned by the caller, who destroys it through `stream_destroy`.
        let s = unsafe { self.hip.stream_create(stream_flags::NON_BLOCKING) }
            .map_err(|e| self.error("hipStreamCreateWithFlags", e))?;
        Ok(StreamHandle(s.0 as usize))
    }

    fn stream_destroy(&self, s: StreamHandle) -> Result<(), RuntimeError> {
        // SAFETY: handles only come from `stream_create`; the runtime rejects a stale one.
        unsafe { self.hip.stream_destroy(hipStream_t(s.0 as *mut c_void)) }
            .map_err(|e| self.error("hipStreamDestroy", e))
    }

    fn stream_synchronize(&self, s: StreamHandle) -> Result<(), RuntimeError> {
        // SAFETY: as for `stream_destroy`.
        unsafe { self.hip.stream_synchronize(hipStream_t(s.0 as *mut c_void)) }
            .map_err(|e| self.error("hipStreamSynchronize", e))
    }

    fn event_create(&self) -> Result<EventHandle, RuntimeError> {
        // SAFETY: the event is owned by the caller, who destroys it through `event_destroy`.
        let e = unsafe { self.hip.event_create() }.map_err(|e| self.error("hipEventCreate", e))?;
        Ok(EventHandle(e.0 as usize))
    }

    fn event_record(&self, event: EventHandle, s: StreamHandle) -> Result<(), RuntimeError> {
        // SAFETY: handles only come from `event_create`/`stream_create`.
        unsafe {
            self.hip.event_record(
                hipEvent_t(event.0 as *mut c_void),
                hipStream_t(s.0 as *mut c_void),
            )
        }
        .map_err(|e| self.error("hipEventRecord", e))
    }

    fn event_synchronize(&self, event: EventHandle) -> Result<(), RuntimeError> {
        // SAFETY: as for `event_record`.
        unsafe {
            self.hip
                .event_synchronize(hipEvent_t(event.0 as *mut c_void))
        }
        .map_err(|e| self.error("hipEventSynchronize", e))
    }

    fn event_destroy(&self, event: EventHandle) -> Result<(), RuntimeError> {
        // SAFETY: as for `event_record`.
        unsafe { self.hip.event_destroy(hipEvent_t(event.0 as *mut c_void)) }
            .map_err(|e| self.error("hipEventDestroy", e))
    }

    fn stream_query(&self, s: StreamHandle) -> Result<bool, RuntimeError> {
        // SAFETY: handles only come from `stream_create`; the runtime rejects a stale one.
        unsafe { self.hip.stream_query(hipStream_t(s.0 as *mut c_void)) }
            .map_err(|e| self.error("hipStreamQuery", e))
    }

    fn event_query(&self, event: EventHandle) -> Result<bool, RuntimeError> {
        // SAFETY: handles only come from `event_create`; the runtime rejects a stale one.
        unsafe { self.hip.event_query(hipEvent_t(event.0 as *mut c_void)) }
            .map_err(|e| self.error("hipEventQuery", e))
    }

    crate::shared::shared_methods!(streams);

    /// Where the runtime has `hipLaunchHostFunc` (ROCm 5.2 has not).
    fn host_functions(&self) -> Option<&dyn HostFunctions> {
        self.hip
            .has_launch_host_func()
            .then_some(self as &dyn HostFunctions)
    }

    /// Where the runtime has `hipStreamWaitValue32`, `hipStreamWriteValue32` and
    /// `hipHostGetDevicePointer`.
    fn stream_mem_ops(&self) -> Option<&dyn StreamMemOps> {
        self.hip
            .has_stream_wait_value()
            .then_some(self as &dyn StreamMemOps)
    }
}

// SAFETY: `hipLaunchHostFunc` runs the function once, in stream order; the trampoline owns
// and drops it, and a failed launch drops it at once (`launch_boxed`).
unsafe impl HostFunctions for HipRuntime {
    fn launch_host_func(&self, s: StreamHandle, f: HostFunc) -> Result<(), RuntimeError> {
        launch_boxed(f, |data| {
            // SAFETY: handles only come from `stream_create`; the trampoline's contract is
            // `launch_boxed`'s: `data` is a leaked `Box<HostFunc>` used once.
            unsafe {
                self.hip.launch_host_func(
                    hipStream_t(s.0 as *mut c_void),
                    Some(host_func_trampoline),
                    data,
                )
            }
        })
        .map_err(|e| self.error("hipLaunchHostFunc", e))
    }
}

// SAFETY: `hipStreamWaitValue32` and `hipStreamWriteValue32` act on the one word, in stream
// order, as HIP documents.
unsafe impl StreamMemOps for HipRuntime {
    fn host_device_pointer(&self, host: *const u8) -> Result<DevicePtr, RuntimeError> {
        let device = self
            .hip
            .host_get_device_pointer(host.cast_mut().cast())
            .map_err(|e| self.error("hipHostGetDevicePointer", e))?;
        Ok(DevicePtr(device as usize as u64))
    }

    unsafe fn stream_wait_value32(
        &self,
        s: StreamHandle,
        word: DevicePtr,
        value: u32,
    ) -> Result<(), RuntimeError> {
        // SAFETY: the caller guarantees the word: the device address of pinned memory of
        // this runtime, aligned, allocated until the stream passes the wait.
        unsafe {
            self.hip.stream_wait_value32(
                hipStream_t(s.0 as *mut c_void),
                ptr(word),
                value,
                stream_wait_value::GTE,
                stream_wait_value::MASK_32,
            )
        }
        .map_err(|e| self.error("hipStreamWaitValue32", e))
    }

    unsafe fn stream_write_value32(
        &self,
        s: StreamHandle,
        word: DevicePtr,
        value: u32,
    ) -> Result<(), RuntimeError> {
        // SAFETY: as for `stream_wait_value32`.
        unsafe {
            self.hip
                .stream_write_value32(hipStream_t(s.0 as *mut c_void), ptr(word), value, 0)
        }
        .map_err(|e| self.error("hipStreamWriteValue32", e))
    }
}

// SAFETY: `hipAmdFileRead`/`hipAmdFileWrite` move bytes between the descriptor and the device
// range they are given, as AMD documents; handed out only where the runtime has both.
unsafe impl AmdFileIo for HipRuntime {
    unsafe fn amd_file_read(
        &self,
        fd: RawFd,
        dst: DevicePtr,
        size: u64,
        offset: i64,
    ) -> Result<u64, FileIoError> {
        // SAFETY: the caller guarantees the device range; `fd` is an open descriptor.
        unsafe {
            self.hip
                .amd_file_read(hipAmdFileHandle_t::from_fd(fd), ptr(dst), size, offset)
        }
        .map_err(|e| file_io(e, self, "hipAmdFileRead"))
    }

    unsafe fn amd_file_write(
        &self,
        fd: RawFd,
        src: DevicePtr,
        size: u64,
        offset: i64,
    ) -> Result<u64, FileIoError> {
        // SAFETY: the caller guarantees the device range; `fd` is an open descriptor.
        unsafe {
            self.hip
                .amd_file_write(hipAmdFileHandle_t::from_fd(fd), ptr(src), size, offset)
        }
        .map_err(|e| file_io(e, self, "hipAmdFileWrite"))
    }
}

impl Primitives for HipRuntime {
    fn regions(&self) -> &Regions {
        &self.regions
    }

    fn sync_streams(&self) -> &SyncStreams {
        &self.sync
    }

    unsafe fn register_host(&self, p: *mut c_void, len: usize) -> bool {
        // SAFETY: the caller's guarantees are `register_host`'s.
        unsafe { self.hip.host_register(p, len, REGISTER_FLAGS) }.is_ok()
    }

    unsafe fn unregister_host(&self, p: *mut c_void) -> Result<(), RuntimeError> {
        // SAFETY: the caller's guarantees are `unregister_host`'s.
        unsafe { self.hip.host_unregister(p) }.map_err(|e| self.error("hipHostUnregister", e))
    }

    fn alloc_host(&self, len: usize) -> Result<*mut u8, RuntimeError> {
        // SAFETY: the memory is owned by the caller, who frees it through `free_host`.
        let p = unsafe { self.hip.host_malloc(len, host_malloc_flags::PORTABLE) }
            .map_err(|e| self.error("hipHostMalloc", e))?;
        Ok(p.cast())
    }

    unsafe fn free_host(&self, p: *mut u8) -> Result<(), RuntimeError> {
        // SAFETY: the caller guarantees `p` came from `alloc_host` and is unused.
        unsafe { self.hip.host_free(p.cast()) }.map_err(|e| self.error("hipHostFree", e))
    }

    unsafe fn memcpy_async(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        len: usize,
        kind: hipfile_sys::hipMemcpyKind,
        s: StreamHandle,
    ) -> Result<(), RuntimeError> {
        // SAFETY: the caller guarantees both ranges until the copy completes; the stream
        // handle came from `stream_create` or the caller.
        unsafe {
            self.hip
                .memcpy_async(dst, src, len, kind, hipStream_t(s.0 as *mut c_void))
        }
        .map_err(|e| self.error("hipMemcpyAsync", e))
    }
}
