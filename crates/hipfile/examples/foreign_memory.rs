//! Reading into GPU memory that another library allocated: a framework hands out a raw device
//! pointer and a length, and `unsafe DeviceBuffer::from_raw` describes that memory to hipfile
//! without taking it over (hipfile never frees it).
//!
//! Here the "framework" is the runtime itself: the memory comes from the driver's runtime
//! allocator (`driver.tuning().gpu().alloc_device`) and goes back to it at the end, as a framework's
//! tensor would.
//!
//! `cargo run -p hipfile --example foreign_memory [FILE]`; without `FILE` it writes a test file
//! of its own. Without a GPU, set `HIPFILE_HIP_LIBRARY` to the emulated runtime (the path that
//! `cargo xtask emulated` prints).

mod common;

use hipfile::{DeviceBuffer, Driver};
use std::error::Error;
use std::path::PathBuf;

fn main() -> std::process::ExitCode {
    common::main("foreign_memory", run_main)
}

fn run_main() -> Result<(), Box<dyn Error>> {
    let (path, temporary) = match std::env::args_os().nth(1) {
        Some(path) => (PathBuf::from(path), false),
        None => {
            let path = std::env::temp_dir().join(format!("hipfile-raw-{}", std::process::id()));
            let data: Vec<u8> = (0..(1 << 20) + 99).map(|i: u32| (i % 241) as u8).collect();
            std::fs::write(&path, data)?;
            (path, true)
        }
    };
    // The test file goes however this ends.
    let _scratch = temporary.then(|| common::Scratch(path.clone()));
    let expected = std::fs::read(&path)?;
    if expected.is_empty() {
        return Err(format!("{} is empty: nothing to read", path.display()).into());
    }

    let driver = Driver::open()?;
    let file = std::fs::File::open(&path)?;
    let fh = driver.register_file(&file)?;

    // The framework's allocation: a device pointer and a length, owned by the framework.
    let len = expected.len();
    let ptr = driver.tuning().gpu().alloc_device(len)?;

    let result = (|| -> Result<(), Box<dyn Error>> {
        // SAFETY: `ptr..ptr+len` is device memory of this driver's runtime, just allocated by
        // it; it is freed only below, after `tensor` (the only thing that uses it) is dropped,
        // and nothing else reads or writes it meanwhile.
        let mut tensor = unsafe { DeviceBuffer::from_raw(&driver, ptr, len) };
        // Registration is optional; it checks the memory once instead of at every request.
        driver.register_buffer(&tensor)?;
        fh.read_exact_at(&mut tensor, 0)?;

        let mut back = vec![0u8; len];
        tensor.copy_to_host(0, &mut back)?;
        if back != expected {
            return Err("the bytes in the framework's memory differ from the file's".into());
        }
        println!(
            "{len} bytes of {} read into memory hipfile does not own, at {:#x}",
            path.display(),
            ptr.0
        );
        Ok(())
        // `tensor` drops here: its registration ends, and the memory stays allocated.
    })();

    // The framework frees its memory.
    // SAFETY: `ptr` came from this runtime's `alloc_device`, the buffer that described it is
    // gone and no transfer uses it, and it is not used after this.
    unsafe { driver.tuning().gpu().free_device(ptr) }?;
    result
}
