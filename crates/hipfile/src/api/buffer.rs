//! Device buffers (owned allocations, or memory the caller allocated) and pinned host
//! buffers.

use crate::api::driver::{Driver, InFlight};
use crate::stats::Registration;
use hipfile_core::buffer::{BufferUse, check_buffer};
use hipfile_core::{BufferFacts, CheckedBuffer, DevicePtr, Error, MemoryKind, PinnedMemory};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// The driver's side of device and pinned buffers: allocation and registration.
impl Driver {
    /// Allocates `len` bytes of device memory, freed when the buffer is dropped.
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`] when the runtime cannot allocate; [`Error::InvalidValue`] for 0.
    pub fn alloc(&self, len: usize) -> Result<DeviceBuffer, Error> {
        self.in_this_process()?;
        DeviceBuffer::alloc(self.clone(), len)
    }

    /// Allocates `len` bytes of pinned host memory, zeroed, freed when the buffer is dropped:
    /// the fastest source and target of [`DeviceBuffer::copy_from_host`] and
    /// [`DeviceBuffer::copy_to_host`].
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`] when the runtime cannot allocate; [`Error::InvalidValue`] for 0.
    pub fn alloc_pinned(&self, len: usize) -> Result<PinnedHostBuffer, Error> {
        self.in_this_process()?;
        PinnedHostBuffer::alloc(self.clone(), len)
    }

    /// Allocates `len` bytes of device memory on `device`, freed when the buffer is dropped.
    /// The calling thread's current device is the same afterwards.
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`] when the device does not exist or cannot allocate;
    /// [`Error::InvalidValue`] for 0.
    pub fn alloc_on(&self, device: i32, len: usize) -> Result<DeviceBuffer, Error> {
        self.in_this_process()?;
        let gpu = self.gpu();
        gpu.thread_init().map_err(Error::Runtime)?;
        let before = gpu.current_device().map_err(Error::Runtime)?;
        gpu.set_device(device).map_err(Error::Runtime)?;
        let buffer = DeviceBuffer::alloc(self.clone(), len);
        let restored = gpu.set_device(before).map_err(Error::Runtime);
        let buffer = buffer?;
        restored?;
        Ok(buffer)
    }

    /// Registers a device buffer (optional: unregistered buffers are validated per call). The
    /// registration ends when the buffer is deregistered or dropped.
    ///
    /// # Errors
    ///
    /// [`Error::MemoryAlreadyRegistered`]; [`Error::InvalidValue`] for a buffer of another
    /// driver (register it with its own); or the validation errors of docs/BEHAVIOUR.md §3.6:
    /// memory the driver's rule does not register ([`Error::MemoryTypeInvalid`]: anything but
    /// device memory by default, managed memory under
    /// [`MemoryTypes::CuFile`](hipfile_core::MemoryTypes::CuFile)), a range beyond its
    /// allocation ([`Error::PointerRange`]).
    pub fn register_buffer(&self, buffer: &DeviceBuffer) -> Result<(), Error> {
        let result = self.register_buffer_uncounted(buffer);
        self.count_registration(Registration::BufferRegister, result.is_ok());
        result
    }

    fn register_buffer_uncounted(&self, buffer: &DeviceBuffer) -> Result<(), Error> {
        self.in_this_process()?;
        if !buffer.driver().same_as(self) {
            return Err(Error::InvalidValue {
                op: None,
                what: format!(
                    "buffer {} belongs to another driver; register it with the driver that \
                     allocated or described it",
                    buffer.ptr()
                ),
            });
        }
        // SAFETY: the registration lives in this driver only (checked above) and is removed
        // when `buffer` is dropped (`DeviceBuffer`'s `Drop`), before an owned buffer frees
        // its memory; a borrowed buffer's memory stays allocated while it lives (the
        // contract of `DeviceBuffer::from_raw`). Requests use the registration only while
        // they borrow `buffer` (`DeviceBuffer::request_facts`).
        #[allow(unsafe_code)]
        let facts = unsafe {
            check_buffer(
                self.gpu().as_ref(),
                buffer.ptr(),
                BufferUse::Register {
                    len: buffer.len() as u64,
                    rule: self.config().memory_types,
                },
            )
        }?;
        self.insert_registration(buffer.ptr(), buffer.id(), facts)
    }

    /// Deregisters a buffer.
    ///
    /// # Errors
    ///
    /// [`Error::MemoryNotRegistered`] when this buffer is not registered (another buffer at
    /// the same address may be); [`Error::InUse`] while I/O uses it.
    pub fn deregister_buffer(&self, buffer: &DeviceBuffer) -> Result<(), Error> {
        let result = self.remove_registration(buffer.ptr(), buffer.id());
        self.count_registration(Registration::BufferDeregister, result.is_ok());
        result
    }
}

/// A range of GPU device memory that hipfile reads into or writes from.
///
/// An owned buffer ([`Driver::alloc`]) frees its memory when dropped; a borrowed one
/// ([`DeviceBuffer::from_raw`]) never frees anything. The memory itself is shared with the
/// requests that use it: an asynchronous request holds it until it ends, so dropping the
/// buffer (or forgetting a request's handle) never frees memory a request still writes.
pub struct DeviceBuffer {
    memory: Arc<Memory>,
}

/// The memory of a [`DeviceBuffer`], shared by the buffer and the requests using it. Ends
/// its registration and, if owned, frees the memory when the last of them is gone.
pub(crate) struct Memory {
    driver: Driver,
    ptr: DevicePtr,
    len: usize,
    owned: bool,
    /// Tells this buffer from another at the same address, for registrations.
    id: u64,
    /// What the runtime said of the memory, once it said it is device memory: that cannot
    /// change while the buffer lives (the memory stays allocated), so unregistered requests
    /// ask the runtime once per buffer instead of once per request (two calls into the GPU
    /// driver, whose locks every thread shares).
    facts: OnceLock<CheckedBuffer>,
}

/// Gives every [`DeviceBuffer`] its identity.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.memory.fmt(f)
    }
}

impl std::fmt::Debug for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("owned", &self.owned)
            .finish()
    }
}

impl DeviceBuffer {
    pub(crate) fn alloc(driver: Driver, len: usize) -> Result<DeviceBuffer, Error> {
        if len == 0 {
            return Err(Error::InvalidValue {
                op: None,
                what: "cannot allocate a buffer of 0 bytes".into(),
            });
        }
        let ptr = driver.gpu().alloc_device(len).map_err(Error::Runtime)?;
        Ok(DeviceBuffer::new(Memory {
            driver,
            ptr,
            len,
            owned: true,
            id: next_id(),
            facts: OnceLock::new(),
        }))
    }

    /// Describes memory the caller allocated (with the runtime's allocator or a framework's).
    /// The buffer is validated when it is registered or used, not here; its registration, if
    /// any, ends when it is dropped, and the memory is never freed by hipfile.
    ///
    /// Device memory is what every driver serves. A driver opened with
    /// [`MemoryTypes::CuFile`](hipfile_core::MemoryTypes::CuFile)
    /// ([`ConfigBuilder::memory_types`](hipfile_core::ConfigBuilder::memory_types)) also
    /// serves host memory (pinned, registered with the runtime, or pageable), read into and
    /// written from in place, and managed memory (unregistered); docs/BEHAVIOUR.md §3.6.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # // Runs only with a runtime named (as `cargo xtask ci` does); compiles in any case.
    /// # if std::env::var_os("HIPFILE_HIP_LIBRARY").is_none() { return Ok(()); }
    /// # let path = std::env::temp_dir().join(format!("hipfile-doc-raw-{}", std::process::id()));
    /// # std::fs::write(&path, vec![5u8; 8192])?;
    /// let driver = hipfile::Driver::open()?;
    /// let fh = driver.register_file(&std::fs::File::open(&path)?)?;
    /// // Memory another library allocated with the same runtime: a pointer and a length.
    /// let (ptr, len) = (driver.tuning().gpu().alloc_device(8192)?, 8192);
    /// // SAFETY: `ptr..ptr+len` is device memory of this driver's runtime; it is freed only
    /// // after `tensor` is dropped, and nothing else touches it meanwhile.
    /// let mut tensor = unsafe { hipfile::DeviceBuffer::from_raw(&driver, ptr, len) };
    /// fh.read_exact_at(&mut tensor, 0)?;
    /// drop(tensor); // hipfile never frees it: its owner does.
    /// // SAFETY: `ptr` came from this runtime's `alloc_device`, and nothing uses it any more.
    /// unsafe { driver.tuning().gpu().free_device(ptr) }?;
    /// # std::fs::remove_file(&path)?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Safety
    ///
    /// `ptr..ptr+len` must stay valid device memory of `driver`'s runtime (or, for a driver
    /// whose rule serves them, managed memory of the runtime or host memory of this process,
    /// readable and writable) until the buffer is dropped and every request that used it has
    /// ended (a request's handle, once waited for or dropped, has ended), and nothing else
    /// may write it while hipfile writes into it. hipfile bounds device and managed memory by
    /// the allocation the runtime reports as well; pageable host memory the runtime does not
    /// know is bounded by `len` alone.
    #[allow(unsafe_code)]
    pub unsafe fn from_raw(driver: &Driver, ptr: DevicePtr, len: usize) -> DeviceBuffer {
        DeviceBuffer::new(Memory {
            driver: driver.clone(),
            ptr,
            len,
            owned: false,
            id: next_id(),
            facts: OnceLock::new(),
        })
    }

    /// [`from_raw`](Self::from_raw) for memory the runtime has just described: `memory` of
    /// `device`, usable for `len` bytes from `ptr` (to the end of its allocation, or as far
    /// as the caller vouches where the runtime cannot bound it). Its requests use that
    /// description instead of asking the runtime again (two calls into the GPU driver). For
    /// `hipfile-c-shared`, whose calls on an unregistered pointer ask the runtime before they make
    /// the buffer.
    ///
    /// # Safety
    ///
    /// As [`from_raw`](Self::from_raw); and the description is the runtime's answer for this
    /// memory, made while it was allocated.
    #[doc(hidden)]
    #[allow(unsafe_code)]
    pub unsafe fn from_raw_described(
        driver: &Driver,
        ptr: DevicePtr,
        len: usize,
        memory: MemoryKind,
        device: i32,
    ) -> DeviceBuffer {
        // SAFETY: the caller vouches for the description and keeps the memory allocated for
        // the buffer's life (this function's contract), which is what a `CheckedBuffer` needs.
        let facts = unsafe {
            CheckedBuffer::new_unchecked(BufferFacts {
                base: ptr,
                len: len as u64,
                memory,
                device,
            })
        };
        // SAFETY: as this function's contract.
        let buffer = unsafe { DeviceBuffer::from_raw(driver, ptr, len) };
        let _ = buffer.memory.facts.set(facts);
        buffer
    }

    fn new(memory: Memory) -> DeviceBuffer {
        DeviceBuffer {
            memory: Arc::new(memory),
        }
    }

    /// The driver the buffer belongs to.
    pub fn driver(&self) -> &Driver {
        &self.memory.driver
    }

    pub(crate) fn id(&self) -> u64 {
        self.memory.id
    }

    /// The memory, for a request that must keep it alive until it ends.
    pub(crate) fn memory(&self) -> &Arc<Memory> {
        &self.memory
    }

    /// The device address.
    pub fn ptr(&self) -> DevicePtr {
        self.memory.ptr
    }

    /// The length in bytes.
    pub fn len(&self) -> usize {
        self.memory.len
    }

    /// Whether the buffer is empty (never true for an owned buffer).
    pub fn is_empty(&self) -> bool {
        self.memory.len == 0
    }

    /// Copies `data` into the buffer at `offset` (a synchronous host-to-device copy), after
    /// the work queued before it on the null stream of the buffer's device, as `hipMemcpy`
    /// would.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] when the range leaves the buffer; [`Error::Runtime`].
    pub fn copy_from_host(&mut self, offset: usize, data: &[u8]) -> Result<(), Error> {
        self.memory.copy_from_host(offset, data)
    }

    /// Copies `out.len()` bytes from the buffer at `offset` into `out` (synchronous), after
    /// the work queued before it on the null stream of the buffer's device.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] when the range leaves the buffer; [`Error::Runtime`].
    pub fn copy_to_host(&self, offset: usize, out: &mut [u8]) -> Result<(), Error> {
        self.memory.copy_to_host(offset, out)
    }
}

/// Where a buffer's memory is, for a synchronous copy.
#[derive(Debug, Clone, Copy)]
enum Placed {
    /// Host memory: a plain `memcpy` reaches it.
    Host,
    /// Device memory of this device.
    Device(i32),
    /// Anything else, or memory that could not be looked at: the runtime's own copy finds
    /// out.
    Unknown,
}

impl Memory {
    /// The facts of the buffer for one request: its registration's when it is registered
    /// (with the in-flight count raised until the guard drops), else checked now.
    pub(crate) fn request_facts(&self) -> Result<(CheckedBuffer, Option<InFlight>), Error> {
        if let Some((facts, in_flight)) = self.driver.registered_facts(self.ptr, self.id) {
            return Ok((facts, Some(in_flight)));
        }
        if let Some(facts) = self.facts.get() {
            return Ok((*facts, None));
        }
        // SAFETY: the request holds this `Memory` (through the buffer it borrows, or its own
        // reference for an asynchronous request) until it ends, and the memory stays
        // allocated while the `Memory` lives (owned, or by the contract of
        // `DeviceBuffer::from_raw`, which also vouches for `len` bytes of memory the runtime
        // does not bound).
        #[allow(unsafe_code)]
        let facts = unsafe {
            check_buffer(
                self.driver.gpu().as_ref(),
                self.ptr,
                BufferUse::Unregistered {
                    len: self.len as u64,
                },
            )
        }?
        .truncated(self.len as u64);
        // Other memory (host memory, say) may change kind while the buffer lives (a
        // `hipHostRegister` makes pageable memory pinned), so it is asked about each time.
        if facts.facts().memory == MemoryKind::Device {
            let _ = self.facts.set(facts);
        }
        Ok((facts, None))
    }

    /// The device of the memory, as a request would find it now; `None` when the memory
    /// cannot be looked at (the request will fail with the reason).
    pub(crate) fn device_now(&self) -> Option<i32> {
        self.request_facts()
            .ok()
            .map(|(facts, _)| facts.facts().device)
    }

    /// Waits until the null stream of the memory's device has done the work queued on it
    /// so far, as a copy of `cudaMemcpy`/`hipMemcpy` would (`null_stream.rs`); says where
    /// the memory is. Host memory (pinned, registered or pageable, which only a driver whose
    /// rule serves it takes in `from_raw`) is reached with a plain `memcpy` by a synchronous
    /// copy: the runtime's host-to-device copy refuses a host destination.
    fn after_null_stream(&self) -> Result<Placed, Error> {
        let Ok((checked, _in_flight)) = self.request_facts() else {
            // The copy's own call reports what is wrong with the memory.
            return Ok(Placed::Unknown);
        };
        let facts = checked.facts();
        self.driver.wait_null_stream(facts.device)?;
        Ok(match facts.memory {
            MemoryKind::Host | MemoryKind::Unregistered => Placed::Host,
            MemoryKind::Device if facts.device >= 0 => Placed::Device(facts.device),
            _ => Placed::Unknown,
        })
    }

    /// Copies `data` into the buffer at `offset` (a synchronous host-to-device copy).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] when the range leaves the buffer; [`Error::Runtime`].
    pub(crate) fn copy_from_host(&self, offset: usize, data: &[u8]) -> Result<(), Error> {
        let dst = self.range(offset, data.len())?;
        self.driver.in_this_process()?;
        let gpu = self.driver.gpu();
        let (src, len) = (data.as_ptr(), data.len());
        let copied = match self.after_null_stream()? {
            // SAFETY: host memory of this process (vouched for by `from_raw`'s caller, who
            // keeps it readable and writable while the buffer lives), `dst..dst+len` inside
            // the buffer (checked above), and `data` a live slice that cannot overlap memory
            // the buffer lends out only through `&mut`.
            #[allow(unsafe_code)]
            Placed::Host => unsafe {
                std::ptr::copy_nonoverlapping(src, dst.0 as *mut u8, len);
                Ok(())
            },
            // SAFETY: `dst..dst+len` lies inside this buffer (checked above), device memory
            // of the driver's runtime on `device` (owned, or vouched for by `from_raw`'s
            // caller), and `data` is a live slice for the synchronous copy.
            #[allow(unsafe_code)]
            Placed::Device(device) => unsafe { gpu.copy_to_device_of(device, dst, src, len) },
            // SAFETY: as above; the runtime finds the memory's device itself.
            #[allow(unsafe_code)]
            Placed::Unknown => unsafe { gpu.copy_to_device(dst, src, len) },
        };
        copied.map_err(Error::Runtime)
    }

    /// Copies `out.len()` bytes from the buffer at `offset` into `out` (synchronous).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] when the range leaves the buffer; [`Error::Runtime`].
    fn copy_to_host(&self, offset: usize, out: &mut [u8]) -> Result<(), Error> {
        let src = self.range(offset, out.len())?;
        self.driver.in_this_process()?;
        let gpu = self.driver.gpu();
        let (dst, len) = (out.as_mut_ptr(), out.len());
        let copied = match self.after_null_stream()? {
            // SAFETY: as in `copy_from_host`'s host arm, with `out` a live, exclusively
            // borrowed slice.
            #[allow(unsafe_code)]
            Placed::Host => unsafe {
                std::ptr::copy_nonoverlapping(src.0 as *const u8, dst, len);
                Ok(())
            },
            // SAFETY: as in `copy_from_host`'s device arm, with `out` a live, exclusively
            // borrowed slice.
            #[allow(unsafe_code)]
            Placed::Device(device) => unsafe { gpu.copy_to_host_of(device, dst, src, len) },
            // SAFETY: as above; the runtime finds the memory's device itself.
            #[allow(unsafe_code)]
            Placed::Unknown => unsafe { gpu.copy_to_host(dst, src, len) },
        };
        copied.map_err(Error::Runtime)
    }

    fn range(&self, offset: usize, len: usize) -> Result<DevicePtr, Error> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(DevicePtr(self.ptr.0 + offset as u64)),
            _ => Err(Error::InvalidValue {
                op: None,
                what: format!(
                    "range {offset} + {len} leaves the buffer of {} bytes",
                    self.len
                ),
            }),
        }
    }
}

impl Drop for Memory {
    fn drop(&mut self) {
        // A registration must not outlive the memory it describes: a later allocation at the
        // same address would pass validation with this buffer's length.
        self.driver.forget_registration(self.ptr, self.id);
        if !self.owned {
            return;
        }
        // SAFETY: the memory came from `alloc_device` of this runtime and, the buffer and
        // every request holding the memory being gone, nothing can be using it.
        #[allow(unsafe_code)]
        let freed = unsafe { self.driver.gpu().free_device(self.ptr) };
        if let Err(e) = freed {
            hipfile_core::diag::line(&format!(
                "hipfile: warning: freeing device buffer {}: {e}",
                self.ptr
            ));
        }
    }
}

/// Page-locked ("pinned") host memory, which the GPU copies to and from at full speed, where
/// pageable memory goes through the driver's own staging: from 2 MiB up, memory hipfile maps
/// and registers with the GPU runtime (`hipHostRegister`, `cudaHostRegister`); smaller, the
/// runtime's own (`hipHostMalloc`, `cudaHostAlloc`). Zeroed when allocated, freed when
/// dropped; used as a byte slice. The memory is owned by a [`PinnedMemory`]; the buffer keeps
/// its driver open.
pub struct PinnedHostBuffer {
    #[allow(dead_code)] // Held to keep the driver open while the buffer lives.
    driver: Driver,
    memory: PinnedMemory,
}

impl std::fmt::Debug for PinnedHostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedHostBuffer")
            .field("ptr", &self.memory.as_ptr())
            .field("len", &self.memory.len())
            .finish()
    }
}

impl PinnedHostBuffer {
    pub(crate) fn alloc(driver: Driver, len: usize) -> Result<PinnedHostBuffer, Error> {
        if len == 0 {
            return Err(Error::InvalidValue {
                op: None,
                what: "cannot allocate a pinned buffer of 0 bytes".into(),
            });
        }
        let Some(memory) = PinnedMemory::alloc(driver.gpu(), len).map_err(Error::Runtime)? else {
            return Err(Error::Runtime(hipfile_core::RuntimeError::new(
                "pinned host allocation",
                0,
                "the runtime returned a null pointer",
            )));
        };
        Ok(PinnedHostBuffer { driver, memory })
    }
}

impl std::ops::Deref for PinnedHostBuffer {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.memory.as_slice()
    }
}

impl std::ops::DerefMut for PinnedHostBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.memory.as_mut_slice()
    }
}

impl Drop for PinnedHostBuffer {
    fn drop(&mut self) {
        if let Err(e) = self.memory.release() {
            hipfile_core::diag::line(&format!(
                "hipfile: warning: freeing a pinned host buffer: {e}"
            ));
        }
    }
}
