//! `cargo xtask dist [--out DIR] [--hip-soname SONAME]`: builds the C libraries
//! (`hipfile-c-hipfile` and `hipfile-c-cufile`, release) and lays out an installation tree for C
//! programs, by default in `target/dist`:
//!
//! ```text
//! DIR/lib/libhipfile.so.0            the library (soname libhipfile.so.0), which needs the
//!                                    HIP runtime libamdhip64.so.7 (DT_NEEDED), as AMD's does
//! DIR/lib/libhipfile.so              -> libhipfile.so.0, for the linker's -lhipfile
//! DIR/lib/portable/libhipfile.so.0   the same library without that dependency: it loads a
//! DIR/lib/portable/libhipfile.so     HIP or CUDA runtime at run time (NVIDIA GPUs, no GPU)
//! DIR/include/hipfile.h              the header
//! DIR/lib/pkgconfig/hipfile.pc       for pkg-config, relocatable (${pcfiledir})
//! DIR/lib/libcufile.so.0             cuFile's ABI over the same implementation
//! DIR/lib/libcufile.so               -> libcufile.so.0, for the linker's -lcufile
//! DIR/include/hipfile-cufile/cufile.h  its header, in a directory of its own so that it
//!                                    never stands in for CUDA's cufile.h by accident
//! DIR/lib/pkgconfig/cufile.pc        its pkg-config file, relocatable
//! ```
//!
//! The runtime dependency is what AMD's library has, and what its clients count on: AMD's
//! Python bindings call `hipPeekAtLastError` without linking HIP, so they import only where
//! the library brings the runtime. The linker records it from a stub shared object whose
//! only content is that soname, made with the system C compiler ([`hip_stub`]); the library
//! still opens the runtime with `dlopen` by that soname, which gives the very object the
//! dynamic linker loaded. `--hip-soname` chooses the soname for other HIP releases
//! (`libamdhip64.so.6` for ROCm 6, `libamdhip64.so.5` for Debian's HIP 5). The portable copy
//! is the plain `cargo build` of `hipfile-c-hipfile`; the dependent one is the same crate linked
//! again with `cargo rustc` and the stub, so only that crate is rebuilt. Both are read back
//! ([`crate::elf`]): a tree whose libraries do not say what they should is an error.
//!
//! The `.pc` files name no HIP package (HIP has no pkg-config file): `hipfile.h` includes
//! HIP's header, whose directory and platform macro (`-D__HIP_PLATFORM_AMD__`) a plain C
//! compiler is given as for any HIP code. A program that allocates device memory links the
//! runtime itself (`-lamdhip64`), and the library uses that same runtime.
//!
//! [`layout`], [`pc_file`] and [`cufile_pc_file`] are the layout, testable without a build;
//! [`check`] is what `cargo xtask ci` runs: the tree laid out where the README's "C programs"
//! example puts it, that example's `cc` line run as written (the program: [`SMOKE_PROGRAM`])
//! and the result run on the emulated runtime with each library, a cuFile program built with
//! `pkg-config --cflags --libs cufile`, a C program that `dlopen`s `libcufile.so.0`, and a
//! tree for Debian's HIP 5 whose library loads Debian's runtime.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The soname, and the file name of the library in `lib/`.
pub const SONAME: &str = "libhipfile.so.0";
/// The linker's name, a link to [`SONAME`].
pub const LINK_NAME: &str = "libhipfile.so";
/// The directory under `lib/` of the library without the HIP runtime dependency.
pub const PORTABLE_DIR: &str = "portable";
/// The HIP runtime the library depends on unless `--hip-soname` says otherwise: ROCm 7's,
/// as AMD's hipFile for ROCm 7 does.
pub const DEFAULT_HIP_SONAME: &str = "libamdhip64.so.7";
/// The header's path in the source tree, from the workspace root.
pub const HEADER: &str = "crates/c/hipfile-c-hipfile/include/hipfile.h";
/// The C program [`check`] builds with the README's line, from the workspace root.
pub const SMOKE_PROGRAM: &str = "xtask/c/dist_smoke.c";
/// The README, whose "C programs" example [`check`] runs.
pub const README: &str = "README.md";
/// cuFile's library: its soname and file name in `lib/`.
pub const CUFILE_SONAME: &str = "libcufile.so.0";
/// Its linker's name, a link to [`CUFILE_SONAME`].
pub const CUFILE_LINK_NAME: &str = "libcufile.so";
/// Its header in the source tree, from the workspace root.
pub const CUFILE_HEADER: &str = "crates/c/hipfile-c-cufile/include/cufile.h";
/// Where the header goes in the tree, under `include/`.
pub const CUFILE_INCLUDE: &str = "hipfile-cufile";
/// The cuFile test program [`check`] builds (it `dlopen`s the library), and the directory of
/// the `common.h` it includes, from the workspace root.
pub const CUFILE_SMOKE_PROGRAM: &str = "crates/c/hipfile-c-cufile/tests/c/dlopen.c";
/// The cuFile program [`check`] builds with `pkg-config --cflags --libs cufile`.
pub const CUFILE_PC_PROGRAM: &str = "xtask/c/cufile_smoke.c";

