//! [`Tally`]: the bytes each backend moved, and the requests retried, counted from the
//! library's outcomes. `cp` reports it for its reads and its writes, `bench` for its runs.

use hipfile::{BackendKind, IoOutcome};
use serde::Serialize;

/// Bytes moved by each backend, and requests the library retried on the fallback.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    /// Bytes the fastpath moved.
    pub fastpath_bytes: u64,
    /// Bytes the fallback moved.
    pub fallback_bytes: u64,
    /// Requests that failed on the fastpath and were served by the fallback.
    pub retries: u64,
    /// Bytes read from object storage or an HTTP(S) server (`cp URL DST`); not in the JSON
    /// where 0, which a local copy's always is.
    #[serde(skip_serializing_if = "is_zero")]
    pub remote_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Tally {
    /// Counts one outcome.
    pub fn count(&mut self, outcome: &IoOutcome) {
        self.count_bytes(outcome, outcome.bytes);
    }

    /// Counts one outcome as `bytes` of data (fewer than it moved when the rest was padding).
    pub fn count_bytes(&mut self, outcome: &IoOutcome, bytes: u64) {
        self.record(outcome.backend, bytes, outcome.retried);
    }

    fn record(&mut self, backend: BackendKind, bytes: u64, retried: bool) {
        match backend {
            BackendKind::Fastpath => self.fastpath_bytes += bytes,
            BackendKind::Fallback => self.fallback_bytes += bytes,
        }
        if retried {
            self.retries += 1;
        }
    }

    /// Adds another tally, of other requests.
    pub fn add(&mut self, other: Tally) {
        self.fastpath_bytes += other.fastpath_bytes;
        self.fallback_bytes += other.fallback_bytes;
        self.retries += other.retries;
        self.remote_bytes += other.remote_bytes;
    }

    /// One line: `fastpath N, fallback N, retries N` (`remote N` first where remote bytes
    /// were counted).
    pub fn text(self) -> String {
        let local = format!(
            "fastpath {}, fallback {}, retries {}",
            self.fastpath_bytes, self.fallback_bytes, self.retries
        );
        if self.remote_bytes > 0 {
            format!("remote {}, {local}", self.remote_bytes)
        } else {
            local
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_backend_and_the_retries() {
        let mut t = Tally::default();
        t.record(BackendKind::Fastpath, 10, false);
        t.record(BackendKind::Fallback, 5, true);
        assert_eq!((t.fastpath_bytes, t.fallback_bytes, t.retries), (10, 5, 1));
        let mut u = t;
        u.add(t);
        assert_eq!((u.fastpath_bytes, u.fallback_bytes, u.retries), (20, 10, 2));
        assert_eq!(
            serde_json::to_string(&t).ok().as_deref(),
            Some(r#"{"fastpath_bytes":10,"fallback_bytes":5,"retries":1}"#)
        );
        t.remote_bytes = 7;
        assert_eq!(t.text(), "remote 7, fastpath 10, fallback 5, retries 1");
        assert!(
            serde_json::to_string(&t)
                .unwrap()
                .ends_with(r#""remote_bytes":7}"#)
        );
    }
}
