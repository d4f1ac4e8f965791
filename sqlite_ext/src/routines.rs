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

/// A parameter of, or the result of, [`query_one_handle`].
#[derive(Debug, Clone, PartialEq)]
pub enum HandleValue {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Real(f64),
    /// Text.
    Text(String),
    /// A blob (only ever a result).
    Blob(Vec<u8>),
}

/// A failed [`query_one_handle`]: SQLite's extended result code and its
/// message (an `alk_*` function's error text as it raised it).
#[derive(Debug, Clone, PartialEq)]
pub struct HandleError {
    /// The extended result code (`SQLITE_BUSY`: 5, …).
    pub code: c_int,
    /// `sqlite3_errmsg` at the failure.
    pub message: String,
}

/// Whether `e` is SQLite saying another connection holds the lock
/// (`SQLITE_BUSY`, `SQLITE_LOCKED` and their extended codes).
pub fn is_busy(e: &HandleError) -> bool {
    matches!(e.code & 0xff, ffi::SQLITE_BUSY | ffi::SQLITE_LOCKED)
}

/// [`query_one_handle`] that does not wait for a lock another connection
/// holds: the connection's busy timeout is 0 for the statement and set
/// back after; [`is_busy`] says the statement met one. An `alk_*` call that
/// fails so has changed nothing (it takes the write lock before its first
/// write), so the caller may run it again where waiting is harmless.
///
/// # Safety
///
/// As [`query_one_handle`].
pub unsafe fn query_one_handle_nowait(
    db: *mut ffi::sqlite3,
    sql: &str,
    params: &[HandleValue],
) -> Result<HandleValue, HandleError> {
    // SAFETY: as the caller promised.
    let timeout = match unsafe { query_one_handle(db, "PRAGMA busy_timeout", &[]) }? {
        HandleValue::Int(ms) => ms as c_int,
        _ => 0,
    };
    // SAFETY: as the caller promised; the timeout is set back either way.
    unsafe {
        ffi::sqlite3_busy_timeout(db, 0);
        let out = query_one_handle(db, sql, params);
        ffi::sqlite3_busy_timeout(db, timeout);
        out
    }
}

/// Runs one statement `sql` that returns one row of one column (`SELECT
/// alk_claim(?1, ?2, ?3)`) on `db` with `params`, on the calling thread,
/// and returns that column: the prepare, bind and step a driver would do,
/// without its machinery around them.
///
/// # Safety
///
/// `db` must be an open connection of the SQLite that `libsqlite3-sys`
/// links, used by no other thread during the call.
pub unsafe fn query_one_handle(
    db: *mut ffi::sqlite3,
    sql: &str,
    params: &[HandleValue],
) -> Result<HandleValue, HandleError> {
    let mut stmt = std::ptr::null_mut();
    // SAFETY: `db` as the caller promised; `sql` is read up to its length.
    let rc = unsafe {
        ffi::sqlite3_prepare_v2(
            db,
            sql.as_ptr() as *const c_char,
            sql.len() as c_int,
            &mut stmt,
            std::ptr::null_mut(),
        )
    };
    if rc != ffi::SQLITE_OK || stmt.is_null() {
        // SAFETY: as above (SQLite has nothing to finalize then).
        return Err(unsafe { handle_error(db) });
    }
    // SAFETY: `stmt` is the statement just prepared on `db`, finalized
    // exactly once below; parameters are copied by SQLite (TRANSIENT).
    let result = unsafe { bind_and_step(db, stmt, params) };
    // SAFETY: as above.
    unsafe { ffi::sqlite3_finalize(stmt) };
    result
}

/// SQLite's last error on `db`.
///
/// # Safety
///
/// `db` must be an open connection, used by no other thread.
unsafe fn handle_error(db: *mut ffi::sqlite3) -> HandleError {
    // SAFETY: as the caller promised; the message is copied at once.
    unsafe {
        HandleError {
            code: ffi::sqlite3_extended_errcode(db),
            message: std::ffi::CStr::from_ptr(ffi::sqlite3_errmsg(db))
                .to_string_lossy()
                .into_owned(),
        }
    }
}

