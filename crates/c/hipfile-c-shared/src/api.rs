//! The functions of hipFile's C ABI, each `extern "C"` with the header's signature and its
//! body inside [`boundary`](crate::panic::boundary). Not exported here: the libraries export them.
//!
//! # Safety
//!
//! The pointers these functions receive are the caller's, as hipFile's contract describes
//! them; each is checked for NULL before use. Handles are looked up in the registry by
//! address and never dereferenced; buffer pointers are handed to the facade only after the
//! runtime has said what memory they are and the driver's rule (`Config::memory_types`:
//! hipFile's, device memory only, unless the library chose cuFile's) accepts it
//! (registration, or the per-call check of an unregistered pointer). Host memory the runtime
//! does not know is bounded by the caller's own numbers (its registered length, or the
//! call's offset and size), as `pread` trusts its caller's.

use crate::codes::{describe, hip_failure, io_failure, negated, set_errno, status};
use crate::panic::boundary;
use crate::state::{self, Buffer, File};
use crate::types::*;
use facade::core::buffer::usable_len;
use facade::{DeviceBuffer, DevicePtr, Driver, Error, FileHandle};
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::os::fd::BorrowedFd;
use std::sync::{Arc, PoisonError, RwLock};

const INTERNAL: hipFileError_t = hipFileError_t::code(hipFileInternalError);

/// `const char *hipFileGetOpErrorString(hipFileOpError_t status)` — a static description of
/// `status`, hipFile's text for it; `"Unknown hipFile error"` for a value that is not a code.
pub extern "C" fn hipFileGetOpErrorString(status: hipFileOpError_t) -> *const c_char {
    boundary(describe(hipFileInternalError).as_ptr(), || {
        describe(status).as_ptr()
    })
}

/// `hipFileError_t hipFileDriverOpen(void)` — opens the process-wide driver if the use count
/// is 0, and adds 1 to the count.
///
/// # Errors
///
/// `hipFileDriverNotInitialized` when no GPU runtime can be loaded; the count is unchanged.
pub extern "C" fn hipFileDriverOpen() -> hipFileError_t {
    boundary(INTERNAL, || {
        let mut st = state::lock();
        match st.driver() {
            Ok(d) => {
                st.driver = Some(d);
                st.count += 1;
                hipFileError_t::SUCCESS
            }
            Err(e) => e,
        }
    })
}

/// `hipFileError_t hipFileDriverClose(void)` — takes 1 from the use count; at 0, ends every
/// buffer registration, then every file registration, and lets go of the driver.
///
/// # Errors
///
/// `hipFileDriverNotInitialized` when the count is 0 already.
pub extern "C" fn hipFileDriverClose() -> hipFileError_t {
    boundary(INTERNAL, || {
        let files = {
            let mut st = state::lock();
            if st.count == 0 {
                return hipFileError_t::code(hipFileDriverNotInitialized);
            }
            st.count -= 1;
            if st.count > 0 {
                return hipFileError_t::SUCCESS;
            }
            st.clear()
        };
        // Outside the lock: closing the descriptors the registrations opened.
        drop(files);
        hipFileError_t::SUCCESS
    })
}

/// `int64_t hipFileUseCount(void)` — the use count; -1 on an internal fault.
pub extern "C" fn hipFileUseCount() -> i64 {
    boundary(-1, || state::lock().count)
}

/// `hipFileError_t hipFileGetVersion(unsigned *major, unsigned *minor, unsigned *patch)` —
/// stores the interface version (`HIPFILE_VERSION_*`) in each non-NULL argument. Does not
/// open the driver.
///
/// # Safety
///
/// Each argument is NULL or points to writable `unsigned` storage.
pub unsafe extern "C" fn hipFileGetVersion(
    major: *mut c_uint,
    minor: *mut c_uint,
    patch: *mut c_uint,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        for (out, value) in [
            (major, HIPFILE_VERSION_MAJOR),
            (minor, HIPFILE_VERSION_MINOR),
            (patch, HIPFILE_VERSION_PATCH),
        ] {
            if !out.is_null() {
                // SAFETY: non-NULL, and the caller vouches that it is writable.
                unsafe { out.write(value) };
            }
        }
        hipFileError_t::SUCCESS
    })
}

