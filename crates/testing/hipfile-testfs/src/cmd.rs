//! Running the system tools the fixtures need, with their stderr in every failure.

use std::ffi::OsStr;
use std::process::Command;

/// What a finished command printed.
pub(crate) struct Output {
    pub(crate) success: bool,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    /// The command line, for messages.
    pub(crate) line: String,
}

/// Runs `program args...` to completion.
///
/// # Panics
///
/// When the program cannot be started at all (callers check [`crate::host::has_command`] first).
pub(crate) fn run<I, S>(program: &str, args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<S> = args.into_iter().collect();
    let line = std::iter::once(program.to_owned())
        .chain(
            args.iter()
                .map(|a| a.as_ref().to_string_lossy().into_owned()),
        )
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new(program)
        .args(&args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{line}`: {e}"));
    Output {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        line: format!("`{line}` ({})", out.status),
    }
}

/// Runs `program args...` and returns its stdout.
///
/// # Panics
///
/// When it cannot be started or exits unsuccessfully: the capability checks passed, so the
/// command should have worked.
pub(crate) fn run_ok<I, S>(program: &str, args: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = run(program, args);
    if !out.success {
        panic!("{} failed: {}", out.line, out.stderr.trim());
    }
    out.stdout
}
