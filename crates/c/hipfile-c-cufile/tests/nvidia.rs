//! Our `cufile.h` as a stand-in for NVIDIA's, from the side of a program written for
//! NVIDIA's: with CUDA's own headers on the include path (CUDA 13.0's, from NVIDIA's PyPI
//! packages, as `cargo xtask ci` lays them out; see `common/mod.rs`), `tests/c/nvidia_api.c`
//! (every function of cuFile 1.17 taken into a pointer of NVIDIA's exact type, the macros,
//! the types a program fills in) compiles against NVIDIA's header and against ours, as C and
//! as C++, in the include orders of NVIDIA's samples; and the error macros and texts
//! (`IS_CUFILE_ERR`, `CUFILE_ERRSTR`, `cufileop_status_error`) give what NVIDIA's give for
//! every code; and the one table of codes and texts (`hipfile_c_shared::codes::TABLE`) has,
//! for every number, the text that NVIDIA's header and ours give. `tests/basic.rs` runs
//! programs built against NVIDIA's header on the library.
//!
//! Skips without `cc`/`c++`, and the comparisons with NVIDIA's header without it.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

mod common;

use common::{CUDA, CUFILE_115, CUFILE_117, nvidia_headers, our_include};
use hipfile_c_shared::codes::{CUFILE_UNKNOWN, row};
use hipfile_testfs::{TempDir, has_command, require};
use std::path::Path;
use std::process::Command;

/// Compiles `source` with `compiler` (`cc` as C11, `c++` as C++17), `-Wall -Wextra -Werror`,
/// the include directories in order and `defines`; the compiler's complaint on failure.
fn compile(
    compiler: &str,
    source: &Path,
    includes: &[&Path],
    defines: &[String],
    out: Option<&Path>,
) -> Result<(), String> {
    let mut cmd = Command::new(compiler);
    if compiler == "cc" {
        cmd.arg("-std=c11");
    } else {
        cmd.args(["-std=c++17", "-x", "c++"]);
    }
    cmd.args(["-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror"]);
    for d in defines {
        cmd.arg(format!("-D{d}"));
    }
    for i in includes {
        cmd.arg("-I").arg(i);
    }
    cmd.arg(source);
    match out {
        Some(exe) => cmd.arg("-o").arg(exe),
        None => cmd.arg("-fsyntax-only"),
    };
    let built = cmd.output().unwrap();
    if built.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&built.stderr).into_owned())
    }
}

