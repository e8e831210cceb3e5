//! cuFile's configuration file, `cufile.json`: `CUFILE_ENV_PATH_JSON` if set, else
//! `/etc/cufile.json` (`hipfile_c_shared::cufile_json_path`), read once, at the library's first
//! call, and only by this library (`libhipfile.so.0` and the Rust API never read it). Its
//! keys that map onto hipfile's settings become the values of the parameter calls that set
//! the same (`hipfile_c_shared::FileValue`), checked as those calls check them, and lie below
//! the `HIPFILE_*` environment and below the parameter calls (docs/decisions/cufile-json.md
//! has the table). Keys that do not apply are counted, and the first few named, in one short
//! warning.
//!
//! The file is JSON with NVIDIA's two extensions, `//` and `/* */` comments (NVIDIA's own
//! default file has them), and no others (a trailing comma is an error, as in NVIDIA's
//! reader). A file that cannot be used (not JSON, a value of the wrong type, a value out of
//! bounds) gets NVIDIA's behaviour, every driver open failing with `-EINVAL` in the status,
//! and a message on stderr naming the file, the line and what to fix. A missing file is no
//! file: the environment and the defaults, with a warning when `CUFILE_ENV_PATH_JSON`
//! named it.

use hipfile_c_shared::{FileEntry, FileSource, FileValue, SlabPool};
use serde_json::Value;
use std::ffi::CString;
use std::path::Path;

/// Installs the reader when the library is loaded, before any of its functions runs, so
/// that the first of them reads the file (`hipfile_c_shared::set_config_file_source`).
extern "C" fn install() {
    hipfile_c_shared::set_config_file_source(read);
}

// SAFETY: an ELF initialiser of this shared library: the loader calls `install` once, after
// relocation and before `dlopen` (or the program's start) returns; it only stores a function
// pointer in a `OnceLock`, touching no other library's state and no thread-local storage.
#[used]
#[unsafe(link_section = ".init_array")]
static INSTALL: extern "C" fn() = install;

/// Reads the file and says what it found: the reader `hipfile_c_shared` calls.
fn read() -> FileSource {
    let (path, named) = hipfile_c_shared::cufile_json_path();
    let text = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !named => {
            return FileSource::Absent;
        }
        Err(e) => {
            let by = if named {
                "CUFILE_ENV_PATH_JSON names"
            } else {
                "cuFile's configuration file"
            };
            hipfile_c_shared::diag::line(&format!(
                "hipfile: warning: {by} {}, which cannot be read ({e}); using hipfile's \
                 settings (the HIPFILE_* environment and the defaults)",
                path.display()
            ));
            return FileSource::Absent;
        }
    };
    // The values are checked as the parameter calls check them, to be reported here.
    let parsed =
        parse(&text).and_then(|p| match hipfile_c_shared::check_file_entries(&p.entries) {
            Ok(()) => Ok(p),
            Err((key, what)) => Err(FileError {
                line: std::str::from_utf8(&text)
                    .ok()
                    .and_then(|t| strip_comments(t).ok())
                    .and_then(|json| line_of(&json, &key)),
                what,
            }),
        });
    match parsed {
        Ok(Parsed { entries, ignored }) => {
            if !ignored.is_empty() {
                hipfile_c_shared::diag::line(&ignored_warning(&path, &ignored));
            }
            FileSource::Entries(entries)
        }
        Err(e) => {
            let why = e.describe(&path);
            hipfile_c_shared::diag::line(&format!(
                "hipfile: error: {why}. Fix the file (cuFile's files are JSON with // and /* */ \
                 comments), or name another with CUFILE_ENV_PATH_JSON; until then \
                 cuFileDriverOpen fails (-EINVAL), as NVIDIA's library does"
            ));
            FileSource::Invalid(why)
        }
    }
}

/// How many ignored keys the warning names; the others are counted.
const NAMED_KEYS: usize = 3;

