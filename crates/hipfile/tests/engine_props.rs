//! The engine under random mixes, through the emulated runtime on a real file: waves of
//! requests over the four APIs (synchronous, futures, a batch, stream-ordered), reads and
//! writes of random sizes and offsets, on a driver that may serve with either backend, with
//! copy failures injected now and then. Checked against a model of the file kept with plain
//! byte copies: every read that succeeds returns the model's bytes (stream-ordered ones as
//! seen by a later copy on the same stream), every write that succeeds lands, every request
//! ends exactly once with the byte count asked for or an error, only an injected fault fails
//! one, futures cancelled or dropped from another thread while in flight move all or
//! nothing, and after each case the driver gives back all pinned memory and leaves no
//! descriptor open.
//!
//! One test in its own binary, so that the descriptor count is not disturbed by others.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile::{BatchIo, BatchStatus, ConfigBuilder, DeviceBuffer, Driver, Error, IoOutcome};
use hipfile_testfs::{TempDir, emulated_runtime, require};
use hipfile_testkit::{Call, Fault, Injected};
use proptest::prelude::*;
use std::fs::OpenOptions;
use std::sync::Arc;

/// The file is `SLOTS` slots of `SLOT` bytes; each request of a wave stays in a slot of its
/// own, so that the requests of a wave never overlap and their order does not matter.
const SLOTS: usize = 6;
/// Seeds (mod 5) of futures cancelled, or dropped, from another thread while in flight.
const CANCEL: u8 = 1;
const DROP: u8 = 2;
const SLOT: usize = 20 << 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Sync,
    Async,
    Batch,
    Stream,
}

#[derive(Debug, Clone)]
struct Req {
    api: Api,
    write: bool,
    /// Where in its slot, and how long.
    start: usize,
    len: usize,
    seed: u8,
}

fn req() -> impl Strategy<Value = Req> {
    (
        prop_oneof![
            Just(Api::Sync),
            Just(Api::Async),
            Just(Api::Batch),
            Just(Api::Stream)
        ],
        any::<bool>(),
        0..SLOT,
        any::<u8>(),
        prop_oneof![Just(4096usize), Just(8192), 0..SLOT],
    )
        .prop_map(|(api, write, start, seed, len)| {
            // Page-aligned starts now and then, so that the fastpath serves some.
            let start = if seed % 3 == 0 { 0 } else { start };
            Req {
                api,
                write,
                start,
                len: len.min(SLOT - start),
                seed,
            }
        })
}

/// A wave: a request or none per slot, and whether a copy fails once during it.
fn wave() -> impl Strategy<Value = (Vec<Option<Req>>, Option<bool>)> {
    (
        proptest::collection::vec(proptest::option::weighted(0.8, req()), SLOTS),
        proptest::option::weighted(0.25, any::<bool>()),
    )
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(5) as u8 ^ seed)
        .collect()
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// What one request of a wave gave.
struct Done {
    slot: usize,
    req: Req,
    result: Result<IoOutcome, Error>,
}

