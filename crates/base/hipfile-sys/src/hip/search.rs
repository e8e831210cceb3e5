//! Where the HIP runtime is looked for.
//!
//! The search order is data ([`candidates`]) so that it can be shown and tested without
//! loading anything; the [`loader`](crate::loader) opens it and reports a failed search.
//! Before it, [`Hip::load`](super::Hip::load) takes a runtime the process has already loaded
//! under one of the [`SONAMES`], so that a program's own runtime is shared, not doubled: with
//! one loaded, nothing here is searched, and an explicit path to another file is refused.
//! Nothing here reads the environment: callers put what they read (`HIPFILE_HIP_LIBRARY`,
//! `ROCM_PATH`) into [`LoadOptions`].

use crate::loader::{Candidate, CandidateOrigin};
use std::path::{Path, PathBuf};

/// The runtime library's file name inside a ROCm installation's `lib` directory.
pub const LIBRARY_FILE_NAME: &str = "libamdhip64.so";

/// The default ROCm installation's runtime.
pub const DEFAULT_ROCM_LIBRARY: &str = "/opt/rocm/lib/libamdhip64.so";

/// Sonames tried last, newest first, loaded by bare name so that the dynamic linker's search
/// path (`LD_LIBRARY_PATH`, `ldconfig`) applies.
pub const SONAMES: [&str; 3] = ["libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so.5"];

/// Where to look for the HIP runtime.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Load exactly this file and nothing else (for example the value of
    /// `HIPFILE_HIP_LIBRARY`). When it fails to load, loading fails: there is no fallthrough
    /// to the other locations. While the process has another HIP runtime loaded, it is not
    /// loaded at all ([`LoadFailure::SecondRuntime`](crate::LoadFailure::SecondRuntime)).
    pub explicit_path: Option<PathBuf>,
    /// A ROCm installation root (for example the value of `ROCM_PATH`): its
    /// `lib/libamdhip64.so` is tried first, when no HIP runtime is loaded already.
    pub rocm_path: Option<PathBuf>,
}

/// The search order for `opts`.
///
/// With [`LoadOptions::explicit_path`], only that path. Otherwise
/// `$rocm_path/lib/libamdhip64.so` (when a ROCm path is given),
/// `/opt/rocm/lib/libamdhip64.so`, then the sonames `libamdhip64.so.7`, `.so.6`, `.so.5`.
/// A path that would appear twice (a ROCm path of `/opt/rocm`) is listed once.
pub fn candidates(opts: &LoadOptions) -> Vec<Candidate> {
    if let Some(path) = &opts.explicit_path {
        return vec![Candidate::new(path.clone(), CandidateOrigin::Explicit)];
    }
    let mut out = Vec::with_capacity(2 + SONAMES.len());
    if let Some(root) = &opts.rocm_path {
        out.push(Candidate::new(
            root.join("lib").join(LIBRARY_FILE_NAME),
            CandidateOrigin::RocmPath,
        ));
    }
    let default = Path::new(DEFAULT_ROCM_LIBRARY);
    if !out.iter().any(|c| same_path(&c.path, default)) {
        out.push(Candidate::new(default, CandidateOrigin::DefaultInstall));
    }
    out.extend(
        SONAMES
            .iter()
            .map(|s| Candidate::new(*s, CandidateOrigin::Soname)),
    );
    out
}

