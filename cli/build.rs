//! Embeds the plain PostgreSQL install script (`alkstore install
//! --print-sql`), assembled from sql/postgres/ by the same code as `cargo
//! xtask plain-sql`, so the binary needs no checkout to install.

use std::path::Path;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("alkstore.plain.sql");
    let build = xtask::Build::new(&root).unwrap_or_else(|e| panic!("{e}"));
    let text = build
        .plain_sql("alkstore.plain.sql")
        .unwrap_or_else(|e| panic!("{e}"));
    xtask::write_atomically(&out, &text).unwrap_or_else(|e| panic!("{e}"));
    for path in build.inputs() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
