//! The kinds of memory the fallback serves under each rule (docs/BEHAVIOUR.md §1.8): device
//! memory under both; under cuFile's, host memory (pinned, or pageable memory the runtime
//! does not know) read into and written from in place, with no staging buffer and no copy,
//! and managed memory through the staging buffers and the runtime's copies. Real files in
//! the system's temporary directory, the testkit's `HostMemRuntime` for the GPU.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile_core::{Config, DevicePtr, GpuRuntime, MemoryTypes, Op, Reason};
use hipfile_fallback::{Fallback, StagingConfig};
use hipfile_testfs::TempDir;
use hipfile_testkit::fixtures::{self, Io, pattern};
use hipfile_testkit::{Call, HostMemRuntime};
use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::sync::Arc;

const LEN: usize = 3 * 65536 + 123;

/// A fallback under `rule` whose requests all run on the caller's thread.
fn fallback(rt: &Arc<HostMemRuntime>, rule: MemoryTypes) -> Fallback {
    let mut config = Config::default();
    config.memory_types = rule;
    config.fallback.small_io_threshold = u64::MAX;
    Fallback::with_runtime(
        &config,
        rt.clone(),
        StagingConfig {
            chunk_size: 65536,
            max_buffers: 2,
        },
    )
}

fn file(dir: &TempDir, name: &str) -> File {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.path().join(name))
        .unwrap()
}

/// The copies the runtime made, both ways.
fn copies(rt: &HostMemRuntime) -> usize {
    rt.calls(Call::CopyToDevice) + rt.calls(Call::CopyToHost)
}

/// `len` bytes of host memory at `p`, copied out.
fn host_bytes(p: *const u8, len: usize) -> Vec<u8> {
    // SAFETY: every caller passes memory it allocated, at least `len` bytes, unused meanwhile.
    unsafe { std::slice::from_raw_parts(p, len) }.to_vec()
}

/// Copies `data` into host memory at `p`.
fn set_host_bytes(p: *mut u8, data: &[u8]) {
    // SAFETY: every caller passes memory it allocated, room for `data`, unused meanwhile.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
}

#[test]
fn hipfiles_rule_refuses_every_memory_but_device_memory() {
    let rt = Arc::new(HostMemRuntime::new());
    let fb = fallback(&rt, MemoryTypes::HipFile);
    let devnull = fixtures::dev_null();
    let facts = hipfile_probe::file_facts(devnull.as_fd()).unwrap();
    let pinned = rt.alloc_pinned(4096).unwrap();
    let pageable = vec![0u8; 4096];
    let managed = rt.managed_with(&[0; 4096]);
    for base in [
        DevicePtr(pinned as u64),
        DevicePtr(pageable.as_ptr() as u64),
        managed,
    ] {
        // Size 0, since it is served whatever the score: it touches nothing.
        let io = Io::new(Op::Read, base, 4096, 0, 0, 0).unregistered();
        let (verdict, _) =
            fixtures::score_and_serve(&fb, &*rt, &facts, &fixtures::buffered(&devnull), io);
        assert!(!verdict.accepted(), "{base}: {verdict:?}");
        assert_eq!(verdict.reasons(), &[Reason::BufferNotDeviceMemory]);
    }
    // SAFETY: allocated above, unused since.
    unsafe { rt.free_pinned(pinned) }.unwrap();
}

