//! The parallel path for large requests: a request is cut into tasks at file offsets that are
//! multiples of the task size, a pool of I/O threads serves the tasks of every request from
//! one queue, and the caller waits for its own tasks, then adds up what they moved.
//!
//! Each worker creates its own stream and events on its first task and keeps them until the
//! pool is dropped. For a task it takes up to [`StagingConfig::BUFFERS_PER_WORKER`] buffers
//! from the driver's [`StagingPool`] (the first waiting, the second only if one is free, so
//! that workers never wait on each other while holding a buffer) and moves the task chunk by
//! chunk: for a read, the `pread` of chunk i+1 runs while chunk i is copied to the device; for
//! a write, chunk i+1 is copied from the device while chunk i is written. Before a buffer is
//! reused its event is waited for, and at the end of the task the stream is synchronised
//! before the buffers go back, so the bytes are in place when the caller is told the task is
//! done.
//!
//! A task that fails marks its request cancelled, and tasks of that request that have not
//! started yet are skipped; a read task that comes back short (the end of the file) makes
//! later tasks of its request skip too. The caller always waits until every one of its tasks
//! has finished or been skipped, so no worker touches its descriptor or device memory after
//! the call returns.
//!
//! [`StagingConfig::BUFFERS_PER_WORKER`]: crate::StagingConfig::BUFFERS_PER_WORKER
//!
//! # Safety
//!
//! Tasks carry the caller's descriptor as a raw number and its device memory as a
//! [`DeviceRange`]. Both stay valid for as long as any task of the request exists, because
//! [`Pipeline::run`] does not return before every task of the request is finished, and a task
//! is finished only after its stream has been synchronised.

#![allow(unsafe_code)]

use crate::staging::{DeviceRange, StagingGuard, StagingPool};
use crate::transfer::{pread_full, pwrite_full};
use hipfile_core::runtime::{EventHandle, StreamHandle};
use hipfile_core::{BackendError, GpuRuntime, Op, RuntimeError};
use rustix::io::Errno;
use std::collections::VecDeque;
use std::fmt;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;

/// Split points are multiples of this (in file offsets), whatever the task size asked for.
const ALIGN: u64 = 4096;

/// The pool of I/O threads of one fallback, started on the first request it serves and joined
/// when it is dropped.
pub(crate) struct Pipeline {
    shared: Arc<Shared>,
    threads: usize,
    task_size: u64,
    workers: OnceLock<Vec<JoinHandle<()>>>,
}

struct Shared {
    pool: Arc<StagingPool>,
    queue: Mutex<Queue>,
    /// Signalled when a task is queued or the pool closes.
    ready: Condvar,
    dispatched: AtomicU64,
}

#[derive(Default)]
struct Queue {
    tasks: VecDeque<Task>,
    closing: bool,
}

/// One piece of a request.
struct Task {
    op: Op,
    fd: RawFd,
    device: DeviceRange,
    file_offset: u64,
    index: usize,
    request: Arc<Progress>,
}

/// What one task did.
enum Outcome {
    Moved(u64),
    Skipped,
    Failed(BackendError),
}

/// The shared state of one request's tasks.
struct Progress {
    cancelled: AtomicBool,
    /// The lowest index of a read task that came back short; later tasks need not run.
    short_at: AtomicUsize,
    outcomes: Mutex<Outcomes>,
    /// Signalled when the last task finishes.
    done: Condvar,
}

struct Outcomes {
    remaining: usize,
    each: Vec<Option<Outcome>>,
}

impl Pipeline {
    /// A pool of `threads` workers (at least 1) over `pool`'s buffers, cutting requests into
    /// tasks of `task_size` bytes (rounded up to 4096). Nothing starts before the first
    /// [`Pipeline::run`].
    pub(crate) fn new(pool: Arc<StagingPool>, threads: usize, task_size: u64) -> Self {
        Pipeline {
            shared: Arc::new(Shared {
                pool,
                queue: Mutex::new(Queue::default()),
                ready: Condvar::new(),
                dispatched: AtomicU64::new(0),
            }),
            threads: threads.max(1),
            task_size: task_size.max(1).div_ceil(ALIGN) * ALIGN,
            workers: OnceLock::new(),
        }
    }

    /// Tasks handed to the workers so far.
    pub(crate) fn tasks_dispatched(&self) -> u64 {
        self.shared.dispatched.load(Ordering::Relaxed)
    }

    /// Worker threads running (0 before the first request).
    pub(crate) fn threads_started(&self) -> usize {
        self.workers.get().map_or(0, Vec::len)
    }

