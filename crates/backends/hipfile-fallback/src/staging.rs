//! Host staging: a bounded pool of pinned buffers shared by every request of a driver, and the
//! copies between one staging buffer and device memory.
//!
//! Buffers are pieces of `GpuRuntime::alloc_pinned` allocations (page-aligned and
//! page-locked, so that copies run at full speed and a later `O_DIRECT` read may target
//! them). A buffer is allocated the first time no idle one is left and fewer than
//! `max_buffers` exist, then kept and reused until the pool is dropped: a request never
//! allocates pinned memory once the pool has grown to what the load needs. A caller that
//! finds every buffer taken waits until one is given back. A caller that knows it will need
//! several at once ([`StagingPool::reserve`]: a large request about to keep every I/O thread
//! busy) has them made as one allocation, carved into buffers: each pinned allocation is a
//! call into the driver that takes its locks, so one allocation of many buffers costs less
//! than many of one. Stream-ordered requests grow the pool on demand too: a pinned
//! allocation neither waits for streams parked on a request's gate nor holds back later
//! copies behind them (docs/decisions/stream-ordered-requests.md); freeing does wait, and
//! the pool frees only when it is dropped.
//!
//! # Safety
//!
//! The `unsafe` here rests on two invariants.
//!
//! - **Staging buffers.** A buffer ([`Chunk`]) is `capacity` bytes of one pinned allocation
//!   ([`Block`]) that no other buffer covers: a block of `n × capacity` bytes is cut into
//!   `n` disjoint buffers when it is made, and freed when the last of them is dropped (each
//!   holds the block). A buffer's bytes are zeroed before the pool hands it out for the first
//!   time, so every byte is initialised before a slice is made over them. A [`StagingGuard`]
//!   or [`OwnedStaging`] is the only holder of its buffer, handed to one at a time; buffers
//!   are dropped only by the pool, which the borrow in `StagingGuard<'_>` (or the `Arc` in
//!   `OwnedStaging`) keeps alive while any is held. A buffer given up
//!   ([`StagingGuard::abandon`]) is never handed out or dropped again, so its block is never
//!   freed: work queued on a stream that could not be waited for may still use it.
//! - **Device ranges.** A [`DeviceRange`] is made only from a [`ValidRequest`], and smaller
//!   ones only by splitting it. `hipfile-core`'s validation guarantees that a request's
//!   `address..address + size` lies inside its buffer, and the buffer was checked against its
//!   allocation (`hipMemGetAddressRange`) when it was registered or, unregistered, for the
//!   call. Backends trust that validation (ARCHITECTURE.md).
//!
//! The plain copies are synchronous (no stream), so neither memory has to outlive the call.
//! The copies on a stream (`*_on`) are `unsafe fn`: their caller keeps both memories alive and
//! leaves the buffer alone until the stream has finished the copy.

#![allow(unsafe_code)]

use hipfile_core::runtime::{StreamHandle, Streams};
use hipfile_core::{
    BackendError, DevicePtr, FallbackKnobs, GpuRuntime, RuntimeError, ValidRequest,
};
use std::fmt;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// The sizes of a [`StagingPool`]. A zero in either field is taken as 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagingConfig {
    /// Bytes per staging buffer: the most one `pread`/`pwrite` and one copy move. Default
    /// [`StagingConfig::DEFAULT_CHUNK_SIZE`].
    pub chunk_size: usize,
    /// The most buffers the pool holds, and so the most chunks in flight at once across all
    /// requests of the driver. Default [`StagingConfig::DEFAULT_MAX_BUFFERS`].
    pub max_buffers: usize,
}

impl StagingConfig {
    /// 16 MiB: large enough that the fixed cost of each `pread` and each copy is small
    /// (docs/BENCHMARKS.md's reference measurements took page-cache reads at 16 MiB and pinned
    /// copies near their limit), small enough to pipeline and to split a request into several
    /// tasks; it is the size upstream hipFile uses and the top of the 4–16 MiB task size suggested
    /// beside docs/BENCHMARKS.md's reference measurements.
    pub const DEFAULT_CHUNK_SIZE: usize = 16 << 20;

    /// 8 buffers, so at most 128 MiB of pinned memory for a pool made with
    /// [`StagingConfig::default`] (a driver sizes its pool with [`StagingConfig::for_knobs`]
    /// instead): in docs/BENCHMARKS.md's reference measurements, page-cache read bandwidth
    /// stops growing at about 8 threads (40.1 GB/s at 8, 40.9 at 16), so more buffers would
    /// pin memory for little gain.
    pub const DEFAULT_MAX_BUFFERS: usize = 8;

    /// Buffers each I/O worker uses for one task: two, so that the `pread` (or `pwrite`) of
    /// one chunk overlaps the copy of the other.
    pub const BUFFERS_PER_WORKER: usize = 2;

    /// 16 MiB: the largest chunk [`StagingConfig::for_knobs`] gives, whatever the knobs, so
    /// that a large staging budget is pinned a buffer at a time as requests need it rather
    /// than in a few huge buffers (a 5 MB request must not pin gigabytes). Upstream hipFile
    /// stages in 16 MiB chunks too.
    pub const MAX_CHUNK_SIZE: usize = 16 << 20;

