//! The driver: one configuration, one runtime, the two backends, the registries and the
//! counters. Handles keep it alive; it closes when the last one goes.
//!
//! Its state is private. The methods that hand out files and buffers (`register_file` in
//! `file.rs`; `alloc`, `alloc_pinned`, `alloc_on`, `register_buffer` and `deregister_buffer` in
//! `buffer.rs`) live beside the types they make, so this module names neither, and they reach
//! the driver only through the `pub(crate)` methods here.

use crate::engine::gates::Gates;
use crate::engine::null_stream::{NullStreams, OrderPoint};
use crate::engine::{Engine, Slot};
use crate::stats::publish::Publisher;
use crate::stats::{DeviceStats, Registration, Served, Stats, StatsSnapshot};
use hipfile_core::{
    Backend, CheckedBuffer, Config, ConfigBuilder, DevicePtr, Error, GpuRuntime, Op,
};
use hipfile_fallback::{Fallback, StagingConfig};
use hipfile_fastpath::Fastpath;
use hipfile_runtime::{NoDevice, RuntimeReport, load_runtime};
use std::collections::{BTreeMap, HashSet};
use std::mem::ManuallyDrop;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::Duration;

/// An open hipfile driver. Cheap to clone (a reference count); every clone, file handle and
/// owned buffer keeps the driver open, and it closes when the last of them is dropped.
///
/// Which runtime it loads comes from the configuration: without a GPU, name the emulated
/// runtime (`cargo xtask emulated` builds it and prints its path) with `HIPFILE_HIP_LIBRARY`,
/// or in code with [`ConfigBuilder::hip_library`]. hipfile never picks it on its own.
///
/// ```
/// # fn main() -> Result<(), hipfile::Error> {
/// # // Runs only with a runtime named (as `cargo xtask ci` does); compiles in any case.
/// # let Some(lib) = std::env::var_os("HIPFILE_HIP_LIBRARY") else { return Ok(()) };
/// use hipfile::{ConfigBuilder, Driver};
/// // `lib`: the path of libhipfile_emu.so, or of a HIP runtime.
/// let driver = Driver::open_with(ConfigBuilder::new().hip_library(lib))?;
/// println!("{:?}, {} device(s)", driver.runtime().platform, driver.device_count()?);
/// let again = Driver::open()?; // the same process-wide driver while one is open
/// assert!(again.same_as(&driver));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Driver {
    inner: Arc<Inner>,
}

/// A driver's state, with the process that opened it: in a copy of that process made by
/// `fork()`, whose threads and GPU state did not come along, it serves nothing and is never
/// torn down (tearing down would join threads that are not there).
struct Inner {
    pid: u32,
    parts: ManuallyDrop<Parts>,
}

impl std::ops::Deref for Inner {
    type Target = Parts;

    fn deref(&self) -> &Parts {
        &self.parts
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.pid == hipfile_core::process::id() {
            // SAFETY: `parts` is dropped once, here, and `self` is not used afterwards.
            #[allow(unsafe_code)]
            unsafe {
                ManuallyDrop::drop(&mut self.parts);
            }
        }
        // Otherwise this process is a copy made by fork(): the engine's and the fallback's
        // threads are not in it (joining them would wait for ever), and the runtime's
        // streams, events and memory are the parent's to release. All of it is left.
    }
}

struct Parts {
    config: Config,
    runtime: Arc<dyn GpuRuntime>,
    report: RuntimeReport,
    fastpath: Fastpath,
    fallback: Fallback,
    files: Mutex<HashSet<i32>>,
    buffers: RwLock<BTreeMap<u64, Arc<RegisteredBuffer>>>,
    stats: Arc<Stats>,
    /// Publishes the counters for `hipfile stats PID` while the driver is open (level ≥ 1,
    /// and only the first such driver of the process).
    publisher: Option<Publisher>,
    /// Serves the requests that do not block their caller.
    engine: Engine,
    /// The words streams wait on for stream-ordered requests.
    gates: Gates,
    /// How requests wait for the caller's work on the null streams.
    null_streams: NullStreams,
}

struct RegisteredBuffer {
    /// The identity of the [`DeviceBuffer`](crate::DeviceBuffer) that was registered: another
    /// buffer at the same address (a view made with `from_raw`, or a later allocation) is not
    /// it.
    owner: u64,
    facts: CheckedBuffer,
    in_flight: AtomicUsize,
}

