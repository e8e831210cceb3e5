//! One thread's requests through the APIs that keep several in flight (`--api async`,
//! `batch`, `stream`), each with `--queue-depth` requests in flight over buffers of its own:
//! futures over owned buffers with the queue refilled as each request ends, batches of that
//! many requests polled until all have ended, or that many requests ordered on as many GPU
//! streams (one each) and waited for. It uses none of the other jobs' modules.

use super::args::Api;
use crate::tally::Tally;
use hipfile::{BatchIo, BatchStatus, DeviceBuffer, Driver, FileHandle, IoOutcome, Op, Stream};
use std::collections::VecDeque;

/// What one thread needs: the file, its requests (offset, length) and its buffers, one per
/// request in flight, each at least as long as the longest request.
pub(super) struct Thread<'a> {
    pub(super) api: Api,
    pub(super) op: Op,
    pub(super) driver: &'a Driver,
    pub(super) handle: &'a FileHandle,
    /// The device the buffers are on, for the stream of `--api stream`.
    pub(super) device: Option<i32>,
    pub(super) requests: &'a [(u64, u64)],
}

impl Thread<'_> {
    /// Moves every request; returns the bytes each backend moved. The buffers are left in
    /// `bufs` when it succeeds.
    pub(super) fn run(&self, bufs: &mut Vec<DeviceBuffer>) -> Result<Tally, String> {
        if bufs.is_empty() {
            return Err("no GPU buffer is left for this thread".to_owned());
        }
        match self.api {
            Api::Async => self.queue(bufs),
            Api::Batch => self.batches(bufs),
            Api::Stream => self.stream(bufs),
            // The sync API is the case's own loop.
            Api::Sync => Err("the sync API has no queue".to_owned()),
        }
    }

    fn failed(&self, offset: u64, len: u64, e: impl std::fmt::Display) -> String {
        format!(
            "cannot {} the test file ({len} bytes at offset {offset}): {e}",
            self.op.as_str()
        )
    }

    /// Counts an outcome that must have moved the whole request.
    fn check(&self, tally: &mut Tally, o: &IoOutcome, offset: u64, len: u64) -> Result<(), String> {
        if o.bytes != len {
            return Err(self.failed(
                offset,
                len,
                format!(
                    "{} bytes moved: the test file changed during the run",
                    o.bytes
                ),
            ));
        }
        tally.count(o);
        Ok(())
    }

    /// Futures over owned buffers, a new request made as soon as one ends.
    fn queue(&self, bufs: &mut Vec<DeviceBuffer>) -> Result<Tally, String> {
        let mut tally = Tally::default();
        let mut next = self.requests.iter();
        let mut pending = VecDeque::new();
        loop {
            while let Some(buf) = bufs.pop() {
                let Some(&(offset, len)) = next.next() else {
                    bufs.push(buf);
                    break;
                };
                let range = ..len as usize;
                let io = match self.op {
                    Op::Read => self.handle.read_owned(buf, range, offset),
                    Op::Write => self.handle.write_owned(buf, range, offset),
                };
                let io = io.map_err(|(e, buf)| {
                    bufs.push(buf);
                    self.failed(offset, len, e)
                })?;
                pending.push_back((offset, len, io));
            }
            let Some((offset, len, io)) = pending.pop_front() else {
                return Ok(tally);
            };
            let (result, buf) = io.wait();
            bufs.push(buf);
            let o = result.map_err(|e| self.failed(offset, len, e))?;
            self.check(&mut tally, &o, offset, len)?;
        }
    }

    /// Batches of one request per buffer, each polled until all its requests have ended.
    fn batches(&self, bufs: &mut [DeviceBuffer]) -> Result<Tally, String> {
        let mut tally = Tally::default();
        for wave in self.requests.chunks(bufs.len().max(1)) {
            let mut batch = self
                .driver
                .batch(wave.len())
                .map_err(|e| format!("cannot set up a batch: {e}"))?;
            let mut ios = Vec::with_capacity(wave.len());
            for (k, (&(offset, len), buf)) in wave.iter().zip(bufs.iter_mut()).enumerate() {
                let range = ..len as usize;
                let io = match self.op {
                    Op::Read => buf
                        .slice_mut(range)
                        .map(|v| BatchIo::read(self.handle, v, offset, k as u64)),
                    Op::Write => buf
                        .slice(range)
                        .map(|v| BatchIo::write(self.handle, v, offset, k as u64)),
                };
                ios.push(io.map_err(|e| self.failed(offset, len, e))?);
            }
            batch
                .submit(ios)
                .map_err(|e| format!("cannot submit a batch: {e}"))?;
            let mut ended = 0;
            while ended < wave.len() {
                for event in batch.poll(1, wave.len(), None) {
                    ended += 1;
                    let (offset, len) = wave.get(event.cookie as usize).copied().unwrap_or((0, 0));
                    match event.status {
                        BatchStatus::Complete(o) => self.check(&mut tally, &o, offset, len)?,
                        BatchStatus::Failed(e) => return Err(self.failed(offset, len, e)),
                        other => return Err(self.failed(offset, len, format!("{other:?}"))),
                    }
                }
            }
        }
        Ok(tally)
    }

    /// One request per buffer, each buffer's on a stream of its own (requests on one stream
    /// run one after another, as stream order says), then all waited for.
    fn stream(&self, bufs: &mut [DeviceBuffer]) -> Result<Tally, String> {
        if let Some(d) = self.device {
            self.driver
                .tuning()
                .gpu()
                .set_device(d)
                .map_err(|e| format!("cannot use device {d}: {e}"))?;
        }
        let streams = bufs
            .iter()
            .map(|_| self.driver.create_stream())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("cannot create a stream: {e}"))?;
        let tally = self.on_streams(&streams, bufs)?;
        for s in &streams {
            s.synchronize()
                .map_err(|e| format!("cannot synchronise a stream: {e}"))?;
        }
        Ok(tally)
    }

    fn on_streams(&self, streams: &[Stream], bufs: &mut [DeviceBuffer]) -> Result<Tally, String> {
        let mut tally = Tally::default();
        for wave in self.requests.chunks(bufs.len().max(1)) {
            let mut ios = Vec::with_capacity(wave.len());
            for ((&(offset, len), buf), stream) in wave.iter().zip(bufs.iter_mut()).zip(streams) {
                let range = ..len as usize;
                let io = match self.op {
                    Op::Read => buf
                        .slice_mut(range)
                        .and_then(|v| self.handle.read_on(stream, v, offset)),
                    Op::Write => buf
                        .slice(range)
                        .and_then(|v| self.handle.write_on(stream, v, offset)),
                };
                ios.push((offset, len, io.map_err(|e| self.failed(offset, len, e))?));
            }
            for (offset, len, io) in ios {
                let o = io.wait().map_err(|e| self.failed(offset, len, e))?;
                self.check(&mut tally, &o, offset, len)?;
            }
        }
        Ok(tally)
    }
}
