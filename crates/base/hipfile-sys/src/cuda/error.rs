//! CUDA status codes as `i32` newtypes: [`CudaError`] (`cudaError_t`, the runtime's) and
//! [`CuError`] (`CUresult`, the driver's), kept apart by type.
//!
//! `cudaError_t` uses HIP's numbers for the codes hipfile acts on (0–3, 17, 21, 35, 100, 101,
//! 712, 713, 801, 999), so a [`CudaError`] converts to a [`HipError`] of the same number; a
//! `CUresult` does not (its 201 is an invalid context, its 500 a missing name), and has no such
//! conversion. Names and `Display` work without a loaded library; the libraries' own text is
//! available through [`Cuda::error_string`](super::Cuda::error_string)(crate::Cuda::error_string) and
//! [`Cuda::driver_error_string`](super::Cuda::driver_error_string)(crate::Cuda::driver_error_string).

// `cudaError_t` spells the C name it stands for.
#![allow(non_camel_case_types)]

use crate::hip::error::HipError;
use std::fmt;

/// The common methods of a status-code newtype, with its table of known names.
macro_rules! status_code {
    (
        $ty:ident, $prefix:literal, $success:ident,
        $( $(#[$doc:meta])* $konst:ident = $value:literal => $name:literal, )*
    ) => {
        impl $ty {
            $( $(#[$doc])* pub const $konst: $ty = $ty($value); )*

            /// Every code this crate knows by name, in ascending order.
            pub const KNOWN: &'static [$ty] = &[$($ty::$konst),*];

            /// The C enumerator's name, or `None` for a code this crate does not know. Needs no
            /// library.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $( $value => Some($name), )*
                    _ => None,
                }
            }

            /// Whether this is the success code (0).
            pub fn is_success(self) -> bool {
                self == $ty::$success
            }

            /// `Ok(())` for success, otherwise `Err(self)`: turns a status into a `Result`.
            ///
            /// # Errors
            ///
            /// `self`, when it is not the success code.
            pub fn result(self) -> Result<(), $ty> {
                if self.is_success() { Ok(()) } else { Err(self) }
            }
        }

        impl From<$ty> for i32 {
            fn from(e: $ty) -> i32 {
                e.0
            }
        }

        impl From<i32> for $ty {
            fn from(raw: i32) -> $ty {
                $ty(raw)
            }
        }

        impl fmt::Display for $ty {
            /// The C name and number for a known code, the type's name and number otherwise.
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(name) => write!(f, "{name} ({})", self.0),
                    None => write!(f, concat!($prefix, " {}"), self.0),
                }
            }
        }

        impl fmt::Debug for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(name) => write!(f, concat!(stringify!($ty), "({} {})"), self.0, name),
                    None => write!(f, concat!(stringify!($ty), "({})"), self.0),
                }
            }
        }

        impl std::error::Error for $ty {}
    };
}

pub(crate) use status_code;

/// A CUDA runtime status code (`cudaError_t`), as returned by every `cuda*` call.
///
/// `#[repr(transparent)]` over `i32` (the C type is a 4-byte enum), so it is the return type
/// of the function pointers in [`CudartFns`](super::CudartFns); values not listed as constants are kept as they
/// are. The runtime's own text is [`Cuda::error_string`](super::Cuda::error_string).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct CudaError(pub i32);

/// The C spelling of [`CudaError`]: the return type of CUDA runtime calls.
pub type cudaError_t = CudaError;

