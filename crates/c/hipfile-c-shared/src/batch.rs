//! hipFile's batch calls, served by the facade's batch engine: `hipFileBatchIOSetUp`,
//! `hipFileBatchIOSubmit`, `hipFileBatchIOGetStatus`, `hipFileBatchIOCancel` and
//! `hipFileBatchIODestroy`. Where upstream stores the requests without executing them, these
//! execute them: each becomes a `facade::BatchIo` on the facade's `Batch`.
//!
//! # Safety
//!
//! As the rest of the API: every pointer is checked for NULL, a batch handle is a key into
//! this module's registry (looked up on every call, never dereferenced), and a buffer
//! pointer is handed to the facade only after it was found registered or the runtime
//! vouched that it is device memory.

use crate::api::{extent, temporary};
use crate::codes::{io_failure, status};
use crate::panic::boundary;
use crate::state;
use crate::types::*;
use facade::{Batch, BatchIo, BatchStatus, DeviceBuffer, DevicePtr, FileHandle};
use std::collections::BTreeMap;
use std::ffi::c_uint;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard, Once, PoisonError};
use std::time::Duration;

const INTERNAL: hipFileError_t = hipFileError_t::code(hipFileInternalError);
const INVALID: hipFileError_t = hipFileError_t::code(hipFileInvalidValue);

/// cuFile's default batch limit, which upstream keeps: a larger `max_nr` is refused.
const MAX_BATCH: c_uint = 128;

/// A buffer that requests of a batch view, owned by the batch's entry and freed only after
/// the batch is gone (see [`BatchState`]).
///
/// The facade's `Batch<'a>` borrows its views for `'a`; a C batch lives between two calls,
/// so its views are made from these boxes with a `'static` borrow. That is sound because the
/// box is neither moved (it is reached only through this pointer) nor freed while the batch
/// lives: [`BatchState`] drops its batch, which cancels what has not started and waits for
/// the rest, before its buffers. Each box backs exactly one request, so no two `&mut` views
/// are made from one box.
struct Owned(NonNull<DeviceBuffer>);

// SAFETY: `Owned` is a uniquely owned `Box<DeviceBuffer>` (`DeviceBuffer` is `Send`: it is
// an `Arc` of the memory's description, which the facade moves between threads).
unsafe impl Send for Owned {}

impl Owned {
    fn new(buffer: DeviceBuffer) -> Owned {
        Owned(NonNull::from(Box::leak(Box::new(buffer))))
    }

    /// The buffer, borrowed for as long as the batch that will hold the view.
    ///
    /// # Safety
    ///
    /// Called once per box, and the borrow is given only to a request of the batch whose
    /// [`BatchState`] keeps this box (or to one that is dropped, never submitted, before the
    /// box is freed).
    unsafe fn borrow(&mut self) -> &'static mut DeviceBuffer {
        // SAFETY: the pointer came from `Box::leak` and is freed only in `drop`, after every
        // view made from it is gone (the caller's contract); this is its one borrow.
        unsafe { &mut *self.0.as_ptr() }
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: the pointer came from `Box::leak` and is freed once, here; no view of it
        // is left (the batch that held them was dropped first).
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// A C batch: the facade's batch and the buffers its requests view. Field order matters:
/// `batch` is dropped first (cancelling what has not started and waiting for what runs),
/// then `buffers`.
struct BatchState {
    batch: Batch<'static>,
    buffers: Vec<Owned>,
    /// The registrations its requests use, held (as the synchronous calls hold theirs) so
    /// that none is deregistered while a request may still touch it: until every request
    /// has been reported, or the batch is destroyed.
    registrations: Vec<state::Buffer>,
}

type Entry = Arc<Mutex<BatchState>>;

/// The batches by handle (the address of their state). Separate from the library's state,
/// and never held while a batch waits: calls clone the entry and let go first.
static BATCHES: Mutex<BTreeMap<usize, Entry>> = Mutex::new(BTreeMap::new());

/// The batches, locked. The first call installs their forgetting in a process made by
/// `fork()` ([`forget_after_fork`]), before any batch can be added.
fn batches() -> MutexGuard<'static, BTreeMap<usize, Entry>> {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| state::forget_after_fork(forget_after_fork));
    BATCHES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Forgets every batch, in a process made by `fork()` (`state::lock` runs it): they are the
/// parent's, and none of their requests runs here. Their handles are unknown afterwards.
fn forget_after_fork() {
    std::mem::forget(std::mem::take(&mut *batches()));
}

fn lookup(handle: hipFileBatchHandle_t) -> Option<Entry> {
    batches().get(&(handle as usize)).cloned()
}

fn lock(entry: &Entry) -> MutexGuard<'_, BatchState> {
    entry.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `hipFileError_t hipFileBatchIOSetUp(hipFileBatchHandle_t *batch_idp, unsigned max_nr)` —
/// a batch holding up to `max_nr` requests in flight, stored in `*batch_idp`. Opens the
/// driver when the count is 0 (0 becomes 1), as the registrations do.
///
/// # Errors
///
/// `hipFileInvalidValue` for NULL, or `max_nr` 0 or above 128; `hipFileDriverNotInitialized`
/// when no runtime can be loaded (the count stays as it was).
///
/// # Safety
///
/// `batch_idp` is NULL or writable.
pub unsafe extern "C" fn hipFileBatchIOSetUp(
    batch_idp: *mut hipFileBatchHandle_t,
    max_nr: c_uint,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        if batch_idp.is_null() || max_nr == 0 || max_nr > MAX_BATCH {
            return INVALID;
        }
        let batch = {
            let mut st = state::lock();
            let driver = match st.driver() {
                Ok(d) => d,
                Err(e) => return e,
            };
            let batch = match driver.batch(max_nr as usize) {
                Ok(b) => b,
                Err(e) => return status(&e),
            };
            st.implicit_open(driver);
            batch
        };
        let entry = Arc::new(Mutex::new(BatchState {
            batch,
            buffers: Vec::new(),
            registrations: Vec::new(),
        }));
        let addr = Arc::as_ptr(&entry) as usize;
        batches().insert(addr, entry);
        // SAFETY: non-NULL, and the caller vouches that it is writable.
        unsafe { batch_idp.write(addr as hipFileBatchHandle_t) };
        hipFileError_t::SUCCESS
    })
}

