//! What the tests share: a driver on the emulated runtime, a byte pattern, and a
//! fault-injecting proxy in front of the S3 server (`hipfile_testfs::S3Server`) for what a
//! real server will not do on demand.

#![allow(dead_code)] // Each test binary uses part of it.

pub mod proxy;

use hipfile::{Config, ConfigBuilder, Driver};
use hipfile_testfs::{Skip, emulated_runtime};

/// A driver on the emulated runtime.
pub fn driver() -> Result<Driver, Skip> {
    counting_driver(0)
}

/// A driver on the emulated runtime that counts at `HIPFILE_STATS_LEVEL` `level`.
pub fn counting_driver(level: u32) -> Result<Driver, Skip> {
    let lib = emulated_runtime()?;
    let config: Config = ConfigBuilder::new()
        .hip_library(lib)
        .stats_level(level)
        .build_with(|_| None)
        .0;
    Ok(Driver::open_private(config).expect("the emulated runtime opens"))
}

/// Bytes that differ from one offset to the next.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8)
        .collect()
}
