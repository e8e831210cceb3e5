//! Which crates are packaged: the library crates, each as its own tarball, and nothing else.
//!
//! `cargo package` builds every library crate from its tarball, with its internal
//! dependencies taken from the tarballs of the same run (never from the workspace), so a
//! crate that would not build on its own, or lacks a manifest field crates.io requires, fails
//! CI. The list is checked against `cargo metadata`: every workspace crate that may be
//! published must be in it, and every crate in it must be publishable, so a new crate is
//! either added here or marked `publish = false`.

use serde_json::Value;
use std::path::{Path, PathBuf};

/// The library crates, the ones users may pick à la carte. Every other workspace crate
/// (the CLI, the test fixtures, the test doubles, the emulated runtime, the cross-crate tests,
/// xtask) has `publish = false`.
pub const LIBRARIES: &[&str] = &[
    "hipfile-sys",
    "hipfile-probe",
    "hipfile-core",
    "hipfile-fastpath",
    "hipfile-fallback",
    "hipfile-runtime",
    "hipfile",
    "hipfile-safetensors",
    "hipfile-remote",
];

/// The `cargo` arguments that package (and verify) exactly [`LIBRARIES`].
///
/// `--allow-dirty`: CI packages the tree it has just tested, committed or not; whether the
/// tree is clean is not what this checks.
pub fn cargo_args() -> Vec<&'static str> {
    let mut args = vec!["package", "--locked", "--allow-dirty"];
    for name in LIBRARIES {
        args.extend(["-p", name]);
    }
    args
}

/// A cargo home for `cargo package` of its own, made afresh at `dir` (inside the target
/// directory), which shares `shared`'s registry index, download cache and git checkouts
/// (links, so nothing is fetched again) and copies its configuration, but keeps its own
/// `registry/src`.
///
/// `cargo package` verifies each tarball against the tarballs of the same run through a
/// local registry, extracting them into the cargo home's `registry/src` and, finding a
/// directory of the same name and version there, reusing it: after a library changed
/// without a version bump, a later crate was built against the old copy and failed. With a
/// source directory of its own, emptied each run, no copy outlives a run, and nothing of
/// the user's cargo home is removed.
pub fn private_home(shared: &Path, dir: &Path) -> std::io::Result<PathBuf> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)?;
    }
    let registry = dir.join("registry");
    std::fs::create_dir_all(&registry)?;
    for (from, to) in [
        (
            shared.join("registry").join("index"),
            registry.join("index"),
        ),
        (
            shared.join("registry").join("cache"),
            registry.join("cache"),
        ),
        (shared.join("git"), dir.join("git")),
    ] {
        if from.is_dir() {
            std::os::unix::fs::symlink(&from, &to)?;
        }
    }
    for name in ["config.toml", "config", "credentials.toml", "credentials"] {
        let from = shared.join(name);
        if from.is_file() {
            std::fs::copy(&from, dir.join(name))?;
        }
    }
    Ok(dir.to_path_buf())
}

/// Every disagreement between [`LIBRARIES`] and the workspace's `publish` settings.
pub fn mismatches(metadata: &Value) -> Result<Vec<String>, String> {
    let packages = metadata["packages"]
        .as_array()
        .ok_or("cargo metadata has no packages array")?;
    let mut problems = Vec::new();
    for p in packages {
        let name = p["name"].as_str().ok_or("a package without a name")?;
        // `publish` is null when any registry may have the crate, `[]` for `publish = false`.
        let publishable = match &p["publish"] {
            Value::Null => true,
            Value::Array(registries) => !registries.is_empty(),
            _ => return Err(format!("{name}: unexpected publish value {}", p["publish"])),
        };
        let library = LIBRARIES.contains(&name);
        if publishable && !library {
            problems.push(format!(
                "{name} is publishable but not a library crate: add it to xtask/src/package.rs or set publish = false"
            ));
        } else if library && !publishable {
            problems.push(format!("{name} is a library crate but has publish = false"));
        }
    }
    for name in LIBRARIES {
        if !packages.iter().any(|p| p["name"] == *name) {
            problems.push(format!("{name} is not a workspace crate"));
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::workspace_metadata;
    use serde_json::json;

    fn libraries_and(extra: Vec<Value>) -> Value {
        let mut packages: Vec<Value> = LIBRARIES
            .iter()
            .map(|n| json!({ "name": n, "publish": null }))
            .collect();
        packages.retain(|p| !extra.iter().any(|e| e["name"] == p["name"]));
        packages.extend(extra);
        json!({ "packages": packages })
    }

    #[test]
    fn the_workspace_publishes_exactly_the_libraries() {
        let metadata = workspace_metadata().unwrap();
        assert_eq!(mismatches(&metadata).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn an_unlisted_publishable_crate_is_a_mismatch() {
        let m = libraries_and(vec![
            json!({ "name": "hipfile-new", "publish": null }),
            json!({ "name": "hipfile-cli", "publish": [] }),
        ]);
        let v = mismatches(&m).unwrap();
        assert_eq!(v.len(), 1);
        assert!(v[0].starts_with("hipfile-new "), "{v:?}");
    }

    #[test]
    fn an_unpublishable_library_is_a_mismatch() {
        let m = libraries_and(vec![json!({ "name": "hipfile-core", "publish": [] })]);
        assert_eq!(
            mismatches(&m).unwrap(),
            ["hipfile-core is a library crate but has publish = false"]
        );
    }

    #[test]
    fn packaging_gets_a_home_of_its_own_and_leaves_the_users_alone() {
        let root = std::env::temp_dir().join(format!("xtask-home-{}", std::process::id()));
        let shared = root.join("cargo-home");
        let mine = root.join("target").join("package-home");
        let extracted = shared.join("registry/src/local-1/hipfile-core-0.1.0");
        for d in [
            &extracted,
            &shared.join("registry/index/x"),
            &shared.join("registry/cache/y"),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(shared.join("config.toml"), "[net]\nretry = 3\n").unwrap();
        // A run before left its sources.
        std::fs::create_dir_all(mine.join("registry/src/old")).unwrap();
        let home = private_home(&shared, &mine).unwrap();
        assert_eq!(home, mine);
        assert!(extracted.is_dir(), "the user's cargo home is untouched");
        assert!(!mine.join("registry/src").exists(), "sources start afresh");
        assert!(mine.join("registry/index/x").is_dir());
        assert!(mine.join("registry/cache/y").is_dir());
        assert_eq!(
            std::fs::read_to_string(mine.join("config.toml")).unwrap(),
            "[net]\nretry = 3\n"
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn the_arguments_name_every_library_once() {
        let args = cargo_args();
        assert_eq!(args[..2], ["package", "--locked"]);
        for name in LIBRARIES {
            assert_eq!(args.iter().filter(|a| *a == name).count(), 1, "{name}");
        }
        assert_eq!(args.iter().filter(|a| **a == "-p").count(), LIBRARIES.len());
    }
}
