//! The loader: options, the read window over the driver's engine, and the loaded checkpoint.

use crate::cache;
use crate::error::LoadError;
use crate::glob::Glob;
use crate::header::{Shard, Source};
use crate::inventory::{Inventory, Target};
use crate::plan::{self, ALIGN, Piece};
use crate::report::ProgressFn;
pub use crate::report::{LoadReport, Progress};
use hipfile::{BackendKind, DeviceBuffer, DeviceSlice, Driver, FileHandle, Io};
use safetensors::Dtype;
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Bytes per request for a hot checkpoint unless [`Loader::request_size`] says otherwise:
/// 64 MiB.
///
/// Why: on the GPU machine the engine reached about 1.09 of the hot limit (parallel `pread`)
/// with 64 MiB requests, 8 in flight, and about 1.0 with 1 GiB requests; the whole hot load
/// measured the same with 64 MiB × 8, 256 MiB × 8 and 1 GiB × 4 or × 2 (docs/BENCHMARKS.md).
/// 64 MiB keeps a checkpoint's smaller shards in several requests that can run at once.
pub const DEFAULT_REQUEST_SIZE: u64 = 64 << 20;
/// Requests in flight for a hot checkpoint unless [`Loader::in_flight`] says otherwise: 8,
/// the queue depth at which 64 MiB requests beat the parallel-`pread` limit (see
/// [`DEFAULT_REQUEST_SIZE`]). Every shard's requests share them, interleaved.
pub const DEFAULT_HOT_IN_FLIGHT: usize = 8;
/// Bytes per request for a cold checkpoint unless [`Loader::request_size`] says otherwise:
/// 1 GiB, with [`DEFAULT_COLD_IN_FLIGHT`] in flight. A disk reads long sequential runs
/// best: the fallback cuts a 1 GiB request into one 64 MiB task per I/O thread, each read
/// ahead by the kernel. On the GPU machine the benchmark checkpoint loaded cold at 1.42 GB/s
/// this way against 1.31 and 1.34 with 64 MiB requests, 2 in flight, in the same call, and
/// single 1 GiB reads of a cold file came to 0.98–1.00 of the raw disk.
pub const DEFAULT_COLD_REQUEST_SIZE: u64 = 1 << 30;
/// Requests in flight for a cold checkpoint: 1, in file order, shard after shard (see
/// [`DEFAULT_COLD_REQUEST_SIZE`]); more requests in flight turn one sequential stream into
/// seeks between several.
pub const DEFAULT_COLD_IN_FLIGHT: usize = 1;
/// The largest request (the fallback clamps one request to just under 2 GiB).
pub const MAX_REQUEST_SIZE: u64 = 1 << 30;
/// A checkpoint whose data has less than this share in the page cache is read as cold.
pub const COLD_BELOW: f64 = 0.5;

/// Whether the checkpoint's data is in the page cache, which decides how it is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CacheState {
    /// Ask the kernel (`cachestat(2)`): cold when less than half of the data is cached;
    /// hot where the kernel cannot say.
    #[default]
    Detect,
    /// Read as a cached checkpoint: many requests in flight, every shard at once.
    Hot,
    /// Read as an uncached one: few requests in flight, in file order.
    Cold,
}

/// A shard's device, from its index and path.
type ShardDevice<'a> = Box<dyn Fn(usize, &Path) -> i32 + 'a>;
/// A tensor's device, from its name and its shard's index.
type TensorDevice<'a> = Box<dyn Fn(&str, usize) -> i32 + 'a>;

/// Where tensors go: a device per shard, or per tensor.
enum DeviceFn<'a> {
    Shard(ShardDevice<'a>),
    Tensor(TensorDevice<'a>),
}

/// Loads safetensors checkpoints into device memory: set the options, then
/// [`load`](Loader::load).
pub struct Loader<'a> {
    driver: Driver,
    filter: Option<Glob>,
    device: Option<DeviceFn<'a>>,
    request_size: Option<u64>,
    in_flight: Option<usize>,
    cache: CacheState,
    progress: Option<ProgressFn<'a>>,
}

