//! Stream-ordered requests that the fallback serves ([`StreamOrderedIo`]). The bytes move
//! between the file and staging buffers on the engine's file-I/O threads, with file I/O only
//! (no GPU call), and between the staging buffers and device memory by copies queued on the
//! caller's stream when the request is submitted. The GPU never waits for work that needs the
//! GPU: every wait on the stream is released by a `pread` or `pwrite` ending, so streams
//! parked on requests cannot hold back the copies those requests need (on NVIDIA, streams
//! share a few hardware queues, and a wait on one holds back work queued behind it on the
//! same queue). The facade schedules ([`IoQueue`], [`GateWords`]); this module moves the bytes.
//!
//! A request is cut into pieces of one staging buffer each, and those into segments of at
//! most half the staging pool, so that two requests can always be in flight. Each segment
//! takes all its buffers at once before queuing anything (`acquire_owned_many`), so no
//! submitter holds some buffers while waiting for more. On the stream, per segment:
//!
//! - reads: copies of the device bytes into the buffers of pieces that lie past the end of
//!   the file as it is at submission (so that a short read leaves those bytes as they were),
//!   then a host function that queues the segment's I/O, then per piece a wait on the piece's
//!   gate and the copy of the piece to the device; then a wait on the segment's gate and one
//!   host function that returns every gate and buffer of the segment;
//! - writes: copies of every piece from the device, then the host function that queues the
//!   I/O (and lets go of the buffers, which the I/O holds from then on), then the wait on the
//!   segment's gate and its return.
//!
//! The queue serves a segment's pieces on up to `readers` of its threads at once (the job's
//! own and helpers it queues), each taking the next piece not yet taken, and opens each
//! piece's gate as its bytes are in place; the segment's gate opens when the job has ended,
//! however it ended (the job's `on_end` opens every gate not yet open, so a panicking or
//! cancelled job never leaves the stream waiting). A gate is opened once, and goes back only
//! from a host function queued after the wait on it (or, when queuing failed, once the
//! stream has been synchronised), so it is never reused while a stream may still wait on it.
//! The last segment's host function also queues the request's own job, which collects the
//! result on a file-I/O thread: the request ends only once the stream has passed all of it,
//! so the memory it copies into or from is never released before.
//!
//! # Safety
//!
//! The copies on the stream are given the request's device range (validated against the
//! buffer: [`ValidRequest`](hipfile_core::ValidRequest), checked by `queue_on_stream`; the
//! caller keeps the buffer's memory until the request's own job ends, after the stream
//! passed every copy) and staging buffers held until a host function queued after the copy
//! that uses them has run (or, when queuing fails, until the stream has been synchronised).
//! The caller of `queue_on_stream` vouches for the stream.

#![allow(unsafe_code)]

use crate::posix;
use crate::staging::OwnedStaging;
use crate::{Fallback, StagingPool};
use hipfile_core::StreamOrderedIo;
use hipfile_core::runtime::{StreamHandle, StreamOrdering};
use hipfile_core::stream::{
    Gate, GateReturns, GateWords, IoQueue, JobHandle, Report, Served, StreamFile, StreamRequest,
    StreamTarget,
};
use hipfile_core::{
    BackendError, BackendKind, DevicePtr, Error, IoOutcome, MemoryKind, Op, Submission,
};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A failure of the fallback's own I/O, as `submit` reports one: no retry was involved.
fn failed(op: Op, source: BackendError) -> Error {
    Error::Backend {
        op,
        backend: BackendKind::Fallback,
        source,
        retried_from: None,
        retry_refused: None,
    }
}

/// One staging buffer's worth of a request.
struct Piece {
    /// Offset of the piece in the request.
    at: u64,
    len: usize,
    staging: Mutex<OwnedStaging>,
    /// For reads: the buffer was filled with the device's bytes first (the piece lies past
    /// the end of the file at submission), so a short read leaves them as they were.
    kept: bool,
}

