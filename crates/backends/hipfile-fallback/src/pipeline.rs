//! The parallel path for large requests: a request is cut into tasks (one even share per
//! worker, longer behind a backlog: see `Pipeline::task_for`) at file offsets that are
//! multiples of the task size, a pool of I/O threads serves the tasks of every request from
//! one queue, and the caller waits for its own tasks, then adds up what they moved.
//!
//! Each worker creates a stream and events for a device on its first task for a buffer of
//! that device, and keeps them until the pool is dropped; before a task it makes the buffer's
//! device current on its thread, so that its copies run on a stream of the device that owns
//! the memory. For a task it takes up to [`StagingConfig::BUFFERS_PER_WORKER`] buffers from
//! the driver's [`StagingPool`] (the first waiting, the second only if the task spans more
//! than one chunk and one is free, so that workers never wait on each other while holding a
//! buffer) and moves the task chunk by chunk (cut where the file offset is a multiple of the
//! chunk size): for a read, the `pread` of
//! chunk i+1 runs while chunk i is copied to the device; for a write, chunk i+1 is copied from
//! the device while chunk i is written, and chunk i's writeback to the disk is started as soon
//! as it is written (the request's one `fdatasync` comes after every task). Before a buffer
//! is reused its event is waited for. A task is reported done only once its copies have
//! run: at the end of a write task, or of a read task with no read from the same file
//! system queued for the same device, the stream is synchronised before the buffers go
//! back; a read task with such a read queued behind it keeps its buffers and stream for
//! that one (a `Tail`), whose first chunk is read while the last copies run, and is
//! reported once their events have been waited for, so that a worker's reads go on without
//! a pause between tasks.
//!
//! A task that fails, or a read task that comes back short (the end of the file), makes the
//! later tasks of its request that have not started yet skip; the earlier ones still run,
//! whenever a worker gets to them, since their bytes count toward what the request moved. A
//! write task that fails says how many bytes it wrote first, so that the request can return
//! the bytes written from its start (`transfer::serve`), the same count however the workers
//! were scheduled. The caller always waits until every one of its tasks has finished
//! or been skipped, so no worker touches its descriptor or device memory after the call
//! returns.
//!
//! [`StagingConfig::BUFFERS_PER_WORKER`]: crate::staging::StagingConfig::BUFFERS_PER_WORKER
//!
//! # Safety
//!
//! Tasks carry the caller's descriptor as a raw number and its device memory as a
//! [`DeviceRange`]. Both stay valid for as long as any task of the request exists, because
//! [`Pipeline::run`] does not return before every task of the request is finished, and a task
//! is finished only after its copies have run (its stream synchronised, or the events
//! recorded after its last copies waited for); on a path that could not wait for them (a
//! panic), only after its stream has been synchronised or its buffers given up. A number means the caller's file
//! in the worker only if the two threads share a descriptor table: a worker checks that the
//! numbers are the same open files (device, inode, access mode, `O_APPEND`, `O_DIRECT`) as
//! in the caller's table before it uses them, and otherwise leaves the request to the caller.

#![allow(unsafe_code)]

use crate::cache::start_writeback;
use crate::posix::{ColdReads, Direct, Failed, pread_chunk, pwrite_full};
use crate::staging::{DeviceRange, StagingConfig, StagingGuard, StagingPool};
use hipfile_core::runtime::{EventHandle, StreamHandle, Streams};
use hipfile_core::{BackendError, FallbackKnobs, GpuRuntime, Op, RuntimeError};
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
    cold: ColdReads,
}

#[derive(Default)]
struct Queue {
    tasks: VecDeque<Task>,
    /// The bytes of `tasks`: work that every worker is too busy to have started.
    bytes: u64,
    closing: bool,
}

/// One piece of a request.
struct Task {
    op: Op,
    /// The device that owns `device`'s memory: the worker's copies run on its stream.
    gpu: i32,
    fd: RawFd,
    /// The `O_DIRECT` descriptor and its offset and memory alignments, for uncached reads.
    direct: Option<(RawFd, u64, u64)>,
    /// What `fd` and the direct descriptor are in the caller's descriptor table.
    expect: Expected,
    device: DeviceRange,
    file_offset: u64,
    index: usize,
    request: Arc<Progress>,
}

/// What one task did.
enum Outcome {
    Moved(u64),
    Skipped,
    /// The descriptor numbers are other files (or none) in the worker's table: the caller
    /// has a descriptor table of its own (`unshare(CLONE_FILES)`), so it serves the request.
    Foreign,
    /// For a write, with the bytes written from the task's start before the failure.
    Failed(Failed),
}

/// The shared state of one request's tasks.
struct Progress {
    /// A task found the descriptors foreign: the caller serves the request, no task runs.
    cancelled: AtomicBool,
    /// The lowest index of a task that failed, or of a read task that came back short: later
    /// tasks need not run.
    stop_at: AtomicUsize,
    outcomes: Mutex<Outcomes>,
    /// Signalled when the last task finishes.
    done: Condvar,
}

impl Progress {
    fn new(tasks: usize) -> Progress {
        Progress {
            cancelled: AtomicBool::new(false),
            stop_at: AtomicUsize::new(usize::MAX),
            outcomes: Mutex::new(Outcomes {
                remaining: tasks,
                each: (0..tasks).map(|_| None).collect(),
            }),
            done: Condvar::new(),
        }
    }

