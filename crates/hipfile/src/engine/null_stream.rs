//! Ordering after the caller's work on the legacy null stream (docs/BEHAVIOUR.md §3.7).
//!
//! A program that fills a buffer with `cudaMemcpy` from pageable memory, `cudaMemset` or a
//! kernel on the null stream (stream 0) and then asks for a write expects the write to see
//! those bytes; one that reads into a buffer expects work it queued on the null stream
//! earlier not to land on top of what the read brought. NVIDIA's cuFile gives that order,
//! and fio's `libcufile` engine depends on it. A copy from pageable memory may return before
//! its bytes are on the device, and hipfile's own copies run on non-blocking streams, which
//! are not ordered after the null stream. They must stay so: a stream-ordered request
//! parked on the null stream waits for them, and blocking streams would wait for it in turn
//! (docs/decisions/null-stream-ordering.md). So the order is taken once per
//! request, before any of its bytes move:
//!
//! - a synchronous request waits on its caller's thread until the null stream of its
//!   buffer's device has done the work queued on it before the call: one query when the
//!   stream is idle (the common case), else an event recorded on it and waited for;
//! - a request that does not block its caller (a future, a batch entry) is queued on the
//!   engine at once when that null stream is idle at submission, and otherwise by a host
//!   function queued on it, which runs once the stream has done the work queued before the
//!   submission; where that cannot be done, the request waits on the engine's thread, when
//!   it starts, as a synchronous one does;
//! - a stream-ordered request is ordered on its own stream only (which may be the null
//!   stream itself).
//!
//! The null stream belongs to the device current on the calling thread, so the calls here
//! make the buffer's device current for their duration when another one is.

use crate::engine::{Engine, Slot, lock};
use hipfile_core::runtime::{EventHandle, StreamHandle, Streams};
use hipfile_core::{Error, GpuRuntime, RuntimeError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// The legacy null stream of the current device.
const NULL_STREAM: StreamHandle = StreamHandle(0);

/// The runtime's code for a capability it lacks (`RuntimeError::unsupported`).
const NOT_SUPPORTED: i32 = 801;

/// Whether a request's order after the null stream is already taken, or still to be waited
/// for by the request itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Order {
    /// The request waits for the null stream before it moves a byte.
    AfterNullStream,
    /// Its order is taken: at its submission, or by the stream it is queued on.
    Taken,
}

/// The point a request that does not block its caller is ordered after: taken once the null
/// stream has passed its submission (a host function says so), or left for the request to
/// wait for when it starts.
#[derive(Debug, Default)]
pub(crate) struct OrderPoint(AtomicBool);

impl OrderPoint {
    /// How the request must start.
    pub(crate) fn order(&self) -> Order {
        if self.0.load(Ordering::Acquire) {
            Order::Taken
        } else {
            Order::AfterNullStream
        }
    }

    fn take(&self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Queries of null streams, shared by the requests that arrive while one runs.
///
/// A query of the legacy null stream is one of the runtime's costliest small calls when
/// threads copy at once: on the H200, 32 threads reading 4 KiB each made 557,000 copies a
/// second, and 239,000 when each also queried the null stream first (docs/BENCHMARKS.md).
/// A query that starts after a request's call began answers for that request too: when it
/// finds the stream idle, the work queued before the call is done. So one query runs at a
/// time per device, each numbered when it starts, and a caller waits for the first query
/// numbered after the last one started before it came (running its own when none runs);
/// the callers that gather while one query runs share the next. A caller whose query found
/// the stream busy, or failed, asks again itself.
#[derive(Default)]
struct SharedQueries {
    devices: Mutex<Vec<DeviceQueries>>,
    ended: Condvar,
}

/// The queries of one device's null stream, numbered from 1 as they start.
#[derive(Debug, Clone, Copy)]
struct DeviceQueries {
    device: i32,
    /// The number of the last query started.
    started: u64,
    /// The number of the last query ended.
    ended: u64,
    /// The number of the last query that found the stream idle (0: none).
    idle: u64,
    running: bool,
    /// Callers waiting for a query to end.
    waiting: u32,
}

/// Ends the query it was made for, however the query ends (a panic included), so that the
/// callers waiting for it go on.
struct Running<'a> {
    queries: &'a SharedQueries,
    at: usize,
    number: u64,
    idle: bool,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut devices = lock(&self.queries.devices);
        let d = &mut devices[self.at];
        d.running = false;
        d.ended = self.number;
        if self.idle {
            d.idle = self.number;
        }
        drop(devices);
        self.queries.ended.notify_all();
    }
}

