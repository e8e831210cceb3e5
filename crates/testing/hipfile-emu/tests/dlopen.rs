//! The emulated runtime as hipfile sees it: `libhipfile_emu.so` loaded by path with `dlopen`,
//! functions resolved by name, `hipAmdFileRead`/`Write` only through `hipGetProcAddress`, real
//! `O_DIRECT` files in the temporary directory.
//!
//! Cases that need another configuration (fault lists, an old ROCm version, several devices)
//! run in a child process: this test binary re-executed with the `HIPFILE_EMU_*` variables set
//! and a filter that selects one ignored `*_child_process` test, so that no test changes the
//! environment of a process whose other threads may read it.

#![allow(clippy::unwrap_used)]

use hipfile_testfs::{Skip, TempDir, require};
use libloading::Library;
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::fs::File;
use std::io::Write as _;
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;
use std::process::Command;
use std::ptr::null_mut;
use std::sync::OnceLock;

const SUCCESS: i32 = 0;
const INVALID_VALUE: i32 = 1;
const NOT_INITIALIZED: i32 = 3;
const NO_DEVICE: i32 = 100;
const INVALID_DEVICE: i32 = 101;
const NOT_FOUND: i32 = 500;
const UNKNOWN: i32 = 999;
const H2D: c_int = 1;
const D2H: c_int = 2;
const D2D: c_int = 3;

/// Every symbol the library must export.
const EXPORTED: &[&str] = &[
    "hipInit",
    "hipRuntimeGetVersion",
    "hipDriverGetVersion",
    "hipGetDeviceCount",
    "hipGetDevice",
    "hipSetDevice",
    "hipGetErrorString",
    "hipGetErrorName",
    "hipPointerGetAttributes",
    "hipMemGetAddressRange",
    "hipMalloc",
    "hipFree",
    "hipHostMalloc",
    "hipHostFree",
    "hipHostRegister",
    "hipHostUnregister",
    "hipMemcpy",
    "hipMemcpyAsync",
    "hipStreamCreateWithFlags",
    "hipStreamDestroy",
    "hipStreamSynchronize",
    "hipLaunchHostFunc",
    "hipEventCreate",
    "hipEventRecord",
    "hipEventSynchronize",
    "hipEventDestroy",
    "hipEventQuery",
    "hipStreamQuery",
    "hipStreamWaitEvent",
    "hipStreamWaitValue32",
    "hipStreamWaitValue64",
    "hipStreamWriteValue32",
    "hipStreamWriteValue64",
    "hipHostGetDevicePointer",
    "hipMallocManaged",
    "hipMemset",
    "hipStreamCreate",
    "hipDeviceSynchronize",
    "hipGetLastError",
    "hipPeekAtLastError",
    "hipGetProcAddress",
    "hipfileEmuVersion",
    "hipfileEmuReset",
    "hipfileEmuFileIoCalls",
    "hipfileEmuFaultsInjected",
    "hipfileEmuLiveAllocations",
    "hipfileEmuDeviceCopyBytes",
    "hipfileEmuNullStreamUsers",
];

/// `hipPointerAttribute_t`, declared here again from the ABI.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct PointerAttribute {
    memory_type: c_int,
    device: c_int,
    device_pointer: *mut c_void,
    host_pointer: *mut c_void,
    is_managed: c_int,
    allocation_flags: c_uint,
}

impl PointerAttribute {
    const EMPTY: PointerAttribute = PointerAttribute {
        memory_type: -1,
        device: -1,
        device_pointer: null_mut(),
        host_pointer: null_mut(),
        is_managed: -1,
        allocation_flags: 0,
    };
}

/// `hipAmdFileHandle_t`.
#[repr(C)]
#[derive(Clone, Copy)]
union FileHandle {
    handle: *mut c_void,
    fd: c_int,
    pad: [u8; 8],
}

fn handle(fd: c_int) -> FileHandle {
    let mut h = FileHandle { pad: [0; 8] };
    h.fd = fd;
    h
}

type FileIoFn = unsafe extern "C" fn(FileHandle, *mut c_void, u64, i64, *mut u64, *mut i32) -> i32;

