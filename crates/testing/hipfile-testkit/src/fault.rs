//! Fault injection for the test runtimes: which call fails, how, and when.
//!
//! A [`Fault`] names the calls it applies to ([`Call`]), which of them it hits (the N-th,
//! every one, the next one; only synchronous ones; only those touching an address) and what
//! it does instead of the real work ([`Fault::fail`], [`Fault::errno`], [`Fault::short`],
//! [`Fault::unavailable`], [`Fault::panic`], [`Fault::park`]). [`Faults`] holds a runtime's
//! faults and counts every call by kind, whether it failed or not, so the N-th call is the
//! N-th (0-based) made to that runtime since it was built, across all threads.
//!
//! A [`Gate`] holds parked calls until released: a request held in flight for as long as a
//! test needs.

use hipfile_core::DevicePtr;
use hipfile_core::runtime::StreamHandle;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// A method of [`GpuRuntime`](hipfile_core::GpuRuntime), as a fault or a counter names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // One variant per trait method, named after it.
pub enum Call {
    ThreadInit,
    DeviceCount,
    CurrentDevice,
    SetDevice,
    PointerInfo,
    AddressRange,
    AllocDevice,
    FreeDevice,
    AllocPinned,
    FreePinned,
    StreamCreate,
    StreamDestroy,
    StreamSynchronize,
    EventCreate,
    EventRecord,
    EventSynchronize,
    EventDestroy,
    CopyToDevice,
    CopyToHost,
    LaunchHostFunc,
    AmdFileRead,
    AmdFileWrite,
}

impl Call {
    /// How many kinds of call there are.
    pub const COUNT: usize = 22;

    /// Both AMD file-I/O calls.
    pub const FILE_IO: [Call; 2] = [Call::AmdFileRead, Call::AmdFileWrite];

    /// The runtime function this call stands for, as a [`RuntimeError`] names it.
    ///
    /// [`RuntimeError`]: hipfile_core::RuntimeError
    pub fn runtime_name(self) -> &'static str {
        match self {
            Call::ThreadInit => "hipInit",
            Call::DeviceCount => "hipGetDeviceCount",
            Call::CurrentDevice => "hipGetDevice",
            Call::SetDevice => "hipSetDevice",
            Call::PointerInfo => "hipPointerGetAttributes",
            Call::AddressRange => "hipMemGetAddressRange",
            Call::AllocDevice => "hipMalloc",
            Call::FreeDevice => "hipFree",
            Call::AllocPinned => "hipHostMalloc",
            Call::FreePinned => "hipHostFree",
            Call::StreamCreate => "hipStreamCreateWithFlags",
            Call::StreamDestroy => "hipStreamDestroy",
            Call::StreamSynchronize => "hipStreamSynchronize",
            Call::EventCreate => "hipEventCreate",
            Call::EventRecord => "hipEventRecord",
            Call::EventSynchronize => "hipEventSynchronize",
            Call::EventDestroy => "hipEventDestroy",
            Call::CopyToDevice | Call::CopyToHost => "hipMemcpyAsync",
            Call::LaunchHostFunc => "hipLaunchHostFunc",
            Call::AmdFileRead => "hipAmdFileRead",
            Call::AmdFileWrite => "hipAmdFileWrite",
        }
    }

    /// Whether this is one of the AMD file-I/O calls.
    pub fn is_file_io(self) -> bool {
        matches!(self, Call::AmdFileRead | Call::AmdFileWrite)
    }
}

/// Which of the calls a fault names it hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum When {
    /// The call with this 0-based index among the runtime's calls of its kind.
    Nth(usize),
    /// Every matching call.
    Every,
    /// The first matching call after the fault was added; then the fault is spent.
    Once,
}

/// What a fault does instead of the call's work.
#[derive(Debug, Clone)]
pub enum Action {
    /// The call fails with this runtime error code and message (for file I/O:
    /// `FileIoError::Runtime`).
    Fail {
        /// The runtime's error number.
        code: i32,
        /// Its text.
        message: String,
    },
    /// A file-I/O call fails with this errno, as from the kernel driver.
    Errno(i32),
    /// A file-I/O call moves at most this many bytes and returns what it moved.
    Short(u64),
    /// A file-I/O call says the runtime has no AMD file I/O.
    Unavailable,
    /// The call panics with this message, as a runtime with a bug might.
    Panic(String),
    /// The call waits at the gate until it is released, then does its work.
    Park(Arc<Gate>),
}

