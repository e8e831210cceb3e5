//! The docs check: every repository path that the project's Markdown names must exist, and
//! every Rust snippet of a README must be compiled as a doc test.
//!
//! The documents are `docs/**/*.md`, every `README.md` of the repository and `CHANGELOG.md`.
//! A path is checked when it is the target of a relative link (`[text](../x.md)`, resolved
//! from the document's directory, its `#anchor` against the target's headings), or when it
//! is a code span or a word of plain text (fenced blocks included) that starts like a
//! repository path: `crates/`, `docs/`, `xtask/`, `.ci/`, `.github/`, or `tests/` in a code
//! span. Those are read from the repository's root, and a `tests/` path also from the crate
//! whose README names it (`tests/c/basic.c` in `crates/c/hipfile-c-hipfile/README.md`). Globs,
//! placeholders and URLs are not paths. A wrong path in the docs sends a maintainer to a file
//! that is not there; the docs used to cite a `docs/PERF.md` that never existed.
//!
//! A README whose Rust snippets are not doc tests can rot unseen, so a crate README with a
//! `rust` fence must be included by a `#[cfg(doctest)]` item of its crate's `src/lib.rs`, and
//! the top-level README's by the facade's; `ignore` is refused (`no_run` compiles).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// How a document names a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The target of a Markdown link, relative to the document's directory.
    Link,
    /// A code span, relative to the repository's root.
    Code,
    /// A word of plain text or of a fenced block, relative to the repository's root.
    Bare,
}

/// A path a document names, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// 1-based line of the document.
    pub line: usize,
    /// The path as written, without a `#anchor` or a `:LINE` suffix.
    pub path: String,
    /// The anchor of a link (`#anchor`), without the `#`.
    pub anchor: Option<String>,
    /// How it is named, which says where it is read from.
    pub kind: Kind,
}

/// Prefixes of repository paths in code spans and plain text. `tests/` is one only in code
/// spans: in prose it is as often the name of a crate's folder as the top-level crate's.
const PREFIXES: &[&str] = &["crates/", "docs/", "xtask/", ".ci/", ".github/"];
const CODE_ONLY_PREFIXES: &[&str] = &["tests/"];

/// Characters a path may hold; anything else ends a word.
fn path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-')
}

/// `text` as a repository path, if it looks like one: a known prefix, only path characters
/// (a `:LINE` suffix and a trailing `.`, `,` or `:` dropped), no glob or placeholder.
fn as_repo_path(text: &str, prefixes: &[&str]) -> Option<String> {
    let mut text = text.trim();
    if let Some((path, line)) = text.rsplit_once(':')
        && !line.is_empty()
        && line.chars().all(|c| c.is_ascii_digit() || c == '-')
    {
        text = path;
    }
    let text = text.trim_end_matches(['.', ',', ':', ';']);
    if !prefixes.iter().any(|p| text.starts_with(p)) {
        return None;
    }
    if !text.chars().all(path_char) || text.contains("//") || text.contains("...") {
        return None;
    }
    Some(text.to_owned())
}

/// The target of a link as a path and an anchor, or `None` for what is not a local file (a
/// URL, `mailto:`, an anchor of the same document is `Some(("", anchor))`).
fn split_link(target: &str) -> Option<(String, Option<String>)> {
    // A title after the target: `[x](path "title")`.
    let target = target.split_whitespace().next().unwrap_or("");
    let target = target.trim_start_matches('<').trim_end_matches('>');
    if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a.to_owned())),
        None => (target, None),
    };
    Some((path.to_owned(), anchor))
}

/// The target of a link reference definition (`[label]: target`), if `line` is one.
fn reference_definition(line: &str) -> Option<&str> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = line.trim_start_matches(' ').strip_prefix('[')?;
    let (label, after) = rest.split_once("]:")?;
    if indent > 3 || label.is_empty() || label.contains('[') {
        return None;
    }
    Some(after.trim())
}

