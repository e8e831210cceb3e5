//! The mountinfo parser: real lines from several kinds of systems, generated entries that
//! round-trip through a formatter, and arbitrary or mutated input that must never panic.

// Helpers outside #[test] functions too: an unwrap that fails is a failing test.
#![allow(clippy::unwrap_used)]

use hipfile_probe::mountinfo::{
    MountEntry, ParseError, ext4_journal, find_by_device, parse, parse_line,
};
use hipfile_probe::{Ext4Journal, Filesystem};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

// ---- Real lines ----

#[test]
fn real_lines_from_several_systems() {
    let btrfs = parse_line(
        "25 1 0:23 / / rw,relatime shared:1 - btrfs /dev/nvme0n1p2 \
         rw,seclabel,compress=zstd:1,ssd,discard=async,space_cache=v2,subvolid=257,subvol=/root",
    )
    .unwrap();
    assert_eq!(
        (btrfs.major, btrfs.minor, btrfs.fs_type.as_str()),
        (0, 23, "btrfs")
    );
    assert_eq!(btrfs.optional_fields, ["shared:1"]);
    assert!(btrfs.super_options.contains(&"subvol=/root".to_owned()));

    let overlay = parse_line(
        "1362 1161 0:95 / / rw,relatime master:398 - overlay overlay \
         rw,lowerdir=/var/lib/docker/overlay2/l/A:/var/lib/docker/overlay2/l/B,\
         upperdir=/var/lib/docker/overlay2/x/diff,workdir=/var/lib/docker/overlay2/x/work",
    )
    .unwrap();
    assert_eq!((overlay.mount_id, overlay.parent_id), (1362, 1161));
    assert_eq!(overlay.super_options.len(), 4);

    let nfs = parse_line(
        "97 29 0:47 / /mnt/nfs rw,relatime shared:52 - nfs4 server:/export \
         rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto=tcp,timeo=600,\
         retrans=2,sec=sys,clientaddr=10.0.0.2,local_lock=none,addr=10.0.0.1",
    )
    .unwrap();
    assert_eq!(
        (nfs.fs_type.as_str(), nfs.source.as_str()),
        ("nfs4", "server:/export")
    );

    let nsfs = parse_line("610 30 0:4 net:[4026532600] /run/netns/x rw shared:300 - nsfs nsfs rw")
        .unwrap();
    assert_eq!(nsfs.root, Path::new("net:[4026532600]"));

    let fuse = parse_line(
        "120 29 0:51 / /home/u/.cache/doc rw,nosuid,nodev,relatime shared:70 - fuse.portal portal \
         rw,user_id=1000,group_id=1000",
    )
    .unwrap();
    assert_eq!(fuse.fs_type, "fuse.portal");

    let usb = parse_line(
        r"150 29 8:17 / /media/usb\040drive rw,nosuid,nodev,relatime shared:80 master:2 - vfat /dev/sdb1 rw,fmask=0022,errors=remount-ro",
    )
    .unwrap();
    assert_eq!(usb.mount_point, Path::new("/media/usb drive"));
    assert_eq!(usb.optional_fields, ["shared:80", "master:2"]);
    assert_eq!((usb.major, usb.minor), (8, 17));

    let autofs = parse_line(
        "40 25 0:36 / /proc/sys/fs/binfmt_misc rw,relatime shared:13 - autofs systemd-1 \
         rw,fd=29,pgrp=1,timeout=0,minproto=5,maxproto=5,direct,pipe_ino=20160",
    )
    .unwrap();
    assert_eq!(autofs.source, "systemd-1");
}

#[test]
fn ext4_lines_as_this_kernel_writes_them() {
    let default = parse_line("45 27 7:0 / /tmp/tm rw,relatime - ext4 /dev/loop0 rw").unwrap();
    assert_eq!(
        Filesystem::from(&default).ext4_journal,
        Some(Ext4Journal::Ordered)
    );
    let journal = parse_line(
        "45 27 7:0 / /tmp/tm rw,relatime - ext4 /dev/loop0 rw,nodioread_nolock,nodelalloc,data=journal",
    )
    .unwrap();
    assert_eq!(
        Filesystem::from(&journal).ext4_journal,
        Some(Ext4Journal::Journal)
    );
    let ordered =
        parse_line("45 27 7:0 / /m rw,relatime - ext4 /dev/loop0 rw,data=ordered").unwrap();
    assert_eq!(
        Filesystem::from(ordered).ext4_journal,
        Some(Ext4Journal::Ordered)
    );
    let entries = parse(&format!(
        "{}\n{}\n",
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534",
        "46 27 7:1 / /mnt/w rw,relatime - ext4 /dev/loop1 rw,data=writeback"
    ));
    let w = find_by_device(&entries, 7, 1)
        .map(Filesystem::from)
        .unwrap();
    assert_eq!(w.ext4_journal, Some(Ext4Journal::Writeback));
    assert_eq!(w.mount_point, Path::new("/mnt/w"));
}

// ---- Generated entries round-trip ----

