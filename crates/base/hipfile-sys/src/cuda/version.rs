//! CUDA version numbers.
//!
//! `cudaRuntimeGetVersion` and `cudaDriverGetVersion` report one integer,
//! `major·1000 + minor·10` (so CUDA 12.8 is `12080`).

use std::fmt;

/// Splits a CUDA version number (`major·1000 + minor·10`, as `cudaRuntimeGetVersion` and
/// `cudaDriverGetVersion` report it) into `(major, minor)`. Never panics.
pub fn decode_cuda_version(v: i32) -> (i32, i32) {
    (v / 1000, (v % 1000) / 10)
}

/// A CUDA version number that displays as `major.minor` (13000 is `13.0`, 12080 is `12.8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CudaVersion(pub i32);

impl CudaVersion {
    /// CUDA 11.0: the first whose `cudaPointerGetAttributes` succeeds for plain host memory
    /// (type Unregistered).
    pub const CUDA_11_0: CudaVersion = CudaVersion::new(11, 0);
    /// CUDA 12.0.
    pub const CUDA_12_0: CudaVersion = CudaVersion::new(12, 0);
    /// CUDA 13.0: `cudaPointerAttributes` grows a reserved tail (88 bytes).
    pub const CUDA_13_0: CudaVersion = CudaVersion::new(13, 0);

    /// Builds the number for `major.minor`. Parts out of range wrap into each other, as they
    /// do in the runtime's own encoding.
    pub const fn new(major: i32, minor: i32) -> CudaVersion {
        CudaVersion(
            major
                .wrapping_mul(1000)
                .wrapping_add(minor.wrapping_mul(10)),
        )
    }

    /// The major version.
    pub fn major(self) -> i32 {
        decode_cuda_version(self.0).0
    }

    /// The minor version.
    pub fn minor(self) -> i32 {
        decode_cuda_version(self.0).1
    }
}

impl fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (major, minor) = decode_cuda_version(self.0);
        write!(f, "{major}.{minor}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(decode_cuda_version(13000), (13, 0));
        assert_eq!(CudaVersion(13000).to_string(), "13.0");
        assert_eq!(CudaVersion(12080).to_string(), "12.8");
        assert_eq!(CudaVersion(12040).to_string(), "12.4");
        assert_eq!(CudaVersion(11080).to_string(), "11.8");
        assert_eq!(CudaVersion(13010).to_string(), "13.1");
        assert_eq!(CudaVersion::new(12, 9), CudaVersion(12090));
        assert_eq!(CudaVersion(12090).major(), 12);
        assert_eq!(CudaVersion(12090).minor(), 9);
        assert_eq!(CudaVersion::CUDA_13_0.0, 13000);
        assert!(CudaVersion(12080) < CudaVersion::CUDA_13_0);
        assert_eq!(CudaVersion(0).to_string(), "0.0");
        let _ = CudaVersion(i32::MIN).to_string();
        let _ = CudaVersion(i32::MAX).to_string();
    }
}
