//! The native module of the `hipfile-torch` Python package (`hipfile_torch._native`): a
//! checkpoint's inventory (every header validated before anything is allocated), reads of
//! tensor bytes into memory that PyTorch allocated, and the writing of a safetensors file
//! from tensors' memory, all on hipfile's engine with the GIL released.
//!
//! The Python layer (`python/hipfile_torch/`) allocates the tensors, hands their addresses
//! here and keeps the tensors alive for the call; this module never allocates tensor memory
//! and never frees any. The functions that take addresses are private to the package
//! (`_native`): the addresses must be those of live tensors of at least the length given,
//! which the package's own functions guarantee.

use hipfile::{ConfigBuilder, DeviceBuffer, DevicePtr, Driver, MemoryTypes, PlatformChoice};
use hipfile_safetensors::{
    DEFAULT_REQUEST_SIZE, Dtype, Inventory, LoadError, Loader, Progress, RemoteError,
    RemoteSettings, Target, is_url,
};
use pyo3::create_exception;
use pyo3::exceptions::{
    PyFileNotFoundError, PyOSError, PyPermissionError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

create_exception!(
    _native,
    CheckpointError,
    PyValueError,
    "A checkpoint that cannot be loaded as given: a shard that is not a valid safetensors \
     file (truncated, overlapping tensors, an unknown dtype, a shape that disagrees with its \
     bytes), a tensor in two shards, an index that disagrees with its shards."
);

/// The process's driver, opened on first use with NVIDIA cuFile's memory rule (so that
/// `device="cpu"` reads into host memory in place) and writes left to one `fdatasync` per
/// saved file.
static DRIVER: Mutex<Option<Driver>> = Mutex::new(None);

/// The platform of the PyTorch build in use, when the package has said it
/// ([`use_platform`]) before the driver opened.
static PLATFORM: Mutex<Option<PlatformChoice>> = Mutex::new(None);

/// Opens the driver on the runtime of PyTorch's own build (ROCm's for a ROCm build, CUDA's
/// for a CUDA one): `platform` is `"amd"` or `"nvidia"`. Unless `HIPFILE_HIP_LIBRARY` or
/// `HIP_PLATFORM` names a runtime (the user's choice wins), the driver then loads only that
/// platform's runtime, as `HIP_PLATFORM` would make it, rather than trying HIP's first. No
/// effect once the driver is open.
#[pyfunction]
fn use_platform(platform: &str) -> PyResult<()> {
    let choice = match platform {
        "amd" => PlatformChoice::Amd,
        "nvidia" => PlatformChoice::Nvidia,
        other => {
            return Err(PyValueError::new_err(format!(
                "platform {other:?}: give \"amd\" or \"nvidia\""
            )));
        }
    };
    *PLATFORM.lock().unwrap_or_else(|e| e.into_inner()) = Some(choice);
    Ok(())
}

fn driver() -> PyResult<Driver> {
    let mut d = DRIVER.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(d) = d.as_ref() {
        return Ok(d.clone());
    }
    let settings = ConfigBuilder::new()
        .memory_types(MemoryTypes::CuFile)
        .durable_writes(false);
    let from_env = settings.clone().build_from_env();
    // A load reads tensor by tensor, a few MiB each, from a window of requests: serving as
    // many at once as there are I/O threads keeps them all busy, where the default (at most
    // 8 at once, for small random requests) leaves a quarter of the bytes in flight that a
    // whole-shard load has (docs/decisions/hipfile-torch.md).
    let mut settings = settings.request_threads(from_env.fallback_knobs().io_threads);
    // PyTorch's platform, below `HIP_PLATFORM` (a default the environment wins over), and
    // not at all where `HIPFILE_HIP_LIBRARY` names a library.
    let platform = *PLATFORM.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(p) = platform.filter(|_| from_env.hip_library.is_none()) {
        settings = settings.defaults(ConfigBuilder::new().platform(p));
    }
    let opened = Driver::open_with(settings).map_err(|e| {
        PyRuntimeError::new_err(format!(
            "hipfile could not open its driver: {e}; for GPU memory hipfile loads the runtime \
             of PyTorch's build (HIPFILE_HIP_LIBRARY names a library, HIP_PLATFORM=amd or \
             nvidia a platform, explicitly)"
        ))
    })?;
    *d = Some(opened.clone());
    Ok(opened)
}

fn load_error(e: LoadError) -> PyErr {
    let text = e.to_string();
    match e {
        LoadError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(text)
        }
        LoadError::Io { .. } => PyOSError::new_err(text),
        LoadError::Gpu { .. } => PyRuntimeError::new_err(text),
        LoadError::Remote(RemoteError::NotFound { .. }) => PyFileNotFoundError::new_err(text),
        LoadError::Remote(RemoteError::Denied { .. }) => PyPermissionError::new_err(text),
        LoadError::Remote(RemoteError::Request { .. } | RemoteError::Runtime(_)) => {
            PyOSError::new_err(text)
        }
        _ => CheckpointError::new_err(text),
    }
}

