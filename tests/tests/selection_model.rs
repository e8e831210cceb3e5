//! docs/BEHAVIOUR.md §1 as an independent, table-driven model, checked against the real scoring and
//! selection over random requests × file facts × buffer kinds × alignments × configurations.
//!
//! The model below is written from the specification, not from the backends' code: each
//! rule is one row naming its reason code, whether it needs a usable `O_DIRECT` descriptor
//! (the alignment rules: without one there is no alignment to meet), and the condition under
//! which it applies.

#![allow(clippy::unwrap_used)]
// A failed unwrap is a failed test.

// The model states alignment as plain `%` arithmetic, apart from the implementation's idiom.
#![allow(clippy::manual_is_multiple_of)]

use hipfile::{BufferFacts, Config, ConfigBuilder, DevicePtr, MemoryKind, Op, Request};
use hipfile_core::MAX_IO_SIZE;
use hipfile_probe::{
    AlignSource, DirectIo, Ext4Journal, FileFacts, FileKind, Filesystem, NoDirectReason,
};
use hipfile_testkit::fixtures::{device_buffer, ext4_file, filesystem};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Case {
    config: Config,
    amd_file_io: bool,
    file: FileFacts,
    request: Request,
    buffer: BufferFacts,
}

/// Which rows apply when the file has no usable direct descriptor.
#[derive(PartialEq)]
enum Scope {
    /// Always evaluated.
    Always,
    /// An alignment rule, which only counts when the file has a usable `O_DIRECT` descriptor
    /// (docs/BEHAVIOUR.md §1.7: without one, `no_o_direct_fd` is given and no alignment reason,
    /// while the type and filesystem rules still apply).
    NeedsDirectFd,
}

type Rule = (&'static str, Scope, fn(&Case) -> bool);

fn direct(c: &Case) -> Option<(u64, u64)> {
    match c.file.direct {
        DirectIo::Available {
            mem_align,
            offset_align,
            ..
        } => Some((mem_align.into(), offset_align.into())),
        DirectIo::Unavailable(_) => None,
    }
}

fn clamped_size(c: &Case) -> u64 {
    c.request.size.min(0x7fff_f000)
}

fn regular_on_supported_fs(c: &Case) -> bool {
    match &c.file.filesystem {
        Some(fs) if fs.fs_type == "xfs" => true,
        Some(fs) if fs.fs_type == "ext4" => fs.ext4_journal == Some(Ext4Journal::Ordered),
        _ => false,
    }
}

/// The fastpath rows, in the order docs/BEHAVIOUR.md §5 lists the codes.
const FASTPATH_RULES: &[Rule] = &[
    ("force_compat_mode", Scope::Always, |c| {
        c.config.force_compat_mode
    }),
    ("runtime_lacks_amd_file_io", Scope::Always, |c| {
        !c.amd_file_io
    }),
    ("no_o_direct_fd", Scope::Always, |c| direct(c).is_none()),
    ("not_regular_file_or_block_device", Scope::Always, |c| {
        !matches!(c.file.kind, FileKind::Regular | FileKind::BlockDevice)
    }),
    ("unsupported_file_system", Scope::Always, |c| {
        c.file.kind == FileKind::Regular
            && !c.config.unsupported_file_systems
            && !regular_on_supported_fs(c)
    }),
    ("buffer_not_device_memory", Scope::Always, |c| {
        c.buffer.memory != MemoryKind::Device
    }),
    ("file_offset_misaligned", Scope::NeedsDirectFd, |c| {
        direct(c).is_some_and(|(_, off)| c.request.file_offset % off != 0)
    }),
    ("size_misaligned", Scope::NeedsDirectFd, |c| {
        direct(c).is_some_and(|(_, off)| clamped_size(c) % off != 0)
    }),
    ("buffer_address_misaligned", Scope::NeedsDirectFd, |c| {
        direct(c).is_some_and(|(mem, _)| (c.buffer.base.0 + c.request.buffer_offset) % mem != 0)
    }),
];

const FALLBACK_RULES: &[Rule] = &[
    ("compat_mode_disallowed", Scope::Always, |c| {
        !c.config.allow_compat_mode
    }),
    ("buffer_not_device_memory", Scope::Always, |c| {
        c.buffer.memory != MemoryKind::Device
    }),
];

fn model_reasons(rules: &[Rule], c: &Case) -> Vec<&'static str> {
    let has_direct = direct(c).is_some();
    rules
        .iter()
        .filter(|(_, scope, _)| has_direct || *scope == Scope::Always)
        .filter(|(_, _, applies)| applies(c))
        .map(|(code, _, _)| *code)
        .collect()
}

fn model_valid(c: &Case) -> bool {
    let r = &c.request;
    r.buffer_offset < c.buffer.len
        && r.size <= c.buffer.len - r.buffer_offset
        && c.buffer.base.0.checked_add(r.buffer_offset).is_some()
        && r.file_offset
            .checked_add(clamped_size(c))
            .is_some_and(|e| e <= i64::MAX as u64)
}

