//! The architecture's import rules, checked on the sources (in the manner
//! of rust-analyzer's tidy tests): the runtime is a stack of folders, each
//! importing only from the folders below it, and no circle of modules
//! remains in the runtime or in `cargo cmc`.
//!
//! The paths a module names are read from its text: every `use` tree and
//! every path that starts with `crate::`, `super::` or `self::` (or with the
//! name of one of the module's own child modules), outside comments and
//! string literals. A path is resolved to the file of the longest module
//! prefix it names. `mod` declarations are not imports.
//!
//! `CMC_LAYERS_PRINT=1 cargo test -p cmc-tests --test suite layers -- --nocapture`
//! prints the graph.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The runtime's folders, bottom first: a module may import from its own
/// folder and from folders earlier in this list. `lib.rs` is above all of
/// them. Keep in step with the architecture chapter of the book.
const RUNTIME_LAYERS: &[&str] = &[
    "sys",
    "memory",
    "identity",
    "determinism",
    "model",
    "engine",
    "search",
    "driver",
];

/// One source file of a crate: its module path and where it is.
#[derive(Debug)]
struct File {
    module: Vec<String>,
    path: PathBuf,
}

/// An import: the module that imports, the file module it names, the line.
#[derive(Debug, Clone)]
struct Edge {
    from: Vec<String>,
    to: Vec<String>,
    line: usize,
}

fn crate_files(src: &Path) -> Vec<File> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(src).expect("under src");
                let mut module: Vec<String> = rel
                    .with_extension("")
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if matches!(
                    module.last().map(String::as_str),
                    Some("mod" | "lib" | "main")
                ) {
                    module.pop();
                }
                out.push(File { module, path });
            }
        }
    }
    out.sort_by(|a, b| a.module.cmp(&b.module));
    out
}

/// A token of the little lexer: an identifier, `::`, or one punctuation
/// character, with its line.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Colons,
    Punct(char),
}