/// What one request needs once the library's state has been let go of.
struct Gathered {
    read: bool,
    file: FileHandle,
    /// The registered buffer at `base`, its registration held, as (pointer, length), if
    /// there is one.
    registered: Option<(state::Buffer, u64, usize)>,
    base: u64,
    buffer_offset: u64,
    file_offset: u64,
    size: usize,
    cookie: u64,
}

/// `hipFileError_t hipFileBatchIOSubmit(hipFileBatchHandle_t batch_idp, unsigned nr,
/// hipFileIOParams_t *iocbp, unsigned flags)` — queues the `nr` requests of `iocbp` on the
/// batch, all or none; each is executed. `flags` is ignored.
///
/// # Errors
///
/// `hipFileInvalidValue` for an unknown batch, NULL `iocbp` (with `nr` above 0), more
/// requests than the batch has room for, and for a request whose mode is not
/// `hipFileBatch`, whose opcode is neither read nor write, whose buffer is NULL, or whose
/// offsets or size are negative or leave the buffer; `hipFileInternalError` for a NULL or
/// unregistered file handle, or when the driver is not open (count 0); for an unregistered
/// buffer pointer, what `hipFileRead` refuses it with, as a `hipFileError_t`
/// (`hipFileHipMemoryTypeInvalid`, `hipFileHipPointerRangeError`, or
/// `{hipFileHipDriverError, status}`). Nothing is queued on any error.
///
/// # Safety
///
/// `iocbp` is NULL or points to `nr` requests. Each request's buffer, registered or not,
/// stays allocated until the request has ended (reported by `hipFileBatchIOGetStatus`, or
/// the batch destroyed), and nothing else writes a range a request reads into meanwhile.
pub unsafe extern "C" fn hipFileBatchIOSubmit(
    batch_idp: hipFileBatchHandle_t,
    nr: c_uint,
    iocbp: *mut hipFileIOParams_t,
    _flags: c_uint,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        let Some(entry) = lookup(batch_idp) else {
            return INVALID;
        };
        let nr = nr as usize;
        {
            let b = lock(&entry);
            if nr > b.batch.capacity() - b.batch.outstanding() {
                return INVALID;
            }
        }
        if nr == 0 {
            return hipFileError_t::SUCCESS;
        }
        if iocbp.is_null() {
            return INVALID;
        }
        // SAFETY: non-NULL, and the caller vouches for `nr` requests there; they are copied
        // out, one by one, and never written.
        let ops: Vec<hipFileIOParams_t> = (0..nr).map(|i| unsafe { iocbp.add(i).read() }).collect();

        // Checks and lookups under the library's lock; nothing moves bytes here.
        let (gathered, driver) = {
            let st = state::lock();
            if st.count == 0 {
                return INTERNAL;
            }
            let Some(driver) = st.driver.clone() else {
                return INTERNAL;
            };
            let mut gathered = Vec::with_capacity(nr);
            for op in &ops {
                if op.mode != hipFileBatch {
                    return INVALID;
                }
                let read = match op.opcode {
                    hipFileBatchRead => true,
                    hipFileBatchWrite => false,
                    _ => return INVALID,
                };
                let Some(file) = st.file(op.fh as usize) else {
                    return INTERNAL;
                };
                // SAFETY: `mode` is `hipFileBatch`, for which C sets the `batch` member,
                // whose fields any bit pattern makes valid.
                let p = unsafe { op.u.batch };
                if p.devPtr_base.is_null() {
                    return INVALID;
                }
                let (Ok(buffer_offset), Ok(file_offset)) =
                    (u64::try_from(p.devPtr_offset), u64::try_from(p.file_offset))
                else {
                    return INVALID;
                };
                let base = p.devPtr_base as usize as u64;
                let registered = st.buffers.get(&base).map(|b| {
                    let (ptr, len) = {
                        let view = b.read().unwrap_or_else(PoisonError::into_inner);
                        (view.ptr().0, view.len())
                    };
                    (Arc::clone(b), ptr, len)
                });
                gathered.push(Gathered {
                    read,
                    file: file.fh.clone(),
                    registered,
                    base,
                    buffer_offset,
                    file_offset,
                    size: p.size,
                    cookie: op.cookie as usize as u64,
                });
            }
            (gathered, driver)
        };

        // The buffers and views, outside the lock (an unregistered pointer asks the runtime).
        let mut buffers = Vec::with_capacity(nr);
        let mut registrations = Vec::new();
        let mut ios = Vec::with_capacity(nr);
        for g in gathered {
            let registered = g.registered.map(|(registration, ptr, len)| {
                registrations.push(registration);
                (ptr, len)
            });
            let buffer = match registered {
                // SAFETY: the registered memory, which the caller keeps allocated while the
                // request runs (this function's contract); the registration checked that the
                // rule registers it and that it lies inside its allocation where the runtime
                // knows one.
                Some((ptr, len)) => unsafe { DeviceBuffer::from_raw(&driver, DevicePtr(ptr), len) },
                // SAFETY: as this function's contract.
                None => match unsafe {
                    temporary(&driver, g.base, extent(g.buffer_offset, g.size as u64))
                } {
                    Ok(b) => b,
                    Err(refusal) => return refusal.status(),
                },
            };
            let len = buffer.len() as u64;
            let in_buffer = g.buffer_offset < len && (g.size as u64) <= len - g.buffer_offset;
            if !in_buffer {
                return INVALID;
            }
            let (start, end) = (g.buffer_offset as usize, g.buffer_offset as usize + g.size);
            buffers.push(Owned::new(buffer));
            let Some(owned) = buffers.last_mut() else {
                return INTERNAL;
            };
            // SAFETY: the box's one borrow; its view goes to a request of this batch, whose
            // state takes the box below, or is dropped with `ios` before `buffers` if the
            // submission fails (locals drop in reverse order of declaration).
            let whole = unsafe { owned.borrow() };
            let io = if g.read {
                match whole.slice_mut(start..end) {
                    Ok(view) => BatchIo::read(&g.file, view, g.file_offset, g.cookie),
                    Err(e) => return status(&e),
                }
            } else {
                match whole.slice(start..end) {
                    Ok(view) => BatchIo::write(&g.file, view, g.file_offset, g.cookie),
                    Err(e) => return status(&e),
                }
            };
            ios.push(io);
        }

        let mut b = lock(&entry);
        if let Err(e) = b.batch.submit(ios) {
            return status(&e);
        }
        b.buffers.append(&mut buffers);
        b.registrations.append(&mut registrations);
        hipFileError_t::SUCCESS
    })
}

