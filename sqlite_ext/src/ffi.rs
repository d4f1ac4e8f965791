//! The thin layer over SQLite's routine table that the functions need:
//! prepared statements, argument values and results.
//!
//! Every call goes through the routine table SQLite handed the entry point
//! (or the host connection's library), kept here, set before anything else
//! runs.

use crate::sys::{sqlite3, sqlite3_api_routines, sqlite3_context, sqlite3_stmt, sqlite3_value};
use crate::sys::{SQLITE_DONE, SQLITE_NULL, SQLITE_ROW};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicPtr, Ordering};

static API: AtomicPtr<sqlite3_api_routines> = AtomicPtr::new(std::ptr::null_mut());

/// `SQLITE_TRANSIENT`: SQLite copies the bytes before the call returns.
fn transient() -> Option<unsafe extern "C" fn(*mut c_void)> {
    Some(unsafe { std::mem::transmute::<isize, unsafe extern "C" fn(*mut c_void)>(-1) })
}

/// Stores the routine table; must run before any other function here.
///
/// # Safety
/// `api` must be the table SQLite handed to an extension entry point.
pub unsafe fn set_api(api: *mut sqlite3_api_routines) {
    if !api.is_null() {
        API.store(api, Ordering::Release);
    }
}

macro_rules! api {
    ($f:ident) => {
        (*API.load(Ordering::Acquire))
            .$f
            .expect(concat!("SQLite routine ", stringify!($f)))
    };
}

/// An error SQLite itself reported, with its extended result code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbError {
    /// Extended result code (`SQLITE_BUSY`, `SQLITE_READONLY`, …).
    pub code: c_int,
    /// SQLite's message.
    pub message: String,
}

impl DbError {
    unsafe fn from_db(db: *mut sqlite3, rc: c_int) -> DbError {
        let ext = api!(extended_errcode)(db);
        let msg = api!(errmsg)(db);
        let message = if msg.is_null() {
            format!("SQLite error {rc}")
        } else {
            CStr::from_ptr(msg).to_string_lossy().into_owned()
        };
        // The connection's code may belong to a later call; trust rc's primary code.
        let code = if ext & 0xff == rc & 0xff { ext } else { rc };
        DbError { code, message }
    }
}

/// Result of one `sqlite3_step`.
pub enum Step {
    /// A row is available through the column accessors.
    Row,
    /// The statement ran to completion.
    Done,
}

/// A prepared statement on the connection the function was called on.
pub struct Stmt {
    raw: *mut sqlite3_stmt,
    db: *mut sqlite3,
}

// Statements move with their connection state, which SQLite only ever uses
// under the connection's own mutex.
unsafe impl Send for Stmt {}

impl Stmt {
    /// Compiles one SQL statement.
    pub fn prepare(db: *mut sqlite3, sql: &str) -> Result<Stmt, DbError> {
        match Stmt::prepare_first(db, sql)? {
            (Some(stmt), _) => Ok(stmt),
            (None, _) => Err(DbError {
                code: 1,
                message: format!("alkstore: empty SQL statement: {sql:?}"),
            }),
        }
    }

    /// Compiles the first statement of `sql` (`None` if only comments or
    /// blanks remain) and returns the text after it.
    pub fn prepare_first(db: *mut sqlite3, sql: &str) -> Result<(Option<Stmt>, &str), DbError> {
        let mut raw = std::ptr::null_mut();
        let mut tail: *const c_char = std::ptr::null();
        unsafe {
            let rc = api!(prepare_v2)(
                db,
                sql.as_ptr() as *const c_char,
                sql.len() as c_int,
                &mut raw,
                &mut tail,
            );
            if rc != 0 {
                if !raw.is_null() {
                    api!(finalize)(raw);
                }
                return Err(DbError::from_db(db, rc));
            }
        }
        let used = if tail.is_null() {
            sql.len()
        } else {
            tail as usize - sql.as_ptr() as usize
        };
        let rest = &sql[used.min(sql.len())..];
        Ok(((!raw.is_null()).then_some(Stmt { raw, db }), rest))
    }

    /// Runs every statement of a script, in order.
    pub fn exec_script(db: *mut sqlite3, mut sql: &str) -> Result<(), DbError> {
        loop {
            match Stmt::prepare_first(db, sql)? {
                (Some(mut stmt), rest) => {
                    stmt.run()?;
                    sql = rest;
                }
                (None, _) => return Ok(()),
            }
        }
    }

    /// Binds text to the 1-based parameter `i`.
    pub fn bind_text(&mut self, i: c_int, v: &str) {
        // 64-bit length: no cast can wrap; SQLite itself refuses text over
        // its length limit (SQLITE_TOOBIG at the step).
        unsafe {
            api!(bind_text64)(
                self.raw,
                i,
                v.as_ptr() as *const c_char,
                v.len() as u64,
                transient(),
                crate::sys::SQLITE_UTF8 as _,
            )
        };
    }