/// What `cargo xtask dist` was asked for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Args {
    /// Where to lay the tree out (`target/dist` when absent).
    pub out: Option<PathBuf>,
    /// The HIP runtime's soname the library depends on ([`DEFAULT_HIP_SONAME`] when absent).
    pub hip_soname: Option<String>,
}

/// The arguments after `dist`.
///
/// # Errors
///
/// An unknown argument, a repeated one, `--out` without a directory, or `--hip-soname`
/// without a HIP runtime's soname.
pub fn parse(args: &[&str]) -> Result<Args, String> {
    let mut parsed = Args::default();
    let mut rest = args.iter();
    while let Some(&arg) = rest.next() {
        match arg {
            "--out" if parsed.out.is_some() => return Err("--out is given twice".into()),
            "--hip-soname" if parsed.hip_soname.is_some() => {
                return Err("--hip-soname is given twice".into());
            }
            "--out" => match rest.next() {
                Some(dir) if !dir.is_empty() && !dir.starts_with("--") => {
                    parsed.out = Some(PathBuf::from(dir));
                }
                _ => return Err("--out needs a directory".into()),
            },
            "--hip-soname" => {
                let soname = rest.next().copied().unwrap_or_default();
                check_hip_soname(soname)?;
                parsed.hip_soname = Some(soname.to_owned());
            }
            other => return Err(format!("unknown argument {other:?} for dist")),
        }
    }
    Ok(parsed)
}

/// Ok for a HIP runtime's soname, `libamdhip64.so.N`.
///
/// # Errors
///
/// What is wrong with `soname`, and what is expected.
pub fn check_hip_soname(soname: &str) -> Result<(), String> {
    let version = soname.strip_prefix("libamdhip64.so.").unwrap_or_default();
    if !version.is_empty() && version.bytes().all(|b| b.is_ascii_digit()) {
        Ok(())
    } else {
        Err(format!(
            "--hip-soname needs the HIP runtime's soname, libamdhip64.so.N \
             (libamdhip64.so.7 for ROCm 7, .so.6 for ROCm 6, .so.5 for HIP 5), not {soname:?}"
        ))
    }
}