impl std::fmt::Debug for Loader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loader")
            .field("filter", &self.filter)
            .field("request_size", &self.request_size)
            .field("in_flight", &self.in_flight)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl<'a> Loader<'a> {
    /// A loader with the defaults: every tensor, the calling thread's current device, the
    /// cache state detected, and requests sized for it ([`DEFAULT_REQUEST_SIZE`],
    /// [`DEFAULT_COLD_REQUEST_SIZE`]).
    pub fn new(driver: &Driver) -> Loader<'a> {
        Loader {
            driver: driver.clone(),
            filter: None,
            device: None,
            request_size: None,
            in_flight: None,
            cache: CacheState::Detect,
            progress: None,
        }
    }

    /// Loads only the tensors whose names match `glob` (`*`: any characters, `?`: one).
    pub fn filter(mut self, glob: &str) -> Self {
        self.filter = Some(Glob::new(glob));
        self
    }

    /// Puts every shard on `device`.
    pub fn device(mut self, device: i32) -> Self {
        self.device = Some(DeviceFn::Shard(Box::new(move |_, _| device)));
        self
    }

    /// Puts shard `i` (in the order given to [`load`](Loader::load)) on the device `f(i,
    /// path)` names: several GPUs each take their own shards (`f` is asked once per shard
    /// with a selected tensor).
    pub fn device_per_shard(mut self, f: impl Fn(usize, &Path) -> i32 + 'a) -> Self {
        self.device = Some(DeviceFn::Shard(Box::new(f)));
        self
    }

    /// Puts each tensor on the device `f(name, shard)` names (`shard`: its shard's index in
    /// the order given to [`load`](Loader::load)): a model split over several GPUs by layer,
    /// whatever shard each layer is in. A shard's tensors for one device share one buffer,
    /// read as [`device_per_shard`](Loader::device_per_shard) reads a shard; where a
    /// tensor is, [`Tensor::device`] says.
    pub fn device_per_tensor(mut self, f: impl Fn(&str, usize) -> i32 + 'a) -> Self {
        self.device = Some(DeviceFn::Tensor(Box::new(f)));
        self
    }

    /// Bytes per request: a multiple of 4096 from 4096 to [`MAX_REQUEST_SIZE`]; checked
    /// by [`load`](Loader::load). The default depends on the cache state:
    /// [`DEFAULT_REQUEST_SIZE`], [`DEFAULT_COLD_REQUEST_SIZE`].
    pub fn request_size(mut self, bytes: u64) -> Self {
        self.request_size = Some(bytes);
        self
    }

    /// Requests in flight at once, at least 1 (the default depends on the cache state:
    /// [`DEFAULT_HOT_IN_FLIGHT`], [`DEFAULT_COLD_IN_FLIGHT`]).
    pub fn in_flight(mut self, requests: usize) -> Self {
        self.in_flight = Some(requests);
        self
    }

    /// Says whether the checkpoint is cached instead of asking the kernel.
    pub fn cache_state(mut self, state: CacheState) -> Self {
        self.cache = state;
        self
    }

    /// Calls `f` on the calling thread after each request ends; the last call has `done ==
    /// total`.
    pub fn progress(mut self, f: impl FnMut(Progress) + 'a) -> Self {
        self.progress = Some(Box::new(f));
        self
    }

    /// Loads the tensors of `shards` (the files of one checkpoint) into device memory.
    ///
    /// A path whose name ends in `.json` is read as the checkpoint's index (Hugging Face's
    /// `model.safetensors.index.json`, see [`Index`](crate::Index)) and stands for the shards it names, in
    /// the order of their names, relative to its directory; every tensor it names must be
    /// in the shard it names. Shard numbers ([`Tensor::shard`], `device_per_shard`) count
    /// the shards after that expansion.
    ///
    /// Every shard's header is read and validated before any device memory is allocated:
    /// a bad file, or a tensor name found in two shards, fails the load before it reads any
    /// data. Then each shard gets one device buffer (one per device its tensors go to), and
    /// its data is read in large requests with many in flight at once.
    ///
    /// # Errors
    ///
    /// [`LoadError`], naming the shard (or the index) and the problem: a shard an index
    /// names that cannot be opened is [`LoadError::Io`] naming both. Nothing is returned on
    /// error: what was allocated is freed.
    pub fn load<P: AsRef<Path>>(self, shards: &[P]) -> Result<Checkpoint, LoadError> {
        if shards.is_empty() {
            return Err(LoadError::NoShards);
        }
        self.check_options()?;

        // Every header first: nothing is allocated for a checkpoint with a bad shard. An
        // index stands for the shards it names, and what it says is checked against them.
        let opened = Inventory::open(shards)?.shards;
        self.load_opened(opened)
    }

    /// Loads the selected tensors of `opened`, whose headers are valid: plans, allocates,
    /// reads, and places each tensor.
    pub(crate) fn load_opened(mut self, opened: Vec<Shard>) -> Result<Checkpoint, LoadError> {
        // The plan: each shard's selected tensors by device (a part each), extents,
        // requests.
        let mut parts: Vec<Part> = Vec::new();
        for (i, s) in opened.iter().enumerate() {
            let first = parts.len();
            let mut shard_device = None;
            for (t, tensor) in s.tensors.iter().enumerate() {
                if self
                    .filter
                    .as_ref()
                    .is_some_and(|g| !g.matches(&tensor.name))
                {
                    continue;
                }
                let device = match &self.device {
                    None => None,
                    Some(DeviceFn::Shard(f)) => {
                        Some(*shard_device.get_or_insert_with(|| f(i, &s.path)))
                    }
                    Some(DeviceFn::Tensor(f)) => Some(f(&tensor.name, i)),
                };
                match parts[first..].iter_mut().find(|p| p.device == device) {
                    Some(part) => part.selected.push(t),
                    None => parts.push(Part {
                        shard: i,
                        device,
                        selected: vec![t],
                        extents: Vec::new(),
                        len: 0,
                    }),
                }
            }
            for part in &mut parts[first..] {
                (part.extents, part.len) = plan::extents(
                    part.selected
                        .iter()
                        .map(|&t| (s.tensors[t].start, s.tensors[t].end)),
                );
            }
        }
        let extents: Vec<(usize, &[plan::Extent])> = parts
            .iter()
            .map(|p| (p.shard, p.extents.as_slice()))
            .collect();
        let lens: Vec<u64> = parts.iter().map(|p| p.len).collect();
        let (cold, request, depth) = self.read_plan(&opened, &extents, &lens);
        let mut buffers = std::thread::scope(|scope| {
            let pinning = self
                .staged(&lens, request)
                .then(|| scope.spawn(|| self.driver.tuning().prepare_staging(request)));
            let made = allocate_parts(&self.driver, &opened, &parts);
            // Its failure is left for the requests to report.
            drop(pinning.map(std::thread::ScopedJoinHandle::join));
            made
        })?;
        let mut each: Vec<&mut DeviceBuffer> = buffers.iter_mut().collect();
        let tally = self.read_extents(&opened, &extents, &mut each, cold, request, depth)?;

        // The checkpoint: each selected tensor's place in its part's buffer, shard by shard
        // in file order.
        let mut placed: Vec<(usize, usize, usize)> = parts
            .iter()
            .enumerate()
            .flat_map(|(i, p)| p.selected.iter().map(move |&t| (p.shard, t, i)))
            .collect();
        placed.sort_unstable();
        let mut tensors = Vec::with_capacity(placed.len());
        let mut index = HashMap::new();
        for (shard, t, part) in placed {
            let e = &opened[shard].tensors[t];
            let offset = parts[part]
                .extents
                .iter()
                .find(|x| x.file_start <= e.start && e.end <= x.need_end)
                .map_or(0, |x| x.buffer_offset(e.start));
            index.insert(e.name.clone(), tensors.len());
            tensors.push(Entry {
                name: e.name.clone(),
                dtype: e.info.dtype,
                shape: e.info.shape.clone(),
                shard,
                part,
                buffer_offset: offset as usize,
                len: (e.end - e.start) as usize,
                file_offset: e.start,
            });
        }
        Ok(Checkpoint {
            shards: opened.into_iter().map(|s| s.path).collect(),
            parts: parts
                .into_iter()
                .zip(buffers)
                .map(|(p, buffer)| LoadedPart {
                    shard: p.shard,
                    buffer,
                    device: p.device,
                })
                .collect(),
            tensors,
            index,
            report: tally,
        })
    }

    /// Reads each target's bytes into its buffer, with the same requests, window and
    /// cold-or-hot choice as [`Loader::load`]; the loader's filter and devices do not apply
    /// (the targets say what to read, and their memory where). For a framework that
    /// allocates its own tensors: open the checkpoint's [`Inventory`], allocate, make a
    /// [`Target`] per tensor (or per range of one), then read. Targets may be host memory
    /// where the driver's rule serves it ([`hipfile::MemoryTypes::CuFile`]).
    ///
    /// # Errors
    ///
    /// [`LoadError`] naming the shard, as [`Loader::load`]: what the targets hold is then
    /// unspecified.
    pub fn read_into(
        mut self,
        inventory: &Inventory,
        targets: &mut [Target],
    ) -> Result<LoadReport, LoadError> {
        self.check_options()?;
        let extents: Vec<[plan::Extent; 1]> = targets
            .iter()
            .map(|t| {
                [plan::Extent {
                    file_start: t.bytes.start,
                    need_end: t.bytes.end,
                    file_end: t.bytes.end,
                    buf_start: 0,
                }]
            })
            .collect();
        let extents: Vec<(usize, &[plan::Extent])> = targets
            .iter()
            .zip(&extents)
            .map(|(t, e)| (t.shard, e.as_slice()))
            .collect();
        let lens: Vec<u64> = targets
            .iter()
            .map(|t| t.bytes.end - t.bytes.start)
            .collect();
        let (cold, request, depth) = self.read_plan(&inventory.shards, &extents, &lens);
        if self.staged(&lens, request) {
            // Its failure is left for the requests to report.
            let _ = self.driver.tuning().prepare_staging(request);
        }
        let mut buffers: Vec<&mut DeviceBuffer> =
            targets.iter_mut().map(|t| &mut t.buffer).collect();
        self.read_extents(
            &inventory.shards,
            &extents,
            &mut buffers,
            cold,
            request,
            depth,
        )
    }

    /// The driver the loader reads with.
    #[cfg(feature = "remote")]
    pub(crate) fn driver(&self) -> &Driver {
        &self.driver
    }

    fn check_options(&self) -> Result<(), LoadError> {
        if let Some(request) = self.request_size
            && (!(ALIGN..=MAX_REQUEST_SIZE).contains(&request) || !request.is_multiple_of(ALIGN))
        {
            return Err(LoadError::Option(format!(
                "the request size must be a multiple of {ALIGN} from {ALIGN} to {MAX_REQUEST_SIZE}, not {request}"
            )));
        }
        if self.in_flight == Some(0) {
            return Err(LoadError::Option(
                "at least one request must be in flight".into(),
            ));
        }
        Ok(())
    }

    /// Whether the bytes of `extents` (by shard) are read as cold, and the request size and
    /// requests in flight that follow.
    fn read_plan(
        &self,
        shards: &[Shard],
        extents: &[(usize, &[plan::Extent])],
        lens: &[u64],
    ) -> (bool, u64, usize) {
        let total: u64 = lens.iter().sum();
        let cold = match self.cache {
            CacheState::Hot => false,
            CacheState::Cold => true,
            CacheState::Detect => {
                let mut cached = Some(0u64);
                for (shard, ext) in extents {
                    for e in *ext {
                        let c = match &shards[*shard].source {
                            Source::File(file) => {
                                cache::cached_bytes(file, e.file_start, e.need_end - e.file_start)
                            }
                            // An object is neither hot nor cold to the page cache.
                            #[cfg(feature = "remote")]
                            Source::Remote(_) => None,
                        };
                        cached = cached.zip(c).map(|(a, b)| a + b);
                    }
                }
                cached.is_some_and(|c| crate::cache::mostly_uncached(c, total))
            }
        };
        let depth = self.in_flight.unwrap_or(if cold {
            DEFAULT_COLD_IN_FLIGHT
        } else {
            DEFAULT_HOT_IN_FLIGHT
        });
        let request = self.request_size.unwrap_or(if cold {
            DEFAULT_COLD_REQUEST_SIZE
        } else {
            DEFAULT_REQUEST_SIZE
        });
        (cold, request, depth)
    }

    /// Whether every request goes through the fallback's staging buffers (no AMD file I/O,
    /// or the fallback forced) and some is large enough to be spread over the I/O threads:
    /// then their buffers are best pinned before the first request.
    fn staged(&self, lens: &[u64], request: u64) -> bool {
        let config = self.driver.config();
        (!self.driver.runtime().amd_file_io || config.force_compat_mode)
            && lens
                .iter()
                .any(|&len| len.min(request) > config.fallback_knobs().small_io_threshold)
    }

    /// Registers the shards, then reads `extents` (part by part: its shard and its extents)
    /// into `buffers` (one per part), `depth` requests of at most `request` bytes in flight.
    fn read_extents(
        &mut self,
        shards: &[Shard],
        extents: &[(usize, &[plan::Extent])],
        buffers: &mut [&mut DeviceBuffer],
        cold: bool,
        request: u64,
        depth: usize,
    ) -> Result<LoadReport, LoadError> {
        let gpu = |path: &Path, what: String| {
            let path = path.to_path_buf();
            move |source| LoadError::Gpu {
                path,
                what,
                source: Box::new(source),
            }
        };
        let started = Instant::now();
        #[cfg(feature = "remote")]
        if shards.iter().any(|s| matches!(s.source, Source::Remote(_))) {
            let mut report =
                crate::fetch::read_extents(shards, extents, buffers, self.progress.as_mut())?;
            report.read_time = started.elapsed();
            return Ok(report);
        }
        // Only the shards something is read from: a tensor read alone registers one file.
        // Each read registers a descriptor of its own, a duplicate of the shard's, which it
        // holds open until its handle is gone (declared first, dropped last): the registry
        // refuses a descriptor registered twice, and two reads of one inventory may run at
        // once (a reader's threads each reading tensors).
        let mut duplicates: Vec<std::fs::File> = Vec::with_capacity(shards.len());
        let mut handles: Vec<Option<FileHandle>> = Vec::with_capacity(shards.len());
        for (i, s) in shards.iter().enumerate() {
            let used = extents
                .iter()
                .any(|(shard, ext)| *shard == i && !ext.is_empty());
            // Without the `remote` feature, `Source` has one variant.
            #[allow(clippy::infallible_destructuring_match)]
            let file = match &s.source {
                Source::File(file) => file,
                #[cfg(feature = "remote")]
                Source::Remote(_) => {
                    return Err(LoadError::Option(
                        "a checkpoint's shards are all local files or all URLs".into(),
                    ));
                }
            };
            handles.push(if used {
                let own = file.try_clone().map_err(|source| LoadError::Io {
                    path: s.path.clone(),
                    what: "cannot duplicate its descriptor".into(),
                    source,
                })?;
                let handle = self
                    .driver
                    .register_file(&own)
                    .map_err(gpu(&s.path, "cannot register the file for GPU I/O".into()))?;
                duplicates.push(own);
                Some(handle)
            } else {
                None
            });
        }
        let total: u64 = extents
            .iter()
            .flat_map(|(_, ext)| ext.iter().map(|e| e.need_end - e.file_start))
            .sum();
        let per_part = extents
            .iter()
            .enumerate()
            .map(|(i, (shard, ext))| plan::pieces(i, *shard, ext, request))
            .collect();
        let pieces = plan::order(per_part, !cold);
        let mut tally = Tally {
            done: 0,
            total,
            fastpath: 0,
            fallback: 0,
            requests: 0,
            progress: self.progress.as_mut(),
        };
        let short = run_window(
            shards,
            &handles,
            buffers,
            &pieces,
            (depth, request),
            &mut tally,
        )?;
        // Requests that came back short (never expected before the end of the data): the
        // rest, one synchronous request at a time.
        for (p, mut got) in short {
            let path = &shards[p.shard].path;
            let buffer = &mut buffers[p.part];
            while got < p.need {
                let at = (p.buf_start + got) as usize..(p.buf_start + p.need) as usize;
                let mut view = buffer.slice_mut(at).map_err(|source| LoadError::Gpu {
                    path: path.clone(),
                    what: "cannot make a view of the part's buffer".into(),
                    source: Box::new(source),
                })?;
                let outcome = registered(&handles, shards, p.shard)?
                    .read_at(&mut view, p.file_offset + got)
                    .map_err(|source| {
                        read_failed(path, p.file_offset + got, p.need - got, source)
                    })?;
                if outcome.bytes == 0 {
                    return Err(LoadError::Short {
                        path: path.clone(),
                        at: p.file_offset + got,
                        expected: p.file_offset + p.need,
                    });
                }
                got += outcome.bytes;
                tally.add(outcome.backend, outcome.bytes);
            }
        }
        drop(handles);
        drop(duplicates);
        Ok(LoadReport {
            bytes_read: tally.done,
            fastpath_bytes: tally.fastpath,
            fallback_bytes: tally.fallback,
            remote_bytes: 0,
            requests: tally.requests,
            cold,
            request_size: request,
            in_flight: depth,
            read_time: started.elapsed(),
        })
    }
}

