//! The narrow seam between hipfile and a GPU runtime, split into capabilities.
//!
//! # Contract
//!
//! A runtime is a [`GpuRuntime`], the base every runtime has, and hands out the optional
//! capabilities it has as `Option<&dyn …>`, so that code needing one asks once and a
//! runtime without it simply answers `None` (no method of a capability refuses because the
//! capability is missing):
//!
//! - [`GpuRuntime`]: the devices and the calling thread's current one, thread preparation,
//!   pointer attributes and allocation ranges, device and pinned host memory, synchronous
//!   host⇄device copies, and a device's BAR1 size;
//! - [`Streams`] ([`GpuRuntime::streams`]): streams and events, asynchronous copies on a
//!   stream, and non-blocking queries of both. The fallback's parallel path and every
//!   stream-ordered request need it; every real runtime and test double has it, and code
//!   that needs it on a runtime without it fails with [`RuntimeError::unsupported`]
//!   ([`GpuRuntime::require_streams`]), never panics;
//! - [`HostFunctions`] ([`Streams::host_functions`]): a host function queued on a stream
//!   (`hipLaunchHostFunc`, `cudaLaunchHostFunc`; ROCm 5.2 lacks it);
//! - [`StreamMemOps`] ([`Streams::stream_mem_ops`]): a stream waiting for a 32-bit word of
//!   pinned host memory to reach a value, and writing one, at the word's device address
//!   ([`StreamMemOps::host_device_pointer`]); CUDA drivers before 11.7 lack them, and ROCm
//!   5.2 has them;
//! - [`AmdFileIo`] ([`GpuRuntime::amd_file_io`]): `hipAmdFileRead`/`hipAmdFileWrite`, which
//!   only AMD's runtime has (from ROCm 7.2); a CUDA runtime has none.
//!
//! Host functions and stream memory operations hang off [`Streams`] because they act on
//! streams: a runtime without streams cannot have them. They are two capabilities, not one,
//! because the runtimes lack them separately and hipfile uses host functions alone (ordering
//! after the null stream, `null_stream.rs`); a stream-ordered request needs both
//! ([`StreamOrdering::of`]). With them, work on a user's stream can be held back until
//! hipfile's own threads have done theirs: a host function tells hipfile that the stream
//! got there, the wait holds the stream, and hipfile stores the value when the data is in
//! place. The stream and event queries are part of [`Streams`], though a runtime may lack
//! them too: a query that cannot tell answers [`RuntimeError::unsupported`], and its callers
//! then wait instead, so a missing query changes how long, never what.
//!
//! A device's BAR1 size ([`GpuRuntime::bar1_size`]) is information rather than a
//! capability: CUDA's runtime tells it through NVIDIA's NVML, and HIP cannot
//! (docs/decisions/cufile-abi.md), which it answers as unsupported.
//!
//! Streams and events belong to the device that was current when they were made; an
//! asynchronous copy runs on a stream of the device that owns its device memory, while
//! synchronous copies are routed by the runtime from the pointers (unified addressing), or
//! from the device the caller names ([`GpuRuntime::copy_to_device_of`]).
//! Pinned memory is allocated portable: every device may copy from and to it.
//! Implementations translate one call each and validate nothing: validation of requests and
//! buffers happens once, in this crate, before a backend runs, and implementations may rely
//! on it. Every method is callable from any thread. Runtime failures come back as
//! [`RuntimeError`] (the runtime's own code and text); file-I/O failures as [`FileIoError`],
//! keeping the kernel's errno apart from the runtime's error so that the retry rules can
//! tell them apart.
//!
//! The design, and why the capabilities fall where they do, is in
//! docs/decisions/runtime-capabilities.md.
//!
//! # Safety
//!
//! The methods that write or read memory through raw addresses are `unsafe fn`: the caller
//! guarantees that the ranges are valid for the access. Queries (attributes, ranges) are safe
//! to call with any address.
//!
//! Every trait here is an `unsafe trait`: hipfile's unsafe code trusts what its methods
//! answer (how long an allocation is, what kind of memory an address is, that a pinned
//! allocation has the bytes asked for, that a copy is done once its stream has been
//! synchronised), so an implementation that answers wrongly would let safe code read or
//! write out of bounds. Implementers promise what each trait's `# Safety` section lists. A
//! capability handed out by a runtime belongs to that runtime: its handles, memory and
//! device addresses are the runtime's.
//!
//! The stream memory operations take the device address
//! ([`StreamMemOps::host_device_pointer`]) of a word in memory from
//! [`GpuRuntime::alloc_pinned`]; the caller keeps that memory allocated until the stream has
//! passed the operation, and touches the word only atomically meanwhile. A host function
//! runs once, on a thread of the runtime, and must not call the runtime: real runtimes forbid
//! it, and may deadlock.

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

