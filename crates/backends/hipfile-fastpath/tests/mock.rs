//! The fastpath's calls into the runtime, checked with core's mocks (`MockGpuRuntime` for the
//! base, `MockAmdFileIo` for the file I/O): what it passes, `hipInit` once per thread, and how
//! each runtime failure is reported.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile_core::mock::{MockAmdFileIo, MockGpuRuntime, MockRuntime};
use hipfile_core::runtime::FileIoError;
use hipfile_core::{
    Backend, BackendError, BufferFacts, Config, DevicePtr, IoTarget, Op, Reason, Request,
    RuntimeError, Submission,
};
use hipfile_fastpath::Fastpath;
use hipfile_probe::DirectIo;
use hipfile_testkit::fixtures::{BASE, dev_null, device_buffer, xfs_file};
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The buffer every request here is on: 1 MiB of device memory at [`BASE`].
fn buffer() -> BufferFacts {
    device_buffer(BASE, 1 << 20)
}

/// The base and the AMD file I/O of a runtime that has it; the test adds its expectations,
/// then puts them together with [`with_file_io`].
fn runtime() -> (MockGpuRuntime, MockAmdFileIo) {
    (MockGpuRuntime::new(), MockAmdFileIo::new())
}

/// The runtime of `base` with `io` as its AMD file I/O.
fn with_file_io(base: MockGpuRuntime, io: MockAmdFileIo) -> Arc<MockRuntime> {
    Arc::new(MockRuntime::new(base).with_amd_file_io(io))
}

/// Scores and serves `size` bytes at `file_offset` from `buffer_offset` of [`buffer`], with
/// `fd` as the direct descriptor when given.
fn serve(
    fp: &Fastpath,
    op: Op,
    buffer_offset: u64,
    file_offset: u64,
    size: u64,
    fd: Option<&File>,
) -> Result<u64, BackendError> {
    let buffer = buffer();
    // SAFETY: the mock runtime moves no bytes: its file-I/O calls only record what they get.
    let checked = unsafe { hipfile_core::CheckedBuffer::new_unchecked(buffer) };
    let request = Request {
        op,
        size,
        file_offset,
        buffer_offset,
    }
    .validate_checked(&checked)
    .unwrap();
    let mut file = xfs_file();
    if fd.is_none() {
        file.direct = DirectIo::Unavailable(hipfile_probe::NoDirectReason::OpenRejected);
    }
    let s = Submission {
        request: &request,
        file: &file,
        buffer: &buffer,
    };
    let null = File::open("/dev/null").unwrap();
    let target = IoTarget {
        direct: fd.map(|f| f.as_fd()),
        buffered: null.as_fd(),
    };
    fp.io(&s, &target)
}

#[test]
fn a_fastpath_is_shared_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Fastpath>();
}

#[test]
fn passes_the_request_through_and_returns_a_short_count() {
    let file = dev_null();
    let raw = file.as_raw_fd();
    let (mut rt, mut io) = runtime();
    rt.expect_thread_init().times(1).returning(|| Ok(()));
    io.expect_amd_file_read()
        .withf(move |fd, dst, size, offset| {
            (*fd, *dst, *size, *offset) == (raw, DevicePtr(BASE + 4096), 8192, 12288)
        })
        .times(1)
        .returning(|_, _, _, _| Ok(4096));
    io.expect_amd_file_write()
        .withf(move |fd, src, size, offset| {
            (*fd, *src, *size, *offset) == (raw, DevicePtr(BASE), 65536, 0)
        })
        .times(1)
        .returning(|_, _, size, _| Ok(size));
    let fp = Fastpath::with_runtime(&Config::default(), with_file_io(rt, io));
    assert_eq!(
        serve(&fp, Op::Read, 4096, 12288, 8192, Some(&file)).unwrap(),
        4096
    );
    assert_eq!(
        serve(&fp, Op::Write, 0, 0, 65536, Some(&file)).unwrap(),
        65536
    );
}

#[test]
fn calls_thread_init_once_per_thread() {
    const THREADS: usize = 4;
    let file = dev_null();
    let (mut rt, mut io) = runtime();
    rt.expect_thread_init().times(THREADS).returning(|| Ok(()));
    io.expect_amd_file_read()
        .times(3 * THREADS)
        .returning(|_, _, size, _| Ok(size));
    io.expect_amd_file_write()
        .times(THREADS)
        .returning(|_, _, size, _| Ok(size));
    let fp = Fastpath::with_runtime(&Config::default(), with_file_io(rt, io));
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..3 {
                    assert_eq!(serve(&fp, Op::Read, 0, 0, 4096, Some(&file)).unwrap(), 4096);
                }
                assert_eq!(
                    serve(&fp, Op::Write, 0, 0, 4096, Some(&file)).unwrap(),
                    4096
                );
            });
        }
    });
}

