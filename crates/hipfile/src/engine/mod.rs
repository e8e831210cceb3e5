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
//! Three kinds of work share the threads. A request ([`Work::Request`]: a future, a batch
//! entry, a stream-ordered request the engine serves whole) runs the whole request, its GPU
//! copies included; at most `requests` of them run at once, because a thread waiting for a
//! copy spins in the runtime, and more of them than half a 16-core machine's cores made
//! small requests slower. File I/O for requests that queue their copies on a stream
//! ([`Work::FileIo`]: the staged stream-ordered path's reads and writes of staging buffers)
//! waits for no copy, and takes any thread first. An ordering job ([`Work::Ordering`])
//! takes the order after the null stream for the futures and batch entries submitted since
//! the last one (`null_stream.rs`), once fewer requests are queued than may run.
//!
//! The threads start with the first request and end when the driver closes. The driver
//! cannot close while a request is queued or running (its job holds the driver), so closing
//! finds only finished work; if the last reference to the driver goes with a job on one of
//! the engine's own threads, that thread is left to end by itself instead of being joined.

pub(crate) mod gates;
pub(crate) mod null_stream;

use hipfile_core::IoOutcome;
use hipfile_core::stream::{IoQueue, JobHandle, QueuedJob};
use hipfile_core::{Error, Op};
use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::Waker;
use std::thread::{JoinHandle, ThreadId};

/// What a request thread runs: the whole request, returning its result.
pub(crate) type Job = hipfile_core::stream::JobFn;

/// Called once when a request ends (finished or cancelled), without any lock held.
pub(crate) type Listener = hipfile_core::stream::OnEnd;

/// What cancelling does instead of ending a waiting request at once, for a request whose
/// end comes from elsewhere (a stream-ordered request ends when its stream has passed it,
/// whatever happens to its I/O). Returns whether the I/O was cancelled.
pub(crate) type CancelHook = hipfile_core::stream::OnCancel;

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
    /// Signalled when work is queued that a sleeping thread may take, or the engine closes.
    ready: Condvar,
    /// The most [`Work::Request`] jobs running at once.
    requests: usize,
    /// Handles of submitted requests that their callers still hold ([`Engine::in_flight`]).
    in_flight: AtomicUsize,
}

/// What a job does, which decides how many may run at once (see the module's
/// documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Work {
    /// A whole request, its GPU copies included.
    Request,
    /// File I/O only, with no wait for the GPU.
    FileIo,
    /// The order of other requests after the null stream (`null_stream.rs`): a query or a
    /// host function for all the requests submitted since the last one. It waits for no
    /// copy, and is taken once fewer requests are queued than may run at once, so that
    /// while the threads have queued requests to serve, the requests submitted meanwhile
    /// gather for one query.
    Ordering,
}

#[derive(Default)]
struct Queue {
    requests: VecDeque<Arc<Slot>>,
    file_io: VecDeque<Arc<Slot>>,
    orderings: VecDeque<Arc<Slot>>,
    /// [`Work::Request`] jobs running.
    running: usize,
    closing: bool,
    /// Request threads waiting for work: work queued while none waits needs no wake-up (a
    /// system call), since a busy thread takes it when it is done.
    idle: usize,
}

impl Queue {
    fn push(&mut self, slot: Arc<Slot>) {
        match slot.work {
            Work::Request => self.requests.push_back(slot),
            Work::FileIo => self.file_io.push_back(slot),
            Work::Ordering => self.orderings.push_back(slot),
        }
    }

    /// Whether an ordering job may be taken: fewer requests are queued than may run.
    fn ordering_due(&self, limit: usize) -> bool {
        !self.orderings.is_empty() && self.requests.len() < limit
    }

    /// The next job a thread may run now: file I/O first (a stream waits for it), then an
    /// ordering when it is due, then a request while fewer than `limit` run.
    fn take(&mut self, limit: usize) -> Option<Arc<Slot>> {
        if let Some(slot) = self.file_io.pop_front() {
            return Some(slot);
        }
        if self.ordering_due(limit) {
            return self.orderings.pop_front();
        }
        if self.running < limit {
            let slot = self.requests.pop_front()?;
            self.running += 1;
            return Some(slot);
        }
        None
    }

    /// Whether a sleeping thread could take work that is waiting.
    fn runnable(&self, limit: usize) -> bool {
        !self.file_io.is_empty()
            || self.ordering_due(limit)
            || (!self.requests.is_empty() && self.running < limit)
    }

    fn queued(&self) -> usize {
        self.requests.len() + self.file_io.len() + self.orderings.len()
    }