/// One device buffer per part, on the part's device.
fn allocate_parts(
    driver: &Driver,
    shards: &[Shard],
    parts: &[Part],
) -> Result<Vec<DeviceBuffer>, LoadError> {
    let mut buffers = Vec::with_capacity(parts.len());
    for part in parts {
        let path = &shards[part.shard].path;
        // A part of empty tensors still gets memory for their views to point into.
        let bytes = usize::try_from(part.len.max(ALIGN)).map_err(|_| LoadError::Invalid {
            path: path.clone(),
            why: format!(
                "{} bytes do not fit in this machine's address space",
                part.len
            ),
        })?;
        let where_ = part.device.map_or_else(
            || "the current device".to_owned(),
            |d| format!("device {d}"),
        );
        let buffer = match part.device {
            Some(d) => driver.alloc_on(d, bytes),
            None => driver.alloc(bytes),
        }
        .map_err(|source| LoadError::Gpu {
            path: path.clone(),
            what: format!("cannot allocate {bytes} bytes on {where_}"),
            source: Box::new(source),
        })?;
        buffers.push(buffer);
    }
    Ok(buffers)
}

/// The handle of shard `shard`, registered because a request reads from it.
fn registered<'h>(
    handles: &'h [Option<FileHandle>],
    shards: &[Shard],
    shard: usize,
) -> Result<&'h FileHandle, LoadError> {
    handles
        .get(shard)
        .and_then(Option::as_ref)
        .ok_or_else(|| LoadError::Gpu {
            path: shards
                .get(shard)
                .map(|s| s.path.clone())
                .unwrap_or_default(),
            what: "reading from a shard that was not registered".into(),
            source: Box::new(hipfile::Error::InvalidValue {
                op: None,
                what: "the loader's plan and its registrations disagree".into(),
            }),
        })
}