#[test]
fn a_failed_thread_init_is_a_runtime_error_and_is_tried_again() {
    let file = dev_null();
    let calls = Arc::new(AtomicUsize::new(0));
    let (mut rt, mut io) = runtime();
    let c = calls.clone();
    rt.expect_thread_init().times(2).returning(move || {
        if c.fetch_add(1, Ordering::SeqCst) == 0 {
            Err(RuntimeError::new(
                "hipInit",
                100,
                "no ROCm-capable device is detected",
            ))
        } else {
            Ok(())
        }
    });
    io.expect_amd_file_read()
        .times(2)
        .returning(|_, _, size, _| Ok(size));
    let fp = Fastpath::with_runtime(&Config::default(), with_file_io(rt, io));
    let e = serve(&fp, Op::Read, 0, 0, 4096, Some(&file)).unwrap_err();
    assert!(
        matches!(&e, BackendError::Runtime(r) if r.call == "hipInit"),
        "{e:?}"
    );
    assert_eq!(e.hip_error(), Some(100));
    assert!(!e.is_retryable());
    for _ in 0..2 {
        assert_eq!(serve(&fp, Op::Read, 0, 0, 4096, Some(&file)).unwrap(), 4096);
    }
}

#[test]
fn runtime_failures_keep_their_kind() {
    let file = dev_null();
    let (mut rt, mut io) = runtime();
    rt.expect_thread_init().returning(|| Ok(()));
    io.expect_amd_file_read().times(1).returning(|_, _, _, _| {
        Err(FileIoError::Runtime(RuntimeError::new(
            "hipAmdFileRead",
            1,
            "invalid argument",
        )))
    });
    io.expect_amd_file_write()
        .times(1)
        .returning(|_, _, _, _| Err(FileIoError::Unavailable));
    let fp = Fastpath::with_runtime(&Config::default(), with_file_io(rt, io));
    let e = serve(&fp, Op::Read, 0, 0, 4096, Some(&file)).unwrap_err();
    assert_eq!(e.hip_error(), Some(1), "{e:?}");
    let e = serve(&fp, Op::Write, 0, 0, 4096, Some(&file)).unwrap_err();
    assert!(
        matches!(&e, BackendError::Unsupported(m) if m.contains("hipAmdFileWrite")),
        "{e:?}"
    );
}

#[test]
fn without_an_o_direct_descriptor_it_calls_nothing() {
    let (mut rt, mut io) = runtime();
    rt.expect_thread_init().never();
    io.expect_amd_file_read().never();
    let fp = Fastpath::with_runtime(&Config::default(), with_file_io(rt, io));
    let e = serve(&fp, Op::Read, 0, 0, 4096, None).unwrap_err();
    assert!(
        matches!(&e, BackendError::Unsupported(m) if m.contains("O_DIRECT")),
        "{e:?}"
    );
}

#[test]
fn size_zero_returns_zero_without_the_runtime() {
    let file = dev_null();
    let (mut rt, mut io) = runtime();
    rt.expect_thread_init().never();
    io.expect_amd_file_read().never();
    io.expect_amd_file_write().never();
    let fp = Fastpath::with_runtime(&Config::default(), with_file_io(rt, io));
    assert_eq!(serve(&fp, Op::Read, 0, 0, 0, Some(&file)).unwrap(), 0);
    assert_eq!(serve(&fp, Op::Write, 0, 0, 0, Some(&file)).unwrap(), 0);
}

#[test]
fn the_runtime_says_whether_it_has_amd_file_io() {
    let rt = MockGpuRuntime::new();
    let fp = Fastpath::with_runtime(&Config::default(), Arc::new(rt));
    let buffer = buffer();
    let request = Request {
        op: Op::Read,
        size: 4096,
        file_offset: 0,
        buffer_offset: 0,
    }
    .validate(&buffer)
    .unwrap();
    let file = xfs_file();
    let v = fp.score(&Submission {
        request: &request,
        file: &file,
        buffer: &buffer,
    });
    assert_eq!(v.reasons(), [Reason::RuntimeLacksAmdFileIo]);
    assert!(format!("{fp:?}").contains("has_runtime: true"));
}

/// A fastpath served without scoring on a runtime without AMD file I/O reports the call as
/// unsupported, as a runtime whose call is missing does.
#[test]
fn without_amd_file_io_a_request_is_unsupported() {
    let file = dev_null();
    let mut rt = MockGpuRuntime::new();
    rt.expect_thread_init().times(1).returning(|| Ok(()));
    let fp = Fastpath::with_runtime(&Config::default(), Arc::new(rt));
    let e = serve(&fp, Op::Read, 0, 0, 4096, Some(&file)).unwrap_err();
    assert!(
        matches!(&e, BackendError::Unsupported(m) if m.contains("hipAmdFileRead")),
        "{e:?}"
    );
}

/// Facts that nobody checked (a made-up length, say) can be scored, but the fastpath moves
/// no bytes for a request validated against them: the runtime is never called.
#[test]
fn no_bytes_move_for_a_request_validated_against_made_up_xfs_file() {
    let (mut rt, mut io) = runtime();
    io.expect_amd_file_read().never();
    io.expect_amd_file_write().never();
    rt.expect_thread_init().never();
    let fp = Fastpath::with_runtime(&Config::default(), with_file_io(rt, io));
    let file = File::open("/dev/null").unwrap();
    let made_up = buffer();
    for op in [Op::Read, Op::Write] {
        let request = Request {
            op,
            size: 1 << 20,
            file_offset: 0,
            buffer_offset: 0,
        }
        .validate(&made_up)
        .unwrap();
        let s = Submission {
            request: &request,
            file: &xfs_file(),
            buffer: &made_up,
        };
        assert!(fp.score(&s).accepted());
        let target = IoTarget {
            direct: Some(file.as_fd()),
            buffered: file.as_fd(),
        };
        let e = fp.io(&s, &target).unwrap_err();
        assert!(e.to_string().contains("did not vouch"), "{e}");
    }
}
