//! The library's process-wide state: hipFile's use count, the driver it keeps open, the
//! registered files (opaque handles), the registered buffers (keyed by pointer), the
//! registered streams and the stream-ordered requests in flight.
//!
//! One mutex guards it all, and it is never held while bytes move: I/O takes clones of what
//! it needs (a `FileHandle`, the driver, a registered buffer's `Arc`) and lets go first.

use crate::codes::status;
use crate::settings::{FileSource, Params, Settings};
use crate::types::hipFileError_t;
use facade::{Config, DeviceBuffer, Driver, Error, FileHandle, Io};
use std::collections::BTreeMap;
use std::ffi::c_uint;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock};

/// A registered file. C's `hipFileHandle_t` is the address of one of these, boxed, so the
/// address stays the same while the registry holds it; the registry is the only owner, and
/// a handle from C is only ever a key to look up, never dereferenced.
pub(crate) struct File {
    pub(crate) fh: FileHandle,
}

/// A registered buffer. Reads take the lock exclusively (the facade reads into
/// `&mut DeviceBuffer`), writes shared; deregistration tries for it exclusively and reports
/// the buffer in use when it cannot have it.
pub(crate) type Buffer = Arc<RwLock<DeviceBuffer>>;

/// A stream-ordered request (`hipFileReadAsync`, `hipFileWriteAsync`) that has not been seen
/// to end. Its handle is kept until the request has ended: dropping it earlier would cancel
/// the request or wait for it.
pub(crate) struct Inflight {
    /// Tells the entry from the others while its request is being submitted.
    pub(crate) id: u64,
    /// The registered buffer it uses (its base pointer), which stays registered until `done`.
    pub(crate) buffer: Option<u64>,
    /// Set once the result has been written to the caller's `ssize_t`.
    pub(crate) done: Arc<AtomicBool>,
    /// The facade's handle; `None` while the request is being submitted (the entry is made
    /// first, under the lock that found the buffer, so that the buffer is in use from then).
    pub(crate) io: Option<Io<'static>>,
}

impl Inflight {
    fn reported(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    fn ended(&self) -> bool {
        self.io.as_ref().is_some_and(|io| io.is_finished())
    }
}

pub(crate) struct State {
    /// hipFile's use count: opens minus closes, plus the implicit open of a first
    /// registration.
    pub(crate) count: i64,
    /// The process-wide driver, held while the count is above 0. Registered files and
    /// buffers hold it too.
    pub(crate) driver: Option<Driver>,
    /// Registered files by handle address.
    pub(crate) files: BTreeMap<usize, Box<File>>,
    /// Registered buffers by their exact base pointer.
    pub(crate) buffers: BTreeMap<u64, Buffer>,
    /// The settings of the parameter calls and driver setters: for the next open, and those
    /// the open driver has.
    pub(crate) params: Params,
    /// Registered streams (by `hipStream_t` value, 0 for the null stream) and their flags.
    /// Not cleared when the count reaches 0 (hipFile keeps them too).
    pub(crate) streams: BTreeMap<usize, c_uint>,
    /// Stream-ordered requests not yet seen to end, oldest first.
    pub(crate) inflight: Vec<Inflight>,
    /// The id of the next entry of `inflight`.
    pub(crate) next_inflight: u64,
    /// The process this state belongs to (0 before the first call).
    pid: u32,
}

static STATE: Mutex<State> = Mutex::new(State {
    pid: 0,
    count: 0,
    driver: None,
    files: BTreeMap::new(),
    buffers: BTreeMap::new(),
    params: Params::new(),
    streams: BTreeMap::new(),
    inflight: Vec::new(),
    next_inflight: 0,
});

/// Says on stderr why the driver could not be opened (`hipfile: error: ...`), once for each
/// distinct reason: C's status codes (`hipFileDriverNotInitialized`) cannot carry the
/// loader's explanation, which names what was tried and what to change.
fn report_open_failure(error: &Error) {
    static REPORTED: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let text = error.to_string();
    let mut reported = REPORTED.lock().unwrap_or_else(PoisonError::into_inner);
    if !reported.contains(&text) {
        facade::core::diag::line(&format!("hipfile: error: {text}"));
        reported.push(text);
    }
}

/// The state, locked. A panic elsewhere while it was held leaves it consistent (every change
/// is one map or counter update), so poisoning is ignored. The first lock reads the
/// configuration file, where a library installed a reader ([`set_config_file_source`]).
pub(crate) fn lock() -> MutexGuard<'static, State> {
    let mut st = STATE.lock().unwrap_or_else(PoisonError::into_inner);
    let this = facade::core::process::id();
    if st.pid != this {
        if st.pid != 0 {
            st.forget_parent(this);
        }
        st.pid = this;
    }
    if !st.params.file_read {
        st.params.file_read = true;
        if let Some(source) = FILE_SOURCE.get() {
            st.params.load_file(source());
        }
    }
    st
}

/// What a driver open returns while the configuration file is unusable: cuFile's, whose
/// library fails its initialisation with `-EINVAL` in the status's code.
pub const FILE_INVALID: hipFileError_t = hipFileError_t {
    err: -libc::EINVAL,
    hip_drv_err: 0,
};

static FILE_SOURCE: OnceLock<fn() -> FileSource> = OnceLock::new();

/// Installs the reader of a configuration file, which the state calls once, at the first
/// call of the library that touches it (before any setting is made or any driver opened).
/// Only `libcufile.so.0` installs one (its `cufile.json`); a second installation is
/// ignored. The reader runs under the state's lock and must not call this crate.
pub fn set_config_file_source(source: fn() -> FileSource) {
    let _ = FILE_SOURCE.set(source);
}

