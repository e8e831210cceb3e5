//! `cargo xtask dist [--out DIR]`: builds the C libraries (`hipfile-capi` and
//! `hipfile-cufile`, release) and lays out an installation tree for C programs, by default in
//! `target/dist`:
//!
//! ```text
//! DIR/lib/libhipfile.so.0            the library (soname libhipfile.so.0)
//! DIR/lib/libhipfile.so              -> libhipfile.so.0, for the linker's -lhipfile
//! DIR/include/hipfile.h              the header
//! DIR/lib/pkgconfig/hipfile.pc       for pkg-config, relocatable (${pcfiledir})
//! DIR/lib/libcufile.so.0             cuFile's ABI over the same implementation
//! DIR/lib/libcufile.so               -> libcufile.so.0, for the linker's -lcufile
//! DIR/include/hipfile-cufile/cufile.h  its header, in a directory of its own so that it
//!                                    never stands in for CUDA's cufile.h by accident
//! ```
//!
//! The `.pc` file names no HIP package: `hipfile.h` declares the two HIP types it needs
//! (`hipError_t`, `hipStream_t`) unless HIP's header came first, and the library loads the
//! HIP runtime when it starts, not at link time. A program that allocates device memory
//! links the runtime itself (`-lamdhip64`), and the library then uses that same runtime.
//!
//! [`layout`] and [`pc_file`] are the layout, testable without a build; [`check`] is what
//! `cargo xtask ci` runs: a layout in a scratch directory, then a C program built with
//! `pkg-config --cflags --libs hipfile` against it and run on the emulated runtime, and a C
//! program that `dlopen`s `libcufile.so.0` from the tree's `lib/` and moves bytes through it.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The soname, and the file name of the library in `lib/`.
pub const SONAME: &str = "libhipfile.so.0";
/// The linker's name, a link to [`SONAME`].
pub const LINK_NAME: &str = "libhipfile.so";
/// The header's path in the source tree, from the workspace root.
pub const HEADER: &str = "crates/hipfile-capi/include/hipfile.h";
/// The C program [`check`] builds against the layout, from the workspace root.
pub const SMOKE_PROGRAM: &str = "xtask/c/dist_smoke.c";
/// cuFile's library: its soname and file name in `lib/`.
pub const CUFILE_SONAME: &str = "libcufile.so.0";
/// Its linker's name, a link to [`CUFILE_SONAME`].
pub const CUFILE_LINK_NAME: &str = "libcufile.so";
/// Its header in the source tree, from the workspace root.
pub const CUFILE_HEADER: &str = "crates/hipfile-cufile/include/cufile.h";
/// Where the header goes in the tree, under `include/`.
pub const CUFILE_INCLUDE: &str = "hipfile-cufile";
/// The cuFile test program [`check`] builds (it `dlopen`s the library), and the directory of
/// the `common.h` it includes, from the workspace root.
pub const CUFILE_SMOKE_PROGRAM: &str = "crates/hipfile-cufile/tests/c/dlopen.c";

/// What `cargo xtask dist` was asked for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Args {
    /// Where to lay the tree out (`target/dist` when absent).
    pub out: Option<PathBuf>,
}

/// The arguments after `dist`.
///
/// # Errors
///
/// An unknown argument, a repeated `--out`, or `--out` without a directory.
pub fn parse(args: &[&str]) -> Result<Args, String> {
    let mut parsed = Args::default();
    let mut rest = args.iter();
    while let Some(&arg) = rest.next() {
        match arg {
            "--out" if parsed.out.is_some() => return Err("--out is given twice".into()),
            "--out" => match rest.next() {
                Some(dir) if !dir.is_empty() && !dir.starts_with("--") => {
                    parsed.out = Some(PathBuf::from(dir));
                }
                _ => return Err("--out needs a directory".into()),
            },
            other => return Err(format!("unknown argument {other:?} for dist")),
        }
    }
    Ok(parsed)
}

