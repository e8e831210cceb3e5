//! The loaded HIP runtime: a table of function pointers ([`HipFns`]) and thin wrappers that
//! turn status codes into `Result`s ([`Hip`]), with AMD's file I/O probed through
//! `hipGetProcAddress` ([`AmdFileFns`]).
//!
//! Laid out as [`cuda`](crate::cuda) is: the status codes in [`error`], the C types in
//! [`types`], version numbers in [`version`], and where the runtime is looked for in
//! [`search`]; opening, resolving and the [`LoadError`] are the shared
//! [`loader`]'s.
//!
//! # Safety
//!
//! Every function pointer is resolved from the library that [`Hip`] keeps open, and cast to
//! the C signature of the HIP headers (given with each `PFN_` type); the pointers stay
//! valid for as long as the `Hip` lives, and the library is opened with `RTLD_NODELETE`, so it
//! stays mapped even after that. The wrappers that only query the runtime (versions, devices,
//! pointer attributes, address ranges, error strings) are safe: they pass pointers to local
//! out-parameters and never let the runtime touch caller memory. Everything that reads or
//! writes memory, or consumes a handle, is an `unsafe fn` with its contract in `# Safety`.
//!
//! Loading is a safe function although `dlopen` runs the library's initialisers: the
//! contract of [`Hip::load`] is that the candidates name a HIP runtime (or a library without
//! harmful initialisers, such as one that merely lacks the symbols), and a library that
//! exports HIP's names with other signatures is outside that contract.

// The `PFN_` aliases spell the C names they stand for.
#![allow(non_camel_case_types)]

pub mod error;
pub mod search;
pub mod types;
pub mod version;

pub use error::{HipError, hipError_t};
pub use search::{DEFAULT_ROCM_LIBRARY, LIBRARY_FILE_NAME, LoadOptions, SONAMES, candidates};
pub use types::{
    MemoryType, decode_memory_type, encode_memory_type, hipAmdFileHandle_t, hipEvent_t,
    hipHostFn_t, hipMemcpyKind, hipMemoryType, hipPointerAttribute_t, hipStream_t,
    host_malloc_flags, host_register_flags, memcpy_kind, proc_address_status, stream_flags,
    stream_wait_value,
};
pub use version::{RuntimeVersion, decode_version};

use crate::loader::{
    self, Candidate, CandidateOrigin, LibraryKind, LoadAttempt, LoadError, LoadFailure, c_string,
    loaded_file, optional, required,
};
use libloading::os::unix::Library;
use std::cell::Cell;
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::fmt;
use std::mem;
use std::path::{Path, PathBuf};
use std::ptr;

/// `hipError_t hipInit(unsigned int flags)`.
pub type PFN_hipInit = unsafe extern "C" fn(flags: c_uint) -> hipError_t;
/// `hipError_t hipRuntimeGetVersion(int* runtimeVersion)`, also the shape of
/// `hipDriverGetVersion`, `hipGetDeviceCount` and `hipGetDevice`.
pub type PFN_hipGetInt = unsafe extern "C" fn(value: *mut c_int) -> hipError_t;
/// `hipError_t hipSetDevice(int deviceId)`.
pub type PFN_hipSetDevice = unsafe extern "C" fn(device: c_int) -> hipError_t;
/// `const char* hipGetErrorString(hipError_t)`, also the shape of `hipGetErrorName`.
pub type PFN_hipGetErrorString = unsafe extern "C" fn(error: hipError_t) -> *const c_char;
/// `hipError_t hipPointerGetAttributes(hipPointerAttribute_t* attributes, const void* ptr)`.
pub type PFN_hipPointerGetAttributes =
    unsafe extern "C" fn(attributes: *mut hipPointerAttribute_t, ptr: *const c_void) -> hipError_t;
/// `hipError_t hipMemGetAddressRange(hipDeviceptr_t* pbase, size_t* psize, hipDeviceptr_t dptr)`.
pub type PFN_hipMemGetAddressRange =
    unsafe extern "C" fn(base: *mut *mut c_void, size: *mut usize, ptr: *mut c_void) -> hipError_t;
/// `hipError_t hipMalloc(void** ptr, size_t size)`.
pub type PFN_hipMalloc = unsafe extern "C" fn(ptr: *mut *mut c_void, size: usize) -> hipError_t;
/// `hipError_t hipFree(void* ptr)`, also the shape of `hipHostFree` and `hipHostUnregister`.
pub type PFN_hipFree = unsafe extern "C" fn(ptr: *mut c_void) -> hipError_t;
/// `hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags)`.
pub type PFN_hipHostMalloc =
    unsafe extern "C" fn(ptr: *mut *mut c_void, size: usize, flags: c_uint) -> hipError_t;
/// `hipError_t hipHostRegister(void* hostPtr, size_t sizeBytes, unsigned int flags)`.
pub type PFN_hipHostRegister =
    unsafe extern "C" fn(ptr: *mut c_void, size: usize, flags: c_uint) -> hipError_t;
/// `hipError_t hipMemcpy(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind)`.
pub type PFN_hipMemcpy = unsafe extern "C" fn(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: hipMemcpyKind,
) -> hipError_t;
/// `hipError_t hipMemcpyAsync(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind,
/// hipStream_t stream)`.
pub type PFN_hipMemcpyAsync = unsafe extern "C" fn(
    dst: *mut c_void,
    src: *const c_void,
    size: usize,
    kind: hipMemcpyKind,
    stream: hipStream_t,
) -> hipError_t;
/// `hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags)`.
pub type PFN_hipStreamCreateWithFlags =
    unsafe extern "C" fn(stream: *mut hipStream_t, flags: c_uint) -> hipError_t;
/// `hipError_t hipStreamDestroy(hipStream_t stream)`, also the shape of
/// `hipStreamSynchronize`.
pub type PFN_hipStreamDestroy = unsafe extern "C" fn(stream: hipStream_t) -> hipError_t;
/// `hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void* userData)`.
pub type PFN_hipLaunchHostFunc = unsafe extern "C" fn(
    stream: hipStream_t,
    func: hipHostFn_t,
    user_data: *mut c_void,
) -> hipError_t;
/// `hipError_t hipEventCreate(hipEvent_t* event)`.
pub type PFN_hipEventCreate = unsafe extern "C" fn(event: *mut hipEvent_t) -> hipError_t;
/// `hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream)`.
pub type PFN_hipEventRecord =
    unsafe extern "C" fn(event: hipEvent_t, stream: hipStream_t) -> hipError_t;
