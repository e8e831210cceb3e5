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
//!   engine when the null stream is idle, and otherwise from a host function queued on that
//!   stream, which runs once the stream has done the work queued before it. The entries of
//!   one batch submission are asked for once, by their submitter. For a future, while the
//!   engine has as many requests running or queued as may run, or its callers hold as many
//!   futures, the engine's orderer of the device asks once for all the futures submitted
//!   since it last asked, and otherwise the submitter asks itself. Where neither can be
//!   done, each request waits on its engine thread, when it starts, as a synchronous one
//!   does;
//! - a stream-ordered request is ordered on its own stream only (which may be the null
//!   stream itself).
//!
//! The null stream belongs to the device current on the calling thread, so the calls here
//! make the buffer's device current for their duration when another one is.

use crate::engine::{Engine, QueueHandle, Slot, Work, lock};
use hipfile_core::runtime::{EventHandle, StreamHandle, Streams};
use hipfile_core::{BackendKind, Error, GpuRuntime, IoOutcome, Op, RuntimeError};
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
    /// Its order is taken: by its orderer, or by the stream it is queued on.
    Taken,
}

/// The point a request that does not block its caller is ordered after: taken once the null
/// stream was found idle after its submission, or has passed a host function queued after
/// it, or left for the request to wait for when it starts.
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
/// what its requests and the engine's orderers share.
pub(crate) struct NullStreams {
    orders: Arc<Orders>,
    idle_events: Mutex<Vec<(i32, EventHandle)>>,
}

/// What the requests and the engine's orderers share: the runtime, the queries of the null
/// streams, and the requests that wait for an orderer, by device.
struct Orders {
    gpu: Arc<dyn GpuRuntime>,
    queries: SharedQueries,
    unordered: Mutex<Vec<Unordered>>,
}

/// A request that waits for its order point, with that point.
type Waiting = (Arc<Slot>, Arc<OrderPoint>);

/// The requests of one device that wait for their order point.
struct Unordered {
    device: i32,
    requests: Vec<Waiting>,
    /// Whether an orderer of this device is queued on the engine or runs: it takes every
    /// request added before it finds none left.
    ordering: bool,
}

impl Unordered {
    /// The entry of `device` in `all`, if a request of it was ever submitted.
    fn of(all: &mut [Unordered], device: i32) -> Option<&mut Unordered> {
        all.iter_mut().find(|u| u.device == device)
    }

    /// The entry of `device` in `all`, made empty where there is none.
    fn of_or_new(all: &mut Vec<Unordered>, device: i32) -> &mut Unordered {
        let at = match all.iter().position(|u| u.device == device) {
            Some(at) => at,
            None => {
                all.push(Unordered {
                    device,
                    requests: Vec::new(),
                    ordering: false,
                });
                all.len() - 1
            }
        };
        &mut all[at]
    }
}

impl Orders {
    /// Whether the null stream of `device` was idle at a moment after this call began
    /// ([`SharedQueries`]).
    fn idle_since_call(&self, streams: &dyn Streams, device: i32) -> Result<bool, RuntimeError> {
        let gpu = self.gpu.as_ref();
        self.queries.idle_since_call(device, || {
            on_device(gpu, device, || streams.stream_query(NULL_STREAM))
        })
    }

    /// Whether the null stream of `device` has nothing left to do now.
    fn idle(&self, device: i32) -> Result<bool, RuntimeError> {
        let streams = self.gpu.require_streams()?;
        self.idle_since_call(streams, device)
    }

    /// The engine job that orders the requests of `device` ([`NullStreams::queue_after`]): a
    /// [`Work::Ordering`] job, taken by any engine thread once fewer requests are queued
    /// than may run.
    fn orderer(self: &Arc<Orders>, device: i32, queue: QueueHandle) -> Arc<Slot> {
        let mut left = Left {
            orders: Arc::clone(self),
            device,
            queue,
            done: false,
        };
        let job = Box::new(move || {
            let orders = Arc::clone(&left.orders);
            orders.order(device, &left.queue);
            left.done = true;
            Ok(IoOutcome::new(0, BackendKind::Fallback, false))
        });
        Engine::slot_with(Op::Read, Work::Ordering, job, None, None)
    }

