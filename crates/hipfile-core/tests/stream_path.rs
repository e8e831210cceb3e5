//! Which data path takes a stream-ordered request (`hipfile_core::stream_path`): the selected
//! backend's, chosen by the same scores as `submit`, and none for host memory or when no
//! backend accepts the request (the engine then serves or fails it through `submit`).

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile_core::stream::{JobHandle, StreamRequest, StreamTarget};
use hipfile_core::{
    Backend, BackendError, BackendKind, IoTarget, MemoryKind, Op, Reason, StreamOrderedIo,
    Submission, Verdict, stream_path,
};
use hipfile_testkit::fixtures::{SubmitFixture, device_buffer, request, unusable_file};

/// A backend with a fixed verdict, and a stream-ordered path or not.
struct Fixed {
    kind: BackendKind,
    verdict: Verdict,
    on_stream: bool,
}

impl Backend for Fixed {
    fn kind(&self) -> BackendKind {
        self.kind
    }

    fn score(&self, _: &Submission<'_>) -> Verdict {
        self.verdict.clone()
    }

    fn io(&self, _: &Submission<'_>, _: &IoTarget<'_>) -> Result<u64, BackendError> {
        Err(BackendError::Unsupported("not served in this test".into()))
    }

    fn on_stream(&self) -> Option<&dyn StreamOrderedIo> {
        self.on_stream.then_some(self as &dyn StreamOrderedIo)
    }
}

impl StreamOrderedIo for Fixed {
    unsafe fn queue_on_stream(
        &self,
        _: &Submission<'_>,
        _: StreamTarget<'_>,
        _: StreamRequest,
    ) -> JobHandle {
        unreachable!("stream_path only chooses; nothing is queued in this test")
    }
}

const FAST: Verdict = Verdict::Accept(100);
const SLOW: Verdict = Verdict::Accept(1);

fn fixture(memory: MemoryKind) -> SubmitFixture {
    let mut buffer = device_buffer(0x10_0000, 1 << 20);
    buffer.memory = memory;
    SubmitFixture::new(unusable_file(), buffer, request(Op::Read, 4096, 0, 0))
}

/// The kind of the backend whose path `stream_path` gives, if any.
fn chosen(f: &SubmitFixture, backends: &[&Fixed]) -> Option<BackendKind> {
    let dyns: Vec<&dyn Backend> = backends.iter().map(|b| *b as &dyn Backend).collect();
    let path = stream_path(&dyns, &f.submission())?;
    let at = path as *const dyn StreamOrderedIo as *const ();
    backends
        .iter()
        .find(|b| std::ptr::eq(at, std::ptr::from_ref::<Fixed>(b).cast::<()>()))
        .map(|b| b.kind)
}

#[test]
fn the_selected_backends_path_takes_device_and_managed_memory() {
    let fast = Fixed {
        kind: BackendKind::Fastpath,
        verdict: Verdict::Reject(vec![Reason::RuntimeLacksAmdFileIo]),
        on_stream: false,
    };
    let slow = Fixed {
        kind: BackendKind::Fallback,
        verdict: SLOW,
        on_stream: true,
    };
    for memory in [MemoryKind::Device, MemoryKind::Managed] {
        assert_eq!(
            chosen(&fixture(memory), &[&fast, &slow]),
            Some(BackendKind::Fallback),
            "{memory:?}"
        );
    }
}

#[test]
fn a_selected_backend_without_a_path_leaves_the_request_to_the_engine() {
    // The fastpath wins on score and has no stream-ordered path: the fallback's path is not
    // taken behind its back.
    let fast = Fixed {
        kind: BackendKind::Fastpath,
        verdict: FAST,
        on_stream: false,
    };
    let slow = Fixed {
        kind: BackendKind::Fallback,
        verdict: SLOW,
        on_stream: true,
    };
    assert_eq!(chosen(&fixture(MemoryKind::Device), &[&fast, &slow]), None);
}

#[test]
fn host_memory_and_refused_requests_take_no_path() {
    let slow = Fixed {
        kind: BackendKind::Fallback,
        verdict: SLOW,
        on_stream: true,
    };
    assert_eq!(chosen(&fixture(MemoryKind::Host), &[&slow]), None);
    let refusing = Fixed {
        kind: BackendKind::Fallback,
        verdict: Verdict::Reject(vec![Reason::CompatModeDisallowed]),
        on_stream: true,
    };
    assert_eq!(chosen(&fixture(MemoryKind::Device), &[&refusing]), None);
}
