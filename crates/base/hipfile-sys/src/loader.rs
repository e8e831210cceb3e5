//! The loader both runtimes share: search candidates ([`Candidate`]), `dlopen` through
//! `libloading`, symbol resolution (required and optional), and the one error type of a failed
//! load ([`LoadError`]), which lists every path tried and why each failed.
//!
//! What is searched is each runtime's business (`hip::candidates`, `cuda::cuda_candidates`);
//! how a candidate is opened, resolved and reported is the same for all of them, here.
//! Nothing here reads the environment, and loading never panics.
//!
//! # Safety
//!
//! Opening a library runs its initialisers, so `open_library` is safe only under the
//! contract of the runtime that calls it: its candidates name that runtime (or a library
//! without harmful initialisers). `resolve` casts a symbol's address to a function pointer
//! type that its caller vouches for. `loaded_file` and `c_string` read C strings that the
//! dynamic linker or a loaded runtime owns.

use libloading::os::unix::Library;
use std::ffi::{CStr, c_char, c_void};
use std::fmt;
use std::mem;
use std::path::{Path, PathBuf};

/// Why a [`Candidate`] is in a search order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CandidateOrigin {
    /// A path given explicitly: tried alone.
    Explicit,
    /// `lib/libamdhip64.so` under a ROCm installation root the caller gave.
    RocmPath,
    /// The runtime's default installation.
    DefaultInstall,
    /// A soname, resolved by the dynamic linker.
    Soname,
}

impl fmt::Display for CandidateOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CandidateOrigin::Explicit => "explicit path",
            CandidateOrigin::RocmPath => "under the given ROCm path",
            CandidateOrigin::DefaultInstall => "default install",
            CandidateOrigin::Soname => "dynamic linker search path",
        })
    }
}

/// One place a library may be loaded from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Candidate {
    /// What is passed to `dlopen`: a path, or a bare soname.
    pub path: PathBuf,
    /// Why it is tried.
    pub origin: CandidateOrigin,
}

impl Candidate {
    /// A candidate for `path` with the given origin.
    pub fn new(path: impl Into<PathBuf>, origin: CandidateOrigin) -> Candidate {
        Candidate {
            path: path.into(),
            origin,
        }
    }
}

impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.path.display(), self.origin)
    }
}

/// Why one candidate did not give a usable library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadFailure {
    /// `dlopen` failed; the dynamic linker's message.
    Open(String),
    /// The library opened but lacks a required symbol.
    MissingSymbol {
        /// The missing symbol.
        symbol: &'static str,
        /// The dynamic linker's message.
        message: String,
    },
    /// Not loaded: the process already holds another runtime of the same kind, and a second
    /// one beside it would know none of the first one's memory, streams or devices.
    SecondRuntime {
        /// The runtime already loaded: its file, as the dynamic linker loaded it.
        loaded: PathBuf,
        /// The soname it answers to (`libamdhip64.so.7`).
        soname: String,
    },
}

impl LoadFailure {
    /// The failure's text for a library that was meant to be `what` ("a HIP runtime").
    pub fn describe(&self, what: &str) -> String {
        match self {
            LoadFailure::Open(message) => message.clone(),
            LoadFailure::MissingSymbol { symbol, message } => format!(
                "opened, but it lacks the required symbol `{symbol}` (not {what}, or one too \
                 old): {message}"
            ),
            LoadFailure::SecondRuntime { loaded, soname } => format!(
                "not loaded: this process has already loaded {what}, {} (as {soname}), and \
                 hipfile does not load a second one beside it (it would know none of the \
                 first one's memory, streams or devices)",
                loaded.display()
            ),
        }
    }
}

impl fmt::Display for LoadFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe("the expected library"))
    }
}

/// One failed candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadAttempt {
    /// What was tried.
    pub candidate: Candidate,
    /// Why it failed.
    pub failure: LoadFailure,
}

/// Which library a load was for; it decides the wording of a [`LoadError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LibraryKind {
    /// AMD's HIP runtime, `libamdhip64`.
    HipRuntime,
    /// NVIDIA's CUDA runtime, `libcudart`.
    CudaRuntime,
    /// NVIDIA's CUDA driver library, `libcuda.so.1`, loaded after the CUDA runtime.
    CudaDriver,
    /// NVIDIA's management library, NVML (`libnvidia-ml.so.1`), loaded when a question only
    /// it answers is asked.
    Nvml,
}

