//! The loaded CUDA runtime (`libcudart`) and driver (`libcuda.so.1`), for NVIDIA GPUs: two
//! tables of function pointers ([`CudartFns`], [`CudaDriverFns`]) and thin wrappers that turn
//! status codes into `Result`s ([`Cuda`]).
//!
//! HIP on NVIDIA is a set of inline wrappers over CUDA, so there is no HIP library to load
//! there: this module maps the few runtime calls hipfile needs, plus one driver call the
//! runtime API lacks (`cuMemGetAddressRange_v2`, which needs `cuInit(0)`), and the driver's
//! stream memory operations (`cuStreamWaitValue32_v2` and kin, optional).
//!
//! The two APIs have separate code spaces, kept apart by type: runtime calls return
//! `cudaError_t` ([`CudaError`]), driver calls `CUresult` ([`CuError`]); see [`error`].
//!
//! Laid out as [`hip`](crate::hip) is: the function tables and the loaded libraries here, the
//! status codes in [`error`], the C types in [`types`], version numbers in [`version`], and
//! where the libraries are looked for in [`search`]; opening, resolving and the
//! [`LoadError`] are the shared [`loader`]'s.
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

pub mod error;
pub mod search;
pub mod types;
pub mod version;

pub use error::{CUresult, CuError, CudaError, cudaError_t};
pub use search::{
    CUDA_DRIVER_LIBRARY, CUDART_SONAMES, CudaLoadOptions, DEFAULT_CUDART_LIBRARY, cuda_candidates,
};
pub use types::{
    CUdeviceptr, cu_stream_value, cudaEvent_t, cudaHostFn_t, cudaMemcpyKind, cudaMemoryType,
    cudaPointerAttributes, cudaStream_t, decode_cuda_memory_type,
};
pub use version::{CudaVersion, decode_cuda_version};

use crate::loader::{
    self, Candidate, CandidateOrigin, LibraryKind, LoadAttempt, LoadError, LoadFailure, c_string,
    loaded_file, optional, required,
};
use libloading::os::unix::Library;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::fmt;
use std::path::{Path, PathBuf};
use std::ptr;
use std::sync::OnceLock;

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
/// `cudaError_t cudaStreamQuery(cudaStream_t stream)`.
pub type PFN_cudaStreamQuery = unsafe extern "C" fn(stream: cudaStream_t) -> cudaError_t;
/// `cudaError_t cudaEventQuery(cudaEvent_t event)`.
pub type PFN_cudaEventQuery = unsafe extern "C" fn(event: cudaEvent_t) -> cudaError_t;
/// `cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags)`.
pub type PFN_cudaHostGetDevicePointer =
    unsafe extern "C" fn(device: *mut *mut c_void, host: *mut c_void, flags: c_uint) -> cudaError_t;
/// `CUresult cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
/// unsigned int flags)`, also the shape of `cuStreamWriteValue32_v2`. `CUstream` is the
/// same handle as `cudaStream_t`.
pub type PFN_cuStreamValue32 = unsafe extern "C" fn(
    stream: cudaStream_t,
    addr: CUdeviceptr,
    value: u32,
    flags: c_uint,
) -> CUresult;
/// `CUresult cuStreamWaitValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value,
/// unsigned int flags)`, also the shape of `cuStreamWriteValue64_v2`.
pub type PFN_cuStreamValue64 = unsafe extern "C" fn(
    stream: cudaStream_t,
    addr: CUdeviceptr,
    value: u64,
    flags: c_uint,
) -> CUresult;
/// `cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device)`.
pub type PFN_cudaDeviceGetPCIBusId =
    unsafe extern "C" fn(bus_id: *mut c_char, len: c_int, device: c_int) -> cudaError_t;
/// `CUresult cuGetErrorString(CUresult error, const char** pStr)`.
pub type PFN_cuGetErrorString =
    unsafe extern "C" fn(error: CUresult, text: *mut *const c_char) -> CUresult;

