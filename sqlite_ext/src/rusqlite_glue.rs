//! In-process registration on a rusqlite connection (feature `rusqlite`).

use rusqlite::ffi;

/// Registers every `alk_*` function on `conn`, in-process: no shared library
/// is loaded and extension loading stays disabled.
pub fn register(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    // SAFETY: rusqlite's connection is open and of the SQLite rusqlite links
    // (through the same libsqlite3-sys); `&Connection` is not shared across
    // threads during the call.
    unsafe { crate::routines::register_handle(conn.handle()) }.map_err(|(rc, what)| {
        rusqlite::Error::SqliteFailure(ffi::Error::new(rc), Some(what.into()))
    })
}
