//! Many requests in flight at once through the three APIs that do not block: futures over
//! views (`read_at_async`), a batch (`Driver::batch`), and requests ordered on GPU streams
//! (`read_on` on a stream hipfile owns, and `read_on_stream` on the null stream), each
//! checked against the file's bytes.
//!
//! `cargo run -p hipfile --example many_in_flight [FILE]`; without `FILE` it writes a test
//! file of its own. Without a GPU, set `HIPFILE_HIP_LIBRARY` to the emulated runtime (the
//! path that `cargo xtask emulated` prints).

mod common;

use hipfile::{BatchIo, BatchStatus, DeviceBuffer, Driver, StreamHandle};
use std::error::Error;
use std::path::PathBuf;

/// Each request's size: small, and not a multiple of the page, so both backends serve some.
const PIECE: usize = 300_000;

fn main() -> std::process::ExitCode {
    common::main("many_in_flight", run_main)
}

fn run_main() -> Result<(), Box<dyn Error>> {
    let (path, temporary) = match std::env::args_os().nth(1) {
        Some(path) => (PathBuf::from(path), false),
        None => {
            let path = std::env::temp_dir().join(format!("hipfile-many-{}", std::process::id()));
            let data: Vec<u8> = (0..24 << 20).map(|i: u32| (i % 253) as u8).collect();
            std::fs::write(&path, data)?;
            (path, true)
        }
    };
    let result = run(&path);
    if temporary {
        std::fs::remove_file(&path)?;
    }
    result
}

fn run(path: &std::path::Path) -> Result<(), Box<dyn Error>> {
    let expected = std::fs::read(path)?;
    let driver = Driver::open()?;
    let fh = driver.register_file(&std::fs::File::open(path)?)?;
    let len = expected.len().min(64 << 20);
    let mut buf = driver.alloc(len)?;

    // Futures: one request per piece, all in flight, then waited for.
    let pending: Vec<_> = buf
        .slice_mut(..)?
        .chunks(PIECE)?
        .into_iter()
        .enumerate()
        .map(|(i, view)| fh.read_at_async(view, (i * PIECE) as u64))
        .collect();
    let mut moved = 0;
    for io in pending {
        moved += io.wait()?.bytes;
    }
    whole(moved, len, "futures")?;
    check(&buf, &expected[..len], "futures")?;

    // A batch of up to 128 requests at a time, polled until each has ended.
    let mut buf = driver.alloc(len)?;
    let mut views = buf.slice_mut(..)?.chunks(PIECE)?.into_iter().enumerate();
    let mut batch = driver.batch(128)?;
    let mut moved_by_batch = 0;
    loop {
        let wave: Vec<_> = views
            .by_ref()
            .take(128)
            .map(|(i, view)| BatchIo::read(&fh, view, (i * PIECE) as u64, i as u64))
            .collect();
        if wave.is_empty() {
            break;
        }
        let n = wave.len();
        batch.submit(wave)?;
        let mut ended = 0;
        while ended < n {
            for event in batch.poll(1, n, None) {
                ended += 1;
                match event.status {
                    BatchStatus::Complete(o) => moved_by_batch += o.bytes,
                    other => {
                        return Err(format!("batch request {}: {other:?}", event.cookie).into());
                    }
                }
            }
        }
    }
    drop(batch);
    whole(moved_by_batch, len, "a batch")?;
    check(&buf, &expected[..len], "a batch")?;

    // Ordered on a stream hipfile owns, then on the null stream. A copy queued on the same
    // stream after the reads (the stream's later work) must see their bytes.
    let mut buf = driver.alloc(len)?;
    let device_bytes = buf.ptr();
    let mut later = driver.alloc_pinned(len)?;
    let stream = driver.create_stream()?;
    let pending: Vec<_> = buf
        .slice_mut(..)?
        .chunks(PIECE)?
        .into_iter()
        .enumerate()
        .map(|(i, view)| fh.read_on(&stream, view, (i * PIECE) as u64))
        .collect::<Result<_, _>>()?;
    // SAFETY: `buf` and `later` live until after the stream is synchronised below, and
    // nothing else touches `later` until then.
    unsafe {
        driver.tuning().gpu().require_streams()?.copy_to_host_async(
            later.as_mut_ptr(),
            device_bytes,
            len,
            stream.handle(),
        )
    }?;
    stream.synchronize()?;
    let mut moved = 0;
    for io in pending {
        moved += io.wait()?.bytes;
    }
    whole(moved, len, "a stream")?;
    if later[..] != expected[..len] {
        return Err("a copy queued after the stream's reads did not see their bytes".into());
    }
    check(&buf, &expected[..len], "a stream")?;
    let mut buf = driver.alloc(PIECE)?;
    // SAFETY: the null stream is always live.
    let io = unsafe { fh.read_on_stream(StreamHandle(0), &mut buf, 7) }?;
    whole(io.wait()?.bytes, PIECE, "the null stream")?;
    check(&buf, &expected[7..7 + PIECE], "the null stream")?;
    println!(
        "{} bytes read and verified through futures, a batch and two streams",
        3 * len + PIECE
    );
    Ok(())
}

/// Every request together moved `len` bytes.
fn whole(moved: u64, len: usize, what: &str) -> Result<(), Box<dyn Error>> {
    if moved != len as u64 {
        return Err(format!("{what} moved {moved} of {len} bytes").into());
    }
    Ok(())
}

fn check(buf: &DeviceBuffer, expected: &[u8], what: &str) -> Result<(), Box<dyn Error>> {
    let mut got = vec![0u8; expected.len()];
    buf.copy_to_host(0, &mut got)?;
    if got != expected {
        return Err(format!("the bytes read through {what} differ from the file's").into());
    }
    Ok(())
}
