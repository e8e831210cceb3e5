//! Synchronous copies on non-blocking streams. A plain `hipMemcpy` / `cudaMemcpy` runs on the
//! legacy default stream, which waits for every blocking stream's earlier work; a copy made
//! while a caller's stream is held back by a stream-ordered request (a wait on a gate word
//! that this very copy's request opens) would then wait for ever. So a synchronous copy is
//! an asynchronous one on a non-blocking stream of the device that owns the device memory
//! (or of the current device, for memory the runtime does not place on a device), then a
//! wait for that stream. The streams are kept, per device, and reused.

use hipfile_core::runtime::{StreamHandle, Streams};
use hipfile_core::{DevicePtr, GpuRuntime, MemoryKind, RuntimeError};
use std::sync::{Mutex, PoisonError};

/// Idle non-blocking streams, with the device each belongs to.
#[derive(Debug, Default)]
pub(crate) struct SyncStreams(Mutex<Vec<(i32, StreamHandle)>>);

impl SyncStreams {
    /// Runs `copy` on a non-blocking stream of the device that owns `memory` and waits for
    /// it.
    ///
    /// # Errors
    ///
    /// The runtime's error of the device query, the stream creation, the copy or the wait.
    pub(crate) fn run(
        &self,
        rt: &(impl GpuRuntime + Streams),
        memory: DevicePtr,
        copy: impl FnOnce(StreamHandle) -> Result<(), RuntimeError>,
    ) -> Result<(), RuntimeError> {
        let device = match rt.pointer_info(memory) {
            Ok(info) if info.memory == MemoryKind::Device && info.device >= 0 => info.device,
            _ => rt.current_device()?,
        };
        self.run_on(rt, device, copy)
    }

    /// Runs `copy` on a non-blocking stream of `device` and waits for it, for a caller that
    /// knows the device (`GpuRuntime::copy_to_device_of`): no query of the memory or of
    /// the current device, except to make the device's first stream.
    ///
    /// # Errors
    ///
    /// The runtime's error of the stream creation (or the device switch it needs), the copy
    /// or the wait.
    pub(crate) fn run_on(
        &self,
        rt: &(impl GpuRuntime + Streams),
        device: i32,
        copy: impl FnOnce(StreamHandle) -> Result<(), RuntimeError>,
    ) -> Result<(), RuntimeError> {
        let idle = {
            let mut streams = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            streams
                .iter()
                .position(|&(d, _)| d == device)
                .map(|i| streams.swap_remove(i).1)
        };
        let stream = match idle {
            Some(s) => s,
            None => new_stream(rt, device)?,
        };
        let done = copy(stream).and_then(|()| rt.stream_synchronize(stream));
        if done.is_ok() {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((device, stream));
        } else {
            // A stream that failed is not reused; its error is the one reported.
            let _ = rt.stream_destroy(stream);
        }
        done
    }

    /// Destroys every idle stream (when the runtime is dropped).
    pub(crate) fn destroy_all(&self, rt: &impl Streams) {
        let streams = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        for (_, s) in streams {
            let _ = rt.stream_destroy(s);
        }
    }
}

/// A stream of `device`: a stream belongs to the device current when it is made, and the
/// current device is put back after.
fn new_stream(rt: &(impl GpuRuntime + Streams), device: i32) -> Result<StreamHandle, RuntimeError> {
    let current = rt.current_device()?;
    if device == current {
        return rt.stream_create();
    }
    rt.set_device(device)?;
    let made = rt.stream_create();
    rt.set_device(current)?;
    made
}