/// `hipFileError_t hipFileHandleRegister(hipFileHandle_t *fh, hipFileDescr_t *descr)` —
/// registers the descriptor `descr->handle.fd` (duplicated: the caller keeps its own) and
/// stores the new handle in `*fh`. Opens the driver when the count is 0 (0 becomes 1) once
/// the registration succeeds.
///
/// # Errors
///
/// `hipFileInvalidValue` for a NULL argument; `hipFileIONotSupported` for a type other than
/// `hipFileHandleTypeOpaqueFD`; `hipFileHandleAlreadyRegistered` for a descriptor registered
/// already; `hipFileInternalError` (with `errno`) when the descriptor is not open or cannot
/// be examined or reopened; `hipFileInvalidFileType` / `hipFileInvalidFileOpenFlag` for
/// descriptors that cannot be read at an offset; `hipFileDriverNotInitialized` when no
/// runtime can be loaded. The count stays as it was on any error.
///
/// # Safety
///
/// `fh` is NULL or writable; `descr` is NULL or points to a `hipFileDescr_t`.
pub unsafe extern "C" fn hipFileHandleRegister(
    fh: *mut hipFileHandle_t,
    descr: *mut hipFileDescr_t,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        if fh.is_null() || descr.is_null() {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        // SAFETY: non-NULL, and the caller vouches that it points to a hipFileDescr_t.
        let d = unsafe { descr.read() };
        if d.type_ != hipFileHandleTypeOpaqueFD {
            return hipFileError_t::code(hipFileIONotSupported);
        }
        // SAFETY: for the descriptor type, C sets the `fd` member, which any bit pattern
        // makes a valid `int`.
        let fd = unsafe { d.handle.fd };
        // SAFETY: F_GETFD only asks about the descriptor number; any value is allowed.
        if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            set_errno(libc::EBADF);
            return INTERNAL;
        }
        // SAFETY: `fd` is open (checked just now) and stays open for this call, which is
        // all the borrow lasts: the facade duplicates it.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let mut st = state::lock();
        let driver = match st.driver() {
            Ok(d) => d,
            Err(e) => return e,
        };
        let file = match driver.register_file(&borrowed) {
            Ok(handle) => Box::new(File { fh: handle }),
            Err(e) => return status(&e),
        };
        let addr = &*file as *const File as usize;
        st.files.insert(addr, file);
        st.implicit_open(driver);
        // SAFETY: non-NULL, and the caller vouches that it is writable.
        unsafe { fh.write(addr as hipFileHandle_t) };
        hipFileError_t::SUCCESS
    })
}

/// `void hipFileHandleDeregister(hipFileHandle_t fh)` — ends the registration of `fh`.
/// Silent for NULL, for a handle that is not registered, and while I/O uses the file (it
/// stays registered then). The use count is unchanged.
pub extern "C" fn hipFileHandleDeregister(fh: hipFileHandle_t) {
    boundary((), || {
        let removed = {
            let mut st = state::lock();
            let addr = fh as usize;
            match st.file(addr) {
                Some(f) if f.fh.deregister().is_ok() => st.files.remove(&addr),
                _ => None,
            }
        };
        drop(removed);
    })
}

