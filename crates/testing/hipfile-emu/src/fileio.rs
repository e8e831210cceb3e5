//! `hipAmdFileRead` and `hipAmdFileWrite`: real `pread`/`pwrite` of an `O_DIRECT` descriptor
//! straight into (or out of) emulated device memory.
//!
//! They are not exported as symbols: as in ROCm ≥ 7.2, only `hipGetProcAddress` hands them
//! out. Because the transfer really is direct I/O into page-aligned memory, the kernel
//! enforces the direct-I/O alignment rules of the file system, and a misaligned request fails
//! with `EINVAL` as on real hardware.
//!
//! Results follow the ROCm implementation: on a failure reported by the (here: emulated)
//! kernel driver, `*status` is the negative errno, `*size_copied` 0 and the function returns
//! `hipErrorUnknown`; argument errors the runtime itself detects (null out-pointers, a range
//! that is not inside one device allocation) return `hipErrorInvalidValue` with `*status` 0.
//! On success `*status` is 0 and `*size_copied` the bytes moved, which is short only at end
//! of file (reads) or when the kernel stops early. A failure after some bytes have moved
//! reports those bytes, as `pread` would; the next call sees the error. Size 0 succeeds at
//! once. While the configuration is invalid both return `hipErrorNotInitialized`, so that no
//! test runs with a fault list silently ignored; without devices (`HIPFILE_EMU_DEVICES=0`),
//! `hipErrorInvalidDevice`.
//!
//! The bytes moved count in the per-device copy counters (`hipfileEmuDeviceCopyBytes`): a read
//! copies into the memory of the buffer's device, a write out of it.
//!
//! # Safety
//!
//! The only memory written is the device range checked against the allocation table (kept
//! alive by the transfer gate for the call) and the two out-pointers.

use crate::config;
use crate::error::{INVALID_VALUE, SUCCESS, UNKNOWN};
use crate::fault::{FaultPlan, Op, count_call, count_injected};
use crate::memory::{Allocation, Kind, count_copied, device_range, transfer_gate};
use std::ffi::{c_int, c_void};

/// The kernel's `MAX_RW_COUNT`: the most one `pread`/`pwrite` moves.
const MAX_RW_COUNT: usize = 0x7fff_f000;

/// `hipAmdFileHandle_t`: `union { void* handle; int fd; uint8_t pad[8]; }`, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub union HipAmdFileHandle {
    /// The Windows handle.
    pub handle: *mut c_void,
    /// The Linux file descriptor.
    pub fd: c_int,
    /// The union's size.
    pub pad: [u8; 8],
}

impl HipAmdFileHandle {
    /// The handle of descriptor `fd`, its other bytes zero.
    pub fn from_fd(fd: c_int) -> HipAmdFileHandle {
        let mut h = HipAmdFileHandle { pad: [0; 8] };
        h.fd = fd;
        h
    }
}

/// The C type of `hipAmdFileRead` and `hipAmdFileWrite`.
pub type HipAmdFileIoFn = unsafe extern "C" fn(
    handle: HipAmdFileHandle,
    device_ptr: *mut c_void,
    size: u64,
    file_offset: i64,
    size_copied: *mut u64,
    status: *mut i32,
) -> i32;

