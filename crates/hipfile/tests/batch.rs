//! Batches through the emulated runtime on a real file: every request is reported once with
//! its own result, the capacity is kept, and, with a request held in flight by a parked
//! runtime call, the states, cancellation, deadlines and deregistration behave as cuFile's
//! batch API says.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile::{
    BatchIo, BatchStatus, ConfigBuilder, Driver, Error, FileHandle, IoState, Op, Platform,
};
use hipfile_testfs::{Skip, TempDir, emulated_runtime, require};
use hipfile_testkit::{Call, Fault, Gate, Injected};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::sync::Arc;
use std::time::Duration;

fn driver(settings: ConfigBuilder) -> Result<Driver, Skip> {
    let lib = emulated_runtime()?;
    let config = settings.hip_library(lib).build_with(|_| None).0;
    let d = Driver::open_private(config).unwrap();
    assert_eq!(d.runtime().platform, Platform::Emulated);
    Ok(d)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_left(7) as u8 ^ seed)
        .collect()
}

fn file_with(dir: &TempDir, data: &[u8]) -> (std::path::PathBuf, File) {
    let path = dir.path().join("batch.bin");
    std::fs::write(&path, data).unwrap();
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    (path, file)
}

#[test]
fn every_request_is_reported_once_with_its_own_result() {
    let d = require!(driver(
        ConfigBuilder::new().io_threads(3).request_threads(3)
    ));
    let dir = TempDir::new("hipfile-batch");
    let data = pattern(4 << 20, 4);
    let (path, file) = file_with(&dir, &data);
    let fh = d.register_file(&file).unwrap();
    let read_only = File::open(&path).unwrap();
    let ro = d.register_file(&read_only).unwrap();
    let mut buf = d.alloc(100 * 40_000).unwrap();
    let src = d.alloc(4096).unwrap();
    let mut batch = d.batch(128).unwrap();
    let mut ios: Vec<BatchIo<'_>> = buf
        .slice_mut(..)
        .unwrap()
        .chunks(40_000)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(i, view)| BatchIo::read(&fh, view, i as u64 * 41_000, i as u64))
        .collect();
    // One write that must fail (a read-only descriptor), in the middle of the reads.
    ios.insert(50, BatchIo::write(&ro, &src, 0, 1000));
    batch.submit(ios).unwrap();
    assert_eq!(batch.outstanding(), 101);
    let mut seen = BTreeMap::new();
    while seen.len() < 101 {
        for event in batch.poll(1, 7, None) {
            assert!(
                seen.insert(event.cookie, event.status).is_none(),
                "cookie {} reported twice",
                event.cookie
            );
        }
    }
    assert_eq!(batch.outstanding(), 0);
    assert!(batch.poll(0, 10, Some(Duration::ZERO)).is_empty());
    // The batch holds the views until it ends.
    drop(batch);
    for (cookie, status) in seen {
        match (cookie, status) {
            (1000, BatchStatus::Failed(Error::AccessMode { op: Op::Write, .. })) => {}
            (1000, other) => panic!("the write on a read-only file gave {other:?}"),
            (i, BatchStatus::Complete(o)) => {
                let at = (i * 41_000) as usize;
                let want = data.len().saturating_sub(at).min(40_000);
                assert_eq!(o.bytes, want as u64, "request {i}");
                let mut got = vec![0u8; want];
                buf.copy_to_host(i as usize * 40_000, &mut got).unwrap();
                assert!(got == data[at..at + want], "request {i}");
            }
            (i, other) => panic!("request {i} gave {other:?}"),
        }
    }
}

#[test]
fn a_batch_keeps_its_capacity() {
    let d = require!(driver(ConfigBuilder::new()));
    let dir = TempDir::new("hipfile-batch-cap");
    let (_, file) = file_with(&dir, &pattern(1 << 20, 1));
    let fh = d.register_file(&file).unwrap();
    assert!(matches!(d.batch(0), Err(Error::InvalidValue { .. })));
    let mut buf = d.alloc(5 * 4096).unwrap();
    let mut views = buf.slice_mut(..).unwrap().chunks(4096).unwrap().into_iter();
    let mut batch = d.batch(4).unwrap();
    let mut next = |cookie| BatchIo::read(&fh, views.next().unwrap(), 0, cookie);
    let five: Vec<_> = (0..5).map(&mut next).collect();
    let mut five = five.into_iter();
    // All or nothing: five requests do not fit in four places, and none is queued.
    let e = batch
        .submit(five.by_ref().take(5).collect::<Vec<_>>())
        .unwrap_err();
    assert!(matches!(e, Error::InvalidValue { .. }), "{e}");
    assert_eq!(batch.outstanding(), 0);
    drop(batch);
    let mut buf = d.alloc(5 * 4096).unwrap();
    let mut more = d.alloc(4096).unwrap();
    let views: Vec<_> = buf.slice_mut(..).unwrap().chunks(4096).unwrap();
    let mut views = views.into_iter();
    let mut batch = d.batch(4).unwrap();
    batch
        .submit((0..4).map(|c| BatchIo::read(&fh, views.next().unwrap(), 0, c)))
        .unwrap();
    let last = BatchIo::read(&fh, views.next().unwrap(), 0, 4);
    let e = batch.submit([last]).unwrap_err();
    assert!(matches!(e, Error::InvalidValue { .. }), "{e}");
    let events = batch.poll(4, 4, None);
    assert_eq!(events.len(), 4);
    // Reported requests leave the batch: there is room again.
    batch.submit([BatchIo::read(&fh, &mut more, 0, 5)]).unwrap();
    assert_eq!(batch.poll(1, 1, None)[0].cookie, 5);
}

