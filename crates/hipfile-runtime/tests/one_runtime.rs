//! One HIP runtime per process. Every test here first loads the emulated runtime (soname
//! `libamdhip64.so.7`), as a program linked with `-lamdhip64`, or `libhipfile.so.0` with its
//! dependency on the runtime, has it loaded; then loading "another" runtime must give that
//! same one or fail, and never map a second: an explicit path to a copy of it, or to
//! Debian's ROCm 5.2 runtime, is refused with an error that names both; an explicit path to
//! the loaded file under another name is that runtime; a ROCm path whose `lib/` holds a copy
//! is not looked at. `/proc/self/maps` must never show the other file.
//!
//! The case of a loaded `libamdhip64` that lacks HIP's symbols (the search must fail, not go
//! on to load another) runs in a child process of this test binary, where nothing else is
//! loaded first.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile_runtime::HipRuntime;
use hipfile_sys::{LoadFailure, LoadOptions};
use hipfile_testfs::{Skip, TempDir, has_command, require};
use std::path::{Path, PathBuf};
use std::process::Command;

const DEBIAN: &str = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5";

/// The emulated runtime's file, loaded by its path (it stays loaded for the process).
fn loaded_emulated() -> Result<(PathBuf, HipRuntime), Skip> {
    let path = hipfile_testfs::emulated_runtime()?;
    let rt = HipRuntime::load_path(&path)
        .map_err(|e| Skip(format!("cannot load {}: {e}", path.display())))?;
    Ok((path, rt))
}

/// The address of `hipInit` in `rt`: two runtimes are one object when it is the same.
fn hip_init(rt: &HipRuntime) -> usize {
    rt.hip().fns().hipInit as usize
}

/// Whether `/proc/self/maps` maps `file` (as the kernel names it: the file itself).
fn mapped(file: &Path) -> bool {
    let file = file.canonicalize().unwrap();
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .any(|l| l.ends_with(&*file.to_string_lossy()))
}

/// A copy of the emulated runtime in `dir`, as `name`: another file, so another runtime.
fn copy_of(emu: &Path, dir: &Path, name: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let copy = dir.join(name);
    std::fs::copy(emu, &copy).unwrap();
    copy
}

fn explicit(path: &Path) -> LoadOptions {
    LoadOptions {
        explicit_path: Some(path.to_path_buf()),
        rocm_path: None,
    }
}

#[test]
fn an_explicit_path_to_another_file_is_refused_while_a_runtime_is_loaded() {
    let (emu, _rt) = require!(loaded_emulated());
    let dir = TempDir::new("one-runtime-copy");
    let copy = copy_of(&emu, dir.path(), "libamdhip64.so");
    let err = HipRuntime::load(&explicit(&copy)).unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&*copy.to_string_lossy()), "{text}");
    assert!(text.contains("libamdhip64.so.7"), "{text}");
    assert!(text.contains("second"), "{text}");
    assert!(text.contains("unset HIPFILE_HIP_LIBRARY"), "{text}");
    let loaded = err.second_runtime().expect("refused as a second runtime");
    assert_eq!(
        loaded.canonicalize().unwrap(),
        emu.canonicalize().unwrap(),
        "{text}"
    );
    assert!(matches!(
        err.attempts()[0].failure,
        LoadFailure::SecondRuntime { .. }
    ));
    assert!(!mapped(&copy), "the copy was loaded:\n{text}");
}

#[test]
fn an_explicit_path_to_the_loaded_file_is_that_runtime() {
    let (emu, rt) = require!(loaded_emulated());
    let dir = TempDir::new("one-runtime-link");
    let link = dir.path().join("libamdhip64.so.7");
    std::os::unix::fs::symlink(&emu, &link).unwrap();
    let again = HipRuntime::load(&explicit(&link)).unwrap();
    assert_eq!(hip_init(&again), hip_init(&rt));
    // Its bare soname names it too.
    let by_soname = HipRuntime::load(&explicit(Path::new("libamdhip64.so.7"))).unwrap();
    assert_eq!(hip_init(&by_soname), hip_init(&rt));
}

