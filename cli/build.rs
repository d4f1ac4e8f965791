//! Embeds the plain PostgreSQL install script (`alkstore install
//! --print-sql`), assembled from sql/postgres/ by the same script the test
//! command checks, so the binary needs no checkout to install.

use std::path::Path;
use std::process::Command;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("alkstore.plain.sql");
    let status = Command::new("bash")
        .arg(root.join("scripts/build-plain-sql.sh"))
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("bash runs scripts/build-plain-sql.sh");
    assert!(status.success(), "scripts/build-plain-sql.sh failed");
    for dir in [
        "sql/postgres",
        "sql/postgres/upgrade",
        "scripts",
        "scripts/lib",
        "pg_ext/src",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    println!(
        "cargo:rerun-if-changed={}",
        root.join("Cargo.toml").display()
    );
}