/// The one line that says which keys of the file at `path` do not apply: how many, and the
/// first [`NAMED_KEYS`] of them by name (values are left out: NVIDIA's default file alone
/// has over a dozen such keys, some with long arrays, and a line per process must stay short
/// enough to read when many processes print it).
fn ignored_warning(path: &Path, ignored: &[String]) -> String {
    let (count, verb) = match ignored.len() {
        1 => ("1 key".to_string(), "does not apply to hipfile and is"),
        n => (format!("{n} keys"), "do not apply to hipfile and are"),
    };
    let mut names = ignored[..ignored.len().min(NAMED_KEYS)].join(", ");
    if ignored.len() > NAMED_KEYS {
        names.push_str(&format!(" and {} more", ignored.len() - NAMED_KEYS));
    }
    format!(
        "hipfile: warning: {}: {count} {verb} ignored: {names}",
        path.display()
    )
}

/// What was wrong with a file, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileError {
    /// The line (from 1), when one can be named.
    pub line: Option<usize>,
    /// What is wrong.
    pub what: String,
}

impl FileError {
    /// `PATH:LINE: WHAT`.
    fn describe(&self, path: &Path) -> String {
        match self.line {
            Some(line) => format!("{}:{line}: {}", path.display(), self.what),
            None => format!("{}: {}", path.display(), self.what),
        }
    }
}

/// The file's values, and the keys that do not apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// The values of the keys that map onto parameters, in the file's order.
    pub entries: Vec<FileEntry>,
    /// The dotted name of each key that does not apply, in the file's order.
    pub ignored: Vec<String>,
}

/// `text` with its comments replaced by spaces (newlines kept, so that lines and columns
/// stay where they were). Strings are left alone, `//` and `/*` inside them included.
pub fn strip_comments(text: &str) -> Result<String, FileError> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut line = 1;
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                '\\' => {
                    if let Some(next) = chars.next() {
                        out.push(next);
                    }
                }
                '"' => in_string = false,
                '\n' => line += 1,
                _ => {}
            }
            continue;
        }
        match (c, chars.peek()) {
            ('"', _) => {
                in_string = true;
                out.push(c);
            }
            ('/', Some('/')) => {
                // To the end of the line, which stays.
                out.push(' ');
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        line += 1;
                        break;
                    }
                    out.push(' ');
                }
            }
            ('/', Some('*')) => {
                let start = line;
                chars.next();
                out.push_str("  ");
                let mut closed = false;
                while let Some(c) = chars.next() {
                    if c == '*' && chars.peek() == Some(&'/') {
                        chars.next();
                        out.push_str("  ");
                        closed = true;
                        break;
                    }
                    if c == '\n' {
                        out.push('\n');
                        line += 1;
                    } else {
                        out.push(' ');
                    }
                }
                if !closed {
                    return Err(FileError {
                        line: Some(start),
                        what: "a /* comment is never closed with */".into(),
                    });
                }
            }
            _ => {
                if c == '\n' {
                    line += 1;
                }
                out.push(c);
            }
        }
    }
    Ok(out)
}

/// How a key's value is taken.
#[derive(Clone, Copy)]
enum Kind {
    /// A non-negative integer for a `size_t` parameter.
    Size(i32),
    /// `true` or `false` for a boolean parameter.
    Bool(i32),
    /// A string for a string parameter.
    Text(i32),
}

/// The keys that map onto a parameter, and how (their values are checked as the parameter
/// calls check them). Recorded or applied is the parameter's own
/// (docs/decisions/cufile-json.md).
const KEYS: &[(&str, Kind)] = &[
    ("profile.cufile_stats", Kind::Size(0)),
    ("execution.max_io_queue_depth", Kind::Size(1)),
    ("execution.min_io_threshold_size_kb", Kind::Size(3)),
    ("properties.max_direct_io_size_kb", Kind::Size(5)),
    ("properties.max_device_cache_size_kb", Kind::Size(6)),
    ("properties.max_device_pinned_mem_size_kb", Kind::Size(8)),
    ("properties.poll_mode_max_size_kb", Kind::Size(10)),
    ("properties.max_batch_io_timeout_msecs", Kind::Size(11)),
    ("properties.use_poll_mode", Kind::Bool(0)),
    ("properties.allow_compat_mode", Kind::Bool(1)),
    ("properties.force_compat_mode", Kind::Bool(2)),
    ("miscellaneous.api_check_aggressive", Kind::Bool(3)),
    ("execution.parallel_io", Kind::Bool(4)),
    ("profile.nvtx", Kind::Bool(5)),
    ("properties.force_odirect_mode", Kind::Bool(9)),
    ("miscellaneous.skip_topology_detection", Kind::Bool(10)),
    ("miscellaneous.stream_memops_bypass", Kind::Bool(11)),
    ("logging.level", Kind::Text(0)),
    ("logging.dir", Kind::Text(2)),
];

