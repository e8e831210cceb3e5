//! A GPU runtime whose "device memory" is host memory and whose `hipAmdFileRead`/
//! `hipAmdFileWrite` really `pread`/`pwrite` the descriptor straight into it, for testing the
//! fastpath without a GPU. On an `O_DIRECT` descriptor the kernel then enforces the
//! direct-I/O rules, as the kernel driver does on hardware (misaligned I/O is `EINVAL`).
//!
//! This is the fallback's test runtime without the host copies and pinned memory, which the
//! fastpath never uses: they fail if called. A kernel-driver errno can be injected.

#![allow(dead_code)] // Each test binary uses its own part of this module.
#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile_core::runtime::{EventHandle, FileIoError, StreamHandle};
use hipfile_core::{DevicePtr, GpuRuntime, MemoryKind, PointerInfo, RuntimeError};
use std::alloc::Layout;
use std::collections::BTreeMap;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

const ALIGN: usize = 4096;

/// A runtime with device memory in host memory and real file I/O. See the module docs.
#[derive(Debug, Default)]
pub struct HostMemRuntime {
    /// Device allocations by base address: their length.
    device: Mutex<BTreeMap<usize, usize>>,
    /// When set, every file-I/O call fails with this errno, as from the kernel driver.
    pub file_io_errno: Mutex<Option<i32>>,
    pub thread_inits: AtomicUsize,
    pub file_io_calls: AtomicUsize,
}

fn unsupported(call: &'static str) -> RuntimeError {
    RuntimeError {
        call,
        code: 801,
        message: "the fastpath's test runtime does not do this".into(),
    }
}

impl HostMemRuntime {
    pub fn new() -> Self {
        Self::default()
    }

    fn inside(&self, addr: u64, len: u64) -> bool {
        let table = self.device.lock().unwrap();
        table
            .range(..=(addr as usize))
            .next_back()
            .is_some_and(|(&base, &n)| {
                addr.checked_add(len)
                    .is_some_and(|end| end <= (base + n) as u64)
            })
    }

    /// Device memory filled with `data`, 4096-aligned.
    pub fn device_with(&self, data: &[u8]) -> DevicePtr {
        let p = self.alloc_device(data.len()).unwrap();
        // SAFETY: `p` is a fresh allocation of `data.len()` bytes.
        unsafe { std::ptr::copy(data.as_ptr(), p.0 as *mut u8, data.len()) };
        p
    }

    /// `len` bytes of device memory at `p`.
    pub fn read_device(&self, p: DevicePtr, len: usize) -> Vec<u8> {
        assert!(self.inside(p.0, len as u64));
        let mut out = vec![0; len];
        // SAFETY: the range lies inside an allocation of ours (checked above).
        unsafe { std::ptr::copy(p.0 as *const u8, out.as_mut_ptr(), len) };
        out
    }

    fn file_io(&self, addr: DevicePtr, size: u64) -> Result<(), FileIoError> {
        self.file_io_calls.fetch_add(1, Ordering::SeqCst);
        if let Some(errno) = *self.file_io_errno.lock().unwrap() {
            return Err(FileIoError::Errno(errno));
        }
        assert!(
            self.inside(addr.0, size),
            "file I/O at {addr} + {size} leaves device memory"
        );
        Ok(())
    }
}

impl Drop for HostMemRuntime {
    fn drop(&mut self) {
        for (base, len) in std::mem::take(&mut *self.device.lock().unwrap()) {
            // SAFETY: allocated in `alloc_device` with this layout, freed once.
            unsafe {
                std::alloc::dealloc(
                    base as *mut u8,
                    Layout::from_size_align(len.max(1), ALIGN).unwrap(),
                )
            };
        }
    }
}