/// The text of `lib/pkgconfig/hipfile.pc` for library version `version`: relocatable, the
/// prefix being two directories above the `.pc` file, so the tree may be moved or copied
/// anywhere (pkg-config and pkgconf both define `pcfiledir`).
pub fn pc_file(version: &str) -> String {
    format!(
        "\
# hipfile: GPU direct storage with hipFile's C interface (libhipfile.so.0).
# hipfile.h declares the HIP types it needs (hipError_t, hipStream_t) unless
# <hip/hip_runtime_api.h> is included before it, so no HIP package is required to build.
# The HIP runtime is loaded when the library starts: HIPFILE_HIP_LIBRARY if set, else the
# libamdhip64 the program already loaded, else ROCM_PATH, /opt/rocm, the libamdhip64
# sonames. A program that allocates device memory links the runtime itself (-lamdhip64).
prefix=${{pcfiledir}}/../..
libdir=${{prefix}}/lib
includedir=${{prefix}}/include

Name: hipfile
Description: GPU direct storage for AMD GPUs, hipFile's C interface
Version: {version}
Libs: -L${{libdir}} -lhipfile
Cflags: -I${{includedir}}
"
    )
}

/// Lays the tree out in `out` from the built library `library` and the header `header`:
/// the library copied to `lib/libhipfile.so.0`, the link `lib/libhipfile.so`, the header in
/// `include/` and the `.pc` file in `lib/pkgconfig/`. Files already there are replaced.
///
/// # Errors
///
/// When a directory cannot be created or a file cannot be copied, linked or written.
pub fn layout(library: &Path, header: &Path, version: &str, out: &Path) -> Result<(), String> {
    let lib = out.join("lib");
    let include = out.join("include");
    let pkgconfig = lib.join("pkgconfig");
    for dir in [&lib, &include, &pkgconfig] {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let copy = |from: &Path, to: &Path| {
        // A copy over an existing file truncates it in place, which would change a library
        // that a running program has mapped; a new file replaces it instead.
        remove_if_present(to)?;
        std::fs::copy(from, to)
            .map(|_| ())
            .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
    };
    copy(library, &lib.join(SONAME))?;
    copy(header, &include.join("hipfile.h"))?;
    let link = lib.join(LINK_NAME);
    remove_if_present(&link)?;
    std::os::unix::fs::symlink(SONAME, &link)
        .map_err(|e| format!("cannot link {} to {SONAME}: {e}", link.display()))?;
    let pc = pkgconfig.join("hipfile.pc");
    std::fs::write(&pc, pc_file(version)).map_err(|e| format!("cannot write {}: {e}", pc.display()))
}

/// Adds cuFile's library to the tree in `out`: `library` copied to `lib/libcufile.so.0`, the
/// link `lib/libcufile.so`, and `header` as `include/hipfile-cufile/cufile.h`. Files already
/// there are replaced.
///
/// # Errors
///
/// When a directory cannot be created or a file cannot be copied or linked.
pub fn layout_cufile(library: &Path, header: &Path, out: &Path) -> Result<(), String> {
    let lib = out.join("lib");
    let include = out.join("include").join(CUFILE_INCLUDE);
    for dir in [&lib, &include] {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    for (from, to) in [
        (library, lib.join(CUFILE_SONAME)),
        (header, include.join("cufile.h")),
    ] {
        remove_if_present(&to)?;
        std::fs::copy(from, &to)
            .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))?;
    }
    let link = lib.join(CUFILE_LINK_NAME);
    remove_if_present(&link)?;
    std::os::unix::fs::symlink(CUFILE_SONAME, &link)
        .map_err(|e| format!("cannot link {} to {CUFILE_SONAME}: {e}", link.display()))
}

fn remove_if_present(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot replace {}: {e}", path.display())),
    }
}

/// Builds `libhipfile.so` and `libcufile.so` in release mode and lays the tree out in `out`
/// (`target/dist` when `None`); returns the directory, absolute.
///
/// # Errors
///
/// When the build fails, cargo names no `libhipfile.so` or `libcufile.so`, or the layout
/// fails.
pub fn dist(metadata: &Value, out: Option<&Path>) -> Result<PathBuf, String> {
    let root = metadata["workspace_root"]
        .as_str()
        .ok_or("cargo metadata names no workspace root")?;
    let root = Path::new(root);
    let out = match out {
        Some(dir) => dir.to_path_buf(),
        None => Path::new(
            metadata["target_directory"]
                .as_str()
                .ok_or("cargo metadata names no target directory")?,
        )
        .join("dist"),
    };
    let version = metadata["packages"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "hipfile-capi"))
        .and_then(|p| p["version"].as_str())
        .ok_or("cargo metadata names no version for hipfile-capi")?;
    let (library, cufile) = build_libraries()?;
    layout(&library, &root.join(HEADER), version, &out)?;
    layout_cufile(&cufile, &root.join(CUFILE_HEADER), &out)?;
    out.canonicalize()
        .map_err(|e| format!("cannot resolve {}: {e}", out.display()))
}

