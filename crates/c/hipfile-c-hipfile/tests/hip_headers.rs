//! `hipfile.h` among HIP's headers, compiled by the system C and C++ compilers the way
//! clients built without hipcc compile hipFile's header: `cc -D__HIP_PLATFORM_AMD__` with
//! include paths only. The header includes HIP's `<hip/hip_runtime_api.h>` itself, as
//! hipFile's does, so it compiles alone, a program may call HIP after including only it, and
//! HIP's headers may follow it (fio's `libhipfile` engine and its configure probe, hipFile's
//! examples) or precede it. fio's probe is reproduced as fio's `configure` builds it, against
//! a ROCm-like tree, linked and run on the emulated runtime.
//!
//! The opt-out, `HIPFILE_NO_HIP_HEADERS`, is compiled with a HIP header first on the include
//! path that stops the compilation if anything includes it: the header must then need none.
//!
//! The tests that need HIP's headers (Debian's `libamdhip64-dev`, or ROCm's in
//! `/opt/rocm/include`) skip without them, unless `HIPFILE_TEST_STRICT=1`.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile_testfs::{Skip, TempDir, emulated_runtime, has_command, require};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The directory of `hipfile.h`.
fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// HIP's own headers' directory, where they are installed (Debian's `libamdhip64-dev`, or
/// ROCm).
fn hip_include_dir() -> Result<&'static Path, Skip> {
    ["/usr/include", "/opt/rocm/include"]
        .into_iter()
        .map(Path::new)
        .find(|dir| dir.join("hip/hip_runtime_api.h").is_file())
        .ok_or_else(|| {
            Skip(
                "HIP's headers are not installed (hip/hip_runtime_api.h in /usr/include or \
                 /opt/rocm/include; Debian: libamdhip64-dev)"
                    .into(),
            )
        })
}

/// The C and C++ compilers, as `(compiler, language, standards)`.
const LANGUAGES: [(&str, &str, &[&str]); 2] = [
    ("cc", "c", &["c99", "c11"]),
    ("c++", "c++", &["c++11", "c++17"]),
];

/// Compiles `source` (syntax only) with `compiler` as `language` at `standard`, warnings as
/// errors, with `args`; panics with the compiler's messages when it fails.
fn assert_compiles(compiler: &str, language: &str, standard: &str, args: &[&OsStr], source: &Path) {
    let out = Command::new(compiler)
        .args(["-fsyntax-only", "-Wall", "-Wextra", "-Werror"])
        .arg(format!("-std={standard}"))
        .args(args)
        .args(["-x", language])
        .arg(source)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{compiler} -std={standard} {args:?} {}:\n{}",
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What a plain compiler needs for HIP's headers, as fio gives it: the platform and the
/// include directories (HIP's, then `hipfile.h`'s).
fn hip_args(hip: &Path) -> Vec<std::ffi::OsString> {
    vec![
        "-D__HIP_PLATFORM_AMD__".into(),
        "-I".into(),
        hip.into(),
        "-I".into(),
        include_dir().into(),
    ]
}

fn os(args: &[std::ffi::OsString]) -> Vec<&OsStr> {
    args.iter().map(|a| a.as_os_str()).collect()
}

/// The header alone, as C99, C11, C++11 and C++17, pedantic, with HIP's headers: it includes
/// HIP's runtime API header and compiles with it.
#[test]
fn header_compiles_alone_with_hips_headers() {
    require!(has_command("cc"));
    require!(has_command("c++"));
    let hip = require!(hip_include_dir());
    let header = include_dir().join("hipfile.h");
    let args = hip_args(hip);
    for (compiler, language, standards) in LANGUAGES {
        hipfile_testfs::clib::assert_header_compiles_with(
            &header,
            compiler,
            language,
            standards,
            &os(&args),
        );
    }
}

/// A body that uses HIP's own declarations, which only HIP's header provides: functions,
/// an enum value, and `hipError_t`/`hipStream_t` shared with hipFile's structs and calls.
const USES_HIP: &str = "\
int use(void);
int use(void)
{
    void *p = 0;
    hipStream_t s = 0;
    hipFileError_t e = {hipFileHipDriverError, hipErrorNotFound};
    hipError_t status = hipMalloc(&p, 16);
    if (status == hipSuccess)
        status = hipFree(p);
    if (status != hipSuccess || !IS_HIP_DRV_ERR(e) || HIP_DRV_ERR(e) != hipErrorNotFound)
        return 1;
    e = hipFileStreamRegister(s, 0);
    return e.err == hipFileSuccess ? 0 : 1;
}
";

/// Writes `name` in `dir` with `includes` then [`USES_HIP`]; returns its path.
fn source(dir: &TempDir, name: &str, includes: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, format!("{includes}\n{USES_HIP}")).unwrap();
    path
}