/// The paths `text` (a Markdown document) names, in order.
pub fn named_paths(text: &str) -> Vec<Named> {
    let mut out = Vec::new();
    let mut fence: Option<String> = None;
    // Lines of the paragraph being gathered, with their numbers: code spans and links may
    // run across the lines of one paragraph, never past it.
    let mut para: Vec<(usize, &str)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let trimmed = line.trim_start();
        if let Some(marker) = &fence {
            // A fence closes with at least as many of its characters, and nothing else.
            let closing = trimmed.trim_end();
            if closing.len() >= marker.len() && closing.chars().all(|c| marker.starts_with(c)) {
                fence = None;
            } else {
                out.extend(bare_words(line, n).into_iter().map(|(_, named)| named));
            }
            continue;
        }
        let fence_marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        if let Some(marker) = fence_marker {
            paragraph(&para, &mut out);
            para.clear();
            let len = trimmed
                .chars()
                .take_while(|&c| c == marker.as_bytes()[0] as char)
                .count();
            fence = Some(marker[..1].repeat(len));
            continue;
        }
        if let Some(target) = reference_definition(line) {
            if let Some((path, anchor)) = split_link(target) {
                out.push(Named {
                    line: n,
                    path,
                    anchor,
                    kind: Kind::Link,
                });
            }
        } else if line.trim().is_empty() {
            paragraph(&para, &mut out);
            para.clear();
        } else {
            para.push((n, line));
        }
    }
    paragraph(&para, &mut out);
    out
}

/// The words of `line` (in a fenced block, or plain text) that are repository paths, with
/// the byte offset where each starts.
fn bare_words(line: &str, n: usize) -> Vec<(usize, Named)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices().chain([(line.len(), ' ')]) {
        match (start, path_char(c)) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                // Path characters run together, so `/tmp/docs/x` or `mydocs/x` is one word
                // that does not start with a prefix.
                if let Some(path) = as_repo_path(&line[s..i], PREFIXES) {
                    out.push((
                        s,
                        Named {
                            line: n,
                            path,
                            anchor: None,
                            kind: Kind::Bare,
                        },
                    ));
                }
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// The paths named by one paragraph (its lines, outside fenced blocks), in the order they
/// come: code spans, link targets, and the words of the plain text around them.
fn paragraph(lines: &[(usize, &str)], out: &mut Vec<Named>) {
    // The paragraph's characters with their line (an index into `lines`) and byte offset;
    // code spans and links are blanked out of `plain` once read, leaving the plain text.
    let mut chars: Vec<(usize, usize, char)> = Vec::new();
    for (k, &(_, l)) in lines.iter().enumerate() {
        chars.extend(l.char_indices().map(|(b, c)| (k, b, c)));
        chars.push((k, l.len(), '\n'));
    }
    let mut plain: Vec<String> = lines.iter().map(|&(_, l)| l.to_owned()).collect();
    let mut found: Vec<((usize, usize), Named)> = Vec::new();
    // Blanks `chars[from..to]` out of `plain` (same byte lengths: ASCII spaces for each byte).
    let blank = |plain: &mut Vec<String>, from: usize, to: usize| {
        for &(k, b, c) in &chars[from..to] {
            if c != '\n' {
                plain[k].replace_range(b..b + c.len_utf8(), &" ".repeat(c.len_utf8()));
            }
        }
    };
    let text = |from: usize, to: usize| -> String { chars[from..to].iter().map(|c| c.2).collect() };
    let mut i = 0;
    while i < chars.len() {
        let (k, b, c) = chars[i];
        if c == '`' {
            let run = chars[i..].iter().take_while(|c| c.2 == '`').count();
            // The closing run of exactly as many backticks.
            let mut j = i + run;
            let mut close = None;
            while j < chars.len() {
                if chars[j].2 == '`' {
                    let r = chars[j..].iter().take_while(|c| c.2 == '`').count();
                    if r == run {
                        close = Some(j);
                        break;
                    }
                    j += r;
                } else {
                    j += 1;
                }
            }
            let Some(j) = close else {
                // No closing run: the backticks are literal.
                i += run;
                continue;
            };
            let content = text(i + run, j).replace('\n', " ");
            let prefixes: Vec<&str> = PREFIXES.iter().chain(CODE_ONLY_PREFIXES).copied().collect();
            if let Some(path) = as_repo_path(&content, &prefixes) {
                let named = Named {
                    line: lines[k].0,
                    path,
                    anchor: None,
                    kind: Kind::Code,
                };
                found.push(((k, b), named));
            }
            blank(&mut plain, i, j + run);
            i = j + run;
            continue;
        }
        if c == ']' && chars.get(i + 1).map(|c| c.2) == Some('(') {
            // The target runs to the matching parenthesis, on the same line.
            let mut depth = 0usize;
            let mut end = None;
            for (j, &(_, _, c)) in chars.iter().enumerate().skip(i + 1) {
                match c {
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(j);
                            break;
                        }
                    }
                    '\n' => break,
                    _ => {}
                }
            }
            if let Some(j) = end {
                if let Some((path, anchor)) = split_link(&text(i + 2, j)) {
                    let (tk, tb, _) = chars[i + 2];
                    let named = Named {
                        line: lines[tk].0,
                        path,
                        anchor,
                        kind: Kind::Link,
                    };
                    found.push(((tk, tb), named));
                }
                blank(&mut plain, i + 1, j + 1);
                i = j + 1;
                continue;
            }
        }
        i += 1;
    }
    for (k, l) in plain.iter().enumerate() {
        found.extend(
            bare_words(l, lines[k].0)
                .into_iter()
                .map(|(b, n)| ((k, b), n)),
        );
    }
    found.sort_by_key(|&(at, _)| at);
    out.extend(found.into_iter().map(|(_, n)| n));
}

