//! [`HostMemRuntime`]: a GPU runtime whose device memory is host memory, for testing the
//! backends and the facade without a GPU.
//!
//! It hands out real host addresses as device pointers (4096-aligned allocations it records),
//! allocates pinned memory the same way, and answers pointer queries from its own tables.
//! Copies move bytes with `ptr::copy` after checking that the device side lies inside device
//! memory of this runtime and the host side inside its pinned memory (the backends stage
//! through pinned buffers), so a transfer that strays outside its range fails the test
//! instead of corrupting memory. `hipAmdFileRead`/`hipAmdFileWrite` `pread`/`pwrite` the
//! descriptor straight into device memory: on an `O_DIRECT` descriptor the kernel then
//! enforces the direct-I/O rules, as the kernel driver does on hardware (misaligned I/O is
//! `EINVAL`); built with [`Builder::amd_file_io`]`(false)` the runtime has no AMD file I/O
//! (`GpuRuntime::amd_file_io` is `None`, and the calls, made anyway, answer
//! `FileIoError::Unavailable`). It has streams, but neither host functions nor stream memory
//! operations, and its stream and event queries cannot tell (callers then wait).
//!
//! It has [`Builder::devices`] devices (1 by default), each with the BAR1 size of
//! [`Builder::bar1_size`] (none by default), and a current device per thread, shared
//! by every runtime of the process as a real runtime's is. Device memory and streams belong to
//! the device current when they were made, and a copy on a stream of another device than its
//! memory's fails the test (a real runtime would route it through peer access, slowly).
//!
//! Built [`Builder::deferred`], copies on a stream are checked when queued and run only when
//! the stream, or an event recorded after them, is synchronised, as on a GPU: a backend that
//! reuses a staging buffer before its copy is done, or returns before its stream is
//! synchronised, moves the wrong bytes.
//!
//! Managed memory ([`HostMemRuntime::managed_with`]) is device memory that pointer queries
//! call managed, as a real runtime's `hipMallocManaged` memory is reached by the same copies;
//! pinned memory is host memory to pointer queries, with its allocation as its address range;
//! any other address is memory the runtime does not know (pageable).
//!
//! Every call is counted ([`HostMemRuntime::calls`]) and may be made to fail, panic or park
//! by a [`Fault`](crate::Fault) ([`Builder::fault`], or [`HostMemRuntime::faults`] later).
//! A failed stream synchronisation leaves the stream's work queued, as a GPU that faulted
//! would: nothing says whether its copies ran.
//!
//! # Safety
//!
//! The unsafe code here moves bytes between ranges that the runtime checked against its own
//! allocation tables first, and frees only allocations it made, once.

#![allow(unsafe_code)]

use crate::fault::{Call, Effect, Fault, Faults, Site};
use hipfile_core::runtime::{AmdFileIo, EventHandle, FileIoError, StreamHandle, Streams};
use hipfile_core::{DevicePtr, GpuRuntime, MemoryKind, PointerInfo, RuntimeError};
use std::alloc::Layout;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

thread_local! {
    /// The calling thread's current device (every runtime of the process shares it).
    static CURRENT_DEVICE: Cell<i32> = const { Cell::new(0) };
}

/// The most devices a [`HostMemRuntime`] has.
pub const MAX_DEVICES: usize = 8;

/// The alignment of every allocation.
pub const ALIGN: usize = 4096;

/// Allocations by base address: their length.
type Table = BTreeMap<usize, usize>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // An injected panic may unwind through a test's threads; the tables stay consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn layout(len: usize) -> Layout {
    Layout::from_size_align(len.max(1), ALIGN).expect("an allocation too large for a layout")
}

fn contains(table: &Mutex<Table>, addr: usize, len: usize) -> bool {
    lock(table)
        .range(..=addr)
        .next_back()
        .is_some_and(|(&base, &n)| addr.checked_add(len).is_some_and(|end| end <= base + n))
}

fn alloc(table: &Mutex<Table>, len: usize) -> *mut u8 {
    // SAFETY: the layout's size is non-zero (`layout` makes it at least 1).
    let p = unsafe { std::alloc::alloc_zeroed(layout(len)) };
    assert!(!p.is_null(), "out of host memory");
    lock(table).insert(p as usize, len);
    p
}