/// The three orders clients use, each as C and C++: `hipfile.h` alone and then HIP's calls;
/// `hipfile.h` followed by `<hip/hip_runtime.h>` (fio's engine, hipFile's examples); and
/// HIP's runtime API header first.
#[test]
fn header_and_hips_headers_compile_in_either_order() {
    require!(has_command("cc"));
    require!(has_command("c++"));
    let hip = require!(hip_include_dir());
    let dir = TempDir::new("c-hipfile-hip-order");
    let sources = [
        source(&dir, "alone.c", "#include \"hipfile.h\""),
        source(
            &dir,
            "hipfile_first.c",
            "#include \"hipfile.h\"\n#include <hip/hip_runtime.h>",
        ),
        source(
            &dir,
            "api_first.c",
            "#include <hip/hip_runtime_api.h>\n#include \"hipfile.h\"",
        ),
        source(
            &dir,
            "runtime_first.c",
            "#include <hip/hip_runtime.h>\n#include <hipfile.h>",
        ),
    ];
    let args = hip_args(hip);
    for (compiler, language, standards) in LANGUAGES {
        for standard in standards {
            for source in &sources {
                assert_compiles(compiler, language, standard, &os(&args), source);
            }
        }
    }
}

/// fio's `configure` probe for its `libhipfile` engine, as fio writes and compiles it:
/// `$CC -D_GNU_SOURCE -Werror-implicit-function-declaration -I${ROCM_PATH}/include
/// -D__HIP_PLATFORM_AMD__ -o probe probe.c -L${ROCM_PATH}/lib -lamdhip64 -lhipfile`, with
/// `ROCM_PATH` a tree holding HIP's headers and `hipfile.h` in `include/`, and the library
/// and the emulated runtime (as `libamdhip64.so`) in `lib/`. It must build, and run.
#[test]
fn fios_configure_probe_builds_and_runs() {
    require!(has_command("cc"));
    let hip = require!(hip_include_dir());
    let emu = require!(emulated_runtime());
    let lib = require!(hipfile_testfs::cdylib("hipfile-c-hipfile", "libhipfile.so"));
    let dir = TempDir::new("c-hipfile-fio-probe");
    let rocm = dir.path().join("rocm");
    let (rocm_include, rocm_lib) = (rocm.join("include"), rocm.join("lib"));
    std::fs::create_dir_all(&rocm_include).unwrap();
    std::fs::create_dir_all(&rocm_lib).unwrap();
    std::os::unix::fs::symlink(hip.join("hip"), rocm_include.join("hip")).unwrap();
    std::fs::copy(
        include_dir().join("hipfile.h"),
        rocm_include.join("hipfile.h"),
    )
    .unwrap();
    for (target, names) in [
        (&lib, &["libhipfile.so", "libhipfile.so.0"]),
        (&emu, &["libamdhip64.so", "libamdhip64.so.7"]),
    ] {
        for name in names {
            std::os::unix::fs::symlink(target, rocm_lib.join(name)).unwrap();
        }
    }
    let probe = dir.path().join("probe.c");
    std::fs::write(
        &probe,
        "#include <hipfile.h>\n\
         #include <hip/hip_runtime.h>\n\
         \n\
         int main(int argc, char* argv[]) {\n  \
           hipMalloc(NULL, 0);\n  \
           hipFileBufRegister(NULL, 0, 0);\n  \
           return 0;\n\
         }\n",
    )
    .unwrap();
    let exe = dir.path().join("probe");
    // fio's CFLAGS also `-include config-host.h`, its own generated header, which has no
    // bearing on these two.
    let built = Command::new("cc")
        .args(["-D_GNU_SOURCE", "-Werror-implicit-function-declaration"])
        .arg(format!("-I{}/include", rocm.display()))
        .arg("-D__HIP_PLATFORM_AMD__")
        .arg("-o")
        .arg(&exe)
        .arg(&probe)
        .arg(format!("-L{}/lib", rocm.display()))
        .args(["-lamdhip64", "-lhipfile"])
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "fio's probe does not build:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let ran = Command::new(&exe)
        .env("LD_LIBRARY_PATH", &rocm_lib)
        .env_remove("HIPFILE_HIP_LIBRARY")
        .output()
        .unwrap();
    assert!(
        ran.status.success(),
        "fio's probe failed ({}):\n{}{}",
        ran.status,
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
}

/// A directory whose `hip/hip_runtime_api.h` and `hip/hip_runtime.h` stop any compilation
/// that includes them: first on the include path, it stands for a machine without HIP's
/// headers.
fn no_hip_headers(dir: &TempDir) -> PathBuf {
    let poison = dir.path().join("no-hip");
    std::fs::create_dir_all(poison.join("hip")).unwrap();
    for name in ["hip_runtime_api.h", "hip_runtime.h"] {
        std::fs::write(
            poison.join("hip").join(name),
            "#error \"a HIP header was included, with HIPFILE_NO_HIP_HEADERS defined\"\n",
        )
        .unwrap();
    }
    poison
}

/// With `HIPFILE_NO_HIP_HEADERS`, the header includes nothing of HIP's and declares the two
/// HIP types itself: alone, pedantic, as C99, C11, C++11 and C++17, with no HIP header to be
/// found; and a program can use those types.
#[test]
fn the_opt_out_needs_no_hip_header() {
    require!(has_command("cc"));
    require!(has_command("c++"));
    let dir = TempDir::new("c-hipfile-no-hip");
    let poison = no_hip_headers(&dir);
    let args: Vec<std::ffi::OsString> = vec![
        "-DHIPFILE_NO_HIP_HEADERS".into(),
        "-I".into(),
        poison.into(),
        "-I".into(),
        include_dir().into(),
    ];
    let header = include_dir().join("hipfile.h");
    let program = dir.path().join("declared.c");
    std::fs::write(
        &program,
        "#include \"hipfile.h\"\n\
         #ifndef HIPFILE_DECLARED_HIP_TYPES\n\
         #error \"hipfile.h did not declare the HIP types\"\n\
         #endif\n\
         int use(void);\n\
         int use(void)\n\
         {\n\
             hipStream_t s = 0;\n\
             hipError_t status = 0;\n\
             hipFileError_t e = {hipFileHipDriverError, 500};\n\
             e = hipFileStreamRegister(s, 0);\n\
             return e.hip_drv_err == status ? 0 : 1;\n\
         }\n",
    )
    .unwrap();
    for (compiler, language, standards) in LANGUAGES {
        hipfile_testfs::clib::assert_header_compiles_with(
            &header,
            compiler,
            language,
            standards,
            &os(&args),
        );
        for standard in standards {
            assert_compiles(compiler, language, standard, &os(&args), &program);
        }
    }
    // The poisoned directory does stop a compilation that reaches it: without the opt-out,
    // the header includes HIP's header and fails there.
    let out = Command::new("cc")
        .args(["-fsyntax-only", "-D__HIP_PLATFORM_AMD__"])
        .args(&args[1..])
        .args(["-x", "c"])
        .arg(&header)
        .output()
        .unwrap();
    assert!(!out.status.success(), "the header included no HIP header");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("a HIP header was included"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// With `HIPFILE_NO_HIP_HEADERS` and HIP's header included first, HIP's own types are used
/// (nothing is declared twice), as C and C++.
#[test]
fn the_opt_out_takes_hips_types_when_hips_header_came_first() {
    require!(has_command("cc"));
    require!(has_command("c++"));
    let hip = require!(hip_include_dir());
    let dir = TempDir::new("c-hipfile-no-hip-after");
    let program = source(
        &dir,
        "hip_first.c",
        "#include <hip/hip_runtime_api.h>\n\
         #include \"hipfile.h\"\n\
         #ifdef HIPFILE_DECLARED_HIP_TYPES\n\
         #error \"hipfile.h declared its own HIP types after HIP's header\"\n\
         #endif",
    );
    let mut args = hip_args(hip);
    args.push("-DHIPFILE_NO_HIP_HEADERS".into());
    for (compiler, language, standards) in LANGUAGES {
        for standard in standards {
            assert_compiles(compiler, language, standard, &os(&args), &program);
        }
    }
}