/// The process-wide driver that [`Driver::open`] and implicit opens share.
static GLOBAL: Mutex<Weak<Inner>> = Mutex::new(Weak::new());

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("config", &self.inner.config)
            .field("runtime", &self.inner.report)
            .finish_non_exhaustive()
    }
}

impl Driver {
    /// Opens the process-wide driver, or returns another handle to it if it is open. The
    /// configuration comes from the environment, read now (docs/BEHAVIOUR.md §2).
    ///
    /// # Errors
    ///
    /// [`Error::DriverOpen`] when no GPU runtime can be loaded (the message lists what was
    /// tried), or when the runtime sees no GPU device: its source is then a [`NoDevice`]
    /// (`hipfile::NoDevice`), whose message names the runtime, what it answered and what
    /// to do (on a machine without a GPU, the emulated runtime). Nothing can be allocated
    /// or read into without a device, so the open fails rather than the first allocation.
    pub fn open() -> Result<Driver, Error> {
        Driver::open_global(None, true)
    }

    /// Opens the process-wide driver with programmatic settings, which win over the
    /// environment.
    ///
    /// # Errors
    ///
    /// [`Error::DriverAlreadyOpen`] when it is already open with a different configuration;
    /// otherwise as [`Driver::open`] (a runtime without a device included).
    pub fn open_with(settings: ConfigBuilder) -> Result<Driver, Error> {
        Driver::open_global(Some(settings.build_from_env()), true)
    }

    /// Opens the process-wide driver as [`open_with`](Driver::open_with) does, also when the
    /// runtime sees no device, as hipFile's C `hipFileDriverOpen` does (the C libraries open
    /// their driver this way): every allocation and every request on device memory then
    /// fails, and [`Driver::runtime`] says why. For programs that must hold a driver
    /// whatever the machine (to report on it, or to serve host memory with
    /// [`MemoryTypes::CuFile`](hipfile_core::MemoryTypes)).
    ///
    /// # Errors
    ///
    /// As [`Driver::open_with`], but never for a missing device.
    pub fn open_allowing_no_device(settings: ConfigBuilder) -> Result<Driver, Error> {
        Driver::open_global(Some(settings.build_from_env()), false)
    }

    /// Opens the process-wide driver with `config` (the environment's when `None`), or
    /// shares the open one (which must have that configuration when one is given); a new
    /// one only with a device when `need_device`.
    fn open_global(config: Option<Config>, need_device: bool) -> Result<Driver, Error> {
        let mut global = lock(&GLOBAL);
        // One opened by the process this one was forked from is not this process's.
        if let Some(inner) = global
            .upgrade()
            .filter(|i| i.pid == hipfile_core::process::id())
        {
            return match config {
                Some(c) if c != inner.config => Err(Error::DriverAlreadyOpen),
                _ => Ok(Driver { inner }),
            };
        }
        let config = config.unwrap_or_else(Config::from_env);
        let (runtime, report) = load_runtime(&config)?;
        if need_device && report.devices == 0 {
            return Err(Error::DriverOpen(Box::new(NoDevice::new(report))));
        }
        let driver = Driver::with_runtime(config, runtime, report);
        *global = Arc::downgrade(&driver.inner);
        Ok(driver)
    }

    /// Opens a driver of its own (not the process-wide one) with `config`, loading the
    /// runtime it names. It opens whatever the runtime sees, no device included (as
    /// [`open_allowing_no_device`](Driver::open_allowing_no_device) does): look at
    /// [`Driver::runtime`]'s `devices` before allocating.
    ///
    /// # Errors
    ///
    /// [`Error::DriverOpen`] when no GPU runtime can be loaded.
    pub fn open_private(config: Config) -> Result<Driver, Error> {
        let (runtime, report) = load_runtime(&config)?;
        Ok(Driver::with_runtime(config, runtime, report))
    }