/// NVIDIA's defaults for the keys that tune hipfile's engine, as the `/etc/cufile.json`
/// CUDA 13 installs holds them: such a value says only that the file was not changed, and
/// leaves hipfile's own setting, tuned for hipfile, where it is. NVIDIA's values are tuned
/// for its library: taken as settings they gave hipfile 4 I/O threads, 16 MiB tasks, an
/// 8 MiB small-request threshold and a 1 GiB staging pool, and cut its large reads by 40 %.
const NVIDIA_DEFAULTS: &[(&str, DefaultValue)] = &[
    ("execution.max_io_threads", DefaultValue::Number(4)),
    ("execution.parallel_io", DefaultValue::Flag(true)),
    (
        "execution.min_io_threshold_size_kb",
        DefaultValue::Number(8192),
    ),
    ("execution.max_request_parallelism", DefaultValue::Number(4)),
    (
        "properties.max_direct_io_size_kb",
        DefaultValue::Number(16384),
    ),
    (
        "properties.max_device_cache_size_kb",
        DefaultValue::Number(131_072),
    ),
    (
        "properties.max_device_pinned_mem_size_kb",
        DefaultValue::Number(33_554_432),
    ),
    (
        "properties.posix_pool_slab_size_kb",
        DefaultValue::Slabs(&[(4, 128), (1024, 64), (16384, 64)]),
    ),
];

/// A value of [`NVIDIA_DEFAULTS`].
#[derive(Clone, Copy)]
enum DefaultValue {
    Number(u64),
    Flag(bool),
    Slabs(&'static [(u64, u64)]),
}

/// Whether `entry` holds NVIDIA's default for its key ([`NVIDIA_DEFAULTS`]).
fn is_nvidias_default(entry: &FileEntry) -> bool {
    NVIDIA_DEFAULTS
        .iter()
        .filter(|(key, _)| *key == entry.key)
        .any(|(_, default)| match (default, &entry.value) {
            (DefaultValue::Number(d), FileValue::Size(_, v)) => d == v,
            (DefaultValue::Flag(d), FileValue::Bool(_, v)) => d == v,
            (DefaultValue::Slabs(d), FileValue::Slabs(_, v)) => *d == v.as_slice(),
            _ => false,
        })
}

/// The line of the first `"name"` in `text` (the key's last part), for messages about a
/// value.
fn line_of(text: &str, key: &str) -> Option<usize> {
    let name = format!("\"{}\"", key.rsplit('.').next().unwrap_or(key));
    text.find(&name)
        .map(|at| text[..at].matches('\n').count() + 1)
}

/// Every leaf of `value` (not an object) with its dotted key, in the file's order.
fn leaves<'a>(prefix: &str, value: &'a Value, out: &mut Vec<(String, &'a Value)>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                // The GPU bounce-buffer slabs are one object of two arrays.
                if key == "properties.gpu_bounce_buffer_slab_config" {
                    out.push((key, v));
                } else {
                    leaves(&key, v, out);
                }
            }
        }
        _ => out.push((prefix.to_string(), value)),
    }
}

/// A JSON value's text, short, for messages.
fn shown(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 40 {
        format!("{}...", s.chars().take(37).collect::<String>())
    } else {
        s
    }
}

