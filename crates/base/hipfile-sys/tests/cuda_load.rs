//! Loading the CUDA runtime: the search order, failures as `LoadError` values that say what
//! was tried, and (where a `libcudart` is installed) what a real runtime reports.
//!
//! Observed with CUDA 13.0 (driver 580, one H200): the search loads `libcudart.so.13` through
//! `ldconfig`; plain host memory is type Unregistered with device -2; the runtime fills all 88
//! bytes of `cudaPointerAttributes`, its reserved tail included; `cuMemGetAddressRange_v2` of
//! a host address fails with `CUDA_ERROR_NOT_FOUND` (500).
//!
//! Capability-gated: the tests that need a real CUDA runtime and driver print `SKIP` and pass
//! when none is installed.
//!
//! # Safety
//!
//! The `unsafe` blocks own one device allocation and one stream, each released once after its
//! last use, and queue a host callback whose data outlives the stream's synchronisation; each
//! block says so.

use hipfile_sys::{
    CUDA_DRIVER_LIBRARY, CandidateOrigin, CuError, Cuda, CudaError, CudaLoadOptions, CudaVersion,
    LoadError, LoadFailure, MemoryType, cuda_candidates, decode_cuda_memory_type,
};
use std::path::Path;

#[test]
fn candidate_order() {
    let paths: Vec<_> = cuda_candidates(&CudaLoadOptions::default())
        .into_iter()
        .map(|c| c.path.display().to_string())
        .collect();
    assert_eq!(
        paths,
        [
            "libcudart.so.13",
            "libcudart.so.12",
            "/usr/local/cuda/lib64/libcudart.so"
        ]
    );
    assert_eq!(CUDA_DRIVER_LIBRARY, "libcuda.so.1");
    let explicit = cuda_candidates(&CudaLoadOptions {
        explicit_cudart: Some("/opt/cuda-12.8/lib64/libcudart.so.12".into()),
    });
    assert_eq!(explicit.len(), 1);
    assert_eq!(
        explicit[0].path,
        Path::new("/opt/cuda-12.8/lib64/libcudart.so.12")
    );
    assert_eq!(explicit[0].origin, CandidateOrigin::Explicit);
}

#[test]
fn nonexistent_explicit_path_is_named() {
    let path = Path::new("/nonexistent/hipfile-test/libcudart.so.13");
    let err = match Cuda::load_path(path) {
        Ok(_) => panic!("loaded a file that does not exist"),
        Err(e) => e,
    };
    let text = err.to_string();
    eprintln!("{text}");
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains("no other location"), "{text}");
    assert!(text.contains("CUDA runtime"), "{text}");
    assert!(err.is_explicit());
    assert!(!err.is_driver());
    assert_eq!(err.attempts().len(), 1);
    assert!(matches!(err.attempts()[0].failure, LoadFailure::Open(_)));
    assert_eq!(err.missing_symbol(), None);
    // Callers that handle both runtimes alike keep the attempt.
    let load: LoadError = err;
    assert_eq!(load.attempts().len(), 1);
    assert_eq!(load.attempts()[0].candidate.path, path);
}

#[test]
fn explicit_path_does_not_fall_through() {
    let opts = CudaLoadOptions {
        explicit_cudart: Some("/nonexistent/hipfile-test/libcudart.so".into()),
    };
    match Cuda::load(&opts) {
        Ok(cuda) => panic!("fell through to {}", cuda.library_path().display()),
        Err(e) => assert!(!e.is_driver() && e.attempts().len() == 1, "{e}"),
    }
}

#[test]
fn library_without_cuda_symbols_names_the_missing_one() {
    let err = match Cuda::load_path(Path::new("libc.so.6")) {
        Ok(_) => panic!("libc was accepted as a CUDA runtime"),
        Err(e) => e,
    };
    let text = err.to_string();
    eprintln!("{text}");
    assert_eq!(err.missing_symbol(), Some("cudaRuntimeGetVersion"));
    assert!(text.contains("`cudaRuntimeGetVersion`"), "{text}");
    assert!(text.contains("libc.so.6"), "{text}");
    assert!(text.contains("not a CUDA runtime"), "{text}");
    assert!(!err.is_driver());
}

