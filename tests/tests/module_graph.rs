//! Issue 58 item 2: no circle among the top-level modules of any crate.
//! Within each crate, module A depends on module B when A's code names
//! `crate::B` (in a path or a `use crate::{…}` group), or names at the
//! crate root an item the root re-exports from B (`crate::TxHandle`,
//! re-exported from `tx`). Each mechanism can then be read from the leaves
//! up: a module never needs the modules that need it. Not counted: the
//! crate root itself (it declares every module, and web/'s and relay/'s
//! hold the state their modules share) and the children inside a module
//! (`super::` paths).

use alkstore_tests::{rust_files, ROOT};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every crate of the workspace, by its source directory.
const CRATES: &[&str] = &[
    "core/src",
    "sqlite_ext/src",
    "pg_ext/src",
    "facade/src",
    "web/src",
    "cli/src",
    "relay/src",
    "testkit/src",
    "xtask/src",
    "tests/src",
];

/// The module graph of one crate: top-level module → the top-level modules
/// its code names.
type Graph = BTreeMap<String, BTreeSet<String>>;

/// The code of a file without its comments (line comments, doc comments
/// and block comments), so that a module a comment mentions is no edge.
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |end| &after[end + 2..]);
        } else if rest.starts_with("//") {
            rest = rest.find('\n').map_or("", |end| &rest[end..]);
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first segments named after each `crate::` in `code`: `crate::a::b`
/// gives `a`, `crate::{a, b::c}` gives `a` and `b`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        if code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
        {
            continue; // `alkstore_crate::`, not this crate
        }
        let rest = &code[at + "crate::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                found.extend(
                    group
                        .split(',')
                        .map(|item| ident(item.trim()).to_string())
                        .filter(|i| !i.is_empty()),
                );
            }
            None => found.push(ident(rest).to_string()),
        }
    }
    found
}

/// The root's re-exports: item name → the module it comes from
/// (`pub use tx::TxHandle;`, `pub use store::{Store, X};`).
fn reexports(root_code: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for (at, _) in root_code.match_indices("pub use ") {
        let stmt = &root_code[at + "pub use ".len()..];
        let stmt = &stmt[..stmt.find(';').unwrap_or(stmt.len())];
        let module = ident(stmt).to_string();
        let Some(items) = stmt
            .strip_prefix(&module)
            .and_then(|s| s.strip_prefix("::"))
        else {
            continue;
        };
        let items = items.trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            // `a::B`, `B as C`: the name it has at the root.
            let item = item.trim();
            let name = match item.split_once(" as ") {
                Some((_, alias)) => alias.trim(),
                None => item.rsplit("::").next().unwrap_or(item),
            };
            if !name.is_empty() {
                map.insert(name.to_string(), module.clone());
            }
        }
    }
    map
}

/// The top-level module a file belongs to (`None`: the crate root).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_string_lossy();
    let name = first.trim_end_matches(".rs").to_string();
    match name.as_str() {
        "lib" | "main" | "bin" => None,
        _ => Some(name),
    }
}

fn graph(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut modules = BTreeMap::new();
    let mut roots = String::new();
    for file in &files {
        let text = code(&std::fs::read_to_string(file).unwrap());
        match module_of(src, file) {
            Some(m) => modules.entry(m).or_insert_with(String::new).push_str(&text),
            None => roots.push_str(&text),
        }
    }
    let reexported = reexports(&roots);
    let mut graph = Graph::new();
    for (module, text) in &modules {
        let deps = graph.entry(module.clone()).or_default();
        for name in crate_paths(text) {
            let target = match reexported.get(&name) {
                Some(from) if !modules.contains_key(&name) => from.clone(),
                _ => name,
            };
            if target != *module && modules.contains_key(&target) {
                deps.insert(target);
            }
        }
    }
    graph
}

/// A circle in `graph`, as the modules along it (first = last), if any.
fn circle(graph: &Graph) -> Option<Vec<String>> {
    // Depth-first search; a module met again while still on the path
    // closes a circle.
    fn visit(
        graph: &Graph,
        module: &str,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| m == module) {
            let mut found = path[at..].to_vec();
            found.push(module.to_string());
            return Some(found);
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_string());
        for next in graph.get(module).into_iter().flatten() {
            if let Some(found) = visit(graph, next, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(module.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|m| visit(graph, m, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_has_a_circle_of_modules() {
    let mut circles = Vec::new();
    for dir in CRATES {
        let src = Path::new(ROOT).join(dir);
        assert!(src.is_dir(), "{dir} is not a directory");
        if let Some(found) = circle(&graph(&src)) {
            circles.push(format!("{dir}: {}", found.join(" → ")));
        }
    }
    assert!(
        circles.is_empty(),
        "modules that depend on each other, round a circle (move what they share into a leaf module):\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_scan_sees_dependencies() {
    let code = code("use crate::{a, b::C}; // crate::d\n/* crate::e */ let x = crate::f::g(); alkstore_crate::h");
    assert_eq!(crate_paths(&code), ["a", "b", "f"]);
    let root = reexports("pub use tx::TxHandle;\npub use store::{Stop, Store as S};");
    assert_eq!(root["TxHandle"], "tx");
    assert_eq!(root["S"], "store");
    let mut g = Graph::new();
    g.insert("a".into(), ["b".to_string()].into());
    g.insert("b".into(), ["c".to_string()].into());
    g.insert("c".into(), BTreeSet::new());
    assert_eq!(circle(&g), None);
    g.get_mut("c").unwrap().insert("a".into());
    assert_eq!(circle(&g).unwrap(), ["a", "b", "c", "a"]);
}
