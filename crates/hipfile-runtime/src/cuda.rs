//! [`GpuRuntime`] over a loaded CUDA runtime and driver, for NVIDIA GPUs, with streams
//! ([`Streams`]), host functions ([`HostFunctions`]) and, where the driver has them, stream
//! memory operations ([`StreamMemOps`]).
//!
//! CUDA has no `hipAmdFileRead`/`hipAmdFileWrite`: [`CudaRuntime`] hands out no AMD file I/O
//! (`GpuRuntime::amd_file_io` is `None`), so the fastpath declines and the fallback serves.
//! Allocation ranges come from the driver API (`cuMemGetAddressRange_v2`), whose `CUresult` is
//! a code space of its own: a failure keeps its number in [`RuntimeError::code`] under the
//! driver call's name, with the driver's text and the `CUresult` name in the message. A
//! device's BAR1 size comes from NVIDIA's NVML, loaded when first asked for (`bar1.rs`).
//!
//! # Safety
//!
//! Every `unsafe` block forwards a call whose contract the caller of the `GpuRuntime` (or
//! capability) method already upholds (the same ranges, the same ownership), or hands the
//! runtime pointers to valid locals.

#![allow(unsafe_code)]

use crate::hip::{host_func_trampoline, launch_boxed};
use crate::pinned::{REGISTER_FLAGS, Regions};
use crate::shared::Primitives;
use crate::sync_copy::SyncStreams;
use hipfile_core::runtime::{
    EventHandle, HostFunc, HostFunctions, StreamHandle, StreamMemOps, Streams,
};
use hipfile_core::{DevicePtr, GpuRuntime, MemoryKind, PointerInfo, RuntimeError};
use hipfile_sys::{
    CuError, Cuda, CudaError, CudaLoadOptions, CudaVersion, LoadError, MemoryType, Nvml,
    cu_stream_value, cudaEvent_t, cudaStream_t, decode_cuda_memory_type, host_malloc_flags,
    stream_flags,
};
use std::cell::Cell;
use std::ffi::c_void;
use std::path::Path;
use std::sync::OnceLock;

thread_local! {
    /// The `cudaFree` of the runtime whose context [`CudaRuntime::thread_init`] last made
    /// current on this thread (as an address), so that it does the work once per thread.
    static CONTEXT_READY_FOR: Cell<usize> = const { Cell::new(0) };
}

/// What `cudaPointerGetAttributes` reports as the device of memory it does not know: no
/// device, as ROCm ≥ 6 reports it.
const NO_DEVICE: i32 = -2;

/// A loaded CUDA runtime as a [`GpuRuntime`].
pub struct CudaRuntime {
    cuda: Cuda,
    version: CudaVersion,
    /// The streams of synchronous copies (`sync_copy.rs`).
    sync: SyncStreams,
    /// Large pinned allocations, mapped by hipfile and registered (`pinned.rs`).
    regions: Regions,
    /// NVML, loaded when a BAR1 size is first asked for (`bar1.rs`).
    nvml: OnceLock<Result<Nvml, LoadError>>,
}

impl std::fmt::Debug for CudaRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaRuntime")
            .field("library", &self.cuda.library_path())
            .field("driver", &self.cuda.driver_library_path())
            .field("version", &self.version)
            .finish()
    }
}

impl CudaRuntime {
    /// Searches for and loads the CUDA runtime and driver (see `hipfile_sys::cuda_candidates`).
    ///
    /// # Errors
    ///
    /// The loader's error, naming every path tried.
    pub fn load(options: &CudaLoadOptions) -> Result<CudaRuntime, LoadError> {
        Cuda::load(options).map(CudaRuntime::new)
    }

    /// Loads the CUDA runtime at `path` (and the driver).
    ///
    /// # Errors
    ///
    /// The loader's error.
    pub fn load_path(path: &Path) -> Result<CudaRuntime, LoadError> {
        Cuda::load_path(path).map(CudaRuntime::new)
    }

    /// Wraps an already loaded runtime.
    pub fn new(cuda: Cuda) -> CudaRuntime {
        // `cudaRuntimeGetVersion` needs no device and does not fail in practice; a runtime
        // that cannot say is treated as the newest ABI.
        let version = CudaVersion(cuda.runtime_version().unwrap_or(i32::MAX));
        CudaRuntime {
            cuda,
            version,
            sync: SyncStreams::default(),
            regions: Regions::default(),
            nvml: OnceLock::new(),
        }
    }