fn read_failed(path: &Path, offset: u64, len: u64, source: hipfile::Error) -> LoadError {
    LoadError::Gpu {
        path: path.to_path_buf(),
        what: format!("reading bytes {offset}..{} failed", offset + len),
        source: Box::new(source),
    }
}

struct Tally<'p, 'a> {
    done: u64,
    total: u64,
    fastpath: u64,
    fallback: u64,
    requests: usize,
    progress: Option<&'p mut ProgressFn<'a>>,
}

impl Tally<'_, '_> {
    fn add(&mut self, backend: BackendKind, bytes: u64) {
        self.requests += 1;
        if backend == BackendKind::Fastpath {
            self.fastpath += bytes;
        } else {
            self.fallback += bytes;
        }
    }

    fn progress(&mut self, bytes: u64) {
        self.done += bytes;
        if let Some(f) = self.progress.as_mut() {
            f(Progress {
                done: self.done,
                total: self.total,
            });
        }
    }
}

/// Makes the requests of `pieces`, a window of `depth` requests (or of their bytes at
/// `request` each: [`plan::admits`]) at a time, oldest waited for first; returns the requests
/// that came back short of what they need, with what they got.
fn run_window(
    shards: &[Shard],
    handles: &[Option<FileHandle>],
    buffers: &mut [&mut DeviceBuffer],
    pieces: &[Piece],
    (depth, request): (usize, u64),
    tally: &mut Tally<'_, '_>,
) -> Result<Vec<(Piece, u64)>, LoadError> {
    // One view per request, cut from each part's buffer: the pieces of a part tile it.
    let mut views: Vec<Option<hipfile::DeviceSliceMut<'_>>> = Vec::new();
    views.resize_with(pieces.len(), || None);
    for (part, buffer) in buffers.iter_mut().enumerate() {
        let mut mine: Vec<usize> = (0..pieces.len())
            .filter(|&i| pieces[i].part == part)
            .collect();
        let Some(&first) = mine.first() else {
            continue;
        };
        let gpu = |source| LoadError::Gpu {
            path: shards[pieces[first].shard].path.clone(),
            what: "cannot make a view of the part's buffer".into(),
            source: Box::new(source),
        };
        mine.sort_by_key(|&i| pieces[i].buf_start);
        let spans = mine.iter().map(|&i| (pieces[i].buf_start, pieces[i].len));
        for (i, view) in mine
            .iter()
            .zip(crate::views::cut(buffer, spans).map_err(gpu)?)
        {
            views[*i] = Some(view);
        }
    }

    let mut short = Vec::new();
    let mut queue: VecDeque<(usize, Io<'_>)> = VecDeque::with_capacity(depth);
    let mut in_flight = 0u64;
    let mut next = 0;
    loop {
        while plan::admits(queue.len(), in_flight, depth, request) && next < pieces.len() {
            let p = &pieces[next];
            if let Some(view) = views[next].take() {
                let handle = registered(handles, shards, p.shard)?;
                queue.push_back((next, handle.read_at_async(view, p.file_offset)));
                in_flight += p.len;
            }
            next += 1;
        }
        let Some((i, io)) = queue.pop_front() else {
            return Ok(short);
        };
        let p = pieces[i];
        in_flight -= p.len;
        // On an error the requests still queued are cancelled or waited for as they drop.
        let outcome = io
            .wait()
            .map_err(|source| read_failed(&shards[p.shard].path, p.file_offset, p.len, source))?;
        let got = outcome.bytes.min(p.need);
        tally.add(outcome.backend, outcome.bytes);
        if got < p.need {
            if outcome.bytes == 0 {
                return Err(LoadError::Short {
                    path: shards[p.shard].path.clone(),
                    at: p.file_offset,
                    expected: p.file_offset + p.need,
                });
            }
            short.push((p, got));
        }
        tally.progress(got);
    }
}

/// The tensors of one shard bound for one device, read into one buffer.
struct Part {
    shard: usize,
    device: Option<i32>,
    /// Indices into the shard's tensors, in file order.
    selected: Vec<usize>,
    extents: Vec<plan::Extent>,
    /// The buffer length the extents need.
    len: u64,
}

/// One tensor of a loaded checkpoint.
#[derive(Debug)]
struct Entry {
    name: String,
    dtype: Dtype,
    shape: Vec<usize>,
    shard: usize,
    /// The part whose buffer holds it.
    part: usize,
    buffer_offset: usize,
    len: usize,
    file_offset: u64,
}

/// A part's buffer, on its device (`None`: the loading thread's current device).
#[derive(Debug)]
struct LoadedPart {
    shard: usize,
    buffer: DeviceBuffer,
    device: Option<i32>,
}

/// A checkpoint in device memory: one buffer per shard (per shard and device with
/// [`Loader::device_per_tensor`]), and every loaded tensor's name, dtype, shape and place.
/// Dropping it frees the memory.
#[derive(Debug)]
pub struct Checkpoint {
    shards: Vec<PathBuf>,
    parts: Vec<LoadedPart>,
    tensors: Vec<Entry>,
    index: HashMap<String, usize>,
    report: LoadReport,
}

/// A loaded tensor: its description and a view of its bytes in device memory.
#[derive(Debug, Clone, Copy)]
pub struct Tensor<'c> {
    entry: &'c Entry,
    path: &'c Path,
    device: Option<i32>,
    view: DeviceSlice<'c>,
}

