//! HIP runtime version numbers.
//!
//! `hipRuntimeGetVersion` and `hipDriverGetVersion` report one integer,
//! `major·10⁷ + minor·10⁵ + patch` on ROCm (so ROCm 5.2.21153 is `50221153`).

use std::fmt;

/// Splits a HIP version number (`major·10⁷ + minor·10⁵ + patch`) into
/// `(major, minor, patch)`. Never panics; a negative input gives negative parts.
pub fn decode_version(v: i32) -> (i32, i32, i32) {
    (v / 10_000_000, (v / 100_000) % 100, v % 100_000)
}

/// A HIP version number that displays as `major.minor.patch` (`5.2.21153`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuntimeVersion(pub i32);

impl RuntimeVersion {
    /// ROCm 5.3.0: the first `hipMemoryType` table with `hipMemoryTypeManaged`.
    pub const ROCM_5_3: RuntimeVersion = RuntimeVersion::new(5, 3, 0);
    /// ROCm 6.0.0: `hipMemoryType` was renumbered.
    pub const ROCM_6_0: RuntimeVersion = RuntimeVersion::new(6, 0, 0);
    /// ROCm 6.2.0: the first with `hipGetProcAddress`.
    pub const ROCM_6_2: RuntimeVersion = RuntimeVersion::new(6, 2, 0);

    /// Builds the number for `major.minor.patch`. Parts out of range wrap into each other,
    /// as they do in the runtime's own encoding.
    pub const fn new(major: i32, minor: i32, patch: i32) -> RuntimeVersion {
        RuntimeVersion(
            major
                .wrapping_mul(10_000_000)
                .wrapping_add(minor.wrapping_mul(100_000))
                .wrapping_add(patch),
        )
    }

    /// The major version.
    pub fn major(self) -> i32 {
        decode_version(self.0).0
    }

    /// The minor version.
    pub fn minor(self) -> i32 {
        decode_version(self.0).1
    }

    /// The patch level (on ROCm, a build number such as `21153`).
    pub fn patch(self) -> i32 {
        decode_version(self.0).2
    }
}

impl fmt::Display for RuntimeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor, patch) = decode_version(self.0);
        write!(f, "{major}.{minor}.{patch}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn decodes_debian_rocm_5_2() {
        assert_eq!(decode_version(50_221_153), (5, 2, 21153));
        assert_eq!(RuntimeVersion(50_221_153).to_string(), "5.2.21153");
    }

    #[test]
    fn decodes_rocm_6_and_7() {
        assert_eq!(decode_version(60_342_134), (6, 3, 42134));
        assert_eq!(decode_version(70_200_000), (7, 2, 0));
        assert_eq!(RuntimeVersion(70_200_000).to_string(), "7.2.0");
    }

    #[test]
    fn constants() {
        assert_eq!(RuntimeVersion::ROCM_5_3.0, 50_300_000);
        assert_eq!(RuntimeVersion::ROCM_6_0.0, 60_000_000);
        assert_eq!(RuntimeVersion::ROCM_6_2.0, 60_200_000);
        assert!(RuntimeVersion(50_221_153) < RuntimeVersion::ROCM_5_3);
    }

    #[test]
    fn extremes_do_not_panic() {
        let _ = decode_version(i32::MIN);
        let _ = decode_version(i32::MAX);
        assert_eq!(RuntimeVersion(0).to_string(), "0.0.0");
    }

    proptest! {
        #[test]
        fn new_round_trips(major in 0i32..200, minor in 0i32..100, patch in 0i32..100_000) {
            let v = RuntimeVersion::new(major, minor, patch);
            prop_assert_eq!(decode_version(v.0), (major, minor, patch));
            prop_assert_eq!((v.major(), v.minor(), v.patch()), (major, minor, patch));
            prop_assert_eq!(v.to_string(), format!("{major}.{minor}.{patch}"));
        }

        #[test]
        fn decode_never_panics(v in any::<i32>()) {
            let _ = decode_version(v);
            let _ = RuntimeVersion(v).to_string();
        }
    }
}
