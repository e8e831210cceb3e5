//! The fastpath's I/O on real `O_DIRECT` descriptors (opened by the registration probe) in the
//! system's temporary directory, with the testkit's `HostMemRuntime` standing in for the GPU:
//! its `hipAmdFileRead`/`hipAmdFileWrite` `pread`/`pwrite` the descriptor, so the kernel
//! enforces the direct-I/O rules as the kernel driver does on hardware.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile_core::{BackendError, Config, DevicePtr, GpuRuntime, IoTarget, Op, Reason, Verdict};
use hipfile_fastpath::Fastpath;
use hipfile_probe::{ProbedFile, probe_fd};
use hipfile_testfs::{Skip, TempDir, require};
use hipfile_testkit::fixtures::{Io, pattern, score_and_serve};
use hipfile_testkit::{Call, Fault, HostMemRuntime};
use std::fs::{File, OpenOptions};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;

/// A test runtime that fails the test if the fastpath makes a call it never needs: it leaves
/// the current device alone and moves no byte through the host.
fn runtime() -> HostMemRuntime {
    HostMemRuntime::builder()
        .fault(
            Fault::on_each(&[
                Call::SetDevice,
                Call::FreeDevice,
                Call::AllocPinned,
                Call::FreePinned,
                Call::StreamCreate,
                Call::EventCreate,
                Call::CopyToDevice,
                Call::CopyToHost,
            ])
            .panic("the fastpath made a call it never needs"),
        )
        .build()
}

/// How many file-I/O calls `rt` had.
fn file_io_calls(rt: &HostMemRuntime) -> usize {
    rt.calls(Call::AmdFileRead) + rt.calls(Call::AmdFileWrite)
}

/// A file in a fresh directory, registered as hipfile registers it (with its `O_DIRECT`
/// descriptor).
struct DirectFile {
    path: PathBuf,
    file: File,
    probed: ProbedFile,
    _dir: TempDir,
}

impl DirectFile {
    fn new(what: &str, contents: &[u8]) -> Result<DirectFile, Skip> {
        let dir = TempDir::new(what);
        let path = dir.path().join("f");
        std::fs::write(&path, contents).unwrap();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let probed = probe_fd(file.as_fd()).unwrap();
        if probed.direct_fd.is_none() {
            return Err(Skip(format!(
                "{} does not do direct I/O: {:?}",
                dir.path().display(),
                probed.facts.direct
            )));
        }
        Ok(DirectFile {
            path,
            file,
            probed,
            _dir: dir,
        })
    }

    fn target(&self) -> IoTarget<'_> {
        let caller = self.file.as_fd();
        IoTarget {
            direct: self.probed.direct_fd.as_ref().map(|d| d.as_fd(caller)),
            buffered: self.probed.buffered_fd.as_fd(caller),
        }
    }
}

/// The configuration: any filesystem that does direct I/O will do for these tests.
fn config() -> Config {
    let mut c = Config::default();
    c.unsupported_file_systems = true;
    c
}

/// Validates one request as core does, scores it and runs it: `size` bytes at `file_offset`,
/// at `buffer_offset` into the device buffer `base` (registered with `len`).
#[allow(clippy::too_many_arguments)]
fn run(
    fp: &Fastpath,
    rt: &dyn GpuRuntime,
    f: &DirectFile,
    op: Op,
    base: DevicePtr,
    len: u64,
    buffer_offset: u64,
    file_offset: u64,
    size: u64,
) -> (Verdict, Result<u64, BackendError>) {
    let io = Io::new(op, base, len, buffer_offset, file_offset, size);
    score_and_serve(fp, rt, &f.probed.facts, &f.target(), io)
}