/// `hipFileError_t hipFileBufRegister(const void *buffer_base, size_t length, int flags)` —
/// registers `length` bytes of device memory at `buffer_base` (or of host memory, under
/// cuFile's rule). `flags` is ignored. Opens the driver first when the count is 0 (0
/// becomes 1, whatever the arguments).
///
/// # Errors
///
/// `hipFileInvalidValue` for NULL or a length of 0; `hipFileMemoryAlreadyRegistered`;
/// `hipFileHipMemoryTypeInvalid` when the driver's rule does not register the memory (not
/// device memory; under cuFile's rule, managed memory);
/// `hipFileHipPointerRangeError` when the range leaves its allocation;
/// `hipFileHipDriverError` with the HIP status when the runtime cannot say;
/// `hipFileDriverNotInitialized` when no runtime can be loaded.
///
/// # Safety
///
/// `buffer_base..buffer_base+length`, if it is memory the rule registers, stays allocated
/// (and, for host memory, readable and writable) until it is deregistered
/// (`hipFileBufDeregister`, or the `hipFileDriverClose` that brings the count to 0), and no
/// request uses it after it is freed.
pub unsafe extern "C" fn hipFileBufRegister(
    buffer_base: *const c_void,
    length: usize,
    _flags: c_int,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        let mut st = state::lock();
        let driver = match st.driver() {
            Ok(d) => d,
            Err(e) => return e,
        };
        st.implicit_open(driver.clone());
        if buffer_base.is_null() {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        let ptr = buffer_base as usize as u64;
        if st.buffers.contains_key(&ptr) {
            return hipFileError_t::code(hipFileMemoryAlreadyRegistered);
        }
        // SAFETY: the caller's contract above: the memory stays allocated while the
        // registration (which owns this buffer) lives. The facade checks, before anything
        // uses it, that the rule registers it and that it lies inside its allocation where
        // the runtime knows one.
        let buffer = unsafe { DeviceBuffer::from_raw(&driver, DevicePtr(ptr), length) };
        if let Err(e) = driver.register_buffer(&buffer) {
            return status(&e);
        }
        st.buffers.insert(ptr, Arc::new(RwLock::new(buffer)));
        hipFileError_t::SUCCESS
    })
}

