//! The read plan of one part of a checkpoint (a shard's tensors bound for one device): the
//! file ranges its selected tensors need, widened to 4 KiB boundaries and merged where they
//! touch or nearly do, laid one after another in the part's buffer at 4 KiB-aligned offsets,
//! then cut into requests.
//!
//! A range starts at a 4 KiB-aligned file offset and lands at a 4 KiB-aligned buffer offset,
//! and requests are whole multiples of 4 KiB (the last may run past the end of the file,
//! where the read comes back short): so file offset, size and device address meet the
//! fastpath's direct-I/O alignment wherever the buffer itself is aligned, as device
//! allocations are.

/// The alignment kept between file and buffer offsets.
pub const ALIGN: u64 = 4096;

/// Ranges whose gap is at most this are read as one: reading 1 MiB more costs less than
/// another request's fill and drain.
pub const MERGE_GAP: u64 = 1 << 20;

/// The most requests a window holds, however small they are.
pub const MAX_WINDOW: usize = 256;

/// Whether a window of `count` requests in flight, holding `bytes`, admits another: it
/// fills up to `depth` requests, and past that while it holds fewer than `depth × request`
/// bytes. A load's requests are `request` bytes each, so this changes nothing for them;
/// a framework's tensors read one by one (a few MiB each) would otherwise leave the engine a
/// fraction of the bytes in flight that full requests give it.
pub fn admits(count: usize, bytes: u64, depth: usize, request: u64) -> bool {
    count < depth || (count < MAX_WINDOW && bytes < (depth as u64).saturating_mul(request))
}

/// A file range read into the part's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// 4 KiB-aligned file offset of the first byte read.
    pub file_start: u64,
    /// Where the bytes that must arrive end (the last tensor's end).
    pub need_end: u64,
    /// Where the read ends: `need_end` rounded up to 4 KiB (past the end of the file, maybe).
    pub file_end: u64,
    /// The buffer offset of `file_start`.
    pub buf_start: u64,
}

impl Extent {
    /// The buffer offset of file offset `at`, which must be inside the extent.
    pub fn buffer_offset(&self, at: u64) -> u64 {
        self.buf_start + (at - self.file_start)
    }
}

/// One request: `len` bytes of shard `shard` from `file_offset` into the buffer of part
/// `part` at `buf_start`; `need` of them must arrive (the rest is alignment past the end of
/// the data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub part: usize,
    pub shard: usize,
    pub file_offset: u64,
    pub buf_start: u64,
    pub len: u64,
    pub need: u64,
}

fn align_down(x: u64) -> u64 {
    x - x % ALIGN
}

fn align_up(x: u64) -> u64 {
    x.div_ceil(ALIGN) * ALIGN
}

/// The extents that cover `ranges` (non-empty file ranges in increasing order), and the
/// buffer length they need.
pub fn extents(ranges: impl IntoIterator<Item = (u64, u64)>) -> (Vec<Extent>, u64) {
    let mut out: Vec<Extent> = Vec::new();
    for (start, end) in ranges {
        if start >= end {
            continue;
        }
        if let Some(last) = out.last_mut()
            && align_down(start) <= last.file_end.saturating_add(MERGE_GAP)
        {
            last.need_end = last.need_end.max(end);
            last.file_end = align_up(last.need_end);
            continue;
        }
        let buf_start = out
            .last()
            .map_or(0, |e| e.buf_start + (e.file_end - e.file_start));
        out.push(Extent {
            file_start: align_down(start),
            need_end: end,
            file_end: align_up(end),
            buf_start,
        });
    }
    let len = out
        .last()
        .map_or(0, |e| e.buf_start + (e.file_end - e.file_start));
    (out, len)
}

/// `extents` of part `part` (of shard `shard`) cut into requests of at most `request` bytes
/// (a multiple of [`ALIGN`]).
pub fn pieces(part: usize, shard: usize, extents: &[Extent], request: u64) -> Vec<Piece> {
    let mut out = Vec::new();
    for e in extents {
        let mut at = e.file_start;
        while at < e.file_end {
            let len = request.min(e.file_end - at);
            out.push(Piece {
                part,
                shard,
                file_offset: at,
                buf_start: e.buffer_offset(at),
                len,
                need: e.need_end.min(at + len).saturating_sub(at),
            });
            at += len;
        }
    }
    out
}