/// The text of `lib/pkgconfig/hipfile.pc` for library version `version`, the library
/// depending on `hip_soname`: relocatable, the prefix being two directories above the `.pc`
/// file, so the tree may be moved or copied anywhere (pkg-config and pkgconf both define
/// `pcfiledir`).
pub fn pc_file(version: &str, hip_soname: &str) -> String {
    format!(
        "\
# hipfile: GPU direct storage with hipFile's C interface (libhipfile.so.0).
# hipfile.h includes HIP's <hip/hip_runtime_api.h>, as hipFile's does: a plain C compiler
# needs HIP's include directory and -D__HIP_PLATFORM_AMD__, or -DHIPFILE_NO_HIP_HEADERS
# to build without HIP's headers (the header then declares hipError_t and hipStream_t).
# lib/libhipfile.so.0 needs the HIP runtime {hip_soname}, as AMD's library does;
# lib/{PORTABLE_DIR}/ holds the same library without that dependency, which loads a HIP or
# CUDA runtime when it starts. A program that allocates device memory links the runtime
# itself (-lamdhip64).
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

/// The text of `lib/pkgconfig/cufile.pc` for library version `version`: relocatable as
/// [`pc_file`]'s, for `libcufile.so.0` and its header in `include/hipfile-cufile`.
pub fn cufile_pc_file(version: &str) -> String {
    format!(
        "\
# cufile: NVIDIA cuFile's C interface (libcufile.so.0) over hipfile.
# cufile.h declares CUresult and CUstream itself unless CUDA's <cuda.h> comes first; the
# library loads a HIP or CUDA runtime when it starts.
prefix=${{pcfiledir}}/../..
libdir=${{prefix}}/lib
includedir=${{prefix}}/include

Name: cufile
Description: NVIDIA cuFile's C interface over hipfile
Version: {version}
Libs: -L${{libdir}} -lcufile
Cflags: -I${{includedir}}/{CUFILE_INCLUDE}
"
    )
}

/// Copies `from` to `to` as a new file (a copy over an existing file would truncate it in
/// place, changing a library that a running program has mapped).
fn copy_file(from: &Path, to: &Path) -> Result<(), String> {
    remove_if_present(to)?;
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

/// `dir/link`, a relative link to `target` in the same directory, replacing what was there.
fn link_in(dir: &Path, link: &str, target: &str) -> Result<(), String> {
    let link = dir.join(link);
    remove_if_present(&link)?;
    std::os::unix::fs::symlink(target, &link)
        .map_err(|e| format!("cannot link {} to {target}: {e}", link.display()))
}

fn create_dirs(dirs: &[&Path]) -> Result<(), String> {
    for dir in dirs {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    Ok(())
}

/// Lays the tree out in `out` from the built library `library` (the one that depends on
/// `hip_soname`) and the header `header`: the library copied to `lib/libhipfile.so.0`, the
/// link `lib/libhipfile.so`, the header in `include/` and the `.pc` file in
/// `lib/pkgconfig/`. Files already there are replaced.
///
/// # Errors
///
/// When a directory cannot be created or a file cannot be copied, linked or written.
pub fn layout(
    library: &Path,
    header: &Path,
    version: &str,
    hip_soname: &str,
    out: &Path,
) -> Result<(), String> {
    let lib = out.join("lib");
    let include = out.join("include");
    let pkgconfig = lib.join("pkgconfig");
    create_dirs(&[&lib, &include, &pkgconfig])?;
    copy_file(library, &lib.join(SONAME))?;
    copy_file(header, &include.join("hipfile.h"))?;
    link_in(&lib, LINK_NAME, SONAME)?;
    let pc = pkgconfig.join("hipfile.pc");
    std::fs::write(&pc, pc_file(version, hip_soname))
        .map_err(|e| format!("cannot write {}: {e}", pc.display()))
}

/// Adds the library without the runtime dependency to the tree in `out`: `library` copied to
/// `lib/portable/libhipfile.so.0`, with the link `lib/portable/libhipfile.so`.
///
/// # Errors
///
/// When the directory cannot be created or the file cannot be copied or linked.
pub fn layout_portable(library: &Path, out: &Path) -> Result<(), String> {
    let dir = out.join("lib").join(PORTABLE_DIR);
    create_dirs(&[&dir])?;
    copy_file(library, &dir.join(SONAME))?;
    link_in(&dir, LINK_NAME, SONAME)
}

/// Adds cuFile's library to the tree in `out`: `library` copied to `lib/libcufile.so.0`, the
/// link `lib/libcufile.so`, `header` as `include/hipfile-cufile/cufile.h` and
/// `lib/pkgconfig/cufile.pc`. Files already there are replaced.
///
/// # Errors
///
/// When a directory cannot be created or a file cannot be copied, linked or written.
pub fn layout_cufile(
    library: &Path,
    header: &Path,
    version: &str,
    out: &Path,
) -> Result<(), String> {
    let lib = out.join("lib");
    let include = out.join("include").join(CUFILE_INCLUDE);
    let pkgconfig = lib.join("pkgconfig");
    create_dirs(&[&lib, &include, &pkgconfig])?;
    copy_file(library, &lib.join(CUFILE_SONAME))?;
    copy_file(header, &include.join("cufile.h"))?;
    link_in(&lib, CUFILE_LINK_NAME, CUFILE_SONAME)?;
    let pc = pkgconfig.join("cufile.pc");
    std::fs::write(&pc, cufile_pc_file(version))
        .map_err(|e| format!("cannot write {}: {e}", pc.display()))
}

fn remove_if_present(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot replace {}: {e}", path.display())),
    }
}

/// The version cargo gives `package`.
fn version_of<'a>(metadata: &'a Value, package: &str) -> Result<&'a str, String> {
    metadata["packages"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == package))
        .and_then(|p| p["version"].as_str())
        .ok_or_else(|| format!("cargo metadata names no version for {package}"))
}

/// Builds the libraries in release mode and lays the tree out in `out` (`target/dist` when
/// `None`), `lib/libhipfile.so.0` depending on `hip_soname` ([`DEFAULT_HIP_SONAME`] when
/// `None`); returns the directory, absolute.
///
/// # Errors
///
/// When a build fails, cargo names no library, a library's dynamic section is not what the
/// tree promises, or the layout fails.
pub fn dist(
    metadata: &Value,
    out: Option<&Path>,
    hip_soname: Option<&str>,
) -> Result<PathBuf, String> {
    let root = metadata["workspace_root"]
        .as_str()
        .ok_or("cargo metadata names no workspace root")?;
    let root = Path::new(root);
    let target = Path::new(
        metadata["target_directory"]
            .as_str()
            .ok_or("cargo metadata names no target directory")?,
    );
    let out = out.map_or_else(|| target.join("dist"), Path::to_path_buf);
    let hip_soname = hip_soname.unwrap_or(DEFAULT_HIP_SONAME);
    check_hip_soname(hip_soname)?;
    // The portable library and cuFile's, laid out before the dependent build links over the
    // same `libhipfile.so` in cargo's target directory.
    let (portable, cufile) = build_libraries()?;
    expect_dynamic(&portable, None)?;
    layout_portable(&portable, &out)?;
    let cufile_version = version_of(metadata, "hipfile-c-cufile")?;
    layout_cufile(&cufile, &root.join(CUFILE_HEADER), cufile_version, &out)?;
    let stub = hip_stub(&target.join("hip-stub"), hip_soname)?;
    let library = build_dependent_library(&stub)?;
    expect_dynamic(&library, Some(hip_soname))?;
    let version = version_of(metadata, "hipfile-c-hipfile")?;
    layout(&library, &root.join(HEADER), version, hip_soname, &out)?;
    out.canonicalize()
        .map_err(|e| format!("cannot resolve {}: {e}", out.display()))
}

