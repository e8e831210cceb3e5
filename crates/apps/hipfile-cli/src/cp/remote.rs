//! `hipfile cp URL DST`: an object of an S3-compatible store (`s3://BUCKET/KEY`) or a file
//! of an HTTP(S) server copied through the GPU buffer: ranged GETs into the buffer
//! (`hipfile-remote`), the library's writes out of it, as a local copy writes.

use super::args::{CHUNK_UNIT, CpArgs, MAX_CHUNK};
use super::copy::{Progress, Sink, Summary, gpu_buffer};
use crate::tally::Tally;
use hipfile::{ConfigBuilder, DeviceBuffer, Driver};
use hipfile_remote::{RemoteFile, RemoteSettings};
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Instant;

/// The URL that `src` names, if it names one ([`hipfile_remote::is_url`]).
pub(super) fn remote_url(src: &Path) -> Option<&str> {
    src.to_str().filter(|text| hipfile_remote::is_url(text))
}

/// The bytes one window of GETs reads (`request_size × concurrency`), the chunk of a
/// remote copy unless `--chunk` says otherwise: a smaller chunk leaves GETs of the window
/// idle at every chunk. A multiple of [`CHUNK_UNIT`], as `--chunk` is.
fn window(settings: &RemoteSettings) -> u64 {
    let bytes = (settings.request_size as u64)
        .saturating_mul(settings.concurrency as u64)
        .min(MAX_CHUNK);
    (bytes - bytes % CHUNK_UNIT).max(CHUNK_UNIT)
}

/// The driver, the opened object and the registered GPU buffer.
pub(super) struct RemoteSetup {
    driver: Driver,
    object: RemoteFile,
    buf: DeviceBuffer,
    len: u64,
}

impl RemoteSetup {
    pub(super) fn new(
        args: &CpArgs,
        settings: ConfigBuilder,
        url: &str,
    ) -> Result<RemoteSetup, String> {
        let driver = crate::runtime::open_driver(settings, args.runtime)?;
        let object = RemoteFile::open(&driver, url, RemoteSettings::default())
            .map_err(|e| format!("cannot open {e}"))?;
        let chunk = args.chunk.unwrap_or_else(|| window(object.settings()));
        let (buf, len) = gpu_buffer(&driver, chunk, object.size())?;
        Ok(RemoteSetup {
            driver,
            object,
            buf,
            len,
        })
    }

    /// Copies the object into `dst_fd` (the temporary file, named `dst_path` in messages)
    /// and flushes it.
    pub(super) fn copy_into(
        mut self,
        dst_fd: &OwnedFd,
        dst_path: &Path,
    ) -> Result<Summary, String> {
        let mut dst = Sink::open(&self.driver, dst_fd, dst_path, self.len)?;
        let size = self.object.size();
        let url = self.object.url().to_owned();
        let mut read = Tally::default();
        let mut progress = Progress::new(size);
        let start = Instant::now();
        let mut offset = 0u64;
        while offset < size {
            let view = self
                .buf
                .slice_mut(..)
                .map_err(|e| format!("cannot use the GPU buffer: {e}"))?;
            let n = self
                .object
                .read(view, offset)
                .map_err(|e| format!("cannot read {e}"))?;
            if n == 0 {
                return Err(format!(
                    "{url} ended at {offset} bytes, but its HEAD said {size}"
                ));
            }
            read.remote_bytes += n;
            dst.put(&mut self.buf, n, offset)?;
            offset += n;
            progress.update(offset);
        }
        progress.finish();
        let (seconds, write) = dst.finish(offset, &url, start)?;
        Ok(Summary {
            bytes: offset,
            seconds,
            read,
            write,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths() {
        assert_eq!(remote_url(Path::new("s3://b/k")), Some("s3://b/k"));
        assert_eq!(remote_url(Path::new("https://h/p")), Some("https://h/p"));
        assert_eq!(remote_url(Path::new("http://h/p")), Some("http://h/p"));
        assert_eq!(remote_url(Path::new("./s3:/b/k")), None);
        assert_eq!(remote_url(Path::new("/tmp/x")), None);
    }

    #[test]
    fn a_remote_chunk_holds_a_whole_window_of_gets() {
        let defaults = RemoteSettings::default();
        assert_eq!(window(&defaults), 128 << 20);
        let huge = RemoteSettings {
            request_size: 1 << 30,
            concurrency: 256,
            ..RemoteSettings::default()
        };
        assert_eq!(window(&huge), MAX_CHUNK);
        let odd = RemoteSettings {
            request_size: 5000,
            concurrency: 3,
            ..RemoteSettings::default()
        };
        assert_eq!(window(&odd), 12288);
    }
}
