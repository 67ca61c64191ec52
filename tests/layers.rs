//! Keeps the module layering that `ARCHITECTURE.md` states: no top-level
//! module of `src/` refers to one in its own layer or a layer above it.
//!
//! The order is the ```` ```layers ```` block of `ARCHITECTURE.md`: one
//! layer per line from the top layer to the bottom, the modules of a layer
//! separated by spaces. Every file under `src/` belongs to the top-level
//! module that is its first path component (`src/crawl.rs` and
//! `src/crawl/**` are `crawl`); `lib.rs` and `main.rs` are the crate root,
//! above every layer, and are not scanned.
//!
//! A reference is a path starting at `crate::`: `use crate::x::..`,
//! `use crate::{x::.., y}` (nested and multi-line groups too) and
//! `crate::x::..` inline in code. Comments, string and character literals
//! do not count, nor does unit-test code (`tests.rs` files, files under a
//! `tests/` directory, and the item after a `#[cfg(test)]`). The block must
//! also list exactly the modules `src/` has, so the map stays complete.
//!
//! Std only: a small lexer blanks comments and literals, then a token scan
//! finds the paths.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

/// The tag of the fenced block in `ARCHITECTURE.md` that holds the order.
const LAYERS_TAG: &str = "```layers";

#[test]

fn modules_refer_only_to_layers_below_them() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let architecture = read(&root.join("ARCHITECTURE.md"));
    let layers = parse_layers(&architecture).unwrap_or_else(|e| panic!("ARCHITECTURE.md: {e}"));
    let src = root.join("src");
    let report = check(&layers, &top_level_modules(&src), &scan(root, &src));
    assert!(report.is_clean(), "{report}");
}

// ------------------------------------------------------------------ layers

/// The stated order: `layer[m]` is the layer of module `m`, 0 the top.
#[derive(Debug)]
struct Layers {
    layer: HashMap<String, usize>,
}

/// The ```` ```layers ```` block of `markdown`.
///
/// # Errors
///
/// When there is not exactly one such block, it is not closed, it is
/// empty, or it lists a module twice.
fn parse_layers(markdown: &str) -> Result<Layers, String> {
    let opened = markdown.lines().filter(|l| l.trim() == LAYERS_TAG).count();
    if opened != 1 {
        return Err(format!(
            "expected one {LAYERS_TAG} block (the module layers, top first), found {opened}"
        ));
    }
    let mut block = markdown
        .lines()
        .skip_while(|l| l.trim() != LAYERS_TAG)
        .skip(1);
    let mut layer = HashMap::new();
    let mut depth = 0;
    loop {
        let line = block
            .next()
            .ok_or_else(|| format!("the {LAYERS_TAG} block is not closed"))?;
        let line = line.trim();
        if line.starts_with("```") {
            break;
        }
        if line.is_empty() {
            continue;
        }
        for module in line.split_whitespace() {
            if layer.insert(module.to_owned(), depth).is_some() {
                return Err(format!("the {LAYERS_TAG} block lists {module} twice"));
            }
        }
        depth += 1;
    }
    if layer.is_empty() {
        return Err(format!("the {LAYERS_TAG} block is empty"));
    }
    Ok(Layers { layer })
}

// ----------------------------------------------------------------- sources

/// One `crate::` reference: the module named, and the line it is on.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reference {
    module: String,
    line: usize,
}

/// A scanned source file: its path from the repository root, its
/// top-level module and the references it makes.
struct SourceFile {
    path: String,
    module: String,
    references: Vec<Reference>,
}

/// The top-level modules `src` has: its `.rs` files (but `lib.rs` and
/// `main.rs`) and its directories.
fn top_level_modules(src: &Path) -> BTreeSet<String> {
    entries(src)
        .into_iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?;
            if p.is_dir() {
                Some(name.to_owned())
            } else {
                let stem = name.strip_suffix(".rs")?;
                (stem != "lib" && stem != "main").then(|| stem.to_owned())
            }
        })
        .collect()
}

