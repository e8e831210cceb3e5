//! NVIDIA's management library, NVML (`libnvidia-ml.so.1`), for what neither CUDA API
//! tells: a device's BAR1 size. The library ships with the NVIDIA driver (not the CUDA
//! toolkit), so it is loaded on its own, when first asked for, and its absence is an absent
//! capability ([`LoadError`]), never a failure of the CUDA runtime.
//!
//! The calls mapped are those of NVML's `nvml.h` (checked against the header of
//! `nvidia-nvml-dev` 13.0, which `cargo xtask ci` fetches for the tests): `nvmlInit_v2`,
//! `nvmlShutdown`, `nvmlDeviceGetHandleByPciBusId_v2`, `nvmlDeviceGetBAR1MemoryInfo` and
//! `nvmlErrorString`. NVML counts its initialisations: each [`Nvml::init`] is an
//! `nvmlInit_v2` whose [`NvmlSession`] calls `nvmlShutdown` when dropped, so a process that
//! uses NVML itself keeps its own session. Device handles live no longer than their session
//! ([`NvmlDevice`] borrows it).
//!
//! NVML numbers devices its own way (all of the machine's, in its order); CUDA's ordinals
//! follow `CUDA_VISIBLE_DEVICES` and `CUDA_DEVICE_ORDER`. The two meet through a device's
//! PCI bus id ([`Cuda::device_pci_bus_id`](crate::Cuda::device_pci_bus_id)).
//!
//! # Safety
//!
//! Every function pointer is resolved from the library [`Nvml`] keeps open (and the library
//! stays mapped, `RTLD_NODELETE`), cast to the C signature of `nvml.h` given with each
//! `PFN_` type. The wrappers pass pointers to valid locals or to NUL-terminated strings the
//! caller lends for the call, and device handles that NVML gave within a session still
//! open; NVML is documented as thread-safe. Loading runs the library's initialisers: the
//! contract of [`Nvml::load_path`] is that the path names NVML (or a library without
//! harmful initialisers).

// The `PFN_` aliases and C types spell the C names they stand for.
#![allow(non_camel_case_types, non_snake_case)]

use crate::loader::{
    self, Candidate, CandidateOrigin, LibraryKind, LoadError, LoadFailure, c_string, loaded_file,
    required,
};
use libloading::os::unix::Library;
use std::ffi::{CStr, c_char, c_void};
use std::fmt;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::ptr;

/// NVML's library. It ships with the NVIDIA driver, and its soname has been `.so.1` for
/// every driver generation.
pub const NVML_LIBRARY: &str = "libnvidia-ml.so.1";

/// An NVML status code (`nvmlReturn_t`), as every `nvml*` call returns it.
///
/// `#[repr(transparent)]` over `i32` (the C type is a 4-byte enum); values not listed as
/// constants are kept as they are. The library's own text is [`Nvml::error_string`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct NvmlReturn(pub i32);

/// The C spelling of [`NvmlReturn`].
pub type nvmlReturn_t = NvmlReturn;

crate::cuda::error::status_code! {
    NvmlReturn, "nvmlReturn", SUCCESS,
    /// `NVML_SUCCESS` (0).
    SUCCESS = 0 => "NVML_SUCCESS",
    /// `NVML_ERROR_UNINITIALIZED` (1): NVML was not initialised.
    UNINITIALIZED = 1 => "NVML_ERROR_UNINITIALIZED",
    /// `NVML_ERROR_INVALID_ARGUMENT` (2): a bus id NVML cannot read, or a bad handle.
    INVALID_ARGUMENT = 2 => "NVML_ERROR_INVALID_ARGUMENT",
    /// `NVML_ERROR_NOT_SUPPORTED` (3): the device does not offer the query.
    NOT_SUPPORTED = 3 => "NVML_ERROR_NOT_SUPPORTED",
    /// `NVML_ERROR_NO_PERMISSION` (4).
    NO_PERMISSION = 4 => "NVML_ERROR_NO_PERMISSION",
    /// `NVML_ERROR_NOT_FOUND` (6): no device has the bus id.
    NOT_FOUND = 6 => "NVML_ERROR_NOT_FOUND",
    /// `NVML_ERROR_DRIVER_NOT_LOADED` (9): the NVIDIA kernel driver is not running.
    DRIVER_NOT_LOADED = 9 => "NVML_ERROR_DRIVER_NOT_LOADED",
    /// `NVML_ERROR_GPU_IS_LOST` (15).
    GPU_IS_LOST = 15 => "NVML_ERROR_GPU_IS_LOST",
    /// `NVML_ERROR_LIB_RM_VERSION_MISMATCH` (18): the library and the kernel driver differ.
    LIB_RM_VERSION_MISMATCH = 18 => "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
    /// `NVML_ERROR_UNKNOWN` (999).
    UNKNOWN = 999 => "NVML_ERROR_UNKNOWN",
}

