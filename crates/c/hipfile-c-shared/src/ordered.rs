//! The stream-ordered calls: `hipFileReadAsync`, `hipFileWriteAsync`,
//! `hipFileStreamRegister` and `hipFileStreamDeregister`.
//!
//! A request goes to the facade's `FileHandle::order_on_stream`, which queues it on the
//! caller's stream and returns at once. Its size and offsets are fixed there when the stream
//! was registered with all three "fixed" flags, and otherwise read from the caller's
//! pointers when the stream reaches the request (a flag that is set still fixes its own
//! value). The result is written to the caller's `ssize_t` before the stream goes on past the
//! request. The facade's handle of each request is kept in the state until the request has
//! ended (docs/decisions/c-abi-stream-ordered-calls.md).
//!
//! # Safety
//!
//! The pointers these functions receive are the caller's. Each is checked for NULL before use;
//! those a request reads or writes later (size, offsets, bytes) must, as hipFile's and
//! cuFile's contract says, stay valid until the stream has passed the request. Streams are
//! the caller's word that they are live until then.

use crate::api::{extent, temporary};
use crate::codes::{io_failure, status};
use crate::panic::boundary;
use crate::state::{self, Buffer};
use crate::types::*;
use facade::core::request::MAX_IO_SIZE;
use facade::{DeviceBuffer, Error, IoOutcome, Op, Request, StreamHandle, StreamParams};
use std::ffi::{c_uint, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError};

const INTERNAL: hipFileError_t = hipFileError_t::code(hipFileInternalError);
const INVALID: hipFileError_t = hipFileError_t::code(hipFileInvalidValue);

/// The flags that fix a value at submission.
const FIXED_ALL: c_uint = HIPFILE_STREAM_FIXED_BUF_OFFSET
    | HIPFILE_STREAM_FIXED_FILE_OFFSET
    | HIPFILE_STREAM_FIXED_FILE_SIZE;

/// `hipFileError_t hipFileStreamRegister(hipStream_t stream, unsigned flags)` — records
/// `stream` (NULL, the null stream, too) with `flags`: which of a request's size
/// (`HIPFILE_STREAM_FIXED_FILE_SIZE`), file offset (`..._FIXED_FILE_OFFSET`) and buffer
/// offset (`..._FIXED_BUF_OFFSET`) are read at submission rather than when the stream reaches
/// the request. `HIPFILE_STREAM_PAGE_ALIGNED_INPUTS` is accepted and changes nothing. Does not
/// open the driver; registrations outlive its closing.
///
/// # Errors
///
/// `hipFileInvalidValue` for a flag outside `HIPFILE_STREAM_FLAGS_MASK` or a stream
/// registered already.
pub extern "C" fn hipFileStreamRegister(stream: hipStream_t, flags: c_uint) -> hipFileError_t {
    boundary(INTERNAL, || {
        if flags & !HIPFILE_STREAM_FLAGS_MASK != 0 {
            return INVALID;
        }
        let mut st = state::lock();
        let key = stream as usize;
        if st.streams.contains_key(&key) {
            return INVALID;
        }
        st.streams.insert(key, flags);
        hipFileError_t::SUCCESS
    })
}

/// `hipFileError_t hipFileStreamDeregister(hipStream_t stream)` — forgets `stream`'s
/// registration: later requests on it read their values when the stream reaches them.
/// Returns at once; requests already queued go on as they were submitted. Does not open the
/// driver.
///
/// # Errors
///
/// `hipFileInvalidValue` for a stream that is not registered.
pub extern "C" fn hipFileStreamDeregister(stream: hipStream_t) -> hipFileError_t {
    boundary(INTERNAL, || {
        let ended = {
            let mut st = state::lock();
            if st.streams.remove(&(stream as usize)).is_none() {
                return INVALID;
            }
            st.take_ended()
        };
        drop(ended);
        hipFileError_t::SUCCESS
    })
}

