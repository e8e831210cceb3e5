//! What the C libraries' tests ask of a shared library and of a header: its dynamic section,
//! the functions it exports, and whether a header compiles on its own.

use std::path::Path;
use std::process::Command;

/// `readelf -d` of `lib`: the dynamic section, which names the soname.
///
/// # Panics
///
/// When `readelf` cannot be run (callers `require!` it first).
pub fn dynamic_section(lib: &Path) -> String {
    readelf(&["-d"], lib)
}

/// The functions `lib` defines and exports (global, not undefined), sorted.
///
/// # Panics
///
/// When `readelf` cannot be run (callers `require!` it first).
pub fn exported_functions(lib: &Path) -> Vec<String> {
    let symbols = readelf(&["--dyn-syms", "-W"], lib);
    let mut exported: Vec<String> = symbols
        .lines()
        .filter(|l| l.contains(" FUNC ") && l.contains(" GLOBAL ") && !l.contains(" UND "))
        .filter_map(|l| l.split_whitespace().last())
        .map(str::to_owned)
        .collect();
    exported.sort_unstable();
    exported
}

fn readelf(args: &[&str], lib: &Path) -> String {
    let out = Command::new("readelf")
        .args(args)
        .arg(lib)
        .output()
        .unwrap_or_else(|e| panic!("cannot run readelf: {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Compiles `header` on its own with `compiler` as `language`, each standard in turn,
/// warnings as errors (`-Wall -Wextra -pedantic -Werror`).
///
/// # Panics
///
/// When the compiler cannot be run, or rejects the header with one of the standards.
pub fn assert_header_compiles(header: &Path, compiler: &str, language: &str, standards: &[&str]) {
    assert_header_compiles_with(header, compiler, language, standards, &[]);
}

/// As [`assert_header_compiles`], with `args` (definitions, include directories) before the
/// header on the command line.
///
/// # Panics
///
/// When the compiler cannot be run, or rejects the header with one of the standards.
pub fn assert_header_compiles_with(
    header: &Path,
    compiler: &str,
    language: &str,
    standards: &[&str],
    args: &[&std::ffi::OsStr],
) {
    for standard in standards {
        let out = Command::new(compiler)
            .args(["-fsyntax-only", "-Wall", "-Wextra", "-pedantic", "-Werror"])
            .arg(format!("-std={standard}"))
            .args(args)
            .args(["-x", language])
            .arg(header)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {compiler}: {e}"));
        assert!(
            out.status.success(),
            "{compiler} -std={standard} {args:?}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