#[test]
fn aligned_reads_and_writes_move_the_bytes() {
    let f = require!(DirectFile::new("fastpath-aligned", &[]));
    let rt = Arc::new(runtime());
    let fp = Fastpath::with_runtime(&config(), rt.clone());
    let size = 1 << 20;
    let data = pattern(size, 1);
    let src = rt.device_with(&data);

    let (verdict, wrote) = run(
        &fp,
        &*rt,
        &f,
        Op::Write,
        src,
        size as u64,
        0,
        8192,
        size as u64,
    );
    assert!(verdict.accepted(), "{verdict:?}");
    assert_eq!(wrote.unwrap(), size as u64);
    let mut on_disk = vec![0; size];
    File::open(&f.path)
        .unwrap()
        .read_exact_at(&mut on_disk, 8192)
        .unwrap();
    assert!(on_disk == data, "the file differs after the write");

    let dst = rt.device_with(&vec![0; size + 4096]);
    let (verdict, read) = run(
        &fp,
        &*rt,
        &f,
        Op::Read,
        dst,
        (size + 4096) as u64,
        4096,
        8192,
        size as u64,
    );
    assert!(verdict.accepted(), "{verdict:?}");
    assert_eq!(read.unwrap(), size as u64);
    let back = rt.read_device(dst, size + 4096);
    assert!(
        back[4096..] == data[..],
        "the device buffer differs after the read"
    );
    assert!(back[..4096].iter().all(|&b| b == 0));
    // hipInit once for this thread, however many requests it makes.
    assert_eq!(rt.calls(Call::ThreadInit), 1);
}

#[test]
fn a_read_past_the_end_returns_the_short_count() {
    let data = pattern(8192, 2);
    let f = require!(DirectFile::new("fastpath-short", &data));
    let rt = Arc::new(runtime());
    let fp = Fastpath::with_runtime(&config(), rt.clone());
    let dst = rt.device_with(&vec![0; 16384]);
    let (_, read) = run(&fp, &*rt, &f, Op::Read, dst, 16384, 0, 4096, 16384);
    assert_eq!(read.unwrap(), 4096);
    assert!(rt.read_device(dst, 4096) == data[4096..]);
    let (_, read) = run(&fp, &*rt, &f, Op::Read, dst, 16384, 0, 8192, 4096);
    assert_eq!(read.unwrap(), 0);
}

#[test]
fn misaligned_direct_io_is_einval_from_the_kernel() {
    let f = require!(DirectFile::new("fastpath-misaligned", &pattern(16384, 3)));
    let rt = Arc::new(runtime());
    let fp = Fastpath::with_runtime(&config(), rt.clone());
    let buf = rt.device_with(&vec![0; 16384]);

    // Scoring would refuse these; run anyway, the kernel decides as it does on hardware.
    let (verdict, read) = run(&fp, &*rt, &f, Op::Read, buf, 16384, 1, 0, 4096);
    assert!(verdict.reasons().contains(&Reason::BufferAddressMisaligned));
    let e = read.unwrap_err();
    assert_eq!(
        e,
        BackendError::Os {
            call: "hipAmdFileRead",
            errno: libc::EINVAL
        }
    );
    assert!(!e.is_retryable());

    let (verdict, wrote) = run(&fp, &*rt, &f, Op::Write, buf, 16384, 0, 1, 4096);
    assert!(verdict.reasons().contains(&Reason::FileOffsetMisaligned));
    assert_eq!(
        wrote.unwrap_err(),
        BackendError::Os {
            call: "hipAmdFileWrite",
            errno: libc::EINVAL
        }
    );
}

#[test]
fn kernel_driver_errnos_stay_errnos_so_core_can_retry() {
    let f = require!(DirectFile::new("fastpath-enodev", &pattern(8192, 4)));
    let rt = Arc::new(runtime());
    let fp = Fastpath::with_runtime(&config(), rt.clone());
    let buf = rt.device_with(&vec![0; 8192]);
    for (errno, op, call) in [
        (libc::ENODEV, Op::Read, "hipAmdFileRead"),
        (libc::EREMOTEIO, Op::Write, "hipAmdFileWrite"),
        (libc::EIO, Op::Read, "hipAmdFileRead"),
    ] {
        rt.faults().clear();
        rt.faults().add(Fault::on_each(&Call::FILE_IO).errno(errno));
        let (verdict, r) = run(&fp, &*rt, &f, op, buf, 8192, 0, 0, 8192);
        assert!(verdict.accepted(), "{verdict:?}");
        let e = r.unwrap_err();
        assert_eq!(e, BackendError::Os { call, errno });
        assert_eq!(e.is_retryable(), errno != libc::EIO, "{e}");
    }
}

