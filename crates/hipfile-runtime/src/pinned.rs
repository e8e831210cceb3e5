//! Large pinned allocations made quickly: memory of our own mapping, faulted in by several
//! threads, then registered with the runtime, rather than allocated by it.
//!
//! `cudaHostAlloc` of 128 MiB took 0.042–0.074 s on the H200 machine: one thread has the
//! kernel zero every page, then the driver pins and maps them. A private anonymous mapping
//! aligned to 2 MiB and advised huge pages, faulted in by 16 threads (`MADV_POPULATE_WRITE`),
//! then registered, took 0.010 s for the same 128 MiB, and 0.013–0.023 s without huge pages
//! (docs/BENCHMARKS.md). A process's first checkpoint load pins its staging buffers before
//! it reads, so this is time every first load waits.
//!
//! The mapping is `MADV_DONTFORK`: a forked child gets no copy of pinned memory, so the
//! parent never loses its pages to copy-on-write after a fork while the GPU still reads or
//! writes them (a child cannot use the GPU runtime anyway). Where a step is refused (no
//! `MADV_POPULATE_WRITE` before Linux 5.14, no transparent huge pages), the memory is still
//! correct: registration faults the pages itself. Where the mapping or the registration is
//! refused, the runtime allocates as before.

#![allow(unsafe_code)]

use hipfile_sys::host_register_flags;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Mutex, PoisonError};

/// How the regions are registered: for every device, and mapped, so that a word in one has a
/// device address (`StreamMemOps::host_device_pointer`) as in memory the runtime allocates.
pub(crate) const REGISTER_FLAGS: std::ffi::c_uint =
    host_register_flags::PORTABLE | host_register_flags::MAPPED;
/// Allocations from this size up are mapped and registered; smaller ones are the runtime's.
pub(crate) const MAPPED_FROM: usize = HUGE_PAGE;
/// The huge-page size the mapping is aligned to (x86-64 and arm64 with 4 KiB pages).
const HUGE_PAGE: usize = 2 << 20;
/// Bytes a faulting thread takes at least.
const PER_THREAD: usize = 4 << 20;
/// Threads that fault one allocation in, at most.
const MAX_THREADS: usize = 16;

/// A private anonymous mapping of ours, unmapped when dropped.
#[derive(Debug)]
pub(crate) struct Region {
    addr: usize,
    len: usize,
}

impl Region {
    /// Maps `len` bytes (rounded up to whole pages) at a 2 MiB boundary, advises huge pages
    /// and no copy on fork, and faults every page in on up to 16 threads. `None` when the
    /// kernel refuses the mapping.
    pub(crate) fn map(len: usize) -> Option<Region> {
        let page = page_size();
        let len = len.checked_next_multiple_of(page)?;
        let span = len.checked_add(HUGE_PAGE)?;
        // SAFETY: a new private anonymous mapping; no existing memory is affected.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                span,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return None;
        }
        let start = raw as usize;
        let addr = start.next_multiple_of(HUGE_PAGE);
        // The parts before and after the aligned range go back at once.
        // SAFETY: both ranges lie inside the mapping just made, which nothing else knows.
        unsafe {
            if addr > start {
                libc::munmap(raw, addr - start);
            }
            let end = addr + len;
            if start + span > end {
                libc::munmap(end as *mut c_void, start + span - end);
            }
        }
        let region = Region { addr, len };
        // Advice only: refused advice leaves correct memory (see the module documentation).
        // SAFETY: the range is this region's mapping.
        unsafe {
            libc::madvise(region.ptr(), len, libc::MADV_DONTFORK);
            libc::madvise(region.ptr(), len, libc::MADV_HUGEPAGE);
        }
        region.populate();
        Some(region)
    }

    /// The first byte.
    pub(crate) fn ptr(&self) -> *mut c_void {
        self.addr as *mut c_void
    }

    /// The mapped length.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Faults the pages in, a slice of whole huge pages per thread; the calling thread takes
    /// the first slice, and one whose thread cannot start.
    fn populate(&self) {
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(MAX_THREADS)
            .min(self.len / PER_THREAD)
            .max(1);
        let slice = self
            .len
            .div_ceil(threads)
            .next_multiple_of(HUGE_PAGE)
            .min(self.len);
        let fault = |at: usize| {
            let len = slice.min(self.len - at);
            // SAFETY: the range lies inside this region's mapping; populating writes
            // nothing the mapping did not already read as zeros.
            unsafe {
                libc::madvise(
                    (self.addr + at) as *mut c_void,
                    len,
                    libc::MADV_POPULATE_WRITE,
                );
            }
        };
        std::thread::scope(|scope| {
            for at in (slice..self.len).step_by(slice) {
                let started = std::thread::Builder::new()
                    .name("hipfile-pin".into())
                    .spawn_scoped(scope, move || fault(at));
                if started.is_err() {
                    fault(at);
                }
            }
            fault(0);
        });
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the region's own mapping, which no one uses once it is dropped.
        unsafe {
            libc::munmap(self.ptr(), self.len);
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096).max(4096)
}