/// Why a transfer failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoFailure {
    /// An error the runtime detects itself: this `hipError_t`, status 0.
    Hip(i32),
    /// A failure of the (emulated) kernel driver: this positive errno.
    Errno(i32),
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// One file-I/O call without the C out-pointers: checks, draws a fault from `faults`, moves
/// the bytes and counts them for the buffer's device. Returns the bytes moved.
///
/// # Errors
///
/// See the module documentation.
///
/// # Safety
///
/// None beyond the checks it makes: `ptr` is used only if the table says it is device memory.
pub unsafe fn transfer(
    op: Op,
    fd: c_int,
    ptr: *mut c_void,
    size: u64,
    offset: i64,
    faults: &FaultPlan,
) -> Result<u64, IoFailure> {
    if size == 0 {
        return Ok(0);
    }
    let len = usize::try_from(size).map_err(|_| IoFailure::Hip(INVALID_VALUE))?;
    let _gate = transfer_gate();
    let Some(Allocation {
        kind: Kind::Device { device },
        ..
    }) = device_range(ptr as usize, len)
    else {
        return Err(IoFailure::Hip(INVALID_VALUE));
    };
    let fits = i64::try_from(len).ok().and_then(|l| offset.checked_add(l));
    if offset < 0 || fits.is_none() {
        return Err(IoFailure::Errno(libc::EINVAL));
    }
    // SAFETY: F_GETFL reads the descriptor's flags and nothing else, for any integer.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags == -1 {
        return Err(IoFailure::Errno(last_errno()));
    }
    if flags & libc::O_DIRECT == 0 {
        return Err(IoFailure::Errno(libc::EINVAL));
    }
    if let Some(errno) = faults.draw(op) {
        count_injected(op);
        return Err(IoFailure::Errno(errno));
    }
    let base = ptr.cast::<u8>();
    let mut done = 0usize;
    while done < len {
        let chunk = (len - done).min(MAX_RW_COUNT);
        // `done < len` and `offset + len` fits, so neither conversion nor sum can fail.
        let at = offset + done as i64;
        // SAFETY: `base + done .. + chunk` lies inside the device allocation checked above,
        // which the gate keeps alive until this function returns.
        let n = unsafe {
            let p = base.add(done).cast::<c_void>();
            match op {
                Op::Read => libc::pread(fd, p, chunk, at),
                Op::Write => libc::pwrite(fd, p.cast_const(), chunk, at),
            }
        };
        match n {
            0 => break,
            n if n > 0 => done += n.unsigned_abs(),
            _ => {
                let errno = last_errno();
                if errno == libc::EINTR {
                    continue;
                }
                if done > 0 {
                    break;
                }
                return Err(IoFailure::Errno(errno));
            }
        }
    }
    let done = done as u64;
    match op {
        Op::Read => count_copied(Some(device), None, done),
        Op::Write => count_copied(None, Some(device), done),
    }
    Ok(done)
}

/// The C entry points' shared body.
///
/// # Safety
///
/// `size_copied` and `status` are null or writable.
unsafe fn file_io(
    op: Op,
    handle: HipAmdFileHandle,
    ptr: *mut c_void,
    size: u64,
    offset: i64,
    size_copied: *mut u64,
    status: *mut i32,
) -> i32 {
    if size_copied.is_null() || status.is_null() {
        return INVALID_VALUE;
    }
    // SAFETY: both non-null and writable by the caller's promise.
    unsafe {
        size_copied.write(0);
        status.write(0);
    }
    let config = match config::with_device() {
        Ok(c) => c,
        Err(e) => return e,
    };
    count_call(op);
    // SAFETY: every field is initialised (the handle is 8 bytes); on Linux the fd is its
    // meaning.
    let fd = unsafe { handle.fd };
    // SAFETY: `transfer` checks `ptr` itself.
    match unsafe { transfer(op, fd, ptr, size, offset, &config.faults) } {
        Ok(n) => {
            // SAFETY: as above.
            unsafe { size_copied.write(n) };
            SUCCESS
        }
        Err(IoFailure::Hip(code)) => code,
        Err(IoFailure::Errno(errno)) => {
            // SAFETY: as above.
            unsafe { status.write(-errno) };
            UNKNOWN
        }
    }
}

/// `hipError_t hipAmdFileRead(hipAmdFileHandle_t handle, void* devicePtr, uint64_t size,
/// int64_t file_offset, uint64_t* size_copied, int32_t* status)`.
///
/// # Safety
///
/// `size_copied` and `status` are null or writable.
unsafe extern "C" fn amd_file_read(
    handle: HipAmdFileHandle,
    device_ptr: *mut c_void,
    size: u64,
    file_offset: i64,
    size_copied: *mut u64,
    status: *mut i32,
) -> i32 {
    // SAFETY: the caller's promise is `file_io`'s.
    unsafe {
        file_io(
            Op::Read,
            handle,
            device_ptr,
            size,
            file_offset,
            size_copied,
            status,
        )
    }
}

