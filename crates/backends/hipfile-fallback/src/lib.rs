//! hipfile's fallback backend (compat mode): POSIX `pread`/`pwrite` through host staging
//! buffers plus GPU memory copies, or straight into and out of host memory where the
//! driver's rule serves host memory (`host.rs`).
//!
//! It decides whether it can serve a request ([`Fallback::score`], docs/BEHAVIOUR.md §1) and serves
//! it ([`Fallback::io`]) through a bounded pool of pinned staging buffers ([`StagingPool`]),
//! allocated once per driver and shared by its requests. A small request runs on the caller's
//! thread; a large one is split into tasks that a pool of I/O threads serves in parallel, each
//! thread overlapping its file I/O with its copies (`pipeline.rs`). The sizes come from
//! `hipfile-core`'s [`FallbackKnobs`](hipfile_core::FallbackKnobs). Selection, validation and retry
//! belong to `hipfile-core`. It reaches the GPU only through `hipfile-core`'s `GpuRuntime` trait,
//! never through `hipfile-sys`, and does not depend on the fastpath. The facade and tools depend on
//! it.

#![deny(unsafe_code)]

mod cache;
mod host;
mod pipeline;
mod posix;
mod staging;
mod stream;
mod transfer;

pub use staging::{StagingConfig, StagingGuard, StagingPool};

use hipfile_core::{
    Backend, BackendError, BackendKind, Config, GpuRuntime, IoTarget, MemoryKind, MemoryTypes,
    Reason, Submission, Verdict,
};
use pipeline::Pipeline;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The fallback backend. Clones share the staging pool and the I/O threads.
#[derive(Clone)]
pub struct Fallback {
    allow_compat_mode: bool,
    /// Which kinds of memory it serves (docs/BEHAVIOUR.md §1.8).
    memory_types: MemoryTypes,
    /// Requests of at most this many bytes run on the caller's thread.
    small_io_threshold: u64,
    /// Whether large reads take what the page cache lacks with `O_DIRECT`.
    cold_direct_reads: bool,
    /// Whether a write ends with an `fdatasync`.
    durable_writes: bool,
    /// The file-I/O threads (`HIPFILE_IO_THREADS`): a quarter of them serve one segment of a
    /// stream-ordered request (`stream.rs`).
    io_threads: usize,
    /// The configured task size (`HIPFILE_TASK_SIZE`).
    task_size: u64,
    /// Callers with a request on device memory in the fallback now (`Fallback::io`).
    callers: Arc<AtomicUsize>,
    /// `None` for a fallback that only scores.
    staging: Option<Arc<StagingPool>>,
    /// `None` for a fallback that only scores. Declared after `staging`: its drop joins the
    /// workers, which hold the pool too.
    pipeline: Option<Arc<Pipeline>>,
}

impl Fallback {
    /// A fallback for `config` that only scores. Its [`Backend::io`] fails with
    /// [`BackendError::Unsupported`]: it has no runtime to move bytes with.
    pub fn new(config: &Config) -> Self {
        Fallback {
            allow_compat_mode: config.allow_compat_mode,
            memory_types: config.memory_types,
            small_io_threshold: config.fallback.small_io_threshold,
            cold_direct_reads: config.fallback.cold_direct_reads,
            durable_writes: config.durable_writes,
            io_threads: config.fallback.io_threads,
            task_size: config.fallback.task_size,
            callers: Arc::default(),
            staging: None,
            pipeline: None,
        }
    }

    /// A fallback for `config` that serves requests through `runtime`, with a staging pool
    /// of the given sizes and `config.fallback`'s threads, task size and small-request
    /// threshold. Nothing is allocated and no thread started before the first request
    /// (the first large one, for threads). [`StagingConfig::for_knobs`] gives the sizes
    /// that keep within `config.fallback.staging_memory`.
    pub fn with_runtime(
        config: &Config,
        runtime: Arc<dyn GpuRuntime>,
        staging: StagingConfig,
    ) -> Self {
        let pool = Arc::new(StagingPool::new(runtime, staging));
        let knobs = config.fallback;
        Fallback {
            pipeline: Some(Arc::new(Pipeline::new(
                Arc::clone(&pool),
                knobs.io_threads,
                knobs.task_size,
            ))),
            staging: Some(pool),
            ..Fallback::new(config)
        }
    }