/// The registered regions by address: what `free_pinned` unregisters and unmaps rather than
/// hands to the runtime.
#[derive(Debug, Default)]
pub(crate) struct Regions(Mutex<HashMap<usize, Region>>);

impl Regions {
    /// Maps a region of at least `len` bytes and registers it with `register(ptr, len)`;
    /// `None` (and nothing left mapped) when `len` is under [`MAPPED_FROM`], the mapping is
    /// refused, or `register` fails.
    pub(crate) fn pin(
        &self,
        len: usize,
        register: impl FnOnce(*mut c_void, usize) -> bool,
    ) -> Option<*mut u8> {
        if len < MAPPED_FROM {
            return None;
        }
        let region = Region::map(len)?;
        if !register(region.ptr(), region.len()) {
            return None;
        }
        let p = region.ptr().cast::<u8>();
        self.lock().insert(region.addr, region);
        Some(p)
    }

    /// Takes back the region that starts at `p`, if [`pin`](Regions::pin) made it:
    /// `unregister` it, then unmaps it. `None` for memory the runtime allocated; `Some(Err)`
    /// leaves the region mapped for good (the runtime may still hold its pages).
    pub(crate) fn unpin<E>(
        &self,
        p: *mut u8,
        unregister: impl FnOnce(*mut c_void) -> Result<(), E>,
    ) -> Option<Result<(), E>> {
        let region = self.lock().remove(&(p as usize))?;
        Some(match unregister(region.ptr()) {
            Ok(()) => Ok(()),
            Err(e) => {
                std::mem::forget(region);
                Err(e)
            }
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Region>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

    use super::*;
    use hipfile_testfs::maps::mapping_at;

    /// The tests that map and unmap run one at a time: each looks at the process's mappings.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a mapping of ours (one not copied on fork) holds `addr`.
    fn ours(addr: usize) -> bool {
        mapping_at(addr).is_some_and(|m| m.has_flag("dc"))
    }

    #[test]
    fn a_region_is_aligned_faulted_in_and_not_copied_to_a_child() {
        let _serial = serial();
        let len = 24 << 20;
        let region = Region::map(len + 1).unwrap();
        assert_eq!(region.addr % HUGE_PAGE, 0);
        assert_eq!(region.len(), (len + 1).next_multiple_of(page_size()));
        let m = mapping_at(region.addr).expect("the mapping is listed");
        assert!(m.has_flag("dc"), "no MADV_DONTFORK: {:?}", m.flags);
        assert!(
            m.rss_kib >= region.len() as u64 / 1024,
            "every page faulted in: {} KiB",
            m.rss_kib
        );
        // SAFETY: the region's pages, mapped and readable.
        let bytes = unsafe { std::slice::from_raw_parts(region.addr as *const u8, region.len) };
        assert!(bytes.iter().all(|&b| b == 0));
        let addr = region.addr;
        drop(region);
        assert!(!ours(addr), "unmapped when dropped");
    }

    #[test]
    fn a_refused_registration_leaves_nothing_mapped() {
        let _serial = serial();
        let regions = Regions::default();
        let mut seen = None;
        let got = regions.pin(4 << 20, |p, len| {
            seen = Some((p as usize, len));
            false
        });
        assert!(got.is_none());
        let (addr, _) = seen.unwrap();
        assert!(!ours(addr));
        assert!(regions.lock().is_empty());
    }

    #[test]
    fn small_allocations_are_left_to_the_runtime() {
        let regions = Regions::default();
        let got = regions.pin(MAPPED_FROM - 1, |_, _| panic!("not registered"));
        assert!(got.is_none());
    }

    #[test]
    fn unpin_unregisters_and_unmaps_only_its_own_regions() {
        let _serial = serial();
        let regions = Regions::default();
        let p = regions.pin(MAPPED_FROM, |_, _| true).unwrap();
        let mut other = [0u8; 8];
        assert!(
            regions
                .unpin(other.as_mut_ptr(), |_| Ok::<(), ()>(()))
                .is_none()
        );
        let mut asked = None;
        let done = regions.unpin(p, |q| {
            asked = Some(q as usize);
            Ok::<(), ()>(())
        });
        assert_eq!(done, Some(Ok(())));
        assert_eq!(asked, Some(p as usize));
        assert!(!ours(p as usize));
    }

    #[test]
    fn a_failed_unregistration_keeps_the_memory_mapped() {
        let _serial = serial();
        let regions = Regions::default();
        let p = regions.pin(MAPPED_FROM, |_, _| true).unwrap();
        assert_eq!(regions.unpin(p, |_| Err("busy")), Some(Err("busy")));
        assert!(ours(p as usize), "still mapped: the runtime may hold it");
        assert!(regions.lock().is_empty());
    }
}
