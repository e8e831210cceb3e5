//! The test doubles' own tests: each kind of fault does what it says, and only to the calls
//! it names, so a test that relies on an injected failure cannot pass because nothing was
//! injected.

#![allow(unsafe_code)]

use crate::fixtures::pattern;
use crate::{Call, Fault, Gate, HostMemRuntime, Injected};
use hipfile_core::runtime::{AmdFileIo, FileIoError};
use hipfile_core::{DevicePtr, GpuRuntime, RuntimeError};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A file of `data` that removes itself when dropped.
struct TempFile {
    path: PathBuf,
    file: File,
}

impl TempFile {
    fn new(data: &[u8]) -> TempFile {
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "hipfile-testkit-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::write(&path, data).unwrap();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        TempFile { path, file }
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A synchronous copy of `data` into `dst` through a pinned buffer of `rt`.
fn copy_in(rt: &dyn GpuRuntime, dst: DevicePtr, data: &[u8]) -> Result<(), RuntimeError> {
    let pinned = rt.alloc_pinned(data.len()).unwrap();
    // SAFETY: `pinned` is a fresh allocation of `data.len()` bytes.
    unsafe { std::ptr::copy(data.as_ptr(), pinned, data.len()) };
    // SAFETY: both ranges are live allocations of `rt` of `data.len()` bytes.
    let r = unsafe { rt.copy_to_device(dst, pinned, data.len()) };
    // SAFETY: allocated above; the synchronous copy is done.
    unsafe { rt.free_pinned(pinned) }.unwrap();
    r
}

/// A synchronous copy of `len` bytes out of `src`.
fn copy_out(rt: &dyn GpuRuntime, src: DevicePtr, len: usize) -> Result<Vec<u8>, RuntimeError> {
    let pinned = rt.alloc_pinned(len).unwrap();
    // SAFETY: both ranges are live allocations of `rt` of `len` bytes.
    let r = unsafe { rt.copy_to_host(pinned, src, len) };
    let mut out = vec![0; len];
    // SAFETY: `pinned` holds `len` bytes.
    unsafe { std::ptr::copy(pinned, out.as_mut_ptr(), len) };
    // SAFETY: allocated above; the synchronous copy is done.
    unsafe { rt.free_pinned(pinned) }.unwrap();
    r.map(|()| out)
}

/// `rt`'s AMD file I/O, which the test expects it to have.
fn file_io(rt: &dyn GpuRuntime) -> &dyn AmdFileIo {
    rt.amd_file_io().expect("the runtime has no AMD file I/O")
}

fn read(rt: &dyn GpuRuntime, f: &TempFile, dst: DevicePtr, size: u64) -> Result<u64, FileIoError> {
    // SAFETY: `dst` is device memory of `rt` of at least `size` bytes.
    unsafe { file_io(rt).amd_file_read(f.file.as_raw_fd(), dst, size, 0) }
}

fn write(rt: &dyn GpuRuntime, f: &TempFile, src: DevicePtr, size: u64) -> Result<u64, FileIoError> {
    // SAFETY: `src` is device memory of `rt` of at least `size` bytes.
    unsafe { file_io(rt).amd_file_write(f.file.as_raw_fd(), src, size, 0) }
}

#[test]
fn there_is_a_counter_for_every_call() {
    assert_eq!(Call::AmdFileWrite as usize + 1, Call::COUNT);
}

#[test]
fn without_faults_bytes_move_and_calls_are_counted() {
    let rt = HostMemRuntime::new();
    let data = pattern(10_000, 1);
    let dst = rt.device_with(&[0; 10_000]);
    copy_in(&rt, dst, &data).unwrap();
    assert!(rt.read_device(dst, data.len()) == data);
    assert!(copy_out(&rt, dst, 100).unwrap() == data[..100]);
    let f = TempFile::new(&pattern(8192, 2));
    assert_eq!(read(&rt, &f, dst, 8192).unwrap(), 8192);
    assert!(rt.read_device(dst, 8192) == pattern(8192, 2));
    assert_eq!(rt.calls(Call::CopyToDevice), 1);
    assert_eq!(rt.calls(Call::CopyToHost), 1);
    assert_eq!(rt.calls(Call::AllocPinned), 2);
    assert_eq!(rt.calls(Call::AmdFileRead), 1);
    assert_eq!(rt.live_pinned(), 0);
    assert_eq!(rt.bytes_to_device(0), 10_000);
    assert_eq!(rt.bytes_from_device(0), 100);
}

#[test]
fn the_nth_call_fails_and_only_it() {
    let rt = HostMemRuntime::builder()
        .fault(Fault::on(Call::CopyToDevice).nth(1).fail(999))
        .build();
    let dst = rt.device_with(&[0; 16]);
    assert!(copy_in(&rt, dst, &[1; 16]).is_ok());
    let e = copy_in(&rt, dst, &[2; 16]).unwrap_err();
    assert_eq!((e.call, e.code), ("hipMemcpyAsync", 999));
    assert_eq!(
        rt.read_device(dst, 16),
        [1; 16],
        "a failed copy moved bytes"
    );
    assert!(copy_in(&rt, dst, &[3; 16]).is_ok());
    assert_eq!(rt.read_device(dst, 16), [3; 16]);
    assert_eq!(rt.calls(Call::CopyToDevice), 3, "failed calls count too");
}

#[test]
fn a_fault_added_later_counts_from_the_runtimes_first_call() {
    let rt = HostMemRuntime::new();
    let p = rt.alloc_pinned(8).unwrap();
    // SAFETY: allocated above, not used afterwards.
    unsafe { rt.free_pinned(p) }.unwrap();
    rt.faults().add(
        Fault::on(Call::AllocPinned)
            .nth(1)
            .fail_with(2, "out of memory"),
    );
    let e = rt.alloc_pinned(8).unwrap_err();
    assert_eq!(
        (e.call, e.code, e.message.as_str()),
        ("hipHostMalloc", 2, "out of memory")
    );
    let p = rt.alloc_pinned(8).unwrap();
    // SAFETY: allocated above, not used afterwards.
    unsafe { rt.free_pinned(p) }.unwrap();
}

#[test]
fn every_file_io_call_fails_with_the_errno_until_cleared() {
    let rt = HostMemRuntime::builder()
        .fault(Fault::on_each(&Call::FILE_IO).errno(libc::ENODEV))
        .build();
    let f = TempFile::new(&pattern(4096, 3));
    let buf = rt.device_with(&[7; 4096]);
    for _ in 0..3 {
        assert_eq!(
            read(&rt, &f, buf, 4096),
            Err(FileIoError::Errno(libc::ENODEV))
        );
        assert_eq!(
            write(&rt, &f, buf, 4096),
            Err(FileIoError::Errno(libc::ENODEV))
        );
    }
    assert_eq!(rt.read_device(buf, 4096), [7; 4096]);
    assert!(std::fs::read(&f.path).unwrap() == pattern(4096, 3));
    rt.faults().clear();
    assert_eq!(read(&rt, &f, buf, 4096), Ok(4096));
    assert!(rt.read_device(buf, 4096) == pattern(4096, 3));
}

#[test]
fn a_short_transfer_moves_only_its_bytes() {
    let rt = HostMemRuntime::builder()
        .fault(Fault::on(Call::AmdFileRead).once().short(100))
        .build();
    let f = TempFile::new(&pattern(4096, 4));
    let buf = rt.device_with(&[0; 4096]);
    assert_eq!(read(&rt, &f, buf, 4096), Ok(100));
    let got = rt.read_device(buf, 4096);
    assert!(got[..100] == pattern(100, 4)[..] && got[100..].iter().all(|&b| b == 0));
    assert_eq!(read(&rt, &f, buf, 4096), Ok(4096), "once is once");
}

#[test]
fn file_io_can_be_absent_or_refused() {
    let f = TempFile::new(&[0; 512]);
    let rt = HostMemRuntime::builder().amd_file_io(false).build();
    assert!(rt.amd_file_io().is_none());
    let buf = rt.device_with(&[0; 512]);
    // SAFETY: `buf` is device memory of `rt` of 512 bytes.
    let made_anyway = unsafe { AmdFileIo::amd_file_read(&rt, f.file.as_raw_fd(), buf, 512, 0) };
    assert_eq!(made_anyway, Err(FileIoError::Unavailable));
    let rt = HostMemRuntime::builder()
        .fault(Fault::on(Call::AmdFileWrite).unavailable())
        .build();
    let buf = rt.device_with(&[0; 512]);
    assert!(rt.amd_file_io().is_some());
    assert_eq!(write(&rt, &f, buf, 512), Err(FileIoError::Unavailable));
    rt.faults().add(Fault::on(Call::AmdFileRead).fail(7));
    assert!(matches!(
        read(&rt, &f, buf, 512),
        Err(FileIoError::Runtime(RuntimeError {
            call: "hipAmdFileRead",
            code: 7,
            ..
        }))
    ));
}

#[test]
fn a_fault_touching_an_address_hits_only_copies_over_it() {
    let rt = HostMemRuntime::new();
    let src = rt.device_with(&pattern(3000, 5));
    rt.faults()
        .add(Fault::on(Call::CopyToHost).touching(DevicePtr(src.0 + 2000)));
    assert!(copy_out(&rt, src, 1000).is_ok());
    assert!(copy_out(&rt, DevicePtr(src.0 + 1000), 1000).is_ok());
    assert!(copy_out(&rt, DevicePtr(src.0 + 2000), 1000).is_err());
    assert!(copy_out(&rt, DevicePtr(src.0 + 1001), 1000).is_err());
}

#[test]
fn a_failed_stream_synchronisation_leaves_the_work_queued() {
    let rt = HostMemRuntime::builder()
        .deferred()
        .fault(Fault::on(Call::StreamSynchronize).nth(0).fail(700))
        .build();
    let dst = rt.device_with(&[0; 64]);
    let pinned = rt.alloc_pinned(64).unwrap();
    // SAFETY: `pinned` holds 64 bytes.
    unsafe { std::ptr::write_bytes(pinned, 9, 64) };
    let streams = rt.streams().unwrap();
    let s = streams.stream_create().unwrap();
    // SAFETY: both ranges are live allocations of 64 bytes, until the stream is synchronised.
    unsafe { streams.copy_to_device_async(dst, pinned, 64, s) }.unwrap();
    assert_eq!(
        rt.read_device(dst, 64),
        [0; 64],
        "a deferred copy ran early"
    );
    assert_eq!(streams.stream_synchronize(s).unwrap_err().code, 700);
    assert_eq!(rt.read_device(dst, 64), [0; 64]);
    streams.stream_synchronize(s).unwrap();
    assert_eq!(rt.read_device(dst, 64), [9; 64]);
    streams.stream_destroy(s).unwrap();
    // SAFETY: allocated above; its copy is done.
    unsafe { rt.free_pinned(pinned) }.unwrap();
}

#[test]
fn an_injected_panic_panics_and_the_runtime_goes_on() {
    let rt = HostMemRuntime::builder()
        .fault(
            Fault::on(Call::CopyToDevice)
                .nth(0)
                .panic("injected panic in copy 0"),
        )
        .build();
    let dst = rt.device_with(&[0; 8]);
    let caught =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| copy_in(&rt, dst, &[1; 8])))
            .unwrap_err();
    assert_eq!(
        caught.downcast_ref::<String>().unwrap(),
        "injected panic in copy 0"
    );
    copy_in(&rt, dst, &[2; 8]).unwrap();
    assert_eq!(rt.read_device(dst, 8), [2; 8]);
}

