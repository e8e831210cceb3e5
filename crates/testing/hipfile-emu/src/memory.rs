//! Emulated device memory and host memory, in one table of every allocation and registration.
//!
//! # Safety
//!
//! Device and pinned memory is host memory from the global allocator, 4096-aligned and zeroed,
//! recorded in one table by base address; registrations record a caller's range without owning
//! it. Entries never overlap. The table decides what may be freed (only what this runtime
//! allocated, by its base address) and where a copy may write: a pointer declared device
//! memory must lie, with its whole length, in one device allocation, and any pointer that falls
//! into a known entry must fit in it. Host memory outside the table is the caller's promise.
//!
//! Copies and file I/O hold a gate (a read-write lock) shared from validation to the end of
//! the transfer, and the functions that release memory hold it exclusively, so memory is never
//! released under a running transfer (as `hipFree` synchronises the device first).
//!
//! # Copies
//!
//! [`check_copy`] is the table's check of a copy, and says which devices' memory the copy
//! touches. The copy entry points, `hipMemcpy` and `hipMemcpyAsync`, with their ordering on
//! streams and their device rules, are in [`crate::copy`], which uses this module and
//! [`crate::stream`]; this module uses neither.
//!
//! The bytes copied into and out of each device's memory (by `hipMemcpy`, `hipMemcpyAsync`
//! and the emulated `hipAmdFileRead`/`hipAmdFileWrite`) are counted per device
//! ([`device_copy_bytes`], `hipfileEmuDeviceCopyBytes`); `hipfileEmuReset` zeroes them.

use crate::config::{self, MAX_DEVICES};
use crate::device::current_device;
use crate::error::{
    HOST_MEMORY_ALREADY_REGISTERED, HOST_MEMORY_NOT_REGISTERED, INVALID_DEVICE,
    INVALID_MEMCPY_DIRECTION, INVALID_VALUE, NOT_FOUND, OUT_OF_MEMORY, SUCCESS, UNKNOWN, code_of,
};
use std::alloc::{self, Layout};
use std::collections::BTreeMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The alignment of every allocation: a page, as the kernel's direct-I/O paths want.
pub const ALLOCATION_ALIGN: usize = 4096;

/// `hipHostMallocPortable | Mapped | WriteCombined | NumaUser | Coherent | NonCoherent`.
const HOST_MALLOC_FLAGS: c_uint = 0x1 | 0x2 | 0x4 | 0x2000_0000 | 0x4000_0000 | 0x8000_0000;
/// `hipHostMallocCoherent | hipHostMallocNonCoherent`: contradictory together.
const COHERENCE_FLAGS: c_uint = 0x4000_0000 | 0x8000_0000;
/// `hipHostRegisterPortable | Mapped | IoMemory | ReadOnly`.
const HOST_REGISTER_FLAGS: c_uint = 0x1 | 0x2 | 0x4 | 0x8;
/// `hipMemAttachGlobal` and `hipMemAttachHost`: exactly one of them for `hipMallocManaged`.
const MANAGED_FLAGS: [c_uint; 2] = [0x1, 0x2];

/// What a table entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `hipMalloc` memory of a device.
    Device {
        /// The device that was current when it was allocated.
        device: i32,
    },
    /// `hipHostMalloc` memory.
    Pinned,
    /// `hipMallocManaged` memory: one address for the host and every device, attached to
    /// the device that was current when it was allocated.
    Managed {
        /// The device that was current when it was allocated.
        device: i32,
    },
    /// A caller's range given to `hipHostRegister`.
    Registered,
}

/// One entry of the table, as a lookup reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    /// The first byte.
    pub base: usize,
    /// The length in bytes, never 0.
    pub len: usize,
    /// What it is.
    pub kind: Kind,
    /// The flags it was allocated or registered with.
    pub flags: c_uint,
}

impl Allocation {
    /// Whether `addr..addr+len` lies inside the entry (`addr` must be inside it).
    fn holds(&self, addr: usize, len: usize) -> bool {
        addr >= self.base && len <= self.len - (addr - self.base)
    }
}

#[derive(Debug)]
struct Entry {
    len: usize,
    kind: Kind,
    flags: c_uint,
}

/// Every allocation and registration, by base address.
static TABLE: Mutex<BTreeMap<usize, Entry>> = Mutex::new(BTreeMap::new());
/// Shared by transfers, exclusive for releases (see the module documentation).
static GATE: RwLock<()> = RwLock::new(());

fn table() -> MutexGuard<'static, BTreeMap<usize, Entry>> {
    TABLE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Held shared from the validation of a transfer to its end.
pub(crate) fn transfer_gate() -> RwLockReadGuard<'static, ()> {
    GATE.read().unwrap_or_else(PoisonError::into_inner)
}

fn release_gate() -> RwLockWriteGuard<'static, ()> {
    GATE.write().unwrap_or_else(PoisonError::into_inner)
}

/// Bytes copied into (`[0]`) and out of (`[1]`) each device's memory, by device number.
static COPIED: [[AtomicU64; 2]; MAX_DEVICES as usize] =
    [const { [AtomicU64::new(0), AtomicU64::new(0)] }; MAX_DEVICES as usize];

/// Counts `bytes` moved into the memory of device `into` and out of the memory of device
/// `out_of` (`None`: not device memory). Devices without counters are ignored.
pub(crate) fn count_copied(into: Option<c_int>, out_of: Option<c_int>, bytes: u64) {
    for (device, side) in [(into, 0), (out_of, 1)] {
        let counter = device
            .and_then(|d| usize::try_from(d).ok())
            .and_then(|d| COPIED.get(d));
        if let Some(counter) = counter {
            counter[side].fetch_add(bytes, Ordering::Relaxed);
        }
    }
}

