//! Loading NVML (`libnvidia-ml.so.1`) and asking it a device's BAR1: failures as `LoadError`
//! values that say what was tried, and the calls themselves against a stand-in NVML built
//! from C (`hipfile-testfs`'s `c/nvml_standin.c`, against NVIDIA's `nvml.h` where `cargo
//! xtask ci` fetched it), loaded by path with the same `dlopen` as the real one.
//!
//! On a machine with an NVIDIA driver, the default load finds the real library; the test
//! then prints what it found and checks only that a session opens and closes.
//!
//! # Safety
//!
//! The stand-in is opened a second time to call its session counter, a function of
//! `int (void)`, while the handle lives.

use hipfile_sys::{LibraryKind, LoadFailure, NVML_LIBRARY, Nvml, NvmlReturn, nvmlBAR1Memory_t};
use hipfile_testfs::nvml::{
    BAR1_BUS_ID, BAR1_BYTES, NO_BAR1_BUS_ID, SESSIONS_SYMBOL, nvml_standin,
};
use hipfile_testfs::{TempDir, require};
use std::ffi::{CString, c_int};
use std::path::Path;

#[test]
fn a_missing_library_is_a_load_error_that_names_it() {
    let path = Path::new("/nonexistent/hipfile-test/libnvidia-ml.so.1");
    let err = Nvml::load_path(path).expect_err("loaded a file that does not exist");
    let text = err.to_string();
    assert_eq!(err.library(), LibraryKind::Nvml);
    assert!(err.is_explicit());
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains("NVML"), "{text}");
    assert!(text.contains("no other location"), "{text}");
    assert!(matches!(err.attempts()[0].failure, LoadFailure::Open(_)));
}

#[test]
fn a_library_that_is_not_nvml_lacks_its_first_symbol() {
    let err = Nvml::load_path(Path::new("libc.so.6")).expect_err("libc is not NVML");
    assert_eq!(err.missing_symbol(), Some("nvmlInit_v2"));
    assert!(err.to_string().contains("not NVML"), "{err}");
}

#[test]
fn the_default_load_finds_the_drivers_library_or_says_why_not() {
    assert_eq!(NVML_LIBRARY, "libnvidia-ml.so.1");
    match Nvml::load() {
        Ok(nvml) => {
            eprintln!("NVML loaded from {}", nvml.library_path().display());
            match nvml.init() {
                Ok(session) => drop(session),
                Err(e) => eprintln!("nvmlInit_v2: {e}: {}", nvml.error_string(e)),
            }
        }
        Err(err) => {
            let text = err.to_string();
            assert_eq!(err.library(), LibraryKind::Nvml);
            assert!(!err.is_explicit());
            assert_eq!(err.attempts().len(), 1);
            assert!(text.contains("libnvidia-ml.so.1"), "{text}");
            assert!(text.contains("comes with the NVIDIA driver"), "{text}");
        }
    }
}

#[test]
fn the_stand_in_answers_bar1_by_pci_bus_id_and_sessions_balance() {
    let dir = TempDir::new("nvml-standin");
    let standin = require!(nvml_standin(dir.path()));
    match &standin.header {
        Some(h) => eprintln!("stand-in built against {}", h.display()),
        None => eprintln!("stand-in built without NVIDIA's nvml.h (`cargo xtask ci` fetches it)"),
    }
    let nvml = Nvml::load_path(&standin.library).unwrap();
    assert_eq!(nvml.library_path(), standin.library);
    // SAFETY: the stand-in's initialisers are the C runtime's; it is loaded already.
    let lib = unsafe { libloading::os::unix::Library::new(&standin.library) }.unwrap();
    // SAFETY: the stand-in defines the symbol as `int standin_nvml_sessions(void)`.
    let sessions =
        unsafe { lib.get::<unsafe extern "C" fn() -> c_int>(SESSIONS_SYMBOL.as_bytes()) }.unwrap();
    // SAFETY: as above; `lib` keeps the function loaded for the whole test.
    let open = || unsafe { sessions() };

    let session = nvml.init().unwrap();
    assert_eq!(open(), 1);
    // CUDA writes the bus id in capitals; NVML reads hexadecimal either way.
    let bus = CString::new(BAR1_BUS_ID).unwrap();
    let device = session.device_by_pci_bus_id(&bus).unwrap();
    let bar1 = session.bar1_memory_info(device).unwrap();
    assert_eq!(
        bar1,
        nvmlBAR1Memory_t {
            bar1Total: BAR1_BYTES,
            bar1Free: BAR1_BYTES - (32 << 20),
            bar1Used: 32 << 20,
        }
    );
    let lower = CString::new(BAR1_BUS_ID.to_lowercase()).unwrap();
    let again = session.device_by_pci_bus_id(&lower).unwrap();
    assert_eq!(again.handle(), device.handle());

    let none = CString::new(NO_BAR1_BUS_ID).unwrap();
    let device = session.device_by_pci_bus_id(&none).unwrap();
    assert_eq!(
        session.bar1_memory_info(device),
        Err(NvmlReturn::NOT_SUPPORTED)
    );
    let absent = session
        .device_by_pci_bus_id(c"0000:01:00.0")
        .map(|d| d.handle());
    assert_eq!(absent, Err(NvmlReturn::NOT_FOUND));
    let garbage = session.device_by_pci_bus_id(c"GPU 0").map(|d| d.handle());
    assert_eq!(garbage, Err(NvmlReturn::INVALID_ARGUMENT));
    assert_eq!(nvml.error_string(NvmlReturn::NOT_FOUND), "Not Found");

    // Sessions nest, as NVML counts them, and each gives its initialisation back.
    let second = nvml.init().unwrap();
    assert_eq!(open(), 2);
    drop(second);
    drop(session);
    assert_eq!(open(), 0);
}