#[test]
#[should_panic(expected = "file-I/O calls only")]
fn a_file_io_action_on_a_copy_is_refused() {
    HostMemRuntime::new()
        .faults()
        .add(Fault::on(Call::CopyToHost).errno(libc::EIO));
}

#[test]
fn a_parked_call_waits_until_released() {
    let rt = Arc::new(HostMemRuntime::new());
    let gate = Gate::new();
    let dst = rt.device_with(&[0; 32]);
    rt.faults().add(
        Fault::on(Call::CopyToDevice)
            .synchronous()
            .once()
            .park(&gate),
    );
    std::thread::scope(|s| {
        let held = s.spawn(|| copy_in(&*rt, dst, &[5; 32]));
        let _release = gate.release_on_drop();
        gate.wait_parked(|| held.is_finished());
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!held.is_finished());
        assert_eq!(rt.read_device(dst, 32), [0; 32], "a parked copy ran");
        // Only the first synchronous copy parks.
        copy_in(&*rt, dst, &[6; 32]).unwrap();
        assert_eq!(rt.read_device(dst, 32), [6; 32]);
        gate.release();
        held.join().unwrap().unwrap();
    });
    assert_eq!(rt.read_device(dst, 32), [5; 32]);
    assert_eq!(gate.parked(), 1);
}