    /// Moves `device` from or to `file_offset..` of `fd` through the workers and returns the
    /// bytes moved: for a read, the bytes up to the first task that came back short. `None`
    /// when no worker thread could be started (the caller serves the request itself). Does
    /// not sync.
    ///
    /// # Errors
    ///
    /// The error of the failed task with the lowest index, once every task has finished or
    /// been skipped.
    pub(crate) fn run(
        &self,
        op: Op,
        fd: BorrowedFd<'_>,
        device: DeviceRange,
        file_offset: u64,
    ) -> Option<Result<u64, BackendError>> {
        if self.start().is_empty() {
            return None;
        }
        let tasks = split(device, file_offset, self.task_for(device.len()));
        let request = Arc::new(Progress {
            cancelled: AtomicBool::new(false),
            short_at: AtomicUsize::new(usize::MAX),
            outcomes: Mutex::new(Outcomes {
                remaining: tasks.len(),
                each: (0..tasks.len()).map(|_| None).collect(),
            }),
            done: Condvar::new(),
        });
        let count = tasks.len();
        {
            let mut queue = lock(&self.shared.queue);
            queue.tasks.extend(
                tasks
                    .iter()
                    .enumerate()
                    .map(|(index, &(device, offset))| Task {
                        op,
                        fd: fd.as_raw_fd(),
                        device,
                        file_offset: offset,
                        index,
                        request: Arc::clone(&request),
                    }),
            );
        }
        self.shared
            .dispatched
            .fetch_add(count as u64, Ordering::Relaxed);
        if count == 1 {
            self.shared.ready.notify_one();
        } else {
            self.shared.ready.notify_all();
        }

        // Nothing between queueing and here can unwind: the caller waits for every task
        // (module invariant).
        let mut outcomes = lock(&request.outcomes);
        while outcomes.remaining > 0 {
            outcomes = request
                .done
                .wait(outcomes)
                .unwrap_or_else(PoisonError::into_inner);
        }
        let mut total = 0u64;
        let mut short = false;
        for (slot, &(piece, _)) in outcomes.each.iter_mut().zip(&tasks) {
            match slot.take() {
                Some(Outcome::Failed(e)) => return Some(Err(e)),
                Some(Outcome::Moved(n)) if !short => {
                    total += n;
                    short = n < piece.len();
                }
                _ => short = true,
            }
        }
        Some(Ok(total))
    }

    /// The worker threads, started on the first call. Threads that cannot be spawned are
    /// done without; none at all leaves the caller to serve requests itself.
    fn start(&self) -> &[JoinHandle<()>] {
        self.workers.get_or_init(|| {
            (0..self.threads)
                .map_while(|i| {
                    let shared = Arc::clone(&self.shared);
                    std::thread::Builder::new()
                        .name(format!("hipfile-io-{i}"))
                        .spawn(move || worker(&shared))
                        .ok()
                })
                .collect()
        })
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        let Some(workers) = self.workers.take() else {
            return;
        };
        lock(&self.shared.queue).closing = true;
        self.shared.ready.notify_all();
        for w in workers {
            // A worker catches its tasks' panics, so a join error cannot come from one.
            let _ = w.join();
        }
    }
}

impl fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeline")
            .field("threads", &self.threads)
            .field("task_size", &self.task_size)
            .field("started", &self.threads_started())
            .field("tasks_dispatched", &self.tasks_dispatched())
            .finish()
    }
}

impl Pipeline {
    /// The task size for a request of `len` bytes: the configured size, but small enough
    /// that one request keeps every worker busy (a caller issuing one 64 MiB request at a
    /// time must not leave half of 16 workers idle), and never below [`MIN_TASK`].
    fn task_for(&self, len: u64) -> u64 {
        let threads = u64::try_from(self.threads.max(1)).unwrap_or(1);
        let even_share = len.div_ceil(threads).div_ceil(ALIGN) * ALIGN;
        self.task_size.min(even_share.max(MIN_TASK))
    }
}

/// The smallest task a request is cut into when it is spread over the workers.
const MIN_TASK: u64 = 1 << 20;

