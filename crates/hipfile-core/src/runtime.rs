//! The narrow seam between hipfile and a GPU runtime.
//!
//! # Contract
//!
//! [`GpuRuntime`] is all a backend may ask of the GPU: the devices and the calling thread's
//! current one, pointer attributes and allocation ranges, pinned host memory, host⇄device
//! copies, streams and events, and AMD's file-I/O entry points as an optional capability.
//! Streams and events belong to the device that was current when they were made; an
//! asynchronous copy runs on a stream of the device that owns its device memory, while
//! synchronous copies are routed by the runtime from the pointers (unified addressing), or
//! from the device the caller names ([`GpuRuntime::copy_to_device_of`]).
//! Pinned memory is allocated portable: every device may copy from and to it.
//! Implementations translate one call each and validate nothing: validation of requests and
//! buffers happens once, in this crate, before a backend runs, and implementations may rely
//! on it. Every method is callable from any
//! thread. Runtime failures come back as [`RuntimeError`] (the runtime's own code and text);
//! file-I/O failures as [`FileIoError`], keeping the kernel's errno apart from the runtime's
//! error so that the retry rules can tell them apart.
//!
//! Stream-ordered operations are optional capabilities with default implementations that
//! answer "unsupported" ([`RuntimeError::unsupported`]), so that an implementation without
//! them (or a test double) need not mention them: a host function queued on a stream
//! ([`GpuRuntime::launch_host_func`]), a stream waiting for a 32-bit word of pinned host memory
//! to reach a value and writing one ([`GpuRuntime::stream_wait_value32`],
//! [`GpuRuntime::stream_write_value32`], at the word's device address from
//! [`GpuRuntime::host_device_pointer`]; all present together when
//! [`GpuRuntime::has_stream_wait_value`] says so), and non-blocking queries of streams and
//! events. With them, work on a user's stream can be held back until hipfile's own threads
//! have done theirs: a host function tells hipfile that the stream got there, the wait holds
//! the stream, and hipfile stores the value when the data is in place.
//!
//! A device's BAR1 size ([`GpuRuntime::bar1_size`]) is optional too: CUDA's runtime tells it
//! through NVIDIA's NVML, and HIP cannot (docs/decisions/cufile-abi.md).
//!
//! # Safety
//!
//! The methods that write or read memory through raw addresses are `unsafe fn`: the caller
//! guarantees that the ranges are valid for the access. Queries (attributes, ranges) are safe
//! to call with any address.
//!
//! The trait itself is an `unsafe trait`: hipfile's unsafe code trusts what its methods
//! answer (how long an allocation is, what kind of memory an address is, that a pinned
//! allocation has the bytes asked for), so an implementation that answers wrongly would let
//! safe code read or write out of bounds. Implementers promise what
//! [`GpuRuntime`]'s `# Safety` section lists.
//!
//! The stream memory operations take the device address
//! ([`GpuRuntime::host_device_pointer`]) of a word in memory from [`GpuRuntime::alloc_pinned`];
//! the caller keeps that memory allocated until the stream has passed the operation, and
//! touches the word only atomically meanwhile. A host function runs once, on a thread of
//! the runtime, and must not call the runtime: real runtimes forbid it, and may deadlock.

#![allow(unsafe_code)]

pub use crate::types::DevicePtr;
use crate::types::MemoryKind;
use std::os::fd::RawFd;

/// What the runtime says about an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PointerInfo {
    /// The kind of memory, decoded for the runtime's ABI version.
    pub memory: MemoryKind,
    /// The device it belongs to (negative for host memory).
    pub device: i32,
}

/// An opaque stream handle of the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StreamHandle(pub usize);

/// An opaque event handle of the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventHandle(pub usize);

/// A failed runtime call: which call, the runtime's numeric error and its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{call} failed: {message} ({code})")]
#[non_exhaustive]
pub struct RuntimeError {
    /// The runtime function that failed, e.g. `hipMemcpyAsync`.
    pub call: &'static str,
    /// The runtime's error number (`hipError_t` / `cudaError_t`).
    pub code: i32,
    /// The runtime's description of it.
    pub message: String,
}

impl RuntimeError {
    /// The failure of `call` with the runtime's error number `code` and its text.
    pub fn new(call: &'static str, code: i32, message: impl Into<String>) -> RuntimeError {
        RuntimeError {
            call,
            code,
            message: message.into(),
        }
    }

    /// The error of an optional capability the runtime lacks: code 801, which is
    /// `hipErrorNotSupported` and `cudaErrorNotSupported` alike.
    pub fn unsupported(call: &'static str) -> RuntimeError {
        RuntimeError::unsupported_because(call, "not supported by this runtime")
    }

