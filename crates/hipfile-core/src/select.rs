//! Selection by score and the retry rules (docs/BEHAVIOUR.md §1).

use crate::backend::{Backend, BackendError, IoTarget, StreamOrderedIo, Submission};
use crate::error::Error;
pub use crate::outcome::IoOutcome;
use crate::reason::{BackendKind, Verdict};

/// Every backend's verdict on one request, and the winner.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decision {
    /// Each backend with its verdict, in registration order.
    pub verdicts: Vec<(BackendKind, Verdict)>,
    /// Index into `verdicts` of the backend that serves: the highest score, the first
    /// registered on a tie; `None` when every backend refused.
    pub selected: Option<usize>,
}

impl Decision {
    /// The selected backend's kind.
    pub fn selected_kind(&self) -> Option<BackendKind> {
        self.selected.map(|i| self.verdicts[i].0)
    }

    /// The verdict of `kind`, if such a backend took part.
    pub fn verdict(&self, kind: BackendKind) -> Option<&Verdict> {
        self.verdicts
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, v)| v)
    }
}

/// Asks every backend for its score and picks the winner.
pub fn decide(backends: &[&dyn Backend], s: &Submission<'_>) -> Decision {
    let verdicts: Vec<(BackendKind, Verdict)> =
        backends.iter().map(|b| (b.kind(), b.score(s))).collect();
    let mut selected: Option<usize> = None;
    for (i, (_, v)) in verdicts.iter().enumerate() {
        if v.accepted() && selected.is_none_or(|j| v.score() > verdicts[j].1.score()) {
            selected = Some(i);
        }
    }
    Decision { verdicts, selected }
}

/// Selects a backend, runs the request on it, and applies the retry rules:
///
/// - a fastpath failure with `ENODEV` or `EREMOTEIO` is retried once on the fallback, if the
///   fallback accepts the same request;
/// - every other failure, and any failure of the fallback, fails the request at once.
///
/// # Errors
///
/// [`Error::NoBackend`] when every backend refuses (with each one's reasons),
/// [`Error::Backend`] when the serving backend fails, [`Error::Internal`] when a backend
/// reports a byte count larger than the request.
pub fn submit(
    backends: &[&dyn Backend],
    s: &Submission<'_>,
    target: &IoTarget<'_>,
) -> Result<IoOutcome, Error> {
    let op = s.request.op();
    let decision = decide(backends, s);
    let Some(first) = decision.selected else {
        return Err(Error::NoBackend {
            op,
            verdicts: decision
                .verdicts
                .iter()
                .map(|(k, v)| (*k, v.reasons().to_vec()))
                .collect(),
            config_leaves_none: leaves_none(&decision),
        });
    };
    let backend = backends[first];
    let err = match run(backend, s, target) {
        Ok(result) => {
            return result.map(|bytes| IoOutcome {
                bytes,
                backend: backend.kind(),
                retried: false,
            });
        }
        Err(e) => e,
    };
    if backend.kind() != BackendKind::Fastpath || !err.is_retryable() {
        return Err(Error::Backend {
            op,
            backend: backend.kind(),
            source: err,
            retried_from: None,
            retry_refused: None,
        });
    }
    let fallback = decision
        .verdicts
        .iter()
        .enumerate()
        .filter(|(_, (k, _))| *k == BackendKind::Fallback)
        .max_by_key(|(i, (_, v))| (v.score(), std::cmp::Reverse(*i)));
    match fallback {
        Some((i, (_, v))) if v.accepted() => {
            let retry = backends[i];
            match run(retry, s, target) {
                Ok(result) => result.map(|bytes| IoOutcome {
                    bytes,
                    backend: retry.kind(),
                    retried: true,
                }),
                Err(e) => Err(Error::Backend {
                    op,
                    backend: retry.kind(),
                    source: e,
                    retried_from: Some(Box::new(err)),
                    retry_refused: None,
                }),
            }
        }
        other => Err(Error::Backend {
            op,
            backend: backend.kind(),
            source: err,
            retried_from: None,
            retry_refused: Some(
                other
                    .map(|(_, (_, v))| v.reasons().to_vec())
                    .unwrap_or_default(),
            ),
        }),
    }
}

/// Runs one backend; the outer error is the backend's failure, the inner result checks the
/// byte count it reported.
fn run(
    backend: &dyn Backend,
    s: &Submission<'_>,
    target: &IoTarget<'_>,
) -> Result<Result<u64, Error>, BackendError> {
    let n = backend.io(s, target)?;
    Ok(if n <= s.request.size() {
        Ok(n)
    } else {
        Err(Error::Internal(format!(
            "the {} returned {n} bytes for a request of {}",
            backend.kind(),
            s.request.size()
        )))
    })
}

fn leaves_none(d: &Decision) -> bool {
    use crate::reason::Reason;
    let has = |k: BackendKind, r: Reason| d.verdict(k).is_some_and(|v| v.reasons().contains(&r));
    has(BackendKind::Fastpath, Reason::ForceCompatMode)
        && has(BackendKind::Fallback, Reason::CompatModeDisallowed)
}

/// The stream-ordered data path that serves `s`, decided as [`submit`] decides: the selected
/// backend's ([`Backend::on_stream`]), when it has one and the buffer is not host memory
/// (which has nothing to copy on the stream). `None` when the request is served when the
/// stream reaches it, by `submit` (whose selection and retry rules then apply), including
/// when no backend accepts it (it then fails with the error a synchronous call gives).
pub fn stream_path<'b>(
    backends: &[&'b dyn Backend],
    s: &Submission<'_>,
) -> Option<&'b dyn StreamOrderedIo> {
    if s.request.memory().is_host() {
        return None;
    }
    let selected = decide(backends, s).selected?;
    backends.get(selected)?.on_stream()
}
