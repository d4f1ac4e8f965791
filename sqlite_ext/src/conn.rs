//! Per-connection state: the prepared-statement cache and the schema check.
//!
//! Cached statements must be finalized before the connection closes, or
//! `sqlite3_close` fails with SQLITE_BUSY (and `sqlite3_close_v2` leaves a
//! zombie that is never freed). SQLite gives extensions exactly one hook
//! that runs before that check: it disconnects every virtual table first,
//! eponymous ones included. So the cache is anchored to a tiny eponymous
//! virtual table, `alkstore_stmt_cache` (anchor.rs), whose xDisconnect
//! finalizes the cache. Until the anchor is connected, statements are not
//! kept.

use crate::error::{Error, Result};
use crate::ffi::{Db, DbError, Stmt, TxnState};
use crate::sql;
use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// What alkstore keeps for one connection.
#[derive(Default)]
pub struct ConnState {
    /// The prepared statements, finalized by the anchor (anchor.rs).
    pub(crate) cache: Mutex<HashMap<&'static str, Stmt>>,
    /// The anchor is connected: statements may be kept.
    pub(crate) anchored: AtomicBool,
    schema_checked: AtomicBool,
    /// This connection created or migrated the schema in a transaction that
    /// may still roll back: check again until that is settled.
    schema_pending: AtomicBool,
}

/// The connection a function runs on, with its state.
pub struct Conn<'a> {
    /// The raw connection handle.
    pub db: Db,
    state: &'a ConnState,
    /// A transaction `atomic` will open when the first statement is needed:
    /// a call that fails its argument checks never takes the write lock.
    pending_begin: Cell<Option<&'static str>>,
    began: Cell<bool>,
    /// The call runs inside the caller's explicit transaction.
    in_caller_txn: bool,
}

/// A statement borrowed from the cache; goes back (reset) when dropped.
pub struct Cached<'c, 'a> {
    stmt: Option<Stmt>,
    name: &'static str,
    conn: &'c Conn<'a>,
}

impl std::ops::Deref for Cached<'_, '_> {
    type Target = Stmt;
    fn deref(&self) -> &Stmt {
        self.stmt.as_ref().expect("present until drop")
    }
}

impl std::ops::DerefMut for Cached<'_, '_> {
    fn deref_mut(&mut self) -> &mut Stmt {
        self.stmt.as_mut().expect("present until drop")
    }
}

impl Drop for Cached<'_, '_> {
    fn drop(&mut self) {
        let Some(mut stmt) = self.stmt.take() else {
            return;
        };
        stmt.reset();
        let state = self.conn.state;
        if state.anchored.load(Ordering::Acquire) {
            if let Ok(mut cache) = state.cache.lock() {
                // A re-entrant call may have put its own copy back already.
                cache.entry(self.name).or_insert(stmt);
            }
        }
    }
}

impl<'a> Conn<'a> {
    /// Wraps a connection handle and its state.
    pub fn new(db: Db, state: &'a ConnState) -> Self {
        Conn {
            db,
            state,
            pending_begin: Cell::new(None),
            began: Cell::new(false),
            in_caller_txn: db.txn_state() == TxnState::Explicit,
        }
    }

    /// The statement `name` of the catalogue, from the cache or freshly
    /// prepared. The first one a connection asks for checks (and if need be
    /// creates) the schema: callers ask only after their arguments passed.
    pub fn stmt(&self, name: &'static str) -> Result<Cached<'_, 'a>> {
        self.start()?;
        self.stmt_unchecked(name)
    }

    /// Opens the call's own transaction if it waits to be, and checks the schema.
    fn start(&self) -> Result<()> {
        if let Some(begin) = self.pending_begin.take() {
            self.control(begin)?;
            self.began.set(true);
        }
        self.ensure_schema()
    }

    /// The clock, read once this call holds the write lock (contract v1.1
    /// §A4): a call that waited for the lock never computes a claim or lease
    /// deadline from a time before the wait.
    pub fn now_locked(&self) -> Result<i64> {
        self.start()?;
        if !self.db.holds_write_lock() {
            self.stmt_unchecked("take_write_lock")?.run()?;
        }
        Ok(alkstore_core::time::now_ms())
    }

    fn stmt_unchecked(&self, name: &'static str) -> Result<Cached<'_, 'a>> {
        let cached = self
            .state
            .cache
            .lock()
            .ok()
            .and_then(|mut c| c.remove(name));
        let stmt = match cached {
            Some(stmt) => stmt,
            None => {
                self.anchor();
                Stmt::prepare(self.db, sql::get(name))?
            }
        };
        Ok(Cached {
            stmt: Some(stmt),
            name,
            conn: self,
        })
    }

    /// Connects the eponymous anchor table once, so that the cache is
    /// finalized when the connection closes (see the module docs).
    fn anchor(&self) {
        if !self.state.anchored.load(Ordering::Acquire) {
            // Preparing a statement that names the table connects it.
            drop(Stmt::prepare(self.db, "SELECT 1 FROM alkstore_stmt_cache"));
        }
    }