    /// An optional capability the runtime cannot offer here, and why (code 801).
    pub fn unsupported_because(call: &'static str, why: impl Into<String>) -> RuntimeError {
        RuntimeError {
            call,
            code: UNSUPPORTED,
            message: why.into(),
        }
    }

    /// Whether this is the runtime saying it cannot do or tell what was asked (code 801,
    /// from [`unsupported`](Self::unsupported) or the runtime's own `NotSupported`), rather
    /// than a failure.
    pub fn is_unsupported(&self) -> bool {
        self.code == UNSUPPORTED
    }
}

/// `hipErrorNotSupported`, `cudaErrorNotSupported`.
const UNSUPPORTED: i32 = 801;

/// A host function queued on a stream by [`GpuRuntime::launch_host_func`].
pub type HostFunc = Box<dyn FnOnce() + Send + 'static>;

/// A failed AMD file-I/O call (`hipAmdFileRead`/`hipAmdFileWrite`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FileIoError {
    /// The kernel driver failed with this errno (the call's `status`, made positive).
    #[error("the kernel driver failed with errno {0}")]
    Errno(i32),
    /// The runtime itself failed.
    #[error(transparent)]
    Runtime(RuntimeError),
    /// The runtime has no AMD file I/O.
    #[error("the runtime has no hipAmdFileRead/hipAmdFileWrite")]
    Unavailable,
}