#[test]
fn a_deadline_too_far_to_reach_is_no_deadline() {
    let d = require!(driver(ConfigBuilder::new()));
    let dir = TempDir::new("hipfile-batch-far");
    let (_, file) = file_with(&dir, &pattern(1 << 20, 1));
    let fh = d.register_file(&file).unwrap();
    for timeout in [Duration::MAX, Duration::from_secs(u64::MAX / 2)] {
        let mut buf = d.alloc(4096).unwrap();
        let mut batch = d.batch(1).unwrap();
        batch.submit([BatchIo::read(&fh, &mut buf, 0, 9)]).unwrap();
        let events = batch.poll(1, 1, Some(timeout));
        assert_eq!(events.len(), 1, "{timeout:?}");
        assert_eq!(events[0].cookie, 9);
    }
}

/// A driver whose runtime parks the first synchronous copy to the device once armed, with
/// one request thread: a request held in flight, and the ones behind it waiting.
struct Parked {
    d: Driver,
    parking: Arc<Injected>,
    gate: Arc<Gate>,
    _dir: TempDir,
    data: Vec<u8>,
    file: File,
}

fn parked(threads: usize) -> Result<Parked, Skip> {
    let base = driver(
        ConfigBuilder::new()
            .io_threads(threads)
            .request_threads(threads),
    )?;
    let parking = Arc::new(Injected::new(base.tuning().gpu().clone()));
    let d = Driver::with_runtime(
        base.config().clone(),
        parking.clone(),
        base.runtime().clone(),
    );
    let dir = TempDir::new("hipfile-batch-parked");
    let data = pattern(64 << 10, 6);
    let (_, file) = file_with(&dir, &data);
    Ok(Parked {
        d,
        parking,
        gate: Gate::new(),
        _dir: dir,
        data,
        file,
    })
}

fn arm(parking: &Injected, gate: &Arc<Gate>) {
    parking.faults().add(
        Fault::on(Call::CopyToDevice)
            .synchronous()
            .once()
            .park(gate),
    );
}

#[test]
fn a_request_in_flight_holds_the_file_and_the_ones_behind_it_can_be_cancelled() {
    let Parked {
        d,
        parking,
        gate,
        _dir,
        data,
        file,
    } = require!(parked(1));
    let fh: FileHandle = d.register_file(&file).unwrap();
    let mut buf = d.alloc(3 * 4096).unwrap();
    let mut batch = d.batch(8).unwrap();
    arm(&parking, &gate);
    let _release = gate.release_on_drop();
    // Unaligned sizes: the fallback serves them, on the engine's one thread, and the first
    // parks in its copy to the device.
    batch
        .submit(
            buf.slice_mut(..)
                .unwrap()
                .chunks(4096)
                .unwrap()
                .into_iter()
                .enumerate()
                .map(|(i, v)| BatchIo::read(&fh, v.split_at(4000).unwrap().0, 0, i as u64)),
        )
        .unwrap();
    gate.wait_parked(|| false);
    let states: Vec<IoState> = batch.status().into_iter().map(|(_, s)| s).collect();
    assert_eq!(
        states,
        [IoState::Pending, IoState::Waiting, IoState::Waiting]
    );
    // Nothing has ended: a poll with a deadline returns what there is, which is nothing.
    assert!(batch.poll(1, 3, Some(Duration::from_millis(20))).is_empty());
    assert!(matches!(
        fh.deregister(),
        Err(Error::InUse { what: "file", .. })
    ));
    assert_eq!(batch.cancel(), 2);
    let cancelled = batch.poll(2, 3, None);
    assert_eq!(cancelled.len(), 2);
    for e in &cancelled {
        assert!(matches!(e.status, BatchStatus::Canceled), "{e:?}");
        assert!(e.cookie == 1 || e.cookie == 2, "{e:?}");
    }
    gate.release();
    let served = batch.poll(1, 3, None);
    assert_eq!(served.len(), 1);
    assert_eq!(served[0].cookie, 0);
    assert!(matches!(served[0].status, BatchStatus::Complete(o) if o.bytes == 4000));
    drop(batch);
    let mut got = vec![0u8; 3 * 4096];
    buf.copy_to_host(0, &mut got).unwrap();
    assert!(got[..4000] == data[..4000]);
    assert!(
        got[4096..].iter().all(|&b| b == 0),
        "a cancelled read moved bytes"
    );
    fh.deregister().unwrap();
}

#[test]
fn dropping_a_waiting_handle_cancels_it_and_dropping_a_running_one_waits() {
    let Parked {
        d,
        parking,
        gate,
        _dir,
        data,
        file,
    } = require!(parked(1));
    let fh = d.register_file(&file).unwrap();
    let mut first = d.alloc(4096).unwrap();
    let mut second = d.alloc(4096).unwrap();
    arm(&parking, &gate);
    let running = fh.read_at_async(first.slice_mut(..4000).unwrap(), 0);
    // Released however the test ends, before `running` is dropped (which waits for it).
    let _release = gate.release_on_drop();
    gate.wait_parked(|| false);
    let waiting = fh.read_at_async(second.slice_mut(..4000).unwrap(), 0);
    assert_eq!(running.state(), IoState::Pending);
    assert_eq!(waiting.state(), IoState::Waiting);
    drop(waiting);
    let mut got = vec![0u8; 4096];
    second.copy_to_host(0, &mut got).unwrap();
    assert!(
        got.iter().all(|&b| b == 0),
        "a dropped waiting read moved bytes"
    );
    // Dropping the running one waits for it: release the gate from another thread.
    std::thread::scope(|s| {
        s.spawn(|| {
            gate.wait_parked(|| false);
            std::thread::sleep(Duration::from_millis(10));
            gate.release();
        });
        drop(running);
    });
    first.copy_to_host(0, &mut got).unwrap();
    assert!(got[..4000] == data[..4000]);
}