fn arb_filesystem() -> impl Strategy<Value = Option<Filesystem>> {
    prop_oneof![
        Just(None),
        prop_oneof![
            Just(Ext4Journal::Ordered),
            Just(Ext4Journal::Journal),
            Just(Ext4Journal::Writeback),
            Just(Ext4Journal::Unknown)
        ]
        .prop_map(|j| Some(filesystem("ext4", Some(j)))),
        Just(Some(filesystem("xfs", None))),
        Just(Some(filesystem("tmpfs", None))),
        Just(Some(filesystem("btrfs", None))),
        Just(Some(filesystem("nfs4", None))),
        Just(Some(filesystem("ext3", None))),
    ]
}

fn arb_direct() -> impl Strategy<Value = DirectIo> {
    let align = prop_oneof![Just(1u32), Just(512), Just(4096), Just(8192), 1u32..10_000];
    prop_oneof![
        Just(DirectIo::Unavailable(NoDirectReason::NotAttempted)),
        Just(DirectIo::Unavailable(NoDirectReason::OpenRejected)),
        Just(DirectIo::Unavailable(NoDirectReason::AlignmentZero)),
        (
            align.clone(),
            align,
            prop_oneof![
                Just(AlignSource::Statx),
                Just(AlignSource::Assumed),
                Just(AlignSource::LogicalBlockSize)
            ]
        )
            .prop_map(|(mem_align, offset_align, source)| DirectIo::Available {
                mem_align,
                offset_align,
                source
            }),
    ]
}

fn arb_file() -> impl Strategy<Value = FileFacts> {
    (
        prop_oneof![
            Just(FileKind::Regular),
            Just(FileKind::BlockDevice),
            Just(FileKind::Other)
        ],
        arb_filesystem(),
        arb_direct(),
    )
        .prop_map(|(kind, filesystem, direct)| FileFacts {
            kind,
            mode: 0o644,
            dev: (7, 1),
            rdev: (0, 0),
            size: 1 << 30,
            status_flags: 0,
            filesystem,
            statfs_magic: 0,
            direct,
        })
}

/// Offsets and sizes: mostly multiples of common alignments (so that acceptance happens
/// often), sometimes anything, sometimes out of range.
fn arb_offset() -> impl Strategy<Value = u64> {
    const LOFF_MAX: u64 = i64::MAX as u64;
    prop_oneof![
        4 => (0u64..1 << 20).prop_map(|k| k * 4096),
        2 => 0u64..1 << 30,
        1 => (0u64..1 << 20).prop_map(|k| k * 512),
        1 => Just(0u64),
        1 => (LOFF_MAX - 10_000)..=LOFF_MAX,
        1 => (LOFF_MAX + 1)..=(LOFF_MAX + 100),
        1 => (u64::MAX - 100)..=u64::MAX,
    ]
}

fn arb_size() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => (0u64..1 << 12).prop_map(|k| k * 4096),
        2 => 0u64..1 << 24,
        1 => Just(0u64),
        1 => (MAX_IO_SIZE - 8192)..(MAX_IO_SIZE + 8192),
        1 => Just(3 * MAX_IO_SIZE),
    ]
}

fn arb_memory() -> impl Strategy<Value = MemoryKind> {
    prop_oneof![
        6 => Just(MemoryKind::Device),
        1 => Just(MemoryKind::Host),
        1 => Just(MemoryKind::Managed),
        1 => Just(MemoryKind::Unregistered),
        1 => Just(MemoryKind::Array),
        1 => Just(MemoryKind::Unified),
    ]
}

fn arb_case() -> impl Strategy<Value = Case> {
    (
        (any::<bool>(), any::<bool>(), any::<bool>()),
        any::<bool>(),
        arb_file(),
        (
            prop_oneof![Just(Op::Read), Just(Op::Write)],
            arb_size(),
            arb_offset(),
            arb_offset(),
        ),
        (
            prop_oneof![
                Just(1u64),
                Just(512),
                Just(4096),
                Just(1 << 16),
                1u64..100_000
            ],
            arb_memory(),
            0u64..3,
        ),
    )
        .prop_map(
            |(
                (allow, force, unsupported),
                amd_file_io,
                file,
                (op, size, file_offset, buffer_offset),
                (buffer_align, memory, slack),
            )| {
                let config = ConfigBuilder::new()
                    .allow_compat_mode(allow)
                    .force_compat_mode(force)
                    .unsupported_file_systems(unsupported)
                    .build_with(|_| None)
                    .0;
                let request = Request {
                    op,
                    size,
                    file_offset,
                    buffer_offset,
                };
                // Usually a buffer that fits the request, sometimes one byte short, sometimes larger.
                let fits = buffer_offset.saturating_add(size.max(1));
                let len = match slack {
                    0 => fits,
                    1 => fits.saturating_sub(1).max(1),
                    _ => fits.saturating_add(4096),
                };
                let buffer = BufferFacts {
                    base: DevicePtr(0x7f00_0000_0000 + buffer_align),
                    len,
                    memory,
                    device: 0,
                };
                Case {
                    config,
                    amd_file_io,
                    file,
                    request,
                    buffer,
                }
            },
        )
}