/// `hipError_t hipAmdFileWrite(hipAmdFileHandle_t handle, void* devicePtr, uint64_t size,
/// int64_t file_offset, uint64_t* size_copied, int32_t* status)`.
///
/// # Safety
///
/// `size_copied` and `status` are null or writable.
unsafe extern "C" fn amd_file_write(
    handle: HipAmdFileHandle,
    device_ptr: *mut c_void,
    size: u64,
    file_offset: i64,
    size_copied: *mut u64,
    status: *mut i32,
) -> i32 {
    // SAFETY: the caller's promise is `file_io`'s.
    unsafe {
        file_io(
            Op::Write,
            handle,
            device_ptr,
            size,
            file_offset,
            size_copied,
            status,
        )
    }
}

/// `hipAmdFileRead`, for `hipGetProcAddress`.
pub(crate) const READ: HipAmdFileIoFn = amd_file_read;
/// `hipAmdFileWrite`, for `hipGetProcAddress`.
pub(crate) const WRITE: HipAmdFileIoFn = amd_file_write;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MAX_DEVICES;
    use crate::device::set_device;
    use crate::fault::parse_faults;
    use crate::memory::{counters_lock, device_copy_bytes, hipFree, hipMalloc};
    use hipfile_testfs::{Skip, require};
    use std::fs::File;
    use std::io::Write as _;
    use std::os::fd::AsRawFd as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    use std::ptr::null_mut;

    #[test]
    fn handle_layout_matches_the_abi() {
        assert_eq!(std::mem::size_of::<HipAmdFileHandle>(), 8);
        assert_eq!(std::mem::align_of::<HipAmdFileHandle>(), 8);
        let h = HipAmdFileHandle::from_fd(7);
        // SAFETY: all 8 bytes were initialised.
        assert_eq!(unsafe { h.pad }, [7, 0, 0, 0, 0, 0, 0, 0]);
    }

    fn device_alloc(len: usize) -> *mut c_void {
        let mut p = null_mut();
        // SAFETY: `p` is writable.
        assert_eq!(unsafe { hipMalloc(&mut p, len) }, SUCCESS);
        p
    }

    fn scratch(name: &str, direct: bool) -> Result<(hipfile_testfs::TempDir, File), Skip> {
        let dir = hipfile_testfs::TempDir::new(name);
        let path = dir.path().join("data");
        File::create(&path)
            .unwrap()
            .write_all(&[0x5A; 8192])
            .unwrap();
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true);
        if direct {
            options.custom_flags(libc::O_DIRECT);
        }
        match options.open(&path) {
            Ok(f) => Ok((dir, f)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Err(Skip(format!(
                "{} does not support O_DIRECT",
                dir.path().display()
            ))),
            Err(e) => panic!("cannot open {}: {e}", path.display()),
        }
    }

    #[test]
    fn the_buffer_must_be_one_device_allocation() {
        let p = device_alloc(4096);
        let plan = FaultPlan::default();
        let mut host = vec![0u8; 4096];
        // SAFETY: the ranges are checked before any use; nothing is transferred.
        unsafe {
            for (ptr, size) in [
                (p.wrapping_byte_add(1), 4096),
                (host.as_mut_ptr().cast(), 512),
            ] {
                assert_eq!(
                    transfer(Op::Read, -1, ptr, size, 0, &plan),
                    Err(IoFailure::Hip(INVALID_VALUE))
                );
            }
            assert_eq!(
                transfer(Op::Write, -1, p, 0, -5, &plan),
                Ok(0),
                "size 0 succeeds"
            );
            assert_eq!(hipFree(p), SUCCESS);
        }
    }

    #[test]
    fn descriptors_are_checked() {
        let p = device_alloc(4096);
        let plan = FaultPlan::default();
        // SAFETY: nothing is transferred: each descriptor check fails first.
        unsafe {
            assert_eq!(
                transfer(Op::Read, -1, p, 4096, 0, &plan),
                Err(IoFailure::Errno(libc::EBADF))
            );
            assert_eq!(
                transfer(Op::Read, 0, p, 4096, -4096, &plan),
                Err(IoFailure::Errno(libc::EINVAL))
            );
        }
        let (_dir, buffered) = scratch("emu-buffered", false).unwrap();
        // SAFETY: refused: the descriptor lacks O_DIRECT.
        let r = unsafe { transfer(Op::Read, buffered.as_raw_fd(), p, 4096, 0, &plan) };
        assert_eq!(r, Err(IoFailure::Errno(libc::EINVAL)));
        // SAFETY: the test's own allocation.
        assert_eq!(unsafe { hipFree(p) }, SUCCESS);
    }

    #[test]
    fn direct_reads_and_writes_move_bytes_and_faults_stop_them() {
        let (_dir, file) = require!(scratch("emu-direct", true));
        let fd = file.as_raw_fd();
        let p = device_alloc(8192);
        let plan = FaultPlan::new(parse_faults("read:ENODEV:1,write:ENOSPC:1").unwrap());
        // SAFETY: `p` is an 8192-byte device allocation, live until the end.
        unsafe {
            assert_eq!(
                transfer(Op::Read, fd, p, 8192, 0, &plan),
                Err(IoFailure::Errno(libc::ENODEV))
            );
            assert_eq!(transfer(Op::Read, fd, p, 8192, 0, &plan), Ok(8192));
            let bytes = std::slice::from_raw_parts_mut(p.cast::<u8>(), 8192);
            assert!(bytes.iter().all(|&b| b == 0x5A));
            bytes[..4096].fill(0x11);
            assert_eq!(
                transfer(Op::Write, fd, p, 4096, 4096, &plan),
                Err(IoFailure::Errno(libc::ENOSPC))
            );
            assert_eq!(transfer(Op::Write, fd, p, 4096, 4096, &plan), Ok(4096));
            // Reads stop short at end of file.
            assert_eq!(transfer(Op::Read, fd, p, 8192, 4096, &plan), Ok(4096));
            assert!(bytes[..4096].iter().all(|&b| b == 0x11));
            assert_eq!(transfer(Op::Read, fd, p, 4096, 1 << 20, &plan), Ok(0));
            assert_eq!(hipFree(p), SUCCESS);
        }
    }

    #[test]
    fn file_io_counts_bytes_for_the_buffer_device() {
        let (_dir, file) = require!(scratch("emu-counted", true));
        let fd = file.as_raw_fd();
        // A thread of its own, so that no other test sees its current device.
        std::thread::spawn(move || {
            let _counters = counters_lock();
            assert_eq!(set_device(13, MAX_DEVICES), Ok(()));
            let p = device_alloc(8192);
            // The buffer's device counts, not the current one.
            assert_eq!(set_device(0, MAX_DEVICES), Ok(()));
            let copied = || device_copy_bytes(13, MAX_DEVICES).unwrap();
            let plan = FaultPlan::new(parse_faults("read:EIO:1").unwrap());
            let before = copied();
            // SAFETY: `p` is an 8192-byte device allocation, live until the end.
            unsafe {
                assert_eq!(
                    transfer(Op::Read, fd, p, 8192, 0, &plan),
                    Err(IoFailure::Errno(libc::EIO))
                );
                assert_eq!(copied(), before, "a faulted read moved nothing");
                assert_eq!(transfer(Op::Read, fd, p, 8192, 0, &plan), Ok(8192));
                assert_eq!(transfer(Op::Write, fd, p, 4096, 4096, &plan), Ok(4096));
                // Short at end of file: only what moved counts.
                assert_eq!(transfer(Op::Read, fd, p, 8192, 4096, &plan), Ok(4096));
                assert_eq!(hipFree(p), SUCCESS);
            }
            let after = copied();
            assert_eq!(after.0 - before.0, 8192 + 4096, "read into device 13");
            assert_eq!(after.1 - before.1, 4096, "written out of device 13");
        })
        .join()
        .unwrap();
    }
}