/// `hipFileError_t hipFileReadAsync(hipFileHandle_t fh, void *buffer_base, size_t *size_p,
/// hoff_t *file_offset_p, hoff_t *buffer_offset_p, ssize_t *bytes_read_p, hipStream_t
/// stream)` — queues on `stream` a read of `*size_p` bytes of the file at `*file_offset_p`
/// into `buffer_base + *buffer_offset_p`, and returns at once. The stream's later work waits
/// for it. `*bytes_read_p` is 0 on return, and holds what `hipFileRead` would return (bytes,
/// fewer at end of file, or a negative error) once the stream has passed the request. Values
/// not fixed by the stream's registration (`hipFileStreamRegister`; an unregistered stream
/// fixes none) are read again when the stream reaches the request.
///
/// # Errors
///
/// With the use count 0: opens the driver (the count becomes 1) and returns
/// `hipFileInvalidValue`, whatever the arguments. Otherwise `hipFileInvalidValue` for a NULL
/// pointer, a negative offset or a range outside the buffer (checked with the values at
/// submission); `hipFileHandleNotRegistered` for an unknown handle; as `hipFileRead` for an
/// unregistered pointer that is not device memory; `hipFileInvalidValue` for a registered
/// stream whose runtime cannot order requests. A size of 0 queues nothing and succeeds.
///
/// # Safety
///
/// As [`hipFileRead`](crate::hipFileRead) until the request has ended; `size_p`,
/// `file_offset_p`, `buffer_offset_p` and `bytes_read_p` stay valid (and the values not fixed
/// stay unchanged by anything but the stream's earlier work) until the stream has passed the
/// request; `stream` is live until then.
pub unsafe extern "C" fn hipFileReadAsync(
    fh: hipFileHandle_t,
    buffer_base: *mut c_void,
    size_p: *mut usize,
    file_offset_p: *mut hoff_t,
    buffer_offset_p: *mut hoff_t,
    bytes_read_p: *mut isize,
    stream: hipStream_t,
) -> hipFileError_t {
    let args = Args {
        fh,
        buffer_base,
        size_p,
        file_offset_p,
        buffer_offset_p,
        bytes_p: bytes_read_p,
        stream,
    };
    // SAFETY: as this function's contract.
    unsafe { order_async(Op::Read, args, |result| result) }
}

/// `hipFileError_t hipFileWriteAsync(hipFileHandle_t fh, void *buffer_base, size_t *size_p,
/// hoff_t *file_offset_p, hoff_t *buffer_offset_p, ssize_t *bytes_written_p, hipStream_t
/// stream)` — queues on `stream` a write of `*size_p` bytes from `buffer_base +
/// *buffer_offset_p` to the file at `*file_offset_p`, after the stream's earlier work, as
/// [`hipFileReadAsync`] queues a read. The bytes are on stable storage when
/// `*bytes_written_p` is set.
///
/// # Errors
///
/// As [`hipFileReadAsync`].
///
/// # Safety
///
/// As [`hipFileReadAsync`], except that the buffer's range is only read.
pub unsafe extern "C" fn hipFileWriteAsync(
    fh: hipFileHandle_t,
    buffer_base: *mut c_void,
    size_p: *mut usize,
    file_offset_p: *mut hoff_t,
    buffer_offset_p: *mut hoff_t,
    bytes_written_p: *mut isize,
    stream: hipStream_t,
) -> hipFileError_t {
    let args = Args {
        fh,
        buffer_base,
        size_p,
        file_offset_p,
        buffer_offset_p,
        bytes_p: bytes_written_p,
        stream,
    };
    // SAFETY: as this function's contract.
    unsafe { order_async(Op::Write, args, |result| result) }
}

/// The arguments of `hipFileReadAsync` and `hipFileWriteAsync`, by their C names.
#[allow(missing_docs)]
pub struct Args {
    pub fh: hipFileHandle_t,
    pub buffer_base: *mut c_void,
    pub size_p: *mut usize,
    pub file_offset_p: *mut hoff_t,
    pub buffer_offset_p: *mut hoff_t,
    pub bytes_p: *mut isize,
    pub stream: hipStream_t,
}

/// `hipFileReadAsync` (`op` [`Op::Read`]) or `hipFileWriteAsync` (`op` [`Op::Write`]), with
/// the result the stream later writes to `*bytes_p` passed through `translate` first: bytes
/// moved stay as they are for any library, but a failure is hipFile's value (as
/// `hipFileRead` returns it), which a library with other conventions (cuFile's) translates.
/// Runs inside the panic boundary.
///
/// # Safety
///
/// As [`hipFileReadAsync`] (or [`hipFileWriteAsync`]).
pub unsafe fn order_async(op: Op, args: Args, translate: fn(isize) -> isize) -> hipFileError_t {
    boundary(INTERNAL, || {
        // SAFETY: as this function's contract.
        unsafe { submit(op, args, translate) }
    })
}