impl SharedQueries {
    /// Whether `device`'s null stream was idle at a moment after this call began, from a
    /// query (`query`: the runtime's, of that stream) that started after it did.
    fn idle_since_call(
        &self,
        device: i32,
        query: impl Fn() -> Result<bool, RuntimeError>,
    ) -> Result<bool, RuntimeError> {
        let mut devices = lock(&self.devices);
        let at = match devices.iter().position(|d| d.device == device) {
            Some(at) => at,
            None => {
                devices.push(DeviceQueries {
                    device,
                    started: 0,
                    ended: 0,
                    idle: 0,
                    running: false,
                    waiting: 0,
                });
                devices.len() - 1
            }
        };
        // Entries are never removed: `at` stays this device's.
        let after = devices[at].started;
        loop {
            let d = devices[at];
            if d.idle > after {
                return Ok(true);
            }
            if d.ended > after {
                // A query that started after this call found the stream busy or failed.
                break;
            }
            if !d.running {
                let number = d.started + 1;
                devices[at].started = number;
                devices[at].running = true;
                drop(devices);
                let mut running = Running {
                    queries: self,
                    at,
                    number,
                    idle: false,
                };
                let result = query();
                running.idle = matches!(result, Ok(true));
                return result;
            }
            devices[at].waiting += 1;
            devices = self
                .ended
                .wait(devices)
                .unwrap_or_else(PoisonError::into_inner);
            devices[at].waiting -= 1;
        }
        drop(devices);
        query()
    }
}

/// The driver's means of waiting for null streams: events kept for reuse, by device, and
/// the queries its requests share.
pub(crate) struct NullStreams {
    gpu: Arc<dyn GpuRuntime>,
    idle_events: Mutex<Vec<(i32, EventHandle)>>,
    queries: SharedQueries,
}

impl NullStreams {
    pub(crate) fn new(gpu: Arc<dyn GpuRuntime>) -> NullStreams {
        NullStreams {
            gpu,
            idle_events: Mutex::new(Vec::new()),
            queries: SharedQueries::default(),
        }
    }

    /// Whether the null stream of `device` was idle at a moment after this call began
    /// ([`SharedQueries`]).
    fn idle_since_call(&self, streams: &dyn Streams, device: i32) -> Result<bool, RuntimeError> {
        let gpu = self.gpu.as_ref();
        self.queries.idle_since_call(device, || {
            on_device(gpu, device, || streams.stream_query(NULL_STREAM))
        })
    }

    /// Waits until the null stream of `device` has done the work queued on it so far.
    ///
    /// # Errors
    ///
    /// The runtime's error of the device switch, the query, or the event's record or wait.
    pub(crate) fn wait(&self, device: i32) -> Result<(), RuntimeError> {
        let gpu = self.gpu.as_ref();
        let streams = gpu.require_streams()?;
        match self.idle_since_call(streams, device) {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            // A runtime that cannot say is waited for.
            Err(e) if e.code == NOT_SUPPORTED => {}
            Err(e) => return Err(e),
        }
        on_device(gpu, device, || {
            let event = self.take_event(streams, device)?;
            let waited = streams
                .event_record(event, NULL_STREAM)
                .and_then(|()| streams.event_synchronize(event));
            if waited.is_ok() {
                self.give_back(device, event);
            } else {
                let _ = streams.event_destroy(event);
            }
            waited
        })
    }

    /// Whether the null stream of `device` has nothing left to do now.
    fn idle(&self, device: i32) -> Result<bool, RuntimeError> {
        let streams = self.gpu.require_streams()?;
        self.idle_since_call(streams, device)
    }

    /// An event of `device` (current when this is called): a kept one, or a new one.
    fn take_event(&self, streams: &dyn Streams, device: i32) -> Result<EventHandle, RuntimeError> {
        let kept = {
            let mut events = self
                .idle_events
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            events
                .iter()
                .position(|&(d, _)| d == device)
                .map(|i| events.swap_remove(i).1)
        };
        match kept {
            Some(event) => Ok(event),
            None => streams.event_create(),
        }
    }

    fn give_back(&self, device: i32, event: EventHandle) {
        self.idle_events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((device, event));
    }
}

