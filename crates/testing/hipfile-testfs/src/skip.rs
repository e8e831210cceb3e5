//! Skipping a test that the machine cannot run: [`Skip`], the [`require!`](crate::require)
//! macro, and `HIPFILE_TEST_STRICT=1`, which turns every skip into a failure.

use std::fmt;
use std::io::Write as _;

/// Why a test cannot run on this machine: a missing capability, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip(pub String);

impl fmt::Display for Skip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether skips are failures: `HIPFILE_TEST_STRICT=1` in the environment.
pub fn strict() -> bool {
    // The workspace reads the environment in one library module only; this is test-fixture
    // code, and the strictness switch has to come from the environment of `cargo test`.
    #[allow(clippy::disallowed_methods)]
    let value = std::env::var_os("HIPFILE_TEST_STRICT");
    value.is_some_and(|v| v == "1")
}

/// Unwraps a `Result<T, Skip>` inside a test returning `()`: `Ok(v)` gives `v`; `Err(skip)`
/// prints `SKIP <test>: <reason>` and returns from the test, or panics when [`strict`] is on.
#[macro_export]
macro_rules! require {
    ($capability:expr) => {
        match $capability {
            ::core::result::Result::Ok(value) => value,
            ::core::result::Result::Err(skip) => {
                $crate::skipped(skip, ::core::module_path!());
                return;
            }
        }
    };
}

/// What [`require!`] does with a [`Skip`]: panic when [`strict`], otherwise say so on stderr.
#[doc(hidden)]
pub fn skipped(skip: Skip, module: &str) {
    if strict() {
        panic!("required capability missing: {skip}");
    }
    let thread = std::thread::current();
    // libtest names each test's thread after the test; with one test thread it runs on `main`.
    let test = thread.name().filter(|n| *n != "main").unwrap_or(module);
    // Written to the stderr handle, not with `eprintln!`, which the test harness captures:
    // a skip must show in the output of a passing run.
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {skip}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn require_returns_the_value_or_returns_from_the_test() {
        fn body(reached: &mut bool, r: Result<u32, Skip>) {
            let v = require!(r);
            assert_eq!(v, 7);
            *reached = true;
        }
        let mut reached = false;
        body(&mut reached, Ok(7));
        assert!(reached);
        if !strict() {
            let mut reached = false;
            body(&mut reached, Err(Skip("no such capability".into())));
            assert!(!reached);
        }
    }
}