/// A host function queued on a stream by [`HostFunctions::launch_host_func`].
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
    /// The runtime has no AMD file I/O (no [`GpuRuntime::amd_file_io`]), or its call is
    /// missing after all.
    #[error("the runtime has no hipAmdFileRead/hipAmdFileWrite")]
    Unavailable,
}

/// The GPU runtime as the backends see it: the base every runtime has. See the module
/// documentation for the contract and the optional capabilities it hands out.
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
/// - the copies touch only the ranges they are given, and a synchronous copy is done when
///   it returns;
/// - the capabilities it hands out ([`streams`](Self::streams),
///   [`amd_file_io`](Self::amd_file_io)) keep their traits' promises, for this runtime's
///   memory and handles;
/// - every method may be called from any thread at once.
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

    /// Copies `len` bytes from host memory to the device, synchronously: done when it
    /// returns. (On a stream: [`Streams::copy_to_device_async`].)
    ///
    /// # Safety
    ///
    /// `src..src+len` is readable host memory and `dst..dst+len` is device memory of this
    /// runtime, both valid for the call's duration.
    unsafe fn copy_to_device(
        &self,
        dst: DevicePtr,
        src: *const u8,
        len: usize,
    ) -> Result<(), RuntimeError>;

    /// Copies `len` bytes from the device to host memory, synchronously; see
    /// [`GpuRuntime::copy_to_device`].
    ///
    /// # Safety
    ///
    /// `dst..dst+len` is writable host memory and `src..src+len` is device memory of this
    /// runtime, both valid for the call's duration.
    unsafe fn copy_to_host(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
    ) -> Result<(), RuntimeError>;

    /// A synchronous copy to device memory of `device`, which the caller knows (the
    /// device that owns a validated buffer): a runtime may then skip the queries that find
    /// the device, each a call into the GPU driver, whose locks every thread of the process
    /// shares. The default is [`GpuRuntime::copy_to_device`].
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
        unsafe { self.copy_to_device(dst, src, len) }
    }

    /// A synchronous copy from device memory of `device`; see
    /// [`GpuRuntime::copy_to_device_of`]. The default is [`GpuRuntime::copy_to_host`].
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
        unsafe { self.copy_to_host(dst, src, len) }
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

    /// Streams, events and asynchronous copies, when the runtime has them. The default has
    /// none.
    fn streams(&self) -> Option<&dyn Streams> {
        None
    }

    /// `hipAmdFileRead` and `hipAmdFileWrite`, when the runtime has both. The default has
    /// none.
    fn amd_file_io(&self) -> Option<&dyn AmdFileIo> {
        None
    }

    /// [`streams`](Self::streams), for code that cannot do without them: a runtime without
    /// streams is [`RuntimeError::unsupported`] (call `streams`), where it is used.
    fn require_streams(&self) -> Result<&dyn Streams, RuntimeError> {
        self.streams().ok_or_else(|| {
            RuntimeError::unsupported_because("streams", "this GPU runtime has no streams")
        })
    }
}

