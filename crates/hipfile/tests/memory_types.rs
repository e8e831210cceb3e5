//! The memory a driver serves under each rule (docs/BEHAVIOUR.md §3.6), through the emulated
//! runtime on real files: under cuFile's rule (`MemoryTypes::CuFile`), pageable memory,
//! pinned memory and managed memory are read and written by every kind of call (synchronous,
//! future, batch, stream-ordered), registered where the rule registers them, with the bytes
//! checked; under hipFile's (the default) they are refused.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.
#![allow(unsafe_code)] // Describing the test's own memory to hipfile, and finding hipMallocManaged.

use hipfile::{
    BackendKind, BatchIo, BatchStatus, ConfigBuilder, DeviceBuffer, DevicePtr, Driver, Error,
    MemoryKind, MemoryTypes,
};
use hipfile_testfs::{Skip, TempDir, emulated_runtime, require};
use std::ffi::{CString, c_int, c_uint, c_void};
use std::fs::OpenOptions;

const LEN: usize = 3 << 20;

fn driver(rule: MemoryTypes) -> Result<Driver, Skip> {
    let lib = emulated_runtime()?;
    let config = ConfigBuilder::new()
        .hip_library(lib)
        .memory_types(rule)
        .build_with(|_| None)
        .0;
    Ok(Driver::open_private(config).unwrap())
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(9) as u8 ^ seed)
        .collect()
}

/// `hipMallocManaged` of the emulated runtime the driver loaded (the same instance: the
/// loader returns the loaded library for its path), `len` bytes attached globally.
fn managed(len: usize) -> *mut u8 {
    let path = CString::new(
        emulated_runtime()
            .unwrap()
            .into_os_string()
            .into_encoded_bytes(),
    )
    .unwrap();
    // SAFETY: the path names a library the driver has loaded; RTLD_NOLOAD loads nothing.
    let lib = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    assert!(!lib.is_null(), "the emulated runtime is not loaded");
    // SAFETY: `lib` is a live handle; the name is NUL-terminated.
    let sym = unsafe { libc::dlsym(lib, c"hipMallocManaged".as_ptr()) };
    assert!(!sym.is_null());
    type MallocManaged = unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> c_int;
    // SAFETY: the emulated runtime exports `hipMallocManaged` with HIP's signature.
    let malloc_managed: MallocManaged = unsafe { std::mem::transmute(sym) };
    let mut p = std::ptr::null_mut();
    // SAFETY: `p` is writable; 1 is hipMemAttachGlobal.
    assert_eq!(unsafe { malloc_managed(&mut p, len, 1) }, 0);
    // SAFETY: balances the dlopen above; the driver keeps its own reference.
    unsafe { libc::dlclose(lib) };
    p.cast()
}

/// `len` bytes of the test's memory at `p`, copied out.
fn bytes(p: *const u8, len: usize) -> Vec<u8> {
    // SAFETY: every caller passes memory it allocated, of at least `len` bytes, that no
    // request is using.
    unsafe { std::slice::from_raw_parts(p, len) }.to_vec()
}

/// Fills the test's memory at `p` with `data`.
fn fill(p: *mut u8, data: &[u8]) {
    // SAFETY: as in `bytes`, with room for `data`.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
}

/// A buffer over `len` bytes of the test's memory at `p`.
fn describe(d: &Driver, p: *mut u8, len: usize) -> DeviceBuffer {
    // SAFETY: the memory is the test's, allocated until after the buffer and its requests
    // are gone, and nothing else touches it while a request runs.
    unsafe { DeviceBuffer::from_raw(d, DevicePtr(p as u64), len) }
}