    /// The `cudaRuntimeGetVersion` value (displays as `13.0`; `i32::MAX` when the runtime
    /// would not say).
    pub fn version(&self) -> CudaVersion {
        self.version
    }

    /// `cudaDriverGetVersion`: the newest CUDA version the driver supports.
    ///
    /// # Errors
    ///
    /// The runtime's error.
    pub fn driver_version(&self) -> Result<CudaVersion, RuntimeError> {
        self.cuda
            .driver_version()
            .map(CudaVersion)
            .map_err(|e| self.error("cudaDriverGetVersion", e))
    }

    /// `cudaGetDeviceCount`: the number of usable devices.
    ///
    /// # Errors
    ///
    /// The runtime's error (`cudaErrorNoDevice`, `cudaErrorInsufficientDriver`, …).
    pub fn device_count(&self) -> Result<i32, RuntimeError> {
        self.cuda
            .device_count()
            .map_err(|e| self.error("cudaGetDeviceCount", e))
    }

    /// The loaded runtime's raw FFI layer.
    pub fn cuda(&self) -> &Cuda {
        &self.cuda
    }

    fn error(&self, call: &'static str, e: CudaError) -> RuntimeError {
        RuntimeError::new(call, e.0, self.cuda.error_string(e))
    }

    /// A driver failure: the `CUresult` number, the driver's text and the enumerator's name,
    /// so that it cannot be read as a `cudaError_t`.
    fn driver_error(&self, call: &'static str, e: CuError) -> RuntimeError {
        let text = self.cuda.driver_error_string(e);
        let text = if text.is_empty() {
            "unknown driver error".to_string()
        } else {
            text
        };
        let message = match e.name() {
            Some(name) => format!("{text} [CUresult {name}]"),
            None => format!("{text} [CUresult]"),
        };
        RuntimeError::new(call, e.0, message)
    }
}

fn kind_of(t: MemoryType) -> MemoryKind {
    match t {
        MemoryType::Device => MemoryKind::Device,
        MemoryType::Host => MemoryKind::Host,
        MemoryType::Managed => MemoryKind::Managed,
        // CUDA reports no arrays or unified memory through this call; an unknown value is not
        // device memory as far as hipfile can tell.
        _ => MemoryKind::Unregistered,
    }
}

fn ptr(p: DevicePtr) -> *mut c_void {
    p.0 as usize as *mut c_void
}

fn stream(s: StreamHandle) -> cudaStream_t {
    cudaStream_t(s.0 as *mut c_void)
}

fn event(e: EventHandle) -> cudaEvent_t {
    cudaEvent_t(e.0 as *mut c_void)
}

impl Drop for CudaRuntime {
    fn drop(&mut self) {
        self.sync.destroy_all(self);
    }
}

// SAFETY: each method is one call of the loaded CUDA runtime, which allocates, describes and
// copies memory as CUDA documents (`cudaMalloc`, `cudaHostAlloc` page-aligned,
// `cudaHostRegister` of hipfile's page-aligned mappings (`pinned.rs`),
// `cudaPointerGetAttributes`, `cuMemGetAddressRange`, `cudaMemcpy*`), from any thread. The
// runtime is trusted as the process's GPU driver is.
unsafe impl GpuRuntime for CudaRuntime {
    /// `cuInit(0)` once per process, then `cudaFree(NULL)` once per thread, which makes the
    /// current device's primary context current for the driver calls.
    fn thread_init(&self) -> Result<(), RuntimeError> {
        let key = self.cuda.fns().cudaFree as usize;
        if CONTEXT_READY_FOR.with(Cell::get) == key {
            return Ok(());
        }
        self.cuda
            .driver_init()
            .map_err(|e| self.driver_error("cuInit", e))?;
        self.cuda
            .init_context()
            .map_err(|e| self.error("cudaFree", e))?;
        CONTEXT_READY_FOR.with(|c| c.set(key));
        Ok(())
    }

    fn device_count(&self) -> Result<i32, RuntimeError> {
        CudaRuntime::device_count(self)
    }

