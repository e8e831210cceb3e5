//! A GPU runtime whose "device memory" is host memory, for testing the fallback without a GPU,
//! and helpers to build requests against real files.
//!
//! [`HostMemRuntime`] hands out real host addresses as device pointers (4096-aligned
//! allocations it records), allocates pinned memory the same way, copies with `ptr::copy`
//! after checking that both sides lie inside allocations it made (so a transfer that strays
//! outside its range fails the test instead of corrupting memory), counts calls, and can be
//! told to fail the N-th copy or pinned allocation.
//!
//! Made with [`HostMemRuntime::deferred`], copies on a stream are only checked when queued
//! and run when the stream, or an event recorded after them, is synchronised, as on a GPU:
//! a backend that reuses a staging buffer before its copy is done, or returns before its
//! stream is synchronised, moves the wrong bytes.
//!
//! It has [`HostMemRuntime::with_devices`] devices (1 by default) and a current device per
//! thread. Device memory and streams belong to the device current when they were made, and
//! a copy on a stream of another device than its memory's fails the test (a real runtime
//! would route it through peer access, slowly): a backend that does not follow the buffer's
//! device is caught. Bytes copied into and out of each device are counted.

#![allow(dead_code)] // Each test binary uses its own part of this module.
#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile_core::runtime::{EventHandle, FileIoError, StreamHandle};
use hipfile_core::{
    Backend, BackendError, Config, DevicePtr, GpuRuntime, IoTarget, MemoryKind, Op, PointerInfo,
    Request, RuntimeError, Submission,
};
use hipfile_probe::FileFacts;
use std::alloc::Layout;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsFd, RawFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};

thread_local! {
    /// The calling thread's current device (every runtime of the test binary shares it).
    static CURRENT_DEVICE: Cell<i32> = const { Cell::new(0) };
}

/// The most devices a [`HostMemRuntime`] has.
pub const MAX_DEVICES: usize = 8;

const ALIGN: usize = 4096;

/// Allocations by base address: their length.
type Table = BTreeMap<usize, usize>;

/// Faults to inject: fail the call with this 0-based index (counted across all threads), or
/// the copies that touch a given device address.
#[derive(Debug, Default, Clone, Copy)]
pub struct Faults {
    pub copy_to_device: Option<usize>,
    pub copy_to_host: Option<usize>,
    pub alloc_pinned: Option<usize>,
    /// Fail every copy out of device memory whose source range holds this address, whatever
    /// thread issues it and when.
    pub copy_from: Option<DevicePtr>,
    /// Panic in the copy to the device with this index, as a runtime with a bug might.
    pub panic_copy_to_device: Option<usize>,
    /// Fail this stream synchronisation, leaving the stream's work queued (as a GPU that
    /// faulted would: nothing says whether its copies ran).
    pub stream_synchronize: Option<usize>,
}

/// A runtime whose device memory is host memory. See the module documentation.
#[derive(Debug, Default)]
pub struct HostMemRuntime {
    device: Mutex<Table>,
    pinned: Mutex<Table>,
    pub faults: Mutex<Faults>,
    pub thread_inits: AtomicUsize,
    pub copies_to_device: AtomicUsize,
    pub copies_to_host: AtomicUsize,
    pub pinned_allocs: AtomicUsize,
    pub pinned_frees: AtomicUsize,
    pub streams_created: AtomicUsize,
    pub streams_destroyed: AtomicUsize,
    pub stream_syncs: AtomicUsize,
    /// The pinned address of every copy, in the order they were issued.
    pub pinned_used: Mutex<Vec<usize>>,
    /// Bytes copied into each device's memory.
    pub bytes_to_device: [AtomicU64; MAX_DEVICES],
    /// Bytes copied out of each device's memory.
    pub bytes_from_device: [AtomicU64; MAX_DEVICES],
    /// Devices (0 means 1).
    devices: AtomicI32,
    /// The device of each device allocation, by base address.
    device_of: Mutex<BTreeMap<usize, i32>>,
    /// Whether copies on a stream wait for a synchronisation.
    defer: bool,
    queues: Mutex<Queues>,
}

/// Work queued on streams, for a deferred runtime.
#[derive(Debug, Default)]
struct Queues {
    next_handle: usize,
    by_stream: HashMap<usize, Vec<Queued>>,
    /// The device of each stream.
    stream_device: HashMap<usize, i32>,
}

#[derive(Debug)]
enum Queued {
    Copy { dst: usize, src: usize, len: usize },
    Event(usize),
}