/// Equal as paths once `.` components and doubled or trailing slashes are ignored (no file
/// system access).
fn same_path(a: &Path, b: &Path) -> bool {
    a.components().eq(b.components())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::{LibraryKind, LoadAttempt, LoadError, LoadFailure};

    fn paths(opts: &LoadOptions) -> Vec<String> {
        candidates(opts)
            .into_iter()
            .map(|c| c.path.display().to_string())
            .collect()
    }

    #[test]
    fn default_order() {
        assert_eq!(
            paths(&LoadOptions::default()),
            [
                "/opt/rocm/lib/libamdhip64.so",
                "libamdhip64.so.7",
                "libamdhip64.so.6",
                "libamdhip64.so.5"
            ]
        );
        let origins: Vec<_> = candidates(&LoadOptions::default())
            .into_iter()
            .map(|c| c.origin)
            .collect();
        assert_eq!(
            origins,
            [
                CandidateOrigin::DefaultInstall,
                CandidateOrigin::Soname,
                CandidateOrigin::Soname,
                CandidateOrigin::Soname
            ]
        );
    }

    #[test]
    fn rocm_path_comes_first() {
        let opts = LoadOptions {
            rocm_path: Some("/opt/rocm-6.3.1".into()),
            ..Default::default()
        };
        assert_eq!(
            paths(&opts),
            [
                "/opt/rocm-6.3.1/lib/libamdhip64.so",
                "/opt/rocm/lib/libamdhip64.so",
                "libamdhip64.so.7",
                "libamdhip64.so.6",
                "libamdhip64.so.5"
            ]
        );
        assert_eq!(candidates(&opts)[0].origin, CandidateOrigin::RocmPath);
    }

    #[test]
    fn rocm_path_equal_to_default_is_listed_once() {
        for root in ["/opt/rocm", "/opt/rocm/", "/opt//rocm/."] {
            let opts = LoadOptions {
                rocm_path: Some(root.into()),
                ..Default::default()
            };
            let c = candidates(&opts);
            assert_eq!(c.len(), 4, "{root}");
            assert_eq!(c[0].origin, CandidateOrigin::RocmPath);
            assert_eq!(c[1].path, Path::new("libamdhip64.so.7"));
        }
    }

    #[test]
    fn explicit_path_is_alone() {
        let opts = LoadOptions {
            explicit_path: Some("/somewhere/libamdhip64.so".into()),
            rocm_path: Some("/opt/rocm-6.3.1".into()),
        };
        assert_eq!(
            candidates(&opts),
            [Candidate::new(
                "/somewhere/libamdhip64.so",
                CandidateOrigin::Explicit
            )]
        );
    }

    #[test]
    fn explicit_error_names_path_and_hint() {
        let err = LoadError::new(
            LibraryKind::HipRuntime,
            vec![LoadAttempt {
                candidate: Candidate::new("/no/such/lib.so", CandidateOrigin::Explicit),
                failure: LoadFailure::Open("cannot open shared object file".into()),
            }],
        );
        let text = err.to_string();
        assert!(text.contains("/no/such/lib.so"), "{text}");
        assert!(text.contains("no other location"), "{text}");
        assert!(text.contains("cannot open shared object file"), "{text}");
        assert!(text.contains("HIPFILE_HIP_LIBRARY"), "{text}");
        assert!(err.is_explicit());
        assert_eq!(err.missing_symbol(), None);
    }

    #[test]
    fn search_error_lists_every_attempt() {
        let attempts = candidates(&LoadOptions::default())
            .into_iter()
            .map(|candidate| LoadAttempt {
                failure: if candidate.path == Path::new("libamdhip64.so.5") {
                    LoadFailure::MissingSymbol {
                        symbol: "hipInit",
                        message: "undefined".into(),
                    }
                } else {
                    LoadFailure::Open(format!("{}: not found", candidate.path.display()))
                },
                candidate,
            })
            .collect();
        let err = LoadError::new(LibraryKind::HipRuntime, attempts);
        let text = err.to_string();
        for c in candidates(&LoadOptions::default()) {
            assert!(text.contains(&c.path.display().to_string()), "{text}");
        }
        assert!(text.contains("dynamic linker search path"), "{text}");
        assert!(text.contains("`hipInit`"), "{text}");
        assert!(text.contains("install ROCm"), "{text}");
        assert!(text.contains("HIPFILE_HIP_LIBRARY"), "{text}");
        assert_eq!(err.missing_symbol(), Some("hipInit"));
        assert!(!err.is_explicit());
        assert_eq!(err.attempts().len(), 4);
    }

    #[test]
    fn empty_error_still_renders() {
        let text = LoadError::new(LibraryKind::HipRuntime, Vec::new()).to_string();
        assert!(text.contains("no location"), "{text}");
    }
}
