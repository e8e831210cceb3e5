//! A C program linked with the HIP runtime (`-lamdhip64`, the emulated runtime) and run with
//! `HIPFILE_HIP_LIBRARY` naming a file: `tests/c/oneruntime.c`. Naming the loaded runtime
//! under another name (a link), the library opens on that runtime and moves the program's
//! `hipMalloc` memory; naming another file (a copy of the runtime), the driver is not opened,
//! stderr says why (both files named), and the copy is never loaded. Skips when there is no
//! `cc` or the emulated runtime was not built.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile_testfs::{TempDir, emulated_runtime, has_command, require};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Builds `tests/c/oneruntime.c` in `dir` against the header and the library `lib`, linked
/// with the emulated runtime `emu` as `-lamdhip64` (`dir/lib` holds both under their
/// installed names); returns the program.
fn build(dir: &Path, lib: &Path, emu: &Path) -> PathBuf {
    let libdir = dir.join("lib");
    std::fs::create_dir(&libdir).unwrap();
    for (target, names) in [
        (lib, ["libhipfile.so", "libhipfile.so.0"]),
        (emu, ["libamdhip64.so", "libamdhip64.so.7"]),
    ] {
        for name in names {
            std::os::unix::fs::symlink(target, libdir.join(name)).unwrap();
        }
    }
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = dir.join("oneruntime");
    let built = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE"])
        .arg("-DHIPFILE_NO_HIP_HEADERS")
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c/oneruntime.c"))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-L{}", libdir.display()))
        .arg(format!("-Wl,-rpath,{}", libdir.display()))
        .args(["-lhipfile", "-lamdhip64"])
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    exe
}

fn run(exe: &Path, work: &Path, expect: &str, hip_library: &Path) -> Output {
    std::fs::create_dir_all(work).unwrap();
    Command::new(exe)
        .arg(work)
        .arg(expect)
        .env("HIPFILE_HIP_LIBRARY", hip_library)
        .env_remove("ROCM_PATH")
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn hipfile_hip_library_naming_the_loaded_runtime_uses_it() {
    require!(has_command("cc"));
    let emu = require!(emulated_runtime());
    let lib = require!(hipfile_testfs::cdylib("hipfile-c-hipfile", "libhipfile.so"));
    let dir = TempDir::new("c-hipfile-oneruntime-same");
    let exe = build(dir.path(), &lib, &emu);
    let link = dir.path().join("named").join("libamdhip64.so");
    std::fs::create_dir(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&emu, &link).unwrap();
    let out = run(&exe, &dir.path().join("work"), "open", &link);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("all checks passed"), "{}", text(&out));
}

#[test]
fn hipfile_hip_library_naming_another_runtime_is_refused() {
    require!(has_command("cc"));
    let emu = require!(emulated_runtime());
    let lib = require!(hipfile_testfs::cdylib("hipfile-c-hipfile", "libhipfile.so"));
    let dir = TempDir::new("c-hipfile-oneruntime-other");
    let exe = build(dir.path(), &lib, &emu);
    let copy = dir.path().join("other").join("libamdhip64.so");
    std::fs::create_dir(copy.parent().unwrap()).unwrap();
    std::fs::copy(&emu, &copy).unwrap();
    let out = run(&exe, &dir.path().join("work"), "refused", &copy);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert!(all.contains("all checks passed"), "{all}");
    // Said once, naming the file refused and the runtime in use.
    let said: Vec<&str> = all
        .lines()
        .filter(|l| l.starts_with("hipfile: error: cannot open the hipfile driver"))
        .collect();
    assert_eq!(said.len(), 1, "{all}");
    assert!(all.contains(&*copy.to_string_lossy()), "{all}");
    assert!(all.contains("libamdhip64.so.7"), "{all}");
    assert!(all.contains("unset HIPFILE_HIP_LIBRARY"), "{all}");
}