/// Checks the built `library`: its soname is [`SONAME`], and it needs the HIP runtime
/// `hip_soname` (`None`: no HIP runtime at all).
fn expect_dynamic(library: &Path, hip_soname: Option<&str>) -> Result<(), String> {
    let dynamic = crate::elf::read_dynamic(library)?;
    let hip: Vec<&String> = dynamic
        .needed
        .iter()
        .filter(|n| n.starts_with("libamdhip64"))
        .collect();
    let hip_ok = match hip_soname {
        Some(soname) => hip.len() == 1 && hip[0] == soname,
        None => hip.is_empty(),
    };
    if dynamic.soname.as_deref() != Some(SONAME) || !hip_ok {
        return Err(format!(
            "{} has soname {:?} and needs {:?}; expected soname {SONAME} and {}",
            library.display(),
            dynamic.soname,
            dynamic.needed,
            hip_soname.map_or("no HIP runtime".to_owned(), |s| format!(
                "the HIP runtime {s}"
            )),
        ));
    }
    Ok(())
}

/// A shared object in `dir` named `soname` and with that soname, and nothing else: what the
/// linker needs to record the HIP runtime as a dependency on a machine that has another
/// release of it, or none. Made with the system C compiler (`cc`, which Rust's linking uses
/// too); returns its path.
///
/// # Errors
///
/// When `soname` is not a HIP runtime's, or `cc` fails.
pub fn hip_stub(dir: &Path, soname: &str) -> Result<PathBuf, String> {
    check_hip_soname(soname)?;
    create_dirs(&[dir])?;
    let stub = dir.join(soname);
    let soname_arg = format!("-Wl,-soname,{soname}");
    output_of(
        "cc",
        &[
            "-shared",
            "-nostdlib",
            &soname_arg,
            "-o",
            utf8(&stub)?,
            "-x",
            "c",
            "/dev/null",
        ],
        &[],
    )?;
    Ok(stub)
}

/// `cargo build --release -p hipfile-c-hipfile -p hipfile-c-cufile --lib`, and the `libhipfile.so`
/// (the portable one) and `libcufile.so` it names.
fn build_libraries() -> Result<(PathBuf, PathBuf), String> {
    let messages = cargo_json(&[
        "build",
        "--locked",
        "--release",
        "-p",
        "hipfile-c-hipfile",
        "-p",
        "hipfile-c-cufile",
        "--lib",
        "--message-format=json-render-diagnostics",
    ])?;
    let named = |name: &str| {
        crate::emulated::artifact_in_messages(&messages, name)
            .ok_or_else(|| format!("cargo built the C libraries but named no {name}"))
    };
    Ok((named(LINK_NAME)?, named(CUFILE_LINK_NAME)?))
}

/// `hipfile-c-hipfile` linked again with `stub`, which the linker records as needed however
/// little the library uses it (`--no-as-needed`); the `libhipfile.so` it names.
fn build_dependent_library(stub: &Path) -> Result<PathBuf, String> {
    let stub = format!("link-arg={}", utf8(stub)?);
    let messages = cargo_json(&[
        "rustc",
        "--locked",
        "--release",
        "-p",
        "hipfile-c-hipfile",
        "--lib",
        "--message-format=json-render-diagnostics",
        "--",
        "-C",
        "link-arg=-Wl,--push-state,--no-as-needed",
        "-C",
        &stub,
        "-C",
        "link-arg=-Wl,--pop-state",
    ])?;
    crate::emulated::artifact_in_messages(&messages, LINK_NAME)
        .ok_or_else(|| format!("cargo linked hipfile-c-hipfile but named no {LINK_NAME}"))
}

/// Runs cargo with `args` (JSON messages asked for) and returns its standard output.
fn cargo_json(args: &[&str]) -> Result<String, String> {
    eprintln!("xtask: running cargo {}", args.join(" "));
    let out = Command::new("cargo")
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo {} failed ({})", args.join(" "), out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `program` with `args`, and its standard output when it succeeds.
fn output_of(program: &str, args: &[&str], env: &[(&str, &str)]) -> Result<String, String> {
    let mut command = Command::new(program);
    command.args(args).envs(env.iter().copied());
    run_for_output(command, &format!("{program} {}", args.join(" ")))
}

/// Runs `command` (described as `what`), and its standard output when it succeeds.
fn run_for_output(mut command: Command, what: &str) -> Result<String, String> {
    let out = command
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}):\n{}{}",
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
    /// The directory holding the emulated runtime as `libhipfile_emu.so` and under the names
    /// of a HIP runtime (`emulated::RUNTIME_NAMES`), absolute.
    pub runtime: PathBuf,
}