/// `nvmlDevice_t`: NVML's opaque device handle (`struct nvmlDevice_st*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(transparent)]
pub struct nvmlDevice_t(pub *mut c_void);

/// `nvmlBAR1Memory_t`: a device's BAR1, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct nvmlBAR1Memory_t {
    /// `bar1Total`: the size of BAR1.
    pub bar1Total: u64,
    /// `bar1Free`: the part not mapped.
    pub bar1Free: u64,
    /// `bar1Used`: the part mapped.
    pub bar1Used: u64,
}

/// `nvmlReturn_t nvmlInit_v2(void)`, also the shape of `nvmlShutdown`.
pub type PFN_nvmlInit_v2 = unsafe extern "C" fn() -> nvmlReturn_t;
/// `nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t
/// *device)`.
pub type PFN_nvmlDeviceGetHandleByPciBusId_v2 =
    unsafe extern "C" fn(bus_id: *const c_char, device: *mut nvmlDevice_t) -> nvmlReturn_t;
/// `nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t
/// *bar1Memory)`.
pub type PFN_nvmlDeviceGetBAR1MemoryInfo =
    unsafe extern "C" fn(device: nvmlDevice_t, bar1: *mut nvmlBAR1Memory_t) -> nvmlReturn_t;
/// `const char* nvmlErrorString(nvmlReturn_t result)`.
pub type PFN_nvmlErrorString = unsafe extern "C" fn(result: nvmlReturn_t) -> *const c_char;

/// The raw NVML function table: one field per entry point, named as in C. All are required
/// (every driver since NVML 5 has them).
#[derive(Clone, Copy)]
pub struct NvmlFns {
    /// `nvmlInit_v2` (what `nvml.h`'s `nvmlInit` expands to).
    pub nvmlInit_v2: PFN_nvmlInit_v2,
    /// `nvmlShutdown`.
    pub nvmlShutdown: PFN_nvmlInit_v2,
    /// `nvmlDeviceGetHandleByPciBusId_v2` (what `nvmlDeviceGetHandleByPciBusId` expands to).
    pub nvmlDeviceGetHandleByPciBusId_v2: PFN_nvmlDeviceGetHandleByPciBusId_v2,
    /// `nvmlDeviceGetBAR1MemoryInfo`.
    pub nvmlDeviceGetBAR1MemoryInfo: PFN_nvmlDeviceGetBAR1MemoryInfo,
    /// `nvmlErrorString`.
    pub nvmlErrorString: PFN_nvmlErrorString,
}

impl fmt::Debug for NvmlFns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NvmlFns").finish_non_exhaustive()
    }
}

/// The loaded NVML.
///
/// Dropping it releases the handle; the library stays mapped (`RTLD_NODELETE`), as the
/// runtimes do.
pub struct Nvml {
    fns: NvmlFns,
    library_path: PathBuf,
    _library: Library,
}

// SAFETY: `Nvml` holds function pointers into NVML, which is documented as thread-safe, and
// the handle that keeps them valid, closed only on drop.
unsafe impl Send for Nvml {}
// SAFETY: as for `Send`: shared access only reads the immutable table and calls NVML.
unsafe impl Sync for Nvml {}

impl fmt::Debug for Nvml {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nvml")
            .field("library_path", &self.library_path)
            .finish_non_exhaustive()
    }
}

