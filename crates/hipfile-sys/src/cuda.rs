//! The loaded CUDA runtime (`libcudart`) and driver (`libcuda.so.1`), for NVIDIA GPUs: two
//! tables of function pointers ([`CudartFns`], [`CudaDriverFns`]) and thin wrappers that turn
//! status codes into `Result`s ([`Cuda`]).
//!
//! HIP on NVIDIA is a set of inline wrappers over CUDA, so there is no HIP library to load
//! there: this module maps the few runtime calls hipfile needs, plus one driver call the
//! runtime API lacks (`cuMemGetAddressRange_v2`, which needs `cuInit(0)`).
//!
//! The two APIs have separate code spaces, kept apart by type: runtime calls return
//! `cudaError_t` ([`CudaError`]), driver calls `CUresult` ([`CuError`]). `cudaError_t` uses
//! HIP's numbers for the codes hipfile acts on (0–3, 17, 21, 35, 100, 101, 712, 713, 801, 999),
//! so a [`CudaError`] converts to a [`HipError`] of the same number; a `CUresult` does not
//! (its 201 is an invalid context, its 500 a missing name), and has no such conversion.
//!
//! # Safety
//!
//! Every function pointer is resolved from a library that [`Cuda`] keeps open, and cast to the
//! C signature of the CUDA headers (given with each `PFN_` type); the pointers stay valid for
//! as long as the `Cuda` lives, and both libraries are opened with `RTLD_NODELETE`, so they
//! stay mapped even after that. The wrappers that only query the runtime (versions, devices,
//! pointer attributes, address ranges, error strings, the `cudaFree(NULL)` context idiom) are
//! safe: they pass pointers to local out-parameters and never let the runtime touch caller
//! memory. Everything that reads or writes memory, or consumes a handle, is an `unsafe fn` with
//! its contract in `# Safety`.
//!
//! Loading is a safe function although `dlopen` runs the libraries' initialisers: the contract
//! of [`Cuda::load`] is that the candidates name a CUDA runtime (or a library without harmful
//! initialisers, such as one that merely lacks the symbols), and a library that exports CUDA's
//! names with other signatures is outside that contract.

// The `PFN_` aliases and handle types spell the C names they stand for.
#![allow(non_camel_case_types)]

use crate::error::HipError;
use crate::load::{Candidate, CandidateOrigin, LoadAttempt, LoadError, LoadFailure};
use crate::types::cudaPointerAttributes;
use libloading::os::unix::Library;
use std::ffi::{CStr, c_char, c_int, c_uint, c_ulonglong, c_void};
use std::fmt;
use std::mem;
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::OnceLock;

/// `libcudart` sonames tried first, newest first, loaded by bare name so that the dynamic
/// linker's search path (`LD_LIBRARY_PATH`, `ldconfig`) applies.
pub const CUDART_SONAMES: [&str; 2] = ["libcudart.so.13", "libcudart.so.12"];

/// The default CUDA toolkit installation's runtime, tried after the sonames.
pub const DEFAULT_CUDART_LIBRARY: &str = "/usr/local/cuda/lib64/libcudart.so";

/// The driver library. It ships with the NVIDIA kernel driver, not with the toolkit, and its
/// soname has been `.so.1` for every driver generation.
pub const CUDA_DRIVER_LIBRARY: &str = "libcuda.so.1";

// ---------------------------------------------------------------------------------------------
// Status codes
// ---------------------------------------------------------------------------------------------

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

/// A CUDA runtime status code (`cudaError_t`), as returned by every `cuda*` call.
///
/// `#[repr(transparent)]` over `i32` (the C type is a 4-byte enum), so it is the return type
/// of the function pointers in [`CudartFns`]; values not listed as constants are kept as they
/// are. The runtime's own text is [`Cuda::error_string`].
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
/// text is [`Cuda::driver_error_string`].
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

// ---------------------------------------------------------------------------------------------
// Versions
// ---------------------------------------------------------------------------------------------

/// Splits a CUDA version number (`major·1000 + minor·10`, as `cudaRuntimeGetVersion` and
/// `cudaDriverGetVersion` report it) into `(major, minor)`. Never panics.
pub fn decode_cuda_version(v: i32) -> (i32, i32) {
    (v / 1000, (v % 1000) / 10)
}

/// A CUDA version number that displays as `major.minor` (13000 is `13.0`, 12080 is `12.8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CudaVersion(pub i32);

impl CudaVersion {
    /// CUDA 11.0: the first whose `cudaPointerGetAttributes` succeeds for plain host memory
    /// (type Unregistered).
    pub const CUDA_11_0: CudaVersion = CudaVersion::new(11, 0);
    /// CUDA 12.0.
    pub const CUDA_12_0: CudaVersion = CudaVersion::new(12, 0);
    /// CUDA 13.0: `cudaPointerAttributes` grows a reserved tail (88 bytes).
    pub const CUDA_13_0: CudaVersion = CudaVersion::new(13, 0);

    /// Builds the number for `major.minor`. Parts out of range wrap into each other, as they
    /// do in the runtime's own encoding.
    pub const fn new(major: i32, minor: i32) -> CudaVersion {
        CudaVersion(
            major
                .wrapping_mul(1000)
                .wrapping_add(minor.wrapping_mul(10)),
        )
    }

    /// The major version.
    pub fn major(self) -> i32 {
        decode_cuda_version(self.0).0
    }

    /// The minor version.
    pub fn minor(self) -> i32 {
        decode_cuda_version(self.0).1
    }
}

impl fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor) = decode_cuda_version(self.0);
        write!(f, "{major}.{minor}")
    }
}

// ---------------------------------------------------------------------------------------------
// C types
// ---------------------------------------------------------------------------------------------

/// `CUdeviceptr`: a device address as the driver API takes it (`unsigned long long`).
pub type CUdeviceptr = c_ulonglong;

/// `cudaMemcpyKind`: the direction of a copy. The values are HIP's
/// ([`memcpy_kind`](crate::memcpy_kind): 1 host to device, 2 device to host).
pub type cudaMemcpyKind = c_int;

/// `cudaStream_t`: an opaque stream handle (null is the legacy default stream).
///
/// A transparent newtype over the C pointer, distinct from [`hipStream_t`](crate::hipStream_t)
/// so that handles of the two runtimes cannot be mixed up. It owns nothing: create and destroy
/// it with [`Cuda::stream_create`] and [`Cuda::stream_destroy`].
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
/// [`Cuda::event_create`] and [`Cuda::event_destroy`].
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

// ---------------------------------------------------------------------------------------------
// Function tables
// ---------------------------------------------------------------------------------------------

