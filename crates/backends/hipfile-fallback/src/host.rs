//! Requests on host memory (pinned by the runtime, registered with it, or pageable), which
//! a driver serves under cuFile's rule (`MemoryTypes::CuFile`): `pread` straight into the
//! buffer and `pwrite` straight from it, on the caller's thread, with no staging buffer and
//! no runtime copy. The CPU reaches such memory itself, so a copy through the staging pool
//! would only move every byte twice.
//!
//! # Safety
//!
//! The buffer's address range comes from a checked request (`ValidRequest::is_checked`):
//! host memory the runtime or its owner vouched for (`hipfile_core::buffer::check_buffer`).
//! It is handed to the kernel as a raw pointer and length, never made into a Rust reference:
//! nothing here reads or writes it, and an address the process cannot access is the kernel's
//! `EFAULT`, not undefined behaviour.

#![allow(unsafe_code)]

use crate::posix::Failed;
use hipfile_core::{BackendError, Op, ValidRequest};
use std::os::fd::{AsRawFd, BorrowedFd};

/// Moves `r` between `fd` and the host memory at `r.address()`: reads until the request is
/// full or the file ends (the bytes read), writes until every byte is written (a failure
/// says how many were). `EINTR` is reissued; a `pwrite` that writes nothing is `EIO`. Does
/// not sync. The caller has made sure that `r` is checked.
pub(crate) fn transfer(r: &ValidRequest, fd: BorrowedFd<'_>) -> Result<u64, Failed> {
    let base = r.address().0;
    let mut done = 0u64;
    while done < r.size() {
        let at = base + done;
        let want = r.size() - done;
        let offset = r.file_offset() + done;
        let n = match r.op() {
            // SAFETY: `at..at + want` lies inside the request's range, host memory vouched for
            // by its checked buffer (module invariant), writable for a read; only the kernel
            // writes it, and `want` is at most `MAX_IO_SIZE`, so it fits a `usize`.
            Op::Read => unsafe {
                libc::pread(
                    fd.as_raw_fd(),
                    at as usize as *mut libc::c_void,
                    want as usize,
                    offset as libc::off_t,
                )
            },
            // SAFETY: as above; the range is only read.
            Op::Write => unsafe {
                libc::pwrite(
                    fd.as_raw_fd(),
                    at as usize as *const libc::c_void,
                    want as usize,
                    offset as libc::off_t,
                )
            },
        };
        match n {
            0 if r.op() == Op::Read => break, // end of file
            0 => return Err(Failed::after(done)(os(r.op(), libc::EIO))),
            n if n > 0 => done += n.unsigned_abs() as u64,
            _ => {
                let errno = std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO);
                if errno != libc::EINTR {
                    return Err(Failed::after(done)(os(r.op(), errno)));
                }
            }
        }
    }
    Ok(done)
}

fn os(op: Op, errno: i32) -> BackendError {
    BackendError::Os {
        call: match op {
            Op::Read => "pread",
            Op::Write => "pwrite",
        },
        errno,
    }
}