/// The `cc` line of the README's "C programs" example: the first line of that section that
/// starts with `cc `.
///
/// # Errors
///
/// When the section or the line is missing.
pub fn readme_cc_line(readme: &str) -> Result<&str, String> {
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("C programs\n"))
        .ok_or("README.md has no \"C programs\" section")?;
    section
        .lines()
        .find(|l| l.starts_with("cc "))
        .ok_or_else(|| "README.md's \"C programs\" section has no `cc` line".into())
}

/// What `cargo xtask ci` checks of the distribution, in `target/dist-check`:
///
/// - `dist` into `home/.local/hipfile` and the emulated runtime into
///   `home/.local/hipfile-emu`, where the README's example puts them;
/// - the README's `cc` line, run as written by `sh` with `HOME` set to `home` and
///   `LIBRARY_PATH` naming the emulated runtime (as the README says for a machine without a
///   HIP runtime), `app.c` being [`SMOKE_PROGRAM`]; the program then runs with the emulated
///   runtime's directory in `LD_LIBRARY_PATH` and without `HIPFILE_HIP_LIBRARY`, once on
///   `lib/` (the library brings the runtime) and once with `lib/portable` first: a write and
///   a read back, bytes verified, one HIP runtime loaded, the library the one expected;
/// - cuFile's `.pc` file: [`CUFILE_PC_PROGRAM`] built with `pkg-config --cflags --libs
///   cufile` and run; and [`CUFILE_SMOKE_PROGRAM`], which `dlopen`s `libcufile.so.0`;
/// - a tree for Debian's HIP 5 (`--hip-soname libamdhip64.so.5`), whose library, loaded in a
///   process, brings Debian's runtime.
///
/// Returns the tree and the runtime's directory, which the Python bindings' check uses.
///
/// # Errors
///
/// Any step failing, `cc`, `pkg-config`, `python3` or Debian's `libamdhip64-5` missing
/// included: CI installs them.
pub fn check(metadata: &Value) -> Result<Checked, String> {
    let target = metadata["target_directory"]
        .as_str()
        .ok_or("cargo metadata names no target directory")?;
    let root = Path::new(
        metadata["workspace_root"]
            .as_str()
            .ok_or("cargo metadata names no workspace root")?,
    );
    let scratch = Path::new(target).join("dist-check");
    if scratch.exists() {
        std::fs::remove_dir_all(&scratch)
            .map_err(|e| format!("cannot empty {}: {e}", scratch.display()))?;
    }
    let home = scratch.join("home");
    let tree = dist(metadata, Some(&home.join(".local/hipfile")), None)?;
    let runtime = emulated_runtime_dir(&home.join(".local/hipfile-emu"))?;
    check_readme_example(root, &tree, &runtime, &home, &scratch)?;
    check_cufile_pc(root, &tree, &runtime, &scratch)?;
    check_cufile(root, &tree, &runtime, &scratch)?;
    check_hip5_tree(metadata, &scratch)?;
    eprintln!("xtask: dist check passed ({})", tree.display());
    Ok(Checked { tree, runtime })
}

/// The README's example, built as written and run on the emulated runtime with the tree's
/// library, then with the portable one.
fn check_readme_example(
    root: &Path,
    tree: &Path,
    runtime: &Path,
    home: &Path,
    scratch: &Path,
) -> Result<(), String> {
    let readme = std::fs::read_to_string(root.join(README))
        .map_err(|e| format!("cannot read {README}: {e}"))?;
    let line = readme_cc_line(&readme)?;
    let dir = scratch.join("readme");
    create_dirs(&[&dir])?;
    copy_file(&root.join(SMOKE_PROGRAM), &dir.join("app.c"))?;
    eprintln!("xtask: running the README's example: {line}");
    let mut cc = Command::new("sh");
    cc.args(["-c", line])
        .current_dir(&dir)
        .env("HOME", home)
        .env("LIBRARY_PATH", runtime);
    run_for_output(cc, &format!("sh -c {line:?}"))?;
    let exe = dir.join("a.out");
    let lib = tree.join("lib");
    let portable = lib.join(PORTABLE_DIR);
    let runs = [
        ("lib", utf8(runtime)?.to_owned(), lib.join(SONAME)),
        (
            "portable",
            format!("{}:{}", utf8(&portable)?, utf8(runtime)?),
            portable.join(SONAME),
        ),
    ];
    for (name, library_path, expected) in runs {
        let work = dir.join(format!("work-{name}"));
        create_dirs(&[&work])?;
        let mut run = Command::new(&exe);
        run.arg(&work)
            .env("LD_LIBRARY_PATH", &library_path)
            .env_remove("HIPFILE_HIP_LIBRARY")
            .env_remove("ROCM_PATH");
        let what = format!("{} (LD_LIBRARY_PATH={library_path})", exe.display());
        let stdout = run_for_output(run, &what)?;
        let used = stdout
            .lines()
            .find_map(|l| l.strip_prefix("dist_smoke: libhipfile: "))
            .and_then(|p| Path::new(p).canonicalize().ok());
        let expected = expected
            .canonicalize()
            .map_err(|e| format!("cannot resolve {}: {e}", expected.display()))?;
        if !stdout.contains("all checks passed") || used.as_ref() != Some(&expected) {
            return Err(format!(
                "the README's example did not pass on {} ({what}):\n{stdout}",
                expected.display()
            ));
        }
    }
    Ok(())
}