/// The bytes copied into and out of the memory of `device`, given `count` devices, since load
/// or the last reset: `(to_device, from_device)`.
///
/// # Errors
///
/// `hipErrorInvalidDevice` unless `0 <= device < count`.
pub fn device_copy_bytes(device: c_int, count: c_int) -> Result<(u64, u64), i32> {
    if !(0..count).contains(&device) {
        return Err(INVALID_DEVICE);
    }
    let counter = usize::try_from(device)
        .ok()
        .and_then(|d| COPIED.get(d))
        .ok_or(INVALID_DEVICE)?;
    Ok((
        counter[0].load(Ordering::Relaxed),
        counter[1].load(Ordering::Relaxed),
    ))
}

/// Sets every per-device copy counter back to zero.
pub(crate) fn reset_copy_counters() {
    for c in COPIED.iter().flatten() {
        c.store(0, Ordering::Relaxed);
    }
}

/// Held by the unit tests that check exact per-device counters, and by the one that resets
/// them, so that a reset never runs in the middle of a check. Each such test also copies only
/// on devices of its own (8 and above; other tests use devices below 8).
#[cfg(test)]
pub(crate) fn counters_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

fn containing(table: &BTreeMap<usize, Entry>, addr: usize) -> Option<Allocation> {
    let (&base, entry) = table.range(..=addr).next_back()?;
    (addr - base < entry.len).then_some(Allocation {
        base,
        len: entry.len,
        kind: entry.kind,
        flags: entry.flags,
    })
}

/// Whether `addr..addr+len` (`len > 0`) touches any entry.
fn overlaps(table: &BTreeMap<usize, Entry>, addr: usize, len: usize) -> bool {
    let Some(end) = addr.checked_add(len) else {
        return true;
    };
    containing(table, addr).is_some() || table.range(addr..end).next().is_some()
}

/// The entry containing `addr`, interior addresses included.
pub fn lookup(addr: usize) -> Option<Allocation> {
    containing(&table(), addr)
}

/// The device allocation holding all of `addr..addr+len`.
pub fn device_range(addr: usize, len: usize) -> Option<Allocation> {
    device_range_in(&table(), addr, len)
}

fn device_range_in(table: &BTreeMap<usize, Entry>, addr: usize, len: usize) -> Option<Allocation> {
    containing(table, addr).filter(|a| matches!(a.kind, Kind::Device { .. }) && a.holds(addr, len))
}

/// Whether a host-side range is acceptable: inside the entry it starts in, or clear of every
/// entry (memory the runtime does not know, the caller's business).
fn host_range_ok(table: &BTreeMap<usize, Entry>, addr: usize, len: usize) -> bool {
    match containing(table, addr) {
        Some(a) => a.holds(addr, len),
        None => !overlaps(table, addr, len),
    }
}

/// The number of entries in the table (allocations and registrations).
pub fn live_entries() -> usize {
    table().len()
}

fn allocate(size: usize, kind: Kind, flags: c_uint) -> Result<*mut c_void, i32> {
    let layout = Layout::from_size_align(size, ALLOCATION_ALIGN).map_err(|_| OUT_OF_MEMORY)?;
    // SAFETY: the callers pass a non-zero size, so the layout is not zero-sized.
    let ptr = unsafe { alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return Err(OUT_OF_MEMORY);
    }
    table().insert(
        ptr as usize,
        Entry {
            len: size,
            kind,
            flags,
        },
    );
    Ok(ptr.cast())
}

/// Removes the entry based at `ptr` if `wanted` accepts it; deallocates it when `owned`.
fn release(
    ptr: *mut c_void,
    wanted: fn(Kind) -> bool,
    owned: bool,
    missing: i32,
) -> Result<(), i32> {
    if owned {
        // As HIP's `hipFree`/`hipHostFree`, which synchronise the device: the null stream's
        // work queued before the release is done first (a deferred `hipMemcpy` into the
        // memory, say), so that none of it lands in a later allocation at the same address.
        // Its errors are left for its next synchronisation; from the null stream's own host
        // function, where waiting would never end, nothing is waited for.
        let null = crate::queue::null_queue();
        let _ = null.wait_for(null.ticket());
    }
    let _gate = release_gate();
    let entry = {
        let mut table = table();
        match table.get(&(ptr as usize)) {
            Some(entry) if wanted(entry.kind) => table.remove(&(ptr as usize)),
            _ => None,
        }
    };
    let Some(entry) = entry else {
        return Err(missing);
    };
    if owned {
        let layout = Layout::from_size_align(entry.len, ALLOCATION_ALIGN).map_err(|_| UNKNOWN)?;
        // SAFETY: the entry proves that `allocate` returned `ptr` with this very layout, and
        // removing it under the exclusive gate makes this the only release, with no transfer
        // running.
        unsafe { alloc::dealloc(ptr.cast(), layout) };
    }
    Ok(())
}

/// `hipError_t hipMalloc(void** ptr, size_t size)` — allocates `size` bytes of emulated device
/// memory on the calling thread's current device, 4096-aligned and zeroed. A size of 0 gives a
/// null pointer and success, as HIP does.
///
/// # Errors
///
/// `hipErrorInvalidDevice` without devices; `hipErrorInvalidValue` for a null `ptr`;
/// `hipErrorOutOfMemory`.
///
/// # Safety
///
/// `ptr` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipMalloc(ptr: *mut *mut c_void, size: usize) -> i32 {
    if let Err(e) = config::with_device() {
        return crate::error::record(e);
    }
    if ptr.is_null() {
        return crate::error::record(INVALID_VALUE);
    }
    let result = if size == 0 {
        Ok(std::ptr::null_mut())
    } else {
        allocate(
            size,
            Kind::Device {
                device: current_device(),
            },
            0,
        )
    };
    match result {
        Ok(p) => {
            // SAFETY: non-null and writable by the caller's promise.
            unsafe { ptr.write(p) };
            SUCCESS
        }
        Err(e) => crate::error::record(e),
    }
}