/// `hipError_t hipEventSynchronize(hipEvent_t event)`, also the shape of `hipEventDestroy`.
pub type PFN_hipEventSynchronize = unsafe extern "C" fn(event: hipEvent_t) -> hipError_t;
/// `hipError_t hipStreamQuery(hipStream_t stream)`.
pub type PFN_hipStreamQuery = unsafe extern "C" fn(stream: hipStream_t) -> hipError_t;
/// `hipError_t hipEventQuery(hipEvent_t event)`.
pub type PFN_hipEventQuery = unsafe extern "C" fn(event: hipEvent_t) -> hipError_t;
/// `hipError_t hipStreamWaitValue32(hipStream_t stream, void* ptr, uint32_t value,
/// unsigned int flags, uint32_t mask)`.
pub type PFN_hipStreamWaitValue32 = unsafe extern "C" fn(
    stream: hipStream_t,
    ptr: *mut c_void,
    value: u32,
    flags: c_uint,
    mask: u32,
) -> hipError_t;
/// `hipError_t hipStreamWaitValue64(hipStream_t stream, void* ptr, uint64_t value,
/// unsigned int flags, uint64_t mask)`.
pub type PFN_hipStreamWaitValue64 = unsafe extern "C" fn(
    stream: hipStream_t,
    ptr: *mut c_void,
    value: u64,
    flags: c_uint,
    mask: u64,
) -> hipError_t;
/// `hipError_t hipStreamWriteValue32(hipStream_t stream, void* ptr, uint32_t value,
/// unsigned int flags)`.
pub type PFN_hipStreamWriteValue32 = unsafe extern "C" fn(
    stream: hipStream_t,
    ptr: *mut c_void,
    value: u32,
    flags: c_uint,
) -> hipError_t;
/// `hipError_t hipStreamWriteValue64(hipStream_t stream, void* ptr, uint64_t value,
/// unsigned int flags)`.
pub type PFN_hipStreamWriteValue64 = unsafe extern "C" fn(
    stream: hipStream_t,
    ptr: *mut c_void,
    value: u64,
    flags: c_uint,
) -> hipError_t;
/// `hipError_t hipHostGetDevicePointer(void** devPtr, void* hostPtr, unsigned int flags)`.
pub type PFN_hipHostGetDevicePointer = unsafe extern "C" fn(
    dev_ptr: *mut *mut c_void,
    host_ptr: *mut c_void,
    flags: c_uint,
) -> hipError_t;
/// `hipError_t hipGetProcAddress(const char* symbol, void** pfn, int hipVersion,
/// uint64_t flags, hipDriverProcAddressQueryResult* symbolStatus)`.
pub type PFN_hipGetProcAddress = unsafe extern "C" fn(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    hip_version: c_int,
    flags: u64,
    symbol_status: *mut c_int,
) -> hipError_t;
/// `hipError_t hipAmdFileRead(hipAmdFileHandle_t handle, void* devicePtr, uint64_t size,
/// int64_t file_offset, uint64_t* size_copied, int32_t* status)`, also the shape of
/// `hipAmdFileWrite`.
pub type PFN_hipAmdFileIo = unsafe extern "C" fn(
    handle: hipAmdFileHandle_t,
    device_ptr: *mut c_void,
    size: u64,
    file_offset: i64,
    size_copied: *mut u64,
    status: *mut i32,
) -> hipError_t;

/// The raw function table: one field per HIP entry point, named as in C. Call them directly
/// for FFI of your own; [`Hip`]'s methods wrap the same pointers.
///
/// Optional entry points are `Option`s: absent from some runtimes (`hipLaunchHostFunc` and
/// `hipGetProcAddress` are not in ROCm 5.2's `libamdhip64.so.5`).
#[allow(non_snake_case)]
#[derive(Clone, Copy)]
pub struct HipFns {
    /// `hipInit`.
    pub hipInit: PFN_hipInit,
    /// `hipRuntimeGetVersion`.
    pub hipRuntimeGetVersion: PFN_hipGetInt,
    /// `hipDriverGetVersion`.
    pub hipDriverGetVersion: PFN_hipGetInt,
    /// `hipGetDeviceCount`.
    pub hipGetDeviceCount: PFN_hipGetInt,
    /// `hipGetDevice`.
    pub hipGetDevice: PFN_hipGetInt,
    /// `hipSetDevice`.
    pub hipSetDevice: PFN_hipSetDevice,
    /// `hipGetErrorString`.
    pub hipGetErrorString: PFN_hipGetErrorString,
    /// `hipGetErrorName`.
    pub hipGetErrorName: PFN_hipGetErrorString,
    /// `hipPointerGetAttributes`.
    pub hipPointerGetAttributes: PFN_hipPointerGetAttributes,
    /// `hipMemGetAddressRange`.
    pub hipMemGetAddressRange: PFN_hipMemGetAddressRange,
    /// `hipMalloc`.
    pub hipMalloc: PFN_hipMalloc,
    /// `hipFree`.
    pub hipFree: PFN_hipFree,
    /// `hipHostMalloc`.
    pub hipHostMalloc: PFN_hipHostMalloc,
    /// `hipHostFree`.
    pub hipHostFree: PFN_hipFree,
    /// `hipHostRegister`.
    pub hipHostRegister: PFN_hipHostRegister,
    /// `hipHostUnregister`.
    pub hipHostUnregister: PFN_hipFree,
    /// `hipMemcpy`.
    pub hipMemcpy: PFN_hipMemcpy,
    /// `hipMemcpyAsync`.
    pub hipMemcpyAsync: PFN_hipMemcpyAsync,
    /// `hipStreamCreateWithFlags`.
    pub hipStreamCreateWithFlags: PFN_hipStreamCreateWithFlags,
    /// `hipStreamDestroy`.
    pub hipStreamDestroy: PFN_hipStreamDestroy,
    /// `hipStreamSynchronize`.
    pub hipStreamSynchronize: PFN_hipStreamDestroy,
    /// `hipLaunchHostFunc` (optional: absent in ROCm 5.2).
    pub hipLaunchHostFunc: Option<PFN_hipLaunchHostFunc>,
    /// `hipEventCreate`.
    pub hipEventCreate: PFN_hipEventCreate,
    /// `hipEventRecord`.
    pub hipEventRecord: PFN_hipEventRecord,
    /// `hipEventSynchronize`.
    pub hipEventSynchronize: PFN_hipEventSynchronize,
    /// `hipEventDestroy`.
    pub hipEventDestroy: PFN_hipEventSynchronize,
    /// `hipGetProcAddress` (optional: first in ROCm 6.2).
    pub hipGetProcAddress: Option<PFN_hipGetProcAddress>,
    /// `hipStreamQuery` (optional, as every entry point below: a runtime may lack them).
    pub hipStreamQuery: Option<PFN_hipStreamQuery>,
    /// `hipEventQuery`.
    pub hipEventQuery: Option<PFN_hipEventQuery>,
    /// `hipStreamWaitValue32`.
    pub hipStreamWaitValue32: Option<PFN_hipStreamWaitValue32>,
    /// `hipStreamWaitValue64`.
    pub hipStreamWaitValue64: Option<PFN_hipStreamWaitValue64>,
    /// `hipStreamWriteValue32`.
    pub hipStreamWriteValue32: Option<PFN_hipStreamWriteValue32>,
    /// `hipStreamWriteValue64`.
    pub hipStreamWriteValue64: Option<PFN_hipStreamWriteValue64>,
    /// `hipHostGetDevicePointer`.
    pub hipHostGetDevicePointer: Option<PFN_hipHostGetDevicePointer>,
}