    /// The sizes for the fallback's knobs, keeping `chunk_size × max_buffers` within
    /// `staging_memory`:
    ///
    /// - `chunk_size` is the smallest of a task, `staging_memory / (io_threads ×
    ///   BUFFERS_PER_WORKER)` (so that every worker can hold its two buffers at once) and
    ///   [`StagingConfig::MAX_CHUNK_SIZE`], rounded down to a multiple of 4096 and at least
    ///   4096. With the defaults (4 MiB tasks, 256 MiB, 16 threads) that is 4 MiB: a
    ///   request's 4 MiB tasks are one chunk each, and longer tasks alternate two buffers.
    /// - `max_buffers` is as many such buffers as `staging_memory` holds (64 by default:
    ///   32 for the workers, the rest for callers' small requests and for callers beyond
    ///   them), at least 1. Only a bound below 4 KiB is exceeded, by that one buffer.
    ///
    /// Any values are taken, without overflow: those outside the configuration's bounds
    /// give the sizes of the nearest ones or larger budgets of 16 MiB buffers.
    pub fn for_knobs(knobs: &FallbackKnobs) -> StagingConfig {
        const PAGE: u64 = 4096;
        let task = knobs.task_size.max(1).div_ceil(PAGE).saturating_mul(PAGE);
        let per_worker = u64::try_from(knobs.io_threads.max(1))
            .unwrap_or(u64::MAX)
            .saturating_mul(Self::BUFFERS_PER_WORKER as u64);
        let chunk = task
            .min(knobs.staging_memory / per_worker)
            .min(Self::MAX_CHUNK_SIZE as u64)
            .max(PAGE)
            / PAGE
            * PAGE;
        let max_buffers = (knobs.staging_memory / chunk).max(1);
        StagingConfig {
            chunk_size: usize::try_from(chunk).unwrap_or(Self::MAX_CHUNK_SIZE),
            max_buffers: usize::try_from(max_buffers).unwrap_or(usize::MAX),
        }
    }

    fn normalized(self) -> StagingConfig {
        StagingConfig {
            chunk_size: self.chunk_size.max(1),
            max_buffers: self.max_buffers.max(1),
        }
    }
}

impl Default for StagingConfig {
    fn default() -> Self {
        StagingConfig {
            chunk_size: StagingConfig::DEFAULT_CHUNK_SIZE,
            max_buffers: StagingConfig::DEFAULT_MAX_BUFFERS,
        }
    }
}

/// One pinned allocation of the pool's runtime, cut into buffers; freed when dropped, which
/// happens when the last [`Chunk`] cut from it goes.
struct Block {
    runtime: Arc<dyn GpuRuntime>,
    ptr: NonNull<u8>,
}

// SAFETY: a `Block` gives no access to its bytes (its chunks do); it only frees the memory,
// once, from whichever thread drops it last, and pinned memory is not tied to a thread. Its
// runtime is `Send + Sync`.
unsafe impl Send for Block {}
// SAFETY: as above; `&Block` allows nothing.
unsafe impl Sync for Block {}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc_pinned` of this runtime, and every chunk of the
        // block (the only users of its bytes) is gone: each holds the block alive.
        // A failure cannot be reported from `drop`; the memory stays pinned then.
        let _ = unsafe { self.runtime.free_pinned(self.ptr.as_ptr()) };
    }
}

/// One staging buffer: `len` bytes of a [`Block`] that no other chunk covers.
struct Chunk {
    /// Held, not read: the block is freed when its last chunk goes.
    _block: Arc<Block>,
    ptr: NonNull<u8>,
    len: usize,
    /// Whether the bytes were zeroed (done by the first taker, not the allocator, so that
    /// the threads that take a new block's buffers zero them at once).
    zeroed: bool,
}

// SAFETY: a chunk is the sole owner of its bytes (module invariant), which any thread may
// use; the block it holds is `Send + Sync`.
unsafe impl Send for Chunk {}
// SAFETY: `&Chunk` gives only shared reads of the bytes (writes need `&mut`).
unsafe impl Sync for Chunk {}

impl Chunk {
    /// Zeroes the bytes the first time: called before the chunk is handed out.
    fn zero_once(&mut self) {
        if !self.zeroed {
            // SAFETY: `len` writable bytes of the block, owned by this chunk alone.
            unsafe { self.ptr.as_ptr().write_bytes(0, self.len) };
            self.zeroed = true;
        }
    }

    fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    fn as_slice(&self) -> &[u8] {
        debug_assert!(self.zeroed);
        // SAFETY: `len` bytes owned by this chunk, initialised (zeroed before it was handed
        // out) and alive while the chunk holds its block; the slice borrows the chunk.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        debug_assert!(self.zeroed);
        // SAFETY: as in `as_slice`; `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

#[derive(Default)]
struct PoolState {
    idle: Vec<Chunk>,
    /// Buffers that exist (idle or held by a guard); abandoned ones are not counted.
    allocated: usize,
    /// Buffers given up for good ([`StagingGuard::abandon`]).
    abandoned: usize,
    /// Buffers being allocated, counted against the bound before they exist.
    allocating: usize,
    /// Reservations being allocated ([`StagingPool::reserve`]): callers that would
    /// allocate a buffer of their own wait for them instead.
    reserving: usize,
    /// Threads waiting for a buffer: a buffer given back while none waits needs no wake-up
    /// (a system call, on every request otherwise).
    waiting: usize,
}

/// A bounded pool of pinned host buffers, allocated lazily and reused; safe to use from many
/// threads at once. Dropping the pool frees every buffer.
pub struct StagingPool {
    runtime: Arc<dyn GpuRuntime>,
    config: StagingConfig,
    state: Mutex<PoolState>,
    /// Signalled when a buffer is given back or a slot for allocation frees up.
    returned: Condvar,
}

impl StagingPool {
    /// An empty pool: nothing is allocated until the first [`StagingPool::acquire`].
    pub fn new(runtime: Arc<dyn GpuRuntime>, config: StagingConfig) -> Self {
        StagingPool {
            runtime,
            config: config.normalized(),
            state: Mutex::new(PoolState::default()),
            returned: Condvar::new(),
        }
    }

    /// The pool's sizes (zeros already replaced by 1).
    pub fn config(&self) -> StagingConfig {
        self.config
    }

    /// How many buffers exist, idle or in use.
    pub fn allocated(&self) -> usize {
        self.lock().allocated
    }

    /// How many buffers are idle, waiting in the pool.
    pub fn idle(&self) -> usize {
        self.lock().idle.len()
    }

    /// How many buffers were given up ([`StagingGuard::abandon`]): neither reused nor freed.
    pub fn abandoned(&self) -> usize {
        self.lock().abandoned
    }