fn open_nvml(candidate: &Candidate) -> Result<(Library, NvmlFns), LoadFailure> {
    // SAFETY: per `Nvml::load_path`'s contract the candidate names NVML, whose initialisers
    // are meant to run in any process.
    let library = unsafe { loader::open_library(&candidate.path) }?;
    let fns = NvmlFns {
        nvmlInit_v2: required!(library, nvmlInit_v2),
        nvmlShutdown: required!(library, nvmlShutdown),
        nvmlDeviceGetHandleByPciBusId_v2: required!(library, nvmlDeviceGetHandleByPciBusId_v2),
        nvmlDeviceGetBAR1MemoryInfo: required!(library, nvmlDeviceGetBAR1MemoryInfo),
        nvmlErrorString: required!(library, nvmlErrorString),
    };
    Ok((library, fns))
}

impl Nvml {
    /// Loads NVML by its soname ([`NVML_LIBRARY`]), through the dynamic linker's search
    /// path. Initialises nothing: that is [`init`](Self::init).
    ///
    /// # Errors
    ///
    /// [`LoadError`] for [NVML](LibraryKind::Nvml): the library is not installed (no NVIDIA
    /// driver), or lacks a symbol.
    pub fn load() -> Result<Nvml, LoadError> {
        Nvml::load_candidate(Candidate::new(NVML_LIBRARY, CandidateOrigin::Soname))
    }

    /// Loads NVML from `path` exactly (a bare soname goes through the dynamic linker's
    /// search path), and nothing else.
    ///
    /// # Errors
    ///
    /// As [`load`](Self::load), naming `path` alone.
    pub fn load_path(path: &Path) -> Result<Nvml, LoadError> {
        Nvml::load_candidate(Candidate::new(path, CandidateOrigin::Explicit))
    }

    fn load_candidate(candidate: Candidate) -> Result<Nvml, LoadError> {
        match loader::load_first(vec![candidate], open_nvml) {
            Ok((candidate, (library, fns))) => Ok(Nvml {
                library_path: loaded_file(fns.nvmlInit_v2 as *const c_void)
                    .unwrap_or(candidate.path),
                fns,
                _library: library,
            }),
            Err(attempts) => Err(LoadError::new(LibraryKind::Nvml, attempts)),
        }
    }

    /// The file the library was loaded from, as the dynamic linker resolved it.
    pub fn library_path(&self) -> &Path {
        &self.library_path
    }

    /// The raw function table.
    pub fn fns(&self) -> &NvmlFns {
        &self.fns
    }

    /// `nvmlReturn_t nvmlInit_v2(void)` — opens a session: NVML initialised (its count of
    /// initialisations raised) until the session is dropped, which calls `nvmlShutdown`.
    ///
    /// # Errors
    ///
    /// NVML's error: `NVML_ERROR_DRIVER_NOT_LOADED` without the NVIDIA kernel driver,
    /// `NVML_ERROR_NO_PERMISSION`, `NVML_ERROR_LIB_RM_VERSION_MISMATCH`, ...
    pub fn init(&self) -> Result<NvmlSession<'_>, NvmlReturn> {
        // SAFETY: takes no argument.
        unsafe { (self.fns.nvmlInit_v2)() }.result()?;
        Ok(NvmlSession { nvml: self })
    }

    /// `const char* nvmlErrorString(nvmlReturn_t result)` — NVML's description of `result`
    /// (needs no session). A null result gives an empty string; invalid UTF-8 is replaced.
    pub fn error_string(&self, result: NvmlReturn) -> String {
        // SAFETY: takes an integer and returns a pointer to a static string or null.
        let text = unsafe { (self.fns.nvmlErrorString)(result) };
        // SAFETY: a non-null result is a NUL-terminated string owned by NVML, which stays
        // loaded.
        unsafe { c_string(text) }
    }
}

/// NVML initialised, from [`Nvml::init`] until dropped (`nvmlShutdown`).
#[derive(Debug)]
pub struct NvmlSession<'a> {
    nvml: &'a Nvml,
}

/// A device handle of NVML, valid while the session it came from is open.
#[derive(Debug, Clone, Copy)]
pub struct NvmlDevice<'s> {
    handle: nvmlDevice_t,
    _session: PhantomData<&'s NvmlSession<'s>>,
}

impl NvmlDevice<'_> {
    /// The raw handle.
    pub fn handle(&self) -> nvmlDevice_t {
        self.handle
    }
}

