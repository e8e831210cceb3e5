//! The library as cuFile's users see it. `tests/c/basic.c`, written against
//! `include/cufile.h`, is compiled with the system C compiler, linked with `libcufile.so.0`
//! (found through its soname, as an installed library would be) and the emulated HIP runtime,
//! and run with `HIPFILE_HIP_LIBRARY` naming that runtime: it must exit 0 (basic.c lists
//! what it checks); so must `tests/c/large.c`, calls of more than 2 GiB, and
//! `tests/c/memtypes.c`, NVIDIA's sample 015 for every kind of memory cuFile serves. `tests/c/dlopen.c` is not linked with the library: it `dlopen`s
//! `libcufile.so.0` as PyTorch and KvikIO do, found once through `LD_LIBRARY_PATH` and once
//! as the library `LD_PRELOAD` loaded, and must report that its functions came from the
//! expected file and move bytes through them. Also checks the soname and that the exported
//! symbols are exactly cuFile's list.
//!
//! Skips when there is no `cc` or the emulated runtime was not built (`cargo test` builds
//! it); builds the shared library itself.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

mod common;

use common::{CUDA, CUFILE_115, CUFILE_117, nvidia_headers};
use hipfile_testfs::{Skip, TempDir, emulated_runtime, has_command, require};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `libcufile.so`, built for this test's profile (`hipfile_testfs::cdylib`).
fn shared_library() -> Result<PathBuf, Skip> {
    hipfile_testfs::cdylib("hipfile-c-cufile", "libcufile.so")
}

/// How a test program reaches the library.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Linked with `-lcufile`, found at run time through its soname in the rpath.
    Linked,
    /// Not linked; `dlopen("libcufile.so.0")` finds it through `LD_LIBRARY_PATH`.
    LibraryPath,
    /// Not linked and not on any search path; `LD_PRELOAD` names the built file, and
    /// `dlopen("libcufile.so.0")` gets it by its soname.
    Preload,
}

/// Compiles `tests/c/{name}.c` against the header, runs it with a fresh working directory and
/// the emulated runtime, and expects it to pass (and, for `dlopen.c`, to name the file its
/// functions came from: the library found by soname).
fn run_c_program(name: &str, reach: Reach) {
    run_c_program_with(name, reach, &[]);
}

/// [`run_c_program`], with `env` added to the program's environment.
fn run_c_program_with(name: &str, reach: Reach, env: &[(&str, &str)]) {
    let ours = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    run_c_program_against(name, reach, env, &[&ours]);
}

