//! `include/cufile.h` against the Rust declarations of `src/types.rs` (which alias
//! `hipfile-c-shared`'s where cuFile's layout is hipFile's): the test writes a C program that
//! prints every struct size, alignment and field offset and every constant listed below as
//! the header makes them, compiles it with the system C compiler, and compares each with
//! `size_of`, `align_of`, `offset_of!` and the Rust constant. The sizes and offsets that
//! cuFile's ABI fixes on x86-64 are checked as numbers too, so the two sides cannot drift
//! together. The same facts are compared with NVIDIA's own `cufile.h` of cuFile 1.17 and
//! 1.15, with CUDA's own `cuda.h` (`common/mod.rs` says where `cargo xtask ci` puts them), so
//! that a program compiled against NVIDIA's header passes and reads what this library
//! lays out. Also compiles the header alone as C99, C11, C++11 and C++17. Skips only when
//! there is no `cc` (or `c++`), and the NVIDIA comparisons without NVIDIA's headers.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

mod common;

use common::{CUDA, CUFILE_115, CUFILE_117, nvidia_headers, our_include};
use cufile::types::*;
use hipfile_c_shared::codes::TABLE;
use hipfile_testfs::{TempDir, has_command, require};
use std::mem::{align_of, offset_of, size_of};
use std::path::Path;
use std::process::Command;

/// The facts (by the end of their name) that cuFile 1.17 added, absent from 1.15's header.
const ADDED_IN_117: &[&str] = &[
    " CU_FILE_VIRTIOFS_SUPPORTED",
    " CU_FILE_MAX_TARGET_TYPES",
    " CU_FILE_POSIX_IO_MODE",
    " CU_FILE_FALLBACK_IO_MODE",
    " CU_FILE_P2P_SUPPORTED",
    " CUFILE_P2PDMA",
    " CUFILE_NVFS",
    " CUFILE_DMABUF",
    " CUFILE_C2C",
    " CUFILE_NVIDIA_PEERMEM",
    " CU_FILE_P2P_FLAG_PCI_P2PDMA",
    " CU_FILE_P2P_FLAG_NVFS",
    " CU_FILE_P2P_FLAG_DMABUF",
    " CU_FILE_P2P_FLAG_C2C",
    " CUFILE_PARAM_GPU_BOUNCE_BUFFER_SLAB_SIZE_KB",
    " CUFILE_PARAM_GPU_BOUNCE_BUFFER_SLAB_COUNT",
];

/// One fact: its name, the Rust value, and the C expression that gives it.
type Fact = (String, i64, String);

macro_rules! layout {
    ($t:ident { $($c:literal => $($f:ident).+),* $(,)? }) => {{
        let mut v: Vec<Fact> = vec![
            (format!("size {}", stringify!($t)), size_of::<$t>() as i64,
             format!("sizeof({})", stringify!($t))),
            (format!("align {}", stringify!($t)), align_of::<$t>() as i64,
             format!("_Alignof({})", stringify!($t))),
        ];
        $(v.push((
            format!("offset {}.{}", stringify!($t), $c),
            offset_of!($t, $($f).+) as i64,
            format!("offsetof({}, {})", stringify!($t), $c),
        ));)*
        v
    }};
}

macro_rules! constants {
    ($($c:ident),* $(,)?) => {
        vec![$((format!("const {}", stringify!($c)), $c as i64, stringify!($c).to_string())),*]
    };
}

