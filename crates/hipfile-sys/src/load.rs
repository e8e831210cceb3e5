//! Where the HIP runtime is looked for, and what a failed search reports.
//!
//! The search order is data ([`candidates`]) so that it can be shown and tested without
//! loading anything. Nothing here reads the environment: callers put what they read
//! (`HIPFILE_HIP_LIBRARY`, `ROCM_PATH`) into [`LoadOptions`].

use std::fmt;
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
    /// to the other locations.
    pub explicit_path: Option<PathBuf>,
    /// A ROCm installation root (for example the value of `ROCM_PATH`): its
    /// `lib/libamdhip64.so` is tried first.
    pub rocm_path: Option<PathBuf>,
}

/// Why a [`Candidate`] is in the search order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CandidateOrigin {
    /// [`LoadOptions::explicit_path`].
    Explicit,
    /// `lib/libamdhip64.so` under [`LoadOptions::rocm_path`].
    RocmPath,
    /// The default installation, [`DEFAULT_ROCM_LIBRARY`].
    DefaultInstall,
    /// A soname from [`SONAMES`], resolved by the dynamic linker.
    Soname,
}

impl fmt::Display for CandidateOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CandidateOrigin::Explicit => "explicit path",
            CandidateOrigin::RocmPath => "under the given ROCm path",
            CandidateOrigin::DefaultInstall => "default ROCm install",
            CandidateOrigin::Soname => "dynamic linker search path",
        })
    }
}

/// One place the runtime may be loaded from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Candidate {
    /// What is passed to `dlopen`: a path, or a bare soname.
    pub path: PathBuf,
    /// Why it is tried.
    pub origin: CandidateOrigin,
}

impl Candidate {
    /// A candidate for `path` with the given origin.
    pub fn new(path: impl Into<PathBuf>, origin: CandidateOrigin) -> Candidate {
        Candidate {
            path: path.into(),
            origin,
        }
    }
}

impl fmt::Display for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.path.display(), self.origin)
    }
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

/// Why one candidate did not give a usable runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoadFailure {
    /// `dlopen` failed; the dynamic linker's message.
    Open(String),
    /// The library opened but lacks a required symbol.
    MissingSymbol {
        /// The missing symbol.
        symbol: &'static str,
        /// The dynamic linker's message.
        message: String,
    },
}

impl fmt::Display for LoadFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadFailure::Open(message) => f.write_str(message),
            LoadFailure::MissingSymbol { symbol, message } => write!(
                f,
                "opened, but it lacks the required symbol `{symbol}` (not a HIP runtime, or one \
                 too old): {message}"
            ),
        }
    }
}

/// One failed candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadAttempt {
    /// What was tried.
    pub candidate: Candidate,
    /// Why it failed.
    pub failure: LoadFailure,
}

/// The HIP runtime could not be loaded: every candidate tried, with the reason each failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.render())]
pub struct LoadError {
    attempts: Vec<LoadAttempt>,
}

impl LoadError {
    /// An error from the attempts made, in order.
    pub fn new(attempts: Vec<LoadAttempt>) -> LoadError {
        LoadError { attempts }
    }

    /// Every candidate tried, in order, with its failure.
    pub fn attempts(&self) -> &[LoadAttempt] {
        &self.attempts
    }

    /// The first required symbol that a library which did open was missing, if any.
    pub fn missing_symbol(&self) -> Option<&'static str> {
        self.attempts.iter().find_map(|a| match a.failure {
            LoadFailure::MissingSymbol { symbol, .. } => Some(symbol),
            LoadFailure::Open(_) => None,
        })
    }

    /// Whether only an explicit path was tried.
    pub fn is_explicit(&self) -> bool {
        self.attempts
            .iter()
            .all(|a| a.candidate.origin == CandidateOrigin::Explicit)
            && !self.attempts.is_empty()
    }

    fn render(&self) -> String {
        let mut out = String::new();
        match self.attempts.as_slice() {
            [] => out.push_str("could not load the HIP runtime: no location was tried"),
            [only] if only.candidate.origin == CandidateOrigin::Explicit => {
                out.push_str(&format!(
                    "could not load the HIP runtime from {} (an explicit path, so no other \
                     location was tried): {}",
                    only.candidate.path.display(),
                    only.failure
                ));
            }
            attempts => {
                out.push_str("could not load the HIP runtime (libamdhip64); tried:");
                for a in attempts {
                    out.push_str(&format!("\n  {}: {}", a.candidate, a.failure));
                }
            }
        }
        out.push_str(if self.is_explicit() {
            "\nhint: make the explicit path (HIPFILE_HIP_LIBRARY, if that is where it came from) \
             name the HIP runtime library (libamdhip64.so, for example \
             /opt/rocm/lib/libamdhip64.so), or unset it to search the usual places"
        } else {
            "\nhint: set HIPFILE_HIP_LIBRARY to the path of the HIP runtime (libamdhip64.so), \
             or install ROCm (AMD's packages into /opt/rocm, or Debian's libamdhip64-5)"
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let err = LoadError::new(vec![LoadAttempt {
            candidate: Candidate::new("/no/such/lib.so", CandidateOrigin::Explicit),
            failure: LoadFailure::Open("cannot open shared object file".into()),
        }]);
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
        let err = LoadError::new(attempts);
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
        let text = LoadError::new(Vec::new()).to_string();
        assert!(text.contains("no location"), "{text}");
    }
}