/// Every non-test `.rs` file under `src` (but the crate root), scanned.
fn scan(root: &Path, src: &Path) -> Vec<SourceFile> {
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for path in entries(&dir) {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if path.is_dir() {
                if name != "tests" {
                    dirs.push(path);
                }
            } else if name.ends_with(".rs") && name != "tests.rs" {
                let relative = path.strip_prefix(src).expect("walked from src");
                let first = relative
                    .components()
                    .next()
                    .expect("a file under src has a path")
                    .as_os_str()
                    .to_string_lossy();
                let module = first.strip_suffix(".rs").unwrap_or(&first).to_owned();
                if relative.components().count() == 1 && (module == "lib" || module == "main") {
                    continue;
                }
                files.push(SourceFile {
                    path: path
                        .strip_prefix(root)
                        .expect("src is under the root")
                        .display()
                        .to_string(),
                    module,
                    references: references(&read(&path)),
                });
            }
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}

/// The entries of `dir`, sorted.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    paths.sort();
    paths
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

// ------------------------------------------------------------------- judge

/// What the check found.
#[derive(Debug, Default)]
struct Report {
    /// Modules in `src/` the block does not list.
    unlisted: Vec<String>,
    /// Modules the block lists that `src/` does not have.
    missing: Vec<String>,
    /// References to the same layer or a layer above, and mutual
    /// references that involve an unlisted module.
    violations: Vec<Violation>,
}

#[derive(Debug, PartialEq, Eq)]
struct Violation {
    path: String,
    line: usize,
    from: String,
    to: String,
    why: Why,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    Above,
    SameLayer,
    /// `to` refers to `from` as well, and one of them is not listed: no
    /// order can allow both.
    Mutual,
}

impl Report {
    fn is_clean(&self) -> bool {
        self.unlisted.is_empty() && self.missing.is_empty() && self.violations.is_empty()
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (path, line, a, b) = (&self.path, self.line, &self.from, &self.to);
        write!(f, "{path}:{line}: {a} -> {b} ")?;
        match self.why {
            Why::Above => write!(f, "({b} is above {a})"),
            Why::SameLayer => write!(f, "({b} is in the same layer as {a})"),
            Why::Mutual => write!(
                f,
                "({b} refers to {a} too; not listed, but no order allows both)"
            ),
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "the module layers of ARCHITECTURE.md ({LAYERS_TAG}, top first) do not hold:"
        )?;
        if !self.unlisted.is_empty() {
            writeln!(
                f,
                "modules in src/ the block does not list: {}",
                self.unlisted.join(", ")
            )?;
        }
        if !self.missing.is_empty() {
            writeln!(
                f,
                "modules the block lists that src/ does not have: {}",
                self.missing.join(", ")
            )?;
        }
        if !self.violations.is_empty() {
            writeln!(
                f,
                "{} references against the layers:",
                self.violations.len()
            )?;
            for v in &self.violations {
                writeln!(f, "  {v}")?;
            }
        }
        Ok(())
    }
}

/// Judges `files` against `layers`, and the block against `modules` (the
/// top-level modules `src/` has). References to names that are not
/// top-level modules (items of the crate root) are not judged; a reference
/// that involves an unlisted module is reported only when it is mutual
/// (its module is reported as unlisted anyway).
fn check(layers: &Layers, modules: &BTreeSet<String>, files: &[SourceFile]) -> Report {
    let listed: BTreeSet<String> = layers.layer.keys().cloned().collect();
    let mut report = Report {
        unlisted: modules.difference(&listed).cloned().collect(),
        missing: listed.difference(modules).cloned().collect(),
        violations: Vec::new(),
    };
    let edges: BTreeSet<(&str, &str)> = files
        .iter()
        .flat_map(|f| between_modules(f, modules).map(|r| (f.module.as_str(), r.module.as_str())))
        .collect();
    for file in files {
        for r in between_modules(file, modules) {
            let (from, to) = (file.module.as_str(), r.module.as_str());
            let why = match (layers.layer.get(from), layers.layer.get(to)) {
                (Some(a), Some(b)) if b < a => Why::Above,
                (Some(a), Some(b)) if b == a => Why::SameLayer,
                (Some(_), Some(_)) => continue,
                _ if edges.contains(&(to, from)) => Why::Mutual,
                _ => continue,
            };
            let v = Violation {
                path: file.path.clone(),
                line: r.line,
                from: from.to_owned(),
                to: to.to_owned(),
                why,
            };
            if !report.violations.contains(&v) {
                report.violations.push(v);
            }
        }
    }
    report
}

/// The references of `file` to other top-level modules of `src/`.
fn between_modules<'a>(
    file: &'a SourceFile,
    modules: &'a BTreeSet<String>,
) -> impl Iterator<Item = &'a Reference> {
    file.references
        .iter()
        .filter(|r| r.module != file.module && modules.contains(&r.module))
}