status_code! {
    CudaError, "cudaError", SUCCESS,
    /// `cudaSuccess` (0).
    SUCCESS = 0 => "cudaSuccess",
    /// `cudaErrorInvalidValue` (1).
    INVALID_VALUE = 1 => "cudaErrorInvalidValue",
    /// `cudaErrorMemoryAllocation` (2): out of memory.
    MEMORY_ALLOCATION = 2 => "cudaErrorMemoryAllocation",
    /// `cudaErrorInitializationError` (3).
    INITIALIZATION_ERROR = 3 => "cudaErrorInitializationError",
    /// `cudaErrorCudartUnloading` (4): the runtime is shutting down.
    CUDART_UNLOADING = 4 => "cudaErrorCudartUnloading",
    /// `cudaErrorInvalidDevicePointer` (17).
    INVALID_DEVICE_POINTER = 17 => "cudaErrorInvalidDevicePointer",
    /// `cudaErrorInvalidMemcpyDirection` (21).
    INVALID_MEMCPY_DIRECTION = 21 => "cudaErrorInvalidMemcpyDirection",
    /// `cudaErrorStubLibrary` (34): the loaded `libcuda` is the toolkit's link stub.
    STUB_LIBRARY = 34 => "cudaErrorStubLibrary",
    /// `cudaErrorInsufficientDriver` (35): the driver is older than the runtime.
    INSUFFICIENT_DRIVER = 35 => "cudaErrorInsufficientDriver",
    /// `cudaErrorNoDevice` (100).
    NO_DEVICE = 100 => "cudaErrorNoDevice",
    /// `cudaErrorInvalidDevice` (101).
    INVALID_DEVICE = 101 => "cudaErrorInvalidDevice",
    /// `cudaErrorDeviceUninitialized` (201).
    DEVICE_UNINITIALIZED = 201 => "cudaErrorDeviceUninitialized",
    /// `cudaErrorInvalidResourceHandle` (400).
    INVALID_RESOURCE_HANDLE = 400 => "cudaErrorInvalidResourceHandle",
    /// `cudaErrorSymbolNotFound` (500).
    SYMBOL_NOT_FOUND = 500 => "cudaErrorSymbolNotFound",
    /// `cudaErrorNotReady` (600).
    NOT_READY = 600 => "cudaErrorNotReady",
    /// `cudaErrorIllegalAddress` (700).
    ILLEGAL_ADDRESS = 700 => "cudaErrorIllegalAddress",
    /// `cudaErrorHostMemoryAlreadyRegistered` (712).
    HOST_MEMORY_ALREADY_REGISTERED = 712 => "cudaErrorHostMemoryAlreadyRegistered",
    /// `cudaErrorHostMemoryNotRegistered` (713).
    HOST_MEMORY_NOT_REGISTERED = 713 => "cudaErrorHostMemoryNotRegistered",
    /// `cudaErrorLaunchFailure` (719).
    LAUNCH_FAILURE = 719 => "cudaErrorLaunchFailure",
    /// `cudaErrorNotSupported` (801).
    NOT_SUPPORTED = 801 => "cudaErrorNotSupported",
    /// `cudaErrorUnknown` (999).
    UNKNOWN = 999 => "cudaErrorUnknown",
}

impl From<CudaError> for HipError {
    /// The same number. Meaningful for the codes both runtimes define alike (0–3, 17, 21, 35,
    /// 100, 101, 712, 713, 801, 999); other numbers keep their value but not their meaning.
    fn from(e: CudaError) -> HipError {
        HipError(e.0)
    }
}

/// A CUDA driver status code (`CUresult`), as returned by every `cu*` call.
///
/// A separate code space from [`CudaError`]: the same number can mean different things (201 is
/// `CUDA_ERROR_INVALID_CONTEXT` here, `cudaErrorDeviceUninitialized` there). The driver's own
/// text is [`Cuda::driver_error_string`](super::Cuda::driver_error_string).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct CuError(pub i32);

/// The C spelling of [`CuError`]: the return type of CUDA driver calls.
pub type CUresult = CuError;

