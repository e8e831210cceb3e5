//! What the test files share: where NVIDIA's headers are. `cargo xtask ci` takes them from
//! NVIDIA's PyPI packages into `<target>/nvidia-headers/<name>/include` (xtask's
//! `cufile_header.rs`): cuFile 1.15's and 1.17's `cufile.h`, and CUDA 13.0's `cuda.h`,
//! `cuda_runtime.h` and what they include. A plain `cargo test` without them skips the tests
//! that need them.

#![allow(dead_code)] // Each test file uses what it needs.

use hipfile_testfs::Skip;
use std::path::PathBuf;

/// The names of the sets of headers, as xtask lays them out.
pub const CUFILE_115: &str = "cufile-1.15";
pub const CUFILE_117: &str = "cufile-1.17";
pub const CUDA: &str = "cuda-13.0";

/// The include directory of the set `name`, or why the test cannot run.
pub fn nvidia_headers(name: &str) -> Result<PathBuf, Skip> {
    // `<target>/<profile>/deps/<test>`.
    let target = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(3).map(PathBuf::from))
        .ok_or_else(|| Skip("the test binary's target directory is unknown".into()))?;
    let dir = target.join("nvidia-headers").join(name).join("include");
    let marker = if name == CUDA { "cuda.h" } else { "cufile.h" };
    if dir.join(marker).is_file() {
        Ok(dir)
    } else {
        Err(Skip(format!(
            "NVIDIA's headers ({name}) are not in {} (`cargo xtask ci` fetches them)",
            dir.display()
        )))
    }
}

/// This crate's `include` directory (our `cufile.h`).
pub fn our_include() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("include")
}
