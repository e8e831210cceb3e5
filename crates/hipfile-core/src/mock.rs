//! mockall doubles of the runtime seam, one per capability, for unit tests here and in other
//! crates (the `mock` feature): [`MockGpuRuntime`] is the base alone, with no optional
//! capability; [`MockStreams`] and [`MockAmdFileIo`] mock one capability each; and
//! [`MockRuntime`] puts a base and the capabilities a test gives it together, handing out
//! exactly those. A test mocks only the calls it expects.
//!
//! # Safety
//!
//! The mocks answer what their tests script; a test that scripts answers breaking a trait's
//! promises, and then lets hipfile's unsafe code act on them, breaks the promises itself.

#![allow(unsafe_code)]
#![allow(missing_docs)] // mockall's generated items carry no documentation.

use crate::runtime::{
    AmdFileIo, DevicePtr, EventHandle, FileIoError, GpuRuntime, PointerInfo, RuntimeError,
    StreamHandle, Streams,
};
use std::os::fd::RawFd;

mockall::mock! {
    /// The base of a runtime, mocked; it has no optional capability.
    pub GpuRuntime {}

    // SAFETY: see the module's `# Safety`.
    unsafe impl GpuRuntime for GpuRuntime {
        fn thread_init(&self) -> Result<(), RuntimeError>;
        fn device_count(&self) -> Result<i32, RuntimeError>;
        fn current_device(&self) -> Result<i32, RuntimeError>;
        fn set_device(&self, device: i32) -> Result<(), RuntimeError>;
        fn pointer_info(&self, ptr: DevicePtr) -> Result<PointerInfo, RuntimeError>;
        fn address_range(&self, ptr: DevicePtr) -> Result<(DevicePtr, u64), RuntimeError>;
        fn alloc_device(&self, len: usize) -> Result<DevicePtr, RuntimeError>;
        unsafe fn free_device(&self, ptr: DevicePtr) -> Result<(), RuntimeError>;
        fn alloc_pinned(&self, len: usize) -> Result<*mut u8, RuntimeError>;
        unsafe fn free_pinned(&self, ptr: *mut u8) -> Result<(), RuntimeError>;
        unsafe fn copy_to_device(
            &self,
            dst: DevicePtr,
            src: *const u8,
            len: usize,
        ) -> Result<(), RuntimeError>;
        unsafe fn copy_to_host(
            &self,
            dst: *mut u8,
            src: DevicePtr,
            len: usize,
        ) -> Result<(), RuntimeError>;
        unsafe fn copy_to_device_of(
            &self,
            device: i32,
            dst: DevicePtr,
            src: *const u8,
            len: usize,
        ) -> Result<(), RuntimeError>;
        unsafe fn copy_to_host_of(
            &self,
            device: i32,
            dst: *mut u8,
            src: DevicePtr,
            len: usize,
        ) -> Result<(), RuntimeError>;
        fn bar1_size(&self, device: i32) -> Result<u64, RuntimeError>;
    }
}

mockall::mock! {
    /// Streams, events and asynchronous copies, mocked; without host functions or stream
    /// memory operations.
    pub Streams {}

    // SAFETY: see the module's `# Safety`.
    unsafe impl Streams for Streams {
        fn stream_create(&self) -> Result<StreamHandle, RuntimeError>;
        fn stream_destroy(&self, stream: StreamHandle) -> Result<(), RuntimeError>;
        fn stream_synchronize(&self, stream: StreamHandle) -> Result<(), RuntimeError>;
        fn stream_query(&self, stream: StreamHandle) -> Result<bool, RuntimeError>;
        fn event_create(&self) -> Result<EventHandle, RuntimeError>;
        fn event_record(&self, event: EventHandle, stream: StreamHandle)
            -> Result<(), RuntimeError>;
        fn event_synchronize(&self, event: EventHandle) -> Result<(), RuntimeError>;
        fn event_query(&self, event: EventHandle) -> Result<bool, RuntimeError>;
        fn event_destroy(&self, event: EventHandle) -> Result<(), RuntimeError>;
        unsafe fn copy_to_device_async(
            &self,
            dst: DevicePtr,
            src: *const u8,
            len: usize,
            stream: StreamHandle,
        ) -> Result<(), RuntimeError>;
        unsafe fn copy_to_host_async(
            &self,
            dst: *mut u8,
            src: DevicePtr,
            len: usize,
            stream: StreamHandle,
        ) -> Result<(), RuntimeError>;
    }
}

mockall::mock! {
    /// AMD file I/O, mocked.
    pub AmdFileIo {}

    // SAFETY: see the module's `# Safety`.
    unsafe impl AmdFileIo for AmdFileIo {
        unsafe fn amd_file_read(
            &self,
            fd: RawFd,
            dst: DevicePtr,
            size: u64,
            offset: i64,
        ) -> Result<u64, FileIoError>;
        unsafe fn amd_file_write(
            &self,
            fd: RawFd,
            src: DevicePtr,
            size: u64,
            offset: i64,
        ) -> Result<u64, FileIoError>;
    }
}