    /// Binds an integer.
    pub fn bind_i64(&mut self, i: c_int, v: i64) {
        unsafe { api!(bind_int64)(self.raw, i, v) };
    }

    /// Binds SQL NULL.
    pub fn bind_null(&mut self, i: c_int) {
        unsafe { api!(bind_null)(self.raw, i) };
    }

    /// Binds text or NULL.
    pub fn bind_opt_text(&mut self, i: c_int, v: Option<&str>) {
        match v {
            Some(v) => self.bind_text(i, v),
            None => self.bind_null(i),
        }
    }

    /// Binds an integer or NULL.
    pub fn bind_opt_i64(&mut self, i: c_int, v: Option<i64>) {
        match v {
            Some(v) => self.bind_i64(i, v),
            None => self.bind_null(i),
        }
    }

    /// Runs the statement to its next row.
    pub fn step(&mut self) -> Result<Step, DbError> {
        let rc = unsafe { api!(step)(self.raw) };
        match rc as u32 {
            SQLITE_ROW => Ok(Step::Row),
            SQLITE_DONE => Ok(Step::Done),
            _ => {
                // reset() reports the statement's real error code with prepare_v2.
                let reset_rc = unsafe { api!(reset)(self.raw) };
                let mut e =
                    unsafe { DbError::from_db(self.db, if reset_rc != 0 { reset_rc } else { rc }) };
                if e.code == 0 {
                    e = DbError {
                        code: rc,
                        message: format!("SQLite step failed with code {rc}"),
                    };
                }
                Err(e)
            }
        }
    }

    /// Steps once and tells whether a row came back.
    pub fn step_row(&mut self) -> Result<bool, DbError> {
        Ok(matches!(self.step()?, Step::Row))
    }

    /// Runs to completion, ignoring rows.
    pub fn run(&mut self) -> Result<(), DbError> {
        while self.step_row()? {}
        Ok(())
    }

    /// Column `i` of the current row as an integer.
    pub fn i64(&self, i: c_int) -> i64 {
        unsafe { api!(column_int64)(self.raw, i) }
    }

    /// Column `i` as an integer, `None` when NULL.
    pub fn opt_i64(&self, i: c_int) -> Option<i64> {
        (!self.is_null(i)).then(|| self.i64(i))
    }

    /// Whether column `i` is NULL.
    pub fn is_null(&self, i: c_int) -> bool {
        unsafe { api!(column_type)(self.raw, i) == SQLITE_NULL as c_int }
    }

    /// Column `i` as text (`""` for NULL); valid until the next step or reset.
    pub fn text(&self, i: c_int) -> &str {
        unsafe {
            let p = api!(column_text)(self.raw, i);
            let n = api!(column_bytes)(self.raw, i);
            if p.is_null() {
                return "";
            }
            let bytes = std::slice::from_raw_parts(p, n as usize);
            // We only ever store text that arrived as valid UTF-8.
            std::str::from_utf8(bytes).unwrap_or("")
        }
    }

    /// Column `i` as text, `None` when NULL.
    pub fn opt_text(&self, i: c_int) -> Option<&str> {
        (!self.is_null(i)).then(|| self.text(i))
    }

    /// Ends the current run and clears bindings, ready for the next use.
    pub fn reset(&mut self) {
        unsafe {
            api!(reset)(self.raw);
            api!(clear_bindings)(self.raw);
        }
    }
}

impl Drop for Stmt {
    fn drop(&mut self) {
        unsafe { api!(finalize)(self.raw) };
    }
}

/// Rows changed by the connection's most recent INSERT, UPDATE or DELETE.
pub fn changes(db: *mut sqlite3) -> i64 {
    unsafe { api!(changes)(db) as i64 }
}

/// The rowid of the connection's most recent INSERT.
pub fn last_insert_rowid(db: *mut sqlite3) -> i64 {
    unsafe { api!(last_insert_rowid)(db) }
}

/// How the connection stands when a function is called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnState {
    /// Inside the caller's explicit transaction (BEGIN … / SAVEPOINT).
    Explicit,
    /// Autocommit, and the calling statement holds no transaction.
    AutocommitIdle,
    /// Autocommit, and the calling statement holds a read transaction.
    AutocommitReading,
    /// Autocommit, and the calling statement is itself writing.
    AutocommitWriting,
}