/// The raw CUDA runtime function table: one field per entry point, named as in C. Call them
/// directly for FFI of your own; [`Cuda`]'s methods wrap the same pointers.
///
/// The entries that are not `Option`s are required: all are in CUDA 12 and 13. The optional
/// ones are there too, but hipfile does not need them to work.
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
    /// `cudaStreamQuery`.
    pub cudaStreamQuery: Option<PFN_cudaStreamQuery>,
    /// `cudaEventQuery`.
    pub cudaEventQuery: Option<PFN_cudaEventQuery>,
    /// `cudaHostGetDevicePointer`.
    pub cudaHostGetDevicePointer: Option<PFN_cudaHostGetDevicePointer>,
    /// `cudaDeviceGetPCIBusId`.
    pub cudaDeviceGetPCIBusId: Option<PFN_cudaDeviceGetPCIBusId>,
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
    /// `cuStreamWaitValue32_v2` (optional, as the three below: first in CUDA 11.7).
    pub cuStreamWaitValue32_v2: Option<PFN_cuStreamValue32>,
    /// `cuStreamWaitValue64_v2`.
    pub cuStreamWaitValue64_v2: Option<PFN_cuStreamValue64>,
    /// `cuStreamWriteValue32_v2`.
    pub cuStreamWriteValue32_v2: Option<PFN_cuStreamValue32>,
    /// `cuStreamWriteValue64_v2`.
    pub cuStreamWriteValue64_v2: Option<PFN_cuStreamValue64>,
}

impl fmt::Debug for CudaDriverFns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CudaDriverFns").finish_non_exhaustive()
    }
}

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

fn open_cudart(candidate: &Candidate) -> Result<(Library, CudartFns), LoadFailure> {
    // SAFETY: per `Cuda::load`'s contract the candidate names a CUDA runtime, whose
    // initialisers are meant to run in any process.
    let library = unsafe { loader::open_library(&candidate.path) }?;
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
        cudaStreamQuery: optional!(library, cudaStreamQuery),
        cudaEventQuery: optional!(library, cudaEventQuery),
        cudaHostGetDevicePointer: optional!(library, cudaHostGetDevicePointer),
        cudaDeviceGetPCIBusId: optional!(library, cudaDeviceGetPCIBusId),
    };
    Ok((library, fns))
}

fn open_driver(path: &Path) -> Result<(Library, CudaDriverFns), LoadFailure> {
    // SAFETY: the path names the CUDA driver, whose initialisers are meant to run in any
    // process.
    let library = unsafe { loader::open_library(path) }?;
    let fns = CudaDriverFns {
        cuInit: required!(library, cuInit),
        cuMemGetAddressRange_v2: required!(library, cuMemGetAddressRange_v2),
        cuGetErrorString: required!(library, cuGetErrorString),
        cuStreamWaitValue32_v2: optional!(library, cuStreamWaitValue32_v2),
        cuStreamWaitValue64_v2: optional!(library, cuStreamWaitValue64_v2),
        cuStreamWriteValue32_v2: optional!(library, cuStreamWriteValue32_v2),
        cuStreamWriteValue64_v2: optional!(library, cuStreamWriteValue64_v2),
    };
    Ok((library, fns))
}

/// The room given to `cudaDeviceGetPCIBusId` (NVML's `NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE`).
const PCI_BUS_ID_LEN: usize = 32;