    /// Takes a buffer: an idle one, else a newly allocated one while fewer than
    /// `max_buffers` exist, else waits until another caller gives one back. The buffer goes
    /// back to the pool when the guard is dropped, whatever path the caller leaves by.
    ///
    /// # Errors
    ///
    /// [`BackendError::Runtime`] when the runtime cannot allocate pinned memory; nothing is
    /// kept, and a later call tries again.
    pub fn acquire(&self) -> Result<StagingGuard<'_>, BackendError> {
        let mut state = self.lock();
        loop {
            if let Some(buffer) = state.idle.pop() {
                // Outside the lock: a new buffer is zeroed as it is handed out.
                drop(state);
                return Ok(StagingGuard::new(self, buffer));
            }
            if state.reserving == 0 && state.allocated + state.allocating < self.config.max_buffers
            {
                state.allocating += 1;
                drop(state);
                let buffer = self.allocate_one()?;
                return Ok(StagingGuard::new(self, buffer));
            }
            state = self.wait(state);
        }
    }

    /// Takes a buffer if one is idle or may be allocated now, without waiting: `None` when
    /// every buffer is taken, a reservation is being allocated, or the allocation fails
    /// (the caller can do with fewer).
    pub fn try_acquire(&self) -> Option<StagingGuard<'_>> {
        let mut state = self.lock();
        if let Some(buffer) = state.idle.pop() {
            drop(state);
            return Some(StagingGuard::new(self, buffer));
        }
        if state.reserving == 0 && state.allocated + state.allocating < self.config.max_buffers {
            state.allocating += 1;
            drop(state);
            let buffer = self.allocate_one().ok()?;
            return Some(StagingGuard::new(self, buffer));
        }
        None
    }

    /// Makes sure that `n` buffers (at most `max_buffers`) exist or are being made: those
    /// missing are allocated now, on the calling thread, as one pinned allocation. For a
    /// caller about to need that many at once (a large request split over every I/O thread):
    /// meanwhile, callers that would allocate a buffer of their own wait for these instead.
    /// Returns how many buffers exist. A failed allocation is not an error here: the buffers
    /// are then allocated one at a time as they are taken, and a failure of those is
    /// reported to their takers.
    pub fn reserve(&self, n: usize) -> usize {
        let mut state = self.lock();
        let have = state.allocated + state.allocating;
        let missing = n.min(self.config.max_buffers).saturating_sub(have);
        if missing == 0 {
            return state.allocated;
        }
        state.allocating += missing;
        state.reserving += 1;
        drop(state);
        let reserving = Reserving(self);
        if let Ok(chunks) = self.allocate(missing) {
            self.lock().idle.extend(chunks);
        }
        drop(reserving);
        self.allocated()
    }

    pub(crate) fn runtime(&self) -> &Arc<dyn GpuRuntime> {
        &self.runtime
    }

    /// The runtime's streams, for the copies queued on a stream; a runtime without them
    /// fails such a copy ([`GpuRuntime::require_streams`]).
    fn streams(&self) -> Result<&dyn Streams, BackendError> {
        self.runtime
            .require_streams()
            .map_err(BackendError::Runtime)
    }

    /// Allocates one buffer for a slot already counted in `allocating`.
    fn allocate_one(&self) -> Result<Chunk, BackendError> {
        let mut chunks = self.allocate(1)?;
        chunks.pop().ok_or_else(|| {
            BackendError::Internal("a staging allocation of one buffer made none".to_owned())
        })
    }

    /// Allocates `n` buffers, as one pinned allocation cut into chunks, for `n` slots
    /// already counted in `allocating`, outside the lock (a pinned allocation can take
    /// milliseconds). The slots are given back whatever happens; on success the buffers
    /// are counted as allocated.
    fn allocate(&self, n: usize) -> Result<Vec<Chunk>, BackendError> {
        let mut slot = AllocationSlot {
            pool: self,
            n,
            succeeded: false,
        };
        let len = self.config.chunk_size;
        let Some(total) = len.checked_mul(n) else {
            return Err(BackendError::Internal(format!(
                "{n} staging buffers of {len} bytes do not fit in memory"
            )));
        };
        let raw = self
            .runtime
            .alloc_pinned(total)
            .map_err(BackendError::Runtime)?;
        let Some(ptr) = NonNull::new(raw) else {
            return Err(BackendError::Runtime(RuntimeError::new(
                "hipHostMalloc",
                2,
                format!("the runtime returned a null pointer for {total} pinned bytes"),
            )));
        };
        let block = Arc::new(Block {
            runtime: Arc::clone(&self.runtime),
            ptr,
        });
        let chunks = (0..n)
            .map(|i| Chunk {
                _block: Arc::clone(&block),
                // SAFETY: `i × len < total`, inside the allocation, whose pointer is not
                // null (`total` does not overflow, so neither does this offset).
                ptr: unsafe { NonNull::new_unchecked(ptr.as_ptr().add(i * len)) },
                len,
                zeroed: false,
            })
            .collect();
        slot.succeeded = true;
        Ok(chunks)
    }

    fn give_back(&self, buffer: Chunk) {
        let waiting = {
            let mut state = self.lock();
            state.idle.push(buffer);
            state.waiting > 0
        };
        // Every waiter: one that needs several buffers at once
        // ([`StagingPool::acquire_owned_many`]) may not be able to go on with this one
        // while another could.
        if waiting {
            self.returned.notify_all();
        }
    }

    /// Waits for a buffer to come back (or a slot for one), counted among the waiters.
    fn wait<'a>(&self, mut state: MutexGuard<'a, PoolState>) -> MutexGuard<'a, PoolState> {
        state.waiting += 1;
        let mut state = self
            .returned
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner);
        state.waiting -= 1;
        state
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // Every critical section leaves the state consistent (a push, a pop, a counter), so a
        // panic elsewhere while the lock was held does not make it unusable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for StagingPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.lock();
        f.debug_struct("StagingPool")
            .field("config", &self.config)
            .field("allocated", &state.allocated)
            .field("idle", &state.idle.len())
            .field("abandoned", &state.abandoned)
            .finish()
    }
}

/// Ends `n` allocation slots: counts their buffers as allocated on success, gives the slots
/// back on failure (also when the runtime panics), and wakes the waiters either way.
struct AllocationSlot<'a> {
    pool: &'a StagingPool,
    n: usize,
    succeeded: bool,
}

