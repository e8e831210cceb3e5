//! Reads a whole file into GPU memory with `read_exact_at`, copies it back to the host and
//! checks that the bytes are the file's.
//!
//! `cargo run -p hipfile --example read_verify [FILE]`; without `FILE` it writes a test file
//! of its own. Without a GPU, set `HIPFILE_HIP_LIBRARY` to the emulated runtime (the path that
//! `cargo xtask emulated` prints).

mod common;

use hipfile::Driver;
use std::error::Error;
use std::path::PathBuf;

fn main() -> std::process::ExitCode {
    common::main("read_verify", run_main)
}

fn run_main() -> Result<(), Box<dyn Error>> {
    let (path, temporary) = match std::env::args_os().nth(1) {
        Some(path) => (PathBuf::from(path), false),
        None => {
            let path = std::env::temp_dir().join(format!("hipfile-read-{}", std::process::id()));
            let data: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
            std::fs::write(&path, data)?;
            (path, true)
        }
    };
    let result = read_and_verify(&path);
    if temporary {
        std::fs::remove_file(&path)?;
    }
    result
}

fn read_and_verify(path: &std::path::Path) -> Result<(), Box<dyn Error>> {
    let expected = std::fs::read(path)?;
    if expected.is_empty() {
        return Err(format!("{} is empty: nothing to read", path.display()).into());
    }

    // The configuration comes from the environment (HIPFILE_HIP_LIBRARY among it).
    let driver = Driver::open()?;
    let file = std::fs::File::open(path)?;
    let fh = driver.register_file(&file)?;
    let mut buf = driver.alloc(expected.len())?;

    // As many requests as it takes to fill the buffer; an error if the file is shorter.
    fh.read_exact_at(&mut buf, 0)?;

    let mut back = vec![0u8; buf.len()];
    buf.copy_to_host(0, &mut back)?;
    if back != expected {
        return Err("the bytes in GPU memory differ from the file's".into());
    }
    println!(
        "{}: {} bytes read into GPU memory and verified (on {:?})",
        path.display(),
        buf.len(),
        driver.runtime().platform,
    );
    Ok(())
}
