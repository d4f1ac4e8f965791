//! In-process registration on a connection that another library opened on
//! the SQLite `libsqlite3-sys` links (rusqlite, sqlx): features `rusqlite`
//! and `libsqlite3-sys`.

use libsqlite3_sys as ffi;
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

/// SQLite hands its routine table only to extension entry points, so it is
/// borrowed once: a capturing auto-extension runs on a throwaway in-memory
/// connection, then is removed again. `None` if SQLite did not hand it over.
fn routines() -> Option<*mut ffi::sqlite3_api_routines> {
    static ONCE: Mutex<()> = Mutex::new(());
    let _guard = ONCE.lock().unwrap_or_else(|e| e.into_inner());
    if ROUTINES.load(Ordering::Acquire).is_null() {
        // SAFETY: plain SQLite C API calls; the throwaway handle is closed.
        unsafe {
            ffi::sqlite3_auto_extension(Some(capture));
            let mut db = std::ptr::null_mut();
            ffi::sqlite3_open(c":memory:".as_ptr(), &mut db);
            ffi::sqlite3_close(db);
            ffi::sqlite3_cancel_auto_extension(Some(capture));
        }
    }
    let api = ROUTINES.load(Ordering::Acquire);
    (!api.is_null()).then_some(api)
}

/// Registers every `alk_*` function on `db`, in-process: no shared library
/// is loaded and extension loading stays disabled. `Err` holds SQLite's
/// result code and what failed.
///
/// # Safety
///
/// `db` must be an open connection of the SQLite that `libsqlite3-sys`
/// links, used by no other thread during the call.
pub unsafe fn register_handle(db: *mut ffi::sqlite3) -> Result<(), (c_int, &'static str)> {
    let Some(api) = routines() else {
        return Err((
            ffi::SQLITE_ERROR,
            "alkstore: SQLite did not hand over its routine table",
        ));
    };
    // SAFETY: as the caller promised; `api` is that SQLite's routine table.
    match unsafe { crate::register_raw(db as *mut c_void, api as *mut c_void) } {
        0 => Ok(()),
        rc => Err((rc, "alkstore: registering the functions failed")),
    }
}