fn facts() -> Vec<Fact> {
    let mut v = Vec::new();
    v.extend(layout!(CUfileError_t { "err" => err, "cu_err" => cu_err }));
    v.extend(layout!(CUfileDrvProps_t {
        "nvfs" => nvfs,
        "nvfs.major_version" => nvfs.major_version,
        "nvfs.minor_version" => nvfs.minor_version,
        "nvfs.poll_thresh_size" => nvfs.poll_thresh_size,
        "nvfs.max_direct_io_size" => nvfs.max_direct_io_size,
        "nvfs.dstatusflags" => nvfs.dstatusflags,
        "nvfs.dcontrolflags" => nvfs.dcontrolflags,
        "fflags" => fflags,
        "max_device_cache_size" => max_device_cache_size,
        "per_buffer_cache_size" => per_buffer_cache_size,
        "max_device_pinned_mem_size" => max_device_pinned_mem_size,
        "max_batch_io_size" => max_batch_io_size,
        "max_batch_io_timeout_msecs" => max_batch_io_timeout_msecs,
    }));
    v.extend(layout!(cufileRDMAInfo_t {
        "version" => version, "desc_len" => desc_len, "desc_str" => desc_str,
    }));
    v.extend(layout!(CUfileFSOps_t {
        "fs_type" => fs_type,
        "getRDMADeviceList" => getRDMADeviceList,
        "getRDMADevicePriority" => getRDMADevicePriority,
        "read" => read,
        "write" => write,
    }));
    v.extend(layout!(CUfileDescr_t {
        "type" => type_,
        "handle" => handle,
        "handle.fd" => handle.fd,
        "handle.handle" => handle.hFile,
        "fs_ops" => fs_ops,
    }));
    v.extend(layout!(CUfileIOParams_t {
        "mode" => mode,
        "u" => u,
        "u.batch.devPtr_base" => u.batch.devPtr_base,
        "u.batch.file_offset" => u.batch.file_offset,
        "u.batch.devPtr_offset" => u.batch.devPtr_offset,
        "u.batch.size" => u.batch.size,
        "fh" => fh,
        "opcode" => opcode,
        "cookie" => cookie,
    }));
    v.extend(layout!(CUfileIOEvents_t {
        "cookie" => cookie, "status" => status, "ret" => ret,
    }));
    v.extend(layout!(CUfileOpCounter_t { "ok" => ok, "err" => err }));
    v.extend(layout!(CUfileStatsLevel1_t {
        "read_ops" => read_ops,
        "buf_deregister_ops" => buf_deregister_ops,
        "read_bytes" => read_bytes,
        "write_lat_sum_us" => write_lat_sum_us,
        "batch_submit_ops" => batch_submit_ops,
        "batch_total_submit_ops" => batch_total_submit_ops,
        "batch_read_bytes" => batch_read_bytes,
        "last_batch_write_bytes" => last_batch_write_bytes,
    }));
    v.extend(layout!(CUfileStatsLevel2_t {
        "basic" => basic,
        "read_size_kb_hist" => read_size_kb_hist,
        "write_size_kb_hist" => write_size_kb_hist,
    }));
    v.extend(layout!(CUfilePerGpuStats_t {
        "uuid" => uuid,
        "read_bytes" => read_bytes,
        "n_reads_err" => n_reads_err,
        "writes_bytes" => write_bytes,
        "n_writes_err" => n_writes_err,
        "reg_bytes" => reg_bytes,
    }));
    v.extend(layout!(CUfileStatsLevel3_t {
        "detailed" => detailed, "num_gpus" => num_gpus, "per_gpu_stats" => per_gpu_stats,
    }));
    // The status codes, every one of the table they are made from.
    v.extend(TABLE.iter().filter_map(|r| {
        r.cufile.map(|e| {
            (
                format!("const {}", e.name),
                i64::from(r.value),
                e.name.to_owned(),
            )
        })
    }));
    v.extend(constants![
        CUFILEOP_BASE_ERR,
        CU_FILE_LUSTRE_SUPPORTED,
        CU_FILE_WEKAFS_SUPPORTED,
        CU_FILE_NFS_SUPPORTED,
        CU_FILE_GPFS_SUPPORTED,
        CU_FILE_NVME_SUPPORTED,
        CU_FILE_NVMEOF_SUPPORTED,
        CU_FILE_SCSI_SUPPORTED,
        CU_FILE_SCALEFLUX_CSD_SUPPORTED,
        CU_FILE_NVMESH_SUPPORTED,
        CU_FILE_BEEGFS_SUPPORTED,
        CU_FILE_NVME_P2P_SUPPORTED,
        CU_FILE_SCATEFS_SUPPORTED,
        CU_FILE_VIRTIOFS_SUPPORTED,
        CU_FILE_MAX_TARGET_TYPES,
        CU_FILE_USE_POLL_MODE,
        CU_FILE_ALLOW_COMPAT_MODE,
        CU_FILE_POSIX_IO_MODE,
        CU_FILE_FALLBACK_IO_MODE,
        CU_FILE_DYN_ROUTING_SUPPORTED,
        CU_FILE_BATCH_IO_SUPPORTED,
        CU_FILE_STREAMS_SUPPORTED,
        CU_FILE_PARALLEL_IO_SUPPORTED,
        CU_FILE_P2P_SUPPORTED,
        CUFILE_P2PDMA,
        CUFILE_NVFS,
        CUFILE_DMABUF,
        CUFILE_C2C,
        CUFILE_NVIDIA_PEERMEM,
        CU_FILE_P2P_FLAG_PCI_P2PDMA,
        CU_FILE_P2P_FLAG_NVFS,
        CU_FILE_P2P_FLAG_DMABUF,
        CU_FILE_P2P_FLAG_C2C,
        CU_FILE_RDMA_REGISTER,
        CU_FILE_RDMA_RELAXED_ORDERING,
        CU_FILE_HANDLE_TYPE_OPAQUE_FD,
        CU_FILE_HANDLE_TYPE_OPAQUE_WIN32,
        CU_FILE_HANDLE_TYPE_USERSPACE_FS,
        CUFILE_READ,
        CUFILE_WRITE,
        CUFILE_WAITING,
        CUFILE_PENDING,
        CUFILE_INVALID,
        CUFILE_CANCELED,
        CUFILE_COMPLETE,
        CUFILE_TIMEOUT,
        CUFILE_FAILED,
        CUFILE_BATCH,
        CU_FILE_STREAM_FIXED_BUF_OFFSET,
        CU_FILE_STREAM_FIXED_FILE_OFFSET,
        CU_FILE_STREAM_FIXED_FILE_SIZE,
        CU_FILE_STREAM_PAGE_ALIGNED_INPUTS,
        CUFILE_PARAM_PROFILE_STATS,
        CUFILE_PARAM_EXECUTION_MAX_IO_QUEUE_DEPTH,
        CUFILE_PARAM_EXECUTION_MAX_IO_THREADS,
        CUFILE_PARAM_EXECUTION_MIN_IO_THRESHOLD_SIZE_KB,
        CUFILE_PARAM_EXECUTION_MAX_REQUEST_PARALLELISM,
        CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB,
        CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB,
        CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB,
        CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB,
        CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE,
        CUFILE_PARAM_POLLTHRESHOLD_SIZE_KB,
        CUFILE_PARAM_PROPERTIES_BATCH_IO_TIMEOUT_MS,
        CUFILE_PARAM_PROPERTIES_USE_POLL_MODE,
        CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE,
        CUFILE_PARAM_FORCE_COMPAT_MODE,
        CUFILE_PARAM_FS_MISC_API_CHECK_AGGRESSIVE,
        CUFILE_PARAM_EXECUTION_PARALLEL_IO,
        CUFILE_PARAM_PROFILE_NVTX,
        CUFILE_PARAM_PROPERTIES_ALLOW_SYSTEM_MEMORY,
        CUFILE_PARAM_USE_PCIP2PDMA,
        CUFILE_PARAM_PREFER_IO_URING,
        CUFILE_PARAM_FORCE_ODIRECT_MODE,
        CUFILE_PARAM_SKIP_TOPOLOGY_DETECTION,
        CUFILE_PARAM_STREAM_MEMOPS_BYPASS,
        CUFILE_PARAM_LOGGING_LEVEL,
        CUFILE_PARAM_ENV_LOGFILE_PATH,
        CUFILE_PARAM_LOG_DIR,
        CUFILE_PARAM_POSIX_POOL_SLAB_SIZE_KB,
        CUFILE_PARAM_POSIX_POOL_SLAB_COUNT,
        CUFILE_PARAM_GPU_BOUNCE_BUFFER_SLAB_SIZE_KB,
        CUFILE_PARAM_GPU_BOUNCE_BUFFER_SLAB_COUNT,
        CUFILE_GPU_UUID_LEN,
    ]);
    v
}