impl fmt::Debug for HipFns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HipFns")
            .field("hipLaunchHostFunc", &self.hipLaunchHostFunc.is_some())
            .field("hipGetProcAddress", &self.hipGetProcAddress.is_some())
            .field("hipStreamWaitValue32", &self.hipStreamWaitValue32.is_some())
            .field(
                "hipStreamWriteValue32",
                &self.hipStreamWriteValue32.is_some(),
            )
            .finish_non_exhaustive()
    }
}

/// `hipAmdFileRead` and `hipAmdFileWrite`, found through `hipGetProcAddress`.
#[allow(non_snake_case)]
#[derive(Debug, Clone, Copy)]
pub struct AmdFileFns {
    /// `hipAmdFileRead`.
    pub hipAmdFileRead: PFN_hipAmdFileIo,
    /// `hipAmdFileWrite`.
    pub hipAmdFileWrite: PFN_hipAmdFileIo,
}

/// A failed `hipAmdFileRead`/`hipAmdFileWrite`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AmdFileIoError {
    /// The kernel driver failed with this errno (the absolute value of the call's non-zero
    /// `status`); `ENODEV` and `EREMOTEIO` mean the request may be retried another way.
    #[error("AMD file I/O failed in the kernel driver: {}", std::io::Error::from_raw_os_error(*.0))]
    Status(i32),
    /// The runtime returned this error (with a zero `status`).
    #[error("AMD file I/O failed in the HIP runtime: {0}")]
    Hip(#[source] HipError),
    /// The runtime does not offer `hipAmdFileRead`/`hipAmdFileWrite`.
    #[error("the HIP runtime does not provide hipAmdFileRead/hipAmdFileWrite")]
    Unavailable,
}

impl AmdFileIoError {
    /// The errno of a [`Status`](Self::Status) failure.
    pub fn errno(self) -> Option<i32> {
        match self {
            AmdFileIoError::Status(errno) => Some(errno),
            AmdFileIoError::Hip(_) | AmdFileIoError::Unavailable => None,
        }
    }
}

/// Interprets the outputs of `hipAmdFileRead`/`hipAmdFileWrite`: `status` first (a non-zero
/// value is a negative errno from the kernel driver), then the returned error, then the count.
pub fn amd_file_io_result(
    ret: HipError,
    status: i32,
    size_copied: u64,
) -> Result<u64, AmdFileIoError> {
    if status != 0 {
        let errno = i32::try_from(status.unsigned_abs()).unwrap_or(i32::MAX);
        return Err(AmdFileIoError::Status(errno));
    }
    ret.result().map_err(AmdFileIoError::Hip)?;
    Ok(size_copied)
}

/// A query's answer: success is ready, `hipErrorNotReady` is not, anything else an error.
fn ready(status: HipError) -> Result<bool, HipError> {
    match status {
        HipError::NOT_READY => Ok(false),
        other => other.result().map(|()| true),
    }
}

thread_local! {
    /// The `hipInit` of the runtime last initialised on this thread by the AMD file-I/O
    /// wrappers (as an address), so that they call it once per thread.
    static THREAD_INIT_FOR: Cell<usize> = const { Cell::new(0) };
}

/// The loaded HIP runtime.
///
/// Holds the library open and its function table. Dropping it releases the handle, but the
/// library stays mapped (`RTLD_NODELETE`): the runtime starts threads and registers exit
/// handlers that must not outlive its code.
pub struct Hip {
    fns: HipFns,
    amd_file: Option<AmdFileFns>,
    candidate: Candidate,
    library_path: PathBuf,
    _library: Library,
}

// SAFETY: `Hip` holds function pointers into the HIP runtime, which is documented as
// thread-safe (every entry point may be called from any thread), plus the library handle that
// keeps them valid; no field has interior mutability, and the handle itself is only closed
// on drop.
unsafe impl Send for Hip {}
// SAFETY: as for `Send`: shared access only reads the immutable table and calls into the
// thread-safe runtime.
unsafe impl Sync for Hip {}

impl fmt::Debug for Hip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hip")
            .field("library_path", &self.library_path)
            .field("candidate", &self.candidate)
            .field("has_amd_file_io", &self.has_amd_file_io())
            .field("fns", &self.fns)
            .finish_non_exhaustive()
    }
}

impl Hip {
    /// Loads the HIP runtime from the first of [`candidates(opts)`](candidates) that
    /// opens and has every required symbol; never a second runtime beside one the process
    /// has already loaded.
    ///
    /// A runtime the process has already loaded under one of the [`SONAMES`] (a program
    /// linked with `-lamdhip64`, or a library that depends on it) is the one used: without
    /// an explicit path it comes before any path, and when it lacks a required symbol the
    /// load fails rather than searching on. An explicit path is loaded when it names that
    /// very object (or another object already loaded): the dynamic linker answers with it.
    /// One that names another file is refused ([`LoadFailure::SecondRuntime`]), unless no
    /// such file exists, which is reported as the failure to open it. With no runtime
    /// loaded, the explicit path alone is tried, or else the search order.
    ///
    /// # Errors
    ///
    /// [`LoadError`] listing every candidate tried and why each failed.
    pub fn load(opts: &LoadOptions) -> Result<Hip, LoadError> {
        let error = |attempts| LoadError::new(LibraryKind::HipRuntime, attempts);
        let loaded = SONAMES.iter().copied().find(|s| loader::is_loaded(s));
        match (&opts.explicit_path, loaded) {
            (Some(path), Some(soname)) if !loader::is_loaded(path) => {
                // A path (with a `/`) that names nothing is reported as missing, by the
                // failure to open it; anything else would be loaded beside the runtime in
                // use (a bare name is looked up on the dynamic linker's search path).
                let bare_name = !path.as_os_str().as_encoded_bytes().contains(&b'/');
                let names_a_file = bare_name || path.exists();
                if names_a_file {
                    let loaded = loader::loaded_object_file(soname, c"hipInit")
                        .unwrap_or_else(|| PathBuf::from(soname));
                    return Err(error(vec![LoadAttempt {
                        candidate: Candidate::new(path.clone(), CandidateOrigin::Explicit),
                        failure: LoadFailure::SecondRuntime {
                            loaded,
                            soname: soname.to_owned(),
                        },
                    }]));
                }
            }
            (None, Some(soname)) => {
                let loaded = Candidate::new(soname, CandidateOrigin::Soname);
                return loader::load_first(vec![loaded], Hip::open)
                    .map(|(_, hip)| hip)
                    .map_err(error);
            }
            _ => {}
        }
        loader::load_first(candidates(opts), Hip::open)
            .map(|(_, hip)| hip)
            .map_err(error)
    }