/// `hipError_t hipFree(void* ptr)` — frees memory from `hipMalloc` or `hipMallocManaged`;
/// null is a no-op. Waits for running transfers first.
///
/// # Errors
///
/// `hipErrorInvalidValue` for anything but the base of a live `hipMalloc` or
/// `hipMallocManaged` allocation (interior pointers, pinned memory and foreign memory are
/// refused, never freed).
///
/// # Safety
///
/// Nothing uses the memory afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipFree(ptr: *mut c_void) -> i32 {
    if ptr.is_null() {
        return SUCCESS;
    }
    code_of(release(
        ptr,
        |k| matches!(k, Kind::Device { .. } | Kind::Managed { .. }),
        true,
        INVALID_VALUE,
    ))
}

/// `hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags)` — allocates `size`
/// bytes of pinned host memory, 4096-aligned and zeroed; 0 gives null and success.
///
/// # Errors
///
/// `hipErrorInvalidDevice` without devices; `hipErrorInvalidValue` for a null `ptr`, unknown
/// flags or both coherence flags; `hipErrorOutOfMemory`.
///
/// # Safety
///
/// `ptr` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipHostMalloc(ptr: *mut *mut c_void, size: usize, flags: c_uint) -> i32 {
    if let Err(e) = config::with_device() {
        return crate::error::record(e);
    }
    if ptr.is_null()
        || flags & !HOST_MALLOC_FLAGS != 0
        || flags & COHERENCE_FLAGS == COHERENCE_FLAGS
    {
        return crate::error::record(INVALID_VALUE);
    }
    let result = if size == 0 {
        Ok(std::ptr::null_mut())
    } else {
        allocate(size, Kind::Pinned, flags)
    };
    match result {
        Ok(p) => {
            // SAFETY: non-null and writable by the caller's promise.
            unsafe { ptr.write(p) };
            SUCCESS
        }
        Err(e) => crate::error::record(e),
    }
}

/// `hipError_t hipHostFree(void* ptr)` — frees memory from `hipHostMalloc`; null is a no-op.
///
/// # Errors
///
/// `hipErrorInvalidValue` for anything but the base of a live `hipHostMalloc` allocation.
///
/// # Safety
///
/// Nothing uses the memory afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipHostFree(ptr: *mut c_void) -> i32 {
    if ptr.is_null() {
        return SUCCESS;
    }
    code_of(release(ptr, |k| k == Kind::Pinned, true, INVALID_VALUE))
}

/// `hipError_t hipMallocManaged(void** ptr, size_t size, unsigned int flags)` — allocates
/// `size` bytes of managed memory, attached to the calling thread's current device,
/// 4096-aligned and zeroed; 0 gives null and success. Managed memory is one address for the
/// host and every device: copies may name it on either side, `hipPointerGetAttributes`
/// reports it as Managed (Unified before ROCm 5.3) with `isManaged` set, and `hipFree`
/// releases it. The emulated `hipAmdFileRead`/`hipAmdFileWrite` refuse it, as they refuse
/// everything but `hipMalloc` memory.
///
/// # Errors
///
/// `hipErrorInvalidDevice` without devices; `hipErrorInvalidValue` for a null `ptr` or flags
/// other than exactly one of `hipMemAttachGlobal` (1) and `hipMemAttachHost` (2);
/// `hipErrorOutOfMemory`.
///
/// # Safety
///
/// `ptr` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipMallocManaged(
    ptr: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> i32 {
    if let Err(e) = config::with_device() {
        return crate::error::record(e);
    }
    if ptr.is_null() || !MANAGED_FLAGS.contains(&flags) {
        return crate::error::record(INVALID_VALUE);
    }
    let result = if size == 0 {
        Ok(std::ptr::null_mut())
    } else {
        allocate(
            size,
            Kind::Managed {
                device: current_device(),
            },
            flags,
        )
    };
    match result {
        Ok(p) => {
            // SAFETY: non-null and writable by the caller's promise.
            unsafe { ptr.write(p) };
            SUCCESS
        }
        Err(e) => crate::error::record(e),
    }
}

/// `hipError_t hipHostRegister(void* ptr, size_t size, unsigned int flags)` — records the
/// caller's range as registered host memory. The memory is not touched.
///
/// # Errors
///
/// `hipErrorInvalidDevice` without devices; `hipErrorInvalidValue` for a null pointer, a zero
/// size, a range that wraps or unknown flags; `hipErrorHostMemoryAlreadyRegistered` when the
/// range overlaps a registration or an allocation of this runtime.
///
/// # Safety
///
/// None: the range is only recorded.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipHostRegister(ptr: *mut c_void, size: usize, flags: c_uint) -> i32 {
    if let Err(e) = config::with_device() {
        return e;
    }
    let addr = ptr as usize;
    if ptr.is_null() || size == 0 || addr.checked_add(size).is_none() {
        return INVALID_VALUE;
    }
    if flags & !HOST_REGISTER_FLAGS != 0 {
        return INVALID_VALUE;
    }
    let mut table = table();
    if overlaps(&table, addr, size) {
        return HOST_MEMORY_ALREADY_REGISTERED;
    }
    table.insert(
        addr,
        Entry {
            len: size,
            kind: Kind::Registered,
            flags,
        },
    );
    SUCCESS
}

