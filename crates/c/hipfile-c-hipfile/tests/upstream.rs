//! hipFile's status codes against upstream's: `tests/upstream/hipfile_op_errors.tsv` records
//! upstream hipFile's names, values and `hipFileGetOpErrorString` texts (the file says from
//! which files and commits; upstream's sources are not fetched by CI), and every one must be
//! what the one table of codes and texts (`hipfile_core::code`, through
//! `hipfile_c_shared::codes`) says and what this library's `hipFileGetOpErrorString` returns,
//! for every number upstream has and for those it has not.

#![allow(clippy::unwrap_used)] // A failed unwrap is a failed test.

use hipfile_c_shared::codes::{HIPFILE_UNKNOWN, TABLE, row};
use hipfile_c_shared::hipFileGetOpErrorString;
use std::collections::BTreeMap;
use std::ffi::CStr;

/// Upstream's codes: text by value, and name by value; and the text of any other value.
struct Upstream {
    texts: BTreeMap<i32, String>,
    names: BTreeMap<i32, String>,
    default: String,
}

fn upstream() -> Upstream {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/upstream/hipfile_op_errors.tsv"
    );
    let mut up = Upstream {
        texts: BTreeMap::new(),
        names: BTreeMap::new(),
        default: String::new(),
    };
    for line in std::fs::read_to_string(path).unwrap().lines() {
        if line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        let [value, name, text] = fields[..] else {
            panic!("not value, name and text: {line:?}");
        };
        if value == "default" {
            up.default = text.to_owned();
            continue;
        }
        let value: i32 = value.parse().unwrap();
        assert!(
            up.texts.insert(value, text.to_owned()).is_none(),
            "{value} twice"
        );
        up.names.insert(value, name.to_owned());
    }
    assert_eq!(
        up.texts.len(),
        38,
        "upstream has 0, and 5001 to 5039 but 5021 and 5032"
    );
    up
}

/// What this library's `hipFileGetOpErrorString` returns for `value`.
fn library_text(value: i32) -> String {
    let text = hipFileGetOpErrorString(value);
    assert!(!text.is_null());
    // SAFETY: the function returns a static NUL-terminated string, never NULL.
    unsafe { CStr::from_ptr(text) }.to_str().unwrap().to_owned()
}

#[test]
fn every_code_has_upstreams_name_value_and_text() {
    let up = upstream();
    let mut problems = Vec::new();
    for (&value, text) in &up.texts {
        let Some(ours) = row(value).and_then(|r| r.hipfile) else {
            problems.push(format!("{value}: not in the table"));
            continue;
        };
        if ours.name != up.names[&value] {
            problems.push(format!(
                "{value}: named {}, upstream {}",
                ours.name, up.names[&value]
            ));
        }
        if ours.text.to_str().unwrap() != text {
            problems.push(format!("{value}: table {:?}, upstream {text:?}", ours.text));
        }
        let returned = library_text(value);
        if &returned != text {
            problems.push(format!("{value}: returns {returned:?}, upstream {text:?}"));
        }
    }
    for r in TABLE.iter().filter(|r| r.hipfile.is_some()) {
        if !up.texts.contains_key(&r.value) {
            problems.push(format!(
                "{}: a hipFile code upstream does not have",
                r.value
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn any_other_value_has_upstreams_unknown_text() {
    let up = upstream();
    assert_eq!(HIPFILE_UNKNOWN.to_str().unwrap(), up.default);
    for value in [
        -5022,
        -1,
        1,
        4999,
        5000,
        5021,
        5032,
        5040,
        5050,
        i32::MIN,
        i32::MAX,
    ] {
        assert!(!up.texts.contains_key(&value));
        assert_eq!(library_text(value), up.default, "{value}");
    }
}