    fn current_device(&self) -> Result<i32, RuntimeError> {
        self.cuda
            .get_device()
            .map_err(|e| self.error("cudaGetDevice", e))
    }

    /// `cudaSetDevice`, which also makes the device's primary context current for the
    /// driver calls made on this thread afterwards.
    fn set_device(&self, device: i32) -> Result<(), RuntimeError> {
        self.cuda
            .set_device(device)
            .map_err(|e| self.error("cudaSetDevice", e))
    }

    fn pointer_info(&self, p: DevicePtr) -> Result<PointerInfo, RuntimeError> {
        match self.cuda.pointer_attributes(ptr(p)) {
            Ok(a) => {
                let memory = kind_of(decode_cuda_memory_type(a.type_));
                // The runtime's device field means nothing for memory it does not know.
                let device = if memory == MemoryKind::Unregistered {
                    NO_DEVICE
                } else {
                    a.device
                };
                Ok(PointerInfo { memory, device })
            }
            // Before CUDA 11 plain host memory was an error rather than type Unregistered.
            Err(CudaError::INVALID_VALUE) if self.version < CudaVersion::CUDA_11_0 => {
                Ok(PointerInfo {
                    memory: MemoryKind::Unregistered,
                    device: NO_DEVICE,
                })
            }
            Err(e) => Err(self.error("cudaPointerGetAttributes", e)),
        }
    }

    fn address_range(&self, p: DevicePtr) -> Result<(DevicePtr, u64), RuntimeError> {
        // The driver looks the address up in the thread's current context.
        self.thread_init()?;
        let range = match self.cuda.mem_get_address_range(p.0) {
            // The context this thread had was replaced (a device reset, another device made
            // current by the caller): make the runtime's current again and ask once more.
            Err(CuError::INVALID_CONTEXT) => {
                self.cuda
                    .init_context()
                    .map_err(|e| self.error("cudaFree", e))?;
                self.cuda.mem_get_address_range(p.0)
            }
            other => other,
        };
        let (base, len) = range.map_err(|e| self.driver_error("cuMemGetAddressRange_v2", e))?;
        Ok((DevicePtr(base), len as u64))
    }

    /// From NVML (`libnvidia-ml.so.1`, loaded on the first call), through the device's PCI
    /// bus id (`bar1.rs`).
    fn bar1_size(&self, device: i32) -> Result<u64, RuntimeError> {
        crate::bar1::bar1_size(
            device,
            |d| {
                self.cuda
                    .device_pci_bus_id(d)
                    .map_err(|e| self.error("cudaDeviceGetPCIBusId", e))
            },
            || {
                self.nvml
                    .get_or_init(Nvml::load)
                    .as_ref()
                    .map_err(|e| e.to_string())
            },
        )
    }

    fn alloc_device(&self, len: usize) -> Result<DevicePtr, RuntimeError> {
        // SAFETY: the memory is owned by the caller, who frees it through `free_device`.
        let p = unsafe { self.cuda.malloc(len) }.map_err(|e| self.error("cudaMalloc", e))?;
        Ok(DevicePtr(p as usize as u64))
    }

    unsafe fn free_device(&self, p: DevicePtr) -> Result<(), RuntimeError> {
        // SAFETY: the caller guarantees `p` came from `alloc_device` and is unused.
        unsafe { self.cuda.free(ptr(p)) }.map_err(|e| self.error("cudaFree", e))
    }

    crate::shared::shared_methods!(base);

    fn streams(&self) -> Option<&dyn Streams> {
        Some(self)
    }

    // No `amd_file_io`: CUDA has no `hipAmdFileRead`/`hipAmdFileWrite`.
}

// SAFETY: each method is one call of the loaded CUDA runtime on its streams and events
// (`cudaStream*`, `cudaEvent*`, `cudaMemcpyAsync`), which run their work in order, from any
// thread; stream memory operations are handed out only where the driver has them.
unsafe impl Streams for CudaRuntime {
    fn stream_create(&self) -> Result<StreamHandle, RuntimeError> {
        // SAFETY: the stream is owned by the caller, who destroys it through `stream_destroy`.
        let s = unsafe { self.cuda.stream_create(stream_flags::NON_BLOCKING) }
            .map_err(|e| self.error("cudaStreamCreateWithFlags", e))?;
        Ok(StreamHandle(s.0 as usize))
    }