/// `cargo build --release -p hipfile-capi -p hipfile-cufile --lib`, and the `libhipfile.so`
/// and `libcufile.so` it names.
fn build_libraries() -> Result<(PathBuf, PathBuf), String> {
    let args = [
        "build",
        "--locked",
        "--release",
        "-p",
        "hipfile-capi",
        "-p",
        "hipfile-cufile",
        "--lib",
        "--message-format=json-render-diagnostics",
    ];
    eprintln!("xtask: running cargo {}", args.join(" "));
    let out = Command::new("cargo")
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo {} failed ({})", args.join(" "), out.status));
    }
    let messages = String::from_utf8_lossy(&out.stdout);
    let named = |name: &str| {
        crate::emulated::artifact_in_messages(&messages, name)
            .ok_or_else(|| format!("cargo built the C libraries but named no {name}"))
    };
    Ok((named(LINK_NAME)?, named(CUFILE_LINK_NAME)?))
}

/// Runs `program` with `args`, and its standard output when it succeeds.
fn output_of(program: &str, args: &[&str], env: &[(&str, &str)]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{program} {} failed ({}):\n{}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// What [`check`] leaves for the checks that follow it.
#[derive(Debug)]
pub struct Checked {
    /// The tree `dist` laid out, absolute.
    pub tree: PathBuf,
    /// The directory holding the emulated runtime as `libhipfile_emu.so`, `libamdhip64.so`
    /// and `libamdhip64.so.7`, absolute.
    pub runtime: PathBuf,
}

/// What `cargo xtask ci` checks of the layout: `dist` into `target/dist-check`, then
/// [`SMOKE_PROGRAM`] compiled and linked with the flags `pkg-config --cflags --libs hipfile`
/// gives for that tree (and the emulated runtime, linked as `-lamdhip64`), and run: it
/// writes and reads back through the library, bytes verified. Returns the tree and the
/// runtime's directory, which the Python bindings' check uses.
///
/// # Errors
///
/// Any step failing, `cc` or `pkg-config` missing included: CI installs both.
pub fn check(metadata: &Value) -> Result<Checked, String> {
    let target = metadata["target_directory"]
        .as_str()
        .ok_or("cargo metadata names no target directory")?;
    let root = metadata["workspace_root"]
        .as_str()
        .ok_or("cargo metadata names no workspace root")?;
    let scratch = Path::new(target).join("dist-check");
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch)
            .map_err(|e| format!("cannot empty {}: {e}", scratch.display()))?;
    }
    let tree = dist(metadata, Some(&scratch.join("dist")))?;
    let runtime = emulated_runtime_dir(&scratch.join("hip"))?;
    let pkgconfig = tree.join("lib").join("pkgconfig");
    let pkgconfig = utf8(&pkgconfig)?;
    let flags = output_of(
        "pkg-config",
        &["--cflags", "--libs", "hipfile"],
        &[("PKG_CONFIG_PATH", pkgconfig)],
    )?;
    let exe = scratch.join("dist_smoke");
    let source = Path::new(root).join(SMOKE_PROGRAM);
    let runtime_dir = format!("-L{}", utf8(&runtime)?);
    let mut cc_args = vec![
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-D_GNU_SOURCE",
        utf8(&source)?,
        "-o",
        utf8(&exe)?,
    ];
    cc_args.extend(flags.split_whitespace());
    cc_args.extend([runtime_dir.as_str(), "-lamdhip64"]);
    eprintln!("xtask: running cc {}", cc_args.join(" "));
    output_of("cc", &cc_args, &[])?;
    let work = scratch.join("work");
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let library_path = format!("{}:{}", utf8(&tree.join("lib"))?, utf8(&runtime)?);
    let emu = runtime.join(crate::emulated::LIBRARY);
    // The library reads cufile.json; not the machine's /etc/cufile.json here.
    let no_json = scratch.join("no-cufile.json");
    let stdout = output_of(
        utf8(&exe)?,
        &[utf8(&work)?],
        &[
            ("LD_LIBRARY_PATH", library_path.as_str()),
            ("HIPFILE_HIP_LIBRARY", utf8(&emu)?),
            ("HIPFILE_CUFILE_SYSTEM_JSON", utf8(&no_json)?),
        ],
    )?;
    if !stdout.contains("all checks passed") {
        return Err(format!("dist_smoke did not pass:\n{stdout}"));
    }
    check_cufile(Path::new(root), &tree, &runtime, &scratch)?;
    eprintln!("xtask: dist check passed ({})", tree.display());
    Ok(Checked { tree, runtime })
}

