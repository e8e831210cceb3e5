//! `cargo xtask emulated [--release] [--out DIR]`: builds `hipfile-emu` and prints the path of
//! `libhipfile_emu.so`, copied into `DIR` first when `--out` is given. An application outside
//! this workspace points hipfile at that path (`HIPFILE_HIP_LIBRARY`, or
//! `ConfigBuilder::hip_library`); hipfile never picks the emulated runtime on its own.
//!
//! In `DIR` the library also gets the names of a HIP runtime ([`RUNTIME_NAMES`]: links to
//! it), so that a C program links it as `-lamdhip64` (with `DIR` on the linker's path) and,
//! with `DIR` in `LD_LIBRARY_PATH`, gets it wherever it or `libhipfile.so.0` asks for a HIP
//! runtime by soname: one runtime, the emulated one, whichever release they were linked
//! against.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The file name of the emulated runtime.
pub const LIBRARY: &str = "libhipfile_emu.so";

/// The names the library gets in an `--out` directory, as links to it: the linker's name of
/// a HIP runtime and the sonames of ROCm 7, ROCm 6 and HIP 5 (its own soname is the first).
pub const RUNTIME_NAMES: [&str; 4] = [
    "libamdhip64.so",
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
];

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

/// Copies the library into `dir` (a new file, so that a program running it keeps its copy)
/// and links [`RUNTIME_NAMES`] to it there.
fn copy_into(built: &Path, dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let to = dir.join(LIBRARY);
    remove_if_present(&to)?;
    std::fs::copy(built, &to)
        .map_err(|e| format!("cannot copy {} to {}: {e}", built.display(), to.display()))?;
    for name in RUNTIME_NAMES {
        let link = dir.join(name);
        remove_if_present(&link)?;
        std::os::unix::fs::symlink(LIBRARY, &link)
            .map_err(|e| format!("cannot link {} to {LIBRARY}: {e}", link.display()))?;
    }
    // An absolute path, so that it works from any directory the application runs in.
    to.canonicalize()
        .map_err(|e| format!("cannot resolve {}: {e}", to.display()))
}

fn remove_if_present(path: &Path) -> Result<(), String> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("cannot replace {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_copy_gets_the_names_of_a_hip_runtime() {
        let scratch = std::env::temp_dir().join(format!("xtask-emulated-{}", std::process::id()));
        let built = scratch.join("built.so");
        std::fs::create_dir_all(&scratch).unwrap();
        std::fs::write(&built, b"ELF emu").unwrap();
        let out = scratch.join("out");
        // Twice: a second copy replaces the first and its links.
        for _ in 0..2 {
            let lib = copy_into(&built, &out).unwrap();
            assert_eq!(lib, out.join(LIBRARY).canonicalize().unwrap());
        }
        for name in RUNTIME_NAMES {
            assert_eq!(
                std::fs::read_link(out.join(name)).unwrap(),
                Path::new(LIBRARY),
                "{name}: a relative link"
            );
            assert_eq!(std::fs::read(out.join(name)).unwrap(), b"ELF emu");
        }
        std::fs::remove_dir_all(&scratch).unwrap();
    }

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
