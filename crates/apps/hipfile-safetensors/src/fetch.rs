//! The reading of remote shards' extents (the `remote` feature): all the extents of one
//! object, whatever part they are for, by its concurrent ranged GETs in one window, straight
//! into the parts' device buffers.

use crate::error::LoadError;
use crate::header::{Shard, Source};
use crate::plan;
use crate::report::{LoadReport, Progress, ProgressFn};
use hipfile::{DeviceBuffer, DeviceSliceMut};

/// Reads `extents` (part by part: its shard and its extents) of remote shards into
/// `buffers`, object by object: each shard's extents together by the ranged GETs of its
/// [`RemoteFile`].
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
    let mut requests = 0u64;
    let mut request_size = 0u64;
    let mut in_flight = 0usize;
    // Every extent's view, by shard: one view per extent of a part (they lie in the part's
    // buffer in order, apart).
    let mut by_shard: Vec<Vec<(DeviceSliceMut<'_>, plan::Extent)>> = Vec::new();
    by_shard.resize_with(shards.len(), Vec::new);
    for ((shard, ext), buffer) in extents.iter().zip(buffers.iter_mut()) {
        let gpu = |source| LoadError::Gpu {
            path: shards[*shard].path.clone(),
            what: "cannot make a view of the part's buffer".into(),
            source: Box::new(source),
        };
        let spans = ext.iter().map(|e| (e.buf_start, e.need_end - e.file_start));
        let views = crate::views::cut(buffer, spans).map_err(gpu)?;
        by_shard[*shard].extend(views.into_iter().zip(ext.iter().copied()));
    }
    // Each object's extents, whatever part they are for, in one window of its GETs; the
    // pinned staging goes from each object to the next, so that the load holds one
    // object's worth at a time.
    let mut previous: Option<&hipfile_remote::RemoteFile> = None;
    for (shard, views) in shards.iter().zip(by_shard) {
        if views.is_empty() {
            continue;
        }
        let Source::Remote(object) = &shard.source else {
            return Err(LoadError::Option(
                "a checkpoint's shards are all local files or all URLs".into(),
            ));
        };
        if let Some(previous) = previous.replace(object) {
            previous.pass_staging_to(object);
        }
        request_size = object.settings().request_size as u64;
        in_flight = object.settings().concurrency;
        let (reads, wanted): (Vec<_>, Vec<_>) = views
            .into_iter()
            .map(|(view, e)| ((view, e.file_start), e))
            .unzip();
        let before = object.gets();
        let got = object.read_many_with_progress(reads, |bytes| {
            done += bytes;
            if let Some(f) = progress.as_mut() {
                f(Progress { done, total });
            }
        })?;
        requests += object.gets() - before;
        for (e, n) in wanted.iter().zip(got) {
            if n < e.need_end - e.file_start {
                return Err(LoadError::Short {
                    path: shard.path.clone(),
                    at: e.file_start + n,
                    expected: e.need_end,
                });
            }
        }
    }
    Ok(LoadReport {
        bytes_read: done,
        fastpath_bytes: 0,
        fallback_bytes: 0,
        remote_bytes: done,
        requests: usize::try_from(requests).unwrap_or(usize::MAX),
        cold: false,
        request_size,
        in_flight,
        // The caller, which started the clock, fills it in.
        read_time: std::time::Duration::ZERO,
    })
}
