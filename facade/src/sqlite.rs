//! The SQLite engine: rusqlite (bundled SQLite) with the `alk_*` functions
//! registered in-process (no shared library to ship), WAL, `BEGIN
//! IMMEDIATE` transactions and a busy handler (30 s). Wake-ups come from one
//! watcher per store that polls `PRAGMA data_version` (it changes on every
//! commit by any connection of any process) and wakes all waiters.

use crate::call;
use crate::engine::{Engine, Kind};
use crate::error::{Error, Result};
use crate::notify::{NotificationSource, Subscription};
use crate::sql::{call_sqlite, Arg};
use crate::store::Store;
use crate::tx::TxHandle;
use crate::wake::{Waker, ANY};
use serde_json::Value;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Waits for another connection's lock: SQLite's own busy timeout sleeps 1,
/// 2, 5, 10… ms between looks, and a worker's writers (its claims, acks and
/// heartbeats, each on a connection of its own) take turns with locks held
/// for tens of microseconds, so each turn cost a millisecond or more (the
/// blocking Worker on SQLite drained a third of its SQL's pace). This one
/// yields 20 times, then looks every 50 µs for 1,000 looks (about 50 ms),
/// every millisecond for 200 more, then every 10 ms (a lock held that long
/// is a long transaction: no need to look a thousand times a second), and
/// gives up ("database is locked") once about [`BUSY_TIMEOUT`] has passed
/// (the sleeps last at least that long).
fn busy(tries: i32) -> bool {
    const YIELDS: i32 = 20;
    const SHORT: i32 = 1000;
    const MEDIUM: i32 = 200;
    // What the first three steps sleep, at most, in ms.
    const FIRST_MS: u128 = SHORT as u128 * 50 / 1000 + MEDIUM as u128;
    let long_tries = (BUSY_TIMEOUT.as_millis().saturating_sub(FIRST_MS) / 10) as i32;
    match tries {
        t if t < YIELDS => std::thread::yield_now(),
        t if t < YIELDS + SHORT => std::thread::sleep(Duration::from_micros(50)),
        t if t < YIELDS + SHORT + MEDIUM => std::thread::sleep(Duration::from_millis(1)),
        t if t < YIELDS + SHORT + MEDIUM + long_tries => {
            std::thread::sleep(Duration::from_millis(10))
        }
        _ => return false,
    }
    true
}

/// Sets [`busy`] as the connection's busy handler.
fn wait_when_busy(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    conn.busy_handler(Some(busy))
}

const WATCH_EVERY: Duration = Duration::from_millis(2);

/// What the caller runs on every new connection of a store.
type InitConn = dyn Fn(&rusqlite::Connection) -> rusqlite::Result<()> + Send + Sync;

struct Manager {
    path: PathBuf,
    init: Option<Arc<InitConn>>,
    /// Inspection only: read-only connections that never create or change
    /// the file ([`SqliteStore::open_read_only`]).
    read_only: bool,
}

impl r2d2::ManageConnection for Manager {
    type Connection = rusqlite::Connection;
    type Error = rusqlite::Error;

    fn connect(&self) -> std::result::Result<rusqlite::Connection, rusqlite::Error> {
        let conn = if self.read_only {
            open_read_only_connection(&self.path)?
        } else {
            open_connection(&self.path)?
        };
        if let Some(init) = &self.init {
            init(&conn)?;
        }
        Ok(conn)
    }

    fn is_valid(
        &self,
        conn: &mut rusqlite::Connection,
    ) -> std::result::Result<(), rusqlite::Error> {
        conn.execute_batch("")
    }

    /// A connection still inside a transaction must not serve anyone else:
    /// its writes would never commit and it would hold the write lock.
    fn has_broken(&self, conn: &mut rusqlite::Connection) -> bool {
        !conn.is_autocommit()
    }
}

/// Opens a connection the way alkstore uses it: WAL, the busy handler,
/// functions registered.
pub fn open_connection(path: &Path) -> rusqlite::Result<rusqlite::Connection> {
    let conn = rusqlite::Connection::open(path)?;
    // First: the pragmas read the file, and without a timeout fail at once
    // with "database is locked" while another connection holds it a moment.
    wait_when_busy(&conn)?;
    to_wal(&conn)?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    alkstore_sqlite::register(&conn)?;
    Ok(conn)
}

/// Opens a connection that only reads: no file created, no journal mode
/// switched, the functions registered (their writes fail as SQLite's
/// `attempt to write a readonly database`).
fn open_read_only_connection(path: &Path) -> rusqlite::Result<rusqlite::Connection> {
    use rusqlite::OpenFlags;
    let conn = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    wait_when_busy(&conn)?;
    alkstore_sqlite::register(&conn)?;
    Ok(conn)
}

