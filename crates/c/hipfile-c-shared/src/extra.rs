//! cuFile's calls that hipFile's ABI lacks, for `libcufile.so.0` to export under cuFile's
//! names (docs/decisions/cufile-abi.md): starting, stopping and resetting the
//! statistics; the POSIX pool and GPU bounce-buffer slab arrays; a GPU's BAR size; the
//! peer-to-peer flags of a kind of storage; the PCIe topology. They are Rust functions with
//! hipFile's status, not `extern "C"`: the cuFile library wraps each.
//!
//! # Safety
//!
//! The array functions take the caller's pointers and length; each pointer is checked for
//! NULL and the length for sense before `len` elements are read or written.

use crate::panic::boundary;
use crate::settings::{KIB, MAX_SLABS, SlabPool, check_slabs, chunk_bytes};
use crate::state::{self, State};
use crate::types::*;
use facade::Driver;
use std::ffi::{CStr, c_char, c_int, c_uint};

const INTERNAL: hipFileError_t = hipFileError_t::code(hipFileInternalError);

/// cuFile's storage kinds (`CUfileDriverStatusFlags_t`): 0 to 13, 10 reserved.
const STORAGE_KINDS: c_int = 14;
const RESERVED_KIND: c_int = 10;
/// `CU_FILE_NVME_SUPPORTED`: local NVMe, the storage hipfile's fastpath reads peer to peer.
const NVME: c_int = 4;
/// `CU_FILE_P2P_FLAG_PCI_P2PDMA`, the one flag a program may set on x86-64.
pub const P2P_FLAG_PCI_P2PDMA: c_uint = 1 << 0;

/// The open driver, or `hipFileDriverNotInitialized`.
fn open_driver(st: &State) -> Result<Driver, hipFileError_t> {
    match &st.driver {
        Some(d) if st.count > 0 => Ok(d.clone()),
        _ => Err(hipFileError_t::code(hipFileDriverNotInitialized)),
    }
}

/// cuFile's `cuFileStatsStart` (`on`) and `cuFileStatsStop`: counting goes on, or stops,
/// for the open driver; the figures so far stay. At level 0 there is nothing to count
/// either way.
///
/// # Errors
///
/// `hipFileDriverNotInitialized` while the driver is closed.
pub fn stats_counting(on: bool) -> hipFileError_t {
    boundary(INTERNAL, || match open_driver(&state::lock()) {
        Ok(d) => {
            d.set_stats_counting(on);
            hipFileError_t::SUCCESS
        }
        Err(e) => e,
    })
}

/// cuFile's `cuFileStatsReset`: every counter of the open driver back to 0.
///
/// # Errors
///
/// `hipFileDriverNotInitialized` while the driver is closed.
pub fn stats_reset() -> hipFileError_t {
    boundary(INTERNAL, || match open_driver(&state::lock()) {
        Ok(d) => {
            d.reset_stats();
            hipFileError_t::SUCCESS
        }
        Err(e) => e,
    })
}

/// cuFile's `cuFileGetBARSizeInKB(gpu)`: the BAR1 size of a device in KiB, where the
/// runtime can tell it (`Driver::bar1_size`: CUDA's, through NVIDIA's NVML; HIP's cannot).
///
/// # Errors
///
/// `hipFileDriverNotInitialized` while the driver is closed; `hipFileInvalidValue` for a
/// device index the runtime does not have; `hipFilePlatformNotSupported` where the size
/// cannot be told; the runtime's failure otherwise.
pub fn bar_size_kib(gpu: c_int) -> Result<u64, hipFileError_t> {
    boundary(Err(INTERNAL), || {
        let driver = open_driver(&state::lock())?;
        bar_size_of(&driver, gpu)
    })
}

/// `driver`'s answer for `gpu`, in KiB (rounded down), or its status.
fn bar_size_of(driver: &Driver, gpu: c_int) -> Result<u64, hipFileError_t> {
    match driver.bar1_size(gpu) {
        Ok(bytes) => Ok(bytes / KIB),
        Err(facade::Error::InvalidValue { .. }) => Err(hipFileError_t::code(hipFileInvalidValue)),
        Err(facade::Error::Runtime(r)) if r.is_unsupported() => {
            Err(hipFileError_t::code(hipFilePlatformNotSupported))
        }
        Err(other) => Err(crate::codes::status(&other)),
    }
}