/// The caller's pointers, read or written when the stream reaches the request.
struct Later {
    size_p: *mut usize,
    file_offset_p: *mut hoff_t,
    buffer_offset_p: *mut hoff_t,
}

// SAFETY: the pointers are only read, once, on whichever thread serves the request; the
// caller keeps them valid until the stream has passed the request and writes them only from
// the stream's earlier work (this module's contract), which the stream orders before the read.
unsafe impl Send for Later {}

/// How a request reports its result: the flag set once it has, and the library's translation
/// of a failure's value.
struct Reporting {
    done: Arc<AtomicBool>,
    translate: fn(isize) -> isize,
}

/// Where the result goes.
struct BytesOut(*mut isize);

// SAFETY: written once, before the stream goes on past the request; the caller keeps it valid
// and reads it only after the stream has passed the request.
unsafe impl Send for BytesOut {}

/// `hipFileReadAsync` and `hipFileWriteAsync`.
///
/// # Safety
///
/// As [`hipFileReadAsync`].
unsafe fn submit(op: Op, a: Args, translate: fn(isize) -> isize) -> hipFileError_t {
    let done = Arc::new(AtomicBool::new(false));
    let (file, driver, registered, flags, id) = {
        let mut st = state::lock();
        if st.count == 0 {
            // hipFile's rule: the first asynchronous call opens the driver, and fails.
            return match st.driver() {
                Ok(d) => {
                    st.implicit_open(d);
                    INVALID
                }
                Err(e) => e,
            };
        }
        if a.buffer_base.is_null()
            || a.size_p.is_null()
            || a.file_offset_p.is_null()
            || a.buffer_offset_p.is_null()
            || a.bytes_p.is_null()
        {
            return INVALID;
        }
        let Some(file) = st.file(a.fh as usize) else {
            return hipFileError_t::code(hipFileHandleNotRegistered);
        };
        let file = file.fh.clone();
        let Some(driver) = st.driver.clone() else {
            return INTERNAL;
        };
        let ptr = a.buffer_base as usize as u64;
        let registered = st.buffers.get(&ptr).cloned();
        let flags = st.streams.get(&(a.stream as usize)).copied().unwrap_or(0);
        // From here the registered buffer counts as in use, until the submission fails or
        // the result is reported.
        let id = st.reserve(registered.as_ref().map(|_| ptr), Arc::clone(&done));
        (file, driver, registered, flags, id)
    };
    let reporting = Reporting { done, translate };
    // SAFETY: as this function's contract.
    let (status, io) =
        unsafe { submit_reserved(op, &a, file, driver, registered, flags, reporting) };
    let ended = {
        let mut st = state::lock();
        st.settle(id, io);
        st.take_ended()
    };
    // Outside the lock: what the ended requests held goes.
    drop(ended);
    status
}

