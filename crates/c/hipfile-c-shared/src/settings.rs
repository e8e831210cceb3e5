//! What a program set for the library's driver, and the checks every way of setting it
//! shares: the values of the parameter calls (`params.rs`), the driver setters (`props.rs`)
//! and cuFile's slab arrays (`extra.rs`), which become the driver's [`ConfigBuilder`]
//! overrides at its next open; the values of a configuration file (`cufile.json`, which
//! `libcufile.so.0` reads), checked as those calls check them; and the memory rule the
//! library chose. Values and checks only: the state (`state.rs`) keeps the settings under
//! its lock, and nothing here takes it or calls the facade's driver.

use crate::types::*;
use facade::{Config, ConfigBuilder, FallbackKnobs, MemoryTypes};
use std::ffi::{CStr, CString, c_uint};
use std::sync::OnceLock;

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
    Slabs(SlabPool, Vec<(u64, u64)>),
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
                if let Err(code) = check_slabs(*pool, slabs) {
                    return refused(code, format!("{slabs:?} (size in KiB, count)"));
                }
                match pool {
                    SlabPool::Posix => s.posix_slabs = Some(slabs.clone()),
                    SlabPool::GpuBounce => s.gpu_slabs = Some(slabs.clone()),
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
    facade::Tuning::staging_chunk_size(&config.fallback) as u64
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
pub(crate) fn recorded_slot(param: hipFileBoolConfigParameter_t) -> Option<usize> {
    match param {
        hipFileParamFsMiscApiCheckAggressive => Some(0),
        hipFileParamProfileNvtx => Some(1),
        hipFileParamForceOdirectMode => Some(2),
        hipFileParamSkipTopologyDetection => Some(3),
        hipFileParamStreamMemopsBypass => Some(4),
        _ => None,
    }
}

/// The values [`hipFileSetParameterSizeT`](crate::hipFileSetParameterSizeT) accepts for `param`, least and greatest, in the
/// parameter's unit (KiB for the `...KB` sizes); `fixed` is the current value of a fixed
/// parameter, its only value. `None` for a value that is not one of the enum's.
pub(crate) fn size_bounds(
    param: hipFileSizeTConfigParameter_t,
    fixed: Option<u64>,
) -> Option<(u64, u64)> {
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
pub(crate) fn set_size(
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

/// Sets a boolean parameter in `s`.
pub(crate) fn set_bool(
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
pub(crate) fn string_slot(param: hipFileStringConfigParameter_t) -> Option<usize> {
    match param {
        hipFileParamLoggingLevel | hipFileParamEnvLogfilePath | hipFileParamLogDir => {
            usize::try_from(param).ok()
        }
        _ => None,
    }
}

/// The value of a string parameter: what was set, else the default ("WARN": the library
/// writes warnings, each once, to stderr; no log file or directory).
pub(crate) fn get_string(slot: usize, s: &Settings) -> CString {
    match s.strings.get(slot).and_then(Option::as_ref) {
        Some(v) => v.clone(),
        None if slot == 0 => c"WARN".to_owned(),
        None => CString::default(),
    }
}

/// Checks a string parameter's value, upper-casing a logging level.
pub(crate) fn string_value(slot: usize, text: &CStr) -> Result<CString, hipFileOpError_t> {
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

/// The most slabs one array may hold.
pub const MAX_SLABS: usize = 64;

/// Which of cuFile's slab arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlabPool {
    /// `PosixPoolSlabArray`: the host bounce buffers of compatibility mode, hipfile's
    /// staging pool. Their total is applied as a limit on the pool.
    Posix,
    /// `GpuBounceBufferSlabArray`: device-memory bounce buffers, which hipfile does not
    /// have. Recorded and reported back.
    GpuBounce,
}

impl SlabPool {
    /// Where `s` keeps this array.
    pub(crate) fn slot(self, s: &mut Settings) -> &mut Option<Vec<(u64, u64)>> {
        match self {
            SlabPool::Posix => &mut s.posix_slabs,
            SlabPool::GpuBounce => &mut s.gpu_slabs,
        }
    }
}

/// Checks slabs for either array: 1 to [`MAX_SLABS`] of them, sizes in KiB multiples of 4
/// and strictly ascending, counts above 0; a POSIX pool's total within the staging pool's
/// bounds (`hipFileDriverUnsupportedLimit` outside them).
pub(crate) fn check_slabs(pool: SlabPool, slabs: &[(u64, u64)]) -> Result<(), hipFileOpError_t> {
    if slabs.is_empty() || slabs.len() > MAX_SLABS {
        return Err(hipFileInvalidValue);
    }
    let mut previous = 0;
    for &(kib, count) in slabs {
        if kib == 0 || kib % 4 != 0 || kib <= previous || count == 0 {
            return Err(hipFileInvalidValue);
        }
        previous = kib;
    }
    if pool == SlabPool::Posix {
        let total = slabs.iter().try_fold(0u64, |sum, &(kib, count)| {
            kib.checked_mul(KIB)?.checked_mul(count)?.checked_add(sum)
        });
        let bounds = FallbackKnobs::MIN_STAGING_MEMORY..=FallbackKnobs::MAX_STAGING_MEMORY;
        if !total.is_some_and(|t| bounds.contains(&t)) {
            return Err(hipFileDriverUnsupportedLimit);
        }
    }
    Ok(())
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

    #[test]
    fn slabs_are_checked() {
        use SlabPool::*;
        assert_eq!(check_slabs(Posix, &[(4, 128), (1024, 64)]), Ok(()));
        assert_eq!(check_slabs(Posix, &[]), Err(hipFileInvalidValue));
        assert_eq!(check_slabs(Posix, &[(6, 1)]), Err(hipFileInvalidValue));
        assert_eq!(
            check_slabs(Posix, &[(8, 1), (4, 1)]),
            Err(hipFileInvalidValue)
        );
        assert_eq!(check_slabs(Posix, &[(4, 0)]), Err(hipFileInvalidValue));
        // A POSIX pool's total is the staging limit: at most 64 GiB.
        assert_eq!(
            check_slabs(Posix, &[(16384, 4097)]),
            Err(hipFileDriverUnsupportedLimit)
        );
        assert_eq!(check_slabs(GpuBounce, &[(16384, 4097)]), Ok(()));
        assert_eq!(
            check_slabs(Posix, &[(u64::MAX - 3, 2)]),
            Err(hipFileDriverUnsupportedLimit)
        );
    }

    #[test]
    fn the_posix_pool_bounds_the_staging_memory() {
        let lookup = |_: &str| None;
        let mut s = Settings::new();
        s.posix_slabs = Some(vec![(4, 16), (64, 2)]);
        assert_eq!(s.posix_pool_bytes(), Some((64 + 128) << 10));
        let config = s.builder().build_with(lookup).0;
        assert_eq!(config.fallback.staging_memory, (64 + 128) << 10);
        s.cache_size = Some(64 << 10);
        assert_eq!(
            s.builder().build_with(lookup).0.fallback.staging_memory,
            64 << 10
        );
    }
}
