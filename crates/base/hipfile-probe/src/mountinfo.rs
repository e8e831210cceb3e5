//! A parser of `/proc/self/mountinfo` text (proc_pid_mountinfo(5)). Pure: text in, data out,
//! no system calls, and no input makes it panic.
//!
//! A line has fields separated by single spaces:
//!
//! ```text
//! 36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//! (1)(2) (3)  (4)     (5)         (6)       (7)   (8) (9)    (10)       (11)
//! ```
//!
//! mount ID, parent ID, `major:minor`, root, mount point, mount options, zero or more optional
//! fields ended by a lone `-`, filesystem type, source, super options. The kernel escapes
//! space, tab, newline and backslash in paths and the source as octal (`\040`, `\011`,
//! `\012`, `\134`); they are unescaped here. Fields after the super options are ignored, as
//! the format allows for new ones.

use crate::facts::{Ext4Journal, Filesystem};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// Field 1: the mount's unique ID.
    pub mount_id: u32,
    /// Field 2: the parent mount's ID (the mount's own ID for the root of the tree).
    pub parent_id: u32,
    /// Field 3, before the colon: the major number of the device (`st_dev`) of the files on
    /// this mount.
    pub major: u32,
    /// Field 3, after the colon: the minor number.
    pub minor: u32,
    /// Field 4: the directory of the filesystem that forms this mount's root (unescaped).
    pub root: PathBuf,
    /// Field 5: the mount point, relative to the process's root (unescaped).
    pub mount_point: PathBuf,
    /// Field 6: the per-mount options, split at commas.
    pub mount_options: Vec<String>,
    /// Fields 7…: the optional fields (`shared:N`, `master:N`, `propagate_from:N`,
    /// `unbindable`), possibly none.
    pub optional_fields: Vec<String>,
    /// The first field after `-`: the filesystem type, for example `ext4`.
    pub fs_type: String,
    /// The second field after `-`: the mount source (unescaped), for example `/dev/vda1`.
    pub source: String,
    /// The third field after `-`: the per-superblock options, split at commas (unescaped).
    pub super_options: Vec<String>,
}

/// Why a mountinfo line could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// Fewer than the six fields that precede the optional fields.
    #[error(
        "mountinfo line has {found} fields before the optional fields; 6 are required \
         (mount ID, parent ID, major:minor, root, mount point, mount options)"
    )]
    TooFewFields {
        /// How many fields the line had.
        found: usize,
    },
    /// No lone `-` ends the optional fields.
    #[error("mountinfo line has no ` - ` separator after its optional fields")]
    MissingSeparator,
    /// Fewer than three fields after the separator.
    #[error(
        "mountinfo line has {found} fields after the ` - ` separator; 3 are required \
         (filesystem type, source, super options)"
    )]
    TooFewFieldsAfterSeparator {
        /// How many fields followed the separator.
        found: usize,
    },
    /// A numeric field is not a decimal number that fits in 32 bits.
    #[error("mountinfo field `{field}` is not a decimal number: {value:?}")]
    BadNumber {
        /// Which field.
        field: &'static str,
        /// What it held.
        value: String,
    },
    /// Field 3 is not `major:minor`.
    #[error("mountinfo device field is not `major:minor`: {value:?}")]
    BadDevice {
        /// What it held.
        value: String,
    },
}

/// Parses one line (a trailing newline is allowed).
///
/// # Errors
///
/// A [`ParseError`] naming what is missing or malformed.
pub fn parse_line(line: &str) -> Result<MountEntry, ParseError> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let fields: Vec<&str> = line.split(' ').collect();
    let [
        mount_id,
        parent_id,
        device,
        root,
        mount_point,
        mount_options,
        rest @ ..,
    ] = fields.as_slice()
    else {
        return Err(ParseError::TooFewFields {
            found: fields.len(),
        });
    };
    // Fields 4-6 are paths and options, never a lone `-`, so the first `-` after them is the
    // separator.
    let sep = rest
        .iter()
        .position(|f| *f == "-")
        .ok_or(ParseError::MissingSeparator)?;
    let (optional, after) = (&rest[..sep], &rest[sep + 1..]);
    let [fs_type, source, super_options, ..] = after else {
        return Err(ParseError::TooFewFieldsAfterSeparator { found: after.len() });
    };
    let mount_id = number("mount ID", mount_id)?;
    let parent_id = number("parent ID", parent_id)?;
    let (major, minor) = device
        .split_once(':')
        .ok_or_else(|| ParseError::BadDevice {
            value: (*device).to_owned(),
        })?;
    let device_number = |value: &str| {
        number("major:minor", value).map_err(|_| ParseError::BadDevice {
            value: (*device).to_owned(),
        })
    };
    Ok(MountEntry {
        mount_id,
        parent_id,
        major: device_number(major)?,
        minor: device_number(minor)?,
        root: path(root),
        mount_point: path(mount_point),
        mount_options: options(mount_options),
        optional_fields: optional.iter().map(|f| (*f).to_owned()).collect(),
        fs_type: text(fs_type),
        source: text(source),
        super_options: options(super_options),
    })
}