impl LibraryKind {
    /// Its name in a sentence ("the HIP runtime" without the article).
    fn name(self) -> &'static str {
        match self {
            LibraryKind::HipRuntime => "HIP runtime",
            LibraryKind::CudaRuntime => "CUDA runtime",
            LibraryKind::CudaDriver => "CUDA driver library",
            LibraryKind::Nvml => "NVIDIA management library (NVML)",
        }
    }

    /// The library's file stem.
    fn file(self) -> &'static str {
        match self {
            LibraryKind::HipRuntime => "libamdhip64",
            LibraryKind::CudaRuntime => "libcudart",
            LibraryKind::CudaDriver => "libcuda",
            LibraryKind::Nvml => "libnvidia-ml",
        }
    }

    /// What a library that lacks a required symbol is not.
    fn what(self) -> &'static str {
        match self {
            LibraryKind::HipRuntime => "a HIP runtime",
            LibraryKind::CudaRuntime => "a CUDA runtime",
            LibraryKind::CudaDriver => "the CUDA driver library",
            LibraryKind::Nvml => "NVML",
        }
    }

    /// Why a candidate is in this library's search order, in its own words.
    fn origin(self, origin: CandidateOrigin) -> &'static str {
        match (self, origin) {
            (LibraryKind::HipRuntime, CandidateOrigin::DefaultInstall) => "default ROCm install",
            (_, CandidateOrigin::DefaultInstall) => "default CUDA install",
            (LibraryKind::HipRuntime, CandidateOrigin::RocmPath) => "under the given ROCm path",
            (_, CandidateOrigin::RocmPath) => "under a ROCm path",
            (_, CandidateOrigin::Explicit) => "explicit path",
            (_, CandidateOrigin::Soname) => "dynamic linker search path",
        }
    }

    /// What to do about it: after an explicit path, or after a search.
    fn hint(self, explicit: bool) -> &'static str {
        match (self, explicit) {
            (LibraryKind::HipRuntime, true) => {
                "hint: make the explicit path (HIPFILE_HIP_LIBRARY, if that is where it came \
                 from) name the HIP runtime library (libamdhip64.so, for example \
                 /opt/rocm/lib/libamdhip64.so), or unset it to search the usual places"
            }
            (LibraryKind::HipRuntime, false) => {
                "hint: set HIPFILE_HIP_LIBRARY to the path of the HIP runtime (libamdhip64.so), \
                 or install ROCm (AMD's packages into /opt/rocm, or Debian's libamdhip64-5)"
            }
            (LibraryKind::Nvml, true) => {
                "hint: make the explicit path name NVML (libnvidia-ml.so.1, which comes with the \
                 NVIDIA driver)"
            }
            (LibraryKind::Nvml, false) => {
                "hint: libnvidia-ml.so.1 comes with the NVIDIA driver, not with the CUDA \
                 toolkit: install the driver (in a container, run it with the NVIDIA container \
                 runtime, which mounts the driver's libraries)"
            }
            (LibraryKind::CudaDriver, _) => {
                "hint: libcuda.so.1 comes with the NVIDIA driver, not with the CUDA toolkit: \
                 install the driver (in a container, run it with the NVIDIA container runtime)"
            }
            (LibraryKind::CudaRuntime, true) => {
                "hint: make the explicit path name the CUDA runtime library (libcudart.so.13 or \
                 libcudart.so.12, for example /usr/local/cuda/lib64/libcudart.so.13), or leave \
                 it unset to search the usual places"
            }
            (LibraryKind::CudaRuntime, false) => {
                "hint: install the CUDA runtime (the toolkit's libcudart, in \
                 /usr/local/cuda/lib64 or anywhere on the dynamic linker's search path), or \
                 give its path explicitly"
            }
        }
    }
}