#[test]
fn an_interrupted_call_is_issued_again() {
    let data = pattern(8192, 6);
    let f = require!(DirectFile::new("fastpath-eintr", &data));
    let rt = Arc::new(runtime());
    let fp = Fastpath::with_runtime(&config(), rt.clone());
    let buf = rt.device_with(&vec![0; 8192]);
    for op in [Op::Read, Op::Write] {
        rt.faults().clear();
        // Interrupted twice, then served: EINTR is not a failure (BEHAVIOUR.md §1.9).
        rt.faults()
            .add(Fault::on_each(&Call::FILE_IO).once().errno(libc::EINTR));
        rt.faults()
            .add(Fault::on_each(&Call::FILE_IO).once().errno(libc::EINTR));
        let before = file_io_calls(&rt);
        let (verdict, r) = run(&fp, &*rt, &f, op, buf, 8192, 0, 0, 8192);
        assert!(verdict.accepted(), "{verdict:?}");
        assert_eq!(r.unwrap(), 8192, "{op:?}");
        assert_eq!(file_io_calls(&rt) - before, 3, "{op:?}");
    }
    assert!(rt.read_device(buf, 8192) == data);
}

#[test]
fn size_zero_calls_nothing() {
    let f = require!(DirectFile::new("fastpath-zero", &[]));
    let rt = Arc::new(runtime());
    let fp = Fastpath::with_runtime(&config(), rt.clone());
    let buf = rt.device_with(&[0; 4096]);
    for op in [Op::Read, Op::Write] {
        assert_eq!(run(&fp, &*rt, &f, op, buf, 4096, 0, 0, 0).1.unwrap(), 0);
    }
    assert_eq!(file_io_calls(&rt), 0);
    assert_eq!(rt.calls(Call::ThreadInit), 0);
}

#[test]
fn a_fastpath_without_a_runtime_only_scores() {
    let f = require!(DirectFile::new("fastpath-scoring-only", &pattern(4096, 5)));
    let rt = runtime();
    let fp = Fastpath::new(&config(), true);
    let buf = rt.device_with(&[0; 4096]);
    let (verdict, r) = run(&fp, &rt, &f, Op::Read, buf, 4096, 0, 0, 4096);
    assert!(verdict.accepted(), "{verdict:?}");
    let e = r.unwrap_err();
    assert!(
        matches!(&e, BackendError::Unsupported(m) if m.contains("without a GPU runtime")),
        "{e:?}"
    );
    assert_eq!(file_io_calls(&rt), 0);
}

#[test]
fn host_and_managed_memory_are_refused_with_a_reason_and_never_reached() {
    let f = require!(DirectFile::new("fastpath-host-memory", &pattern(4096, 5)));
    let rt = Arc::new(runtime());
    let fp = Fastpath::with_runtime(&config(), rt.clone());
    let managed = rt.managed_with(&[0; 4096]);
    let mut pageable = vec![0u8; 8192];
    // 4096-aligned, so that only the kind of memory stands in the way.
    let aligned = pageable
        .as_mut_ptr()
        .wrapping_add(pageable.as_ptr().align_offset(4096));
    for base in [managed, DevicePtr(aligned as u64)] {
        // Under cuFile's rule, which the fallback serves them by.
        let io = Io::new(Op::Read, base, 4096, 0, 0, 4096)
            .under(hipfile_core::MemoryTypes::CuFile)
            .unregistered();
        let (verdict, r) = score_and_serve(&fp, &*rt, &f.probed.facts, &f.target(), io);
        assert_eq!(
            verdict.reasons(),
            &[Reason::BufferNotDeviceMemory],
            "{base}"
        );
        // Served whatever the score: `io` itself refuses what is not device memory.
        let e = r.unwrap_err();
        assert!(
            matches!(&e, BackendError::Unsupported(m) if m.contains("device memory only")),
            "{e:?}"
        );
    }
    assert_eq!(file_io_calls(&rt), 0);
}
