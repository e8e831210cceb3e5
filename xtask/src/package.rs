//! Which crates are packaged: the library crates, each as its own tarball, and nothing else.
//!
//! `cargo package` builds every library crate from its tarball, with its internal
//! dependencies taken from the tarballs of the same run (never from the workspace), so a
//! crate that would not build on its own, or lacks a manifest field crates.io requires, fails
//! CI. The list is checked against `cargo metadata`: every workspace crate that may be
//! published must be in it, and every crate in it must be publishable, so a new crate is
//! either added here or marked `publish = false`.

use serde_json::Value;

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

/// The directories in which cargo may have kept an extracted copy of a library crate of
/// `version` from an earlier packaging run: `<cargo home>/registry/src/*/<name>-<version>`.
///
/// `cargo package` verifies each tarball against the tarballs of the same run through a
/// local registry, but extracts them into cargo's shared source cache and, finding a
/// directory of the same name and version there, reuses it: after a library changes without
/// a version bump, a later crate was built against the old copy and failed. None of these
/// crates is on crates.io, so every such directory is one an earlier run left.
pub fn stale_copies(cargo_home: &std::path::Path, version: &str) -> Vec<std::path::PathBuf> {
    let Ok(registries) = std::fs::read_dir(cargo_home.join("registry").join("src")) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for registry in registries.flatten() {
        for name in LIBRARIES {
            let dir = registry.path().join(format!("{name}-{version}"));
            if dir.is_dir() {
                found.push(dir);
            }
        }
    }
    found
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
    fn stale_copies_are_the_libraries_of_that_version_in_any_registry() {
        let home = std::env::temp_dir().join(format!("xtask-stale-{}", std::process::id()));
        let src = home.join("registry").join("src");
        for dir in [
            "local-1/hipfile-core-0.1.0",
            "local-2/hipfile-0.1.0",
            "local-2/hipfile-core-0.2.0",
            "index.crates.io-1/serde-0.1.0",
        ] {
            std::fs::create_dir_all(src.join(dir)).unwrap();
        }
        let mut found = stale_copies(&home, "0.1.0");
        found.sort();
        assert_eq!(
            found,
            [
                src.join("local-1/hipfile-core-0.1.0"),
                src.join("local-2/hipfile-0.1.0")
            ]
        );
        std::fs::remove_dir_all(&home).unwrap();
        assert!(
            stale_copies(&home, "0.1.0").is_empty(),
            "no cargo home, nothing"
        );
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
