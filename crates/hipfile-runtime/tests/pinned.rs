//! Pinned host memory from the runtime seam, on the emulated runtime: a large allocation is
//! hipfile's own mapping, faulted in and registered (not copied into a forked child), the
//! runtime copies through it as through its own pinned memory, and freeing it unmaps it; a
//! small one stays the runtime's.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile_core::{GpuRuntime, MemoryKind};
use hipfile_runtime::HipRuntime;
use hipfile_testfs::{Skip, require};

fn emulated() -> Result<HipRuntime, Skip> {
    let path = hipfile_testfs::emulated_runtime()?;
    HipRuntime::load_path(&path).map_err(|e| Skip(format!("cannot load {}: {e}", path.display())))
}

/// The `VmFlags` and `Rss` (KiB) of the mapping that holds `addr` (`/proc/self/smaps`).
fn mapping(addr: usize) -> Option<(Vec<String>, u64)> {
    let text = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some((start, end)) = line.split(' ').next().and_then(|r| r.split_once('-')) else {
            continue;
        };
        let (Ok(start), Ok(end)) = (
            usize::from_str_radix(start, 16),
            usize::from_str_radix(end, 16),
        ) else {
            continue;
        };
        if !(start..end).contains(&addr) {
            continue;
        }
        let (mut flags, mut rss) = (Vec::new(), 0);
        for l in lines.by_ref() {
            if let Some(v) = l.strip_prefix("Rss:") {
                rss = v.trim().trim_end_matches(" kB").parse().unwrap();
            } else if let Some(v) = l.strip_prefix("VmFlags:") {
                flags = v.split_whitespace().map(str::to_owned).collect();
                break;
            }
        }
        return Some((flags, rss));
    }
    None
}

/// Whether a mapping that is not copied on fork holds `addr`.
fn not_forked(addr: usize) -> bool {
    mapping(addr).is_some_and(|(flags, _)| flags.iter().any(|f| f == "dc"))
}

#[test]
fn a_large_pinned_allocation_is_a_faulted_in_registered_mapping_of_hipfile() {
    let rt = require!(emulated());
    let len = (8 << 20) + 5;
    let host = rt.alloc_pinned(len).unwrap();
    let addr = host as usize;
    assert_eq!(addr % (2 << 20), 0, "aligned for huge pages");
    let (flags, rss) = mapping(addr).unwrap();
    assert!(flags.iter().any(|f| f == "dc"), "copied on fork: {flags:?}");
    assert!(
        rss >= (len as u64).div_ceil(1024),
        "faulted in before use: {rss} KiB"
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
        rt.copy_to_device(device, host, len, None).unwrap();
        rt.copy_to_host(back, device, len, None).unwrap();
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