/// A runtime could not be loaded: which library, every candidate tried, and why each failed.
///
/// The one error of loading, for HIP and CUDA alike. Its text names every path with the
/// reason it failed, and ends with a hint in the terms of the library that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct LoadError {
    library: LibraryKind,
    attempts: Vec<LoadAttempt>,
    /// For the CUDA driver: the runtime that did load before it.
    loaded_runtime: Option<PathBuf>,
}

impl LoadError {
    /// An error for `library` from the attempts made, in order.
    pub fn new(library: LibraryKind, attempts: Vec<LoadAttempt>) -> LoadError {
        LoadError {
            library,
            attempts,
            loaded_runtime: None,
        }
    }

    /// The CUDA runtime at `runtime` loaded, but the driver library did not.
    pub fn driver(runtime: PathBuf, attempt: LoadAttempt) -> LoadError {
        LoadError {
            library: LibraryKind::CudaDriver,
            attempts: vec![attempt],
            loaded_runtime: Some(runtime),
        }
    }

    /// The library that could not be loaded.
    pub fn library(&self) -> LibraryKind {
        self.library
    }

    /// Every candidate tried, in order, with its failure.
    pub fn attempts(&self) -> &[LoadAttempt] {
        &self.attempts
    }

    /// The runtime that loaded before the library that failed (the CUDA runtime, when the
    /// driver failed).
    pub fn loaded_runtime(&self) -> Option<&Path> {
        self.loaded_runtime.as_deref()
    }

    /// The first required symbol that a library which did open was missing, if any.
    pub fn missing_symbol(&self) -> Option<&'static str> {
        self.attempts.iter().find_map(|a| match a.failure {
            LoadFailure::MissingSymbol { symbol, .. } => Some(symbol),
            LoadFailure::Open(_) | LoadFailure::SecondRuntime { .. } => None,
        })
    }

    /// The runtime already loaded in the process that kept a candidate from being loaded
    /// beside it ([`LoadFailure::SecondRuntime`]), if that is why the load failed.
    pub fn second_runtime(&self) -> Option<&Path> {
        self.attempts.iter().find_map(|a| match &a.failure {
            LoadFailure::SecondRuntime { loaded, .. } => Some(loaded.as_path()),
            _ => None,
        })
    }

    /// Whether only an explicit runtime path was tried (and failed).
    pub fn is_explicit(&self) -> bool {
        !self.is_driver()
            && !self.attempts.is_empty()
            && self
                .attempts
                .iter()
                .all(|a| a.candidate.origin == CandidateOrigin::Explicit)
    }

    /// Whether it was the CUDA driver library, not a runtime, that failed.
    pub fn is_driver(&self) -> bool {
        self.library == LibraryKind::CudaDriver
    }

    fn render(&self) -> String {
        let kind = self.library;
        let mut out = String::new();
        match (kind, self.attempts.as_slice()) {
            (LibraryKind::CudaDriver, [attempt, ..]) => {
                match &self.loaded_runtime {
                    Some(runtime) => out.push_str(&format!(
                        "loaded the CUDA runtime from {}, but not the CUDA driver library {}: ",
                        runtime.display(),
                        attempt.candidate.path.display(),
                    )),
                    None => out.push_str(&format!(
                        "could not load the CUDA driver library {}: ",
                        attempt.candidate.path.display()
                    )),
                }
                out.push_str(&attempt.failure.describe(kind.what()));
            }
            (_, []) => out.push_str(&format!(
                "could not load the {}: no location was tried",
                kind.name()
            )),
            (_, [only]) if only.candidate.origin == CandidateOrigin::Explicit => {
                out.push_str(&format!(
                    "could not load the {} from {} (an explicit path, so no other location was \
                     tried): {}",
                    kind.name(),
                    only.candidate.path.display(),
                    only.failure.describe(kind.what())
                ));
            }
            (_, attempts) => {
                out.push_str(&format!(
                    "could not load the {} ({}); tried:",
                    kind.name(),
                    kind.file()
                ));
                for a in attempts {
                    out.push_str(&format!(
                        "\n  {} ({}): {}",
                        a.candidate.path.display(),
                        kind.origin(a.candidate.origin),
                        a.failure.describe(kind.what())
                    ));
                }
            }
        }
        out.push('\n');
        match self.second_runtime() {
            Some(loaded) => out.push_str(&format!(
                "hint: unset HIPFILE_HIP_LIBRARY (or the explicit path it came from) to use the \
                 runtime the process has loaded, or make it name that file, {}",
                loaded.display()
            )),
            None => out.push_str(kind.hint(self.is_explicit())),
        }
        out
    }
}