/// Puts the file in WAL mode (it stays so: later opens only read it). The
/// switch of a new file takes an exclusive lock, and where other
/// connections are switching or writing it at that moment SQLite answers
/// "database is locked" at once instead of waiting (a wait could
/// deadlock): tried again until the busy timeout, as a wait would have.
fn to_wal(conn: &rusqlite::Connection) -> rusqlite::Result<()> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(e)
                if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            done => return done,
        }
    }
}

struct SqliteEngine {
    pool: r2d2::Pool<Manager>,
    waker: Arc<Waker>,
}

/// An alkstore on a SQLite file.
pub struct SqliteStore {
    store: Store,
    engine: Arc<SqliteEngine>,
}

/// Every [`Store`] method, on this engine.
impl std::ops::Deref for SqliteStore {
    type Target = Store;

    fn deref(&self) -> &Store {
        &self.store
    }
}

impl From<SqliteStore> for Store {
    fn from(store: SqliteStore) -> Store {
        store.store
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database file and alkstore's schema.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore> {
        SqliteStore::build(path.as_ref(), None)
    }

    /// Like [`open`](SqliteStore::open), running `init` on every connection
    /// the store opens, before any transaction: for your own pragmas, such as
    /// `PRAGMA foreign_keys = ON`.
    pub fn open_with_init(
        path: impl AsRef<Path>,
        init: impl Fn(&rusqlite::Connection) -> rusqlite::Result<()> + Send + Sync + 'static,
    ) -> Result<SqliteStore> {
        SqliteStore::build(path.as_ref(), Some(Arc::new(init)))
    }

    /// Opens an existing database file to look at it (what `alkstore
    /// queues`, `jobs` and the other inspection commands do): read-only, so
    /// nothing is created, migrated or switched to WAL, and a file that is
    /// missing, not a database or without alkstore's schema is refused at
    /// once. Every call that writes fails.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<SqliteStore> {
        let path = path.as_ref();
        if !path.exists() {
            return Err(Error::InvalidArgument(format!(
                "no SQLite file {}: nothing to inspect (a new database is made by the first \
                 call that writes, e.g. alkstore enqueue)",
                path.display()
            )));
        }
        // Checked on a connection of its own, before any pool: a file that is
        // not a database fails here at once (the pool would retry for 30 s).
        let probe = open_read_only_connection(path)?;
        let has_schema: bool = probe
            .query_row(
                "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'alk_meta'",
                [],
                |r| r.get(0),
            )
            .map_err(|e| match e.sqlite_error_code() {
                Some(rusqlite::ErrorCode::NotADatabase) => {
                    Error::InvalidArgument(format!("{} is not a SQLite database", path.display()))
                }
                _ => e.into(),
            })?;
        if !has_schema {
            return Err(Error::InvalidArgument(format!(
                "{} has no alkstore schema: nothing to inspect",
                path.display()
            )));
        }
        drop(probe);
        SqliteStore::build_with(path, None, true)
    }

    fn build(path: &Path, init: Option<Arc<InitConn>>) -> Result<SqliteStore> {
        SqliteStore::build_with(path, init, false)
    }

    fn build_with(
        path: &Path,
        init: Option<Arc<InitConn>>,
        read_only: bool,
    ) -> Result<SqliteStore> {
        let path = path.to_path_buf();
        let pool = r2d2::Pool::builder().max_size(8).build(Manager {
            path: path.clone(),
            init,
            read_only,
        })?;
        // A read-only store checks the schema's version with its first
        // call instead (an older one cannot be migrated read-only: that
        // call says so).
        if !read_only {
            let init = call::init();
            call_sqlite(&*pool.get()?, init.function(), init.args())?;
        }
        let waker = Arc::new(Waker::default());
        watch_data_version(&path, Arc::downgrade(&waker))?;
        let engine = Arc::new(SqliteEngine { pool, waker });
        Ok(SqliteStore {
            store: Store::new(engine.clone()),
            engine,
        })
    }

    /// Opens a transaction and gives its rusqlite connection for business rows.
    pub fn transaction(&self) -> Result<SqliteTx> {
        let conn = self.engine.pool.get()?;
        conn.execute_batch("BEGIN IMMEDIATE")?;
        Ok(SqliteTx { conn, open: true })
    }
}

/// The watcher: one connection, one thread per store; stops with the store.
fn watch_data_version(path: &Path, waker: Weak<Waker>) -> Result<()> {
    let conn = rusqlite::Connection::open(path)?;
    // Its first read opens the file, which meets another connection's
    // checkpoint or recovery as "database is locked" without a timeout.
    wait_when_busy(&conn)?;
    let version =
        |c: &rusqlite::Connection| c.query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0));
    let mut last = version(&conn)?;
    std::thread::Builder::new()
        .name("alkstore-sqlite-watch".into())
        .spawn(move || {
            while let Some(waker) = waker.upgrade() {
                if let Ok(v) = version(&conn) {
                    if v != last {
                        last = v;
                        waker.bump(ANY);
                    }
                }
                drop(waker);
                std::thread::sleep(WATCH_EVERY);
            }
        })
        .map_err(|e| Error::engine("sqlite", "", e.to_string()))?;
    Ok(())
}