impl Drop for AllocationSlot<'_> {
    fn drop(&mut self) {
        let mut state = self.pool.lock();
        state.allocating -= self.n;
        if self.succeeded {
            state.allocated += self.n;
        }
        drop(state);
        // A failed slot lets a waiter try to allocate; a successful one changes nothing for
        // waiters, but one spare wake-up is harmless.
        if self.n == 1 {
            self.pool.returned.notify_one();
        } else {
            self.pool.returned.notify_all();
        }
    }
}

/// Ends a reservation ([`StagingPool::reserve`]), also when the runtime panics, and wakes
/// every waiter: for the reserved buffers, or to allocate its own if there are none.
struct Reserving<'a>(&'a StagingPool);

impl Drop for Reserving<'_> {
    fn drop(&mut self) {
        self.0.lock().reserving -= 1;
        self.0.returned.notify_all();
    }
}

/// Exclusive use of one staging buffer; it goes back to its pool on drop.
pub struct StagingGuard<'a> {
    pool: &'a StagingPool,
    /// Taken out only by the drop, which gives it back; never dropped here, so that
    /// [`StagingGuard::abandon`] keeps it allocated.
    buffer: ManuallyDrop<Chunk>,
}

impl<'a> StagingGuard<'a> {
    fn new(pool: &'a StagingPool, mut buffer: Chunk) -> Self {
        buffer.zero_once();
        StagingGuard {
            pool,
            buffer: ManuallyDrop::new(buffer),
        }
    }

    /// Gives the buffer up for good: the pool neither hands it out again nor frees it (its
    /// memory, and the rest of the allocation it was cut from, stays allocated until the
    /// process ends) and stops counting it, so that a
    /// replacement may be allocated within `max_buffers`. For a buffer that a copy queued on
    /// a stream may still read or write, when the stream cannot be waited for: reusing or
    /// freeing it could let the copy corrupt another request's bytes or freed memory.
    pub fn abandon(self) {
        let pool = self.pool;
        // Not given back: the guard's drop would return the buffer to the idle list.
        std::mem::forget(self);
        let mut state = pool.lock();
        state.allocated -= 1;
        state.abandoned += 1;
        drop(state);
        // A waiter may allocate in its place.
        pool.returned.notify_one();
    }

    /// The buffer's size in bytes (the pool's `chunk_size`).
    pub fn capacity(&self) -> usize {
        self.pool.config.chunk_size
    }

    /// The buffer's bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.buffer.as_slice()[..self.capacity()]
    }

    /// The buffer's bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let capacity = self.capacity();
        &mut self.buffer.as_mut_slice()[..capacity]
    }

    /// Copies the first `to.len()` bytes of the buffer to `to`, memory of device `gpu`,
    /// synchronously.
    ///
    /// # Panics
    ///
    /// When `to` is longer than the buffer.
    pub(crate) fn copy_to_device(&self, to: DeviceRange, gpu: i32) -> Result<(), BackendError> {
        let len = to.len_within(self.capacity());
        // SAFETY: `to` lies inside the request's device buffer (module invariant), `len` is
        // no more than the guard's buffer, which the guard holds; the copy is synchronous.
        unsafe {
            self.pool
                .runtime
                .copy_to_device_of(gpu, to.start, self.buffer.as_ptr(), len)
        }
        .map_err(BackendError::Runtime)
    }

    /// Copies `from`, memory of device `gpu`, into the start of the buffer, synchronously.
    ///
    /// # Panics
    ///
    /// When `from` is longer than the buffer.
    pub(crate) fn copy_from_device(
        &mut self,
        from: DeviceRange,
        gpu: i32,
    ) -> Result<(), BackendError> {
        let len = from.len_within(self.capacity());
        // SAFETY: `from` lies inside the request's device buffer (module invariant), `len` is
        // no more than the guard's buffer, held exclusively through `&mut self`; the copy is
        // synchronous.
        unsafe {
            self.pool
                .runtime
                .copy_to_host_of(gpu, self.buffer.as_mut_ptr(), from.start, len)
        }
        .map_err(BackendError::Runtime)
    }
}

impl StagingGuard<'_> {
    /// Queues a copy of the first `to.len()` bytes of the buffer to `to` on `stream`.
    ///
    /// # Safety
    ///
    /// Until `stream` has finished the copy (a synchronize of the stream, or of an event
    /// recorded on it after this call), the caller neither writes the buffer nor drops the
    /// guard, and the device memory of `to` stays allocated.
    ///
    /// # Panics
    ///
    /// When `to` is longer than the buffer.
    pub(crate) unsafe fn copy_to_device_on(
        &self,
        to: DeviceRange,
        stream: StreamHandle,
    ) -> Result<(), BackendError> {
        let len = to.len_within(self.capacity());
        // SAFETY: `to` lies inside the request's device buffer (module invariant), `len` is
        // no more than the guard's buffer; both stay valid and the buffer unwritten until
        // the copy completes (this function's contract).
        unsafe {
            self.pool
                .streams()?
                .copy_to_device_async(to.start, self.buffer.as_ptr(), len, stream)
        }
        .map_err(BackendError::Runtime)
    }

    /// Queues a copy of `from` into the start of the buffer on `stream`.
    ///
    /// # Safety
    ///
    /// Until `stream` has finished the copy, the caller neither reads nor writes the buffer
    /// nor drops the guard, and the device memory of `from` stays allocated.
    ///
    /// # Panics
    ///
    /// When `from` is longer than the buffer.
    pub(crate) unsafe fn copy_from_device_on(
        &mut self,
        from: DeviceRange,
        stream: StreamHandle,
    ) -> Result<(), BackendError> {
        let len = from.len_within(self.capacity());
        // SAFETY: `from` lies inside the request's device buffer (module invariant), `len`
        // is no more than the guard's buffer, held through `&mut self`; both stay valid and
        // the buffer untouched until the copy completes (this function's contract).
        unsafe {
            self.pool.streams()?.copy_to_host_async(
                self.buffer.as_mut_ptr(),
                from.start,
                len,
                stream,
            )
        }
        .map_err(BackendError::Runtime)
    }
}