status_code! {
    CuError, "CUresult", SUCCESS,
    /// `CUDA_SUCCESS` (0).
    SUCCESS = 0 => "CUDA_SUCCESS",
    /// `CUDA_ERROR_INVALID_VALUE` (1).
    INVALID_VALUE = 1 => "CUDA_ERROR_INVALID_VALUE",
    /// `CUDA_ERROR_OUT_OF_MEMORY` (2).
    OUT_OF_MEMORY = 2 => "CUDA_ERROR_OUT_OF_MEMORY",
    /// `CUDA_ERROR_NOT_INITIALIZED` (3): `cuInit` has not succeeded.
    NOT_INITIALIZED = 3 => "CUDA_ERROR_NOT_INITIALIZED",
    /// `CUDA_ERROR_DEINITIALIZED` (4): the driver is shutting down.
    DEINITIALIZED = 4 => "CUDA_ERROR_DEINITIALIZED",
    /// `CUDA_ERROR_STUB_LIBRARY` (34): the loaded `libcuda` is the toolkit's link stub.
    STUB_LIBRARY = 34 => "CUDA_ERROR_STUB_LIBRARY",
    /// `CUDA_ERROR_NO_DEVICE` (100).
    NO_DEVICE = 100 => "CUDA_ERROR_NO_DEVICE",
    /// `CUDA_ERROR_INVALID_DEVICE` (101).
    INVALID_DEVICE = 101 => "CUDA_ERROR_INVALID_DEVICE",
    /// `CUDA_ERROR_INVALID_CONTEXT` (201): no context is current on the calling thread.
    INVALID_CONTEXT = 201 => "CUDA_ERROR_INVALID_CONTEXT",
    /// `CUDA_ERROR_INVALID_HANDLE` (400).
    INVALID_HANDLE = 400 => "CUDA_ERROR_INVALID_HANDLE",
    /// `CUDA_ERROR_NOT_FOUND` (500).
    NOT_FOUND = 500 => "CUDA_ERROR_NOT_FOUND",
    /// `CUDA_ERROR_ILLEGAL_ADDRESS` (700).
    ILLEGAL_ADDRESS = 700 => "CUDA_ERROR_ILLEGAL_ADDRESS",
    /// `CUDA_ERROR_NOT_SUPPORTED` (801).
    NOT_SUPPORTED = 801 => "CUDA_ERROR_NOT_SUPPORTED",
    /// `CUDA_ERROR_UNKNOWN` (999).
    UNKNOWN = 999 => "CUDA_ERROR_UNKNOWN",
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_error_names() {
        let expected = [
            (0, "cudaSuccess"),
            (1, "cudaErrorInvalidValue"),
            (2, "cudaErrorMemoryAllocation"),
            (3, "cudaErrorInitializationError"),
            (4, "cudaErrorCudartUnloading"),
            (17, "cudaErrorInvalidDevicePointer"),
            (21, "cudaErrorInvalidMemcpyDirection"),
            (34, "cudaErrorStubLibrary"),
            (35, "cudaErrorInsufficientDriver"),
            (100, "cudaErrorNoDevice"),
            (101, "cudaErrorInvalidDevice"),
            (201, "cudaErrorDeviceUninitialized"),
            (400, "cudaErrorInvalidResourceHandle"),
            (500, "cudaErrorSymbolNotFound"),
            (600, "cudaErrorNotReady"),
            (700, "cudaErrorIllegalAddress"),
            (712, "cudaErrorHostMemoryAlreadyRegistered"),
            (713, "cudaErrorHostMemoryNotRegistered"),
            (719, "cudaErrorLaunchFailure"),
            (801, "cudaErrorNotSupported"),
            (999, "cudaErrorUnknown"),
        ];
        assert_eq!(CudaError::KNOWN.len(), expected.len());
        for (known, (value, name)) in CudaError::KNOWN.iter().zip(expected) {
            assert_eq!(known.0, value);
            assert_eq!(known.name(), Some(name));
        }
        assert!(CudaError::KNOWN.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(CudaError(12345).name(), None);
    }

    #[test]
    fn driver_error_names() {
        let expected = [
            (0, "CUDA_SUCCESS"),
            (1, "CUDA_ERROR_INVALID_VALUE"),
            (2, "CUDA_ERROR_OUT_OF_MEMORY"),
            (3, "CUDA_ERROR_NOT_INITIALIZED"),
            (4, "CUDA_ERROR_DEINITIALIZED"),
            (34, "CUDA_ERROR_STUB_LIBRARY"),
            (100, "CUDA_ERROR_NO_DEVICE"),
            (101, "CUDA_ERROR_INVALID_DEVICE"),
            (201, "CUDA_ERROR_INVALID_CONTEXT"),
            (400, "CUDA_ERROR_INVALID_HANDLE"),
            (500, "CUDA_ERROR_NOT_FOUND"),
            (700, "CUDA_ERROR_ILLEGAL_ADDRESS"),
            (801, "CUDA_ERROR_NOT_SUPPORTED"),
            (999, "CUDA_ERROR_UNKNOWN"),
        ];
        assert_eq!(CuError::KNOWN.len(), expected.len());
        for (known, (value, name)) in CuError::KNOWN.iter().zip(expected) {
            assert_eq!(known.0, value);
            assert_eq!(known.name(), Some(name));
        }
        assert!(CuError::KNOWN.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn status_display_and_result() {
        assert_eq!(CudaError::NO_DEVICE.to_string(), "cudaErrorNoDevice (100)");
        assert_eq!(CudaError(12345).to_string(), "cudaError 12345");
        assert_eq!(
            format!("{:?}", CudaError::NO_DEVICE),
            "CudaError(100 cudaErrorNoDevice)"
        );
        assert_eq!(format!("{:?}", CudaError(-3)), "CudaError(-3)");
        assert_eq!(
            CuError::INVALID_CONTEXT.to_string(),
            "CUDA_ERROR_INVALID_CONTEXT (201)"
        );
        assert_eq!(CuError(12345).to_string(), "CUresult 12345");
        assert_eq!(format!("{:?}", CuError(7)), "CuError(7)");
        assert_eq!(CudaError::SUCCESS.result(), Ok(()));
        assert_eq!(CudaError(1).result(), Err(CudaError::INVALID_VALUE));
        assert_eq!(CuError::SUCCESS.result(), Ok(()));
        assert_eq!(CuError(201).result(), Err(CuError::INVALID_CONTEXT));
        assert_eq!(i32::from(CuError::NOT_FOUND), 500);
        assert_eq!(CudaError::from(35), CudaError::INSUFFICIENT_DRIVER);
    }

    #[test]
    fn shared_codes_convert_to_hip() {
        for (cuda, hip) in [
            (CudaError::SUCCESS, HipError::SUCCESS),
            (CudaError::INVALID_VALUE, HipError::INVALID_VALUE),
            (CudaError::MEMORY_ALLOCATION, HipError::OUT_OF_MEMORY),
            (CudaError::INITIALIZATION_ERROR, HipError::NOT_INITIALIZED),
            (
                CudaError::INVALID_DEVICE_POINTER,
                HipError::INVALID_DEVICE_POINTER,
            ),
            (
                CudaError::INVALID_MEMCPY_DIRECTION,
                HipError::INVALID_MEMCPY_DIRECTION,
            ),
            (
                CudaError::INSUFFICIENT_DRIVER,
                HipError::INSUFFICIENT_DRIVER,
            ),
            (CudaError::NO_DEVICE, HipError::NO_DEVICE),
            (CudaError::INVALID_DEVICE, HipError::INVALID_DEVICE),
            (
                CudaError::HOST_MEMORY_ALREADY_REGISTERED,
                HipError::HOST_MEMORY_ALREADY_REGISTERED,
            ),
            (
                CudaError::HOST_MEMORY_NOT_REGISTERED,
                HipError::HOST_MEMORY_NOT_REGISTERED,
            ),
            (CudaError::NOT_SUPPORTED, HipError::NOT_SUPPORTED),
            (CudaError::UNKNOWN, HipError::UNKNOWN),
        ] {
            assert_eq!(HipError::from(cuda), hip, "{cuda}");
        }
    }
}