/// `cudaError_t cudaRuntimeGetVersion(int* runtimeVersion)`, also the shape of
/// `cudaDriverGetVersion`, `cudaGetDeviceCount` and `cudaGetDevice`.
pub type PFN_cudaGetInt = unsafe extern "C" fn(value: *mut c_int) -> cudaError_t;
/// `cudaError_t cudaSetDevice(int device)`.
pub type PFN_cudaSetDevice = unsafe extern "C" fn(device: c_int) -> cudaError_t;
/// `const char* cudaGetErrorString(cudaError_t error)`, also the shape of `cudaGetErrorName`.
pub type PFN_cudaGetErrorString = unsafe extern "C" fn(error: cudaError_t) -> *const c_char;
/// `cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr)`.
pub type PFN_cudaPointerGetAttributes =
    unsafe extern "C" fn(attributes: *mut cudaPointerAttributes, ptr: *const c_void) -> cudaError_t;
/// `cudaError_t cudaMalloc(void** devPtr, size_t size)`.
pub type PFN_cudaMalloc = unsafe extern "C" fn(ptr: *mut *mut c_void, size: usize) -> cudaError_t;
/// `cudaError_t cudaFree(void* devPtr)`, also the shape of `cudaFreeHost` and
/// `cudaHostUnregister`.
pub type PFN_cudaFree = unsafe extern "C" fn(ptr: *mut c_void) -> cudaError_t;
/// `cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags)`.
pub type PFN_cudaHostAlloc =
    unsafe extern "C" fn(ptr: *mut *mut c_void, size: usize, flags: c_uint) -> cudaError_t;
/// `cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags)`.
pub type PFN_cudaHostRegister =
    unsafe extern "C" fn(ptr: *mut c_void, size: usize, flags: c_uint) -> cudaError_t;
/// `cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind)`.
pub type PFN_cudaMemcpy = unsafe extern "C" fn(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: cudaMemcpyKind,
) -> cudaError_t;
/// `cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
/// cudaStream_t stream)`.
pub type PFN_cudaMemcpyAsync = unsafe extern "C" fn(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: cudaMemcpyKind,
    stream: cudaStream_t,
) -> cudaError_t;
/// `cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags)`.
pub type PFN_cudaStreamCreateWithFlags =
    unsafe extern "C" fn(stream: *mut cudaStream_t, flags: c_uint) -> cudaError_t;
/// `cudaError_t cudaStreamDestroy(cudaStream_t stream)`, also the shape of
/// `cudaStreamSynchronize`.
pub type PFN_cudaStreamDestroy = unsafe extern "C" fn(stream: cudaStream_t) -> cudaError_t;
/// `cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData)`.
pub type PFN_cudaLaunchHostFunc = unsafe extern "C" fn(
    stream: cudaStream_t,
    func: cudaHostFn_t,
    user_data: *mut c_void,
) -> cudaError_t;
/// `cudaError_t cudaEventCreate(cudaEvent_t* event)`.
pub type PFN_cudaEventCreate = unsafe extern "C" fn(event: *mut cudaEvent_t) -> cudaError_t;
/// `cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)`.
pub type PFN_cudaEventRecord =
    unsafe extern "C" fn(event: cudaEvent_t, stream: cudaStream_t) -> cudaError_t;
/// `cudaError_t cudaEventSynchronize(cudaEvent_t event)`, also the shape of
/// `cudaEventDestroy`.
pub type PFN_cudaEventSynchronize = unsafe extern "C" fn(event: cudaEvent_t) -> cudaError_t;

/// `CUresult cuInit(unsigned int Flags)`.
pub type PFN_cuInit = unsafe extern "C" fn(flags: c_uint) -> CUresult;
/// `CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr)`.
pub type PFN_cuMemGetAddressRange_v2 =
    unsafe extern "C" fn(base: *mut CUdeviceptr, size: *mut usize, ptr: CUdeviceptr) -> CUresult;
/// `CUresult cuGetErrorString(CUresult error, const char** pStr)`.
pub type PFN_cuGetErrorString =
    unsafe extern "C" fn(error: CUresult, text: *mut *const c_char) -> CUresult;

/// The raw CUDA runtime function table: one field per entry point, named as in C. Call them
/// directly for FFI of your own; [`Cuda`]'s methods wrap the same pointers.
///
/// Every entry is required: all are in CUDA 12 and 13.
#[allow(non_snake_case)]
#[derive(Clone, Copy)]
pub struct CudartFns {
    /// `cudaRuntimeGetVersion`.
    pub cudaRuntimeGetVersion: PFN_cudaGetInt,
    /// `cudaDriverGetVersion`.
    pub cudaDriverGetVersion: PFN_cudaGetInt,
    /// `cudaGetDeviceCount`.
    pub cudaGetDeviceCount: PFN_cudaGetInt,
    /// `cudaGetDevice`.
    pub cudaGetDevice: PFN_cudaGetInt,
    /// `cudaSetDevice`.
    pub cudaSetDevice: PFN_cudaSetDevice,
    /// `cudaGetErrorString`.
    pub cudaGetErrorString: PFN_cudaGetErrorString,
    /// `cudaGetErrorName`.
    pub cudaGetErrorName: PFN_cudaGetErrorString,
    /// `cudaPointerGetAttributes`.
    pub cudaPointerGetAttributes: PFN_cudaPointerGetAttributes,
    /// `cudaMalloc`.
    pub cudaMalloc: PFN_cudaMalloc,
    /// `cudaFree`.
    pub cudaFree: PFN_cudaFree,
    /// `cudaHostAlloc`.
    pub cudaHostAlloc: PFN_cudaHostAlloc,
    /// `cudaFreeHost`.
    pub cudaFreeHost: PFN_cudaFree,
    /// `cudaHostRegister`.
    pub cudaHostRegister: PFN_cudaHostRegister,
    /// `cudaHostUnregister`.
    pub cudaHostUnregister: PFN_cudaFree,
    /// `cudaMemcpy`.
    pub cudaMemcpy: PFN_cudaMemcpy,
    /// `cudaMemcpyAsync`.
    pub cudaMemcpyAsync: PFN_cudaMemcpyAsync,
    /// `cudaStreamCreateWithFlags`.
    pub cudaStreamCreateWithFlags: PFN_cudaStreamCreateWithFlags,
    /// `cudaStreamDestroy`.
    pub cudaStreamDestroy: PFN_cudaStreamDestroy,
    /// `cudaStreamSynchronize`.
    pub cudaStreamSynchronize: PFN_cudaStreamDestroy,
    /// `cudaLaunchHostFunc`.
    pub cudaLaunchHostFunc: PFN_cudaLaunchHostFunc,
    /// `cudaEventCreate`.
    pub cudaEventCreate: PFN_cudaEventCreate,
    /// `cudaEventRecord`.
    pub cudaEventRecord: PFN_cudaEventRecord,
    /// `cudaEventSynchronize`.
    pub cudaEventSynchronize: PFN_cudaEventSynchronize,
    /// `cudaEventDestroy`.
    pub cudaEventDestroy: PFN_cudaEventSynchronize,
}