    /// A driver over a runtime the caller supplies (a test double, or a runtime loaded by
    /// other means).
    pub fn with_runtime(
        config: Config,
        runtime: Arc<dyn GpuRuntime>,
        report: RuntimeReport,
    ) -> Driver {
        if config.leaves_no_backend() {
            hipfile_core::config::warn_once(&hipfile_core::ConfigWarning::NoBackend);
        }
        let fastpath = Fastpath::with_runtime(&config, Arc::clone(&runtime));
        let fallback = Fallback::with_runtime(
            &config,
            Arc::clone(&runtime),
            StagingConfig::for_knobs(&config.fallback_knobs()),
        );
        // As many threads as I/O threads; as many requests served at once, at most 8,
        // unless set: more served small requests more slowly on the GPU machine, while the
        // staged stream-ordered path's file I/O wants every thread
        // (docs/decisions/one-engine.md).
        let requests = config.request_thread_count();
        let engine = Engine::new(config.fallback_knobs().io_threads.max(requests), requests);
        let gates = Gates::new(Arc::clone(&runtime));
        let null_streams = NullStreams::new(Arc::clone(&runtime));
        let stats = Arc::new(Stats::new(config.stats_level));
        let publisher = Publisher::start(&stats);
        Driver {
            inner: Arc::new(Inner {
                pid: hipfile_core::process::id(),
                parts: ManuallyDrop::new(Parts {
                    config,
                    runtime,
                    report,
                    fastpath,
                    fallback,
                    files: Mutex::new(HashSet::new()),
                    buffers: RwLock::new(BTreeMap::new()),
                    stats,
                    publisher,
                    engine,
                    gates,
                    null_streams,
                }),
            }),
        }
    }

    /// Whether this driver may serve this process: it was opened here, not in a process
    /// this one was forked from.
    ///
    /// # Errors
    ///
    /// [`Error::Forked`] in a process made by `fork()` from the one that opened it.
    pub(crate) fn in_this_process(&self) -> Result<(), Error> {
        let this = hipfile_core::process::id();
        if self.inner.pid == this {
            Ok(())
        } else {
            Err(Error::Forked {
                opened_by: self.inner.pid,
                this,
            })
        }
    }

    /// Whether this is the only handle keeping the driver open: no clone, file handle,
    /// buffer, batch or request holds it. A caller that owns the only handle can close the
    /// driver and open another with other settings without pulling it from under anyone.
    pub fn is_only_handle(&self) -> bool {
        Arc::strong_count(&self.inner) == 1
    }

    /// Whether `self` and `other` are handles to the same driver.
    pub fn same_as(&self, other: &Driver) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The settled configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// What the runtime is.
    pub fn runtime(&self) -> &RuntimeReport {
        &self.inner.report
    }

    /// The runtime as the backends see it.
    pub(crate) fn gpu(&self) -> &Arc<dyn GpuRuntime> {
        &self.inner.runtime
    }