impl Queued {
    fn run(&self) {
        if let Queued::Copy { dst, src, len } = *self {
            // SAFETY: both ranges were checked to lie inside allocations of ours when the copy
            // was queued; a backend that freed them since has broken its contract anyway.
            unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, len) };
        }
    }
}

fn rt_error(call: &'static str, code: i32, message: impl Into<String>) -> RuntimeError {
    RuntimeError {
        call,
        code,
        message: message.into(),
    }
}

fn contains(table: &Mutex<Table>, addr: usize, len: usize) -> bool {
    let table = table.lock().unwrap();
    table
        .range(..=addr)
        .next_back()
        .is_some_and(|(&base, &n)| addr.checked_add(len).is_some_and(|end| end <= base + n))
}

fn alloc(table: &Mutex<Table>, len: usize) -> *mut u8 {
    let layout = Layout::from_size_align(len.max(1), ALIGN).unwrap();
    // SAFETY: the layout's size is non-zero.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    assert!(!p.is_null(), "out of host memory");
    table.lock().unwrap().insert(p as usize, len);
    p
}

fn free(table: &Mutex<Table>, p: usize) -> bool {
    let Some(len) = table.lock().unwrap().remove(&p) else {
        return false;
    };
    // SAFETY: `p` was allocated by `alloc` with this layout and is removed from the table,
    // so it is freed once.
    unsafe {
        std::alloc::dealloc(
            p as *mut u8,
            Layout::from_size_align(len.max(1), ALIGN).unwrap(),
        )
    };
    true
}

impl HostMemRuntime {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with_faults(faults: Faults) -> Self {
        let rt = Self::default();
        *rt.faults.lock().unwrap() = faults;
        rt
    }

    /// A runtime whose copies on a stream run only when synchronised.
    pub fn deferred(faults: Faults) -> Self {
        let mut rt = Self::with_faults(faults);
        rt.defer = true;
        rt
    }

    /// This runtime with `n` devices (1 to [`MAX_DEVICES`]).
    pub fn with_devices(self, n: i32) -> Self {
        assert!((1..=MAX_DEVICES as i32).contains(&n));
        self.devices.store(n, Ordering::SeqCst);
        self
    }

    /// Device memory of `device` filled with `data`; the calling thread's current device is
    /// left as it was.
    pub fn device_with_on(&self, device: i32, data: &[u8]) -> DevicePtr {
        let before = CURRENT_DEVICE.with(Cell::get);
        self.set_device(device).unwrap();
        let p = self.device_with(data);
        CURRENT_DEVICE.with(|c| c.set(before));
        p
    }

    /// The device of the device allocation holding `p`.
    fn device_holding(&self, p: usize) -> Option<i32> {
        let table = self.device.lock().unwrap();
        let (&base, &len) = table.range(..=p).next_back()?;
        (p < base + len.max(1)).then(|| self.device_of.lock().unwrap().get(&base).copied())?
    }

    /// Fails the test unless `stream` (if any) belongs to the device of `memory`.
    fn check_route(&self, memory: usize, stream: Option<StreamHandle>, what: &str) {
        let Some(s) = stream else {
            return; // synchronous copies are routed by the pointers
        };
        let on = self.queues.lock().unwrap().stream_device.get(&s.0).copied();
        let owner = self.device_holding(memory);
        assert_eq!(
            on, owner,
            "{what} on a stream of device {on:?} for memory of device {owner:?}"
        );
    }

    fn count(&self, counters: &[AtomicU64; MAX_DEVICES], memory: usize, len: usize) {
        if let Some(d) = self.device_holding(memory) {
            counters[d as usize].fetch_add(len as u64, Ordering::SeqCst);
        }
    }

