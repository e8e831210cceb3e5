//! The emulated runtime's configuration, from its own `HIPFILE_EMU_*` environment variables.
//!
//! This is the only module of the crate that reads the environment. The emulated runtime is a
//! separate library loaded into the process under test, and like a real runtime (which reads
//! `HIP_VISIBLE_DEVICES` and friends) it is configured by variables of its own, independently
//! of hipfile's configuration.
//!
//! | variable | default | meaning |
//! |---|---|---|
//! | `HIPFILE_EMU_ROCM_VERSION` | `7.2.0` | the ROCm version emulated: `MAJOR.MINOR[.PATCH]` |
//! | `HIPFILE_EMU_DEVICES` | `1` | the number of devices, 0 to 16 (0: a machine without a GPU) |
//! | `HIPFILE_EMU_FAULT` | none | file-I/O faults to inject (see [`crate::fault`]) |
//! | `HIPFILE_EMU_STREAMS` | `inline-when-idle` | `queued`: no stream operation runs inline ([`crate::stream`]) |
//! | `HIPFILE_EMU_NULL_STREAM_DELAY` | `0` | how long each deferred operation of the null stream (a pageable `hipMemcpy` to the device, a device-to-device `hipMemcpy`, a `hipMemset` of device memory) waits on the stream's worker before it runs: `N`, `Nus`, `Nms` or `Ns` ([`crate::copy`]) |
//!
//! The variables are read once, on the first call that needs them, and again by
//! `hipfileEmuReset`. An invalid value is never ignored silently: it is reported on stderr
//! when read, and the runtime refuses to initialise, as a real runtime whose initialisation
//! failed serves nothing. `hipInit`, `hipGetDeviceCount` (with a count of 0) and every call
//! that needs a device (`hipGetDevice`, `hipSetDevice`, allocations, registrations, streams,
//! events, file I/O) return `hipErrorNotInitialized`, and `hipGetErrorString` of that code
//! then names each invalid variable, what is wrong with its value and what is accepted
//! ([`Config::init_error`]), so that a caller that only reports the runtime's error says it
//! all. The versions, `hipGetProcAddress` and the calls on what already exists (copies,
//! frees, pointer attributes) go on, with the default for an invalid variable.
//!
//! With `HIPFILE_EMU_DEVICES=0` the runtime answers as ROCm does on a machine without a GPU:
//! `hipGetDeviceCount` gives 0 and `hipErrorNoDevice`, and what needs a device (`hipInit`,
//! `hipGetDevice`, `hipSetDevice`, allocations, registrations, streams, events, file I/O)
//! fails with `hipErrorInvalidDevice` ([`with_device`]); the versions are still reported.

use crate::codes::{INVALID_DEVICE, NOT_INITIALIZED};
use crate::fault::{FaultPlan, parse_faults};
use std::ffi::{CStr, CString};
use std::io::Write as _;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

/// Selects the emulated ROCm version.
pub const ROCM_VERSION_VAR: &str = "HIPFILE_EMU_ROCM_VERSION";
/// Sets the number of emulated devices.
pub const DEVICES_VAR: &str = "HIPFILE_EMU_DEVICES";
/// Lists the file-I/O faults to inject.
pub const FAULT_VAR: &str = "HIPFILE_EMU_FAULT";

/// Chooses whether operations on an idle stream may run inline.
pub const STREAMS_VAR: &str = "HIPFILE_EMU_STREAMS";

/// Delays the null stream's deferred operations.
pub const NULL_STREAM_DELAY_VAR: &str = "HIPFILE_EMU_NULL_STREAM_DELAY";

/// The longest delay `HIPFILE_EMU_NULL_STREAM_DELAY` accepts: a minute.
pub const MAX_NULL_STREAM_DELAY: Duration = Duration::from_secs(60);