/// `hipFileError_t hipFileBufDeregister(const void *buffer_base)` — ends the registration
/// of the buffer registered at exactly `buffer_base`.
///
/// # Errors
///
/// `hipFileDriverClosing` when the count is 0; `hipFileMemoryNotRegistered` for NULL or a
/// pointer not registered; `hipFileInvalidValue` while I/O uses the buffer, a
/// stream-ordered request's too until its result is reported.
pub extern "C" fn hipFileBufDeregister(buffer_base: *const c_void) -> hipFileError_t {
    boundary(INTERNAL, || {
        let mut st = state::lock();
        if st.count == 0 {
            return hipFileError_t::code(hipFileDriverClosing);
        }
        let ptr = buffer_base as usize as u64;
        let Some(entry) = st.buffers.get(&ptr) else {
            return hipFileError_t::code(hipFileMemoryNotRegistered);
        };
        // In use: a request in flight on it, or a call or a batch that holds the
        // registration (they take it under this lock, so none is between its lookup and
        // its use now). Refused, as hipFile documents, and nothing changes.
        if st.buffer_in_flight(ptr) || Arc::strong_count(entry) > 1 {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        let result = match entry.try_write() {
            Ok(buffer) => buffer.driver().deregister_buffer(&buffer),
            Err(_) => Err(Error::InUse {
                what: "buffer",
                count: 1,
            }),
        };
        match result {
            Ok(()) => {
                st.buffers.remove(&ptr);
                hipFileError_t::SUCCESS
            }
            Err(e) => status(&e),
        }
    })
}

/// `ssize_t hipFileRead(hipFileHandle_t fh, void *buffer_base, size_t size, hoff_t
/// file_offset, hoff_t buffer_offset)` — reads up to `size` bytes of the file at
/// `file_offset` into `buffer_base + buffer_offset`; returns the bytes read (fewer at end of
/// file, 0 at or past it).
///
/// # Errors
///
/// -1 with `errno` `EINVAL` when the driver is not open (use count 0); -1 with `errno` for a
/// system error; `-hipFileHandleNotRegistered` for an unknown handle; `-hipFileInvalidValue`
/// for NULL, a negative offset or a range outside the buffer; `-hipFileHipMemoryTypeInvalid`
/// for an unregistered pointer to memory the driver's rule does not serve (not device
/// memory, under hipFile's rule); a negated HIP status when a runtime call failed; otherwise
/// the negated code of docs/BEHAVIOUR.md §4.
///
/// # Safety
///
/// A registered `buffer_base` is still allocated, and nothing else writes the range the
/// call reads into meanwhile (reads of other ranges of it may run at once). An unregistered
/// one, if it is memory the rule serves, stays allocated until the call returns and nothing
/// else writes the range meanwhile; host memory the runtime does not know is valid for `buffer_offset + size`
/// bytes from `buffer_base`, as `pread`'s buffer is for its count.
pub unsafe extern "C" fn hipFileRead(
    fh: hipFileHandle_t,
    buffer_base: *mut c_void,
    size: usize,
    file_offset: hoff_t,
    buffer_offset: hoff_t,
) -> isize {
    boundary(negated(hipFileInternalError), || {
        // SAFETY: as this function's contract.
        unsafe { io(Dir::Read, fh, buffer_base, size, file_offset, buffer_offset) }
    })
}

/// `ssize_t hipFileWrite(hipFileHandle_t fh, const void *buffer_base, size_t size, hoff_t
/// file_offset, hoff_t buffer_offset)` — writes `size` bytes from `buffer_base +
/// buffer_offset` to the file at `file_offset`, on stable storage when it returns; returns
/// the bytes written.
///
/// # Errors
///
/// As [`hipFileRead`].
///
/// # Safety
///
/// As [`hipFileRead`], except that the range is only read.
pub unsafe extern "C" fn hipFileWrite(
    fh: hipFileHandle_t,
    buffer_base: *const c_void,
    size: usize,
    file_offset: hoff_t,
    buffer_offset: hoff_t,
) -> isize {
    boundary(negated(hipFileInternalError), || {
        // SAFETY: as this function's contract.
        unsafe {
            io(
                Dir::Write,
                fh,
                buffer_base as *mut c_void,
                size,
                file_offset,
                buffer_offset,
            )
        }
    })
}

#[derive(Clone, Copy)]
enum Dir {
    Read,
    Write,
}

/// Where a request's bytes go or come from: a registered buffer, or a temporary one over
/// an unregistered pointer ([`temporary`]).
enum Target {
    Registered(Buffer),
    Temporary(DeviceBuffer),
}

/// `hipFileRead` and `hipFileWrite`.
///
/// # Safety
///
/// As [`hipFileRead`].
unsafe fn io(
    dir: Dir,
    fh: hipFileHandle_t,
    buffer_base: *mut c_void,
    size: usize,
    file_offset: hoff_t,
    buffer_offset: hoff_t,
) -> isize {
    let (file, driver, registered) = {
        let st = state::lock();
        if st.count == 0 {
            set_errno(libc::EINVAL);
            return -1;
        }
        let Some(file) = st.file(fh as usize) else {
            return negated(hipFileHandleNotRegistered);
        };
        let file: FileHandle = file.fh.clone();
        let ptr = buffer_base as usize as u64;
        (file, st.driver.clone(), st.buffers.get(&ptr).cloned())
    };
    let Some(driver) = driver else {
        return negated(hipFileInternalError);
    };
    if buffer_base.is_null() {
        return negated(hipFileInvalidValue);
    }
    // A negative offset names no extent: validation refuses the request whatever it is.
    let named = extent(u64::try_from(buffer_offset).unwrap_or(0), size as u64);
    let target = match registered {
        Some(b) => Target::Registered(b),
        // SAFETY: as this function's contract.
        None => match unsafe { temporary(&driver, buffer_base as usize as u64, named) } {
            Ok(b) => Target::Temporary(b),
            Err(refusal) => return refusal.negated(),
        },
    };
    let size = size as u64;
    let result = match (dir, target) {
        (Dir::Read, Target::Registered(b)) => {
            // Reads into one registered buffer run at once, as cuFile's do (fastsafetensors
            // reads a file into one registered buffer from 16 threads): each reads into a
            // view of its own over the registered memory, not through the buffer itself,
            // which a `&mut` would give to one read at a time. Holding `b` (and its read
            // lock) keeps the buffer registered until the read ends.
            let guard = b.read().unwrap_or_else(PoisonError::into_inner);
            // SAFETY: the registered memory, which the caller keeps allocated while the call
            // runs and which nothing else writes in the range the read names (`hipFileRead`'s
            // contract); the registration checked that the rule registers it and that it lies
            // inside its allocation where the runtime knows one.
            let mut view = unsafe { DeviceBuffer::from_raw(&driver, guard.ptr(), guard.len()) };
            file.read(&mut view, size, file_offset, buffer_offset)
        }
        (Dir::Write, Target::Registered(b)) => {
            let guard = b.read().unwrap_or_else(PoisonError::into_inner);
            file.write(&guard, size, file_offset, buffer_offset)
        }
        (Dir::Read, Target::Temporary(mut b)) => {
            file.read(&mut b, size, file_offset, buffer_offset)
        }
        (Dir::Write, Target::Temporary(b)) => file.write(&b, size, file_offset, buffer_offset),
    };
    match result {
        // At most 0x7ffff000 bytes move in one call, so the count fits.
        Ok(outcome) => outcome.bytes as isize,
        Err(e) => io_failure(&e),
    }
}

/// Why an unregistered pointer cannot be used: a hipFile code, or the HIP status of a
/// runtime call that failed.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Refusal {
    Code(hipFileOpError_t),
    Hip(i32),
}

