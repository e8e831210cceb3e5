//! The layer graph of the workspace, checked mechanically against `cargo metadata`.
//!
//! Each workspace crate lists the workspace crates it may depend on. A crate missing from the
//! table, or an edge the table does not allow, is a violation. Dev-dependencies may add the
//! test fixtures (`hipfile-testfs`), the test doubles (`hipfile-testkit`) and the emulated
//! runtime (`hipfile-emu`) and nothing else, so that a test cannot smuggle in an edge the
//! library must not have. docs/ARCHITECTURE.md explains the rules.

use serde_json::Value;
use std::process::Command;

/// For each workspace crate: the workspace crates it may depend on (normal and build
/// dependencies). `None` means any (only for the top: the test crate and xtask).
pub const ALLOWED: &[(&str, Option<&[&str]>)] = &[
    ("hipfile-sys", Some(&[])),
    ("hipfile-probe", Some(&[])),
    ("hipfile-core", Some(&["hipfile-probe"])),
    ("hipfile-fastpath", Some(&["hipfile-core", "hipfile-probe"])),
    ("hipfile-fallback", Some(&["hipfile-core", "hipfile-probe"])),
    (
        "hipfile",
        Some(&[
            "hipfile-core",
            "hipfile-probe",
            "hipfile-sys",
            "hipfile-runtime",
            "hipfile-fastpath",
            "hipfile-fallback",
        ]),
    ),
    // The checkpoint loader: an application of the facade, nothing below it.
    // With its `remote` feature, it reads shards at URLs through hipfile-remote.
    ("hipfile-safetensors", Some(&["hipfile", "hipfile-remote"])),
    // Object storage: an application of the facade, the only crate with an HTTP client.
    ("hipfile-remote", Some(&["hipfile"])),
    (
        "hipfile-cli",
        Some(&[
            "hipfile",
            "hipfile-safetensors",
            "hipfile-remote",
            "hipfile-core",
            "hipfile-probe",
            "hipfile-sys",
            "hipfile-runtime",
            "hipfile-fastpath",
            "hipfile-fallback",
        ]),
    ),
    // The PyTorch package's native module: the checkpoint loader and the facade, as the CLI.
    ("hipfile-torch", Some(&["hipfile", "hipfile-safetensors"])),
    // The C ABIs' one implementation: a translation layer over the facade, allowed what the
    // CLI is; the two libraries export it and may use nothing else.
    (
        "hipfile-c-shared",
        Some(&[
            "hipfile",
            "hipfile-core",
            "hipfile-probe",
            "hipfile-sys",
            "hipfile-runtime",
            "hipfile-fastpath",
            "hipfile-fallback",
        ]),
    ),
    ("hipfile-c-hipfile", Some(&["hipfile-c-shared"])),
    ("hipfile-c-cufile", Some(&["hipfile-c-shared"])),
    ("hipfile-testfs", Some(&[])),
    ("hipfile-testkit", Some(&["hipfile-core", "hipfile-probe"])),
    ("hipfile-emu", Some(&[])),
    (
        "hipfile-runtime",
        Some(&["hipfile-core", "hipfile-probe", "hipfile-sys"]),
    ),
    ("hipfile-tests", None),
    ("xtask", Some(&[])),
];

/// What dev-dependencies may add to a crate's allowed set: the test fixtures, the test
/// doubles and the emulated runtime (a library loaded at run time, never linked into library
/// code).
pub const DEV_EXTRA: &[&str] = &["hipfile-testfs", "hipfile-testkit", "hipfile-emu"];

/// Runs `cargo metadata` for the workspace.
pub fn workspace_metadata() -> Result<Value, String> {
    let out = Command::new("cargo")
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("cargo metadata printed bad JSON: {e}"))
}

