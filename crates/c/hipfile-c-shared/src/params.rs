//! `hipFileGetParameter{SizeT,Bool,String}` and `hipFileSetParameter{SizeT,Bool,String}`,
//! and the settings they keep, with the driver setters of `props.rs`, for the next open of
//! the process-wide driver.
//!
//! Every enum value of the header has a place (docs/DECISIONS.md, "C ABI: properties,
//! setters and parameters", has the table): *applied* values become the driver's
//! [`ConfigBuilder`] overrides (they win over the environment); *recorded* values are kept
//! and reported back but change nothing, since this library has no such mechanism; *fixed*
//! values are limits of ours that a set can only confirm (another value is
//! `hipFileDriverUnsupportedLimit`).
//!
//! Setting a parameter while the driver is open (use count above 0) is
//! `hipFileDriverAlreadyOpen`, as in cuFile; getting works at any time and reports what the
//! open driver uses, or, when it is closed, what the next open would use (the settings over
//! the environment over the defaults).
//!
//! # Safety
//!
//! Value pointers are the caller's, checked for NULL before use; a string is read only up to
//! its NUL, and written only within the `len` bytes the caller gave.

use crate::panic::boundary;
use crate::state::{self, State};
use crate::types::*;
use facade::{Config, ConfigBuilder, Driver, FallbackKnobs, MemoryTypes};
use std::ffi::{CStr, CString, c_char, c_int, c_uint};
use std::sync::OnceLock;

const INTERNAL: hipFileError_t = hipFileError_t::code(hipFileInternalError);

/// 1 KiB: the unit of every `...KB` parameter and driver property, as in cuFile.
pub(crate) const KIB: u64 = 1024;

/// The most requests one batch may hold (`hipFileBatchIOSetUp`'s limit).
pub(crate) const MAX_BATCH_IO: u64 = 128;

/// The longest string parameter, without its NUL: `PATH_MAX` less one.
const MAX_STRING: usize = 4095;

/// The logging levels a `hipFileParamLoggingLevel` may name (cuFile's), case-insensitive.
const LOG_LEVELS: [&str; 6] = ["TRACE", "DEBUG", "INFO", "NOTICE", "WARN", "ERROR"];

/// What a program set, through the parameters and the driver setters. `None` and the
/// defaults below mean "as the environment or the built-in default says".
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) allow_compat_mode: Option<bool>,
    pub(crate) force_compat_mode: Option<bool>,
    pub(crate) stats_level: Option<u32>,
    pub(crate) io_threads: Option<usize>,
    /// `Some(false)`: one I/O worker, whatever `io_threads` says; `None`: as set elsewhere.
    pub(crate) parallel_io: Option<bool>,
    /// Bytes; from the largest direct I/O size.
    pub(crate) task_size: Option<u64>,
    /// Bytes; the staging pool holds at most this (and at most `pinned_size`).
    pub(crate) cache_size: Option<u64>,
    /// Bytes; the staging pool's pinned memory limit.
    pub(crate) pinned_size: Option<u64>,
    /// Bytes; from the minimum size worth splitting over the workers.
    pub(crate) small_io_threshold: Option<u64>,
    /// Recorded: requests complete by waiting, never by polling.
    pub(crate) poll_mode: bool,
    /// Recorded, KiB.
    pub(crate) poll_threshold_kib: u64,
    /// Recorded.
    pub(crate) queue_depth: u64,
    /// Recorded; `None` reports the I/O thread count.
    pub(crate) request_parallelism: Option<u64>,
    /// Recorded, milliseconds; 0: no cap of ours (a batch waits as long as its caller says).
    pub(crate) batch_timeout_ms: u64,
    /// Recorded booleans: `FsMiscApiCheckAggressive`, `ProfileNvtx`, `ForceOdirectMode`,
    /// `SkipTopologyDetection`, `StreamMemopsBypass`, by [`recorded_slot`].
    pub(crate) recorded: [bool; 5],
    /// Recorded strings, by `hipFileStringConfigParameter_t` value; `None`: the default.
    pub(crate) strings: [Option<CString>; 3],
    /// cuFile's POSIX pool slabs (size in KiB, count), in ascending size: applied as a limit
    /// on the staging pool (their total), recorded as given.
    pub(crate) posix_slabs: Option<Vec<(u64, u64)>>,
    /// cuFile's GPU bounce-buffer slabs (size in KiB, count): recorded (hipfile stages in
    /// pinned host memory, never in device memory).
    pub(crate) gpu_slabs: Option<Vec<(u64, u64)>>,
}

