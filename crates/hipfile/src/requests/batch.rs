//! Batches: cuFile's batch API on the driver's engine. A [`Batch`] takes up to its capacity
//! of requests in flight; [`Batch::submit`] queues them at once, [`Batch::poll`] collects the
//! ones that ended (each once, waiting for a minimum number up to a deadline),
//! [`Batch::cancel`] cancels those not started, and dropping the batch cancels what has not
//! started and waits for the rest.
//!
//! Each request is an ordinary engine request, so a failing one fails alone with its own
//! error, and the batch holds the views it reads into or writes from for its whole life.

use crate::api::buffer::Memory;
use crate::api::driver::Driver;
use crate::api::file::FileHandle;
use crate::api::view::{DeviceBuf, DeviceBufMut};
use crate::engine::null_stream::OrderPoint;
use crate::engine::{Engine, IoState, Slot};
use hipfile_core::IoOutcome;
use hipfile_core::{Error, Op, Request};
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// One request of a batch: a read into a view or a write from one, at a file offset, with
/// the caller's cookie, which comes back with its [`BatchEvent`].
#[derive(Debug)]
pub struct BatchIo<'a> {
    op: Op,
    file: FileHandle,
    memory: Arc<Memory>,
    range: Range<usize>,
    offset: u64,
    cookie: u64,
    /// The view, borrowed until the batch ends.
    _view: PhantomData<&'a mut ()>,
}

impl<'a> BatchIo<'a> {
    /// A read into `dst` (a view or `&mut buffer`) from `file` at `offset`.
    pub fn read(file: &FileHandle, dst: impl DeviceBufMut + 'a, offset: u64, cookie: u64) -> Self {
        let (buffer, range) = dst.parts();
        BatchIo {
            op: Op::Read,
            file: file.clone(),
            memory: Arc::clone(buffer.memory()),
            range,
            offset,
            cookie,
            _view: PhantomData,
        }
    }

    /// A write of `src` (a view or `&buffer`) to `file` at `offset`.
    pub fn write(file: &FileHandle, src: impl DeviceBuf + 'a, offset: u64, cookie: u64) -> Self {
        let (buffer, range) = src.parts();
        BatchIo {
            op: Op::Write,
            file: file.clone(),
            memory: Arc::clone(buffer.memory()),
            range,
            offset,
            cookie,
            _view: PhantomData,
        }
    }
}

/// Where a request of a batch is, as cuFile's batch status says it.
#[derive(Debug)]
#[non_exhaustive]
pub enum BatchStatus {
    /// Submitted; not started yet.
    Waiting,
    /// Being served.
    Pending,
    /// Served: what it moved (short at the end of the file).
    Complete(IoOutcome),
    /// It failed with this error.
    Failed(Error),
    /// Cancelled before it started; it moved nothing.
    Canceled,
}

/// A request of a batch that ended, or its state: the caller's cookie and the status.
#[derive(Debug)]
#[non_exhaustive]
pub struct BatchEvent {
    /// The cookie given with the request.
    pub cookie: u64,
    /// What happened to it.
    pub status: BatchStatus,
}

/// A batch of requests on one driver. See the module documentation.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # // Runs only with a runtime named (as `cargo xtask ci` does); compiles in any case.
/// # if std::env::var_os("HIPFILE_HIP_LIBRARY").is_none() { return Ok(()); }
/// # let path = std::env::temp_dir().join(format!("hipfile-doc-batch-{}", hipfile_core::process::id()));
/// # std::fs::write(&path, vec![9u8; 1 << 20])?;
/// use hipfile::{BatchIo, BatchStatus};
/// let driver = hipfile::Driver::open()?;
/// let fh = driver.register_file(&std::fs::File::open(&path)?)?;
/// let mut buf = driver.alloc(1 << 20)?;
/// let mut batch = driver.batch(128)?;
/// let ios = buf.slice_mut(..)?.chunks(64 << 10)?.into_iter().enumerate().map(|(i, view)| {
///     BatchIo::read(&fh, view, i as u64 * (64 << 10), i as u64)
/// });
/// batch.submit(ios)?;
/// let mut done = 0;
/// while done < 16 {
///     for event in batch.poll(1, 16, None) {
///         assert!(matches!(event.status, BatchStatus::Complete(o) if o.bytes == 64 << 10));
///         done += 1;
///     }
/// }
/// # std::fs::remove_file(&path)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Batch<'a> {
    capacity: usize,
    /// Requests submitted and not yet reported by `poll`.
    entries: Vec<Entry>,
    /// Indices into `entries` of requests that ended and were not reported yet.
    ended: Arc<Ended>,
    /// The process that set it up: in a copy made by `fork()`, none of its requests ends.
    pid: u32,
    /// The views of the requests, borrowed for the batch's life.
    _views: PhantomData<&'a mut ()>,
}

#[derive(Debug)]
struct Entry {
    /// Tells this submission from an earlier one in the same place of `entries`.
    id: u64,
    cookie: u64,
    slot: Arc<Slot>,
}

#[derive(Debug, Default)]
struct Ended {
    ids: Mutex<VecDeque<u64>>,
    ready: Condvar,
}

/// The largest batch capacity: requests in flight beyond this are better served by a
/// second batch.
pub const MAX_BATCH_CAPACITY: usize = 1 << 16;