/// The gates of one segment: one per piece for reads, then the segment's own; each with
/// whether it was opened. Emptied by whatever gives them back.
struct Gating {
    gates: Mutex<Vec<(Gate, bool)>>,
}

impl Gating {
    /// Opens gate `i` unless it is open already (or given back): each is opened once.
    fn open(&self, i: usize) {
        if let Some((gate, opened)) = lock(&self.gates).get_mut(i)
            && !*opened
        {
            gate.open();
            *opened = true;
        }
    }

    fn open_all(&self) {
        for (gate, opened) in lock(&self.gates).iter_mut() {
            if !*opened {
                gate.open();
                *opened = true;
            }
        }
    }

    /// The device address of gate `i`, for a wait on the stream.
    fn device(&self, i: usize) -> Option<DevicePtr> {
        lock(&self.gates).get(i).map(|(g, _)| g.device())
    }

    fn last(&self) -> usize {
        lock(&self.gates).len().saturating_sub(1)
    }

    /// Gives every gate back: their stream has passed its waits.
    fn give_back(&self, returns: &dyn GateReturns) {
        for (gate, _) in lock(&self.gates).drain(..) {
            returns.give_back(gate);
        }
    }
}

/// What the segments of one request share.
struct Progress {
    op: Op,
    /// Bytes moved so far.
    bytes: AtomicU64,
    /// A segment failed, met the end of the file, or was cancelled: later ones move nothing.
    stop: AtomicBool,
    canceled: AtomicBool,
    /// The first failure.
    error: Mutex<Option<Error>>,
    /// The request's result, set by the last segment's job.
    result: Mutex<Option<Result<IoOutcome, Error>>>,
    /// For the statistics: when it was submitted (`None` when not counting), its size,
    /// alignment and device.
    started: Option<std::time::Instant>,
    size: u64,
    aligned: bool,
    device: i32,
    /// Called with the result by whatever ends the request first: the last segment's job,
    /// or the submission when queuing fails.
    report: Mutex<Option<Report>>,
    /// Whether the submission queued the whole request (`None` while it is queuing): the
    /// last segment's job may run before the submission has queued the rest of that segment,
    /// and reports only a request that was queued whole; the submission reports the others.
    queued_whole: Mutex<Option<bool>>,
    submission_over: Condvar,
}

impl Progress {
    /// The submission is over: `whole` when it queued the whole request.
    fn submitted(&self, whole: bool) {
        *lock(&self.queued_whole) = Some(whole);
        self.submission_over.notify_all();
    }