impl Refusal {
    /// As `hipFileRead` returns it.
    pub(crate) fn negated(self) -> isize {
        match self {
            Refusal::Code(c) => negated(c),
            Refusal::Hip(hip) => hip_failure(hip),
        }
    }

    /// As a `hipFileError_t` call returns it (`hipFileBatchIOSubmit`).
    pub(crate) fn status(self) -> hipFileError_t {
        match self {
            Refusal::Code(c) => hipFileError_t::code(c),
            Refusal::Hip(hip) => hipFileError_t {
                err: hipFileHipDriverError,
                hip_drv_err: hip,
            },
        }
    }
}

/// A buffer over an unregistered pointer, after the runtime has said what memory it is and
/// the driver's rule serves it (`Config::memory_types`; hipFile's rule: device memory only):
/// why not otherwise. It runs from `ptr` to the end of its allocation where the runtime says
/// what that is, and over the `extent` bytes the call names (its buffer offset plus its
/// size, at least one byte past the offset) where it does not (pageable host memory).
/// `hipFileRead`, `hipFileWrite`, `hipFileBatchIOSubmit` and the stream-ordered calls use it.
///
/// # Safety
///
/// As [`hipFileRead`]: the memory at `ptr` stays allocated while the buffer lives (and
/// while any request that uses it runs), and, where the runtime does not know it, the
/// `extent` bytes from `ptr` are memory of the process, writable for reads.
pub(crate) unsafe fn temporary(
    driver: &Driver,
    ptr: u64,
    extent: u64,
) -> Result<DeviceBuffer, Refusal> {
    let gpu = driver.tuning().gpu();
    let at = DevicePtr(ptr);
    let info = gpu.pointer_info(at).map_err(|e| match e.code {
        1 => Refusal::Code(hipFileInvalidValue),
        hip => Refusal::Hip(hip),
    })?;
    if !driver.config().memory_types.serves(info.memory) {
        return Err(Refusal::Code(hipFileHipMemoryTypeInvalid));
    }
    let usable = usable_len(gpu.as_ref(), at, info.memory, extent).map_err(|e| match e {
        Error::Runtime(e) => Refusal::Hip(e.code),
        _ => Refusal::Code(hipFileHipPointerRangeError),
    })?;
    let Ok(usable) = usize::try_from(usable) else {
        return Err(Refusal::Code(hipFileHipPointerRangeError));
    };
    // SAFETY: `ptr..ptr+usable` lies in one allocation of the runtime (it said so just now)
    // or, for memory it does not know, is the range the call names, which the caller vouches
    // for; the caller keeps it allocated for the buffer's whole life. The request then uses
    // this description rather than asking the runtime again.
    Ok(unsafe { DeviceBuffer::from_raw_described(driver, at, usable, info.memory, info.device) })
}

/// The bytes from an unregistered pointer that a call with `buffer_offset` and `size` names,
/// for [`temporary`]: at least one past the offset, so that a call of size 0 at an offset
/// inside the memory is valid, as it is for device memory (that byte is never touched).
pub(crate) fn extent(buffer_offset: u64, size: u64) -> u64 {
    buffer_offset.saturating_add(size.max(1))
}