impl<'a> NvmlSession<'a> {
    /// The library the session is of.
    pub fn nvml(&self) -> &'a Nvml {
        self.nvml
    }

    /// `nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t
    /// *device)` — the device at the PCI bus id `bus_id` (`domain:bus:device.function` in
    /// hexadecimal, as `cudaDeviceGetPCIBusId` writes it).
    ///
    /// # Errors
    ///
    /// NVML's error: `NVML_ERROR_NOT_FOUND` when no device has the bus id,
    /// `NVML_ERROR_INVALID_ARGUMENT` for text NVML cannot read, `NVML_ERROR_NO_PERMISSION`,
    /// ...
    pub fn device_by_pci_bus_id(&self, bus_id: &CStr) -> Result<NvmlDevice<'_>, NvmlReturn> {
        let mut handle = nvmlDevice_t(ptr::null_mut());
        // SAFETY: `bus_id` is NUL-terminated and lives for the call; `handle` is a valid
        // local; the session keeps NVML initialised.
        unsafe { (self.nvml.fns.nvmlDeviceGetHandleByPciBusId_v2)(bus_id.as_ptr(), &mut handle) }
            .result()?;
        Ok(NvmlDevice {
            handle,
            _session: PhantomData,
        })
    }

    /// `nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t
    /// *bar1Memory)` — the device's BAR1: its size, and how much of it is mapped.
    ///
    /// # Errors
    ///
    /// NVML's error: `NVML_ERROR_NOT_SUPPORTED` where the device does not say,
    /// `NVML_ERROR_GPU_IS_LOST`, ...
    pub fn bar1_memory_info(&self, device: NvmlDevice<'_>) -> Result<nvmlBAR1Memory_t, NvmlReturn> {
        let mut info = nvmlBAR1Memory_t::default();
        // SAFETY: the handle came from this session, which is still open; `info` is a valid
        // local of `nvml.h`'s layout.
        unsafe { (self.nvml.fns.nvmlDeviceGetBAR1MemoryInfo)(device.handle, &mut info) }
            .result()?;
        Ok(info)
    }
}

impl Drop for NvmlSession<'_> {
    fn drop(&mut self) {
        // SAFETY: takes no argument; it balances this session's successful `nvmlInit_v2`.
        let _ = unsafe { (self.nvml.fns.nvmlShutdown)() };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn bar1_memory_has_nvml_h_layout() {
        // Three `unsigned long long`s, in the header's order.
        assert_eq!(size_of::<nvmlBAR1Memory_t>(), 24);
        assert_eq!(align_of::<nvmlBAR1Memory_t>(), 8);
        assert_eq!(offset_of!(nvmlBAR1Memory_t, bar1Total), 0);
        assert_eq!(offset_of!(nvmlBAR1Memory_t, bar1Free), 8);
        assert_eq!(offset_of!(nvmlBAR1Memory_t, bar1Used), 16);
        assert_eq!(size_of::<nvmlDevice_t>(), size_of::<*mut c_void>());
        assert_eq!(size_of::<NvmlReturn>(), 4);
    }

    #[test]
    fn return_codes_are_nvml_h_numbers() {
        let known: Vec<(i32, &str)> = NvmlReturn::KNOWN
            .iter()
            .map(|r| (r.0, r.name().unwrap_or("")))
            .collect();
        assert_eq!(
            known,
            [
                (0, "NVML_SUCCESS"),
                (1, "NVML_ERROR_UNINITIALIZED"),
                (2, "NVML_ERROR_INVALID_ARGUMENT"),
                (3, "NVML_ERROR_NOT_SUPPORTED"),
                (4, "NVML_ERROR_NO_PERMISSION"),
                (6, "NVML_ERROR_NOT_FOUND"),
                (9, "NVML_ERROR_DRIVER_NOT_LOADED"),
                (15, "NVML_ERROR_GPU_IS_LOST"),
                (18, "NVML_ERROR_LIB_RM_VERSION_MISMATCH"),
                (999, "NVML_ERROR_UNKNOWN"),
            ]
        );
        assert_eq!(NvmlReturn(7).to_string(), "nvmlReturn 7");
        assert_eq!(
            NvmlReturn::NOT_FOUND.to_string(),
            "NVML_ERROR_NOT_FOUND (6)"
        );
    }

    #[test]
    fn nvml_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Nvml>();
        check::<NvmlFns>();
    }
}
