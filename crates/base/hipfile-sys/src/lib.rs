//! Raw FFI to the GPU runtimes, loaded at run time with `libloading`: AMD's HIP runtime
//! (`libamdhip64`) in [`hip`], and for NVIDIA machines the CUDA runtime and driver
//! (`libcudart.so.13/.12`, `libcuda.so.1`) in [`cuda`], which is all HIP is on that platform,
//! and NVIDIA's management library (`libnvidia-ml.so.1`) in [`nvml`], for the one thing only it
//! tells (a device's BAR1 size).
//!
//! Both runtimes are laid out alike: `mod.rs` holds the function-pointer tables ([`HipFns`];
//! [`CudartFns`], [`CudaDriverFns`]) and the loaded library with thin wrappers that turn status
//! codes into `Result`s ([`Hip`], [`Cuda`]); `error.rs` the status codes ([`HipError`];
//! [`CudaError`], [`CuError`]); `types.rs` the C types and constants; `version.rs` the version
//! numbers (with HIP's version-dependent `hipMemoryType` numbering decoded in its `types.rs`);
//! `search.rs` where the library is looked for ([`candidates`], [`cuda_candidates`]). What they
//! share is [`loader`]: opening a candidate, resolving required and optional symbols, and the
//! one error of a failed load, [`LoadError`], which lists every path tried and why it failed.
//!
//! It does not link anything at build time, read the environment (callers pass paths in
//! [`LoadOptions`] and [`CudaLoadOptions`]), validate requests, or decide policy: it reports
//! what the runtime says. It depends on no other hipfile crate, so any project may depend on
//! it for its own HIP FFI; within hipfile only `hipfile-runtime` (which adapts it to
//! `hipfile-core`'s `GpuRuntime`) and the facade use it: the backends reach the GPU through
//! that trait.
//!
//! Linux only (it uses `dlopen` flags and `dladdr`).

pub mod cuda;
pub mod hip;
pub mod loader;
pub mod nvml;

pub use cuda::{
    CUDA_DRIVER_LIBRARY, CUDART_SONAMES, CUdeviceptr, CUresult, CuError, Cuda, CudaDriverFns,
    CudaError, CudaLoadOptions, CudaVersion, CudartFns, DEFAULT_CUDART_LIBRARY, cu_stream_value,
    cuda_candidates, cudaError_t, cudaEvent_t, cudaHostFn_t, cudaMemcpyKind, cudaMemoryType,
    cudaPointerAttributes, cudaStream_t, decode_cuda_memory_type, decode_cuda_version,
};
pub use hip::{
    AmdFileFns, AmdFileIoError, Hip, HipError, HipFns, LoadOptions, MemoryType, RuntimeVersion,
    amd_file_io_result, candidates, decode_memory_type, decode_version, encode_memory_type,
    hipAmdFileHandle_t, hipError_t, hipEvent_t, hipHostFn_t, hipMemcpyKind, hipMemoryType,
    hipPointerAttribute_t, hipStream_t, host_malloc_flags, host_register_flags, memcpy_kind,
    proc_address_status, stream_flags, stream_wait_value,
};
pub use loader::{Candidate, CandidateOrigin, LibraryKind, LoadAttempt, LoadError, LoadFailure};
pub use nvml::{
    NVML_LIBRARY, Nvml, NvmlDevice, NvmlFns, NvmlReturn, NvmlSession, nvmlBAR1Memory_t,
    nvmlDevice_t, nvmlReturn_t,
};
