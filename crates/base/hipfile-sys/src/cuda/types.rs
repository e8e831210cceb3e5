//! C types of the CUDA runtime and driver ABI: the device pointer, stream, event and callback
//! handles, the copy kind, and `cudaPointerAttributes` with its memory type, decoded into the
//! [`MemoryType`] HIP uses too. The flag and kind constants are HIP's
//! ([`memcpy_kind`](crate::memcpy_kind), [`host_malloc_flags`](crate::host_malloc_flags),
//! [`host_register_flags`](crate::host_register_flags)): CUDA uses the same numbers.
//!
//! # Safety
//!
//! `cudaPointerAttributes` is `#[repr(C)]` with CUDA 13's layout (x86-64 Linux, LP64), which
//! the layout test below pins down. The only `unsafe` here are `Send`/`Sync` impls for types
//! that hold raw pointers as plain values (addresses and opaque handles); each says why it is
//! sound.

// The handle types spell the C names they stand for.
#![allow(non_camel_case_types, non_snake_case)]

use crate::hip::types::MemoryType;
use std::ffi::{c_int, c_long, c_ulonglong, c_void};
use std::ptr;

/// `CUdeviceptr`: a device address as the driver API takes it (`unsigned long long`).
pub type CUdeviceptr = c_ulonglong;

/// `cudaMemcpyKind`: the direction of a copy. The values are HIP's
/// ([`memcpy_kind`](crate::memcpy_kind): 1 host to device, 2 device to host).
pub type cudaMemcpyKind = c_int;

/// `cudaStream_t`: an opaque stream handle (null is the legacy default stream).
///
/// A transparent newtype over the C pointer, distinct from [`hipStream_t`](crate::hipStream_t)
/// so that handles of the two runtimes cannot be mixed up. It owns nothing: create and destroy
/// it with [`Cuda::stream_create`](crate::Cuda::stream_create) and [`Cuda::stream_destroy`](crate::Cuda::stream_destroy).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct cudaStream_t(pub *mut c_void);

impl cudaStream_t {
    /// The default (null) stream.
    pub const NULL: cudaStream_t = cudaStream_t(ptr::null_mut());

    /// Whether this is the default (null) stream.
    pub fn is_null(self) -> bool {
        self.0.is_null()
    }
}

// SAFETY: a stream handle is an identifier that the CUDA runtime accepts from any thread (the
// runtime locks its own stream state); this crate never dereferences it, and every use of it
// goes through an `unsafe fn` whose caller vouches for the handle's validity.
unsafe impl Send for cudaStream_t {}
// SAFETY: as for `Send`: sharing the identifier is sharing a number.
unsafe impl Sync for cudaStream_t {}

/// `cudaEvent_t`: an opaque event handle.
///
/// A transparent newtype over the C pointer. It owns nothing: create and destroy it with
/// [`Cuda::event_create`](crate::Cuda::event_create) and [`Cuda::event_destroy`](crate::Cuda::event_destroy).
#[repr(transparent)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct cudaEvent_t(pub *mut c_void);

impl cudaEvent_t {
    /// The null event (not a valid event; a placeholder before creation).
    pub const NULL: cudaEvent_t = cudaEvent_t(ptr::null_mut());

    /// Whether the handle is null.
    pub fn is_null(self) -> bool {
        self.0.is_null()
    }
}

// SAFETY: as for `cudaStream_t`: an identifier the runtime accepts from any thread, never
// dereferenced here.
unsafe impl Send for cudaEvent_t {}
// SAFETY: as for `Send`.
unsafe impl Sync for cudaEvent_t {}

/// `cudaHostFn_t`: `void (*)(void* userData)`, the callback of `cudaLaunchHostFunc`. It runs on
/// a runtime thread and must not call CUDA functions.
pub type cudaHostFn_t = Option<unsafe extern "C" fn(user_data: *mut c_void)>;

/// The raw `cudaMemoryType` enum value. Decode it with [`decode_cuda_memory_type`].
pub type cudaMemoryType = c_int;

/// Decodes a raw `cudaMemoryType`: 0 Unregistered, 1 Host, 2 Device, 3 Managed.
pub fn decode_cuda_memory_type(raw: cudaMemoryType) -> MemoryType {
    match raw {
        0 => MemoryType::Unregistered,
        1 => MemoryType::Host,
        2 => MemoryType::Device,
        3 => MemoryType::Managed,
        other => MemoryType::Unknown(other),
    }
}

/// `cudaPointerAttributes`, with CUDA 13's `long reserved[8]` tail (88 bytes). CUDA 11/12
/// write only the first 24 bytes; passing the larger, zeroed struct is correct for all of
/// them.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct cudaPointerAttributes {
    /// `type`: the raw [`cudaMemoryType`]; decode it with [`decode_cuda_memory_type`].
    pub type_: cudaMemoryType,
    /// `device`: the device the memory belongs to.
    pub device: c_int,
    /// `devicePointer`: the device address of the memory.
    pub devicePointer: *mut c_void,
    /// `hostPointer`: the host address of the memory, if it has one.
    pub hostPointer: *mut c_void,
    /// `reserved` (CUDA 13): must be zero on input.
    pub reserved: [c_long; 8],
}