/// Tries `candidates` in order with `open`, and returns the first that opens with the candidate
/// it came from; otherwise every attempt, in order, with its failure.
pub(crate) fn load_first<T>(
    candidates: Vec<Candidate>,
    mut open: impl FnMut(&Candidate) -> Result<T, LoadFailure>,
) -> Result<(Candidate, T), Vec<LoadAttempt>> {
    let mut attempts = Vec::new();
    for candidate in candidates {
        match open(&candidate) {
            Ok(loaded) => return Ok((candidate, loaded)),
            Err(failure) => attempts.push(LoadAttempt { candidate, failure }),
        }
    }
    Err(attempts)
}

/// Opens `path` with the flags every runtime library needs.
///
/// # Safety
///
/// Opening runs the library's initialisers: `path` must name a library whose initialisers
/// are meant to run in any process (a GPU runtime, or one that merely lacks its symbols).
pub(crate) unsafe fn open_library(path: &Path) -> Result<Library, LoadFailure> {
    // RTLD_NOW: a library with unresolvable dependencies fails here, not at a later call.
    // RTLD_NODELETE: the runtimes start threads and register exit handlers that must not
    // outlive their code, so the library stays mapped after its handle is dropped.
    let flags = libc::RTLD_NOW | libc::RTLD_LOCAL | libc::RTLD_NODELETE;
    // SAFETY: the caller vouches for the library's initialisers.
    unsafe { Library::open(Some(path.as_os_str()), flags) }
        .map_err(|e| LoadFailure::Open(error_chain(&e)))
}

/// Whether the process has already loaded a library the dynamic linker knows as `name` (a
/// soname such as `libamdhip64.so.7`, or a path, which also matches an object loaded from
/// the same file under another name): `dlopen` with `RTLD_NOLOAD`, which never loads.
pub(crate) fn is_loaded(name: impl AsRef<std::ffi::OsStr>) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(name) = std::ffi::CString::new(name.as_ref().as_bytes()) else {
        return false;
    };
    // SAFETY: `name` is NUL-terminated; with RTLD_NOLOAD nothing is loaded and no initialiser
    // runs: the call returns a handle to an object already loaded, or null.
    let handle = unsafe {
        libc::dlopen(
            name.as_ptr(),
            libc::RTLD_NOLOAD | libc::RTLD_NOW | libc::RTLD_LOCAL,
        )
    };
    if handle.is_null() {
        return false;
    }
    // SAFETY: `handle` came from the `dlopen` above and is closed once, which only gives back
    // the reference that call took; the object stays loaded for whoever loaded it.
    unsafe { libc::dlclose(handle) };
    true
}

/// The file of the object the process has loaded as `name` (a soname, or a path), found
/// through the address of its `symbol`; `None` when nothing is loaded as `name` or it has no
/// such symbol. Loads nothing (`RTLD_NOLOAD`).
pub(crate) fn loaded_object_file(name: &str, symbol: &CStr) -> Option<PathBuf> {
    let name = std::ffi::CString::new(name).ok()?;
    // SAFETY: `name` is NUL-terminated; with RTLD_NOLOAD nothing is loaded and no initialiser
    // runs: the call returns a handle to an object already loaded, or null.
    let handle = unsafe {
        libc::dlopen(
            name.as_ptr(),
            libc::RTLD_NOLOAD | libc::RTLD_NOW | libc::RTLD_LOCAL,
        )
    };
    if handle.is_null() {
        return None;
    }
    // SAFETY: `handle` is a live handle from `dlopen`; `symbol` is NUL-terminated. The
    // address is only passed to `dladdr`, never called.
    let address = unsafe { libc::dlsym(handle, symbol.as_ptr()) };
    let file = if address.is_null() {
        None
    } else {
        loaded_file(address)
    };
    // SAFETY: `handle` came from the `dlopen` above and is closed once, which only gives back
    // the reference that call took; the object stays loaded for whoever loaded it.
    unsafe { libc::dlclose(handle) };
    file
}