/// cuFile's `cuFileSetParameterPosixPoolSlabArray` and
/// `cuFileSetParameterGpuBounceBufferSlabArray`: `len` slab sizes (KiB) and counts, for the
/// next open.
///
/// # Errors
///
/// `hipFileInvalidValue` for a NULL pointer, `len` outside 1..=[`MAX_SLABS`] or slabs that
/// [`check_slabs`] refuses; `hipFileDriverAlreadyOpen` while the driver is open;
/// `hipFileDriverUnsupportedLimit` for a POSIX pool whose total lies outside 4 KiB to 64
/// GiB.
///
/// # Safety
///
/// `sizes` and `counts` are NULL or point to `len` readable values each.
pub unsafe fn set_slab_array(
    pool: SlabPool,
    sizes: *const usize,
    counts: *const usize,
    len: c_int,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        let Ok(n @ 1..=MAX_SLABS) = usize::try_from(len) else {
            return hipFileError_t::code(hipFileInvalidValue);
        };
        if sizes.is_null() || counts.is_null() {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        // SAFETY: non-NULL, and the caller vouches for `len` values at each.
        let (sizes, counts) = unsafe {
            (
                std::slice::from_raw_parts(sizes, n),
                std::slice::from_raw_parts(counts, n),
            )
        };
        let slabs: Vec<(u64, u64)> = sizes
            .iter()
            .zip(counts)
            .map(|(&s, &c)| (s as u64, c as u64))
            .collect();
        let mut st = state::lock();
        if st.count > 0 {
            return hipFileError_t::code(hipFileDriverAlreadyOpen);
        }
        if let Err(code) = check_slabs(pool, &slabs) {
            return hipFileError_t::code(code);
        }
        *pool.slot(&mut st.params.pending) = Some(slabs);
        hipFileError_t::SUCCESS
    })
}

/// The slabs `pool` reports: what was set (the open driver's, or the next open's), or for a
/// POSIX pool never set, hipfile's staging pool as one slab: buffers of one staging chunk,
/// as many as the pool holds.
fn slabs_of(pool: SlabPool, st: &State) -> Vec<(u64, u64)> {
    let (config, settings) = st.current();
    let mut settings = settings.clone();
    if let Some(slabs) = pool.slot(&mut settings).clone() {
        return slabs;
    }
    // The configuration file's, which lie below what a program sets.
    if let Some(mut file) = st.params.file.clone()
        && let Some(slabs) = pool.slot(&mut file).clone()
    {
        return slabs;
    }
    match pool {
        SlabPool::Posix => {
            let chunk = chunk_bytes(&config).max(1);
            vec![(chunk / KIB, (config.fallback.staging_memory / chunk).max(1))]
        }
        SlabPool::GpuBounce => Vec::new(),
    }
}

