//! The I/O engine: one queue and one pool of request threads per driver, which serve the
//! requests that do not block their caller (futures, batches). Each request thread runs the
//! same path as a synchronous call (`FileHandle::serve`: validation, selection, retry,
//! counters), so every rule of docs/BEHAVIOUR.md applies whatever the API; a large fallback
//! request is cut into tasks for the fallback's I/O threads, which serve the tasks of every
//! request, synchronous or not, from one queue. With several requests in flight those
//! threads never wait for one request to drain before the next fills them, and the staging
//! pool bounds the host memory used however many are queued.
//!
//! A request is a [`Slot`]: queued, running, then finished with its result, or cancelled
//! before it started. Its job holds what it needs until it ends: the file handle (counted in,
//! so the file cannot be deregistered under it) and the buffer's memory (so dropping the
//! buffer frees nothing a request still writes). The job is dropped, releasing all of that,
//! before its slot says it finished.
//!
//! The threads start with the first request and end when the driver closes. The driver
//! cannot close while a request is queued or running (its job holds the driver), so closing
//! finds only finished work; if the last reference to the driver goes with a job on one of
//! the engine's own threads, that thread is left to end by itself instead of being joined.

use crate::outcome::IoOutcome;
use hipfile_core::{Error, Op};
use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::Waker;
use std::thread::{JoinHandle, ThreadId};

/// What a request thread runs: the whole request, returning its result.
pub(crate) type Job = Box<dyn FnOnce() -> Result<IoOutcome, Error> + Send>;

/// Called once when a request ends (finished or cancelled), without any lock held.
pub(crate) type Listener = Box<dyn FnOnce() + Send>;

/// What cancelling does instead of ending a waiting request at once, for a request whose
/// end comes from elsewhere (a stream-ordered request ends when its stream has passed it,
/// whatever happens to its I/O). Returns whether the I/O was cancelled.
pub(crate) type CancelHook = Box<dyn Fn() -> bool + Send + Sync>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The engine of one driver.
pub(crate) struct Engine {
    shared: Arc<Shared>,
    threads: usize,
    workers: Mutex<Vec<(ThreadId, JoinHandle<()>)>>,
}

struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when a request is queued or the engine closes.
    ready: Condvar,
}

#[derive(Default)]
struct Queue {
    slots: VecDeque<Arc<Slot>>,
    closing: bool,
    /// Request threads waiting for work: a request queued while none waits needs no
    /// wake-up (a system call), since a busy thread takes it when it is done.
    idle: usize,
}

/// Where an asynchronous or batch request is in its life (cuFile's batch states).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IoState {
    /// Submitted; no thread has taken it yet.
    Waiting,
    /// Being served.
    Pending,
    /// It ended with a result (served or failed).
    Finished,
    /// It was cancelled before it started, and moved nothing.
    Canceled,
}

/// One request: its job until a thread takes it, then its result until someone takes that.
pub(crate) struct Slot {
    op: Op,
    /// Replaces [`Slot::cancel`]'s own work when set.
    on_cancel: Option<CancelHook>,
    state: Mutex<SlotState>,
    /// Signalled when the request ends.
    ended: Condvar,
}

struct SlotState {
    phase: IoState,
    /// Threads blocked in `wait_ended`: the end wakes them only when there are some.
    waiting: usize,
    job: Option<Job>,
    result: Option<Result<IoOutcome, Error>>,
    waker: Option<Waker>,
    listener: Option<Listener>,
}