impl Settings {
    /// Nothing set.
    pub(crate) const fn new() -> Settings {
        Settings {
            allow_compat_mode: None,
            force_compat_mode: None,
            stats_level: None,
            io_threads: None,
            parallel_io: None,
            task_size: None,
            cache_size: None,
            pinned_size: None,
            small_io_threshold: None,
            poll_mode: false,
            poll_threshold_kib: 4,
            queue_depth: 128,
            request_parallelism: None,
            batch_timeout_ms: 0,
            recorded: [false; 5],
            strings: [None, None, None],
            posix_slabs: None,
            gpu_slabs: None,
        }
    }

    /// The bytes the POSIX pool slabs add up to, when they were set.
    pub(crate) fn posix_pool_bytes(&self) -> Option<u64> {
        self.posix_slabs.as_ref().map(|slabs| {
            slabs
                .iter()
                .map(|&(kib, count)| kib.saturating_mul(KIB).saturating_mul(count))
                .fold(0u64, u64::saturating_add)
        })
    }

    /// The overrides a driver opened with these settings gets.
    pub(crate) fn builder(&self) -> ConfigBuilder {
        let mut b = ConfigBuilder::new().memory_types(memory_types());
        if let Some(on) = self.allow_compat_mode {
            b = b.allow_compat_mode(on);
        }
        if let Some(on) = self.force_compat_mode {
            b = b.force_compat_mode(on);
        }
        if let Some(level) = self.stats_level {
            b = b.stats_level(level);
        }
        if self.parallel_io == Some(false) {
            b = b.io_threads(1);
        } else if let Some(n) = self.io_threads {
            b = b.io_threads(n);
        }
        if let Some(bytes) = self.task_size {
            b = b.task_size(bytes);
        }
        if let Some(bytes) = self.small_io_threshold {
            b = b.small_io_threshold(bytes);
        }
        // Every limit set bounds the one pool: it holds at most the smallest.
        let staging = [self.cache_size, self.pinned_size, self.posix_pool_bytes()]
            .into_iter()
            .flatten()
            .min();
        if let Some(bytes) = staging {
            b = b.staging_memory(bytes);
        }
        b
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings::new()
    }
}

/// The settings of the next open, and those the open driver was opened with.
#[derive(Debug)]
pub(crate) struct Params {
    /// What the next open uses.
    pub(crate) pending: Settings,
    /// What the open driver was opened with (meaningless while it is closed).
    pub(crate) live: Settings,
    /// cuFile's peer-to-peer flags recorded for each kind of storage
    /// (`cuFileDriverSetP2PFlags`, `extra.rs`), by `CUfileDriverStatusFlags_t` value.
    pub(crate) p2p: [Option<c_uint>; 14],
    /// Whether the configuration file was read (once, at the first lock of the state).
    pub(crate) file_read: bool,
    /// The configuration file's settings: its applied values lie below the environment
    /// ([`ConfigBuilder::defaults`]); its recorded ones were the first pending settings.
    pub(crate) file: Option<Settings>,
    /// Why the configuration file cannot be used: every open fails then.
    pub(crate) file_error: Option<String>,
}

impl Params {
    pub(crate) const fn new() -> Params {
        Params {
            pending: Settings::new(),
            live: Settings::new(),
            p2p: [None; 14],
            file_read: false,
            file: None,
            file_error: None,
        }
    }

    /// The configuration a driver opened with `settings` gets: their overrides over the
    /// environment over the configuration file's values over the defaults.
    pub(crate) fn builder(&self, settings: &Settings) -> ConfigBuilder {
        match &self.file {
            Some(file) => settings.builder().defaults(file.builder()),
            None => settings.builder(),
        }
    }

    /// Takes in what the configuration file's reader found.
    pub(crate) fn load_file(&mut self, source: FileSource) {
        match source {
            FileSource::Absent => {}
            FileSource::Invalid(why) => self.file_error = Some(why),
            FileSource::Entries(entries) => match settings_from(&entries) {
                Ok(file) => {
                    // The recorded values start the pending settings, which a program's
                    // calls then change; the applied ones stay in the file's layer, below
                    // the environment.
                    self.pending = Settings {
                        allow_compat_mode: None,
                        force_compat_mode: None,
                        stats_level: None,
                        io_threads: None,
                        parallel_io: None,
                        task_size: None,
                        cache_size: None,
                        pinned_size: None,
                        small_io_threshold: None,
                        posix_slabs: None,
                        ..file.clone()
                    };
                    self.file = Some(file);
                }
                Err((_, why)) => self.file_error = Some(why),
            },
        }
    }
}