/// Where the connection stands (see [`TxnState`]).
pub fn txn_state(db: *mut sqlite3) -> TxnState {
    unsafe {
        if api!(get_autocommit)(db) == 0 {
            return TxnState::Explicit;
        }
        match api!(txn_state)(db, std::ptr::null()) as u32 {
            crate::sys::SQLITE_TXN_NONE => TxnState::AutocommitIdle,
            crate::sys::SQLITE_TXN_READ => TxnState::AutocommitReading,
            _ => TxnState::AutocommitWriting,
        }
    }
}

/// Whether the connection holds the write lock (a write transaction).
pub fn holds_write_lock(db: *mut sqlite3) -> bool {
    unsafe { api!(txn_state)(db, std::ptr::null()) as u32 == crate::sys::SQLITE_TXN_WRITE }
}

/// The connection a function was called on.
pub fn context_db(ctx: *mut sqlite3_context) -> *mut sqlite3 {
    unsafe { api!(context_db_handle)(ctx) }
}

/// The application pointer given at registration.
pub fn user_data(ctx: *mut sqlite3_context) -> *mut c_void {
    unsafe { api!(user_data)(ctx) }
}

/// One SQL argument of a function call.
#[derive(Clone, Copy)]
pub struct Arg(pub *mut sqlite3_value);

/// The storage class of a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// INTEGER
    Integer,
    /// REAL
    Real,
    /// TEXT
    Text,
    /// BLOB
    Blob,
    /// NULL
    Null,
}

impl Arg {
    /// The value's storage class.
    pub fn kind(self) -> Kind {
        match unsafe { api!(value_type)(self.0) } {
            1 => Kind::Integer,
            2 => Kind::Real,
            3 => Kind::Text,
            4 => Kind::Blob,
            _ => Kind::Null,
        }
    }

    /// The value as bytes of text (length-aware: NUL bytes are kept).
    pub fn text_bytes(self) -> &'static [u8] {
        unsafe {
            let p = api!(value_text)(self.0);
            let n = api!(value_bytes)(self.0);
            if p.is_null() {
                return &[];
            }
            std::slice::from_raw_parts(p, n as usize)
        }
    }

    /// The value as an integer.
    pub fn i64(self) -> i64 {
        unsafe { api!(value_int64)(self.0) }
    }

    /// The value as a float.
    pub fn f64(self) -> f64 {
        unsafe { api!(value_double)(self.0) }
    }
}

/// Sets the function's result to text.
pub fn result_text(ctx: *mut sqlite3_context, v: &str) {
    // 64-bit length: over SQLite's length limit this is SQLITE_TOOBIG, never
    // an over-read or a truncation (callers size their results to fit first).
    unsafe {
        api!(result_text64)(
            ctx,
            v.as_ptr() as *const c_char,
            v.len() as u64,
            transient(),
            crate::sys::SQLITE_UTF8 as _,
        )
    };
}

/// The longest text or blob this connection accepts (`SQLITE_LIMIT_LENGTH`).
pub fn length_limit(db: *mut sqlite3) -> usize {
    unsafe { api!(limit)(db, crate::sys::SQLITE_LIMIT_LENGTH as c_int, -1) }.max(0) as usize
}

/// Sets the function's result to an integer.
pub fn result_i64(ctx: *mut sqlite3_context, v: i64) {
    unsafe { api!(result_int64)(ctx, v) };
}

/// Sets the function's result to NULL.
pub fn result_null(ctx: *mut sqlite3_context) {
    unsafe { api!(result_null)(ctx) };
}

/// Makes the call fail with `message` and result code `code`.
pub fn result_error(ctx: *mut sqlite3_context, message: &str, code: c_int) {
    unsafe {
        api!(result_error)(
            ctx,
            message.as_ptr() as *const c_char,
            message.len() as c_int,
        );
        // After result_error, so the message is kept and only the code changes.
        api!(result_error_code)(ctx, code);
    }
}

/// Registers a scalar function (UTF-8, and on purpose never deterministic,
/// innocuous or direct-only: these functions write).
///
/// # Safety
/// `app` must stay valid until `destroy` is called with it.
pub unsafe fn create_function(
    db: *mut sqlite3,
    name: &CStr,
    n_args: c_int,
    app: *mut c_void,
    func: unsafe extern "C" fn(*mut sqlite3_context, c_int, *mut *mut sqlite3_value),
    destroy: unsafe extern "C" fn(*mut c_void),
) -> c_int {
    api!(create_function_v2)(
        db,
        name.as_ptr(),
        n_args,
        crate::sys::SQLITE_UTF8 as c_int,
        app,
        Some(func),
        None,
        None,
        Some(destroy),
    )
}

/// The raw routine table, for the virtual-table anchor in `conn`.
pub fn routines() -> *mut sqlite3_api_routines {
    API.load(Ordering::Acquire)
}