impl Engine {
    /// An engine with `threads` request threads (at least one), none started yet.
    pub(crate) fn new(threads: usize) -> Engine {
        Engine {
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue::default()),
                ready: Condvar::new(),
            }),
            threads: threads.max(1),
            workers: Mutex::new(Vec::new()),
        }
    }

    /// Queues `job`; `listener` is called when it ends.
    pub(crate) fn submit(&self, op: Op, job: Job, listener: Option<Listener>) -> Arc<Slot> {
        let slot = Engine::slot(op, job, listener);
        self.queue(Arc::clone(&slot));
        slot
    }

    /// A request that is not queued yet: [`Engine::queue`] queues it later (when a stream
    /// reaches it). It can be cancelled meanwhile, and then is never served.
    pub(crate) fn slot(op: Op, job: Job, listener: Option<Listener>) -> Arc<Slot> {
        Engine::slot_with(op, job, listener, None)
    }

    /// A request like [`Engine::slot`]'s whose cancellation is `on_cancel`'s work: the
    /// request itself still waits to be queued and served.
    pub(crate) fn slot_with(
        op: Op,
        job: Job,
        listener: Option<Listener>,
        on_cancel: Option<CancelHook>,
    ) -> Arc<Slot> {
        Arc::new(Slot {
            op,
            on_cancel,
            state: Mutex::new(SlotState {
                phase: IoState::Waiting,
                waiting: 0,
                job: Some(job),
                result: None,
                waker: None,
                listener,
            }),
            ended: Condvar::new(),
        })
    }

    /// A request that has already ended with `result`: one refused before anything was
    /// queued for it.
    pub(crate) fn finished(op: Op, result: Result<IoOutcome, Error>) -> Arc<Slot> {
        let slot = Engine::slot(op, Box::new(move || result), None);
        slot.run_with(|job| job());
        slot
    }

    /// A handle that queues requests made by [`Engine::slot`] without owning the engine, for
    /// code that must not end the engine (a host function on a GPU stream, which may not
    /// call the runtime); the engine's first thread is started now.
    pub(crate) fn queue_handle(&self) -> QueueHandle {
        self.start_threads(1);
        QueueHandle(Arc::clone(&self.shared))
    }

    /// Queues a request made by [`Engine::slot`] (a cancelled one is skipped when taken).
    pub(crate) fn queue(&self, slot: Arc<Slot>) {
        let (queued, idle) = {
            let mut queue = lock(&self.shared.queue);
            queue.slots.push_back(slot);
            (queue.slots.len(), queue.idle)
        };
        if idle > 0 {
            self.shared.ready.notify_one();
        }
        self.start_threads(queued);
    }

    /// Starts another request thread while requests wait and fewer than `threads` run, so
    /// that a driver used only synchronously starts none.
    fn start_threads(&self, queued: usize) {
        let mut workers = lock(&self.workers);
        if workers.len() >= self.threads || queued == 0 {
            return;
        }
        let shared = Arc::clone(&self.shared);
        let spawned = std::thread::Builder::new()
            .name("hipfile-engine".into())
            .spawn(move || work(&shared));
        match spawned {
            Ok(handle) => workers.push((handle.thread().id(), handle)),
            // The threads already started serve the queue; with none, the request is
            // failed here rather than left waiting for ever.
            Err(e) if workers.is_empty() => {
                drop(workers);
                self.fail_queued(&format!("cannot start an I/O thread: {e}"));
            }
            Err(_) => {}
        }
    }

    /// Ends every queued request with an internal error.
    fn fail_queued(&self, why: &str) {
        let slots: Vec<_> = lock(&self.shared.queue).slots.drain(..).collect();
        for slot in slots {
            let op = slot.op;
            slot.run_with(|_| {
                Err(Error::Internal(format!(
                    "{op}: {why}; the request was not served"
                )))
            });
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let leftover: Vec<_> = {
            let mut queue = lock(&self.shared.queue);
            queue.closing = true;
            queue.slots.drain(..).collect()
        };
        self.shared.ready.notify_all();
        // Only cancelled requests can be left (a queued job holds the driver, which owns
        // the engine); end them for anyone still holding their slot.
        for slot in leftover {
            slot.cancel();
        }
        let me = std::thread::current().id();
        for (id, handle) in lock(&self.workers).drain(..) {
            if id != me {
                // A worker that panicked outside a job has nothing left to report.
                let _ = handle.join();
            }
        }
    }
}

/// Queues requests on an engine it does not own (see [`Engine::queue_handle`]).
#[derive(Clone)]
pub(crate) struct QueueHandle(Arc<Shared>);

impl QueueHandle {
    /// Queues `slot`. With the engine closed (which a queued request's job prevents), the
    /// request is cancelled instead.
    pub(crate) fn push(&self, slot: Arc<Slot>) {
        let mut queue = lock(&self.0.queue);
        if queue.closing {
            drop(queue);
            slot.cancel();
            return;
        }
        queue.slots.push_back(slot);
        let idle = queue.idle;
        drop(queue);
        if idle > 0 {
            self.0.ready.notify_one();
        }
    }
}