fn codes(reasons: &[hipfile::Reason]) -> Vec<&'static str> {
    reasons.iter().map(|r| r.code()).collect()
}

fn check(c: &Case) -> Result<(), TestCaseError> {
    let got = hipfile::explain(&c.config, c.amd_file_io, &c.file, &c.request, &c.buffer);
    if !model_valid(c) {
        prop_assert!(
            matches!(got, Err(hipfile::Error::InvalidValue { .. })),
            "invalid request must be refused before scoring: {got:?}"
        );
        return Ok(());
    }
    let decision = got.map_err(|e| TestCaseError::fail(format!("valid request refused: {e}")))?;
    let fast = model_reasons(FASTPATH_RULES, c);
    let slow = model_reasons(FALLBACK_RULES, c);
    let fast_score = if fast.is_empty() { 100 } else { -1 };
    let slow_score = if slow.is_empty() { 1 } else { -1 };
    let selected = if fast_score >= 0 {
        Some(hipfile::BackendKind::Fastpath)
    } else if slow_score >= 0 {
        Some(hipfile::BackendKind::Fallback)
    } else {
        None
    };
    let fv = decision
        .verdict(hipfile::BackendKind::Fastpath)
        .expect("fastpath verdict");
    let sv = decision
        .verdict(hipfile::BackendKind::Fallback)
        .expect("fallback verdict");
    prop_assert_eq!(codes(fv.reasons()), fast);
    prop_assert_eq!(codes(sv.reasons()), slow);
    prop_assert_eq!(fv.score(), fast_score);
    prop_assert_eq!(sv.score(), slow_score);
    prop_assert_eq!(decision.selected_kind(), selected);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]

    #[test]
    fn selection_matches_the_specification(c in arb_case()) {
        check(&c)?;
    }
}

/// A few hand-picked cases, so that a broken generator cannot hide a broken rule.
#[test]
fn known_cases() {
    let base = Case {
        config: Config::default(),
        amd_file_io: true,
        file: ext4_file(Ext4Journal::Ordered),
        request: Request {
            op: Op::Read,
            size: 1 << 20,
            file_offset: 0,
            buffer_offset: 0,
        },
        buffer: device_buffer(0x7f00_0000_1000, 1 << 20),
    };
    let explain = |c: &Case| {
        hipfile::explain(&c.config, c.amd_file_io, &c.file, &c.request, &c.buffer).unwrap()
    };

    let d = explain(&base);
    assert_eq!(d.selected_kind(), Some(hipfile::BackendKind::Fastpath));

    let mut c = base.clone();
    c.file.filesystem = Some(filesystem("ext4", Some(Ext4Journal::Journal)));
    c.file.direct = DirectIo::Unavailable(NoDirectReason::AlignmentZero);
    c.request.file_offset = 1;
    let d = explain(&c);
    assert_eq!(
        codes(d.verdict(hipfile::BackendKind::Fastpath).unwrap().reasons()),
        ["no_o_direct_fd", "unsupported_file_system"]
    );
    assert_eq!(d.selected_kind(), Some(hipfile::BackendKind::Fallback));

    // A character device such as /dev/null: no direct descriptor (none is attempted), and
    // not a regular file or block device; still no alignment reason.
    let mut c = base.clone();
    c.file.kind = FileKind::Other;
    c.file.filesystem = Some(filesystem("devtmpfs", None));
    c.file.direct = DirectIo::Unavailable(NoDirectReason::NotAttempted);
    c.request.file_offset = 1;
    let d = explain(&c);
    assert_eq!(
        codes(d.verdict(hipfile::BackendKind::Fastpath).unwrap().reasons()),
        ["no_o_direct_fd", "not_regular_file_or_block_device"]
    );

    let mut c = base.clone();
    c.file.filesystem = Some(filesystem("tmpfs", None));
    c.request.file_offset = 512;
    c.request.size = 100;
    c.buffer.base = DevicePtr(0x7f00_0000_0001);
    let d = explain(&c);
    assert_eq!(
        codes(d.verdict(hipfile::BackendKind::Fastpath).unwrap().reasons()),
        [
            "unsupported_file_system",
            "file_offset_misaligned",
            "size_misaligned",
            "buffer_address_misaligned"
        ]
    );

    let mut c = base.clone();
    c.config.force_compat_mode = true;
    c.config.allow_compat_mode = false;
    c.buffer.memory = MemoryKind::Host;
    let d = explain(&c);
    assert_eq!(d.selected_kind(), None);
    assert_eq!(
        codes(d.verdict(hipfile::BackendKind::Fallback).unwrap().reasons()),
        ["compat_mode_disallowed", "buffer_not_device_memory"]
    );

    let mut c = base;
    c.file.kind = FileKind::BlockDevice;
    c.file.filesystem = None;
    assert_eq!(
        explain(&c).selected_kind(),
        Some(hipfile::BackendKind::Fastpath)
    );
}