/// The order requests are made in, from each part's requests. Hot: every part's requests
/// interleaved, so that all shards are read at once. Cold: shard after shard, each in file
/// order whatever part a request is for, so that the disk sees long sequential runs.
pub fn order(per_part: Vec<Vec<Piece>>, interleave: bool) -> Vec<Piece> {
    if !interleave {
        let mut all: Vec<Piece> = per_part.into_iter().flatten().collect();
        all.sort_by_key(|p| (p.shard, p.file_offset));
        return all;
    }
    let mut iters: Vec<_> = per_part.into_iter().map(Vec::into_iter).collect();
    let mut out = Vec::new();
    loop {
        let before = out.len();
        for it in &mut iters {
            out.extend(it.next());
        }
        if out.len() == before {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_aligned_merged_and_laid_out_aligned() {
        let (ex, len) = extents([(100, 5000), (5000, 9000), (3 << 20, (3 << 20) + 10)]);
        assert_eq!(
            ex,
            [
                Extent {
                    file_start: 0,
                    need_end: 9000,
                    file_end: 12288,
                    buf_start: 0
                },
                Extent {
                    file_start: 3 << 20,
                    need_end: (3 << 20) + 10,
                    file_end: (3 << 20) + 4096,
                    buf_start: 12288
                },
            ]
        );
        assert_eq!(len, 12288 + 4096);
        for e in &ex {
            assert_eq!(e.file_start % ALIGN, e.buf_start % ALIGN);
        }
        // Near neighbours are merged.
        let (ex, _) = extents([(0, 10), ((1 << 20) - 5, 1 << 20), (1 << 20, (1 << 20) + 1)]);
        assert_eq!(ex.len(), 1);
        // Empty ranges read nothing.
        assert_eq!(extents([(10, 10)]), (vec![], 0));
    }

    #[test]
    fn pieces_tile_the_extents_and_need_only_the_data() {
        let (ex, len) = extents([(8 + 100, 8 + 100 + 10_000_000)]);
        let p = pieces(5, 3, &ex, 4 << 20);
        assert_eq!(p.len(), 3);
        assert_eq!(p.iter().map(|p| p.len).sum::<u64>(), len);
        assert_eq!(p.iter().map(|p| p.need).sum::<u64>(), 8 + 100 + 10_000_000);
        for w in p.windows(2) {
            assert_eq!(w[0].file_offset + w[0].len, w[1].file_offset);
            assert_eq!(w[0].buf_start + w[0].len, w[1].buf_start);
        }
        assert!(
            p.iter()
                .all(|p| p.part == 5 && p.shard == 3 && p.len % ALIGN == 0)
        );
    }

    #[test]
    fn a_window_of_small_requests_holds_the_bytes_of_full_ones() {
        let mib = 1u64 << 20;
        // Full requests: `depth` of them, as before.
        assert!(admits(7, 7 * 64 * mib, 8, 64 * mib));
        assert!(!admits(8, 8 * 64 * mib, 8, 64 * mib));
        // 4 MiB tensors: the window grows to the bytes of 8 full requests.
        assert!(admits(8, 8 * 4 * mib, 8, 64 * mib));
        assert!(admits(127, 127 * 4 * mib, 8, 64 * mib));
        assert!(!admits(128, 128 * 4 * mib, 8, 64 * mib));
        // Tiny requests stop at the window's bound; one request in flight at least.
        assert!(!admits(MAX_WINDOW, MAX_WINDOW as u64 * 4096, 8, 64 * mib));
        assert!(admits(0, 0, 1, 4096));
        // A cold load's one 1 GiB request in flight, or the same bytes in tensors.
        assert!(!admits(1, 1 << 30, 1, 1 << 30));
        assert!(admits(1, 16 * mib, 1, 1 << 30));
    }

    #[test]
    fn hot_order_interleaves_and_cold_order_reads_each_shard_in_file_order() {
        let piece = |part, shard, file_offset| Piece {
            part,
            shard,
            file_offset,
            buf_start: 0,
            len: 1,
            need: 1,
        };
        // Shard 0's tensors on two devices (parts 0 and 1), shard 1's on one (part 2).
        let parts = vec![
            vec![piece(0, 0, 0), piece(0, 0, 2), piece(0, 0, 3)],
            vec![piece(1, 0, 1)],
            vec![piece(2, 1, 0)],
        ];
        let hot: Vec<_> = order(parts.clone(), true)
            .iter()
            .map(|p| (p.part, p.file_offset))
            .collect();
        assert_eq!(hot, [(0, 0), (1, 1), (2, 0), (0, 2), (0, 3)]);
        let cold: Vec<_> = order(parts, false)
            .iter()
            .map(|p| (p.shard, p.file_offset, p.part))
            .collect();
        assert_eq!(
            cold,
            [(0, 0, 0), (0, 1, 1), (0, 2, 0), (0, 3, 0), (1, 0, 2)]
        );
    }
}