/// `device` at `file_offset`, cut where the file offset is a multiple of `task_size`: each
/// piece with its file offset.
fn split(device: DeviceRange, file_offset: u64, task_size: u64) -> Vec<(DeviceRange, u64)> {
    let mut pieces = Vec::with_capacity(usize::try_from(device.len() / task_size + 2).unwrap_or(2));
    let mut rest = device;
    let mut offset = file_offset;
    while rest.len() > 0 {
        let boundary = (offset / task_size + 1) * task_size;
        let (piece, after) = rest.split_at(boundary - offset);
        pieces.push((piece, offset));
        offset += piece.len();
        rest = after;
    }
    pieces
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section here leaves its state consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A worker's stream and one event per buffer, created on its first task.
struct Gpu {
    stream: StreamHandle,
    events: Vec<EventHandle>,
}

impl Gpu {
    fn create(runtime: &dyn GpuRuntime) -> Result<Gpu, BackendError> {
        runtime.thread_init().map_err(BackendError::Runtime)?;
        let stream = runtime.stream_create().map_err(BackendError::Runtime)?;
        let mut gpu = Gpu {
            stream,
            events: Vec::new(),
        };
        for _ in 0..crate::StagingConfig::BUFFERS_PER_WORKER {
            match runtime.event_create() {
                Ok(e) => gpu.events.push(e),
                Err(e) => {
                    gpu.destroy(runtime);
                    return Err(BackendError::Runtime(e));
                }
            }
        }
        Ok(gpu)
    }

    fn destroy(self, runtime: &dyn GpuRuntime) {
        // Failures cannot be reported from here and leave only a handle behind.
        for e in self.events {
            let _ = runtime.event_destroy(e);
        }
        let _ = runtime.stream_destroy(self.stream);
    }
}

fn worker(shared: &Shared) {
    let runtime: &dyn GpuRuntime = &**shared.pool.runtime();
    let mut gpu: Option<Gpu> = None;
    loop {
        let task = {
            let mut queue = lock(&shared.queue);
            loop {
                if let Some(t) = queue.tasks.pop_front() {
                    break t;
                }
                if queue.closing {
                    drop(queue);
                    if let Some(g) = gpu.take() {
                        g.destroy(runtime);
                    }
                    return;
                }
                queue = shared
                    .ready
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        };
        let request = Arc::clone(&task.request);
        let index = task.index;
        let outcome = if request.cancelled.load(Ordering::Acquire)
            || request.short_at.load(Ordering::Acquire) < index
        {
            Outcome::Skipped
        } else {
            let len = task.device.len();
            let r = std::panic::catch_unwind(AssertUnwindSafe(|| {
                serve_task(&shared.pool, runtime, &mut gpu, &task)
            }))
            .unwrap_or_else(|_| {
                // The stream may be left mid-copy: start afresh next time.
                gpu = None;
                Err(BackendError::Os {
                    call: "fallback I/O worker",
                    errno: Errno::IO.raw_os_error(),
                })
            });
            match r {
                Ok(n) => {
                    if n < len {
                        request.short_at.fetch_min(index, Ordering::AcqRel);
                    }
                    Outcome::Moved(n)
                }
                Err(e) => {
                    request.cancelled.store(true, Ordering::Release);
                    Outcome::Failed(e)
                }
            }
        };
        drop(task);
        let mut outcomes = lock(&request.outcomes);
        outcomes.each[index] = Some(outcome);
        outcomes.remaining -= 1;
        if outcomes.remaining == 0 {
            request.done.notify_all();
        }
    }
}

/// Buffers with copies possibly queued on `stream`: dropping it waits for the stream before
/// the buffers go back, on every path out of a task (errors and panics included).
struct InFlight<'a> {
    buffers: Vec<StagingGuard<'a>>,
    runtime: &'a dyn GpuRuntime,
    stream: StreamHandle,
    synced: bool,
}

impl InFlight<'_> {
    fn finish(mut self) -> Result<(), RuntimeError> {
        self.synced = true;
        self.runtime.stream_synchronize(self.stream)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.synced {
            // A failure cannot be reported from here; the task already failed.
            let _ = self.runtime.stream_synchronize(self.stream);
        }
    }
}

fn serve_task(
    pool: &StagingPool,
    runtime: &dyn GpuRuntime,
    gpu: &mut Option<Gpu>,
    task: &Task,
) -> Result<u64, BackendError> {
    let g = match gpu {
        Some(g) => g,
        None => gpu.insert(Gpu::create(runtime)?),
    };
    let mut buffers = vec![pool.acquire()?];
    buffers.extend(pool.try_acquire());
    let mut flight = InFlight {
        buffers,
        runtime,
        stream: g.stream,
        synced: false,
    };
    // SAFETY: the caller of `Pipeline::run` keeps the descriptor open until this task is
    // finished (module invariant).
    let fd = unsafe { BorrowedFd::borrow_raw(task.fd) };
    let moved = match task.op {
        Op::Read => read_task(&mut flight, &g.events, fd, task.device, task.file_offset),
        Op::Write => write_task(&mut flight, &g.events, fd, task.device, task.file_offset),
    };
    let synced = flight.finish();
    if synced.is_err() {
        // A stream that failed to synchronise is not trusted again.
        if let Some(g) = gpu.take() {
            g.destroy(runtime);
        }
    }
    let moved = moved?;
    synced.map_err(BackendError::Runtime)?;
    Ok(moved)
}