/// What the kernel does to paths and the source (`mangle()` in fs/proc_namespace.c).
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            ' ' => out.push_str(r"\040"),
            '\t' => out.push_str(r"\011"),
            '\n' => out.push_str(r"\012"),
            '\\' => out.push_str(r"\134"),
            c => out.push(c),
        }
    }
    out
}

/// Option values additionally have commas escaped (`seq_show_option`).
fn escape_option(s: &str) -> String {
    escape(s).replace(',', r"\054")
}

fn format_entry(e: &MountEntry) -> String {
    let path = |p: &PathBuf| escape(p.to_str().expect("generated paths are UTF-8"));
    let options = |o: &[String]| {
        o.iter()
            .map(|o| escape_option(o))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut line = format!(
        "{} {} {}:{} {} {} {} ",
        e.mount_id,
        e.parent_id,
        e.major,
        e.minor,
        path(&e.root),
        path(&e.mount_point),
        options(&e.mount_options)
    );
    for f in &e.optional_fields {
        line.push_str(f);
        line.push(' ');
    }
    line.push_str(&format!(
        "- {} {} {}",
        e.fs_type,
        escape(&e.source),
        options(&e.super_options)
    ));
    line
}

const PATH_CHARS: &str = "[a-z0-9 \t\n\\\\é日\\-_.]";

fn path() -> impl Strategy<Value = PathBuf> {
    prop::string::string_regex(&format!("(/{PATH_CHARS}{{0,10}}){{1,4}}"))
        .unwrap()
        .prop_map(PathBuf::from)
}

/// An option that is not `data=`: a name and maybe a value with characters that need
/// escaping.
fn option() -> impl Strategy<Value = String> {
    (
        prop::string::string_regex("[a-z][a-z0-9_]{0,6}")
            .unwrap()
            .prop_filter("not data", |n| n != "data"),
        prop::option::of(prop::string::string_regex("[a-z0-9 ,:/\\\\=日]{0,6}").unwrap()),
    )
        .prop_map(|(name, value)| match value {
            Some(v) => format!("{name}={v}"),
            None => name,
        })
}

fn optional_field() -> impl Strategy<Value = String> {
    prop_oneof![
        (
            prop_oneof![Just("shared"), Just("master"), Just("propagate_from")],
            1u32..10_000
        )
            .prop_map(|(tag, n)| format!("{tag}:{n}")),
        Just("unbindable".to_owned()),
    ]
}

fn journal_value() -> impl Strategy<Value = (&'static str, Ext4Journal)> {
    prop_oneof![
        Just(("ordered", Ext4Journal::Ordered)),
        Just(("journal", Ext4Journal::Journal)),
        Just(("writeback", Ext4Journal::Writeback)),
        Just(("fancy", Ext4Journal::Unknown)),
    ]
}

/// Super options with a `data=` option at a random position, or none; and the journaling
/// mode they mean.
fn super_options() -> impl Strategy<Value = (Vec<String>, Ext4Journal)> {
    (
        prop::collection::vec(option(), 0..6),
        prop::option::of((journal_value(), any::<prop::sample::Index>())),
    )
        .prop_map(|(mut options, data)| match data {
            None => (options, Ext4Journal::Ordered),
            Some(((value, journal), at)) => {
                let at = at.index(options.len() + 1);
                options.insert(at, format!("data={value}"));
                (options, journal)
            }
        })
}

prop_compose! {
    fn entry()(
        ids in (any::<u32>(), any::<u32>()),
        dev in (any::<u32>(), any::<u32>()),
        root in path(),
        mount_point in path(),
        mount_options in prop::collection::vec(option(), 1..5),
        optional_fields in prop::collection::vec(optional_field(), 0..5),
        fs_type in prop_oneof![Just("ext4".to_owned()), prop::string::string_regex("[a-z0-9.]{1,10}").unwrap()],
        source in prop::string::string_regex(&format!("{PATH_CHARS}{{0,12}}")).unwrap(),
        (super_options, journal) in super_options(),
    ) -> (MountEntry, Ext4Journal) {
        let entry = MountEntry {
            mount_id: ids.0,
            parent_id: ids.1,
            major: dev.0,
            minor: dev.1,
            root,
            mount_point,
            mount_options,
            optional_fields,
            fs_type,
            source,
            super_options,
        };
        (entry, journal)
    }
}

proptest! {
    #[test]
    fn generated_entries_round_trip((entry, journal) in entry()) {
        let line = format_entry(&entry);
        prop_assert!(!line.contains('\n') && !line.contains('\t'), "{line:?}");
        let parsed = parse_line(&line);
        prop_assert_eq!(parsed.as_ref(), Ok(&entry), "line {:?}", line);
        prop_assert_eq!(ext4_journal(&entry.super_options), journal);
        let fs = Filesystem::from(&entry);
        prop_assert_eq!(fs.ext4_journal, (entry.fs_type == "ext4").then_some(journal));
        prop_assert_eq!(parse_line(&format!("{line}\n")), Ok(entry));
    }

    #[test]
    fn a_table_of_generated_entries_parses_whole_and_in_order(
        entries in prop::collection::vec(entry().prop_map(|(e, _)| e), 0..8),
    ) {
        let text: String = entries.iter().map(|e| format_entry(e) + "\n").collect();
        prop_assert_eq!(&parse(&text), &entries);
        for e in &entries {
            let found = find_by_device(&entries, e.major, e.minor).unwrap();
            prop_assert_eq!((found.major, found.minor), (e.major, e.minor));
            let first = entries.iter().position(|x| (x.major, x.minor) == (e.major, e.minor));
            prop_assert!(std::ptr::eq(found, &entries[first.unwrap()]));
        }
    }

    // ---- Never a panic ----

    #[test]
    fn arbitrary_strings_never_panic(s in any::<String>()) {
        let _ = parse_line(&s);
        let _ = parse(&s);
    }

    #[test]
    fn mountinfo_shaped_strings_never_panic(s in "[0-9:/ a-z\\\\\\-,=é\n]{0,80}") {
        let _ = parse_line(&s);
        let _ = parse(&s);
    }

    #[test]
    fn extracted_journal_never_panics(options in prop::collection::vec(any::<String>(), 0..5)) {
        let _ = ext4_journal(&options);
    }

    #[test]
    fn a_valid_line_truncated_anywhere_parses_or_fails(
        (entry, _) in entry(),
        at in any::<prop::sample::Index>(),
    ) {
        let line = format_entry(&entry);
        let cut = floor_boundary(&line, at.index(line.len() + 1));
        let truncated = &line[..cut];
        let result = parse_line(truncated);
        // Before the separator nothing can stand in for it: no field starts with `-`.
        let separator = line.find(" - ").unwrap();
        if cut <= separator {
            prop_assert!(result.is_err(), "{truncated:?} parsed: {result:?}");
        }
    }

    #[test]
    fn a_valid_line_mutated_parses_or_fails(
        (entry, _) in entry(),
        mutation in mutation(),
    ) {
        let line = format_entry(&entry);
        let mutated = mutation.apply(&line);
        let result = parse_line(&mutated);
        if let Mutation::DeleteSeparator = mutation {
            // Without the separator, only a source that is itself `-` could stand in for it.
            if entry.source != "-" {
                prop_assert_eq!(result, Err(ParseError::MissingSeparator), "{:?}", mutated);
            }
        }
    }
}

/// The largest char boundary at or below `i`.
fn floor_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[derive(Debug, Clone)]
enum Mutation {
    DeleteSeparator,
    DuplicateField(prop::sample::Index),
    DeleteField(prop::sample::Index),
    ReplaceField(prop::sample::Index, String),
    Insert(prop::sample::Index, String),
    InsertChar(prop::sample::Index, char),
    DeleteByteRange(prop::sample::Index, usize),
}

impl Mutation {
    fn apply(&self, line: &str) -> String {
        let fields = || line.split(' ').map(str::to_owned).collect::<Vec<_>>();
        match self {
            Mutation::DeleteSeparator => line.replacen(" - ", " ", 1),
            Mutation::DuplicateField(i) => {
                let mut f = fields();
                let i = i.index(f.len());
                f.insert(i, f[i].clone());
                f.join(" ")
            }
            Mutation::DeleteField(i) => {
                let mut f = fields();
                f.remove(i.index(f.len()));
                f.join(" ")
            }
            Mutation::ReplaceField(i, garbage) => {
                let mut f = fields();
                let i = i.index(f.len());
                f[i] = garbage.clone();
                f.join(" ")
            }
            Mutation::Insert(at, garbage) => {
                let at = floor_boundary(line, at.index(line.len() + 1));
                format!("{}{garbage}{}", &line[..at], &line[at..])
            }
            Mutation::InsertChar(at, c) => {
                let at = floor_boundary(line, at.index(line.len() + 1));
                format!("{}{c}{}", &line[..at], &line[at..])
            }
            Mutation::DeleteByteRange(at, len) => {
                let start = floor_boundary(line, at.index(line.len() + 1));
                let end = floor_boundary(line, start + len);
                format!("{}{}", &line[..start], &line[end..])
            }
        }
    }
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let index = any::<prop::sample::Index>;
    prop_oneof![
        Just(Mutation::DeleteSeparator),
        index().prop_map(Mutation::DuplicateField),
        index().prop_map(Mutation::DeleteField),
        (index(), any::<String>()).prop_map(|(i, g)| Mutation::ReplaceField(i, g)),
        (index(), any::<String>()).prop_map(|(i, g)| Mutation::Insert(i, g)),
        (
            index(),
            prop_oneof![
                Just('é'),
                Just('日'),
                Just('🦀'),
                Just('\\'),
                Just('-'),
                Just(':'),
                any::<char>()
            ]
        )
            .prop_map(|(i, c)| Mutation::InsertChar(i, c)),
        (index(), 0usize..12).prop_map(|(i, n)| Mutation::DeleteByteRange(i, n)),
    ]
}