    /// Tasks handed to the I/O threads so far (0 for a fallback that only scores). Requests
    /// at or below the small-request threshold never add to it.
    pub fn tasks_dispatched(&self) -> u64 {
        self.pipeline.as_ref().map_or(0, |p| p.tasks_dispatched())
    }

    /// Bytes that large reads took from the disk with `O_DIRECT` because the page cache did
    /// not hold them (0 for a fallback that only scores).
    pub fn direct_read_bytes(&self) -> u64 {
        self.pipeline.as_ref().map_or(0, |p| p.direct_read_bytes())
    }

    /// I/O threads started so far: none before the first large request.
    pub fn io_threads_started(&self) -> usize {
        self.pipeline.as_ref().map_or(0, |p| p.threads_started())
    }

    /// Pins now, as one allocation, the staging buffers that requests of `request_len`
    /// bytes keep busy when they occupy every I/O thread (what a task of theirs takes, on
    /// each thread: [`StagingPool::reserve`]), rather than when the first of them comes;
    /// returns how many buffers exist (0 for a fallback that only scores). Requests the
    /// caller's thread serves itself (at most the small-request threshold) reserve nothing.
    pub fn reserve_staging(&self, request_len: u64) -> usize {
        match (&self.staging, &self.pipeline) {
            (Some(pool), Some(pipeline)) => {
                let spread = request_len > self.small_io_threshold;
                pool.reserve(if spread {
                    pipeline.buffers_busy_for(request_len)
                } else {
                    0
                })
            }
            _ => 0,
        }
    }

    /// The staging pool, for a fallback made with a runtime.
    pub fn staging(&self) -> Option<&StagingPool> {
        self.staging.as_deref()
    }
}

impl Fallback {
    /// Requests on device memory of at most this many bytes run on the caller's thread,
    /// when `callers` callers (this one included) have one in the fallback: the
    /// small-request threshold, or, while at least two callers and at least half as many
    /// callers as there are I/O threads have requests in the fallback, up to one task
    /// (`task_size`, when larger): the callers' own threads then keep the machine busy, and
    /// handing each request to the I/O threads and back costs more than it saves (KvikIO's
    /// 16 threads of 4 MiB reads on an H100: 27 GB/s handed off, 46 on their own threads,
    /// docs/BENCHMARKS.md). A lone caller's requests are still spread over the I/O threads.
    /// A threshold of 0 hands off every request, whatever the callers.
    fn threshold_for(&self, callers: usize) -> u64 {
        if self.small_io_threshold > 0 && callers >= 2 && callers >= self.io_threads.div_ceil(2) {
            self.small_io_threshold.max(self.task_size)
        } else {
            self.small_io_threshold
        }
    }
}

/// One caller counted in `Fallback::callers` while it lives.
struct Caller<'a> {
    count: &'a AtomicUsize,
    /// The callers counted when this one came, itself included.
    with_others: usize,
}

impl<'a> Caller<'a> {
    fn enter(count: &'a AtomicUsize) -> Caller<'a> {
        let others = count.fetch_add(1, Ordering::AcqRel);
        Caller {
            count,
            with_others: others + 1,
        }
    }
}

impl Drop for Caller<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
    }
}

impl fmt::Debug for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fallback")
            .field("allow_compat_mode", &self.allow_compat_mode)
            .field("memory_types", &self.memory_types)
            .field("small_io_threshold", &self.small_io_threshold)
            .field("cold_direct_reads", &self.cold_direct_reads)
            .field("durable_writes", &self.durable_writes)
            .field("staging", &self.staging)
            .field("pipeline", &self.pipeline)
            .finish()
    }
}

impl Backend for Fallback {
    fn kind(&self) -> BackendKind {
        BackendKind::Fallback
    }

    fn score(&self, s: &Submission<'_>) -> Verdict {
        let mut reasons = Vec::new();
        if !self.allow_compat_mode {
            reasons.push(Reason::CompatModeDisallowed);
        }
        if !self.memory_types.serves(s.buffer.memory) {
            reasons.push(Reason::BufferNotDeviceMemory);
        }
        Verdict::from_reasons(Verdict::FALLBACK_SCORE, reasons)
    }