    /// Checks the schema once per connection: creates it on first use, and
    /// migrates an older one (contract v1.1 §B) inside the caller's
    /// transaction, or in a savepoint of its own outside one.
    pub fn ensure_schema(&self) -> Result<()> {
        let st = self.state;
        if st.schema_checked.load(Ordering::Acquire) && !st.schema_pending.load(Ordering::Acquire) {
            return Ok(());
        }
        let own = matches!(
            self.db.txn_state(),
            TxnState::AutocommitIdle | TxnState::AutocommitReading
        );
        if own {
            self.schema_savepoint()?;
        }
        let changed = self.bring_schema_current();
        let changed = match (own, changed) {
            (true, Ok(changed)) => self.control("release").map(|_| changed),
            (true, Err(e)) => {
                self.undo_savepoint();
                Err(e)
            }
            (false, result) => result,
        }?;
        // A change inside a transaction (the caller's, or this call's own
        // BEGIN) is settled once that commits: until then every call checks.
        // A check that found the schema current outside the caller's
        // transaction saw committed tables.
        if changed && !own {
            st.schema_pending.store(true, Ordering::Release);
        } else if !self.in_caller_txn {
            st.schema_pending.store(false, Ordering::Release);
        }
        st.schema_checked.store(true, Ordering::Release);
        Ok(())
    }

    /// Creates or migrates the schema as needed; true if it changed anything.
    fn bring_schema_current(&self) -> Result<bool> {
        // Names alk_* are alkstore's: objects of that name that are not an
        // alkstore schema (an application's alk_events table, an alk_locks
        // view, an alk_meta of its own) are refused, naming them, with
        // nothing written, instead of failing later with SQLite's own
        // errors. The version is read first: when alk_meta is missing its
        // statement fails to prepare, which starts no read transaction, so
        // the schema's first CREATE can wait for the write lock (a read
        // first would turn a concurrent creator into SQLITE_BUSY).
        let version = match self.read_version() {
            Ok(v) => v,
            Err(e) if e.is_missing_schema() => return self.create_schema(),
            Err(Error::Db(e)) if e.message.starts_with("no such column") => {
                return self.refuse_foreign(self.all_named()?, None);
            }
            Err(e) => return Err(e),
        };
        let Some(v) = version else {
            return self.refuse_foreign(self.all_named()?, None);
        };
        if v > sql::SCHEMA_VERSION {
            return Err(Error::Db(DbError {
                code: 1,
                message: format!(
                    "alkstore: the database has schema version {v}, newer than this library's \
                     (alkstore {} knows schema {}): upgrade the alkstore library",
                    alkstore_core::VERSION,
                    sql::SCHEMA_VERSION
                ),
            }));
        }
        if v == sql::SCHEMA_VERSION {
            let objects = self.schema_objects()?;
            let wrong: Vec<String> = sql::schema_objects()
                .iter()
                .filter(|o| !objects.contains(o))
                .map(
                    |(kind, name)| match objects.iter().find(|(_, n)| n == name) {
                        Some((t, _)) => format!("{t} {name}, where alkstore has a {kind}"),
                        None => format!("{kind} {name} missing"),
                    },
                )
                .collect();
            return if wrong.is_empty() {
                Ok(false)
            } else {
                self.refuse_foreign(wrong, None)
            };
        }
        // Older: migrate, in a savepoint of its own, so that tables that are
        // not an older alkstore schema leave nothing changed.
        self.schema_savepoint()?;
        let migrated = sql::MIGRATIONS
            .iter()
            .filter(|(to, _)| *to > v)
            .try_for_each(|(_, script)| Stmt::exec_script(self.db, script))
            .map_err(Error::from)
            .and_then(|()| self.record_version());
        match migrated {
            Ok(()) => {
                self.control("release")?;
                Ok(true)
            }
            Err(Error::Db(e)) => {
                self.undo_savepoint();
                let named = self.all_named()?;
                self.refuse_foreign(
                    named,
                    Some(format!(
                        "migrating it from schema {v} failed: {}",
                        e.message
                    )),
                )
            }
            Err(e) => {
                self.undo_savepoint();
                Err(e)
            }
        }
    }

    /// A fresh schema, unless objects named alk_* are there already. The
    /// first statement (alk_meta, missing) takes the write lock; the check
    /// then reads a current snapshot, and a failed check leaves nothing.
    fn create_schema(&self) -> Result<bool> {
        self.schema_savepoint()?;
        let result = (|| {
            let (first, rest) = match Stmt::prepare_first(self.db, sql::SCHEMA)? {
                (Some(first), rest) => (first, rest),
                (None, _) => unreachable!("the schema script has statements"),
            };
            let mut first = first;
            first.run()?;
            drop(first);
            // Another connection made the schema meanwhile: check that.
            if let Ok(Some(_)) = self.read_version() {
                return Ok(None);
            }
            let others: Vec<String> = self
                .schema_objects()?
                .into_iter()
                .filter(|(t, n)| !(t == "table" && n == "alk_meta"))
                .map(|(t, n)| format!("{t} {n}"))
                .collect();
            if !others.is_empty() {
                return Ok(Some(others));
            }
            Stmt::exec_script(self.db, rest)?;
            self.record_version()?;
            Ok(None)
        })();
        match result {
            Ok(None) => {
                self.control("release")?;
                // A concurrent creator's schema, or ours: both checked alike.
                match self.read_version()? {
                    Some(v) if v == sql::SCHEMA_VERSION => Ok(true),
                    _ => self.bring_schema_current(),
                }
            }
            Ok(Some(others)) => {
                self.undo_savepoint();
                self.refuse_foreign(others, None)
            }
            Err(e) => {
                self.undo_savepoint();
                Err(e)
            }
        }
    }

