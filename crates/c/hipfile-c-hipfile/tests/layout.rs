//! The header against the Rust declarations: compiles `tests/c/layout.c` with the system C
//! compiler against `include/hipfile.h`, runs it, and compares every struct size, alignment
//! and field offset, and every constant, with `size_of`, `align_of`, `offset_of!` and the
//! constants of `src/types.rs`; both lists must name the same facts. The sizes that
//! hipFile's ABI fixes on x86-64 are checked as numbers too, so the two sides cannot drift
//! together. Compiled with `HIPFILE_NO_HIP_HEADERS` (the header's own HIP types), so that it
//! runs where HIP's headers are not installed; `tests/hip_headers.rs` compiles the header
//! with them. Skips only when there is no `cc`.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

// The library is a cdylib only (an rlib would collide with the facade's): its declarations
// are those of the implementation it exports, `hipfile-c-shared`.
use hipfile_c_shared::codes::TABLE;
use hipfile_c_shared::types::*;
use hipfile_testfs::{TempDir, has_command, require};
use std::collections::BTreeMap;
use std::mem::{align_of, offset_of, size_of};
use std::path::Path;
use std::process::Command;

macro_rules! size {
    ($t:ident) => {
        (format!("size {}", stringify!($t)), size_of::<$t>() as i64)
    };
}
macro_rules! align {
    ($t:ident) => {
        (format!("align {}", stringify!($t)), align_of::<$t>() as i64)
    };
}
macro_rules! offset {
    ($t:ident, $c:literal, $($f:tt)+) => {
        (
            format!("offset {}.{}", stringify!($t), $c),
            offset_of!($t, $($f)+) as i64,
        )
    };
}
macro_rules! constant {
    ($c:ident) => {
        (format!("const {}", stringify!($c)), $c as i64)
    };
}

