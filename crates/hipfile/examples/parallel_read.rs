//! Many threads reading one file into GPU memory at once: one `FileHandle` clone and one
//! device buffer per thread, each thread its own range of the file, in `std::thread::scope`.
//!
//! `cargo run -p hipfile --example parallel_read [FILE [THREADS]]`; without `FILE` it writes a
//! test file of its own. Without a GPU, set `HIPFILE_HIP_LIBRARY` to the emulated runtime (the
//! path that `cargo xtask emulated` prints).

mod common;

use hipfile::{Driver, FileHandle};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

fn main() -> std::process::ExitCode {
    common::main("parallel_read", || {
        run_main().map_err(|e| -> Box<dyn std::error::Error> { e })
    })
}

fn run_main() -> Result<(), BoxError> {
    let mut args = std::env::args_os().skip(1);
    let given = args.next().map(PathBuf::from);
    let threads: u64 = match args.next() {
        Some(n) => n
            .to_str()
            .and_then(|n| n.parse().ok())
            .ok_or("THREADS: a number")?,
        None => 4,
    };
    if threads == 0 {
        return Err("THREADS must be at least 1".into());
    }
    let path = match &given {
        Some(path) => path.clone(),
        None => {
            let path = std::env::temp_dir().join(format!("hipfile-par-{}", std::process::id()));
            let data: Vec<u8> = (0..(4 << 20) + 777).map(|i: u32| (i % 253) as u8).collect();
            std::fs::write(&path, data)?;
            path
        }
    };
    // The test file goes however this ends.
    let _scratch = given.is_none().then(|| common::Scratch(path.clone()));

    let driver = Driver::open()?;
    let file = std::fs::File::open(&path)?;
    let fh = driver.register_file(&file)?;
    let len = file.metadata()?.len();
    let per_thread = len.div_ceil(threads);

    // Each thread gets a clone of the handle (a reference count) and a disjoint range.
    let results: Vec<Result<(u64, u64), BoxError>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let start = (t * per_thread).min(len);
                let end = (start + per_thread).min(len);
                let fh = fh.clone();
                let file = &file;
                s.spawn(move || read_range(&fh, file, start, end).map(|n| (start, n)))
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a reading thread panicked"))
            .collect()
    });

    let mut total = 0;
    for result in results {
        let (start, n) = result?;
        println!("  {n} bytes from offset {start}");
        total += n;
    }
    if total != len {
        return Err(format!("read {total} bytes of {len}").into());
    }
    println!(
        "{threads} threads read all {len} bytes of {}",
        path.display()
    );
    Ok(())
}

/// Reads `start..end` of the file into a buffer of this thread's own and checks it against
/// the bytes that an ordinary read of `file` gives.
fn read_range(fh: &FileHandle, file: &File, start: u64, end: u64) -> Result<u64, BoxError> {
    if start == end {
        return Ok(0);
    }
    let len = (end - start) as usize;
    let mut buf = fh.driver().alloc(len)?;
    fh.read_exact_at(&mut buf, start)?;

    let mut got = vec![0u8; len];
    buf.copy_to_host(0, &mut got)?;
    let mut want = vec![0u8; len];
    file.read_exact_at(&mut want, start)?;
    if got != want {
        return Err(format!("bytes {start}..{end} differ from the file's").into());
    }
    Ok(len as u64)
}
