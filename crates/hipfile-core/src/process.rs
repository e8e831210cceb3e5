//! This process's id, without a system call per request.
//!
//! Every request asks whether it runs in the process that opened its driver (a child made by
//! `fork()` must fail at once instead of waiting for threads it does not have). Rust's
//! `std::process::id` is a `getpid` system call each time, which costs a small request a
//! measurable part of its time on a virtual machine; the id is kept instead, and forgotten in
//! the child of every `fork()` by a handler registered with `pthread_atfork`. A child made
//! by a raw `clone` system call, which runs no such handler, keeps its parent's id: such a
//! child must not call hipfile (as it must not call most of the C library).

use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};

/// The id last read, or 0 once a `fork()` made it stale (no process has id 0).
static PID: AtomicU32 = AtomicU32::new(0);

/// Whether the handler is registered: [`UNREGISTERED`], [`REGISTERING`] or [`REGISTERED`].
/// Not a `Once`: a child forked while another thread registered would wait on it forever;
/// here it finds `REGISTERING` for good and reads the id each time instead.
static HANDLER: AtomicU8 = AtomicU8::new(UNREGISTERED);
const UNREGISTERED: u8 = 0;
const REGISTERING: u8 = 1;
const REGISTERED: u8 = 2;

/// The `fork()` child handler: async-signal-safe, one atomic store.
extern "C" fn forget() {
    PID.store(0, Ordering::Relaxed);
}

/// This process's id (`getpid()`), read once per process.
pub fn id() -> u32 {
    let pid = PID.load(Ordering::Relaxed);
    if pid != 0 {
        return pid;
    }
    if HANDLER.load(Ordering::Acquire) != REGISTERED {
        let mine = HANDLER
            .compare_exchange(
                UNREGISTERED,
                REGISTERING,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok();
        if !mine {
            // Another thread registers it (or did, in a parent this process was forked
            // from mid-way): the id cannot be kept until a child would forget it.
            return std::process::id();
        }
        // SAFETY: the handler only stores to an atomic, which a child of a multi-threaded
        // process may do; glibc removes it when the library holding it is unloaded.
        #[allow(unsafe_code)]
        let registered = unsafe { libc::pthread_atfork(None, None, Some(forget)) } == 0;
        if !registered {
            // Never kept: every call reads the id (HANDLER stays REGISTERING).
            return std::process::id();
        }
        HANDLER.store(REGISTERED, Ordering::Release);
    }
    // Read after the handler is registered: a fork between the two leaves 0 in the child.
    let pid = std::process::id();
    PID.store(pid, Ordering::Relaxed);
    pid
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forked_child_gets_its_own_id() {
        let parent = id();
        assert_eq!(parent, std::process::id());
        // SAFETY: the child calls only `getpid`, `id` (an atomic load, at most a store and
        // one `getpid`) and `_exit`.
        #[allow(unsafe_code)]
        let child = unsafe { libc::fork() };
        assert!(child >= 0, "fork failed");
        if child == 0 {
            #[allow(unsafe_code)]
            // SAFETY: `_exit` ends the child without running the test harness's code.
            unsafe {
                let own = libc::getpid() as u32;
                libc::_exit(if id() == own && own != parent { 0 } else { 1 })
            }
        }
        let mut status = 0;
        // SAFETY: waits for the child made above.
        #[allow(unsafe_code)]
        let waited = unsafe { libc::waitpid(child, &mut status, 0) };
        assert_eq!(waited, child);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "{status:#x}"
        );
        assert_eq!(id(), parent);
    }
}
