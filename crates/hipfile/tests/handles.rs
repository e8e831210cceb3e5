//! What keeps a driver open, as `Driver::is_only_handle` reports it (the C library relies on
//! it to reopen its driver with new settings only when nothing uses it), the staging buffer
//! size `Driver::staging_chunk_size` derives from the fallback's knobs, and what small
//! requests ask of the runtime (none for a buffer made with its description).

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile::{ConfigBuilder, Driver};
use hipfile_testfs::{Skip, TempDir, emulated_runtime, require};
use hipfile_testkit::{Call, Injected};
use std::sync::Arc;

/// A driver on the emulated runtime with `settings`, over a wrapper that counts the
/// runtime's calls.
fn counted(settings: ConfigBuilder) -> Result<(Driver, Arc<Injected>), Skip> {
    let lib = emulated_runtime()?;
    let base = Driver::open_private(settings.hip_library(lib).build_with(|_| None).0).unwrap();
    let rt = Arc::new(Injected::new(base.tuning().gpu().clone()));
    let d = Driver::with_runtime(base.config().clone(), rt.clone(), base.runtime().clone());
    Ok((d, rt))
}

#[test]
fn clones_files_and_buffers_each_hold_the_driver() {
    let lib = require!(emulated_runtime());
    let config = ConfigBuilder::new().hip_library(lib).build_with(|_| None).0;
    let d = Driver::open_private(config).unwrap();
    assert!(d.is_only_handle());
    let other = d.clone();
    assert!(!d.is_only_handle() && !other.is_only_handle());
    drop(other);
    assert!(d.is_only_handle());

    let buf = d.alloc(4096).unwrap();
    assert!(!d.is_only_handle());
    drop(buf);
    assert!(d.is_only_handle());

    let dir = TempDir::new("handles");
    let file = std::fs::File::create(dir.path().join("f")).unwrap();
    let fh = d.register_file(&file).unwrap();
    assert!(!d.is_only_handle());
    drop(fh);
    assert!(d.is_only_handle());
}

#[test]
fn a_staging_buffer_is_a_task_within_the_pool() {
    let knobs = |b: ConfigBuilder| b.build_with(|_| None).0.fallback;
    let four_mib_tasks = knobs(ConfigBuilder::new().task_size(4 << 20).io_threads(4));
    assert_eq!(
        hipfile::Tuning::staging_chunk_size(&four_mib_tasks),
        4 << 20
    );
    // 256 MiB for 64 workers' 2 buffers: 2 MiB each.
    let many = knobs(ConfigBuilder::new().task_size(4 << 20).io_threads(64));
    assert_eq!(hipfile::Tuning::staging_chunk_size(&many), 2 << 20);
    // 16 KiB over 3 workers' 2 buffers is under a page: one page it is.
    let tiny = knobs(
        ConfigBuilder::new()
            .task_size(8 << 10)
            .staging_memory(16 << 10)
            .io_threads(3),
    );
    assert_eq!(hipfile::Tuning::staging_chunk_size(&tiny), 4096);
}

#[test]
fn an_unregistered_buffer_is_described_once_not_per_request() {
    let (d, rt) = require!(counted(ConfigBuilder::new().force_compat_mode(true)));
    let dir = TempDir::new("handles-small");
    let path = dir.path().join("f");
    let data: Vec<u8> = (0..64 << 10)
        .map(|i: u32| (i * 7 + i / 251) as u8)
        .collect();
    std::fs::write(&path, &data).unwrap();
    let fh = d
        .register_file(&std::fs::File::open(&path).unwrap())
        .unwrap();
    let mut buf = d.alloc(4096).unwrap();
    let before = |c| rt.calls(c);
    let (info, range) = (before(Call::PointerInfo), before(Call::AddressRange));
    const READS: usize = 16;
    for i in 0..READS {
        fh.read_exact_at(&mut buf, (i * 4096) as u64).unwrap();
        let mut back = vec![0u8; 4096];
        buf.slice(..).unwrap().copy_to_host(&mut back).unwrap();
        assert!(back == data[i * 4096..(i + 1) * 4096], "read {i}");
    }
    // The buffer is described once, not for every request.
    assert_eq!(rt.calls(Call::PointerInfo) - info, 1);
    assert_eq!(rt.calls(Call::AddressRange) - range, 1);
    assert_eq!(rt.calls(Call::CopyToDevice), READS);
}