/// Streams, events and asynchronous copies: a capability a [`GpuRuntime`] hands out
/// ([`GpuRuntime::streams`]). Streams are non-blocking; [`StreamHandle`]`(0)` is the legacy
/// null stream of the current device.
///
/// # Safety
///
/// hipfile's unsafe code relies on these answers; an implementation promises that:
///
/// - an asynchronous copy touches only the ranges it is given, and has finished once its
///   stream, or an event recorded after it on the stream, has been synchronised
///   successfully;
/// - work queued on a stream runs in the order it was queued, and
///   [`stream_query`](Self::stream_query) and [`event_query`](Self::event_query) answer
///   `true` only once the work before them is done;
/// - the capabilities it hands out ([`host_functions`](Self::host_functions),
///   [`stream_mem_ops`](Self::stream_mem_ops)) keep their traits' promises, on these streams;
/// - every method may be called from any thread at once.
pub unsafe trait Streams: Send + Sync {
    /// Creates a non-blocking stream on the current device.
    fn stream_create(&self) -> Result<StreamHandle, RuntimeError>;

    /// Destroys a stream.
    fn stream_destroy(&self, stream: StreamHandle) -> Result<(), RuntimeError>;

    /// Waits until all work queued on `stream` is done.
    fn stream_synchronize(&self, stream: StreamHandle) -> Result<(), RuntimeError>;

    /// Whether all work queued on `stream` is done, without waiting.
    /// [`RuntimeError::unsupported`] when the runtime cannot tell (callers then wait).
    fn stream_query(&self, stream: StreamHandle) -> Result<bool, RuntimeError>;

    /// Creates an event.
    fn event_create(&self) -> Result<EventHandle, RuntimeError>;

    /// Records `event` on `stream`.
    fn event_record(&self, event: EventHandle, stream: StreamHandle) -> Result<(), RuntimeError>;

    /// Waits for `event`.
    fn event_synchronize(&self, event: EventHandle) -> Result<(), RuntimeError>;

    /// Whether `event` is complete (an event never recorded is), without waiting.
    /// [`RuntimeError::unsupported`] when the runtime cannot tell.
    fn event_query(&self, event: EventHandle) -> Result<bool, RuntimeError>;

    /// Destroys an event.
    fn event_destroy(&self, event: EventHandle) -> Result<(), RuntimeError>;

    /// Queues on `stream` a copy of `len` bytes from host memory to the device, and returns.
    ///
    /// # Safety
    ///
    /// `src..src+len` is readable host memory and `dst..dst+len` is device memory of this
    /// runtime, of the stream's device, both valid until the copy completes (the stream, or
    /// an event recorded after the copy, synchronised).
    unsafe fn copy_to_device_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        len: usize,
        stream: StreamHandle,
    ) -> Result<(), RuntimeError>;

    /// Queues on `stream` a copy of `len` bytes from the device to host memory; see
    /// [`Streams::copy_to_device_async`].
    ///
    /// # Safety
    ///
    /// `dst..dst+len` is writable host memory and `src..src+len` is device memory of this
    /// runtime, of the stream's device, both valid until the copy completes.
    unsafe fn copy_to_host_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
        stream: StreamHandle,
    ) -> Result<(), RuntimeError>;

    /// Host functions queued on these streams, when the runtime has them. The default has
    /// none.
    fn host_functions(&self) -> Option<&dyn HostFunctions> {
        None
    }

    /// Waits and writes of a word on these streams, when the runtime has them. The default
    /// has none.
    fn stream_mem_ops(&self) -> Option<&dyn StreamMemOps> {
        None
    }
}

/// Host functions queued on a stream: a capability of [`Streams`]
/// ([`Streams::host_functions`]).
///
/// # Safety
///
/// An implementation promises that a host function runs after the stream's earlier work and
/// before its later work, at most once (exactly once if the call succeeded and the stream
/// runs to that point), and is dropped if the call fails; and that it may be called from
/// any thread at once.
pub unsafe trait HostFunctions: Send + Sync {
    /// Queues `f` on `stream`: it runs once, on a runtime thread, when the stream reaches it,
    /// and the stream's later work waits for it to return. `f` must not call the runtime. A
    /// panic in `f` is caught (and lost): it never unwinds into the runtime.
    fn launch_host_func(&self, stream: StreamHandle, f: HostFunc) -> Result<(), RuntimeError>;
}