impl fmt::Debug for CudartFns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudartFns").finish_non_exhaustive()
    }
}

/// The raw CUDA driver function table (`libcuda.so.1`): the few driver calls the runtime API
/// does not offer.
#[allow(non_snake_case)]
#[derive(Clone, Copy)]
pub struct CudaDriverFns {
    /// `cuInit`.
    pub cuInit: PFN_cuInit,
    /// `cuMemGetAddressRange_v2` (what `cuda.h`'s `cuMemGetAddressRange` expands to).
    pub cuMemGetAddressRange_v2: PFN_cuMemGetAddressRange_v2,
    /// `cuGetErrorString`.
    pub cuGetErrorString: PFN_cuGetErrorString,
}

impl fmt::Debug for CudaDriverFns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaDriverFns").finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------------
// Where the libraries are looked for
// ---------------------------------------------------------------------------------------------

/// Where to look for the CUDA runtime. Nothing here reads the environment: callers put what
/// they read into these fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CudaLoadOptions {
    /// Load exactly this `libcudart` and nothing else. When it fails to load, loading fails:
    /// there is no fallthrough to the other locations.
    pub explicit_cudart: Option<PathBuf>,
}

/// The search order for the CUDA runtime under `opts`.
///
/// With [`CudaLoadOptions::explicit_cudart`], only that path. Otherwise the sonames
/// `libcudart.so.13`, `libcudart.so.12` (through the dynamic linker's search path), then
/// [`DEFAULT_CUDART_LIBRARY`]. The driver is always [`CUDA_DRIVER_LIBRARY`].
pub fn cuda_candidates(opts: &CudaLoadOptions) -> Vec<Candidate> {
    if let Some(path) = &opts.explicit_cudart {
        return vec![Candidate::new(path.clone(), CandidateOrigin::Explicit)];
    }
    let mut out: Vec<Candidate> = CUDART_SONAMES
        .iter()
        .map(|s| Candidate::new(*s, CandidateOrigin::Soname))
        .collect();
    out.push(Candidate::new(
        DEFAULT_CUDART_LIBRARY,
        CandidateOrigin::DefaultInstall,
    ));
    out
}

/// The CUDA runtime or driver could not be loaded.
///
/// Its own type rather than [`LoadError`], whose text speaks of the HIP runtime and its
/// settings; it converts into one (`From`) for callers that handle both alike.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub enum CudaLoadError {
    /// No candidate gave a usable CUDA runtime: every `libcudart` tried, in order, with the
    /// reason each failed.
    Runtime(Vec<LoadAttempt>),
    /// The CUDA runtime loaded, but the driver library did not.
    Driver {
        /// The runtime that did load.
        runtime: PathBuf,
        /// The driver library tried ([`CUDA_DRIVER_LIBRARY`]) and why it failed.
        attempt: LoadAttempt,
    },
}

impl CudaLoadError {
    /// Every candidate tried that failed, in order: the runtime candidates, or the driver.
    pub fn attempts(&self) -> &[LoadAttempt] {
        match self {
            CudaLoadError::Runtime(attempts) => attempts,
            CudaLoadError::Driver { attempt, .. } => std::slice::from_ref(attempt),
        }
    }

    /// The first required symbol that a library which did open was missing, if any.
    pub fn missing_symbol(&self) -> Option<&'static str> {
        self.attempts().iter().find_map(|a| match a.failure {
            LoadFailure::MissingSymbol { symbol, .. } => Some(symbol),
            LoadFailure::Open(_) => None,
        })
    }

    /// Whether only an explicit runtime path was tried (and failed).
    pub fn is_explicit(&self) -> bool {
        match self {
            CudaLoadError::Runtime(attempts) => {
                !attempts.is_empty()
                    && attempts
                        .iter()
                        .all(|a| a.candidate.origin == CandidateOrigin::Explicit)
            }
            CudaLoadError::Driver { .. } => false,
        }
    }

    /// Whether it was the driver library, not the runtime, that failed.
    pub fn is_driver(&self) -> bool {
        matches!(self, CudaLoadError::Driver { .. })
    }

    fn render(&self) -> String {
        let mut out = String::new();
        match self {
            CudaLoadError::Runtime(attempts) => match attempts.as_slice() {
                [] => out.push_str("could not load the CUDA runtime: no location was tried"),
                [only] if only.candidate.origin == CandidateOrigin::Explicit => {
                    out.push_str(&format!(
                        "could not load the CUDA runtime from {} (an explicit path, so no \
                         other location was tried): {}",
                        only.candidate.path.display(),
                        failure_text(&only.failure, "a CUDA runtime")
                    ));
                }
                attempts => {
                    out.push_str("could not load the CUDA runtime (libcudart); tried:");
                    for a in attempts {
                        out.push_str(&format!(
                            "\n  {} ({}): {}",
                            a.candidate.path.display(),
                            origin_text(a.candidate.origin),
                            failure_text(&a.failure, "a CUDA runtime")
                        ));
                    }
                }
            },
            CudaLoadError::Driver { runtime, attempt } => {
                out.push_str(&format!(
                    "loaded the CUDA runtime from {}, but not the CUDA driver library {}: {}",
                    runtime.display(),
                    attempt.candidate.path.display(),
                    failure_text(&attempt.failure, "the CUDA driver library")
                ));
            }
        }
        out.push_str(if self.is_driver() {
            "\nhint: libcuda.so.1 comes with the NVIDIA driver, not with the CUDA toolkit: \
             install the driver (in a container, run it with the NVIDIA container runtime)"
        } else if self.is_explicit() {
            "\nhint: make the explicit path name the CUDA runtime library (libcudart.so.13 or \
             libcudart.so.12, for example /usr/local/cuda/lib64/libcudart.so.13), or leave it \
             unset to search the usual places"
        } else {
            "\nhint: install the CUDA runtime (the toolkit's libcudart, in /usr/local/cuda/lib64 \
             or anywhere on the dynamic linker's search path), or give its path explicitly"
        });
        out
    }
}

impl From<CudaLoadError> for LoadError {
    /// The same attempts, in order (its text then speaks of the HIP runtime).
    fn from(e: CudaLoadError) -> LoadError {
        LoadError::new(e.attempts().to_vec())
    }
}

