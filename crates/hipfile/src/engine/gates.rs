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
//! A [`Gate`] is made only by [`Gates::take`], from a 4-byte-aligned word inside a page of
//! [`PinnedMemory`] that [`Gates`] owns. Pages are never freed while a word is out (the
//! `out` count, decremented only when a word comes back), so a gate's address stays valid
//! for as long as any gate made from it can be opened; the words are only ever accessed as
//! atomics, by the host, and read by the device.

#![allow(unsafe_code)]

use hipfile_core::{DevicePtr, Error, GpuRuntime, PinnedMemory, RuntimeError};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

const PAGE: usize = 4096;
const WORD: usize = std::mem::size_of::<u32>();

/// One word: its host address and the address the device uses for it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Gate {
    host: usize,
    device: DevicePtr,
}

impl Gate {
    /// The device address, for the stream's wait.
    pub(crate) fn device(&self) -> DevicePtr {
        self.device
    }

    /// Lets the stream go on past its wait.
    pub(crate) fn open(&self) {
        // SAFETY: the word lies in a page that stays allocated while this gate is out (module
        // invariant), is 4-byte aligned, and is only accessed atomically.
        unsafe { AtomicU32::from_ptr(self.host as *mut u32) }.store(1, Ordering::Release);
    }
}

/// The free words, shared with the host functions that return them.
#[derive(Debug, Default)]
pub(crate) struct FreeWords {
    words: Mutex<Vec<Gate>>,
    /// Words taken and not yet returned.
    out: Mutex<usize>,
}

impl FreeWords {
    /// Returns a word whose stream has passed its wait.
    pub(crate) fn give_back(&self, gate: Gate) {
        self.words
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(gate);
        *self.out.lock().unwrap_or_else(PoisonError::into_inner) -= 1;
    }

    /// Forgets a word that will never come back (its stream failed to queue the return):
    /// it stays out, so its page is never freed.
    pub(crate) fn lose(&self, _gate: Gate) {}
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

    /// Where words come back to.
    pub(crate) fn free_words(&self) -> &Arc<FreeWords> {
        &self.free
    }

    /// A closed gate (its word 0), allocating a page of words if none is free.
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`] when a page cannot be allocated or its device address found.
    pub(crate) fn take(&self) -> Result<Gate, Error> {
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
        // SAFETY: as in `Gate::open`: the word is in a live page and accessed atomically; no
        // stream waits on it (it was free).
        unsafe { AtomicU32::from_ptr(gate.host as *mut u32) }.store(0, Ordering::Release);
        *self.free.out.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        Ok(gate)
    }

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
        let host = page.as_ptr() as usize;
        let device = mem_ops
            .host_device_pointer(page.as_ptr())
            .map_err(Error::Runtime)?;
        let gates: Vec<Gate> = (0..PAGE / WORD)
            .map(|i| Gate {
                host: host + i * WORD,
                device: DevicePtr(device.0 + (i * WORD) as u64),
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
        words.extend(gates[1..].iter().copied());
        Ok(gates[0])
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