/// Splits Rust source into identifiers, `::` and punctuation, dropping
/// comments, string, byte-string, raw-string and char literals, lifetimes
/// and numbers.
fn lex(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    let count_lines = |from: usize, to: usize, line: &mut usize| {
        *line += c[from..to].iter().filter(|&&ch| ch == '\n').count();
    };
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && c.get(i + 1) == Some(&'*') {
            let (start, mut depth) = (i, 0);
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            count_lines(start, i.min(c.len()), &mut line);
        } else if ch == '"' {
            let start = i;
            i += 1;
            while i < c.len() && c[i] != '"' {
                i += if c[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            count_lines(start, i.min(c.len()), &mut line);
        } else if ch == '\'' {
            // A char literal ('x', '\n', '\u{..}', '\'') or a lifetime.
            if c.get(i + 1) == Some(&'\\') {
                i += 2;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if c.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                    i += 1;
                }
            }
        } else if ch.is_alphabetic() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            // Raw strings and byte strings: r"..", r#".."#, b"..", br#".."#.
            let raw =
                matches!(word.as_str(), "r" | "br" | "cr") && matches!(c.get(i), Some('"' | '#'));
            if raw {
                let mut hashes = 0;
                while c.get(i) == Some(&'#') {
                    hashes += 1;
                    i += 1;
                }
                if c.get(i) == Some(&'"') {
                    let start = i;
                    i += 1;
                    loop {
                        if i >= c.len() {
                            break;
                        }
                        if c[i] == '"' && (0..hashes).all(|k| c.get(i + 1 + k) == Some(&'#')) {
                            i += 1 + hashes;
                            break;
                        }
                        i += 1;
                    }
                    count_lines(start, i.min(c.len()), &mut line);
                }
                continue;
            }
            if matches!(word.as_str(), "b" | "c") && c.get(i) == Some(&'"') {
                continue; // the string itself is skipped next round
            }
            if word == "b" && c.get(i) == Some(&'\'') {
                continue;
            }
            out.push((Tok::Ident(word), line));
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((Tok::Colons, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

/// Expands the `use` tree that starts at `toks[*i]` into flat paths.
fn use_tree(toks: &[(Tok, usize)], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(*i).map(|t| &t.0) {
            Some(Tok::Ident(w)) if w == "as" => {
                *i += 2; // `as name`
                out.push(path);
                return;
            }
            Some(Tok::Ident(w)) => {
                path.push(w.clone());
                *i += 1;
            }
            Some(Tok::Colons) => *i += 1,
            Some(Tok::Punct('*')) => {
                *i += 1;
                out.push(path);
                return;
            }
            Some(Tok::Punct('{')) => {
                *i += 1;
                loop {
                    match toks.get(*i).map(|t| &t.0) {
                        Some(Tok::Punct('}')) => {
                            *i += 1;
                            return;
                        }
                        Some(Tok::Punct(',')) => *i += 1,
                        None => return,
                        _ => use_tree(toks, i, &path, out),
                    }
                }
            }
            _ => {
                out.push(path);
                return;
            }
        }
    }
}

/// Every module path a file names, with its line, resolved against the
/// file's module (and the inline modules inside it).
fn named_paths(file: &File, modules: &BTreeSet<Vec<String>>) -> Vec<(Vec<String>, usize)> {
    let text = fs::read_to_string(&file.path).expect("a readable source file");
    let toks = lex(&text);
    let mut out = Vec::new();
    // Inline modules (`mod tests { .. }`): their name and the brace depth
    // they close at.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let here = |inline: &Vec<(String, usize)>| {
            let mut m = file.module.clone();
            m.extend(inline.iter().map(|(n, _)| n.clone()));
            m
        };
        match &toks[i].0 {
            Tok::Punct('{') => {
                depth += 1;
                i += 1;
            }
            Tok::Punct('}') => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
                i += 1;
            }
            Tok::Ident(w) if w == "mod" => {
                if let (Some((Tok::Ident(name), _)), Some((Tok::Punct('{'), _))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    depth += 1;
                    inline.push((name.clone(), depth));
                    i += 3;
                } else {
                    i += 2;
                }
            }
            Tok::Ident(w) if w == "use" => {
                let line = toks[i].1;
                i += 1;
                if toks.get(i).map(|t| &t.0) == Some(&Tok::Colons) {
                    i += 1; // `use ::std::..`
                }
                let mut paths = Vec::new();
                use_tree(&toks, &mut i, &[], &mut paths);
                let m = here(&inline);
                for p in paths {
                    if let Some(r) = resolve(&m, &p, modules) {
                        out.push((r, line));
                    }
                }
            }
            Tok::Ident(w)
                if w == "in"
                    && i >= 2
                    && toks[i - 1].0 == Tok::Punct('(')
                    && toks[i - 2].0 == Tok::Ident("pub".to_string()) =>
            {
                // A visibility, `pub(in crate::a)`, names no import.
                while i < toks.len() && toks[i].0 != Tok::Punct(')') {
                    i += 1;
                }
            }
            Tok::Ident(first) => {
                // A path in code: `a::b::c`, not preceded by `::`.
                let after_colons = i > 0 && toks[i - 1].0 == Tok::Colons;
                let mut p = vec![first.clone()];
                let line = toks[i].1;
                let mut j = i + 1;
                while toks.get(j).map(|t| &t.0) == Some(&Tok::Colons) {
                    match toks.get(j + 1).map(|t| &t.0) {
                        Some(Tok::Ident(w)) => {
                            p.push(w.clone());
                            j += 2;
                        }
                        _ => break,
                    }
                }
                if !after_colons && p.len() > 1 {
                    if let Some(r) = resolve(&here(&inline), &p, modules) {
                        out.push((r, line));
                    }
                }
                i = j.max(i + 1);
            }
            _ => i += 1,
        }
    }
    out
}

