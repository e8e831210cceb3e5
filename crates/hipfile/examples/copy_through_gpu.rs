//! Copies a file through GPU memory, one chunk at a time: `read_at` into a view of a device
//! buffer, then `write_all_at` of the bytes that came, until a read returns 0.
//!
//! `cargo run -p hipfile --example copy_through_gpu [SRC DST]`; without arguments it copies a
//! test file of its own and checks the copy. Without a GPU, set `HIPFILE_HIP_LIBRARY` to the
//! emulated runtime (the path that `cargo xtask emulated` prints).

mod common;

use hipfile::Driver;
use std::error::Error;
use std::path::{Path, PathBuf};

/// The device buffer's size: the most one request moves.
const CHUNK: usize = 1 << 20;

fn main() -> std::process::ExitCode {
    common::main("copy_through_gpu", run_main)
}

fn run_main() -> Result<(), Box<dyn Error>> {
    let args: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    match args.as_slice() {
        [src, dst] => copy(src, dst).map(|n| println!("copied {n} bytes")),
        [] => {
            let dir = std::env::temp_dir();
            let src = dir.join(format!("hipfile-copy-src-{}", std::process::id()));
            let dst = dir.join(format!("hipfile-copy-dst-{}", std::process::id()));
            // Not a whole number of chunks, so the last read is short.
            let data: Vec<u8> = (0..(5 * CHUNK + 12_345) as u32)
                .map(|i| (i.wrapping_mul(31) >> 3) as u8)
                .collect();
            std::fs::write(&src, &data)?;
            let result = copy(&src, &dst).and_then(|n| {
                if std::fs::read(&dst)? == data {
                    println!("copied {n} bytes through GPU memory; the copy is identical");
                    Ok(())
                } else {
                    Err("the copy differs from the source".into())
                }
            });
            std::fs::remove_file(&src)?;
            let _ = std::fs::remove_file(&dst);
            result
        }
        _ => Err("usage: copy_through_gpu [SRC DST]".into()),
    }
}

/// Copies `src` to `dst` (created or truncated) and returns the number of bytes.
fn copy(src: &Path, dst: &Path) -> Result<u64, Box<dyn Error>> {
    let driver = Driver::open()?;
    let input = std::fs::File::open(src)?;
    let output = std::fs::File::create(dst)?;
    let from = driver.register_file(&input)?;
    let to = driver.register_file(&output)?;
    let mut buf = driver.alloc(CHUNK)?;

    let mut offset = 0u64;
    loop {
        // One request: the count may be short (at the end of the file), and 0 means the end.
        let got = from.read_at(&mut buf.slice_mut(..)?, offset)?.bytes as usize;
        if got == 0 {
            return Ok(offset);
        }
        // Only the bytes that came, all of them, at the same offset.
        to.write_all_at(&buf.slice(..got)?, offset)?;
        offset += got as u64;
    }
}