impl Engine for SqliteEngine {
    fn call(&self, f: &str, args: &[Arg]) -> Result<Value> {
        call_sqlite(&*self.pool.get()?, f, args)
    }

    fn call_text(&self, f: &str, args: &[Arg]) -> Result<Option<String>> {
        crate::sql::sqlite_text(&*self.pool.get()?, f, args)
    }

    fn begin(&self) -> Result<Box<dyn TxHandle>> {
        let conn = self.pool.get()?;
        conn.execute_batch("BEGIN IMMEDIATE")?;
        Ok(Box::new(SqliteTx { conn, open: true }))
    }

    fn waker(&self) -> &Waker {
        &self.waker
    }

    fn watch(&self, _kind: Kind, _name: &str) -> Result<()> {
        Ok(()) // every commit wakes every waiter
    }

    fn listen(&self, channel: &str) -> Result<Subscription> {
        let mut source = SqliteNotifications {
            conn: self.pool.get()?,
            channel: channel.to_string(),
            last_id: 0,
            buffer: VecDeque::new(),
            waker: self.waker.clone(),
        };
        // Listening starts now: skip what was sent before.
        while source.fetch()? {}
        source.buffer.clear();
        Ok(Subscription {
            channel: channel.to_string(),
            source: Box::new(source),
        })
    }

    fn fallback_poll(&self) -> Duration {
        Duration::from_secs(1)
    }
}

struct SqliteNotifications {
    conn: r2d2::PooledConnection<Manager>,
    channel: String,
    last_id: i64,
    buffer: VecDeque<Value>,
    waker: Arc<Waker>,
}

impl SqliteNotifications {
    /// Reads the next page; true if it was full (more may follow).
    fn fetch(&mut self) -> Result<bool> {
        let page = call::notifications(&self.channel, self.last_id, 1000);
        let rows = page.decode(call_sqlite(&self.conn, page.function(), page.args())?)?;
        for n in &rows {
            self.last_id = n["id"].as_i64().unwrap_or(self.last_id);
            self.buffer.push_back(n["payload"].clone());
        }
        Ok(rows.len() == 1000)
    }
}

impl NotificationSource for SqliteNotifications {
    fn next(&mut self, timeout: Duration) -> Result<Option<Value>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(v) = self.buffer.pop_front() {
                return Ok(Some(v));
            }
            let seen = self.waker.seen(ANY);
            self.fetch()?;
            if !self.buffer.is_empty() {
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.waker.wait(ANY, seen, left);
        }
    }
}

/// A SQLite transaction: alkstore writes plus your own rows on [`conn`](SqliteTx::conn).
pub struct SqliteTx {
    conn: r2d2::PooledConnection<Manager>,
    open: bool,
}

impl SqliteTx {
    /// The connection, inside the transaction: write your business rows here.
    pub fn conn(&self) -> &rusqlite::Connection {
        &self.conn
    }

    /// Commits.
    pub fn commit(self) -> Result<()> {
        TxHandle::commit(Box::new(self))
    }

    /// Rolls back.
    pub fn rollback(self) -> Result<()> {
        TxHandle::rollback(Box::new(self))
    }
}

impl TxHandle for SqliteTx {
    fn call(&mut self, function: &str, args: &[Arg]) -> Result<Value> {
        call_sqlite(&self.conn, function, args)
    }

    fn sqlite(&self) -> Option<&rusqlite::Connection> {
        Some(&self.conn)
    }

    fn commit(mut self: Box<Self>) -> Result<()> {
        self.open = false;
        let committed = self.conn.execute_batch("COMMIT");
        // A COMMIT that fails (a deferred foreign key, a full disk) leaves the
        // transaction open: end it, or the pooled connection keeps the write
        // lock and everything later written on it is never committed.
        if committed.is_err() && !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        Ok(committed?)
    }

    fn rollback(mut self: Box<Self>) -> Result<()> {
        self.open = false;
        Ok(self.conn.execute_batch("ROLLBACK")?)
    }
}

impl Drop for SqliteTx {
    fn drop(&mut self) {
        if self.open || !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

/// Your own rusqlite transaction as a [`TxHandle`] (register the functions
/// on its connection first: `alkstore_sqlite::register`).
impl TxHandle for rusqlite::Transaction<'_> {
    fn call(&mut self, function: &str, args: &[Arg]) -> Result<Value> {
        call_sqlite(self, function, args)
    }

    fn sqlite(&self) -> Option<&rusqlite::Connection> {
        Some(self)
    }

    fn commit(self: Box<Self>) -> Result<()> {
        Ok((*self).commit()?)
    }

    fn rollback(self: Box<Self>) -> Result<()> {
        Ok((*self).rollback()?)
    }
}