/// GitHub's anchor of a heading: lower case, letters, digits, `-` and `_` kept, spaces made
/// `-`, everything else dropped.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// The anchors of a document's headings (outside fenced blocks), numbered as GitHub numbers
/// repeated ones (`x`, `x-1`, `x-2`).
pub fn anchors(text: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    let mut fence = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        let hashes = t.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && t[hashes..].starts_with(' ') {
            let base = slug(t[hashes..].trim().trim_end_matches('#'));
            let k = seen.entry(base.clone()).or_insert(0);
            out.push(if *k == 0 {
                base.clone()
            } else {
                format!("{base}-{k}")
            });
            *k += 1;
        }
    }
    out
}

/// The documents the check reads, relative to `root`, sorted: `docs/**/*.md`, every
/// `README.md`, `CHANGELOG.md`.
pub fn documents(root: &Path) -> Result<Vec<PathBuf>, String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
        let entries =
            std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            let file_type = entry
                .file_type()
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            if file_type.is_dir() {
                // Build outputs and git's own files are not the project's documents.
                if name != "target" && name != ".git" {
                    walk(root, &path, out)?;
                }
            } else if name == "README.md"
                || rel == Path::new("CHANGELOG.md")
                || (rel.starts_with("docs") && name.ends_with(".md"))
            {
                out.push(rel);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(root, root, &mut out)?;
    out.sort();
    Ok(out)
}

