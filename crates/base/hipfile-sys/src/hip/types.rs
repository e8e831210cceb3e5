//! C types of the HIP runtime ABI: memory types (and [`MemoryType`], the decoded kind both
//! runtimes report), pointer attributes, the AMD file handle, stream and event handles, and the
//! flag and kind constants (which CUDA shares).
//!
//! # Safety
//!
//! The structs are `#[repr(C)]` with the layout of the C headers (x86-64 Linux, LP64), which the
//! layout tests below pin down. The only `unsafe` here are `Send`/`Sync` impls for types that
//! hold raw pointers as plain values (addresses and opaque handles), and reading a union field
//! for `Debug`; each says why it is sound.

#![allow(non_camel_case_types, non_snake_case)]

use super::version::RuntimeVersion;
use std::ffi::{c_int, c_uint, c_void};
use std::fmt;
use std::ptr;

/// The raw `hipMemoryType` enum value. Its meaning depends on the runtime's version: decode it
/// with [`decode_memory_type`].
pub type hipMemoryType = c_int;

/// A decoded memory type, the same for every ABI version.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryType {
    /// Memory the runtime knows nothing about (plain host memory on ROCm ≥ 6 and CUDA).
    Unregistered,
    /// Pinned or registered host memory.
    Host,
    /// Device memory (VRAM).
    Device,
    /// A HIP array.
    Array,
    /// Unified memory.
    Unified,
    /// Managed memory.
    Managed,
    /// A value the runtime's table does not define; the raw value is kept.
    Unknown(i32),
}

impl MemoryType {
    /// Whether this is device memory.
    pub fn is_device(self) -> bool {
        self == MemoryType::Device
    }
}

/// Decodes a raw `hipMemoryType` for a runtime whose `hipRuntimeGetVersion` was
/// `runtime_version` (`major·10⁷ + minor·10⁵ + patch`).
///
/// ROCm 6.0 renumbered the enum:
///
/// | value | ROCm < 6.0 | ROCm ≥ 6.0 |
/// |---|---|---|
/// | 0 | Host | Unregistered |
/// | 1 | Device | Host |
/// | 2 | Array | Device |
/// | 3 | Unified | Managed |
/// | 4 | Managed (from 5.3) | – |
/// | 10 / 11 | – | Array / Unified |
///
/// Any version below 6.0 (including nonsense such as 0 or negative values) uses the ROCm 5
/// table; ROCm < 5.3 has no `Managed`. Values outside the table give
/// [`MemoryType::Unknown`].
pub fn decode_memory_type(raw: hipMemoryType, runtime_version: i32) -> MemoryType {
    if runtime_version >= RuntimeVersion::ROCM_6_0.0 {
        match raw {
            0 => MemoryType::Unregistered,
            1 => MemoryType::Host,
            2 => MemoryType::Device,
            3 => MemoryType::Managed,
            10 => MemoryType::Array,
            11 => MemoryType::Unified,
            other => MemoryType::Unknown(other),
        }
    } else {
        match raw {
            0 => MemoryType::Host,
            1 => MemoryType::Device,
            2 => MemoryType::Array,
            3 => MemoryType::Unified,
            4 if runtime_version >= RuntimeVersion::ROCM_5_3.0 => MemoryType::Managed,
            other => MemoryType::Unknown(other),
        }
    }
}

/// Encodes a [`MemoryType`] as the raw `hipMemoryType` of a runtime of `runtime_version`: the
/// inverse of [`decode_memory_type`]. `None` when that runtime has no such value (for example
/// `Unregistered` before ROCm 6.0); `Unknown(raw)` gives `raw` back.
pub fn encode_memory_type(ty: MemoryType, runtime_version: i32) -> Option<hipMemoryType> {
    if runtime_version >= RuntimeVersion::ROCM_6_0.0 {
        match ty {
            MemoryType::Unregistered => Some(0),
            MemoryType::Host => Some(1),
            MemoryType::Device => Some(2),
            MemoryType::Managed => Some(3),
            MemoryType::Array => Some(10),
            MemoryType::Unified => Some(11),
            MemoryType::Unknown(raw) => Some(raw),
        }
    } else {
        match ty {
            MemoryType::Unregistered => None,
            MemoryType::Host => Some(0),
            MemoryType::Device => Some(1),
            MemoryType::Array => Some(2),
            MemoryType::Unified => Some(3),
            MemoryType::Managed if runtime_version >= RuntimeVersion::ROCM_5_3.0 => Some(4),
            MemoryType::Managed => None,
            MemoryType::Unknown(raw) => Some(raw),
        }
    }
}