/// cuFile's `cuFileGetParameterPosixPoolSlabArray` and
/// `cuFileGetParameterGpuBounceBufferSlabArray`: writes the `len` slab sizes (KiB) and
/// counts, `len` being exactly how many there are (none for GPU bounce buffers never set).
///
/// # Errors
///
/// `hipFileInvalidValue` for a NULL pointer (with `len` above 0) or a `len` other than the
/// number of slabs.
///
/// # Safety
///
/// `sizes` and `counts` are NULL or point to `len` writable values each.
pub unsafe fn get_slab_array(
    pool: SlabPool,
    sizes: *mut usize,
    counts: *mut usize,
    len: c_int,
) -> hipFileError_t {
    boundary(INTERNAL, || {
        let slabs = slabs_of(pool, &state::lock());
        if usize::try_from(len).ok() != Some(slabs.len()) {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        if slabs.is_empty() {
            return hipFileError_t::SUCCESS;
        }
        if sizes.is_null() || counts.is_null() {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        for (i, &(kib, count)) in slabs.iter().enumerate() {
            let fit = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
            // SAFETY: non-NULL, and the caller vouches for `len` = `slabs.len()` values at
            // each; `i` is below it.
            unsafe {
                sizes.add(i).write(fit(kib));
                counts.add(i).write(fit(count));
            }
        }
        hipFileError_t::SUCCESS
    })
}

/// Whether `kind` names one of cuFile's storage kinds.
fn storage_kind(kind: c_int) -> bool {
    (0..STORAGE_KINDS).contains(&kind) && kind != RESERVED_KIND
}

/// cuFile's `cuFileDriverGetP2PFlags`: the peer-to-peer flags of a kind of storage. hipfile
/// moves data peer to peer only with its fastpath, from local NVMe (`CU_FILE_NVME_SUPPORTED`)
/// through the kernel's PCI P2PDMA, when the fastpath can serve at all (the runtime has
/// AMD's file I/O and compat mode is not forced): then NVMe's flags are
/// `CU_FILE_P2P_FLAG_PCI_P2PDMA`, and every other kind's 0. What
/// [`set_p2p_flags`] recorded for a kind is reported instead.
///
/// # Errors
///
/// `hipFileDriverNotInitialized` while the driver is closed; `hipFileInvalidValue` for a
/// value that is not a storage kind.
pub fn p2p_flags(kind: c_int) -> Result<c_uint, hipFileError_t> {
    boundary(Err(INTERNAL), || {
        let st = state::lock();
        let driver = open_driver(&st)?;
        if !storage_kind(kind) {
            return Err(hipFileError_t::code(hipFileInvalidValue));
        }
        if let Some(flags) = st.params.p2p.get(kind as usize).copied().flatten() {
            return Ok(flags);
        }
        let fastpath = driver.runtime().amd_file_io && !driver.config().force_compat_mode;
        Ok(if kind == NVME && fastpath {
            P2P_FLAG_PCI_P2PDMA
        } else {
            0
        })
    })
}

/// cuFile's `cuFileDriverSetP2PFlags`: records the peer-to-peer flags of a kind of storage,
/// which [`p2p_flags`] then reports; it changes nothing else (hipfile's choice of backend
/// does not depend on the kind). As cuFile on x86-64, only `CU_FILE_P2P_FLAG_PCI_P2PDMA` may
/// be set (or 0).
///
/// # Errors
///
/// `hipFileDriverNotInitialized` while the driver is closed; `hipFileInvalidValue` for a
/// value that is not a storage kind, or flags other than P2PDMA (cuFile's
/// `CU_FILE_P2P_FLAG_NOT_SUPPORTED` has no value in its header's enum).
pub fn set_p2p_flags(kind: c_int, flags: c_uint) -> hipFileError_t {
    boundary(INTERNAL, || {
        let mut st = state::lock();
        if let Err(e) = open_driver(&st) {
            return e;
        }
        if !storage_kind(kind) || flags & !P2P_FLAG_PCI_P2PDMA != 0 {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        st.params.p2p[kind as usize] = Some(flags);
        hipFileError_t::SUCCESS
    })
}

/// cuFile's `cuFileExportPCIeTopology(filename)`: hipfile detects no PCIe topology (it does
/// not route requests by it), so there is none to write: cuFile's answer for that,
/// `hipFileInternalError`, after the argument is checked. The file is not created.
///
/// # Errors
///
/// `hipFileInvalidValue` for NULL or an empty name; `hipFileInternalError` otherwise.
///
/// # Safety
///
/// `filename` is NULL or a NUL-terminated string.
pub unsafe fn export_topology(filename: *const c_char) -> hipFileError_t {
    boundary(INTERNAL, || {
        if filename.is_null() {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        // SAFETY: non-NULL, and the caller vouches that it is NUL-terminated.
        if unsafe { CStr::from_ptr(filename) }.is_empty() {
            return hipFileError_t::code(hipFileInvalidValue);
        }
        INTERNAL
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_size_is_in_kib_and_a_size_not_told_is_platform_not_supported() {
        use hipfile_testkit::HostMemRuntime;
        use std::sync::Arc;
        let over = |runtime: HostMemRuntime| {
            let config = facade::ConfigBuilder::new().build_with(|_| None).0;
            Driver::with_runtime(config, Arc::new(runtime), facade::RuntimeReport::default())
        };
        let code = |r: Result<u64, hipFileError_t>| r.map_err(|e| e.err);
        // An H200's BAR1, 256 GiB, as `nvidia-smi` shows it: 262144 MiB.
        let h200 = over(
            HostMemRuntime::builder()
                .devices(2)
                .bar1_size(256 << 30)
                .build(),
        );
        assert_eq!(code(bar_size_of(&h200, 0)), Ok(256 << 20));
        assert_eq!(code(bar_size_of(&h200, 1)), Ok(256 << 20));
        assert_eq!(code(bar_size_of(&h200, 2)), Err(hipFileInvalidValue));
        assert_eq!(code(bar_size_of(&h200, -1)), Err(hipFileInvalidValue));
        let odd = over(
            HostMemRuntime::builder()
                .bar1_size((1 << 20) + 1023)
                .build(),
        );
        assert_eq!(code(bar_size_of(&odd, 0)), Ok(1024));
        let untold = over(HostMemRuntime::new());
        assert_eq!(
            code(bar_size_of(&untold, 0)),
            Err(hipFilePlatformNotSupported)
        );
        assert_eq!(code(bar_size_of(&untold, 1)), Err(hipFileInvalidValue));
    }

    #[test]
    fn storage_kinds_are_cufiles() {
        assert!(storage_kind(0) && storage_kind(NVME) && storage_kind(13));
        assert!(!storage_kind(10) && !storage_kind(14) && !storage_kind(-1));
    }
}