/// Parses every line of `text`, skipping empty and malformed ones.
pub fn parse(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter(|l| !l.is_empty())
        .filter_map(|l| parse_line(l).ok())
        .collect()
}

/// The first entry whose device number is `major:minor`. The first is the one the kernel
/// listed first: for a filesystem mounted more than once (bind mounts), its oldest mount.
pub fn find_by_device(entries: &[MountEntry], major: u32, minor: u32) -> Option<&MountEntry> {
    entries
        .iter()
        .find(|e| e.major == major && e.minor == minor)
}

/// The ext4 `data=` mode among `super_options`, wherever it stands: [`Ext4Journal::Ordered`]
/// when there is none (ext4 does not show its default), [`Ext4Journal::Unknown`] for a value
/// this crate does not know. Were there several, the last wins, as it does on a mount
/// command line.
pub fn ext4_journal(super_options: &[String]) -> Ext4Journal {
    match super_options
        .iter()
        .rev()
        .find_map(|o| o.strip_prefix("data="))
    {
        None | Some("ordered") => Ext4Journal::Ordered,
        Some("journal") => Ext4Journal::Journal,
        Some("writeback") => Ext4Journal::Writeback,
        Some(_) => Ext4Journal::Unknown,
    }
}

impl From<&MountEntry> for Filesystem {
    fn from(e: &MountEntry) -> Filesystem {
        Filesystem {
            fs_type: e.fs_type.clone(),
            mount_point: e.mount_point.clone(),
            source: e.source.clone(),
            super_options: e.super_options.clone(),
            ext4_journal: (e.fs_type == "ext4").then(|| ext4_journal(&e.super_options)),
        }
    }
}

impl From<MountEntry> for Filesystem {
    fn from(e: MountEntry) -> Filesystem {
        let ext4_journal = (e.fs_type == "ext4").then(|| ext4_journal(&e.super_options));
        Filesystem {
            fs_type: e.fs_type,
            mount_point: e.mount_point,
            source: e.source,
            super_options: e.super_options,
            ext4_journal,
        }
    }
}

/// A decimal `u32`: digits only (no sign, no spaces), no overflow.
fn number(field: &'static str, value: &str) -> Result<u32, ParseError> {
    let digits = !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit());
    digits
        .then(|| value.parse().ok())
        .flatten()
        .ok_or_else(|| ParseError::BadNumber {
            field,
            value: value.to_owned(),
        })
}

/// Options split at commas, each unescaped; an empty field is no options.
fn options(field: &str) -> Vec<String> {
    field
        .split(',')
        .filter(|o| !o.is_empty())
        .map(text)
        .collect()
}

fn path(field: &str) -> PathBuf {
    PathBuf::from(OsString::from_vec(unescape(field)))
}

