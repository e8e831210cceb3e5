//! The `hipError_t` values this runtime returns. Plain `i32`s, as the C enum is a 4-byte
//! int; the values are HIP's. Imports nothing of the crate, so that every module (the
//! configuration included) may name a code without depending on the error texts.

/// `hipSuccess`.
pub const SUCCESS: i32 = 0;
/// `hipErrorInvalidValue`.
pub const INVALID_VALUE: i32 = 1;
/// `hipErrorOutOfMemory`.
pub const OUT_OF_MEMORY: i32 = 2;
/// `hipErrorNotInitialized`.
pub const NOT_INITIALIZED: i32 = 3;
/// `hipErrorDeinitialized`.
pub const DEINITIALIZED: i32 = 4;
/// `hipErrorInvalidDevicePointer`.
pub const INVALID_DEVICE_POINTER: i32 = 17;
/// `hipErrorInvalidMemcpyDirection`.
pub const INVALID_MEMCPY_DIRECTION: i32 = 21;
/// `hipErrorInsufficientDriver`.
pub const INSUFFICIENT_DRIVER: i32 = 35;
/// `hipErrorNoDevice`.
pub const NO_DEVICE: i32 = 100;
/// `hipErrorInvalidDevice`.
pub const INVALID_DEVICE: i32 = 101;
/// `hipErrorInvalidContext`.
pub const INVALID_CONTEXT: i32 = 201;
/// `hipErrorInvalidHandle`.
pub const INVALID_HANDLE: i32 = 400;
/// `hipErrorNotFound`.
pub const NOT_FOUND: i32 = 500;
/// `hipErrorNotReady`.
pub const NOT_READY: i32 = 600;
/// `hipErrorIllegalAddress`.
pub const ILLEGAL_ADDRESS: i32 = 700;
/// `hipErrorHostMemoryAlreadyRegistered`.
pub const HOST_MEMORY_ALREADY_REGISTERED: i32 = 712;
/// `hipErrorHostMemoryNotRegistered`.
pub const HOST_MEMORY_NOT_REGISTERED: i32 = 713;
/// `hipErrorLaunchFailure`.
pub const LAUNCH_FAILURE: i32 = 719;
/// `hipErrorNotSupported`.
pub const NOT_SUPPORTED: i32 = 801;
/// `hipErrorUnknown`.
pub const UNKNOWN: i32 = 999;