impl Drop for StagingGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: the buffer is taken out once, here, and the guard is not used afterwards.
        let buffer = unsafe { ManuallyDrop::take(&mut self.buffer) };
        self.pool.give_back(buffer);
    }
}

impl fmt::Debug for StagingGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StagingGuard")
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}

impl StagingPool {
    /// Takes `n` buffers at once, or none, each held apart from any borrow of the pool (for
    /// work that outlives the call that takes them: copies queued on a caller's stream,
    /// which release a buffer from a host function when the stream has passed them; it
    /// goes back to the pool when its [`OwnedStaging`] is dropped). Waits until `n` are
    /// idle or may be allocated, so that callers who each need several never hold some while
    /// waiting for more (two such callers could otherwise wait for each other for ever). `n`
    /// is capped at the pool's `max_buffers`.
    ///
    /// # Errors
    ///
    /// As [`StagingPool::acquire`]; buffers taken before a failed allocation go back.
    pub(crate) fn acquire_owned_many(
        self: &Arc<Self>,
        n: usize,
    ) -> Result<Vec<OwnedStaging>, BackendError> {
        let n = n.min(self.config.max_buffers);
        let mut state = self.lock();
        loop {
            let room = self
                .config
                .max_buffers
                .saturating_sub(state.allocated + state.allocating);
            // Buffers to allocate wait for a reservation being made, as in `acquire`.
            if state.idle.len() + room >= n && (state.idle.len() >= n || state.reserving == 0) {
                let from_idle = n.min(state.idle.len());
                let at = state.idle.len() - from_idle;
                let taken = state.idle.split_off(at);
                let to_allocate = n - from_idle;
                state.allocating += to_allocate;
                drop(state);
                let mut got: Vec<OwnedStaging> = taken.into_iter().map(|b| self.owned(b)).collect();
                if to_allocate > 0 {
                    // On failure the slots are given back, and so are the buffers taken
                    // (dropping `got`).
                    got.extend(
                        self.allocate(to_allocate)?
                            .into_iter()
                            .map(|b| self.owned(b)),
                    );
                }
                return Ok(got);
            }
            state = self.wait(state);
        }
    }

    fn owned(self: &Arc<Self>, mut buffer: Chunk) -> OwnedStaging {
        buffer.zero_once();
        OwnedStaging {
            pool: Arc::clone(self),
            buffer: ManuallyDrop::new(buffer),
        }
    }
}

/// Exclusive use of one staging buffer, holding its pool alive; it goes back to the pool on
/// drop. Made by [`StagingPool::acquire_owned_many`].
pub(crate) struct OwnedStaging {
    pool: Arc<StagingPool>,
    /// Taken out only by the drop, which gives it back.
    buffer: ManuallyDrop<Chunk>,
}

impl OwnedStaging {
    /// The buffer's size in bytes (the pool's `chunk_size`).
    pub(crate) fn capacity(&self) -> usize {
        self.pool.config.chunk_size
    }

    /// The buffer's bytes, writable.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        let capacity = self.capacity();
        &mut self.buffer.as_mut_slice()[..capacity]
    }

    /// Queues a copy of the buffer's first `len` bytes to `to` on `stream`.
    ///
    /// # Safety
    ///
    /// `to..to + len` is device memory of the pool's runtime that stays allocated until the
    /// stream has finished the copy; until then the caller neither writes the buffer nor
    /// drops this value.
    ///
    /// # Errors
    ///
    /// The runtime's error; [`BackendError::Unsupported`] when `len` exceeds the buffer.
    pub(crate) unsafe fn copy_to_device_on(
        &self,
        to: DevicePtr,
        len: usize,
        stream: StreamHandle,
    ) -> Result<(), BackendError> {
        self.check_len(len)?;
        // SAFETY: `len` fits the buffer, which this value holds; the caller vouches for `to`
        // and keeps both alive and the buffer unwritten until the copy completes.
        unsafe {
            self.pool
                .streams()?
                .copy_to_device_async(to, self.buffer.as_ptr(), len, stream)
        }
        .map_err(BackendError::Runtime)
    }

    /// Queues a copy of `len` bytes at `from` into the start of the buffer on `stream`.
    ///
    /// # Safety
    ///
    /// `from..from + len` is device memory of the pool's runtime that stays allocated until
    /// the stream has finished the copy; until then the caller neither reads nor writes the
    /// buffer nor drops this value.
    ///
    /// # Errors
    ///
    /// As [`OwnedStaging::copy_to_device_on`].
    pub(crate) unsafe fn copy_from_device_on(
        &mut self,
        from: DevicePtr,
        len: usize,
        stream: StreamHandle,
    ) -> Result<(), BackendError> {
        self.check_len(len)?;
        // SAFETY: as in `copy_to_device_on`, with the buffer held through `&mut self`.
        unsafe {
            self.pool
                .streams()?
                .copy_to_host_async(self.buffer.as_mut_ptr(), from, len, stream)
        }
        .map_err(BackendError::Runtime)
    }

    fn check_len(&self, len: usize) -> Result<(), BackendError> {
        if len <= self.capacity() {
            Ok(())
        } else {
            Err(BackendError::Unsupported(format!(
                "a copy of {len} bytes does not fit a staging buffer of {}",
                self.capacity()
            )))
        }
    }
}

impl Drop for OwnedStaging {
    fn drop(&mut self) {
        // SAFETY: the buffer is taken out once, here, and the value is not used afterwards.
        let buffer = unsafe { ManuallyDrop::take(&mut self.buffer) };
        self.pool.give_back(buffer);
    }
}

impl fmt::Debug for OwnedStaging {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedStaging")
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}

/// Device memory a request moves, or a piece of it. Made only from a validated request and
/// by splitting, so it always lies inside the request's buffer (module invariant): this is
/// what lets the copies above be safe functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeviceRange {
    start: DevicePtr,
    len: u64,
}

impl DeviceRange {
    /// The device memory `r` reads into or writes from: `address..address + size`.
    pub(crate) fn of_request(r: &ValidRequest) -> Self {
        DeviceRange {
            start: r.address(),
            len: r.size(),
        }
    }