    fn drain(&mut self) -> Vec<Arc<Slot>> {
        self.requests
            .drain(..)
            .chain(self.file_io.drain(..))
            .chain(self.orderings.drain(..))
            .collect()
    }
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
    work: Work,
    /// The process whose threads serve it: in a copy made by `fork()` no thread of the
    /// engine runs, so nothing there waits for it.
    pid: u32,
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

/// A request's handle counted by [`Engine::in_flight`] while this lives.
pub(crate) struct InFlightHandle(Arc<Shared>);

impl Drop for InFlightHandle {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for InFlightHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InFlightHandle")
    }
}

impl Engine {
    /// An engine with `threads` request threads (at least one), none started yet, of which
    /// at most `requests` (at least one) run [`Work::Request`] jobs at once.
    pub(crate) fn new(threads: usize, requests: usize) -> Engine {
        let requests = requests.max(1);
        Engine {
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue::default()),
                ready: Condvar::new(),
                requests,
                in_flight: AtomicUsize::new(0),
            }),
            threads: threads.max(requests),
            workers: Mutex::new(Vec::new()),
        }
    }

    /// A request that is not queued yet: [`Engine::queue`] queues it later (when a stream
    /// reaches it). It can be cancelled meanwhile, and then is never served.
    pub(crate) fn slot(op: Op, job: Job, listener: Option<Listener>) -> Arc<Slot> {
        Engine::slot_with(op, Work::Request, job, listener, None)
    }

    /// A job like [`Engine::slot`]'s doing `work`, whose cancellation is `on_cancel`'s work
    /// when set: the job itself still waits to be queued and served.
    pub(crate) fn slot_with(
        op: Op,
        work: Work,
        job: Job,
        listener: Option<Listener>,
        on_cancel: Option<CancelHook>,
    ) -> Arc<Slot> {
        Arc::new(Slot {
            op,
            work,
            pid: hipfile_core::process::id(),
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
        let (queued, wake) = {
            let mut queue = lock(&self.shared.queue);
            queue.push(slot);
            (
                queue.queued(),
                queue.idle > 0 && queue.runnable(self.shared.requests),
            )
        };
        if wake {
            self.shared.ready.notify_one();
        }
        self.start_threads(queued);
    }

    /// Whether as many requests are running or queued as may run at once: the threads have
    /// work for a while, so that a request submitted now can wait to be ordered with others
    /// (`null_stream.rs`). Running ones count: a request is queued only once it is ordered,
    /// and idle threads take it at once, so the queue alone stays short however many
    /// requests a caller keeps in flight.
    ///
    /// So do the requests whose callers still hold their handles ([`Engine::in_flight`]):
    /// one caller that keeps many in flight is itself the slow part when it orders each
    /// request on its own thread (a query of the null stream each), so the engine's threads
    /// keep up with it and run fewer than may run at once, which would make it order the
    /// next one itself again.
    pub(crate) fn backlogged(&self) -> bool {
        if self.shared.in_flight.load(Ordering::Relaxed) >= self.shared.requests {
            return true;
        }
        let queue = lock(&self.shared.queue);
        queue.running + queue.requests.len() >= self.shared.requests
    }

    /// Counts a request's handle, submitted and held by its caller (a future), until the
    /// returned guard drops; [`Engine::backlogged`] counts them.
    pub(crate) fn in_flight(&self) -> InFlightHandle {
        self.shared.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlightHandle(Arc::clone(&self.shared))
    }

    /// Starts another request thread while requests wait and fewer than `threads` run, so
    /// that a driver used only synchronously starts none.
    pub(crate) fn start_threads(&self, queued: usize) {
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
        let slots = lock(&self.shared.queue).drain();
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
            queue.drain()
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
        queue.push(slot);
        let wake = queue.idle > 0 && queue.runnable(self.0.requests);
        drop(queue);
        if wake {
            self.0.ready.notify_one();
        }
    }

    /// Queues `slots` in their order, waking as many sleeping threads as can start them;
    /// one fewer when `on_engine` (the caller is an engine thread, which takes work itself
    /// when its job returns). With the engine closed, the requests are cancelled instead.
    pub(crate) fn push_all(&self, slots: Vec<Arc<Slot>>, on_engine: bool) {
        if slots.is_empty() {
            return;
        }
        let mut queue = lock(&self.0.queue);
        if queue.closing {
            drop(queue);
            for slot in slots {
                slot.cancel();
            }
            return;
        }
        let requests = slots.iter().filter(|s| s.work == Work::Request).count();
        let others = slots.len() - requests;
        for slot in slots {
            queue.push(slot);
        }
        let startable = others + requests.min(self.0.requests.saturating_sub(queue.running));
        let wake = startable
            .saturating_sub(usize::from(on_engine))
            .min(queue.idle);
        drop(queue);
        for _ in 0..wake {
            self.0.ready.notify_one();
        }
    }
}

/// The file-I/O queue as a backend's stream-ordered data path uses it
/// (`hipfile_core::stream`): its jobs are [`Work::FileIo`] slots.
impl IoQueue for QueueHandle {
    fn job(
        &self,
        op: Op,
        run: Job,
        on_end: Option<Listener>,
        on_cancel: Option<CancelHook>,
    ) -> JobHandle {
        Engine::slot_with(op, Work::FileIo, run, on_end, on_cancel)
    }

    fn finished(&self, op: Op, result: Result<IoOutcome, Error>) -> JobHandle {
        Engine::finished(op, result)
    }

    fn push(&self, job: JobHandle) {
        match Slot::of(job) {
            Some(slot) => QueueHandle::push(self, slot),
            // Only this queue's jobs are queued here; another's is refused, not lost.
            None => hipfile_core::diag::line(
                "hipfile: warning: a job of another queue was pushed on the engine's; ignored",
            ),
        }
    }
}

/// A request thread: takes queued requests until the engine closes.
fn work(shared: &Shared) {
    // Whether the job this thread ran last was a request, still counted as running.
    let mut ended_request = false;
    loop {
        let (slot, wake) = {
            let mut queue = lock(&shared.queue);
            if std::mem::take(&mut ended_request) {
                queue.running -= 1;
            }
            let slot = loop {
                if let Some(slot) = queue.take(shared.requests) {
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
            };
            // A request left waiting while this thread took file I/O (which goes first)
            // goes to a sleeping thread; otherwise the threads that end requests take the
            // next ones themselves, with no wake-up.
            (slot, queue.idle > 0 && queue.runnable(shared.requests))
        };
        if wake {
            shared.ready.notify_one();
        }
        ended_request = slot.work == Work::Request;
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

impl QueuedJob for Slot {
    fn cancel(&self) -> bool {
        Slot::cancel(self)
    }

    fn wait_ended(&self) {
        Slot::wait_ended(self);
    }
}

impl Slot {
    /// The slot behind a job handed out as [`QueuedJob`] (`None` for another queue's job).
    pub(crate) fn of(job: JobHandle) -> Option<Arc<Slot>> {
        let any: Arc<dyn std::any::Any + Send + Sync> = job;
        any.downcast::<Slot>().ok()
    }

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
        // The waker is the caller's code, run on whichever thread ends the request (an
        // engine thread, mostly): a panic in it must not unwind into that thread, which
        // would die and leave the requests behind it unserved. The result is already
        // recorded, so the request's owner still gets it from `wait` or the next poll.
        if let Some(w) = waker
            && std::panic::catch_unwind(AssertUnwindSafe(|| w.wake())).is_err()
        {
            hipfile_core::diag::line(
                "hipfile: warning: a waker panicked when its request ended; ignored",
            );
        }
        if let Some(l) = listener {
            // The listeners are the facade's own (a batch's), which do not panic; a panic
            // is kept from the thread all the same.
            let _ = std::panic::catch_unwind(AssertUnwindSafe(l));
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

    /// Blocks until the request has ended; returns at once in a process made by `fork()`
    /// from the one that serves it, where it would never end.
    pub(crate) fn wait_ended(&self) {
        if self.pid != hipfile_core::process::id() {
            return;
        }
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
        let this = hipfile_core::process::id();
        if self.pid != this {
            return Err(Error::Forked {
                opened_by: self.pid,
                this,
            });
        }
        self.wait_ended();
        self.take_result().unwrap_or_else(|| Err(self.taken()))
    }

    /// The result, if the request has ended and it was not taken yet; otherwise `waker`
    /// is woken when the request ends.
    pub(crate) fn poll_result(&self, waker: &Waker) -> Option<Result<IoOutcome, Error>> {
        let this = hipfile_core::process::id();
        if self.pid != this {
            return Some(Err(Error::Forked {
                opened_by: self.pid,
                this,
            }));
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use hipfile_core::BackendKind;
    use hipfile_core::IoOutcome;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    fn done() -> Result<IoOutcome, Error> {
        Ok(IoOutcome::new(0, BackendKind::Fallback, false))
    }

    /// Polls until `done` holds or 10 seconds have passed (a guard against waiting for ever,
    /// not a measure of speed): the caller's assertion says which.
    fn wait_until(done: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !done() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Requests whose jobs hold their threads: each counts itself running, records the most
    /// running at once, and waits until `release` sends or is dropped.
    struct Held {
        running: Arc<AtomicUsize>,
        most: Arc<AtomicUsize>,
        release: mpsc::Sender<()>,
        rx: Arc<Mutex<mpsc::Receiver<()>>>,
    }

    impl Held {
        fn new() -> Held {
            let (release, rx) = mpsc::channel();
            Held {
                running: Arc::default(),
                most: Arc::default(),
                release,
                rx: Arc::new(Mutex::new(rx)),
            }
        }

        /// Queues one such request on `engine`.
        fn queue(&self, engine: &Engine) -> Arc<Slot> {
            let (running, most, rx) = (
                Arc::clone(&self.running),
                Arc::clone(&self.most),
                Arc::clone(&self.rx),
            );
            let job: Job = Box::new(move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let _ = rx.lock().unwrap().recv();
                running.fetch_sub(1, Ordering::SeqCst);
                done()
            });
            let slot = Engine::slot(Op::Read, job, None);
            engine.queue(Arc::clone(&slot));
            slot
        }

        /// Waits until `n` of them run.
        fn wait_running(&self, n: usize) {
            wait_until(|| self.running.load(Ordering::SeqCst) >= n);
        }

        /// Lets one of them end.
        fn release_one(&self) {
            self.release.send(()).unwrap();
        }
    }

    #[test]
    fn requests_run_at_most_their_limit_at_once_and_file_io_runs_beside_them() {
        let engine = Engine::new(4, 2);
        let held = Held::new();
        let requests: Vec<_> = (0..5).map(|_| held.queue(&engine)).collect();
        // Two run and hold their threads; file I/O still gets one of the other two.
        held.wait_running(2);
        let file_io = Engine::slot_with(Op::Read, Work::FileIo, Box::new(done), None, None);
        engine.queue(Arc::clone(&file_io));
        file_io.wait_ended();
        assert_eq!(file_io.phase(), IoState::Finished);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            held.running.load(Ordering::SeqCst),
            2,
            "more requests ran than the limit"
        );
        assert_eq!(
            requests
                .iter()
                .filter(|s| s.phase() == IoState::Waiting)
                .count(),
            3
        );
        for _ in 0..5 {
            held.release_one();
        }
        for r in &requests {
            r.wait_ended();
            assert_eq!(r.phase(), IoState::Finished);
        }
        assert_eq!(held.most.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn an_ordering_job_waits_while_as_many_requests_are_queued_as_may_run() {
        // Two threads, one request at a time: the spare thread could take the ordering job
        // at once, but a request is queued behind the running one.
        let engine = Engine::new(2, 1);
        let held = Held::new();
        let first = held.queue(&engine);
        held.wait_running(1);
        let second = held.queue(&engine);
        let ordering = Engine::slot_with(Op::Read, Work::Ordering, Box::new(done), None, None);
        engine.queue(Arc::clone(&ordering));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            ordering.phase(),
            IoState::Waiting,
            "the ordering ran while a request waited for a thread"
        );
        // The first request ends; the second runs, none is queued: the ordering is due.
        held.release_one();
        ordering.wait_ended();
        assert_eq!(ordering.phase(), IoState::Finished);
        assert_eq!(second.phase(), IoState::Pending);
        held.release_one();
        first.wait_ended();
        second.wait_ended();
    }

    #[test]
    fn the_engine_is_backlogged_while_as_many_requests_run_as_may() {
        // One request at a time: the first one running, none queued, fills the engine.
        let engine = Engine::new(2, 1);
        assert!(!engine.backlogged(), "nothing is queued or running yet");
        let held = Held::new();
        let first = held.queue(&engine);
        held.wait_running(1);
        assert!(
            engine.backlogged(),
            "a request runs on the only request slot, with nothing queued"
        );
        held.release_one();
        first.wait_ended();
        // The slot is free again once the thread has taken its next look at the queue.
        wait_until(|| !engine.backlogged());
        assert!(!engine.backlogged(), "the request ended");
    }

    #[test]
    fn the_engine_is_backlogged_while_callers_hold_as_many_requests_as_may_run() {
        // One caller keeping 2 requests in flight on an engine that runs 2 at once: ended or
        // not, the handles it holds fill the engine, so that the next submission is ordered
        // with others instead of by a query of its own; the count ends with the handles.
        let engine = Engine::new(2, 2);
        let first = engine.in_flight();
        assert!(!engine.backlogged(), "one handle of two");
        let second = engine.in_flight();
        assert!(
            engine.backlogged(),
            "two handles held, though nothing is queued or running"
        );
        drop(first);
        assert!(!engine.backlogged(), "a handle dropped");
        drop(second);
    }
}