/// Parses a delay: a number of microseconds (`N` or `Nus`), milliseconds (`Nms`) or seconds
/// (`Ns`), at most [`MAX_NULL_STREAM_DELAY`].
///
/// # Errors
///
/// A message naming what is accepted.
pub fn parse_delay(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "us"),
    };
    let micros_per = match unit {
        "us" => 1,
        "ms" => 1_000,
        "s" => 1_000_000,
        _ => 0,
    };
    let delay = digits
        .parse::<u64>()
        .ok()
        .filter(|_| micros_per != 0)
        .and_then(|n| n.checked_mul(micros_per))
        .map(Duration::from_micros);
    match delay {
        Some(d) if d <= MAX_NULL_STREAM_DELAY => Ok(d),
        _ => Err(format!(
            "`{text}` is not a delay of at most 60s: a whole number followed by `us`, `ms` \
             or `s` (microseconds without a unit)"
        )),
    }
}

/// How stream operations run (see [`crate::stream`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamMode {
    /// A copy or a value write on an idle stream runs inline, on the calling thread.
    #[default]
    InlineWhenIdle,
    /// Every operation goes to the stream's worker: the most asynchronous the runtime can
    /// be, to find code that forgets to synchronise.
    Queued,
}

impl StreamMode {
    /// Parses `inline-when-idle` or `queued`.
    ///
    /// # Errors
    ///
    /// A message naming what is accepted.
    pub fn parse(text: &str) -> Result<StreamMode, String> {
        match text.trim() {
            "inline-when-idle" => Ok(StreamMode::InlineWhenIdle),
            "queued" => Ok(StreamMode::Queued),
            other => Err(format!("`{other}` is not `inline-when-idle` or `queued`")),
        }
    }
}

/// The most devices the runtime emulates.
pub const MAX_DEVICES: i32 = 16;

/// An emulated ROCm version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RocmVersion {
    /// Major version (the soname major of `libamdhip64`).
    pub major: u32,
    /// Minor version, below 100.
    pub minor: u32,
    /// Patch level, below 100000.
    pub patch: u32,
}

impl RocmVersion {
    /// The version emulated by default: 7.2.0, the first with `hipAmdFileRead`.
    pub const DEFAULT: RocmVersion = RocmVersion::new(7, 2, 0);

    /// `major.minor.patch`.
    pub const fn new(major: u32, minor: u32, patch: u32) -> RocmVersion {
        RocmVersion {
            major,
            minor,
            patch,
        }
    }

    /// Parses `MAJOR.MINOR` or `MAJOR.MINOR.PATCH`.
    ///
    /// # Errors
    ///
    /// A message saying what is wrong, for a version that is not of that form or whose encoded
    /// value would not fit `hipRuntimeGetVersion`'s `int`.
    pub fn parse(text: &str) -> Result<RocmVersion, String> {
        let fields: Vec<&str> = text.trim().split('.').collect();
        let number = |s: &str, what: &str, below: u32| -> Result<u32, String> {
            match s.parse::<u32>() {
                Ok(n) if n < below => Ok(n),
                Ok(n) => Err(format!("{what} {n} is not below {below}")),
                Err(_) => Err(format!("{what} `{s}` is not a number")),
            }
        };
        let (major, minor, patch) = match fields.as_slice() {
            [major, minor] => (*major, *minor, "0"),
            [major, minor, patch] => (*major, *minor, *patch),
            _ => return Err(format!("`{text}` is not MAJOR.MINOR[.PATCH]")),
        };
        Ok(RocmVersion {
            major: number(major, "major", 200)?,
            minor: number(minor, "minor", 100)?,
            patch: number(patch, "patch", 100_000)?,
        })
    }

    /// The value `hipRuntimeGetVersion` reports: major·10⁷ + minor·10⁵ + patch.
    pub const fn encoded(self) -> i32 {
        // In u64 nothing overflows; a version too large for the C `int` saturates.
        let value =
            self.major as u64 * 10_000_000 + self.minor as u64 * 100_000 + self.patch as u64;
        if value > i32::MAX as u64 {
            i32::MAX
        } else {
            value as i32
        }
    }