/// Binds `params` to `stmt`, steps it to its end and returns its first
/// row's first column (NULL without a row).
///
/// # Safety
///
/// `stmt` must be a live statement prepared on `db`, both used by no other
/// thread.
unsafe fn bind_and_step(
    db: *mut ffi::sqlite3,
    stmt: *mut ffi::sqlite3_stmt,
    params: &[HandleValue],
) -> Result<HandleValue, HandleError> {
    // SAFETY: as the caller promised; bound bytes are copied
    // (SQLITE_TRANSIENT); column pointers are read before the next step
    // invalidates them.
    unsafe {
        for (i, p) in params.iter().enumerate() {
            let i = i as c_int + 1;
            let rc = match p {
                HandleValue::Null => ffi::sqlite3_bind_null(stmt, i),
                HandleValue::Int(v) => ffi::sqlite3_bind_int64(stmt, i, *v),
                HandleValue::Real(v) => ffi::sqlite3_bind_double(stmt, i, *v),
                HandleValue::Text(v) => ffi::sqlite3_bind_text64(
                    stmt,
                    i,
                    v.as_ptr() as *const c_char,
                    v.len() as u64,
                    ffi::SQLITE_TRANSIENT(),
                    ffi::SQLITE_UTF8 as u8,
                ),
                HandleValue::Blob(v) => ffi::sqlite3_bind_blob64(
                    stmt,
                    i,
                    v.as_ptr() as *const c_void,
                    v.len() as u64,
                    ffi::SQLITE_TRANSIENT(),
                ),
            };
            if rc != ffi::SQLITE_OK {
                return Err(handle_error(db));
            }
        }
        match ffi::sqlite3_step(stmt) {
            ffi::SQLITE_ROW => {}
            ffi::SQLITE_DONE => return Ok(HandleValue::Null),
            _ => return Err(handle_error(db)),
        }
        let bytes = |p: *const u8| {
            let n = ffi::sqlite3_column_bytes(stmt, 0) as usize;
            if p.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(p, n).to_vec()
            }
        };
        let value = match ffi::sqlite3_column_type(stmt, 0) {
            ffi::SQLITE_NULL => HandleValue::Null,
            ffi::SQLITE_INTEGER => HandleValue::Int(ffi::sqlite3_column_int64(stmt, 0)),
            ffi::SQLITE_FLOAT => HandleValue::Real(ffi::sqlite3_column_double(stmt, 0)),
            ffi::SQLITE_TEXT => HandleValue::Text(
                String::from_utf8_lossy(&bytes(ffi::sqlite3_column_text(stmt, 0))).into_owned(),
            ),
            _ => HandleValue::Blob(bytes(ffi::sqlite3_column_blob(stmt, 0) as *const u8)),
        };
        // Run to the end: the statement's work (and any error) is done.
        match ffi::sqlite3_step(stmt) {
            ffi::SQLITE_DONE | ffi::SQLITE_ROW => Ok(value),
            _ => Err(handle_error(db)),
        }
    }
}

/// A connection of alkstore's own on the SQLite `libsqlite3-sys` links, with
/// the functions registered: for callers that run the hot calls on the
/// calling thread rather than through a driver's connection thread (the
/// async store on SQLite). Used by one thread at a time.
pub struct HandleConn(std::ptr::NonNull<ffi::sqlite3>);

// SAFETY: opened without SQLite's own mutex (SQLITE_OPEN_NOMUTEX) and used
// by one thread at a time (`&mut self` for every call); a connection may
// move between threads.
unsafe impl Send for HandleConn {}

impl HandleConn {
    /// Opens the database file at `path` (it must exist, with alkstore's
    /// schema: the caller's pool made it), `synchronous = NORMAL`, the busy
    /// timeout `busy_timeout_ms`, the `alk_*` functions registered.
    pub fn open(path: &str, busy_timeout_ms: c_int) -> Result<HandleConn, HandleError> {
        let path = std::ffi::CString::new(path).map_err(|_| HandleError {
            code: ffi::SQLITE_MISUSE,
            message: "alkstore: a database path with a NUL byte".into(),
        })?;
        let mut db = std::ptr::null_mut();
        // SAFETY: plain SQLite C API calls on the handle opened here; it is
        // closed on every failure path (sqlite3_open_v2 hands a handle back
        // even when it fails).
        unsafe {
            let rc = ffi::sqlite3_open_v2(
                path.as_ptr(),
                &mut db,
                ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_NOMUTEX,
                std::ptr::null(),
            );
            let Some(handle) = std::ptr::NonNull::new(db) else {
                return Err(HandleError {
                    code: rc,
                    message: "alkstore: out of memory opening the database".into(),
                });
            };
            let conn = HandleConn(handle);
            if rc != ffi::SQLITE_OK {
                return Err(handle_error(db));
            }
            ffi::sqlite3_busy_timeout(db, busy_timeout_ms);
            query_one_handle(db, "PRAGMA synchronous = NORMAL", &[])?;
            register_handle(db).map_err(|(code, what)| HandleError {
                code,
                message: what.into(),
            })?;
            Ok(conn)
        }
    }

    /// [`query_one_handle_nowait`] on this connection.
    pub fn query_one_nowait(
        &mut self,
        sql: &str,
        params: &[HandleValue],
    ) -> Result<HandleValue, HandleError> {
        // SAFETY: open, registered, and ours alone for the call (`&mut`).
        unsafe { query_one_handle_nowait(self.0.as_ptr(), sql, params) }
    }
}

impl Drop for HandleConn {
    fn drop(&mut self) {
        // SAFETY: the handle opened in `open`, closed once; alkstore's
        // cached statements are finalized by their anchor (anchor.rs) before
        // SQLite checks for open ones.
        unsafe { ffi::sqlite3_close(self.0.as_ptr()) };
    }
}