    /// Task `index` failed or came back short: the tasks after it need not run.
    fn stop_after(&self, index: usize) {
        self.stop_at.fetch_min(index, Ordering::AcqRel);
    }

    /// Whether task `index`, not started yet, is skipped.
    fn skips(&self, index: usize) -> bool {
        self.cancelled.load(Ordering::Acquire) || self.stop_at.load(Ordering::Acquire) < index
    }

    /// Records task `index`'s outcome, and wakes the caller when it was the last.
    fn finish(&self, index: usize, outcome: Outcome) {
        let mut outcomes = lock(&self.outcomes);
        outcomes.each[index] = Some(outcome);
        outcomes.remaining -= 1;
        if outcomes.remaining == 0 {
            self.done.notify_all();
        }
    }
}

struct Outcomes {
    remaining: usize,
    each: Vec<Option<Outcome>>,
}

impl Pipeline {
    /// A pool of `threads` workers (1 to [`FallbackKnobs::MAX_IO_THREADS`]) over `pool`'s
    /// buffers, cutting requests into tasks of `task_size` bytes (rounded up to 4096; any
    /// value is taken). Nothing starts before the first [`Pipeline::run`].
    pub(crate) fn new(pool: Arc<StagingPool>, threads: usize, task_size: u64) -> Self {
        Pipeline {
            shared: Arc::new(Shared {
                pool,
                queue: Mutex::new(Queue::default()),
                ready: Condvar::new(),
                dispatched: AtomicU64::new(0),
                cold: ColdReads::new(),
            }),
            threads: threads.clamp(1, FallbackKnobs::MAX_IO_THREADS),
            task_size: round_up(task_size.max(1), ALIGN),
            workers: OnceLock::new(),
        }
    }

    /// Tasks handed to the workers so far.
    pub(crate) fn tasks_dispatched(&self) -> u64 {
        self.shared.dispatched.load(Ordering::Relaxed)
    }

    /// Bytes read with `O_DIRECT` so far.
    pub(crate) fn direct_read_bytes(&self) -> u64 {
        self.shared.cold.direct_bytes()
    }

    /// Worker threads running (0 before the first request).
    pub(crate) fn threads_started(&self) -> usize {
        self.workers.get().map_or(0, Vec::len)
    }