/// [`run_c_program_with`], compiled with `includes` (in order) as the include path: the
/// `cufile.h` found there is the one the program is built against.
fn run_c_program_against(name: &str, reach: Reach, env: &[(&str, &str)], includes: &[&Path]) {
    require!(has_command("cc"));
    let emu = require!(emulated_runtime());
    let lib = require!(shared_library());
    let tmp = TempDir::new(&format!("cufile-{name}"));
    // The library's names, and the runtime's, in separate directories: the preload case
    // must not find the library through the runtime's rpath.
    let libdir = tmp.path().join("lib");
    let hipdir = tmp.path().join("hip");
    let work = tmp.path().join("work");
    for d in [&libdir, &hipdir, &work] {
        std::fs::create_dir(d).unwrap();
    }
    for n in ["libcufile.so", "libcufile.so.0"] {
        std::os::unix::fs::symlink(&lib, libdir.join(n)).unwrap();
    }
    for n in ["libamdhip64.so", "libamdhip64.so.7"] {
        std::os::unix::fs::symlink(&emu, hipdir.join(n)).unwrap();
    }

    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = tmp.path().join(name);
    let mut cc = Command::new("cc");
    cc.args([
        "-std=c11",
        "-O2",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-D_GNU_SOURCE",
    ]);
    for include in includes {
        cc.arg("-I").arg(include);
    }
    cc.arg(crate_dir.join(format!("tests/c/{name}.c")))
        .arg("-o")
        .arg(&exe)
        .arg(format!("-Wl,-rpath,{}", hipdir.display()))
        .arg(&emu);
    if reach == Reach::Linked {
        cc.arg(format!("-L{}", libdir.display()))
            .arg(format!("-Wl,-rpath,{}", libdir.display()))
            .arg("-lcufile");
    } else {
        cc.arg("-ldl");
    }
    let built = cc.output().unwrap();
    assert!(
        built.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );

    let mut run = Command::new(&exe);
    // No cufile.json: none named, and the system-wide one (not the machine's /etc's) absent;
    // `env` may name one.
    run.arg(&work)
        .env_remove("CUFILE_ENV_PATH_JSON")
        .env(
            "HIPFILE_CUFILE_SYSTEM_JSON",
            tmp.path().join("no-cufile.json"),
        )
        .env_remove("HIPFILE_STATS_LEVEL")
        .env_remove("LD_PRELOAD")
        .env_remove("LD_LIBRARY_PATH")
        .env("HIPFILE_HIP_LIBRARY", &emu)
        .envs(env.iter().copied());
    match reach {
        Reach::Linked => {}
        Reach::LibraryPath => {
            run.env("LD_LIBRARY_PATH", &libdir);
        }
        Reach::Preload => {
            run.env("LD_PRELOAD", &lib);
        }
    }
    let ran = run.output().unwrap();
    let stdout = String::from_utf8_lossy(&ran.stdout);
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(
        ran.status.success(),
        "{name} failed ({}):\n{stdout}{stderr}",
        ran.status
    );
    assert!(stdout.contains("all checks passed"), "{stdout}{stderr}");
    if reach == Reach::LibraryPath {
        let expected = format!("library: {}\n", libdir.join("libcufile.so.0").display());
        assert!(stdout.contains(&expected), "{stdout}");
    }
    if reach == Reach::Preload {
        let expected = format!("library: {}\n", lib.display());
        assert!(stdout.contains(&expected), "{stdout}");
    }
}

#[test]
fn c_program_written_for_cufile_reads_and_writes_through_hipfile() {
    run_c_program("basic", Reach::Linked);
}

/// A program compiled against NVIDIA's own `cufile.h` (and CUDA's `cuda.h`), as NVIDIA's
/// header lays out every type and names every value, runs on this library: cuFile 1.17's
/// header, whose functions the library exports, and 1.15's, the CUDA 13.0 toolkit's.
#[test]
fn a_program_built_against_nvidias_header_runs_on_hipfile() {
    let cuda = require!(nvidia_headers(CUDA));
    for name in [CUFILE_117, CUFILE_115] {
        let nvidia = require!(nvidia_headers(name));
        run_c_program_against("basic", Reach::Linked, &[], &[&nvidia, &cuda]);
    }
}

/// cuFile 1.15's and 1.17's calls (statistics start, stop and reset; slab arrays; BAR size;
/// peer-to-peer flags; topology): `tests/c/v117.c` against our header and NVIDIA's 1.17.
#[test]
fn the_calls_of_cufile_1_17_do_what_they_say() {
    run_c_program("v117", Reach::Linked);
    let cuda = require!(nvidia_headers(CUDA));
    let nvidia = require!(nvidia_headers(CUFILE_117));
    run_c_program_against("v117", Reach::Linked, &[], &[&nvidia, &cuda]);
}

#[test]
fn requests_start_after_the_work_queued_on_the_null_stream() {
    // The null stream's copies run 2 ms late, as a GPU's may: fio's pattern then writes
    // stale blocks unless every request waits for them (tests/c/nullstream.c). Through the
    // fallback, as on an NVIDIA GPU, and with the fastpath where the file system has it.
    for compat in ["true", "false"] {
        run_c_program_with(
            "nullstream",
            Reach::Linked,
            &[
                ("HIPFILE_EMU_NULL_STREAM_DELAY", "2ms"),
                ("HIPFILE_FORCE_COMPAT_MODE", compat),
            ],
        );
    }
}