    /// A range anywhere, for tests that never copy through it.
    #[cfg(test)]
    pub(crate) fn for_test(start: DevicePtr, len: u64) -> Self {
        DeviceRange { start, len }
    }

    /// Bytes in the range.
    pub(crate) fn len(self) -> u64 {
        self.len
    }

    /// The first `n` bytes (all of it when `n >= len`) and the rest.
    pub(crate) fn split_at(self, n: u64) -> (DeviceRange, DeviceRange) {
        let n = n.min(self.len);
        (
            DeviceRange {
                start: self.start,
                len: n,
            },
            DeviceRange {
                // No overflow: validation keeps `address + size` in range.
                start: DevicePtr(self.start.0 + n),
                len: self.len - n,
            },
        )
    }

    /// The length as a `usize`, checked against a buffer of `capacity` bytes.
    fn len_within(self, capacity: usize) -> usize {
        match usize::try_from(self.len) {
            Ok(len) if len <= capacity => len,
            _ => panic!(
                "a copy of {} bytes does not fit a staging buffer of {capacity}",
                self.len
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hipfile_core::mock::MockGpuRuntime;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    /// The pinned allocations of a test runtime that are not freed yet: address and length.
    type Live = Arc<Mutex<Vec<(usize, usize)>>>;

    /// A runtime whose pinned allocations are real host memory (the pool zeroes them),
    /// allocated at most `max_allocs` times, and tracked until freed.
    fn pinned_runtime(max_allocs: usize) -> (MockGpuRuntime, Live) {
        let live = Live::default();
        let mut rt = MockGpuRuntime::new();
        let allocs = live.clone();
        rt.expect_alloc_pinned()
            .times(..=max_allocs)
            .returning(move |len| {
                let layout = std::alloc::Layout::from_size_align(len, 4096).unwrap();
                // SAFETY: the layout has a non-zero size (the pool never asks for 0 bytes).
                let p = unsafe { std::alloc::alloc(layout) };
                // Not zero, as a runtime may hand out reused memory: the pool zeroes it.
                // SAFETY: `len` bytes just allocated.
                unsafe { p.write_bytes(0xAB, len) };
                allocs.lock().unwrap().push((p as usize, len));
                Ok(p)
            });
        let frees = live.clone();
        rt.expect_free_pinned().returning(move |p| {
            let mut live = frees.lock().unwrap();
            let i = live.iter().position(|&(a, _)| a == p as usize).unwrap();
            let (_, len) = live.swap_remove(i);
            let layout = std::alloc::Layout::from_size_align(len, 4096).unwrap();
            // SAFETY: `p` came from the allocation above with this layout, freed once.
            unsafe { std::alloc::dealloc(p, layout) };
            Ok(())
        });
        (rt, live)
    }

    fn config(max_buffers: usize) -> StagingConfig {
        StagingConfig {
            chunk_size: 4096,
            max_buffers,
        }
    }

    #[test]
    fn the_pool_is_shared_and_its_guards_move_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<StagingPool>();
        send_sync::<crate::Fallback>();
        send::<StagingGuard<'static>>();
    }

    /// The sizes of the allocations not freed yet, smallest first.
    fn live_sizes(live: &Live) -> Vec<usize> {
        let mut sizes: Vec<usize> = live.lock().unwrap().iter().map(|&(_, n)| n).collect();
        sizes.sort_unstable();
        sizes
    }

    #[test]
    fn several_buffers_are_taken_all_at_once_or_not_at_all() {
        let (rt, _live) = pinned_runtime(4);
        let pool = Arc::new(StagingPool::new(Arc::new(rt), config(4)));
        let one = pool.acquire_owned_many(1).unwrap();
        let three = pool.acquire_owned_many(3).unwrap();
        assert_eq!(three.len(), 3);
        // Four wanted, four exist, none idle: the taker waits with none taken, so the
        // buffers given back one by one are not picked off by it before it can have all.
        let taker = {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || pool.acquire_owned_many(4).unwrap().len())
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        drop(one);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(
            pool.idle(),
            1,
            "a waiter took buffers before it could have them all"
        );
        drop(three);
        assert_eq!(taker.join().unwrap(), 4);
        assert_eq!(pool.idle(), 4);
        // More than the pool holds is capped at what it holds.
        assert_eq!(pool.acquire_owned_many(9).unwrap().len(), 4);
    }

    #[test]
    fn defaults_are_16_mib_and_8_buffers() {
        let c = StagingConfig::default();
        assert_eq!((c.chunk_size, c.max_buffers), (16 << 20, 8));
    }

    #[test]
    fn sizes_for_the_knobs_stay_within_the_staging_memory() {
        let knobs = |io_threads, task_size, staging_memory| {
            let mut v = FallbackKnobs::default();
            v.io_threads = io_threads;
            v.task_size = task_size;
            v.staging_memory = staging_memory;
            v.small_io_threshold = 1 << 20;
            v.cold_direct_reads = true;
            v
        };
        let c = StagingConfig::for_knobs(&knobs(16, 4 << 20, 256 << 20));
        assert_eq!((c.chunk_size, c.max_buffers), (4 << 20, 64));
        let c = StagingConfig::for_knobs(&knobs(16, 8 << 20, 256 << 20));
        assert_eq!((c.chunk_size, c.max_buffers), (8 << 20, 32));
        // Little memory for many threads: the chunk shrinks so each worker has two buffers.
        let c = StagingConfig::for_knobs(&knobs(16, 8 << 20, 32 << 20));
        assert_eq!((c.chunk_size, c.max_buffers), (1 << 20, 32));
        for (threads, task, memory) in [
            (1, 1, 1),
            (4, 65536, 1 << 20),
            (3, 10_000, 1_000_000),
            (1024, 16 << 20, 1 << 30),
            (2, 1 << 30, 100 << 20),
            (2, 64 << 30, 64 << 30),
            (usize::MAX, u64::MAX, u64::MAX),
            (1, u64::MAX, 1),
            (0, 0, 0),
        ] {
            let c = StagingConfig::for_knobs(&knobs(threads, task, memory));
            assert!(
                c.chunk_size >= 4096 && c.chunk_size.is_multiple_of(4096),
                "{c:?}"
            );
            assert!(c.chunk_size <= StagingConfig::MAX_CHUNK_SIZE, "{c:?}");
            assert!(c.max_buffers >= 1);
            let pinned = (c.chunk_size as u64).checked_mul(c.max_buffers as u64);
            assert!(
                pinned.is_some_and(|p| p <= memory.max(4096)),
                "{threads} {task} {memory}: {c:?}"
            );
            // At most a task, which the fallback rounds up to whole pages.
            assert!(c.chunk_size as u64 <= task.max(1).div_ceil(4096).saturating_mul(4096));
        }
        // Budgets far beyond what the workers hold are many 16 MiB buffers, allocated as
        // requests need them, not a few huge ones.
        let c = StagingConfig::for_knobs(&knobs(2, 1 << 30, 64 << 30));
        assert_eq!((c.chunk_size, c.max_buffers), (16 << 20, 4096));
    }

    #[test]
    fn zero_sizes_are_taken_as_one() {
        let pool = StagingPool::new(
            Arc::new(MockGpuRuntime::new()),
            StagingConfig {
                chunk_size: 0,
                max_buffers: 0,
            },
        );
        assert_eq!(
            pool.config(),
            StagingConfig {
                chunk_size: 1,
                max_buffers: 1
            }
        );
    }

    #[test]
    fn allocates_lazily_and_reuses() {
        let (rt, live) = pinned_runtime(1);
        let pool = StagingPool::new(Arc::new(rt), config(4));
        assert_eq!((pool.allocated(), pool.idle()), (0, 0));
        for _ in 0..5 {
            let mut g = pool.acquire().unwrap();
            assert_eq!(g.capacity(), 4096);
            assert_eq!(g.as_slice().len(), 4096);
            g.as_mut_slice()[0] = 7;
            assert_eq!((pool.allocated(), pool.idle()), (1, 0));
        }
        assert_eq!((pool.allocated(), pool.idle()), (1, 1));
        drop(pool);
        assert!(live.lock().unwrap().is_empty(), "every buffer is freed");
    }

    #[test]
    fn grows_to_the_bound_and_frees_every_buffer_on_drop() {
        let (rt, live) = pinned_runtime(3);
        let pool = StagingPool::new(Arc::new(rt), config(3));
        let guards: Vec<_> = (0..3).map(|_| pool.acquire().unwrap()).collect();
        assert_eq!((pool.allocated(), pool.idle()), (3, 0));
        drop(guards);
        assert_eq!((pool.allocated(), pool.idle()), (3, 3));
        assert_eq!(live.lock().unwrap().len(), 3);
        drop(pool);
        assert!(live.lock().unwrap().is_empty(), "every buffer is freed");
    }

    #[test]
    fn a_full_pool_makes_callers_wait_for_a_buffer() {
        let (rt, _live) = pinned_runtime(1);
        let pool = StagingPool::new(Arc::new(rt), config(1));
        let held = pool.acquire().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                let g = pool.acquire().unwrap();
                tx.send(()).unwrap();
                drop(g);
            });
            assert!(
                rx.recv_timeout(Duration::from_millis(100)).is_err(),
                "acquire must wait while the only buffer is held"
            );
            drop(held);
            rx.recv_timeout(Duration::from_secs(10))
                .expect("the waiter gets the buffer once it is given back");
        });
        assert_eq!((pool.allocated(), pool.idle()), (1, 1));
    }

    #[test]
    fn a_failed_allocation_is_a_runtime_error_and_frees_its_slot() {
        let calls = Arc::new(AtomicUsize::new(0));
        let mut rt = MockGpuRuntime::new();
        let c = calls.clone();
        rt.expect_alloc_pinned().returning(move |_| {
            c.fetch_add(1, Ordering::SeqCst);
            Err(RuntimeError::new("hipHostMalloc", 2, "out of memory"))
        });
        let pool = StagingPool::new(Arc::new(rt), config(1));
        for _ in 0..2 {
            let e = pool.acquire().unwrap_err();
            assert!(
                matches!(&e, BackendError::Runtime(r) if r.code == 2 && r.call == "hipHostMalloc"),
                "{e:?}"
            );
        }
        // The slot was given back each time, so the second call tried again, not waited.
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(pool.allocated(), 0);
    }

    #[test]
    fn a_null_allocation_is_a_runtime_error() {
        let mut rt = MockGpuRuntime::new();
        rt.expect_alloc_pinned()
            .returning(|_| Ok(std::ptr::null_mut()));
        rt.expect_free_pinned().never();
        let pool = StagingPool::new(Arc::new(rt), config(1));
        assert!(matches!(pool.acquire(), Err(BackendError::Runtime(_))));
        assert_eq!(pool.allocated(), 0);
    }

    #[test]
    fn a_panicking_holder_gives_its_buffer_back() {
        let (rt, _live) = pinned_runtime(1);
        let pool = StagingPool::new(Arc::new(rt), config(1));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _g = pool.acquire().unwrap();
            panic!("a failure while holding a staging buffer");
        }));
        assert!(r.is_err());
        assert_eq!((pool.allocated(), pool.idle()), (1, 1));
        drop(pool.acquire().unwrap());
    }

    #[test]
    fn an_abandoned_buffer_is_neither_reused_nor_freed_and_makes_room() {
        let (rt, live) = pinned_runtime(2);
        let pool = StagingPool::new(Arc::new(rt), config(1));
        let g = pool.acquire().unwrap();
        let given_up = g.as_slice().as_ptr() as usize;
        std::thread::scope(|s| {
            // A waiter for the only buffer gets a new one once it is given up.
            let waiter = s.spawn(|| pool.acquire().unwrap().as_slice().as_ptr() as usize);
            g.abandon();
            assert_ne!(
                waiter.join().unwrap(),
                given_up,
                "an abandoned buffer was reused"
            );
        });
        assert_eq!((pool.allocated(), pool.idle(), pool.abandoned()), (1, 1, 1));
        let again = pool.acquire().unwrap();
        assert_ne!(again.as_slice().as_ptr() as usize, given_up);
        drop(again);
        drop(pool);
        assert_eq!(
            live.lock()
                .unwrap()
                .iter()
                .map(|&(a, _)| a)
                .collect::<Vec<_>>(),
            [given_up],
            "the abandoned buffer, and only it, is still allocated"
        );
    }

    #[test]
    fn a_reservation_is_one_allocation_cut_into_zeroed_buffers() {
        let (rt, live) = pinned_runtime(2);
        let pool = StagingPool::new(Arc::new(rt), config(6));
        assert_eq!(pool.reserve(4), 4);
        assert_eq!((pool.allocated(), pool.idle()), (4, 4));
        assert_eq!(live_sizes(&live), [4 * 4096]);
        let block = live.lock().unwrap()[0].0;
        let guards: Vec<_> = (0..4).map(|_| pool.acquire().unwrap()).collect();
        let mut starts: Vec<usize> = guards
            .iter()
            .map(|g| {
                assert!(
                    g.as_slice().iter().all(|&b| b == 0),
                    "a buffer is not zeroed"
                );
                g.as_slice().as_ptr() as usize
            })
            .collect();
        starts.sort_unstable();
        assert_eq!(
            starts,
            (0..4).map(|i| block + i * 4096).collect::<Vec<_>>(),
            "the buffers are the block's four disjoint pieces"
        );
        // Enough exist: nothing more is allocated. Beyond the bound, only up to it.
        assert_eq!(pool.reserve(3), 4);
        drop(guards);
        assert_eq!(pool.reserve(100), 6);
        assert_eq!(live_sizes(&live), [2 * 4096, 4 * 4096]);
        drop(pool);
        assert!(live.lock().unwrap().is_empty(), "every block is freed");
    }

    #[test]
    fn takers_wait_for_a_reservation_instead_of_allocating_their_own() {
        let (entered_tx, entered) = mpsc::channel();
        let (go, go_rx) = mpsc::channel::<()>();
        let go_rx = Mutex::new(go_rx);
        let mut rt = MockGpuRuntime::new();
        // One allocation in all: a taker that allocated its own would be a second.
        rt.expect_alloc_pinned().times(1).returning(move |len| {
            entered_tx.send(()).unwrap();
            go_rx.lock().unwrap().recv().unwrap();
            let layout = std::alloc::Layout::from_size_align(len, 4096).unwrap();
            // SAFETY: a non-zero size.
            Ok(unsafe { std::alloc::alloc(layout) })
        });
        rt.expect_free_pinned().returning(|p| {
            let layout = std::alloc::Layout::from_size_align(2 * 4096, 4096).unwrap();
            // SAFETY: the one allocation above, of this layout, freed once.
            unsafe { std::alloc::dealloc(p, layout) };
            Ok(())
        });
        let pool = StagingPool::new(Arc::new(rt), config(4));
        std::thread::scope(|s| {
            let reserver = s.spawn(|| pool.reserve(2));
            entered.recv().unwrap();
            let (took_tx, took) = mpsc::channel();
            let pool = &pool;
            s.spawn(move || {
                let got = pool.acquire().map(|g| g.capacity());
                let other = pool.try_acquire().map(|g| g.capacity());
                took_tx.send((got.ok(), other)).unwrap();
            });
            assert!(
                took.recv_timeout(Duration::from_millis(100)).is_err(),
                "a taker went on while the reservation was being allocated"
            );
            go.send(()).unwrap();
            assert_eq!(reserver.join().unwrap(), 2);
            let (got, other) = took.recv_timeout(Duration::from_secs(10)).unwrap();
            assert_eq!((got, other), (Some(4096), Some(4096)));
        });
        assert_eq!((pool.allocated(), pool.idle()), (2, 2));
    }

    #[test]
    fn a_failed_or_panicking_reservation_leaves_the_buffers_to_their_takers() {
        use hipfile_testkit::{Call, Fault, HostMemRuntime};
        let rt = Arc::new(
            HostMemRuntime::builder()
                .fault(Fault::on(Call::AllocPinned).nth(0).fail(2))
                .fault(Fault::on(Call::AllocPinned).nth(1).panic("a runtime bug"))
                .build(),
        );
        let pool = StagingPool::new(rt.clone(), config(3));
        assert_eq!(pool.reserve(3), 0);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.reserve(3)));
        assert!(r.is_err());
        assert_eq!(pool.allocated(), 0);
        // Neither left a reservation behind for takers to wait for: this allocates.
        let g = pool.acquire().unwrap();
        assert_eq!((g.capacity(), pool.allocated()), (4096, 1));
        assert_eq!(rt.calls(Call::AllocPinned), 3);
        drop(g);
        drop(pool);
        assert_eq!(rt.live_pinned(), 0);
    }

    #[test]
    fn an_abandoned_buffer_keeps_its_whole_block() {
        let (rt, live) = pinned_runtime(1);
        let pool = StagingPool::new(Arc::new(rt), config(2));
        assert_eq!(pool.reserve(2), 2);
        let a = pool.acquire().unwrap();
        let b = pool.acquire().unwrap();
        a.abandon();
        drop(b);
        assert_eq!((pool.allocated(), pool.abandoned()), (1, 1));
        drop(pool);
        assert_eq!(
            live_sizes(&live),
            [2 * 4096],
            "the block of an abandoned buffer is never freed"
        );
    }

    #[test]
    fn device_ranges_split_without_leaving_the_range() {
        let r = DeviceRange {
            start: DevicePtr(0x1000),
            len: 10,
        };
        let (a, b) = r.split_at(4);
        assert_eq!(
            (a.start, a.len, b.start, b.len),
            (DevicePtr(0x1000), 4, DevicePtr(0x1004), 6)
        );
        let (a, b) = r.split_at(99);
        assert_eq!((a.len, b.len, b.start), (10, 0, DevicePtr(0x100a)));
        assert_eq!(r.len_within(10), 10);
    }

    #[test]
    #[should_panic(expected = "does not fit a staging buffer")]
    fn a_range_longer_than_the_buffer_is_refused() {
        let r = DeviceRange {
            start: DevicePtr(0x1000),
            len: 11,
        };
        let _ = r.len_within(10);
    }
}
