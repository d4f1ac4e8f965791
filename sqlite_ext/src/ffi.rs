//! The thin layer over SQLite's routine table that the functions need:
//! connections, prepared statements, argument values and results.
//!
//! Every call goes through the routine table SQLite handed the entry point
//! (or the host connection's library), kept here, set before anything else
//! runs. Raw pointers stop at the modules SQLite calls into or hands
//! pointers to — this one; `anchor.rs` (the virtual table SQLite calls
//! back); `function.rs`'s dispatch and `args.rs` (a function call's
//! context and arguments); `lib.rs`'s entry points, `routines.rs` (the
//! routine table of a host library, in-process) and `rusqlite_glue.rs` (a
//! rusqlite connection's handle) — and the rest of the
//! engine holds a [`Db`] (an open connection), a [`Ctx`] (one function
//! call's result slot) or an [`Arg`] (one argument, borrowed for the
//! call), each made from a pointer only by an `unsafe` constructor that
//! states what the pointer must be.

use crate::sys::{sqlite3, sqlite3_api_routines, sqlite3_context, sqlite3_stmt, sqlite3_value};
use crate::sys::{SQLITE_DONE, SQLITE_NULL, SQLITE_ROW};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, Ordering};

static API: AtomicPtr<sqlite3_api_routines> = AtomicPtr::new(std::ptr::null_mut());

/// `SQLITE_TRANSIENT`: SQLite copies the bytes before the call returns.
fn transient() -> Option<unsafe extern "C" fn(*mut c_void)> {
    // SAFETY: SQLite defines SQLITE_TRANSIENT as the destructor pointer -1,
    // a sentinel it compares against and never calls.
    Some(unsafe { std::mem::transmute::<isize, unsafe extern "C" fn(*mut c_void)>(-1) })
}

/// Stores the routine table; must run before any other function here.
///
/// # Safety
/// `api` must be the table SQLite handed to an extension entry point (it
/// lives as long as the SQLite library, so for the rest of the process).
pub unsafe fn set_api(api: *mut sqlite3_api_routines) {
    if !api.is_null() {
        API.store(api, Ordering::Release);
    }
}

/// The routine table. Every value of [`Db`], [`Ctx`] and [`Arg`] exists only
/// after [`set_api`] ran (their constructors require it), so it is set.
fn api() -> &'static sqlite3_api_routines {
    let api = API.load(Ordering::Acquire);
    assert!(
        !api.is_null(),
        "alkstore: SQLite's routine table is not set"
    );
    // SAFETY: non-null, and set_api's contract: SQLite's own table, which
    // lives for the rest of the process and is never written again.
    unsafe { &*api }
}

/// One routine of the table; every one used here exists since SQLite 3.40,
/// the oldest host `register_raw` accepts.
macro_rules! routine {
    ($f:ident) => {
        api().$f.expect(concat!("SQLite routine ", stringify!($f)))
    };
}

/// An open connection: what SQLite handed the entry point, or the
/// connection a function was called on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Db(NonNull<sqlite3>);

impl Db {
    /// Wraps a connection pointer; `None` if it is null.
    ///
    /// # Safety
    /// `raw` must be an open connection of the SQLite whose routine table
    /// [`set_api`] stored, and stay open while this value or a [`Stmt`]
    /// prepared on it is used.
    pub unsafe fn from_raw(raw: *mut sqlite3) -> Option<Db> {
        NonNull::new(raw).map(Db)
    }

    /// The raw pointer, for the routine-table calls of `conn`'s anchor.
    pub fn as_ptr(self) -> *mut sqlite3 {
        self.0.as_ptr()
    }

    /// Rows changed by the connection's most recent INSERT, UPDATE or DELETE.
    pub fn changes(self) -> i64 {
        // SAFETY: an open connection (Db's contract).
        unsafe { routine!(changes)(self.as_ptr()) as i64 }
    }

    /// The rowid of the connection's most recent INSERT.
    pub fn last_insert_rowid(self) -> i64 {
        // SAFETY: an open connection (Db's contract).
        unsafe { routine!(last_insert_rowid)(self.as_ptr()) }
    }

    /// Where the connection stands (see [`TxnState`]).
    pub fn txn_state(self) -> TxnState {
        // SAFETY: an open connection; a null schema name asks about every
        // attached database.
        let (autocommit, txn) = unsafe {
            (
                routine!(get_autocommit)(self.as_ptr()),
                routine!(txn_state)(self.as_ptr(), std::ptr::null()),
            )
        };
        if autocommit == 0 {
            return TxnState::Explicit;
        }
        match txn as u32 {
            crate::sys::SQLITE_TXN_NONE => TxnState::AutocommitIdle,
            crate::sys::SQLITE_TXN_READ => TxnState::AutocommitReading,
            _ => TxnState::AutocommitWriting,
        }
    }