#[test]
#[should_panic(expected = "ended without parking")]
fn waiting_for_a_call_that_never_parks_fails() {
    Gate::new().wait_parked(|| true);
}

#[test]
fn injected_faults_sit_in_front_of_another_runtime() {
    let inner = Arc::new(HostMemRuntime::new());
    let rt = Injected::new(inner.clone());
    let f = TempFile::new(&pattern(4096, 8));
    let buf = inner.device_with(&[0; 4096]);
    rt.faults()
        .add(Fault::on(Call::AmdFileRead).nth(0).errno(libc::EREMOTEIO));
    rt.faults()
        .add(Fault::on(Call::AmdFileRead).nth(1).short(1000));
    assert_eq!(
        read(&rt, &f, buf, 4096),
        Err(FileIoError::Errno(libc::EREMOTEIO))
    );
    assert_eq!(
        inner.calls(Call::AmdFileRead),
        0,
        "a failed call reached the inner runtime"
    );
    assert_eq!(read(&rt, &f, buf, 4096), Ok(1000));
    assert_eq!(read(&rt, &f, buf, 4096), Ok(4096));
    assert!(inner.read_device(buf, 4096) == pattern(4096, 8));
    assert_eq!(rt.calls(Call::AmdFileRead), 3);
    assert_eq!(inner.calls(Call::AmdFileRead), 2);
    rt.faults().add(Fault::on(Call::EventCreate).fail(1));
    let streams = rt.streams().unwrap();
    assert_eq!(streams.event_create().unwrap_err().call, "hipEventCreate");
}

#[test]
fn the_page_cache_shows_a_plain_writes_dirty_pages_or_nothing() {
    let f = TempFile::new(&[]);
    std::os::unix::fs::FileExt::write_all_at(&f.file, &pattern(1 << 16, 9), 0).unwrap();
    // Kernels before 6.5 lack cachestat: then there is nothing to check.
    if let Some(c) = crate::page_cache(&f.file) {
        assert!(c.cache > 0, "{c:?}");
        f.file.sync_all().unwrap();
        assert_eq!(crate::page_cache(&f.file).unwrap().unwritten(), 0);
    }
}

#[test]
fn the_doubles_hand_out_the_capabilities_they_have() {
    let rt = HostMemRuntime::new();
    let streams = rt.streams().expect("streams");
    assert!(streams.host_functions().is_none() && streams.stream_mem_ops().is_none());
    assert!(rt.amd_file_io().is_some());
    // Injected has what the runtime it wraps has, no more.
    let without = Arc::new(HostMemRuntime::builder().amd_file_io(false).build());
    let rt = Injected::new(without);
    assert!(rt.amd_file_io().is_none());
    let streams = rt.streams().expect("streams");
    assert!(streams.host_functions().is_none() && streams.stream_mem_ops().is_none());
}