    /// Loads the HIP runtime from `path` exactly (a bare soname goes through the dynamic
    /// linker's search path).
    ///
    /// # Errors
    ///
    /// [`LoadError`] naming `path` and why it failed (it did not open, or lacks a required
    /// symbol).
    pub fn load_path(path: &Path) -> Result<Hip, LoadError> {
        Hip::load(&LoadOptions {
            explicit_path: Some(path.to_path_buf()),
            rocm_path: None,
        })
    }

    /// Whether a runtime can be loaded with `opts`. Loads it and lets it go.
    pub fn is_present(opts: &LoadOptions) -> bool {
        Hip::load(opts).is_ok()
    }

    fn open(candidate: &Candidate) -> Result<Hip, LoadFailure> {
        // SAFETY: per `load`'s contract the candidate is a HIP runtime, whose initialisers
        // are meant to run in any process.
        let library = unsafe { loader::open_library(&candidate.path) }?;
        let fns = HipFns {
            hipInit: required!(library, hipInit),
            hipRuntimeGetVersion: required!(library, hipRuntimeGetVersion),
            hipDriverGetVersion: required!(library, hipDriverGetVersion),
            hipGetDeviceCount: required!(library, hipGetDeviceCount),
            hipGetDevice: required!(library, hipGetDevice),
            hipSetDevice: required!(library, hipSetDevice),
            hipGetErrorString: required!(library, hipGetErrorString),
            hipGetErrorName: required!(library, hipGetErrorName),
            hipPointerGetAttributes: required!(library, hipPointerGetAttributes),
            hipMemGetAddressRange: required!(library, hipMemGetAddressRange),
            hipMalloc: required!(library, hipMalloc),
            hipFree: required!(library, hipFree),
            hipHostMalloc: required!(library, hipHostMalloc),
            hipHostFree: required!(library, hipHostFree),
            hipHostRegister: required!(library, hipHostRegister),
            hipHostUnregister: required!(library, hipHostUnregister),
            hipMemcpy: required!(library, hipMemcpy),
            hipMemcpyAsync: required!(library, hipMemcpyAsync),
            hipStreamCreateWithFlags: required!(library, hipStreamCreateWithFlags),
            hipStreamDestroy: required!(library, hipStreamDestroy),
            hipStreamSynchronize: required!(library, hipStreamSynchronize),
            hipLaunchHostFunc: optional!(library, hipLaunchHostFunc),
            hipEventCreate: required!(library, hipEventCreate),
            hipEventRecord: required!(library, hipEventRecord),
            hipEventSynchronize: required!(library, hipEventSynchronize),
            hipEventDestroy: required!(library, hipEventDestroy),
            hipGetProcAddress: optional!(library, hipGetProcAddress),
            hipStreamQuery: optional!(library, hipStreamQuery),
            hipEventQuery: optional!(library, hipEventQuery),
            hipStreamWaitValue32: optional!(library, hipStreamWaitValue32),
            hipStreamWaitValue64: optional!(library, hipStreamWaitValue64),
            hipStreamWriteValue32: optional!(library, hipStreamWriteValue32),
            hipStreamWriteValue64: optional!(library, hipStreamWriteValue64),
            hipHostGetDevicePointer: optional!(library, hipHostGetDevicePointer),
        };
        let library_path =
            loaded_file(fns.hipInit as *const c_void).unwrap_or_else(|| candidate.path.clone());
        Ok(Hip {
            amd_file: probe_amd_file_io(&fns),
            fns,
            candidate: candidate.clone(),
            library_path,
            _library: library,
        })
    }

    /// Whether the library exports `name` (any symbol, looked up, never called). Lets a
    /// caller recognise a particular implementation, such as an emulated runtime's marker.
    pub fn has_symbol(&self, name: &CStr) -> bool {
        // SAFETY: the symbol is only read as an address, which is valid for any symbol.
        let symbol = unsafe { self._library.get::<*mut c_void>(name.to_bytes_with_nul()) };
        symbol.is_ok_and(|s| !s.is_null())
    }

    /// The file the runtime was loaded from, as the dynamic linker resolved it (for a soname,
    /// the file it found; otherwise the path given).
    pub fn library_path(&self) -> &Path {
        &self.library_path
    }

    /// The search candidate that was loaded.
    pub fn candidate(&self) -> &Candidate {
        &self.candidate
    }

    /// The raw function table.
    pub fn fns(&self) -> &HipFns {
        &self.fns
    }

    /// `hipAmdFileRead`/`hipAmdFileWrite`, when the runtime provides both.
    pub fn amd_file_fns(&self) -> Option<&AmdFileFns> {
        self.amd_file.as_ref()
    }

    /// Whether the runtime provides both `hipAmdFileRead` and `hipAmdFileWrite` (probed once,
    /// at load, through `hipGetProcAddress`).
    pub fn has_amd_file_io(&self) -> bool {
        self.amd_file.is_some()
    }

    /// Whether the runtime has `hipLaunchHostFunc`.
    pub fn has_launch_host_func(&self) -> bool {
        self.fns.hipLaunchHostFunc.is_some()
    }

    /// `const char* hipGetErrorString(hipError_t error)` — the runtime's description of
    /// `error`.
    ///
    /// A null result gives an empty string; invalid UTF-8 is replaced.
    pub fn error_string(&self, error: HipError) -> String {
        // SAFETY: takes an integer and returns a pointer to a static string or null.
        let text = unsafe { (self.fns.hipGetErrorString)(error) };
        // SAFETY: a non-null result is a NUL-terminated string owned by the runtime, which
        // stays loaded.
        unsafe { c_string(text) }
    }

    /// `const char* hipGetErrorName(hipError_t error)` — the runtime's name for `error`
    /// (`"hipErrorNoDevice"`).
    ///
    /// A null result gives an empty string; invalid UTF-8 is replaced.
    pub fn error_name(&self, error: HipError) -> String {
        // SAFETY: as for `error_string`.
        let text = unsafe { (self.fns.hipGetErrorName)(error) };
        // SAFETY: as for `error_string`.
        unsafe { c_string(text) }
    }

    /// `hipError_t hipInit(unsigned int flags)` — initialises the runtime (flags 0).
    ///
    /// # Errors
    ///
    /// The runtime's error; ROCm 5.2 without a GPU returns `hipErrorInvalidDevice`.
    pub fn init(&self) -> Result<(), HipError> {
        // SAFETY: takes an integer; 0 is the only documented flag value.
        unsafe { (self.fns.hipInit)(0) }.result()
    }

    fn get_int(&self, f: PFN_hipGetInt) -> Result<i32, HipError> {
        let mut value: c_int = 0;
        // SAFETY: `f` is one of the table's `int*` getters; it writes one `int` to `value`.
        unsafe { f(&mut value) }.result()?;
        Ok(value)
    }

