//! The process's peak resident memory (`VmHWM`), which `bench` and `load` report.

/// `VmHWM` from `/proc/self/status`, in bytes.
pub(crate) fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_hwm(&status)
}

/// Sets the process's peak resident memory to what it holds now (Linux 4.0:
/// `/proc/self/clear_refs`, value 5); false when the kernel refused.
pub(crate) fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The `VmHWM:` line of a `/proc/PID/status` text, in bytes.
fn parse_vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let mut words = line["VmHWM:".len()..].split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => n.checked_mul(1024),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_hwm_is_read_in_bytes() {
        let s = "Name:\thipfile\nVmPeak:\t  9000 kB\nVmHWM:\t    1234 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(parse_vm_hwm(s), Some(1234 * 1024));
        assert_eq!(parse_vm_hwm("VmRSS: 1 kB\n"), None);
        assert_eq!(parse_vm_hwm("VmHWM: x kB\n"), None);
    }
}