    fn stream_destroy(&self, s: StreamHandle) -> Result<(), RuntimeError> {
        // SAFETY: handles only come from `stream_create`; the runtime rejects a stale one.
        unsafe { self.cuda.stream_destroy(stream(s)) }
            .map_err(|e| self.error("cudaStreamDestroy", e))
    }

    fn stream_synchronize(&self, s: StreamHandle) -> Result<(), RuntimeError> {
        // SAFETY: as for `stream_destroy`.
        unsafe { self.cuda.stream_synchronize(stream(s)) }
            .map_err(|e| self.error("cudaStreamSynchronize", e))
    }

    fn event_create(&self) -> Result<EventHandle, RuntimeError> {
        // SAFETY: the event is owned by the caller, who destroys it through `event_destroy`.
        let e =
            unsafe { self.cuda.event_create() }.map_err(|e| self.error("cudaEventCreate", e))?;
        Ok(EventHandle(e.0 as usize))
    }

    fn event_record(&self, e: EventHandle, s: StreamHandle) -> Result<(), RuntimeError> {
        // SAFETY: handles only come from `event_create`/`stream_create`.
        unsafe { self.cuda.event_record(event(e), stream(s)) }
            .map_err(|e| self.error("cudaEventRecord", e))
    }

    fn event_synchronize(&self, e: EventHandle) -> Result<(), RuntimeError> {
        // SAFETY: as for `event_record`.
        unsafe { self.cuda.event_synchronize(event(e)) }
            .map_err(|e| self.error("cudaEventSynchronize", e))
    }

    fn event_destroy(&self, e: EventHandle) -> Result<(), RuntimeError> {
        // SAFETY: as for `event_record`.
        unsafe { self.cuda.event_destroy(event(e)) }.map_err(|e| self.error("cudaEventDestroy", e))
    }

    fn stream_query(&self, s: StreamHandle) -> Result<bool, RuntimeError> {
        // SAFETY: handles only come from `stream_create`; the runtime rejects a stale one.
        unsafe { self.cuda.stream_query(stream(s)) }.map_err(|e| self.error("cudaStreamQuery", e))
    }

    fn event_query(&self, e: EventHandle) -> Result<bool, RuntimeError> {
        // SAFETY: handles only come from `event_create`; the runtime rejects a stale one.
        unsafe { self.cuda.event_query(event(e)) }.map_err(|e| self.error("cudaEventQuery", e))
    }

    crate::shared::shared_methods!(streams);

    /// Always: `cudaLaunchHostFunc` is one of the calls a CUDA runtime must have to load.
    fn host_functions(&self) -> Option<&dyn HostFunctions> {
        Some(self)
    }

    /// Where the driver has `cuStreamWaitValue32_v2` and `cuStreamWriteValue32_v2` (CUDA
    /// 11.7 and later) and the runtime `cudaHostGetDevicePointer`.
    fn stream_mem_ops(&self) -> Option<&dyn StreamMemOps> {
        self.cuda
            .has_stream_wait_value()
            .then_some(self as &dyn StreamMemOps)
    }
}

// SAFETY: `cudaLaunchHostFunc` runs the function once, in stream order; the trampoline owns
// and drops it, and a failed launch drops it at once (`launch_boxed`).
unsafe impl HostFunctions for CudaRuntime {
    fn launch_host_func(&self, s: StreamHandle, f: HostFunc) -> Result<(), RuntimeError> {
        launch_boxed(f, |data| {
            // SAFETY: handles only come from `stream_create`; the trampoline's contract is
            // `launch_boxed`'s: `data` is a leaked `Box<HostFunc>` used once.
            unsafe {
                self.cuda
                    .launch_host_func(stream(s), Some(host_func_trampoline), data)
            }
        })
        .map_err(|e| self.error("cudaLaunchHostFunc", e))
    }
}