/// One value of a configuration file, as the parameter call that sets the same would take
/// it (sizes in the parameter's unit, KiB for the `...KB` ones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileValue {
    /// A `size_t` parameter (`hipFileSizeTConfigParameter_t`).
    Size(hipFileSizeTConfigParameter_t, u64),
    /// A boolean parameter.
    Bool(hipFileBoolConfigParameter_t, bool),
    /// A string parameter.
    Text(hipFileStringConfigParameter_t, CString),
    /// A slab array: sizes in KiB and counts.
    Slabs(crate::extra::SlabPool, Vec<(u64, u64)>),
}

/// A value of a configuration file and the key it came from (for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// The key, its path in the file (`properties.max_direct_io_size_kb`).
    pub key: String,
    /// What it sets.
    pub value: FileValue,
}

/// What a configuration file's reader found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileSource {
    /// No file: the environment and the defaults.
    Absent,
    /// The file's values, each checked as its parameter call checks it.
    Entries(Vec<FileEntry>),
    /// A file that cannot be used, and why (the reader has said so already): every open
    /// fails with [`crate::FILE_INVALID`].
    Invalid(String),
}

/// Checks a configuration file's values as the parameter calls check them: the key of the
/// first one refused and what is wrong with it (`KEY: VALUE is outside the bounds hipfile
/// accepts`), for the file's reader to report before it hands the values over.
///
/// # Errors
///
/// The first value refused.
pub fn check_file_entries(entries: &[FileEntry]) -> Result<(), (String, String)> {
    settings_from(entries).map(|_| ())
}

/// The settings a file's entries make, checked as the parameter calls check them; the first
/// entry refused, its key and what is wrong, otherwise.
fn settings_from(entries: &[FileEntry]) -> Result<Settings, (String, String)> {
    let mut s = Settings::new();
    for FileEntry { key, value } in entries {
        let refused = |code: hipFileOpError_t, detail: String| {
            let what = if code == hipFileDriverUnsupportedLimit {
                "outside the bounds hipfile accepts"
            } else {
                "not a value hipfile accepts"
            };
            Err((key.clone(), format!("{key}: {detail} is {what}")))
        };
        match value {
            FileValue::Size(param, v) => {
                if let Err(code) = set_size(*param, *v, &mut s, None) {
                    let bounds = size_bounds(*param, None)
                        .map(|(lo, hi)| format!(" ({lo} to {hi})"))
                        .unwrap_or_default();
                    return refused(code, format!("{v}{bounds}"));
                }
            }
            FileValue::Bool(param, v) => {
                if let Err(code) = set_bool(*param, *v, &mut s) {
                    return refused(code, v.to_string());
                }
            }
            FileValue::Text(param, v) => {
                let Some(slot) = string_slot(*param) else {
                    return refused(hipFileInvalidValue, format!("{v:?}"));
                };
                match string_value(slot, v) {
                    Ok(text) => s.strings[slot] = Some(text),
                    Err(code) => return refused(code, format!("{v:?}")),
                }
            }
            FileValue::Slabs(pool, slabs) => {
                if let Err(code) = crate::extra::check_slabs(*pool, slabs) {
                    return refused(code, format!("{slabs:?} (size in KiB, count)"));
                }
                match pool {
                    crate::extra::SlabPool::Posix => s.posix_slabs = Some(slabs.clone()),
                    crate::extra::SlabPool::GpuBounce => s.gpu_slabs = Some(slabs.clone()),
                }
            }
        }
    }
    Ok(s)
}

/// The memory rule of the library this copy of the implementation is linked into, chosen
/// once ([`choose_memory_types`]); hipFile's until then.
static MEMORY_TYPES: OnceLock<MemoryTypes> = OnceLock::new();

/// Chooses the memory rule every driver this library opens gets (`Config::memory_types`):
/// which memory its registrations and I/O accept. `libcufile.so.0` chooses cuFile's when it
/// is loaded, before any of its functions can run; `libhipfile.so.0` never calls it, and
/// keeps hipFile's. The first choice stands: a later one changes nothing.
pub fn choose_memory_types(rule: MemoryTypes) {
    let _ = MEMORY_TYPES.set(rule);
}

/// The library's memory rule ([`choose_memory_types`]).
pub(crate) fn memory_types() -> MemoryTypes {
    MEMORY_TYPES.get().copied().unwrap_or_default()
}

/// The driver's configuration and the settings behind it: the open driver's, or those the
/// next open would settle.
pub(crate) fn current(st: &State) -> (Config, &Settings) {
    match &st.driver {
        Some(d) if st.count > 0 => (d.config().clone(), &st.params.live),
        _ => (
            st.params.builder(&st.params.pending).build_from_env(),
            &st.params.pending,
        ),
    }
}

