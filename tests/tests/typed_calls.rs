//! Issue 58 items 3 and 5: every `alk_*` call from Rust goes through the
//! facade's call layer, whose constructor per function
//! (`facade/src/generated/functions.rs`) `cargo xtask codegen` writes from
//! the catalogue, so each function is spelled once (its catalogue row) and
//! a renamed or re-typed function fails to compile, not at run time. A
//! string literal that names a catalogued function, or SQL in a literal
//! that calls one, anywhere else in the Rust crates that call the engines
//! (`facade/src/call.rs`'s typed constructors included) is a failure.
//!
//! The engines themselves (`sqlite_ext`, `pg_ext`), the catalogue and the
//! code generator define the functions and are not scanned; nor are tests,
//! benches and examples, which call the SQL API as users do.

use alkstore_core::catalogue::FUNCTIONS;
use alkstore_tests::{rust_files, ROOT};
use std::path::Path;

/// The source trees of the crates that call the engines.
const SCANNED: &[&str] = &[
    "facade/src",
    "web/src",
    "cli/src",
    "relay/src",
    "testkit/src",
];

/// The one file where calls are spelled, written from the catalogue.
const CALL_LAYER: &str = "facade/src/generated/functions.rs";

/// Literals that name a function without calling it (the file, and text
/// the literal holds), each with its reason.
const NOT_CALLS: &[(&str, &str)] = &[
    // Reads PostgreSQL's error context, which names the procedure that
    // failed, to give `alk_sequence` and `alk_maintain` in a transaction
    // their contract error, whose message tells how to call them.
    ("facade/src/error.rs", "alk_sequence("),
    ("facade/src/error.rs", "alk_maintain("),
];

/// The string literals of a file, each with the line it starts on: the
/// text between unescaped double quotes, raw strings (`r#"…"#`) included,
/// across lines; comments and char literals (`'"'`) are skipped. Literals
/// right after `code { ` (the dashboard's help text) are left out.
fn literals(text: &str) -> Vec<(usize, &str)> {
    let b = text.as_bytes();
    let (mut found, mut i, mut line) = (Vec::new(), 0, 1);
    while i < b.len() {
        match b[i] {
            b'\n' => line += 1,
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
                line += text[i..end].matches('\n').count();
                i = end;
                continue;
            }
            b'\'' if b.get(i + 1) == Some(&b'\\') => {
                i += text[i + 2..].find('\'').map_or(b.len(), |e| e + 3);
                continue;
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') => {
                i += 3;
                continue;
            }
            b'r' if (b.get(i + 1) == Some(&b'#') || b.get(i + 1) == Some(&b'"'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let hashes = text[i + 1..].bytes().take_while(|&c| c == b'#').count();
                if b.get(i + 1 + hashes) == Some(&b'"') {
                    let start = i + 2 + hashes;
                    let close = format!("\"{}", "#".repeat(hashes));
                    let end = text[start..].find(&close).map_or(b.len(), |e| start + e);
                    found.push((line, &text[start..end]));
                    line += text[start..end].matches('\n').count();
                    i = end + close.len();
                    continue;
                }
            }
            b'"' => {
                let start = i + 1;
                let mut j = start;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let end = j.min(b.len());
                if !text[..i].ends_with("code { ") {
                    found.push((line, &text[start..end]));
                }
                line += text[start..end].matches('\n').count();
                i = end + 1;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

/// What is wrong with one literal: it is a catalogued function's name, or
/// SQL that calls one.
fn raw_call(literal: &str) -> Option<&'static str> {
    FUNCTIONS.iter().map(|f| f.name).find(|name| {
        literal == *name
            || literal
                .match_indices(name)
                .any(|(at, _)| literal[at + name.len()..].starts_with('('))
    })
}

/// Every raw call outside the call layer, as "file:line: literal".
fn raw_calls() -> Vec<String> {
    let root = Path::new(ROOT);
    let mut files = Vec::new();
    for dir in SCANNED {
        rust_files(&root.join(dir), &mut files);
    }
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel == CALL_LAYER {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, literal) in literals(&text) {
            if raw_call(literal).is_some()
                && !NOT_CALLS
                    .iter()
                    .any(|(f, l)| *f == rel && literal.contains(l))
            {
                found.push(format!("{rel}:{line}: \"{literal}\""));
            }
        }
    }
    found
}

#[test]
fn every_call_outside_the_call_layer_is_typed() {
    let found = raw_calls();
    assert!(
        found.is_empty(),
        "raw alk_* calls outside {CALL_LAYER} (call the function's constructor in \
         alkstore::call::functions, or a typed one of alkstore::call built on it, and run it \
         with Store::run / AsyncStore::run / Call::run):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_raw_calls() {
    let text = "store.call(\"alk_queues\", &[])?; // \"alk_locks\"\n\
                let s = \"a \\\"alk_x\\\" b\"; let c = '\"'; let d = '\\'';\n\
                /* \"alk_y\" */ let q = r#\"SELECT\n alk_version()\"#;\n\
                code { \"alk_get_job\" } let l: &'static str = \"z\";";
    assert_eq!(
        literals(text),
        [
            (1, "alk_queues"),
            (2, r#"a \"alk_x\" b"#),
            (3, "SELECT\n alk_version()"),
            (5, "z")
        ]
    );
    assert_eq!(raw_call("alk_queues"), Some("alk_queues"));
    assert_eq!(raw_call("SELECT alk_version()::text"), Some("alk_version"));
    assert_eq!(raw_call("alk_id"), None, "a field name, not a function");
    assert_eq!(raw_call("alk_queues are listed"), None);
    // Every scanned tree exists, so a moved crate cannot hide from the scan.
    for dir in SCANNED {
        assert!(
            Path::new(ROOT).join(dir).is_dir(),
            "{dir} is not a directory"
        );
    }
}