/// A request thread: takes queued requests until the engine closes.
fn work(shared: &Shared) {
    loop {
        let slot = {
            let mut queue = lock(&shared.queue);
            loop {
                if let Some(slot) = queue.slots.pop_front() {
                    break slot;
                }
                if queue.closing {
                    return;
                }
                queue.idle += 1;
                queue = shared
                    .ready
                    .wait(queue)
                    .unwrap_or_else(PoisonError::into_inner);
                queue.idle -= 1;
            }
        };
        slot.run_with(|job| {
            std::panic::catch_unwind(AssertUnwindSafe(job)).unwrap_or_else(|_| {
                Err(Error::Internal(
                    "a request panicked in an I/O thread; it may have moved some bytes".into(),
                ))
            })
        });
    }
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("op", &self.op)
            .field("phase", &self.phase())
            .finish_non_exhaustive()
    }
}

impl Slot {
    /// Runs the job with `run` if the request is still queued, then records its result.
    fn run_with(&self, run: impl FnOnce(Job) -> Result<IoOutcome, Error>) {
        let job = {
            let mut state = lock(&self.state);
            if state.phase != IoState::Waiting {
                return;
            }
            state.phase = IoState::Pending;
            state.job.take()
        };
        let Some(job) = job else { return };
        // The job, and everything it holds, is gone when `run` returns.
        let result = run(job);
        self.end(IoState::Finished, Some(result));
    }

    fn end(&self, phase: IoState, result: Option<Result<IoOutcome, Error>>) {
        let (waker, listener, waiting) = {
            let mut state = lock(&self.state);
            state.phase = phase;
            state.result = result;
            (state.waker.take(), state.listener.take(), state.waiting)
        };
        if waiting > 0 {
            self.ended.notify_all();
        }
        if let Some(w) = waker {
            w.wake();
        }
        if let Some(l) = listener {
            l();
        }
    }

    /// Cancels the request if no thread has taken it: its job (and what it holds) is
    /// dropped, and its result is [`Error::Canceled`]. Whether it was cancelled.
    pub(crate) fn cancel(&self) -> bool {
        if let Some(hook) = &self.on_cancel {
            return self.phase() == IoState::Waiting && hook();
        }
        let job = {
            let mut state = lock(&self.state);
            if state.phase != IoState::Waiting {
                return false;
            }
            state.job.take()
        };
        drop(job);
        self.end(
            IoState::Canceled,
            Some(Err(Error::Canceled { op: self.op })),
        );
        true
    }

    /// Where the request is.
    pub(crate) fn phase(&self) -> IoState {
        lock(&self.state).phase
    }

    /// Blocks until the request has ended.
    pub(crate) fn wait_ended(&self) {
        let mut state = lock(&self.state);
        while matches!(state.phase, IoState::Waiting | IoState::Pending) {
            state.waiting += 1;
            state = self
                .ended
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.waiting -= 1;
        }
    }

    /// Blocks until the request has ended, then takes its result (once; later calls get an
    /// internal error, which the public handles never make).
    pub(crate) fn wait_result(&self) -> Result<IoOutcome, Error> {
        self.wait_ended();
        self.take_result().unwrap_or_else(|| Err(self.taken()))
    }

    /// The result, if the request has ended and it was not taken yet; otherwise `waker`
    /// is woken when the request ends.
    pub(crate) fn poll_result(&self, waker: &Waker) -> Option<Result<IoOutcome, Error>> {
        let mut state = lock(&self.state);
        if matches!(state.phase, IoState::Waiting | IoState::Pending) {
            match &mut state.waker {
                Some(w) if w.will_wake(waker) => {}
                w => *w = Some(waker.clone()),
            }
            return None;
        }
        Some(state.result.take().unwrap_or_else(|| Err(self.taken())))
    }

    /// The result, if the request has ended; `None` before, and after it was taken.
    pub(crate) fn take_result(&self) -> Option<Result<IoOutcome, Error>> {
        lock(&self.state).result.take()
    }

    fn taken(&self) -> Error {
        Error::Internal(format!("{}: the result was already taken", self.op))
    }
}