fn rust_facts() -> Vec<(String, i64)> {
    let mut facts = vec![
        size!(hipFileError_t),
        align!(hipFileError_t),
        offset!(hipFileError_t, "err", err),
        offset!(hipFileError_t, "hip_drv_err", hip_drv_err),
        size!(hipFileDriverProps_t),
        align!(hipFileDriverProps_t),
        offset!(hipFileDriverProps_t, "nvfs", nvfs),
        offset!(
            hipFileDriverProps_t,
            "nvfs.major_version",
            nvfs.major_version
        ),
        offset!(
            hipFileDriverProps_t,
            "nvfs.minor_version",
            nvfs.minor_version
        ),
        offset!(
            hipFileDriverProps_t,
            "nvfs.poll_thresh_size",
            nvfs.poll_thresh_size
        ),
        offset!(
            hipFileDriverProps_t,
            "nvfs.max_direct_io_size",
            nvfs.max_direct_io_size
        ),
        offset!(
            hipFileDriverProps_t,
            "nvfs.driver_status_flags",
            nvfs.driver_status_flags
        ),
        offset!(
            hipFileDriverProps_t,
            "nvfs.driver_control_flags",
            nvfs.driver_control_flags
        ),
        offset!(hipFileDriverProps_t, "feature_flags", feature_flags),
        offset!(
            hipFileDriverProps_t,
            "max_device_cache_size",
            max_device_cache_size
        ),
        offset!(
            hipFileDriverProps_t,
            "per_buffer_cache_size",
            per_buffer_cache_size
        ),
        offset!(
            hipFileDriverProps_t,
            "max_device_pinned_mem_size",
            max_device_pinned_mem_size
        ),
        offset!(
            hipFileDriverProps_t,
            "max_batch_io_count",
            max_batch_io_count
        ),
        offset!(
            hipFileDriverProps_t,
            "max_batch_io_timeout_msecs",
            max_batch_io_timeout_msecs
        ),
        size!(hipFileRDMAInfo_t),
        align!(hipFileRDMAInfo_t),
        offset!(hipFileRDMAInfo_t, "version", version),
        offset!(hipFileRDMAInfo_t, "desc_len", desc_len),
        offset!(hipFileRDMAInfo_t, "desc_str", desc_str),
        size!(hipFileFSOps_t),
        align!(hipFileFSOps_t),
        offset!(hipFileFSOps_t, "fs_type", fs_type),
        offset!(hipFileFSOps_t, "getRDMADeviceList", getRDMADeviceList),
        offset!(
            hipFileFSOps_t,
            "getRDMADevicePriority",
            getRDMADevicePriority
        ),
        offset!(hipFileFSOps_t, "read", read),
        offset!(hipFileFSOps_t, "write", write),
        size!(hipFileDescr_t),
        align!(hipFileDescr_t),
        offset!(hipFileDescr_t, "type", type_),
        offset!(hipFileDescr_t, "handle", handle),
        offset!(hipFileDescr_t, "handle.fd", handle.fd),
        offset!(hipFileDescr_t, "handle.hFile", handle.hFile),
        offset!(hipFileDescr_t, "fs_ops", fs_ops),
        size!(hipFileIOParams_t),
        align!(hipFileIOParams_t),
        offset!(hipFileIOParams_t, "mode", mode),
        offset!(hipFileIOParams_t, "u", u),
        offset!(hipFileIOParams_t, "u.batch", u.batch),
        offset!(
            hipFileIOParams_t,
            "u.batch.devPtr_base",
            u.batch.devPtr_base
        ),
        offset!(
            hipFileIOParams_t,
            "u.batch.file_offset",
            u.batch.file_offset
        ),
        offset!(
            hipFileIOParams_t,
            "u.batch.devPtr_offset",
            u.batch.devPtr_offset
        ),
        offset!(hipFileIOParams_t, "u.batch.size", u.batch.size),
        offset!(hipFileIOParams_t, "fh", fh),
        offset!(hipFileIOParams_t, "opcode", opcode),
        offset!(hipFileIOParams_t, "cookie", cookie),
        size!(hipFileIOEvents_t),
        align!(hipFileIOEvents_t),
        offset!(hipFileIOEvents_t, "cookie", cookie),
        offset!(hipFileIOEvents_t, "status", status),
        offset!(hipFileIOEvents_t, "ret", ret),
        size!(hipFileOpCounter_t),
        align!(hipFileOpCounter_t),
        offset!(hipFileOpCounter_t, "ok", ok),
        offset!(hipFileOpCounter_t, "err", err),
        size!(hipFileStatsLevel1_t),
        align!(hipFileStatsLevel1_t),
        offset!(hipFileStatsLevel1_t, "read_ops", read_ops),
        offset!(hipFileStatsLevel1_t, "write_ops", write_ops),
        offset!(hipFileStatsLevel1_t, "hdl_register_ops", hdl_register_ops),
        offset!(
            hipFileStatsLevel1_t,
            "hdl_deregister_ops",
            hdl_deregister_ops
        ),
        offset!(hipFileStatsLevel1_t, "buf_register_ops", buf_register_ops),
        offset!(
            hipFileStatsLevel1_t,
            "buf_deregister_ops",
            buf_deregister_ops
        ),
        offset!(hipFileStatsLevel1_t, "read_bytes", read_bytes),
        offset!(hipFileStatsLevel1_t, "write_bytes", write_bytes),
        offset!(
            hipFileStatsLevel1_t,
            "read_bw_bytes_per_sec",
            read_bw_bytes_per_sec
        ),
        offset!(
            hipFileStatsLevel1_t,
            "write_bw_bytes_per_sec",
            write_bw_bytes_per_sec
        ),
        offset!(hipFileStatsLevel1_t, "read_lat_avg_us", read_lat_avg_us),
        offset!(hipFileStatsLevel1_t, "write_lat_avg_us", write_lat_avg_us),
        offset!(hipFileStatsLevel1_t, "read_ops_per_sec", read_ops_per_sec),
        offset!(hipFileStatsLevel1_t, "write_ops_per_sec", write_ops_per_sec),
        offset!(hipFileStatsLevel1_t, "read_lat_sum_us", read_lat_sum_us),
        offset!(hipFileStatsLevel1_t, "write_lat_sum_us", write_lat_sum_us),
        offset!(hipFileStatsLevel1_t, "batch_submit_ops", batch_submit_ops),
        offset!(
            hipFileStatsLevel1_t,
            "batch_complete_ops",
            batch_complete_ops
        ),
        offset!(hipFileStatsLevel1_t, "batch_setup_ops", batch_setup_ops),
        offset!(hipFileStatsLevel1_t, "batch_cancel_ops", batch_cancel_ops),
        offset!(hipFileStatsLevel1_t, "batch_destroy_ops", batch_destroy_ops),
        offset!(
            hipFileStatsLevel1_t,
            "batch_enqueued_ops",
            batch_enqueued_ops
        ),
        offset!(
            hipFileStatsLevel1_t,
            "batch_posix_enqueued_ops",
            batch_posix_enqueued_ops
        ),
        offset!(
            hipFileStatsLevel1_t,
            "batch_processed_ops",
            batch_processed_ops
        ),
        offset!(
            hipFileStatsLevel1_t,
            "batch_posix_processed_ops",
            batch_posix_processed_ops
        ),
        offset!(
            hipFileStatsLevel1_t,
            "batch_nvfs_submit_ops",
            batch_nvfs_submit_ops
        ),
        offset!(
            hipFileStatsLevel1_t,
            "batch_p2p_submit_ops",
            batch_p2p_submit_ops
        ),
        offset!(
            hipFileStatsLevel1_t,
            "batch_aio_submit_ops",
            batch_aio_submit_ops
        ),
        offset!(
            hipFileStatsLevel1_t,
            "batch_iouring_submit_ops",
            batch_iouring_submit_ops
        ),
        offset!(
            hipFileStatsLevel1_t,
            "batch_mixed_io_submit_ops",
            batch_mixed_io_submit_ops
        ),
        offset!(
            hipFileStatsLevel1_t,
            "batch_total_submit_ops",
            batch_total_submit_ops
        ),
        offset!(hipFileStatsLevel1_t, "batch_read_bytes", batch_read_bytes),
        offset!(hipFileStatsLevel1_t, "batch_write_bytes", batch_write_bytes),
        offset!(
            hipFileStatsLevel1_t,
            "batch_read_bw_bytes",
            batch_read_bw_bytes
        ),
        offset!(
            hipFileStatsLevel1_t,
            "batch_write_bw_bytes",
            batch_write_bw_bytes
        ),
        offset!(
            hipFileStatsLevel1_t,
            "batch_submit_lat_avg_us",
            batch_submit_lat_avg_us
        ),
        offset!(
            hipFileStatsLevel1_t,
            "batch_completion_lat_avg_us",
            batch_completion_lat_avg_us
        ),
        offset!(
            hipFileStatsLevel1_t,
            "batch_submit_ops_per_sec",
            batch_submit_ops_per_sec
        ),
        offset!(
            hipFileStatsLevel1_t,
            "batch_complete_ops_per_sec",
            batch_complete_ops_per_sec
        ),
        offset!(
            hipFileStatsLevel1_t,
            "batch_submit_lat_sum_us",
            batch_submit_lat_sum_us
        ),
        offset!(
            hipFileStatsLevel1_t,
            "batch_completion_lat_sum_us",
            batch_completion_lat_sum_us
        ),
        offset!(
            hipFileStatsLevel1_t,
            "last_batch_read_bytes",
            last_batch_read_bytes
        ),
        offset!(
            hipFileStatsLevel1_t,
            "last_batch_write_bytes",
            last_batch_write_bytes
        ),
        size!(hipFileStatsLevel2_t),
        align!(hipFileStatsLevel2_t),
        offset!(hipFileStatsLevel2_t, "basic", basic),
        offset!(hipFileStatsLevel2_t, "read_size_kb_hist", read_size_kb_hist),
        offset!(
            hipFileStatsLevel2_t,
            "write_size_kb_hist",
            write_size_kb_hist
        ),
        size!(hipFilePerGpuStats_t),
        align!(hipFilePerGpuStats_t),
        offset!(hipFilePerGpuStats_t, "uuid", uuid),
        offset!(hipFilePerGpuStats_t, "read_bytes", read_bytes),
        offset!(
            hipFilePerGpuStats_t,
            "read_bw_bytes_per_sec",
            read_bw_bytes_per_sec
        ),
        offset!(hipFilePerGpuStats_t, "read_utilization", read_utilization),
        offset!(hipFilePerGpuStats_t, "read_duration_us", read_duration_us),
        offset!(hipFilePerGpuStats_t, "n_total_reads", n_total_reads),
        offset!(hipFilePerGpuStats_t, "n_p2p_reads", n_p2p_reads),
        offset!(hipFilePerGpuStats_t, "n_nvfs_reads", n_nvfs_reads),
        offset!(hipFilePerGpuStats_t, "n_posix_reads", n_posix_reads),
        offset!(hipFilePerGpuStats_t, "n_unaligned_reads", n_unaligned_reads),
        offset!(hipFilePerGpuStats_t, "n_dr_reads", n_dr_reads),
        offset!(hipFilePerGpuStats_t, "n_sparse_regions", n_sparse_regions),
        offset!(hipFilePerGpuStats_t, "n_inline_regions", n_inline_regions),
        offset!(hipFilePerGpuStats_t, "n_reads_err", n_reads_err),
        offset!(hipFilePerGpuStats_t, "write_bytes", write_bytes),
        offset!(
            hipFilePerGpuStats_t,
            "write_bw_bytes_per_sec",
            write_bw_bytes_per_sec
        ),
        offset!(hipFilePerGpuStats_t, "write_utilization", write_utilization),
        offset!(hipFilePerGpuStats_t, "write_duration_us", write_duration_us),
        offset!(hipFilePerGpuStats_t, "n_total_writes", n_total_writes),
        offset!(hipFilePerGpuStats_t, "n_p2p_writes", n_p2p_writes),
        offset!(hipFilePerGpuStats_t, "n_nvfs_writes", n_nvfs_writes),
        offset!(hipFilePerGpuStats_t, "n_posix_writes", n_posix_writes),
        offset!(
            hipFilePerGpuStats_t,
            "n_unaligned_writes",
            n_unaligned_writes
        ),
        offset!(hipFilePerGpuStats_t, "n_dr_writes", n_dr_writes),
        offset!(hipFilePerGpuStats_t, "n_writes_err", n_writes_err),
        offset!(hipFilePerGpuStats_t, "n_mmap", n_mmap),
        offset!(hipFilePerGpuStats_t, "n_mmap_ok", n_mmap_ok),
        offset!(hipFilePerGpuStats_t, "n_mmap_err", n_mmap_err),
        offset!(hipFilePerGpuStats_t, "n_mmap_free", n_mmap_free),
        offset!(hipFilePerGpuStats_t, "reg_bytes", reg_bytes),
        size!(hipFileStatsLevel3_t),
        align!(hipFileStatsLevel3_t),
        offset!(hipFileStatsLevel3_t, "detailed", detailed),
        offset!(hipFileStatsLevel3_t, "num_gpus", num_gpus),
        offset!(hipFileStatsLevel3_t, "per_gpu_stats", per_gpu_stats),
        size!(hipError_t),
        size!(hipStream_t),
        size!(hoff_t),
        size!(hipFileHandle_t),
        size!(hipFileBatchHandle_t),
        size!(hipFileOpError_t),
        constant!(hipFileLustreSupported),
        constant!(hipFileWekaFSSupported),
        constant!(hipFileNFSSupported),
        constant!(hipFileGPFSSupported),
        constant!(hipFileNVMeSupported),
        constant!(hipFileNVMeoFSupported),
        constant!(hipFileSCSISupported),
        constant!(hipFileScaleFluxCSDSupported),
        constant!(hipFileNVMeshSupported),
        constant!(hipFileBeeGFSSupported),
        constant!(hipFileNVMeP2PSupported),
        constant!(hipFileScatefsSupported),
        constant!(hipFileUsePollMode),
        constant!(hipFileAllowCompatMode),
        constant!(hipFileDynRoutingSupported),
        constant!(hipFileBatchIOSupported),
        constant!(hipFileStreamsSupported),
        constant!(hipFileParallelIOSupported),
        constant!(hipFileHandleTypeOpaqueFD),
        constant!(hipFileHandleTypeOpaqueWin32),
        constant!(hipFileHandleTypeUserspaceFS),
        constant!(hipFileBatchRead),
        constant!(hipFileBatchWrite),
        constant!(hipFileWaiting),
        constant!(hipFilePending),
        constant!(hipFileInvalid),
        constant!(hipFileCanceled),
        constant!(hipFileComplete),
        constant!(hipFileTimeout),
        constant!(hipFileFailed),
        constant!(hipFileBatch),
        constant!(hipFileParamProfileStats),
        constant!(hipFileParamExecutionMaxIOQueueDepth),
        constant!(hipFileParamExecutionMaxIOThreads),
        constant!(hipFileParamExecutionMinIOThresholdSizeKB),
        constant!(hipFileParamExecutionMaxRequestParallelism),
        constant!(hipFileParamPropertiesMaxDirectIOSizeKB),
        constant!(hipFileParamPropertiesMaxDeviceCacheSizeKB),
        constant!(hipFileParamPropertiesPerBufferCacheSizeKB),
        constant!(hipFileParamPropertiesMaxDevicePinnedMemSizeKB),
        constant!(hipFileParamPropertiesIOBatchsize),
        constant!(hipFileParamPollthresholdSizeKB),
        constant!(hipFileParamPropertiesBatchIOTimeoutMs),
        constant!(hipFileParamPropertiesUsePollMode),
        constant!(hipFileParamPropertiesAllowCompatMode),
        constant!(hipFileParamForceCompatMode),
        constant!(hipFileParamFsMiscApiCheckAggressive),
        constant!(hipFileParamExecutionParallelIO),
        constant!(hipFileParamProfileNvtx),
        constant!(hipFileParamPropertiesAllowSystemMemory),
        constant!(hipFileParamUsePcip2pdma),
        constant!(hipFileParamPreferIOUring),
        constant!(hipFileParamForceOdirectMode),
        constant!(hipFileParamSkipTopologyDetection),
        constant!(hipFileParamStreamMemopsBypass),
        constant!(hipFileParamLoggingLevel),
        constant!(hipFileParamEnvLogfilePath),
        constant!(hipFileParamLogDir),
        constant!(HIPFILE_VERSION_MAJOR),
        constant!(HIPFILE_VERSION_MINOR),
        constant!(HIPFILE_VERSION_PATCH),
        constant!(HIPFILE_BASE_ERR),
        constant!(HIPFILE_RDMA_REGISTER),
        constant!(HIPFILE_RDMA_RELAXED_ORDERING),
        constant!(HIPFILE_STREAM_FIXED_BUF_OFFSET),
        constant!(HIPFILE_STREAM_FIXED_FILE_OFFSET),
        constant!(HIPFILE_STREAM_FIXED_FILE_SIZE),
        constant!(HIPFILE_STREAM_PAGE_ALIGNED_INPUTS),
        constant!(HIPFILE_STREAM_FLAGS_MASK),
        constant!(HIPFILE_GPU_UUID_LEN),
        constant!(HIPFILE_MAX_GPUS),
    ];
    // The status codes, every one of the table they are made from.
    facts.extend(TABLE.iter().filter_map(|r| {
        r.hipfile
            .map(|e| (format!("const {}", e.name), i64::from(r.value)))
    }));
    facts
}