/// `hipError_t hipHostUnregister(void* ptr)` — forgets a registration made at `ptr`.
///
/// # Errors
///
/// `hipErrorHostMemoryNotRegistered` unless `ptr` is the start of a registration.
///
/// # Safety
///
/// None: only the record is removed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipHostUnregister(ptr: *mut c_void) -> i32 {
    code_of(release(
        ptr,
        |k| k == Kind::Registered,
        false,
        HOST_MEMORY_NOT_REGISTERED,
    ))
}

/// Which `hipMemoryType` numbering a runtime uses (the ABI changed in ROCm 6.0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryAbi {
    /// ROCm 5: Host 0, Device 1, Array 2, Unified 3, and Managed 4 from 5.3 on. An unknown
    /// pointer is `hipErrorInvalidValue`.
    Rocm5 {
        /// Whether the numbering has Managed (ROCm 5.3 to 5.7).
        managed: bool,
    },
    /// ROCm 6 and later: Unregistered 0, Host 1, Device 2, Managed 3, Array 10, Unified 11.
    /// An unknown pointer is success with type Unregistered and device -2.
    Rocm6,
}

impl MemoryAbi {
    /// The numbering of ROCm `version`.
    pub fn of(version: config::RocmVersion) -> MemoryAbi {
        if version.at_least(6, 0) {
            MemoryAbi::Rocm6
        } else {
            MemoryAbi::Rocm5 {
                managed: version.at_least(5, 3),
            }
        }
    }
}

/// A `hipMemoryType`, independent of its numbering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryType {
    /// Memory the runtime does not know (ROCm ≥ 6 only).
    Unregistered,
    /// Host memory: pinned or registered.
    Host,
    /// Device memory.
    Device,
    /// An array.
    Array,
    /// Unified memory.
    Unified,
    /// Managed memory (not in ROCm < 5.3).
    Managed,
}

impl MemoryType {
    /// The value of this type in `abi`'s numbering, `None` where it has none.
    pub fn code(self, abi: MemoryAbi) -> Option<c_int> {
        match (abi, self) {
            (MemoryAbi::Rocm5 { .. }, MemoryType::Unregistered) => None,
            (MemoryAbi::Rocm5 { .. }, MemoryType::Host) => Some(0),
            (MemoryAbi::Rocm5 { .. }, MemoryType::Device) => Some(1),
            (MemoryAbi::Rocm5 { .. }, MemoryType::Array) => Some(2),
            (MemoryAbi::Rocm5 { .. }, MemoryType::Unified) => Some(3),
            (MemoryAbi::Rocm5 { managed }, MemoryType::Managed) => managed.then_some(4),
            (MemoryAbi::Rocm6, MemoryType::Unregistered) => Some(0),
            (MemoryAbi::Rocm6, MemoryType::Host) => Some(1),
            (MemoryAbi::Rocm6, MemoryType::Device) => Some(2),
            (MemoryAbi::Rocm6, MemoryType::Managed) => Some(3),
            (MemoryAbi::Rocm6, MemoryType::Array) => Some(10),
            (MemoryAbi::Rocm6, MemoryType::Unified) => Some(11),
        }
    }
}

/// `hipPointerAttribute_t`: 32 bytes, the same offsets in ROCm 5, 6 and 7.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HipPointerAttribute {
    /// `hipMemoryType`, numbered per the emulated version.
    pub memory_type: c_int,
    /// The device.
    pub device: c_int,
    /// The device address of the pointer (null for memory the device cannot reach).
    pub device_pointer: *mut c_void,
    /// The host address of the pointer (null for device memory).
    pub host_pointer: *mut c_void,
    /// Whether the memory is managed (`hipMallocManaged`).
    pub is_managed: c_int,
    /// The flags of the allocation or registration.
    pub allocation_flags: c_uint,
}

/// The device number ROCm ≥ 6 reports for memory it does not know.
pub const UNREGISTERED_DEVICE: c_int = -2;

/// What `hipPointerGetAttributes` reports for `ptr` under `abi`, with `current_device` as the
/// device of host memory. Device memory: type Device, its device, `devicePointer = ptr`.
/// Pinned and registered memory: type Host, the current device, both pointers `ptr` (HIP maps
/// them into the device's address space at the same address). Unknown memory: ROCm 5
/// `hipErrorInvalidValue`; ROCm ≥ 6 type Unregistered, device -2, null pointers.
///
/// # Errors
///
/// `hipErrorInvalidValue` for a null `ptr`, or (ROCm 5) an unknown one.
pub fn pointer_attributes(
    ptr: *const c_void,
    abi: MemoryAbi,
    current_device: c_int,
) -> Result<HipPointerAttribute, i32> {
    if ptr.is_null() {
        return Err(INVALID_VALUE);
    }
    let code = |t: MemoryType| t.code(abi).ok_or(INVALID_VALUE);
    let p = ptr.cast_mut();
    match lookup(ptr as usize) {
        Some(Allocation {
            kind: Kind::Device { device },
            flags,
            ..
        }) => Ok(HipPointerAttribute {
            memory_type: code(MemoryType::Device)?,
            device,
            device_pointer: p,
            host_pointer: std::ptr::null_mut(),
            is_managed: 0,
            allocation_flags: flags,
        }),
        Some(Allocation {
            kind: Kind::Managed { device },
            flags,
            ..
        }) => Ok(HipPointerAttribute {
            // ROCm before 5.3 numbers no Managed type: such memory was Unified there.
            memory_type: code(MemoryType::Managed).or_else(|_| code(MemoryType::Unified))?,
            device,
            device_pointer: p,
            host_pointer: p,
            is_managed: 1,
            allocation_flags: flags,
        }),
        Some(Allocation { flags, .. }) => Ok(HipPointerAttribute {
            memory_type: code(MemoryType::Host)?,
            device: current_device,
            device_pointer: p,
            host_pointer: p,
            is_managed: 0,
            allocation_flags: flags,
        }),
        None => match abi {
            MemoryAbi::Rocm5 { .. } => Err(INVALID_VALUE),
            MemoryAbi::Rocm6 => Ok(HipPointerAttribute {
                memory_type: code(MemoryType::Unregistered)?,
                device: UNREGISTERED_DEVICE,
                device_pointer: std::ptr::null_mut(),
                host_pointer: std::ptr::null_mut(),
                is_managed: 0,
                allocation_flags: 0,
            }),
        },
    }
}

