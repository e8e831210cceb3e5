//! The process's memory mappings, as `/proc/self/smaps` lists them: for tests of memory that
//! hipfile maps itself.

/// One mapping of this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// Its first byte.
    pub start: usize,
    /// One past its last byte.
    pub end: usize,
    /// Bytes of it in memory, in KiB (`Rss`).
    pub rss_kib: u64,
    /// Its flags (`VmFlags`: `dc` not copied on fork, `hg` huge pages advised, ...).
    pub flags: Vec<String>,
}

impl Mapping {
    /// Whether its flags include `flag`.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
}

/// The mapping that holds `addr`, if any.
///
/// # Panics
///
/// When `/proc/self/smaps` cannot be read or a line of it has not the expected form.
pub fn mapping_at(addr: usize) -> Option<Mapping> {
    let text = std::fs::read_to_string("/proc/self/smaps")
        .unwrap_or_else(|e| panic!("cannot read /proc/self/smaps: {e}"));
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some((start, end)) = line.split(' ').next().and_then(|r| r.split_once('-')) else {
            continue;
        };
        let (Ok(start), Ok(end)) = (
            usize::from_str_radix(start, 16),
            usize::from_str_radix(end, 16),
        ) else {
            continue;
        };
        if !(start..end).contains(&addr) {
            continue;
        }
        let mut found = Mapping {
            start,
            end,
            rss_kib: 0,
            flags: Vec::new(),
        };
        for l in lines.by_ref() {
            if let Some(v) = l.strip_prefix("Rss:") {
                let kib = v.trim().trim_end_matches(" kB");
                found.rss_kib = kib
                    .parse()
                    .unwrap_or_else(|e| panic!("smaps Rss {kib:?}: {e}"));
            } else if let Some(v) = l.strip_prefix("VmFlags:") {
                found.flags = v.split_whitespace().map(str::to_owned).collect();
                break;
            }
        }
        return Some(found);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heap_vector_is_in_a_readable_mapping_and_a_null_address_in_none() {
        let v = vec![7u8; 1 << 20];
        let m = mapping_at(v.as_ptr() as usize).expect("the heap is mapped");
        assert!(m.start <= v.as_ptr() as usize && (v.as_ptr() as usize) < m.end);
        assert!(m.has_flag("rd"), "{:?}", m.flags);
        assert!(m.rss_kib > 0);
        assert!(mapping_at(0).is_none());
    }
}
