//! `hipError_t` as an `i32` newtype.
//!
//! The C type is an enum, but a runtime may return values this crate has never heard of, so it
//! is modelled as a transparent `i32` (a Rust `enum` would make unknown values undefined
//! behaviour). Names and `Display` work without a loaded runtime; the runtime's own text is
//! available through [`Hip::error_string`](crate::Hip::error_string).

use std::fmt;

/// A HIP status code (`hipError_t`), as returned by every HIP runtime call.
///
/// `#[repr(transparent)]` over `i32`, so it is used directly as the return type of the
/// function pointers in [`HipFns`](crate::HipFns). Values not listed as constants are kept
/// as they are.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct HipError(pub i32);

/// The C spelling of [`HipError`]: the return type of HIP runtime calls.
#[allow(non_camel_case_types)]
pub type hipError_t = HipError;

macro_rules! hip_errors {
    ($( $(#[$doc:meta])* $konst:ident = $value:literal => $name:literal, )*) => {
        impl HipError {
            $( $(#[$doc])* pub const $konst: HipError = HipError($value); )*

            /// Every code this crate knows by name, in ascending order.
            pub const KNOWN: &'static [HipError] = &[$(HipError::$konst),*];

            /// The C enumerator's name (`"hipErrorNoDevice"`), or `None` for a code this crate
            /// does not know. Needs no runtime.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $( $value => Some($name), )*
                    _ => None,
                }
            }
        }
    };
}

hip_errors! {
    /// `hipSuccess` (0).
    SUCCESS = 0 => "hipSuccess",
    /// `hipErrorInvalidValue` (1).
    INVALID_VALUE = 1 => "hipErrorInvalidValue",
    /// `hipErrorOutOfMemory` (2).
    OUT_OF_MEMORY = 2 => "hipErrorOutOfMemory",
    /// `hipErrorNotInitialized` (3).
    NOT_INITIALIZED = 3 => "hipErrorNotInitialized",
    /// `hipErrorDeinitialized` (4).
    DEINITIALIZED = 4 => "hipErrorDeinitialized",
    /// `hipErrorInvalidDevicePointer` (17).
    INVALID_DEVICE_POINTER = 17 => "hipErrorInvalidDevicePointer",
    /// `hipErrorInvalidMemcpyDirection` (21).
    INVALID_MEMCPY_DIRECTION = 21 => "hipErrorInvalidMemcpyDirection",
    /// `hipErrorInsufficientDriver` (35).
    INSUFFICIENT_DRIVER = 35 => "hipErrorInsufficientDriver",
    /// `hipErrorNoDevice` (100).
    NO_DEVICE = 100 => "hipErrorNoDevice",
    /// `hipErrorInvalidDevice` (101).
    INVALID_DEVICE = 101 => "hipErrorInvalidDevice",
    /// `hipErrorInvalidContext` (201).
    INVALID_CONTEXT = 201 => "hipErrorInvalidContext",
    /// `hipErrorInvalidHandle` (400).
    INVALID_HANDLE = 400 => "hipErrorInvalidHandle",
    /// `hipErrorNotFound` (500).
    NOT_FOUND = 500 => "hipErrorNotFound",
    /// `hipErrorNotReady` (600).
    NOT_READY = 600 => "hipErrorNotReady",
    /// `hipErrorIllegalAddress` (700).
    ILLEGAL_ADDRESS = 700 => "hipErrorIllegalAddress",
    /// `hipErrorHostMemoryAlreadyRegistered` (712).
    HOST_MEMORY_ALREADY_REGISTERED = 712 => "hipErrorHostMemoryAlreadyRegistered",
    /// `hipErrorHostMemoryNotRegistered` (713).
    HOST_MEMORY_NOT_REGISTERED = 713 => "hipErrorHostMemoryNotRegistered",
    /// `hipErrorLaunchFailure` (719).
    LAUNCH_FAILURE = 719 => "hipErrorLaunchFailure",
    /// `hipErrorNotSupported` (801).
    NOT_SUPPORTED = 801 => "hipErrorNotSupported",
    /// `hipErrorUnknown` (999).
    UNKNOWN = 999 => "hipErrorUnknown",
}

impl HipError {
    /// Whether this is `hipSuccess`.
    pub fn is_success(self) -> bool {
        self == HipError::SUCCESS
    }

    /// `Ok(())` for `hipSuccess`, otherwise `Err(self)`: turns a status into a `Result`.
    ///
    /// # Errors
    ///
    /// `self`, when it is not [`HipError::SUCCESS`].
    pub fn result(self) -> Result<(), HipError> {
        if self.is_success() { Ok(()) } else { Err(self) }
    }
}

impl From<HipError> for i32 {
    fn from(e: HipError) -> i32 {
        e.0
    }
}

impl From<i32> for HipError {
    fn from(raw: i32) -> HipError {
        HipError(raw)
    }
}

impl fmt::Display for HipError {
    /// `hipErrorNoDevice (100)` for a known code, `hipError 12345` otherwise.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "{name} ({})", self.0),
            None => write!(f, "hipError {}", self.0),
        }
    }
}