/// The functions the tests call, resolved once from the loaded library.
struct Api {
    _lib: Library,
    init: unsafe extern "C" fn(c_uint) -> i32,
    runtime_version: unsafe extern "C" fn(*mut c_int) -> i32,
    device_count: unsafe extern "C" fn(*mut c_int) -> i32,
    get_device: unsafe extern "C" fn(*mut c_int) -> i32,
    set_device: unsafe extern "C" fn(c_int) -> i32,
    error_name: unsafe extern "C" fn(i32) -> *const c_char,
    error_string: unsafe extern "C" fn(i32) -> *const c_char,
    pointer_attributes: unsafe extern "C" fn(*mut PointerAttribute, *const c_void) -> i32,
    malloc: unsafe extern "C" fn(*mut *mut c_void, usize) -> i32,
    host_malloc: unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> i32,
    free: unsafe extern "C" fn(*mut c_void) -> i32,
    memcpy: unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> i32,
    memcpy_async:
        unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int, *mut c_void) -> i32,
    stream_create: unsafe extern "C" fn(*mut *mut c_void, c_uint) -> i32,
    stream_destroy: unsafe extern "C" fn(*mut c_void) -> i32,
    event_create: unsafe extern "C" fn(*mut *mut c_void) -> i32,
    event_record: unsafe extern "C" fn(*mut c_void, *mut c_void) -> i32,
    event_destroy: unsafe extern "C" fn(*mut c_void) -> i32,
    get_proc_address:
        unsafe extern "C" fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> i32,
    emu_version: unsafe extern "C" fn() -> *const c_char,
    emu_reset: unsafe extern "C" fn() -> i32,
    emu_calls: unsafe extern "C" fn(c_int) -> u64,
    emu_injected: unsafe extern "C" fn(c_int) -> u64,
    emu_live: unsafe extern "C" fn() -> u64,
    emu_copy_bytes: unsafe extern "C" fn(c_int, *mut u64, *mut u64) -> i32,
    stream_synchronize: unsafe extern "C" fn(*mut c_void) -> i32,
    emu_null_users: unsafe extern "C" fn() -> u64,
}

/// Where cargo put the library. The test binary is `target/<profile>/deps/dlopen-<hash>`;
/// building it builds the crate's cdylib into the same `deps/` (cargo builds every crate type
/// of the library for its integration tests), which is therefore always current. The copy in
/// `target/<profile>/` exists only after `cargo build` and may be older, so it comes second.
fn library_path() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let candidates = [
        deps.join("libhipfile_emu.so"),
        deps.parent().unwrap().join("libhipfile_emu.so"),
    ];
    candidates
        .iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("libhipfile_emu.so not built; looked at {candidates:?}"))
        .clone()
}

fn api() -> &'static Api {
    static API: OnceLock<Api> = OnceLock::new();
    API.get_or_init(|| {
        let path = library_path();
        // SAFETY: the library is this crate's cdylib, whose initialisers do nothing.
        let lib = unsafe { Library::new(&path) }
            .unwrap_or_else(|e| panic!("cannot load {}: {e}", path.display()));
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: each name is declared with its C signature from the ABI.
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .unwrap_or_else(|e| panic!("{}: {e}", $name))
            };
        }
        Api {
            init: sym!("hipInit"),
            runtime_version: sym!("hipRuntimeGetVersion"),
            device_count: sym!("hipGetDeviceCount"),
            get_device: sym!("hipGetDevice"),
            set_device: sym!("hipSetDevice"),
            error_name: sym!("hipGetErrorName"),
            error_string: sym!("hipGetErrorString"),
            pointer_attributes: sym!("hipPointerGetAttributes"),
            malloc: sym!("hipMalloc"),
            host_malloc: sym!("hipHostMalloc"),
            free: sym!("hipFree"),
            memcpy: sym!("hipMemcpy"),
            memcpy_async: sym!("hipMemcpyAsync"),
            stream_create: sym!("hipStreamCreateWithFlags"),
            stream_destroy: sym!("hipStreamDestroy"),
            event_create: sym!("hipEventCreate"),
            event_record: sym!("hipEventRecord"),
            event_destroy: sym!("hipEventDestroy"),
            get_proc_address: sym!("hipGetProcAddress"),
            emu_version: sym!("hipfileEmuVersion"),
            emu_reset: sym!("hipfileEmuReset"),
            emu_calls: sym!("hipfileEmuFileIoCalls"),
            emu_injected: sym!("hipfileEmuFaultsInjected"),
            emu_live: sym!("hipfileEmuLiveAllocations"),
            emu_copy_bytes: sym!("hipfileEmuDeviceCopyBytes"),
            stream_synchronize: sym!("hipStreamSynchronize"),
            emu_null_users: sym!("hipfileEmuNullStreamUsers"),
            _lib: lib,
        }
    })
}

