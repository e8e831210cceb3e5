//! Raw FFI to the AMD HIP runtime (`libamdhip64`), loaded at run time with `libloading`:
//! the C types and constants ([`hipPointerAttribute_t`], [`hipAmdFileHandle_t`],
//! [`HipError`], memory kinds and flags), the search for the library ([`candidates`],
//! [`LoadError`]), a function-pointer table ([`HipFns`]) and thin wrappers that turn status
//! codes into `Result`s ([`Hip`]). It also decodes the version-dependent `hipMemoryType`
//! numbering. For NVIDIA machines, [`cuda`] does the same for the CUDA runtime and driver
//! (`libcudart.so.13/.12`, `libcuda.so.1`), which is all HIP is on that platform.
//!
//! It does not link anything at build time, read the environment (callers pass paths in
//! [`LoadOptions`]), validate requests, or decide policy: it reports what the runtime says.
//! It depends on no other hipfile crate, so any project may depend on it for its own HIP
//! FFI; within hipfile only `hipfile-runtime` (which adapts it to `hipfile-core`'s
//! `GpuRuntime`) and the facade use it: the backends reach the GPU through that trait.
//!
//! Linux only (it uses `dlopen` flags and `dladdr`).

pub mod cuda;
pub mod error;
pub mod hip;
pub mod load;
pub mod types;
pub mod version;

pub use cuda::{
    CUDA_DRIVER_LIBRARY, CUDART_SONAMES, CUdeviceptr, CUresult, CuError, Cuda, CudaDriverFns,
    CudaError, CudaLoadError, CudaLoadOptions, CudaVersion, CudartFns, DEFAULT_CUDART_LIBRARY,
    cuda_candidates, cudaError_t, cudaEvent_t, cudaHostFn_t, cudaMemcpyKind, cudaStream_t,
    decode_cuda_version,
};
pub use error::{HipError, hipError_t};
pub use hip::{AmdFileFns, AmdFileIoError, Hip, HipFns, amd_file_io_result};
pub use load::{
    Candidate, CandidateOrigin, LoadAttempt, LoadError, LoadFailure, LoadOptions, candidates,
};
pub use types::{
    MemoryType, cudaMemoryType, cudaPointerAttributes, decode_cuda_memory_type, decode_memory_type,
    encode_memory_type, hipAmdFileHandle_t, hipEvent_t, hipHostFn_t, hipMemcpyKind, hipMemoryType,
    hipPointerAttribute_t, hipStream_t, host_malloc_flags, host_register_flags, memcpy_kind,
    proc_address_status, stream_flags,
};
pub use version::{RuntimeVersion, decode_version};