    /// What follows the fallback's and the runtime layer's internals rather than the stable
    /// API: the staging buffers' size and their allocation ahead of time, and the runtime
    /// itself ([`Tuning`]).
    pub fn tuning(&self) -> Tuning<'_> {
        Tuning(self)
    }

    /// The counters, when `HIPFILE_STATS_LEVEL` ≥ 1; `None` otherwise. What each level
    /// adds: [`StatsSnapshot`].
    pub fn stats(&self) -> Option<StatsSnapshot> {
        (self.inner.stats.level() >= 1).then(|| self.inner.stats.snapshot())
    }

    /// Publishes the counters for other processes (`hipfile stats PID`) now, rather than at
    /// the publisher's next round; `Ok(false)` when this driver does not publish (level 0,
    /// or another driver of the process publishes).
    ///
    /// # Errors
    ///
    /// The failure to write the channel (docs/decisions/statistics.md).
    pub fn publish_stats(&self) -> std::io::Result<bool> {
        match &self.inner.publisher {
            Some(p) => p.publish_now().map(|()| true),
            None => Ok(false),
        }
    }

    /// Stops counting (`false`): requests and registrations from now on are not counted,
    /// and [`Driver::stats`] keeps answering with the figures so far; `true` counts again.
    /// Counting runs from the open at every level above 0 (cuFile's `cuFileStatsStop` and
    /// `cuFileStatsStart`); at level 0 nothing is counted either way.
    pub fn set_stats_counting(&self, on: bool) {
        self.inner.stats.set_counting(on);
    }

    /// Sets every counter to 0 (cuFile's `cuFileStatsReset`); counting goes on as it was.
    pub fn reset_stats(&self) {
        self.inner.stats.reset();
    }

    /// The counters of each device whose buffers were served, by device number, when
    /// `HIPFILE_STATS_LEVEL` ≥ 1; `None` otherwise.
    pub fn device_stats(&self) -> Option<Vec<DeviceStats>> {
        (self.inner.stats.level() >= 1).then(|| self.inner.stats.devices())
    }

    /// The number of devices the runtime sees.
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`].
    pub fn device_count(&self) -> Result<i32, Error> {
        self.gpu().device_count().map_err(Error::Runtime)
    }

    /// The size in bytes of `device`'s BAR1, where the runtime can tell it: the PCIe window
    /// through which the CPU and other devices (an NVMe drive, a NIC) reach the device's
    /// memory, which bounds how much of it can be mapped for them at once (what cuFile's
    /// `cuFileGetBARSizeInKB` reports). On NVIDIA GPUs it comes from NVIDIA's NVML
    /// (`libnvidia-ml.so.1`, installed with the driver), loaded on the first call, which
    /// finds the device by its PCI bus id; AMD's HIP runtime has no way to tell it
    /// (docs/decisions/cufile-abi.md).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidValue`] for a device the runtime does not have (or when it sees
    /// none); [`Error::Runtime`] where the size cannot be told, with
    /// [`RuntimeError::is_unsupported`](hipfile_core::RuntimeError::is_unsupported) and the
    /// reason in its message (no NVML, a device that does not report it, a HIP runtime), or
    /// when the runtime fails.
    pub fn bar1_size(&self, device: i32) -> Result<u64, Error> {
        let invalid = |why: String| Error::InvalidValue {
            op: None,
            what: format!("device {device}: {why}"),
        };
        let count = self
            .device_count()
            .map_err(|e| invalid(format!("the runtime sees no device ({e})")))?;
        if !(0..count).contains(&device) {
            return Err(invalid(format!(
                "the runtime has {count} device(s), numbered from 0"
            )));
        }
        self.gpu().bar1_size(device).map_err(Error::Runtime)
    }

    /// Records the registration of the buffer `owner` at `ptr`, with the facts
    /// [`check_buffer`](hipfile_core::buffer::check_buffer) gave for it.
    ///
    /// # Errors
    ///
    /// [`Error::MemoryAlreadyRegistered`] when a buffer at `ptr` is registered already.
    pub(crate) fn insert_registration(
        &self,
        ptr: DevicePtr,
        owner: u64,
        facts: CheckedBuffer,
    ) -> Result<(), Error> {
        let mut map = self
            .inner
            .buffers
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if map.contains_key(&ptr.0) {
            return Err(Error::MemoryAlreadyRegistered { ptr });
        }
        map.insert(
            ptr.0,
            Arc::new(RegisteredBuffer {
                owner,
                facts,
                in_flight: AtomicUsize::new(0),
            }),
        );
        Ok(())
    }

    /// Removes the registration of the buffer `owner` at `ptr`.
    ///
    /// # Errors
    ///
    /// [`Error::MemoryNotRegistered`] when that buffer is not registered (another buffer at
    /// the same address may be); [`Error::InUse`] while I/O uses it.
    pub(crate) fn remove_registration(&self, ptr: DevicePtr, owner: u64) -> Result<(), Error> {
        let mut map = self
            .inner
            .buffers
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(entry) = map.get(&ptr.0).filter(|e| e.owner == owner) else {
            return Err(Error::MemoryNotRegistered { ptr });
        };
        let count = entry.in_flight.load(Ordering::SeqCst);
        if count > 0 {
            return Err(Error::InUse {
                what: "buffer",
                count,
            });
        }
        map.remove(&ptr.0);
        Ok(())
    }

    /// Ends the registration of the buffer `owner` at `ptr`, if it has one, as the buffer is
    /// dropped: no request can be using it then, since requests hold the buffer's memory.
    pub(crate) fn forget_registration(&self, ptr: DevicePtr, owner: u64) {
        let mut map = self
            .inner
            .buffers
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if map.get(&ptr.0).is_some_and(|e| e.owner == owner) {
            map.remove(&ptr.0);
        }
    }

    /// The registration's facts of the buffer `owner` at `ptr`, with its in-flight count
    /// raised until the guard drops; `None` when that buffer is not registered.
    pub(crate) fn registered_facts(
        &self,
        ptr: DevicePtr,
        owner: u64,
    ) -> Option<(CheckedBuffer, InFlight)> {
        let map = self
            .inner
            .buffers
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let entry = map.get(&ptr.0).filter(|e| e.owner == owner)?;
        entry.in_flight.fetch_add(1, Ordering::SeqCst);
        Some((entry.facts, InFlight(Arc::clone(entry))))
    }

    /// The backends, in the order `submit` asks them (fastpath first).
    pub(crate) fn backends(&self) -> [&dyn Backend; 2] {
        [&self.inner.fastpath, &self.inner.fallback]
    }

    /// Whether requests are counted (`HIPFILE_STATS_LEVEL` ≥ 1), so that callers time
    /// them only then.
    pub(crate) fn counting(&self) -> bool {
        self.inner.stats.level() >= 1
    }

    /// Counts a request served.
    pub(crate) fn count_served(&self, served: &Served) {
        self.inner.stats.served(served);
    }

    /// Counts a registration call and whether it succeeded.
    pub(crate) fn count_registration(&self, which: Registration, ok: bool) {
        self.inner.stats.registration(which, ok);
    }

    /// The engine that serves requests which do not block their caller.
    pub(crate) fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// The gate words of stream-ordered requests.
    pub(crate) fn gates(&self) -> &Gates {
        &self.inner.gates
    }

    /// How requests wait for the caller's work on the null streams (`null_stream.rs`).
    pub(crate) fn null_streams(&self) -> &NullStreams {
        &self.inner.null_streams
    }

    /// Waits, for a synchronous request on a buffer of `device` (negative for host memory),
    /// until the null stream has done the work queued on it so far
    /// ([`NullStreams::wait_before`]).
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`] with the runtime's error.
    pub(crate) fn wait_null_stream(&self, device: i32) -> Result<(), Error> {
        self.null_streams().wait_before(device)
    }

    /// Queues `slot` on the engine once the null stream of `device` has done the work queued
    /// on it so far ([`NullStreams::queue_after`]).
    pub(crate) fn queue_after_null_stream(
        &self,
        device: Option<i32>,
        slot: Arc<Slot>,
        point: &Arc<OrderPoint>,
    ) {
        self.null_streams()
            .queue_after(self.engine(), device, slot, point);
    }

    /// Queues requests submitted together on the engine once the null streams of their
    /// buffers' devices have done the work queued on them so far
    /// ([`NullStreams::queue_all_after`]).
    pub(crate) fn queue_all_after_null_stream(
        &self,
        requests: Vec<(Option<i32>, Arc<Slot>, Arc<OrderPoint>)>,
    ) {
        self.null_streams().queue_all_after(self.engine(), requests);
    }

    /// Counts a request that failed; `device` when its buffer was known.
    pub(crate) fn count_failed(&self, op: Op, device: Option<i32>) {
        self.inner.stats.failed(op, device);
    }

    /// Counts a read from object storage ([`Driver::count_remote_read`]).
    pub(crate) fn count_remote(&self, device: i32, bytes: u64, size: u64, took: Duration) {
        self.inner.stats.remote_read(device, bytes, size, took);
    }

    pub(crate) fn claim_fd(&self, fd: &impl AsRawFd) -> Result<(), Error> {
        let raw = fd.as_raw_fd();
        if lock(&self.inner.files).insert(raw) {
            Ok(())
        } else {
            Err(Error::HandleAlreadyRegistered { fd: raw })
        }
    }

    pub(crate) fn release_fd(&self, raw: i32) {
        lock(&self.inner.files).remove(&raw);
    }
}

/// Holds a registered buffer's in-flight count up for one request.
pub(crate) struct InFlight(Arc<RegisteredBuffer>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The driver's settings and handles that follow the fallback's and the runtime layer's
/// internals, for a program that tunes them ([`Driver::tuning`]). They may change with
/// those internals, as the stable API does not.
#[derive(Debug, Clone, Copy)]
pub struct Tuning<'a>(&'a Driver);

impl<'a> Tuning<'a> {
    /// The bytes of one staging buffer (the most one `pread`/`pwrite` and one copy of the
    /// fallback move) for a driver with `knobs`.
    pub fn staging_chunk_size(knobs: &hipfile_core::FallbackKnobs) -> usize {
        StagingConfig::for_knobs(knobs).chunk_size
    }

    /// Pins now the host staging buffers that fallback requests of `request_len` bytes keep
    /// busy when they occupy every I/O thread (with the defaults, one 4 MiB buffer per
    /// thread for requests of up to 64 MiB, two for larger ones: 64 or 128 MiB), as one
    /// allocation, instead of when the first of them needs them; returns how many staging
    /// buffers exist. Requests of at most the small-request threshold reserve nothing.
    /// Pinning 64 MiB took 0.01–0.02 s on the GPU machine: a program that is about to read
    /// a lot through the fallback can have it done beforehand, or on another thread while
    /// it does other setup (as cuFile's `cuFileDriverOpen` allocates its buffers). Does
    /// nothing once they exist; a failed allocation is left for the requests to report.
    pub fn prepare_staging(&self, request_len: u64) -> usize {
        self.0.inner.fallback.reserve_staging(request_len)
    }

    /// The runtime as the backends see it, for work of the program's own around hipfile's
    /// (allocations, streams and copies through the runtime hipfile loaded).
    pub fn gpu(self) -> &'a Arc<dyn GpuRuntime> {
        self.0.gpu()
    }
}