fn free(table: &Mutex<Table>, p: usize) -> bool {
    let Some(len) = lock(table).remove(&p) else {
        return false;
    };
    // SAFETY: `p` was allocated by `alloc` with this layout and is removed from the table,
    // so it is freed once.
    unsafe { std::alloc::dealloc(p as *mut u8, layout(len)) };
    true
}

fn rt_error(call: &'static str, code: i32, message: impl Into<String>) -> RuntimeError {
    RuntimeError::new(call, code, message.into())
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

/// How a [`HostMemRuntime`] is made; see [`HostMemRuntime::builder`].
#[derive(Debug)]
pub struct Builder {
    devices: i32,
    defer: bool,
    amd_file_io: bool,
    bar1_size: Option<u64>,
    faults: Vec<Fault>,
}

impl Builder {
    /// `n` devices, 1 to [`MAX_DEVICES`] (1 by default).
    ///
    /// # Panics
    ///
    /// If `n` is out of that range.
    pub fn devices(mut self, n: i32) -> Builder {
        assert!((1..=MAX_DEVICES as i32).contains(&n), "{n} devices");
        self.devices = n;
        self
    }

    /// Copies on a stream run only when synchronised (immediately by default).
    pub fn deferred(mut self) -> Builder {
        self.defer = true;
        self
    }

    /// Whether the runtime has AMD file I/O (by default it has).
    pub fn amd_file_io(mut self, present: bool) -> Builder {
        self.amd_file_io = present;
        self
    }

    /// Every device's BAR1 is `bytes` (by default the runtime cannot tell one, as HIP's
    /// cannot).
    pub fn bar1_size(mut self, bytes: u64) -> Builder {
        self.bar1_size = Some(bytes);
        self
    }

    /// Injects `fault` from the first call on.
    pub fn fault(mut self, fault: Fault) -> Builder {
        self.faults.push(fault);
        self
    }

    /// The runtime.
    pub fn build(self) -> HostMemRuntime {
        let faults = Faults::default();
        for f in self.faults {
            faults.add(f);
        }
        HostMemRuntime {
            device: Mutex::default(),
            pinned: Mutex::default(),
            device_of: Mutex::default(),
            managed: Mutex::default(),
            faults,
            pinned_used: Mutex::default(),
            bytes_to_device: std::array::from_fn(|_| AtomicU64::new(0)),
            bytes_from_device: std::array::from_fn(|_| AtomicU64::new(0)),
            devices: self.devices,
            defer: self.defer,
            amd_file_io: self.amd_file_io,
            bar1_size: self.bar1_size,
            queues: Mutex::default(),
        }
    }
}

/// A runtime whose device memory is host memory. See the module documentation.
#[derive(Debug)]
pub struct HostMemRuntime {
    device: Mutex<Table>,
    pinned: Mutex<Table>,
    /// The device of each device allocation, by base address.
    device_of: Mutex<BTreeMap<usize, i32>>,
    /// The base addresses of the device allocations that are managed memory.
    managed: Mutex<std::collections::BTreeSet<usize>>,
    faults: Faults,
    /// The pinned address of every copy, in the order they were issued.
    pinned_used: Mutex<Vec<usize>>,
    bytes_to_device: [AtomicU64; MAX_DEVICES],
    bytes_from_device: [AtomicU64; MAX_DEVICES],
    devices: i32,
    defer: bool,
    amd_file_io: bool,
    bar1_size: Option<u64>,
    queues: Mutex<Queues>,
}

impl Default for HostMemRuntime {
    fn default() -> Self {
        HostMemRuntime::new()
    }
}

impl HostMemRuntime {
    /// One device, immediate copies, AMD file I/O, no faults.
    pub fn new() -> HostMemRuntime {
        HostMemRuntime::builder().build()
    }

    /// A builder, with [`HostMemRuntime::new`]'s settings.
    pub fn builder() -> Builder {
        Builder {
            devices: 1,
            defer: false,
            amd_file_io: true,
            bar1_size: None,
            faults: Vec::new(),
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

    /// Device memory filled with `data`, on the current device.
    pub fn device_with(&self, data: &[u8]) -> DevicePtr {
        let p = self.alloc_device(data.len()).expect("alloc_device failed");
        self.write_device(p, data);
        p
    }

    /// Managed memory filled with `data`, on the current device: device memory that
    /// [`GpuRuntime::pointer_info`] calls [`MemoryKind::Managed`].
    pub fn managed_with(&self, data: &[u8]) -> DevicePtr {
        let p = self.device_with(data);
        lock(&self.managed).insert(p.0 as usize);
        p
    }

    /// Device memory of `device` filled with `data`; the calling thread's current device is
    /// left as it was.
    pub fn device_with_on(&self, device: i32, data: &[u8]) -> DevicePtr {
        let before = CURRENT_DEVICE.with(Cell::get);
        self.set_device(device).expect("set_device failed");
        let p = self.device_with(data);
        CURRENT_DEVICE.with(|c| c.set(before));
        p
    }

    /// Writes `data` at `p`.
    ///
    /// # Panics
    ///
    /// Unless the range lies inside device memory of this runtime.
    pub fn write_device(&self, p: DevicePtr, data: &[u8]) {
        assert!(contains(&self.device, p.0 as usize, data.len()));
        // SAFETY: the range lies inside an allocation of ours (checked above).
        unsafe { std::ptr::copy(data.as_ptr(), p.0 as *mut u8, data.len()) };
    }

    /// `len` bytes of device memory at `p`.
    ///
    /// # Panics
    ///
    /// Unless the range lies inside device memory of this runtime.
    pub fn read_device(&self, p: DevicePtr, len: usize) -> Vec<u8> {
        assert!(contains(&self.device, p.0 as usize, len));
        let mut out = vec![0; len];
        // SAFETY: the range lies inside an allocation of ours (checked above).
        unsafe { std::ptr::copy(p.0 as *const u8, out.as_mut_ptr(), len) };
        out
    }

    /// Pinned allocations not freed yet.
    pub fn live_pinned(&self) -> usize {
        lock(&self.pinned).len()
    }

    /// The pinned address of every copy, in the order they were issued.
    pub fn pinned_used(&self) -> Vec<usize> {
        lock(&self.pinned_used).clone()
    }

    /// Bytes copied into `device`'s memory.
    pub fn bytes_to_device(&self, device: usize) -> u64 {
        self.bytes_to_device[device].load(Ordering::SeqCst)
    }

    /// Bytes copied out of `device`'s memory.
    pub fn bytes_from_device(&self, device: usize) -> u64 {
        self.bytes_from_device[device].load(Ordering::SeqCst)
    }

    /// Counts the call and applies its fault, as a runtime error.
    fn enter(&self, call: Call, site: Site) -> Result<(), RuntimeError> {
        match self.faults.hit(call, site) {
            None => Ok(()),
            Some(Effect::Fail { code, message }) => {
                Err(rt_error(call.runtime_name(), code, message))
            }
            Some(e) => unreachable!("{e:?} on {call:?}: `Faults::add` allows it on file I/O only"),
        }
    }

    /// The device of the device allocation holding `p`.
    fn device_holding(&self, p: usize) -> Option<i32> {
        let table = lock(&self.device);
        let (&base, &len) = table.range(..=p).next_back()?;
        (p < base + len.max(1)).then(|| lock(&self.device_of).get(&base).copied())?
    }

    /// Fails the test unless `stream` (if any) belongs to the device of `memory`.
    fn check_route(&self, memory: usize, stream: Option<StreamHandle>, what: &str) {
        let Some(s) = stream else {
            return; // synchronous copies are routed by the pointers
        };
        let on = lock(&self.queues).stream_device.get(&s.0).copied();
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

    /// Runs a copy now, or queues it on `stream` for a deferred runtime. The caller checked
    /// both ranges against our allocations.
    fn copy(&self, dst: usize, src: usize, len: usize, stream: Option<StreamHandle>) {
        match stream {
            Some(s) if self.defer => {
                let mut q = lock(&self.queues);
                let queue = q
                    .by_stream
                    .get_mut(&s.0)
                    .expect("a copy on an unknown stream");
                queue.push(Queued::Copy { dst, src, len });
            }
            _ => Queued::Copy { dst, src, len }.run(),
        }
    }

    /// A copy into device memory, now or on `stream`: counted, faulted, its ranges checked.
    fn copy_in(
        &self,
        dst: DevicePtr,
        src: *const u8,
        len: usize,
        stream: Option<StreamHandle>,
    ) -> Result<(), RuntimeError> {
        self.enter(
            Call::CopyToDevice,
            Site {
                stream,
                range: Some((dst.0, len as u64)),
            },
        )?;
        assert!(
            contains(&self.device, dst.0 as usize, len),
            "copy_to_device to {dst} + {len} leaves device memory"
        );
        assert!(
            contains(&self.pinned, src as usize, len),
            "copy_to_device from {src:?} + {len} leaves pinned memory"
        );
        self.check_route(dst.0 as usize, stream, "copy_to_device");
        lock(&self.pinned_used).push(src as usize);
        self.count(&self.bytes_to_device, dst.0 as usize, len);
        self.copy(dst.0 as usize, src as usize, len, stream);
        Ok(())
    }

    /// A copy out of device memory; see [`HostMemRuntime::copy_in`].
    fn copy_out(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
        stream: Option<StreamHandle>,
    ) -> Result<(), RuntimeError> {
        self.enter(
            Call::CopyToHost,
            Site {
                stream,
                range: Some((src.0, len as u64)),
            },
        )?;
        assert!(
            contains(&self.device, src.0 as usize, len),
            "copy_to_host from {src} + {len} leaves device memory"
        );
        assert!(
            contains(&self.pinned, dst as usize, len),
            "copy_to_host to {dst:?} + {len} leaves pinned memory"
        );
        self.check_route(src.0 as usize, stream, "copy_to_host");
        lock(&self.pinned_used).push(dst as usize);
        self.count(&self.bytes_from_device, src.0 as usize, len);
        self.copy(dst as usize, src.0 as usize, len, stream);
        Ok(())
    }

    /// The common part of the file-I/O calls: counting, faults, and the range check. Returns
    /// how many bytes to move.
    fn file_io(&self, call: Call, addr: DevicePtr, size: u64) -> Result<u64, FileIoError> {
        let site = Site {
            stream: None,
            range: Some((addr.0, size)),
        };
        let size = match self.faults.hit(call, site) {
            None => size,
            Some(Effect::Fail { code, message }) => {
                return Err(FileIoError::Runtime(rt_error(
                    call.runtime_name(),
                    code,
                    message,
                )));
            }
            Some(Effect::Errno(e)) => return Err(FileIoError::Errno(e)),
            Some(Effect::Unavailable) => return Err(FileIoError::Unavailable),
            Some(Effect::Short(max)) => size.min(max),
        };
        if !self.amd_file_io {
            return Err(FileIoError::Unavailable);
        }
        assert!(
            contains(&self.device, addr.0 as usize, size as usize),
            "file I/O at {addr} + {size} leaves device memory"
        );
        Ok(size)
    }
}

impl Drop for HostMemRuntime {
    fn drop(&mut self) {
        let bases: Vec<usize> = lock(&self.device).keys().copied().collect();
        for base in bases {
            free(&self.device, base);
        }
        // Pinned memory is left to its owner's `free_pinned`: a leak here shows in
        // `live_pinned`, and freeing it would hide a missing free.
    }
}

// SAFETY: device and pinned memory are host allocations this runtime made and records, of the
// lengths asked for and 4096-aligned; `address_range` and `pointer_info` answer from that
// record; every copy and file-I/O call checks that its ranges lie inside live allocations
// before it moves a byte, and a deferred copy runs no later than the synchronisation that
// waits for it. All state is behind mutexes or atomics, so any thread may call any method.
unsafe impl GpuRuntime for HostMemRuntime {
    fn thread_init(&self) -> Result<(), RuntimeError> {
        self.enter(Call::ThreadInit, Site::default())
    }

    fn device_count(&self) -> Result<i32, RuntimeError> {
        self.enter(Call::DeviceCount, Site::default())?;
        Ok(self.devices)
    }

    fn current_device(&self) -> Result<i32, RuntimeError> {
        self.enter(Call::CurrentDevice, Site::default())?;
        Ok(CURRENT_DEVICE.with(Cell::get))
    }

    fn set_device(&self, device: i32) -> Result<(), RuntimeError> {
        self.enter(Call::SetDevice, Site::default())?;
        if !(0..self.devices).contains(&device) {
            return Err(rt_error("hipSetDevice", 101, "invalid device ordinal"));
        }
        CURRENT_DEVICE.with(|c| c.set(device));
        Ok(())
    }

    fn pointer_info(&self, ptr: DevicePtr) -> Result<PointerInfo, RuntimeError> {
        self.enter(Call::PointerInfo, Site::default())?;
        let (memory, device) = if contains(&self.device, ptr.0 as usize, 1) {
            let base = lock(&self.device)
                .range(..=(ptr.0 as usize))
                .next_back()
                .map(|(&b, _)| b);
            let managed = base.is_some_and(|b| lock(&self.managed).contains(&b));
            (
                if managed {
                    MemoryKind::Managed
                } else {
                    MemoryKind::Device
                },
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
        self.enter(Call::AddressRange, Site::default())?;
        for table in [&self.device, &self.pinned] {
            let table = lock(table);
            if let Some((&base, &len)) = table.range(..=(ptr.0 as usize)).next_back()
                && (ptr.0 as usize) < base + len
            {
                return Ok((DevicePtr(base as u64), len as u64));
            }
        }
        Err(rt_error(
            "hipMemGetAddressRange",
            500,
            "not an allocation of this runtime",
        ))
    }

    fn bar1_size(&self, device: i32) -> Result<u64, RuntimeError> {
        if !(0..self.devices).contains(&device) {
            return Err(rt_error("bar1_size", 101, "invalid device ordinal"));
        }
        self.bar1_size.ok_or_else(|| {
            RuntimeError::unsupported_because("bar1_size", "this runtime was built without a BAR1")
        })
    }

    fn alloc_device(&self, len: usize) -> Result<DevicePtr, RuntimeError> {
        self.enter(Call::AllocDevice, Site::default())?;
        let p = alloc(&self.device, len) as usize;
        lock(&self.device_of).insert(p, CURRENT_DEVICE.with(Cell::get));
        Ok(DevicePtr(p as u64))
    }

    unsafe fn free_device(&self, ptr: DevicePtr) -> Result<(), RuntimeError> {
        self.enter(Call::FreeDevice, Site::default())?;
        lock(&self.device_of).remove(&(ptr.0 as usize));
        lock(&self.managed).remove(&(ptr.0 as usize));
        if free(&self.device, ptr.0 as usize) {
            Ok(())
        } else {
            Err(rt_error("hipFree", 1, "not an allocation of this runtime"))
        }
    }

    fn alloc_pinned(&self, len: usize) -> Result<*mut u8, RuntimeError> {
        self.enter(Call::AllocPinned, Site::default())?;
        Ok(alloc(&self.pinned, len))
    }

    unsafe fn free_pinned(&self, ptr: *mut u8) -> Result<(), RuntimeError> {
        self.enter(Call::FreePinned, Site::default())?;
        if free(&self.pinned, ptr as usize) {
            Ok(())
        } else {
            panic!("free_pinned of {ptr:?}, which is not live pinned memory of this runtime")
        }
    }

    unsafe fn copy_to_device(
        &self,
        dst: DevicePtr,
        src: *const u8,
        len: usize,
    ) -> Result<(), RuntimeError> {
        self.copy_in(dst, src, len, None)
    }

    unsafe fn copy_to_host(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
    ) -> Result<(), RuntimeError> {
        self.copy_out(dst, src, len, None)
    }

    fn streams(&self) -> Option<&dyn Streams> {
        Some(self)
    }

    fn amd_file_io(&self) -> Option<&dyn AmdFileIo> {
        self.amd_file_io.then_some(self as &dyn AmdFileIo)
    }
}

// SAFETY: as for `GpuRuntime`: an asynchronous copy checks its ranges when queued and runs no
// later than the synchronisation of its stream or of an event recorded after it; work on a
// stream runs in the order it was queued.
unsafe impl Streams for HostMemRuntime {
    fn stream_create(&self) -> Result<StreamHandle, RuntimeError> {
        self.enter(Call::StreamCreate, Site::default())?;
        let mut q = lock(&self.queues);
        q.next_handle += 1;
        let h = q.next_handle;
        q.by_stream.insert(h, Vec::new());
        q.stream_device.insert(h, CURRENT_DEVICE.with(Cell::get));
        Ok(StreamHandle(h))
    }

    fn stream_destroy(&self, s: StreamHandle) -> Result<(), RuntimeError> {
        self.enter(Call::StreamDestroy, Site::default())?;
        let queue = {
            let mut q = lock(&self.queues);
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
        self.enter(
            Call::StreamSynchronize,
            Site {
                stream: Some(s),
                range: None,
            },
        )?;
        let mut q = lock(&self.queues);
        if let Some(queue) = q.by_stream.get_mut(&s.0) {
            for w in queue.drain(..) {
                w.run();
            }
        }
        Ok(())
    }

    fn event_create(&self) -> Result<EventHandle, RuntimeError> {
        self.enter(Call::EventCreate, Site::default())?;
        let mut q = lock(&self.queues);
        q.next_handle += 1;
        Ok(EventHandle(q.next_handle))
    }

    fn event_record(&self, e: EventHandle, s: StreamHandle) -> Result<(), RuntimeError> {
        self.enter(
            Call::EventRecord,
            Site {
                stream: Some(s),
                range: None,
            },
        )?;
        let mut q = lock(&self.queues);
        if let Some(queue) = q.by_stream.get_mut(&s.0) {
            queue.push(Queued::Event(e.0));
        }
        Ok(())
    }

    fn event_synchronize(&self, e: EventHandle) -> Result<(), RuntimeError> {
        self.enter(Call::EventSynchronize, Site::default())?;
        let mut q = lock(&self.queues);
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
        self.enter(Call::EventDestroy, Site::default())
    }

    /// This double cannot tell (as a runtime without `hipStreamQuery`): callers wait.
    fn stream_query(&self, _: StreamHandle) -> Result<bool, RuntimeError> {
        Err(RuntimeError::unsupported("stream_query"))
    }

    /// This double cannot tell (as a runtime without `hipEventQuery`).
    fn event_query(&self, _: EventHandle) -> Result<bool, RuntimeError> {
        Err(RuntimeError::unsupported("event_query"))
    }

    unsafe fn copy_to_device_async(
        &self,
        dst: DevicePtr,
        src: *const u8,
        len: usize,
        stream: StreamHandle,
    ) -> Result<(), RuntimeError> {
        self.copy_in(dst, src, len, Some(stream))
    }

    unsafe fn copy_to_host_async(
        &self,
        dst: *mut u8,
        src: DevicePtr,
        len: usize,
        stream: StreamHandle,
    ) -> Result<(), RuntimeError> {
        self.copy_out(dst, src, len, Some(stream))
    }
}

// SAFETY: as for `GpuRuntime`: each call checks that its range lies inside device memory of
// this runtime before it moves a byte.
unsafe impl AmdFileIo for HostMemRuntime {
    unsafe fn amd_file_read(
        &self,
        fd: RawFd,
        dst: DevicePtr,
        size: u64,
        offset: i64,
    ) -> Result<u64, FileIoError> {
        let size = self.file_io(Call::AmdFileRead, dst, size)?;
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
        let size = self.file_io(Call::AmdFileWrite, src, size)?;
        // SAFETY: the range lies inside an allocation of ours (checked in `file_io`).
        let buf = unsafe { std::slice::from_raw_parts(src.0 as *const u8, size as usize) };
        // SAFETY: the caller passes an open descriptor, open for the call's duration.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        rustix::io::pwrite(fd, buf, offset as u64)
            .map(|n| n as u64)
            .map_err(|e| FileIoError::Errno(e.raw_os_error()))
    }
}
