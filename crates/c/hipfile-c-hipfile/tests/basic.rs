//! The library as C sees it: compiles `tests/c/basic.c` with the system C compiler against
//! `include/hipfile.h`, links it with `libhipfile.so.0` (found through its soname, as an
//! installed library would be) and the emulated HIP runtime, runs it with
//! `HIPFILE_HIP_LIBRARY` naming that runtime, and expects exit status 0: the use count,
//! registrations, a write and a read back with the bytes checked, and every return
//! convention of the exported functions (basic.c lists them). `tests/c/threads.c` does the
//! same from many threads at once, `tests/c/nodevice.c` opens the driver on a runtime without
//! devices, `tests/c/batch.c` the batch calls, `tests/c/params.c` the
//! properties, driver setters and parameters, and `tests/c/stats.c` the statistics at levels 3
//! and 1. `tests/c/hipruntime.c` links the runtime as a HIP application does (`-lamdhip64`) and
//! runs without `HIPFILE_HIP_LIBRARY`, `ROCM_PATH` naming another copy of the runtime: the
//! library must use the runtime the program loaded. Also checks the soname and the exported
//! symbols.
//!
//! Skips when there is no `cc` or the emulated runtime was not built (`cargo test` builds
//! it); builds the shared library itself.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile_testfs::{Ext4Data, MountedFs, Skip, TempDir, emulated_runtime, has_command, require};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `libhipfile.so`, built for this test's profile (`hipfile_testfs::cdylib`).
fn shared_library() -> Result<PathBuf, Skip> {
    hipfile_testfs::cdylib("hipfile-c-hipfile", "libhipfile.so")
}

/// Lays the libraries out as an installation would: `libhipfile.so` for the linker and
/// `libhipfile.so.0` (the soname) for the loader, both links to the built file, and the
/// emulated runtime as a HIP runtime is installed: `libamdhip64.so` for the linker and
/// `libamdhip64.so.7` (its soname) for the loader.
fn install(lib: &Path, emu: &Path, dir: &Path) {
    for name in ["libhipfile.so", "libhipfile.so.0"] {
        std::os::unix::fs::symlink(lib, dir.join(name)).unwrap();
    }
    for name in ["libamdhip64.so", "libamdhip64.so.7"] {
        std::os::unix::fs::symlink(emu, dir.join(name)).unwrap();
    }
}

/// How a test program links the HIP runtime and finds it at run time.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Runtime {
    /// Linked by the emulated runtime's path, and named to hipFile in `HIPFILE_HIP_LIBRARY`.
    Named,
    /// Linked with `-lamdhip64`, as a HIP application is, without `HIPFILE_HIP_LIBRARY` and
    /// with `ROCM_PATH` naming an installation whose `lib/libamdhip64.so` is another copy of
    /// the runtime: hipFile must use the runtime the program loaded, not load that one.
    Linked,
}

/// Compiles `tests/c/{name}.c` against the header and the installed library, runs it with
/// a fresh working directory and the emulated runtime, and expects it to pass.
fn run_c_program(name: &str) {
    run_c_program_with(name, Runtime::Named, &[], &[]);
}

/// As [`run_c_program`], with the runtime found as `runtime` says, `env` set and `args`
/// after the working directory.
fn run_c_program_with(name: &str, runtime: Runtime, env: &[(&str, &str)], args: &[&str]) {
    run_c_program_in(name, runtime, env, args, None);
}