/// The GPU runtime as the backends see it. See the module documentation for the contract.
///
/// # Safety
///
/// hipfile's unsafe code relies on these answers; an implementation promises that:
///
/// - [`alloc_device`](Self::alloc_device) returns the start of `len` bytes of device memory
///   of this runtime, valid until [`free_device`](Self::free_device), and
///   [`alloc_pinned`](Self::alloc_pinned) returns null or the start of `len` writable bytes
///   of host memory, aligned to at least 4096 and valid until
///   [`free_pinned`](Self::free_pinned);
/// - [`pointer_info`](Self::pointer_info) says [`MemoryKind::Device`] only for device memory
///   of this runtime, and [`address_range`](Self::address_range) returns the base and length
///   of the live allocation that contains the address (never more than was allocated);
/// - the copies and the AMD file-I/O calls touch only the ranges they are given, and an
///   asynchronous copy has finished once its stream or an event recorded after it on the
///   stream has been synchronised successfully;
/// - work queued on a stream runs in the order it was queued: a host function, a wait or a
///   write queued with the stream-ordered methods runs after the stream's earlier work and
///   before its later work, and [`stream_query`](Self::stream_query) and
///   [`event_query`](Self::event_query) answer `true` only once that work is done;
/// - a host function given to [`launch_host_func`](Self::launch_host_func) runs at most once
///   (exactly once if the call succeeded and the stream runs to that point), and is dropped
///   if the call fails;
/// - every method may be called from any thread at once.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub unsafe trait GpuRuntime: Send + Sync {
    /// Prepares the calling thread (`hipInit(0)` once per thread: older runtimes crash when a
    /// file-I/O call is a thread's first HIP call).
    fn thread_init(&self) -> Result<(), RuntimeError>;

    /// The number of devices the runtime sees.
    fn device_count(&self) -> Result<i32, RuntimeError>;

    /// The calling thread's current device.
    fn current_device(&self) -> Result<i32, RuntimeError>;

    /// Makes `device` the calling thread's current device: streams, events and allocations
    /// made afterwards on this thread belong to it.
    fn set_device(&self, device: i32) -> Result<(), RuntimeError>;

    /// The memory kind and device of `ptr`. A host pointer the runtime does not know is
    /// `MemoryKind::Unregistered`, whatever the runtime's ABI says.
    fn pointer_info(&self, ptr: DevicePtr) -> Result<PointerInfo, RuntimeError>;

    /// The allocation containing `ptr`: its base and length.
    fn address_range(&self, ptr: DevicePtr) -> Result<(DevicePtr, u64), RuntimeError>;

    /// Whether `hipAmdFileRead` and `hipAmdFileWrite` are both available.
    fn has_amd_file_io(&self) -> bool;

    /// Allocates `len` bytes of device memory on the current device.
    fn alloc_device(&self, len: usize) -> Result<DevicePtr, RuntimeError>;

    /// Frees memory from [`GpuRuntime::alloc_device`].
    ///
    /// # Safety
    ///
    /// `ptr` came from `alloc_device` of this runtime, no transfer uses it, and it is not
    /// used afterwards.
    unsafe fn free_device(&self, ptr: DevicePtr) -> Result<(), RuntimeError>;

    /// Allocates `len` bytes of page-locked host memory.
    fn alloc_pinned(&self, len: usize) -> Result<*mut u8, RuntimeError>;

    /// Frees memory from [`GpuRuntime::alloc_pinned`].
    ///
    /// # Safety
    ///
    /// `ptr` came from `alloc_pinned` of this runtime and is not used afterwards.
    unsafe fn free_pinned(&self, ptr: *mut u8) -> Result<(), RuntimeError>;

    /// Creates a non-blocking stream on the current device.
    fn stream_create(&self) -> Result<StreamHandle, RuntimeError>;

    /// Destroys a stream.
    fn stream_destroy(&self, stream: StreamHandle) -> Result<(), RuntimeError>;

    /// Waits until all work queued on `stream` is done.
    fn stream_synchronize(&self, stream: StreamHandle) -> Result<(), RuntimeError>;

    /// Creates an event.
    fn event_create(&self) -> Result<EventHandle, RuntimeError>;

    /// Records `event` on `stream`.
    fn event_record(&self, event: EventHandle, stream: StreamHandle) -> Result<(), RuntimeError>;

    /// Waits for `event`.
    fn event_synchronize(&self, event: EventHandle) -> Result<(), RuntimeError>;

    /// Destroys an event.
    fn event_destroy(&self, event: EventHandle) -> Result<(), RuntimeError>;

    /// Copies `len` bytes from host memory to the device, on `stream` (asynchronously) or
    /// synchronously when `stream` is `None`.
    ///
    /// # Safety
    ///
    /// `src..src+len` is readable host memory and `dst..dst+len` is device memory of this
    /// runtime, both valid until the copy completes.
    unsafe fn copy_to_device(
        &self,
        dst: DevicePtr,
        src: *const u8,
        len: usize,
        stream: Option<StreamHandle>,
    ) -> Result<(), RuntimeError>;

    /// Copies `len` bytes from the device to host memory; see [`GpuRuntime::copy_to_device`].
    ///
    /// # Safety
    ///
    /// `dst..dst+len` is writable host memory and `src..src+len` is device memory of this
    /// runtime, both valid until the copy completes.
    unsafe fn copy_to_host(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
        stream: Option<StreamHandle>,
    ) -> Result<(), RuntimeError>;

    /// A synchronous copy to device memory of `device`, which the caller knows (the
    /// device that owns a validated buffer): a runtime may then skip the queries that find
    /// the device, each a call into the GPU driver, whose locks every thread of the process
    /// shares. The default is [`GpuRuntime::copy_to_device`] without a stream.
    ///
    /// # Safety
    ///
    /// As [`GpuRuntime::copy_to_device`]'s.
    unsafe fn copy_to_device_of(
        &self,
        device: i32,
        dst: DevicePtr,
        src: *const u8,
        len: usize,
    ) -> Result<(), RuntimeError> {
        let _ = device;
        // SAFETY: the caller's guarantees are `copy_to_device`'s.
        unsafe { self.copy_to_device(dst, src, len, None) }
    }

    /// A synchronous copy from device memory of `device`; see
    /// [`GpuRuntime::copy_to_device_of`]. The default is [`GpuRuntime::copy_to_host`] without
    /// a stream.
    ///
    /// # Safety
    ///
    /// As [`GpuRuntime::copy_to_host`]'s.
    unsafe fn copy_to_host_of(
        &self,
        device: i32,
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
    ) -> Result<(), RuntimeError> {
        let _ = device;
        // SAFETY: the caller's guarantees are `copy_to_host`'s.
        unsafe { self.copy_to_host(dst, src, len, None) }
    }

    /// Whether [`launch_host_func`](Self::launch_host_func),
    /// [`host_device_pointer`](Self::host_device_pointer),
    /// [`stream_wait_value32`](Self::stream_wait_value32) and
    /// [`stream_write_value32`](Self::stream_write_value32) are all available. The default
    /// says no.
    fn has_stream_wait_value(&self) -> bool {
        false
    }

    /// Queues `f` on `stream`: it runs once, on a runtime thread, when the stream reaches it,
    /// and the stream's later work waits for it to return. `f` must not call the runtime. A
    /// panic in `f` is caught (and lost): it never unwinds into the runtime. The default
    /// answers [`RuntimeError::unsupported`].
    fn launch_host_func(&self, stream: StreamHandle, f: HostFunc) -> Result<(), RuntimeError> {
        let _ = (stream, f);
        Err(RuntimeError::unsupported("launch_host_func"))
    }

    /// The address the device uses for `host`, an address in memory from
    /// [`alloc_pinned`](Self::alloc_pinned) (`hipHostGetDevicePointer`,
    /// `cudaHostGetDevicePointer`): what the stream memory operations take. A lookup, valid
    /// as long as the allocation; ask once per allocation, not per operation. The default
    /// answers [`RuntimeError::unsupported`].
    fn host_device_pointer(&self, host: *const u8) -> Result<DevicePtr, RuntimeError> {
        let _ = host;
        Err(RuntimeError::unsupported("host_device_pointer"))
    }

    /// Queues on `stream` a wait until the 32-bit word at `word` is at least `value`
    /// (`hipStreamWaitValueGte`, `CU_STREAM_WAIT_VALUE_GEQ`; CUDA compares cyclically, so keep
    /// values small): the stream's later work waits; the call returns at once. The default
    /// answers [`RuntimeError::unsupported`].
    ///
    /// # Safety
    ///
    /// `word` is the device address ([`host_device_pointer`](Self::host_device_pointer)) of a
    /// 4-byte-aligned word in memory from [`alloc_pinned`](Self::alloc_pinned) of this
    /// runtime, which stays allocated until the stream has passed the wait (the stream
    /// synchronised, or an event recorded after the wait complete); meanwhile the host
    /// accesses the word only atomically.
    unsafe fn stream_wait_value32(
        &self,
        stream: StreamHandle,
        word: DevicePtr,
        value: u32,
    ) -> Result<(), RuntimeError> {
        let _ = (stream, word, value);
        Err(RuntimeError::unsupported("stream_wait_value32"))
    }

    /// Queues on `stream` a store of `value` into the 32-bit word at `word`, done when the
    /// stream reaches it, after the stream's earlier writes. The default answers
    /// [`RuntimeError::unsupported`].
    ///
    /// # Safety
    ///
    /// As [`stream_wait_value32`](Self::stream_wait_value32), until the write is done.
    unsafe fn stream_write_value32(
        &self,
        stream: StreamHandle,
        word: DevicePtr,
        value: u32,
    ) -> Result<(), RuntimeError> {
        let _ = (stream, word, value);
        Err(RuntimeError::unsupported("stream_write_value32"))
    }

    /// Whether all work queued on `stream` is done, without waiting. The default answers
    /// [`RuntimeError::unsupported`].
    fn stream_query(&self, stream: StreamHandle) -> Result<bool, RuntimeError> {
        let _ = stream;
        Err(RuntimeError::unsupported("stream_query"))
    }

    /// Whether `event` is complete (an event never recorded is), without waiting. The
    /// default answers [`RuntimeError::unsupported`].
    fn event_query(&self, event: EventHandle) -> Result<bool, RuntimeError> {
        let _ = event;
        Err(RuntimeError::unsupported("event_query"))
    }

    /// The size of `device`'s BAR1 in bytes: the PCIe window through which the CPU and other
    /// devices (an NVMe drive, a NIC) reach its memory, which bounds how much of it can be
    /// mapped for them at once. cuFile reports it (`cuFileGetBARSizeInKB`). The default
    /// answers [`RuntimeError::unsupported`]: a runtime that cannot tell.
    ///
    /// An implementation answers an error for which [`RuntimeError::is_unsupported`] holds,
    /// with the reason in its message, wherever the size cannot be told (a library missing,
    /// a device that does not report it), and another error only for a failure of the
    /// runtime itself (an invalid device).
    fn bar1_size(&self, device: i32) -> Result<u64, RuntimeError> {
        let _ = device;
        Err(RuntimeError::unsupported("bar1_size"))
    }

    /// `hipAmdFileRead`: reads `size` bytes at `offset` of the `O_DIRECT` descriptor `fd`
    /// straight into device memory. Returns the bytes copied, which may be short.
    ///
    /// # Safety
    ///
    /// `dst..dst+size` is device memory of this runtime, writable for the call's duration.
    unsafe fn amd_file_read(
        &self,
        fd: RawFd,
        dst: DevicePtr,
        size: u64,
        offset: i64,
    ) -> Result<u64, FileIoError>;

    /// `hipAmdFileWrite`: writes `size` bytes of device memory at `offset` of the `O_DIRECT`
    /// descriptor `fd`. Returns the bytes copied, which may be short.
    ///
    /// # Safety
    ///
    /// `src..src+size` is device memory of this runtime, readable for the call's duration.
    unsafe fn amd_file_write(
        &self,
        fd: RawFd,
        src: DevicePtr,
        size: u64,
        offset: i64,
    ) -> Result<u64, FileIoError>;
}