    /// Waits until the submission is over (it never waits for a job: see
    /// `queue_on_stream`); whether it queued the whole request.
    fn wait_submitted(&self) -> bool {
        let mut whole = lock(&self.queued_whole);
        loop {
            if let Some(whole) = *whole {
                return whole;
            }
            whole = self
                .submission_over
                .wait(whole)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn fail(&self, e: Error) {
        self.stop.store(true, Ordering::Release);
        lock(&self.error).get_or_insert(e);
    }

    /// The request's result from what the segments did.
    fn outcome(&self) -> Result<IoOutcome, Error> {
        if let Some(e) = lock(&self.error).take() {
            return Err(e);
        }
        if self.canceled.load(Ordering::Acquire) {
            return Err(Error::Canceled { op: self.op });
        }
        Ok(IoOutcome::new(
            self.bytes.load(Ordering::Acquire),
            BackendKind::Fallback,
            false,
        ))
    }

    /// Counts the request's end in `file`'s statistics.
    fn count(&self, file: &dyn StreamFile, outcome: &Result<IoOutcome, Error>) {
        match outcome {
            Ok(o) => {
                if let Some(started) = self.started {
                    file.served(&Served {
                        op: self.op,
                        device: self.device,
                        backend: BackendKind::Fallback,
                        bytes: o.bytes,
                        size: self.size,
                        retried: false,
                        aligned: self.aligned,
                        took: started.elapsed(),
                    });
                }
            }
            Err(_) => file.failed(self.op, self.device),
        }
    }
}

/// What a segment's submission keeps until the submission is over, so that nothing it
/// queued loses its memory if queuing fails halfway.
struct Queued {
    /// Held, not read: the buffers stay out of the pool until the segment is queued whole
    /// (or, when queuing fails, until the stream has been synchronised).
    _pieces: Vec<Arc<Piece>>,
    gating: Arc<Gating>,
    io: JobHandle,
    /// Whether the host function that returns the segment's gates was queued.
    returned_by_stream: bool,
}

impl StreamOrderedIo for Fallback {
    unsafe fn queue_on_stream(
        &self,
        s: &Submission<'_>,
        target: StreamTarget<'_>,
        request: StreamRequest,
    ) -> JobHandle {
        let op = s.request.op();
        let queue = target.queue;
        let refuse = |error: Error, report: Option<Report>| {
            let result = Err(error);
            if let Some(report) = report {
                report(&result);
            }
            queue.finished(op, result)
        };
        let Some(pool) = &self.staging else {
            return refuse(
                Error::Internal(
                    "the fallback has no staging pool; the request was not served".into(),
                ),
                request.report,
            );
        };
        // As `Backend::io` refuses them.
        let memory = s.request.memory();
        if !s.request.is_checked() {
            return refuse(failed(op, BackendError::unchecked(op)), request.report);
        }
        if !matches!(
            memory,
            MemoryKind::Device | MemoryKind::Managed | MemoryKind::Unified
        ) {
            return refuse(
                failed(
                    op,
                    BackendError::Unsupported(format!(
                        "the fallback cannot {op} {} memory on a stream",
                        memory.as_str()
                    )),
                ),
                request.report,
            );
        }
        let plan = Plan {
            size: s.request.size(),
            file_offset: s.request.file_offset(),
            address: s.request.address(),
            device: s.buffer.device,
            aligned: s.request.meets_direct_alignment(s.file),
        };
        // SAFETY: the request was validated against checked device memory (above), which the
        // caller keeps allocated until the returned job ends; the caller vouches for the
        // stream.
        unsafe { self.submit(pool, plan, target, request, op) }
    }
}

/// A validated request's numbers.
struct Plan {
    size: u64,
    file_offset: u64,
    /// The device address of the request's first byte.
    address: DevicePtr,
    /// The buffer's device.
    device: i32,
    aligned: bool,
}

impl Fallback {
    /// Queues the request on the stream; the returned job ends when the stream has passed
    /// all of it.
    ///
    /// # Safety
    ///
    /// As [`StreamOrderedIo::queue_on_stream`]; `plan.address..plan.address + plan.size` is
    /// device memory of the pool's runtime.
    unsafe fn submit(
        &self,
        pool: &Arc<StagingPool>,
        plan: Plan,
        target: StreamTarget<'_>,
        request: StreamRequest,
        op: Op,
    ) -> JobHandle {
        let StreamTarget {
            stream,
            ordering,
            queue,
            gates,
            file,
        } = target;
        let chunk = pool.config().chunk_size.max(1);
        let per_segment = (pool.config().max_buffers / 2).max(1);
        // A quarter of the file-I/O threads per segment: with the pool's default size, four
        // large requests in flight keep every thread busy.
        let readers = (self.io_threads / 4).max(1);
        let size = plan.size;
        let pieces_total = usize::try_from(size.div_ceil(chunk as u64)).unwrap_or(usize::MAX);
        let segments = pieces_total.div_ceil(per_segment).max(1);
        let end_of_file = match op {
            Op::Read => size_now(file.as_ref()),
            Op::Write => None,
        };
        let progress = Arc::new(Progress {
            op,
            bytes: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            canceled: AtomicBool::new(false),
            error: Mutex::new(None),
            result: Mutex::new(None),
            started: file.counting().then(std::time::Instant::now),
            size,
            aligned: plan.aligned,
            device: plan.device,
            report: Mutex::new(request.report),
            queued_whole: Mutex::new(None),
            submission_over: Condvar::new(),
        });
        let returns = gates.returns();
        // The request's own job, made now and queued by the last segment's host function
        // once the stream has passed all of the request: it ends the request on a file-I/O
        // thread (where dropping the memory may call the runtime). Cancelling it cancels
        // the segments' I/O, known once they are all queued.
        let keep = request.keep;
        let collected = Arc::clone(&progress);
        let run = Box::new(move || {
            let result = lock(&collected.result)
                .take()
                .unwrap_or_else(|| collected.outcome());
            // Cancelled before its last segment ran: reported now, late rather than never.
            if let Some(report) = lock(&collected.report).take() {
                report(&result);
            }
            drop(keep);
            result
        });
        let canceled = Arc::clone(&progress);
        let segment_ios: Arc<OnceLock<Vec<JobHandle>>> = Arc::default();
        let to_cancel = Arc::clone(&segment_ios);
        let hook = Box::new(move || {
            let mut any = false;
            for io in to_cancel.get().into_iter().flatten() {
                any |= io.cancel();
            }
            if any {
                canceled.canceled.store(true, Ordering::Release);
                canceled.stop.store(true, Ordering::Release);
            }
            any
        });
        let ended = queue.job(op, run, None, Some(hook));
        let mut queued: Vec<Queued> = Vec::new();
        let mut ios: Vec<JobHandle> = Vec::new();
        let mut failure = None;
        for segment in 0..segments {
            let first = segment * per_segment;
            let count = per_segment.min(pieces_total - first.min(pieces_total));
            let last_segment = segment + 1 == segments;
            let staging = match pool.acquire_owned_many(count) {
                Ok(s) => s,
                Err(e) => {
                    failure = Some(failed(op, e));
                    break;
                }
            };
            let pieces: Vec<Arc<Piece>> = staging
                .into_iter()
                .enumerate()
                .map(|(i, staging)| {
                    let at = (first + i) as u64 * chunk as u64;
                    let len = usize::try_from((size - at).min(chunk as u64)).unwrap_or(chunk);
                    let kept =
                        end_of_file.is_some_and(|eof| plan.file_offset + at + len as u64 > eof);
                    Arc::new(Piece {
                        at,
                        len,
                        staging: Mutex::new(staging),
                        kept,
                    })
                })
                .collect();
            let segment = Segment {
                file: &file,
                ordering,
                gates,
                returns: &returns,
                queue,
                stream,
                op,
                address: plan.address,
                file_offset: plan.file_offset,
                progress: &progress,
                readers,
                durable_writes: self.durable_writes,
            };
            let then = last_segment.then(|| Arc::clone(&ended));
            // SAFETY: the stream is live (this function's contract); the device range is the
            // validated request's, whose memory the caller holds until the request's own job
            // has ended, after the stream has passed everything queued here.
            match unsafe { segment.queue(pieces, then, &mut queued) } {
                Ok(io) => {
                    // Queued whole: its host functions hold its buffers now, and the next
                    // segment may need them back from the pool.
                    if let Some(q) = queued.last_mut() {
                        q._pieces.clear();
                        q.returned_by_stream = true;
                    }
                    ios.push(io);
                }
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        // Nothing between the last segment's queuing and here waits for a job, so a job
        // waiting for this (`wait_submitted`) holds its thread only briefly, and the failure
        // path below tells it before waiting for it to end.
        progress.submitted(failure.is_none());
        if let Some(e) = failure {
            // Let the stream pass whatever was queued, then release it all.
            for q in &queued {
                q.io.cancel();
                q.gating.open_all();
            }
            progress.stop.store(true, Ordering::Release);
            let _ = ordering.streams.stream_synchronize(stream);
            for q in &queued {
                q.io.wait_ended();
                if !q.returned_by_stream {
                    // No host function returns this segment's gates, and the stream has
                    // passed its waits: they go back from here.
                    q.gating.give_back(returns.as_ref());
                }
            }
            drop(queued);
            let result = Err(e);
            if let Some(report) = lock(&progress.report).take() {
                report(&result);
            }
            return queue.finished(op, result);
        }
        let _ = segment_ios.set(ios);
        drop(queued);
        ended
    }
}

/// The file's size now, for a regular file (`None` for other kinds, or when `fstat` fails).
fn size_now(file: &dyn StreamFile) -> Option<u64> {
    let stat = rustix::fs::fstat(file.buffered_fd()).ok()?;
    (rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::RegularFile)
        .then(|| u64::try_from(stat.st_size).ok())
        .flatten()
}

/// One segment's submission.
struct Segment<'a> {
    file: &'a Arc<dyn StreamFile>,
    ordering: StreamOrdering<'a>,
    gates: &'a dyn GateWords,
    returns: &'a Arc<dyn GateReturns>,
    queue: &'a Arc<dyn IoQueue>,
    stream: StreamHandle,
    op: Op,
    address: DevicePtr,
    file_offset: u64,
    progress: &'a Arc<Progress>,
    /// The most file-I/O threads that serve one segment's pieces at once.
    readers: usize,
    durable_writes: bool,
}

impl Segment<'_> {
    /// Queues the segment's work on the stream (see the module's documentation); adds what
    /// must live until the submission is over to `queued`, and returns the segment's I/O.
    /// `then` is the request's own job, given with its last segment: its host function
    /// queues it.
    ///
    /// # Safety
    ///
    /// As [`Fallback::submit`]; `address..address + size` is device memory that stays
    /// allocated until the stream has passed the segment.
    unsafe fn queue(
        &self,
        pieces: Vec<Arc<Piece>>,
        then: Option<JobHandle>,
        queued: &mut Vec<Queued>,
    ) -> Result<JobHandle, Error> {
        let last_segment = then.is_some();
        let op = self.op;
        let reads = op == Op::Read;
        let mut words = Vec::new();
        let gate_count = if reads { pieces.len() + 1 } else { 1 };
        for _ in 0..gate_count {
            match self.gates.take() {
                Ok(g) => words.push((g, false)),
                Err(e) => {
                    for (g, _) in words {
                        self.returns.give_back(g);
                    }
                    return Err(e);
                }
            }
        }
        let gating = Arc::new(Gating {
            gates: Mutex::new(words),
        });
        let listener_gates = Arc::clone(&gating);
        let run = self.job(pieces.clone(), Arc::clone(&gating), last_segment);
        let io = self.queue.job(
            op,
            run,
            Some(Box::new(move || listener_gates.open_all())),
            None,
        );
        queued.push(Queued {
            _pieces: pieces.clone(),
            gating: Arc::clone(&gating),
            io: Arc::clone(&io),
            returned_by_stream: false,
        });
        let runtime = |e| Error::Runtime(e);
        let fallback = |e| failed(op, e);
        let lost = || Error::Internal("a stream-ordered request lost its gates".into());
        // Device bytes into the buffers first: all of a write, and the pieces of a read that
        // lie past the end of the file.
        for piece in pieces.iter().filter(|p| !reads || p.kept) {
            let at = DevicePtr(self.address.0 + piece.at);
            // SAFETY: the piece lies inside the validated request; the buffer is held (in
            // `queued`, and by a host function queued later) until the stream has passed the
            // copy.
            unsafe { lock(&piece.staging).copy_from_device_on(at, piece.len, self.stream) }
                .map_err(fallback)?;
        }
        let start = Arc::clone(&io);
        let starter = Arc::clone(self.queue);
        let writes_hold = if reads { Vec::new() } else { pieces.clone() };
        self.ordering
            .host_functions
            .launch_host_func(
                self.stream,
                Box::new(move || {
                    starter.push(start);
                    // A write's buffers are the job's now (or, cancelled, free again): the
                    // stream has copied into them.
                    drop(writes_hold);
                }),
            )
            .map_err(runtime)?;
        if reads {
            for (i, piece) in pieces.iter().enumerate() {
                let gate = gating.device(i).ok_or_else(lost)?;
                // SAFETY: the gate's word stays allocated while it is out (`Gate::new`),
                // until the host function queued below gives it back after the stream passed
                // the wait.
                unsafe {
                    self.ordering
                        .mem_ops
                        .stream_wait_value32(self.stream, gate, 1)
                }
                .map_err(runtime)?;
                let at = DevicePtr(self.address.0 + piece.at);
                // SAFETY: as for the copies above; the job has filled the buffer and left it
                // when the gate opens.
                unsafe { lock(&piece.staging).copy_to_device_on(at, piece.len, self.stream) }
                    .map_err(fallback)?;
            }
        }
        let gate = gating.device(gating.last()).ok_or_else(lost)?;
        // SAFETY: as above.
        unsafe {
            self.ordering
                .mem_ops
                .stream_wait_value32(self.stream, gate, 1)
        }
        .map_err(runtime)?;
        // One host function gives back every gate of the segment and a read's buffers, once
        // the stream has passed all its waits and copies; after the last segment, it also
        // queues the request's own job.
        let returns = Arc::clone(self.returns);
        let returned = Arc::clone(&gating);
        let ending = then.map(|ended| (Arc::clone(self.queue), ended));
        let reads_hold = if reads { pieces.clone() } else { Vec::new() };
        if self
            .ordering
            .host_functions
            .launch_host_func(
                self.stream,
                Box::new(move || {
                    drop(reads_hold);
                    returned.give_back(returns.as_ref());
                    if let Some((queue, ended)) = ending {
                        queue.push(ended);
                    }
                }),
            )
            .is_err()
        {
            // The submission gives them back once the stream has been synchronised.
            return Err(Error::Internal(
                "a stream-ordered request could not queue the return of its gates".into(),
            ));
        }
        Ok(io)
    }

    /// The segment's I/O, run by a file-I/O thread once the stream has reached it: its
    /// pieces are served by that thread and up to `readers - 1` more, each taking the next
    /// piece not yet taken.
    fn job(
        &self,
        pieces: Vec<Arc<Piece>>,
        gating: Arc<Gating>,
        last_segment: bool,
    ) -> hipfile_core::stream::JobFn {
        let work = SegmentIo {
            file: Arc::clone(self.file),
            op: self.op,
            file_offset: self.file_offset,
            durable_writes: self.durable_writes,
            progress: Arc::clone(self.progress),
            gating,
            next: AtomicUsize::new(0),
            done: Mutex::new(0),
            all_done: Condvar::new(),
            got: pieces.iter().map(|_| AtomicUsize::new(0)).collect(),
            go: AtomicBool::new(false),
            pieces,
        };
        let readers = self.readers;
        let queue = Arc::clone(self.queue);
        Box::new(move || {
            let entered = match work.file.enter() {
                Ok(guard) => Some(guard),
                Err(e) => {
                    work.progress.fail(e);
                    None
                }
            };
            let go = entered.is_some() && !work.progress.stop.load(Ordering::Acquire);
            work.go.store(go, Ordering::Release);
            let work = Arc::new(work);
            if go {
                for _ in 1..readers.min(work.pieces.len()) {
                    let helper = Arc::clone(&work);
                    let op = work.op;
                    queue.push(queue.job(
                        op,
                        Box::new(move || {
                            helper.serve_pieces();
                            Ok(IoOutcome::new(0, BackendKind::Fallback, false))
                        }),
                        None,
                        None,
                    ));
                }
            }
            work.serve_pieces();
            let moved = work.wait_all();
            let progress = &work.progress;
            progress.bytes.fetch_add(moved, Ordering::AcqRel);
            if last_segment {
                let outcome = progress.outcome();
                progress.count(work.file.as_ref(), &outcome);
                // A request whose submission failed is reported, with that failure, by the
                // submission.
                if progress.wait_submitted()
                    && let Some(report) = lock(&progress.report).take()
                {
                    report(&outcome);
                }
                *lock(&progress.result) = Some(outcome);
            }
            drop(entered);
            // The segment's own result; the request's is in `progress`.
            Ok(IoOutcome::new(moved, BackendKind::Fallback, false))
        })
    }
}

/// The I/O of one segment, shared by the file-I/O threads that serve its pieces.
struct SegmentIo {
    file: Arc<dyn StreamFile>,
    op: Op,
    file_offset: u64,
    durable_writes: bool,
    progress: Arc<Progress>,
    gating: Arc<Gating>,
    pieces: Vec<Arc<Piece>>,
    /// The next piece no thread has taken.
    next: AtomicUsize,
    /// Pieces served.
    done: Mutex<usize>,
    all_done: Condvar,
    /// Bytes each piece moved.
    got: Vec<AtomicUsize>,
    /// Whether the segment moves bytes (the file is still registered and no earlier segment
    /// stopped the request).
    go: AtomicBool,
}

impl SegmentIo {
    /// Serves pieces until none is left to take.
    fn serve_pieces(&self) {
        let go = self.go.load(Ordering::Acquire);
        let fd = self.file.buffered_fd();
        loop {
            let i = self.next.fetch_add(1, Ordering::AcqRel);
            let Some(piece) = self.pieces.get(i) else {
                return;
            };
            let offset = self.file_offset + piece.at;
            let mut staging = lock(&piece.staging);
            let buf = &mut staging.as_mut_slice()[..piece.len];
            match self.op {
                Op::Read => {
                    let got = if go {
                        posix::pread_full(fd, buf, offset).map_err(|e| failed(Op::Read, e))
                    } else {
                        Ok(0)
                    };
                    match got {
                        Ok(n) => {
                            self.got[i].store(n, Ordering::Release);
                            if n < piece.len && !piece.kept {
                                // The file ended before the size it had at submission: the
                                // rest reads as zeros.
                                buf[n..].fill(0);
                            }
                        }
                        Err(e) => self.progress.fail(e),
                    }
                    drop(staging);
                    self.gating.open(i);
                }
                Op::Write => {
                    if go {
                        match posix::pwrite_full(fd, buf, offset) {
                            Ok(()) => self.got[i].store(piece.len, Ordering::Release),
                            Err(f) => self.progress.fail(failed(Op::Write, f.error)),
                        }
                    }
                }
            }
            *lock(&self.done) += 1;
            self.all_done.notify_all();
        }
    }

    /// Waits until every piece is served (the caller has served pieces until none was left,
    /// so only pieces other threads hold are waited for); the bytes the segment moved: for a
    /// read, up to and with the first short piece, after which the request stops.
    fn wait_all(&self) -> u64 {
        let mut done = lock(&self.done);
        while *done < self.pieces.len() {
            done = self
                .all_done
                .wait(done)
                .unwrap_or_else(PoisonError::into_inner);
        }
        drop(done);
        let mut moved = 0u64;
        for (piece, got) in self.pieces.iter().zip(&self.got) {
            let n = got.load(Ordering::Acquire);
            moved += n as u64;
            if n < piece.len {
                self.progress.stop.store(true, Ordering::Release);
                break;
            }
        }
        if self.op == Op::Write
            && self.durable_writes
            && self.go.load(Ordering::Acquire)
            && !self.pieces.is_empty()
        {
            // A durable write synchronises once its pieces are all written.
            if let Err(e) = posix::sync_data(self.file.buffered_fd()) {
                self.progress.fail(failed(Op::Write, e));
            }
        }
        moved
    }
}