    /// Moves `device` from or to `file_offset..` of `fd` through the workers and returns the
    /// bytes moved: for a read, the bytes up to the first task that came back short. Reads
    /// take what the page cache lacks through `direct` when it is given. `None`
    /// when no worker thread could be started (the caller serves the request itself). Does
    /// not sync.
    ///
    /// # Errors
    ///
    /// The error of the failed task with the lowest index, once every task has finished or
    /// been skipped, with the bytes written from the request's start before it: those of
    /// the tasks before it (all of them finished: tasks are taken in order, so a task that
    /// is skipped comes after the one that failed) and what it wrote itself before failing.
    /// Tasks after it may have written bytes past that count.
    pub(crate) fn run(
        &self,
        op: Op,
        gpu: i32,
        fd: BorrowedFd<'_>,
        direct: Option<Direct<'_>>,
        device: DeviceRange,
        file_offset: u64,
    ) -> Option<Result<u64, Failed>> {
        if self.start().is_empty() {
            return None;
        }
        let backlog = lock(&self.shared.queue).bytes;
        let task_size = self.task_for(device.len(), backlog);
        let tasks = split(device, file_offset, task_size);
        // Long tasks read sequentially enough for the kernel's readahead to keep the disk
        // busy; short ones do better with direct reads (see `DIRECT_BELOW_TASK`).
        let direct = direct.filter(|_| task_size < DIRECT_BELOW_TASK);
        let expect = Expected {
            fd: Identity::of(fd.as_raw_fd())?,
            direct: match direct {
                Some(d) => Some(Identity::of(d.fd.as_raw_fd())?),
                None => None,
            },
        };
        let request = Arc::new(Progress::new(tasks.len()));
        let count = tasks.len();
        // The workers this request keeps busy take their buffers at once: have them pinned
        // as one allocation rather than one each while the others copy (a no-op once the
        // pool holds that many).
        let chunk = self.chunk_size();
        let busy = tasks
            .iter()
            .take(self.threads)
            .map(|(d, offset)| buffers_for(chunk, *offset, d.len()))
            .sum();
        self.shared.pool.reserve(busy);
        {
            let mut queue = lock(&self.shared.queue);
            queue.bytes += device.len();
            queue.tasks.extend(
                tasks
                    .iter()
                    .enumerate()
                    .map(|(index, &(device, offset))| Task {
                        op,
                        gpu,
                        fd: fd.as_raw_fd(),
                        direct: direct.map(|d| (d.fd.as_raw_fd(), d.offset_align, d.mem_align)),
                        expect,
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
        if outcomes
            .each
            .iter()
            .any(|o| matches!(o, Some(Outcome::Foreign)))
        {
            return None;
        }
        let mut total = 0u64;
        let mut short = false;
        for (slot, &(piece, _)) in outcomes.each.iter_mut().zip(&tasks) {
            match slot.take() {
                Some(Outcome::Failed(f)) if short => {
                    return Some(Err(Failed::after(total)(f.error)));
                }
                Some(Outcome::Failed(f)) => return Some(Err(f.within(total))),
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
    /// The task size for a request of `len` bytes: an even share of the request per worker,
    /// so that one request keeps every worker busy (a caller issuing one 64 MiB request at a
    /// time must not leave half of 16 workers idle) and each worker pipelines its share with
    /// one stream synchronisation at the end. The share is at least [`MIN_TASK`] (or the
    /// configured size, if smaller) and, above the configured size, at most
    /// [`MAX_TASK`] (or the configured size, if larger): a worker's stream drains at the end
    /// of a task with no read queued behind it, which costs one chunk's copy, while very
    /// large tasks would
    /// keep a request's error from stopping the others early and hold workers from later
    /// requests.
    ///
    /// Behind a `backlog` of queued bytes that no worker has started (every worker busy),
    /// spreading the request gains nothing: its tasks wait anyway, and each task's end costs
    /// a wait for its last copies' events and a report. Its
    /// tasks are then as long as each worker's share of the backlog, up to the whole
    /// request (within the same upper bound), so that many requests in flight (a loader's
    /// window of tensors, many callers' mid-size reads) move in long tasks, while the
    /// request's tasks still end about when the work queued before them does.
    fn task_for(&self, len: u64, backlog: u64) -> u64 {
        let threads = u64::try_from(self.threads.max(1)).unwrap_or(1);
        let even_share = round_up(len.div_ceil(threads), ALIGN);
        let most = MAX_TASK.max(self.task_size);
        let spread = even_share.max(MIN_TASK.min(self.task_size)).min(most);
        let behind = round_up((backlog / threads).min(len), ALIGN).min(most);
        spread.max(behind)
    }

    /// The staging buffers that requests of `len` bytes keep busy when they keep every
    /// worker busy: what a task of theirs takes, on each worker (0 for `len` 0).
    pub(crate) fn buffers_busy_for(&self, len: u64) -> usize {
        if len == 0 {
            return 0;
        }
        let task = self.task_for(len, 0).min(len);
        self.threads * buffers_for(self.chunk_size(), 0, task)
    }

    fn chunk_size(&self) -> u64 {
        self.shared.pool.config().chunk_size as u64
    }
}

/// `n` rounded up to a multiple of `align` (at least 1), or the largest multiple of `align`
/// when that does not fit.
fn round_up(n: u64, align: u64) -> u64 {
    let align = align.max(1);
    n.checked_next_multiple_of(align)
        .unwrap_or(u64::MAX / align * align)
}

/// The smallest task a request is cut into when it is spread over the workers.
const MIN_TASK: u64 = 1 << 20;

/// Uncached parts of reads go direct only in tasks shorter than this. Measured on the GPU
/// machine's disk in one run, cold 8 GiB file (docs/BENCHMARKS.md): with 4 MiB tasks
/// (64 MiB requests over 16 workers) direct reads moved 1.91 GB/s against 1.62 buffered;
/// with 16 MiB tasks 1.79 against 1.80; with 64 MiB tasks 1.64 and 2.01 against 2.00 and
/// 2.05. One synchronous direct read per worker keeps fewer bytes in flight than readahead
/// does along a long sequential task, while short tasks end before readahead gets going.
const DIRECT_BELOW_TASK: u64 = 16 << 20;

/// The largest task a request is cut into, unless the configured task size is larger: 32
/// chunks of 2 MiB (16 of 4 MiB since chunks are a task long), so the drain at the end of a
/// task with nothing queued behind it costs about 3 % (measured on the H200 machine: a continuous pipeline moved 46 GB/s
/// against 34 with one drain per 4 MiB, docs/BENCHMARKS.md).
const MAX_TASK: u64 = 64 << 20;

/// `device` at `file_offset`, cut where the file offset is a multiple of `task_size`: each
/// piece with its file offset.
fn split(device: DeviceRange, file_offset: u64, task_size: u64) -> Vec<(DeviceRange, u64)> {
    let mut pieces = Vec::with_capacity(usize::try_from(device.len() / task_size + 2).unwrap_or(2));
    let mut rest = device;
    let mut offset = file_offset;
    while rest.len() > 0 {
        // Past `offset` even when it saturates: tasks are at least 4096 bytes.
        let boundary = (offset / task_size + 1).saturating_mul(task_size);
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

/// A worker's stream and one event per buffer on one device, created on its first task for
/// that device.
struct Gpu {
    device: i32,
    stream: StreamHandle,
    events: Vec<EventHandle>,
}

impl Gpu {
    /// Makes `device` current on the calling (worker) thread and creates the stream and
    /// events there, so that they belong to it. A runtime without streams fails here, the
    /// first use of them.
    fn create(runtime: &dyn GpuRuntime, device: i32) -> Result<Gpu, BackendError> {
        let streams = runtime.require_streams().map_err(BackendError::Runtime)?;
        runtime.thread_init().map_err(BackendError::Runtime)?;
        runtime.set_device(device).map_err(BackendError::Runtime)?;
        let stream = streams.stream_create().map_err(BackendError::Runtime)?;
        let mut gpu = Gpu {
            device,
            stream,
            events: Vec::new(),
        };
        for _ in 0..crate::staging::StagingConfig::BUFFERS_PER_WORKER {
            match streams.event_create() {
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
        let _ = runtime.set_device(self.device);
        let Some(streams) = runtime.streams() else {
            return; // never made: `create` needs streams
        };
        for e in self.events {
            let _ = streams.event_destroy(e);
        }
        let _ = streams.stream_destroy(self.stream);
    }
}

/// A worker's streams and events, one set per device it has served.
#[derive(Default)]
struct Gpus {
    each: Vec<Gpu>,
}

impl Gpus {
    /// The set for `device`, made current on this thread (a thread-local switch, cheap next
    /// to a task of at least 1 MiB); created on first use.
    fn for_device(&mut self, runtime: &dyn GpuRuntime, device: i32) -> Result<&Gpu, BackendError> {
        match self.each.iter().position(|g| g.device == device) {
            Some(i) => {
                runtime.set_device(device).map_err(BackendError::Runtime)?;
                Ok(&self.each[i])
            }
            None => {
                self.each.push(Gpu::create(runtime, device)?);
                Ok(&self.each[self.each.len() - 1])
            }
        }
    }

    /// The stream of the set for `device`, if it has one.
    fn stream_of(&self, device: i32) -> Option<StreamHandle> {
        self.each
            .iter()
            .find(|g| g.device == device)
            .map(|g| g.stream)
    }

    /// Drops the set for `device` without destroying it: its stream could not be waited
    /// for, so copies may still be queued on it, and destroying it could free what they use.
    /// The handles are left behind; the next task for the device makes a new set.
    fn forget(&mut self, device: i32) {
        if let Some(i) = self.each.iter().position(|g| g.device == device) {
            drop(self.each.swap_remove(i));
        }
    }

    fn destroy(self, runtime: &dyn GpuRuntime) {
        for g in self.each {
            g.destroy(runtime);
        }
    }
}

/// The next task from the queue: waiting for one when `wait`, else `None` when none is
/// queued; `None` too once the pool closes and the queue is empty.
fn next_task(shared: &Shared, wait: bool) -> Option<Task> {
    let mut queue = lock(&shared.queue);
    loop {
        if let Some(t) = queue.tasks.pop_front() {
            queue.bytes -= t.device.len();
            return Some(t);
        }
        if queue.closing || !wait {
            return None;
        }
        queue = shared
            .ready
            .wait(queue)
            .unwrap_or_else(PoisonError::into_inner);
    }
}

fn worker(shared: &Shared) {
    let runtime: &dyn GpuRuntime = &**shared.pool.runtime();
    let mut gpus = Gpus::default();
    let mut tail: Option<Tail<'_>> = None;
    loop {
        // With a tail, only a task already queued is taken: when none is, the tail's task
        // is reported now rather than after a wait for more work.
        let Some(task) = next_task(shared, tail.is_none()) else {
            match tail.take() {
                Some(t) => {
                    t.finish(&mut gpus);
                    continue;
                }
                None => {
                    std::mem::take(&mut gpus).destroy(runtime);
                    return;
                }
            }
        };
        let report = Report::new(&task.request, task.index);
        if task.request.skips(task.index) {
            report.send(Outcome::Skipped);
            continue;
        }
        if !task.expect.holds(task.fd, task.direct.map(|d| d.0)) {
            task.request.cancelled.store(true, Ordering::Release);
            report.send(Outcome::Foreign);
            continue;
        }
        // A read from the same file system on the tail's stream goes on from the tail;
        // anything else waits for it.
        let carried = match tail.take() {
            Some(t)
                if task.op == Op::Read
                    && task.expect.fd.same_file_system(&t.file)
                    && gpus.stream_of(task.gpu) == Some(t.flight.stream) =>
            {
                Some(t)
            }
            Some(t) => {
                t.finish(&mut gpus);
                None
            }
            None => None,
        };
        let len = task.device.len();
        let served = std::panic::catch_unwind(AssertUnwindSafe(|| {
            serve_task(shared, runtime, &mut gpus, &task, carried)
        }));
        match served {
            Ok(Served::Queued(mut flight, moved)) => {
                if moved < len {
                    task.request.stop_after(task.index);
                }
                debug_assert!(flight.previous.is_none(), "reported by its first chunk");
                flight.previous = Some((report, moved));
                tail = Some(Tail {
                    flight,
                    gpu: task.gpu,
                    file: task.expect.fd,
                });
            }
            Ok(Served::Done(Ok(moved))) => {
                if moved < len {
                    task.request.stop_after(task.index);
                }
                report.send(Outcome::Moved(moved));
            }
            Ok(Served::Done(Err(e))) => {
                task.request.stop_after(task.index);
                report.send(Outcome::Failed(e));
            }
            Err(payload) => {
                // The task's buffers went back only if its stream could be synchronised
                // (`InFlight`'s drop), but the stream may be left mid-call: start afresh
                // next time, its handles left behind rather than destroyed under a copy.
                gpus.forget(task.gpu);
                task.request.stop_after(task.index);
                report.send(Outcome::Failed(Failed::after(0)(panicked(&*payload))));
            }
        }
    }
}

/// Which open file a descriptor number refers to, and the flags that decide where its I/O
/// goes: the device and inode, the access mode, `O_APPEND` and `O_DIRECT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    flags: i32,
}

impl Identity {
    /// Whether both files are on the same file system.
    fn same_file_system(&self, other: &Identity) -> bool {
        self.dev == other.dev
    }

    /// What `fd` is in the calling thread's descriptor table; `None` when it is not open.
    fn of(fd: RawFd) -> Option<Identity> {
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `fstat` writes only the struct it is given, which lives across the call; a
        // number that is not open in this thread's table is `EBADF`, not a fault.
        if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
            return None;
        }
        // SAFETY: `fstat` succeeded, so it filled the struct.
        let st = unsafe { st.assume_init() };
        // SAFETY: `F_GETFL` takes no pointer; a closed number is `EBADF`.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return None;
        }
        Some(Identity {
            dev: st.st_dev,
            ino: st.st_ino,
            flags: flags & (libc::O_ACCMODE | libc::O_APPEND | libc::O_DIRECT),
        })
    }
}

/// What a request's descriptor numbers are in the caller's table. A worker thread shares the
/// descriptor table of the thread that started the pool; a caller that called
/// `unshare(CLONE_FILES)` has a table of its own, where the same numbers can be other files,
/// so each task first checks that they are the same here.
#[derive(Debug, Clone, Copy)]
struct Expected {
    fd: Identity,
    direct: Option<Identity>,
}

impl Expected {
    fn holds(&self, fd: RawFd, direct: Option<RawFd>) -> bool {
        Identity::of(fd) == Some(self.fd) && direct.map(Identity::of) == self.direct.map(Some)
    }
}

/// The error of a task whose worker panicked, with the panic's message when it is text.
fn panicked(payload: &(dyn std::any::Any + Send)) -> BackendError {
    const WHAT: &str = "an I/O worker of the fallback panicked while serving this request";
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
    BackendError::Internal(match message {
        Some(m) => format!("{WHAT}: {m}"),
        None => WHAT.to_string(),
    })
}

/// The duty to report one task's outcome to its request, once. Dropped unsent (a panic on
/// the way), it reports a failure, so that the request's caller never waits for ever.
struct Report {
    request: Arc<Progress>,
    index: usize,
    sent: bool,
}

impl Report {
    fn new(request: &Arc<Progress>, index: usize) -> Report {
        Report {
            request: Arc::clone(request),
            index,
            sent: false,
        }
    }

    fn send(mut self, outcome: Outcome) {
        self.sent = true;
        self.request.finish(self.index, outcome);
    }
}

impl Drop for Report {
    fn drop(&mut self) {
        if !self.sent {
            self.request.finish(
                self.index,
                Outcome::Failed(Failed::after(0)(BackendError::Internal(
                    "an I/O worker of the fallback panicked before this request's last copies \
                     were confirmed"
                        .to_string(),
                ))),
            );
        }
    }
}

/// What serving a task left.
enum Served<'a> {
    /// A read whose last copies may still run on the stream, with the bytes it read: it is
    /// done once they have run (a [`Tail`]).
    Queued(InFlight<'a>, u64),
    /// A task whose copies have all run, or that failed.
    Done(Result<u64, Failed>),
}

/// A read task whose last copies may still be running, with the buffers and stream they
/// run from (its report is the flight's `previous`). Its worker keeps them for the next
/// queued read from the same file system on the same stream, reads that task's first chunk
/// while the copies finish, then waits for them and reports the task: a worker's reads never
/// idle for the copy at the end of a task while more reads wait, a loader's interleaved
/// shards included. With no such task, it waits for the stream and reports the task at
/// once. Only the same file system: the report waits for the next task's first read, which
/// must not make one caller's request wait on a file elsewhere (a stalled network mount, a
/// slow disk); on the same one, a stall holds both anyway.
struct Tail<'a> {
    flight: InFlight<'a>,
    gpu: i32,
    file: Identity,
}

impl Tail<'_> {
    /// Waits for the stream, gives the buffers back and reports the task.
    fn finish(self, gpus: &mut Gpus) {
        if self.flight.finish().is_err() {
            // Not trusted again, nor destroyed: copies may still be queued on it.
            gpus.forget(self.gpu);
        }
    }
}

/// Buffers with copies possibly queued on `stream`: dropping it waits for the stream before
/// the buffers go back, on every path out of a task (errors and panics included). When the
/// stream cannot be synchronised, a copy may still be queued on it: the buffers are given up
/// ([`StagingGuard::abandon`]), never reused or freed, and the caller must not destroy the
/// stream ([`Gpus::forget`]). A read goes round the buffers in turn, from one task to the
/// next of a [`Tail`].
///
/// A read task whose last copies are queued here is `previous`, reported once they have
/// run; on a path that could not wait for them (a panic), the report, a failure, is sent
/// only after the drop has waited for the stream.
struct InFlight<'a> {
    buffers: Vec<StagingGuard<'a>>,
    streams: &'a dyn Streams,
    stream: StreamHandle,
    /// For reads, per buffer: whether a copy from it was queued and its event not yet waited
    /// for.
    pending: Vec<bool>,
    /// For reads, the buffer the next chunk goes into.
    next: usize,
    previous: Option<Previous>,
    synced: bool,
}

impl<'a> InFlight<'a> {
    fn new(buffers: Vec<StagingGuard<'a>>, streams: &'a dyn Streams, stream: StreamHandle) -> Self {
        InFlight {
            pending: vec![false; buffers.len()],
            buffers,
            streams,
            stream,
            next: 0,
            previous: None,
            synced: false,
        }
    }

    /// Adds a free buffer, the next one a read fills.
    fn add(&mut self, buffer: StagingGuard<'a>) {
        self.buffers.push(buffer);
        self.pending.push(false);
        self.next = self.buffers.len() - 1;
    }

    /// Waits for every copy queued so far (the events recorded after them).
    fn settle(&mut self, events: &[EventHandle]) -> Result<(), RuntimeError> {
        for (slot, pending) in self.pending.iter_mut().enumerate() {
            if *pending {
                self.streams.event_synchronize(events[slot])?;
                *pending = false;
            }
        }
        Ok(())
    }

    /// Waits for the copies queued so far, which finish the previous task, and reports it.
    fn settle_previous(&mut self, events: &[EventHandle]) -> Result<(), BackendError> {
        if self.previous.is_none() {
            return Ok(());
        }
        let settled = self.settle(events);
        self.report_previous(settled.clone());
        settled.map_err(BackendError::Runtime)
    }

    /// Reports the previous task, if any: its copies have run when `settled` is `Ok`.
    fn report_previous(&mut self, settled: Result<(), RuntimeError>) {
        if let Some((report, moved)) = self.previous.take() {
            report.send(match settled {
                Ok(()) => Outcome::Moved(moved),
                Err(e) => Outcome::Failed(Failed::after(moved)(BackendError::Runtime(e))),
            });
        }
    }

    /// Waits for the stream, gives the buffers back (or gives them up when it cannot be
    /// waited for) and reports the previous task.
    fn finish(mut self) -> Result<(), RuntimeError> {
        self.synced = true;
        let synced = self.streams.stream_synchronize(self.stream);
        if synced.is_err() {
            self.abandon();
        }
        // The buffers go back before the report, so that a caller that returns finds them
        // back.
        self.buffers.clear();
        self.report_previous(synced.clone());
        synced
    }

    fn abandon(&mut self) {
        for b in self.buffers.drain(..) {
            b.abandon();
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        // A failure cannot be reported from here; the task already failed.
        if !self.synced && self.streams.stream_synchronize(self.stream).is_err() {
            self.abandon();
        }
    }
}

/// A read task done but for its last copies, with the bytes it read.
type Previous = (Report, u64);

/// Serves one task, going on from the buffers and stream of `carried` (a read on the same
/// stream, reported here once its copies have run) when given. A read that succeeded leaves
/// its last copies queued; a failure of a write task says how many bytes it wrote from its
/// start.
fn serve_task<'a>(
    shared: &'a Shared,
    runtime: &'a dyn GpuRuntime,
    gpus: &mut Gpus,
    task: &Task,
    carried: Option<Tail<'a>>,
) -> Served<'a> {
    let set = gpus.for_device(runtime, task.gpu).and_then(|g| {
        // The set was made with them.
        let streams = runtime.require_streams().map_err(BackendError::Runtime)?;
        Ok((streams, g.stream, g.events.clone()))
    });
    let (streams, stream, events) = match set {
        Ok(set) => set,
        Err(e) => {
            if let Some(t) = carried {
                t.finish(gpus);
            }
            return Served::Done(Err(Failed::after(0)(e)));
        }
    };
    let pool = &shared.pool;
    let chunk = pool.config().chunk_size as u64;
    let mut flight = match carried {
        Some(Tail { mut flight, .. }) => {
            // A second buffer lets this task's first chunk be read while the last copy of
            // the previous task runs.
            if flight.buffers.len() < StagingConfig::BUFFERS_PER_WORKER
                && let Some(b) = pool.try_acquire()
            {
                flight.add(b);
            }
            flight
        }
        None => {
            let mut buffers = match pool.acquire() {
                Ok(b) => vec![b],
                Err(e) => return Served::Done(Err(Failed::after(0)(e))),
            };
            if buffers_for(chunk, task.file_offset, task.device.len()) > 1 {
                buffers.extend(pool.try_acquire());
            }
            InFlight::new(buffers, streams, stream)
        }
    };
    // SAFETY: the caller of `Pipeline::run` keeps the descriptor open until this task is
    // finished (module invariant).
    let fd = unsafe { BorrowedFd::borrow_raw(task.fd) };
    let direct = task.direct.map(|(raw, offset_align, mem_align)| Direct {
        // SAFETY: as for `fd`.
        fd: unsafe { BorrowedFd::borrow_raw(raw) },
        offset_align,
        mem_align,
    });
    let moved = match task.op {
        Op::Read => read_task(
            &mut flight,
            &events,
            (fd, direct, &shared.cold),
            task.device,
            task.file_offset,
        )
        .map_err(Failed::after(0)),
        Op::Write => write_task(&mut flight, &events, fd, task.device, task.file_offset),
    };
    // The task failed before its first chunk was read: a failure to wait for the previous
    // one's copies shows in the synchronisation below.
    let _ = flight.settle_previous(&events);
    match (task.op, moved) {
        (Op::Read, Ok(n)) => Served::Queued(flight, n),
        (_, moved) => {
            let synced = flight.finish();
            if synced.is_err() {
                // Not trusted again, nor destroyed: copies may still be queued on it
                // (`InFlight`).
                gpus.forget(task.gpu);
            }
            Served::Done(moved.and_then(|moved| {
                synced
                    .map(|()| moved)
                    .map_err(|e| Failed::after(moved)(BackendError::Runtime(e)))
            }))
        }
    }
}

/// `pread` into one buffer while the other is being copied to the device. The flight's
/// previous task is reported once this task's first chunk is read and the copies queued
/// before it have run.
fn read_task(
    flight: &mut InFlight<'_>,
    events: &[EventHandle],
    (fd, direct, cold): (BorrowedFd<'_>, Option<Direct<'_>>, &ColdReads),
    device: DeviceRange,
    file_offset: u64,
) -> Result<u64, BackendError> {
    let streams = flight.streams;
    let stream = flight.stream;
    let chunk = flight.buffers[0].capacity() as u64;
    let mut rest = device;
    let mut done = 0u64;
    while rest.len() > 0 {
        let (piece, after) = rest.split_at(to_boundary(file_offset + done, chunk));
        let slot = flight.next;
        if flight.pending[slot] {
            streams
                .event_synchronize(events[slot])
                .map_err(BackendError::Runtime)?;
            flight.pending[slot] = false;
        }
        // A piece is at most a buffer's capacity, a `usize`.
        let want = piece.len() as usize;
        let got = pread_chunk(
            fd,
            direct,
            cold,
            &mut flight.buffers[slot].as_mut_slice()[..want],
            file_offset + done,
        )?;
        flight.settle_previous(events)?;
        if got > 0 {
            let (filled, _) = piece.split_at(got as u64);
            // SAFETY: the buffer is not written again before its event (recorded next) has
            // been waited for or the stream synchronised, and `flight` waits for the stream
            // before it gives the buffer back; the request's device memory outlives the task
            // and the copies of its last chunks (module invariant).
            unsafe { flight.buffers[slot].copy_to_device_on(filled, stream) }?;
            flight.pending[slot] = true;
            streams
                .event_record(events[slot], stream)
                .map_err(BackendError::Runtime)?;
        }
        flight.next = (slot + 1) % flight.buffers.len();
        done += got as u64;
        if got < want {
            break; // end of file
        }
        rest = after;
    }
    Ok(done)
}

/// Copy from the device into one buffer while the other is being written, and start the
/// writeback of each chunk once it is written, so that the disk is busy while the call is
/// still copying (the call's `fdatasync` then waits only for what is left). A failure says
/// how many bytes were written from the task's start before it.
fn write_task(
    flight: &mut InFlight<'_>,
    events: &[EventHandle],
    fd: BorrowedFd<'_>,
    device: DeviceRange,
    file_offset: u64,
) -> Result<u64, Failed> {
    let n = flight.buffers.len();
    let chunk = flight.buffers[0].capacity() as u64;
    let mut pieces = Vec::new();
    let mut rest = device;
    let mut at = file_offset;
    while rest.len() > 0 {
        let (piece, after) = rest.split_at(to_boundary(at, chunk));
        pieces.push((piece, at));
        at += piece.len();
        rest = after;
    }
    let mut queued = 0;
    while queued < n.min(pieces.len()) {
        queue_copy(flight, events, queued % n, pieces[queued].0).map_err(Failed::after(0))?;
        queued += 1;
    }
    let mut written = 0;
    for (k, &(piece, at)) in pieces.iter().enumerate() {
        let slot = k % n;
        flight
            .streams
            .event_synchronize(events[slot])
            .map_err(|e| Failed::after(written)(BackendError::Runtime(e)))?;
        // A piece is at most a buffer's capacity, a `usize`.
        let len = piece.len() as usize;
        pwrite_full(fd, &flight.buffers[slot].as_slice()[..len], at)
            .map_err(|f| f.within(written))?;
        written += piece.len();
        if queued < pieces.len() {
            // The buffer of chunk `queued` is `slot`'s, just written out.
            queue_copy(flight, events, queued % n, pieces[queued].0)
                .map_err(Failed::after(written))?;
            queued += 1;
        }
        start_writeback(fd, at, piece.len());
    }
    Ok(written)
}

/// The buffers a task of `len` bytes at file offset `offset` takes: one per chunk it spans
/// (chunks are cut at multiples of `chunk`), at most
/// [`StagingConfig::BUFFERS_PER_WORKER`]. A task of one chunk has nothing to overlap its
/// copy with, and a second buffer would only be pinned and held.
fn buffers_for(chunk: u64, offset: u64, len: u64) -> usize {
    let chunk = chunk.max(1);
    let last = offset.saturating_add(len.max(1) - 1);
    let spans = last / chunk - offset / chunk + 1;
    usize::try_from(spans)
        .unwrap_or(usize::MAX)
        .min(StagingConfig::BUFFERS_PER_WORKER)
}

/// Bytes from file offset `at` to the next multiple of `chunk`: chunks are cut where the
/// file offset is a multiple of the chunk size, as tasks are cut at multiples of the task
/// size, so that every chunk but a request's first and last is aligned for `O_DIRECT`.
fn to_boundary(at: u64, chunk: u64) -> u64 {
    let chunk = chunk.max(1);
    chunk - at % chunk
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
        .streams
        .event_record(events[slot], stream)
        .map_err(BackendError::Runtime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StagingConfig;
    use hipfile_core::DevicePtr;
    use hipfile_core::mock::MockGpuRuntime;

    fn pipeline(threads: usize, task_size: u64) -> Pipeline {
        let pool = StagingPool::new(Arc::new(MockGpuRuntime::new()), StagingConfig::default());
        Pipeline::new(Arc::new(pool), threads, task_size)
    }

    #[test]
    fn tasks_are_even_shares_within_the_bounds() {
        const MIB: u64 = 1 << 20;
        let p = pipeline(16, 4 * MIB);
        assert_eq!(p.task_for(64 * MIB, 0), 4 * MIB);
        assert_eq!(p.task_for(256 * MIB, 0), 16 * MIB);
        assert_eq!(p.task_for(16 * MIB, 0), MIB);
        assert_eq!(p.task_for(MIB + 1, 0), MIB, "at least MIN_TASK");
        assert_eq!(p.task_for(1 << 30, 0), 64 * MIB, "at most MAX_TASK");
        assert_eq!(p.task_for(8 << 30, 0), 64 * MIB);
        assert_eq!(
            p.task_for(100 * MIB / 3, 0),
            534 * 4096,
            "rounded up to 4 KiB"
        );
        // A configured size below MIN_TASK is the lower bound, one above MAX_TASK the upper.
        assert_eq!(pipeline(16, 64 << 10).task_for(100 << 10, 0), 64 << 10);
        assert_eq!(pipeline(16, 256 * MIB).task_for(8 << 30, 0), 256 * MIB);
        assert_eq!(pipeline(16, 256 * MIB).task_for(64 * MIB, 0), 4 * MIB);
    }

    /// Behind a backlog every worker is busy: a request is cut into tasks as long as each
    /// worker's share of the backlog, up to the whole request and the upper bound.
    #[test]
    fn behind_a_backlog_tasks_grow_to_each_workers_share_of_it() {
        const MIB: u64 = 1 << 20;
        let p = pipeline(16, 4 * MIB);
        assert_eq!(
            p.task_for(16 * MIB, 8 * MIB),
            MIB,
            "a short backlog: the even share"
        );
        assert_eq!(p.task_for(16 * MIB, 64 * MIB), 4 * MIB);
        assert_eq!(
            p.task_for(16 * MIB, 512 * MIB),
            16 * MIB,
            "the whole request"
        );
        assert_eq!(p.task_for(4 * MIB, 512 * MIB), 4 * MIB);
        assert_eq!(
            p.task_for(3 * MIB + 5, 512 * MIB),
            3 * MIB + 4096,
            "rounded up to 4 KiB"
        );
        assert_eq!(p.task_for(1 << 30, 8 << 30), 64 * MIB, "at most MAX_TASK");
        assert_eq!(
            p.task_for(64 * MIB, 0),
            4 * MIB,
            "no backlog: the even share"
        );
        assert_eq!(p.task_for(64 * MIB, u64::MAX), 64 * MIB);
    }

    #[test]
    fn a_panic_is_an_internal_error_with_its_message() {
        let text = |payload: Box<dyn std::any::Any + Send>| match panicked(&*payload) {
            BackendError::Internal(m) => m,
            other => panic!("{other:?}"),
        };
        let what = "an I/O worker of the fallback panicked while serving this request";
        assert_eq!(
            text(Box::new("static text")),
            format!("{what}: static text")
        );
        assert_eq!(
            text(Box::new(String::from("formatted 7"))),
            format!("{what}: formatted 7")
        );
        assert_eq!(text(Box::new(42u32)), what);
    }

    #[test]
    fn sizes_beyond_any_bound_do_not_overflow() {
        let p = pipeline(usize::MAX, u64::MAX);
        assert_eq!(p.threads, FallbackKnobs::MAX_IO_THREADS);
        assert_eq!(p.task_size, u64::MAX / ALIGN * ALIGN);
        let len = hipfile_core::MAX_IO_SIZE;
        assert_eq!(p.task_for(len, 0), round_up(len.div_ceil(1024), ALIGN));
        let range = DeviceRange::for_test(DevicePtr(0x10_000), len);
        let pieces = split(range, (i64::MAX as u64) - len, p.task_size);
        assert_eq!(pieces.len(), 1);
        assert_eq!(round_up(0, 0), 0);
        assert_eq!(round_up(u64::MAX, 4096), u64::MAX - 4095);
        assert_eq!(round_up(4097, 4096), 8192);
    }

    /// Workers take tasks in order but may reach them late: a failure of task 2 must not skip
    /// tasks 0 and 1, whose bytes count toward what a write moved, whichever started first.
    #[test]
    fn a_failure_skips_only_the_tasks_after_it() {
        let request = Progress::new(5);
        request.stop_after(2);
        assert_eq!(
            (0..5).map(|i| request.skips(i)).collect::<Vec<_>>(),
            [false, false, false, true, true]
        );
        request.stop_after(3);
        assert!(request.skips(3), "the lowest index holds");
        request.stop_after(0);
        assert!(!request.skips(0) && request.skips(1));
        request.cancelled.store(true, Ordering::Release);
        assert!(request.skips(0), "foreign descriptors skip every task");
    }

    #[test]
    fn a_task_takes_a_buffer_per_chunk_it_spans_and_at_most_two() {
        const C: u64 = 4 << 20;
        assert_eq!(buffers_for(C, 0, C), 1);
        assert_eq!(buffers_for(C, 4 * C, C), 1);
        assert_eq!(buffers_for(C, 4096, C - 4096), 1);
        assert_eq!(buffers_for(C, 4096, C), 2, "crosses a chunk boundary");
        assert_eq!(buffers_for(C, 0, C + 1), 2);
        assert_eq!(buffers_for(C, 0, 16 * C), 2);
        assert_eq!(buffers_for(C, 0, 1), 1);
        assert_eq!(buffers_for(C, 0, 0), 1);
        assert_eq!(buffers_for(0, 0, 3), 2, "a zero chunk is taken as one byte");
        assert_eq!(buffers_for(C, u64::MAX - 1, u64::MAX), 1);
    }

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
        // Chunks inside a task are cut the same way.
        assert_eq!(to_boundary(4097, 16384), 12287);
        assert_eq!(to_boundary(16384, 16384), 16384);
        assert_eq!(to_boundary(5, 0), 1);
    }
}