    /// Orders the requests of `device` submitted so far: one query of the null stream (or a
    /// host function queued on it) that starts after their submissions orders them after
    /// the work queued before. Requests submitted meanwhile get the next orderer, queued
    /// here.
    fn order(self: &Arc<Orders>, device: i32, queue: &QueueHandle) {
        let Some(requests) = self.take_unordered(device) else {
            return;
        };
        let batch = Batch {
            requests,
            queue: queue.clone(),
        };
        let ordered = match self.idle(device) {
            Ok(true) => batch.take_points(),
            Ok(false) => {
                self.after_host_function(device, batch);
                Vec::new()
            }
            // A runtime that cannot say: each request waits for itself when it starts.
            Err(_) => Vec::new(),
        };
        let more = {
            match Unordered::of(&mut lock(&self.unordered), device) {
                Some(u) if u.requests.is_empty() => {
                    u.ordering = false;
                    false
                }
                Some(_) => true,
                None => false,
            }
        };
        // This thread takes a request itself when its job returns.
        queue.push_all(ordered, true);
        if more {
            queue.push(self.orderer(device, queue.clone()));
        }
    }

    /// The requests of `device` waiting for their order point, or `None` (and no orderer
    /// runs any more) when there are none.
    fn take_unordered(&self, device: i32) -> Option<Vec<Waiting>> {
        let mut unordered = lock(&self.unordered);
        let u = Unordered::of(&mut unordered, device)?;
        if u.requests.is_empty() {
            u.ordering = false;
            return None;
        }
        Some(std::mem::take(&mut u.requests))
    }

    /// Queues `batch` from a host function on the null stream of `device`, which takes the
    /// requests' order points when the stream reaches it. Where the runtime refuses it (and
    /// drops it), each request waits for itself when it starts.
    fn after_host_function(&self, device: i32, batch: Batch) {
        let gpu = self.gpu.as_ref();
        let Some(host_functions) = gpu.streams().and_then(|s| s.host_functions()) else {
            return;
        };
        let _ = on_device(gpu, device, || {
            host_functions.launch_host_func(NULL_STREAM, Box::new(move || batch.ordered()))
        });
    }
}

/// Requests an orderer took: queued with their order points taken, or
/// otherwise, when it is dropped (the query failed, the host function was refused or never
/// ran, a panic), queued as they are, to wait for the null stream when they start.
struct Batch {
    requests: Vec<Waiting>,
    queue: QueueHandle,
}

impl Batch {
    /// Takes the order points; the requests, to be queued.
    fn take_points(mut self) -> Vec<Arc<Slot>> {
        std::mem::take(&mut self.requests)
            .into_iter()
            .map(|(slot, point)| {
                point.take();
                slot
            })
            .collect()
    }

    /// Takes the order points and queues the requests, from a runtime's thread.
    fn ordered(self) {
        let queue = self.queue.clone();
        queue.push_all(self.take_points(), false);
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        let requests = std::mem::take(&mut self.requests);
        if !requests.is_empty() {
            let slots = requests.into_iter().map(|(slot, _)| slot).collect();
            self.queue.push_all(slots, false);
        }
    }
}

/// The requests an orderer leaves when its job does not end: after a panic they are queued
/// to wait for the null stream themselves; when the job never ran (no engine thread could
/// be started, or the engine closed), they fail.
struct Left {
    orders: Arc<Orders>,
    device: i32,
    queue: QueueHandle,
    done: bool,
}

impl Drop for Left {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let requests = {
            match Unordered::of(&mut lock(&self.orders.unordered), self.device) {
                Some(u) => {
                    u.ordering = false;
                    std::mem::take(&mut u.requests)
                }
                None => Vec::new(),
            }
        };
        if std::thread::panicking() {
            drop(Batch {
                requests,
                queue: self.queue.clone(),
            });
            return;
        }
        for (slot, _) in requests {
            let op = slot.op;
            slot.run_with(|_| {
                Err(Error::Internal(format!(
                    "{op}: no I/O thread took its order after the null stream; the request \
                     was not served"
                )))
            });
        }
    }
}

impl NullStreams {
    pub(crate) fn new(gpu: Arc<dyn GpuRuntime>) -> NullStreams {
        NullStreams {
            orders: Arc::new(Orders {
                gpu,
                queries: SharedQueries::default(),
                unordered: Mutex::new(Vec::new()),
            }),
            idle_events: Mutex::new(Vec::new()),
        }
    }

