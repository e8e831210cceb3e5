//! `hipfile`, the command-line tool of hipfile.
//!
//! - `hipfile check` explains for each file which backend would serve a given request (the
//!   fastpath or the fallback) and every reason a backend refuses, as a table or as JSON
//!   lines. It opens files only to look at them: it never creates, truncates or writes one.
//!   Its decisions are the library's (`hipfile::explain`, and what the library refuses
//!   before any backend is asked: no runtime, no device, a file it will not register).
//! - `hipfile cp` copies a file through one GPU buffer with the library's reads and writes,
//!   and reports how many bytes each backend moved.
//! - `hipfile bench` times whole-file reads or writes through GPU buffers, with the raw
//!   bandwidths and latencies they compare against measured in the same run.
//!
//! The tool adds argument parsing, output and, for `cp` and `bench`, the I/O loops; every
//! I/O decision is the library's.

#![forbid(unsafe_code)]

mod args;
mod bench;
mod check;
mod cp;
mod json;
mod report;
mod runtime;

use args::Command;
use std::process::ExitCode;

fn main() -> ExitCode {
    let status = match args::parse(std::env::args_os().skip(1)) {
        Ok(Command::Help) => print(args::MAIN_HELP),
        Ok(Command::CheckHelp) => print(args::CHECK_HELP),
        Ok(Command::Version) => print(&format!("hipfile {}\n", env!("CARGO_PKG_VERSION"))),
        Ok(Command::Check(a)) => check::run(&a),
        Ok(Command::CpHelp) => print(args::CP_HELP),
        Ok(Command::Cp(a)) => cp::run(&a),
        Ok(Command::BenchHelp) => print(args::BENCH_HELP),
        Ok(Command::Bench(a)) => bench::run(&a),
        Err(e) => {
            eprintln!("hipfile: {e}");
            check::EXIT_ERROR
        }
    };
    ExitCode::from(status)
}

fn print(text: &str) -> u8 {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => check::EXIT_SERVED,
        Err(_) => check::EXIT_ERROR,
    }
}
