//! A smoke test of `CudaRuntime` on a machine with an NVIDIA GPU: loads the CUDA runtime and
//! driver, moves a pattern through 64 MiB of device and pinned memory, and checks what the
//! runtime reports about device, pinned and plain host memory.
//!
//! ```text
//! cargo run --release --example cuda_smoke -p hipfile-runtime [-- /path/to/libcudart.so.13]
//! ```
//!
//! Prints one `PASS` or `FAIL` line per check and exits with status 1 if any failed.
//!
//! # Safety
//!
//! The `unsafe` blocks copy between buffers this program allocated (and has not freed) with
//! lengths within them, free each allocation once after its last use, and read a callback flag
//! that outlives the stream it was queued on.

use hipfile_core::runtime::{StreamHandle, Streams};
use hipfile_core::{DevicePtr, GpuRuntime, MemoryKind, RuntimeError};
use hipfile_runtime::CudaRuntime;
use hipfile_sys::{CudaLoadOptions, cudaStream_t};
use std::ffi::c_void;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

const LEN: usize = 64 << 20;

/// XORed into the pattern for the stream round trip, so that it cannot pass on stale data.
const SECOND: u8 = 0x5a;

/// Counts and prints check results.
#[derive(Default)]
struct Checks {
    passed: usize,
    failed: usize,
}

impl Checks {
    fn check(&mut self, name: &str, ok: bool, detail: impl std::fmt::Display) -> bool {
        if ok {
            self.passed += 1;
            println!("PASS {name}: {detail}");
        } else {
            self.failed += 1;
            println!("FAIL {name}: {detail}");
        }
        ok
    }

    /// Records a runtime call's result; `Some` on success.
    fn call<T>(&mut self, name: &str, r: Result<T, RuntimeError>) -> Option<T> {
        match r {
            Ok(v) => {
                self.passed += 1;
                println!("PASS {name}");
                Some(v)
            }
            Err(e) => {
                self.failed += 1;
                println!("FAIL {name}: {e}");
                None
            }
        }
    }
}

fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 12)) as u8
}

/// The first index where `buf` differs from the pattern, if any.
fn first_mismatch(buf: &[u8]) -> Option<usize> {
    buf.iter().enumerate().position(|(i, b)| *b != pattern(i))
}

unsafe extern "C" fn set_flag(data: *mut c_void) {
    // SAFETY: `data` is the `AtomicBool` of `main`, alive until its stream is synchronised.
    unsafe { &*data.cast::<AtomicBool>() }.store(true, Ordering::SeqCst);
}