/// The staging pool's limit as the cache-size property reports it, in bytes.
pub(crate) fn cache_bytes(config: &Config, settings: &Settings) -> u64 {
    settings
        .cache_size
        .unwrap_or(config.fallback.staging_memory)
}

/// The staging pool's limit as the pinned-memory property reports it, in bytes.
pub(crate) fn pinned_bytes(config: &Config, settings: &Settings) -> u64 {
    settings
        .pinned_size
        .unwrap_or(config.fallback.staging_memory)
}

/// The bytes of one staging buffer, for `config`.
pub(crate) fn chunk_bytes(config: &Config) -> u64 {
    Driver::staging_chunk_size(&config.fallback) as u64
}

/// `kib` KiB in bytes, when that lies in `min..=max` bytes.
pub(crate) fn kib_within(kib: u64, min: u64, max: u64) -> Result<u64, hipFileOpError_t> {
    kib.checked_mul(KIB)
        .filter(|b| (min..=max).contains(b))
        .ok_or(hipFileDriverUnsupportedLimit)
}

/// The largest direct I/O size in KiB: the task size.
pub(crate) fn set_task_kib(s: &mut Settings, kib: u64) -> Result<(), hipFileOpError_t> {
    s.task_size = Some(kib_within(
        kib,
        FallbackKnobs::MIN_TASK_SIZE,
        FallbackKnobs::MAX_TASK_SIZE,
    )?);
    Ok(())
}

/// The cache size in KiB: a limit on the staging pool.
pub(crate) fn set_cache_kib(s: &mut Settings, kib: u64) -> Result<(), hipFileOpError_t> {
    s.cache_size = Some(kib_within(
        kib,
        FallbackKnobs::MIN_STAGING_MEMORY,
        FallbackKnobs::MAX_STAGING_MEMORY,
    )?);
    Ok(())
}

/// The pinned memory size in KiB: a limit on the staging pool.
pub(crate) fn set_pinned_kib(s: &mut Settings, kib: u64) -> Result<(), hipFileOpError_t> {
    s.pinned_size = Some(kib_within(
        kib,
        FallbackKnobs::MIN_STAGING_MEMORY,
        FallbackKnobs::MAX_STAGING_MEMORY,
    )?);
    Ok(())
}

/// Where a recorded boolean lives in [`Settings::recorded`].
fn recorded_slot(param: hipFileBoolConfigParameter_t) -> Option<usize> {
    match param {
        hipFileParamFsMiscApiCheckAggressive => Some(0),
        hipFileParamProfileNvtx => Some(1),
        hipFileParamForceOdirectMode => Some(2),
        hipFileParamSkipTopologyDetection => Some(3),
        hipFileParamStreamMemopsBypass => Some(4),
        _ => None,
    }
}

/// The value of a `size_t` parameter.
fn get_size(param: hipFileSizeTConfigParameter_t, st: &State) -> Option<u64> {
    let (config, s) = current(st);
    let knobs = config.fallback;
    Some(match param {
        hipFileParamProfileStats => u64::from(config.stats_level),
        hipFileParamExecutionMaxIOQueueDepth => s.queue_depth,
        hipFileParamExecutionMaxIOThreads => knobs.io_threads as u64,
        hipFileParamExecutionMinIOThresholdSizeKB => knobs.small_io_threshold / KIB,
        hipFileParamExecutionMaxRequestParallelism => {
            s.request_parallelism.unwrap_or(knobs.io_threads as u64)
        }
        hipFileParamPropertiesMaxDirectIOSizeKB => knobs.task_size / KIB,
        hipFileParamPropertiesMaxDeviceCacheSizeKB => cache_bytes(&config, s) / KIB,
        hipFileParamPropertiesPerBufferCacheSizeKB => chunk_bytes(&config) / KIB,
        hipFileParamPropertiesMaxDevicePinnedMemSizeKB => pinned_bytes(&config, s) / KIB,
        hipFileParamPropertiesIOBatchsize => MAX_BATCH_IO,
        hipFileParamPollthresholdSizeKB => s.poll_threshold_kib,
        hipFileParamPropertiesBatchIOTimeoutMs => s.batch_timeout_ms,
        _ => return None,
    })
}

