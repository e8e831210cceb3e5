//! The library's process-wide state: hipFile's use count, the driver it keeps open, the
//! registered files (opaque handles), the registered buffers (keyed by pointer), the
//! registered streams and the stream-ordered requests in flight.
//!
//! One mutex guards it all, and it is never held while bytes move: I/O takes clones of what
//! it needs (a `FileHandle`, the driver, a registered buffer's `Arc`) and lets go first.

use crate::params::Params;
use facade::{DeviceBuffer, Driver, Error, FileHandle, Io};
use std::collections::BTreeMap;
use std::ffi::c_uint;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

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
}

static STATE: Mutex<State> = Mutex::new(State {
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
        eprintln!("hipfile: error: {text}");
        reported.push(text);
    }
}

/// The state, locked. A panic elsewhere while it was held leaves it consistent (every change
/// is one map or counter update), so poisoning is ignored.
pub(crate) fn lock() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

impl State {
    /// The driver, opening the process-wide one with the pending settings when none is held
    /// (the count is 0 then). The count is not changed: callers raise it once their
    /// registration has succeeded.
    pub(crate) fn driver(&mut self) -> Result<Driver, Error> {
        if let Some(d) = &self.driver {
            return Ok(d.clone());
        }
        // A driver still held elsewhere (by a request or batch of an earlier open) is shared
        // as it is: its configuration cannot change under what uses it. A runtime without
        // a device opens, as hipFile's `hipFileDriverOpen` always succeeds (Rust's
        // `Driver::open` refuses it).
        let d = match Driver::open_allowing_no_device(self.params.pending.builder()) {
            Err(Error::DriverAlreadyOpen) => Driver::open(),
            other => other,
        }
        .inspect_err(report_open_failure)?;
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