/// `hipPointerAttribute_t`, filled by `hipPointerGetAttributes`. 32 bytes, align 8, the same
/// offsets in ROCm 5, 6 and 7.
///
/// The pointers are addresses reported by the runtime; this crate never dereferences them.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct hipPointerAttribute_t {
    /// `type` (ROCm 6 also names it `memoryType`): the raw [`hipMemoryType`]; decode it with
    /// [`memory_type`](Self::memory_type).
    pub type_: hipMemoryType,
    /// `device`: the device the memory belongs to (ROCm ≥ 6 reports -2 for unregistered
    /// memory).
    pub device: c_int,
    /// `devicePointer`: the device address of the memory.
    pub devicePointer: *mut c_void,
    /// `hostPointer`: the host address of the memory, if it has one.
    pub hostPointer: *mut c_void,
    /// `isManaged`: non-zero for managed memory.
    pub isManaged: c_int,
    /// `allocationFlags`: the flags the memory was allocated or registered with.
    pub allocationFlags: c_uint,
}

impl hipPointerAttribute_t {
    /// Decodes [`type_`](Self::type_) for a runtime of `runtime_version`.
    pub fn memory_type(&self, runtime_version: i32) -> MemoryType {
        decode_memory_type(self.type_, runtime_version)
    }
}

impl Default for hipPointerAttribute_t {
    /// All zero, as the runtime expects the struct before it fills it in.
    fn default() -> Self {
        hipPointerAttribute_t {
            type_: 0,
            device: 0,
            devicePointer: ptr::null_mut(),
            hostPointer: ptr::null_mut(),
            isManaged: 0,
            allocationFlags: 0,
        }
    }
}

// SAFETY: the struct is plain data: its pointers are addresses reported by the runtime, never
// dereferenced through this type, so moving or sharing a copy between threads cannot race.
unsafe impl Send for hipPointerAttribute_t {}
// SAFETY: as for `Send`: nothing is reachable through a shared reference but the values.
unsafe impl Sync for hipPointerAttribute_t {}

/// `hipAmdFileHandle_t`: `union { void* handle; int fd; uint8_t pad[8]; }`, 8 bytes, passed by
/// value to `hipAmdFileRead`/`hipAmdFileWrite`. On Linux the runtime reads `fd`.
///
/// Build it with [`from_fd`](Self::from_fd), which zeroes the bytes `fd` does not cover.
#[repr(C)]
#[derive(Clone, Copy)]
pub union hipAmdFileHandle_t {
    /// `handle`: an OS handle (Windows).
    pub handle: *mut c_void,
    /// `fd`: a file descriptor (Linux), opened with `O_DIRECT` for the fastpath.
    pub fd: c_int,
    /// `pad`: fixes the size at 8 bytes.
    pub pad: [u8; 8],
}

impl hipAmdFileHandle_t {
    /// A handle for file descriptor `fd`, with the upper four bytes zero.
    pub fn from_fd(fd: c_int) -> hipAmdFileHandle_t {
        let mut pad = [0u8; 8];
        pad[..4].copy_from_slice(&fd.to_ne_bytes());
        hipAmdFileHandle_t { pad }
    }

    /// The eight bytes of the handle.
    pub fn bytes(self) -> [u8; 8] {
        // SAFETY: every field is plain data without invalid bit patterns and the union is
        // 8 bytes, so any value of it can be read as `[u8; 8]`.
        unsafe { self.pad }
    }
}

impl fmt::Debug for hipAmdFileHandle_t {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("hipAmdFileHandle_t")
            .field("bytes", &self.bytes())
            .finish()
    }
}

// SAFETY: the handle is a file descriptor or an OS handle held as a value; it carries no
// thread affinity and nothing is dereferenced through it.
unsafe impl Send for hipAmdFileHandle_t {}
// SAFETY: as for `Send`.
unsafe impl Sync for hipAmdFileHandle_t {}

/// `hipStream_t`: an opaque stream handle (null is the default stream).
///
/// A transparent newtype over the C pointer so that streams and events cannot be mixed up.
/// It owns nothing: create and destroy it with [`Hip::stream_create`](crate::Hip::stream_create)
/// and [`Hip::stream_destroy`](crate::Hip::stream_destroy).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct hipStream_t(pub *mut c_void);

impl hipStream_t {
    /// The default (null) stream.
    pub const NULL: hipStream_t = hipStream_t(ptr::null_mut());