/// The values [`hipFileSetParameterSizeT`] accepts for `param`, least and greatest, in the
/// parameter's unit (KiB for the `...KB` sizes); `fixed` is the current value of a fixed
/// parameter, its only value. `None` for a value that is not one of the enum's.
fn size_bounds(param: hipFileSizeTConfigParameter_t, fixed: Option<u64>) -> Option<(u64, u64)> {
    Some(match param {
        hipFileParamProfileStats | hipFileParamPropertiesBatchIOTimeoutMs => {
            (0, u64::from(u32::MAX))
        }
        hipFileParamExecutionMaxIOQueueDepth | hipFileParamExecutionMaxRequestParallelism => {
            (1, u64::MAX)
        }
        hipFileParamExecutionMaxIOThreads => (1, FallbackKnobs::MAX_IO_THREADS as u64),
        hipFileParamExecutionMinIOThresholdSizeKB => {
            (0, FallbackKnobs::MAX_SMALL_IO_THRESHOLD / KIB)
        }
        hipFileParamPropertiesMaxDirectIOSizeKB => (
            FallbackKnobs::MIN_TASK_SIZE.div_ceil(KIB),
            FallbackKnobs::MAX_TASK_SIZE / KIB,
        ),
        hipFileParamPropertiesMaxDeviceCacheSizeKB
        | hipFileParamPropertiesMaxDevicePinnedMemSizeKB => (
            FallbackKnobs::MIN_STAGING_MEMORY.div_ceil(KIB),
            FallbackKnobs::MAX_STAGING_MEMORY / KIB,
        ),
        hipFileParamPropertiesPerBufferCacheSizeKB | hipFileParamPropertiesIOBatchsize => {
            let v = fixed?;
            (v, v)
        }
        hipFileParamPollthresholdSizeKB => (0, u64::MAX),
        _ => return None,
    })
}

/// Sets a `size_t` parameter in `s`; `fixed` is the current value of a fixed one. The value
/// must lie in [`size_bounds`].
fn set_size(
    param: hipFileSizeTConfigParameter_t,
    value: u64,
    s: &mut Settings,
    fixed: Option<u64>,
) -> Result<(), hipFileOpError_t> {
    let (min, max) = size_bounds(param, fixed).ok_or(hipFileInvalidValue)?;
    if !(min..=max).contains(&value) {
        return Err(hipFileDriverUnsupportedLimit);
    }
    match param {
        // In bounds, so it fits a u32.
        hipFileParamProfileStats => s.stats_level = Some(value as u32),
        hipFileParamExecutionMaxIOQueueDepth => s.queue_depth = value,
        // In bounds, so it fits a usize.
        hipFileParamExecutionMaxIOThreads => s.io_threads = Some(value as usize),
        hipFileParamExecutionMinIOThresholdSizeKB => {
            s.small_io_threshold =
                Some(kib_within(value, 0, FallbackKnobs::MAX_SMALL_IO_THRESHOLD)?);
        }
        hipFileParamExecutionMaxRequestParallelism => s.request_parallelism = Some(value),
        hipFileParamPropertiesMaxDirectIOSizeKB => set_task_kib(s, value)?,
        hipFileParamPropertiesMaxDeviceCacheSizeKB => set_cache_kib(s, value)?,
        hipFileParamPropertiesMaxDevicePinnedMemSizeKB => set_pinned_kib(s, value)?,
        // Fixed: the bounds admit only the value it has.
        hipFileParamPropertiesPerBufferCacheSizeKB | hipFileParamPropertiesIOBatchsize => {}
        hipFileParamPollthresholdSizeKB => s.poll_threshold_kib = value,
        hipFileParamPropertiesBatchIOTimeoutMs => s.batch_timeout_ms = value,
        _ => return Err(hipFileInvalidValue),
    }
    Ok(())
}

/// The least and greatest value [`hipFileSetParameterSizeT`] accepts for `param`, in its
/// unit: what cuFile's `cuFileGetParameterMinMaxValue` reports (hipFile has no such call).
/// A fixed parameter's bounds are both its value.
///
/// # Errors
///
/// `hipFileInvalidValue` for a value that is not one of the enum's.
pub fn size_parameter_bounds(
    param: hipFileSizeTConfigParameter_t,
) -> Result<(u64, u64), hipFileError_t> {
    boundary(Err(INTERNAL), || {
        let st = state::lock();
        size_bounds(param, get_size(param, &st)).ok_or(hipFileError_t::code(hipFileInvalidValue))
    })
}

/// The value of a boolean parameter.
fn get_bool(param: hipFileBoolConfigParameter_t, st: &State) -> Option<bool> {
    let (config, s) = current(st);
    if let Some(slot) = recorded_slot(param) {
        return Some(s.recorded[slot]);
    }
    Some(match param {
        hipFileParamPropertiesUsePollMode => s.poll_mode,
        hipFileParamPropertiesAllowCompatMode => config.allow_compat_mode,
        hipFileParamForceCompatMode => config.force_compat_mode,
        hipFileParamExecutionParallelIO => s
            .parallel_io
            .or(st.params.file.as_ref().and_then(|f| f.parallel_io))
            .unwrap_or(true),
        // Only device memory is accepted; the fastpath is peer-to-peer DMA, the fallback not.
        hipFileParamPropertiesAllowSystemMemory => false,
        hipFileParamUsePcip2pdma => !config.force_compat_mode,
        hipFileParamPreferIOUring => false,
        _ => return None,
    })
}