impl Driver {
    /// A batch that takes up to `capacity` requests in flight (cuFile's default is 128).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] for a capacity of 0 or above [`MAX_BATCH_CAPACITY`].
    pub fn batch<'a>(&self, capacity: usize) -> Result<Batch<'a>, Error> {
        if capacity == 0 || capacity > MAX_BATCH_CAPACITY {
            return Err(Error::InvalidValue {
                op: None,
                what: format!(
                    "a batch capacity of {capacity}; it must be 1 to {MAX_BATCH_CAPACITY}"
                ),
            });
        }
        Ok(Batch {
            capacity,
            entries: Vec::new(),
            ended: Arc::default(),
            pid: hipfile_core::process::id(),
            _views: PhantomData,
        })
    }
}

static NEXT_ENTRY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<'a> Batch<'a> {
    /// The most requests this batch holds in flight.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Requests submitted and not yet reported by [`poll`](Self::poll).
    pub fn outstanding(&self) -> usize {
        self.entries.len()
    }

    /// Queues every request of `ios` on the driver's engine, in order. All or nothing: when
    /// they would take the batch beyond its capacity none is queued. Requests on files or
    /// buffers of another driver are served by that driver's engine.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] when the batch would hold more than its capacity.
    pub fn submit(&mut self, ios: impl IntoIterator<Item = BatchIo<'a>>) -> Result<(), Error> {
        let ios: Vec<BatchIo<'a>> = ios.into_iter().collect();
        for io in &ios {
            io.file.driver().in_this_process()?;
        }
        if self.entries.len() + ios.len() > self.capacity {
            return Err(Error::InvalidValue {
                op: None,
                what: format!(
                    "{} requests submitted to a batch of capacity {} that holds {}; poll it \
                     for ended requests first, or set up a larger batch",
                    ios.len(),
                    self.capacity,
                    self.entries.len()
                ),
            });
        }
        // The requests of one driver, in the order given, to be ordered after the null
        // streams together: one order for all of a device's, as of this call.
        let mut together: Vec<(Driver, Vec<_>)> = Vec::new();
        for io in ios {
            let id = NEXT_ENTRY.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let ended = Arc::clone(&self.ended);
            let listener = Box::new(move || {
                lock(&ended.ids).push_back(id);
                ended.ready.notify_all();
            });
            let BatchIo {
                op,
                file,
                memory,
                range,
                offset,
                cookie,
                ..
            } = io;
            let request = Request {
                op,
                size: range.len() as u64,
                file_offset: offset,
                buffer_offset: range.start as u64,
            };
            let device = memory.device_now();
            let entered = file.enter_owned();
            let point = Arc::new(OrderPoint::default());
            let order = Arc::clone(&point);
            let job = Box::new(move || entered?.serve(op, &memory, Ok(request), order.order()));
            let slot = Engine::slot(op, job, Some(listener));
            let request = (device, Arc::clone(&slot), point);
            match together.iter_mut().find(|(d, _)| d.same_as(file.driver())) {
                Some((_, requests)) => requests.push(request),
                None => together.push((file.driver().clone(), vec![request])),
            }
            self.entries.push(Entry { id, cookie, slot });
        }
        for (driver, requests) in together {
            driver.queue_all_after_null_stream(requests);
        }
        Ok(())
    }

    /// Waits until at least `min` requests have ended (fewer if fewer are outstanding), or
    /// until `timeout` has passed (`None`, or one too long for the clock to reach: no
    /// deadline), and returns up to `max` of the
    /// requests that ended, each once, in the order they ended. A request returned here
    /// leaves the batch, which makes room for another. In a process made by `fork()` from
    /// the one that set the batch up, where none of its requests ends, it waits for nothing.
    pub fn poll(&mut self, min: usize, max: usize, timeout: Option<Duration>) -> Vec<BatchEvent> {
        // A copy of the process made by fork(): no request of this batch ends here.
        let min = if self.pid == hipfile_core::process::id() {
            min.min(self.entries.len()).min(max)
        } else {
            0
        };
        // A deadline past what the clock can hold is never reached: no deadline.
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        let mut ids = lock(&self.ended.ids);
        while ids.len() < min {
            match deadline {
                None => {
                    ids = self
                        .ended
                        .ready
                        .wait(ids)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        break;
                    }
                    ids = self
                        .ended
                        .ready
                        .wait_timeout(ids, d - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                }
            }
        }
        let take = ids.len().min(max);
        let taken: Vec<u64> = ids.drain(..take).collect();
        drop(ids);
        let mut events = Vec::with_capacity(taken.len());
        for id in taken {
            let Some(at) = self.entries.iter().position(|e| e.id == id) else {
                continue;
            };
            let entry = self.entries.swap_remove(at);
            let status = match entry.slot.take_result() {
                Some(Ok(outcome)) => BatchStatus::Complete(outcome),
                Some(Err(Error::Canceled { .. })) => BatchStatus::Canceled,
                Some(Err(e)) => BatchStatus::Failed(e),
                None => BatchStatus::Failed(Error::Internal(
                    "a batch request ended without a result".into(),
                )),
            };
            events.push(BatchEvent {
                cookie: entry.cookie,
                status,
            });
        }
        events
    }

    /// The cookie and state of every outstanding request, in submission order, without
    /// taking any: those that ended wait for [`poll`](Self::poll), which reports them with
    /// their result.
    pub fn status(&self) -> Vec<(u64, IoState)> {
        self.entries
            .iter()
            .map(|e| (e.cookie, e.slot.phase()))
            .collect()
    }

    /// Cancels every outstanding request that has not started; those then end as
    /// [`BatchStatus::Canceled`]. Requests already running finish. Returns how many were
    /// cancelled.
    pub fn cancel(&mut self) -> usize {
        self.entries.iter().filter(|e| e.slot.cancel()).count()
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        for e in &self.entries {
            e.slot.cancel();
        }
        for e in &self.entries {
            e.slot.wait_ended();
        }
    }
}
