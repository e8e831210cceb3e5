//! Stream-ordered reads, each followed on its stream by work that uses the bytes it read,
//! against the synchronous call of the same size in the same run. Each request reads
//! `REQUEST` bytes with `read_on` on one of `DEPTH` streams (a request per stream in flight);
//! right after it, a copy of the request's first and last 64 KiB to pinned host memory is
//! queued on the same stream: the device-side use, which the stream must hold back until the
//! read's bytes are in place. Every sample is compared with the file's bytes after the
//! timing. Prints the rates and the ratio, then one JSON line.
//!
//! `cargo run --release -p hipfile --example stream_then_use [FILE [REQUEST_MIB [DEPTH
//! [RUNS]]]]`: by default 64 MiB requests, 8 streams, 3 runs over the whole file (at most
//! 8 GiB). Without `FILE` it writes a small test file of its own and uses 4 MiB requests (the
//! emulated runtime's case: set `HIPFILE_HIP_LIBRARY` to the path that `cargo xtask
//! emulated` prints).

mod common;

use hipfile::{DevicePtr, Driver, PinnedHostBuffer, StreamHandle};
use std::error::Error;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The bytes each sample copies back, from a request's start and from its end.
const SAMPLE: usize = 64 << 10;

struct Setup {
    request: usize,
    depth: usize,
    runs: usize,
}

fn main() -> std::process::ExitCode {
    common::main("stream_then_use", run_main)
}

fn run_main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args_os().skip(1);
    let number = |v: Option<std::ffi::OsString>, default: usize| -> Result<usize, String> {
        match v {
            None => Ok(default),
            Some(v) => v
                .to_str()
                .and_then(|s| s.parse().ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{v:?} is not a positive whole number")),
        }
    };
    let (path, temporary, request_mib) = match args.next() {
        Some(path) => (PathBuf::from(path), false, 64),
        None => {
            let path = std::env::temp_dir().join(format!("hipfile-stream-{}", std::process::id()));
            let data: Vec<u8> = (0..40u32 << 20).map(|i| (i % 251) as u8).collect();
            std::fs::write(&path, data)?;
            (path, true, 4)
        }
    };
    let setup = Setup {
        request: number(args.next(), request_mib)? << 20,
        depth: number(args.next(), 8)?,
        runs: number(args.next(), if temporary { 1 } else { 3 })?,
    };
    let result = run(&path, &setup);
    if temporary {
        std::fs::remove_file(&path)?;
    }
    result
}

fn run(path: &Path, setup: &Setup) -> Result<(), Box<dyn Error>> {
    let file = std::fs::File::open(path)?;
    let size = file.metadata()?.len().min(8 << 30);
    let count = (size / setup.request as u64) as usize;
    if count == 0 {
        return Err(format!("{} is smaller than one request", path.display()).into());
    }
    let total = (count * setup.request) as u64;
    let driver = Driver::open()?;
    let fh = driver.register_file(&file)?;
    let mut bufs = (0..setup.depth)
        .map(|_| driver.alloc(setup.request))
        .collect::<Result<Vec<_>, _>>()?;
    let mut samples = (0..setup.depth)
        .map(|_| driver.alloc_pinned(2 * SAMPLE))
        .collect::<Result<Vec<_>, _>>()?;
    let streams = (0..setup.depth)
        .map(|_| driver.create_stream())
        .collect::<Result<Vec<_>, _>>()?;

    let mut sync_rates = Vec::new();
    let mut stream_rates = Vec::new();
    let mut seen = Vec::new();
    for _ in 0..setup.runs {
        let start = Instant::now();
        for i in 0..count {
            let buf = &mut bufs[i % setup.depth];
            let got = fh.read_at(buf, (i * setup.request) as u64)?;
            whole(got.bytes, setup.request)?;
        }
        sync_rates.push(total as f64 / start.elapsed().as_secs_f64() / 1e9);

        seen.clear();
        let start = Instant::now();
        for wave in (0..count).collect::<Vec<_>>().chunks(setup.depth) {
            let mut pending = Vec::with_capacity(wave.len());
            for ((&i, buf), (sample, stream)) in wave
                .iter()
                .zip(bufs.iter_mut())
                .zip(samples.iter_mut().zip(&streams))
            {
                let offset = (i * setup.request) as u64;
                let at = buf.ptr();
                let io = fh.read_on(stream, buf.slice_mut(..)?, offset)?;
                use_on_stream(&driver, at.0, setup.request, sample, stream.handle())?;
                pending.push((offset, io));
            }
            for ((offset, io), (sample, stream)) in
                pending.into_iter().zip(samples.iter().zip(&streams))
            {
                whole(io.wait()?.bytes, setup.request)?;
                stream.synchronize()?;
                seen.push((offset, sample.to_vec()));
            }
        }
        stream_rates.push(total as f64 / start.elapsed().as_secs_f64() / 1e9);
        check(&file, setup.request, &seen)?;
    }
    let sync = median(&mut sync_rates);
    let ordered = median(&mut stream_rates);
    println!(
        "{count} requests of {} MiB, {} streams, {} runs: synchronous {sync:.2} GB/s, \
         stream-ordered with a use after each {ordered:.2} GB/s ({:.2}); {} samples checked",
        setup.request >> 20,
        setup.depth,
        setup.runs,
        ordered / sync,
        seen.len() * 2,
    );
    println!(
        "{{\"requests\":{count},\"request_size\":{},\"streams\":{},\"runs\":{},\
         \"sync_gbps\":{sync:.3},\"stream_gbps\":{ordered:.3},\"ratio\":{:.3},\
         \"samples_checked\":{}}}",
        setup.request,
        setup.depth,
        setup.runs,
        ordered / sync,
        seen.len() * 2
    );
    Ok(())
}

/// Queues the use of a request's bytes on its stream: copies of its first and last
/// [`SAMPLE`] bytes into `sample`.
fn use_on_stream(
    driver: &Driver,
    device: u64,
    len: usize,
    sample: &mut PinnedHostBuffer,
    stream: StreamHandle,
) -> Result<(), Box<dyn Error>> {
    let n = SAMPLE.min(len);
    let streams = driver.tuning().gpu().require_streams()?;
    let host = sample.as_mut_ptr();
    // SAFETY: `device..device + len` is a live buffer of the caller's, and `sample` holds
    // 2 × SAMPLE bytes; both stay untouched and alive until the caller has synchronised
    // the stream.
    unsafe {
        streams.copy_to_host_async(host, DevicePtr(device), n, stream)?;
        streams.copy_to_host_async(
            host.add(SAMPLE),
            DevicePtr(device + (len - n) as u64),
            n,
            stream,
        )?;
    }
    Ok(())
}

fn whole(moved: u64, len: usize) -> Result<(), Box<dyn Error>> {
    if moved != len as u64 {
        return Err(format!("a request moved {moved} of {len} bytes").into());
    }
    Ok(())
}

/// Compares every sample with the file's bytes.
fn check(file: &std::fs::File, len: usize, seen: &[(u64, Vec<u8>)]) -> Result<(), Box<dyn Error>> {
    let n = SAMPLE.min(len);
    let mut expected = vec![0u8; n];
    for (offset, sample) in seen {
        for (at, got) in [
            (*offset, &sample[..n]),
            (offset + (len - n) as u64, &sample[SAMPLE..SAMPLE + n]),
        ] {
            file.read_exact_at(&mut expected, at)?;
            if got != expected {
                return Err(format!(
                    "the copy queued after the read at offset {offset} saw other bytes than \
                     the file's at {at}: the stream did not hold it back"
                )
                .into());
            }
        }
    }
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
