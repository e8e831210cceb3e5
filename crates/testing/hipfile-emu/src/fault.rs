//! Fault injection for `hipAmdFileRead`/`hipAmdFileWrite`, and the file-I/O counters.
//!
//! A fault list is written `op:ERRNO[:N]`, entries separated by commas: `op` is `read` or
//! `write`, `ERRNO` an errno name (`ENODEV`, `EREMOTEIO`, `EIO`, …) or number, and `N` limits
//! the entry to the first `N` calls it sees (without `N`, every call). Entries for the same
//! operation are tried in order, so `read:ENODEV:1,read:EIO` fails the first read with
//! `ENODEV` and every later one with `EIO`. A faulted call moves no bytes and reports the errno
//! as the kernel driver would: `*status = -errno`. Faults are drawn after the runtime's own
//! checks (the buffer, the descriptor, `O_DIRECT`), so a call that is wrong fails as it would
//! without faults, and does not use up a counted fault.

use std::sync::atomic::{AtomicU64, Ordering};

/// A file-I/O operation of the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `hipAmdFileRead`.
    Read,
    /// `hipAmdFileWrite`.
    Write,
}

impl Op {
    /// The index of the operation in the C-facing counters: 0 read, 1 write.
    pub const fn index(self) -> usize {
        match self {
            Op::Read => 0,
            Op::Write => 1,
        }
    }

    /// The operation whose C-facing index is `index`.
    pub fn from_index(index: i32) -> Option<Op> {
        match index {
            0 => Some(Op::Read),
            1 => Some(Op::Write),
            _ => None,
        }
    }
}

/// One parsed fault entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// The operation it fails.
    pub op: Op,
    /// The (positive) errno reported.
    pub errno: i32,
    /// Fail only the first this-many calls the entry sees; `None` fails every call.
    pub count: Option<u64>,
}

/// The errno names a fault may use.
const ERRNO_NAMES: &[(&str, i32)] = &[
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("EINTR", libc::EINTR),
    ("EIO", libc::EIO),
    ("ENXIO", libc::ENXIO),
    ("EBADF", libc::EBADF),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EFAULT", libc::EFAULT),
    ("EBUSY", libc::EBUSY),
    ("ENODEV", libc::ENODEV),
    ("EINVAL", libc::EINVAL),
    ("EFBIG", libc::EFBIG),
    ("ENOSPC", libc::ENOSPC),
    ("EROFS", libc::EROFS),
    ("EDQUOT", libc::EDQUOT),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
    ("ETIMEDOUT", libc::ETIMEDOUT),
    ("ECANCELED", libc::ECANCELED),
    ("EREMOTEIO", libc::EREMOTEIO),
];

/// The largest errno number a fault may name (the kernel's `MAX_ERRNO`).
const MAX_ERRNO: i32 = 4095;

/// What a fault list may be, in words, for the messages about a bad one.
pub const SYNTAX: &str = "a fault list is entries op:ERRNO[:N] separated by commas, with op \
                          read or write, ERRNO an errno name (EIO, ENODEV, EREMOTEIO, ...) or \
                          number from 1 to 4095, and N the number of calls to fail (every call \
                          without it), for example read:ENODEV:1,write:EIO";

/// Parses a fault list (see the module documentation). An empty or all-blank list is no fault.
///
/// # Errors
///
/// A message naming the first bad entry, what is wrong with it and what is accepted.
pub fn parse_faults(spec: &str) -> Result<Vec<Fault>, String> {
    if spec.trim().is_empty() {
        return Ok(Vec::new());
    }
    spec.split(',')
        .map(str::trim)
        .map(|entry| {
            parse_entry(entry).map_err(|why| format!("bad entry `{entry}`: {why}; {SYNTAX}"))
        })
        .collect()
}

fn parse_entry(entry: &str) -> Result<Fault, String> {
    if entry.is_empty() {
        return Err("empty entry".into());
    }
    let mut parts = entry.split(':');
    let op = match parts.next().map(str::trim) {
        Some("read") => Op::Read,
        Some("write") => Op::Write,
        Some(other) => return Err(format!("unknown operation `{other}` (read or write)")),
        None => return Err("no operation".into()),
    };
    let errno = match parts.next().map(str::trim) {
        Some(name) => parse_errno(name)?,
        None => return Err("no errno (op:ERRNO[:N])".into()),
    };
    let count = match parts.next().map(str::trim) {
        None => None,
        Some(n) => match n.parse::<u64>() {
            Ok(0) => return Err("a count of 0 would inject nothing".into()),
            Ok(n) => Some(n),
            Err(_) => return Err(format!("count `{n}` is not a positive integer")),
        },
    };
    if parts.next().is_some() {
        return Err("too many fields (op:ERRNO[:N])".into());
    }
    Ok(Fault { op, errno, count })
}

fn parse_errno(name: &str) -> Result<i32, String> {
    if let Some(&(_, value)) = ERRNO_NAMES.iter().find(|(n, _)| *n == name) {
        return Ok(value);
    }
    match name.parse::<i32>() {
        Ok(n) if (1..=MAX_ERRNO).contains(&n) => Ok(n),
        Ok(n) => Err(format!("errno {n} is outside 1..={MAX_ERRNO}")),
        Err(_) => Err(format!("unknown errno name `{name}`")),
    }
}

/// A parsed fault list with the per-entry counts of calls already failed: the live state of
/// fault injection. Thread-safe; several threads may draw from it at once.
#[derive(Debug, Default)]
pub struct FaultPlan {
    armed: Vec<(Fault, AtomicU64)>,
}

