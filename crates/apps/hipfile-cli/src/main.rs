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
//! - `hipfile load SHARD...` loads a safetensors checkpoint into GPU memory
//!   (`hipfile-safetensors`) and reports how fast, through which backend; `--verify`
//!   compares every tensor's CRC-32 in GPU memory with the file's.
//! - `hipfile checkpoint --out DIR` writes the benchmark checkpoint of docs/PERF.md (or a
//!   scaled copy) as safetensors files.
//! - `hipfile stats PID` shows the statistics a running process that uses hipfile publishes
//!   (`HIPFILE_STATS_LEVEL` >= 1).
//!
//! The tool adds argument parsing (clap: each command's arguments live in its module, the
//! command enum here), output and, for `cp` and `bench`, the I/O loops; every I/O decision is
//! the library's. Errors travel as [`failure::Failure`]s: an `anyhow` chain and the exit
//! status it ends the program with, printed once, here.

#![forbid(unsafe_code)]

mod bench;
mod check;
mod checkpoint;
mod cp;
mod failure;
mod load;
mod load_limits;
mod options;
mod report;
mod rss;
mod runtime;
mod stats;
mod tally;

use clap::{Parser, Subcommand};
use failure::usage_error;
use std::ffi::OsString;
use std::process::ExitCode;

/// hipfile: GPU direct storage tools
#[derive(Debug, Parser)]
#[command(
    name = "hipfile",
    version,
    subcommand_required = true,
    after_help = "Run 'hipfile check --help', 'hipfile cp --help', 'hipfile bench --help', \
                  'hipfile load --help', 'hipfile checkpoint --help' or 'hipfile stats --help' \
                  (or 'hipfile help COMMAND') for the options of each command."
)]
pub struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands. Their help comes from their argument structs: a doc comment here would
/// replace each one's long help with its one-line summary.
#[derive(Debug, Subcommand)]
#[allow(missing_docs)]
pub enum Command {
    Check(check::CheckArgs),
    Cp(cp::CpArgs),
    Bench(bench::BenchArgs),
    Load(load::LoadArgs),
    Checkpoint(checkpoint::CheckpointArgs),
    Stats(stats::StatsArgs),
}

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => return ExitCode::from(usage_error(&e, &args)),
    };
    let result = match &cli.command {
        Command::Check(a) => check::run(a),
        Command::Cp(a) => cp::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Load(a) => load::run(a),
        Command::Checkpoint(a) => checkpoint::run(a),
        Command::Stats(a) => stats::run(a),
    };
    match result {
        Ok(status) => ExitCode::from(status),
        Err(failure) => {
            if let Some(e) = &failure.error {
                eprintln!("hipfile: {e:#}");
            }
            ExitCode::from(failure.status)
        }
    }
}

/// Parsing helpers that the commands' own tests share.
#[cfg(test)]
pub mod tests {
    use super::*;

    /// Parses `args` (without the program's name).
    pub fn parse(args: &[&str]) -> Result<Command, clap::Error> {
        Cli::try_parse_from(std::iter::once("hipfile").chain(args.iter().copied()))
            .map(|c| c.command)
    }

    /// The error `args` are refused with, rendered.
    pub fn error(args: &[&str]) -> String {
        match parse(args) {
            Err(e) => e.render().to_string(),
            Ok(c) => panic!("{args:?} parsed as {c:?}"),
        }
    }

    #[test]
    fn the_command_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn help_and_version_are_not_errors() {
        for args in [
            &["--help"][..],
            &["-h"],
            &["help"],
            &["help", "check"],
            &["check", "--help"],
            &["check", "x", "-h"],
            &["cp", "--help"],
            &["bench", "--help"],
            &["load", "--help"],
            &["checkpoint", "--help"],
            &["stats", "--help"],
        ] {
            let e = parse(args).expect_err("help");
            assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp, "{args:?}");
            assert!(!e.use_stderr(), "{args:?}");
        }
        let e = parse(&["--version"]).expect_err("version");
        assert_eq!(e.kind(), clap::error::ErrorKind::DisplayVersion);
        let e = parse(&["-V"]).expect_err("version");
        assert_eq!(e.kind(), clap::error::ErrorKind::DisplayVersion);
    }

    #[test]
    fn a_command_is_required_and_must_be_known() {
        let e = error(&[]);
        assert!(e.contains("subcommand"), "{e}");
        let e = error(&["chek"]);
        assert!(e.contains("'chek'"), "{e}");
    }
}