    /// `hipError_t hipRuntimeGetVersion(int* runtimeVersion)` — the runtime's version,
    /// `major·10⁷ + minor·10⁵ + patch` (see [`RuntimeVersion`]).
    ///
    /// # Errors
    ///
    /// The runtime's error.
    pub fn runtime_version(&self) -> Result<i32, HipError> {
        self.get_int(self.fns.hipRuntimeGetVersion)
    }

    /// `hipError_t hipDriverGetVersion(int* driverVersion)` — the driver's version.
    ///
    /// # Errors
    ///
    /// The runtime's error.
    pub fn driver_version(&self) -> Result<i32, HipError> {
        self.get_int(self.fns.hipDriverGetVersion)
    }

    /// `hipError_t hipGetDeviceCount(int* count)` — the number of usable devices.
    ///
    /// # Errors
    ///
    /// The runtime's error; ROCm 5.2 without a GPU returns `hipErrorNoDevice`.
    pub fn device_count(&self) -> Result<i32, HipError> {
        self.get_int(self.fns.hipGetDeviceCount)
    }

    /// `hipError_t hipGetDevice(int* deviceId)` — the calling thread's current device.
    ///
    /// # Errors
    ///
    /// The runtime's error.
    pub fn get_device(&self) -> Result<i32, HipError> {
        self.get_int(self.fns.hipGetDevice)
    }

    /// `hipError_t hipSetDevice(int deviceId)` — sets the calling thread's current device.
    ///
    /// # Errors
    ///
    /// The runtime's error (`hipErrorInvalidDevice` for a bad ordinal).
    pub fn set_device(&self, device: i32) -> Result<(), HipError> {
        // SAFETY: takes an integer; the runtime validates it.
        unsafe { (self.fns.hipSetDevice)(device) }.result()
    }

