//! Gates for stream-ordered requests: 32-bit words in pinned host memory that a GPU stream
//! waits on (`hipStreamWaitValue32` / `cuStreamWaitValue32`) until hipfile opens them (stores
//! 1) when the request they hold back has ended.
//!
//! Words come from pages of pinned memory that the driver allocates as needed and keeps; a
//! word goes back to the free list only once its stream has passed the wait (a host function
//! queued after the wait returns it), so a word is never reset while a stream may still read
//! it. Pages are freed with the driver only when no word is out; otherwise they are left
//! allocated, since a stream may still be waiting on one.
//!
//! # Safety
//!
//! [`Gates`] makes a [`Gate`] (`Gate::new`) only from a 4-byte-aligned word inside a page of
//! [`PinnedMemory`] that it owns. Pages are never freed while a word is out (the
//! `out` count, decremented only when a word comes back), so a gate's address stays valid
//! for as long as any gate made from it can be opened; the words are only ever accessed as
//! atomics, by the host, and read by the device.

#![allow(unsafe_code)]

use hipfile_core::stream::{Gate, GateReturns, GateWords};
use hipfile_core::{DevicePtr, Error, GpuRuntime, PinnedMemory, RuntimeError};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError};

const PAGE: usize = 4096;
const WORD: usize = std::mem::size_of::<u32>();

/// The free words, shared with the host functions that return them.
#[derive(Debug, Default)]
pub(crate) struct FreeWords {
    words: Mutex<Vec<Gate>>,
    /// Words taken and not yet returned.
    out: Mutex<usize>,
}

impl GateReturns for FreeWords {
    fn give_back(&self, gate: Gate) {
        self.words
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(gate);
        let mut out = self.out.lock().unwrap_or_else(PoisonError::into_inner);
        *out = out.saturating_sub(1);
    }
}

/// The gates of one driver.
pub(crate) struct Gates {
    runtime: Arc<dyn GpuRuntime>,
    pages: Mutex<Vec<PinnedMemory>>,
    free: Arc<FreeWords>,
}

impl Gates {
    pub(crate) fn new(runtime: Arc<dyn GpuRuntime>) -> Gates {
        Gates {
            runtime,
            pages: Mutex::new(Vec::new()),
            free: Arc::default(),
        }
    }
}

impl GateWords for Gates {
    /// A closed gate (its word 0), allocating a page of words if none is free.
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`] when a page cannot be allocated or its device address found.
    fn take(&self) -> Result<Gate, Error> {
        let found = self
            .free
            .words
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let gate = match found {
            Some(g) => g,
            None => self.add_page()?,
        };
        // No stream waits on it: it was free.
        gate.close();
        *self.free.out.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Ok(gate)
    }

    fn returns(&self) -> Arc<dyn GateReturns> {
        Arc::clone(&self.free) as Arc<dyn GateReturns>
    }
}

impl Gates {
    /// Allocates a page, keeps all its words but the one returned in the free list.
    fn add_page(&self) -> Result<Gate, Error> {
        // Only stream-ordered requests take gates, and only where the runtime has them
        // (`StreamOrdering`); asked first, so that nothing is allocated for nothing.
        let mem_ops = self
            .runtime
            .streams()
            .and_then(|s| s.stream_mem_ops())
            .ok_or_else(|| {
                Error::Runtime(RuntimeError::unsupported_because(
                    "host_device_pointer",
                    "this GPU runtime has no stream memory operations",
                ))
            })?;
        let page = PinnedMemory::alloc(&self.runtime, PAGE)
            .map_err(Error::Runtime)?
            .ok_or_else(|| {
                Error::Runtime(RuntimeError::new(
                    "pinned host allocation",
                    0,
                    "the runtime returned a null pointer for a page of stream gates",
                ))
            })?;
        let device = mem_ops
            .host_device_pointer(page.as_ptr())
            .map_err(Error::Runtime)?;
        let host = page.as_ptr().cast::<u32>().cast_mut();
        let mut gates: Vec<Gate> = (0..PAGE / WORD)
            .filter_map(|i| {
                let word = NonNull::new(host.wrapping_add(i))?;
                // SAFETY: a 4-byte-aligned word of a page of pinned memory that this value
                // keeps, and frees only when no word is out (`Drop`); the words are only
                // ever accessed atomically (through `Gate`), by the host, and read by the
                // device.
                Some(unsafe { Gate::new(word, DevicePtr(device.0 + (i * WORD) as u64)) })
            })
            .collect();
        self.pages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(page);
        let mut words = self
            .free
            .words
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let first = gates.swap_remove(0);
        words.extend(gates);
        Ok(first)
    }
}

impl Drop for Gates {
    fn drop(&mut self) {
        let out = *self.free.out.lock().unwrap_or_else(PoisonError::into_inner);
        if out > 0 {
            // A stream may still wait on a word: leave every page allocated.
            let pages =
                std::mem::take(self.pages.get_mut().unwrap_or_else(PoisonError::into_inner));
            std::mem::forget(pages);
        }
    }
}
