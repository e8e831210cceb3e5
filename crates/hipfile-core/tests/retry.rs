//! The retry rules of docs/BEHAVIOUR.md §1.9 against mocked backends: which errors are retried,
//! when the fallback may take over, and how a broken byte count is reported.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile_core::{
    Backend, BackendError, BackendKind, Error, IoTarget, Op, Reason, Submission, Verdict,
};
use hipfile_testkit::fixtures::{SubmitFixture, device_buffer, request, unusable_file};
use mockall::mock;

mock! {
    Be {}
    impl Backend for Be {
        fn kind(&self) -> BackendKind;
        fn score<'a>(&self, s: &Submission<'a>) -> Verdict;
        fn io<'a, 'b>(&self, s: &Submission<'a>, target: &IoTarget<'b>) -> Result<u64, BackendError>;
    }
}

fn backend(kind: BackendKind, verdict: Verdict, io: Option<Result<u64, BackendError>>) -> MockBe {
    let mut b = MockBe::new();
    b.expect_kind().return_const(kind);
    b.expect_score().return_const(verdict);
    match io {
        Some(r) => {
            b.expect_io().times(1).return_once(move |_, _| r);
        }
        None => {
            b.expect_io().never();
        }
    }
    b
}

fn os(errno: i32) -> BackendError {
    BackendError::Os {
        call: "hipAmdFileRead",
        errno,
    }
}

/// A 4096-byte read at 0 of a file only the fallback could serve, into 1 MiB of device
/// memory.
fn fixture() -> SubmitFixture {
    SubmitFixture::new(
        unusable_file(),
        device_buffer(0x10_0000, 1 << 20),
        request(Op::Read, 4096, 0, 0),
    )
}

const FAST: Verdict = Verdict::Accept(100);
const SLOW: Verdict = Verdict::Accept(1);

#[test]
fn enodev_and_eremoteio_are_retried_on_the_fallback() {
    for errno in [libc::ENODEV, libc::EREMOTEIO] {
        let f = fixture();
        let fast = backend(BackendKind::Fastpath, FAST, Some(Err(os(errno))));
        let slow = backend(BackendKind::Fallback, SLOW, Some(Ok(4096)));
        let out = f.submit(&[&fast, &slow]).unwrap();
        assert_eq!(
            (out.bytes, out.backend, out.retried),
            (4096, BackendKind::Fallback, true)
        );
    }
}

#[test]
fn every_other_errno_fails_at_once() {
    for errno in 1..=133 {
        if errno == libc::ENODEV || errno == libc::EREMOTEIO {
            continue;
        }
        let f = fixture();
        let fast = backend(BackendKind::Fastpath, FAST, Some(Err(os(errno))));
        let slow = backend(BackendKind::Fallback, SLOW, None);
        let e = f.submit(&[&fast, &slow]).unwrap_err();
        assert_eq!(e.errno(), Some(errno), "errno {errno}: {e}");
        assert!(matches!(
            e,
            Error::Backend {
                backend: BackendKind::Fastpath,
                retried_from: None,
                ..
            }
        ));
    }
}

#[test]
fn runtime_errors_fail_at_once() {
    let f = fixture();
    let err = BackendError::Runtime(hipfile_core::RuntimeError::new(
        "hipAmdFileRead",
        100,
        "no device",
    ));
    let fast = backend(BackendKind::Fastpath, FAST, Some(Err(err)));
    let slow = backend(BackendKind::Fallback, SLOW, None);
    let e = f.submit(&[&fast, &slow]).unwrap_err();
    assert_eq!(e.hip_error(), Some(100));
}

#[test]
fn no_retry_when_the_fallback_refuses() {
    // HIPFILE_ALLOW_COMPAT_MODE=false: the fallback refuses, so ENODEV is final.
    let f = fixture();
    let fast = backend(BackendKind::Fastpath, FAST, Some(Err(os(libc::ENODEV))));
    let slow = backend(
        BackendKind::Fallback,
        Verdict::Reject(vec![Reason::CompatModeDisallowed]),
        None,
    );
    let e = f.submit(&[&fast, &slow]).unwrap_err();
    assert_eq!(e.errno(), Some(libc::ENODEV));
    match &e {
        Error::Backend {
            retry_refused: Some(r),
            ..
        } => assert_eq!(r, &vec![Reason::CompatModeDisallowed]),
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("compat_mode_disallowed"), "{e}");
}