fn dtype_name(d: Dtype) -> String {
    serde_json::to_string(&d)
        .map(|s| s.trim_matches('"').to_owned())
        .unwrap_or_else(|_| format!("{d:?}"))
}

fn parse_dtype(name: &str) -> PyResult<Dtype> {
    serde_json::from_value(serde_json::Value::String(name.to_owned()))
        .map_err(|_| CheckpointError::new_err(format!("{name:?} is not a safetensors dtype")))
}

/// A checkpoint's shards, open, with every header validated.
#[pyclass(frozen, module = "hipfile_torch._native")]
struct Checkpoint {
    inventory: Inventory,
}

#[pymethods]
impl Checkpoint {
    /// Opens `paths`: safetensors files, or `model.safetensors.index.json` indexes standing
    /// for the shards they name; or URLs of them (`s3://`, `http(s)://`, and
    /// `s3://BUCKET/PREFIX/` for a prefix), all files or all URLs.
    #[new]
    fn new(py: Python<'_>, paths: Vec<PathBuf>) -> PyResult<Checkpoint> {
        let urls: Vec<&str> = paths
            .iter()
            .filter_map(|p| p.to_str().filter(|t| is_url(t)))
            .collect();
        let inventory = if urls.is_empty() {
            py.detach(|| Inventory::open(&paths))
        } else if urls.len() == paths.len() {
            let driver = driver()?;
            py.detach(|| Inventory::open_urls(&driver, &urls, &RemoteSettings::default()))
        } else {
            return Err(CheckpointError::new_err(
                "give local files or URLs (s3://, http://, https://), not both",
            ));
        }
        .map_err(load_error)?;
        Ok(Checkpoint { inventory })
    }

    /// The shards' paths, in order.
    fn shard_paths(&self) -> Vec<PathBuf> {
        self.inventory
            .shard_paths()
            .map(Path::to_path_buf)
            .collect()
    }

    /// Shard `shard`'s `__metadata__`, or None.
    fn metadata(&self, shard: usize) -> Option<HashMap<String, String>> {
        self.inventory.metadata(shard).cloned()
    }

    /// Every tensor: `(name, dtype, shape, shard, start, end)`, file offsets of its bytes.
    fn tensors(&self) -> Vec<(String, String, Vec<usize>, usize, u64, u64)> {
        self.inventory
            .tensors()
            .map(|t| {
                (
                    t.name.to_owned(),
                    dtype_name(t.dtype),
                    t.shape.to_vec(),
                    t.shard,
                    t.bytes.start,
                    t.bytes.end,
                )
            })
            .collect()
    }

    /// Whether the shards' tensor bytes are mostly outside the page cache, as a load
    /// decides it; None where the kernel cannot say, or for URLs.
    fn cold(&self) -> Option<bool> {
        self.inventory.is_cold()
    }

    fn __len__(&self) -> usize {
        self.inventory.len()
    }
}