    /// Whether this version is `major.minor` or later.
    pub fn at_least(self, major: u32, minor: u32) -> bool {
        (self.major, self.minor) >= (major, minor)
    }
}

/// The configuration of the emulated runtime.
#[derive(Debug)]
pub struct Config {
    /// The emulated ROCm version.
    pub version: RocmVersion,
    /// The number of emulated devices.
    pub devices: i32,
    /// The faults to inject, with their counts so far.
    pub faults: FaultPlan,
    /// How stream operations run.
    pub streams: StreamMode,
    /// How long each deferred operation of the null stream waits before it runs.
    pub null_stream_delay: Duration,
    /// Each invalid setting, in words; empty when the configuration is valid.
    pub problems: Vec<String>,
    /// What `hipGetErrorString(hipErrorNotInitialized)` says while the configuration is
    /// invalid: HIP's "initialization error" followed by every problem. `None` when valid.
    pub init_error: Option<&'static CStr>,
}

impl Default for Config {
    fn default() -> Config {
        Config::from_values(None, None, None)
    }
}

impl Config {
    /// The configuration given the variables' values (`None`: unset). Empty values count as
    /// unset. An invalid value leaves that setting at its default and adds a problem.
    pub fn from_values(
        version: Option<&str>,
        devices: Option<&str>,
        fault: Option<&str>,
    ) -> Config {
        let mut problems = Vec::new();
        let version = match set(version).map(RocmVersion::parse) {
            None => RocmVersion::DEFAULT,
            Some(Ok(v)) => v,
            Some(Err(why)) => {
                problems.push(format!("{ROCM_VERSION_VAR}: {why}"));
                RocmVersion::DEFAULT
            }
        };
        let devices = match set(devices) {
            None => 1,
            Some(text) => match text.parse::<i32>() {
                Ok(n) if (0..=MAX_DEVICES).contains(&n) => n,
                _ => {
                    problems.push(format!(
                        "{DEVICES_VAR}: `{text}` is not a device count from 0 to {MAX_DEVICES}"
                    ));
                    1
                }
            },
        };
        let faults = match set(fault).map(parse_faults) {
            None => FaultPlan::default(),
            Some(Ok(faults)) => FaultPlan::new(faults),
            Some(Err(why)) => {
                problems.push(format!("{FAULT_VAR}: {why}"));
                FaultPlan::default()
            }
        };
        Config {
            version,
            devices,
            faults,
            streams: StreamMode::default(),
            null_stream_delay: Duration::ZERO,
            init_error: init_error(&problems),
            problems,
        }
    }

    /// Reads the configuration from the environment, reporting every problem on stderr.
    fn from_environment() -> Config {
        let mut problems = Vec::new();
        let mut value = |name: &str| match read_variable(name) {
            Ok(v) => v,
            Err(why) => {
                problems.push(why);
                None
            }
        };
        let version = value(ROCM_VERSION_VAR);
        let devices = value(DEVICES_VAR);
        let fault = value(FAULT_VAR);
        let streams = value(STREAMS_VAR);
        let delay = value(NULL_STREAM_DELAY_VAR);
        let mut config =
            Config::from_values(version.as_deref(), devices.as_deref(), fault.as_deref());
        match set(streams.as_deref()).map(StreamMode::parse) {
            None => {}
            Some(Ok(mode)) => config.streams = mode,
            Some(Err(why)) => problems.push(format!("{STREAMS_VAR}: {why}")),
        }
        match set(delay.as_deref()).map(parse_delay) {
            None => {}
            Some(Ok(delay)) => config.null_stream_delay = delay,
            Some(Err(why)) => problems.push(format!("{NULL_STREAM_DELAY_VAR}: {why}")),
        }
        if !problems.is_empty() {
            config.problems.append(&mut problems);
            config.init_error = init_error(&config.problems);
        }
        let mut stderr = std::io::stderr().lock();
        for problem in &config.problems {
            // A failed write to stderr has nowhere else to go; hipInit still fails.
            let _ = writeln!(stderr, "hipfile-emu: invalid configuration: {problem}");
        }
        config
    }
}