// ------------------------------------------------------------------- lexer

/// `src` with comments, string literals and character literals blanked
/// (every character but newlines becomes a space), so what is left is code
/// on the lines it was on.
fn code_only(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, from: &[char]| {
        out.extend(from.iter().map(|&ch| if ch == '\n' { '\n' } else { ' ' }));
    };
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let before = |i: usize, k: usize| i.checked_sub(k).map(|j| c[j]);
    // Whether the `r` at `i` may open a raw string: it starts a token,
    // alone or after a `b` or `c` prefix.
    let raw_prefix = |i: usize| match before(i, 1) {
        Some('b' | 'c') => before(i, 2).is_none_or(|p| !ident(p)),
        p => p.is_none_or(|p| !ident(p)),
    };
    // The index of the `"` after the `#`s that follow the `r` at `i`.
    let raw_quote = |i: usize| {
        let mut j = i + 1;
        while at(j) == '#' {
            j += 1;
        }
        (at(j) == '"').then_some(j)
    };
    let mut i = 0;
    while i < c.len() {
        let start = i;
        match c[i] {
            '/' if at(i + 1) == '/' => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            }
            '/' if at(i + 1) == '*' => {
                let mut depth = 0;
                while i < c.len() {
                    if c[i] == '/' && at(i + 1) == '*' {
                        depth += 1;
                        i += 2;
                    } else if c[i] == '*' && at(i + 1) == '/' {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            '"' => {
                i += 1;
                while i < c.len() && c[i] != '"' {
                    i += if c[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
            }
            // A raw string: r"..", r#".."#, br"..", cr#".."#.
            'r' if raw_prefix(i) && raw_quote(i).is_some() => {
                let j = raw_quote(i).expect("checked by the guard");
                let hashes = j - i - 1;
                i = j + 1;
                while i < c.len() && !(c[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#')) {
                    i += 1;
                }
                i += 1 + hashes;
            }
            // A character literal ('x', '\n', '\u{..}'); otherwise a
            // lifetime or a label, which is code.
            '\'' if at(i + 1) == '\\' || (at(i + 1) != '\0' && at(i + 2) == '\'') => {
                i += if at(i + 1) == '\\' { 3 } else { 2 };
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            }
            ch => {
                out.push(ch);
                i += 1;
                continue;
            }
        }
        blank(&mut out, &c[start..i.min(c.len())]);
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok<'a> {
    Ident(&'a str),
    /// `::`
    PathSep,
    Punct(char),
}

/// The tokens of `code` (from [`code_only`]) with their 1-based lines.
fn tokens(code: &str) -> Vec<(Tok<'_>, usize)> {
    let mut toks = Vec::new();
    let mut line = 1;
    let mut chars = code.char_indices().peekable();
    while let Some((i, ch)) = chars.next() {
        if ch == '\n' {
            line += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let mut end = i + ch.len_utf8();
            while let Some(&(j, next)) = chars.peek() {
                if !(next.is_alphanumeric() || next == '_') {
                    break;
                }
                end = j + next.len_utf8();
                chars.next();
            }
            toks.push((Tok::Ident(&code[i..end]), line));
        } else if ch == ':' && chars.peek().is_some_and(|&(_, n)| n == ':') {
            chars.next();
            toks.push((Tok::PathSep, line));
        } else if !ch.is_whitespace() {
            toks.push((Tok::Punct(ch), line));
        }
    }
    toks
}

// ----------------------------------------------------------------- scanner

/// The `crate::` references in Rust source `src`, in order.
fn references(src: &str) -> Vec<Reference> {
    let code = code_only(src);
    let toks = tokens(&code);
    let tok = |i: usize| toks.get(i).map(|&(t, _)| t);
    let mut refs = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if let Some((end, inner)) = cfg_test_attribute(&toks, i) {
            if inner {
                // `#![cfg(test)]`: the whole file is test code.
                break;
            }
            i = skip_item(&toks, end);
            continue;
        }
        if tok(i) == Some(Tok::Ident("crate")) && tok(i + 1) == Some(Tok::PathSep) {
            match tok(i + 2) {
                Some(Tok::Ident(m)) => {
                    push(&mut refs, m, toks[i + 2].1);
                    i += 3;
                }
                Some(Tok::Punct('{')) => i = group(&toks, i + 2, &mut refs),
                _ => i += 2,
            }
            continue;
        }
        i += 1;
    }
    refs
}

fn push(refs: &mut Vec<Reference>, module: &str, line: usize) {
    if !matches!(module, "self" | "super" | "crate") {
        refs.push(Reference {
            module: module.to_owned(),
            line,
        });
    }
}

/// The modules a `crate::{..}` group opening at `open` names (the first
/// segment of each of its paths); answers the index after the group.
fn group(toks: &[(Tok<'_>, usize)], open: usize, refs: &mut Vec<Reference>) -> usize {
    let mut depth = 0;
    let mut path_start = false;
    for (i, &(t, line)) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Punct('{') => {
                depth += 1;
                path_start = depth == 1;
            }
            Tok::Punct('}') => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            Tok::Punct(',') if depth == 1 => path_start = true,
            Tok::Ident(m) if depth == 1 && path_start => {
                push(refs, m, line);
                path_start = false;
            }
            _ if depth == 1 => path_start = false,
            _ => {}
        }
    }
    toks.len()
}

/// If `#[cfg(test)]` or `#![cfg(test)]` starts at `i`: the index after it,
/// and whether it is an inner attribute.
fn cfg_test_attribute(toks: &[(Tok<'_>, usize)], i: usize) -> Option<(usize, bool)> {
    if toks.get(i)?.0 != Tok::Punct('#') {
        return None;
    }
    let inner = toks.get(i + 1)?.0 == Tok::Punct('!');
    let from = i + 1 + usize::from(inner);
    let expected = [
        Tok::Punct('['),
        Tok::Ident("cfg"),
        Tok::Punct('('),
        Tok::Ident("test"),
        Tok::Punct(')'),
        Tok::Punct(']'),
    ];
    let found = toks.get(from..from + expected.len())?;
    found
        .iter()
        .map(|&(t, _)| t)
        .eq(expected)
        .then_some((from + expected.len(), inner))
}

/// The index after the item (or statement, field, arm) that starts at
/// `start`: after its `;` or `,`, after its body's closing brace, or at the
/// bracket that closes what encloses it.
fn skip_item(toks: &[(Tok<'_>, usize)], start: usize) -> usize {
    let mut depth = 0usize;
    // Whether the outermost open bracket is a brace (an item's body).
    let mut body = false;
    for (i, &(t, _)) in toks.iter().enumerate().skip(start) {
        match t {
            Tok::Punct(open @ ('{' | '(' | '[')) => {
                if depth == 0 {
                    body = open == '{';
                }
                depth += 1;
            }
            Tok::Punct('}' | ')' | ']') if depth == 0 => return i,
            Tok::Punct(close @ ('}' | ')' | ']')) => {
                depth -= 1;
                if depth == 0 && body && close == '}' {
                    return i + 1;
                }
            }
            Tok::Punct(';' | ',') if depth == 0 => return i + 1,
            _ => {}
        }
    }
    toks.len()
}

// -------------------------------------------------------------- self-check

/// The modules and lines `references` finds in `src`.
fn found(src: &str) -> Vec<(String, usize)> {
    references(src)
        .into_iter()
        .map(|r| (r.module, r.line))
        .collect()
}

fn owned(v: &[(&str, usize)]) -> Vec<(String, usize)> {
    v.iter().map(|&(m, l)| (m.to_owned(), l)).collect()
}

#[test]
fn scanner_finds_plain_grouped_nested_and_inline_references() {
    let src = r#"use crate::alpha::Thing;
use crate::{beta::B, gamma,
    delta::{d1, d2::{x, y}},
    epsilon::*};
pub(crate) use crate::zeta as z;
fn f<'a>(s: &'a str) -> crate::eta::Eta {
    let c = '{';
    'outer: loop { break 'outer; }
    crate::theta::run(crate::iota::X);
    std::io::stdout(); super::kappa(); self::lambda();
}
"#;
    assert_eq!(
        found(src),
        owned(&[
            ("alpha", 1),
            ("beta", 2),
            ("gamma", 2),
            ("delta", 3),
            ("epsilon", 4),
            ("zeta", 5),
            ("eta", 6),
            ("theta", 9),
            ("iota", 9),
        ])
    );
}

#[test]
fn scanner_ignores_comments_and_literals() {
    let src = r###"//! See [`crate::doc_inner`].
/// Uses [`crate::doc_outer::X`].
// use crate::line_comment;
/* use crate::block;
   /* nested crate::nested */ still crate::block_tail */
fn f() {
    let a = "crate::string \" crate::escaped";
    let b = r#"crate::raw "quoted" "#;
    let c = b"crate::bytes";
    let d = br##"crate::raw_bytes"##;
    let e = '"'; let f = '\''; let g = '\u{7b}';
    crate::real::call(); // crate::trailing
}
"###;
    assert_eq!(found(src), owned(&[("real", 12)]));
}

#[test]
fn scanner_skips_cfg_test_items() {
    let src = r#"use crate::before;
#[cfg(test)]
mod tests {
    use crate::hidden;
    fn g() { let open = '{'; let s = "}"; crate::hidden_too::f(); }
}
#[cfg(test)]
use crate::test_only;
struct S {
    #[cfg(test)]
    probe: crate::field_only::P,
    kept: crate::field_after::K,
}
#[cfg(test)]
#[allow(dead_code)]
fn helper() -> crate::helper_only::H { H::default() }
use crate::after;
"#;
    assert_eq!(
        found(src),
        owned(&[("before", 1), ("field_after", 12), ("after", 17)])
    );
    assert!(found("#![cfg(test)]\nuse crate::anything;\n").is_empty());
}

#[test]
fn layers_block_is_read_top_first() {
    let md = "# A\n\ntext\n\n```layers\ncli\n\nnode  api\nstore\n```\n\n```rust\nx\n```\n";
    let layers = parse_layers(md).unwrap();
    let layer = |m: &str| layers.layer[m];
    assert_eq!(
        (layer("cli"), layer("node"), layer("api"), layer("store")),
        (0, 1, 1, 2)
    );
    assert_eq!(layers.layer.len(), 4);
    assert!(parse_layers("no block").is_err());
    assert!(parse_layers("```layers\na\n").is_err(), "not closed");
    assert!(parse_layers("```layers\na\na b\n```\n").is_err(), "twice");
    assert!(parse_layers("```layers\n```\n```layers\na\n```\n").is_err());
}

#[test]
fn check_reports_upward_and_same_layer_references_and_map_gaps() {
    let layers = parse_layers("```layers\ntop\nmid peer\nlow\nghost\n```\n").unwrap();
    let modules: BTreeSet<String> = ["top", "mid", "peer", "low", "extra", "aside"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    let file = |path: &str, module: &str, refs: &[(&str, usize)]| SourceFile {
        path: path.to_owned(),
        module: module.to_owned(),
        references: refs
            .iter()
            .map(|&(m, line)| Reference {
                module: m.to_owned(),
                line,
            })
            .collect(),
    };
    let files = [
        file("src/top.rs", "top", &[("mid", 1), ("low", 2)]),
        file(
            "src/mid/a.rs",
            "mid",
            &[("low", 1), ("top", 3), ("peer", 4), ("mid", 5), ("Item", 6)],
        ),
        file("src/low.rs", "low", &[("top", 7), ("top", 7), ("aside", 8)]),
        file("src/extra.rs", "extra", &[("top", 1), ("low", 2)]),
        file("src/top/x.rs", "top", &[("extra", 9)]),
    ];
    let report = check(&layers, &modules, &files);
    assert_eq!(report.unlisted, ["aside", "extra"]);
    assert_eq!(report.missing, ["ghost"]);
    let lines: Vec<String> = report.violations.iter().map(|v| v.to_string()).collect();
    assert_eq!(
        lines,
        [
            "src/mid/a.rs:3: mid -> top (top is above mid)",
            "src/mid/a.rs:4: mid -> peer (peer is in the same layer as mid)",
            "src/low.rs:7: low -> top (top is above low)",
            "src/extra.rs:1: extra -> top (top refers to extra too; not listed, but no order allows both)",
            "src/top/x.rs:9: top -> extra (extra refers to top too; not listed, but no order allows both)",
        ]
    );
    assert!(!report.is_clean());
    let text = report.to_string();
    assert!(
        text.contains("does not list: aside, extra") && text.contains("does not have: ghost"),
        "{text}"
    );
}