/// As [`run_c_program_with`], with the working directory (where the program makes its
/// files) inside `work_in` when given: a mounted file system.
fn run_c_program_in(
    name: &str,
    runtime: Runtime,
    env: &[(&str, &str)],
    args: &[&str],
    work_in: Option<&Path>,
) {
    require!(has_command("cc"));
    let emu = require!(emulated_runtime());
    let lib = require!(shared_library());
    let tmp = TempDir::new(&format!("c-hipfile-{name}"));
    let libdir = tmp.path().join("lib");
    let work = work_in.unwrap_or(tmp.path()).join(format!("work-{name}"));
    std::fs::create_dir(&libdir).unwrap();
    std::fs::create_dir(&work).unwrap();
    install(&lib, &emu, &libdir);

    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = tmp.path().join(name);
    let mut cc = Command::new("cc");
    cc.args([
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-D_GNU_SOURCE",
        "-pthread",
        // The programs declare the HIP calls they make themselves (tests/c/common.h), so
        // that they build where HIP's headers are not installed.
        "-DHIPFILE_NO_HIP_HEADERS",
        "-I",
    ])
    .arg(crate_dir.join("include"))
    .arg(crate_dir.join(format!("tests/c/{name}.c")))
    .arg("-o")
    .arg(&exe)
    .arg(format!("-L{}", libdir.display()))
    .arg(format!("-Wl,-rpath,{}", libdir.display()))
    .arg("-lhipfile");
    // Either way the program records the runtime's soname, libamdhip64.so.7, which the
    // rpath finds in `libdir`.
    match runtime {
        Runtime::Named => cc.arg(&emu),
        Runtime::Linked => cc.arg("-lamdhip64"),
    };
    let built = cc.output().unwrap();
    assert!(
        built.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );

    let mut run = Command::new(&exe);
    run.arg(&work)
        .args(args)
        .env_remove("HIPFILE_STATS_LEVEL")
        .envs(env.iter().copied());
    match runtime {
        Runtime::Named => run.env("HIPFILE_HIP_LIBRARY", &emu),
        Runtime::Linked => {
            let rocm = tmp.path().join("rocm");
            std::fs::create_dir_all(rocm.join("lib")).unwrap();
            std::fs::copy(&emu, rocm.join("lib/libamdhip64.so")).unwrap();
            run.env_remove("HIPFILE_HIP_LIBRARY")
                .env("ROCM_PATH", &rocm)
        }
    };
    let ran = run.output().unwrap();
    let stdout = String::from_utf8_lossy(&ran.stdout);
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(
        ran.status.success(),
        "{name} failed ({}):\n{stdout}{stderr}",
        ran.status
    );
    assert!(stdout.contains("all checks passed"), "{stdout}{stderr}");
}

#[test]
fn c_program_reads_and_writes_through_the_library() {
    run_c_program("basic");
}

/// Only `libcufile.so.0` reads cuFile's `cufile.json`: with a file it would refuse (a
/// trailing comma) named both ways, `basic.c`'s driver opens and serves as without one.
#[test]
fn the_library_never_reads_cufiles_configuration_file() {
    let dir = TempDir::new("c-hipfile-cufile-json");
    let bad = dir.path().join("cufile.json");
    std::fs::write(
        &bad,
        "{ \"properties\": { \"allow_compat_mode\": false, } }",
    )
    .unwrap();
    let bad = bad.to_str().unwrap();
    run_c_program_with(
        "basic",
        Runtime::Named,
        &[
            ("CUFILE_ENV_PATH_JSON", bad),
            ("HIPFILE_CUFILE_SYSTEM_JSON", bad),
        ],
        &[],
    );
}

/// On a runtime that sees no device, `hipFileDriverOpen` still succeeds, as hipFile's
/// does (docs/decisions/c-abi.md), although `Driver::open` in Rust refuses it.
#[test]
fn c_program_opens_the_driver_on_a_runtime_without_devices() {
    run_c_program_with(
        "nodevice",
        Runtime::Named,
        &[("HIPFILE_EMU_DEVICES", "0")],
        &[],
    );
}

#[test]
fn c_program_uses_the_library_from_many_threads() {
    run_c_program("threads");
}

#[test]
fn a_forked_child_fails_at_once_and_opens_the_driver_again() {
    // Through the fallback, whose I/O threads the child does not have (tests/c/fork.c).
    let fallback = [("HIPFILE_FORCE_COMPAT_MODE", "true")];
    run_c_program_with("fork", Runtime::Named, &fallback, &[]);
}

