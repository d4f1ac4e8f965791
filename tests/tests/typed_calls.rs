//! Issue 58 item 3: every `alk_*` call from Rust goes through the facade's
//! typed call layer (`facade/src/call.rs`), so each function is spelled
//! once there (with its catalogue row and its SQL) and a renamed or
//! re-typed function fails to compile, not at run time. A string literal
//! that names a catalogued function, or SQL in a literal that calls one,
//! anywhere else in the Rust crates that call the engines is a failure.
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

/// The one file where calls are spelled.
const CALL_LAYER: &str = "facade/src/call.rs";

/// Literals that name a function without calling it, each with its reason.
const NOT_CALLS: &[(&str, &str)] = &[
    // Reads PostgreSQL's error context, which names the procedure that
    // failed, to give `alk_sequence` in a transaction its contract error.
    ("facade/src/error.rs", "\"alk_sequence(\""),
];

/// The string literals of one line of code: the text between each pair of
/// unescaped double quotes (a line comment ends the code; `'"'` is a char).
fn literals(line: &str) -> Vec<&str> {
    let code = line.replace("'\"'", "'_'");
    let mut found = Vec::new();
    let (mut start, mut escaped) = (None, false);
    for (i, c) in code.char_indices() {
        match (start, c) {
            (None, '/') if code[i..].starts_with("//") => break,
            (None, '"') => start = Some(i + 1),
            (Some(_), '\\') if !escaped => {
                escaped = true;
                continue;
            }
            (Some(s), '"') if !escaped => {
                found.push(&line[s..i]);
                start = None;
            }
            _ => {}
        }
        escaped = false;
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
        for (n, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            // Comments may name functions; so may the dashboard's help text,
            // which shows them to the reader in `code` elements.
            if trimmed.starts_with("//")
                || trimmed.starts_with("code {")
                || line.contains(" code { \"")
            {
                continue;
            }
            for literal in literals(line) {
                let quoted = format!("\"{literal}\"");
                if raw_call(literal).is_some()
                    && !NOT_CALLS.iter().any(|(f, l)| *f == rel && *l == quoted)
                {
                    found.push(format!("{rel}:{}: {quoted}", n + 1));
                }
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
        "raw alk_* calls outside {CALL_LAYER} (add a constructor there and run it with \
         Store::run / AsyncStore::run / Call::run):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_raw_calls() {
    assert_eq!(
        literals(r#"store.call("alk_queues", &[])?; // "alk_locks""#),
        ["alk_queues"]
    );
    assert_eq!(
        literals(r#"let s = "a \"alk_x\" b"; let c = '"';"#),
        [r#"a \"alk_x\" b"#]
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