/// What a process made by `fork()` forgets besides the state: the registries kept outside
/// it (the batches, `batch.rs`), each installed by its module ([`forget_after_fork`]).
static FORGET_AFTER_FORK: Mutex<Vec<fn()>> = Mutex::new(Vec::new());

/// Installs `forget`, which the first lock of the state in a process made by `fork()` runs
/// after the state has forgotten the parent's driver and registrations, under the state's
/// lock. A module keeping a registry of its own installs it once, before the registry first
/// holds anything (a registry that never held anything has nothing to forget).
pub(crate) fn forget_after_fork(forget: fn()) {
    FORGET_AFTER_FORK
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(forget);
}

impl State {
    /// Starts afresh in a process made by `fork()` from the one whose state this is: the
    /// parent's driver, registrations, streams, batches and requests in flight do not carry
    /// over (the driver's threads and the GPU runtime's state are the parent's). They are
    /// left, not released: releasing them would join threads that are not in this process.
    /// The use count is 0, as in a process that never opened the library, so calls fail at
    /// once as they do then, and opening the driver again gives this process its own. The
    /// settings of the parameter calls stay.
    fn forget_parent(&mut self, this: u32) {
        facade::core::diag::line(&format!(
            "hipfile: this process ({this}) was made by fork() from process {}, which had the \
             library open: its driver, registrations and requests do not carry over; open the \
             driver again in this process",
            self.pid
        ));
        std::mem::forget(self.driver.take());
        std::mem::forget(std::mem::take(&mut self.files));
        std::mem::forget(std::mem::take(&mut self.buffers));
        std::mem::forget(std::mem::take(&mut self.inflight));
        self.streams.clear();
        self.count = 0;
        // What is kept outside the state (the batches), copied out first so that a module
        // installing its forgetting meanwhile waits for no one.
        let forget: Vec<fn()> = FORGET_AFTER_FORK
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for f in forget {
            f();
        }
    }

    /// The driver's configuration and the settings behind it: the open driver's, or those
    /// the next open would settle.
    pub(crate) fn current(&self) -> (Config, &Settings) {
        match &self.driver {
            Some(d) if self.count > 0 => (d.config().clone(), &self.params.live),
            _ => (
                self.params.builder(&self.params.pending).build_from_env(),
                &self.params.pending,
            ),
        }
    }

    /// The driver, opening the process-wide one with the pending settings when none is held
    /// (the count is 0 then). The count is not changed: callers raise it once their
    /// registration has succeeded.
    pub(crate) fn driver(&mut self) -> Result<Driver, hipFileError_t> {
        if let Some(d) = &self.driver {
            return Ok(d.clone());
        }
        // cuFile's answer to a configuration file it cannot use: every open fails.
        if self.params.file_error.is_some() {
            return Err(FILE_INVALID);
        }
        // A driver still held elsewhere (by a request or batch of an earlier open) is shared
        // as it is: its configuration cannot change under what uses it. A runtime without
        // a device opens, as hipFile's `hipFileDriverOpen` always succeeds (Rust's
        // `Driver::open` refuses it).
        let d = match Driver::open_allowing_no_device(self.params.builder(&self.params.pending)) {
            Err(Error::DriverAlreadyOpen) => Driver::open(),
            other => other,
        }
        .map_err(|e| {
            report_open_failure(&e);
            status(&e)
        })?;
        self.params.live = self.params.pending.clone();
        Ok(d)
    }

    /// Counts the implicit open of a first registration, keeping `driver`: 0 becomes 1, any
    /// other count stays.
    pub(crate) fn implicit_open(&mut self, driver: Driver) {
        if self.count == 0 {
            self.count = 1;
            self.driver = Some(driver);
        }
    }

    /// The registered file with handle `addr`.
    pub(crate) fn file(&self, addr: usize) -> Option<&File> {
        self.files.get(&addr).map(|b| &**b)
    }

    /// Takes the stream-ordered requests that have ended, for the caller to drop once it has
    /// let go of the lock. Never waits: a request that has not ended stays.
    pub(crate) fn take_ended(&mut self) -> Vec<Inflight> {
        let (ended, going): (Vec<_>, Vec<_>) = std::mem::take(&mut self.inflight)
            .into_iter()
            .partition(Inflight::ended);
        self.inflight = going;
        ended
    }

    /// Whether a stream-ordered request still uses the registered buffer at `ptr` (its result
    /// not yet reported).
    pub(crate) fn buffer_in_flight(&self, ptr: u64) -> bool {
        self.inflight
            .iter()
            .any(|r| r.buffer == Some(ptr) && !r.reported() && !r.ended())
    }

    /// Adds an entry for a request about to be submitted; its id.
    pub(crate) fn reserve(&mut self, buffer: Option<u64>, done: Arc<AtomicBool>) -> u64 {
        let id = self.next_inflight;
        self.next_inflight = self.next_inflight.wrapping_add(1);
        self.inflight.push(Inflight {
            id,
            buffer,
            done,
            io: None,
        });
        id
    }

    /// Gives entry `id` its handle, or removes it when the submission failed (`None`).
    pub(crate) fn settle(&mut self, id: u64, io: Option<Io<'static>>) {
        if let Some(at) = self.inflight.iter().position(|r| r.id == id) {
            match io {
                Some(io) => self.inflight[at].io = Some(io),
                None => {
                    self.inflight.remove(at);
                }
            }
        }
    }

    /// Ends every registration, buffers first, then files, and lets go of the driver (the
    /// count reached 0). Requests in flight keep what they use until they end.
    /// The files are returned, for the caller to drop once it has let go of the lock.
    pub(crate) fn clear(&mut self) -> BTreeMap<usize, Box<File>> {
        self.buffers.clear();
        let files = std::mem::take(&mut self.files);
        self.driver = None;
        files
    }
}