/// Reads into memory: each target is `(name, start, end, address, length)`, bytes
/// `start..end` of tensor `name` into `length` bytes at `address`. `progress(done, total)`
/// is called at most ten times a second and once at the end. Returns a dict of what the
/// read did.
///
/// The addresses must be those of live tensors of at least `length` bytes that nothing
/// else touches during the call (the package's own functions pass nothing else).
#[pyfunction]
#[pyo3(signature = (checkpoint, targets, progress=None, request_size=None, in_flight=None))]
fn read_into<'py>(
    py: Python<'py>,
    checkpoint: &Checkpoint,
    targets: Vec<(String, u64, u64, usize, usize)>,
    progress: Option<Py<PyAny>>,
    request_size: Option<u64>,
    in_flight: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    let driver = driver()?;
    let inventory = &checkpoint.inventory;
    let mut made = Vec::with_capacity(targets.len());
    for (name, start, end, address, length) in targets {
        // SAFETY: the package passes the address and length of a tensor it allocated and
        // holds until this call returns; nothing else uses it meanwhile (this function's
        // contract).
        let buffer = unsafe { DeviceBuffer::from_raw(&driver, DevicePtr(address as u64), length) };
        made.push(Target::new(inventory, &name, start..end, buffer).map_err(load_error)?);
    }
    let started = Instant::now();
    let callback_error: Mutex<Option<PyErr>> = Mutex::new(None);
    let report = py.detach(|| {
        let mut last = None::<Instant>;
        let mut loader = Loader::new(&driver);
        if let Some(size) = request_size {
            loader = loader.request_size(size);
        }
        if let Some(n) = in_flight {
            loader = loader.in_flight(n);
        }
        if let Some(cb) = progress.as_ref() {
            let errors = &callback_error;
            loader = loader.progress(move |p: Progress| {
                let due = last.is_none_or(|t| t.elapsed() >= Duration::from_millis(100));
                if !due && p.done < p.total {
                    return;
                }
                last = Some(Instant::now());
                Python::attach(|py| {
                    if let Err(e) = cb.call1(py, (p.done, p.total)) {
                        let mut slot = errors.lock().unwrap_or_else(|e| e.into_inner());
                        slot.get_or_insert(e);
                    }
                });
            });
        }
        loader.read_into(inventory, &mut made)
    });
    let report = report.map_err(load_error)?;
    if let Some(e) = callback_error
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
    {
        return Err(e);
    }
    let out = PyDict::new(py);
    out.set_item("bytes", report.bytes_read)?;
    out.set_item("fastpath_bytes", report.fastpath_bytes)?;
    out.set_item("fallback_bytes", report.fallback_bytes)?;
    out.set_item("remote_bytes", report.remote_bytes)?;
    out.set_item("requests", report.requests)?;
    out.set_item("cold", report.cold)?;
    out.set_item("seconds", started.elapsed().as_secs_f64())?;
    Ok(out)
}

/// Starts pinning, on a thread of its own, the host staging buffers that a load into GPU
/// memory reads through (the fallback's: no AMD file I/O, or the fallback forced), as many
/// as requests of a load's default size keep busy, so that the pinning overlaps the
/// allocation of the tensors, as `hipfile load` overlaps it with its own. Returns whether it
/// started; `false` where loads need no staging (or no thread could be started: the read
/// then pins them itself).
#[pyfunction]
fn prepare_staging() -> PyResult<bool> {
    let driver = driver()?;
    if driver.runtime().amd_file_io && !driver.config().force_compat_mode {
        return Ok(false);
    }
    let started = std::thread::Builder::new()
        .name("hipfile-torch-staging".into())
        .spawn(move || {
            // A failed allocation is left for the requests to report.
            driver.tuning().prepare_staging(DEFAULT_REQUEST_SIZE);
        });
    Ok(started.is_ok())
}

/// A tensor to save: its dtype, shape and byte length; the header needs no bytes.
struct Described {
    dtype: Dtype,
    shape: Vec<usize>,
    len: usize,
}

impl safetensors::View for &Described {
    fn dtype(&self) -> Dtype {
        self.dtype
    }
    fn shape(&self) -> &[usize] {
        &self.shape
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Borrowed(&[])
    }
    fn data_len(&self) -> usize {
        self.len
    }
}

/// The safetensors header of `tensors` (the 8-byte length and the JSON, as the format's own
/// crate writes them) and each tensor's offset from the start of the file.
fn header_of(
    tensors: &[(String, Described)],
    metadata: Option<HashMap<String, String>>,
) -> PyResult<(Vec<u8>, HashMap<String, u64>)> {
    let header = safetensors::serialize(tensors.iter().map(|(n, d)| (n.as_str(), d)), metadata)
        .map_err(|e| CheckpointError::new_err(format!("cannot describe these tensors: {e}")))?;
    // The data offsets, from the header just made.
    let json: serde_json::Value = serde_json::from_slice(&header[8..])
        .map_err(|e| PyRuntimeError::new_err(format!("the header made is not JSON: {e}")))?;
    let mut offsets = HashMap::new();
    for (name, _) in tensors {
        let begin = json
            .get(name)
            .and_then(|t| t.get("data_offsets"))
            .and_then(|o| o.get(0))
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| {
                PyRuntimeError::new_err(format!("the header made has no offsets for {name:?}"))
            })?;
        offsets.insert(name.clone(), header.len() as u64 + begin);
    }
    Ok((header, offsets))
}

