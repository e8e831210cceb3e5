//! [`RemoteFile`]: an object opened once (its size and ETag pinned by a `HEAD`), then read
//! in ranges by many concurrent ranged GETs.
//!
//! A read cuts its range into `request_size` parts, keeps up to `concurrency` GETs in
//! flight, each streaming its body into a staging buffer of its own (pinned host memory for
//! device reads), and copies each finished part to its place as it arrives, while the other
//! GETs go on ([`RemoteFile::read_many`] reads neighbouring small ranges with one GET).
//! Staging is `concurrency × request_size` bytes at most; the pinned slots of
//! device reads are kept for the file's next reads (a copy or a load reads it many times),
//! and freed with it. Every GET carries
//! `If-Match` with the pinned ETag, and the ETag each answer carries is compared as well
//! (some servers ignore `If-Match`): an object replaced mid-read is an error, never a torn
//! read. A part that returns more or fewer bytes than asked is an error. On the first error
//! the GETs still in flight are cancelled and waited for before the read returns: no request
//! outlives the call.

use crate::error::RemoteError;
use crate::location::Location;
use crate::runtime::{block_on, handle};
use crate::settings::RemoteSettings;
use crate::store::connect;
use futures::StreamExt;
use hipfile::{DeviceBuf, DeviceSliceMut, Driver, PinnedHostBuffer};
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt};
use std::ops::{DerefMut, Range};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use tokio::runtime::Handle;
use tokio::task::JoinSet;

/// An object of an S3-compatible store or an HTTP(S) server, opened for reading.
#[derive(Debug)]
pub struct RemoteFile {
    url: String,
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
    etag: Option<String>,
    settings: RemoteSettings,
    driver: Driver,
    /// Pinned staging slots kept between device reads (at most `concurrency`).
    staging: Mutex<Vec<PinnedHostBuffer>>,
    /// Ranged GETs started by its reads (a retry of one is not another).
    gets: AtomicU64,
}

/// One ranged GET: what it needs, owned, so that it can run on the runtime's threads.
struct Get {
    url: String,
    store: Arc<dyn ObjectStore>,
    path: Path,
    etag: Option<String>,
    range: Range<u64>,
}

impl RemoteFile {
    /// Opens `url` (`s3://BUCKET/KEY`, `http://HOST/PATH`, `https://HOST/PATH`): checks
    /// `settings`, and asks the server for the object's size and ETag (`HEAD`), which every
    /// later read is pinned to. Device reads stage through pinned memory of `driver`.
    ///
    /// # Errors
    ///
    /// [`RemoteError::Url`], [`RemoteError::Settings`]; [`RemoteError::NotFound`],
    /// [`RemoteError::Denied`], [`RemoteError::Request`] from the `HEAD`;
    /// [`RemoteError::Runtime`] when called on an asynchronous runtime's thread.
    pub fn open(
        driver: &Driver,
        url: &str,
        settings: RemoteSettings,
    ) -> Result<RemoteFile, RemoteError> {
        settings.check()?;
        let location = Location::parse(url)?;
        let (store, path) = connect(url, &location, &settings)?;
        let meta = block_on(store.head(&path))?
            .map_err(|e| RemoteError::from_store(url, "HEAD", None, None, e))?;
        Ok(RemoteFile {
            url: url.to_owned(),
            store,
            path,
            size: meta.size,
            etag: meta.e_tag,
            settings,
            driver: driver.clone(),
            staging: Mutex::new(Vec::new()),
            gets: AtomicU64::new(0),
        })
    }

    /// The URL it was opened with.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The object's size in bytes, as the `HEAD` said.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The ETag every read is pinned to; `None` where the server sends none (then a
    /// replaced object cannot be told).
    pub fn etag(&self) -> Option<&str> {
        self.etag.as_deref()
    }

    /// The ranged GETs its reads have started so far; the client's retries of one GET are
    /// not counted again.
    pub fn gets(&self) -> u64 {
        self.gets.load(Ordering::Relaxed)
    }

    /// The settings it reads with.
    pub fn settings(&self) -> &RemoteSettings {
        &self.settings
    }