#[test]
fn a_program_written_for_nvidias_header_compiles_against_ours() {
    require!(has_command("cc"));
    require!(has_command("c++"));
    let nvidia = require!(nvidia_headers(CUFILE_117));
    let cuda = require!(nvidia_headers(CUDA));
    let ours = our_include();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/nvidia_api.c");
    let mut failures = Vec::new();
    for compiler in ["cc", "c++"] {
        // 1: cufile.h, then <cuda.h> and <cuda_runtime.h>; 2: CUDA's headers first; 3: only
        // <cuda_runtime.h>, first.
        for order in 1..=3 {
            for (which, header) in [("NVIDIA's", &nvidia), ("ours", &ours)] {
                let defines = [format!("INCLUDE_ORDER={order}")];
                if let Err(e) = compile(compiler, &source, &[header, &cuda], &defines, None) {
                    failures.push(format!("{compiler}, order {order}, {which} cufile.h:\n{e}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A program that prints, for each value from -5052 to 5052, what `IS_CUFILE_ERR` and
/// `CUFILE_ERRSTR` make of it (as an int, the type NVIDIA's macros take), and
/// `cufileop_status_error` of each code.
const ERRORS_C: &str = r#"
#include <cuda.h>
#include <cufile.h>
#include <stdio.h>
int main(void)
{
    for (int v = -5052; v <= 5052; v++)
        printf("%d %d %s | %s\n", v, IS_CUFILE_ERR(v) ? 1 : 0, CUFILE_ERRSTR(v),
               cufileop_status_error((CUfileOpError)(v < 0 ? -v : v)));
    return 0;
}
"#;

#[test]
fn error_macros_and_texts_are_nvidias() {
    require!(has_command("cc"));
    let cuda = require!(nvidia_headers(CUDA));
    let mut outputs = Vec::new();
    let dir = TempDir::new("cufile-errors");
    let source = dir.path().join("errors.c");
    std::fs::write(&source, ERRORS_C).unwrap();
    let ours = our_include();
    for name in [CUFILE_115, CUFILE_117, "ours"] {
        let include = if name == "ours" {
            ours.clone()
        } else {
            require!(nvidia_headers(name))
        };
        let exe = dir.path().join(format!("errors-{name}"));
        // NVIDIA's IS_CUFILE_ERR calls abs(): <stdlib.h> comes through cufile.h.
        compile("cc", &source, &[&include, &cuda], &[], Some(&exe))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let ran = Command::new(&exe).output().unwrap();
        assert!(ran.status.success(), "{name}");
        outputs.push((name, String::from_utf8(ran.stdout).unwrap()));
    }
    let (ours_name, ours_text) = outputs.pop().unwrap();
    for (name, text) in &outputs {
        let differ: Vec<String> = text
            .lines()
            .zip(ours_text.lines())
            .filter(|(a, b)| a != b)
            .map(|(a, b)| format!("{name}: {a}\n{ours_name}: {b}"))
            .take(10)
            .collect();
        assert!(differ.is_empty(), "{}", differ.join("\n"));
        assert_eq!(text.lines().count(), ours_text.lines().count());
    }
    // The table is not empty of meaning: a code and a non-code.
    assert!(ours_text.contains("\n5027 1 file descriptor is not registered |"));
    assert!(ours_text.contains("\n-5022 1 invalid arguments |"));
    assert!(ours_text.contains("\n4096 0 unknown cufile error |"));
}

/// A program that prints, for each value from 0 to 5052, `cufileop_status_error`'s text.
const TEXTS_C: &str = r#"
#include <cufile.h>
#include <stdio.h>
int main(void)
{
    for (int v = 0; v <= 5052; v++)
        printf("%d %s\n", v, cufileop_status_error((CUfileOpError)v));
    return 0;
}
"#;

/// The texts `TEXTS_C` prints when built against the `cufile.h` in `include`, by value.
fn header_texts(dir: &Path, name: &str, include: &Path, cuda: Option<&Path>) -> Vec<String> {
    let source = dir.join("texts.c");
    std::fs::write(&source, TEXTS_C).unwrap();
    let exe = dir.join(format!("texts-{name}"));
    let mut includes = vec![include];
    includes.extend(cuda);
    compile("cc", &source, &includes, &[], Some(&exe)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let ran = Command::new(&exe).output().unwrap();
    assert!(ran.status.success(), "{name}");
    String::from_utf8(ran.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// What the table says `cufileop_status_error` gives for each value from 0 to 5052.
fn table_texts() -> Vec<String> {
    (0..=5052)
        .map(|v| {
            let text = row(v)
                .and_then(|r| r.cufile)
                .map_or(CUFILE_UNKNOWN, |e| e.text);
            format!("{v} {}", text.to_str().unwrap())
        })
        .collect()
}

/// The lines where `got` (from `name`'s header) and the table differ, at most ten.
fn differences(name: &str, got: &[String], want: &[String]) -> Vec<String> {
    let mut differ: Vec<String> = got
        .iter()
        .zip(want)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("{name}: {a}\ntable: {b}"))
        .take(10)
        .collect();
    if got.len() != want.len() {
        differ.push(format!("{name}: {} lines, table {}", got.len(), want.len()));
    }
    differ
}

#[test]
fn the_code_table_has_the_texts_of_our_header() {
    require!(has_command("cc"));
    let dir = TempDir::new("cufile-table-ours");
    let ours = header_texts(dir.path(), "ours", &our_include(), None);
    let differ = differences("ours", &ours, &table_texts());
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

#[test]
fn the_code_table_has_nvidias_texts() {
    require!(has_command("cc"));
    let cuda = require!(nvidia_headers(CUDA));
    let dir = TempDir::new("cufile-table-nvidia");
    let want = table_texts();
    for name in [CUFILE_115, CUFILE_117] {
        let include = require!(nvidia_headers(name));
        let got = header_texts(dir.path(), name, &include, Some(&cuda));
        let differ = differences(name, &got, &want);
        assert!(differ.is_empty(), "{}", differ.join("\n"));
    }
}