/// Writes a safetensors file at `path` from tensors' memory: each tensor is `(name, dtype,
/// shape, address, length)`. The file is written beside `path` under a temporary name,
/// made durable, then renamed over `path`, so that a failure leaves any file at `path` as
/// it was. Returns the bytes written.
///
/// The addresses must be those of live tensors of at least `length` bytes that nothing
/// writes during the call (the package's own functions pass nothing else).
#[pyfunction]
#[pyo3(signature = (path, tensors, metadata=None))]
fn save(
    py: Python<'_>,
    path: PathBuf,
    tensors: Vec<(String, String, Vec<usize>, usize, usize)>,
    metadata: Option<HashMap<String, String>>,
) -> PyResult<u64> {
    let mut described = Vec::with_capacity(tensors.len());
    let mut addresses = HashMap::with_capacity(tensors.len());
    for (name, dtype, shape, address, len) in tensors {
        let dtype = parse_dtype(&dtype)?;
        let elements = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let expected = elements.and_then(|n| n.checked_mul(dtype.bitsize()).map(|b| b.div_ceil(8)));
        if expected != Some(len) {
            return Err(CheckpointError::new_err(format!(
                "tensor {name:?}: {len} bytes do not make a {} tensor of shape {shape:?}",
                dtype_name(dtype)
            )));
        }
        if addresses.insert(name.clone(), (address, len)).is_some() {
            return Err(CheckpointError::new_err(format!(
                "two tensors are named {name:?}"
            )));
        }
        described.push((name, Described { dtype, shape, len }));
    }
    let (header, offsets) = header_of(&described, metadata)?;
    let driver = driver()?;
    py.detach(|| write_file(&driver, &path, &header, &offsets, &addresses))
        .map_err(|e| PyOSError::new_err(format!("{}: cannot save: {e}", path.display())))
}

fn write_file(
    driver: &Driver,
    path: &Path,
    header: &[u8],
    offsets: &HashMap<String, u64>,
    addresses: &HashMap<String, (usize, usize)>,
) -> Result<u64, String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| "the path names no file".to_owned())?;
    let temporary = dir.join(format!(
        ".{}.hipfile-{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&temporary)
        .map_err(|e| format!("cannot create {}: {e}", temporary.display()))?;
    let written = fill(driver, &mut file, header, offsets, addresses).and_then(|n| {
        std::fs::rename(&temporary, path)
            .map_err(|e| format!("cannot rename {} to it: {e}", temporary.display()))?;
        // The rename itself durable too.
        File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| format!("cannot make the rename durable in {}: {e}", dir.display()))?;
        Ok(n)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

fn fill(
    driver: &Driver,
    file: &mut File,
    header: &[u8],
    offsets: &HashMap<String, u64>,
    addresses: &HashMap<String, (usize, usize)>,
) -> Result<u64, String> {
    file.write_all(header)
        .map_err(|e| format!("cannot write the header: {e}"))?;
    let handle = driver
        .register_file(file)
        .map_err(|e| format!("cannot register the file for GPU I/O: {e}"))?;
    let mut total = header.len() as u64;
    for (name, &(address, len)) in addresses {
        if len == 0 {
            continue;
        }
        let at = offsets[name];
        // SAFETY: the package passes the address and length of a live tensor it holds until
        // this call returns, which nothing writes meanwhile (`save`'s contract).
        let buffer = unsafe { DeviceBuffer::from_raw(driver, DevicePtr(address as u64), len) };
        handle
            .write_all_at(&buffer, at)
            .map_err(|e| format!("cannot write tensor {name:?}: {e}"))?;
        total += len as u64;
    }
    drop(handle);
    file.sync_data()
        .map_err(|e| format!("cannot make the file durable: {e}"))?;
    Ok(total)
}

/// The native part of `hipfile_torch`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Checkpoint>()?;
    m.add_function(wrap_pyfunction!(read_into, m)?)?;
    m.add_function(wrap_pyfunction!(prepare_staging, m)?)?;
    m.add_function(wrap_pyfunction!(use_platform, m)?)?;
    m.add_function(wrap_pyfunction!(save, m)?)?;
    m.add("CheckpointError", m.py().get_type::<CheckpointError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