#[test]
fn cufiles_rule_reads_and_writes_host_memory_in_place() {
    let dir = TempDir::new("fallback-host-memory");
    let rt = Arc::new(HostMemRuntime::new());
    let fb = fallback(&rt, MemoryTypes::CuFile);
    let data = pattern(LEN, 9);
    let room = LEN + 4096;
    let pinned = rt.alloc_pinned(room).unwrap();
    let pageable = Box::into_raw(vec![0u8; room].into_boxed_slice()).cast::<u8>();
    for (name, base, registered) in [
        ("pinned", pinned, true),
        ("pinned-unregistered", pinned, false),
        ("pageable", pageable, true),
        ("pageable-unregistered", pageable, false),
    ] {
        let f = file(&dir, name);
        let io = |op, buffer_offset, file_offset, size| {
            let io = Io::new(
                op,
                DevicePtr(base as u64),
                room as u64,
                buffer_offset,
                file_offset,
                size,
            )
            .under(MemoryTypes::CuFile);
            if registered { io } else { io.unregistered() }
        };
        let staging_before = fb.staging().unwrap().allocated();
        let copies_before = copies(&rt);

        // A write from offset 7 of the buffer to offset 4096 + 5 of the file.
        set_host_bytes(base, &vec![0xee; room]);
        set_host_bytes(base.wrapping_add(7), &data);
        let wrote = fixtures::run(&fb, &*rt, &f, io(Op::Write, 7, 4101, LEN as u64));
        assert_eq!(wrote.unwrap(), LEN as u64, "{name}");
        let on_disk = std::fs::read(dir.path().join(name)).unwrap();
        assert!(on_disk[4101..] == data[..], "{name}: the file differs");

        // Reads back into a cleared buffer: the whole range at offset 100, then 4096 bytes
        // from 1000 before the end of the file, of which 1000 come.
        set_host_bytes(base, &vec![0; room]);
        let read = fixtures::run(&fb, &*rt, &f, io(Op::Read, 100, 4101, LEN as u64));
        assert_eq!(read.unwrap(), LEN as u64, "{name}");
        let back = host_bytes(base, room);
        assert!(back[100..100 + LEN] == data[..], "{name}: read back");
        assert!(
            back[..100].iter().all(|&b| b == 0),
            "{name}: before the range"
        );
        assert!(
            back[100 + LEN..].iter().all(|&b| b == 0),
            "{name}: past the range"
        );
        let end = 4101 + LEN as u64;
        let short = fixtures::run(&fb, &*rt, &f, io(Op::Read, 0, end - 1000, 4096));
        assert_eq!(
            short.unwrap(),
            1000,
            "{name}: a short read at the end of the file"
        );
        assert!(
            host_bytes(base, 1000) == data[LEN - 1000..],
            "{name}: short read"
        );

        // In place: no staging buffer taken, no copy made.
        assert_eq!(fb.staging().unwrap().allocated(), staging_before, "{name}");
        assert_eq!(copies(&rt), copies_before, "{name}");
    }
    // SAFETY: allocated above, unused since.
    unsafe { rt.free_pinned(pinned) }.unwrap();
    // SAFETY: made by `Box::into_raw` of a boxed slice of `room` bytes above, unused since.
    drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(pageable, room)) });
}

#[test]
fn cufiles_rule_moves_managed_memory_through_the_staging_buffers() {
    let dir = TempDir::new("fallback-managed-memory");
    let rt = Arc::new(HostMemRuntime::new());
    let fb = fallback(&rt, MemoryTypes::CuFile);
    let f = file(&dir, "managed");
    let data = pattern(LEN, 4);
    let src = rt.managed_with(&data);
    let io = |op, base| {
        Io::new(op, base, LEN as u64, 0, 0, LEN as u64)
            .under(MemoryTypes::CuFile)
            .unregistered()
    };
    assert_eq!(
        fixtures::run(&fb, &*rt, &f, io(Op::Write, src)).unwrap(),
        LEN as u64
    );
    assert!(std::fs::read(dir.path().join("managed")).unwrap() == data);
    let dst = rt.managed_with(&vec![0; LEN]);
    let before = rt.calls(Call::CopyToDevice);
    assert_eq!(
        fixtures::run(&fb, &*rt, &f, io(Op::Read, dst)).unwrap(),
        LEN as u64
    );
    assert_eq!(rt.read_device(dst, LEN), data);
    // Through the runtime's copies, one per staging chunk.
    assert_eq!(rt.calls(Call::CopyToDevice) - before, LEN.div_ceil(65536));
}
