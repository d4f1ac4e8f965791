//! Helpers shared by the SQLite engine's tests: real database files in WAL
//! mode, with the functions registered in-process.
#![allow(dead_code)]

use rusqlite::{types::Value as Sql, Connection, ToSql};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A fresh database file in its own temporary directory.
pub struct Db {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl Db {
    pub fn new() -> Db {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("test.db");
        Db { dir, path }
    }

    /// A new connection: WAL, busy timeout, functions registered.
    pub fn conn(&self) -> Connection {
        open(&self.path)
    }
}

pub fn open(path: &Path) -> Connection {
    let conn = Connection::open(path).unwrap();
    // The busy timeout first: the pragmas read the file too.
    conn.busy_timeout(Duration::from_secs(30)).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
    alkstore_sqlite::register(&conn).unwrap();
    conn
}

/// Runs one `SELECT f(...)` and returns its single value as SQL.
pub fn sql(conn: &Connection, query: &str, params: &[&dyn ToSql]) -> rusqlite::Result<Sql> {
    conn.query_row(query, params, |r| r.get::<_, Sql>(0))
}

/// Like [`sql`], but the value must succeed; text that is JSON is parsed.
pub fn val(conn: &Connection, query: &str, params: &[&dyn ToSql]) -> Value {
    match sql(conn, query, params).unwrap_or_else(|e| panic!("{query}: {e}")) {
        Sql::Null => Value::Null,
        Sql::Integer(i) => Value::from(i),
        Sql::Real(f) => Value::from(f),
        Sql::Text(t) => serde_json::from_str(&t).unwrap_or(Value::String(t)),
        Sql::Blob(_) => panic!("blob result"),
    }
}

pub fn int(conn: &Connection, query: &str, params: &[&dyn ToSql]) -> i64 {
    val(conn, query, params)
        .as_i64()
        .unwrap_or_else(|| panic!("{query}: not an integer"))
}

/// The error a call fails with: (contract code or "", full message, SQLite code).
pub fn fails(conn: &Connection, query: &str, params: &[&dyn ToSql]) -> (String, String, i32) {
    match sql(conn, query, params) {
        Ok(v) => panic!("{query} should fail, returned {v:?}"),
        Err(rusqlite::Error::SqliteFailure(e, msg)) => {
            let msg = msg.unwrap_or_default();
            let code = alkstore_core::ContractError::parse(&msg)
                .map(|c| c.code.code().to_string())
                .unwrap_or_default();
            (code, msg, e.extended_code)
        }
        Err(e) => panic!("{query}: unexpected error kind {e:?}"),
    }
}

/// The contract code a call fails with.
pub fn code(conn: &Connection, query: &str, params: &[&dyn ToSql]) -> String {
    fails(conn, query, params).0
}

/// A snapshot of every alkstore table, to prove a failed call wrote nothing.
pub fn snapshot(conn: &Connection) -> Vec<String> {
    let mut out = Vec::new();
    for table in [
        "alk_jobs",
        "alk_queues",
        "alk_events",
        "alk_offsets",
        "alk_notifications",
        "alk_locks",
        "alk_meta",
    ] {
        let mut st = match conn.prepare(&format!("SELECT * FROM {table} ORDER BY 1")) {
            Ok(st) => st,
            Err(_) => {
                out.push(format!("{table}: missing"));
                continue;
            }
        };
        let n = st.column_count();
        let rows = st
            .query_map([], |r| {
                Ok((0..n)
                    .map(|i| format!("{:?}", r.get::<_, Sql>(i).unwrap()))
                    .collect::<Vec<_>>()
                    .join("|"))
            })
            .unwrap();
        for row in rows {
            out.push(format!("{table}: {}", row.unwrap()));
        }
    }
    out
}

pub fn claim(conn: &Connection, queue: &str, worker: &str, n: i64) -> Vec<Value> {
    val(conn, "SELECT alk_claim(?1, ?2, ?3)", &[&queue, &worker, &n])
        .as_array()
        .unwrap()
        .clone()
}

pub fn enqueue(conn: &Connection, queue: &str, opts: Option<&str>, payload: &str) -> i64 {
    int(
        conn,
        "SELECT alk_enqueue(?1, ?2, ?3)",
        &[&queue, &opts, &payload],
    )
}

pub fn job(conn: &Connection, id: i64) -> Value {
    val(conn, "SELECT alk_get_job(?1)", &[&id])
}

pub fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}
