//! `hipfile cp`'s arguments and the checks clap makes of them.

use crate::options;
use crate::runtime::RuntimeChoice;
use clap::Args;
use std::path::PathBuf;

/// The unit `--chunk` is a multiple of.
pub const CHUNK_UNIT: u64 = 4096;

/// The largest `--chunk`: one request moves at most this many bytes (the kernel's
/// `MAX_RW_COUNT`, a multiple of 4096).
pub const MAX_CHUNK: u64 = hipfile::core::MAX_IO_SIZE;

/// Copy a file through GPU memory
#[derive(Debug, Clone, PartialEq, Eq, Args)]
#[command(
    args_override_self = true,
    long_about = "\
Copy a file through GPU memory

Reads SRC into one GPU buffer a chunk at a time and writes each chunk from the buffer to
DST, as an application using hipfile would. Each request is served by the fastpath
(storage <-> GPU memory with no host copy) when the file, the request and the runtime
allow it, and by the fallback (POSIX I/O through host staging buffers) otherwise; run
'hipfile check' on SRC and DST to see why. A fastpath request that fails with ENODEV or
EREMOTEIO is retried once on the fallback, as for any program using hipfile.

SRC is a regular file, a block device or a character device (what the library registers:
a character device is read as pread reads it there, so /dev/null gives an empty copy),
opened read-only, and read to its end whatever size it claims (a procfs file claims 0
bytes); a directory, a FIFO or a socket is refused, as 'hipfile check' says. The copy is written to a new file in DST's
directory, .NAME.hipfile-cp.PID.N.tmp, flushed to storage, and only then renamed over DST,
so that DST is at every moment either what it was or the whole copy. DST must be a regular
file or a new name, and must not be SRC. A new DST gets mode 0644, less the umask; an
existing one is replaced by a new file with its mode (and its owner and group where cp may
set them): other hard links to it keep the old contents. A symbolic link DST stays, and
the file it names is replaced. cp needs permission to create files in DST's directory.
Each chunk is written rounded up to DST's direct-I/O alignment, so that the fastpath can
take it, and the copy is then cut to the bytes read.",
    after_long_help = "\
Numbers are whole numbers of bytes, optionally followed by a suffix that multiplies by a
power of 1024: K, KB or KiB (1024), M, MB or MiB (1024^2), G, GB or GiB (1024^3), T, TB or
TiB (1024^4); for example 64K.

The configuration comes from HIPFILE_ALLOW_COMPAT_MODE, HIPFILE_FORCE_COMPAT_MODE and
HIPFILE_UNSUPPORTED_FILE_SYSTEMS, as for any program using hipfile. On a terminal, the
progress of a copy that takes more than a second is shown on stderr.

Exit status: 0 when DST is a complete copy of SRC; 1 when the copy failed: SRC or DST
cannot be opened (a missing SRC included), the driver cannot be opened, a file or the
buffer cannot be registered, a read or write fails, or the sizes do not match; 2 on bad
arguments or an emulated runtime that is not found. When the copy fails, its temporary
file is removed and DST is left as it was (or absent); a copy that is killed can leave
only its temporary file behind."
)]
pub struct CpArgs {
    /// Print the result as one JSON object: bytes, seconds, gbps, and for read and write
    /// each: fastpath_bytes, fallback_bytes, retries (bytes of the file, so that each side
    /// adds up to bytes: the padding written up to DST's alignment, cut off at the end, is
    /// not counted)
    #[arg(long)]
    pub json: bool,
    /// Size of the GPU buffer, a multiple of 4096; never larger than SRC rounded up to 4096.
    /// Default: 64MiB for a file; for a URL, as much as its GETs read at once (8MiB x 16
    /// in flight: 128MiB), so that a chunk keeps every GET of the window busy
    #[arg(long, value_name = "N", value_parser = chunk)]
    pub chunk: Option<u64>,
    /// The GPU runtime to use: the one found on this machine, or the emulated runtime
    /// libhipfile_emu.so in this program's directory or its deps/ subdirectory (test and
    /// development only)
    #[arg(long, value_name = "RUNTIME", value_enum, default_value_t)]
    pub runtime: RuntimeChoice,
    /// The file to copy; or a URL: s3://BUCKET/KEY (endpoint, region and credentials from
    /// AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    /// AWS_SESSION_TOKEN) or http(s)://HOST/PATH, read with concurrent ranged GETs
    #[arg(value_name = "SRC")]
    pub src: PathBuf,
    /// The copy
    #[arg(value_name = "DST")]
    pub dst: PathBuf,
}

/// The GPU buffer of a local copy unless `--chunk` says otherwise.
pub const DEFAULT_CHUNK: u64 = 64 << 20;

/// `--chunk`: a byte count, a non-zero multiple of [`CHUNK_UNIT`], at most [`MAX_CHUNK`].
fn chunk(text: &str) -> Result<u64, String> {
    let n = options::bytes(text)?;
    if n == 0 || n % CHUNK_UNIT != 0 || n > MAX_CHUNK {
        return Err(format!(
            "{text:?} is not valid; expected a number of bytes, a multiple of 4096 from 4096 \
             to {MAX_CHUNK}"
        ));
    }
    Ok(n)
}