/// cuFile's library in the tree: [`CUFILE_SMOKE_PROGRAM`], compiled against the tree's
/// `include/hipfile-cufile` and not linked with the library, `dlopen`s `libcufile.so.0` with
/// `LD_LIBRARY_PATH` naming the tree's `lib/`, must say it got the tree's file, and moves
/// bytes through it on the emulated runtime (linked from `runtime`).
fn check_cufile(root: &Path, tree: &Path, runtime: &Path, scratch: &Path) -> Result<(), String> {
    let source = root.join(CUFILE_SMOKE_PROGRAM);
    let common = source
        .parent()
        .ok_or_else(|| format!("{} has no directory", source.display()))?;
    let include = format!("-I{}", utf8(&tree.join("include").join(CUFILE_INCLUDE))?);
    let common = format!("-I{}", utf8(common)?);
    let runtime_dir = format!("-L{}", utf8(runtime)?);
    let exe = scratch.join("cufile_dlopen");
    let cc_args = [
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-D_GNU_SOURCE",
        include.as_str(),
        common.as_str(),
        utf8(&source)?,
        "-o",
        utf8(&exe)?,
        runtime_dir.as_str(),
        "-lamdhip64",
        "-ldl",
    ];
    eprintln!("xtask: running cc {}", cc_args.join(" "));
    output_of("cc", &cc_args, &[])?;
    let work = scratch.join("cufile-work");
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;
    let lib = tree.join("lib");
    let library_path = format!("{}:{}", utf8(&lib)?, utf8(runtime)?);
    let emu = runtime.join(crate::emulated::LIBRARY);
    // The library reads cufile.json; not the machine's /etc/cufile.json here.
    let no_json = scratch.join("no-cufile.json");
    let stdout = output_of(
        utf8(&exe)?,
        &[utf8(&work)?],
        &[
            ("LD_LIBRARY_PATH", library_path.as_str()),
            ("HIPFILE_HIP_LIBRARY", utf8(&emu)?),
            ("HIPFILE_CUFILE_SYSTEM_JSON", utf8(&no_json)?),
        ],
    )?;
    let expected = format!("library: {}\n", utf8(&lib.join(CUFILE_SONAME))?);
    if !stdout.contains("all checks passed") || !stdout.contains(&expected) {
        return Err(format!(
            "{CUFILE_SMOKE_PROGRAM} did not pass on the tree's {CUFILE_SONAME}:\n{stdout}"
        ));
    }
    Ok(())
}

/// The emulated runtime, copied into `dir` and linked there under the names a HIP runtime
/// is installed with, `libamdhip64.so` (for the linker) and `libamdhip64.so.7` (its soname,
/// for the loader); returns `dir`, absolute.
pub fn emulated_runtime_dir(dir: &Path) -> Result<PathBuf, String> {
    let emu = crate::emulated::build(&crate::emulated::Args {
        release: false,
        out: Some(dir.to_path_buf()),
    })?;
    let dir = emu
        .parent()
        .ok_or_else(|| format!("{} has no directory", emu.display()))?
        .to_path_buf();
    for name in ["libamdhip64.so", "libamdhip64.so.7"] {
        let link = dir.join(name);
        remove_if_present(&link)?;
        std::os::unix::fs::symlink(crate::emulated::LIBRARY, &link)
            .map_err(|e| format!("cannot link {}: {e}", link.display()))?;
    }
    Ok(dir)
}