// SAFETY: `cuStreamWaitValue32_v2` and `cuStreamWriteValue32_v2` act on the one word, in
// stream order, as CUDA documents.
unsafe impl StreamMemOps for CudaRuntime {
    fn host_device_pointer(&self, host: *const u8) -> Result<DevicePtr, RuntimeError> {
        let device = self
            .cuda
            .host_get_device_pointer(host.cast_mut().cast())
            .map_err(|e| self.error("cudaHostGetDevicePointer", e))?;
        Ok(DevicePtr(device))
    }

    unsafe fn stream_wait_value32(
        &self,
        s: StreamHandle,
        word: DevicePtr,
        value: u32,
    ) -> Result<(), RuntimeError> {
        // A driver call: it needs `cuInit` and a current context on this thread.
        self.thread_init()?;
        // SAFETY: the caller guarantees the word: the device address of pinned memory of
        // this runtime, aligned, allocated until the stream passes the wait.
        unsafe {
            self.cuda
                .stream_wait_value32(stream(s), word.0, value, cu_stream_value::WAIT_GEQ)
        }
        .map_err(|e| self.driver_error("cuStreamWaitValue32_v2", e))
    }

    unsafe fn stream_write_value32(
        &self,
        s: StreamHandle,
        word: DevicePtr,
        value: u32,
    ) -> Result<(), RuntimeError> {
        // As for `stream_wait_value32`.
        self.thread_init()?;
        // SAFETY: as for `stream_wait_value32`.
        unsafe {
            self.cuda
                .stream_write_value32(stream(s), word.0, value, cu_stream_value::WRITE_DEFAULT)
        }
        .map_err(|e| self.driver_error("cuStreamWriteValue32_v2", e))
    }
}

impl Primitives for CudaRuntime {
    fn regions(&self) -> &Regions {
        &self.regions
    }

    fn sync_streams(&self) -> &SyncStreams {
        &self.sync
    }

    unsafe fn register_host(&self, p: *mut c_void, len: usize) -> bool {
        // SAFETY: the caller's guarantees are `register_host`'s.
        unsafe { self.cuda.host_register(p, len, REGISTER_FLAGS) }.is_ok()
    }

    unsafe fn unregister_host(&self, p: *mut c_void) -> Result<(), RuntimeError> {
        // SAFETY: the caller's guarantees are `unregister_host`'s.
        unsafe { self.cuda.host_unregister(p) }.map_err(|e| self.error("cudaHostUnregister", e))
    }

    fn alloc_host(&self, len: usize) -> Result<*mut u8, RuntimeError> {
        // SAFETY: the memory is owned by the caller, who frees it through `free_host`.
        let p = unsafe { self.cuda.host_alloc(len, host_malloc_flags::PORTABLE) }
            .map_err(|e| self.error("cudaHostAlloc", e))?;
        Ok(p.cast())
    }

    unsafe fn free_host(&self, p: *mut u8) -> Result<(), RuntimeError> {
        // SAFETY: the caller guarantees `p` came from `alloc_host` and is unused.
        unsafe { self.cuda.free_host(p.cast()) }.map_err(|e| self.error("cudaFreeHost", e))
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
        unsafe { self.cuda.memcpy_async(dst, src, len, kind, stream(s)) }
            .map_err(|e| self.error("cudaMemcpyAsync", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_kinds() {
        assert_eq!(
            kind_of(decode_cuda_memory_type(0)),
            MemoryKind::Unregistered
        );
        assert_eq!(kind_of(decode_cuda_memory_type(1)), MemoryKind::Host);
        assert_eq!(kind_of(decode_cuda_memory_type(2)), MemoryKind::Device);
        assert_eq!(kind_of(decode_cuda_memory_type(3)), MemoryKind::Managed);
        assert_eq!(
            kind_of(decode_cuda_memory_type(7)),
            MemoryKind::Unregistered
        );
    }

    #[test]
    fn handles_round_trip() {
        let s = StreamHandle(0x1234_5000);
        assert_eq!(stream(s).0 as usize, s.0);
        let e = EventHandle(0x9876_0000);
        assert_eq!(event(e).0 as usize, e.0);
        assert_eq!(ptr(DevicePtr(0x7f00_0000_1000)) as usize, 0x7f00_0000_1000);
    }

    #[test]
    fn is_a_gpu_runtime() {
        fn check<T: GpuRuntime>() {}
        check::<CudaRuntime>();
    }
}
