//! The in-order queue behind every stream: operations run one at a time, in the order they
//! were submitted, on the stream's worker thread, or inline on the submitting thread when
//! nothing is queued or running and the operation allows it.
//!
//! Progress is two counters: `submitted` (operations ever accepted) and `completed`
//! (operations finished). Operations finish in submission order, so "the first `n`
//! operations are done" is `completed >= n`; events and synchronisation are tickets on these
//! counters rather than operations of their own.
//!
//! The worker is started by the first operation that has to be queued and ends once the
//! stream is closed (destroyed) and its queue is empty, so destroying a stream never loses
//! queued work. An operation that fails on the worker leaves its error for the stream's next
//! synchronisation (a real runtime's errors of asynchronous work are also reported later).
//!
//! Nothing here calls into C except the host functions that operations carry; every
//! operation runs inside `catch_unwind`, so a panic becomes `hipErrorUnknown` rather than an
//! unwind through the worker or a C caller.

use crate::config::{self, StreamMode};
use crate::error::{INVALID_VALUE, OUT_OF_MEMORY, SUCCESS, UNKNOWN};
use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::c_void;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// One operation: its result is an error code for the stream's next synchronisation.
pub type Job = Box<dyn FnOnce() -> Result<(), i32> + Send + 'static>;

/// How a submitted operation went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Submitted {
    /// It ran on the calling thread and finished with this result.
    Inline(Result<(), i32>),
    /// It waits in the queue for the worker.
    Queued,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// An operation is running (on the worker or inline): the next one must wait.
    busy: bool,
    /// A worker thread exists.
    worker: bool,
    /// The stream was destroyed: the worker ends once the queue is empty.
    closing: bool,
    submitted: u64,
    completed: u64,
    /// The first error of a queued operation since the last synchronisation.
    error: Option<i32>,
    /// Threads blocked in [`Queue::wait_for`] (and so in a synchronisation).
    waiters: usize,
}

/// A stream's queue (see the module documentation).
#[derive(Default)]
pub struct Queue {
    state: Mutex<State>,
    /// Signalled whenever an operation is submitted or finishes, or the stream closes.
    changed: Condvar,
}