    /// Runs a copy now, or queues it on `stream` for a deferred runtime.
    fn copy(&self, dst: usize, src: usize, len: usize, stream: Option<StreamHandle>) {
        match stream {
            Some(s) if self.defer => {
                let mut q = self.queues.lock().unwrap();
                let queue = q
                    .by_stream
                    .get_mut(&s.0)
                    .expect("a copy on an unknown stream");
                queue.push(Queued::Copy { dst, src, len });
            }
            // SAFETY: the caller checked both ranges against our allocations.
            _ => unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, len) },
        }
    }

    /// Device memory filled with `data`.
    pub fn device_with(&self, data: &[u8]) -> DevicePtr {
        let p = self.alloc_device(data.len()).unwrap();
        self.write_device(p, data);
        p
    }

    /// Writes `data` at `p`, which must lie inside device memory of this runtime.
    pub fn write_device(&self, p: DevicePtr, data: &[u8]) {
        assert!(contains(&self.device, p.0 as usize, data.len()));
        // SAFETY: the range lies inside an allocation of ours (checked above).
        unsafe { std::ptr::copy(data.as_ptr(), p.0 as *mut u8, data.len()) };
    }

    /// `len` bytes of device memory at `p`.
    pub fn read_device(&self, p: DevicePtr, len: usize) -> Vec<u8> {
        assert!(contains(&self.device, p.0 as usize, len));
        let mut out = vec![0; len];
        // SAFETY: the range lies inside an allocation of ours (checked above).
        unsafe { std::ptr::copy(p.0 as *const u8, out.as_mut_ptr(), len) };
        out
    }

    /// Pinned allocations not freed yet.
    pub fn live_pinned(&self) -> usize {
        self.pinned.lock().unwrap().len()
    }

    /// Whether the call with this index of a counter is to fail.
    fn fault(&self, counter: &AtomicUsize, which: fn(&Faults) -> Option<usize>) -> bool {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        which(&self.faults.lock().unwrap()) == Some(n)
    }
}

impl Drop for HostMemRuntime {
    fn drop(&mut self) {
        let bases: Vec<usize> = self.device.lock().unwrap().keys().copied().collect();
        for base in bases {
            free(&self.device, base);
        }
        // Pinned memory is left to its owner's `free_pinned`: a leak here shows in
        // `live_pinned`, and freeing it would hide a missing free.
    }
}