/// What the `cufile.h` found first on `includes` gives for each fact, compiled by `cc`.
fn c_values(facts: &[Fact], includes: &[&Path]) -> Vec<(String, i64)> {
    let dir = TempDir::new("cufile-layout");
    let mut src = String::from(
        "#include <cufile.h>\n#include <stddef.h>\n#include <stdio.h>\nint main(void)\n{\n",
    );
    for (name, _, expr) in facts {
        src.push_str(&format!(
            "    printf(\"%s\\t%lld\\n\", \"{name}\", (long long)({expr}));\n"
        ));
    }
    src.push_str("    return 0;\n}\n");
    let c = dir.path().join("layout.c");
    std::fs::write(&c, src).unwrap();
    let exe = dir.path().join("layout");
    let mut cc = Command::new("cc");
    // NVIDIA's header uses glibc's `loff_t`, declared with _GNU_SOURCE.
    cc.args(["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra"]);
    for include in includes {
        cc.arg("-I").arg(include);
    }
    let built = cc.arg(&c).arg("-o").arg(&exe).output().unwrap();
    assert!(
        built.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let ran = Command::new(&exe).output().unwrap();
    assert!(ran.status.success());
    String::from_utf8(ran.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (name, value) = l.split_once('\t').unwrap();
            (name.to_string(), value.parse().unwrap())
        })
        .collect()
}

/// The facts that differ between the Rust declarations and a header's, described.
fn mismatches(facts: &[Fact], c: &[(String, i64)], theirs: &str) -> Vec<String> {
    assert_eq!(c.len(), facts.len());
    facts
        .iter()
        .zip(c)
        .filter(|((_, rust, _), (_, cv))| rust != cv)
        .map(|((name, rust, _), (_, cv))| format!("{name}: ours {rust}, {theirs} {cv}"))
        .collect()
}