/// Sets a boolean parameter in `s`.
fn set_bool(
    param: hipFileBoolConfigParameter_t,
    value: bool,
    s: &mut Settings,
) -> Result<(), hipFileOpError_t> {
    if let Some(slot) = recorded_slot(param) {
        s.recorded[slot] = value;
        return Ok(());
    }
    match param {
        hipFileParamPropertiesUsePollMode => s.poll_mode = value,
        hipFileParamPropertiesAllowCompatMode => s.allow_compat_mode = Some(value),
        hipFileParamForceCompatMode => s.force_compat_mode = Some(value),
        hipFileParamExecutionParallelIO => s.parallel_io = Some(value),
        hipFileParamUsePcip2pdma => s.force_compat_mode = Some(!value),
        hipFileParamPropertiesAllowSystemMemory | hipFileParamPreferIOUring => {
            if value {
                return Err(hipFileDriverUnsupportedLimit);
            }
        }
        _ => return Err(hipFileInvalidValue),
    }
    Ok(())
}

/// The index of a string parameter in [`Settings::strings`].
fn string_slot(param: hipFileStringConfigParameter_t) -> Option<usize> {
    match param {
        hipFileParamLoggingLevel | hipFileParamEnvLogfilePath | hipFileParamLogDir => {
            usize::try_from(param).ok()
        }
        _ => None,
    }
}

/// The value of a string parameter: what was set, else the default ("WARN": the library
/// writes warnings, each once, to stderr; no log file or directory).
fn get_string(slot: usize, s: &Settings) -> CString {
    match s.strings.get(slot).and_then(Option::as_ref) {
        Some(v) => v.clone(),
        None if slot == 0 => c"WARN".to_owned(),
        None => CString::default(),
    }
}

/// Checks a string parameter's value, upper-casing a logging level.
fn string_value(slot: usize, text: &CStr) -> Result<CString, hipFileOpError_t> {
    let bytes = text.to_bytes();
    if bytes.len() > MAX_STRING {
        return Err(hipFileInvalidValue);
    }
    if slot == 0 {
        let level = std::str::from_utf8(bytes)
            .map_err(|_| hipFileInvalidValue)?
            .trim()
            .to_ascii_uppercase();
        if !LOG_LEVELS.contains(&level.as_str()) {
            return Err(hipFileInvalidValue);
        }
        return CString::new(level).map_err(|_| hipFileInvalidValue);
    }
    Ok(text.to_owned())
}

/// Runs `change` on the pending settings when the driver is closed.
fn set_pending(
    change: impl FnOnce(&mut Settings, &State) -> Result<(), hipFileOpError_t>,
) -> hipFileError_t {
    let mut st = state::lock();
    if st.count > 0 {
        return hipFileError_t::code(hipFileDriverAlreadyOpen);
    }
    let mut next = st.params.pending.clone();
    match change(&mut next, &st) {
        Ok(()) => {
            st.params.pending = next;
            hipFileError_t::SUCCESS
        }
        Err(code) => hipFileError_t::code(code),
    }
}

/// `hipFileError_t hipFileGetParameterSizeT(hipFileSizeTConfigParameter_t param, size_t
/// *value)` — stores the parameter's value in `*value`: the open driver's, or what the next
/// open would use. Sizes named `...KB` are in KiB.
///
/// # Errors
///
/// `hipFileInvalidValue` for NULL or a value that is not one of the enum's.
///
/// # Safety
///
/// `value` is NULL or writable.
pub unsafe extern "C" fn hipFileGetParameterSizeT(
    param: hipFileSizeTConfigParameter_t,
    value: *mut usize,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        if value.is_null() {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        let Some(v) = get_size(param, &state::lock()) else {
            return hipFileError_t::code(hipFileInvalidValue);
        };
        // SAFETY: non-NULL, and the caller vouches that it is writable.
        unsafe { value.write(usize::try_from(v).unwrap_or(usize::MAX)) };
        hipFileError_t::SUCCESS
    })
}

/// `hipFileError_t hipFileSetParameterSizeT(hipFileSizeTConfigParameter_t param, size_t
/// value)` — sets the parameter for the next open of the driver. Sizes named `...KB` are
/// in KiB.
///
/// # Errors
///
/// `hipFileInvalidValue` for a value of `param` that is not one of the enum's;
/// `hipFileDriverAlreadyOpen` while the driver is open; `hipFileDriverUnsupportedLimit` for
/// a value outside the parameter's bounds (or another than a fixed parameter's own).
pub extern "C" fn hipFileSetParameterSizeT(
    param: hipFileSizeTConfigParameter_t,
    value: usize,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        if !(hipFileParamProfileStats..=hipFileParamPropertiesBatchIOTimeoutMs).contains(&param) {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        set_pending(|s, st| {
            let fixed = get_size(param, st);
            set_size(param, value as u64, s, fixed)
        })
    })
}