/// `pread` into one buffer while the other is being copied to the device.
fn read_task(
    flight: &mut InFlight<'_>,
    events: &[EventHandle],
    fd: BorrowedFd<'_>,
    device: DeviceRange,
    file_offset: u64,
) -> Result<u64, BackendError> {
    let runtime = flight.runtime;
    let stream = flight.stream;
    let n = flight.buffers.len();
    let chunk = flight.buffers[0].capacity() as u64;
    let mut pending = vec![false; n];
    let mut rest = device;
    let mut done = 0u64;
    let mut i = 0;
    while rest.len() > 0 {
        let (piece, after) = rest.split_at(chunk);
        let slot = i % n;
        if pending[slot] {
            runtime
                .event_synchronize(events[slot])
                .map_err(BackendError::Runtime)?;
            pending[slot] = false;
        }
        // A piece is at most a buffer's capacity, a `usize`.
        let want = piece.len() as usize;
        let buf = &mut flight.buffers[slot];
        let got = pread_full(fd, &mut buf.as_mut_slice()[..want], file_offset + done)?;
        if got > 0 {
            let (filled, _) = piece.split_at(got as u64);
            // SAFETY: the buffer is not written again before its event (recorded next) or
            // the stream has been waited for, and `flight` waits for the stream before it
            // gives the buffer back; the request's device memory outlives the task (module
            // invariant).
            unsafe { buf.copy_to_device_on(filled, stream) }?;
            pending[slot] = true;
            runtime
                .event_record(events[slot], stream)
                .map_err(BackendError::Runtime)?;
        }
        done += got as u64;
        if got < want {
            break; // end of file
        }
        rest = after;
        i += 1;
    }
    Ok(done)
}

/// Copy from the device into one buffer while the other is being written.
fn write_task(
    flight: &mut InFlight<'_>,
    events: &[EventHandle],
    fd: BorrowedFd<'_>,
    device: DeviceRange,
    file_offset: u64,
) -> Result<u64, BackendError> {
    let n = flight.buffers.len();
    let chunk = flight.buffers[0].capacity() as u64;
    let mut pieces = Vec::new();
    let mut rest = device;
    while rest.len() > 0 {
        let (piece, after) = rest.split_at(chunk);
        pieces.push(piece);
        rest = after;
    }
    let mut queued = 0;
    while queued < n.min(pieces.len()) {
        queue_copy(flight, events, queued % n, pieces[queued])?;
        queued += 1;
    }
    for (k, piece) in pieces.iter().enumerate() {
        let slot = k % n;
        flight
            .runtime
            .event_synchronize(events[slot])
            .map_err(BackendError::Runtime)?;
        // A piece is at most a buffer's capacity, a `usize`.
        let len = piece.len() as usize;
        pwrite_full(
            fd,
            &flight.buffers[slot].as_slice()[..len],
            file_offset + k as u64 * chunk,
        )?;
        if queued < pieces.len() {
            // The buffer of chunk `queued` is `slot`'s, just written out.
            queue_copy(flight, events, queued % n, pieces[queued])?;
            queued += 1;
        }
    }
    Ok(device.len())
}

fn queue_copy(
    flight: &mut InFlight<'_>,
    events: &[EventHandle],
    slot: usize,
    piece: DeviceRange,
) -> Result<(), BackendError> {
    let stream = flight.stream;
    // SAFETY: the buffer is read (by `pwrite`) only after its event, recorded next, has been
    // waited for, and `flight` waits for the stream before it gives the buffer back; the
    // request's device memory outlives the task (module invariant).
    unsafe { flight.buffers[slot].copy_from_device_on(piece, stream) }?;
    flight
        .runtime
        .event_record(events[slot], stream)
        .map_err(BackendError::Runtime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hipfile_core::DevicePtr;

    #[test]
    fn splits_at_multiples_of_the_task_size_in_file_offsets() {
        let range = |len| DeviceRange::for_test(DevicePtr(0x10_000), len);
        let lens = |pieces: &[(DeviceRange, u64)]| {
            pieces
                .iter()
                .map(|(d, o)| (d.len(), *o))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            lens(&split(range(3 * 8192), 0, 8192)),
            [(8192, 0), (8192, 8192), (8192, 16384)]
        );
        assert_eq!(
            lens(&split(range(8192 + 2), 8191, 8192)),
            [(1, 8191), (8192, 8192), (1, 16384)]
        );
        assert_eq!(lens(&split(range(5), 100, 8192)), [(5, 100)]);
        assert!(split(range(0), 0, 8192).is_empty());
    }
}