/// Every kind of call on the memory at `p` (`LEN` bytes), registered or not: a synchronous
/// write and read back, then a future, a batch and a stream-ordered read, each of a part.
fn every_call(d: &Driver, dir: &TempDir, name: &str, p: *mut u8, register: bool) {
    let path = dir.path().join(name);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    let fh = d.register_file(&file).unwrap();
    let data = pattern(LEN, name.len() as u8);
    fill(p, &data);
    let mut buf = describe(d, p, LEN);
    if register {
        d.register_buffer(&buf).unwrap();
    }
    let wrote = fh.write_at(&buf.slice(..).unwrap(), 4096).unwrap();
    assert_eq!(
        (wrote.bytes, wrote.backend),
        (LEN as u64, BackendKind::Fallback)
    );
    assert!(
        std::fs::read(&path).unwrap()[4096..] == data[..],
        "{name}: the file"
    );

    fill(p, &vec![0; LEN]);
    let read = fh.read_at(&mut buf.slice_mut(..).unwrap(), 4096).unwrap();
    assert_eq!(
        (read.bytes, read.backend),
        (LEN as u64, BackendKind::Fallback)
    );
    assert!(bytes(p, LEN) == data, "{name}: synchronous read");

    // A future, a batch and a stream-ordered read, each into a third, from the file's start.
    fill(p, &vec![0; LEN]);
    let third = LEN / 3;
    let future = fh.read_at_async(buf.slice_mut(..third).unwrap(), 4096);
    assert_eq!(future.wait().unwrap().bytes, third as u64, "{name}: future");
    {
        let mut batch = d.batch(1).unwrap();
        let view = buf.slice_mut(third..2 * third).unwrap();
        batch
            .submit([BatchIo::read(&fh, view, 4096 + third as u64, 7)])
            .unwrap();
        let events = batch.poll(1, 1, None);
        assert_eq!(events.len(), 1);
        assert!(
            matches!(&events[0].status, BatchStatus::Complete(o) if o.bytes == third as u64),
            "{name}: batch {:?}",
            events[0].status
        );
    }
    let stream = d.create_stream().unwrap();
    let view = buf.slice_mut(2 * third..).unwrap();
    let ordered = fh.read_on(&stream, view, 4096 + 2 * third as u64).unwrap();
    assert_eq!(
        ordered.wait().unwrap().bytes,
        third as u64,
        "{name}: stream"
    );
    stream.synchronize().unwrap();
    assert!(
        bytes(p, LEN) == data,
        "{name}: future, batch and stream-ordered reads"
    );

    if register {
        d.deregister_buffer(&buf).unwrap();
    }
}

#[test]
fn cufiles_rule_serves_pageable_and_pinned_host_memory_registered_or_not() {
    let d = require!(driver(MemoryTypes::CuFile));
    let dir = TempDir::new("memory-types-host");
    let mut pageable = vec![0u8; LEN];
    let mut pinned = d.alloc_pinned(LEN).unwrap();
    for register in [false, true] {
        let suffix = if register {
            "registered"
        } else {
            "unregistered"
        };
        every_call(
            &d,
            &dir,
            &format!("pageable-{suffix}"),
            pageable.as_mut_ptr(),
            register,
        );
        every_call(
            &d,
            &dir,
            &format!("pinned-{suffix}"),
            pinned.as_mut_ptr(),
            register,
        );
    }
    assert_eq!(
        d.tuning()
            .gpu()
            .pointer_info(DevicePtr(pinned.as_ptr() as u64))
            .unwrap()
            .memory,
        MemoryKind::Host
    );
}

#[test]
fn cufiles_rule_serves_managed_memory_unregistered_and_refuses_its_registration() {
    let d = require!(driver(MemoryTypes::CuFile));
    let dir = TempDir::new("memory-types-managed");
    let p = managed(LEN);
    every_call(&d, &dir, "managed", p, false);
    let buf = describe(&d, p, LEN);
    let e = d.register_buffer(&buf).unwrap_err();
    assert!(
        matches!(
            e,
            Error::MemoryTypeInvalid {
                memory: MemoryKind::Managed,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("unregistered"), "{e}");
}

#[test]
fn hipfiles_rule_refuses_host_and_managed_memory() {
    let d = require!(driver(MemoryTypes::HipFile));
    let dir = TempDir::new("memory-types-hipfile");
    let file = std::fs::File::create(dir.path().join("f")).unwrap();
    let fh = d.register_file(&file).unwrap();
    let mut pageable = vec![0u8; 4096];
    let mut pinned = d.alloc_pinned(4096).unwrap();
    for p in [pageable.as_mut_ptr(), pinned.as_mut_ptr(), managed(4096)] {
        let buf = describe(&d, p, 4096);
        assert!(matches!(
            d.register_buffer(&buf),
            Err(Error::MemoryTypeInvalid { .. })
        ));
        let e = fh.write_at(&buf.slice(..).unwrap(), 0).unwrap_err();
        assert!(matches!(e, Error::NoBackend { .. }), "{e}");
        assert!(e.to_string().contains("buffer_not_device_memory"), "{e}");
    }
}

#[test]
fn host_memory_described_as_a_buffer_takes_synchronous_copies() {
    let d = require!(driver(MemoryTypes::CuFile));
    let mut pageable = vec![0u8; LEN];
    let mut pinned = d.alloc_pinned(LEN).unwrap();
    for p in [pageable.as_mut_ptr(), pinned.as_mut_ptr()] {
        let mut buf = describe(&d, p, LEN);
        let bytes = pattern(LEN - 100, 5);
        buf.copy_from_host(100, &bytes).unwrap();
        // SAFETY: `p..p+LEN` is this test's live memory, and no copy is in flight.
        let written = unsafe { std::slice::from_raw_parts(p, LEN) };
        assert!(
            written[100..] == bytes[..],
            "copy_from_host did not reach host memory"
        );
        let mut back = vec![0u8; LEN - 100];
        buf.copy_to_host(100, &mut back).unwrap();
        assert!(back == bytes, "copy_to_host did not read host memory");
        assert!(
            buf.copy_from_host(LEN - 1, &[1, 2]).is_err(),
            "a copy past the end"
        );
    }
}