/// Whether `named`, in the document `doc` (relative to `root`), exists; `Err` says what is
/// wrong.
fn resolve(root: &Path, doc: &Path, named: &Named) -> Result<(), String> {
    let doc_dir = doc.parent().unwrap_or(Path::new(""));
    let candidates: Vec<PathBuf> = match named.kind {
        Kind::Link if named.path.is_empty() => vec![doc.to_path_buf()],
        Kind::Link => vec![doc_dir.join(&named.path)],
        Kind::Code | Kind::Bare => {
            let mut c = vec![PathBuf::from(&named.path)];
            // A crate's README names its own tests from the crate's folder.
            if named.path.starts_with("tests/") && doc.starts_with("crates") {
                c.push(doc_dir.join(&named.path));
            }
            c
        }
    };
    let Some(found) = candidates.iter().find(|p| root.join(p).exists()) else {
        return Err(format!("`{}` does not exist", named.path));
    };
    if let Some(anchor) = &named.anchor
        && found.extension().is_some_and(|e| e == "md")
    {
        let text = std::fs::read_to_string(root.join(found))
            .map_err(|e| format!("cannot read {}: {e}", found.display()))?;
        if !anchors(&text).iter().any(|a| a == anchor) {
            return Err(format!(
                "`{}#{anchor}`: {} has no heading with that anchor",
                named.path,
                found.display()
            ));
        }
    }
    Ok(())
}

/// Whether `text` (a README) has a Rust fence, and whether one of them is `ignore`d.
fn rust_fences(text: &str) -> (bool, bool) {
    let mut any = false;
    let mut ignored = false;
    let mut fence = false;
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(info) = t.strip_prefix("```") {
            if !fence {
                let mut words = info.split(',').map(str::trim);
                if words.next() == Some("rust") {
                    any = true;
                    ignored |= words.any(|w| w == "ignore");
                }
            }
            fence = !fence;
        }
    }
    (any, ignored)
}

/// The README doc-test rule: each README with Rust snippets is included by the `lib.rs`
/// that compiles it (its crate's, or the facade's for the top-level README).
fn readme_doctests(root: &Path, docs: &[PathBuf]) -> Result<Vec<String>, String> {
    let mut problems = Vec::new();
    for doc in docs.iter().filter(|d| d.ends_with("README.md")) {
        let text = std::fs::read_to_string(root.join(doc))
            .map_err(|e| format!("cannot read {}: {e}", doc.display()))?;
        let (any, ignored) = rust_fences(&text);
        if ignored {
            problems.push(format!(
                "{}: a Rust snippet is `ignore`d; make it compile (`no_run` where it needs a GPU \
                 or files)",
                doc.display()
            ));
        }
        if !any {
            continue;
        }
        let (lib, include) = if doc == Path::new("README.md") {
            (
                PathBuf::from("crates/hipfile/src/lib.rs"),
                "include_str!(\"../../../README.md\")",
            )
        } else if doc.starts_with("crates") {
            let dir = doc.parent().unwrap_or(Path::new(""));
            (dir.join("src/lib.rs"), "include_str!(\"../README.md\")")
        } else {
            problems.push(format!(
                "{}: Rust snippets outside a crate are not compiled; move them into a crate's \
                 README",
                doc.display()
            ));
            continue;
        };
        let lib_text = std::fs::read_to_string(root.join(&lib)).unwrap_or_default();
        let covered = lib_text
            .split("#[cfg(doctest)]")
            .skip(1)
            .any(|after| after.lines().take(3).any(|l| l.contains(include)));
        if !covered {
            problems.push(format!(
                "{}: its Rust snippets are not doc tests; add to {}: #[cfg(doctest)] \
                 #[doc = {include}] struct ...;",
                doc.display(),
                lib.display()
            ));
        }
    }
    Ok(problems)
}