    /// `hipError_t hipPointerGetAttributes(hipPointerAttribute_t* attributes,
    /// const void* ptr)` — what the runtime knows about an address.
    ///
    /// A lookup in the runtime's tables: the address is never dereferenced, so any value may
    /// be passed. Decode the type with
    /// [`hipPointerAttribute_t::memory_type`] and the runtime version.
    ///
    /// # Errors
    ///
    /// The runtime's error; ROCm 5 returns `hipErrorInvalidValue` for memory it does not
    /// know (ROCm ≥ 6 succeeds with type Unregistered).
    // The runtime looks the address up in its allocation tables; it never dereferences it.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn pointer_attributes(
        &self,
        ptr: *const c_void,
    ) -> Result<hipPointerAttribute_t, HipError> {
        let mut attributes = hipPointerAttribute_t::default();
        // SAFETY: `attributes` is a valid, writable struct of the C layout; `ptr` is only
        // looked up.
        unsafe { (self.fns.hipPointerGetAttributes)(&mut attributes, ptr) }.result()?;
        Ok(attributes)
    }

    /// `hipError_t hipMemGetAddressRange(hipDeviceptr_t* pbase, size_t* psize,
    /// hipDeviceptr_t dptr)` — the base and size of the allocation containing `ptr`.
    ///
    /// A lookup like [`pointer_attributes`](Self::pointer_attributes): any value may be
    /// passed.
    ///
    /// # Errors
    ///
    /// The runtime's error (`hipErrorNotFound` or `hipErrorInvalidDevicePointer` for an
    /// address outside every allocation).
    pub fn mem_get_address_range(
        &self,
        ptr: *const c_void,
    ) -> Result<(*mut c_void, usize), HipError> {
        let mut base: *mut c_void = ptr::null_mut();
        let mut size: usize = 0;
        // SAFETY: both out-parameters are valid locals; `ptr` is only looked up.
        unsafe { (self.fns.hipMemGetAddressRange)(&mut base, &mut size, ptr.cast_mut()) }
            .result()?;
        Ok((base, size))
    }

    /// `hipError_t hipMalloc(void** ptr, size_t size)` — allocates `size` bytes of device
    /// memory on the current device.
    ///
    /// # Errors
    ///
    /// The runtime's error (`hipErrorOutOfMemory`, …).
    ///
    /// # Safety
    ///
    /// The memory is uninitialised device memory owned by the caller, who must release it
    /// once with [`free`](Self::free) on this runtime and not use it afterwards.
    pub unsafe fn malloc(&self, size: usize) -> Result<*mut c_void, HipError> {
        let mut out: *mut c_void = ptr::null_mut();
        // SAFETY: `out` is a valid local out-parameter.
        unsafe { (self.fns.hipMalloc)(&mut out, size) }.result()?;
        Ok(out)
    }

    /// `hipError_t hipFree(void* ptr)` — releases device memory from
    /// [`malloc`](Self::malloc).
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// `ptr` is null or came from `malloc` on this runtime, is not freed twice, and no work
    /// still pending on any stream uses it.
    pub unsafe fn free(&self, ptr: *mut c_void) -> Result<(), HipError> {
        // SAFETY: the caller vouches for `ptr`.
        unsafe { (self.fns.hipFree)(ptr) }.result()
    }

    /// `hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags)` — allocates
    /// pinned host memory ([`host_malloc_flags`]).
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// The memory is uninitialised and owned by the caller, who must release it once with
    /// [`host_free`](Self::host_free) and not use it afterwards.
    pub unsafe fn host_malloc(&self, size: usize, flags: c_uint) -> Result<*mut c_void, HipError> {
        let mut out: *mut c_void = ptr::null_mut();
        // SAFETY: `out` is a valid local out-parameter.
        unsafe { (self.fns.hipHostMalloc)(&mut out, size, flags) }.result()?;
        Ok(out)
    }

    /// `hipError_t hipHostFree(void* ptr)` — releases memory from
    /// [`host_malloc`](Self::host_malloc).
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// `ptr` is null or came from `host_malloc` on this runtime, is not freed twice, and no
    /// pending work uses it.
    pub unsafe fn host_free(&self, ptr: *mut c_void) -> Result<(), HipError> {
        // SAFETY: the caller vouches for `ptr`.
        unsafe { (self.fns.hipHostFree)(ptr) }.result()
    }

    /// `hipError_t hipHostRegister(void* hostPtr, size_t sizeBytes, unsigned int flags)` —
    /// pins an existing host range ([`host_register_flags`]).
    ///
    /// # Errors
    ///
    /// The runtime's error (`hipErrorHostMemoryAlreadyRegistered`, …).
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
    ) -> Result<(), HipError> {
        // SAFETY: the caller vouches for the range.
        unsafe { (self.fns.hipHostRegister)(ptr, size, flags) }.result()
    }

    /// `hipError_t hipHostUnregister(void* hostPtr)` — unpins a range from
    /// [`host_register`](Self::host_register).
    ///
    /// # Errors
    ///
    /// The runtime's error (`hipErrorHostMemoryNotRegistered`, …).
    ///
    /// # Safety
    ///
    /// No pending work uses the range.
    pub unsafe fn host_unregister(&self, ptr: *mut c_void) -> Result<(), HipError> {
        // SAFETY: the caller vouches for `ptr`.
        unsafe { (self.fns.hipHostUnregister)(ptr) }.result()
    }

    /// `hipError_t hipMemcpy(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind
    /// kind)` — copies `size` bytes and waits for the copy
    /// ([`memcpy_kind`]).
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
        kind: hipMemcpyKind,
    ) -> Result<(), HipError> {
        // SAFETY: the caller vouches for both ranges.
        unsafe { (self.fns.hipMemcpy)(dst, src, size, kind) }.result()
    }

    /// `hipError_t hipMemcpyAsync(void* dst, const void* src, size_t sizeBytes,
    /// hipMemcpyKind kind, hipStream_t stream)` — queues a copy on `stream`.
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
        kind: hipMemcpyKind,
        stream: hipStream_t,
    ) -> Result<(), HipError> {
        // SAFETY: the caller vouches for the ranges and the stream.
        unsafe { (self.fns.hipMemcpyAsync)(dst, src, size, kind, stream) }.result()
    }

    /// `hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags)` —
    /// creates a stream ([`stream_flags`]).
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// The caller owns the stream and destroys it once with
    /// [`stream_destroy`](Self::stream_destroy).
    pub unsafe fn stream_create(&self, flags: c_uint) -> Result<hipStream_t, HipError> {
        let mut stream = hipStream_t::NULL;
        // SAFETY: `stream` is a valid local out-parameter.
        unsafe { (self.fns.hipStreamCreateWithFlags)(&mut stream, flags) }.result()?;
        Ok(stream)
    }

    /// `hipError_t hipStreamDestroy(hipStream_t stream)` — destroys a stream.
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// `stream` is a live stream of this runtime, destroyed once and not used afterwards.
    pub unsafe fn stream_destroy(&self, stream: hipStream_t) -> Result<(), HipError> {
        // SAFETY: the caller vouches for the stream.
        unsafe { (self.fns.hipStreamDestroy)(stream) }.result()
    }

    /// `hipError_t hipStreamSynchronize(hipStream_t stream)` — waits for the work queued on
    /// `stream`.
    ///
    /// # Errors
    ///
    /// The runtime's error, including failures of queued work.
    ///
    /// # Safety
    ///
    /// `stream` is null or a live stream of this runtime.
    pub unsafe fn stream_synchronize(&self, stream: hipStream_t) -> Result<(), HipError> {
        // SAFETY: the caller vouches for the stream.
        unsafe { (self.fns.hipStreamSynchronize)(stream) }.result()
    }

    /// `hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void* userData)` —
    /// queues a host callback on `stream`.
    ///
    /// # Errors
    ///
    /// [`HipError::NOT_SUPPORTED`] when the runtime lacks `hipLaunchHostFunc` (ROCm 5.2; see
    /// [`has_launch_host_func`](Self::has_launch_host_func)), otherwise the runtime's error.
    ///
    /// # Safety
    ///
    /// `stream` is null or a live stream of this runtime; `func` may be called once on a
    /// runtime thread with `user_data`, which must stay valid until then; `func` must not
    /// call HIP stream functions or unwind.
    pub unsafe fn launch_host_func(
        &self,
        stream: hipStream_t,
        func: hipHostFn_t,
        user_data: *mut c_void,
    ) -> Result<(), HipError> {
        let Some(launch) = self.fns.hipLaunchHostFunc else {
            return Err(HipError::NOT_SUPPORTED);
        };
        // SAFETY: the caller vouches for the stream, the callback and its data.
        unsafe { launch(stream, func, user_data) }.result()
    }

    /// Whether the runtime has `hipStreamWaitValue32` and `hipStreamWriteValue32` (and
    /// `hipHostGetDevicePointer`, which finds the address they take).
    pub fn has_stream_wait_value(&self) -> bool {
        self.fns.hipStreamWaitValue32.is_some()
            && self.fns.hipStreamWriteValue32.is_some()
            && self.fns.hipHostGetDevicePointer.is_some()
    }

    /// `hipError_t hipStreamQuery(hipStream_t stream)` — whether `stream` has finished all
    /// its work: `Ok(false)` for `hipErrorNotReady`.
    ///
    /// # Errors
    ///
    /// [`HipError::NOT_SUPPORTED`] when the runtime lacks `hipStreamQuery`, otherwise the
    /// runtime's error.
    ///
    /// # Safety
    ///
    /// `stream` is null or a live stream of this runtime.
    pub unsafe fn stream_query(&self, stream: hipStream_t) -> Result<bool, HipError> {
        let Some(query) = self.fns.hipStreamQuery else {
            return Err(HipError::NOT_SUPPORTED);
        };
        // SAFETY: the caller vouches for the stream.
        ready(unsafe { query(stream) })
    }

    /// `hipError_t hipEventQuery(hipEvent_t event)` — whether `event` is complete:
    /// `Ok(false)` for `hipErrorNotReady`.
    ///
    /// # Errors
    ///
    /// [`HipError::NOT_SUPPORTED`] when the runtime lacks `hipEventQuery`, otherwise the
    /// runtime's error.
    ///
    /// # Safety
    ///
    /// `event` is a live event of this runtime.
    pub unsafe fn event_query(&self, event: hipEvent_t) -> Result<bool, HipError> {
        let Some(query) = self.fns.hipEventQuery else {
            return Err(HipError::NOT_SUPPORTED);
        };
        // SAFETY: the caller vouches for the event.
        ready(unsafe { query(event) })
    }

    /// `hipError_t hipStreamWaitValue32(hipStream_t stream, void* ptr, uint32_t value,
    /// unsigned int flags, uint32_t mask)` — the stream's later work waits until the word at
    /// `ptr` satisfies `flags` ([`stream_wait_value`]) for `value` under `mask`.
    ///
    /// # Errors
    ///
    /// [`HipError::NOT_SUPPORTED`] when the runtime lacks it (see
    /// [`has_stream_wait_value`](Self::has_stream_wait_value)), otherwise the runtime's error.
    ///
    /// # Safety
    ///
    /// `stream` is null or a live stream of this runtime; `ptr` is the device address of a
    /// 4-byte-aligned word of mapped host memory or device memory of this runtime, which
    /// stays allocated until the wait has ended.
    pub unsafe fn stream_wait_value32(
        &self,
        stream: hipStream_t,
        ptr: *mut c_void,
        value: u32,
        flags: c_uint,
        mask: u32,
    ) -> Result<(), HipError> {
        let Some(wait) = self.fns.hipStreamWaitValue32 else {
            return Err(HipError::NOT_SUPPORTED);
        };
        // SAFETY: the caller vouches for the stream and the word.
        unsafe { wait(stream, ptr, value, flags, mask) }.result()
    }

    /// `hipError_t hipStreamWaitValue64(hipStream_t stream, void* ptr, uint64_t value,
    /// unsigned int flags, uint64_t mask)` — [`stream_wait_value32`](Self::stream_wait_value32)
    /// on a 64-bit word.
    ///
    /// # Errors
    ///
    /// As [`stream_wait_value32`](Self::stream_wait_value32).
    ///
    /// # Safety
    ///
    /// As [`stream_wait_value32`](Self::stream_wait_value32), the word 8-byte aligned.
    pub unsafe fn stream_wait_value64(
        &self,
        stream: hipStream_t,
        ptr: *mut c_void,
        value: u64,
        flags: c_uint,
        mask: u64,
    ) -> Result<(), HipError> {
        let Some(wait) = self.fns.hipStreamWaitValue64 else {
            return Err(HipError::NOT_SUPPORTED);
        };
        // SAFETY: the caller vouches for the stream and the word.
        unsafe { wait(stream, ptr, value, flags, mask) }.result()
    }

    /// `hipError_t hipStreamWriteValue32(hipStream_t stream, void* ptr, uint32_t value,
    /// unsigned int flags)` — writes `value` to the word at `ptr` when the stream reaches
    /// this point (flags 0).
    ///
    /// # Errors
    ///
    /// [`HipError::NOT_SUPPORTED`] when the runtime lacks it, otherwise the runtime's error.
    ///
    /// # Safety
    ///
    /// As [`stream_wait_value32`](Self::stream_wait_value32), until the write is done.
    pub unsafe fn stream_write_value32(
        &self,
        stream: hipStream_t,
        ptr: *mut c_void,
        value: u32,
        flags: c_uint,
    ) -> Result<(), HipError> {
        let Some(write) = self.fns.hipStreamWriteValue32 else {
            return Err(HipError::NOT_SUPPORTED);
        };
        // SAFETY: the caller vouches for the stream and the word.
        unsafe { write(stream, ptr, value, flags) }.result()
    }

    /// `hipError_t hipStreamWriteValue64(hipStream_t stream, void* ptr, uint64_t value,
    /// unsigned int flags)` — [`stream_write_value32`](Self::stream_write_value32) on a
    /// 64-bit word.
    ///
    /// # Errors
    ///
    /// As [`stream_write_value32`](Self::stream_write_value32).
    ///
    /// # Safety
    ///
    /// As [`stream_wait_value64`](Self::stream_wait_value64), until the write is done.
    pub unsafe fn stream_write_value64(
        &self,
        stream: hipStream_t,
        ptr: *mut c_void,
        value: u64,
        flags: c_uint,
    ) -> Result<(), HipError> {
        let Some(write) = self.fns.hipStreamWriteValue64 else {
            return Err(HipError::NOT_SUPPORTED);
        };
        // SAFETY: the caller vouches for the stream and the word.
        unsafe { write(stream, ptr, value, flags) }.result()
    }

    /// `hipError_t hipHostGetDevicePointer(void** devPtr, void* hostPtr, unsigned int flags)`
    /// — the device address of mapped host memory (flags 0).
    ///
    /// A lookup in the runtime's tables: `host` is never dereferenced.
    ///
    /// # Errors
    ///
    /// [`HipError::NOT_SUPPORTED`] when the runtime lacks it, otherwise the runtime's error
    /// (`hipErrorInvalidValue` for memory that is not mapped host memory of this runtime).
    // The runtime looks the address up in its allocation tables; it never dereferences it.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn host_get_device_pointer(&self, host: *mut c_void) -> Result<*mut c_void, HipError> {
        let Some(get) = self.fns.hipHostGetDevicePointer else {
            return Err(HipError::NOT_SUPPORTED);
        };
        let mut device = ptr::null_mut();
        // SAFETY: `device` is a valid local out-parameter; `host` is only looked up.
        unsafe { get(&mut device, host, 0) }.result()?;
        Ok(device)
    }

    /// `hipError_t hipEventCreate(hipEvent_t* event)` — creates an event.
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// The caller owns the event and destroys it once with
    /// [`event_destroy`](Self::event_destroy).
    pub unsafe fn event_create(&self) -> Result<hipEvent_t, HipError> {
        let mut event = hipEvent_t::NULL;
        // SAFETY: `event` is a valid local out-parameter.
        unsafe { (self.fns.hipEventCreate)(&mut event) }.result()?;
        Ok(event)
    }

    /// `hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream)` — records `event`
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
        event: hipEvent_t,
        stream: hipStream_t,
    ) -> Result<(), HipError> {
        // SAFETY: the caller vouches for both handles.
        unsafe { (self.fns.hipEventRecord)(event, stream) }.result()
    }

    /// `hipError_t hipEventSynchronize(hipEvent_t event)` — waits for `event`.
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// `event` is a live event of this runtime.
    pub unsafe fn event_synchronize(&self, event: hipEvent_t) -> Result<(), HipError> {
        // SAFETY: the caller vouches for the event.
        unsafe { (self.fns.hipEventSynchronize)(event) }.result()
    }

    /// `hipError_t hipEventDestroy(hipEvent_t event)` — destroys an event.
    ///
    /// # Errors
    ///
    /// The runtime's error.
    ///
    /// # Safety
    ///
    /// `event` is a live event of this runtime, destroyed once and not used afterwards.
    pub unsafe fn event_destroy(&self, event: hipEvent_t) -> Result<(), HipError> {
        // SAFETY: the caller vouches for the event.
        unsafe { (self.fns.hipEventDestroy)(event) }.result()
    }

    /// Calls `hipInit(0)` the first time this thread uses this runtime's file I/O: older
    /// runtimes crash if `hipAmdFileRead`/`Write` is a thread's first HIP call.
    fn init_this_thread(&self) -> Result<(), HipError> {
        let key = self.fns.hipInit as usize;
        if THREAD_INIT_FOR.with(Cell::get) == key {
            return Ok(());
        }
        self.init()?;
        THREAD_INIT_FOR.with(|c| c.set(key));
        Ok(())
    }

    /// Shared body of `amd_file_read`/`amd_file_write`.
    ///
    /// # Safety
    ///
    /// As for [`amd_file_read`](Self::amd_file_read); `f` is one of the two entry points.
    unsafe fn amd_file_io(
        &self,
        f: PFN_hipAmdFileIo,
        handle: hipAmdFileHandle_t,
        dev_ptr: *mut c_void,
        size: u64,
        offset: i64,
    ) -> Result<u64, AmdFileIoError> {
        self.init_this_thread().map_err(AmdFileIoError::Hip)?;
        let mut size_copied: u64 = 0;
        let mut status: i32 = 0;
        // SAFETY: the out-parameters are valid locals; the caller vouches for the handle and
        // the device range.
        let ret = unsafe { f(handle, dev_ptr, size, offset, &mut size_copied, &mut status) };
        amd_file_io_result(ret, status, size_copied)
    }

    /// `hipError_t hipAmdFileRead(hipAmdFileHandle_t handle, void* devicePtr, uint64_t size,
    /// int64_t file_offset, uint64_t* size_copied, int32_t* status)` — reads file bytes
    /// straight into device memory; returns the bytes copied (possibly fewer than `size`).
    ///
    /// Calls `hipInit(0)` first on a thread that has not yet done so through these wrappers.
    /// The kernel driver wants `offset` and `size` 4 KiB-aligned, VRAM, and an `O_DIRECT`
    /// descriptor.
    ///
    /// # Errors
    ///
    /// [`AmdFileIoError::Unavailable`] without the capability
    /// ([`has_amd_file_io`](Self::has_amd_file_io)); [`AmdFileIoError::Status`] with the
    /// errno when the call's `status` is non-zero (checked first); otherwise
    /// [`AmdFileIoError::Hip`] for a failed return code.
    ///
    /// # Safety
    ///
    /// `handle` holds an open file descriptor; `dev_ptr..dev_ptr + size` is device memory of
    /// this runtime that nothing else accesses until the call returns.
    pub unsafe fn amd_file_read(
        &self,
        handle: hipAmdFileHandle_t,
        dev_ptr: *mut c_void,
        size: u64,
        offset: i64,
    ) -> Result<u64, AmdFileIoError> {
        let f = self
            .amd_file
            .ok_or(AmdFileIoError::Unavailable)?
            .hipAmdFileRead;
        // SAFETY: the caller upholds this function's contract, which is `amd_file_io`'s.
        unsafe { self.amd_file_io(f, handle, dev_ptr, size, offset) }
    }

    /// `hipError_t hipAmdFileWrite(hipAmdFileHandle_t handle, void* devicePtr, uint64_t size,
    /// int64_t file_offset, uint64_t* size_copied, int32_t* status)` — writes device memory
    /// straight to the file; returns the bytes copied (possibly fewer than `size`).
    ///
    /// As for [`amd_file_read`](Self::amd_file_read).
    ///
    /// # Errors
    ///
    /// As for [`amd_file_read`](Self::amd_file_read).
    ///
    /// # Safety
    ///
    /// `handle` holds an open file descriptor; `dev_ptr..dev_ptr + size` is device memory of
    /// this runtime that nothing writes until the call returns.
    pub unsafe fn amd_file_write(
        &self,
        handle: hipAmdFileHandle_t,
        dev_ptr: *mut c_void,
        size: u64,
        offset: i64,
    ) -> Result<u64, AmdFileIoError> {
        let f = self
            .amd_file
            .ok_or(AmdFileIoError::Unavailable)?
            .hipAmdFileWrite;
        // SAFETY: the caller upholds this function's contract, which is `amd_file_io`'s.
        unsafe { self.amd_file_io(f, handle, dev_ptr, size, offset) }
    }
}

