//! `hipfile`, the command-line tool of hipfile. Its one command, `hipfile check`, explains
//! for each file which backend would serve a given request (the fastpath or the fallback)
//! and every reason a backend refuses, as a table or as JSON lines. It opens files only to
//! look at them: it never creates, truncates or writes one. Its decisions are the library's
//! (`hipfile::explain`); the tool adds only argument parsing and output.

#![forbid(unsafe_code)]

mod args;
mod check;
mod json;
mod report;

use args::Command;
use std::process::ExitCode;

fn main() -> ExitCode {
    let status = match args::parse(std::env::args_os().skip(1)) {
        Ok(Command::Help) => print(args::MAIN_HELP),
        Ok(Command::CheckHelp) => print(args::CHECK_HELP),
        Ok(Command::Version) => print(&format!("hipfile {}\n", env!("CARGO_PKG_VERSION"))),
        Ok(Command::Check(a)) => check::run(&a),
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