/// `hipFileError_t hipFileGetParameterBool(hipFileBoolConfigParameter_t param, bool
/// *value)` — stores the parameter's value in `*value`: the open driver's, or what the next
/// open would use.
///
/// # Errors
///
/// `hipFileInvalidValue` for NULL or a value that is not one of the enum's.
///
/// # Safety
///
/// `value` is NULL or writable.
pub unsafe extern "C" fn hipFileGetParameterBool(
    param: hipFileBoolConfigParameter_t,
    value: *mut bool,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        if value.is_null() {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        let Some(v) = get_bool(param, &state::lock()) else {
            return hipFileError_t::code(hipFileInvalidValue);
        };
        // SAFETY: non-NULL, and the caller vouches that it is writable.
        unsafe { value.write(v) };
        hipFileError_t::SUCCESS
    })
}

/// `hipFileError_t hipFileSetParameterBool(hipFileBoolConfigParameter_t param, bool value)`
/// — sets the parameter for the next open of the driver.
///
/// # Errors
///
/// `hipFileInvalidValue` for a value of `param` that is not one of the enum's;
/// `hipFileDriverAlreadyOpen` while the driver is open; `hipFileDriverUnsupportedLimit` for
/// `true` to `AllowSystemMemory` or `PreferIOUring`, which this library does not do.
pub extern "C" fn hipFileSetParameterBool(
    param: hipFileBoolConfigParameter_t,
    value: bool,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        if !(hipFileParamPropertiesUsePollMode..=hipFileParamStreamMemopsBypass).contains(&param) {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        set_pending(|s, _| set_bool(param, value, s))
    })
}

/// `hipFileError_t hipFileGetParameterString(hipFileStringConfigParameter_t param, char
/// *desc_str, int len)` — copies the parameter's value, NUL-terminated, into the `len`
/// bytes at `desc_str`.
///
/// # Errors
///
/// `hipFileInvalidValue` for NULL, a value of `param` that is not one of the enum's, or
/// `len` too small for the value and its NUL (nothing is written then).
///
/// # Safety
///
/// `desc_str` is NULL or points to `len` writable bytes.
pub unsafe extern "C" fn hipFileGetParameterString(
    param: hipFileStringConfigParameter_t,
    desc_str: *mut c_char,
    len: c_int,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        let Some(slot) = string_slot(param) else {
            return hipFileError_t::code(hipFileInvalidValue);
        };
        if desc_str.is_null() {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        let value = {
            let st = state::lock();
            get_string(slot, current(&st).1)
        };
        let bytes = value.as_bytes_with_nul();
        if usize::try_from(len).map_or(true, |room| room < bytes.len()) {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        // SAFETY: `desc_str` is non-NULL and has `len` ≥ `bytes.len()` writable bytes (the
        // caller's contract); the source is ours and does not overlap it.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), desc_str.cast::<u8>(), bytes.len())
        };
        hipFileError_t::SUCCESS
    })
}