    /// Host memory (served under cuFile's rule) is read into and written from in place, with
    /// `pread`/`pwrite` on the buffered descriptor on the caller's thread (`host.rs`), and a
    /// write ends with one `fdatasync`. Device and managed memory:
    /// reads with `pread` on the buffered descriptor into a staging buffer, then copies to
    /// the device (a read above the small-request threshold takes what the page cache does
    /// not hold with `O_DIRECT` on the file's direct descriptor, when it has one and
    /// `cold_direct_reads` is on); writes copy from the device, then `pwrite`, and end with one
    /// `fdatasync` (docs/BEHAVIOUR.md §3.3: durable on return). Chunks are at most the pool's
    /// `chunk_size`. A request above the small-request threshold is split into tasks served by the
    /// I/O threads while the caller waits. Returns the bytes moved, short for a read that reaches
    /// the end of the file (then the bytes before the end, never any after it) and for a write that
    /// fails after writing some bytes (below); size 0 returns 0.
    ///
    /// # Errors
    ///
    /// - a fallback made with [`Fallback::new`] (no runtime): [`BackendError::Unsupported`];
    /// - a failed `pread`, `pwrite` or `fdatasync`: [`BackendError::Os`] with its errno
    ///   (`EINTR` is reissued, never reported; a `pwrite` that writes nothing is `EIO`;
    ///   `EINVAL` from `fdatasync`, a file with nothing to synchronise such as a character
    ///   device, is not an error);
    /// - a failed copy or pinned allocation: [`BackendError::Runtime`].
    ///
    /// A write follows POSIX's rule (docs/BEHAVIOUR.md §3.2), as the fastpath does: when it has
    /// written some bytes from the request's start and then fails (a `pwrite` past a file-size
    /// limit or on a full file system, a failed copy), it returns the count of that contiguous
    /// prefix, made durable by the `fdatasync` (whose failure is then the error); only a write that
    /// wrote nothing from the start returns the error. Tasks run in parallel, so the count is the
    /// bytes of the leading tasks that finished plus what the failing task wrote before failing;
    /// bytes a later task wrote past it may be in the file too, and, as with any short write, the
    /// bytes after the count are unspecified. A read that fails is an error.
    fn on_stream(&self) -> Option<&dyn hipfile_core::StreamOrderedIo> {
        Some(self)
    }

    fn io(&self, s: &Submission<'_>, target: &IoTarget<'_>) -> Result<u64, BackendError> {
        let Some(pool) = &self.staging else {
            return Err(BackendError::Unsupported(format!(
                "the fallback cannot {}: it was made for scoring only, without a GPU runtime",
                s.request.op()
            )));
        };
        if !s.request.is_checked() {
            return Err(BackendError::unchecked(s.request.op()));
        }
        let mut policy = transfer::Policy {
            small_io_threshold: self.small_io_threshold,
            durable_writes: self.durable_writes,
        };
        // The request's own kind, which validation recorded, decides how its memory is
        // reached; the submission's facts only score.
        let memory = s.request.memory();
        if memory.is_host() {
            return transfer::serve_host(policy, s.request, target.buffered);
        }
        let caller = Caller::enter(&self.callers);
        policy.small_io_threshold = self.threshold_for(caller.with_others);
        if !matches!(
            memory,
            MemoryKind::Device | MemoryKind::Managed | MemoryKind::Unified
        ) {
            return Err(BackendError::Unsupported(format!(
                "the fallback cannot {} {} memory",
                s.request.op(),
                memory.as_str()
            )));
        }
        let direct = target
            .direct
            .filter(|_| self.cold_direct_reads && s.file.dio_offset_align() > 0)
            .map(|fd| posix::Direct {
                fd,
                offset_align: u64::from(s.file.dio_offset_align()),
                mem_align: u64::from(s.file.dio_mem_align()).max(1),
            });
        transfer::serve(
            pool,
            self.pipeline.as_deref(),
            policy,
            s.request,
            s.buffer.device,
            target.buffered,
            direct,
        )
    }
}