    /// Whether this is the default (null) stream.
    pub fn is_null(self) -> bool {
        self.0.is_null()
    }
}

// SAFETY: a stream handle is an identifier that the HIP runtime accepts from any thread (the
// runtime locks its own stream state); this crate never dereferences it, and every use of it
// goes through an `unsafe fn` whose caller vouches for the handle's validity.
unsafe impl Send for hipStream_t {}
// SAFETY: as for `Send`: sharing the identifier is sharing a number.
unsafe impl Sync for hipStream_t {}

/// `hipEvent_t`: an opaque event handle.
///
/// A transparent newtype over the C pointer. It owns nothing: create and destroy it with
/// [`Hip::event_create`](crate::Hip::event_create) and
/// [`Hip::event_destroy`](crate::Hip::event_destroy).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct hipEvent_t(pub *mut c_void);

impl hipEvent_t {
    /// The null event (not a valid event; a placeholder before creation).
    pub const NULL: hipEvent_t = hipEvent_t(ptr::null_mut());

    /// Whether the handle is null.
    pub fn is_null(self) -> bool {
        self.0.is_null()
    }
}

// SAFETY: as for `hipStream_t`: an identifier the runtime accepts from any thread, never
// dereferenced here.
unsafe impl Send for hipEvent_t {}
// SAFETY: as for `Send`.
unsafe impl Sync for hipEvent_t {}

/// `hipHostFn_t`: `void (*)(void* userData)`, the callback of `hipLaunchHostFunc`. It runs on
/// a runtime thread and must not call HIP stream functions.
pub type hipHostFn_t = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// `hipMemcpyKind`: the direction of a copy. See [`memcpy_kind`].
pub type hipMemcpyKind = c_int;

/// `hipMemcpyKind` values (CUDA's `cudaMemcpyKind` uses the same numbers).
pub mod memcpy_kind {
    use super::hipMemcpyKind;

    /// `hipMemcpyHostToHost`.
    pub const HOST_TO_HOST: hipMemcpyKind = 0;
    /// `hipMemcpyHostToDevice`.
    pub const HOST_TO_DEVICE: hipMemcpyKind = 1;
    /// `hipMemcpyDeviceToHost`.
    pub const DEVICE_TO_HOST: hipMemcpyKind = 2;
    /// `hipMemcpyDeviceToDevice`.
    pub const DEVICE_TO_DEVICE: hipMemcpyKind = 3;
    /// `hipMemcpyDefault`: the runtime infers the direction from the addresses.
    pub const DEFAULT: hipMemcpyKind = 4;
}

/// `hipHostMalloc` flags (CUDA's `cudaHostAlloc` flags have the same values).
pub mod host_malloc_flags {
    use std::ffi::c_uint;

    /// `hipHostMallocDefault`.
    pub const DEFAULT: c_uint = 0;
    /// `hipHostMallocPortable`: pinned for every device, not only the current one.
    pub const PORTABLE: c_uint = 1;
    /// `hipHostMallocMapped`: mapped into the device address space.
    pub const MAPPED: c_uint = 2;
    /// `hipHostMallocWriteCombined`: write-combined (fast for the device to read, slow for the
    /// host to read).
    pub const WRITE_COMBINED: c_uint = 4;
}

/// `hipHostRegister` flags (CUDA's `cudaHostRegister` flags have the same values).
pub mod host_register_flags {
    use std::ffi::c_uint;

    /// `hipHostRegisterDefault`.
    pub const DEFAULT: c_uint = 0;
    /// `hipHostRegisterPortable`: pinned for every device.
    pub const PORTABLE: c_uint = 1;
    /// `hipHostRegisterMapped`: mapped into the device address space.
    pub const MAPPED: c_uint = 2;
    /// `hipHostRegisterIoMemory`: the range is I/O (device) memory.
    pub const IO_MEMORY: c_uint = 4;
    /// `hipHostRegisterReadOnly`: the device only reads the range.
    pub const READ_ONLY: c_uint = 8;
}

/// `hipStreamCreateWithFlags` flags.
pub mod stream_flags {
    use std::ffi::c_uint;

    /// `hipStreamDefault`: synchronises with the null stream.
    pub const DEFAULT: c_uint = 0;
    /// `hipStreamNonBlocking`: does not synchronise with the null stream.
    pub const NON_BLOCKING: c_uint = 1;
}

/// Conditions of `hipStreamWaitValue32`/`hipStreamWaitValue64` (the `flags` argument).
pub mod stream_wait_value {
    use std::ffi::c_uint;

