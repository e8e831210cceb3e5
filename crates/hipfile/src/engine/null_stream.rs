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

use crate::engine::{Engine, Slot};
use hipfile_core::runtime::{EventHandle, StreamHandle, Streams};
use hipfile_core::{Error, GpuRuntime, RuntimeError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

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

/// The driver's means of waiting for null streams: events kept for reuse, by device.
pub(crate) struct NullStreams {
    gpu: Arc<dyn GpuRuntime>,
    idle_events: Mutex<Vec<(i32, EventHandle)>>,
}

impl NullStreams {
    pub(crate) fn new(gpu: Arc<dyn GpuRuntime>) -> NullStreams {
        NullStreams {
            gpu,
            idle_events: Mutex::new(Vec::new()),
        }
    }

    /// Waits until the null stream of `device` has done the work queued on it so far.
    ///
    /// # Errors
    ///
    /// The runtime's error of the device switch, the query, or the event's record or wait.
    pub(crate) fn wait(&self, device: i32) -> Result<(), RuntimeError> {
        let gpu = self.gpu.as_ref();
        let streams = gpu.require_streams()?;
        on_device(gpu, device, || {
            match streams.stream_query(NULL_STREAM) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                // A runtime that cannot say is waited for.
                Err(e) if e.code == NOT_SUPPORTED => {}
                Err(e) => return Err(e),
            }
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
        let gpu = self.gpu.as_ref();
        let streams = gpu.require_streams()?;
        on_device(gpu, device, || streams.stream_query(NULL_STREAM))
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
