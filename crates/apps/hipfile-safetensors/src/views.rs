//! Disjoint views of a part's buffer, one per request or extent that reads into it.

use hipfile::{DeviceBuffer, DeviceSliceMut};

/// The views of `buffer` at `spans` (buffer offset, length), which lie in increasing order
/// and do not overlap, in that order.
pub(crate) fn cut(
    buffer: &mut DeviceBuffer,
    spans: impl IntoIterator<Item = (u64, u64)>,
) -> Result<Vec<DeviceSliceMut<'_>>, hipfile::Error> {
    let mut rest = buffer.slice_mut(..)?;
    let mut at = 0u64;
    let mut out = Vec::new();
    for (start, len) in spans {
        let (_, tail) = rest.split_at((start - at) as usize)?;
        let (view, tail) = tail.split_at(len as usize)?;
        out.push(view);
        rest = tail;
        at = start + len;
    }
    Ok(out)
}