    /// Reads the object's bytes from `offset` into `dst`, up to its length or the object's
    /// end, and returns how many: fewer than `dst` only at the end of the object, 0 at or
    /// past it. The driver's statistics count it ([`Driver::count_remote_read`]).
    ///
    /// # Errors
    ///
    /// Any [`RemoteError`] of a GET or of a copy; then `dst` holds an unspecified mix of
    /// old and new bytes. [`RemoteError::Runtime`] when called on an asynchronous runtime's
    /// thread: use [`read_async`](Self::read_async) there.
    pub fn read(&self, dst: DeviceSliceMut<'_>, offset: u64) -> Result<u64, RemoteError> {
        let n = block_on(self.read_all(vec![(dst, offset)], |_| ()))??;
        Ok(n.iter().sum())
    }

    /// [`read`](Self::read), for an asynchronous caller: awaitable on any executor (the
    /// GETs run on this crate's own runtime). Each part's copy into device memory runs on
    /// the awaiting thread, a synchronous copy of at most `request_size` bytes. Dropping
    /// the future cancels the GETs still in flight; `dst` then holds an unspecified mix.
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read), but for the runtime's thread, where this one is the call to
    /// make.
    pub async fn read_async(
        &self,
        dst: DeviceSliceMut<'_>,
        offset: u64,
    ) -> Result<u64, RemoteError> {
        let n = self.read_all(vec![(dst, offset)], |_| ()).await?;
        Ok(n.iter().sum())
    }

    /// Reads several ranges at once: each `(dst, offset)` as [`read`](Self::read) would,
    /// all their GETs sharing one window of `concurrency` (so that ranges smaller than
    /// `request_size × concurrency` still keep it full). Neighbouring ranges share GETs:
    /// a range that starts at most 1 MiB after another ends is read by the same GET while
    /// it stays within `request_size` (the hole is read and dropped), so that many small
    /// ranges, such as a checkpoint's small tensors, do not each wait for a GET's first
    /// byte. Returns the bytes each read.
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read); then every `dst` holds an unspecified mix.
    pub fn read_many(
        &self,
        reads: Vec<(DeviceSliceMut<'_>, u64)>,
    ) -> Result<Vec<u64>, RemoteError> {
        block_on(self.read_all(reads, |_| ()))?
    }

    /// [`read_many`](Self::read_many), calling `progress(bytes)` on the calling thread as
    /// each part's `bytes` are in place (parts arrive in any order), for a progress report
    /// of a long read.
    ///
    /// # Errors
    ///
    /// As [`read_many`](Self::read_many).
    pub fn read_many_with_progress(
        &self,
        reads: Vec<(DeviceSliceMut<'_>, u64)>,
        progress: impl FnMut(u64),
    ) -> Result<Vec<u64>, RemoteError> {
        block_on(self.read_all(reads, progress))?
    }

    /// The reads of [`read_many`](Self::read_many): every range cut into `request_size`
    /// parts, neighbouring parts joined into one GET ([`merge`]), the GETs fetched in one
    /// window, each part copied to its place as its GET arrives; each read counted in the
    /// driver's statistics.
    async fn read_all(
        &self,
        mut reads: Vec<(DeviceSliceMut<'_>, u64)>,
        mut progress: impl FnMut(u64),
    ) -> Result<Vec<u64>, RemoteError> {
        let started = Instant::now();
        let gpu = |source| RemoteError::Gpu {
            url: self.url.clone(),
            source,
        };
        let wants: Vec<u64> = reads
            .iter()
            .map(|(dst, offset)| self.available(dst.byte_len(), *offset))
            .collect();
        let mut chunks = Vec::new();
        let mut parts = Vec::new();
        for ((dst, offset), &want) in reads.iter_mut().zip(&wants) {
            if want == 0 {
                continue;
            }
            let view = dst.slice_mut(..want as usize).map_err(gpu)?;
            chunks.extend(view.chunks(self.settings.request_size).map_err(gpu)?);
            parts.extend(self.parts(*offset, want));
        }
        if parts.is_empty() {
            return Ok(wants);
        }
        let gets = merge(&parts, self.settings.request_size as u64, MERGE_GAP);
        let ranges: Vec<Range<u64>> = gets.iter().map(|g| g.range.clone()).collect();
        let handle = handle()?;
        let largest = ranges.iter().map(|r| r.end - r.start).max().unwrap_or(0);
        let slots = self.take_staging(ranges.len(), largest).map_err(gpu)?;
        let (slots, fetched) = self
            .fetch(&handle, &ranges, slots, |i, bytes| {
                let pieces = gets.get(i).map_or(&[][..], |g| &g.pieces[..]);
                for &(part, at) in pieces {
                    let len = parts.get(part).map_or(0, |r| r.end - r.start) as usize;
                    let (Some(chunk), Some(piece)) =
                        (chunks.get_mut(part), bytes.get(at..at + len))
                    else {
                        return Err(RemoteError::Runtime(format!(
                            "{}: no destination for part {part} of GET {i}",
                            self.url
                        )));
                    };
                    chunk.copy_from_host(piece).map_err(gpu)?;
                    progress(len as u64);
                }
                Ok(())
            })
            .await;
        self.keep_staging(slots);
        drop(chunks);
        let took = started.elapsed();
        for ((dst, _), &want) in reads.iter().zip(&wants) {
            self.driver
                .count_remote_read(dst, fetched.is_ok().then_some(want), took);
        }
        fetched.map(|()| wants)
    }

    /// Pinned staging for a read of `parts` parts, the largest of `largest` bytes: the slots
    /// kept from earlier reads, and new ones for the rest (full `request_size`, to be kept,
    /// unless every part is smaller).
    fn take_staging(
        &self,
        parts: usize,
        largest: u64,
    ) -> Result<Vec<PinnedHostBuffer>, hipfile::Error> {
        let needed = self.settings.concurrency.min(parts);
        let mut slots = {
            let mut kept = self.staging.lock().unwrap_or_else(PoisonError::into_inner);
            let from = kept.len().saturating_sub(needed);
            kept.split_off(from)
        };
        let size = self
            .settings
            .request_size
            .min(usize::try_from(largest).unwrap_or(usize::MAX));
        while slots.len() < needed {
            slots.push(self.driver.alloc_pinned(size)?);
        }
        Ok(slots)
    }

    /// Keeps the full-size slots of a read for the next ones: at most `concurrency`, the
    /// staging bound of one read, for as long as the file is open.
    fn keep_staging(&self, slots: Vec<PinnedHostBuffer>) {
        let mut kept = self.staging.lock().unwrap_or_else(PoisonError::into_inner);
        kept.extend(
            slots
                .into_iter()
                .filter(|s| s.len() == self.settings.request_size),
        );
        kept.truncate(self.settings.concurrency);
    }

    /// Hands the pinned staging this file keeps for its next reads to `next`, a file of the
    /// same driver about to be read, so that objects read one after another hold one
    /// object's staging between them (`concurrency × request_size`), not one each. Slots
    /// that do not fit `next`'s settings are freed; a file of another driver gets none.
    pub fn pass_staging_to(&self, next: &RemoteFile) {
        let slots =
            std::mem::take(&mut *self.staging.lock().unwrap_or_else(PoisonError::into_inner));
        if next.driver.same_as(&self.driver) {
            next.keep_staging(slots);
        }
    }

    /// Reads the object's bytes from `offset` into host memory `dst`, as
    /// [`read`](Self::read) does into device memory (the staging is pageable).
    ///
    /// # Errors
    ///
    /// As [`read`](Self::read).
    pub fn read_to_host(&self, dst: &mut [u8], offset: u64) -> Result<u64, RemoteError> {
        let want = self.available(dst.len(), offset);
        if want == 0 {
            return Ok(0);
        }
        let size = self.settings.request_size;
        let parts = self.parts(offset, want);
        let slot = size.min(want as usize);
        let slots = vec![vec![0u8; slot]; self.settings.concurrency.min(parts.len())];
        let handle = handle()?;
        let (_, fetched) = block_on(self.fetch(&handle, &parts, slots, |i, bytes| {
            let at = i * size;
            dst.get_mut(at..at + bytes.len())
                .ok_or_else(|| RemoteError::Runtime(format!("no destination for part {i}")))?
                .copy_from_slice(bytes);
            Ok(())
        }))?;
        fetched.map(|()| want)
    }

    /// The bytes a read of `len` at `offset` can return.
    fn available(&self, len: usize, offset: u64) -> u64 {
        (len as u64).min(self.size.saturating_sub(offset))
    }

    /// `offset..offset + len` in `request_size` parts, the last one shorter.
    fn parts(&self, offset: u64, len: u64) -> Vec<Range<u64>> {
        let size = self.settings.request_size as u64;
        (0..len.div_ceil(size))
            .map(|i| offset + i * size..offset + ((i + 1) * size).min(len))
            .collect()
    }

    /// Runs a GET for each of `parts` on `runtime` with at most `slots.len()` in flight,
    /// each into a slot, and hands part `i`'s bytes to `deliver(i, bytes)` as it finishes. The first
    /// error cancels the GETs in flight, which are waited for before it is returned. Gives
    /// back the slots (but those of cancelled GETs) with the outcome.
    async fn fetch<B>(
        &self,
        runtime: &Handle,
        parts: &[Range<u64>],
        mut slots: Vec<B>,
        mut deliver: impl FnMut(usize, &[u8]) -> Result<(), RemoteError>,
    ) -> (Vec<B>, Result<(), RemoteError>)
    where
        B: DerefMut<Target = [u8]> + Send + 'static,
    {
        let mut tasks = JoinSet::new();
        let mut next = 0;
        let mut failure: Option<RemoteError> = None;
        loop {
            while failure.is_none() && next < parts.len() {
                let Some(slot) = slots.pop() else { break };
                let get = Get {
                    url: self.url.clone(),
                    store: Arc::clone(&self.store),
                    path: self.path.clone(),
                    etag: self.etag.clone(),
                    range: parts[next].clone(),
                };
                let index = next;
                self.gets.fetch_add(1, Ordering::Relaxed);
                tasks.spawn_on(
                    async move {
                        let (slot, result) = get.run(slot).await;
                        (index, slot, result)
                    },
                    runtime,
                );
                next += 1;
            }
            let Some(joined) = tasks.join_next().await else {
                break;
            };
            let outcome = match joined {
                Ok((index, slot, Ok(n))) => {
                    let delivered = if failure.is_none() {
                        deliver(index, &slot[..n])
                    } else {
                        Ok(())
                    };
                    slots.push(slot);
                    delivered
                }
                Ok((_, slot, Err(e))) => {
                    slots.push(slot);
                    Err(e)
                }
                Err(e) if e.is_cancelled() => Ok(()),
                Err(e) => Err(RemoteError::Runtime(format!(
                    "{}: a GET's task failed: {e}",
                    self.url
                ))),
            };
            if let (Err(e), None) = (outcome, &failure) {
                failure = Some(e);
                tasks.abort_all();
            }
        }
        (slots, failure.map_or(Ok(()), Err))
    }
}

/// The widest hole between two ranges of one read that one GET reads through rather than
/// start another: 1 MiB, about what one connection moves in the time a GET's first byte
/// takes to come back from object storage (tens of milliseconds).
const MERGE_GAP: u64 = 1 << 20;

/// One GET of a read: its range, and the parts it fills (a part's index, and where its
/// bytes start in the GET's).
#[derive(Debug, PartialEq, Eq)]
struct Planned {
    range: Range<u64>,
    pieces: Vec<(usize, usize)>,
}

/// The GETs for `parts` (each at most `limit` bytes): parts taken in file order, each joined
/// to the GET before it when it starts at most `gap` bytes after that GET's end (or inside
/// it) and the GET stays within `limit` bytes. Small neighbouring ranges (a checkpoint's
/// small tensors) then cost one GET, not one each.
fn merge(parts: &[Range<u64>], limit: u64, gap: u64) -> Vec<Planned> {
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by_key(|&i| (parts[i].start, parts[i].end));
    let mut gets: Vec<Planned> = Vec::new();
    for i in order {
        let part = &parts[i];
        if let Some(get) = gets.last_mut() {
            let end = get.range.end.max(part.end);
            if part.start <= get.range.end.saturating_add(gap) && end - get.range.start <= limit {
                get.range.end = end;
                get.pieces
                    .push((i, (part.start - get.range.start) as usize));
                continue;
            }
        }
        gets.push(Planned {
            range: part.clone(),
            pieces: vec![(i, 0)],
        });
    }
    gets
}

impl Get {
    /// Runs the GET into `slot`, and gives the slot back with the bytes it holds.
    async fn run<B: DerefMut<Target = [u8]>>(self, mut slot: B) -> (B, Result<usize, RemoteError>) {
        let result = self.fill(&mut slot).await;
        (slot, result)
    }

    fn what(&self) -> String {
        format!("GET bytes {}..{}", self.range.start, self.range.end)
    }

    async fn fill(&self, slot: &mut [u8]) -> Result<usize, RemoteError> {
        let want = (self.range.end - self.range.start) as usize;
        // A weak ETag (`W/"..."`) never matches `If-Match`, whose comparison is strong
        // (RFC 9110 13.1.1): such a server gets no `If-Match`, and only the compare below.
        let options = GetOptions {
            if_match: self.etag.clone().filter(|e| !e.starts_with("W/")),
            range: Some(GetRange::Bounded(self.range.clone())),
            ..GetOptions::default()
        };
        let error = |e| {
            RemoteError::from_store(
                &self.url,
                &self.what(),
                Some(self.range.clone()),
                self.etag.as_deref(),
                e,
            )
        };
        let answer = self
            .store
            .get_opts(&self.path, options)
            .await
            .map_err(error)?;
        if let (Some(pinned), Some(now)) = (&self.etag, &answer.meta.e_tag)
            && pinned != now
        {
            return Err(RemoteError::Changed {
                url: self.url.clone(),
                range: self.range.clone(),
                pinned: pinned.clone(),
                now: now.clone(),
            });
        }
        let short = |got: usize| RemoteError::Short {
            url: self.url.clone(),
            range: self.range.clone(),
            got: got as u64,
        };
        let mut body = answer.into_stream();
        let mut filled = 0;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(error)?;
            let end = filled + chunk.len();
            let Some(place) = slot.get_mut(filled..end).filter(|_| end <= want) else {
                return Err(short(end));
            };
            place.copy_from_slice(&chunk);
            filled = end;
        }
        if filled != want {
            return Err(short(filled));
        }
        Ok(filled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_send<T: Send>(_: &T) {}

    #[test]
    fn neighbouring_parts_share_a_get_within_its_size_and_gap() {
        // Out of file order, one overlapping its neighbour, one past the gap, and one
        // that would make its GET too long.
        let parts = [10..20, 0..4, 3..8, 40..50, 50..70];
        let gets = merge(&parts, 30, 5);
        assert_eq!(
            gets,
            [
                Planned {
                    range: 0..20,
                    pieces: vec![(1, 0), (2, 3), (0, 10)],
                },
                Planned {
                    range: 40..70,
                    pieces: vec![(3, 0), (4, 10)],
                },
            ]
        );
        let apart = merge(&parts, 30, 0);
        assert_eq!(
            apart.iter().map(|g| g.range.clone()).collect::<Vec<_>>(),
            [0..8, 10..20, 40..70]
        );
        // A full-size part is a GET of its own.
        assert_eq!(merge(&[0..30, 30..31], 30, 5).len(), 2);
    }

    /// An asynchronous read can be spawned on a multi-threaded executor (checked when this
    /// compiles; never run).
    #[allow(dead_code)]
    fn an_asynchronous_read_is_send(file: &RemoteFile, dst: DeviceSliceMut<'_>) {
        is_send(&file.read_async(dst, 0));
    }
}