#[test]
fn a_buffer_made_with_its_description_is_not_described_again() {
    let (d, rt) = require!(counted(ConfigBuilder::new().force_compat_mode(true)));
    let dir = TempDir::new("handles-described");
    let path = dir.path().join("f");
    let data: Vec<u8> = (0..16 << 10).map(|i: u32| (i % 241) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let fh = d
        .register_file(&std::fs::File::open(&path).unwrap())
        .unwrap();
    let ptr = d.tuning().gpu().alloc_device(8192).unwrap();
    let info = d.tuning().gpu().pointer_info(ptr).unwrap();
    let (info_calls, range_calls) = (rt.calls(Call::PointerInfo), rt.calls(Call::AddressRange));
    for i in 0..3 {
        // As the C library does for each call on an unregistered pointer, after asking the
        // runtime about it.
        // SAFETY: `ptr..ptr+8192` is device memory of this runtime (allocated above, freed
        // below after the buffer is gone), and the description is the runtime's.
        let mut buf = unsafe {
            hipfile::DeviceBuffer::from_raw_described(&d, ptr, 8192, info.memory, info.device)
        };
        fh.read_exact_at(&mut buf, i * 4096).unwrap();
        let mut back = vec![0u8; 8192];
        buf.copy_to_host(0, &mut back).unwrap();
        let at = (i * 4096) as usize;
        assert!(back == data[at..at + 8192], "read {i}");
    }
    assert_eq!(rt.calls(Call::PointerInfo), info_calls);
    assert_eq!(rt.calls(Call::AddressRange), range_calls);
    // SAFETY: allocated above; no buffer over it is left.
    unsafe { d.tuning().gpu().free_device(ptr) }.unwrap();
}

#[test]
fn prepared_staging_is_what_requests_of_that_size_keep_busy_and_large_reads_then_use_it() {
    let (d, rt) = require!(counted(
        ConfigBuilder::new()
            .force_compat_mode(true)
            .io_threads(4)
            .task_size(1 << 20)
            .small_io_threshold(1 << 20)
            .staging_memory(16 << 20)
    ));
    // 1 MiB chunks. A request the caller serves itself reserves nothing.
    assert_eq!(d.tuning().prepare_staging(1 << 20), 0);
    assert_eq!(rt.calls(Call::AllocPinned), 0);
    // 4 MiB requests are 1 MiB tasks of one chunk each: one buffer per I/O thread, pinned at
    // once; asked again, nothing more.
    assert_eq!(d.tuning().prepare_staging(4 << 20), 4);
    assert_eq!(rt.calls(Call::AllocPinned), 1);
    assert_eq!(d.tuning().prepare_staging(4 << 20), 4);
    assert_eq!(rt.calls(Call::AllocPinned), 1);
    // 8 MiB requests are 2 MiB tasks of two chunks: two per thread, the four missing pinned
    // as one allocation.
    assert_eq!(d.tuning().prepare_staging(8 << 20), 8);
    assert_eq!(rt.calls(Call::AllocPinned), 2);

    let dir = TempDir::new("handles-prepared");
    let path = dir.path().join("f");
    let data: Vec<u8> = (0..8 << 20).map(|i: u32| (i % 253) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let fh = d
        .register_file(&std::fs::File::open(&path).unwrap())
        .unwrap();
    let mut buf = d.alloc(data.len()).unwrap();
    for _ in 0..2 {
        fh.read_exact_at(&mut buf, 0).unwrap();
        let mut back = vec![0u8; data.len()];
        buf.copy_to_host(0, &mut back).unwrap();
        assert!(back == data);
    }
    assert_eq!(
        rt.calls(Call::AllocPinned),
        2,
        "a large read pinned more than the prepared buffers"
    );
}