/// `hipError_t hipPointerGetAttributes(hipPointerAttribute_t* attributes, const void* ptr)` —
/// describes the allocation containing `ptr` (see [`pointer_attributes`]), numbered as the
/// emulated ROCm version numbers memory types.
///
/// # Errors
///
/// `hipErrorInvalidValue` for a null argument, or under ROCm 5 a pointer the runtime does not
/// know.
///
/// # Safety
///
/// `attributes` is null or writable for 32 bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipPointerGetAttributes(
    attributes: *mut HipPointerAttribute,
    ptr: *const c_void,
) -> i32 {
    if attributes.is_null() {
        return INVALID_VALUE;
    }
    let abi = MemoryAbi::of(config::current().version);
    match pointer_attributes(ptr, abi, current_device()) {
        Ok(a) => {
            // SAFETY: non-null and writable by the caller's promise.
            unsafe { attributes.write(a) };
            SUCCESS
        }
        Err(e) => e,
    }
}

/// `hipError_t hipMemGetAddressRange(void** base, size_t* size, void* ptr)` — the base and
/// length of the allocation or registration containing `ptr`.
///
/// # Errors
///
/// `hipErrorInvalidValue` for a null argument; `hipErrorNotFound` for memory the runtime does
/// not know (as HIP).
///
/// # Safety
///
/// `base` and `size` are null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipMemGetAddressRange(
    base: *mut *mut c_void,
    size: *mut usize,
    ptr: *mut c_void,
) -> i32 {
    if base.is_null() || size.is_null() || ptr.is_null() {
        return INVALID_VALUE;
    }
    let Some(a) = lookup(ptr as usize) else {
        return NOT_FOUND;
    };
    // Derived from the caller's pointer, so that it keeps the caller's provenance.
    let start = ptr
        .cast::<u8>()
        .wrapping_sub(ptr as usize - a.base)
        .cast::<c_void>();
    // SAFETY: both non-null and writable by the caller's promise.
    unsafe {
        base.write(start);
        size.write(a.len);
    }
    SUCCESS
}

/// The devices whose memory a checked copy writes and reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The device of the destination, `None` when it is not device memory.
    pub dst: Option<c_int>,
    /// The device of the source, `None` when it is not device memory.
    pub src: Option<c_int>,
}

impl Route {
    /// Whether every device-memory operand is memory of `device`.
    pub fn stays_on(self, device: c_int) -> bool {
        [self.dst, self.src]
            .into_iter()
            .flatten()
            .all(|d| d == device)
    }
}

/// Checks a copy of `len > 0` bytes against the table (see the module documentation), and
/// says which devices' memory it touches: any operand in a device allocation, whatever the
/// kind declares it.
///
/// # Errors
///
/// `hipErrorInvalidMemcpyDirection` for a kind outside 0..=4; `hipErrorInvalidValue` for a
/// null pointer or a range the kind or the table forbids.
pub fn check_copy(dst: usize, src: usize, len: usize, kind: c_int) -> Result<Route, i32> {
    let (dst_device, src_device) = match kind {
        0 | 4 => (false, false),
        1 => (true, false),
        2 => (false, true),
        3 => (true, true),
        _ => return Err(INVALID_MEMCPY_DIRECTION),
    };
    if dst == 0 || src == 0 {
        return Err(INVALID_VALUE);
    }
    let table = table();
    for (addr, device) in [(dst, dst_device), (src, src_device)] {
        let ok = if device {
            device_range_in(&table, addr, len).is_some()
                || containing(&table, addr)
                    .is_some_and(|a| matches!(a.kind, Kind::Managed { .. }) && a.holds(addr, len))
        } else {
            host_range_ok(&table, addr, len)
        };
        if !ok {
            return Err(INVALID_VALUE);
        }
    }
    let device_of = |addr| match containing(&table, addr) {
        Some(Allocation {
            kind: Kind::Device { device },
            ..
        }) => Some(device),
        _ => None,
    };
    Ok(Route {
        dst: device_of(dst),
        src: device_of(src),
    })
}

/// Whether `addr..addr+len` lies inside one entry of the table, of any kind: where the
/// stream memory operations may read and write a word.
pub(crate) fn known_range(addr: usize, len: usize) -> bool {
    containing(&table(), addr).is_some_and(|a| a.holds(addr, len))
}

