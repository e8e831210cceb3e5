//! The fallback's staging through the emulated runtime, as the driver sizes it from the
//! configuration.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile::{ConfigBuilder, Driver, Op, Request};
use hipfile_core::buffer::{BufferUse, check_buffer};
use hipfile_core::{Backend, IoTarget, Submission};
use hipfile_fallback::Fallback;
use hipfile_fallback::StagingConfig;
use hipfile_testfs::{TempDir, emulated_runtime, require};
use std::fs::OpenOptions;
use std::os::fd::AsFd;

/// Task size and staging memory of 64 GiB: a 5 MB write and read through the I/O threads
/// succeed and pin only the 16 MiB buffers their two tasks use (at most two each), not
/// buffers sized from the settings.
#[test]
fn large_settings_pin_only_what_a_request_uses() {
    let lib = require!(emulated_runtime());
    let config = ConfigBuilder::new()
        .hip_library(lib)
        .io_threads(2)
        .task_size(64 << 30)
        .staging_memory(64 << 30)
        .build_with(|_| None)
        .0;
    let d = Driver::open_private(config.clone()).unwrap();
    let fb = Fallback::with_runtime(
        &config,
        d.tuning().gpu().clone(),
        StagingConfig::for_knobs(&config.fallback_knobs()),
    );
    let pool = fb.staging().unwrap();
    let chunk = pool.config().chunk_size;
    assert!(
        chunk <= StagingConfig::MAX_CHUNK_SIZE,
        "staging buffers of {chunk} bytes"
    );

    let dir = TempDir::new("hipfile-large-settings");
    let path = dir.path().join("f");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let probed = hipfile::probe::probe_fd(file.as_fd()).unwrap();
    let target = IoTarget {
        direct: probed.direct_fd.as_ref().map(|f| f.as_fd(file.as_fd())),
        buffered: probed.buffered_fd.as_fd(file.as_fd()),
    };
    let size = 5_000_000;
    let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    let mut src = d.alloc(size).unwrap();
    src.copy_from_host(0, &data).unwrap();
    let dst = d.alloc(size).unwrap();
    for (op, buf) in [(Op::Write, &src), (Op::Read, &dst)] {
        // SAFETY: `buf` is allocated until the end of the test, after every request.
        let buffer = unsafe {
            check_buffer(
                &**d.tuning().gpu(),
                buf.ptr(),
                BufferUse::Register {
                    len: size as u64,
                    rule: hipfile_core::MemoryTypes::HipFile,
                },
            )
        }
        .unwrap();
        let request = Request {
            op,
            size: size as u64,
            file_offset: 0,
            buffer_offset: 0,
        }
        .validate_checked(&buffer)
        .unwrap();
        let s = Submission {
            request: &request,
            file: &probed.facts,
            buffer: buffer.facts(),
        };
        assert!(fb.score(&s).accepted());
        assert_eq!(fb.io(&s, &target).unwrap(), size as u64, "{op}");
    }
    assert!(std::fs::read(&path).unwrap() == data);
    let mut back = vec![0; size];
    dst.copy_to_host(0, &mut back).unwrap();
    assert!(back == data);

    assert!(fb.tasks_dispatched() >= 2);
    assert!(
        pool.allocated() <= 4,
        "{} buffers for two tasks",
        pool.allocated()
    );
    assert!(pool.allocated() * chunk <= 4 * StagingConfig::MAX_CHUNK_SIZE);
}