/// `hipFileError_t hipFileSetParameterString(hipFileStringConfigParameter_t param, const
/// char *desc_str)` — sets the parameter for the next open of the driver. A logging level
/// is one of TRACE, DEBUG, INFO, NOTICE, WARN or ERROR (any case).
///
/// # Errors
///
/// `hipFileInvalidValue` for NULL, a value of `param` that is not one of the enum's, a
/// string longer than 4095 bytes or an unknown logging level; `hipFileDriverAlreadyOpen`
/// while the driver is open.
///
/// # Safety
///
/// `desc_str` is NULL or a NUL-terminated string.
pub unsafe extern "C" fn hipFileSetParameterString(
    param: hipFileStringConfigParameter_t,
    desc_str: *const c_char,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        let Some(slot) = string_slot(param) else {
            return hipFileError_t::code(hipFileInvalidValue);
        };
        if desc_str.is_null() {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        // SAFETY: non-NULL, and the caller vouches that it is NUL-terminated.
        let text = unsafe { CStr::from_ptr(desc_str) };
        set_pending(|s, _| {
            s.strings[slot] = Some(string_value(slot, text)?);
            Ok(())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every size parameter takes its bounds and refuses one past them, so the bounds that
    /// cuFile's `cuFileGetParameterMinMaxValue` reports are the setter's.
    #[test]
    fn the_reported_bounds_are_the_setters() {
        for param in hipFileParamProfileStats..=hipFileParamPropertiesBatchIOTimeoutMs {
            let fixed = Some(77);
            let (min, max) = size_bounds(param, fixed).unwrap_or_else(|| panic!("{param}"));
            assert!(min <= max, "{param}");
            for v in [min, max] {
                let mut s = Settings::new();
                assert_eq!(set_size(param, v, &mut s, fixed), Ok(()), "{param}: {v}");
            }
            for v in [min.checked_sub(1), max.checked_add(1)]
                .into_iter()
                .flatten()
            {
                let mut s = Settings::new();
                assert_eq!(
                    set_size(param, v, &mut s, fixed),
                    Err(hipFileDriverUnsupportedLimit),
                    "{param}: {v}"
                );
            }
        }
        assert_eq!(size_bounds(12, None), None);
        assert_eq!(size_bounds(hipFileParamPropertiesIOBatchsize, None), None);
    }

    #[test]
    fn sizes_are_kib_and_bounded() {
        let mut s = Settings::new();
        assert_eq!(set_task_kib(&mut s, 8), Ok(()));
        assert_eq!(s.task_size, Some(8192));
        assert_eq!(set_task_kib(&mut s, 3), Err(hipFileDriverUnsupportedLimit));
        assert_eq!(set_task_kib(&mut s, 0), Err(hipFileDriverUnsupportedLimit));
        assert_eq!(
            set_task_kib(&mut s, u64::MAX),
            Err(hipFileDriverUnsupportedLimit)
        );
        assert_eq!(s.task_size, Some(8192), "a refused value changes nothing");
        assert_eq!(set_pinned_kib(&mut s, 64 << 20), Ok(()));
        assert_eq!(
            set_pinned_kib(&mut s, (64 << 20) + 1),
            Err(hipFileDriverUnsupportedLimit)
        );
    }

    #[test]
    fn the_staging_pool_takes_the_smaller_of_cache_and_pinned() {
        let lookup = |_: &str| None;
        let mut s = Settings::new();
        assert_eq!(
            s.builder().build_with(lookup).0,
            ConfigBuilder::new().build_with(lookup).0
        );
        s.cache_size = Some(1 << 20);
        assert_eq!(
            s.builder().build_with(lookup).0.fallback.staging_memory,
            1 << 20
        );
        s.pinned_size = Some(64 << 10);
        assert_eq!(
            s.builder().build_with(lookup).0.fallback.staging_memory,
            64 << 10
        );
        s.io_threads = Some(7);
        assert_eq!(s.builder().build_with(lookup).0.fallback.io_threads, 7);
        s.parallel_io = Some(false);
        assert_eq!(s.builder().build_with(lookup).0.fallback.io_threads, 1);
    }

    #[test]
    fn unknown_values_are_invalid_and_fixed_ones_only_confirm() {
        let mut s = Settings::new();
        assert_eq!(set_size(12, 1, &mut s, None), Err(hipFileInvalidValue));
        assert_eq!(set_size(-1, 1, &mut s, None), Err(hipFileInvalidValue));
        assert_eq!(set_bool(12, true, &mut s), Err(hipFileInvalidValue));
        assert_eq!(string_slot(3), None);
        assert_eq!(string_slot(-1), None);
        assert_eq!(
            set_size(hipFileParamPropertiesIOBatchsize, 128, &mut s, Some(128)),
            Ok(())
        );
        assert_eq!(
            set_size(hipFileParamPropertiesIOBatchsize, 64, &mut s, Some(128)),
            Err(hipFileDriverUnsupportedLimit)
        );
        assert_eq!(
            set_bool(hipFileParamPreferIOUring, true, &mut s),
            Err(hipFileDriverUnsupportedLimit)
        );
        assert_eq!(set_bool(hipFileParamPreferIOUring, false, &mut s), Ok(()));
    }

    #[test]
    fn logging_levels_are_checked_and_upper_cased() {
        assert_eq!(string_value(0, c" debug").as_deref(), Ok(c"DEBUG"));
        assert_eq!(string_value(0, c"LOUD"), Err(hipFileInvalidValue));
        assert_eq!(string_value(1, c"/tmp/x.log").as_deref(), Ok(c"/tmp/x.log"));
        let long = CString::new(vec![b'a'; MAX_STRING + 1]).unwrap();
        assert_eq!(string_value(2, &long), Err(hipFileInvalidValue));
        assert_eq!(get_string(0, &Settings::new()).as_c_str(), c"WARN");
        assert_eq!(get_string(2, &Settings::new()).as_c_str(), c"");
    }
}