/// A query's answer: success is ready, `cudaErrorNotReady` is not, anything else an error.
fn ready(status: CudaError) -> Result<bool, CudaError> {
    match status {
        CudaError::NOT_READY => Ok(false),
        other => other.result().map(|()| true),
    }
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
    /// [`LoadError`] for the [CUDA runtime](LibraryKind::CudaRuntime) listing every runtime
    /// candidate tried and why each failed, or for the [driver](LibraryKind::CudaDriver)
    /// ([`LoadError::is_driver`]) when the runtime loaded but the driver did not.
    pub fn load(opts: &CudaLoadOptions) -> Result<Cuda, LoadError> {
        match loader::load_first(cuda_candidates(opts), open_cudart) {
            Ok((candidate, (cudart, fns))) => Cuda::with_driver(candidate, cudart, fns),
            Err(attempts) => Err(LoadError::new(LibraryKind::CudaRuntime, attempts)),
        }
    }

    /// Loads the CUDA runtime from `path` exactly (a bare soname goes through the dynamic
    /// linker's search path), then the driver.
    ///
    /// # Errors
    ///
    /// As for [`load`](Self::load), naming `path` alone.
    pub fn load_path(path: &Path) -> Result<Cuda, LoadError> {
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
    ) -> Result<Cuda, LoadError> {
        let library_path = loaded_file(fns.cudaRuntimeGetVersion as *const c_void)
            .unwrap_or_else(|| candidate.path.clone());
        let driver_candidate = Candidate::new(CUDA_DRIVER_LIBRARY, CandidateOrigin::Soname);
        let (driver_library, driver) = match open_driver(&driver_candidate.path) {
            Ok(opened) => opened,
            Err(failure) => {
                return Err(LoadError::driver(
                    library_path,
                    LoadAttempt {
                        candidate: driver_candidate,
                        failure,
                    },
                ));
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

    /// `cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device)` — the PCI bus
    /// id of `device` (a CUDA ordinal), `domain:bus:device.function` in hexadecimal
    /// (`0000:41:00.0`): what names the device to NVML and in sysfs, where CUDA's ordinals
    /// (`CUDA_VISIBLE_DEVICES`, `CUDA_DEVICE_ORDER`) mean nothing.
    ///
    /// # Errors
    ///
    /// `cudaErrorNotSupported` when the runtime lacks the call, otherwise the runtime's
    /// error (`cudaErrorInvalidDevice` for a bad ordinal).
    pub fn device_pci_bus_id(&self, device: i32) -> Result<String, CudaError> {
        let Some(get) = self.fns.cudaDeviceGetPCIBusId else {
            return Err(CudaError::NOT_SUPPORTED);
        };
        // The header asks for 13 bytes; a 32-bit domain takes 17. The last byte stays 0.
        let mut text = [0 as c_char; PCI_BUS_ID_LEN + 1];
        // SAFETY: the runtime writes at most `len` bytes, `PCI_BUS_ID_LEN`, into `text`,
        // whose last byte it never reaches.
        unsafe { get(text.as_mut_ptr(), PCI_BUS_ID_LEN as c_int, device) }.result()?;
        // SAFETY: `text` ends with a 0 the runtime did not touch.
        Ok(unsafe { c_string(text.as_ptr()) })
    }

    /// `cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attributes,
    /// const void* ptr)` — what the runtime knows about an address.
    ///
    /// A lookup in the runtime's tables: the address is never dereferenced, so any value may
    /// be passed. The struct passed is CUDA 13's 88 bytes, zeroed: CUDA 13 writes all of it,
    /// its reserved tail included, and older runtimes the first 24. Decode the type with
    /// [`decode_cuda_memory_type`].
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

    /// `cudaError_t cudaStreamQuery(cudaStream_t stream)` — whether `stream` has finished all
    /// its work: `Ok(false)` for `cudaErrorNotReady`.
    ///
    /// # Errors
    ///
    /// `cudaErrorNotSupported` when the runtime lacks it, otherwise the runtime's error.
    ///
    /// # Safety
    ///
    /// `stream` is null or a live stream of this runtime.
    pub unsafe fn stream_query(&self, stream: cudaStream_t) -> Result<bool, CudaError> {
        let Some(query) = self.fns.cudaStreamQuery else {
            return Err(CudaError::NOT_SUPPORTED);
        };
        // SAFETY: the caller vouches for the stream.
        ready(unsafe { query(stream) })
    }

    /// `cudaError_t cudaEventQuery(cudaEvent_t event)` — whether `event` is complete:
    /// `Ok(false)` for `cudaErrorNotReady`.
    ///
    /// # Errors
    ///
    /// `cudaErrorNotSupported` when the runtime lacks it, otherwise the runtime's error.
    ///
    /// # Safety
    ///
    /// `event` is a live event of this runtime.
    pub unsafe fn event_query(&self, event: cudaEvent_t) -> Result<bool, CudaError> {
        let Some(query) = self.fns.cudaEventQuery else {
            return Err(CudaError::NOT_SUPPORTED);
        };
        // SAFETY: the caller vouches for the event.
        ready(unsafe { query(event) })
    }

    /// `cudaError_t cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags)`
    /// — the device address of mapped pinned host memory (flags 0).
    ///
    /// A lookup in the runtime's tables: `host` is never dereferenced.
    ///
    /// # Errors
    ///
    /// `cudaErrorNotSupported` when the runtime lacks it, otherwise the runtime's error.
    // The runtime looks the address up; it never dereferences it.
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    pub fn host_get_device_pointer(&self, host: *mut c_void) -> Result<CUdeviceptr, CudaError> {
        let Some(get) = self.fns.cudaHostGetDevicePointer else {
            return Err(CudaError::NOT_SUPPORTED);
        };
        let mut device = ptr::null_mut();
        // SAFETY: `device` is a valid local out-parameter; `host` is only looked up.
        unsafe { get(&mut device, host, 0) }.result()?;
        Ok(device as usize as CUdeviceptr)
    }

    /// Whether the driver has `cuStreamWaitValue32_v2` and `cuStreamWriteValue32_v2`, and the
    /// runtime `cudaHostGetDevicePointer`.
    pub fn has_stream_wait_value(&self) -> bool {
        self.driver.cuStreamWaitValue32_v2.is_some()
            && self.driver.cuStreamWriteValue32_v2.is_some()
            && self.fns.cudaHostGetDevicePointer.is_some()
    }

    /// `CUresult cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
    /// unsigned int flags)` — the stream's later work waits until the word at `addr`
    /// satisfies `flags` ([`cu_stream_value`]) for `value`.
    ///
    /// # Errors
    ///
    /// `CUDA_ERROR_NOT_SUPPORTED` when the driver lacks it; the error of `cuInit(0)`;
    /// otherwise the driver's error.
    ///
    /// # Safety
    ///
    /// `stream` is null or a live stream of this runtime; `addr` is the device address of a
    /// 4-byte-aligned word of mapped host memory or device memory, which stays allocated
    /// until the wait has ended.
    pub unsafe fn stream_wait_value32(
        &self,
        stream: cudaStream_t,
        addr: CUdeviceptr,
        value: u32,
        flags: c_uint,
    ) -> Result<(), CuError> {
        let Some(wait) = self.driver.cuStreamWaitValue32_v2 else {
            return Err(CuError::NOT_SUPPORTED);
        };
        self.driver_init()?;
        // SAFETY: the caller vouches for the stream and the word.
        unsafe { wait(stream, addr, value, flags) }.result()
    }

    /// `CUresult cuStreamWaitValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value,
    /// unsigned int flags)` — [`stream_wait_value32`](Self::stream_wait_value32) on a 64-bit
    /// word.
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
        stream: cudaStream_t,
        addr: CUdeviceptr,
        value: u64,
        flags: c_uint,
    ) -> Result<(), CuError> {
        let Some(wait) = self.driver.cuStreamWaitValue64_v2 else {
            return Err(CuError::NOT_SUPPORTED);
        };
        self.driver_init()?;
        // SAFETY: the caller vouches for the stream and the word.
        unsafe { wait(stream, addr, value, flags) }.result()
    }

    /// `CUresult cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
    /// unsigned int flags)` — writes `value` to the word at `addr` when the stream reaches
    /// this point (`flags`: [`cu_stream_value::WRITE_DEFAULT`]).
    ///
    /// # Errors
    ///
    /// As [`stream_wait_value32`](Self::stream_wait_value32).
    ///
    /// # Safety
    ///
    /// As [`stream_wait_value32`](Self::stream_wait_value32), until the write is done.
    pub unsafe fn stream_write_value32(
        &self,
        stream: cudaStream_t,
        addr: CUdeviceptr,
        value: u32,
        flags: c_uint,
    ) -> Result<(), CuError> {
        let Some(write) = self.driver.cuStreamWriteValue32_v2 else {
            return Err(CuError::NOT_SUPPORTED);
        };
        self.driver_init()?;
        // SAFETY: the caller vouches for the stream and the word.
        unsafe { write(stream, addr, value, flags) }.result()
    }

    /// `CUresult cuStreamWriteValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value,
    /// unsigned int flags)` — [`stream_write_value32`](Self::stream_write_value32) on a
    /// 64-bit word.
    ///
    /// # Errors
    ///
    /// As [`stream_wait_value32`](Self::stream_wait_value32).
    ///
    /// # Safety
    ///
    /// As [`stream_wait_value64`](Self::stream_wait_value64), until the write is done.
    pub unsafe fn stream_write_value64(
        &self,
        stream: cudaStream_t,
        addr: CUdeviceptr,
        value: u64,
        flags: c_uint,
    ) -> Result<(), CuError> {
        let Some(write) = self.driver.cuStreamWriteValue64_v2 else {
            return Err(CuError::NOT_SUPPORTED);
        };
        self.driver_init()?;
        // SAFETY: the caller vouches for the stream and the word.
        unsafe { write(stream, addr, value, flags) }.result()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_read_not_ready_as_false() {
        assert_eq!(ready(CudaError::SUCCESS), Ok(true));
        assert_eq!(ready(CudaError::NOT_READY), Ok(false));
        assert_eq!(
            ready(CudaError::INVALID_VALUE),
            Err(CudaError::INVALID_VALUE)
        );
    }

    #[test]
    fn stream_value_flags_are_cudas() {
        assert_eq!(
            [
                cu_stream_value::WAIT_GEQ,
                cu_stream_value::WAIT_EQ,
                cu_stream_value::WAIT_AND,
                cu_stream_value::WAIT_NOR,
                cu_stream_value::WRITE_DEFAULT,
            ],
            [0, 1, 2, 3, 0]
        );
    }

    #[test]
    fn cuda_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Cuda>();
        check::<CudartFns>();
        check::<CudaDriverFns>();
    }
}