#[test]
fn a_fallback_failure_is_never_retried() {
    for errno in [libc::ENODEV, libc::EREMOTEIO, libc::EIO] {
        let f = fixture();
        let fast = backend(
            BackendKind::Fastpath,
            Verdict::Reject(vec![Reason::ForceCompatMode]),
            None,
        );
        let slow = backend(BackendKind::Fallback, SLOW, Some(Err(os(errno))));
        let e = f.submit(&[&fast, &slow]).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Backend {
                    backend: BackendKind::Fallback,
                    retried_from: None,
                    ..
                }
            ),
            "{e:?}"
        );
    }
}

#[test]
fn a_failed_retry_reports_both_failures() {
    let f = fixture();
    let fast = backend(BackendKind::Fastpath, FAST, Some(Err(os(libc::EREMOTEIO))));
    let slow = backend(BackendKind::Fallback, SLOW, Some(Err(os(libc::EIO))));
    let e = f.submit(&[&fast, &slow]).unwrap_err();
    assert_eq!(e.errno(), Some(libc::EIO));
    match &e {
        Error::Backend {
            backend: BackendKind::Fallback,
            retried_from: Some(first),
            ..
        } => {
            assert_eq!(first.errno(), Some(libc::EREMOTEIO));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn force_compat_mode_never_touches_the_fastpath() {
    let f = fixture();
    let fast = backend(
        BackendKind::Fastpath,
        Verdict::Reject(vec![Reason::ForceCompatMode]),
        None,
    );
    let slow = backend(BackendKind::Fallback, SLOW, Some(Ok(10)));
    let out = f.submit(&[&fast, &slow]).unwrap();
    assert_eq!(
        (out.backend, out.retried, out.bytes),
        (BackendKind::Fallback, false, 10)
    );
}

#[test]
fn an_oversized_byte_count_is_an_internal_error_not_a_retry() {
    let f = fixture();
    let fast = backend(BackendKind::Fastpath, FAST, Some(Ok(u64::MAX)));
    let slow = backend(BackendKind::Fallback, SLOW, None);
    let e = f.submit(&[&fast, &slow]).unwrap_err();
    assert!(
        matches!(&e, Error::Internal(m) if m.contains(&u64::MAX.to_string())),
        "{e:?}"
    );
    let f = fixture();
    let fast = backend(
        BackendKind::Fastpath,
        Verdict::Reject(vec![Reason::NoODirectFd]),
        None,
    );
    let slow = backend(BackendKind::Fallback, SLOW, Some(Ok(u64::MAX)));
    assert!(matches!(f.submit(&[&fast, &slow]), Err(Error::Internal(_))));
}

#[test]
fn a_count_above_the_request_is_an_internal_error() {
    let f = fixture();
    let fast = backend(BackendKind::Fastpath, FAST, Some(Ok(4097)));
    let slow = backend(BackendKind::Fallback, SLOW, None);
    assert!(matches!(f.submit(&[&fast, &slow]), Err(Error::Internal(_))));
}

#[test]
fn a_short_count_is_returned_as_is() {
    let f = fixture();
    let fast = backend(BackendKind::Fastpath, FAST, Some(Ok(100)));
    let slow = backend(BackendKind::Fallback, SLOW, None);
    assert_eq!(f.submit(&[&fast, &slow]).unwrap().bytes, 100);
}

#[test]
fn all_refused_lists_every_backend() {
    let f = fixture();
    let fast = backend(
        BackendKind::Fastpath,
        Verdict::Reject(vec![Reason::ForceCompatMode]),
        None,
    );
    let slow = backend(
        BackendKind::Fallback,
        Verdict::Reject(vec![Reason::CompatModeDisallowed]),
        None,
    );
    let e = f.submit(&[&fast, &slow]).unwrap_err();
    match &e {
        Error::NoBackend {
            op: Op::Read,
            verdicts,
            config_leaves_none: true,
        } => {
            assert_eq!(verdicts.len(), 2);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn ties_go_to_the_first_registered() {
    let f = fixture();
    let a = backend(BackendKind::Fallback, Verdict::Accept(1), Some(Ok(1)));
    let b = backend(BackendKind::Fallback, Verdict::Accept(1), None);
    assert_eq!(f.submit(&[&a, &b]).unwrap().bytes, 1);
}