/// Probes `hipAmdFileRead`/`hipAmdFileWrite` through `hipGetProcAddress` with the runtime's
/// own version. Any failure means the capability is absent.
fn probe_amd_file_io(fns: &HipFns) -> Option<AmdFileFns> {
    let get_proc_address = fns.hipGetProcAddress?;
    let mut version: c_int = 0;
    // SAFETY: writes one `int` to a valid local.
    unsafe { (fns.hipRuntimeGetVersion)(&mut version) }
        .result()
        .ok()?;
    let lookup = |name: &CStr| -> Option<PFN_hipAmdFileIo> {
        let mut pfn: *mut c_void = ptr::null_mut();
        let mut status: c_int = -1;
        // SAFETY: `name` is NUL-terminated; both out-parameters are valid locals.
        let ret = unsafe { get_proc_address(name.as_ptr(), &mut pfn, version, 0, &mut status) };
        if !ret.is_success() || status != proc_address_status::SUCCESS || pfn.is_null() {
            return None;
        }
        // SAFETY: the runtime returned the non-null address of the named entry point, whose
        // C signature is `PFN_hipAmdFileIo`.
        Some(unsafe { mem::transmute::<*mut c_void, PFN_hipAmdFileIo>(pfn) })
    };
    Some(AmdFileFns {
        hipAmdFileRead: lookup(c"hipAmdFileRead")?,
        hipAmdFileWrite: lookup(c"hipAmdFileWrite")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_is_checked_before_the_return_code() {
        assert_eq!(
            amd_file_io_result(HipError::INVALID_VALUE, -libc::ENODEV, 0),
            Err(AmdFileIoError::Status(libc::ENODEV))
        );
        assert_eq!(
            amd_file_io_result(HipError::SUCCESS, -libc::EREMOTEIO, 4096),
            Err(AmdFileIoError::Status(libc::EREMOTEIO))
        );
        assert_eq!(
            amd_file_io_result(HipError::SUCCESS, libc::EIO, 0),
            Err(AmdFileIoError::Status(libc::EIO))
        );
        assert_eq!(
            amd_file_io_result(HipError::SUCCESS, i32::MIN, 0),
            Err(AmdFileIoError::Status(i32::MAX))
        );
    }

    #[test]
    fn return_code_then_count() {
        assert_eq!(
            amd_file_io_result(HipError::INVALID_VALUE, 0, 0),
            Err(AmdFileIoError::Hip(HipError::INVALID_VALUE))
        );
        assert_eq!(amd_file_io_result(HipError::SUCCESS, 0, 8192), Ok(8192));
        assert_eq!(amd_file_io_result(HipError::SUCCESS, 0, 0), Ok(0));
    }

    #[test]
    fn amd_file_error_text() {
        let e = AmdFileIoError::Status(libc::ENODEV);
        assert_eq!(e.errno(), Some(libc::ENODEV));
        // The errno is said once, by the standard library's text.
        assert_eq!(
            e.to_string(),
            format!(
                "AMD file I/O failed in the kernel driver: No such device (os error {})",
                libc::ENODEV
            )
        );
        let h = AmdFileIoError::Hip(HipError::NO_DEVICE);
        assert_eq!(h.errno(), None);
        assert!(h.to_string().contains("hipErrorNoDevice (100)"), "{h}");
        assert!(std::error::Error::source(&h).is_some());
        assert!(
            AmdFileIoError::Unavailable
                .to_string()
                .contains("hipAmdFileRead")
        );
    }

    #[test]
    fn queries_read_not_ready_as_false() {
        assert_eq!(ready(HipError::SUCCESS), Ok(true));
        assert_eq!(ready(HipError::NOT_READY), Ok(false));
        assert_eq!(
            ready(HipError::INVALID_HANDLE),
            Err(HipError::INVALID_HANDLE)
        );
    }

    #[test]
    fn hip_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Hip>();
        check::<HipFns>();
    }
}