impl<'c> Tensor<'c> {
    /// The tensor's name.
    pub fn name(&self) -> &'c str {
        &self.entry.name
    }

    /// Its element type.
    pub fn dtype(&self) -> Dtype {
        self.entry.dtype
    }

    /// Its shape.
    pub fn shape(&self) -> &'c [usize] {
        &self.entry.shape
    }

    /// Its bytes in device memory (empty for a tensor of no elements).
    pub fn view(&self) -> DeviceSlice<'c> {
        self.view
    }

    /// Its size in bytes.
    pub fn byte_len(&self) -> usize {
        self.entry.len
    }

    /// The shard it came from, as given to [`Loader::load`].
    pub fn shard_path(&self) -> &'c Path {
        self.path
    }

    /// The index of that shard in the list given to [`Loader::load`].
    pub fn shard(&self) -> usize {
        self.entry.shard
    }

    /// The file offset of its first byte in that shard.
    pub fn file_offset(&self) -> u64 {
        self.entry.file_offset
    }

    /// The device it was put on (`None`: the loading thread's current device, no device
    /// having been set).
    pub fn device(&self) -> Option<i32> {
        self.device
    }
}

impl Checkpoint {
    fn tensor<'c>(&'c self, entry: &'c Entry) -> Option<Tensor<'c>> {
        let part = self.parts.get(entry.part)?;
        let view = part
            .buffer
            .slice(entry.buffer_offset..entry.buffer_offset + entry.len)
            .ok()?;
        Some(Tensor {
            entry,
            path: self.shards.get(entry.shard)?,
            device: part.device,
            view,
        })
    }

