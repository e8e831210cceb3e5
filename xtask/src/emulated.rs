//! `cargo xtask emulated [--release] [--out DIR]`: builds `hipfile-emu` and prints the path of
//! `libhipfile_emu.so`, copied into `DIR` first when `--out` is given. An application outside
//! this workspace points hipfile at that path (`HIPFILE_HIP_LIBRARY`, or
//! `ConfigBuilder::hip_library`); hipfile never picks the emulated runtime on its own.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The file name of the emulated runtime.
pub const LIBRARY: &str = "libhipfile_emu.so";

/// What `cargo xtask emulated` was asked for.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Args {
    /// Build with `--release`.
    pub release: bool,
    /// Copy the library into this directory, and report the copy.
    pub out: Option<PathBuf>,
}

/// The arguments after `emulated`.
///
/// # Errors
///
/// An unknown argument, a repeated one, or `--out` without a directory.
pub fn parse(args: &[&str]) -> Result<Args, String> {
    let mut parsed = Args::default();
    let mut rest = args.iter();
    while let Some(&arg) = rest.next() {
        match arg {
            "--release" if !parsed.release => parsed.release = true,
            "--out" if parsed.out.is_none() => match rest.next() {
                Some(dir) if !dir.is_empty() && !dir.starts_with("--") => {
                    parsed.out = Some(PathBuf::from(dir));
                }
                _ => return Err("--out needs a directory".into()),
            },
            "--release" | "--out" => return Err(format!("{arg} is given twice")),
            other => return Err(format!("unknown argument {other:?} for emulated")),
        }
    }
    Ok(parsed)
}

/// Builds `hipfile-emu` and returns the path of its library (in `args.out` when given).
///
/// # Errors
///
/// When the build fails, cargo names no `libhipfile_emu.so`, or the copy fails.
pub fn build(args: &Args) -> Result<PathBuf, String> {
    let mut cargo_args = vec![
        "build",
        "--locked",
        "-p",
        "hipfile-emu",
        "--lib",
        "--message-format=json-render-diagnostics",
    ];
    if args.release {
        cargo_args.push("--release");
    }
    eprintln!("xtask: running cargo {}", cargo_args.join(" "));
    let out = Command::new("cargo")
        .args(&cargo_args)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo {} failed ({})",
            cargo_args.join(" "),
            out.status
        ));
    }
    let built = library_in_messages(&String::from_utf8_lossy(&out.stdout))
        .ok_or_else(|| format!("cargo built hipfile-emu but named no {LIBRARY}"))?;
    let path = match &args.out {
        None => built,
        Some(dir) => copy_into(&built, dir)?,
    };
    if !path.is_file() {
        return Err(format!("{} is not a file after the build", path.display()));
    }
    Ok(path)
}

/// The `libhipfile_emu.so` among the artifacts in cargo's JSON messages, one per line.
fn library_in_messages(stdout: &str) -> Option<PathBuf> {
    artifact_in_messages(stdout, LIBRARY)
}

/// The artifact whose file name is `name` among cargo's JSON messages, one per line.
pub fn artifact_in_messages(stdout: &str, name: &str) -> Option<PathBuf> {
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|m| m["reason"] == "compiler-artifact")
        .filter_map(|m| m["filenames"].as_array().cloned())
        .flatten()
        .filter_map(|f| f.as_str().map(PathBuf::from))
        .find(|f| f.file_name().is_some_and(|n| n == name))
}

fn copy_into(built: &Path, dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let to = dir.join(LIBRARY);
    std::fs::copy(built, &to)
        .map_err(|e| format!("cannot copy {} to {}: {e}", built.display(), to.display()))?;
    // An absolute path, so that it works from any directory the application runs in.
    to.canonicalize()
        .map_err(|e| format!("cannot resolve {}: {e}", to.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_flags_in_any_order() {
        assert_eq!(parse(&[]), Ok(Args::default()));
        let want = Args {
            release: true,
            out: Some(PathBuf::from("lib")),
        };
        assert_eq!(parse(&["--release", "--out", "lib"]).as_ref(), Ok(&want));
        assert_eq!(parse(&["--out", "lib", "--release"]), Ok(want));
    }

    #[test]
    fn refuses_what_it_does_not_know() {
        assert!(parse(&["--out"]).unwrap_err().contains("directory"));
        assert!(
            parse(&["--out", "--release"])
                .unwrap_err()
                .contains("directory")
        );
        assert!(
            parse(&["--release", "--release"])
                .unwrap_err()
                .contains("twice")
        );
        assert!(
            parse(&["--out", "a", "--out", "b"])
                .unwrap_err()
                .contains("twice")
        );
        assert!(parse(&["--debug"]).unwrap_err().contains("--debug"));
    }

    #[test]
    fn finds_the_library_among_cargo_messages() {
        let stdout = concat!(
            r#"{"reason":"compiler-artifact","filenames":["/t/debug/libhipfile_emu.rlib","/t/debug/libhipfile_emu.so"]}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
            "\n"
        );
        assert_eq!(
            library_in_messages(stdout),
            Some(PathBuf::from("/t/debug/libhipfile_emu.so"))
        );
        assert_eq!(library_in_messages("not json\n"), None);
    }
}