// SAFETY: "device" and pinned memory are host allocations this runtime made and records, of
// the lengths asked for and 4096-aligned; `address_range` and `pointer_info` answer from that
// record; every copy checks that both sides lie inside live allocations before it moves a
// byte, and a deferred copy runs no later than the synchronisation that waits for it.
unsafe impl GpuRuntime for HostMemRuntime {
    fn thread_init(&self) -> Result<(), RuntimeError> {
        self.thread_inits.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn device_count(&self) -> Result<i32, RuntimeError> {
        Ok(self.devices.load(Ordering::SeqCst).max(1))
    }

    fn current_device(&self) -> Result<i32, RuntimeError> {
        Ok(CURRENT_DEVICE.with(Cell::get))
    }

    fn set_device(&self, device: i32) -> Result<(), RuntimeError> {
        if !(0..self.device_count()?).contains(&device) {
            return Err(rt_error("hipSetDevice", 101, "invalid device ordinal"));
        }
        CURRENT_DEVICE.with(|c| c.set(device));
        Ok(())
    }

    fn pointer_info(&self, ptr: DevicePtr) -> Result<PointerInfo, RuntimeError> {
        let (memory, device) = if contains(&self.device, ptr.0 as usize, 1) {
            (
                MemoryKind::Device,
                self.device_holding(ptr.0 as usize).unwrap_or(0),
            )
        } else if contains(&self.pinned, ptr.0 as usize, 1) {
            (MemoryKind::Host, -1)
        } else {
            (MemoryKind::Unregistered, -2)
        };
        Ok(PointerInfo { memory, device })
    }

    fn address_range(&self, ptr: DevicePtr) -> Result<(DevicePtr, u64), RuntimeError> {
        let table = self.device.lock().unwrap();
        match table.range(..=(ptr.0 as usize)).next_back() {
            Some((&base, &len)) if (ptr.0 as usize) < base + len => {
                Ok((DevicePtr(base as u64), len as u64))
            }
            _ => Err(rt_error("hipMemGetAddressRange", 1, "not device memory")),
        }
    }

    fn has_amd_file_io(&self) -> bool {
        false
    }

    fn alloc_device(&self, len: usize) -> Result<DevicePtr, RuntimeError> {
        let p = alloc(&self.device, len) as usize;
        self.device_of
            .lock()
            .unwrap()
            .insert(p, CURRENT_DEVICE.with(Cell::get));
        Ok(DevicePtr(p as u64))
    }

    unsafe fn free_device(&self, ptr: DevicePtr) -> Result<(), RuntimeError> {
        self.device_of.lock().unwrap().remove(&(ptr.0 as usize));
        if free(&self.device, ptr.0 as usize) {
            Ok(())
        } else {
            Err(rt_error("hipFree", 1, "not an allocation of this runtime"))
        }
    }

    fn alloc_pinned(&self, len: usize) -> Result<*mut u8, RuntimeError> {
        let fail = self.fault(&self.pinned_allocs, |f| f.alloc_pinned);
        if fail {
            return Err(rt_error("hipHostMalloc", 2, "injected out of memory"));
        }
        Ok(alloc(&self.pinned, len))
    }

    unsafe fn free_pinned(&self, ptr: *mut u8) -> Result<(), RuntimeError> {
        self.pinned_frees.fetch_add(1, Ordering::SeqCst);
        if free(&self.pinned, ptr as usize) {
            Ok(())
        } else {
            panic!("free_pinned of {ptr:?}, which is not live pinned memory of this runtime")
        }
    }

    fn stream_create(&self) -> Result<StreamHandle, RuntimeError> {
        self.streams_created.fetch_add(1, Ordering::SeqCst);
        let mut q = self.queues.lock().unwrap();
        q.next_handle += 1;
        let h = q.next_handle;
        q.by_stream.insert(h, Vec::new());
        q.stream_device.insert(h, CURRENT_DEVICE.with(Cell::get));
        Ok(StreamHandle(h))
    }

    fn stream_destroy(&self, s: StreamHandle) -> Result<(), RuntimeError> {
        self.streams_destroyed.fetch_add(1, Ordering::SeqCst);
        let queue = {
            let mut q = self.queues.lock().unwrap();
            q.stream_device.remove(&s.0);
            q.by_stream.remove(&s.0)
        };
        assert!(
            queue.is_none_or(|q| q.iter().all(|w| matches!(w, Queued::Event(_)))),
            "a stream destroyed with copies still queued"
        );
        Ok(())
    }

    fn stream_synchronize(&self, s: StreamHandle) -> Result<(), RuntimeError> {
        if self.fault(&self.stream_syncs, |f| f.stream_synchronize) {
            return Err(rt_error(
                "hipStreamSynchronize",
                700,
                "injected illegal address",
            ));
        }
        let mut q = self.queues.lock().unwrap();
        if let Some(queue) = q.by_stream.get_mut(&s.0) {
            for w in queue.drain(..) {
                w.run();
            }
        }
        Ok(())
    }

    fn event_create(&self) -> Result<EventHandle, RuntimeError> {
        let mut q = self.queues.lock().unwrap();
        q.next_handle += 1;
        Ok(EventHandle(q.next_handle))
    }

    fn event_record(&self, e: EventHandle, s: StreamHandle) -> Result<(), RuntimeError> {
        let mut q = self.queues.lock().unwrap();
        if let Some(queue) = q.by_stream.get_mut(&s.0) {
            queue.push(Queued::Event(e.0));
        }
        Ok(())
    }

    fn event_synchronize(&self, e: EventHandle) -> Result<(), RuntimeError> {
        let mut q = self.queues.lock().unwrap();
        for queue in q.by_stream.values_mut() {
            if let Some(last) = queue
                .iter()
                .rposition(|w| matches!(w, Queued::Event(x) if *x == e.0))
            {
                for w in queue.drain(..=last) {
                    w.run();
                }
            }
        }
        Ok(())
    }

    fn event_destroy(&self, _: EventHandle) -> Result<(), RuntimeError> {
        Ok(())
    }

    unsafe fn copy_to_device(
        &self,
        dst: DevicePtr,
        src: *const u8,
        len: usize,
        stream: Option<StreamHandle>,
    ) -> Result<(), RuntimeError> {
        let n = self.copies_to_device.fetch_add(1, Ordering::SeqCst);
        let faults = *self.faults.lock().unwrap();
        if faults.panic_copy_to_device == Some(n) {
            panic!("injected panic in copy {n} to the device");
        }
        if faults.copy_to_device == Some(n) {
            return Err(rt_error("hipMemcpyAsync", 999, "injected copy failure"));
        }
        assert!(
            contains(&self.device, dst.0 as usize, len),
            "copy_to_device to {dst} + {len} leaves device memory"
        );
        assert!(
            contains(&self.pinned, src as usize, len),
            "copy_to_device from {src:?} + {len} leaves pinned memory"
        );
        self.check_route(dst.0 as usize, stream, "copy_to_device");
        self.pinned_used.lock().unwrap().push(src as usize);
        self.count(&self.bytes_to_device, dst.0 as usize, len);
        self.copy(dst.0 as usize, src as usize, len, stream);
        Ok(())
    }

    unsafe fn copy_to_host(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
        stream: Option<StreamHandle>,
    ) -> Result<(), RuntimeError> {
        let touches = self
            .faults
            .lock()
            .unwrap()
            .copy_from
            .is_some_and(|a| (src.0..src.0 + len as u64).contains(&a.0));
        if self.fault(&self.copies_to_host, |f| f.copy_to_host) || touches {
            return Err(rt_error("hipMemcpyAsync", 999, "injected copy failure"));
        }
        assert!(
            contains(&self.device, src.0 as usize, len),
            "copy_to_host from {src} + {len} leaves device memory"
        );
        assert!(
            contains(&self.pinned, dst as usize, len),
            "copy_to_host to {dst:?} + {len} leaves pinned memory"
        );
        self.check_route(src.0 as usize, stream, "copy_to_host");
        self.pinned_used.lock().unwrap().push(dst as usize);
        self.count(&self.bytes_from_device, src.0 as usize, len);
        self.copy(dst as usize, src.0 as usize, len, stream);
        Ok(())
    }

    unsafe fn amd_file_read(
        &self,
        _: RawFd,
        _: DevicePtr,
        _: u64,
        _: i64,
    ) -> Result<u64, FileIoError> {
        Err(FileIoError::Unavailable)
    }

    unsafe fn amd_file_write(
        &self,
        _: RawFd,
        _: DevicePtr,
        _: u64,
        _: i64,
    ) -> Result<u64, FileIoError> {
        Err(FileIoError::Unavailable)
    }
}

/// A file's facts for a submission (the fallback looks only at the direct-I/O alignments,
/// and uses them only with a direct descriptor, see [`run_probed`]).
pub fn facts(file: &std::fs::File) -> FileFacts {
    hipfile_probe::file_facts(file.as_fd()).unwrap()
}

/// Validates and runs one request on `backend`, as core does: `size` bytes at `file_offset`
/// of `file`, at `buffer_offset` into the device buffer `base` (registered with `len`), with
/// no direct descriptor.
#[allow(clippy::too_many_arguments)]
pub fn run(
    backend: &dyn Backend,
    runtime: &dyn GpuRuntime,
    file: &std::fs::File,
    op: Op,
    base: DevicePtr,
    len: u64,
    buffer_offset: u64,
    file_offset: u64,
    size: u64,
) -> Result<u64, BackendError> {
    let target = IoTarget {
        direct: None,
        buffered: file.as_fd(),
    };
    submit(
        backend,
        runtime,
        &facts(file),
        &target,
        (op, base, len),
        (buffer_offset, file_offset, size),
    )
}

/// As [`run`], with the descriptors and facts of a registration: the file is probed, and its
/// `O_DIRECT` descriptor, if it has one, is passed on.
#[allow(clippy::too_many_arguments)]
pub fn run_probed(
    backend: &dyn Backend,
    runtime: &dyn GpuRuntime,
    file: &std::fs::File,
    op: Op,
    base: DevicePtr,
    len: u64,
    buffer_offset: u64,
    file_offset: u64,
    size: u64,
) -> Result<u64, BackendError> {
    let probed = hipfile_probe::probe_fd(file.as_fd()).unwrap();
    let target = IoTarget {
        direct: probed.direct_fd.as_ref().map(|d| d.as_fd(file.as_fd())),
        buffered: probed.buffered_fd.as_fd(file.as_fd()),
    };
    submit(
        backend,
        runtime,
        &probed.facts,
        &target,
        (op, base, len),
        (buffer_offset, file_offset, size),
    )
}

fn submit(
    backend: &dyn Backend,
    runtime: &dyn GpuRuntime,
    file: &FileFacts,
    target: &IoTarget<'_>,
    (op, base, len): (Op, DevicePtr, u64),
    (buffer_offset, file_offset, size): (u64, u64, u64),
) -> Result<u64, BackendError> {
    // SAFETY: the test's runtime keeps its allocations until it is dropped, after the call.
    let buffer = unsafe {
        hipfile_core::buffer::check_buffer(
            runtime,
            base,
            hipfile_core::buffer::BufferUse::Register { len },
        )
    }
    .unwrap();
    let request = Request {
        op,
        size,
        file_offset,
        buffer_offset,
    }
    .validate_checked(&buffer)
    .unwrap();
    let s = Submission {
        request: &request,
        file,
        buffer: buffer.facts(),
    };
    assert!(
        backend.score(&s).accepted(),
        "the backend refuses {request:?}"
    );
    backend.io(&s, target)
}

/// The default configuration.
pub fn config() -> Config {
    Config::default()
}

/// `len` bytes of a pattern that differs at every offset of a 251-byte cycle, shifted by `seed`.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ seed.wrapping_mul(31))
        .collect()
}