/// Unescaped text. An escape can spell bytes that are not UTF-8 (`\377`); those become
/// U+FFFD, which is all a `String` can hold.
fn text(field: &str) -> String {
    match String::from_utf8(unescape(field)) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// Replaces each `\ooo` (three octal digits, at most `\377`) by its byte; any other
/// backslash stays as it is. Works on bytes, so multi-byte characters pass through whole.
fn unescape(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let escaped = if b == b'\\' {
            bytes.get(i + 1..i + 4).and_then(octal_byte)
        } else {
            None
        };
        match escaped {
            Some(v) => {
                out.push(v);
                i += 4;
            }
            None => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

fn octal_byte(digits: &[u8]) -> Option<u8> {
    let value = digits.iter().try_fold(0u32, |acc, &d| {
        (b'0'..=b'7')
            .contains(&d)
            .then(|| acc * 8 + u32::from(d - b'0'))
    })?;
    u8::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const ROOT: &str = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict";
    const PROC_MAN_PAGE: &str =
        "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue";

    #[test]
    fn the_manual_page_example() {
        let e = parse_line(PROC_MAN_PAGE).unwrap();
        assert_eq!((e.mount_id, e.parent_id, e.major, e.minor), (36, 35, 98, 0));
        assert_eq!(e.root, Path::new("/mnt1"));
        assert_eq!(e.mount_point, Path::new("/mnt/parent"));
        assert_eq!(e.mount_options, ["rw", "noatime"]);
        assert_eq!(e.optional_fields, ["master:1"]);
        assert_eq!(e.fs_type, "ext3");
        assert_eq!(e.source, "/dev/root");
        assert_eq!(e.super_options, ["rw", "errors=continue"]);
    }

    #[test]
    fn no_optional_fields_and_a_trailing_newline() {
        let e = parse_line(&format!("{ROOT}\n")).unwrap();
        assert!(e.optional_fields.is_empty());
        assert_eq!((e.major, e.minor), (254, 0));
        assert_eq!(e.super_options, ["rw", "discard", "resv_strict"]);
    }

    #[test]
    fn several_optional_fields() {
        let line = "100 29 0:50 / /a rw shared:7 master:3 propagate_from:2 unbindable - tmpfs t rw";
        let e = parse_line(line).unwrap();
        assert_eq!(
            e.optional_fields,
            ["shared:7", "master:3", "propagate_from:2", "unbindable"]
        );
        assert_eq!(e.fs_type, "tmpfs");
    }

    #[test]
    fn escapes_are_undone_in_paths_and_source() {
        let line = r"90 27 7:3 /a\134b /tmp/with\040space\011tab\012nl rw - ext4 /dev/loop\0403 rw,data=journal";
        let e = parse_line(line).unwrap();
        assert_eq!(e.root, Path::new(r"/a\b"));
        assert_eq!(e.mount_point, Path::new("/tmp/with space\ttab\nnl"));
        assert_eq!(e.source, "/dev/loop 3");
    }

    #[test]
    fn a_backslash_without_three_octal_digits_stays() {
        let e = parse_line(r"1 1 0:1 /x\9 /y\04 rw - t s\8 o").unwrap();
        assert_eq!(e.root, Path::new(r"/x\9"));
        assert_eq!(e.mount_point, Path::new(r"/y\04"));
        assert_eq!(e.source, r"s\8");
    }

    #[test]
    fn an_escape_above_a_byte_stays_and_a_non_utf8_byte_is_kept_in_paths() {
        use std::os::unix::ffi::OsStrExt;
        let e = parse_line(r"1 1 0:1 /\777 /\377 rw - t \377 o").unwrap();
        assert_eq!(e.root, Path::new(r"/\777"));
        assert_eq!(e.mount_point.as_os_str().as_bytes(), b"/\xff");
        assert_eq!(e.source, "\u{fffd}");
    }

    #[test]
    fn an_empty_source_is_a_field() {
        let e = parse_line("40 27 0:40 / /mnt rw,relatime - tmpfs  rw,size=4k").unwrap();
        assert_eq!(e.source, "");
        assert_eq!(e.super_options, ["rw", "size=4k"]);
    }

    #[test]
    fn fields_after_the_super_options_are_ignored() {
        let e = parse_line(&format!("{ROOT} future-field")).unwrap();
        assert_eq!(e.super_options, ["rw", "discard", "resv_strict"]);
    }

    #[test]
    fn malformed_lines_are_errors() {
        use ParseError::*;
        type Check = fn(&ParseError) -> bool;
        let cases: &[(&str, Check)] = &[
            ("", |e| matches!(e, TooFewFields { found: 1 })),
            ("1 2 3:4 / /", |e| matches!(e, TooFewFields { found: 5 })),
            ("1 2 3:4 / / rw ext4 /dev/x rw", |e| {
                matches!(e, MissingSeparator)
            }),
            ("1 2 3:4 / / rw - ext4 /dev/x", |e| {
                matches!(e, TooFewFieldsAfterSeparator { found: 2 })
            }),
            ("x 2 3:4 / / rw - ext4 s o", |e| {
                matches!(
                    e,
                    BadNumber {
                        field: "mount ID",
                        ..
                    }
                )
            }),
            ("1 -2 3:4 / / rw - ext4 s o", |e| {
                matches!(
                    e,
                    BadNumber {
                        field: "parent ID",
                        ..
                    }
                )
            }),
            ("+1 2 3:4 / / rw - ext4 s o", |e| {
                matches!(e, BadNumber { .. })
            }),
            ("4294967296 2 3:4 / / rw - ext4 s o", |e| {
                matches!(e, BadNumber { .. })
            }),
            ("1 2 34 / / rw - ext4 s o", |e| {
                matches!(e, BadDevice { .. })
            }),
            ("1 2 3: / / rw - ext4 s o", |e| {
                matches!(e, BadDevice { .. })
            }),
            ("1 2 3:4:5 / / rw - ext4 s o", |e| {
                matches!(e, BadDevice { .. })
            }),
            ("1 2 ٣:4 / / rw - ext4 s o", |e| {
                matches!(e, BadDevice { .. })
            }),
            ("1  2 3:4 / / rw - ext4 s o", |e| {
                matches!(e, BadNumber { .. })
            }),
        ];
        for (line, ok) in cases {
            let e = parse_line(line).unwrap_err();
            assert!(ok(&e), "{line:?} gave {e:?}");
            assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn parse_skips_bad_lines_and_keeps_order() {
        let text = format!("{PROC_MAN_PAGE}\ngarbage\n\n{ROOT}\n");
        let entries = parse(&text);
        assert_eq!(
            entries.iter().map(|e| e.mount_id).collect::<Vec<_>>(),
            [36, 27]
        );
    }

    #[test]
    fn find_by_device_takes_the_first_match() {
        let text = "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
                    2 1 8:1 /sub /bind rw - ext4 /dev/sda1 rw\n\
                    3 1 0:22 / /proc rw - proc proc rw\n";
        let entries = parse(text);
        assert_eq!(find_by_device(&entries, 8, 1).map(|e| e.mount_id), Some(1));
        assert_eq!(
            find_by_device(&entries, 0, 22).map(|e| e.fs_type.as_str()),
            Some("proc")
        );
        assert_eq!(find_by_device(&entries, 8, 2), None);
        assert_eq!(find_by_device(&[], 8, 1), None);
    }

    fn opts(s: &str) -> Vec<String> {
        s.split(',').map(str::to_owned).collect()
    }

    #[test]
    fn ext4_journal_reads_data_wherever_it_stands() {
        assert_eq!(ext4_journal(&opts("rw,relatime")), Ext4Journal::Ordered);
        assert_eq!(ext4_journal(&[]), Ext4Journal::Ordered);
        assert_eq!(ext4_journal(&opts("data=journal,rw")), Ext4Journal::Journal);
        assert_eq!(
            ext4_journal(&opts("rw,nodelalloc,data=journal")),
            Ext4Journal::Journal
        );
        assert_eq!(
            ext4_journal(&opts("rw,data=writeback,errors=remount-ro")),
            Ext4Journal::Writeback
        );
        assert_eq!(ext4_journal(&opts("rw,data=ordered")), Ext4Journal::Ordered);
        assert_eq!(ext4_journal(&opts("rw,data=fancy")), Ext4Journal::Unknown);
        assert_eq!(ext4_journal(&opts("rw,data=")), Ext4Journal::Unknown);
        // `data_err=` is a different option.
        assert_eq!(
            ext4_journal(&opts("rw,data_err=abort")),
            Ext4Journal::Ordered
        );
        assert_eq!(
            ext4_journal(&opts("rw,data=journal,data=writeback")),
            Ext4Journal::Writeback
        );
    }

    #[test]
    fn filesystem_conversion_sets_the_journal_for_ext4_only() {
        let ext4 = parse_line("5 1 7:0 / /m rw - ext4 /dev/loop0 rw,data=journal").unwrap();
        let fs = Filesystem::from(&ext4);
        assert_eq!(fs.ext4_journal, Some(Ext4Journal::Journal));
        assert_eq!(fs.fs_type, "ext4");
        assert_eq!(fs.mount_point, Path::new("/m"));
        assert_eq!(fs.source, "/dev/loop0");
        assert_eq!(fs.super_options, ["rw", "data=journal"]);
        assert_eq!(Filesystem::from(ext4.clone()), fs);

        let plain = parse_line("5 1 7:0 / /m rw - ext4 /dev/loop0 rw").unwrap();
        assert_eq!(
            Filesystem::from(plain).ext4_journal,
            Some(Ext4Journal::Ordered)
        );

        for fs_type in ["xfs", "ext3", "tmpfs", "EXT4"] {
            let e = parse_line(&format!("5 1 7:0 / /m rw - {fs_type} s rw,data=journal")).unwrap();
            assert_eq!(Filesystem::from(&e).ext4_journal, None, "{fs_type}");
        }
    }

    #[test]
    fn this_process_mountinfo_parses_completely() {
        let Ok(text) = std::fs::read("/proc/self/mountinfo") else {
            return;
        };
        let text = String::from_utf8_lossy(&text);
        let lines = text.lines().filter(|l| !l.is_empty()).count();
        for line in text.lines().filter(|l| !l.is_empty()) {
            parse_line(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        }
        assert_eq!(parse(&text).len(), lines);
        assert!(parse(&text).iter().any(|e| e.mount_point == Path::new("/")));
    }
}
