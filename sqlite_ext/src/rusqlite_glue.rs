//! In-process registration on a rusqlite connection (feature `rusqlite`).

use rusqlite::ffi;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

static ROUTINES: AtomicPtr<ffi::sqlite3_api_routines> = AtomicPtr::new(std::ptr::null_mut());

unsafe extern "C" fn capture(
    _db: *mut ffi::sqlite3,
    _err: *mut *mut c_char,
    api: *const ffi::sqlite3_api_routines,
) -> c_int {
    ROUTINES.store(api as *mut _, Ordering::Release);
    0
}

/// SQLite hands its routine table only to extension entry points, so borrow
/// it once: register a capturing auto-extension, open a throwaway in-memory
/// connection (which runs it), and remove it again.
fn routines() -> rusqlite::Result<*mut ffi::sqlite3_api_routines> {
    static ONCE: Mutex<()> = Mutex::new(());
    let _guard = ONCE.lock().unwrap_or_else(|e| e.into_inner());
    let api = ROUTINES.load(Ordering::Acquire);
    if !api.is_null() {
        return Ok(api);
    }
    unsafe {
        ffi::sqlite3_auto_extension(Some(capture));
        let opened = rusqlite::Connection::open_in_memory();
        ffi::sqlite3_cancel_auto_extension(Some(capture));
        opened?;
    }
    let api = ROUTINES.load(Ordering::Acquire);
    if api.is_null() {
        return Err(rusqlite::Error::SqliteFailure(
            ffi::Error::new(ffi::SQLITE_ERROR),
            Some("alkstore: SQLite did not hand over its routine table".into()),
        ));
    }
    Ok(api)
}

/// Registers every `alk_*` function on `conn`, in-process: no shared library
/// is loaded and extension loading stays disabled.
pub fn register(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    let api = routines()?;
    let rc = unsafe { crate::register_raw(conn.handle() as *mut c_void, api as *mut c_void) };
    if rc != 0 {
        return Err(rusqlite::Error::SqliteFailure(
            ffi::Error::new(rc),
            Some("alkstore: registering functions failed".into()),
        ));
    }
    Ok(())
}