    /// `hipStreamWaitValueGte`: until `(*ptr & mask) >= value`.
    pub const GTE: c_uint = 0x0;
    /// `hipStreamWaitValueEq`: until `(*ptr & mask) == value`.
    pub const EQ: c_uint = 0x1;
    /// `hipStreamWaitValueAnd`: until `(*ptr & mask & value) != 0`.
    pub const AND: c_uint = 0x2;
    /// `hipStreamWaitValueNor`: until `~((*ptr & mask) | (value & mask)) != 0`.
    pub const NOR: c_uint = 0x3;
    /// The mask that compares every bit of a 32-bit word.
    pub const MASK_32: u32 = 0xffff_ffff;
    /// The mask that compares every bit of a 64-bit word.
    pub const MASK_64: u64 = 0xffff_ffff_ffff_ffff;
}

/// `hipGetProcAddress` symbol status values (`hipDriverProcAddressQueryResult`).
pub mod proc_address_status {
    use std::ffi::c_int;

    /// `HIP_GET_PROC_ADDRESS_SUCCESS`: the symbol was found.
    pub const SUCCESS: c_int = 0;
    /// `HIP_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`.
    pub const SYMBOL_NOT_FOUND: c_int = 1;
    /// `HIP_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT`.
    pub const VERSION_NOT_SUFFICIENT: c_int = 2;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::mem::{align_of, offset_of, size_of};

    const ROCM_5_2: i32 = 50_221_153;
    const ROCM_5_7: i32 = 50_731_921;
    const ROCM_6_0: i32 = 60_032_830;
    const ROCM_7_2: i32 = 70_200_000;

    #[test]
    fn pointer_attribute_layout() {
        assert_eq!(size_of::<hipPointerAttribute_t>(), 32);
        assert_eq!(align_of::<hipPointerAttribute_t>(), 8);
        assert_eq!(offset_of!(hipPointerAttribute_t, type_), 0);
        assert_eq!(offset_of!(hipPointerAttribute_t, device), 4);
        assert_eq!(offset_of!(hipPointerAttribute_t, devicePointer), 8);
        assert_eq!(offset_of!(hipPointerAttribute_t, hostPointer), 16);
        assert_eq!(offset_of!(hipPointerAttribute_t, isManaged), 24);
        assert_eq!(offset_of!(hipPointerAttribute_t, allocationFlags), 28);
    }

    #[test]
    fn amd_file_handle_layout() {
        assert_eq!(size_of::<hipAmdFileHandle_t>(), 8);
        assert_eq!(align_of::<hipAmdFileHandle_t>(), 8);
        assert_eq!(offset_of!(hipAmdFileHandle_t, handle), 0);
        assert_eq!(offset_of!(hipAmdFileHandle_t, fd), 0);
        assert_eq!(offset_of!(hipAmdFileHandle_t, pad), 0);
    }

    #[test]
    fn handle_newtypes_are_pointers() {
        assert_eq!(size_of::<hipStream_t>(), size_of::<*mut c_void>());
        assert_eq!(size_of::<hipEvent_t>(), size_of::<*mut c_void>());
        assert_eq!(size_of::<hipHostFn_t>(), size_of::<*mut c_void>());
        assert!(hipStream_t::NULL.is_null());
        assert!(hipEvent_t::NULL.is_null());
    }

