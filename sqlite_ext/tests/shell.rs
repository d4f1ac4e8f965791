//! The built library loads into real clients: Debian's `sqlite3` shell
//! (a 3.40 host) and Python's `sqlite3` module. Each runs a checked-in
//! script whose output must match the expected file exactly, so the
//! README's commands cannot rot.
//!
//! The library tested is `$ALKSTORE_SQLITE_LIB` if set (the test script
//! points it at the release build), else the one cargo built beside this
//! test binary.

use std::path::{Path, PathBuf};
use std::process::Command;

fn library() -> PathBuf {
    if let Ok(lib) = std::env::var("ALKSTORE_SQLITE_LIB") {
        return PathBuf::from(lib);
    }
    let exe = std::env::current_exe().unwrap();
    let lib = exe.parent().unwrap().join("libalkstore_sqlite.so");
    assert!(lib.exists(), "{} not built", lib.display());
    lib
}

fn here(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/shell")
        .join(file)
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e} (is it installed?)"));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_sqlite3_shell_runs_a_job_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    // The documented `.load ./libalkstore_sqlite` resolves in the working directory.
    std::fs::copy(library(), dir.path().join("libalkstore_sqlite.so")).unwrap();
    let script = here("roundtrip.sql");
    let got = run(Command::new("sh")
        .arg("-c")
        .arg(format!("sqlite3 app.db < '{}' 2>&1", script.display()))
        .current_dir(dir.path()));
    let want = std::fs::read_to_string(here("roundtrip.expected")).unwrap();
    assert_eq!(got, want, "sqlite3 output differs from roundtrip.expected");
    let version = run(Command::new("sqlite3").arg("--version"));
    assert!(version.starts_with("3."), "{version}");
}

#[test]
fn python_loads_the_extension_and_runs_a_job_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    // Debian's python3: its sqlite3 module allows extension loading.
    let got = run(Command::new("/usr/bin/python3")
        .arg(here("roundtrip.py"))
        .arg(library())
        .arg(dir.path().join("app.db"))
        .env("PYTHONDONTWRITEBYTECODE", "1"));
    assert_eq!(
        got,
        "sending welcome mail to ada@example.com attempt 1\n\
         acked: True\n\
         error: alkstore ALK02 ReservedName: queue name \"__alkstore_x\" starts with the reserved prefix \"__alkstore_\"\n\
         signups: 1\n"
    );
}
