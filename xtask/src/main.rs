//! Project automation, run as `cargo xtask <command>`:
//!
//! - `ci`: everything CI checks, in order: the docs check (`docs`, below; it builds nothing,
//!   so it fails first), formatting, clippy with warnings denied, the whole test suite
//!   (privileged filesystem tests included: a test that would skip for a missing capability
//!   fails instead, unless `--allow-skips`; NVIDIA's `cufile.h` is fetched from PyPI first,
//!   with CUDA's runtime headers, `cufile_header.rs`), the `hipfile` examples and the doc
//!   tests of `hipfile` and `hipfile-safetensors` on the emulated runtime, the layering check,
//!   packaging, the C distribution (`dist` into a scratch tree, the README's C example built
//!   against it as written, and a cuFile program built with `pkg-config`), and AMD's Python
//!   bindings built against that tree and run on the emulated runtime (`python.rs`), then
//!   the `hipfile-torch` Python package built with maturin and tested with PyTorch from PyPI
//!   on the emulated runtime (`torch.rs`).
//! - `dist-check`: only the last two steps of `ci`, the C distribution and the Python
//!   bindings.
//! - `torch-check`: only the last step of `ci`, the `hipfile-torch` package.
//! - `dist [--out DIR] [--hip-soname SONAME]`: the C libraries' installation tree
//!   (`dist.rs`): `lib/libhipfile.so.0` (which needs the HIP runtime `libamdhip64.so.7`, or
//!   `SONAME`), `lib/libhipfile.so`, `lib/portable/` (the library without that dependency),
//!   `include/hipfile.h`, `lib/pkgconfig/hipfile.pc`, and cuFile's `lib/libcufile.so.0`,
//!   `lib/libcufile.so`, `include/hipfile-cufile/cufile.h`, `lib/pkgconfig/cufile.pc`, in
//!   `target/dist` unless `--out` says otherwise.
//! - `emulated [--release] [--out DIR]`: builds the emulated runtime (`hipfile-emu`) and
//!   prints the path of `libhipfile_emu.so`, copied into `DIR` first with `--out` (with links
//!   under a HIP runtime's names), for an application to name in `HIPFILE_HIP_LIBRARY` or a
//!   C program to link as `-lamdhip64` (`emulated.rs`).
//! - `docs`: only the docs check (`docs.rs`): every repository path that the Markdown names
//!   (`docs/**/*.md`, every `README.md`, `CHANGELOG.md`) exists, listing each missing one
//!   with the file and line that names it; and every README's Rust snippets are doc tests.
//! - `layers`: only the layering check (see `layers.rs` and docs/ARCHITECTURE.md).
//! - `package`: only packaging: `cargo package --locked` for exactly the library crates
//!   (`package.rs`), each built from its own tarball, after checking that they are exactly
//!   the workspace's publishable crates. It needs crates.io for the external dependencies.
//!
//! - `sanitize [address|thread|all]`: the tests under AddressSanitizer (with LeakSanitizer)
//!   and ThreadSanitizer, with rustup's nightly toolchain (`sanitize.rs`); not part of `ci`.
//!
//! It has one dependency (serde_json, to read `cargo metadata`) and runs `cargo`, and for the
//! distribution checks and NVIDIA's header `cc`, `pkg-config` and `python3` (with pip, which
//! needs PyPI).

#![forbid(unsafe_code)]

mod cufile_header;
mod dist;
mod docs;
mod elf;
mod emulated;
mod layers;
mod package;
mod python;
mod sanitize;
mod torch;

use std::process::{Command, ExitCode};

const USAGE: &str = "usage: cargo xtask ci [--allow-skips] | \
                     cargo xtask dist [--out DIR] [--hip-soname SONAME] | \
                     cargo xtask dist-check | cargo xtask docs | \
                     cargo xtask emulated [--release] [--out DIR] | cargo xtask layers | \
                     cargo xtask package | cargo xtask sanitize [address|thread|all] | \
                     cargo xtask torch-check";