/// `hipFileError_t hipFileBatchIOGetStatus(hipFileBatchHandle_t batch_idp, unsigned min_nr,
/// unsigned *nr, hipFileIOEvents_t *iocbp, struct timespec *timeout)` — waits until at least
/// `min_nr` requests have ended (fewer when fewer are outstanding) or `timeout` has passed
/// (NULL: no deadline), then stores up to `*nr` ended requests in `iocbp`, each reported
/// once, and their number in `*nr`. An event is `{cookie, hipFileComplete, bytes}`,
/// `{cookie, hipFileFailed, error}` with `error` as `hipFileRead` returns it (a negated code
/// or HIP status, or -1 with `errno`), or `{cookie, hipFileCanceled, 0}`.
///
/// # Errors
///
/// `hipFileInvalidValue` for an unknown batch, NULL `nr` or `iocbp`, `min_nr` above `*nr`,
/// or a timeout with a negative field or nanoseconds of a second or more.
///
/// # Safety
///
/// `nr` is NULL or points to a writable `unsigned`; `iocbp` is NULL or points to `*nr`
/// writable events; `timeout` is NULL or points to a `struct timespec`.
pub unsafe extern "C" fn hipFileBatchIOGetStatus(
    batch_idp: hipFileBatchHandle_t,
    min_nr: c_uint,
    nr: *mut c_uint,
    iocbp: *mut hipFileIOEvents_t,
    timeout: *mut libc::timespec,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        let Some(entry) = lookup(batch_idp) else {
            return INVALID;
        };
        if nr.is_null() || iocbp.is_null() {
            return INVALID;
        }
        // SAFETY: non-NULL, and the caller vouches that it points to an `unsigned`.
        let max = unsafe { nr.read() };
        if min_nr > max {
            return INVALID;
        }
        let deadline = if timeout.is_null() {
            None
        } else {
            // SAFETY: non-NULL, and the caller vouches that it points to a timespec.
            let t = unsafe { timeout.read() };
            match (u64::try_from(t.tv_sec), u32::try_from(t.tv_nsec)) {
                (Ok(s), Ok(ns)) if ns < 1_000_000_000 => Some(Duration::new(s, ns)),
                _ => return INVALID,
            }
        };
        let events = {
            let mut b = lock(&entry);
            let events = b.batch.poll(min_nr as usize, max as usize, deadline);
            if b.batch.outstanding() == 0 {
                // Every request has ended and been reported: no view of these is left.
                b.buffers.clear();
                b.registrations.clear();
            }
            events
        };
        let mut count: c_uint = 0;
        for event in events {
            let (status, ret) = match event.status {
                BatchStatus::Complete(outcome) => (hipFileComplete, outcome.bytes as usize),
                BatchStatus::Failed(e) => (hipFileFailed, io_failure(&e) as usize),
                BatchStatus::Canceled => (hipFileCanceled, 0),
                BatchStatus::Waiting => (hipFileWaiting, 0),
                BatchStatus::Pending => (hipFilePending, 0),
                _ => (hipFileInvalid, 0),
            };
            let out = hipFileIOEvents_t {
                cookie: event.cookie as usize as *mut std::ffi::c_void,
                status,
                ret,
            };
            // SAFETY: `count` < `max` (poll returns at most `max` events), and the caller
            // vouches for `max` writable events at `iocbp`.
            unsafe { iocbp.add(count as usize).write(out) };
            count += 1;
        }
        // SAFETY: non-NULL and writable (checked and vouched for above).
        unsafe { nr.write(count) };
        hipFileError_t::SUCCESS
    })
}

/// `hipFileError_t hipFileBatchIOCancel(hipFileBatchHandle_t batch_idp)` — cancels every
/// request of the batch that has not started; those end as `hipFileCanceled`. Requests
/// already running finish.
///
/// # Errors
///
/// `hipFileInvalidValue` for an unknown batch.
pub extern "C" fn hipFileBatchIOCancel(batch_idp: hipFileBatchHandle_t) -> hipFileError_t {
    boundary(INTERNAL, || {
        let Some(entry) = lookup(batch_idp) else {
            return INVALID;
        };
        lock(&entry).batch.cancel();
        hipFileError_t::SUCCESS
    })
}

/// `void hipFileBatchIODestroy(hipFileBatchHandle_t batch_idp)` — ends the batch: cancels
/// what has not started, waits for what runs, and frees it. Silent for an unknown handle.
pub extern "C" fn hipFileBatchIODestroy(batch_idp: hipFileBatchHandle_t) {
    boundary((), || {
        let removed = batches().remove(&(batch_idp as usize));
        // Outside the registry's lock: dropping the last reference waits for running requests.
        drop(removed);
    })
}
