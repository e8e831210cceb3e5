//! An owner of pinned host memory: bytes from [`GpuRuntime::alloc_pinned`], zeroed when
//! allocated, used as a byte slice, and freed through the same runtime. The facade's
//! `PinnedHostBuffer` holds one. (The fallback's staging pool owns its allocations as blocks
//! cut into buffers, which the threads that take them zero in parallel, rather than one
//! thread zeroing a whole allocation here.) It lives here because `GpuRuntime` does.
//!
//! # Safety
//!
//! A [`PinnedMemory`] is the sole owner of `len` bytes that its runtime allocated (the
//! runtime's `unsafe trait` promises that `alloc_pinned` returns that many writable bytes).
//! They are zeroed before the value exists, so every byte is initialised before a slice is
//! made over them, and they are freed at most once, by [`PinnedMemory::release`] or the drop,
//! after which the value is empty. Slices borrow the value, so none outlives the memory.

#![allow(unsafe_code)]

use crate::runtime::{GpuRuntime, RuntimeError};
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

/// Page-locked host memory from a [`GpuRuntime`], owned: zeroed when allocated, freed when
/// released or dropped.
pub struct PinnedMemory {
    runtime: Arc<dyn GpuRuntime>,
    ptr: NonNull<u8>,
    /// 0 once released.
    len: usize,
    released: bool,
}

// SAFETY: a `PinnedMemory` is the sole owner of plain page-locked host memory, which is not
// tied to the thread that allocated it, so handing it to another thread is sound; its runtime
// is `Send + Sync`.
unsafe impl Send for PinnedMemory {}
// SAFETY: `&PinnedMemory` gives only shared reads of the bytes (writes need `&mut`).
unsafe impl Sync for PinnedMemory {}

impl PinnedMemory {
    /// Allocates `len` bytes of pinned host memory from `runtime` and zeroes them. `Ok(None)`
    /// when the runtime answers with a null pointer (each caller reports that in its own
    /// terms).
    ///
    /// # Errors
    ///
    /// The runtime's error when it cannot allocate.
    pub fn alloc(
        runtime: &Arc<dyn GpuRuntime>,
        len: usize,
    ) -> Result<Option<PinnedMemory>, RuntimeError> {
        let raw = runtime.alloc_pinned(len)?;
        let Some(ptr) = NonNull::new(raw) else {
            return Ok(None);
        };
        // SAFETY: the runtime allocated `len` writable bytes at `ptr` (its `unsafe trait`
        // promise), which nothing else uses yet; zeroing them makes every byte initialised
        // before a slice is made.
        unsafe { ptr.as_ptr().write_bytes(0, len) };
        Ok(Some(PinnedMemory {
            runtime: Arc::clone(runtime),
            ptr,
            len,
            released: false,
        }))
    }

    /// The length in bytes (0 once released).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bytes (released, or allocated with length 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The start of the memory, for copies by the runtime. Valid for `len()` bytes while the
    /// value lives and is not released.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// As [`as_ptr`](Self::as_ptr), for copies that write the memory.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` initialised bytes owned by this value until it is released or dropped
        // (module invariant); the slice borrows `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Frees the memory now, reporting a failure, and leaves the value empty; the drop then
    /// frees nothing. Releasing an empty value does nothing.
    ///
    /// # Errors
    ///
    /// The runtime's error when it cannot free (the memory stays pinned).
    pub fn release(&mut self) -> Result<(), RuntimeError> {
        if self.released {
            return Ok(());
        }
        self.released = true;
        self.len = 0;
        // SAFETY: the memory came from `alloc_pinned` of this runtime, is freed only here
        // (`released` forbids a second free, and with `len` 0 no slice covers it), and
        // no slice of it outlives the borrow of `self`.
        unsafe { self.runtime.free_pinned(self.ptr.as_ptr()) }
    }
}

impl fmt::Debug for PinnedMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PinnedMemory")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .finish()
    }
}

impl Drop for PinnedMemory {
    fn drop(&mut self) {
        // A failure cannot be reported from `drop`; the memory stays pinned then. Owners that
        // want to report it call `release` first.
        let _ = self.release();
    }
}
