//! `hipfile bench`: its arguments, and the order of its jobs. It times whole-file reads or writes through GPU buffers with the library's
//! calls, and, with `--limits`, the raw bandwidths and latencies they are compared against,
//! measured in the same process on the same file.
//!
//! A case is one `--op`, `--size`, `--io-size`, `--threads`, cache state, `--backend` and
//! `--devices`. Each of its runs moves the whole file once per device, every device at once;
//! only those runs are timed and counted in `served`.
//! The limits use plain `pread`/`pwrite` (and, for cold reads, `O_DIRECT` reads) on the same
//! file and the facade's synchronous copies from pinned and from pageable host memory.
//!
//! The driver, the devices and the buffers are set up before the test file is touched. An
//! existing test file is written only with `--overwrite`; a read benchmark of its exact size
//! opens it read-only instead. A test file this run created but could not finish is removed.
//!
//! The arguments and the choices they name are in [`args`]. With `--url`, [`remote`] times
//! an object of object storage instead of a local file. The jobs, one a module:
//! [`testfile`] decides on and prepares the test file, [`measure`]
//! sets up the devices and times the case's runs, [`limits`] measures the raw baselines
//! (`pread`/`pwrite`, copies, latencies, upstream's serial fallback, the staged path at the
//! case's concurrency), [`apis`] runs one thread's requests through `--api async`, `batch`
//! or `stream`, and [`report`] writes
//! the result as a table or JSON. What they share (the case's file and buffers, host buffers,
//! the test file's pattern and raw `pread`/`pwrite`, the request lists and the figures' arithmetic)
//! is in [`common`], which uses none of them; this module only runs them in order.

mod apis;
mod args;
mod common;
mod limits;
mod measure;
mod remote;
mod report;
mod testfile;

// What `hipfile load --limits` measures with: the raw reads of bench's own limits.
pub(crate) use args::Cache;
#[cfg(test)]
pub(crate) use common::RAW_IO;
pub(crate) use common::{
    RAW_DIRECT_THREADS, RAW_THREADS, gbps, parallel, partition, raw_io, spread,
};
pub(crate) use limits::{fastest, raw_direct_read};
pub(crate) use testfile::set_cache;

pub use args::BenchArgs;

use crate::failure::Failure;
use args::Api;
use common::backend_settings;
use std::io::{self, Write};

/// Every run moved the whole file.
pub const EXIT_DONE: u8 = 0;
/// A request, the driver or a measurement failed.
pub const EXIT_FAILED: u8 = 1;
/// Bad arguments, a test file that cannot be created, or no emulated runtime.
pub const EXIT_USAGE: u8 = 2;

/// Runs `bench` and returns the exit status.
pub fn run(args: &BenchArgs) -> Result<u8, Failure> {
    let usage = |message: String| Failure::msg(EXIT_USAGE, message);
    let failed = |message: String| Failure::msg(EXIT_FAILED, message);
    if args.api == Api::Sync && args.queue_depth > 1 {
        return Err(usage(format!(
            "--queue-depth {} needs --api async, batch or stream: a blocking call has one \
             request in flight",
            args.queue_depth
        )));
    }
    if let Some(url) = &args.url {
        if let Some(why) = remote::refused(args) {
            return Err(usage(why));
        }
        let report = remote::measure(args, url).map_err(failed)?;
        let text = if args.json {
            format!("{}\n", report.to_json())
        } else {
            report.text()
        };
        return print(&text);
    }
    if let (Api::Sync, Some(n)) = (args.api, args.request_threads) {
        return Err(usage(format!(
            "--request-threads {n} needs --api async, batch or stream: blocking calls are \
             served on their callers' threads (--threads sets how many)"
        )));
    }
    let settings = crate::runtime::settings(args.runtime).map_err(usage)?;
    let mut settings = backend_settings(settings, args.backend);
    if let Some(n) = args.request_threads {
        settings = settings.request_threads(n);
    }
    // Nothing is created or written before the arguments, the runtime and the devices are
    // known to be usable: a bench that cannot run must leave the file system as it was.
    let plan = testfile::plan_file(args).map_err(usage)?;
    let setup = measure::Setup::new(args, settings).map_err(failed)?;
    let file = testfile::prepare_file(args.file.as_deref(), args.size, plan).map_err(usage)?;
    let report = measure::measure(args, setup, &file).map_err(failed)?;
    let text = if args.json {
        format!("{}\n", report.to_json())
    } else {
        report.text()
    };
    print(&text)
}

/// Writes the report to stdout.
fn print(text: &str) -> Result<u8, Failure> {
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| Failure::output(EXIT_FAILED, e))?;
    Ok(EXIT_DONE)
}