/// Resolves a path named in module `here` to an absolute path, or `None`
/// when it leaves the crate (`std::..`, another crate's name).
fn resolve(
    here: &[String],
    path: &[String],
    modules: &BTreeSet<Vec<String>>,
) -> Option<Vec<String>> {
    let mut base: Vec<String>;
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => {
            base = Vec::new();
            rest = &path[1..];
        }
        Some("self") => {
            base = here.to_vec();
            rest = &path[1..];
        }
        Some("super") => {
            base = here.to_vec();
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        Some(first) => {
            // A child module of this one, named without `self::`.
            let mut child = here.to_vec();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
            base = here.to_vec();
        }
        None => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The file module a resolved path lands in: its longest module prefix.
fn owner(path: &[String], modules: &BTreeSet<Vec<String>>) -> Vec<String> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| modules.contains(p))
        .unwrap_or_default()
}

/// The import graph between a crate's files.
fn graph(src: &Path) -> (Vec<File>, Vec<Edge>) {
    let files = crate_files(src);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| f.module.clone()).collect();
    let mut edges = Vec::new();
    for f in &files {
        let mut seen = BTreeSet::new();
        for (p, line) in named_paths(f, &modules) {
            let to = owner(&p, &modules);
            if to != f.module && seen.insert(to.clone()) {
                edges.push(Edge {
                    from: f.module.clone(),
                    to,
                    line,
                });
            }
        }
    }
    if std::env::var_os("CMC_LAYERS_PRINT").is_some() {
        for e in &edges {
            println!("{} -> {} (line {})", name(&e.from), name(&e.to), e.line);
        }
    }
    (files, edges)
}

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "crate".to_string()
    } else {
        m.join("::")
    }
}

