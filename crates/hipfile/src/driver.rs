//! The driver: one configuration, one runtime, the two backends, the registries and the
//! counters. Handles keep it alive; it closes when the last one goes.

use crate::buffer::{DeviceBuffer, PinnedHostBuffer};
use crate::file::FileHandle;
use crate::stats::{DeviceStats, Stats, StatsSnapshot};
use hipfile_core::buffer::{BufferUse, check_buffer};
use hipfile_core::{CheckedBuffer, Config, ConfigBuilder, Error, GpuRuntime};
use hipfile_fallback::{Fallback, StagingConfig};
use hipfile_fastpath::Fastpath;
use hipfile_runtime::{RuntimeReport, load_runtime};
use std::collections::{BTreeMap, HashSet};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

/// An open hipfile driver. Cheap to clone (a reference count); every clone, file handle and
/// owned buffer keeps the driver open, and it closes when the last of them is dropped.
#[derive(Clone)]
pub struct Driver {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: Config,
    pub(crate) runtime: Arc<dyn GpuRuntime>,
    pub(crate) report: RuntimeReport,
    pub(crate) fastpath: Fastpath,
    pub(crate) fallback: Fallback,
    pub(crate) files: Mutex<HashSet<i32>>,
    pub(crate) buffers: RwLock<BTreeMap<u64, Arc<RegisteredBuffer>>>,
    pub(crate) stats: Stats,
}

pub(crate) struct RegisteredBuffer {
    /// The [`DeviceBuffer`] that was registered ([`DeviceBuffer::id`]): another buffer at the
    /// same address (a view made with `from_raw`, or a later allocation) is not it.
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
    /// tried).
    pub fn open() -> Result<Driver, Error> {
        let mut global = lock(&GLOBAL);
        if let Some(inner) = global.upgrade() {
            return Ok(Driver { inner });
        }
        let driver = Driver::open_private(Config::from_env())?;
        *global = Arc::downgrade(&driver.inner);
        Ok(driver)
    }

    /// Opens the process-wide driver with programmatic settings, which win over the
    /// environment.
    ///
    /// # Errors
    ///
    /// [`Error::DriverAlreadyOpen`] when it is already open with a different configuration;
    /// otherwise as [`Driver::open`].
    pub fn open_with(settings: ConfigBuilder) -> Result<Driver, Error> {
        let config = settings.build_from_env();
        let mut global = lock(&GLOBAL);
        if let Some(inner) = global.upgrade() {
            return if inner.config == config {
                Ok(Driver { inner })
            } else {
                Err(Error::DriverAlreadyOpen)
            };
        }
        let driver = Driver::open_private(config)?;
        *global = Arc::downgrade(&driver.inner);
        Ok(driver)
    }

    /// Opens a driver of its own (not the process-wide one) with `config`, loading the
    /// runtime it names.
    ///
    /// # Errors
    ///
    /// As [`Driver::open`].
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
        Driver {
            inner: Arc::new(Inner {
                config,
                runtime,
                report,
                fastpath,
                fallback,
                files: Mutex::new(HashSet::new()),
                buffers: RwLock::new(BTreeMap::new()),
                stats: Stats::default(),
            }),
        }
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
    pub fn gpu(&self) -> &Arc<dyn GpuRuntime> {
        &self.inner.runtime
    }

    /// Registers an open file (any [`AsFd`]: `File`, `OwnedFd`, …). The descriptor is
    /// duplicated, so the handle stays valid whatever the caller does with its own; the
    /// file is probed once, now, and the `O_DIRECT` descriptor opened (docs/BEHAVIOUR.md §1.3).
    ///
    /// # Errors
    ///
    /// [`Error::HandleAlreadyRegistered`] when this descriptor is registered already;
    /// [`Error::Probe`] when the file cannot be probed or reopened.
    pub fn register_file(&self, file: &impl AsFd) -> Result<FileHandle, Error> {
        FileHandle::register(self.clone(), file.as_fd())
    }