impl FaultPlan {
    /// A plan that fails calls as `faults` say, no call counted yet.
    pub fn new(faults: Vec<Fault>) -> FaultPlan {
        FaultPlan {
            armed: faults.into_iter().map(|f| (f, AtomicU64::new(0))).collect(),
        }
    }

    /// The faults of the plan.
    pub fn faults(&self) -> impl Iterator<Item = &Fault> {
        self.armed.iter().map(|(f, _)| f)
    }

    /// Draws for one call of `op`: the errno to fail it with, or `None` to let it run.
    pub fn draw(&self, op: Op) -> Option<i32> {
        self.armed.iter().find_map(|(fault, used)| {
            if fault.op != op {
                return None;
            }
            let Some(limit) = fault.count else {
                return Some(fault.errno);
            };
            used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| fault.errno)
        })
    }
}

/// File-I/O calls seen, per operation (every call that got past its out-pointer checks).
static CALLS: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
/// Calls failed by fault injection, per operation.
static INJECTED: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// Counts one call of `op`.
pub(crate) fn count_call(op: Op) {
    CALLS[op.index()].fetch_add(1, Ordering::Relaxed);
}

/// Counts one injected fault of `op`.
pub(crate) fn count_injected(op: Op) {
    INJECTED[op.index()].fetch_add(1, Ordering::Relaxed);
}

/// The file-I/O calls of `op` since load or the last reset.
pub fn calls(op: Op) -> u64 {
    CALLS[op.index()].load(Ordering::Relaxed)
}

/// The faults of `op` injected since load or the last reset.
pub fn injected(op: Op) -> u64 {
    INJECTED[op.index()].load(Ordering::Relaxed)
}

/// Sets every counter back to zero.
pub(crate) fn reset_counters() {
    for c in CALLS.iter().chain(INJECTED.iter()) {
        c.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_numbers_and_counts() {
        let faults = parse_faults("read:ENODEV, write:EREMOTEIO:2,read:5:1").unwrap();
        assert_eq!(
            faults,
            vec![
                Fault {
                    op: Op::Read,
                    errno: libc::ENODEV,
                    count: None
                },
                Fault {
                    op: Op::Write,
                    errno: libc::EREMOTEIO,
                    count: Some(2)
                },
                Fault {
                    op: Op::Read,
                    errno: libc::EIO,
                    count: Some(1)
                },
            ]
        );
    }

    #[test]
    fn every_required_name_is_known() {
        for (name, value) in [
            ("ENODEV", libc::ENODEV),
            ("EREMOTEIO", libc::EREMOTEIO),
            ("EIO", libc::EIO),
            ("EINVAL", libc::EINVAL),
            ("ENOSPC", libc::ENOSPC),
            ("EBADF", libc::EBADF),
        ] {
            assert_eq!(
                parse_faults(&format!("write:{name}")).unwrap()[0].errno,
                value
            );
        }
    }

    #[test]
    fn blank_is_no_fault() {
        assert_eq!(parse_faults("").unwrap(), vec![]);
        assert_eq!(parse_faults("  ").unwrap(), vec![]);
    }

    #[test]
    fn bad_entries_are_named() {
        for (spec, bad) in [
            ("read:EFOO", "read:EFOO"),
            ("rd:EIO", "rd:EIO"),
            ("read", "read"),
            ("read:EIO:0", "read:EIO:0"),
            ("read:EIO:x", "read:EIO:x"),
            ("read:EIO:1:2", "read:EIO:1:2"),
            ("read:0", "read:0"),
            ("read:4096", "read:4096"),
            ("read:EIO,,write:EIO", ""),
            ("read:EIO,", ""),
            ("write:eio", "write:eio"),
        ] {
            let err = parse_faults(spec).unwrap_err();
            assert!(err.contains(&format!("`{bad}`")), "{spec}: {err}");
            assert!(err.contains(SYNTAX), "{spec}: {err}");
        }
    }

    #[test]
    fn a_counted_fault_fails_only_the_first_calls() {
        let plan = FaultPlan::new(parse_faults("read:ENODEV:2").unwrap());
        assert_eq!(plan.draw(Op::Read), Some(libc::ENODEV));
        assert_eq!(plan.draw(Op::Write), None);
        assert_eq!(plan.draw(Op::Read), Some(libc::ENODEV));
        assert_eq!(plan.draw(Op::Read), None);
        assert_eq!(plan.draw(Op::Read), None);
    }

    #[test]
    fn entries_are_tried_in_order() {
        let plan = FaultPlan::new(parse_faults("write:ENODEV:1,write:EIO").unwrap());
        assert_eq!(plan.draw(Op::Write), Some(libc::ENODEV));
        assert_eq!(plan.draw(Op::Write), Some(libc::EIO));
        assert_eq!(plan.draw(Op::Write), Some(libc::EIO));
        assert_eq!(plan.draw(Op::Read), None);
    }

    #[test]
    fn counted_faults_are_exact_across_threads() {
        let plan = FaultPlan::new(parse_faults("read:EIO:100").unwrap());
        let failed: usize = std::thread::scope(|s| {
            let workers: Vec<_> = (0..8)
                .map(|_| s.spawn(|| (0..50).filter(|_| plan.draw(Op::Read).is_some()).count()))
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).sum()
        });
        assert_eq!(failed, 100);
    }
}
