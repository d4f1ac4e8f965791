//! Types and constants of SQLite's `sqlite3ext.h`, for `sqlite-loadable`.
//!
//! This replaces crates.io's `sqlite3ext-sys` (see the workspace's
//! `[patch.crates-io]`): that crate compiles a whole SQLite, whose symbols
//! clash with rusqlite's bundled SQLite when both link into one binary.
//! Here there is no C code and no extern function: an extension reaches
//! SQLite only through the `sqlite3_api_routines` table it is handed.
//! `generate.sh` regenerates `bindings.rs`.
#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
#![allow(clippy::all)]

include!("bindings.rs");