/// Compiles and runs `tests/c/layout.c`; its facts by name.
fn c_facts(dir: &TempDir) -> BTreeMap<String, i64> {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = dir.path().join("layout");
    let built = Command::new("cc")
        .args(["-std=c11", "-Wall", "-Wextra", "-pedantic", "-Werror"])
        // Without HIP's headers, which need not be installed for the layout.
        .args(["-DHIPFILE_NO_HIP_HEADERS", "-I"])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c/layout.c"))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let ran = Command::new(&exe).output().unwrap();
    assert!(ran.status.success(), "layout failed: {:?}", ran.status);
    let mut facts = BTreeMap::new();
    for line in String::from_utf8(ran.stdout).unwrap().lines() {
        let (name, value) = line.rsplit_once(' ').unwrap();
        let old = facts.insert(name.to_owned(), value.parse().unwrap());
        assert!(old.is_none(), "{name} printed twice");
    }
    facts
}

#[test]
fn header_and_rust_declarations_agree() {
    require!(has_command("cc"));
    let dir = TempDir::new("c-hipfile-layout");
    let c = c_facts(&dir);
    let rust: BTreeMap<String, i64> = rust_facts().into_iter().collect();
    let mut problems = Vec::new();
    for (name, value) in &rust {
        match c.get(name) {
            Some(v) if v == value => {}
            Some(v) => problems.push(format!("{name}: C {v}, Rust {value}")),
            None => problems.push(format!("{name}: not printed by layout.c")),
        }
    }
    for name in c.keys().filter(|n| !rust.contains_key(*n)) {
        problems.push(format!("{name}: not checked on the Rust side"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // hipFile's ABI on x86-64, as upstream's header compiles.
    if cfg!(target_arch = "x86_64") {
        for (name, size) in [
            ("hipFileError_t", 8),
            ("hipFileDescr_t", 24),
            ("hipFileIOParams_t", 64),
            ("hipFileIOEvents_t", 24),
            ("hipFileDriverProps_t", 72),
            // The statistics: upstream's fields, all 64-bit but the UUID and num_gpus.
            ("hipFileOpCounter_t", 16),
            ("hipFileStatsLevel1_t", 512),
            ("hipFileStatsLevel2_t", 1024),
            ("hipFilePerGpuStats_t", 248),
            ("hipFileStatsLevel3_t", 5000),
        ] {
            assert_eq!(c[&format!("size {name}")], size, "{name}");
        }
        for (field, offset) in [
            ("hipFileStatsLevel1_t.batch_submit_ops", 176),
            ("hipFileStatsLevel1_t.last_batch_write_bytes", 504),
            ("hipFileStatsLevel2_t.write_size_kb_hist", 768),
            ("hipFilePerGpuStats_t.read_bytes", 16),
            ("hipFilePerGpuStats_t.write_bytes", 120),
            ("hipFilePerGpuStats_t.reg_bytes", 240),
            ("hipFileStatsLevel3_t.num_gpus", 1024),
            ("hipFileStatsLevel3_t.per_gpu_stats", 1032),
        ] {
            assert_eq!(c[&format!("offset {field}")], offset, "{field}");
        }
    }
}

#[test]
fn error_codes_skip_5021_and_5032() {
    let codes = [
        hipFileDIONotSet,
        hipFileInvalidValue,
        hipFileGetNewFDFailed,
        hipFileDriverSetupError,
    ];
    assert_eq!(codes, [5020, 5022, 5031, 5033]);
}
