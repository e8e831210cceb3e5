//! `hipfile bench --url URL`: an object read whole into GPU memory by ranged GETs
//! (`hipfile-remote`), each run timed; with `--limits`, the same object read into host memory
//! with the same GETs in the same process, the figure the GPU reads are held against.

use super::args::{Api, BenchArgs};
use super::common::{gbps, spread};
use hipfile::Op;
use hipfile_remote::{RemoteFile, RemoteSettings};
use serde::Serialize;
use std::time::Instant;

/// What a remote bench measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RemoteReport {
    /// The object.
    pub url: String,
    /// Its size.
    pub bytes: u64,
    /// Bytes per GET.
    pub request_size: u64,
    /// GETs in flight.
    pub in_flight: u32,
    /// GB/s of each run into GPU memory.
    pub runs: Vec<f64>,
    /// GB/s of each run into host memory, with `--limits`.
    pub limit_runs: Vec<f64>,
}

impl RemoteReport {
    /// The median of the runs over the median of the limit's, where both were measured.
    pub fn ratio(&self) -> Option<f64> {
        let limit = spread(&self.limit_runs).0;
        (limit > 0.0).then(|| spread(&self.runs).0 / limit)
    }

    /// The report as text.
    pub fn text(&self) -> String {
        let (median, min, max) = spread(&self.runs);
        let mut out = format!(
            "remote read of {} ({} bytes, {} B GETs, {} in flight)\n  into GPU memory:  \
             median {median:.3} GB/s (min {min:.3}, max {max:.3}, {} runs)\n",
            self.url,
            self.bytes,
            self.request_size,
            self.in_flight,
            self.runs.len()
        );
        if !self.limit_runs.is_empty() {
            let (median, min, max) = spread(&self.limit_runs);
            out.push_str(&format!(
                "  into host memory: median {median:.3} GB/s (min {min:.3}, max {max:.3}), the limit\n"
            ));
            if let Some(r) = self.ratio() {
                out.push_str(&format!("  GPU / limit: {r:.3}\n"));
            }
        }
        out
    }

    /// The report as one JSON object: the fields, with `gbps`, `limit_gbps` and `ratio`.
    pub fn to_json(&self) -> String {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("gbps".into(), spread(&self.runs).0.into());
            if !self.limit_runs.is_empty() {
                o.insert("limit_gbps".into(), spread(&self.limit_runs).0.into());
            }
            if let Some(r) = self.ratio() {
                o.insert("ratio".into(), r.into());
            }
        }
        v.to_string()
    }
}

/// The arguments a remote bench cannot honour, in words; `None` when they fit.
pub fn refused(args: &BenchArgs) -> Option<String> {
    if args.op != Op::Read {
        return Some("--url reads an object: --op write is not supported there".into());
    }
    if args.api != Api::Sync
        || args.queue_depth > 1
        || args.threads > 1
        || args.request_threads.is_some()
    {
        return Some(
            "--url runs its own ranged GETs: use --in-flight and --request-size instead of \
             --api, --queue-depth, --threads and --request-threads"
                .into(),
        );
    }
    None
}

/// Measures `url` as `args` say.
pub fn measure(args: &BenchArgs, url: &str) -> Result<RemoteReport, String> {
    let settings = crate::runtime::settings(args.runtime)?;
    let driver = crate::runtime::open_driver(settings, args.runtime)?;
    let remote = RemoteSettings {
        request_size: usize::try_from(args.request_size)
            .map_err(|_| format!("--request-size {} is too large", args.request_size))?,
        concurrency: args.in_flight as usize,
        ..RemoteSettings::default()
    };
    let object = RemoteFile::open(&driver, url, remote).map_err(|e| format!("cannot open {e}"))?;
    let len = usize::try_from(object.size())
        .map_err(|_| format!("{url} has {} bytes, more than memory", object.size()))?;
    if len == 0 {
        return Err(format!("{url} is empty: there is nothing to time"));
    }
    let mut gpu = driver
        .alloc(len)
        .map_err(|e| format!("cannot allocate {len} bytes of GPU memory: {e}"))?;
    let mut runs = Vec::new();
    for _ in 0..args.runs {
        let view = gpu.slice_mut(..).map_err(|e| e.to_string())?;
        let start = Instant::now();
        let n = object
            .read(view, 0)
            .map_err(|e| format!("cannot read {e}"))?;
        runs.push(gbps(n, start.elapsed().as_secs_f64()));
    }
    let mut limit_runs = Vec::new();
    if args.limits {
        let mut host = vec![0u8; len];
        for _ in 0..args.runs {
            let start = Instant::now();
            let n = object
                .read_to_host(&mut host, 0)
                .map_err(|e| format!("cannot read {e}"))?;
            limit_runs.push(gbps(n, start.elapsed().as_secs_f64()));
        }
    }
    Ok(RemoteReport {
        url: url.to_owned(),
        bytes: object.size(),
        request_size: args.request_size,
        in_flight: args.in_flight,
        runs,
        limit_runs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_text_json_and_ratio() {
        let r = RemoteReport {
            url: "s3://b/k".into(),
            bytes: 100,
            request_size: 8 << 20,
            in_flight: 16,
            runs: vec![1.0, 2.0, 3.0],
            limit_runs: vec![4.0, 4.0, 4.0],
        };
        assert_eq!(r.ratio(), Some(0.5));
        assert!(r.text().contains("median 2.000 GB/s"), "{}", r.text());
        assert!(r.text().contains("GPU / limit: 0.500"), "{}", r.text());
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(v["gbps"], 2.0);
        assert_eq!(v["limit_gbps"], 4.0);
        assert_eq!(v["ratio"], 0.5);
        let bare = RemoteReport {
            limit_runs: vec![],
            ..r
        };
        assert_eq!(bare.ratio(), None);
        assert!(!bare.text().contains("limit"), "{}", bare.text());
    }
}
