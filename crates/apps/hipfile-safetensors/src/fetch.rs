//! The reading of remote shards' extents (the `remote` feature): each extent by its
//! object's concurrent ranged GETs, straight into the part's device buffer.

use crate::error::LoadError;
use crate::header::{Shard, Source};
use crate::plan;
use crate::report::{LoadReport, Progress, ProgressFn};
use hipfile::DeviceBuffer;

/// Reads `extents` (part by part: its shard and its extents) of remote shards into
/// `buffers`, each extent by the ranged GETs of its shard's [`RemoteFile`].
pub(crate) fn read_extents(
    shards: &[Shard],
    extents: &[(usize, &[plan::Extent])],
    buffers: &mut [&mut DeviceBuffer],
    mut progress: Option<&mut ProgressFn<'_>>,
) -> Result<LoadReport, LoadError> {
    let total: u64 = extents
        .iter()
        .flat_map(|(_, ext)| ext.iter().map(|e| e.need_end - e.file_start))
        .sum();
    let mut done = 0u64;
    let mut requests = 0usize;
    let mut request_size = 0u64;
    let mut in_flight = 0usize;
    for (part, (shard, ext)) in extents.iter().enumerate() {
        let shard = &shards[*shard];
        let Source::Remote(object) = &shard.source else {
            return Err(LoadError::Option(
                "a checkpoint's shards are all local files or all URLs".into(),
            ));
        };
        request_size = object.settings().request_size as u64;
        in_flight = object.settings().concurrency;
        let buffer = &mut buffers[part];
        for e in *ext {
            let len = e.need_end - e.file_start;
            let view = buffer
                .slice_mut(e.buf_start as usize..(e.buf_start + len) as usize)
                .map_err(|source| LoadError::Gpu {
                    path: shard.path.clone(),
                    what: "cannot make a view of the part's buffer".into(),
                    source: Box::new(source),
                })?;
            let n = object.read(view, e.file_start)?;
            if n < len {
                return Err(LoadError::Short {
                    path: shard.path.clone(),
                    at: e.file_start + n,
                    expected: e.need_end,
                });
            }
            requests += len.div_ceil(request_size.max(1)) as usize;
            done += n;
            if let Some(f) = progress.as_mut() {
                f(Progress { done, total });
            }
        }
    }
    Ok(LoadReport {
        bytes_read: done,
        fastpath_bytes: 0,
        fallback_bytes: 0,
        remote_bytes: done,
        requests,
        cold: false,
        request_size,
        in_flight,
    })
}