impl Drop for NullStreams {
    fn drop(&mut self) {
        let events = std::mem::take(
            &mut *self
                .idle_events
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        // Events were made only where the runtime has streams.
        if let Some(streams) = self.gpu.streams() {
            for (_, event) in events {
                let _ = streams.event_destroy(event);
            }
        }
    }
}

/// Runs `f` with `device` current on the calling thread, putting the current device back
/// after.
fn on_device<T>(
    gpu: &dyn GpuRuntime,
    device: i32,
    f: impl FnOnce() -> Result<T, RuntimeError>,
) -> Result<T, RuntimeError> {
    let current = gpu.current_device()?;
    if current == device {
        return f();
    }
    gpu.set_device(device)?;
    let result = f();
    let restored = gpu.set_device(current);
    let value = result?;
    restored.map(|()| value)
}

impl NullStreams {
    /// Waits, for a synchronous request on a buffer of `device` (negative for host memory:
    /// the calling thread's device), until the null stream has done the work queued on it
    /// so far.
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`] with the runtime's error.
    pub(crate) fn wait_before(&self, device: i32) -> Result<(), Error> {
        let device = self.ordering_device(device)?;
        self.wait(device).map_err(Error::Runtime)
    }

    /// Queues `slot` on `engine`, a request on a buffer of `device` (`None` when its buffer
    /// could not be looked at: its request fails when it runs), once the null stream has
    /// done the work queued on it so far: at once when it has, else from a host function
    /// queued on it, which takes `point`. Where neither can be done, the request is queued
    /// now without `point` taken, and waits for the stream itself when it starts.
    pub(crate) fn queue_after(
        &self,
        engine: &Engine,
        device: Option<i32>,
        slot: Arc<Slot>,
        point: &Arc<OrderPoint>,
    ) {
        let Some(device) = device.and_then(|d| self.ordering_device(d).ok()) else {
            engine.queue(slot);
            return;
        };
        match self.idle(device) {
            Ok(true) => {
                point.take();
                engine.queue(slot);
            }
            Ok(false) => {
                let gpu = self.gpu.as_ref();
                let Some(host_functions) = gpu.streams().and_then(|s| s.host_functions()) else {
                    // No host functions: the request waits for itself.
                    engine.queue(slot);
                    return;
                };
                let queue = engine.queue_handle();
                let (reached, taken) = (Arc::clone(&slot), Arc::clone(point));
                let queued = on_device(gpu, device, || {
                    host_functions.launch_host_func(
                        NULL_STREAM,
                        Box::new(move || {
                            taken.take();
                            queue.push(reached);
                        }),
                    )
                });
                if queued.is_err() {
                    // The host function was dropped: the request waits for itself.
                    engine.queue(slot);
                }
            }
            _ => engine.queue(slot),
        }
    }

    /// The device whose null stream a buffer of `device` is ordered after: its own, or the
    /// calling thread's for host memory.
    fn ordering_device(&self, device: i32) -> Result<i32, Error> {
        if device >= 0 {
            Ok(device)
        } else {
            self.gpu.current_device().map_err(Error::Runtime)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::mpsc;
    use std::time::Duration;

    /// Waits until `n` callers wait for device 0's running query.
    fn until_waiting(queries: &SharedQueries, n: u32) {
        while lock(&queries.devices)[0].waiting < n {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Starts, on a thread of `s`, a call whose query blocks on `go` (counted in `count`),
    /// and returns once that query runs.
    fn first_running<'s>(
        s: &'s std::thread::Scope<'s, '_>,
        queries: &'s SharedQueries,
        go: &'s Mutex<mpsc::Receiver<bool>>,
        count: &'s AtomicU64,
    ) -> std::thread::ScopedJoinHandle<'s, Result<bool, RuntimeError>> {
        let first = s.spawn(move || queries.idle_since_call(0, blocking(go, count)));
        while count.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        first
    }

    /// A query that blocks until `go` says, then answers `idle`; counts itself in `count`.
    fn blocking(
        go: &Mutex<mpsc::Receiver<bool>>,
        count: &AtomicU64,
    ) -> impl Fn() -> Result<bool, RuntimeError> {
        move || {
            count.fetch_add(1, Ordering::SeqCst);
            Ok(lock(go).recv().unwrap_or(true))
        }
    }

    #[test]
    fn a_query_that_started_before_the_call_does_not_answer_for_it() {
        let queries = SharedQueries::default();
        let (tx, rx) = mpsc::channel();
        let (rx, count) = (Mutex::new(rx), AtomicU64::new(0));
        let own = AtomicU64::new(0);
        std::thread::scope(|s| {
            let first = first_running(s, &queries, &rx, &count);
            // The first query runs: a call now must not take its answer.
            let second = s.spawn(|| {
                queries.idle_since_call(0, || {
                    own.fetch_add(1, Ordering::SeqCst);
                    Ok(true)
                })
            });
            until_waiting(&queries, 1);
            tx.send(true).unwrap();
            assert_eq!(first.join().unwrap(), Ok(true));
            assert_eq!(second.join().unwrap(), Ok(true));
        });
        assert_eq!(
            own.load(Ordering::SeqCst),
            1,
            "the second call queried itself"
        );
    }

    #[test]
    fn callers_that_gather_while_a_query_runs_share_the_next() {
        let queries = SharedQueries::default();
        let (tx, rx) = mpsc::channel();
        let (rx, count) = (Mutex::new(rx), AtomicU64::new(0));
        std::thread::scope(|s| {
            let first = first_running(s, &queries, &rx, &count);
            let later: Vec<_> = (0..3)
                .map(|_| s.spawn(|| queries.idle_since_call(0, blocking(&rx, &count))))
                .collect();
            until_waiting(&queries, 3);
            // The first query ends; the next is started by one of the three, for all three.
            tx.send(true).unwrap();
            tx.send(true).unwrap();
            assert_eq!(first.join().unwrap(), Ok(true));
            for h in later {
                assert_eq!(h.join().unwrap(), Ok(true));
            }
        });
        assert_eq!(
            count.load(Ordering::SeqCst),
            2,
            "one query for the three that waited"
        );
    }

    #[test]
    fn a_caller_asks_itself_when_the_shared_query_found_the_stream_busy() {
        let queries = SharedQueries::default();
        let (tx, rx) = mpsc::channel();
        let (rx, count) = (Mutex::new(rx), AtomicU64::new(0));
        std::thread::scope(|s| {
            let first = first_running(s, &queries, &rx, &count);
            let later: Vec<_> = (0..2)
                .map(|_| s.spawn(|| queries.idle_since_call(0, blocking(&rx, &count))))
                .collect();
            until_waiting(&queries, 2);
            // The first query: idle, too early for the two. The next: busy. Then idle.
            for answer in [true, false, true] {
                tx.send(answer).unwrap();
            }
            assert_eq!(first.join().unwrap(), Ok(true));
            let mut answers: Vec<bool> = later
                .into_iter()
                .map(|h| h.join().unwrap().unwrap())
                .collect();
            answers.sort_unstable();
            assert_eq!(
                answers,
                [false, true],
                "the one that ran the busy query says so"
            );
        });
        assert_eq!(count.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_panicking_query_lets_the_waiting_callers_go_on() {
        let queries = SharedQueries::default();
        let started = AtomicU64::new(0);
        let (tx, rx) = mpsc::channel::<()>();
        let rx = Mutex::new(rx);
        std::thread::scope(|s| {
            let first = s.spawn(|| {
                queries.idle_since_call(0, || {
                    started.fetch_add(1, Ordering::SeqCst);
                    let _ = lock(&rx).recv();
                    panic!("a query that panics");
                })
            });
            while started.load(Ordering::SeqCst) == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            let second = s.spawn(|| queries.idle_since_call(0, || Ok(true)));
            until_waiting(&queries, 1);
            drop(tx);
            assert!(first.join().is_err());
            assert_eq!(second.join().unwrap(), Ok(true));
        });
    }

    #[test]
    fn devices_have_queries_of_their_own() {
        let queries = SharedQueries::default();
        assert_eq!(queries.idle_since_call(0, || Ok(true)), Ok(true));
        assert_eq!(queries.idle_since_call(1, || Ok(false)), Ok(false));
        assert_eq!(queries.idle_since_call(0, || Ok(false)), Ok(false));
        let devices = lock(&queries.devices);
        assert_eq!(
            devices
                .iter()
                .map(|d| (d.device, d.started, d.idle))
                .collect::<Vec<_>>(),
            [(0, 2, 1), (1, 1, 0)]
        );
    }
}
