//! Where the CUDA runtime and driver are looked for.
//!
//! The search order is data ([`cuda_candidates`]) so that it can be shown and tested without
//! loading anything; the [`loader`](crate::loader) opens it and reports a failed search.
//! Nothing here reads the environment: callers put what they read into [`CudaLoadOptions`].

use crate::loader::{Candidate, CandidateOrigin};
use std::path::PathBuf;

/// `libcudart` sonames tried first, newest first, loaded by bare name so that the dynamic
/// linker's search path (`LD_LIBRARY_PATH`, `ldconfig`) applies.
pub const CUDART_SONAMES: [&str; 2] = ["libcudart.so.13", "libcudart.so.12"];

/// The default CUDA toolkit installation's runtime, tried after the sonames.
pub const DEFAULT_CUDART_LIBRARY: &str = "/usr/local/cuda/lib64/libcudart.so";

/// The driver library. It ships with the NVIDIA kernel driver, not with the toolkit, and its
/// soname has been `.so.1` for every driver generation.
pub const CUDA_DRIVER_LIBRARY: &str = "libcuda.so.1";

/// Where to look for the CUDA runtime. Nothing here reads the environment: callers put what
/// they read into these fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CudaLoadOptions {
    /// Load exactly this `libcudart` and nothing else. When it fails to load, loading fails:
    /// there is no fallthrough to the other locations.
    pub explicit_cudart: Option<PathBuf>,
}

/// The search order for the CUDA runtime under `opts`.
///
/// With [`CudaLoadOptions::explicit_cudart`], only that path. Otherwise the sonames
/// `libcudart.so.13`, `libcudart.so.12` (through the dynamic linker's search path), then
/// [`DEFAULT_CUDART_LIBRARY`]. The driver is always [`CUDA_DRIVER_LIBRARY`].
pub fn cuda_candidates(opts: &CudaLoadOptions) -> Vec<Candidate> {
    if let Some(path) = &opts.explicit_cudart {
        return vec![Candidate::new(path.clone(), CandidateOrigin::Explicit)];
    }
    let mut out: Vec<Candidate> = CUDART_SONAMES
        .iter()
        .map(|s| Candidate::new(*s, CandidateOrigin::Soname))
        .collect();
    out.push(Candidate::new(
        DEFAULT_CUDART_LIBRARY,
        CandidateOrigin::DefaultInstall,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::{LibraryKind, LoadAttempt, LoadError, LoadFailure};

    #[test]
    fn candidate_order() {
        let paths: Vec<_> = cuda_candidates(&CudaLoadOptions::default())
            .into_iter()
            .map(|c| (c.path.display().to_string(), c.origin))
            .collect();
        assert_eq!(
            paths,
            [
                ("libcudart.so.13".to_string(), CandidateOrigin::Soname),
                ("libcudart.so.12".to_string(), CandidateOrigin::Soname),
                (
                    "/usr/local/cuda/lib64/libcudart.so".to_string(),
                    CandidateOrigin::DefaultInstall
                ),
            ]
        );
        let explicit = CudaLoadOptions {
            explicit_cudart: Some("/x/libcudart.so.12".into()),
        };
        assert_eq!(
            cuda_candidates(&explicit),
            [Candidate::new(
                "/x/libcudart.so.12",
                CandidateOrigin::Explicit
            )]
        );
    }

    #[test]
    fn search_error_lists_every_attempt_in_cuda_terms() {
        let attempts = cuda_candidates(&CudaLoadOptions::default())
            .into_iter()
            .map(|candidate| LoadAttempt {
                failure: LoadFailure::Open(format!("{}: not found", candidate.path.display())),
                candidate,
            })
            .collect();
        let err = LoadError::new(LibraryKind::CudaRuntime, attempts);
        let text = err.to_string();
        for c in cuda_candidates(&CudaLoadOptions::default()) {
            assert!(text.contains(&c.path.display().to_string()), "{text}");
        }
        assert!(text.contains("default CUDA install"), "{text}");
        assert!(text.contains("install the CUDA runtime"), "{text}");
        assert!(!text.contains("HIP"), "{text}");
        assert!(!text.contains("ROCm"), "{text}");
        assert!(!err.is_explicit() && !err.is_driver());
        assert_eq!(err.missing_symbol(), None);
        assert_eq!(err.attempts().len(), 3);
    }

    #[test]
    fn driver_error_names_the_driver() {
        let err = LoadError::driver(
            "/usr/local/cuda/lib64/libcudart.so.13".into(),
            LoadAttempt {
                candidate: Candidate::new(CUDA_DRIVER_LIBRARY, CandidateOrigin::Soname),
                failure: LoadFailure::Open("libcuda.so.1: cannot open shared object file".into()),
            },
        );
        let text = err.to_string();
        assert!(text.contains("libcuda.so.1"), "{text}");
        assert!(text.contains("libcudart.so.13"), "{text}");
        assert!(text.contains("NVIDIA driver"), "{text}");
        assert!(err.is_driver() && !err.is_explicit());
        assert_eq!(err.attempts().len(), 1);
        let missing = LoadError::driver(
            "libcudart.so.12".into(),
            LoadAttempt {
                candidate: Candidate::new(CUDA_DRIVER_LIBRARY, CandidateOrigin::Soname),
                failure: LoadFailure::MissingSymbol {
                    symbol: "cuMemGetAddressRange_v2",
                    message: "undefined symbol".into(),
                },
            },
        );
        assert_eq!(missing.missing_symbol(), Some("cuMemGetAddressRange_v2"));
        let text = missing.to_string();
        assert!(
            text.contains("not the CUDA driver library, or one too old"),
            "{text}"
        );
    }

    #[test]
    fn explicit_runtime_error_keeps_its_attempt() {
        let attempt = LoadAttempt {
            candidate: Candidate::new("/no/libcudart.so", CandidateOrigin::Explicit),
            failure: LoadFailure::Open("not found".into()),
        };
        let err = LoadError::new(LibraryKind::CudaRuntime, vec![attempt.clone()]);
        assert!(err.is_explicit());
        assert_eq!(err.library(), LibraryKind::CudaRuntime);
        assert_eq!(err.attempts(), [attempt]);
        assert!(
            LoadError::new(LibraryKind::CudaRuntime, Vec::new())
                .to_string()
                .contains("no location")
        );
    }
}