    /// Waits until the null stream of `device` has done the work queued on it so far.
    ///
    /// # Errors
    ///
    /// The runtime's error of the device switch, the query, or the event's record or wait.
    pub(crate) fn wait(&self, device: i32) -> Result<(), RuntimeError> {
        let gpu = self.orders.gpu.as_ref();
        let streams = gpu.require_streams()?;
        match self.orders.idle_since_call(streams, device) {
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
        if let Some(streams) = self.orders.gpu.streams() {
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
    /// done the work queued on it before this call.
    ///
    /// While the engine has as many requests running or queued as may run at once, or its
    /// callers hold as many futures ([`Engine::backlogged`]), the request goes to the
    /// engine's orderer of the device ([`Orders::order`]), started here when none is
    /// pending: the caller makes no runtime call, and one query answers for every request
    /// submitted before the orderer asks. Otherwise, with no orderer pending, the threads
    /// would soon wait for this request: the caller asks itself, which spares the request a
    /// hand-off ([`NullStreams::order_now`]).
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
        let backlogged = engine.backlogged();
        let start = {
            let mut unordered = lock(&self.orders.unordered);
            let u = Unordered::of_or_new(&mut unordered, device);
            if !backlogged && !u.ordering {
                drop(unordered);
                self.order_now(engine, device, vec![(slot, Arc::clone(point))]);
                return;
            }
            u.requests.push((slot, Arc::clone(point)));
            !std::mem::replace(&mut u.ordering, true)
        };
        if start {
            engine.queue(self.orders.orderer(device, engine.queue_handle()));
        } else {
            // The request waits for the orderer: start a thread for it as queueing it would.
            engine.start_threads(1);
        }
    }

    /// Queues requests submitted together (a batch's), each on a buffer of its device
    /// (`None` as for [`NullStreams::queue_after`]), once the null streams have done the
    /// work queued on them before this call: one order for all the requests of a device,
    /// taken on the caller's thread ([`NullStreams::order_now`]).
    pub(crate) fn queue_all_after(
        &self,
        engine: &Engine,
        requests: Vec<(Option<i32>, Arc<Slot>, Arc<OrderPoint>)>,
    ) {
        let mut devices: Vec<(i32, Vec<Waiting>)> = Vec::new();
        for (device, slot, point) in requests {
            let Some(device) = device.and_then(|d| self.ordering_device(d).ok()) else {
                engine.queue(slot);
                continue;
            };
            match devices.iter_mut().find(|(d, _)| *d == device) {
                Some((_, group)) => group.push((slot, point)),
                None => devices.push((device, vec![(slot, point)])),
            }
        }
        for (device, group) in devices {
            self.order_now(engine, device, group);
        }
    }

    /// Orders requests of `device` on the caller's thread: queued at once when its null
    /// stream is idle (a query shared with the callers that ask meanwhile), else from one
    /// host function queued on it; where neither can be done, queued to wait for the stream
    /// themselves when they start.
    fn order_now(&self, engine: &Engine, device: i32, requests: Vec<Waiting>) {
        match self.orders.idle(device) {
            Ok(true) => {
                for (slot, point) in requests {
                    point.take();
                    engine.queue(slot);
                }
            }
            Ok(false) => {
                let n = requests.len();
                let batch = Batch {
                    requests,
                    queue: engine.queue_handle(),
                };
                self.orders.after_host_function(device, batch);
                engine.start_threads(n);
            }
            Err(_) => {
                for (slot, _) in requests {
                    engine.queue(slot);
                }
            }
        }
    }

    /// The device whose null stream a buffer of `device` is ordered after: its own, or the
    /// calling thread's for host memory.
    fn ordering_device(&self, device: i32) -> Result<i32, Error> {
        if device >= 0 {
            Ok(device)
        } else {
            self.orders.gpu.current_device().map_err(Error::Runtime)
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

    mod orderer {
        use super::*;
        use crate::engine::IoState;
        use hipfile_core::mock::{MockGpuRuntime, MockRuntime, MockStreams};
        use std::sync::atomic::AtomicUsize;

        fn done() -> Result<IoOutcome, Error> {
            Ok(IoOutcome::new(0, BackendKind::Fallback, false))
        }

        /// Null streams over a runtime whose null-stream queries `query` answers, on device 0.
        fn null_streams(
            query: impl Fn() -> Result<bool, RuntimeError> + Send + 'static,
        ) -> NullStreams {
            let mut base = MockGpuRuntime::new();
            base.expect_current_device().returning(|| Ok(0));
            let mut streams = MockStreams::new();
            streams
                .expect_stream_query()
                .withf(|s| *s == NULL_STREAM)
                .returning(move |_| query());
            NullStreams::new(Arc::new(MockRuntime::new(base).with_streams(streams)))
        }

        /// A query that counts itself and answers `idle`.
        fn counted(
            count: &Arc<AtomicUsize>,
            idle: bool,
        ) -> impl Fn() -> Result<bool, RuntimeError> + use<> {
            let count = Arc::clone(count);
            move || {
                count.fetch_add(1, Ordering::SeqCst);
                Ok(idle)
            }
        }

        /// A request whose job records in `seen` how it must start, with its order point.
        fn recording(seen: &Arc<Mutex<Vec<Order>>>) -> (Arc<Slot>, Arc<OrderPoint>) {
            let point = Arc::new(OrderPoint::default());
            let (order, seen) = (Arc::clone(&point), Arc::clone(seen));
            let slot = Engine::slot(
                Op::Read,
                Box::new(move || {
                    lock(&seen).push(order.order());
                    done()
                }),
                None,
            );
            (slot, point)
        }

        /// Submits a [`recording`] request through `null`.
        fn submit(null: &NullStreams, engine: &Engine, seen: &Arc<Mutex<Vec<Order>>>) -> Arc<Slot> {
            let (slot, point) = recording(seen);
            null.queue_after(engine, Some(0), Arc::clone(&slot), &point);
            slot
        }

        /// Lets the held requests of [`backlogged`] end, then waits until each of `slots`
        /// has finished.
        fn release_and_finish(release: mpsc::Sender<()>, slots: &[Arc<Slot>]) {
            drop(release);
            for s in slots {
                s.wait_ended();
                assert_eq!(s.phase(), IoState::Finished);
            }
        }

        /// An engine of two threads that runs one request at a time, with one request
        /// running and one queued, both held until `release` sends twice (or is dropped):
        /// requests submitted now go to the orderer, which its spare thread runs once the
        /// first held request ends.
        fn backlogged() -> (Engine, mpsc::Sender<()>) {
            let engine = Engine::new(2, 1);
            let (release, rx) = mpsc::channel::<()>();
            let rx = Arc::new(Mutex::new(rx));
            let (started_tx, started) = mpsc::channel();
            for _ in 0..2 {
                let (rx, started_tx) = (Arc::clone(&rx), started_tx.clone());
                let job = Box::new(move || {
                    let _ = started_tx.send(());
                    let _ = lock(&rx).recv();
                    done()
                });
                engine.queue(Engine::slot(Op::Read, job, None));
            }
            started.recv().unwrap();
            assert!(engine.backlogged());
            (engine, release)
        }

        #[test]
        fn requests_submitted_while_the_engine_is_backlogged_share_one_query() {
            let (engine, release) = backlogged();
            let count = Arc::new(AtomicUsize::new(0));
            let null = null_streams(counted(&count, true));
            let seen = Arc::new(Mutex::new(Vec::new()));
            let slots: Vec<_> = (0..5).map(|_| submit(&null, &engine, &seen)).collect();
            assert_eq!(
                count.load(Ordering::SeqCst),
                0,
                "the submitting thread asked the runtime"
            );
            release_and_finish(release, &slots);
            assert_eq!(count.load(Ordering::SeqCst), 1, "one query for the five");
            assert_eq!(*lock(&seen), [Order::Taken; 5]);
        }

        #[test]
        fn with_no_request_queued_the_submitter_orders_its_request_itself() {
            let engine = Engine::new(1, 1);
            let count = Arc::new(AtomicUsize::new(0));
            let null = null_streams(counted(&count, true));
            let seen = Arc::new(Mutex::new(Vec::new()));
            let slot = submit(&null, &engine, &seen);
            assert_eq!(count.load(Ordering::SeqCst), 1);
            slot.wait_ended();
            assert_eq!(*lock(&seen), [Order::Taken]);
        }

        #[test]
        fn a_caller_holding_as_many_requests_as_may_run_leaves_the_order_to_the_orderer() {
            // Nothing runs or is queued, but the caller holds the handles of as many
            // requests as may run at once: its next submission is ordered on an engine
            // thread, not by a query on the submitting one.
            let engine = Engine::new(2, 2);
            let held = [engine.in_flight(), engine.in_flight()];
            let askers = Arc::new(Mutex::new(Vec::new()));
            let null = null_streams({
                let askers = Arc::clone(&askers);
                move || {
                    lock(&askers).push(std::thread::current().id());
                    Ok(true)
                }
            });
            let seen = Arc::new(Mutex::new(Vec::new()));
            let me = std::thread::current().id();
            let slot = submit(&null, &engine, &seen);
            slot.wait_ended();
            assert_eq!(slot.phase(), IoState::Finished);
            assert_eq!(*lock(&seen), [Order::Taken]);
            let asked = lock(&askers).clone();
            assert!(asked.len() == 1 && asked[0] != me, "the orderer asks, once");
            drop(held);
            // With the handles gone, the submitter asks itself again.
            let slot = submit(&null, &engine, &seen);
            slot.wait_ended();
            assert_eq!(lock(&askers)[1..], [me]);
        }

        #[test]
        fn requests_submitted_together_are_ordered_by_one_query_of_their_call() {
            let engine = Engine::new(2, 2);
            let count = Arc::new(AtomicUsize::new(0));
            let null = null_streams(counted(&count, true));
            let seen = Arc::new(Mutex::new(Vec::new()));
            let mut requests = Vec::new();
            let mut slots = Vec::new();
            for device in [Some(0), Some(0), None, Some(0)] {
                let (slot, point) = recording(&seen);
                slots.push(Arc::clone(&slot));
                requests.push((device, slot, point));
            }
            null.queue_all_after(&engine, requests);
            assert_eq!(count.load(Ordering::SeqCst), 1, "one query for the call");
            for s in &slots {
                s.wait_ended();
            }
            let mut seen = lock(&seen).clone();
            seen.sort_by_key(|o| *o == Order::Taken);
            // The request whose buffer could not be looked at fails when it runs; the
            // others are ordered.
            assert_eq!(
                seen,
                [
                    Order::AfterNullStream,
                    Order::Taken,
                    Order::Taken,
                    Order::Taken
                ]
            );
        }

        #[test]
        fn a_request_submitted_while_the_orderer_asks_waits_for_the_next_query() {
            let (engine, release) = backlogged();
            let count = Arc::new(AtomicUsize::new(0));
            let (answer, answers) = mpsc::channel();
            let answers = Mutex::new(answers);
            let asked = Arc::clone(&count);
            let null = null_streams(move || {
                asked.fetch_add(1, Ordering::SeqCst);
                Ok(lock(&answers).recv().unwrap_or(true))
            });
            let seen = Arc::new(Mutex::new(Vec::new()));
            let first = submit(&null, &engine, &seen);
            // The first held request ends, the second runs: the orderer's query starts.
            release.send(()).unwrap();
            while count.load(Ordering::SeqCst) == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            // The first query runs: the second request was not submitted when it began.
            let second = submit(&null, &engine, &seen);
            answer.send(true).unwrap();
            answer.send(true).unwrap();
            drop(release);
            first.wait_ended();
            second.wait_ended();
            assert_eq!(count.load(Ordering::SeqCst), 2);
            assert_eq!(*lock(&seen), [Order::Taken; 2]);
        }

        #[test]
        fn a_busy_stream_without_host_functions_leaves_each_request_to_wait_itself() {
            let (engine, release) = backlogged();
            let count = Arc::new(AtomicUsize::new(0));
            let null = null_streams(counted(&count, false));
            let seen = Arc::new(Mutex::new(Vec::new()));
            let slots: Vec<_> = (0..3).map(|_| submit(&null, &engine, &seen)).collect();
            release_and_finish(release, &slots);
            assert_eq!(count.load(Ordering::SeqCst), 1);
            assert_eq!(*lock(&seen), [Order::AfterNullStream; 3]);
        }

        #[test]
        fn after_a_panicking_query_the_requests_wait_themselves_and_a_new_orderer_may_start() {
            let (engine, release) = backlogged();
            let null = null_streams(|| panic!("a query that panics"));
            let seen = Arc::new(Mutex::new(Vec::new()));
            let slots: Vec<_> = (0..2).map(|_| submit(&null, &engine, &seen)).collect();
            release_and_finish(release, &slots);
            assert_eq!(*lock(&seen), [Order::AfterNullStream; 2]);
            // The orderer's job ends its unwinding after its requests were queued.
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while lock(&null.orders.unordered)[0].ordering && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert!(!lock(&null.orders.unordered)[0].ordering);
        }

        #[test]
        fn requests_whose_orderer_never_runs_fail_with_a_reason() {
            let (engine, release) = backlogged();
            let null = null_streams(|| Ok(true));
            let seen = Arc::new(Mutex::new(Vec::new()));
            // Two requests wait for an orderer; another one, cancelled before a thread takes
            // it, ends them.
            let slots: Vec<_> = (0..2).map(|_| submit(&null, &engine, &seen)).collect();
            let orderer = null.orders.orderer(0, engine.queue_handle());
            assert!(orderer.cancel());
            for s in &slots {
                s.wait_ended();
                let e = s.take_result().unwrap().unwrap_err();
                assert!(e.to_string().contains("order after the null stream"), "{e}");
            }
            assert!(lock(&seen).is_empty());
            assert!(!lock(&null.orders.unordered)[0].ordering);
            drop(release);
        }
    }
}