/// Reads the text of a `cufile.json`: its values, or what is wrong with it.
pub fn parse(bytes: &[u8]) -> Result<Parsed, FileError> {
    let text = std::str::from_utf8(bytes).map_err(|e| FileError {
        line: Some(
            bytes[..e.valid_up_to()]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1,
        ),
        what: "the file is not UTF-8 text".into(),
    })?;
    let json = strip_comments(text)?;
    let root: Value = serde_json::from_str(&json).map_err(|e| {
        let message = e.to_string();
        let what = message
            .rsplit_once(" at line ")
            .map_or(message.as_str(), |(m, _)| m);
        FileError {
            line: Some(e.line()),
            what: format!("not valid JSON at column {}: {what}", e.column()),
        }
    })?;
    if !root.is_object() {
        return Err(FileError {
            line: None,
            what: "the file must hold one JSON object ({ ... })".into(),
        });
    }
    let mut all = Vec::new();
    leaves("", &root, &mut all);
    let wrong = |key: &str, expected: &str, v: &Value| FileError {
        line: line_of(&json, key),
        what: format!("{key} must be {expected}, not {}", shown(v)),
    };
    let mut entries = Vec::new();
    let mut ignored = Vec::new();
    let mut posix: (Option<Vec<u64>>, Option<Vec<u64>>) = (None, None);
    let numbers = |key: &str, v: &Value| -> Result<Vec<u64>, FileError> {
        v.as_array()
            .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>())
            .ok_or_else(|| wrong(key, "an array of non-negative integers", v))
    };
    for (key, v) in all {
        let entry = |value| FileEntry {
            key: key.clone(),
            value,
        };
        if let Some(&(_, kind)) = KEYS.iter().find(|(k, _)| *k == key) {
            entries.push(entry(match kind {
                Kind::Size(p) => FileValue::Size(
                    p,
                    v.as_u64()
                        .ok_or_else(|| wrong(&key, "a non-negative integer", v))?,
                ),
                Kind::Bool(p) => FileValue::Bool(
                    p,
                    v.as_bool().ok_or_else(|| wrong(&key, "true or false", v))?,
                ),
                Kind::Text(p) => {
                    let s = v.as_str().ok_or_else(|| wrong(&key, "a string", v))?;
                    let text = CString::new(s)
                        .map_err(|_| wrong(&key, "a string without NUL characters", v))?;
                    FileValue::Text(p, text)
                }
            }));
            continue;
        }
        match key.as_str() {
            // 0: no pool of threads, the caller's thread does the I/O: one worker here.
            "execution.max_io_threads" => {
                let n = v
                    .as_u64()
                    .ok_or_else(|| wrong(&key, "a non-negative integer", v))?;
                entries.push(entry(if n == 0 {
                    FileValue::Bool(4, false)
                } else {
                    FileValue::Size(2, n)
                }));
            }
            // 0: no limit of cuFile's; the default (the I/O threads) here.
            "execution.max_request_parallelism" => {
                let n = v
                    .as_u64()
                    .ok_or_else(|| wrong(&key, "a non-negative integer", v))?;
                if n > 0 {
                    entries.push(entry(FileValue::Size(4, n)));
                }
            }
            "properties.posix_pool_slab_size_kb" => posix.0 = Some(numbers(&key, v)?),
            "properties.posix_pool_slab_count" => posix.1 = Some(numbers(&key, v)?),
            "properties.gpu_bounce_buffer_slab_config" => {
                let sizes = v.get("slab_size_kb");
                let counts = v.get("slab_count");
                let (Some(sizes), Some(counts)) = (sizes, counts) else {
                    return Err(wrong(
                        &key,
                        "an object of two arrays, slab_size_kb and slab_count",
                        v,
                    ));
                };
                let sizes = numbers(&format!("{key}.slab_size_kb"), sizes)?;
                let counts = numbers(&format!("{key}.slab_count"), counts)?;
                entries.push(entry(FileValue::Slabs(
                    SlabPool::GpuBounce,
                    pairs(&key, sizes, counts, &json)?,
                )));
            }
            // Limits of hipfile's that a file may only confirm.
            "properties.io_batchsize" if v.as_u64() == Some(128) => {}
            "properties.allow_system_memory" | "properties.prefer_iouring"
                if v.as_bool() == Some(false) => {}
            _ => ignored.push(key),
        }
    }
    match posix {
        (None, None) => {}
        (Some(sizes), Some(counts)) => entries.push(FileEntry {
            key: "properties.posix_pool_slab_size_kb".into(),
            value: FileValue::Slabs(
                SlabPool::Posix,
                pairs("properties.posix_pool_slab_size_kb", sizes, counts, &json)?,
            ),
        }),
        _ => {
            return Err(FileError {
                line: line_of(&json, "posix_pool_slab_size_kb")
                    .or_else(|| line_of(&json, "posix_pool_slab_count")),
                what: "properties.posix_pool_slab_size_kb and properties.posix_pool_slab_count \
                       go together: give both, of the same length"
                    .into(),
            });
        }
    }
    entries.retain(|e| !is_nvidias_default(e));
    Ok(Parsed { entries, ignored })
}