// SAFETY: "device" memory is host allocations this runtime made and records, of the lengths
// asked for; `address_range` and `pointer_info` answer from that record, and the file-I/O
// calls check that their range lies inside a live allocation before they move a byte.
unsafe impl GpuRuntime for HostMemRuntime {
    fn thread_init(&self) -> Result<(), RuntimeError> {
        self.thread_inits.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    // One device: the fastpath leaves the caller's current device alone.
    fn device_count(&self) -> Result<i32, RuntimeError> {
        Ok(1)
    }

    fn current_device(&self) -> Result<i32, RuntimeError> {
        Ok(0)
    }

    fn set_device(&self, _: i32) -> Result<(), RuntimeError> {
        panic!("the fastpath changed the current device")
    }

    fn pointer_info(&self, ptr: DevicePtr) -> Result<PointerInfo, RuntimeError> {
        Ok(if self.inside(ptr.0, 1) {
            PointerInfo {
                memory: MemoryKind::Device,
                device: 0,
            }
        } else {
            PointerInfo {
                memory: MemoryKind::Unregistered,
                device: -2,
            }
        })
    }

    fn address_range(&self, ptr: DevicePtr) -> Result<(DevicePtr, u64), RuntimeError> {
        let table = self.device.lock().unwrap();
        match table.range(..=(ptr.0 as usize)).next_back() {
            Some((&base, &len)) if (ptr.0 as usize) < base + len => {
                Ok((DevicePtr(base as u64), len as u64))
            }
            _ => Err(RuntimeError {
                call: "hipMemGetAddressRange",
                code: 1,
                message: "not device memory".into(),
            }),
        }
    }

    fn has_amd_file_io(&self) -> bool {
        true
    }

    fn alloc_device(&self, len: usize) -> Result<DevicePtr, RuntimeError> {
        let layout = Layout::from_size_align(len.max(1), ALIGN).unwrap();
        // SAFETY: the layout's size is non-zero.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!p.is_null(), "out of host memory");
        self.device.lock().unwrap().insert(p as usize, len);
        Ok(DevicePtr(p as u64))
    }

    unsafe fn free_device(&self, _: DevicePtr) -> Result<(), RuntimeError> {
        Err(unsupported("hipFree"))
    }

    fn alloc_pinned(&self, _: usize) -> Result<*mut u8, RuntimeError> {
        Err(unsupported("hipHostMalloc"))
    }

    unsafe fn free_pinned(&self, _: *mut u8) -> Result<(), RuntimeError> {
        Err(unsupported("hipHostFree"))
    }

    fn stream_create(&self) -> Result<StreamHandle, RuntimeError> {
        Err(unsupported("hipStreamCreateWithFlags"))
    }

    fn stream_destroy(&self, _: StreamHandle) -> Result<(), RuntimeError> {
        Err(unsupported("hipStreamDestroy"))
    }

    fn stream_synchronize(&self, _: StreamHandle) -> Result<(), RuntimeError> {
        Err(unsupported("hipStreamSynchronize"))
    }

    fn event_create(&self) -> Result<EventHandle, RuntimeError> {
        Err(unsupported("hipEventCreate"))
    }

    fn event_record(&self, _: EventHandle, _: StreamHandle) -> Result<(), RuntimeError> {
        Err(unsupported("hipEventRecord"))
    }

    fn event_synchronize(&self, _: EventHandle) -> Result<(), RuntimeError> {
        Err(unsupported("hipEventSynchronize"))
    }

    fn event_destroy(&self, _: EventHandle) -> Result<(), RuntimeError> {
        Err(unsupported("hipEventDestroy"))
    }

    unsafe fn copy_to_device(
        &self,
        _: DevicePtr,
        _: *const u8,
        _: usize,
        _: Option<StreamHandle>,
    ) -> Result<(), RuntimeError> {
        Err(unsupported("hipMemcpy"))
    }

    unsafe fn copy_to_host(
        &self,
        _: *mut u8,
        _: DevicePtr,
        _: usize,
        _: Option<StreamHandle>,
    ) -> Result<(), RuntimeError> {
        Err(unsupported("hipMemcpy"))
    }

    unsafe fn amd_file_read(
        &self,
        fd: RawFd,
        dst: DevicePtr,
        size: u64,
        offset: i64,
    ) -> Result<u64, FileIoError> {
        self.file_io(dst, size)?;
        // SAFETY: the range lies inside an allocation of ours (checked in `file_io`).
        let buf = unsafe { std::slice::from_raw_parts_mut(dst.0 as *mut u8, size as usize) };
        // SAFETY: the caller passes an open descriptor, open for the call's duration.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        rustix::io::pread(fd, buf, offset as u64)
            .map(|n| n as u64)
            .map_err(|e| FileIoError::Errno(e.raw_os_error()))
    }

    unsafe fn amd_file_write(
        &self,
        fd: RawFd,
        src: DevicePtr,
        size: u64,
        offset: i64,
    ) -> Result<u64, FileIoError> {
        self.file_io(src, size)?;
        // SAFETY: the range lies inside an allocation of ours (checked in `file_io`).
        let buf = unsafe { std::slice::from_raw_parts(src.0 as *const u8, size as usize) };
        // SAFETY: the caller passes an open descriptor, open for the call's duration.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        rustix::io::pwrite(fd, buf, offset as u64)
            .map(|n| n as u64)
            .map_err(|e| FileIoError::Errno(e.raw_os_error()))
    }
}

/// `len` bytes of a pattern that differs at every offset of a 251-byte cycle, shifted by `seed`.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ seed.wrapping_mul(31))
        .collect()
}