    /// Whether the connection holds the write lock (a write transaction).
    pub fn holds_write_lock(self) -> bool {
        // SAFETY: an open connection; a null schema name asks about all.
        let txn = unsafe { routine!(txn_state)(self.as_ptr(), std::ptr::null()) };
        txn as u32 == crate::sys::SQLITE_TXN_WRITE
    }

    /// The longest text or blob this connection accepts (`SQLITE_LIMIT_LENGTH`).
    pub fn length_limit(self) -> usize {
        // SAFETY: an open connection; -1 reads the limit without changing it.
        let n =
            unsafe { routine!(limit)(self.as_ptr(), crate::sys::SQLITE_LIMIT_LENGTH as c_int, -1) };
        n.max(0) as usize
    }

    /// The error SQLite reports on this connection for a call that returned `rc`.
    fn error(self, rc: c_int) -> DbError {
        // SAFETY: an open connection; errmsg's text is copied out before any
        // other call on the connection could change it.
        let (ext, message) = unsafe {
            let ext = routine!(extended_errcode)(self.as_ptr());
            let msg = routine!(errmsg)(self.as_ptr());
            let message = if msg.is_null() {
                format!("SQLite error {rc}")
            } else {
                CStr::from_ptr(msg).to_string_lossy().into_owned()
            };
            (ext, message)
        };
        // The connection's code may belong to a later call; trust rc's primary code.
        let code = if ext & 0xff == rc & 0xff { ext } else { rc };
        DbError { code, message }
    }

    /// Registers a scalar function: UTF-8, never deterministic (these
    /// functions write), and `flags` (`SQLITE_DIRECTONLY`,
    /// `SQLITE_INNOCUOUS` or 0) for where a schema may call it.
    ///
    /// # Safety
    /// `app` must stay valid until `destroy` is called with it, and `func`
    /// must read it as what it is.
    pub unsafe fn create_function(
        self,
        name: &CStr,
        n_args: c_int,
        flags: c_int,
        app: *mut c_void,
        func: unsafe extern "C" fn(*mut sqlite3_context, c_int, *mut *mut sqlite3_value),
        destroy: unsafe extern "C" fn(*mut c_void),
    ) -> c_int {
        // SAFETY: an open connection, a NUL-terminated name, and the
        // caller's promise for `app`; SQLite calls `destroy` even on failure.
        unsafe {
            routine!(create_function_v2)(
                self.as_ptr(),
                name.as_ptr(),
                n_args,
                crate::sys::SQLITE_UTF8 as c_int | flags,
                app,
                Some(func),
                None,
                None,
                Some(destroy),
            )
        }
    }
}

/// An error SQLite itself reported, with its extended result code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbError {
    /// Extended result code (`SQLITE_BUSY`, `SQLITE_READONLY`, …).
    pub code: c_int,
    /// SQLite's message.
    pub message: String,
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
    raw: NonNull<sqlite3_stmt>,
    db: Db,
}

// SAFETY: statements move with their connection's state (the per-connection
// cache), and SQLite only ever uses them during a call on that connection.
unsafe impl Send for Stmt {}

