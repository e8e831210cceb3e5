//! The retry rules through the real backends' scoring: the configuration decides whether a
//! fastpath failure may be retried on the fallback.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile::{BackendKind, Config, ConfigBuilder, Error, Op};
use hipfile_core::{Backend, BackendError, IoTarget, Submission, Verdict};
use hipfile_testkit::fixtures::{BASE, SubmitFixture, device_buffer, request, xfs_file};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A real backend's scoring with a scripted `io`.
struct Scripted<B> {
    inner: B,
    result: Result<u64, BackendError>,
    calls: AtomicUsize,
}

impl<B: Backend> Backend for Scripted<B> {
    fn kind(&self) -> BackendKind {
        self.inner.kind()
    }
    fn score(&self, s: &Submission<'_>) -> Verdict {
        self.inner.score(s)
    }
    fn io(&self, _: &Submission<'_>, _: &IoTarget<'_>) -> Result<u64, BackendError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.result.clone()
    }
}

fn scripted<B>(inner: B, result: Result<u64, BackendError>) -> Scripted<B> {
    Scripted {
        inner,
        result,
        calls: AtomicUsize::new(0),
    }
}

struct Run {
    fast_calls: usize,
    slow_calls: usize,
    result: Result<hipfile_core::IoOutcome, Error>,
}

fn run(config: &Config, fast_result: Result<u64, BackendError>) -> Run {
    let (fast, slow) = (
        hipfile_fastpath::Fastpath::new(config, true),
        hipfile_fallback::Fallback::new(config),
    );
    let fast = scripted(fast, fast_result);
    let slow = scripted(slow, Ok(8192));
    let f = SubmitFixture::new(
        xfs_file(),
        device_buffer(BASE, 8192),
        request(Op::Read, 8192, 4096, 0),
    );
    let list: [&dyn Backend; 2] = [&fast, &slow];
    let result = f.submit(&list);
    Run {
        fast_calls: fast.calls.load(Ordering::SeqCst),
        slow_calls: slow.calls.load(Ordering::SeqCst),
        result,
    }
}

fn errno(e: i32) -> Result<u64, BackendError> {
    Err(BackendError::Os {
        call: "hipAmdFileRead",
        errno: e,
    })
}

fn config(pairs: &[(&str, &str)]) -> Config {
    let pairs: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    ConfigBuilder::new()
        .build_with(|k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
        .0
}

#[test]
fn enodev_is_retried_by_default() {
    let r = run(&Config::default(), errno(libc::ENODEV));
    let out = r.result.unwrap();
    assert_eq!(
        (out.backend, out.retried, out.bytes),
        (BackendKind::Fallback, true, 8192)
    );
    assert_eq!((r.fast_calls, r.slow_calls), (1, 1));
}

#[test]
fn allow_compat_mode_false_turns_enodev_into_a_failure() {
    for spelling in ["false", "0", "no", "OFF"] {
        let r = run(
            &config(&[("HIPFILE_ALLOW_COMPAT_MODE", spelling)]),
            errno(libc::ENODEV),
        );
        let e = r.result.unwrap_err();
        assert_eq!(e.errno(), Some(libc::ENODEV), "{spelling}: {e}");
        assert_eq!((r.fast_calls, r.slow_calls), (1, 0));
        assert!(e.to_string().contains("compat_mode_disallowed"), "{e}");
    }
}

#[test]
fn eio_is_not_retried_even_when_allowed() {
    let r = run(&Config::default(), errno(libc::EIO));
    assert_eq!(r.result.unwrap_err().errno(), Some(libc::EIO));
    assert_eq!((r.fast_calls, r.slow_calls), (1, 0));
}

#[test]
fn force_compat_mode_serves_on_the_fallback_without_touching_the_fastpath() {
    let r = run(&config(&[("HIPFILE_FORCE_COMPAT_MODE", "yes")]), Ok(8192));
    let out = r.result.unwrap();
    assert_eq!((out.backend, out.retried), (BackendKind::Fallback, false));
    assert_eq!((r.fast_calls, r.slow_calls), (0, 1));
}

#[test]
fn force_without_allow_leaves_no_backend_and_says_so() {
    let r = run(
        &config(&[
            ("HIPFILE_FORCE_COMPAT_MODE", "true"),
            ("HIPFILE_ALLOW_COMPAT_MODE", "false"),
        ]),
        Ok(8192),
    );
    let e = r.result.unwrap_err();
    assert!(
        matches!(
            e,
            Error::NoBackend {
                config_leaves_none: true,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("leaves no backend"), "{e}");
    assert_eq!((r.fast_calls, r.slow_calls), (0, 0));
}