#[test]
fn search_reports_every_candidate_or_loads() {
    match Cuda::load(&CudaLoadOptions::default()) {
        // A runtime on this machine is fine; the search simply found it.
        Ok(cuda) => eprintln!("found {}", cuda.library_path().display()),
        Err(e) if !e.is_driver() => {
            let tried: Vec<_> = e
                .attempts()
                .iter()
                .map(|a| a.candidate.path.clone())
                .collect();
            assert_eq!(
                tried,
                cuda_candidates(&CudaLoadOptions::default())
                    .into_iter()
                    .map(|c| c.path)
                    .collect::<Vec<_>>()
            );
        }
        Err(e) => {
            eprintln!("{e}");
            assert!(e.to_string().contains("libcuda.so.1"), "{e}");
        }
    }
}

/// A loaded runtime and driver, or `None` after printing `SKIP` when none is installed. A
/// library that opens but lacks a symbol is a failure: the function table would be wrong.
fn require_cuda(test: &str) -> Option<Cuda> {
    match Cuda::load(&CudaLoadOptions::default()) {
        Ok(cuda) => Some(cuda),
        Err(e) if e.missing_symbol().is_none() => {
            let what = if e.is_driver() {
                "libcuda.so.1 (the NVIDIA driver) not installed"
            } else {
                "no libcudart installed"
            };
            eprintln!("SKIP {test}: {what}");
            None
        }
        Err(e) => panic!("a CUDA library opened but did not load:\n{e}"),
    }
}

#[test]
fn real_runtime_reports_its_version() {
    let Some(cuda) = require_cuda("real_runtime_reports_its_version") else {
        return;
    };
    eprintln!(
        "loaded {} and {} (as {})",
        cuda.library_path().display(),
        cuda.driver_library_path().display(),
        cuda.candidate().path.display()
    );
    assert!(
        cuda.library_path().to_string_lossy().contains("libcudart"),
        "{}",
        cuda.library_path().display()
    );
    let version = cuda.runtime_version().expect("cudaRuntimeGetVersion");
    eprintln!("runtime {}", CudaVersion(version));
    assert!(CudaVersion(version) >= CudaVersion::CUDA_11_0, "{version}");
    eprintln!("driver {:?}", cuda.driver_version().map(CudaVersion));
    assert_eq!(cuda.error_name(CudaError::NO_DEVICE), "cudaErrorNoDevice");
    assert!(!cuda.error_string(CudaError::NO_DEVICE).is_empty());
    eprintln!(
        "cudaGetErrorString(12345) = {:?}",
        cuda.error_string(CudaError(12345))
    );
    assert!(
        !cuda
            .driver_error_string(CuError::INVALID_CONTEXT)
            .is_empty()
    );
    assert_eq!(cuda.driver_error_string(CuError(123_456)), "");
}