/// `path` as UTF-8, for a command line.
pub fn utf8(path: &Path) -> Result<&str, String> {
    path.to_str()
        .ok_or_else(|| format!("{} is not UTF-8", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_output_directory() {
        assert_eq!(parse(&[]), Ok(Args::default()));
        assert_eq!(
            parse(&["--out", "d"]),
            Ok(Args {
                out: Some(PathBuf::from("d"))
            })
        );
        assert!(parse(&["--out"]).unwrap_err().contains("directory"));
        assert!(parse(&["--out", "--x"]).unwrap_err().contains("directory"));
        assert!(
            parse(&["--out", "a", "--out", "b"])
                .unwrap_err()
                .contains("twice")
        );
        assert!(parse(&["--release"]).unwrap_err().contains("--release"));
    }

    #[test]
    fn the_pc_file_is_relocatable_and_names_the_library() {
        let pc = pc_file("1.2.3");
        assert!(pc.contains("\nprefix=${pcfiledir}/../..\n"), "{pc}");
        assert!(pc.contains("\nlibdir=${prefix}/lib\n"), "{pc}");
        assert!(pc.contains("\nincludedir=${prefix}/include\n"), "{pc}");
        assert!(pc.contains("\nVersion: 1.2.3\n"), "{pc}");
        assert!(pc.contains("\nLibs: -L${libdir} -lhipfile\n"), "{pc}");
        assert!(pc.contains("\nCflags: -I${includedir}\n"), "{pc}");
        assert!(!pc.contains("Requires"), "no HIP package is needed: {pc}");
    }

    #[test]
    fn lays_out_the_library_its_link_the_header_and_the_pc_file() {
        let scratch = std::env::temp_dir().join(format!("xtask-dist-{}", std::process::id()));
        let src = scratch.join("src");
        std::fs::create_dir_all(&src).unwrap();
        let (lib, header) = (src.join("libhipfile.so"), src.join("hipfile.h"));
        std::fs::write(&lib, b"ELF").unwrap();
        std::fs::write(&header, b"/* header */").unwrap();
        let out = scratch.join("out");
        // Twice: a second layout over the first replaces it.
        for _ in 0..2 {
            layout(&lib, &header, "0.1.0", &out).unwrap();
        }
        assert_eq!(
            std::fs::read(out.join("lib/libhipfile.so.0")).unwrap(),
            b"ELF"
        );
        let link = out.join("lib/libhipfile.so");
        assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            Path::new("libhipfile.so.0"),
            "a relative link, so that the tree can move"
        );
        assert_eq!(
            std::fs::read(out.join("include/hipfile.h")).unwrap(),
            b"/* header */"
        );
        assert_eq!(
            std::fs::read_to_string(out.join("lib/pkgconfig/hipfile.pc")).unwrap(),
            pc_file("0.1.0")
        );
        std::fs::remove_dir_all(&scratch).unwrap();
    }

    #[test]
    fn the_headers_and_the_smoke_programs_exist() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        assert!(root.join(HEADER).is_file());
        assert!(root.join(SMOKE_PROGRAM).is_file());
        assert!(root.join(CUFILE_HEADER).is_file());
        assert!(root.join(CUFILE_SMOKE_PROGRAM).is_file());
    }

    #[test]
    fn lays_out_cufiles_library_its_link_and_its_header() {
        let scratch =
            std::env::temp_dir().join(format!("xtask-dist-cufile-{}", std::process::id()));
        let src = scratch.join("src");
        std::fs::create_dir_all(&src).unwrap();
        let (lib, header) = (src.join("libcufile.so"), src.join("cufile.h"));
        std::fs::write(&lib, b"ELF cufile").unwrap();
        std::fs::write(&header, b"/* cufile */").unwrap();
        let out = scratch.join("out");
        for _ in 0..2 {
            layout_cufile(&lib, &header, &out).unwrap();
        }
        assert_eq!(
            std::fs::read(out.join("lib/libcufile.so.0")).unwrap(),
            b"ELF cufile"
        );
        assert_eq!(
            std::fs::read_link(out.join("lib/libcufile.so")).unwrap(),
            Path::new("libcufile.so.0")
        );
        assert_eq!(
            std::fs::read(out.join("include/hipfile-cufile/cufile.h")).unwrap(),
            b"/* cufile */"
        );
        assert!(!out.join("include/cufile.h").exists());
        std::fs::remove_dir_all(&scratch).unwrap();
    }
}