/// A mocked base with the mocked capabilities a test gives it: [`GpuRuntime::streams`] and
/// [`GpuRuntime::amd_file_io`] hand out exactly those.
#[derive(Default)]
pub struct MockRuntime {
    /// The base's calls.
    pub base: MockGpuRuntime,
    /// Streams, if the runtime is to have them.
    pub streams: Option<MockStreams>,
    /// AMD file I/O, if the runtime is to have it.
    pub amd_file_io: Option<MockAmdFileIo>,
}

impl MockRuntime {
    /// A runtime of `base` and no optional capability.
    pub fn new(base: MockGpuRuntime) -> MockRuntime {
        MockRuntime {
            base,
            streams: None,
            amd_file_io: None,
        }
    }

    /// With `streams`.
    pub fn with_streams(mut self, streams: MockStreams) -> MockRuntime {
        self.streams = Some(streams);
        self
    }

    /// With `amd_file_io`.
    pub fn with_amd_file_io(mut self, amd_file_io: MockAmdFileIo) -> MockRuntime {
        self.amd_file_io = Some(amd_file_io);
        self
    }
}

impl std::fmt::Debug for MockRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockRuntime")
            .field("streams", &self.streams.is_some())
            .field("amd_file_io", &self.amd_file_io.is_some())
            .finish_non_exhaustive()
    }
}

// SAFETY: every answer is a mock's; see the module's `# Safety`.
unsafe impl GpuRuntime for MockRuntime {
    fn thread_init(&self) -> Result<(), RuntimeError> {
        self.base.thread_init()
    }
    fn device_count(&self) -> Result<i32, RuntimeError> {
        self.base.device_count()
    }
    fn current_device(&self) -> Result<i32, RuntimeError> {
        self.base.current_device()
    }
    fn set_device(&self, device: i32) -> Result<(), RuntimeError> {
        self.base.set_device(device)
    }
    fn pointer_info(&self, ptr: DevicePtr) -> Result<PointerInfo, RuntimeError> {
        self.base.pointer_info(ptr)
    }
    fn address_range(&self, ptr: DevicePtr) -> Result<(DevicePtr, u64), RuntimeError> {
        self.base.address_range(ptr)
    }
    fn alloc_device(&self, len: usize) -> Result<DevicePtr, RuntimeError> {
        self.base.alloc_device(len)
    }
    unsafe fn free_device(&self, ptr: DevicePtr) -> Result<(), RuntimeError> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.base.free_device(ptr) }
    }
    fn alloc_pinned(&self, len: usize) -> Result<*mut u8, RuntimeError> {
        self.base.alloc_pinned(len)
    }
    unsafe fn free_pinned(&self, ptr: *mut u8) -> Result<(), RuntimeError> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.base.free_pinned(ptr) }
    }
    unsafe fn copy_to_device(
        &self,
        dst: DevicePtr,
        src: *const u8,
        len: usize,
    ) -> Result<(), RuntimeError> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.base.copy_to_device(dst, src, len) }
    }
    unsafe fn copy_to_host(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
    ) -> Result<(), RuntimeError> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.base.copy_to_host(dst, src, len) }
    }
    unsafe fn copy_to_device_of(
        &self,
        device: i32,
        dst: DevicePtr,
        src: *const u8,
        len: usize,
    ) -> Result<(), RuntimeError> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.base.copy_to_device_of(device, dst, src, len) }
    }
    unsafe fn copy_to_host_of(
        &self,
        device: i32,
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
    ) -> Result<(), RuntimeError> {
        // SAFETY: the caller's promise, passed on.
        unsafe { self.base.copy_to_host_of(device, dst, src, len) }
    }
    fn bar1_size(&self, device: i32) -> Result<u64, RuntimeError> {
        self.base.bar1_size(device)
    }
    fn streams(&self) -> Option<&dyn Streams> {
        self.streams.as_ref().map(|s| s as &dyn Streams)
    }
    fn amd_file_io(&self) -> Option<&dyn AmdFileIo> {
        self.amd_file_io.as_ref().map(|a| a as &dyn AmdFileIo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::StreamOrdering;

    #[test]
    fn a_mocked_runtime_hands_out_the_capabilities_it_was_given() {
        let rt = MockRuntime::new(MockGpuRuntime::new());
        assert!(rt.streams().is_none() && rt.amd_file_io().is_none());
        let e = rt.require_streams().err().map(|e| e.is_unsupported());
        assert_eq!(
            e,
            Some(true),
            "a runtime without streams is refused, not a panic"
        );
        let mut streams = MockStreams::new();
        streams
            .expect_stream_create()
            .times(1)
            .returning(|| Ok(StreamHandle(7)));
        let rt = rt
            .with_streams(streams)
            .with_amd_file_io(MockAmdFileIo::new());
        assert!(rt.amd_file_io().is_some());
        let s = rt.require_streams().map(|s| s.stream_create());
        assert_eq!(s, Ok(Ok(StreamHandle(7))));
        assert!(
            StreamOrdering::of(&rt).is_none(),
            "streams without host functions or waits do not order requests"
        );
    }
}