#[test]
fn real_runtime_describes_memory() {
    let Some(cuda) = require_cuda("real_runtime_describes_memory") else {
        return;
    };
    let devices = match cuda.device_count() {
        Ok(n) if n > 0 => n,
        other => {
            eprintln!("SKIP real_runtime_describes_memory: no device ({other:?})");
            // Without a device the queries must still fail cleanly.
            let local = 0u64;
            eprintln!(
                "cudaPointerGetAttributes(stack) = {:?}",
                cuda.pointer_attributes((&raw const local).cast())
            );
            eprintln!(
                "cuMemGetAddressRange_v2(stack) = {:?}",
                cuda.mem_get_address_range(&raw const local as u64)
            );
            return;
        }
    };
    eprintln!("{devices} device(s); current {:?}", cuda.get_device());
    cuda.set_device(0).expect("cudaSetDevice(0)");
    cuda.init_context().expect("cudaFree(NULL)");
    cuda.driver_init().expect("cuInit(0)");

    let local = vec![0u8; 4096];
    let a = cuda
        .pointer_attributes(local.as_ptr().cast())
        .expect("cudaPointerGetAttributes(host)");
    eprintln!("host: {a:?}");
    assert_eq!(decode_cuda_memory_type(a.type_), MemoryType::Unregistered);
    assert!(cuda.mem_get_address_range(local.as_ptr() as u64).is_err());

    // SAFETY: freed below, once, after the last use.
    let dev = unsafe { cuda.malloc(1 << 20) }.expect("cudaMalloc");
    let a = cuda.pointer_attributes(dev).expect("attributes(device)");
    assert_eq!(decode_cuda_memory_type(a.type_), MemoryType::Device);
    assert_eq!(a.device, 0);
    // CUDA 13 writes its reserved tail too (not zeros), which is why the struct passed must
    // be the full 88 bytes.
    eprintln!(
        "device: type {} device {} reserved {:?}",
        a.type_, a.device, a.reserved
    );
    let (base, size) = cuda
        .mem_get_address_range(dev as u64 + 4096 + 3)
        .expect("cuMemGetAddressRange_v2");
    assert_eq!(base, dev as u64);
    assert!(size >= 1 << 20, "{size}");

    // A host callback runs on the runtime's thread once the stream reaches it.
    // SAFETY: destroyed below; the stream's work is synchronised first.
    let stream = unsafe { cuda.stream_create(hipfile_sys::stream_flags::NON_BLOCKING) }
        .expect("cudaStreamCreateWithFlags");
    let flag = std::sync::atomic::AtomicBool::new(false);
    unsafe extern "C" fn set(data: *mut std::ffi::c_void) {
        // SAFETY: `data` is the `AtomicBool` below, alive until the stream is synchronised.
        unsafe { &*data.cast::<std::sync::atomic::AtomicBool>() }
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
    // SAFETY: `flag` outlives the synchronisation that waits for the callback, and the
    // callback calls no CUDA function.
    unsafe { cuda.launch_host_func(stream, Some(set), (&raw const flag).cast_mut().cast()) }
        .expect("cudaLaunchHostFunc");
    // SAFETY: a live stream, destroyed once after its work is done; `dev` is not used after.
    unsafe {
        cuda.stream_synchronize(stream)
            .expect("cudaStreamSynchronize");
        cuda.stream_destroy(stream).expect("cudaStreamDestroy");
        cuda.free(dev).expect("cudaFree");
    }
    assert!(flag.load(std::sync::atomic::Ordering::SeqCst));
}

#[test]
fn real_runtime_names_each_device_by_pci_bus_id_and_nvml_knows_it() {
    let Some(cuda) = require_cuda("real_runtime_names_each_device_by_pci_bus_id_and_nvml_knows_it")
    else {
        return;
    };
    let devices = match cuda.device_count() {
        Ok(n) if n > 0 => n,
        other => {
            eprintln!("SKIP: no device ({other:?})");
            return;
        }
    };
    assert!(
        cuda.fns().cudaDeviceGetPCIBusId.is_some(),
        "every CUDA 12 and 13 runtime has cudaDeviceGetPCIBusId"
    );
    assert_eq!(
        cuda.device_pci_bus_id(devices),
        Err(CudaError::INVALID_DEVICE)
    );
    let nvml = hipfile_sys::Nvml::load().expect("an NVIDIA driver has libnvidia-ml.so.1");
    let session = nvml.init().expect("nvmlInit_v2");
    for device in 0..devices {
        let bus = cuda
            .device_pci_bus_id(device)
            .expect("cudaDeviceGetPCIBusId");
        // `domain:bus:device.function`, in hexadecimal.
        let parts: Vec<&str> = bus.split([':', '.']).collect();
        assert_eq!(parts.len(), 4, "{bus}");
        assert!(
            parts
                .iter()
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_hexdigit())),
            "{bus}"
        );
        let c_bus = std::ffi::CString::new(bus.clone()).unwrap();
        let handle = session
            .device_by_pci_bus_id(&c_bus)
            .expect("NVML knows CUDA's device");
        match session.bar1_memory_info(handle) {
            Ok(bar1) => {
                eprintln!("device {device} ({bus}): BAR1 {} MiB", bar1.bar1Total >> 20);
                assert!(bar1.bar1Total > 0);
            }
            Err(e) => eprintln!("device {device} ({bus}): BAR1 not reported: {e}"),
        }
    }
}