/// Sizes and counts as slabs, when there are as many of each.
fn pairs(
    key: &str,
    sizes: Vec<u64>,
    counts: Vec<u64>,
    json: &str,
) -> Result<Vec<(u64, u64)>, FileError> {
    if sizes.len() != counts.len() {
        return Err(FileError {
            line: line_of(json, key),
            what: format!(
                "{key}: {} slab sizes but {} slab counts; give one count per size",
                sizes.len(),
                counts.len()
            ),
        });
    }
    Ok(sizes.into_iter().zip(counts).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NVIDIA's default `/etc/cufile.json` (CUDA 13), in shape: its comments and its values.
    const NVIDIAS_DEFAULT_FILE: &[u8] = br#"{
        // the default file as CUDA installs it
        "logging": { "level": "ERROR" },
        "profile": { "nvtx": false, "cufile_stats": 0 },
        "execution": {
            "max_io_queue_depth": 128, "max_io_threads": 4, "parallel_io": true,
            "min_io_threshold_size_kb": 8192, "max_request_parallelism": 4
        },
        "properties": {
            "max_direct_io_size_kb": 16384, "max_device_cache_size_kb": 131072,
            "per_buffer_cache_size_kb": 1024, "max_device_pinned_mem_size_kb": 33554432,
            "posix_pool_slab_size_kb": [4, 1024, 16384], "posix_pool_slab_count": [128, 64, 64],
            "use_poll_mode": false, "poll_mode_max_size_kb": 4, "allow_compat_mode": true,
            /* GPUDirect only */ "use_pci_p2pdma": false, "io_batchsize": 128
        }
    }"#;

    #[test]
    fn nvidias_own_defaults_leave_hipfiles_settings_as_they_are() {
        // The file CUDA installs holds NVIDIA's defaults, tuned for its own library: taken
        // as settings they gave hipfile 4 I/O threads, 16 MiB tasks, an 8 MiB small-request
        // threshold and a staging pool of 1 GiB, and cut its large reads by 40 % on the H200.
        let parsed = parse(NVIDIAS_DEFAULT_FILE).unwrap();
        let tuning = |e: &&FileEntry| {
            matches!(
                e.value,
                FileValue::Size(2..=6 | 8, _) | FileValue::Bool(4, _) | FileValue::Slabs(..)
            )
        };
        let applied: Vec<_> = parsed.entries.iter().filter(tuning).collect();
        assert!(applied.is_empty(), "{applied:?}");
        // A value of the user's own applies.
        let mine = parse(
            br#"{"execution": {"max_io_threads": 8, "parallel_io": true},
                              "properties": {"max_direct_io_size_kb": 4096}}"#,
        )
        .unwrap();
        assert_eq!(
            mine.entries.iter().map(|e| &e.value).collect::<Vec<_>>(),
            [&FileValue::Size(2, 8), &FileValue::Size(5, 4096)]
        );
    }

    #[test]
    fn comments_become_spaces_and_strings_keep_theirs() {
        let text = "{ // a\n \"a//b\": \"/*x*/\", /* two\nlines */ \"c\": 1 }";
        let out = strip_comments(text).unwrap();
        assert_eq!(out.len(), text.len());
        assert_eq!(out.matches('\n').count(), 2);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["a//b"], "/*x*/");
        assert_eq!(v["c"], 1);
        let e = strip_comments("{\n\n /* open").unwrap_err();
        assert_eq!(e.line, Some(3));
    }

    #[test]
    fn keys_map_onto_parameters_and_the_rest_is_named() {
        let p = parse(
            br#"{ "properties": { "max_direct_io_size_kb": 8192, "allow_compat_mode": false,
                  "io_batchsize": 128, "rdma_dev_addr_list": [] },
                  "execution": { "max_io_threads": 0, "max_request_parallelism": 0 },
                  "logging": { "level": "INFO" } }"#,
        )
        .unwrap();
        let values: Vec<&FileValue> = p.entries.iter().map(|e| &e.value).collect();
        assert_eq!(
            values,
            [
                &FileValue::Size(5, 8192),
                &FileValue::Bool(1, false),
                &FileValue::Bool(4, false),
                &FileValue::Text(0, CString::new("INFO").unwrap()),
            ]
        );
        assert_eq!(p.ignored, ["properties.rdma_dev_addr_list"]);
    }

    #[test]
    fn the_warning_counts_the_ignored_keys_and_names_the_first_few_without_values() {
        let p = parse(
            br#"{ "properties": { "gds_rdma_write_support": true, "io_priority": "default",
                  "rdma_dev_addr_list": [ "10.0.0.1" ], "io_batchsize": 64,
                  "max_direct_io_size_kb": 8192 },
                  "fs": { "generic": { "posix_unaligned_writes": false },
                          "weka": { "rdma_write_support": false } },
                  "denylist": { "mounts": [ "/mnt/secret" ] } }"#,
        )
        .unwrap();
        let line = ignored_warning(Path::new("/etc/cufile.json"), &p.ignored);
        assert_eq!(
            line,
            "hipfile: warning: /etc/cufile.json: 7 keys do not apply to hipfile and are \
             ignored: properties.gds_rdma_write_support, properties.io_priority, \
             properties.rdma_dev_addr_list and 4 more"
        );
        for value in ["true", "default", "10.0.0.1", "64", "false", "secret", "("] {
            assert!(!line.contains(value), "{value}: {line}");
        }
        assert!(!line.contains('\n'), "{line}");
        let one = ignored_warning(Path::new("f.json"), &["fs.weka.rdma_write_support".into()]);
        assert_eq!(
            one,
            "hipfile: warning: f.json: 1 key does not apply to hipfile and is ignored: \
             fs.weka.rdma_write_support"
        );
        let three: Vec<String> = ["a", "b", "c"].map(String::from).into();
        assert!(
            ignored_warning(Path::new("f"), &three)
                .ends_with("3 keys do not apply to hipfile and are ignored: a, b, c"),
        );
    }

    #[test]
    fn wrong_types_and_bad_json_name_the_line() {
        let e = parse(b"{\n \"properties\": {\n  \"max_direct_io_size_kb\": \"big\"\n }\n}")
            .unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(
            e.what
                .contains("properties.max_direct_io_size_kb must be a non-negative integer"),
            "{}",
            e.what
        );
        let e = parse(b"{\n \"a\": 1,\n}").unwrap_err();
        assert_eq!(e.line, Some(3));
        assert!(e.what.starts_with("not valid JSON"), "{}", e.what);
        let e = parse(b"[1]").unwrap_err();
        assert_eq!(e.line, None);
        let e = parse(br#"{"properties": {"posix_pool_slab_size_kb": [4]}}"#).unwrap_err();
        assert!(e.what.contains("go together"), "{}", e.what);
        let e = parse(
            br#"{"properties": {"posix_pool_slab_size_kb": [4, 8], "posix_pool_slab_count": [1]}}"#,
        )
        .unwrap_err();
        assert!(
            e.what.contains("2 slab sizes but 1 slab counts"),
            "{}",
            e.what
        );
    }

    #[test]
    fn long_values_are_cut_on_characters() {
        let long = Value::String("é".repeat(50));
        let s = shown(&long);
        assert_eq!(s.chars().count(), 40);
        assert!(s.ends_with("..."));
        assert_eq!(shown(&Value::from(7)), "7");
    }

    #[test]
    fn slab_arrays_become_slabs() {
        let p = parse(
            br#"{"properties": {"posix_pool_slab_size_kb": [4, 1024], "posix_pool_slab_count": [128, 64],
                 "gpu_bounce_buffer_slab_config": {"slab_size_kb": [64], "slab_count": [8]}}}"#,
        )
        .unwrap();
        let values: Vec<&FileValue> = p.entries.iter().map(|e| &e.value).collect();
        assert_eq!(
            values,
            [
                &FileValue::Slabs(SlabPool::GpuBounce, vec![(64, 8)]),
                &FileValue::Slabs(SlabPool::Posix, vec![(4, 128), (1024, 64)]),
            ]
        );
    }
}