impl Api {
    fn malloc(&self, len: usize) -> *mut c_void {
        let mut p = null_mut();
        // SAFETY: `p` is writable.
        assert_eq!(unsafe { (self.malloc)(&mut p, len) }, SUCCESS);
        p
    }

    fn free(&self, p: *mut c_void) {
        // SAFETY: the tests free their own allocations, once.
        assert_eq!(unsafe { (self.free)(p) }, SUCCESS);
    }

    /// Copies `bytes` to `dst` and waits for the null stream: a copy from pageable memory
    /// is done only when the null stream reaches it, and the AMD file I/O is not ordered
    /// after it.
    fn upload(&self, dst: *mut c_void, bytes: &[u8]) {
        // SAFETY: `bytes` is readable for its length; the runtime checks `dst`.
        let r = unsafe { (self.memcpy)(dst, bytes.as_ptr().cast(), bytes.len(), H2D) };
        assert_eq!(r, SUCCESS);
        // SAFETY: the null stream is always valid.
        assert_eq!(unsafe { (self.stream_synchronize)(null_mut()) }, SUCCESS);
    }

    fn download(&self, src: *const c_void, len: usize) -> Vec<u8> {
        let mut out = vec![0u8; len];
        // SAFETY: `out` is writable for `len`; the runtime checks `src`.
        let r = unsafe { (self.memcpy)(out.as_mut_ptr().cast(), src, len, D2H) };
        assert_eq!(r, SUCCESS);
        out
    }

    /// `hipGetProcAddress(name)`: the address and the status.
    fn proc_address(&self, name: &CStr) -> (i32, *mut c_void, c_int) {
        let (mut pfn, mut status) = (null_mut(), -1);
        let mut version = 0;
        // SAFETY: a NUL-terminated name and writable out-pointers.
        let r = unsafe {
            assert_eq!((self.runtime_version)(&mut version), SUCCESS);
            (self.get_proc_address)(name.as_ptr(), &mut pfn, version, 0, &mut status)
        };
        (r, pfn, status)
    }

    fn file_io(&self, name: &CStr) -> FileIoFn {
        let (r, pfn, status) = self.proc_address(name);
        assert_eq!((r, status), (SUCCESS, 0), "{name:?}");
        assert!(!pfn.is_null());
        // SAFETY: the runtime hands out a function of the hipAmdFileRead/Write signature.
        unsafe { std::mem::transmute::<*mut c_void, FileIoFn>(pfn) }
    }

    fn stream(&self) -> *mut c_void {
        let mut s = null_mut();
        // SAFETY: `s` is writable.
        assert_eq!(unsafe { (self.stream_create)(&mut s, 0) }, SUCCESS);
        s
    }

    fn event(&self) -> *mut c_void {
        let mut e = null_mut();
        // SAFETY: `e` is writable.
        assert_eq!(unsafe { (self.event_create)(&mut e) }, SUCCESS);
        e
    }

    /// `hipfileEmuDeviceCopyBytes(device)`: (return, to_device, from_device).
    fn copy_bytes(&self, device: c_int) -> (i32, u64, u64) {
        let (mut to, mut from) = (u64::MAX, u64::MAX);
        // SAFETY: writable out-pointers.
        let r = unsafe { (self.emu_copy_bytes)(device, &mut to, &mut from) };
        (r, to, from)
    }

    fn attributes(&self, p: *const c_void) -> (i32, PointerAttribute) {
        let mut a = PointerAttribute::EMPTY;
        // SAFETY: `a` is writable.
        let r = unsafe { (self.pointer_attributes)(&mut a, p) };
        (r, a)
    }
}