/// The examples of the `hipfile` crate (`crates/hipfile/examples/`), which `ci` runs on the
/// emulated runtime.
const EXAMPLES: &[&str] = &[
    "read_verify",
    "copy_through_gpu",
    "parallel_read",
    "foreign_memory",
    "many_in_flight",
    "stream_then_use",
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["ci"] => ci(true),
        ["ci", "--allow-skips"] => ci(false),
        ["emulated", rest @ ..] => emulated::parse(rest)
            .and_then(|args| emulated::build(&args))
            .map(|path| println!("{}", path.display())),
        ["dist", rest @ ..] => dist::parse(rest).and_then(|args| {
            let metadata = layers::workspace_metadata()?;
            let tree = dist::dist(&metadata, args.out.as_deref(), args.hip_soname.as_deref())?;
            println!("{}", tree.display());
            Ok(())
        }),
        ["dist-check"] => dist_check(),
        ["torch-check"] => torch_check(),
        ["docs"] => docs_check(),
        ["layers"] => layers_check(),
        ["package"] => package_check(),
        ["sanitize", rest @ ..] => sanitize::parse(rest).and_then(|which| {
            let metadata = layers::workspace_metadata()?;
            let target = metadata["target_directory"]
                .as_str()
                .ok_or("cargo metadata names no target directory")?
                .to_owned();
            sanitize::run(&which, &target)
        }),
        ["-h" | "--help" | "help"] => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(format!("unknown arguments {args:?}\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn cargo(args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    eprintln!("xtask: running cargo {}", args.join(" "));
    let status = Command::new("cargo")
        .args(args)
        .envs(env.iter().copied())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cargo {} failed ({status})", args.join(" ")))
    }
}

fn ci(strict: bool) -> Result<(), String> {
    // First: it reads files and builds nothing, so a wrong path fails in a second.
    docs_check()?;
    cargo(&["fmt", "--all", "--check"], &[])?;
    cargo(
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    let strict_env: &[(&str, &str)] = if strict {
        &[("HIPFILE_TEST_STRICT", "1")]
    } else {
        &[]
    };
    // NVIDIA's cufile.h (1.15, 1.17) and CUDA's headers, which hipfile-c-cufile's tests compare
    // libcufile.so.0's declarations with.
    let metadata = layers::workspace_metadata()?;
    let target = metadata["target_directory"]
        .as_str()
        .ok_or("cargo metadata names no target directory")?;
    cufile_header::fetch(std::path::Path::new(target))?;
    cargo(
        &["test", "--workspace", "--locked", "--no-fail-fast"],
        strict_env,
    )?;
    examples_and_doc_tests()?;
    layers_check()?;
    package_check()?;
    dist_check()?;
    torch_check()?;
    eprintln!("xtask: ci passed");
    Ok(())
}

/// The C distribution and the Python bindings built on it (see `dist.rs`, `python.rs`).
fn dist_check() -> Result<(), String> {
    let metadata = layers::workspace_metadata()?;
    let checked = dist::check(&metadata)?;
    python::check(&metadata, &checked)
}

/// The PyTorch package, built and tested on the emulated runtime (see `torch.rs`).
fn torch_check() -> Result<(), String> {
    let metadata = layers::workspace_metadata()?;
    let emulated = emulated::build(&emulated::Args::default())?;
    torch::check(&metadata, &emulated)
}

/// Runs the `hipfile` examples and the doc tests of `hipfile` and `hipfile-safetensors` on
/// the emulated runtime, named in `HIPFILE_HIP_LIBRARY` (without it, the doc tests that need
/// a runtime return early).
fn examples_and_doc_tests() -> Result<(), String> {
    let lib = emulated::build(&emulated::Args::default())?;
    let lib = lib
        .to_str()
        .ok_or_else(|| format!("{} is not UTF-8", lib.display()))?;
    let env = [("HIPFILE_HIP_LIBRARY", lib)];
    for name in EXAMPLES {
        cargo(
            &["run", "--locked", "-p", "hipfile", "--example", name],
            &env,
        )?;
    }
    cargo(
        &[
            "test",
            "--locked",
            "--doc",
            "-p",
            "hipfile",
            "-p",
            "hipfile-safetensors",
        ],
        &env,
    )
}

/// The docs check (`docs.rs`) over the repository this xtask belongs to.
fn docs_check() -> Result<(), String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let problems = docs::check(&root)?;
    if problems.is_empty() {
        eprintln!("xtask: docs check passed");
        Ok(())
    } else {
        Err(format!(
            "the docs name {} missing path(s) or uncompiled snippet(s):\n  {}",
            problems.len(),
            problems.join("\n  ")
        ))
    }
}

fn layers_check() -> Result<(), String> {
    let metadata = layers::workspace_metadata()?;
    let violations = layers::check(&metadata)?;
    if violations.is_empty() {
        eprintln!("xtask: layering check passed");
        Ok(())
    } else {
        Err(format!(
            "forbidden dependency edges:\n  {}",
            violations.join("\n  ")
        ))
    }
}

/// Cargo's home: `CARGO_HOME`, which cargo sets for the programs it runs, else
/// `$HOME/.cargo`.
#[allow(clippy::disallowed_methods)] // xtask reads cargo's own variables, not hipfile's.
fn cargo_home() -> std::path::PathBuf {
    std::env::var_os("CARGO_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".cargo")))
        .unwrap_or_else(|| std::path::PathBuf::from(".cargo"))
}

fn package_check() -> Result<(), String> {
    let metadata = layers::workspace_metadata()?;
    let problems = package::mismatches(&metadata)?;
    if !problems.is_empty() {
        return Err(format!(
            "the library crates are not the publishable ones:\n  {}",
            problems.join("\n  ")
        ));
    }
    // Verification builds each tarball's dependencies from the run's local registry, and
    // cargo never rebuilds a registry crate whose version it has built before: in a target
    // directory that an earlier run used, a library changed since then would be verified
    // against its old build. A target directory of its own, emptied first, has none; and a
    // cargo home of its own keeps the tarballs' extracted sources (package::private_home).
    let target = metadata["target_directory"]
        .as_str()
        .ok_or("cargo metadata names no target directory")?;
    let verify_dir = std::path::Path::new(target).join("package-verify");
    if verify_dir.exists() {
        std::fs::remove_dir_all(&verify_dir)
            .map_err(|e| format!("cannot empty {}: {e}", verify_dir.display()))?;
    }
    let verify_dir = verify_dir.to_string_lossy().into_owned();
    let home = package::private_home(
        &cargo_home(),
        &std::path::Path::new(target).join("package-home"),
    )
    .map_err(|e| format!("cannot make a cargo home for packaging: {e}"))?;
    let home = home.to_string_lossy().into_owned();
    let mut args = package::cargo_args();
    args.extend(["--target-dir", verify_dir.as_str()]);
    cargo(&args, &[("CARGO_HOME", home.as_str())])?;
    eprintln!("xtask: packaging passed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_runs_every_example_of_the_facade() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/hipfile/examples");
        let mut found: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "rs"))
            .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
            .collect();
        found.sort();
        let mut listed: Vec<String> = EXAMPLES.iter().map(|s| s.to_string()).collect();
        listed.sort();
        assert_eq!(found, listed, "EXAMPLES must list {}", dir.display());
    }
}