impl Default for cudaPointerAttributes {
    /// All zero, including `reserved`.
    fn default() -> Self {
        cudaPointerAttributes {
            type_: 0,
            device: 0,
            devicePointer: ptr::null_mut(),
            hostPointer: ptr::null_mut(),
            reserved: [0; 8],
        }
    }
}

// SAFETY: plain data, as for `hipPointerAttribute_t`: the pointers are reported addresses only.
unsafe impl Send for cudaPointerAttributes {}
// SAFETY: as for `Send`.
unsafe impl Sync for cudaPointerAttributes {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CUDA column of docs/ABI.md's memory-type table.
    #[test]
    fn cuda_decodes_its_table() {
        use MemoryType::*;
        for (raw, want) in [
            (0, Unregistered),
            (1, Host),
            (2, Device),
            (3, Managed),
            (4, Unknown(4)),
            (10, Unknown(10)),
            (11, Unknown(11)),
            (-1, Unknown(-1)),
            (i32::MAX, Unknown(i32::MAX)),
        ] {
            assert_eq!(decode_cuda_memory_type(raw), want, "{raw}");
        }
    }

    #[test]
    fn cuda_attributes_default_to_zero() {
        let c = cudaPointerAttributes::default();
        assert_eq!(c.reserved, [0; 8]);
        assert!(c.devicePointer.is_null() && c.hostPointer.is_null());
    }
    use crate::cuda::error::{CuError, CudaError};
    use std::mem;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn cuda_pointer_attribute_layout() {
        assert_eq!(size_of::<cudaPointerAttributes>(), 88);
        assert_eq!(align_of::<cudaPointerAttributes>(), 8);
        assert_eq!(offset_of!(cudaPointerAttributes, type_), 0);
        assert_eq!(offset_of!(cudaPointerAttributes, device), 4);
        assert_eq!(offset_of!(cudaPointerAttributes, devicePointer), 8);
        assert_eq!(offset_of!(cudaPointerAttributes, hostPointer), 16);
        assert_eq!(offset_of!(cudaPointerAttributes, reserved), 24);
    }

    #[test]
    fn cuda_table() {
        assert_eq!(decode_cuda_memory_type(0), MemoryType::Unregistered);
        assert_eq!(decode_cuda_memory_type(1), MemoryType::Host);
        assert_eq!(decode_cuda_memory_type(2), MemoryType::Device);
        assert_eq!(decode_cuda_memory_type(3), MemoryType::Managed);
        assert_eq!(decode_cuda_memory_type(4), MemoryType::Unknown(4));
        assert_eq!(decode_cuda_memory_type(10), MemoryType::Unknown(10));
    }

    #[test]
    fn status_codes_are_i32() {
        assert_eq!(mem::size_of::<CudaError>(), 4);
        assert_eq!(mem::align_of::<CudaError>(), 4);
        assert_eq!(mem::size_of::<CuError>(), 4);
        assert_eq!(mem::size_of::<CUdeviceptr>(), 8);
        assert_eq!(
            mem::size_of::<cudaStream_t>(),
            mem::size_of::<*mut c_void>()
        );
        assert_eq!(mem::size_of::<cudaEvent_t>(), mem::size_of::<*mut c_void>());
        assert_eq!(
            mem::size_of::<cudaHostFn_t>(),
            mem::size_of::<*mut c_void>()
        );
        assert!(cudaStream_t::NULL.is_null() && cudaEvent_t::NULL.is_null());
    }
}

/// Flags of the driver's stream memory operations (`cuStreamWaitValue32_v2` and kin).
pub mod cu_stream_value {
    use std::ffi::c_uint;

    /// `CU_STREAM_WAIT_VALUE_GEQ`: until `(int32_t)(*addr - value) >= 0` (a cyclic
    /// comparison, unlike HIP's `hipStreamWaitValueGte`).
    pub const WAIT_GEQ: c_uint = 0x0;
    /// `CU_STREAM_WAIT_VALUE_EQ`: until `*addr == value`.
    pub const WAIT_EQ: c_uint = 0x1;
    /// `CU_STREAM_WAIT_VALUE_AND`: until `(*addr & value) != 0`.
    pub const WAIT_AND: c_uint = 0x2;
    /// `CU_STREAM_WAIT_VALUE_NOR`: until `~(*addr | value) != 0`.
    pub const WAIT_NOR: c_uint = 0x3;
    /// `CU_STREAM_WRITE_VALUE_DEFAULT`: the write is ordered after the stream's earlier
    /// memory writes.
    pub const WRITE_DEFAULT: c_uint = 0x0;
}