fn run_case(waves: Vec<(Vec<Option<Req>>, Option<bool>)>, compat: bool) {
    let lib = require!(emulated_runtime());
    let fds_before = open_fds();
    let dir = TempDir::new("hipfile-engine-props");
    let path = dir.path().join("f.bin");
    let mut model = pattern(SLOTS * SLOT, 1);
    std::fs::write(&path, &model).unwrap();
    let config = ConfigBuilder::new()
        .hip_library(lib)
        .io_threads(4)
        .force_compat_mode(compat)
        .task_size(8 << 10)
        .staging_memory(32 << 10)
        .build_with(|_| None)
        .0;
    let base = Driver::open_private(config).unwrap();
    let injected = Arc::new(Injected::new(base.tuning().gpu().clone()));
    let d = Driver::with_runtime(
        base.config().clone(),
        injected.clone(),
        base.runtime().clone(),
    );
    drop(base);
    {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let fh = d.register_file(&file).unwrap();
        let streams: Vec<_> = (0..SLOTS).map(|_| d.create_stream().unwrap()).collect();
        for (wave, fault) in waves {
            let mut bufs: Vec<DeviceBuffer> = (0..SLOTS).map(|_| d.alloc(SLOT).unwrap()).collect();
            let mut done: Vec<Done> = Vec::new();
            let mut later: Vec<(usize, Vec<u8>)> = Vec::new();
            // Writes take their bytes from the device: fill each buffer first.
            for (slot, r) in wave.iter().enumerate() {
                if let Some(r) = r.as_ref().filter(|r| r.write) {
                    bufs[slot]
                        .copy_from_host(0, &pattern(r.len, r.seed))
                        .unwrap();
                }
            }
            // Armed once the buffers are filled: only the wave's requests meet it.
            let faults = usize::from(fault.is_some());
            if let Some(to_device) = fault {
                let call = if to_device {
                    Call::CopyToDevice
                } else {
                    Call::CopyToHost
                };
                injected.faults().add(Fault::on(call).once().fail(1));
            }
            {
                let mut pending = Vec::new();
                let mut on_streams = Vec::new();
                let mut batch = d.batch(SLOTS).unwrap();
                let mut batched = Vec::new();
                for ((slot, r), buf) in wave.iter().enumerate().zip(bufs.iter_mut()) {
                    let Some(r) = r else { continue };
                    let offset = (slot * SLOT + r.start) as u64;
                    match (r.api, r.write) {
                        (Api::Sync, false) => done.push(Done {
                            slot,
                            req: r.clone(),
                            result: fh.read_at(&mut buf.slice_mut(..r.len).unwrap(), offset),
                        }),
                        (Api::Sync, true) => done.push(Done {
                            slot,
                            req: r.clone(),
                            result: fh.write_at(&buf.slice(..r.len).unwrap(), offset),
                        }),
                        (Api::Async, false) => pending.push((
                            slot,
                            r.clone(),
                            fh.read_at_async(buf.slice_mut(..r.len).unwrap(), offset),
                        )),
                        (Api::Async, true) => pending.push((
                            slot,
                            r.clone(),
                            fh.write_at_async(buf.slice(..r.len).unwrap(), offset),
                        )),
                        (Api::Batch, false) => {
                            batched.push((slot, r.clone()));
                            let view = buf.slice_mut(..r.len).unwrap();
                            batch
                                .submit([BatchIo::read(&fh, view, offset, slot as u64)])
                                .unwrap();
                        }
                        (Api::Batch, true) => {
                            batched.push((slot, r.clone()));
                            let view = buf.slice(..r.len).unwrap();
                            batch
                                .submit([BatchIo::write(&fh, view, offset, slot as u64)])
                                .unwrap();
                        }
                        (Api::Stream, false) => on_streams.push((
                            slot,
                            r.clone(),
                            fh.read_on(&streams[slot], buf.slice_mut(..r.len).unwrap(), offset),
                        )),
                        (Api::Stream, true) => on_streams.push((
                            slot,
                            r.clone(),
                            fh.write_on(&streams[slot], buf.slice(..r.len).unwrap(), offset),
                        )),
                    }
                }
                // Some futures are cancelled, and some dropped, from another thread while
                // in flight (chosen by their seed).
                let (dropped, pending): (Vec<_>, Vec<_>) = pending
                    .into_iter()
                    .partition(|(_, r, _)| r.seed % 5 == DROP);
                std::thread::scope(|s| {
                    s.spawn(|| {
                        for (_, r, io) in &pending {
                            if r.seed % 5 == CANCEL {
                                io.cancel();
                            }
                        }
                    });
                    s.spawn(move || drop(dropped));
                });
                for (slot, req, io) in pending {
                    done.push(Done {
                        slot,
                        req,
                        result: io.wait(),
                    });
                }
                let mut left = batched.len();
                while left > 0 {
                    for event in batch.poll(1, SLOTS, None) {
                        let slot = event.cookie as usize;
                        let i = batched.iter().position(|(s, _)| *s == slot).unwrap();
                        let (_, req) = batched.swap_remove(i);
                        let result = match event.status {
                            BatchStatus::Complete(o) => Ok(o),
                            BatchStatus::Failed(e) => Err(e),
                            other => panic!("a batch request ended as {other:?}"),
                        };
                        done.push(Done { slot, req, result });
                        left -= 1;
                    }
                }
                for (slot, req, io) in on_streams {
                    let result = io.and_then(hipfile::Io::wait);
                    done.push(Done { slot, req, result });
                }
            }
            injected.faults().clear();
            // A later copy on each stream sees what its read put there.
            for d_ in done
                .iter()
                .filter(|x| x.req.api == Api::Stream && !x.req.write)
            {
                if d_.result.is_ok() {
                    let mut host = d.alloc_pinned(d_.req.len.max(1)).unwrap();
                    let s = &streams[d_.slot];
                    // SAFETY: the buffer and the pinned bytes live until the stream is
                    // synchronised just below.
                    unsafe {
                        d.tuning()
                            .gpu()
                            .require_streams()
                            .unwrap()
                            .copy_to_host_async(
                                host.as_mut_ptr(),
                                bufs[d_.slot].ptr(),
                                d_.req.len,
                                s.handle(),
                            )
                            .unwrap();
                    }
                    s.synchronize().unwrap();
                    later.push((d_.slot, host[..d_.req.len].to_vec()));
                }
            }
            let cancelled = |x: &Done| {
                x.req.api == Api::Async
                    && x.req.seed % 5 == CANCEL
                    && matches!(x.result, Err(Error::Canceled { .. }))
            };
            let failed = done
                .iter()
                .filter(|x| x.result.is_err() && !cancelled(x))
                .count();
            assert!(
                failed <= faults,
                "{failed} requests failed with {faults} faults: {:?}",
                done.iter()
                    .filter_map(|x| x.result.as_ref().err())
                    .collect::<Vec<_>>()
            );
            let dropped = |r: &Req| r.api == Api::Async && r.seed % 5 == DROP;
            assert_eq!(
                done.len(),
                wave.iter().flatten().filter(|r| !dropped(r)).count(),
                "a request did not end once"
            );
            // Where a dropped write may or may not have run, the model follows the file.
            for (slot, r) in wave.iter().enumerate() {
                if let Some(r) = r.as_ref().filter(|r| r.write && dropped(r)) {
                    let at = slot * SLOT + r.start;
                    let file = std::fs::read(&path).unwrap();
                    model[at..at + r.len].copy_from_slice(&file[at..at + r.len]);
                }
            }
            for x in &done {
                let at = x.slot * SLOT + x.req.start;
                match &x.result {
                    Ok(o) => {
                        assert_eq!(o.bytes, x.req.len as u64, "{:?}", x.req);
                        if x.req.write {
                            model[at..at + x.req.len]
                                .copy_from_slice(&pattern(x.req.len, x.req.seed));
                        } else if x.req.api != Api::Stream {
                            let mut got = vec![0u8; x.req.len];
                            bufs[x.slot].copy_to_host(0, &mut got).unwrap();
                            assert!(got[..] == model[at..at + x.req.len], "{:?}", x.req);
                        }
                    }
                    // Cancelled before it started: it moved nothing (the file is checked
                    // against the unchanged model below).
                    Err(_) if cancelled(x) => {}
                    Err(_) if x.req.write => {
                        // The file is what it is where a write failed; the model follows it.
                        let file = std::fs::read(&path).unwrap();
                        model[at..at + x.req.len].copy_from_slice(&file[at..at + x.req.len]);
                    }
                    Err(_) => {}
                }
            }
            for (slot, got) in later {
                let r = wave[slot].as_ref().unwrap();
                let at = slot * SLOT + r.start;
                assert!(got[..] == model[at..at + r.len], "stream read {r:?}");
            }
            assert!(
                std::fs::read(&path).unwrap() == model,
                "the file left the model"
            );
        }
        drop(streams);
        drop(fh);
        drop(file);
    }
    drop(d);
    assert_eq!(
        injected.calls(Call::AllocPinned),
        injected.calls(Call::FreePinned),
        "pinned memory left allocated"
    );
    drop(dir);
    assert_eq!(open_fds(), fds_before, "descriptors left open");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn random_mixes_of_apis_sizes_and_faults_match_a_plain_model(
        waves in proptest::collection::vec(wave(), 1..8),
        compat in any::<bool>(),
    ) {
        run_case(waves, compat);
    }
}
