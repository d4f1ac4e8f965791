//! `unsafe` stays in the modules that meet SQLite's pointers, as
//! `src/ffi.rs` says; every other module works on the safe types it makes.

use std::path::Path;

/// The modules that may hold `unsafe` (src/ffi.rs names each and why).
const BOUNDARY: &[&str] = &[
    "anchor.rs",
    "args.rs",
    "ffi.rs",
    "function.rs",
    "lib.rs",
    "routines.rs",
    "rusqlite_glue.rs",
    // SQLite's C declarations, generated.
    "sys/bindings.rs",
];

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn unsafe_stays_in_the_modules_that_meet_sqlites_pointers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let outside: Vec<String> = files
        .iter()
        .filter(|f| {
            let name = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
            !BOUNDARY.contains(&name.as_str())
                && std::fs::read_to_string(f)
                    .unwrap()
                    .lines()
                    .any(|l| !l.trim_start().starts_with("//") && l.contains("unsafe"))
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        outside.is_empty(),
        "unsafe outside the FFI boundary (src/ffi.rs lists it): {outside:?}"
    );
}
