//! Loading failures are `LoadError` values that say what was tried, never panics.

use hipfile_sys::{Hip, LoadFailure, LoadOptions};
use std::path::Path;

#[test]
fn nonexistent_explicit_path_is_named() {
    let path = Path::new("/nonexistent/hipfile-test/libamdhip64.so");
    let err = match Hip::load_path(path) {
        Ok(_) => panic!("loaded a file that does not exist"),
        Err(e) => e,
    };
    let text = err.to_string();
    eprintln!("{text}");
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains("HIPFILE_HIP_LIBRARY"), "{text}");
    assert!(err.is_explicit());
    assert_eq!(err.attempts().len(), 1);
    assert!(matches!(err.attempts()[0].failure, LoadFailure::Open(_)));
}

#[test]
fn explicit_path_does_not_fall_through() {
    let opts = LoadOptions {
        explicit_path: Some("/nonexistent/hipfile-test/libamdhip64.so".into()),
        rocm_path: Some("/opt/rocm".into()),
    };
    let err = match Hip::load(&opts) {
        Ok(hip) => panic!("fell through to {}", hip.library_path().display()),
        Err(e) => e,
    };
    assert_eq!(err.attempts().len(), 1);
}

#[test]
fn library_without_hip_symbols_names_the_missing_one() {
    let err = match Hip::load_path(Path::new("libc.so.6")) {
        Ok(_) => panic!("libc was accepted as a HIP runtime"),
        Err(e) => e,
    };
    let text = err.to_string();
    eprintln!("{text}");
    assert_eq!(err.missing_symbol(), Some("hipInit"));
    assert!(text.contains("hipInit"), "{text}");
    assert!(text.contains("libc.so.6"), "{text}");
}

#[test]
fn missing_rocm_path_is_listed_in_the_search() {
    let opts = LoadOptions {
        explicit_path: None,
        rocm_path: Some("/nonexistent/hipfile-test/rocm".into()),
    };
    match Hip::load(&opts) {
        // A runtime elsewhere on the machine is fine; the ROCm path was simply tried first.
        Ok(hip) => eprintln!("found {}", hip.library_path().display()),
        Err(e) => {
            let text = e.to_string();
            eprintln!("{text}");
            assert!(
                text.contains("/nonexistent/hipfile-test/rocm/lib/libamdhip64.so"),
                "{text}"
            );
            assert!(text.contains("libamdhip64.so.5"), "{text}");
            assert!(!e.is_explicit());
        }
    }
}
