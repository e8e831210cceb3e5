//! How the tool ends: a command's [`Failure`] (the error chain and the exit status), and
//! clap's answer to bad arguments ([`usage_error`]). Every command returns the one and
//! `main` prints it once.

use std::ffi::OsString;

/// The exit status of bad arguments, as clap's own.
pub const EXIT_USAGE: u8 = 2;

/// An error that ends the program: what went wrong, as a chain, and the exit status.
#[derive(Debug)]
pub struct Failure {
    /// The status `main` exits with.
    pub status: u8,
    /// What went wrong, printed by `main` with its causes; `None` when there is nothing to
    /// tell.
    pub error: Option<anyhow::Error>,
}

impl Failure {
    /// A failure that exits with `status`.
    pub fn new(status: u8, error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            status,
            error: Some(error.into()),
        }
    }

    /// A failure that exits with `status`, from a message.
    pub fn msg(status: u8, message: impl std::fmt::Display) -> Failure {
        Failure::new(status, anyhow::anyhow!("{message}"))
    }

    /// A failed write of the output. A closed pipe (`hipfile check ... | head`) is the
    /// reader's choice, not news: the status says it and nothing is printed.
    pub fn output(status: u8, e: std::io::Error) -> Failure {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Failure {
                status,
                error: None,
            };
        }
        Failure::new(
            status,
            anyhow::Error::new(e).context("cannot write the output"),
        )
    }
}

/// Prints clap's answer (help and the version on stdout, errors on stderr) and returns the
/// exit status. An error also names the help of the command it is about, so that the way on
/// is one copy and paste away.
pub fn usage_error(e: &clap::Error, args: &[OsString]) -> u8 {
    if e.print().is_err() {
        return EXIT_USAGE;
    }
    if !e.use_stderr() {
        return 0;
    }
    let command = args
        .iter()
        .skip(1)
        .find_map(|a| match a.to_str() {
            Some(name @ ("check" | "cp" | "bench" | "load" | "checkpoint" | "stats")) => Some(name),
            _ => None,
        })
        .map_or_else(
            || "hipfile --help".to_owned(),
            |c| format!("hipfile {c} --help"),
        );
    eprintln!("Run '{command}' for usage.");
    EXIT_USAGE
}