/// Resolves `name` from `library` as a function pointer of type `T`, refusing a null address.
///
/// # Safety
///
/// `T` must be an `extern "C"` function pointer type matching the symbol's C signature.
pub(crate) unsafe fn resolve<T: Copy>(library: &Library, name: &'static str) -> Result<T, String> {
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

/// Resolves a required symbol, or returns (with `?`) the [`LoadFailure`] naming it.
macro_rules! required {
    ($library:expr, $name:ident) => {
        // SAFETY: the field's type is the C signature of the symbol of the same name.
        unsafe { $crate::loader::resolve(&$library, stringify!($name)) }.map_err(|message| {
            $crate::loader::LoadFailure::MissingSymbol {
                symbol: stringify!($name),
                message,
            }
        })?
    };
}
pub(crate) use required;

/// Resolves an optional symbol: `None` is an absent capability, not an error.
macro_rules! optional {
    ($library:expr, $name:ident) => {
        // SAFETY: the field's type is the C signature of the symbol of the same name.
        unsafe { $crate::loader::resolve(&$library, stringify!($name)) }.ok()
    };
}
pub(crate) use optional;

/// The file of the shared object that contains `address`, from `dladdr`.
pub(crate) fn loaded_file(address: *const c_void) -> Option<PathBuf> {
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
pub(crate) fn error_chain(error: &libloading::Error) -> String {
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
pub(crate) unsafe fn c_string(text: *const c_char) -> String {
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
    use std::ptr;

    #[test]
    fn is_loaded_sees_loaded_sonames_and_loads_nothing() {
        assert!(is_loaded("libc.so.6"), "every test links the C library");
        assert!(!is_loaded("libhipfile-no-such-library.so.9"));
        assert!(!is_loaded("with\0nul"));
    }

    #[test]
    fn loaded_object_file_names_the_loaded_file_and_loads_nothing() {
        let libc_file = loaded_object_file("libc.so.6", c"malloc").expect("libc is loaded");
        assert!(
            libc_file.to_string_lossy().contains("libc.so.6"),
            "{}",
            libc_file.display()
        );
        assert_eq!(
            loaded_object_file("libc.so.6", c"hipfileNoSuchSymbol"),
            None
        );
        assert_eq!(
            loaded_object_file("libhipfile-no-such-library.so.9", c"malloc"),
            None
        );
    }

    #[test]
    fn a_second_runtime_is_described_with_the_loaded_one_and_a_hint() {
        let err = LoadError::new(
            LibraryKind::HipRuntime,
            vec![LoadAttempt {
                candidate: Candidate::new("/other/libamdhip64.so", CandidateOrigin::Explicit),
                failure: LoadFailure::SecondRuntime {
                    loaded: "/opt/rocm/lib/libamdhip64.so.7".into(),
                    soname: "libamdhip64.so.7".into(),
                },
            }],
        );
        let text = err.to_string();
        assert!(text.contains("/other/libamdhip64.so"), "{text}");
        assert!(
            text.contains(
                "already loaded a HIP runtime, /opt/rocm/lib/libamdhip64.so.7 (as libamdhip64.so.7)"
            ),
            "{text}"
        );
        assert!(text.contains("second"), "{text}");
        assert!(text.contains("unset HIPFILE_HIP_LIBRARY"), "{text}");
        assert_eq!(
            err.second_runtime(),
            Some(Path::new("/opt/rocm/lib/libamdhip64.so.7"))
        );
        assert_eq!(err.missing_symbol(), None);
        assert!(err.is_explicit());
    }

    #[test]
    fn c_string_is_null_safe_and_lossy() {
        // SAFETY: null is allowed.
        assert_eq!(unsafe { c_string(ptr::null()) }, "");
        // SAFETY: a NUL-terminated literal.
        let name = unsafe { c_string(c"hipErrorNoDevice".as_ptr()) };
        assert_eq!(name, "hipErrorNoDevice");
        // SAFETY: a NUL-terminated literal with an invalid byte.
        assert_eq!(unsafe { c_string(c"a\xffb".as_ptr()) }, "a\u{fffd}b");
    }

    #[test]
    fn load_error_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<LoadError>();
    }
}