#[test]
fn requests_start_after_the_work_queued_on_the_null_stream() {
    // On the fallback, and on the fastpath on xfs (tests/c/nullstream.c).
    let fallback = [("HIPFILE_FORCE_COMPAT_MODE", "true")];
    run_c_program_with("nullstream", Runtime::Named, &fallback, &[]);
    let xfs = require!(MountedFs::xfs(300));
    run_c_program_in("nullstream", Runtime::Named, &[], &[], Some(xfs.path()));
}

#[test]
fn c_program_orders_requests_on_streams() {
    run_c_program("async");
}

#[test]
fn c_program_runs_batches_through_the_library() {
    run_c_program("batch");
}

/// The program links the emulated runtime as `libamdhip64` and leaves hipFile to find it:
/// hipFile must use the instance already loaded, not load a runtime of its own.
#[test]
fn c_program_shares_its_hip_runtime_with_the_library() {
    run_c_program_with("hipruntime", Runtime::Linked, &[], &[]);
}

#[test]
fn c_program_sets_and_reads_properties_and_parameters() {
    run_c_program("params");
}

#[test]
fn c_program_reads_the_statistics_of_every_level() {
    run_c_program_with(
        "stats",
        Runtime::Named,
        &[("HIPFILE_STATS_LEVEL", "3")],
        &["3"],
    );
}

#[test]
fn c_program_is_refused_statistics_above_its_level() {
    run_c_program_with(
        "stats",
        Runtime::Named,
        &[("HIPFILE_STATS_LEVEL", "1")],
        &["1"],
    );
}

#[test]
fn library_has_the_soname_and_exports_only_what_works() {
    let lib = require!(shared_library());
    require!(has_command("readelf"));
    let dynamic = hipfile_testfs::clib::dynamic_section(&lib);
    assert!(
        dynamic.contains("Library soname: [libhipfile.so.0]"),
        "{dynamic}"
    );
    let exported: Vec<String> = hipfile_testfs::clib::exported_functions(&lib)
        .into_iter()
        .filter(|name| name.starts_with("hipFile"))
        .collect();
    assert_eq!(
        exported,
        [
            "hipFileBatchIOCancel",
            "hipFileBatchIODestroy",
            "hipFileBatchIOGetStatus",
            "hipFileBatchIOSetUp",
            "hipFileBatchIOSubmit",
            "hipFileBufDeregister",
            "hipFileBufRegister",
            "hipFileDriverClose",
            "hipFileDriverGetProperties",
            "hipFileDriverOpen",
            "hipFileDriverSetMaxCacheSize",
            "hipFileDriverSetMaxDirectIOSize",
            "hipFileDriverSetMaxPinnedMemSize",
            "hipFileDriverSetPollMode",
            "hipFileGetOpErrorString",
            "hipFileGetParameterBool",
            "hipFileGetParameterSizeT",
            "hipFileGetParameterString",
            "hipFileGetStatsL1",
            "hipFileGetStatsL2",
            "hipFileGetStatsL3",
            "hipFileGetVersion",
            "hipFileHandleDeregister",
            "hipFileHandleRegister",
            "hipFileRead",
            "hipFileReadAsync",
            "hipFileSetParameterBool",
            "hipFileSetParameterSizeT",
            "hipFileSetParameterString",
            "hipFileStreamDeregister",
            "hipFileStreamRegister",
            "hipFileUseCount",
            "hipFileWrite",
            "hipFileWriteAsync",
        ]
    );
}

/// The read, write and stream-ordered programs on real ext4 (ordered: the fastpath serves
/// aligned requests through the emulated AMD file I/O) and xfs, as well as on the test
/// directory's own file system.
#[test]
fn c_programs_run_on_ext4_and_xfs() {
    let ext4 = require!(MountedFs::ext4(Ext4Data::Ordered, 64));
    let xfs = require!(MountedFs::xfs(300));
    for fs in [&ext4, &xfs] {
        for name in ["basic", "async"] {
            run_c_program_in(name, Runtime::Named, &[], &[], Some(fs.path()));
        }
    }
}