/// `hipError_t hipHostGetDevicePointer(void** devPtr, void* hostPtr, unsigned int flags)` —
/// the device address of pinned or registered host memory: the same address here, where
/// device and host share one address space.
///
/// # Errors
///
/// `hipErrorInvalidValue` for a null pointer, flags other than 0, or an address outside every
/// `hipHostMalloc` allocation and `hipHostRegister` range.
///
/// # Safety
///
/// `dev_ptr` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn hipHostGetDevicePointer(
    dev_ptr: *mut *mut c_void,
    host_ptr: *mut c_void,
    flags: c_uint,
) -> i32 {
    if dev_ptr.is_null() || host_ptr.is_null() || flags != 0 {
        return INVALID_VALUE;
    }
    match lookup(host_ptr as usize) {
        Some(Allocation {
            kind: Kind::Pinned | Kind::Registered,
            ..
        }) => {
            // SAFETY: non-null and writable by the caller's promise.
            unsafe { dev_ptr.write(host_ptr) };
            SUCCESS
        }
        _ => INVALID_VALUE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::set_device;
    use crate::error::INVALID_VALUE;
    use std::mem::{offset_of, size_of};
    use std::ptr::null_mut;

    const ROCM5: MemoryAbi = MemoryAbi::Rocm5 { managed: true };

    fn device_alloc(len: usize) -> *mut u8 {
        let mut p = null_mut();
        // SAFETY: `p` is writable.
        assert_eq!(unsafe { hipMalloc(&mut p, len) }, SUCCESS);
        p.cast()
    }

    fn pinned_alloc(len: usize) -> *mut u8 {
        let mut p = null_mut();
        // SAFETY: `p` is writable.
        assert_eq!(unsafe { hipHostMalloc(&mut p, len, 0) }, SUCCESS);
        p.cast()
    }

    fn free(p: *mut u8) {
        // SAFETY: the tests free only their own allocations, once.
        assert_eq!(unsafe { hipFree(p.cast()) }, SUCCESS);
    }

    #[test]
    fn attribute_layout_matches_the_abi() {
        assert_eq!(size_of::<HipPointerAttribute>(), 32);
        assert_eq!(std::mem::align_of::<HipPointerAttribute>(), 8);
        assert_eq!(offset_of!(HipPointerAttribute, memory_type), 0);
        assert_eq!(offset_of!(HipPointerAttribute, device), 4);
        assert_eq!(offset_of!(HipPointerAttribute, device_pointer), 8);
        assert_eq!(offset_of!(HipPointerAttribute, host_pointer), 16);
        assert_eq!(offset_of!(HipPointerAttribute, is_managed), 24);
        assert_eq!(offset_of!(HipPointerAttribute, allocation_flags), 28);
    }

    #[test]
    fn memory_type_numbering_follows_the_version() {
        use config::RocmVersion as V;
        assert_eq!(
            MemoryAbi::of(V::new(5, 2, 0)),
            MemoryAbi::Rocm5 { managed: false }
        );
        assert_eq!(
            MemoryAbi::of(V::new(5, 7, 0)),
            MemoryAbi::Rocm5 { managed: true }
        );
        assert_eq!(MemoryAbi::of(V::new(6, 0, 0)), MemoryAbi::Rocm6);
        assert_eq!(MemoryAbi::of(V::new(7, 2, 1)), MemoryAbi::Rocm6);
        assert_eq!(MemoryType::Device.code(ROCM5), Some(1));
        assert_eq!(MemoryType::Host.code(ROCM5), Some(0));
        assert_eq!(MemoryType::Managed.code(ROCM5), Some(4));
        assert_eq!(
            MemoryType::Managed.code(MemoryAbi::Rocm5 { managed: false }),
            None
        );
        assert_eq!(MemoryType::Unregistered.code(ROCM5), None);
        assert_eq!(MemoryType::Unregistered.code(MemoryAbi::Rocm6), Some(0));
        assert_eq!(MemoryType::Host.code(MemoryAbi::Rocm6), Some(1));
        assert_eq!(MemoryType::Device.code(MemoryAbi::Rocm6), Some(2));
        assert_eq!(MemoryType::Managed.code(MemoryAbi::Rocm6), Some(3));
        assert_eq!(MemoryType::Array.code(MemoryAbi::Rocm6), Some(10));
        assert_eq!(MemoryType::Unified.code(MemoryAbi::Rocm6), Some(11));
    }

    #[test]
    fn malloc_is_aligned_zeroed_and_recorded() {
        let p = device_alloc(10_000);
        assert_eq!(p as usize % ALLOCATION_ALIGN, 0);
        // SAFETY: the allocation is 10000 bytes.
        let bytes = unsafe { std::slice::from_raw_parts(p, 10_000) };
        assert!(bytes.iter().all(|&b| b == 0));
        let a = lookup(p as usize + 9_999).unwrap();
        assert_eq!(
            (a.base, a.len, a.kind),
            (p as usize, 10_000, Kind::Device { device: 0 })
        );
        assert!(lookup(p as usize + 10_000).is_none_or(|a| a.base != p as usize));
        free(p);
    }

    #[test]
    fn zero_sized_allocations_are_null() {
        let mut p = std::ptr::dangling_mut::<c_void>();
        // SAFETY: `p` is writable.
        assert_eq!(unsafe { hipMalloc(&mut p, 0) }, SUCCESS);
        assert!(p.is_null());
        p = std::ptr::dangling_mut::<c_void>();
        // SAFETY: `p` is writable.
        assert_eq!(unsafe { hipHostMalloc(&mut p, 0, 0) }, SUCCESS);
        assert!(p.is_null());
        // SAFETY: null pointers are no-ops.
        assert_eq!(unsafe { hipFree(null_mut()) }, SUCCESS);
        // SAFETY: as above.
        assert_eq!(unsafe { hipHostFree(null_mut()) }, SUCCESS);
    }

    #[test]
    fn null_out_pointers_are_invalid() {
        // SAFETY: null out-pointers are refused before use.
        unsafe {
            assert_eq!(hipMalloc(null_mut(), 8), INVALID_VALUE);
            assert_eq!(hipHostMalloc(null_mut(), 8, 0), INVALID_VALUE);
            assert_eq!(
                hipPointerGetAttributes(null_mut(), 8usize as *const c_void),
                INVALID_VALUE
            );
            let mut size = 0;
            let p = 4096usize as *mut c_void;
            assert_eq!(
                hipMemGetAddressRange(null_mut(), &mut size, p),
                INVALID_VALUE
            );
            let mut base = null_mut();
            assert_eq!(
                hipMemGetAddressRange(&mut base, null_mut(), p),
                INVALID_VALUE
            );
        }
    }

    #[test]
    fn free_refuses_what_it_did_not_allocate() {
        let p = device_alloc(8192);
        let pinned = pinned_alloc(4096);
        let mut foreign = vec![0u8; 64];
        // SAFETY: each call is refused before anything is freed.
        unsafe {
            assert_eq!(hipFree(p.add(4096).cast()), INVALID_VALUE);
            assert_eq!(hipFree(foreign.as_mut_ptr().cast()), INVALID_VALUE);
            assert_eq!(hipFree(pinned.cast()), INVALID_VALUE);
            assert_eq!(hipHostFree(p.cast()), INVALID_VALUE);
        }
        free(p);
        // SAFETY: the test's own pinned allocation, freed once.
        assert_eq!(unsafe { hipHostFree(pinned.cast()) }, SUCCESS);
    }

    #[test]
    fn host_malloc_flags_are_checked() {
        let mut p = null_mut();
        // SAFETY: `p` is writable.
        unsafe {
            assert_eq!(hipHostMalloc(&mut p, 64, 0x10), INVALID_VALUE);
            assert_eq!(hipHostMalloc(&mut p, 64, COHERENCE_FLAGS), INVALID_VALUE);
            assert_eq!(hipHostMalloc(&mut p, 64, 0x2 | 0x4000_0000), SUCCESS);
        }
        assert_eq!(lookup(p as usize).unwrap().flags, 0x2 | 0x4000_0000);
        // SAFETY: the test's own allocation.
        assert_eq!(unsafe { hipHostFree(p) }, SUCCESS);
    }

    #[test]
    fn registration_records_refuses_overlap_and_unregisters() {
        let mut buf = vec![0u8; 3 * 4096];
        let p = buf.as_mut_ptr();
        // SAFETY: registration only records ranges of `buf`, which outlives them.
        unsafe {
            assert_eq!(hipHostRegister(p.cast(), 4096, 0), SUCCESS);
            assert_eq!(
                hipHostRegister(p.add(100).cast(), 10, 0),
                HOST_MEMORY_ALREADY_REGISTERED
            );
            assert_eq!(hipHostRegister(p.add(8192).cast(), 4096, 0x2), SUCCESS);
            // Spans the gap and touches the second registration.
            assert_eq!(
                hipHostRegister(p.add(4096).cast(), 4097, 0),
                HOST_MEMORY_ALREADY_REGISTERED
            );
            assert_eq!(hipHostRegister(p.add(4096).cast(), 4096, 0), SUCCESS);
            assert_eq!(hipHostRegister(null_mut(), 4096, 0), INVALID_VALUE);
            assert_eq!(hipHostRegister(p.cast(), 0, 0), INVALID_VALUE);
            assert_eq!(
                hipHostRegister(usize::MAX as *mut c_void, 2, 0),
                INVALID_VALUE
            );
            assert_eq!(hipHostRegister(p.cast(), 1, 0x10), INVALID_VALUE);
            assert_eq!(
                hipHostUnregister(p.add(1).cast()),
                HOST_MEMORY_NOT_REGISTERED
            );
            for off in [0, 4096, 8192] {
                assert_eq!(hipHostUnregister(p.add(off).cast()), SUCCESS);
            }
            assert_eq!(hipHostUnregister(p.cast()), HOST_MEMORY_NOT_REGISTERED);
        }
        let d = device_alloc(4096);
        // SAFETY: refused: device memory of this runtime is not the caller's to register.
        let r = unsafe { hipHostRegister(d.cast(), 16, 0) };
        assert_eq!(r, HOST_MEMORY_ALREADY_REGISTERED);
        // SAFETY: not a registration.
        let r = unsafe { hipHostUnregister(d.cast()) };
        assert_eq!(r, HOST_MEMORY_NOT_REGISTERED);
        free(d);
    }

    #[test]
    fn device_pointer_attributes() {
        let p = device_alloc(8192);
        let interior = p.wrapping_add(5000).cast::<c_void>();
        for (abi, code) in [(ROCM5, 1), (MemoryAbi::Rocm6, 2)] {
            let a = pointer_attributes(interior, abi, 7).unwrap();
            assert_eq!(a.memory_type, code);
            assert_eq!(a.device, 0, "the allocating device, not the current one");
            assert_eq!(a.device_pointer, interior);
            assert!(a.host_pointer.is_null());
            assert_eq!(a.is_managed, 0);
        }
        free(p);
    }

    #[test]
    fn host_pointer_attributes() {
        let pinned = pinned_alloc(4096);
        let mut buf = vec![0u8; 4096];
        let reg = buf.as_mut_ptr();
        // SAFETY: only recorded; unregistered below while `buf` lives.
        assert_eq!(unsafe { hipHostRegister(reg.cast(), 4096, 0x2) }, SUCCESS);
        for (p, flags) in [(pinned, 0), (reg.wrapping_add(4095), 0x2)] {
            for (abi, code) in [(ROCM5, 0), (MemoryAbi::Rocm6, 1)] {
                let a = pointer_attributes(p.cast(), abi, 3).unwrap();
                assert_eq!(a.memory_type, code);
                assert_eq!(a.device, 3, "host memory reports the current device");
                assert_eq!(a.host_pointer, p.cast());
                assert_eq!(a.device_pointer, p.cast());
                assert_eq!(a.allocation_flags, flags);
            }
        }
        // SAFETY: the test's own allocation and registration.
        unsafe {
            assert_eq!(hipHostUnregister(reg.cast()), SUCCESS);
            assert_eq!(hipHostFree(pinned.cast()), SUCCESS);
        }
    }

    #[test]
    fn unknown_pointer_attributes_depend_on_the_abi() {
        let local = [0u8; 16];
        let p = local.as_ptr().cast::<c_void>();
        assert_eq!(pointer_attributes(p, ROCM5, 0), Err(INVALID_VALUE));
        assert_eq!(
            pointer_attributes(p, MemoryAbi::Rocm5 { managed: false }, 0),
            Err(INVALID_VALUE)
        );
        let a = pointer_attributes(p, MemoryAbi::Rocm6, 0).unwrap();
        assert_eq!((a.memory_type, a.device), (0, UNREGISTERED_DEVICE));
        assert!(a.device_pointer.is_null() && a.host_pointer.is_null());
        assert_eq!(
            pointer_attributes(std::ptr::null(), MemoryAbi::Rocm6, 0),
            Err(INVALID_VALUE)
        );
    }

    #[test]
    fn exported_pointer_attributes_use_the_configured_abi() {
        let p = device_alloc(64);
        let mut a = HipPointerAttribute {
            memory_type: -1,
            device: -1,
            device_pointer: null_mut(),
            host_pointer: null_mut(),
            is_managed: -1,
            allocation_flags: 0,
        };
        // SAFETY: `a` is writable.
        let r = unsafe { hipPointerGetAttributes(&mut a, p.cast()) };
        assert_eq!(r, SUCCESS);
        let abi = MemoryAbi::of(config::current().version);
        assert_eq!(Some(a.memory_type), MemoryType::Device.code(abi));
        free(p);
    }

    #[test]
    fn address_ranges() {
        let p = device_alloc(12_288);
        let (mut base, mut size) = (null_mut(), 0usize);
        // SAFETY: out-pointers are writable.
        unsafe {
            assert_eq!(
                hipMemGetAddressRange(&mut base, &mut size, p.add(12_287).cast()),
                SUCCESS
            );
            assert_eq!((base.cast::<u8>(), size), (p, 12_288));
            let mut buf = vec![0u8; 100];
            let r = buf.as_mut_ptr();
            assert_eq!(
                hipMemGetAddressRange(&mut base, &mut size, r.add(50).cast()),
                NOT_FOUND
            );
            assert_eq!(hipHostRegister(r.add(10).cast(), 80, 0), SUCCESS);
            assert_eq!(
                hipMemGetAddressRange(&mut base, &mut size, r.add(50).cast()),
                SUCCESS
            );
            assert_eq!((base.cast::<u8>(), size), (r.add(10), 80));
            assert_eq!(hipHostUnregister(r.add(10).cast()), SUCCESS);
        }
        free(p);
    }

    #[test]
    fn allocations_remember_their_device() {
        // A thread of its own, so that no other test sees its current device.
        std::thread::spawn(|| {
            let mut ptrs = Vec::new();
            for device in [2, 0, 3] {
                assert_eq!(set_device(device, 4), Ok(()));
                ptrs.push((device, device_alloc(64)));
            }
            for (device, p) in ptrs {
                let a = pointer_attributes(p.cast(), MemoryAbi::Rocm6, 1).unwrap();
                assert_eq!(a.device, device);
                free(p);
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn free_waits_for_running_transfers() {
        let d = device_alloc(4096);
        let gate = transfer_gate();
        let addr = d as usize;
        let freer = std::thread::spawn(move || {
            // SAFETY: the test's own allocation, freed once.
            unsafe { hipFree(addr as *mut c_void) }
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            lookup(addr).is_some_and(|a| a.base == addr),
            "freed under a transfer"
        );
        drop(gate);
        assert_eq!(freer.join().unwrap(), SUCCESS);
    }

    /// Makes `device` current on this thread, with room for every device that has counters.
    fn use_device(device: c_int) {
        assert_eq!(set_device(device, MAX_DEVICES), Ok(()));
    }

    #[test]
    fn copy_counters_exist_for_the_configured_devices_only() {
        assert_eq!(device_copy_bytes(-1, 4), Err(INVALID_DEVICE));
        assert_eq!(device_copy_bytes(4, 4), Err(INVALID_DEVICE));
        assert_eq!(
            device_copy_bytes(MAX_DEVICES, MAX_DEVICES + 1),
            Err(INVALID_DEVICE),
            "no counters beyond the most devices emulated"
        );
        assert!(device_copy_bytes(3, 4).is_ok());
        // Devices without counters are not counted, and nothing panics.
        count_copied(Some(-1), Some(MAX_DEVICES), 1);
    }

    #[test]
    fn routes_name_the_devices_of_device_memory() {
        std::thread::spawn(|| {
            use_device(5);
            let d = device_alloc(4096);
            let host = [0u8; 64];
            let h = host.as_ptr() as usize;
            let route = check_copy(d as usize, h, 64, 1).unwrap();
            assert_eq!(
                route,
                Route {
                    dst: Some(5),
                    src: None
                }
            );
            assert!(route.stays_on(5) && !route.stays_on(4));
            // A side declared host memory that lies in device memory is still routed.
            let route = check_copy(h, d as usize + 64, 64, 0).unwrap();
            assert_eq!(
                route,
                Route {
                    dst: None,
                    src: Some(5)
                }
            );
            assert!(
                Route {
                    dst: None,
                    src: None
                }
                .stays_on(7)
            );
            free(d);
        })
        .join()
        .unwrap();
    }
}