#[test]
fn a_missing_explicit_file_is_reported_as_missing() {
    let (_emu, _rt) = require!(loaded_emulated());
    let path = Path::new("/nonexistent/hipfile-test/libamdhip64.so");
    let err = HipRuntime::load(&explicit(path)).unwrap_err();
    assert!(
        matches!(err.attempts()[0].failure, LoadFailure::Open(_)),
        "{err}"
    );
    assert_eq!(err.second_runtime(), None);
}

#[test]
fn a_rocm_path_holding_another_runtime_is_not_loaded() {
    let (emu, rt) = require!(loaded_emulated());
    let dir = TempDir::new("one-runtime-rocm");
    let copy = copy_of(&emu, &dir.path().join("lib"), "libamdhip64.so");
    let found = HipRuntime::load(&LoadOptions {
        explicit_path: None,
        rocm_path: Some(dir.path().to_path_buf()),
    })
    .unwrap();
    assert_eq!(hip_init(&found), hip_init(&rt));
    assert!(!mapped(&copy), "the ROCm path's runtime was loaded");
}

#[test]
fn debians_runtime_is_refused_while_the_emulated_one_is_loaded() {
    let (_emu, _rt) = require!(loaded_emulated());
    if !Path::new(DEBIAN).exists() {
        hipfile_testfs::skipped(
            Skip(format!(
                "{DEBIAN} is not installed (apt-get install libamdhip64-5)"
            )),
            module_path!(),
        );
        return;
    }
    let err = HipRuntime::load(&explicit(Path::new(DEBIAN))).unwrap_err();
    assert!(err.second_runtime().is_some(), "{err}");
    assert!(!mapped(Path::new(DEBIAN)), "Debian's runtime was loaded");
    // Nor by its soname.
    let err = HipRuntime::load(&explicit(Path::new("libamdhip64.so.5"))).unwrap_err();
    assert!(err.second_runtime().is_some(), "{err}");
    assert!(!mapped(Path::new(DEBIAN)), "Debian's runtime was loaded");
}

/// The child: a library with the soname `libamdhip64.so.6` and none of HIP's symbols is
/// loaded first; the search (with a ROCm path holding the emulated runtime) must then fail
/// on it, and load nothing else.
#[test]
#[ignore = "run by a_loaded_runtime_without_hips_symbols_is_not_replaced in a child process"]
fn child_loaded_stub() {
    // The child's arguments, passed by the parent through the environment of this one test.
    #[allow(clippy::disallowed_methods)]
    let var = |name: &str| PathBuf::from(std::env::var_os(name).unwrap());
    let (stub, rocm) = (var("ONE_RUNTIME_STUB"), var("ONE_RUNTIME_ROCM"));
    let name = std::ffi::CString::new(stub.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: the stub is an empty shared object made by the parent: no initialisers run.
    // The handle is never closed: the stub stays loaded for this child's life.
    let held = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!held.is_null(), "cannot load {}", stub.display());
    let err = HipRuntime::load(&LoadOptions {
        explicit_path: None,
        rocm_path: Some(rocm.clone()),
    })
    .unwrap_err();
    let text = err.to_string();
    assert_eq!(err.missing_symbol(), Some("hipInit"), "{text}");
    assert!(text.contains("libamdhip64.so.6"), "{text}");
    assert_eq!(err.attempts().len(), 1, "the search went on:\n{text}");
    assert!(!mapped(&rocm.join("lib/libamdhip64.so")), "{text}");
}

#[test]
fn a_loaded_runtime_without_hips_symbols_is_not_replaced() {
    require!(has_command("cc"));
    let emu = require!(hipfile_testfs::emulated_runtime());
    let dir = TempDir::new("one-runtime-stub");
    let stub = dir.path().join("libamdhip64.so.6");
    let built = Command::new("cc")
        .args(["-shared", "-nostdlib", "-Wl,-soname,libamdhip64.so.6", "-o"])
        .arg(&stub)
        .args(["-x", "c", "/dev/null"])
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let rocm = dir.path().join("rocm");
    copy_of(&emu, &rocm.join("lib"), "libamdhip64.so");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_loaded_stub", "--ignored", "--nocapture"])
        .env("ONE_RUNTIME_STUB", &stub)
        .env("ONE_RUNTIME_ROCM", &rocm)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && text.contains("1 passed"),
        "the child failed:\n{text}"
    );
}