impl fmt::Debug for HipError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "HipError({} {name})", self.0),
            None => write!(f, "HipError({})", self.0),
        }
    }
}

impl std::error::Error for HipError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_abi_numbers() {
        let expected = [
            (0, "hipSuccess"),
            (1, "hipErrorInvalidValue"),
            (2, "hipErrorOutOfMemory"),
            (3, "hipErrorNotInitialized"),
            (4, "hipErrorDeinitialized"),
            (17, "hipErrorInvalidDevicePointer"),
            (21, "hipErrorInvalidMemcpyDirection"),
            (35, "hipErrorInsufficientDriver"),
            (100, "hipErrorNoDevice"),
            (101, "hipErrorInvalidDevice"),
            (201, "hipErrorInvalidContext"),
            (400, "hipErrorInvalidHandle"),
            (500, "hipErrorNotFound"),
            (600, "hipErrorNotReady"),
            (700, "hipErrorIllegalAddress"),
            (712, "hipErrorHostMemoryAlreadyRegistered"),
            (713, "hipErrorHostMemoryNotRegistered"),
            (719, "hipErrorLaunchFailure"),
            (801, "hipErrorNotSupported"),
            (999, "hipErrorUnknown"),
        ];
        assert_eq!(HipError::KNOWN.len(), expected.len());
        for (known, (value, name)) in HipError::KNOWN.iter().zip(expected) {
            assert_eq!(known.0, value);
            assert_eq!(known.name(), Some(name));
        }
        assert!(HipError::KNOWN.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn constants_have_their_values() {
        assert_eq!(HipError::SUCCESS.0, 0);
        assert_eq!(HipError::NO_DEVICE.0, 100);
        assert_eq!(HipError::HOST_MEMORY_ALREADY_REGISTERED.0, 712);
        assert_eq!(HipError::NOT_SUPPORTED.0, 801);
        assert_eq!(HipError::UNKNOWN.0, 999);
    }

    #[test]
    fn unknown_codes_have_no_name() {
        assert_eq!(HipError(12345).name(), None);
        assert_eq!(HipError(-1).name(), None);
        assert_eq!(HipError(5).name(), None);
    }

    #[test]
    fn display_without_runtime() {
        assert_eq!(HipError::NO_DEVICE.to_string(), "hipErrorNoDevice (100)");
        assert_eq!(HipError::SUCCESS.to_string(), "hipSuccess (0)");
        assert_eq!(HipError(12345).to_string(), "hipError 12345");
        assert_eq!(HipError(-7).to_string(), "hipError -7");
        assert_eq!(
            format!("{:?}", HipError::NO_DEVICE),
            "HipError(100 hipErrorNoDevice)"
        );
        assert_eq!(format!("{:?}", HipError(12345)), "HipError(12345)");
    }

    #[test]
    fn result_maps_success_only() {
        assert_eq!(HipError::SUCCESS.result(), Ok(()));
        assert_eq!(
            HipError::INVALID_VALUE.result(),
            Err(HipError::INVALID_VALUE)
        );
        assert_eq!(HipError(12345).result(), Err(HipError(12345)));
    }

    #[test]
    fn is_std_error() {
        let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(HipError::NO_DEVICE);
        assert_eq!(boxed.to_string(), "hipErrorNoDevice (100)");
    }

    #[test]
    fn repr_is_i32() {
        assert_eq!(std::mem::size_of::<HipError>(), 4);
        assert_eq!(std::mem::align_of::<HipError>(), 4);
    }
}
