//! Pinned host memory from the runtime seam, on the emulated runtime: a large allocation is
//! hipfile's own mapping, faulted in and registered (not copied into a forked child), the
//! runtime copies through it as through its own pinned memory, and freeing it unmaps it; a
//! small one stays the runtime's.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile_core::runtime::StreamMemOps;
use hipfile_core::{GpuRuntime, MemoryKind};
use hipfile_runtime::HipRuntime;
use hipfile_testfs::maps::mapping_at;
use hipfile_testfs::{Skip, require};

fn emulated() -> Result<HipRuntime, Skip> {
    let path = hipfile_testfs::emulated_runtime()?;
    HipRuntime::load_path(&path).map_err(|e| Skip(format!("cannot load {}: {e}", path.display())))
}

/// Whether a mapping that is not copied on fork holds `addr`.
fn not_forked(addr: usize) -> bool {
    mapping_at(addr).is_some_and(|m| m.has_flag("dc"))
}

#[test]
fn a_large_pinned_allocation_is_a_faulted_in_registered_mapping_of_hipfile() {
    let rt = require!(emulated());
    let len = (8 << 20) + 5;
    let host = rt.alloc_pinned(len).unwrap();
    let addr = host as usize;
    assert_eq!(addr % (2 << 20), 0, "aligned for huge pages");
    let m = mapping_at(addr).unwrap();
    assert!(m.has_flag("dc"), "copied on fork: {:?}", m.flags);
    assert!(
        m.rss_kib >= (len as u64).div_ceil(1024),
        "faulted in before use: {} KiB",
        m.rss_kib
    );

    // The runtime takes it as its own pinned memory.
    let info = rt
        .pointer_info(hipfile_core::DevicePtr(addr as u64))
        .unwrap();
    assert_eq!(info.memory, MemoryKind::Host);
    assert_eq!(rt.host_device_pointer(host).unwrap().0, addr as u64);
    // SAFETY: `len` bytes of pinned memory, no copy in flight.
    let bytes = unsafe { std::slice::from_raw_parts_mut(host, len) };
    assert!(bytes.iter().all(|&b| b == 0), "zeros, as fresh memory");
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let device = rt.alloc_device(len).unwrap();
    let back = rt.alloc_pinned(len).unwrap();
    // SAFETY: `len` bytes of pinned and device memory each; both copies are synchronous.
    unsafe {
        rt.copy_to_device(device, host, len).unwrap();
        rt.copy_to_host(back, device, len).unwrap();
    }
    // SAFETY: as above.
    let copied = unsafe { std::slice::from_raw_parts(back, len) };
    assert!(
        copied
            .iter()
            .enumerate()
            .all(|(i, &b)| b == (i % 251) as u8)
    );

    // SAFETY: each from `alloc_*` of this runtime, no transfer in flight, unused afterwards.
    unsafe {
        rt.free_device(device).unwrap();
        rt.free_pinned(back).unwrap();
        rt.free_pinned(host).unwrap();
    }
    assert!(!not_forked(addr), "unmapped when freed");
    assert!(
        rt.pointer_info(hipfile_core::DevicePtr(addr as u64))
            .is_ok_and(|i| i.memory != MemoryKind::Host),
        "unregistered when freed"
    );

    // A small allocation is the runtime's (no mapping of hipfile's for a few bytes).
    let small = rt.alloc_pinned(4096).unwrap();
    assert!(!not_forked(small as usize));
    // SAFETY: from `alloc_pinned`, unused afterwards.
    unsafe { rt.free_pinned(small) }.unwrap();
}