/// Our header, alone (its stand-ins for CUDA's types) and with CUDA's own `cuda.h` on the
/// include path (which it then includes), gives every fact as the Rust declarations do.
#[test]
fn header_and_rust_declarations_agree() {
    require!(has_command("cc"));
    let facts = facts();
    let ours = our_include();
    let alone = mismatches(&facts, &c_values(&facts, &[&ours]), "the header alone,");
    assert!(alone.is_empty(), "{}", alone.join("\n"));
    let cuda = require!(nvidia_headers(CUDA));
    let with_cuda = mismatches(
        &facts,
        &c_values(&facts, &[&ours, &cuda]),
        "the header with CUDA's,",
    );
    assert!(with_cuda.is_empty(), "{}", with_cuda.join("\n"));
}

/// Every fact of the list is the same in NVIDIA's header as in the Rust declarations (and so
/// in ours): sizes, offsets, enum values and macros, for cuFile 1.17 (whose functions the
/// library exports) and 1.15 (CUDA 13.0's), each with CUDA 13.0's `cuda.h`.
#[test]
fn nvidias_cufile_h_agrees() {
    require!(has_command("cc"));
    let cuda = require!(nvidia_headers(CUDA));
    let facts = facts();
    for (name, since_117) in [(CUFILE_117, true), (CUFILE_115, false)] {
        let include = require!(nvidia_headers(name));
        // 1.15 lacks what 1.17 added; every other fact is checked against it too.
        let facts: Vec<Fact> = facts
            .iter()
            .filter(|(fact, _, _)| since_117 || !ADDED_IN_117.iter().any(|a| fact.ends_with(a)))
            .cloned()
            .collect();
        let differ = mismatches(
            &facts,
            &c_values(&facts, &[&include, &cuda]),
            &format!("NVIDIA's {name}"),
        );
        assert!(differ.is_empty(), "{}", differ.join("\n"));
    }
}

/// cuFile's layouts on x86-64, from NVIDIA's header: the numbers themselves.
#[test]
fn layouts_are_cufiles() {
    assert_eq!(size_of::<CUfileError_t>(), 8);
    assert_eq!(size_of::<CUfileDrvProps_t>(), 56);
    assert_eq!(offset_of!(CUfileDrvProps_t, nvfs.dstatusflags), 24);
    assert_eq!(offset_of!(CUfileDrvProps_t, fflags), 32);
    assert_eq!(offset_of!(CUfileDrvProps_t, max_device_cache_size), 36);
    assert_eq!(offset_of!(CUfileDrvProps_t, per_buffer_cache_size), 40);
    assert_eq!(offset_of!(CUfileDrvProps_t, max_device_pinned_mem_size), 44);
    assert_eq!(offset_of!(CUfileDrvProps_t, max_batch_io_size), 48);
    assert_eq!(offset_of!(CUfileDrvProps_t, max_batch_io_timeout_msecs), 52);
    assert_eq!(size_of::<CUfileDescr_t>(), 24);
    assert_eq!(offset_of!(CUfileDescr_t, handle), 8);
    assert_eq!(offset_of!(CUfileDescr_t, fs_ops), 16);
    assert_eq!(size_of::<CUfileIOParams_t>(), 64);
    assert_eq!(offset_of!(CUfileIOParams_t, fh), 40);
    assert_eq!(offset_of!(CUfileIOParams_t, opcode), 48);
    assert_eq!(offset_of!(CUfileIOParams_t, cookie), 56);
    assert_eq!(size_of::<CUfileIOEvents_t>(), 24);
    assert_eq!(size_of::<CUfileStatsLevel1_t>(), 512);
    assert_eq!(size_of::<CUfileStatsLevel2_t>(), 1024);
    assert_eq!(size_of::<CUfilePerGpuStats_t>(), 248);
    assert_eq!(size_of::<CUfileStatsLevel3_t>(), 5000);
    assert_eq!(offset_of!(CUfileStatsLevel3_t, per_gpu_stats), 1032);
    assert_eq!(CU_FILE_IO_MAX_ERROR, 5050);
}

/// Compiles the header on its own with `compiler` as `language`, each standard in turn,
/// warnings as errors.
fn header_compiles(compiler: &str, language: &str, standards: &[&str]) {
    let header = Path::new(env!("CARGO_MANIFEST_DIR")).join("include/cufile.h");
    hipfile_testfs::clib::assert_header_compiles(&header, compiler, language, standards);
}

#[test]
fn header_compiles_alone_as_c() {
    require!(has_command("cc"));
    header_compiles("cc", "c", &["c99", "c11"]);
}

#[test]
fn header_compiles_alone_as_cxx() {
    require!(has_command("c++"));
    header_compiles("c++", "c++", &["c++11", "c++17"]);
}