    #[test]
    fn amd_file_handle_from_fd() {
        let h = hipAmdFileHandle_t::from_fd(7);
        // SAFETY: `from_fd` initialises all 8 bytes; `fd` reads the first four.
        assert_eq!(unsafe { h.fd }, 7);
        assert_eq!(h.bytes(), [7, 0, 0, 0, 0, 0, 0, 0]);
        let neg = hipAmdFileHandle_t::from_fd(-1);
        assert_eq!(neg.bytes(), [0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        assert!(format!("{h:?}").contains("hipAmdFileHandle_t"));
    }

    #[test]
    fn defaults_are_zero() {
        let a = hipPointerAttribute_t::default();
        assert_eq!(
            (a.type_, a.device, a.isManaged, a.allocationFlags),
            (0, 0, 0, 0)
        );
        assert!(a.devicePointer.is_null() && a.hostPointer.is_null());
    }

    #[test]
    fn rocm5_table() {
        for v in [ROCM_5_7, RuntimeVersion::ROCM_5_3.0, 59_999_999] {
            assert_eq!(decode_memory_type(0, v), MemoryType::Host);
            assert_eq!(decode_memory_type(1, v), MemoryType::Device);
            assert_eq!(decode_memory_type(2, v), MemoryType::Array);
            assert_eq!(decode_memory_type(3, v), MemoryType::Unified);
            assert_eq!(decode_memory_type(4, v), MemoryType::Managed);
            assert_eq!(decode_memory_type(10, v), MemoryType::Unknown(10));
            assert_eq!(decode_memory_type(11, v), MemoryType::Unknown(11));
            assert_eq!(decode_memory_type(-1, v), MemoryType::Unknown(-1));
        }
    }

    #[test]
    fn rocm_before_5_3_has_no_managed() {
        assert_eq!(decode_memory_type(0, ROCM_5_2), MemoryType::Host);
        assert_eq!(decode_memory_type(1, ROCM_5_2), MemoryType::Device);
        assert_eq!(decode_memory_type(3, ROCM_5_2), MemoryType::Unified);
        assert_eq!(decode_memory_type(4, ROCM_5_2), MemoryType::Unknown(4));
        assert_eq!(decode_memory_type(4, 50_299_999), MemoryType::Unknown(4));
        // An unknown (zero or negative) version falls in the oldest table.
        assert_eq!(decode_memory_type(1, 0), MemoryType::Device);
        assert_eq!(decode_memory_type(4, -5), MemoryType::Unknown(4));
    }

    #[test]
    fn rocm6_table() {
        for v in [RuntimeVersion::ROCM_6_0.0, ROCM_6_0, ROCM_7_2, i32::MAX] {
            assert_eq!(decode_memory_type(0, v), MemoryType::Unregistered);
            assert_eq!(decode_memory_type(1, v), MemoryType::Host);
            assert_eq!(decode_memory_type(2, v), MemoryType::Device);
            assert_eq!(decode_memory_type(3, v), MemoryType::Managed);
            assert_eq!(decode_memory_type(4, v), MemoryType::Unknown(4));
            assert_eq!(decode_memory_type(10, v), MemoryType::Array);
            assert_eq!(decode_memory_type(11, v), MemoryType::Unified);
            assert_eq!(decode_memory_type(12, v), MemoryType::Unknown(12));
        }
    }

    #[test]
    fn attribute_decodes_its_type() {
        let a = hipPointerAttribute_t {
            type_: 1,
            ..Default::default()
        };
        assert!(a.memory_type(ROCM_5_2).is_device());
        assert_eq!(a.memory_type(ROCM_7_2), MemoryType::Host);
    }

    #[test]
    fn encode_gaps() {
        assert_eq!(encode_memory_type(MemoryType::Unregistered, ROCM_5_7), None);
        assert_eq!(encode_memory_type(MemoryType::Managed, ROCM_5_2), None);
        assert_eq!(encode_memory_type(MemoryType::Managed, ROCM_5_7), Some(4));
        assert_eq!(encode_memory_type(MemoryType::Device, ROCM_5_7), Some(1));
        assert_eq!(encode_memory_type(MemoryType::Device, ROCM_6_0), Some(2));
        assert_eq!(encode_memory_type(MemoryType::Array, ROCM_7_2), Some(10));
    }

    /// The table of docs/ABI.md, as `(raw, rocm 5.3–5.7, rocm ≥ 6)`; CUDA's column is
    /// checked in `cuda::types`.
    fn table_entry(raw: i32) -> (MemoryType, MemoryType) {
        use MemoryType::*;
        match raw {
            0 => (Host, Unregistered),
            1 => (Device, Host),
            2 => (Array, Device),
            3 => (Unified, Managed),
            4 => (Managed, Unknown(4)),
            10 => (Unknown(10), Array),
            11 => (Unknown(11), Unified),
            other => (Unknown(other), Unknown(other)),
        }
    }

    proptest! {
        #[test]
        fn decode_follows_the_table(raw in prop_oneof![-2i32..16, any::<i32>()], version in any::<i32>()) {
            let (rocm5, rocm6) = table_entry(raw);
            let got = decode_memory_type(raw, version);
            if version >= 60_000_000 {
                prop_assert_eq!(got, rocm6);
            } else if version >= 50_300_000 || raw != 4 {
                prop_assert_eq!(got, rocm5);
            } else {
                prop_assert_eq!(got, MemoryType::Unknown(4));
            }
        }

        #[test]
        fn encode_inverts_decode(raw in any::<i32>(), version in any::<i32>()) {
            let ty = decode_memory_type(raw, version);
            let back = encode_memory_type(ty, version);
            prop_assert_eq!(back, Some(raw));
        }
    }
}