/// One injected fault; build it with [`Fault::on`] and one of the action methods.
///
/// ```
/// use hipfile_testkit::{Call, Fault};
/// // The third copy to the device (index 2) fails with runtime error 999.
/// let f = Fault::on(Call::CopyToDevice).nth(2).fail(999);
/// // Every file-I/O call fails with ENODEV (19).
/// let g = Fault::on_each(&Call::FILE_IO).errno(19);
/// # let _ = (f, g);
/// ```
#[derive(Debug, Clone)]
pub struct Fault {
    calls: Vec<Call>,
    when: When,
    synchronous_only: bool,
    touching: Option<DevicePtr>,
    action: Action,
}

impl Fault {
    /// A fault on every call of kind `call` that fails with runtime error 999, until one of
    /// the selection and action methods says otherwise.
    pub fn on(call: Call) -> Fault {
        Fault::on_each(&[call])
    }

    /// As [`Fault::on`], for each of `calls` (the N of [`Fault::nth`] counts per kind).
    pub fn on_each(calls: &[Call]) -> Fault {
        Fault {
            calls: calls.to_vec(),
            when: When::Every,
            synchronous_only: false,
            touching: None,
            action: Action::Fail {
                code: 999,
                message: "injected failure".into(),
            },
        }
    }

    /// Hits only the call with this 0-based index among the runtime's calls of its kind.
    pub fn nth(mut self, n: usize) -> Fault {
        self.when = When::Nth(n);
        self
    }

    /// Hits every matching call (the default).
    pub fn every(mut self) -> Fault {
        self.when = When::Every;
        self
    }

    /// Hits the first matching call after it is added, and only that one.
    pub fn once(mut self) -> Fault {
        self.when = When::Once;
        self
    }

    /// Hits only synchronous copies (those given no stream).
    pub fn synchronous(mut self) -> Fault {
        self.synchronous_only = true;
        self
    }

    /// Hits only calls whose device range holds `addr` (copies and file I/O).
    pub fn touching(mut self, addr: DevicePtr) -> Fault {
        self.touching = Some(addr);
        self
    }

    /// Fails with runtime error `code`.
    pub fn fail(self, code: i32) -> Fault {
        self.fail_with(code, "injected failure")
    }

    /// Fails with runtime error `code` and this message.
    pub fn fail_with(mut self, code: i32, message: &str) -> Fault {
        self.action = Action::Fail {
            code,
            message: message.into(),
        };
        self
    }

    /// A file-I/O call fails with `errno`, as from the kernel driver.
    pub fn errno(mut self, errno: i32) -> Fault {
        self.action = Action::Errno(errno);
        self
    }

    /// A file-I/O call moves at most `max` bytes.
    pub fn short(mut self, max: u64) -> Fault {
        self.action = Action::Short(max);
        self
    }

    /// A file-I/O call says the runtime has no AMD file I/O.
    pub fn unavailable(mut self) -> Fault {
        self.action = Action::Unavailable;
        self
    }

    /// Panics with `message`.
    pub fn panic(mut self, message: &str) -> Fault {
        self.action = Action::Panic(message.into());
        self
    }

    /// Waits at `gate` until it is released, then does the call's work.
    pub fn park(mut self, gate: &Arc<Gate>) -> Fault {
        self.action = Action::Park(gate.clone());
        self
    }

    fn check(&self) {
        let file_only = matches!(
            self.action,
            Action::Errno(_) | Action::Short(_) | Action::Unavailable
        );
        assert!(
            !file_only || self.calls.iter().all(|c| c.is_file_io()),
            "{:?} applies to file-I/O calls only, not {:?}",
            self.action,
            self.calls
        );
    }
}

/// What the calling method is doing, for the faults' filters.
#[derive(Debug, Clone, Copy, Default)]
pub struct Site {
    /// The stream of a copy, if any.
    pub stream: Option<StreamHandle>,
    /// The device memory the call touches: start and length.
    pub range: Option<(u64, u64)>,
}

/// What a hit fault asks the calling method to do instead of its work (panics and parking
/// are done by [`Faults::hit`] itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Fail with this runtime error.
    Fail {
        /// The runtime's error number.
        code: i32,
        /// Its text.
        message: String,
    },
    /// Fail with this errno (file I/O).
    Errno(i32),
    /// Move at most this many bytes (file I/O).
    Short(u64),
    /// Say that there is no AMD file I/O.
    Unavailable,
}