    /// Every alk_* object, as "type name".
    fn all_named(&self) -> Result<Vec<String>> {
        Ok(self
            .schema_objects()?
            .into_iter()
            .map(|(t, n)| format!("{t} {n}"))
            .collect())
    }

    fn refuse_foreign<T>(&self, what: Vec<String>, why: Option<String>) -> Result<T> {
        Err(Error::Db(DbError {
            code: 1,
            message: format!(
                "alkstore: this database has objects named alk_* that are not alkstore's \
                 schema ({}{}); names alk_* are alkstore's: rename them or use another \
                 database; nothing was changed",
                what.join(", "),
                why.map(|w| format!("; {w}")).unwrap_or_default()
            ),
        }))
    }

    fn record_version(&self) -> Result<()> {
        let mut st = self.stmt_unchecked("record_version")?;
        st.bind_text(1, alkstore_core::VERSION);
        st.run()?;
        Ok(())
    }

    /// Every table, index, view and trigger named alk_*, as (type, name).
    fn schema_objects(&self) -> Result<Vec<(String, String)>> {
        let mut st = self.stmt_unchecked("schema_objects")?;
        let mut out = Vec::new();
        while st.step_row()? {
            out.push((st.text(0).to_string(), st.text(1).to_string()));
        }
        Ok(out)
    }

    fn read_version(&self) -> Result<Option<i64>> {
        let mut st = self.stmt_unchecked("schema_version")?;
        Ok(if st.step_row()? {
            Some(st.text(0).parse().unwrap_or(0))
        } else {
            None
        })
    }

    /// The schema version of the database, after bringing it current.
    pub fn schema_version(&self) -> Result<i64> {
        self.ensure_schema()?;
        Ok(self.read_version()?.unwrap_or(0))
    }

    /// Runs `f` as one atomic unit. Inside the caller's transaction (or a
    /// writing statement) that transaction already is one. Outside, each
    /// inner statement would commit on its own, so the call gets its own
    /// `BEGIN IMMEDIATE` (write lock first: no stale-snapshot failures), or a
    /// savepoint when the calling statement holds a read snapshot.
    pub fn atomic<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let (begin, commit, undo) = match self.db.txn_state() {
            TxnState::Explicit | TxnState::AutocommitWriting => return f(),
            TxnState::AutocommitIdle => ("begin_immediate", "commit", "rollback"),
            TxnState::AutocommitReading => ("savepoint", "release", "rollback_to"),
        };
        self.pending_begin.set(Some(begin));
        self.began.set(false);
        let result = f();
        self.pending_begin.set(None);
        if !self.began.replace(false) {
            return result; // nothing ran: bad arguments, or nothing to do
        }
        let result = result.and_then(|v| self.control(commit).map(|_| v));
        if result.is_ok() {
            // Whatever schema this call created or migrated is committed.
            self.state.schema_pending.store(false, Ordering::Release);
        }
        if result.is_err() && self.db.txn_state() == TxnState::Explicit {
            let _ = self.control(undo);
            if undo == "rollback_to" {
                let _ = self.control("release");
            }
        }
        result
    }

    /// Opens the savepoint that creating or migrating the schema runs in.
    /// SQLite opens none while a writing statement runs (a trigger's call,
    /// or one inside an INSERT … SELECT): say what to do instead of its
    /// "SQL statements in progress". Nothing was written.
    fn schema_savepoint(&self) -> Result<()> {
        self.control("savepoint").map_err(|e| match e {
            Error::Db(e) if e.message.contains("SQL statements in progress") => {
                Error::Db(DbError {
                    code: crate::sys::SQLITE_ERROR as c_int,
                    message: format!(
                        "alkstore: the database's alkstore schema (version {}) must be created \
                         or upgraded by a call of its own, not from inside another writing \
                         statement such as a trigger's: run SELECT alk_init() once first \
                         (docs/sql-api.md, \"An outbox filled by a trigger\")",
                        sql::SCHEMA_VERSION
                    ),
                })
            }
            e => e,
        })
    }

    /// Runs a transaction-control statement (no schema check needed).
    fn control(&self, name: &'static str) -> Result<()> {
        self.stmt_unchecked(name)?.run()?;
        Ok(())
    }

    /// Rolls back to this call's savepoint and ends it (already failing:
    /// errors of the undo itself are not worth more than the first one).
    fn undo_savepoint(&self) {
        let _ = self.control("rollback_to");
        let _ = self.control("release");
    }

    /// Forgets the schema check, after the tables turned out to be missing.
    pub fn schema_lost(&self) {
        self.state.schema_checked.store(false, Ordering::Release);
    }
}