fn main() -> ExitCode {
    let options = CudaLoadOptions {
        explicit_cudart: std::env::args_os().nth(1).map(Into::into),
    };
    let rt = match CudaRuntime::load(&options) {
        Ok(rt) => rt,
        Err(e) => {
            println!("FAIL load: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut c = Checks::default();
    c.check(
        "load",
        true,
        format!(
            "{} + {}",
            rt.cuda().library_path().display(),
            rt.cuda().driver_library_path().display()
        ),
    );
    c.check(
        "runtime version",
        rt.version().major() >= 11,
        format!("{} ({})", rt.version(), rt.version().0),
    );
    if let Some(v) = c.call("driver version", rt.driver_version()) {
        println!("     driver supports CUDA {v} ({})", v.0);
    }
    let devices = c.call("device count", rt.device_count()).unwrap_or(0);
    if !c.check(
        "devices present",
        devices > 0,
        format!("{devices} device(s)"),
    ) {
        return finish(&c);
    }
    c.call("thread_init", rt.thread_init());
    c.call("thread_init again", rt.thread_init());
    let current = rt.cuda().get_device().unwrap_or(-1);
    // The device seam of GpuRuntime: the count, the current device, switching and back.
    if let Some(n) = c.call("GpuRuntime::device_count", GpuRuntime::device_count(&rt)) {
        c.check("device_count agrees", n == devices, format!("{n}"));
    }
    if let Some(d) = c.call("current_device", rt.current_device()) {
        c.check("current_device", d == current, format!("{d}"));
    }
    c.call("set_device to the last device", rt.set_device(devices - 1));
    if let Some(d) = c.call("current_device after set_device", rt.current_device()) {
        c.check("set_device took", d == devices - 1, format!("{d}"));
    }
    c.check(
        "set_device to a device that does not exist fails",
        rt.set_device(devices).is_err(),
        format!("set_device({devices})"),
    );
    c.call("set_device back", rt.set_device(current.max(0)));

    let Some(dev) = c.call("alloc_device 64 MiB", rt.alloc_device(LEN)) else {
        return finish(&c);
    };
    let Some(pinned) = c.call("alloc_pinned 64 MiB", rt.alloc_pinned(LEN)) else {
        return finish(&c);
    };
    // SAFETY: `pinned` is LEN bytes of host memory this program owns; nothing else uses it.
    let host = unsafe { std::slice::from_raw_parts_mut(pinned, LEN) };
    for (i, b) in host.iter_mut().enumerate() {
        *b = pattern(i);
    }

    // Synchronous round trip.
    // SAFETY: both ranges are LEN bytes of live allocations of this runtime.
    c.call("copy_to_device (sync)", unsafe {
        rt.copy_to_device(dev, pinned, LEN)
    });
    host.fill(0);
    // SAFETY: as above.
    c.call("copy_to_host (sync)", unsafe {
        rt.copy_to_host(pinned, dev, LEN)
    });
    let bad = first_mismatch(host);
    c.check(
        "round trip (sync)",
        bad.is_none(),
        match bad {
            None => format!("{LEN} bytes match"),
            Some(i) => format!("byte {i} is {:#x}, expected {:#x}", host[i], pattern(i)),
        },
    );

    // Asynchronous round trip on a stream with a second pattern, the upload ordered before
    // the host buffer is cleared by an event.
    if let Some(stream) = c.call("stream_create", rt.stream_create()) {
        for (i, b) in host.iter_mut().enumerate() {
            *b = pattern(i) ^ SECOND;
        }
        // SAFETY: both ranges are LEN bytes of live allocations; the host buffer is not
        // written until the event after the copy has completed.
        c.call("copy_to_device (stream)", unsafe {
            rt.copy_to_device_async(dev, pinned, LEN, stream)
        });
        if let Some(event) = c.call("event_create", rt.event_create()) {
            c.call("event_record", rt.event_record(event, stream));
            c.call("event_synchronize", rt.event_synchronize(event));
            c.call("event_destroy", rt.event_destroy(event));
        }
        host.fill(0);
        // SAFETY: both ranges are LEN bytes of live allocations; the stream is synchronised
        // before the host buffer is read.
        c.call("copy_to_host (stream)", unsafe {
            rt.copy_to_host_async(pinned, dev, LEN, stream)
        });
        c.call("stream_synchronize", rt.stream_synchronize(stream));
        let bad = host
            .iter()
            .enumerate()
            .position(|(i, b)| *b != pattern(i) ^ SECOND);
        c.check(
            "round trip (stream)",
            bad.is_none(),
            match bad {
                None => format!("{LEN} bytes match"),
                Some(i) => format!(
                    "byte {i} is {:#x}, expected {:#x}",
                    host[i],
                    pattern(i) ^ SECOND
                ),
            },
        );
        host_callback(&mut c, &rt, stream);
        c.call("stream_destroy", rt.stream_destroy(stream));
    }

    // What the runtime says about each kind of memory.
    pointer_kind(&mut c, &rt, "device", dev, MemoryKind::Device);
    if let Ok(info) = rt.pointer_info(dev) {
        c.check(
            "pointer_info device id",
            info.device == current,
            format!("{} (current {current})", info.device),
        );
    }
    pointer_kind(
        &mut c,
        &rt,
        "pinned",
        DevicePtr(pinned as usize as u64),
        MemoryKind::Host,
    );
    let plain = vec![0u8; 1 << 16];
    pointer_kind(
        &mut c,
        &rt,
        "plain host",
        DevicePtr(plain.as_ptr() as usize as u64),
        MemoryKind::Unregistered,
    );
    if let Ok(a) = rt.cuda().pointer_attributes(plain.as_ptr().cast()) {
        println!(
            "     raw attributes of plain host memory: type {} device {}",
            a.type_, a.device
        );
    }

    // Allocation ranges, from an interior pointer, on this thread and on a fresh one.
    let interior = DevicePtr(dev.0 + 3 * 4096 + 17);
    check_range(&mut c, &rt, "address_range (interior)", interior, dev);
    let fresh = std::thread::scope(|s| {
        s.spawn(|| rt.address_range(interior))
            .join()
            .unwrap_or_else(|_| Err(RuntimeError::new("thread", -1, "panicked")))
    });
    report_range(&mut c, "address_range (new thread)", fresh, dev);
    let host_range = rt.address_range(DevicePtr(plain.as_ptr() as usize as u64));
    c.check(
        "address_range (plain host) fails",
        host_range.is_err(),
        match &host_range {
            Err(e) => e.to_string(),
            Ok((b, l)) => format!("unexpectedly {b} + {l}"),
        },
    );

    // No AMD file I/O on CUDA; streams, with host functions.
    c.check("amd_file_io", rt.amd_file_io().is_none(), "none");
    c.check("streams", rt.streams().is_some(), "some");
    c.check(
        "host_functions",
        rt.streams().and_then(|s| s.host_functions()).is_some(),
        "some",
    );

    // SAFETY: each allocation is freed once, after its last use above.
    unsafe {
        c.call("free_device", rt.free_device(dev));
        c.call("free_pinned", rt.free_pinned(pinned));
    }
    finish(&c)
}

fn host_callback(c: &mut Checks, rt: &CudaRuntime, stream: StreamHandle) {
    let flag = AtomicBool::new(false);
    let raw = cudaStream_t(stream.0 as *mut c_void);
    // SAFETY: `raw` is a live stream; `flag` outlives the synchronisation that waits for the
    // callback, which calls no CUDA function.
    let queued = unsafe {
        rt.cuda()
            .launch_host_func(raw, Some(set_flag), (&raw const flag).cast_mut().cast())
    };
    let synced = rt.stream_synchronize(stream);
    c.check(
        "launch_host_func",
        queued.is_ok() && synced.is_ok() && flag.load(Ordering::SeqCst),
        format!(
            "queued {queued:?}, synchronised {:?}, ran {}",
            synced.is_ok(),
            flag.load(Ordering::SeqCst)
        ),
    );
}

fn pointer_kind(c: &mut Checks, rt: &CudaRuntime, what: &str, p: DevicePtr, want: MemoryKind) {
    let name = format!("pointer_info {what}");
    match rt.pointer_info(p) {
        Ok(info) => {
            c.check(
                &name,
                info.memory == want,
                format!(
                    "{} on device {} (expected {})",
                    info.memory.as_str(),
                    info.device,
                    want.as_str()
                ),
            );
        }
        Err(e) => {
            c.check(&name, false, e);
        }
    }
}

fn check_range(c: &mut Checks, rt: &CudaRuntime, name: &str, p: DevicePtr, base: DevicePtr) {
    report_range(c, name, rt.address_range(p), base);
}

fn report_range(
    c: &mut Checks,
    name: &str,
    r: Result<(DevicePtr, u64), RuntimeError>,
    base: DevicePtr,
) {
    match r {
        Ok((b, len)) => {
            c.check(
                name,
                b == base && len >= LEN as u64,
                format!("base {b} (allocation {base}), length {len}"),
            );
        }
        Err(e) => {
            c.check(name, false, e);
        }
    }
}

fn finish(c: &Checks) -> ExitCode {
    println!("{} passed, {} failed", c.passed, c.failed);
    if c.failed == 0 {
        println!("PASS cuda_smoke");
        ExitCode::SUCCESS
    } else {
        println!("FAIL cuda_smoke");
        ExitCode::FAILURE
    }
}