/// The text of `hipErrorNotInitialized` for `problems`, or `None` for none. The string lives
/// as long as the process, since a caller may hold the pointer `hipGetErrorString` gave it
/// after the configuration changes; each distinct text is kept once.
fn init_error(problems: &[String]) -> Option<&'static CStr> {
    static TEXTS: Mutex<Vec<&'static CStr>> = Mutex::new(Vec::new());
    if problems.is_empty() {
        return None;
    }
    let text = format!(
        "initialization error: the emulated runtime's configuration is invalid: {}",
        problems.join("; and ")
    );
    // The environment holds no NUL; a value given to `from_values` might.
    let text = CString::new(text.replace('\0', "\\0")).unwrap_or_default();
    let mut texts = TEXTS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&kept) = texts.iter().find(|t| **t == text.as_c_str()) {
        return Some(kept);
    }
    let kept: &'static CStr = Box::leak(text.into_boxed_c_str());
    texts.push(kept);
    Some(kept)
}

/// A value that counts as set: trimmed, not empty.
fn set(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

/// One variable: `Ok(None)` when unset; an error for a value that is not UTF-8.
// The runtime's own variables are read here and nowhere else (see the module documentation).
#[allow(clippy::disallowed_methods)]
fn read_variable(name: &str) -> Result<Option<String>, String> {
    match std::env::var_os(name) {
        None => Ok(None),
        Some(value) => value
            .into_string()
            .map(Some)
            .map_err(|v| format!("{name}: {v:?} is not UTF-8")),
    }
}

/// The configuration in force; `None` until first needed.
static CURRENT: RwLock<Option<Arc<Config>>> = RwLock::new(None);

/// The configuration in force, read from the environment on first use.
pub fn current() -> Arc<Config> {
    if let Some(config) = CURRENT
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
    {
        return Arc::clone(config);
    }
    let mut slot = CURRENT.write().unwrap_or_else(PoisonError::into_inner);
    Arc::clone(slot.get_or_insert_with(|| Arc::new(Config::from_environment())))
}

/// The configuration in force, for a call that needs a device.
///
/// # Errors
///
/// `hipErrorNotInitialized` while the configuration is invalid (the runtime refuses to
/// initialise); `hipErrorInvalidDevice` when the runtime emulates no device
/// (`HIPFILE_EMU_DEVICES=0`), as ROCm answers every such call on a machine without a GPU.
pub fn with_device() -> Result<Arc<Config>, i32> {
    let config = current();
    if !config.problems.is_empty() {
        return Err(NOT_INITIALIZED);
    }
    if config.devices == 0 {
        return Err(INVALID_DEVICE);
    }
    Ok(config)
}

/// Reads the environment again and puts the result in force; returns it.
pub fn reload() -> Arc<Config> {
    let fresh = Arc::new(Config::from_environment());
    *CURRENT.write().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&fresh));
    fresh
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_modes_parse() {
        assert_eq!(
            StreamMode::parse("queued"),
            Ok(StreamMode::Queued),
            "the asynchronous mode"
        );
        assert_eq!(
            StreamMode::parse(" inline-when-idle "),
            Ok(StreamMode::InlineWhenIdle)
        );
        assert!(StreamMode::parse("async").unwrap_err().contains("queued"));
        assert_eq!(Config::default().streams, StreamMode::InlineWhenIdle);
    }

    #[test]
    fn delays_parse() {
        assert_eq!(parse_delay("250"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_delay("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_delay(" 20ms "), Ok(Duration::from_millis(20)));
        assert_eq!(parse_delay("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_delay("0"), Ok(Duration::ZERO));
        assert_eq!(parse_delay("60s"), Ok(MAX_NULL_STREAM_DELAY));
        for bad in [
            "61s",
            "ms",
            "-1ms",
            "1.5ms",
            "5 ms",
            "5h",
            "",
            "99999999999999999999",
        ] {
            assert!(parse_delay(bad).unwrap_err().contains("`ms`"), "{bad}");
        }
        assert_eq!(Config::default().null_stream_delay, Duration::ZERO);
    }

    #[test]
    fn versions_parse_and_encode() {
        assert_eq!(
            RocmVersion::parse("5.7").unwrap(),
            RocmVersion::new(5, 7, 0)
        );
        assert_eq!(RocmVersion::parse("7.2.1").unwrap().encoded(), 70_200_001);
        assert_eq!(RocmVersion::parse("6.0").unwrap().encoded(), 60_000_000);
        assert_eq!(RocmVersion::DEFAULT.encoded(), 70_200_000);
        assert_eq!(RocmVersion::new(199, 99, 99_999).encoded(), 1_999_999_999);
        for bad in ["7", "7.x", "7.2.1.0", "", "7.100", "200.0", "-1.0"] {
            assert!(RocmVersion::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn versions_compare() {
        let v = RocmVersion::new(6, 2, 0);
        assert!(v.at_least(6, 2));
        assert!(v.at_least(5, 9));
        assert!(!v.at_least(6, 3));
        assert!(!v.at_least(7, 0));
    }

    #[test]
    fn defaults_apply_when_unset_or_empty() {
        let c = Config::from_values(None, Some(""), Some(" "));
        assert_eq!(c.version, RocmVersion::DEFAULT);
        assert_eq!(c.devices, 1);
        assert_eq!(c.faults.faults().count(), 0);
        assert!(c.problems.is_empty());
    }

    #[test]
    fn values_are_used() {
        let c = Config::from_values(Some("5.7"), Some("4"), Some("read:EIO"));
        assert_eq!(c.version, RocmVersion::new(5, 7, 0));
        assert_eq!(c.devices, 4);
        assert_eq!(c.faults.faults().count(), 1);
        assert!(c.problems.is_empty());
    }

    #[test]
    fn every_bad_value_is_a_problem() {
        let c = Config::from_values(Some("seven"), Some("17"), Some("read:EFOO"));
        assert_eq!(c.problems.len(), 3, "{:?}", c.problems);
        assert!(c.problems[0].starts_with(ROCM_VERSION_VAR));
        assert!(c.problems[1].starts_with(DEVICES_VAR));
        assert!(c.problems[2].contains("`read:EFOO`"));
        assert_eq!(c.version, RocmVersion::DEFAULT);
        assert_eq!(c.devices, 1);
        for bad in ["-1", "x", "1.5"] {
            assert_eq!(
                Config::from_values(None, Some(bad), None).problems.len(),
                1,
                "{bad}"
            );
        }
    }

    #[test]
    fn the_init_error_names_every_problem_and_is_kept_once() {
        assert_eq!(Config::from_values(None, None, None).init_error, None);
        let c = Config::from_values(Some("seven"), None, Some("read:EFOO"));
        let text = c.init_error.unwrap().to_str().unwrap();
        assert!(text.starts_with("initialization error: "), "{text}");
        for needle in [
            ROCM_VERSION_VAR,
            "`seven`",
            FAULT_VAR,
            "`read:EFOO`",
            "op:ERRNO[:N]",
        ] {
            assert!(text.contains(needle), "{needle:?} not in {text:?}");
        }
        let again = Config::from_values(Some("seven"), None, Some("read:EFOO"));
        assert_eq!(
            again.init_error.unwrap().as_ptr(),
            c.init_error.unwrap().as_ptr()
        );
        let nul = Config::from_values(None, Some("1\0"), None);
        assert!(nul.init_error.unwrap().to_str().unwrap().contains("1\\0"));
    }

    #[test]
    fn zero_devices_is_a_machine_without_a_gpu() {
        let c = Config::from_values(None, Some("0"), None);
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(c.devices, 0);
    }
}