/// Why a candidate is in the CUDA search order, in CUDA's words.
fn origin_text(origin: CandidateOrigin) -> &'static str {
    match origin {
        CandidateOrigin::Explicit => "explicit path",
        CandidateOrigin::Soname => "dynamic linker search path",
        CandidateOrigin::DefaultInstall => "default CUDA install",
        CandidateOrigin::RocmPath => "under a ROCm path",
    }
}

/// A [`LoadFailure`]'s text for a library meant to be `what`.
fn failure_text(failure: &LoadFailure, what: &str) -> String {
    match failure {
        LoadFailure::Open(message) => message.clone(),
        LoadFailure::MissingSymbol { symbol, message } => format!(
            "opened, but it lacks the required symbol `{symbol}` (not {what}, or one too old): \
             {message}"
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// The loaded runtime
// ---------------------------------------------------------------------------------------------

/// The loaded CUDA runtime and driver.
///
/// Holds both libraries open and their function tables. Dropping it releases the handles, but
/// the libraries stay mapped (`RTLD_NODELETE`): the runtime starts threads and registers exit
/// handlers that must not outlive its code.
pub struct Cuda {
    fns: CudartFns,
    driver: CudaDriverFns,
    /// The result of `cuInit(0)`, called once, on the first driver call.
    driver_init: OnceLock<Result<(), CuError>>,
    candidate: Candidate,
    library_path: PathBuf,
    driver_path: PathBuf,
    _cudart: Library,
    _driver: Library,
}

// SAFETY: `Cuda` holds function pointers into the CUDA runtime and driver, which are documented
// as thread-safe (every entry point may be called from any thread), plus the library handles
// that keep them valid; the only interior mutability is a `OnceLock`, and the handles are only
// closed on drop.
unsafe impl Send for Cuda {}
// SAFETY: as for `Send`: shared access only reads the immutable tables, initialises the
// `OnceLock` (which synchronises itself) and calls into the thread-safe libraries.
unsafe impl Sync for Cuda {}

impl fmt::Debug for Cuda {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cuda")
            .field("library_path", &self.library_path)
            .field("driver_path", &self.driver_path)
            .field("candidate", &self.candidate)
            .field("driver_init", &self.driver_init.get())
            .finish_non_exhaustive()
    }
}

/// Resolves `name` from `library` as a function pointer of type `T`, refusing a null address.
///
/// # Safety
///
/// `T` must be an `extern "C"` function pointer type matching the symbol's C signature.
unsafe fn resolve<T: Copy>(library: &Library, name: &'static str) -> Result<T, String> {
    const { assert!(mem::size_of::<T>() == mem::size_of::<*mut c_void>()) };
    // SAFETY: the symbol is read as a plain address, which is valid for any symbol.
    let symbol = unsafe { library.get::<*mut c_void>(name.as_bytes()) };
    let address = *symbol.map_err(|e| error_chain(&e))?;
    if address.is_null() {
        return Err(format!("{name} resolves to a null address"));
    }
    // SAFETY: `address` is a non-null function address and `T` is a function pointer of the
    // same size whose signature the caller vouches for.
    Ok(unsafe { mem::transmute_copy::<*mut c_void, T>(&address) })
}

/// Resolves a required symbol, or returns the [`LoadFailure`] naming it.
macro_rules! required {
    ($library:expr, $name:ident) => {
        // SAFETY: the field's type is the C signature of the symbol of the same name.
        unsafe { resolve(&$library, stringify!($name)) }.map_err(|message| {
            LoadFailure::MissingSymbol {
                symbol: stringify!($name),
                message,
            }
        })?
    };
}

/// Opens `path` with the flags both libraries need.
fn open_library(path: &Path) -> Result<Library, LoadFailure> {
    // RTLD_NOW: a library with unresolvable dependencies fails here, not at a later call.
    // RTLD_NODELETE: see `Cuda`'s documentation.
    let flags = libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NODELETE;
    // SAFETY: opening runs the library's initialisers; per `Cuda::load`'s contract the path
    // names a CUDA runtime or driver, whose initialisers are meant to run in any process.
    unsafe { Library::open(Some(path.as_os_str()), flags) }
        .map_err(|e| LoadFailure::Open(error_chain(&e)))
}

fn open_cudart(candidate: &Candidate) -> Result<(Library, CudartFns), LoadFailure> {
    let library = open_library(&candidate.path)?;
    let fns = CudartFns {
        cudaRuntimeGetVersion: required!(library, cudaRuntimeGetVersion),
        cudaDriverGetVersion: required!(library, cudaDriverGetVersion),
        cudaGetDeviceCount: required!(library, cudaGetDeviceCount),
        cudaGetDevice: required!(library, cudaGetDevice),
        cudaSetDevice: required!(library, cudaSetDevice),
        cudaGetErrorString: required!(library, cudaGetErrorString),
        cudaGetErrorName: required!(library, cudaGetErrorName),
        cudaPointerGetAttributes: required!(library, cudaPointerGetAttributes),
        cudaMalloc: required!(library, cudaMalloc),
        cudaFree: required!(library, cudaFree),
        cudaHostAlloc: required!(library, cudaHostAlloc),
        cudaFreeHost: required!(library, cudaFreeHost),
        cudaHostRegister: required!(library, cudaHostRegister),
        cudaHostUnregister: required!(library, cudaHostUnregister),
        cudaMemcpy: required!(library, cudaMemcpy),
        cudaMemcpyAsync: required!(library, cudaMemcpyAsync),
        cudaStreamCreateWithFlags: required!(library, cudaStreamCreateWithFlags),
        cudaStreamDestroy: required!(library, cudaStreamDestroy),
        cudaStreamSynchronize: required!(library, cudaStreamSynchronize),
        cudaLaunchHostFunc: required!(library, cudaLaunchHostFunc),
        cudaEventCreate: required!(library, cudaEventCreate),
        cudaEventRecord: required!(library, cudaEventRecord),
        cudaEventSynchronize: required!(library, cudaEventSynchronize),
        cudaEventDestroy: required!(library, cudaEventDestroy),
    };
    Ok((library, fns))
}

fn open_driver(path: &Path) -> Result<(Library, CudaDriverFns), LoadFailure> {
    let library = open_library(path)?;
    let fns = CudaDriverFns {
        cuInit: required!(library, cuInit),
        cuMemGetAddressRange_v2: required!(library, cuMemGetAddressRange_v2),
        cuGetErrorString: required!(library, cuGetErrorString),
    };
    Ok((library, fns))
}

impl Cuda {
    /// Loads the CUDA runtime from the first of [`cuda_candidates(opts)`](cuda_candidates)
    /// that opens and has every required symbol, then the driver ([`CUDA_DRIVER_LIBRARY`]).
    ///
    /// Needs no GPU: `cuInit(0)` is called on the first driver call
    /// ([`driver_init`](Self::driver_init)), not here. With an explicit path, that path alone is
    /// tried.
    ///
    /// # Errors
    ///
    /// [`CudaLoadError::Runtime`] listing every runtime candidate tried and why each failed,
    /// or [`CudaLoadError::Driver`] when the runtime loaded but the driver did not.
    pub fn load(opts: &CudaLoadOptions) -> Result<Cuda, CudaLoadError> {
        let mut attempts = Vec::new();
        for candidate in cuda_candidates(opts) {
            match open_cudart(&candidate) {
                Ok((cudart, fns)) => return Cuda::with_driver(candidate, cudart, fns),
                Err(failure) => attempts.push(LoadAttempt { candidate, failure }),
            }
        }
        Err(CudaLoadError::Runtime(attempts))
    }

    /// Loads the CUDA runtime from `path` exactly (a bare soname goes through the dynamic
    /// linker's search path), then the driver.
    ///
    /// # Errors
    ///
    /// As for [`load`](Self::load), naming `path` alone.
    pub fn load_path(path: &Path) -> Result<Cuda, CudaLoadError> {
        Cuda::load(&CudaLoadOptions {
            explicit_cudart: Some(path.to_path_buf()),
        })
    }

    /// Whether the runtime and driver can be loaded with `opts`. Loads them and lets them go.
    pub fn is_present(opts: &CudaLoadOptions) -> bool {
        Cuda::load(opts).is_ok()
    }

    fn with_driver(
        candidate: Candidate,
        cudart: Library,
        fns: CudartFns,
    ) -> Result<Cuda, CudaLoadError> {
        let library_path = loaded_file(fns.cudaRuntimeGetVersion as *const c_void)
            .unwrap_or_else(|| candidate.path.clone());
        let driver_candidate = Candidate::new(CUDA_DRIVER_LIBRARY, CandidateOrigin::Soname);
        let (driver_library, driver) = match open_driver(&driver_candidate.path) {
            Ok(opened) => opened,
            Err(failure) => {
                return Err(CudaLoadError::Driver {
                    runtime: library_path,
                    attempt: LoadAttempt {
                        candidate: driver_candidate,
                        failure,
                    },
                });
            }
        };
        let driver_path = loaded_file(driver.cuInit as *const c_void)
            .unwrap_or_else(|| driver_candidate.path.clone());
        Ok(Cuda {
            fns,
            driver,
            driver_init: OnceLock::new(),
            candidate,
            library_path,
            driver_path,
            _cudart: cudart,
            _driver: driver_library,
        })
    }

    /// The file the runtime was loaded from, as the dynamic linker resolved it (for a soname,
    /// the file it found; otherwise the path given).
    pub fn library_path(&self) -> &Path {
        &self.library_path
    }

    /// The file the driver library was loaded from, as the dynamic linker resolved it.
    pub fn driver_library_path(&self) -> &Path {
        &self.driver_path
    }

    /// The runtime search candidate that was loaded.
    pub fn candidate(&self) -> &Candidate {
        &self.candidate
    }

    /// The raw runtime function table.
    pub fn fns(&self) -> &CudartFns {
        &self.fns
    }

    /// The raw driver function table.
    pub fn driver_fns(&self) -> &CudaDriverFns {
        &self.driver
    }

    /// `const char* cudaGetErrorString(cudaError_t error)` — the runtime's description of
    /// `error`.
    ///
    /// A null result gives an empty string; invalid UTF-8 is replaced.
    pub fn error_string(&self, error: CudaError) -> String {
        // SAFETY: takes an integer and returns a pointer to a static string or null.
        let text = unsafe { (self.fns.cudaGetErrorString)(error) };
        // SAFETY: a non-null result is a NUL-terminated string owned by the runtime, which
        // stays loaded.
        unsafe { c_string(text) }
    }

    /// `const char* cudaGetErrorName(cudaError_t error)` — the runtime's name for `error`
    /// (`"cudaErrorNoDevice"`).
    ///
    /// A null result gives an empty string; invalid UTF-8 is replaced.
    pub fn error_name(&self, error: CudaError) -> String {
        // SAFETY: as for `error_string`.
        let text = unsafe { (self.fns.cudaGetErrorName)(error) };
        // SAFETY: as for `error_string`.
        unsafe { c_string(text) }
    }

    /// `CUresult cuGetErrorString(CUresult error, const char** pStr)` — the driver's
    /// description of `error`.
    ///
    /// Empty when the driver does not know the code (it then fails and leaves the string
    /// null); invalid UTF-8 is replaced.
    pub fn driver_error_string(&self, error: CuError) -> String {
        let mut text: *const c_char = ptr::null();
        // SAFETY: takes an integer and writes one pointer to a valid local.
        let ret = unsafe { (self.driver.cuGetErrorString)(error, &mut text) };
        if !ret.is_success() {
            return String::new();
        }
        // SAFETY: on success the result is null or a NUL-terminated string owned by the
        // driver, which stays loaded.
        unsafe { c_string(text) }
    }

    /// `CUresult cuInit(unsigned int Flags)` — initialises the driver API (flags 0), once per
    /// `Cuda`: later calls return the first call's result.
    ///
    /// Driver wrappers call it themselves; calling it early reports a missing device or a
    /// broken driver before any work.
    ///
    /// # Errors
    ///
    /// The driver's error (`CUDA_ERROR_NO_DEVICE` without a GPU, `CUDA_ERROR_STUB_LIBRARY`
    /// when the toolkit's link stub was found instead of the driver).
    pub fn driver_init(&self) -> Result<(), CuError> {
        *self.driver_init.get_or_init(|| {
            // SAFETY: takes an integer; 0 is the only documented flag value.
            unsafe { (self.driver.cuInit)(0) }.result()
        })
    }

    fn get_int(&self, f: PFN_cudaGetInt) -> Result<i32, CudaError> {
        let mut value: c_int = 0;
        // SAFETY: `f` is one of the table's `int*` getters; it writes one `int` to `value`.
        unsafe { f(&mut value) }.result()?;
        Ok(value)
    }

    /// `cudaError_t cudaRuntimeGetVersion(int* runtimeVersion)` — the runtime's version,
    /// `major·1000 + minor·10` (see [`CudaVersion`]). Needs no device.
    ///
    /// # Errors
    ///
    /// The runtime's error.
    pub fn runtime_version(&self) -> Result<i32, CudaError> {
        self.get_int(self.fns.cudaRuntimeGetVersion)
    }

    /// `cudaError_t cudaDriverGetVersion(int* driverVersion)` — the newest CUDA version the
    /// installed driver supports (0 when there is no driver), encoded as the runtime's.
    ///
    /// # Errors
    ///
    /// The runtime's error.
    pub fn driver_version(&self) -> Result<i32, CudaError> {
        self.get_int(self.fns.cudaDriverGetVersion)
    }

    /// `cudaError_t cudaGetDeviceCount(int* count)` — the number of usable devices.
    ///
    /// # Errors
    ///
    /// The runtime's error (`cudaErrorNoDevice`, or `cudaErrorInsufficientDriver` when the
    /// driver is older than the runtime).
    pub fn device_count(&self) -> Result<i32, CudaError> {
        self.get_int(self.fns.cudaGetDeviceCount)
    }

    /// `cudaError_t cudaGetDevice(int* device)` — the calling thread's current device.
    ///
    /// # Errors
    ///
    /// The runtime's error.
    pub fn get_device(&self) -> Result<i32, CudaError> {
        self.get_int(self.fns.cudaGetDevice)
    }

    /// `cudaError_t cudaSetDevice(int device)` — sets the calling thread's current device and
    /// (from CUDA 12) makes its primary context current.
    ///
    /// # Errors
    ///
    /// The runtime's error (`cudaErrorInvalidDevice` for a bad ordinal).
    pub fn set_device(&self, device: i32) -> Result<(), CudaError> {
        // SAFETY: takes an integer; the runtime validates it.
        unsafe { (self.fns.cudaSetDevice)(device) }.result()
    }

    /// `cudaFree(NULL)` — frees nothing, but initialises the runtime and makes the current
    /// device's primary context current on the calling thread, which driver calls such as
    /// [`mem_get_address_range`](Self::mem_get_address_range) need.
    ///
    /// # Errors
    ///
    /// The runtime's error (no device, a driver too old, …).
    pub fn init_context(&self) -> Result<(), CudaError> {
        // SAFETY: freeing a null pointer is defined to do nothing to memory.
        unsafe { (self.fns.cudaFree)(ptr::null_mut()) }.result()
    }

    /// `cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes,
    /// const void* ptr)` — what the runtime knows about an address.
    ///
    /// A lookup in the runtime's tables: the address is never dereferenced, so any value may
    /// be passed. The struct passed is CUDA 13's 88 bytes, zeroed: CUDA 13 writes all of it,
    /// its reserved tail included, and older runtimes the first 24. Decode the type with
    /// [`decode_cuda_memory_type`](crate::decode_cuda_memory_type).
    ///
    /// # Errors
    ///
    /// The runtime's error. From CUDA 11 on, plain host memory is not an error but type
    /// Unregistered.
    // The runtime looks the address up in its allocation tables; it never dereferences it.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn pointer_attributes(
        &self,
        ptr: *const c_void,
    ) -> Result<cudaPointerAttributes, CudaError> {
        let mut attributes = cudaPointerAttributes::default();
        // SAFETY: `attributes` is a valid, writable, zeroed struct of CUDA 13's layout, which
        // is at least as large as any runtime writes; `ptr` is only looked up.
        unsafe { (self.fns.cudaPointerGetAttributes)(&mut attributes, ptr) }.result()?;
        Ok(attributes)
    }

    /// `CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr)`
    /// — the base and size of the device allocation containing `ptr`, from the driver API.
    ///
    /// Calls [`driver_init`](Self::driver_init) first. The driver looks the address up in the
    /// calling thread's current context: on a thread where the runtime has not yet made one
    /// current, call [`init_context`](Self::init_context) first. Any value may be passed.
    ///
    /// # Errors
    ///
    /// The driver's error: `CUDA_ERROR_INVALID_VALUE` or `CUDA_ERROR_NOT_FOUND` for an
    /// address outside every device allocation, `CUDA_ERROR_INVALID_CONTEXT` without a current
    /// context, or the error of `cuInit`.
    pub fn mem_get_address_range(&self, ptr: CUdeviceptr) -> Result<(CUdeviceptr, usize), CuError> {
        self.driver_init()?;
        let mut base: CUdeviceptr = 0;
        let mut size: usize = 0;
        // SAFETY: both out-parameters are valid locals; `ptr` is a number the driver looks up.
        unsafe { (self.driver.cuMemGetAddressRange_v2)(&mut base, &mut size, ptr) }.result()?;
        Ok((base, size))
    }

    /// `cudaError_t cudaMalloc(void** devPtr, size_t size)` — allocates `size` bytes of device
    /// memory on the current device.
    ///
    /// # Errors
    ///
    /// The runtime's error (`cudaErrorMemoryAllocation`, …).
    ///
    /// # Safety
    ///
    /// The memory is uninitialised device memory owned by the caller, who must release it
    /// once with [`free`](Self::free) on this runtime and not use it afterwards.
    pub unsafe fn malloc(&self, size: usize) -> Result<*mut c_void, CudaError> {
        let mut out: *mut c_void = ptr::null_mut();
        // SAFETY: `out` is a valid local out-parameter.
        unsafe { (self.fns.cudaMalloc)(&mut out, size) }.result()?;
        Ok(out)
    }

    /// `cudaError_t cudaFree(void* devPtr)` — releases device memory from
    /// [`malloc`](Self::malloc). It waits for the device to finish pending work first.
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// `ptr` is null or came from `malloc` on this runtime, is not freed twice, and no work
    /// still pending on any stream uses it.
    pub unsafe fn free(&self, ptr: *mut c_void) -> Result<(), CudaError> {
        // SAFETY: the caller vouches for `ptr`.
        unsafe { (self.fns.cudaFree)(ptr) }.result()
    }

    /// `cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags)` — allocates
    /// pinned host memory ([`host_malloc_flags`](crate::host_malloc_flags): CUDA's values are
    /// the same).
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// The memory is uninitialised and owned by the caller, who must release it once with
    /// [`free_host`](Self::free_host) and not use it afterwards.
    pub unsafe fn host_alloc(&self, size: usize, flags: c_uint) -> Result<*mut c_void, CudaError> {
        let mut out: *mut c_void = ptr::null_mut();
        // SAFETY: `out` is a valid local out-parameter.
        unsafe { (self.fns.cudaHostAlloc)(&mut out, size, flags) }.result()?;
        Ok(out)
    }

    /// `cudaError_t cudaFreeHost(void* ptr)` — releases memory from
    /// [`host_alloc`](Self::host_alloc).
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// `ptr` is null or came from `host_alloc` on this runtime, is not freed twice, and no
    /// pending work uses it.
    pub unsafe fn free_host(&self, ptr: *mut c_void) -> Result<(), CudaError> {
        // SAFETY: the caller vouches for `ptr`.
        unsafe { (self.fns.cudaFreeHost)(ptr) }.result()
    }

    /// `cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags)` — pins an
    /// existing host range ([`host_register_flags`](crate::host_register_flags): CUDA's values
    /// are the same).
    ///
    /// # Errors
    ///
    /// The runtime's error (`cudaErrorHostMemoryAlreadyRegistered`, …).
    ///
    /// # Safety
    ///
    /// `ptr..ptr + size` is mapped host memory that stays mapped until
    /// [`host_unregister`](Self::host_unregister).
    pub unsafe fn host_register(
        &self,
        ptr: *mut c_void,
        size: usize,
        flags: c_uint,
    ) -> Result<(), CudaError> {
        // SAFETY: the caller vouches for the range.
        unsafe { (self.fns.cudaHostRegister)(ptr, size, flags) }.result()
    }

    /// `cudaError_t cudaHostUnregister(void* ptr)` — unpins a range from
    /// [`host_register`](Self::host_register).
    ///
    /// # Errors
    ///
    /// The runtime's error (`cudaErrorHostMemoryNotRegistered`, …).
    ///
    /// # Safety
    ///
    /// No pending work uses the range.
    pub unsafe fn host_unregister(&self, ptr: *mut c_void) -> Result<(), CudaError> {
        // SAFETY: the caller vouches for `ptr`.
        unsafe { (self.fns.cudaHostUnregister)(ptr) }.result()
    }

    /// `cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind)`
    /// — copies `size` bytes and waits for the copy ([`memcpy_kind`](crate::memcpy_kind):
    /// CUDA's values are the same).
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// `src..src + size` is readable and `dst..dst + size` writable memory of the kinds
    /// `kind` names, and they do not overlap.
    pub unsafe fn memcpy(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        size: usize,
        kind: cudaMemcpyKind,
    ) -> Result<(), CudaError> {
        // SAFETY: the caller vouches for both ranges.
        unsafe { (self.fns.cudaMemcpy)(dst, src, size, kind) }.result()
    }

    /// `cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count,
    /// cudaMemcpyKind kind, cudaStream_t stream)` — queues a copy on `stream`.
    ///
    /// # Errors
    ///
    /// The runtime's error at submission; failures of the copy itself show at
    /// synchronisation.
    ///
    /// # Safety
    ///
    /// As for [`memcpy`](Self::memcpy), and both ranges stay valid (and `dst` unread, `src`
    /// unwritten by others) until the copy completes; `stream` is null or a live stream of
    /// this runtime. Host memory should be pinned, or the copy may be synchronous.
    pub unsafe fn memcpy_async(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        size: usize,
        kind: cudaMemcpyKind,
        stream: cudaStream_t,
    ) -> Result<(), CudaError> {
        // SAFETY: the caller vouches for the ranges and the stream.
        unsafe { (self.fns.cudaMemcpyAsync)(dst, src, size, kind, stream) }.result()
    }

    /// `cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags)` —
    /// creates a stream ([`stream_flags`](crate::stream_flags): `cudaStreamNonBlocking` is 1,
    /// as in HIP).
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// The caller owns the stream and destroys it once with
    /// [`stream_destroy`](Self::stream_destroy).
    pub unsafe fn stream_create(&self, flags: c_uint) -> Result<cudaStream_t, CudaError> {
        let mut stream = cudaStream_t::NULL;
        // SAFETY: `stream` is a valid local out-parameter.
        unsafe { (self.fns.cudaStreamCreateWithFlags)(&mut stream, flags) }.result()?;
        Ok(stream)
    }

    /// `cudaError_t cudaStreamDestroy(cudaStream_t stream)` — destroys a stream (work already
    /// queued on it still completes).
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// `stream` is a live stream of this runtime, destroyed once and not used afterwards.
    pub unsafe fn stream_destroy(&self, stream: cudaStream_t) -> Result<(), CudaError> {
        // SAFETY: the caller vouches for the stream.
        unsafe { (self.fns.cudaStreamDestroy)(stream) }.result()
    }

    /// `cudaError_t cudaStreamSynchronize(cudaStream_t stream)` — waits for the work queued on
    /// `stream`.
    ///
    /// # Errors
    ///
    /// The runtime's error, including failures of queued work.
    ///
    /// # Safety
    ///
    /// `stream` is null or a live stream of this runtime.
    pub unsafe fn stream_synchronize(&self, stream: cudaStream_t) -> Result<(), CudaError> {
        // SAFETY: the caller vouches for the stream.
        unsafe { (self.fns.cudaStreamSynchronize)(stream) }.result()
    }

    /// `cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData)`
    /// — queues a host callback on `stream`.
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// `stream` is null or a live stream of this runtime; `func` may be called once on a
    /// runtime thread with `user_data`, which must stay valid until then; `func` must not call
    /// CUDA functions or unwind.
    pub unsafe fn launch_host_func(
        &self,
        stream: cudaStream_t,
        func: cudaHostFn_t,
        user_data: *mut c_void,
    ) -> Result<(), CudaError> {
        // SAFETY: the caller vouches for the stream, the callback and its data.
        unsafe { (self.fns.cudaLaunchHostFunc)(stream, func, user_data) }.result()
    }

    /// `cudaError_t cudaEventCreate(cudaEvent_t* event)` — creates an event.
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// The caller owns the event and destroys it once with
    /// [`event_destroy`](Self::event_destroy).
    pub unsafe fn event_create(&self) -> Result<cudaEvent_t, CudaError> {
        let mut event = cudaEvent_t::NULL;
        // SAFETY: `event` is a valid local out-parameter.
        unsafe { (self.fns.cudaEventCreate)(&mut event) }.result()?;
        Ok(event)
    }

    /// `cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)` — records `event`
    /// after the work queued so far on `stream`.
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// `event` is a live event and `stream` null or a live stream, both of this runtime.
    pub unsafe fn event_record(
        &self,
        event: cudaEvent_t,
        stream: cudaStream_t,
    ) -> Result<(), CudaError> {
        // SAFETY: the caller vouches for both handles.
        unsafe { (self.fns.cudaEventRecord)(event, stream) }.result()
    }

    /// `cudaError_t cudaEventSynchronize(cudaEvent_t event)` — waits for `event`.
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// `event` is a live event of this runtime.
    pub unsafe fn event_synchronize(&self, event: cudaEvent_t) -> Result<(), CudaError> {
        // SAFETY: the caller vouches for the event.
        unsafe { (self.fns.cudaEventSynchronize)(event) }.result()
    }

    /// `cudaError_t cudaEventDestroy(cudaEvent_t event)` — destroys an event.
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// `event` is a live event of this runtime, destroyed once and not used afterwards.
    pub unsafe fn event_destroy(&self, event: cudaEvent_t) -> Result<(), CudaError> {
        // SAFETY: the caller vouches for the event.
        unsafe { (self.fns.cudaEventDestroy)(event) }.result()
    }
}

/// The file of the shared object that contains `address`, from `dladdr`.
fn loaded_file(address: *const c_void) -> Option<PathBuf> {
    let mut info = mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: `dladdr` only inspects `address` and fills `info`.
    let found = unsafe { libc::dladdr(address, info.as_mut_ptr()) };
    if found == 0 {
        return None;
    }
    // SAFETY: `dladdr` succeeded, so it initialised `info`.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a non-null `dli_fname` is a NUL-terminated string owned by the dynamic linker
    // for as long as the object is loaded, which it stays (`RTLD_NODELETE`).
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    if name.is_empty() {
        return None;
    }
    use std::os::unix::ffi::OsStrExt;
    Some(PathBuf::from(std::ffi::OsStr::from_bytes(name.to_bytes())))
}

/// `libloading`'s message with its sources (the dynamic linker's own text is the source).
fn error_chain(error: &libloading::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

/// Copies a C string into a `String`, null-safe and lossy.
///
/// # Safety
///
/// `text` is null or points to a NUL-terminated string valid for the call.
unsafe fn c_string(text: *const c_char) -> String {
    if text.is_null() {
        return String::new();
    }
    // SAFETY: non-null and NUL-terminated per the contract.
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
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

    #[test]
    fn versions() {
        assert_eq!(decode_cuda_version(13000), (13, 0));
        assert_eq!(CudaVersion(13000).to_string(), "13.0");
        assert_eq!(CudaVersion(12080).to_string(), "12.8");
        assert_eq!(CudaVersion(12040).to_string(), "12.4");
        assert_eq!(CudaVersion(11080).to_string(), "11.8");
        assert_eq!(CudaVersion(13010).to_string(), "13.1");
        assert_eq!(CudaVersion::new(12, 9), CudaVersion(12090));
        assert_eq!(CudaVersion(12090).major(), 12);
        assert_eq!(CudaVersion(12090).minor(), 9);
        assert_eq!(CudaVersion::CUDA_13_0.0, 13000);
        assert!(CudaVersion(12080) < CudaVersion::CUDA_13_0);
        assert_eq!(CudaVersion(0).to_string(), "0.0");
        let _ = CudaVersion(i32::MIN).to_string();
        let _ = CudaVersion(i32::MAX).to_string();
    }

    #[test]
    fn candidate_order() {
        let paths: Vec<_> = cuda_candidates(&CudaLoadOptions::default())
            .into_iter()
            .map(|c| (c.path.display().to_string(), c.origin))
            .collect();
        assert_eq!(
            paths,
            [
                ("libcudart.so.13".to_string(), CandidateOrigin::Soname),
                ("libcudart.so.12".to_string(), CandidateOrigin::Soname),
                (
                    "/usr/local/cuda/lib64/libcudart.so".to_string(),
                    CandidateOrigin::DefaultInstall
                ),
            ]
        );
        let explicit = CudaLoadOptions {
            explicit_cudart: Some("/x/libcudart.so.12".into()),
        };
        assert_eq!(
            cuda_candidates(&explicit),
            [Candidate::new(
                "/x/libcudart.so.12",
                CandidateOrigin::Explicit
            )]
        );
    }

    #[test]
    fn search_error_lists_every_attempt_in_cuda_terms() {
        let attempts = cuda_candidates(&CudaLoadOptions::default())
            .into_iter()
            .map(|candidate| LoadAttempt {
                failure: LoadFailure::Open(format!("{}: not found", candidate.path.display())),
                candidate,
            })
            .collect();
        let err = CudaLoadError::Runtime(attempts);
        let text = err.to_string();
        for c in cuda_candidates(&CudaLoadOptions::default()) {
            assert!(text.contains(&c.path.display().to_string()), "{text}");
        }
        assert!(text.contains("default CUDA install"), "{text}");
        assert!(text.contains("install the CUDA runtime"), "{text}");
        assert!(!text.contains("HIP"), "{text}");
        assert!(!text.contains("ROCm"), "{text}");
        assert!(!err.is_explicit() && !err.is_driver());
        assert_eq!(err.missing_symbol(), None);
        assert_eq!(err.attempts().len(), 3);
    }

    #[test]
    fn driver_error_names_the_driver() {
        let err = CudaLoadError::Driver {
            runtime: "/usr/local/cuda/lib64/libcudart.so.13".into(),
            attempt: LoadAttempt {
                candidate: Candidate::new(CUDA_DRIVER_LIBRARY, CandidateOrigin::Soname),
                failure: LoadFailure::Open("libcuda.so.1: cannot open shared object file".into()),
            },
        };
        let text = err.to_string();
        assert!(text.contains("libcuda.so.1"), "{text}");
        assert!(text.contains("libcudart.so.13"), "{text}");
        assert!(text.contains("NVIDIA driver"), "{text}");
        assert!(err.is_driver() && !err.is_explicit());
        assert_eq!(err.attempts().len(), 1);
        let missing = CudaLoadError::Driver {
            runtime: "libcudart.so.12".into(),
            attempt: LoadAttempt {
                candidate: Candidate::new(CUDA_DRIVER_LIBRARY, CandidateOrigin::Soname),
                failure: LoadFailure::MissingSymbol {
                    symbol: "cuMemGetAddressRange_v2",
                    message: "undefined symbol".into(),
                },
            },
        };
        assert_eq!(missing.missing_symbol(), Some("cuMemGetAddressRange_v2"));
        let text = missing.to_string();
        assert!(
            text.contains("not the CUDA driver library, or one too old"),
            "{text}"
        );
    }

    #[test]
    fn converts_to_a_load_error_with_the_same_attempts() {
        let attempt = LoadAttempt {
            candidate: Candidate::new("/no/libcudart.so", CandidateOrigin::Explicit),
            failure: LoadFailure::Open("not found".into()),
        };
        let err = CudaLoadError::Runtime(vec![attempt.clone()]);
        assert!(err.is_explicit());
        let load: LoadError = err.into();
        assert_eq!(load.attempts(), [attempt]);
        assert!(
            CudaLoadError::Runtime(Vec::new())
                .to_string()
                .contains("no location")
        );
    }

    #[test]
    fn c_string_is_null_safe_and_lossy() {
        // SAFETY: null is allowed.
        assert_eq!(unsafe { c_string(ptr::null()) }, "");
        // SAFETY: a NUL-terminated literal with an invalid byte.
        assert_eq!(unsafe { c_string(c"a\xffb".as_ptr()) }, "a\u{fffd}b");
    }

    #[test]
    fn cuda_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Cuda>();
        check::<CudartFns>();
        check::<CudaDriverFns>();
        check::<CudaLoadError>();
    }
}