/// cuFile's `.pc` file: [`CUFILE_PC_PROGRAM`] compiled and linked with exactly `pkg-config
/// --cflags --libs cufile` and run on the emulated runtime (named in `HIPFILE_HIP_LIBRARY`:
/// the program does not link one), with the tree's `lib/` in `LD_LIBRARY_PATH`.
fn check_cufile_pc(root: &Path, tree: &Path, runtime: &Path, scratch: &Path) -> Result<(), String> {
    let pkgconfig = tree.join("lib").join("pkgconfig");
    let flags = output_of(
        "pkg-config",
        &["--cflags", "--libs", "cufile"],
        &[("PKG_CONFIG_PATH", utf8(&pkgconfig)?)],
    )?;
    let exe = scratch.join("cufile_smoke");
    let source = root.join(CUFILE_PC_PROGRAM);
    let mut cc_args = vec![
        "-std=c11",
        "-Wall",
        "-Wextra",
        "-Werror",
        utf8(&source)?,
        "-o",
        utf8(&exe)?,
    ];
    cc_args.extend(flags.split_whitespace());
    eprintln!("xtask: running cc {}", cc_args.join(" "));
    output_of("cc", &cc_args, &[])?;
    let lib = tree.join("lib");
    let emu = runtime.join(crate::emulated::LIBRARY);
    // The library reads cufile.json; not the machine's /etc/cufile.json here.
    let no_json = scratch.join("no-cufile.json");
    let stdout = output_of(
        utf8(&exe)?,
        &[],
        &[
            ("LD_LIBRARY_PATH", utf8(&lib)?),
            ("HIPFILE_HIP_LIBRARY", utf8(&emu)?),
            ("HIPFILE_CUFILE_SYSTEM_JSON", utf8(&no_json)?),
        ],
    )?;
    let expected = format!("library: {}\n", utf8(&lib.join(CUFILE_SONAME))?);
    if !stdout.contains("all checks passed") || !stdout.contains(&expected) {
        return Err(format!(
            "{CUFILE_PC_PROGRAM} did not pass on the tree's {CUFILE_SONAME}:\n{stdout}"
        ));
    }
    Ok(())
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
    create_dirs(&[&work])?;
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

/// The HIP runtime `--hip-soname libamdhip64.so.5` names: Debian's HIP 5, which CI installs.
const HIP5_SONAME: &str = "libamdhip64.so.5";

/// A tree for Debian's HIP 5 (`dist --hip-soname libamdhip64.so.5`, which checks the
/// dependency it records): its `lib/libhipfile.so.0`, loaded by Python's `ctypes` with
/// nothing else, must bring Debian's runtime into the process, and only that runtime.
fn check_hip5_tree(metadata: &Value, scratch: &Path) -> Result<(), String> {
    let tree = dist(
        metadata,
        Some(&scratch.join("dist-hip5")),
        Some(HIP5_SONAME),
    )?;
    let library = tree.join("lib").join(SONAME);
    let script = "import ctypes, sys\n\
                  ctypes.CDLL(sys.argv[1])\n\
                  maps = open('/proc/self/maps').read().splitlines()\n\
                  print('\\n'.join(sorted({l.split()[-1] for l in maps if 'amdhip64' in l \
                  or 'hipfile_emu' in l})))\n";
    let mut python = Command::new("python3");
    python
        .args(["-c", script, utf8(&library)?])
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("LD_PRELOAD");
    let loaded = run_for_output(python, &format!("python3 loading {}", library.display()))
        .map_err(|e| {
            format!(
                "{e}\n(the HIP 5 tree needs Debian's {HIP5_SONAME}: apt-get install libamdhip64-5)"
            )
        })?;
    let runtimes: Vec<&str> = loaded.lines().collect();
    if runtimes.len() != 1 || !runtimes[0].contains(HIP5_SONAME) {
        return Err(format!(
            "loading {} brought {runtimes:?}, not one {HIP5_SONAME}",
            library.display()
        ));
    }
    eprintln!(
        "xtask: the HIP 5 tree's library brings {} ({})",
        runtimes[0],
        tree.display()
    );
    Ok(())
}

/// The emulated runtime, built and copied into `dir` with its names as a HIP runtime
/// (`cargo xtask emulated --out dir`); returns `dir`, absolute.
pub fn emulated_runtime_dir(dir: &Path) -> Result<PathBuf, String> {
    let emu = crate::emulated::build(&crate::emulated::Args {
        release: false,
        out: Some(dir.to_path_buf()),
    })?;
    emu.parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("{} has no directory", emu.display()))
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
    fn parses_the_output_directory_and_the_hip_soname() {
        assert_eq!(parse(&[]), Ok(Args::default()));
        assert_eq!(
            parse(&["--out", "d"]),
            Ok(Args {
                out: Some(PathBuf::from("d")),
                hip_soname: None,
            })
        );
        assert_eq!(
            parse(&["--hip-soname", "libamdhip64.so.6", "--out", "d"]),
            Ok(Args {
                out: Some(PathBuf::from("d")),
                hip_soname: Some("libamdhip64.so.6".into()),
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
        for bad in [
            &["--hip-soname"][..],
            &["--hip-soname", "libamdhip64.so"],
            &["--hip-soname", "libamdhip64.so.x"],
            &["--hip-soname", "libcudart.so.12"],
            &["--hip-soname", "/opt/rocm/lib/libamdhip64.so.7"],
        ] {
            assert!(
                parse(bad).unwrap_err().contains("libamdhip64.so.N"),
                "{bad:?}"
            );
        }
        assert!(
            parse(&[
                "--hip-soname",
                "libamdhip64.so.7",
                "--hip-soname",
                "libamdhip64.so.6"
            ])
            .unwrap_err()
            .contains("twice")
        );
    }

    #[test]
    fn the_pc_files_are_relocatable_and_name_their_library() {
        let pc = pc_file("1.2.3", "libamdhip64.so.6");
        assert!(pc.contains("\nprefix=${pcfiledir}/../..\n"), "{pc}");
        assert!(pc.contains("\nlibdir=${prefix}/lib\n"), "{pc}");
        assert!(pc.contains("\nincludedir=${prefix}/include\n"), "{pc}");
        assert!(pc.contains("\nVersion: 1.2.3\n"), "{pc}");
        assert!(pc.contains("\nLibs: -L${libdir} -lhipfile\n"), "{pc}");
        assert!(pc.contains("\nCflags: -I${includedir}\n"), "{pc}");
        assert!(pc.contains("libamdhip64.so.6"), "says what it needs: {pc}");
        assert!(!pc.contains("Requires"), "HIP has no pkg-config file: {pc}");
        let pc = cufile_pc_file("4.5.6");
        assert!(pc.contains("\nprefix=${pcfiledir}/../..\n"), "{pc}");
        assert!(pc.contains("\nName: cufile\n"), "{pc}");
        assert!(pc.contains("\nVersion: 4.5.6\n"), "{pc}");
        assert!(pc.contains("\nLibs: -L${libdir} -lcufile\n"), "{pc}");
        assert!(
            pc.contains("\nCflags: -I${includedir}/hipfile-cufile\n"),
            "{pc}"
        );
    }

    #[test]
    fn lays_out_both_libraries_their_links_the_header_and_the_pc_file() {
        let scratch = std::env::temp_dir().join(format!("xtask-dist-{}", std::process::id()));
        let src = scratch.join("src");
        std::fs::create_dir_all(&src).unwrap();
        let (lib, portable, header) = (
            src.join("libhipfile.so"),
            src.join("portable.so"),
            src.join("hipfile.h"),
        );
        std::fs::write(&lib, b"ELF").unwrap();
        std::fs::write(&portable, b"ELF portable").unwrap();
        std::fs::write(&header, b"/* header */").unwrap();
        let out = scratch.join("out");
        // Twice: a second layout over the first replaces it.
        for _ in 0..2 {
            layout_portable(&portable, &out).unwrap();
            layout(&lib, &header, "0.1.0", DEFAULT_HIP_SONAME, &out).unwrap();
        }
        assert_eq!(
            std::fs::read(out.join("lib/libhipfile.so.0")).unwrap(),
            b"ELF"
        );
        assert_eq!(
            std::fs::read(out.join("lib/portable/libhipfile.so.0")).unwrap(),
            b"ELF portable"
        );
        for dir in ["lib", "lib/portable"] {
            let link = out.join(dir).join("libhipfile.so");
            assert!(link.symlink_metadata().unwrap().file_type().is_symlink());
            assert_eq!(
                std::fs::read_link(&link).unwrap(),
                Path::new("libhipfile.so.0"),
                "a relative link, so that the tree can move"
            );
        }
        assert_eq!(
            std::fs::read(out.join("include/hipfile.h")).unwrap(),
            b"/* header */"
        );
        assert_eq!(
            std::fs::read_to_string(out.join("lib/pkgconfig/hipfile.pc")).unwrap(),
            pc_file("0.1.0", DEFAULT_HIP_SONAME)
        );
        std::fs::remove_dir_all(&scratch).unwrap();
    }

    #[test]
    fn the_headers_the_programs_and_the_readme_line_exist() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for file in [
            HEADER,
            SMOKE_PROGRAM,
            CUFILE_HEADER,
            CUFILE_SMOKE_PROGRAM,
            CUFILE_PC_PROGRAM,
        ] {
            assert!(root.join(file).is_file(), "{file}");
        }
        let readme = std::fs::read_to_string(root.join(README)).unwrap();
        let line = readme_cc_line(&readme).unwrap();
        for part in [
            "-D__HIP_PLATFORM_AMD__",
            "app.c",
            "pkg-config --cflags --libs hipfile",
            "-lamdhip64",
        ] {
            assert!(line.contains(part), "{part} in {line}");
        }
    }

    #[test]
    fn finds_the_cc_line_of_the_c_programs_section_only() {
        let readme = "# x\n\n## Other\n\ncc other.c\n\n## C programs\n\ntext\n\n```sh\n\
                      cargo xtask dist\ncc -O2 app.c -lhipfile\n```\n\n## Next\n\ncc next.c\n";
        assert_eq!(readme_cc_line(readme), Ok("cc -O2 app.c -lhipfile"));
        assert!(readme_cc_line("## C programs\n\nno line\n").is_err());
        assert!(readme_cc_line("## Other\n\ncc a.c\n").is_err());
    }

    #[test]
    fn lays_out_cufiles_library_its_link_its_header_and_its_pc_file() {
        let scratch =
            std::env::temp_dir().join(format!("xtask-dist-cufile-{}", std::process::id()));
        let src = scratch.join("src");
        std::fs::create_dir_all(&src).unwrap();
        let (lib, header) = (src.join("libcufile.so"), src.join("cufile.h"));
        std::fs::write(&lib, b"ELF cufile").unwrap();
        std::fs::write(&header, b"/* cufile */").unwrap();
        let out = scratch.join("out");
        for _ in 0..2 {
            layout_cufile(&lib, &header, "0.2.0", &out).unwrap();
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
        assert_eq!(
            std::fs::read_to_string(out.join("lib/pkgconfig/cufile.pc")).unwrap(),
            cufile_pc_file("0.2.0")
        );
        std::fs::remove_dir_all(&scratch).unwrap();
    }

    /// The stub the linker records: a shared object whose soname is the runtime's, read back
    /// from the file; and a library linked against it needs that soname, which is what
    /// `expect_dynamic` accepts (and nothing else).
    #[test]
    fn a_library_linked_with_the_stub_needs_the_runtime() {
        if Command::new("cc").arg("--version").output().is_err() {
            eprintln!("SKIP a_library_linked_with_the_stub_needs_the_runtime: no cc");
            return;
        }
        let scratch = std::env::temp_dir().join(format!("xtask-dist-stub-{}", std::process::id()));
        let stub = hip_stub(&scratch, "libamdhip64.so.6").unwrap();
        assert_eq!(stub, scratch.join("libamdhip64.so.6"));
        let d = crate::elf::read_dynamic(&stub).unwrap();
        assert_eq!(d.soname.as_deref(), Some("libamdhip64.so.6"));
        assert!(hip_stub(&scratch, "libfoo.so.1").is_err());
        // A library with hipfile's soname, linked as `build_dependent_library` links it.
        let lib = scratch.join("libhipfile.so");
        let source = scratch.join("lib.c");
        std::fs::write(&source, "int hipfile_stub_test(void) { return 1; }\n").unwrap();
        let link = |extra: &[&str]| {
            let mut args = vec![
                "-shared".to_owned(),
                "-fPIC".to_owned(),
                "-Wl,--as-needed".to_owned(),
                format!("-Wl,-soname,{SONAME}"),
                "-o".to_owned(),
                utf8(&lib).unwrap().to_owned(),
                utf8(&source).unwrap().to_owned(),
            ];
            args.extend(extra.iter().map(|a| (*a).to_owned()));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            output_of("cc", &args, &[]).unwrap();
        };
        link(&[
            "-Wl,--push-state,--no-as-needed",
            utf8(&stub).unwrap(),
            "-Wl,--pop-state",
        ]);
        let d = crate::elf::read_dynamic(&lib).unwrap();
        assert!(d.needed.iter().any(|n| n == "libamdhip64.so.6"), "{d:?}");
        assert_eq!(expect_dynamic(&lib, Some("libamdhip64.so.6")), Ok(()));
        assert!(expect_dynamic(&lib, Some("libamdhip64.so.7")).is_err());
        assert!(expect_dynamic(&lib, None).is_err());
        // Without --no-as-needed the linker drops it: nothing of it is used.
        link(&[utf8(&stub).unwrap()]);
        assert_eq!(expect_dynamic(&lib, None), Ok(()));
        assert!(expect_dynamic(&lib, Some("libamdhip64.so.6")).is_err());
        std::fs::remove_dir_all(&scratch).unwrap();
    }
}