/// A stream waiting for a 32-bit word of pinned host memory, and writing one: a capability
/// of [`Streams`] ([`Streams::stream_mem_ops`]).
///
/// # Safety
///
/// An implementation promises that a wait holds the stream's later work until the word
/// satisfies it, that a write is done after the stream's earlier work and before its later
/// work, that both touch only the word they are given, and that it may be called from any
/// thread at once.
pub unsafe trait StreamMemOps: Send + Sync {
    /// The address the device uses for `host`, an address in memory from
    /// [`GpuRuntime::alloc_pinned`] (`hipHostGetDevicePointer`, `cudaHostGetDevicePointer`):
    /// what the stream memory operations take. A lookup, valid as long as the allocation;
    /// ask once per allocation, not per operation.
    fn host_device_pointer(&self, host: *const u8) -> Result<DevicePtr, RuntimeError>;

    /// Queues on `stream` a wait until the 32-bit word at `word` is at least `value`
    /// (`hipStreamWaitValueGte`, `CU_STREAM_WAIT_VALUE_GEQ`; CUDA compares cyclically, so keep
    /// values small): the stream's later work waits; the call returns at once.
    ///
    /// # Safety
    ///
    /// `word` is the device address ([`host_device_pointer`](Self::host_device_pointer)) of a
    /// 4-byte-aligned word in memory from [`GpuRuntime::alloc_pinned`] of this runtime,
    /// which stays allocated until the stream has passed the wait (the stream synchronised,
    /// or an event recorded after the wait complete); meanwhile the host accesses the word
    /// only atomically.
    unsafe fn stream_wait_value32(
        &self,
        stream: StreamHandle,
        word: DevicePtr,
        value: u32,
    ) -> Result<(), RuntimeError>;

    /// Queues on `stream` a store of `value` into the 32-bit word at `word`, done when the
    /// stream reaches it, after the stream's earlier writes.
    ///
    /// # Safety
    ///
    /// As [`stream_wait_value32`](Self::stream_wait_value32), until the write is done.
    unsafe fn stream_write_value32(
        &self,
        stream: StreamHandle,
        word: DevicePtr,
        value: u32,
    ) -> Result<(), RuntimeError>;
}

/// What a stream-ordered request needs of a runtime, all together: its streams, host
/// functions and stream memory operations.
#[derive(Clone, Copy)]
pub struct StreamOrdering<'a> {
    /// The runtime's streams.
    pub streams: &'a dyn Streams,
    /// Host functions on those streams.
    pub host_functions: &'a dyn HostFunctions,
    /// Waits and writes of a word on those streams.
    pub mem_ops: &'a dyn StreamMemOps,
}

impl<'a> StreamOrdering<'a> {
    /// The three capabilities of `runtime`, or `None` when it lacks any of them.
    pub fn of<R: GpuRuntime + ?Sized>(runtime: &'a R) -> Option<StreamOrdering<'a>> {
        let streams = runtime.streams()?;
        Some(StreamOrdering {
            streams,
            host_functions: streams.host_functions()?,
            mem_ops: streams.stream_mem_ops()?,
        })
    }
}

impl std::fmt::Debug for StreamOrdering<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamOrdering").finish_non_exhaustive()
    }
}

/// AMD's file I/O, storage ⇄ device memory with no host copy: a capability a
/// [`GpuRuntime`] hands out ([`GpuRuntime::amd_file_io`]) where it has both calls.
///
/// # Safety
///
/// An implementation promises that the calls touch only the device ranges they are given, and
/// may be called from any thread at once.
pub unsafe trait AmdFileIo: Send + Sync {
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
