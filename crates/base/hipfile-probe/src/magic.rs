//! `fstatfs` `f_type` magic numbers (statfs(2), `<linux/magic.h>`): a cross-check of the
//! filesystem type found in mountinfo.

/// Magic, the name reported for it, and the mount types (mountinfo field 9) that use it.
const MAGICS: &[(u64, &str, &[&str])] = &[
    (0xEF53, "ext4", &["ext4", "ext3", "ext2"]),
    (0x5846_5342, "xfs", &["xfs"]),
    (0x0102_1994, "tmpfs", &["tmpfs", "devtmpfs"]),
    (0x9123_683E, "btrfs", &["btrfs"]),
    (0x6969, "nfs", &["nfs", "nfs4"]),
    (0x794C_7630, "overlay", &["overlay"]),
    (0x6573_5546, "fuse", &["fuse", "fuseblk"]),
    (0x9FA0, "proc", &["proc"]),
    (0x6265_6572, "sysfs", &["sysfs"]),
    (0x8584_58F6, "ramfs", &["ramfs"]),
    (0x9584_58F6, "hugetlbfs", &["hugetlbfs"]),
    (0x7371_7368, "squashfs", &["squashfs"]),
    (0xE0F5_E1E2, "erofs", &["erofs"]),
    (0xF2F5_2010, "f2fs", &["f2fs"]),
    (0x2FC1_2FC1, "zfs", &["zfs"]),
    (0x2011_BAB0, "exfat", &["exfat"]),
    (0x4D44, "vfat", &["vfat", "msdos"]),
    (0x5346_544E, "ntfs", &["ntfs", "ntfs3"]),
    (0xFF53_4D42, "cifs", &["cifs", "smb3"]),
    (0xFE53_4D42, "smb2", &["cifs", "smb3"]),
    (0x0102_1997, "9p", &["9p"]),
    (0x00C3_6400, "ceph", &["ceph"]),
    (0x0BD0_0BD0, "lustre", &["lustre"]),
    (0x4750_4653, "gpfs", &["gpfs"]),
    (0x1CD1, "devpts", &["devpts"]),
    (0x6367_7270, "cgroup2", &["cgroup2"]),
    (0x0027_E0EB, "cgroup", &["cgroup"]),
    (0x6462_6720, "debugfs", &["debugfs"]),
    (0x7472_6163, "tracefs", &["tracefs"]),
    (0xCAFE_4A11, "bpf", &["bpf"]),
];

/// The filesystem a `statfs` `f_type` magic number belongs to, for example `0xEF53` →
/// `ext4` (ext2 and ext3 share that magic), `0x58465342` → `xfs`; `None` for a magic this
/// crate does not know.
pub fn magic_name(magic: u64) -> Option<&'static str> {
    MAGICS
        .iter()
        .find(|(m, ..)| *m == magic)
        .map(|(_, name, _)| *name)
}

/// Whether `magic` is what a filesystem of mount type `fs_type` reports. `None` when neither
/// the magic nor the type is known here.
pub(crate) fn magic_matches(magic: u64, fs_type: &str) -> Option<bool> {
    if let Some((_, _, types)) = MAGICS.iter().find(|(m, ..)| *m == magic) {
        // FUSE filesystems mount as `fuse.<name>`.
        let fuse = magic == 0x6573_5546 && fs_type.starts_with("fuse.");
        return Some(fuse || types.contains(&fs_type));
    }
    MAGICS
        .iter()
        .any(|(_, _, types)| types.contains(&fs_type))
        .then_some(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_the_common_magics() {
        assert_eq!(magic_name(0xEF53), Some("ext4"));
        assert_eq!(magic_name(0x5846_5342), Some("xfs"));
        assert_eq!(magic_name(0x0102_1994), Some("tmpfs"));
        assert_eq!(magic_name(0x9123_683E), Some("btrfs"));
        assert_eq!(magic_name(0x6969), Some("nfs"));
        assert_eq!(magic_name(0x794C_7630), Some("overlay"));
        assert_eq!(magic_name(0), None);
        assert_eq!(magic_name(0xDEAD_BEEF), None);
    }

    #[test]
    fn each_magic_appears_once() {
        for (i, (m, ..)) in MAGICS.iter().enumerate() {
            assert!(MAGICS[i + 1..].iter().all(|(n, ..)| n != m), "{m:#x} twice");
        }
    }

    #[test]
    fn matching_a_mount_type() {
        assert_eq!(magic_matches(0xEF53, "ext4"), Some(true));
        assert_eq!(magic_matches(0xEF53, "ext3"), Some(true));
        assert_eq!(magic_matches(0xEF53, "xfs"), Some(false));
        assert_eq!(magic_matches(0x0102_1994, "devtmpfs"), Some(true));
        assert_eq!(magic_matches(0x6573_5546, "fuse.sshfs"), Some(true));
        assert_eq!(magic_matches(0xEF53, "fuse.sshfs"), Some(false));
        // An unknown magic on a known type disagrees; unknown on unknown says nothing.
        assert_eq!(magic_matches(0x1234, "xfs"), Some(false));
        assert_eq!(magic_matches(0x1234, "weirdfs"), None);
    }
}