/// A runtime's faults and its call counters. Shared by every thread that calls the runtime.
#[derive(Debug)]
pub struct Faults {
    rules: Mutex<Vec<Fault>>,
    counts: [AtomicUsize; Call::COUNT],
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            rules: Mutex::new(Vec::new()),
            counts: std::array::from_fn(|_| AtomicUsize::new(0)),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // An injected panic may unwind through a test's threads; the data is still sound.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Faults {
    /// Adds a fault; it applies from the next call on.
    ///
    /// # Panics
    ///
    /// If the action applies to file I/O only ([`Fault::errno`], [`Fault::short`],
    /// [`Fault::unavailable`]) and the fault names another call.
    pub fn add(&self, fault: Fault) {
        fault.check();
        lock(&self.rules).push(fault);
    }

    /// Removes every fault.
    pub fn clear(&self) {
        lock(&self.rules).clear();
    }

    /// How many calls of this kind were made, failed ones included.
    pub fn calls(&self, call: Call) -> usize {
        self.counts[call as usize].load(Ordering::SeqCst)
    }

    /// Counts a call and applies the first fault that hits it: parks or panics here, or
    /// returns what the caller is to do instead of its work. `None`: do the work.
    pub fn hit(&self, call: Call, site: Site) -> Option<Effect> {
        let n = self.counts[call as usize].fetch_add(1, Ordering::SeqCst);
        let action = {
            let mut rules = lock(&self.rules);
            let i = rules.iter().position(|f| {
                f.calls.contains(&call)
                    && (!f.synchronous_only || site.stream.is_none())
                    && f.touching.is_none_or(|a| {
                        site.range
                            .is_some_and(|(start, len)| a.0 >= start && a.0 - start < len)
                    })
                    && match f.when {
                        When::Nth(k) => k == n,
                        When::Every | When::Once => true,
                    }
            })?;
            if rules[i].when == When::Once {
                rules.remove(i).action
            } else {
                rules[i].action.clone()
            }
        };
        match action {
            Action::Fail { code, message } => Some(Effect::Fail { code, message }),
            Action::Errno(e) => Some(Effect::Errno(e)),
            Action::Short(max) => Some(Effect::Short(max)),
            Action::Unavailable => Some(Effect::Unavailable),
            Action::Panic(message) => panic!("{message}"),
            Action::Park(gate) => {
                gate.park();
                None
            }
        }
    }
}

/// Where parked calls wait until a test releases them.
#[derive(Debug, Default)]
pub struct Gate {
    state: Mutex<GateState>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    parked: usize,
    released: bool,
}

impl Gate {
    /// A closed gate, shared between the fault and the test.
    pub fn new() -> Arc<Gate> {
        Arc::new(Gate::default())
    }

    fn park(&self) {
        let mut s = lock(&self.state);
        s.parked += 1;
        self.wake.notify_all();
        while !s.released {
            s = self.wake.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// How many calls have parked here so far (released ones included).
    pub fn parked(&self) -> usize {
        lock(&self.state).parked
    }

    /// Waits until a call is parked.
    ///
    /// # Panics
    ///
    /// If `gone` says, before one parked, that the work expected to park has ended.
    pub fn wait_parked(&self, gone: impl Fn() -> bool) {
        let mut s = lock(&self.state);
        while s.parked == 0 {
            assert!(!gone(), "the call to hold ended without parking");
            s = self
                .wake
                .wait_timeout(s, Duration::from_millis(10))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Lets every parked call, and every later one, through.
    pub fn release(&self) {
        lock(&self.state).released = true;
        self.wake.notify_all();
    }

    /// A guard that releases the gate when dropped, so that a failed assertion fails the
    /// test instead of leaving a call parked for ever.
    pub fn release_on_drop(&self) -> ReleaseOnDrop<'_> {
        ReleaseOnDrop(self)
    }
}

/// Releases its [`Gate`] when dropped; see [`Gate::release_on_drop`].
#[derive(Debug)]
#[must_use = "the gate is released when this is dropped"]
pub struct ReleaseOnDrop<'a>(&'a Gate);

impl Drop for ReleaseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}