/// Every forbidden edge in `metadata`, as `from -> to (kind)` lines.
pub fn check(metadata: &Value) -> Result<Vec<String>, String> {
    let packages = metadata["packages"]
        .as_array()
        .ok_or("cargo metadata has no packages array")?;
    let members: Vec<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    let mut violations = Vec::new();
    for p in packages {
        let name = p["name"].as_str().ok_or("a package without a name")?;
        let Some((_, allowed)) = ALLOWED.iter().find(|(n, _)| *n == name) else {
            violations.push(format!(
                "{name} is not in the layer table (xtask/src/layers.rs)"
            ));
            continue;
        };
        let deps = p["dependencies"]
            .as_array()
            .ok_or("a package without dependencies")?;
        for d in deps {
            let dep = d["name"].as_str().ok_or("a dependency without a name")?;
            if !members.contains(&dep) {
                continue;
            }
            let kind = d["kind"].as_str().unwrap_or("normal");
            let ok = match allowed {
                None => true,
                Some(list) => list.contains(&dep) || (kind == "dev" && DEV_EXTRA.contains(&dep)),
            };
            if !ok {
                violations.push(format!("{name} -> {dep} ({kind})"));
            }
        }
    }
    Ok(violations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn package(name: &str, deps: &[(&str, Option<&str>)]) -> Value {
        let deps: Vec<Value> = deps
            .iter()
            .map(|(n, k)| json!({ "name": n, "kind": k }))
            .collect();
        json!({ "name": name, "dependencies": deps })
    }

    fn all_members(extra: Vec<Value>) -> Value {
        let mut packages: Vec<Value> = ALLOWED.iter().map(|(n, _)| package(n, &[])).collect();
        packages.retain(|p| !extra.iter().any(|e| e["name"] == p["name"]));
        packages.extend(extra);
        json!({ "packages": packages })
    }

    #[test]
    fn the_workspace_obeys_the_layer_rules() {
        let metadata = workspace_metadata().unwrap();
        assert_eq!(check(&metadata).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn forbidden_edges_are_found() {
        let m = all_members(vec![
            package("hipfile-probe", &[("hipfile-sys", None)]),
            package(
                "hipfile-core",
                &[("hipfile-probe", None), ("hipfile-fastpath", None)],
            ),
            package(
                "hipfile-fallback",
                &[("hipfile-core", None), ("hipfile-fastpath", Some("dev"))],
            ),
            package(
                "hipfile-sys",
                &[("hipfile-testfs", Some("dev")), ("libc", None)],
            ),
        ]);
        let mut v = check(&m).unwrap();
        v.sort();
        assert_eq!(
            v,
            [
                "hipfile-core -> hipfile-fastpath (normal)",
                "hipfile-fallback -> hipfile-fastpath (dev)",
                "hipfile-probe -> hipfile-sys (normal)",
            ]
        );
    }

    #[test]
    fn test_fixtures_are_dev_only() {
        let m = all_members(vec![package("hipfile-probe", &[("hipfile-testfs", None)])]);
        assert_eq!(
            check(&m).unwrap(),
            ["hipfile-probe -> hipfile-testfs (normal)"]
        );
    }

    #[test]
    fn test_doubles_are_dev_only_and_stay_below_the_backends() {
        let m = all_members(vec![
            package(
                "hipfile-fallback",
                &[("hipfile-core", None), ("hipfile-testkit", None)],
            ),
            package("hipfile-fastpath", &[("hipfile-testkit", Some("dev"))]),
            package("hipfile-testkit", &[("hipfile-fastpath", None)]),
        ]);
        let mut v = check(&m).unwrap();
        v.sort();
        assert_eq!(
            v,
            [
                "hipfile-fallback -> hipfile-testkit (normal)",
                "hipfile-testkit -> hipfile-fastpath (normal)",
            ]
        );
    }

    #[test]
    fn an_unknown_crate_is_a_violation() {
        let m = all_members(vec![package("hipfile-new", &[])]);
        assert_eq!(check(&m).unwrap().len(), 1);
    }
}