/// One file-I/O call: (return, status, size_copied).
fn io(f: FileIoFn, fd: c_int, dst: *mut c_void, size: u64, offset: i64) -> (i32, i32, u64) {
    let (mut copied, mut status) = (u64::MAX, i32::MAX);
    // SAFETY: writable out-pointers; the runtime checks the rest.
    let r = unsafe { f(handle(fd), dst, size, offset, &mut copied, &mut status) };
    (r, status, copied)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// A file holding `contents`, opened read-write with `O_DIRECT`, in a fresh directory.
fn direct_file(contents: &[u8]) -> Result<(TempDir, PathBuf, File), Skip> {
    let dir = TempDir::new("emu-dlopen");
    let path = dir.path().join("data");
    File::create(&path).unwrap().write_all(contents).unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path);
    match file {
        Ok(f) => Ok((dir, path, f)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Err(Skip(format!(
            "{} does not support O_DIRECT",
            dir.path().display()
        ))),
        Err(e) => panic!("cannot open {}: {e}", path.display()),
    }
}

#[test]
fn exports_the_hip_symbols_but_not_the_file_io_pair() {
    let path = library_path();
    // SAFETY: as in `api`.
    let lib = unsafe { Library::new(&path) }.unwrap();
    for name in EXPORTED {
        // SAFETY: only resolved, never called.
        let sym = unsafe { lib.get::<*const c_void>(format!("{name}\0").as_bytes()) };
        assert!(sym.is_ok(), "{name} is not exported");
    }
    for name in ["hipAmdFileRead", "hipAmdFileWrite"] {
        // SAFETY: as above.
        let sym = unsafe { lib.get::<*const c_void>(format!("{name}\0").as_bytes()) };
        assert!(
            sym.is_err(),
            "{name} must be reachable only through hipGetProcAddress"
        );
    }
}

#[test]
fn identifies_itself() {
    let api = api();
    // SAFETY: static NUL-terminated strings.
    let (marker, name) = unsafe {
        (
            CStr::from_ptr((api.emu_version)()),
            CStr::from_ptr((api.error_name)(INVALID_VALUE)),
        )
    };
    assert!(
        marker.to_str().unwrap().starts_with("hipfile-emu "),
        "{marker:?}"
    );
    assert_eq!(name, c"hipErrorInvalidValue");
    // SAFETY: plain values.
    assert_eq!(unsafe { (api.init)(0) }, SUCCESS);
}

#[test]
fn reads_and_writes_an_o_direct_file_through_device_memory() {
    let api = api();
    let contents = pattern(64 << 10, 3);
    let (_dir, path, file) = require!(direct_file(&contents));
    let fd = file.as_raw_fd();
    let read = api.file_io(c"hipAmdFileRead");
    let write = api.file_io(c"hipAmdFileWrite");
    let d = api.malloc(64 << 10);

    assert_eq!(io(read, fd, d, 64 << 10, 0), (SUCCESS, 0, 64 << 10));
    assert_eq!(api.download(d, 64 << 10), contents);

    // An interior pointer, a later offset.
    api.upload(d, &[0; 8192]);
    let interior = d.wrapping_byte_add(4096);
    assert_eq!(io(read, fd, interior, 4096, 8192), (SUCCESS, 0, 4096));
    assert_eq!(api.download(interior, 4096), contents[8192..12288]);

    // Short at end of file.
    assert_eq!(
        io(read, fd, d, 16384, (60 << 10) as i64),
        (SUCCESS, 0, 4096)
    );

    // The kernel refuses a misaligned offset, as on real hardware.
    let (r, status, copied) = io(read, fd, d, 4096, 1);
    assert_eq!((r, status, copied), (UNKNOWN, -libc::EINVAL, 0));

    // The runtime refuses a range that leaves the allocation, and host memory.
    assert_eq!(io(read, fd, d, (64 << 10) + 4096, 0), (INVALID_VALUE, 0, 0));
    let mut host = vec![0u8; 4096];
    assert_eq!(
        io(read, fd, host.as_mut_ptr().cast(), 4096, 0),
        (INVALID_VALUE, 0, 0)
    );

    // A write lands in the file.
    let fresh = pattern(8192, 99);
    api.upload(d, &fresh);
    assert_eq!(io(write, fd, d, 8192, 4096), (SUCCESS, 0, 8192));
    drop(file);
    let on_disk = std::fs::read(&path).unwrap();
    assert_eq!(on_disk[4096..12288], fresh[..]);
    assert_eq!(on_disk[..4096], contents[..4096]);
    api.free(d);
}

#[test]
fn a_buffered_descriptor_is_refused_with_einval() {
    let api = api();
    let dir = TempDir::new("emu-buffered");
    let path = dir.path().join("data");
    std::fs::write(&path, [1u8; 4096]).unwrap();
    let file = File::open(&path).unwrap();
    let d = api.malloc(4096);
    let read = api.file_io(c"hipAmdFileRead");
    assert_eq!(
        io(read, file.as_raw_fd(), d, 4096, 0),
        (UNKNOWN, -libc::EINVAL, 0)
    );
    api.free(d);
}

/// Runs the ignored test `name` in a child process with `vars` set, and checks that it passed.
fn run_child(name: &str, vars: &[(&str, &str)]) {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.args([
        name,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]);
    for var in [
        "HIPFILE_EMU_ROCM_VERSION",
        "HIPFILE_EMU_DEVICES",
        "HIPFILE_EMU_FAULT",
        "HIPFILE_EMU_NULL_STREAM_DELAY",
    ] {
        command.env_remove(var);
    }
    command.envs(vars.iter().copied());
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Shown by the harness only if this test fails; skips reach the terminal from the child.
    println!("child {name}:\n{stdout}\n{stderr}");
    assert!(out.status.success(), "child {name} failed");
    assert!(stdout.contains("1 passed"), "child {name} did not run");
    if let Some(skip) = stderr.lines().find(|l| l.starts_with("SKIP ")) {
        let _ = writeln!(std::io::stderr(), "{skip}");
    }
}

/// Whether this process is the child that should run `name`.
fn is_child_for(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

#[test]
fn faults_are_injected_and_reset() {
    run_child(
        "fault_child_process",
        &[("HIPFILE_EMU_FAULT", "read:ENODEV:2, write:EREMOTEIO")],
    );
}

#[test]
#[ignore = "run by faults_are_injected_and_reset in a child process"]
fn fault_child_process() {
    if !is_child_for("fault_child_process") {
        return;
    }
    let api = api();
    let contents = pattern(8192, 7);
    let (_dir, _path, file) = require!(direct_file(&contents));
    let fd = file.as_raw_fd();
    let read = api.file_io(c"hipAmdFileRead");
    let write = api.file_io(c"hipAmdFileWrite");
    // SAFETY: plain calls without arguments or with plain values.
    let calls = |op| unsafe { (api.emu_calls)(op) };
    // SAFETY: as above.
    let injected = |op| unsafe { (api.emu_injected)(op) };
    // SAFETY: as above.
    let init = || unsafe { (api.init)(0) };
    // SAFETY: as above.
    let reset = || unsafe { (api.emu_reset)() };
    // SAFETY: as above.
    let live = unsafe { (api.emu_live)() };

    assert_eq!(init(), SUCCESS);
    let d = api.malloc(8192);
    api.upload(d, &[0xEE; 8192]);

    // The first two reads fail with ENODEV, moving nothing; the third runs.
    for _ in 0..2 {
        assert_eq!(io(read, fd, d, 8192, 0), (UNKNOWN, -libc::ENODEV, 0));
    }
    assert_eq!(api.download(d, 8192), vec![0xEE; 8192]);
    assert_eq!(io(read, fd, d, 8192, 0), (SUCCESS, 0, 8192));
    assert_eq!(api.download(d, 8192), contents);
    // Every write fails.
    for _ in 0..2 {
        assert_eq!(io(write, fd, d, 4096, 0), (UNKNOWN, -libc::EREMOTEIO, 0));
    }
    assert_eq!((calls(0), injected(0)), (3, 2));
    assert_eq!((calls(1), injected(1)), (2, 2));

    // SAFETY: only this test runs in the child process, and the harness's main thread only
    // waits for it, so nothing reads the environment concurrently.
    unsafe { std::env::set_var("HIPFILE_EMU_FAULT", "write:EIO:1") };
    assert_eq!(reset(), SUCCESS);
    assert_eq!((calls(0), injected(0), calls(1), injected(1)), (0, 0, 0, 0));
    assert_eq!(io(read, fd, d, 4096, 0), (SUCCESS, 0, 4096));
    assert_eq!(io(write, fd, d, 4096, 0), (UNKNOWN, -libc::EIO, 0));
    assert_eq!(io(write, fd, d, 4096, 0), (SUCCESS, 0, 4096));

    // An invalid list is never ignored: the runtime refuses to initialise, and the error's
    // text says which variable, which entry and what is accepted.
    // SAFETY: as above.
    let text = |code| unsafe { CStr::from_ptr((api.error_string)(code)) };
    assert_eq!(text(NOT_INITIALIZED), c"initialization error");
    // SAFETY: as above.
    unsafe { std::env::set_var("HIPFILE_EMU_FAULT", "read:EIO:1, read:EBOGUS") };
    assert_eq!(reset(), NOT_INITIALIZED);
    assert_eq!(init(), NOT_INITIALIZED);
    let message = text(NOT_INITIALIZED).to_str().unwrap();
    for needle in [
        "initialization error",
        "HIPFILE_EMU_FAULT",
        "`read:EBOGUS`",
        "unknown errno name `EBOGUS`",
        "op:ERRNO[:N]",
    ] {
        assert!(message.contains(needle), "{needle:?} not in {message:?}");
    }
    assert_eq!(io(read, fd, d, 4096, 0), (NOT_INITIALIZED, 0, 0));
    let (mut count, mut p) = (-1, null_mut());
    // SAFETY: writable out-pointers.
    unsafe {
        assert_eq!((api.device_count)(&mut count), NOT_INITIALIZED);
        assert_eq!((api.malloc)(&mut p, 4096), NOT_INITIALIZED);
    }
    assert_eq!(count, 0);
    assert!(p.is_null());
    // Other codes keep their own text.
    assert_eq!(text(INVALID_VALUE), c"invalid argument");

    // SAFETY: as above.
    unsafe { std::env::remove_var("HIPFILE_EMU_FAULT") };
    assert_eq!(reset(), SUCCESS);
    assert_eq!(init(), SUCCESS);
    assert_eq!(text(NOT_INITIALIZED), c"initialization error");
    assert_eq!(io(read, fd, d, 4096, 0), (SUCCESS, 0, 4096));

    // The table survived the resets; a second free is refused (single-threaded here, so no
    // other allocation can have taken the address).
    api.free(d);
    // SAFETY: refused: already freed.
    assert_eq!(unsafe { (api.free)(d) }, INVALID_VALUE);
    // SAFETY: a plain call.
    assert_eq!(unsafe { (api.emu_live)() }, live);
}

#[test]
fn an_old_runtime_with_several_devices() {
    run_child(
        "rocm5_child_process",
        &[
            ("HIPFILE_EMU_ROCM_VERSION", "5.7"),
            ("HIPFILE_EMU_DEVICES", "3"),
        ],
    );
}

#[test]
#[ignore = "run by an_old_runtime_with_several_devices in a child process"]
fn rocm5_child_process() {
    if !is_child_for("rocm5_child_process") {
        return;
    }
    let api = api();
    let (mut version, mut count) = (0, 0);
    // SAFETY: writable out-pointers, plain values.
    unsafe {
        assert_eq!((api.init)(0), SUCCESS);
        assert_eq!((api.runtime_version)(&mut version), SUCCESS);
        assert_eq!((api.device_count)(&mut count), SUCCESS);
    }
    assert_eq!((version, count), (50_700_000, 3));

    // No hipGetProcAddress lookups succeed before ROCm 6.2.
    let (r, pfn, status) = api.proc_address(c"hipAmdFileRead");
    assert_eq!((r, pfn, status), (NOT_FOUND, null_mut(), 1));

    // ROCm 5 numbering: Device 1, Host 0, and an unknown pointer is an error.
    // SAFETY: a plain value.
    assert_eq!(unsafe { (api.set_device)(2) }, SUCCESS);
    let d = api.malloc(4096);
    let (r, a) = api.attributes(d);
    assert_eq!((r, a.memory_type, a.device), (SUCCESS, 1, 2));
    let local = 0u64;
    let (r, _) = api.attributes(std::ptr::from_ref(&local).cast());
    assert_eq!(r, INVALID_VALUE);
    // SAFETY: a plain value.
    assert_eq!(unsafe { (api.set_device)(3) }, INVALID_DEVICE);
    api.free(d);
}

#[test]
fn freeing_memory_waits_for_the_null_streams_earlier_work() {
    run_child(
        "free_waits_child_process",
        &[("HIPFILE_EMU_NULL_STREAM_DELAY", "200ms")],
    );
}

/// A copy from pageable memory into device memory waits on the null stream's worker; the
/// memory is freed meanwhile. As HIP's `hipFree`, which synchronises the device, the free
/// waits for the copy, so that it never lands in a later allocation at the same address. In
/// a process of its own, so that no other test holds the null stream.
#[test]
#[ignore = "run by freeing_memory_waits_for_the_null_streams_earlier_work in a child process"]
fn free_waits_child_process() {
    if !is_child_for("free_waits_child_process") {
        return;
    }
    let api = api();
    let host = vec![7u8; 4096];
    for kind in [H2D, 4] {
        let d = api.malloc(4096);
        // SAFETY: `host` is readable for 4096 bytes; `d` is this test's allocation.
        let r = unsafe { (api.memcpy)(d, host.as_ptr().cast(), 4096, kind) };
        assert_eq!(r, SUCCESS);
        // SAFETY: plain call.
        let waiting = unsafe { (api.emu_null_users)() };
        assert!(waiting > 0, "the copy waits");
        api.free(d);
        // SAFETY: plain call.
        let users = unsafe { (api.emu_null_users)() };
        assert_eq!(users, 0, "kind {kind}: the free waited");
        // SAFETY: the null stream is always valid.
        assert_eq!(unsafe { (api.stream_synchronize)(null_mut()) }, SUCCESS);
    }
}

#[test]
fn a_runtime_without_devices() {
    run_child("no_device_child_process", &[("HIPFILE_EMU_DEVICES", "0")]);
}

/// `HIPFILE_EMU_DEVICES=0` answers as ROCm does on a machine without a GPU: the count is 0
/// with `hipErrorNoDevice`, and what needs a device fails with `hipErrorInvalidDevice`; the
/// versions are still reported.
#[test]
#[ignore = "run by a_runtime_without_devices in a child process"]
fn no_device_child_process() {
    if !is_child_for("no_device_child_process") {
        return;
    }
    let api = api();
    let (mut count, mut device, mut version) = (-1, -1, 0);
    let (mut p, mut s, mut e) = (null_mut(), null_mut(), null_mut());
    // SAFETY: writable out-pointers, plain values.
    unsafe {
        assert_eq!((api.device_count)(&mut count), NO_DEVICE);
        assert_eq!(count, 0);
        assert_eq!((api.init)(0), INVALID_DEVICE);
        assert_eq!((api.runtime_version)(&mut version), SUCCESS);
        assert_eq!((api.get_device)(&mut device), INVALID_DEVICE);
        assert_eq!((api.set_device)(0), INVALID_DEVICE);
        assert_eq!((api.malloc)(&mut p, 4096), INVALID_DEVICE);
        assert_eq!((api.host_malloc)(&mut p, 4096, 0), INVALID_DEVICE);
        assert_eq!((api.stream_create)(&mut s, 0), INVALID_DEVICE);
        assert_eq!((api.event_create)(&mut e), INVALID_DEVICE);
    }
    assert_eq!(version, 70_200_000);
    assert!(p.is_null() && s.is_null() && e.is_null());
    // SAFETY: a plain call.
    assert_eq!(unsafe { (api.emu_live)() }, 0);
}

#[test]
fn the_default_runtime_uses_the_rocm_6_numbering() {
    let api = api();
    let d = api.malloc(4096);
    let (r, a) = api.attributes(d.wrapping_byte_add(100));
    assert_eq!((r, a.memory_type, a.device), (SUCCESS, 2, 0));
    assert_eq!(a.device_pointer, d.wrapping_byte_add(100));
    assert!(a.host_pointer.is_null());
    let local = 0u64;
    let (r, a) = api.attributes(std::ptr::from_ref(&local).cast());
    assert_eq!((r, a.memory_type, a.device), (SUCCESS, 0, -2));
    api.free(d);
}

#[test]
fn copies_are_routed_and_counted_per_device() {
    run_child("devices_child_process", &[("HIPFILE_EMU_DEVICES", "2")]);
}

#[test]
#[ignore = "run by copies_are_routed_and_counted_per_device in a child process"]
fn devices_child_process() {
    if !is_child_for("devices_child_process") {
        return;
    }
    let api = api();
    // SAFETY: plain values.
    let set_device = |d| unsafe { (api.set_device)(d) };
    // SAFETY: as above.
    let reset = || unsafe { (api.emu_reset)() };
    // SAFETY: as above.
    assert_eq!(unsafe { (api.init)(0) }, SUCCESS);
    let (d0, s0, e0) = (api.malloc(4096), api.stream(), api.event());
    assert_eq!(set_device(1), SUCCESS);
    let (d1, s1, e1) = (api.malloc(4096), api.stream(), api.event());
    assert_eq!(api.copy_bytes(0), (SUCCESS, 0, 0));
    assert_eq!(api.copy_bytes(1), (SUCCESS, 0, 0));

    let data = pattern(4096, 5);
    let h = data.as_ptr().cast::<c_void>();
    // SAFETY: `data` is readable for 4096 bytes; the runtime checks the device sides.
    unsafe {
        // Device 1's memory on device 0's stream is refused, copying nothing.
        assert_eq!((api.memcpy_async)(d1, h, 4096, H2D, s0), INVALID_VALUE);
        assert_eq!((api.memcpy_async)(d0, d1, 4096, D2D, s0), INVALID_VALUE);
        assert_eq!(api.copy_bytes(1), (SUCCESS, 0, 0));
        // On its own device's stream it runs, whatever device is current.
        assert_eq!(set_device(0), SUCCESS);
        assert_eq!((api.memcpy_async)(d1, h, 4096, H2D, s1), SUCCESS);
        // The null stream copies between devices.
        let r = (api.memcpy_async)(d0, d1, 4096, D2D, null_mut());
        assert_eq!(r, SUCCESS);
    }
    // So does hipMemcpy.
    assert_eq!(api.download(d0, 4096), data);
    assert_eq!(api.copy_bytes(0), (SUCCESS, 4096, 4096));
    assert_eq!(api.copy_bytes(1), (SUCCESS, 4096, 4096));

    // Events are recorded on streams of their own device, or on the null stream.
    // SAFETY: live handles, or null.
    unsafe {
        assert_eq!((api.event_record)(e0, s1), INVALID_VALUE);
        assert_eq!((api.event_record)(e0, s0), SUCCESS);
        assert_eq!((api.event_record)(e1, null_mut()), SUCCESS);
    }

    // The counters exist for the configured devices; null pointers are refused.
    assert_eq!(api.copy_bytes(2).0, INVALID_DEVICE);
    assert_eq!(api.copy_bytes(-1).0, INVALID_DEVICE);
    let mut to = 0;
    // SAFETY: a writable pointer and a null one, which is refused.
    let r = unsafe { (api.emu_copy_bytes)(0, &mut to, null_mut()) };
    assert_eq!(r, INVALID_VALUE);

    // A reset zeroes them.
    assert_eq!(reset(), SUCCESS);
    assert_eq!(api.copy_bytes(0), (SUCCESS, 0, 0));
    assert_eq!(api.copy_bytes(1), (SUCCESS, 0, 0));

    // SAFETY: live handles, destroyed once.
    unsafe {
        for s in [s0, s1] {
            assert_eq!((api.stream_destroy)(s), SUCCESS);
        }
        for e in [e0, e1] {
            assert_eq!((api.event_destroy)(e), SUCCESS);
        }
    }

    // File I/O counts for the buffer's device.
    let (_dir, _path, file) = require!(direct_file(&data));
    let fd = file.as_raw_fd();
    let read = api.file_io(c"hipAmdFileRead");
    let write = api.file_io(c"hipAmdFileWrite");
    assert_eq!(io(read, fd, d1, 4096, 0), (SUCCESS, 0, 4096));
    assert_eq!(io(write, fd, d0, 4096, 0), (SUCCESS, 0, 4096));
    assert_eq!(api.copy_bytes(0), (SUCCESS, 0, 4096));
    assert_eq!(api.copy_bytes(1), (SUCCESS, 4096, 0));
    api.free(d0);
    api.free(d1);
}