thread_local! {
    /// The queue whose worker this thread is (its address), 0 on other threads.
    static WORKER_OF: Cell<usize> = const { Cell::new(0) };
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the calling thread is this queue's worker: waiting for the queue there would
    /// never end.
    fn on_own_worker(self: &Arc<Self>) -> bool {
        WORKER_OF.with(Cell::get) == Arc::as_ptr(self) as usize
    }

    /// Submits `job`. With `inline_ok`, nothing queued or running, and the configuration's
    /// [`StreamMode::InlineWhenIdle`], it runs now on the calling thread; otherwise it is
    /// queued for the worker, which is started if needed.
    ///
    /// # Errors
    ///
    /// `hipErrorOutOfMemory` when no worker thread can be started (nothing is queued).
    pub fn submit(self: &Arc<Self>, job: Job, inline_ok: bool) -> Result<Submitted, i32> {
        let inline_ok = inline_ok && config::current().streams == StreamMode::InlineWhenIdle;
        let mut state = self.lock();
        if inline_ok && !state.busy && state.jobs.is_empty() {
            state.busy = true;
            state.submitted += 1;
            drop(state);
            let result = run(job);
            let mut state = self.lock();
            state.busy = false;
            state.completed += 1;
            drop(state);
            self.changed.notify_all();
            return Ok(Submitted::Inline(result));
        }
        state.jobs.push_back(job);
        state.submitted += 1;
        if !state.worker {
            let queue = Arc::clone(self);
            let spawned = std::thread::Builder::new()
                .name("hipfile-emu-stream".into())
                .spawn(move || queue.work());
            if spawned.is_err() {
                state.jobs.pop_back();
                state.submitted -= 1;
                return Err(OUT_OF_MEMORY);
            }
            state.worker = true;
        }
        drop(state);
        self.changed.notify_all();
        Ok(Submitted::Queued)
    }

    /// Submits `job` and waits for it: its result, whether it ran inline or on the worker.
    ///
    /// # Errors
    ///
    /// The job's error; `hipErrorOutOfMemory` as [`submit`](Self::submit);
    /// `hipErrorInvalidValue` when called from this queue's own worker (a host function),
    /// where waiting would never end; `hipErrorUnknown` if the job panicked.
    pub fn run_ordered(
        self: &Arc<Self>,
        job: impl FnOnce() -> Result<(), i32> + Send + 'static,
    ) -> Result<(), i32> {
        if self.on_own_worker() {
            return Err(INVALID_VALUE);
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let wrapped: Job = Box::new(move || {
            let _ = tx.send(job());
            Ok(())
        });
        match self.submit(wrapped, true)? {
            Submitted::Inline(Err(e)) => Err(e),
            Submitted::Inline(Ok(())) | Submitted::Queued => rx.recv().unwrap_or(Err(UNKNOWN)),
        }
    }

    /// The ticket of everything submitted so far: it is reached when all of it is done.
    pub fn ticket(&self) -> u64 {
        self.lock().submitted
    }

    /// Whether the operations before `ticket` are done.
    pub fn reached(&self, ticket: u64) -> bool {
        self.lock().completed >= ticket
    }

    /// Waits until the operations before `ticket` are done.
    ///
    /// # Errors
    ///
    /// `hipErrorInvalidValue` when called from this queue's own worker for a ticket it has
    /// not reached (the wait would never end).
    pub fn wait_for(self: &Arc<Self>, ticket: u64) -> Result<(), i32> {
        let mut state = self.lock();
        if state.completed < ticket && self.on_own_worker() {
            return Err(INVALID_VALUE);
        }
        if state.completed < ticket {
            state.waiters += 1;
            while state.completed < ticket {
                state = self.wait(state);
            }
            state.waiters -= 1;
        }
        Ok(())
    }

    /// Waits until everything submitted so far is done, then hands out (and clears) the first
    /// error a queued operation had.
    ///
    /// # Errors
    ///
    /// That error; as [`wait_for`](Self::wait_for).
    pub fn synchronize(self: &Arc<Self>) -> Result<(), i32> {
        self.wait_for(self.ticket())?;
        self.lock().error.take().map_or(Ok(()), Err)
    }

    /// What depends on the stream now: the operations queued or running, and the threads
    /// waiting for some of them to finish. A test hook reports it, so that a test can tell
    /// when a caller has begun to wait for the stream.
    pub fn users(&self) -> u64 {
        let state = self.lock();
        state.submitted - state.completed + state.waiters as u64
    }

    /// Whether nothing is queued or running.
    pub fn idle(&self) -> bool {
        let state = self.lock();
        state.completed == state.submitted
    }

    /// Marks the stream destroyed: the worker ends after the queued work.
    pub fn close(&self) {
        self.lock().closing = true;
        self.changed.notify_all();
    }

    /// The worker's loop: runs the queue's operations in order until it is closed and empty.
    fn work(self: Arc<Self>) {
        WORKER_OF.with(|w| w.set(Arc::as_ptr(&self) as usize));
        let mut state = self.lock();
        loop {
            if !state.busy
                && let Some(job) = state.jobs.pop_front()
            {
                state.busy = true;
                drop(state);
                let result = run(job);
                state = self.lock();
                state.busy = false;
                state.completed += 1;
                if let Err(e) = result {
                    state.error.get_or_insert(e);
                }
                self.changed.notify_all();
                continue;
            }
            if state.closing && state.jobs.is_empty() && !state.busy {
                state.worker = false;
                return;
            }
            state = self.wait(state);
        }
    }
}

/// The null stream's queue, here rather than with the other streams so that the release of
/// memory ([`crate::memory`]), below the streams, can wait for it.
static NULL_QUEUE: std::sync::LazyLock<Arc<Queue>> = std::sync::LazyLock::new(Arc::default);

/// The null stream's queue.
pub fn null_queue() -> Arc<Queue> {
    Arc::clone(&NULL_QUEUE)
}

/// An address carried into a queued operation.
///
/// Raw pointers are not `Send`; an operation that runs on the worker carries the caller's
/// addresses with it, and the entry point that queued it states who keeps them valid.
#[derive(Debug, Clone, Copy)]
pub struct SendPtr(pub *mut c_void);

// SAFETY: the address is only moved to the worker, never dereferenced by this type; the
// operation that uses it checks it against the table (under the transfer gate) or relies on
// the promise of the entry point that queued it, on whatever thread it runs.
unsafe impl Send for SendPtr {}

impl SendPtr {
    /// The address (a method, so that closures capture the whole `SendPtr`).
    pub fn get(self) -> *mut c_void {
        self.0
    }
}

/// Runs `job`, a panic turned into `hipErrorUnknown`.
fn run(job: Job) -> Result<(), i32> {
    catch_unwind(AssertUnwindSafe(job)).unwrap_or(Err(UNKNOWN))
}

/// The code of a submission, for a C entry point: success unless it failed inline or could
/// not be queued.
pub fn code_of_submission(submitted: Result<Submitted, i32>) -> i32 {
    crate::error::record(match submitted {
        Ok(Submitted::Inline(Ok(())) | Submitted::Queued) => SUCCESS,
        Ok(Submitted::Inline(Err(e))) | Err(e) => e,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    const GUARD: Duration = Duration::from_secs(30);

    #[test]
    fn inline_when_idle_queued_behind_a_blocked_job() {
        let q = Arc::new(Queue::default());
        assert_eq!(
            q.submit(Box::new(|| Ok(())), true),
            Ok(Submitted::Inline(Ok(())))
        );
        let (release, blocked) = mpsc::channel::<()>();
        let blocker: Job = Box::new(move || {
            blocked.recv_timeout(GUARD).map_err(|_| UNKNOWN)?;
            Ok(())
        });
        assert_eq!(q.submit(blocker, false), Ok(Submitted::Queued));
        assert!(!q.idle());
        let (done_tx, done_rx) = mpsc::channel();
        let later: Job = Box::new(move || {
            done_tx.send(()).map_err(|_| UNKNOWN)?;
            Err(INVALID_VALUE)
        });
        assert_eq!(q.submit(later, true), Ok(Submitted::Queued));
        assert!(done_rx.try_recv().is_err(), "ran past the blocked job");
        release.send(()).unwrap();
        done_rx.recv_timeout(GUARD).unwrap();
        assert_eq!(q.synchronize(), Err(INVALID_VALUE), "the queued error");
        assert_eq!(q.synchronize(), Ok(()), "reported once");
        assert!(q.idle());
        q.close();
    }

    #[test]
    fn a_closed_queue_still_drains() {
        let q = Arc::new(Queue::default());
        let (tx, rx) = mpsc::channel();
        for i in 0..3 {
            let tx = tx.clone();
            let job: Job = Box::new(move || tx.send(i).map_err(|_| UNKNOWN));
            assert_eq!(q.submit(job, false), Ok(Submitted::Queued));
        }
        q.close();
        let got: Vec<i32> = (0..3).map(|_| rx.recv_timeout(GUARD).unwrap()).collect();
        assert_eq!(got, [0, 1, 2]);
    }

    #[test]
    fn a_panicking_job_is_an_error() {
        let q = Arc::new(Queue::default());
        let job: Job = Box::new(|| panic!("boom"));
        assert_eq!(q.submit(job, true), Ok(Submitted::Inline(Err(UNKNOWN))));
        assert!(q.idle());
    }
}