    /// Allocates `len` bytes of device memory, freed when the buffer is dropped.
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`] when the runtime cannot allocate; [`Error::InvalidValue`] for 0.
    pub fn alloc(&self, len: usize) -> Result<DeviceBuffer, Error> {
        DeviceBuffer::alloc(self.clone(), len)
    }

    /// Allocates `len` bytes of pinned host memory, zeroed, freed when the buffer is dropped:
    /// the fastest source and target of [`DeviceBuffer::copy_from_host`] and
    /// [`DeviceBuffer::copy_to_host`].
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`] when the runtime cannot allocate; [`Error::InvalidValue`] for 0.
    pub fn alloc_pinned(&self, len: usize) -> Result<PinnedHostBuffer, Error> {
        PinnedHostBuffer::alloc(self.clone(), len)
    }

    /// Registers a device buffer (optional: unregistered buffers are validated per call). The
    /// registration ends when the buffer is deregistered or dropped.
    ///
    /// # Errors
    ///
    /// [`Error::MemoryAlreadyRegistered`]; [`Error::InvalidValue`] for a buffer of another
    /// driver (register it with its own); or the validation errors of docs/BEHAVIOUR.md §3.6: not
    /// device memory ([`Error::MemoryTypeInvalid`]), a range beyond its allocation
    /// ([`Error::PointerRange`]).
    pub fn register_buffer(&self, buffer: &DeviceBuffer) -> Result<(), Error> {
        if !buffer.driver().same_as(self) {
            return Err(Error::InvalidValue {
                op: None,
                what: format!(
                    "buffer {} belongs to another driver; register it with the driver that \
                     allocated or described it",
                    buffer.ptr()
                ),
            });
        }
        // SAFETY: the registration lives in this driver only (checked above) and is removed
        // when `buffer` is dropped (`DeviceBuffer`'s `Drop`), before an owned buffer frees
        // its memory; a borrowed buffer's memory stays allocated while it lives (the
        // contract of `DeviceBuffer::from_raw`). Requests use the registration only while
        // they borrow `buffer` (`Driver::buffer_facts`).
        #[allow(unsafe_code)]
        let facts = unsafe {
            check_buffer(
                self.inner.runtime.as_ref(),
                buffer.ptr(),
                BufferUse::Register {
                    len: buffer.len() as u64,
                },
            )
        }?;
        let mut map = self
            .inner
            .buffers
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if map.contains_key(&buffer.ptr().0) {
            return Err(Error::MemoryAlreadyRegistered { ptr: buffer.ptr() });
        }
        map.insert(
            buffer.ptr().0,
            Arc::new(RegisteredBuffer {
                owner: buffer.id(),
                facts,
                in_flight: AtomicUsize::new(0),
            }),
        );
        Ok(())
    }

    /// Deregisters a buffer.
    ///
    /// # Errors
    ///
    /// [`Error::MemoryNotRegistered`] when this buffer is not registered (another buffer at
    /// the same address may be); [`Error::InUse`] while I/O uses it.
    pub fn deregister_buffer(&self, buffer: &DeviceBuffer) -> Result<(), Error> {
        let mut map = self
            .inner
            .buffers
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(entry) = map.get(&buffer.ptr().0).filter(|e| e.owner == buffer.id()) else {
            return Err(Error::MemoryNotRegistered { ptr: buffer.ptr() });
        };
        let count = entry.in_flight.load(Ordering::SeqCst);
        if count > 0 {
            return Err(Error::InUse {
                what: "buffer",
                count,
            });
        }
        map.remove(&buffer.ptr().0);
        Ok(())
    }

    /// Ends `buffer`'s registration, if it has one, as it is dropped: no request can be using
    /// it then, since requests borrow the buffer.
    pub(crate) fn forget_buffer(&self, buffer: &DeviceBuffer) {
        let mut map = self
            .inner
            .buffers
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if map
            .get(&buffer.ptr().0)
            .is_some_and(|e| e.owner == buffer.id())
        {
            map.remove(&buffer.ptr().0);
        }
    }

    /// The counters, when `HIPFILE_STATS_LEVEL` ≥ 1; `None` otherwise.
    pub fn stats(&self) -> Option<StatsSnapshot> {
        (self.inner.config.stats_level >= 1).then(|| self.inner.stats.snapshot())
    }

    /// The counters of each device whose buffers were served, by device number, when
    /// `HIPFILE_STATS_LEVEL` ≥ 1; `None` otherwise.
    pub fn device_stats(&self) -> Option<Vec<DeviceStats>> {
        (self.inner.config.stats_level >= 1).then(|| self.inner.stats.devices())
    }

    /// The number of devices the runtime sees.
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`].
    pub fn device_count(&self) -> Result<i32, Error> {
        self.gpu().device_count().map_err(Error::Runtime)
    }

    /// Allocates `len` bytes of device memory on `device`, freed when the buffer is dropped.
    /// The calling thread's current device is the same afterwards.
    ///
    /// # Errors
    ///
    /// [`Error::Runtime`] when the device does not exist or cannot allocate;
    /// [`Error::InvalidValue`] for 0.
    pub fn alloc_on(&self, device: i32, len: usize) -> Result<DeviceBuffer, Error> {
        let gpu = self.gpu();
        gpu.thread_init().map_err(Error::Runtime)?;
        let before = gpu.current_device().map_err(Error::Runtime)?;
        gpu.set_device(device).map_err(Error::Runtime)?;
        let buffer = DeviceBuffer::alloc(self.clone(), len);
        let restored = gpu.set_device(before).map_err(Error::Runtime);
        let buffer = buffer?;
        restored?;
        Ok(buffer)
    }

    /// The facts of `buffer` for one request: its registration's when it is registered (with
    /// the in-flight count raised until the guard drops), else checked now.
    pub(crate) fn buffer_facts(
        &self,
        buffer: &DeviceBuffer,
    ) -> Result<(CheckedBuffer, Option<InFlight>), Error> {
        let map = self
            .inner
            .buffers
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = map.get(&buffer.ptr().0).filter(|e| e.owner == buffer.id()) {
            entry.in_flight.fetch_add(1, Ordering::SeqCst);
            return Ok((entry.facts, Some(InFlight(Arc::clone(entry)))));
        }
        drop(map);
        // SAFETY: the caller borrows `buffer` for the whole request, and its memory stays
        // allocated while it lives (owned, or by the contract of `DeviceBuffer::from_raw`).
        #[allow(unsafe_code)]
        let facts = unsafe {
            check_buffer(
                self.inner.runtime.as_ref(),
                buffer.ptr(),
                BufferUse::Unregistered,
            )
        }?;
        Ok((facts.truncated(buffer.len() as u64), None))
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
