//! A process made by `fork()` from one that uses hipfile: its inherited driver fails at once
//! with `Error::Forked` instead of waiting for threads that are not there, dropping what it
//! inherited does not hang, and a driver it opens itself serves it.
//!
//! The fork happens in a child process running one test alone (`child_forks`), so that no
//! other test's thread holds a lock at the fork; the test waits for it with a deadline.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.
#![allow(unsafe_code)]

use hipfile::{ConfigBuilder, Driver, Error};
use hipfile_testfs::{TempDir, emulated_runtime, require};
use std::time::{Duration, Instant};

const LEN: usize = 16 << 20;

fn config() -> hipfile::Config {
    #[allow(clippy::disallowed_methods)] // the parent names the runtime
    let lib = std::env::var_os("HIPFILE_HIP_LIBRARY").unwrap();
    ConfigBuilder::new()
        .hip_library(lib)
        .force_compat_mode(true)
        .io_threads(4)
        .build_with(|_| None)
        .0
}

/// What the copy made by `fork()` does; its exit status says which step failed.
fn in_the_copy(
    d: Driver,
    fh: hipfile::FileHandle,
    mut buf: hipfile::DeviceBuffer,
    file: &std::fs::File,
) -> i32 {
    match fh.read_exact_at(&mut buf, 0) {
        Err(Error::Forked { .. }) => {}
        other => {
            eprintln!("the inherited driver served: {other:?}");
            return 1;
        }
    }
    if !matches!(
        fh.read_at_async(&mut buf, 0).wait(),
        Err(Error::Forked { .. })
    ) {
        return 2;
    }
    if !matches!(d.alloc(4096), Err(Error::Forked { .. })) {
        return 3;
    }
    // What it inherited goes without waiting for anything.
    drop((fh, buf, d));
    // A driver of its own serves it.
    let own = match Driver::open_private(config()) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("no driver in the copy: {e}");
            return 4;
        }
    };
    let served = (|| {
        let fh = own.register_file(file)?;
        let mut buf = own.alloc(LEN)?;
        fh.read_exact_at(&mut buf, 0)?;
        let mut back = vec![0u8; 4096];
        buf.copy_to_host(LEN - 4096, &mut back)?;
        Ok::<_, Error>(back.iter().all(|&b| b == 0x5a))
    })();
    match served {
        Ok(true) => 0,
        other => {
            eprintln!("the copy's own driver: {other:?}");
            5
        }
    }
}

#[test]
#[ignore = "run alone in a child process by a_forked_process_fails_at_once_and_opens_its_own"]
fn child_forks() {
    let dir = TempDir::new("fork");
    let path = dir.path().join("data");
    std::fs::write(&path, vec![0x5au8; LEN]).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let d = Driver::open_private(config()).unwrap();
    let fh = d.register_file(&file).unwrap();
    let mut buf = d.alloc(LEN).unwrap();
    // A large read first, so that the engine's and the fallback's threads exist.
    fh.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(
        fh.read_at_async(&mut buf, 0).wait().unwrap().bytes,
        LEN as u64
    );
    // SAFETY: the copy runs Rust code of this test only, then leaves with `_exit`; this
    // process has no other test's threads (the harness runs this test alone).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = in_the_copy(d, fh, buf, &file);
        // SAFETY: ends the copy without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut status = 0;
    loop {
        // SAFETY: `status` is a live int; `pid` is this process's child.
        let got = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if got == pid {
            break;
        }
        if Instant::now() > deadline {
            // SAFETY: the child is this process's.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the forked copy hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        libc::WIFEXITED(status),
        "the copy ended with status {status:#x}"
    );
    assert_eq!(libc::WEXITSTATUS(status), 0, "the copy failed a step");
    // The parent's driver still serves.
    fh.read_exact_at(&mut buf, 0).unwrap();
}

#[test]
fn a_forked_process_fails_at_once_and_opens_its_own() {
    let lib = require!(emulated_runtime());
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_forks",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("HIPFILE_HIP_LIBRARY", &lib)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