/// Runs the check over the repository at `root`: each problem, one line, naming the
/// document and its line.
pub fn check(root: &Path) -> Result<Vec<String>, String> {
    let docs = documents(root)?;
    let mut problems = Vec::new();
    for doc in &docs {
        let text = std::fs::read_to_string(root.join(doc))
            .map_err(|e| format!("cannot read {}: {e}", doc.display()))?;
        for named in named_paths(&text) {
            if let Err(e) = resolve(root, doc, &named) {
                problems.push(format!("{}:{}: {e}", doc.display(), named.line));
            }
        }
    }
    problems.extend(readme_doctests(root, &docs)?);
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(text: &str) -> Vec<(usize, String, Kind)> {
        named_paths(text)
            .into_iter()
            .map(|n| (n.line, n.path, n.kind))
            .collect()
    }

    #[test]
    fn links_code_spans_and_plain_words_are_found_with_their_lines() {
        let text = "# Title\n\nSee [the map](ARCHITECTURE.md) and `crates/hipfile/src/lib.rs`,\n\
                    then docs/BENCHMARKS.md.\n";
        assert_eq!(
            paths(text),
            [
                (3, "ARCHITECTURE.md".into(), Kind::Link),
                (3, "crates/hipfile/src/lib.rs".into(), Kind::Code),
                (4, "docs/BENCHMARKS.md".into(), Kind::Bare),
            ]
        );
    }

    #[test]
    fn urls_and_words_that_are_not_repository_paths_are_skipped() {
        let text = "[site](https://example.com/docs/x) [mail](mailto:a@b) `src/lib.rs` \
                    `target/dist` `HIPFILE_TASK_SIZE` /tmp/docs/x.md mydocs/x \
                    `crates/*/README.md` `crates/{a,b}` `docs/x.md and more`\n";
        assert_eq!(paths(text), []);
    }

    #[test]
    fn anchors_are_split_from_link_targets() {
        let n = named_paths("[a](BENCHMARKS.md#2026-12-03-x) [b](#local) [c](x.md \"title\")\n");
        let got: Vec<_> = n
            .iter()
            .map(|n| (n.path.as_str(), n.anchor.as_deref()))
            .collect();
        assert_eq!(
            got,
            [
                ("BENCHMARKS.md", Some("2026-12-03-x")),
                ("", Some("local")),
                ("x.md", None)
            ]
        );
    }

    #[test]
    fn link_reference_definitions_are_links() {
        let text = "| a | [x][r] |\n\n[r]: #some-heading\n  [s]: ../ABI.md#abi \"title\"\n";
        let n = named_paths(text);
        let got: Vec<_> = n
            .iter()
            .map(|n| (n.line, n.path.as_str(), n.anchor.as_deref(), n.kind))
            .collect();
        assert_eq!(
            got,
            [
                (3, "", Some("some-heading"), Kind::Link),
                (4, "../ABI.md", Some("abi"), Kind::Link)
            ]
        );
    }

    #[test]
    fn a_code_span_may_run_across_lines_of_a_paragraph_but_not_past_it() {
        let text =
            "Run `cargo\nxtask docs` and see `docs/PERF.md`.\n\nA lone ` here\n\n`docs/x.md`\n";
        assert_eq!(
            paths(text),
            [
                (2, "docs/PERF.md".into(), Kind::Code),
                (6, "docs/x.md".into(), Kind::Code),
            ]
        );
    }

    #[test]
    fn a_link_across_a_line_break_is_found_on_its_targets_line() {
        let text = "Read the\n[decision](decisions/fork.md), and\n`tests/c/basic.c`.\n";
        assert_eq!(
            paths(text),
            [
                (2, "decisions/fork.md".into(), Kind::Link),
                (3, "tests/c/basic.c".into(), Kind::Code),
            ]
        );
    }

    #[test]
    fn fenced_blocks_are_read_for_plain_paths_only() {
        let text = "```sh\nnvcc crates/c/hipfile-c-cufile/tests/gpu/nullstream.cu -o x\n\
                    cc tests/c/basic.c `docs/y.md`\n````\nafter `xtask/src/main.rs`\n";
        assert_eq!(
            paths(text),
            [
                (
                    2,
                    "crates/c/hipfile-c-cufile/tests/gpu/nullstream.cu".into(),
                    Kind::Bare
                ),
                (3, "docs/y.md".into(), Kind::Bare),
                (5, "xtask/src/main.rs".into(), Kind::Code),
            ]
        );
    }

    #[test]
    fn line_suffixes_and_trailing_punctuation_are_dropped() {
        let text = "`crates/a/src/lib.rs:42` and crates/b/src/x.rs: then docs/c.md; `.ci/run`\n";
        assert_eq!(
            paths(text),
            [
                (1, "crates/a/src/lib.rs".into(), Kind::Code),
                (1, "crates/b/src/x.rs".into(), Kind::Bare),
                (1, "docs/c.md".into(), Kind::Bare),
                (1, ".ci/run".into(), Kind::Code),
            ]
        );
    }

    #[test]
    fn tests_is_a_prefix_in_code_spans_only() {
        assert_eq!(
            paths("`tests/python/roundtrip.py` and tests/c/fork.c\n"),
            [(1, "tests/python/roundtrip.py".into(), Kind::Code)]
        );
    }

    #[test]
    fn double_backtick_spans_hold_single_backticks() {
        assert_eq!(
            paths("``a ` b`` then `docs/x.md`\n"),
            [(1, "docs/x.md".into(), Kind::Code)]
        );
    }

    #[test]
    fn slugs_follow_githubs_rule() {
        assert_eq!(
            slug("2026-12-03 (midnight) — pinned memory, `chunks` (NVIDIA platform)"),
            "2026-12-03-midnight--pinned-memory-chunks-nvidia-platform"
        );
        assert_eq!(
            slug("`hipfile check` without a runtime"),
            "hipfile-check-without-a-runtime"
        );
        assert_eq!(
            slug("cuFile's ABI (libcufile.so.0)"),
            "cufiles-abi-libcufileso0"
        );
    }

    #[test]
    fn repeated_headings_are_numbered_and_fences_hide_headings() {
        let text = "# A\n## B\n```\n# not a heading\n```\n## B\n### B\n";
        assert_eq!(anchors(text), ["a", "b", "b-1", "b-2"]);
    }

    #[test]
    fn rust_fences_and_ignore_are_told() {
        assert_eq!(rust_fences("```sh\nls\n```\n"), (false, false));
        assert_eq!(
            rust_fences("```rust,no_run\nfn f() {}\n```\n"),
            (true, false)
        );
        assert_eq!(rust_fences("```rust,ignore\nx\n```\n"), (true, true));
        // A fence's closing line is not an opening one.
        assert_eq!(rust_fences("```\nrust\n```\n```rust\n```\n"), (true, false));
    }

    /// A repository in a temporary directory: each kind of problem is reported with the
    /// document and line that names it, and what exists passes.
    #[test]
    fn check_reports_each_missing_path_with_its_file_and_line() {
        let root = std::env::temp_dir().join(format!("xtask-docs-{}", std::process::id()));
        let write = |rel: &str, text: &str| {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(
            "docs/a.md",
            "# A\n\nSee [b](b.md#b-heading), [gone](gone.md), [c](b.md#nowhere) and\n\
             `crates/x/src/lib.rs`, `crates/x/src/missing.rs`, docs/old.md.\n",
        );
        write("docs/b.md", "# B heading\n");
        write(
            "crates/x/README.md",
            "`tests/c/t.c` of this crate.\n\n```rust\nfn f() {}\n```\n",
        );
        write("crates/x/src/lib.rs", "//! x\n");
        write("crates/x/tests/c/t.c", "");
        write("target/README.md", "[not read](nothing.md)\n");
        let problems = check(&root).unwrap();
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(
            problems[..4],
            [
                "docs/a.md:3: `gone.md` does not exist",
                "docs/a.md:3: `b.md#nowhere`: docs/b.md has no heading with that anchor",
                "docs/a.md:4: `crates/x/src/missing.rs` does not exist",
                "docs/a.md:4: `docs/old.md` does not exist",
            ]
        );
        assert_eq!(problems.len(), 5, "{problems:#?}");
        assert!(
            problems[4].starts_with("crates/x/README.md: its Rust snippets are not doc tests"),
            "{}",
            problems[4]
        );
    }

    /// The repository passes its own check (what `cargo xtask docs` runs).
    #[test]
    fn the_repositorys_docs_name_only_paths_that_exist() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let problems = check(&root).unwrap();
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}