    /// The tensor called `name`, if it was loaded.
    pub fn get(&self, name: &str) -> Option<Tensor<'_>> {
        self.tensor(self.tensors.get(*self.index.get(name)?)?)
    }

    /// Every loaded tensor: shard by shard in the order given, each shard's in file order.
    pub fn iter(&self) -> impl Iterator<Item = Tensor<'_>> + '_ {
        self.tensors.iter().filter_map(|e| self.tensor(e))
    }

    /// How many tensors were loaded.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether no tensor was loaded (a filter matched none).
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// The loaded tensors' bytes, all together.
    pub fn tensor_bytes(&self) -> u64 {
        self.tensors.iter().map(|e| e.len as u64).sum()
    }

    /// The shards, in the order given.
    pub fn shard_paths(&self) -> impl Iterator<Item = &Path> + '_ {
        self.shards.iter().map(PathBuf::as_path)
    }

    /// The device shard `i` was put on: `None` for the current device of the loading
    /// thread, a shard none of whose tensors was selected, or one whose tensors went to
    /// several devices ([`Loader::device_per_tensor`]; [`Tensor::device`] says then).
    pub fn shard_device(&self, i: usize) -> Option<i32> {
        match self.shard_parts(i) {
            [only] => only.device,
            _ => None,
        }
    }

    /// The device buffer of shard `i`, if any of its tensors was loaded, all on one device.
    pub fn shard_buffer(&self, i: usize) -> Option<&DeviceBuffer> {
        match self.shard_parts(i) {
            [only] => Some(&only.buffer),
            _ => None,
        }
    }

    /// Every device buffer: its shard's index, its device (as [`Tensor::device`]) and the
    /// buffer, shard by shard.
    pub fn buffers(&self) -> impl Iterator<Item = (usize, Option<i32>, &DeviceBuffer)> + '_ {
        self.parts.iter().map(|p| (p.shard, p.device, &p.buffer))
    }

    /// The parts of shard `i` (parts are made shard by shard).
    fn shard_parts(&self, i: usize) -> &[LoadedPart] {
        let start = self.parts.partition_point(|p| p.shard < i);
        let end = self.parts.partition_point(|p| p.shard <= i);
        &self.parts[start..end]
    }

    /// How the load went.
    pub fn report(&self) -> &LoadReport {
        &self.report
    }
}