/// The rest of [`submit`], once the request has its entry in the state: the status to
/// return, and the facade's handle when a request was queued.
///
/// # Safety
///
/// As [`hipFileReadAsync`].
unsafe fn submit_reserved(
    op: Op,
    a: &Args,
    file: facade::FileHandle,
    driver: facade::Driver,
    registered: Option<Buffer>,
    flags: c_uint,
    reporting: Reporting,
) -> (hipFileError_t, Option<facade::Io<'static>>) {
    let Reporting { done, translate } = reporting;
    // SAFETY: non-NULL (checked above), and the caller vouches that they are readable.
    let (size, file_offset, buffer_offset) = unsafe {
        (
            a.size_p.read(),
            a.file_offset_p.read(),
            a.buffer_offset_p.read(),
        )
    };
    // A temporary buffer over an unregistered pointer, outside the lock (the runtime is asked),
    // over what the values of now name where the runtime does not bound the memory (cuFile:
    // a size not known at submission is given as the largest it may be).
    let named = extent(u64::try_from(buffer_offset).unwrap_or(0), size as u64);
    let temporary_buffer = match registered {
        Some(_) => None,
        // SAFETY: as this function's contract.
        None => match unsafe { temporary(&driver, a.buffer_base as usize as u64, named) } {
            Ok(b) => Some(b),
            Err(refusal) => return (refusal.status(), None),
        },
    };
    let len = match (&registered, &temporary_buffer) {
        (Some(b), _) => b.read().unwrap_or_else(PoisonError::into_inner).len(),
        (None, Some(b)) => b.len(),
        (None, None) => return (INTERNAL, None),
    } as u64;
    // Checked at submission with the values of now, as hipFile does (its size clamped to one
    // call's most); values read later are checked again then, by the facade.
    let clamped = (size as u64).min(MAX_IO_SIZE);
    let (Ok(fo), Ok(bo)) = (u64::try_from(file_offset), u64::try_from(buffer_offset)) else {
        return (INVALID, None);
    };
    if bo >= len || clamped > len - bo {
        return (INVALID, None);
    }
    // SAFETY: non-NULL, and the caller vouches that it is writable.
    unsafe { a.bytes_p.write(0) };
    if size == 0 {
        return (hipFileError_t::SUCCESS, None);
    }

    let params = if flags & FIXED_ALL == FIXED_ALL {
        StreamParams::Fixed(Request {
            op,
            size: size as u64,
            file_offset: fo,
            buffer_offset: bo,
        })
    } else {
        let fixed_size = (flags & HIPFILE_STREAM_FIXED_FILE_SIZE != 0).then_some(size);
        let fixed_fo = (flags & HIPFILE_STREAM_FIXED_FILE_OFFSET != 0).then_some(file_offset);
        let fixed_bo = (flags & HIPFILE_STREAM_FIXED_BUF_OFFSET != 0).then_some(buffer_offset);
        let later = Later {
            size_p: a.size_p,
            file_offset_p: a.file_offset_p,
            buffer_offset_p: a.buffer_offset_p,
        };
        StreamParams::Deferred(Box::new(move || {
            let later = later;
            // SAFETY: the caller keeps the pointers valid until the stream has passed the
            // request (this function's contract); they were non-NULL at submission.
            unsafe {
                (
                    fixed_size.unwrap_or_else(|| later.size_p.read()) as u64,
                    fixed_fo.unwrap_or_else(|| later.file_offset_p.read()),
                    fixed_bo.unwrap_or_else(|| later.buffer_offset_p.read()),
                )
            }
        }))
    };

    let out = BytesOut(a.bytes_p);
    let reported = Arc::clone(&done);
    let report = Box::new(move |result: &Result<IoOutcome, Error>| {
        let out = out;
        let value = match result {
            // At most 0x7ffff000 bytes move in one request, so the count fits.
            Ok(outcome) => outcome.bytes as isize,
            Err(e) => translate(io_failure(e)),
        };
        // SAFETY: the caller keeps it valid and writable until the stream has passed the
        // request, which it has not yet: this runs before the stream goes on.
        unsafe { out.0.write(value) };
        reported.store(true, Ordering::Release);
    });

    let stream_handle = StreamHandle(a.stream as usize);
    let submitted = match (&registered, &temporary_buffer) {
        (Some(b), _) => {
            let guard = b.read().unwrap_or_else(PoisonError::into_inner);
            // SAFETY: the stream and the memory are the caller's word (this function's
            // contract); the registration cannot end while the request is in flight (the
            // state refuses `hipFileBufDeregister` until `done`).
            unsafe { order(&file, stream_handle, op, &guard, params, report) }
        }
        // SAFETY: as above; the temporary buffer never frees the memory, and the facade's
        // request holds what it needs of it.
        (None, Some(b)) => unsafe { order(&file, stream_handle, op, b, params, report) },
        (None, None) => return (INTERNAL, None),
    };
    match submitted {
        Ok(io) => (hipFileError_t::SUCCESS, Some(io)),
        Err(e) => (status(&e), None),
    }
}

/// # Safety
///
/// As [`facade::FileHandle::order_on_stream`].
unsafe fn order(
    file: &facade::FileHandle,
    stream: StreamHandle,
    op: Op,
    buffer: &DeviceBuffer,
    params: StreamParams,
    report: facade::Report,
) -> Result<facade::Io<'static>, Error> {
    // SAFETY: forwarded from the caller.
    unsafe { file.order_on_stream(stream, op, buffer, params, Some(report)) }
}