/// The circles of a graph: every strongly connected component of more
/// than one module (Tarjan), each with its modules sorted.
fn circles(nodes: &[Vec<String>], edges: &[Edge]) -> Vec<Vec<String>> {
    let index: BTreeMap<&Vec<String>, usize> =
        nodes.iter().enumerate().map(|(i, n)| (n, i)).collect();
    let mut adj = vec![Vec::new(); nodes.len()];
    for e in edges {
        adj[index[&e.from]].push(index[&e.to]);
    }
    struct T {
        adj: Vec<Vec<usize>>,
        idx: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(t: &mut T, v: usize) {
        t.idx[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        for k in 0..t.adj[v].len() {
            let w = t.adj[v][k];
            match t.idx[w] {
                None => {
                    visit(t, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                _ => {}
            }
        }
        if Some(t.low[v]) == t.idx[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                t.out.push(comp);
            }
        }
    }
    let n = nodes.len();
    let mut t = T {
        adj,
        idx: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.idx[v].is_none() {
            visit(&mut t, v);
        }
    }
    let mut out: Vec<Vec<String>> = t
        .out
        .into_iter()
        .map(|c| {
            let mut names: Vec<String> = c.into_iter().map(|i| name(&nodes[i])).collect();
            names.sort();
            names
        })
        .collect();
    out.sort();
    out
}

/// Where a runtime module sits: its folder's place in [`RUNTIME_LAYERS`],
/// or the top (`lib.rs`).
fn rank(module: &[String]) -> Result<usize, String> {
    match module.first() {
        None => Ok(RUNTIME_LAYERS.len()),
        Some(folder) => RUNTIME_LAYERS
            .iter()
            .position(|l| l == folder)
            .ok_or_else(|| format!("`{}` is in no layer folder", name(module))),
    }
}

/// The violations of the layer rule in a runtime source tree.
fn upward_imports(src: &Path) -> Vec<String> {
    let (files, edges) = graph(src);
    let mut out = Vec::new();
    for f in &files {
        if let Err(e) = rank(&f.module) {
            out.push(format!("{}: {e}", f.path.display()));
        }
    }
    let path_of: BTreeMap<&Vec<String>, &PathBuf> =
        files.iter().map(|f| (&f.module, &f.path)).collect();
    for e in &edges {
        if let (Ok(from), Ok(to)) = (rank(&e.from), rank(&e.to)) {
            if to > from {
                out.push(format!(
                    "{}:{}: `{}` (layer {}) imports `{}` from the layer above it ({})",
                    path_of[&e.from].display(),
                    e.line,
                    name(&e.from),
                    RUNTIME_LAYERS[from],
                    name(&e.to),
                    RUNTIME_LAYERS.get(to).copied().unwrap_or("the crate root"),
                ));
            }
        }
    }
    out
}

fn src_of(krate: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(krate)
        .join("src")
}

/// The circles of a crate, as text.
fn circles_of(src: &Path) -> Vec<String> {
    let (files, edges) = graph(src);
    let nodes: Vec<Vec<String>> = files.into_iter().map(|f| f.module).collect();
    circles(&nodes, &edges)
        .into_iter()
        .map(|c| c.join(" <-> "))
        .collect()
}

/// Fails with `what` and the lines of `bad`, unless it is empty.
fn assert_none(what: &str, bad: &[String]) {
    assert!(bad.is_empty(), "{what}:\n{}", bad.join("\n"));
}

#[test]
fn runtime_folders_import_only_downward() {
    assert_none(
        "imports against the layers",
        &upward_imports(&src_of("cmc-runtime")),
    );
}

#[test]
fn no_circle_of_modules_in_runtime() {
    assert_none(
        "circles of modules in cmc-runtime",
        &circles_of(&src_of("cmc-runtime")),
    );
}

#[test]
fn no_circle_of_modules_in_cargo_cmc() {
    assert_none(
        "circles of modules in cargo-cmc",
        &circles_of(&src_of("cargo-cmc")),
    );
}

/// The calls a file makes to the C library (`libc::name(`), by line,
/// outside its `mod tests { .. }`.
fn os_calls(path: &Path) -> Vec<(usize, String)> {
    let text = fs::read_to_string(path).expect("a readable source file");
    let toks = lex(&text);
    let mut out = Vec::new();
    let mut tests_until: Option<usize> = None;
    let mut depth = 0usize;
    for (i, (t, line)) in toks.iter().enumerate() {
        match t {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if tests_until == Some(depth) {
                    tests_until = None;
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(w) if w == "mod" => {
                if let (Some((Tok::Ident(name), _)), Some((Tok::Punct('{'), _))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    if name == "tests" && tests_until.is_none() {
                        tests_until = Some(depth + 1);
                    }
                }
            }
            Tok::Ident(w) if w == "libc" && tests_until.is_none() => {
                if let (
                    Some((Tok::Colons, _)),
                    Some((Tok::Ident(name), _)),
                    Some((Tok::Punct('('), _)),
                ) = (toks.get(i + 1), toks.get(i + 2), toks.get(i + 3))
                {
                    if name.chars().next().is_some_and(char::is_lowercase) {
                        out.push((*line, name.clone()));
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The modules that call the C library besides `sys/`: those that replace
/// a C function and forward to the real one (clocks, entropy, threads).
const INTERPOSERS: &[&str] = &[
    "determinism/clock.rs",
    "determinism/entropy.rs",
    "memory/threads.rs",
];

/// Calls to the operating system are `sys/`'s, but for the interposers.
#[test]
fn only_sys_calls_the_operating_system() {
    let src = src_of("cmc-runtime");
    let mut bad = Vec::new();
    for f in crate_files(&src) {
        let rel = f
            .path
            .strip_prefix(&src)
            .expect("under src")
            .display()
            .to_string();
        if rel.starts_with("sys/") || INTERPOSERS.contains(&rel.as_str()) {
            continue;
        }
        for (line, name) in os_calls(&f.path) {
            bad.push(format!("{rel}:{line}: libc::{name} outside sys/"));
        }
    }
    assert!(
        bad.is_empty(),
        "calls to the operating system outside sys/:\n{}",
        bad.join("\n")
    );
}

/// The architecture chapter's code map names every module of the runtime
/// by its path (a folder's `mod.rs` is its heading), so that a module
/// added without a word about it fails here.
#[test]
fn the_code_map_names_every_runtime_module() {
    let book = Path::new(env!("CARGO_MANIFEST_DIR")).join("../book/src/architecture.md");
    let map = fs::read_to_string(&book).expect("the architecture chapter");
    let src = src_of("cmc-runtime");
    let missing: Vec<String> = crate_files(&src)
        .into_iter()
        .map(|f| {
            f.path
                .strip_prefix(&src)
                .expect("under src")
                .display()
                .to_string()
        })
        .filter(|rel| rel != "lib.rs" && !rel.ends_with("mod.rs"))
        .filter(|rel| !map.contains(&format!("`{rel}`")))
        .collect();
    assert_none(
        "modules the code map of book/src/architecture.md does not name",
        &missing,
    );
}

/// A scratch copy of a source tree, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().expect("a parent")).expect("a scratch folder");
    fs::write(p, text).expect("a scratch file");
}

fn scratch(tag: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("cmc-layers-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    Scratch(dir)
}

/// The rule catches what it is for: a planted upward import (in a `use`
/// group, in code, through `super::`), and a circle; and it is not fooled
/// by paths in comments, strings and char literals.
#[test]
fn the_rule_fails_on_a_planted_upward_import() {
    let s = scratch("plant");
    let root = &s.0;
    write(root, "lib.rs", "mod sys;\nmod memory;\nmod engine;\n");
    write(root, "sys/mod.rs", "pub(crate) mod stack;\n");
    write(
        root,
        "sys/stack.rs",
        "// crate::engine::Engine in a comment is no import\n\
         const S: &str = \"crate::engine::x\";\nconst C: char = '\"';\n\
         const T: &str = \"use crate::engine;\";\nfn f() {}\n",
    );
    write(
        root,
        "memory/mod.rs",
        "use crate::sys::stack;\npub(crate) mod arena;\n",
    );
    write(
        root,
        "memory/arena.rs",
        "pub(in crate::engine) struct A;\nfn g() { super::super::sys::stack::f(); }\n",
    );
    write(root, "engine/mod.rs", "use crate::{memory::arena, sys};\n");
    assert_eq!(upward_imports(root), Vec::<String>::new(), "a clean tree");
    assert_eq!(circles_of(root), Vec::<String>::new());

    // The one violation of a tree whose `memory/arena.rs` is `text`.
    let only_upward = |text: &str| {
        write(root, "memory/arena.rs", text);
        let bad = upward_imports(root);
        assert_eq!(bad.len(), 1, "{bad:?}");
        bad[0].clone()
    };
    // An upward import inside a `use` group.
    let bad = only_upward("use crate::{sys::stack, engine::{self as e}};\nfn g() {}\n");
    assert!(
        bad.ends_with("memory/arena.rs:1: `memory::arena` (layer memory) imports `engine` from the layer above it (engine)"),
        "{bad}"
    );
    // An upward path in code, through `super::`, on line 3.
    let bad = only_upward("fn g() {\n    let _ = 1;\n    super::super::engine::run();\n}\n");
    assert!(bad.contains("memory/arena.rs:3:"), "{bad}");
    assert_eq!(
        circles_of(root),
        vec!["engine <-> memory::arena".to_string()],
    );

    // A call to the C library, outside tests and inside them.
    write(
        root,
        "memory/arena.rs",
        "fn g() {\n    unsafe { libc::munmap(p, 1) };\n}\n#[cfg(test)]\nmod tests {\n    fn t() { unsafe { libc::fork() }; }\n}\n",
    );
    assert_eq!(
        os_calls(&root.join("memory/arena.rs")),
        vec![(2, "munmap".to_string())]
    );

    // A module outside every layer folder.
    write(root, "memory/arena.rs", "fn g() {}\n");
    write(root, "loose.rs", "fn h() {}\n");
    let bad = upward_imports(root);
    assert!(
        bad.len() == 1 && bad[0].ends_with("`loose` is in no layer folder"),
        "{bad:?}"
    );
}