impl Stmt {
    /// Compiles one SQL statement.
    pub fn prepare(db: Db, sql: &str) -> Result<Stmt, DbError> {
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
    pub fn prepare_first(db: Db, sql: &str) -> Result<(Option<Stmt>, &str), DbError> {
        let mut raw = std::ptr::null_mut();
        let mut tail: *const c_char = std::ptr::null();
        // SAFETY: an open connection; SQLite reads `sql.len()` bytes of `sql`
        // (no NUL needed) and sets `tail` inside them or leaves it null.
        let rc = unsafe {
            routine!(prepare_v2)(
                db.as_ptr(),
                sql.as_ptr() as *const c_char,
                sql.len() as c_int,
                &mut raw,
                &mut tail,
            )
        };
        if rc != 0 {
            if !raw.is_null() {
                // SAFETY: a statement SQLite just made and nothing else holds.
                unsafe { routine!(finalize)(raw) };
            }
            return Err(db.error(rc));
        }
        let used = if tail.is_null() {
            sql.len()
        } else {
            tail as usize - sql.as_ptr() as usize
        };
        // SQLite stops at a statement boundary, never inside a UTF-8 sequence.
        let rest = sql.get(used.min(sql.len())..).unwrap_or("");
        Ok((NonNull::new(raw).map(|raw| Stmt { raw, db }), rest))
    }

    /// Runs every statement of a script, in order.
    pub fn exec_script(db: Db, mut sql: &str) -> Result<(), DbError> {
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

    fn ptr(&self) -> *mut sqlite3_stmt {
        self.raw.as_ptr()
    }

    /// Binds text to the 1-based parameter `i`.
    pub fn bind_text(&mut self, i: c_int, v: &str) {
        // SAFETY: a live statement; SQLITE_TRANSIENT makes SQLite copy the
        // bytes before returning. 64-bit length: no cast can wrap; SQLite
        // itself refuses text over its length limit (SQLITE_TOOBIG at the step).
        unsafe {
            routine!(bind_text64)(
                self.ptr(),
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
        // SAFETY: a live statement; an out-of-range index is an error code.
        unsafe { routine!(bind_int64)(self.ptr(), i, v) };
    }

    /// Binds SQL NULL.
    pub fn bind_null(&mut self, i: c_int) {
        // SAFETY: a live statement; an out-of-range index is an error code.
        unsafe { routine!(bind_null)(self.ptr(), i) };
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
        // SAFETY: a live statement, stepped on its connection's thread.
        let rc = unsafe { routine!(step)(self.ptr()) };
        match rc as u32 {
            SQLITE_ROW => Ok(Step::Row),
            SQLITE_DONE => Ok(Step::Done),
            _ => {
                // reset() reports the statement's real error code with prepare_v2.
                // SAFETY: a live statement.
                let reset_rc = unsafe { routine!(reset)(self.ptr()) };
                let mut e = self.db.error(if reset_rc != 0 { reset_rc } else { rc });
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
        // SAFETY: a live statement; SQLite answers 0 outside a row or range.
        unsafe { routine!(column_int64)(self.ptr(), i) }
    }

    /// Column `i` as an integer, `None` when NULL.
    pub fn opt_i64(&self, i: c_int) -> Option<i64> {
        (!self.is_null(i)).then(|| self.i64(i))
    }

    /// Whether column `i` is NULL.
    pub fn is_null(&self, i: c_int) -> bool {
        // SAFETY: a live statement; SQLite answers NULL outside a row or range.
        unsafe { routine!(column_type)(self.ptr(), i) == SQLITE_NULL as c_int }
    }

    /// Column `i` as text (`""` for NULL). The borrow of `self` keeps it
    /// valid: stepping, resetting or dropping the statement needs `&mut`.
    pub fn text(&self, i: c_int) -> &str {
        // SAFETY: a live statement; column_text is called before
        // column_bytes (SQLite's documented order, so the length is of the
        // UTF-8 form), and its buffer lives until the next step, reset or
        // finalize, none of which can happen while `&self` is borrowed.
        let bytes = unsafe {
            let p = routine!(column_text)(self.ptr(), i);
            let n = routine!(column_bytes)(self.ptr(), i);
            if p.is_null() {
                return "";
            }
            std::slice::from_raw_parts(p, n.max(0) as usize)
        };
        // We only ever store text that arrived as valid UTF-8.
        std::str::from_utf8(bytes).unwrap_or("")
    }

    /// Column `i` as text, `None` when NULL.
    pub fn opt_text(&self, i: c_int) -> Option<&str> {
        (!self.is_null(i)).then(|| self.text(i))
    }

    /// Ends the current run and clears bindings, ready for the next use.
    pub fn reset(&mut self) {
        // SAFETY: a live statement.
        unsafe {
            routine!(reset)(self.ptr());
            routine!(clear_bindings)(self.ptr());
        }
    }
}

impl Drop for Stmt {
    fn drop(&mut self) {
        // SAFETY: the statement is ours alone and never used after this.
        unsafe { routine!(finalize)(self.ptr()) };
    }
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

/// One function call's context: its connection, its registration's
/// application data and its result slot, for the duration `'a` of the call.
pub struct Ctx<'a> {
    raw: NonNull<sqlite3_context>,
    _call: PhantomData<&'a mut sqlite3_context>,
}

impl<'a> Ctx<'a> {
    /// Wraps the context of the call being made.
    ///
    /// # Safety
    /// `raw` must be the non-null context SQLite passed to the function (or
    /// virtual-table column) being called, after [`set_api`], and `'a` must
    /// not outlive that call.
    pub unsafe fn from_raw(raw: *mut sqlite3_context) -> Ctx<'a> {
        Ctx {
            raw: NonNull::new(raw).expect("SQLite passes a context"),
            _call: PhantomData,
        }
    }

    /// The connection the function was called on.
    pub fn db(&self) -> Db {
        // SAFETY: a live context; SQLite answers the calling connection,
        // which is open for the whole call.
        let db = unsafe { routine!(context_db_handle)(self.raw.as_ptr()) };
        Db(NonNull::new(db).expect("a call has a connection"))
    }

    /// The application pointer given at registration.
    pub fn user_data(&self) -> *mut c_void {
        // SAFETY: a live context.
        unsafe { routine!(user_data)(self.raw.as_ptr()) }
    }

    /// Sets the result to text.
    pub fn result_text(&mut self, v: &str) {
        // SAFETY: a live context; SQLITE_TRANSIENT copies the bytes. 64-bit
        // length: over SQLite's length limit this is SQLITE_TOOBIG, never an
        // over-read or a truncation (callers size their results to fit first).
        unsafe {
            routine!(result_text64)(
                self.raw.as_ptr(),
                v.as_ptr() as *const c_char,
                v.len() as u64,
                transient(),
                crate::sys::SQLITE_UTF8 as _,
            )
        };
    }

    /// Sets the result to an integer.
    pub fn result_i64(&mut self, v: i64) {
        // SAFETY: a live context.
        unsafe { routine!(result_int64)(self.raw.as_ptr(), v) };
    }

    /// Sets the result to NULL.
    pub fn result_null(&mut self) {
        // SAFETY: a live context.
        unsafe { routine!(result_null)(self.raw.as_ptr()) };
    }

    /// Makes the call fail with `message` and result code `code`.
    pub fn result_error(&mut self, message: &str, code: c_int) {
        // A message longer than c_int can say is cut, never over-read.
        let len = message.len().min(c_int::MAX as usize) as c_int;
        // SAFETY: a live context; SQLite copies `len` bytes of the message.
        // The code is set after the message, so the message is kept.
        unsafe {
            routine!(result_error)(self.raw.as_ptr(), message.as_ptr() as *const c_char, len);
            routine!(result_error_code)(self.raw.as_ptr(), code);
        }
    }
}

/// One SQL argument of a function call, borrowed for the call (`'a`).
#[derive(Clone, Copy)]
pub struct Arg<'a> {
    raw: NonNull<sqlite3_value>,
    _call: PhantomData<&'a sqlite3_value>,
}

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

impl<'a> Arg<'a> {
    /// Wraps one argument of the call being made.
    ///
    /// # Safety
    /// `raw` must be a non-null value of the `argv` SQLite passed to the
    /// function being called, after [`set_api`], and `'a` must not outlive
    /// that call.
    pub unsafe fn from_raw(raw: *mut sqlite3_value) -> Arg<'a> {
        Arg {
            raw: NonNull::new(raw).expect("SQLite passes every argument"),
            _call: PhantomData,
        }
    }

    /// The value's storage class.
    pub fn kind(self) -> Kind {
        // SAFETY: a live argument (Arg's contract).
        match unsafe { routine!(value_type)(self.raw.as_ptr()) } {
            1 => Kind::Integer,
            2 => Kind::Real,
            3 => Kind::Text,
            4 => Kind::Blob,
            _ => Kind::Null,
        }
    }

    /// The value as bytes of text (length-aware: NUL bytes are kept), valid
    /// for the call.
    pub fn text_bytes(self) -> &'a [u8] {
        // SAFETY: a live argument; value_text before value_bytes (so the
        // length is of the UTF-8 form). The buffer belongs to the value and
        // lives for the call ('a): only a later UTF-16 read (value_text16,
        // value_bytes16) would convert it away, and the engine never makes one.
        unsafe {
            let p = routine!(value_text)(self.raw.as_ptr());
            let n = routine!(value_bytes)(self.raw.as_ptr());
            if p.is_null() {
                return &[];
            }
            std::slice::from_raw_parts(p, n.max(0) as usize)
        }
    }

    /// The value as an integer.
    pub fn i64(self) -> i64 {
        // SAFETY: a live argument.
        unsafe { routine!(value_int64)(self.raw.as_ptr()) }
    }

    /// The value as a float.
    pub fn f64(self) -> f64 {
        // SAFETY: a live argument.
        unsafe { routine!(value_double)(self.raw.as_ptr()) }
    }
}

/// The raw routine table, for the virtual-table anchor in `conn`.
pub fn routines() -> &'static sqlite3_api_routines {
    api()
}