#[test]
fn a_forked_child_fails_at_once_and_opens_the_driver_again() {
    // Through the fallback, whose I/O threads the child does not have (tests/c/fork.c), as
    // hipfile.h's fork test does.
    run_c_program_with(
        "fork",
        Reach::Linked,
        &[("HIPFILE_FORCE_COMPAT_MODE", "true")],
    );
}

#[test]
fn every_memory_cufile_serves_is_read_and_written_as_nvidias_sample_015_does() {
    run_c_program("memtypes", Reach::Linked);
}

#[test]
fn reads_and_writes_of_more_than_max_rw_count_move_the_whole_size() {
    // 2 GiB through the page cache; the program does not need it on the disk.
    run_c_program_with(
        "large",
        Reach::Linked,
        &[("HIPFILE_DURABLE_WRITES", "false")],
    );
}

#[test]
fn dlopen_by_soname_through_the_library_path_gets_hipfile() {
    run_c_program("dlopen", Reach::LibraryPath);
}

#[test]
fn dlopen_by_soname_gets_the_library_ld_preload_loaded() {
    run_c_program("dlopen", Reach::Preload);
}

#[test]
fn library_has_the_soname_and_exports_exactly_cufiles_functions() {
    let lib = require!(shared_library());
    require!(has_command("readelf"));
    let dynamic = hipfile_testfs::clib::dynamic_section(&lib);
    assert!(
        dynamic.contains("Library soname: [libcufile.so.0]"),
        "{dynamic}"
    );
    // Every defined global function: cuFile's names and nothing else (no hipFile name, no
    // Rust symbol).
    let exported = hipfile_testfs::clib::exported_functions(&lib);
    assert_eq!(
        exported,
        [
            "cuFileBatchIOCancel",
            "cuFileBatchIODestroy",
            "cuFileBatchIOGetStatus",
            "cuFileBatchIOSetUp",
            "cuFileBatchIOSubmit",
            "cuFileBufDeregister",
            "cuFileBufRegister",
            "cuFileDriverClose",
            "cuFileDriverClose_v2",
            "cuFileDriverGetP2PFlags",
            "cuFileDriverGetProperties",
            "cuFileDriverOpen",
            "cuFileDriverSetMaxCacheSize",
            "cuFileDriverSetMaxDirectIOSize",
            "cuFileDriverSetMaxPinnedMemSize",
            "cuFileDriverSetP2PFlags",
            "cuFileDriverSetPollMode",
            "cuFileExportPCIeTopology",
            "cuFileGetBARSizeInKB",
            "cuFileGetParameterBool",
            "cuFileGetParameterGpuBounceBufferSlabArray",
            "cuFileGetParameterMinMaxValue",
            "cuFileGetParameterPosixPoolSlabArray",
            "cuFileGetParameterSizeT",
            "cuFileGetParameterString",
            "cuFileGetStatsL1",
            "cuFileGetStatsL2",
            "cuFileGetStatsL3",
            "cuFileGetStatsLevel",
            "cuFileGetVersion",
            "cuFileHandleDeregister",
            "cuFileHandleRegister",
            "cuFileRead",
            "cuFileReadAsync",
            "cuFileSetParameterBool",
            "cuFileSetParameterGpuBounceBufferSlabArray",
            "cuFileSetParameterPosixPoolSlabArray",
            "cuFileSetParameterSizeT",
            "cuFileSetParameterString",
            "cuFileSetStatsLevel",
            "cuFileStatsReset",
            "cuFileStatsStart",
            "cuFileStatsStop",
            "cuFileStreamDeregister",
            "cuFileStreamRegister",
            "cuFileUseCount",
            "cuFileWrite",
            "cuFileWriteAsync",
        ]
    );
}
