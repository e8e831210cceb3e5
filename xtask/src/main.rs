//! Project automation, run as `cargo xtask <command>`:
//!
//! - `ci`: everything CI checks, in order: formatting, clippy with warnings denied, the whole
//!   test suite (privileged filesystem tests included: a test that would skip for a missing
//!   capability fails instead, unless `--allow-skips`), the layering check, and packaging.
//! - `layers`: only the layering check (see `layers.rs` and docs/ARCHITECTURE.md).
//! - `package`: only packaging: `cargo package --locked` for exactly the library crates
//!   (`package.rs`), each built from its own tarball, after checking that they are exactly
//!   the workspace's publishable crates. It needs crates.io for the external dependencies.
//!
//! It has one dependency (serde_json, to read `cargo metadata`) and runs only `cargo`.

#![forbid(unsafe_code)]

mod layers;
mod package;

use std::process::{Command, ExitCode};

const USAGE: &str =
    "usage: cargo xtask ci [--allow-skips] | cargo xtask layers | cargo xtask package";

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
        ["layers"] => layers_check(),
        ["package"] => package_check(),
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
    cargo(
        &["test", "--workspace", "--locked", "--no-fail-fast"],
        strict_env,
    )?;
    layers_check()?;
    package_check()?;
    eprintln!("xtask: ci passed");
    Ok(())
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

fn package_check() -> Result<(), String> {
    let metadata = layers::workspace_metadata()?;
    let problems = package::mismatches(&metadata)?;
    if !problems.is_empty() {
        return Err(format!(
            "the library crates are not the publishable ones:\n  {}",
            problems.join("\n  ")
        ));
    }
    cargo(&package::cargo_args(), &[])?;
    eprintln!("xtask: packaging passed");
    Ok(())
}
