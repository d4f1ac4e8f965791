//! [`AsyncTxHandle`] on sqlx's SQLite connection (feature `sqlx-sqlite`).
//!
//! The `alk_*` functions are registered in-process (no extension library
//! to ship or load) on a connection the first time a call finds them
//! missing there; the schema is created then too (`alk_init`). A pool the
//! application opened with no alkstore-specific step just works, and after
//! that plain `sqlx::query("SELECT alk_claim(…)")` on those connections does
//! too.

use super::AsyncTxHandle;
use crate::error::{Error, Result};
use crate::sql::{sqlite_result, sqlite_sql, Arg, SqliteValue};
use serde_json::Value;
use sqlx::sqlite::SqliteConnection;
use sqlx::{Row, TypeInfo, ValueRef};

impl AsyncTxHandle for SqliteConnection {
    async fn call(&mut self, function: &str, args: &[Arg]) -> Result<Value> {
        match run(self, function, args).await {
            Err(Error::Engine { message, .. }) if message.contains("no such function: alk_") => {
                register(self).await?;
                run(self, function, args).await
            }
            other => other,
        }
    }
}

async fn run(conn: &mut SqliteConnection, function: &str, args: &[Arg]) -> Result<Value> {
    crate::sql::function(function, args.len(), false)?;
    let sql = sqlite_sql(function, args.len());
    let mut query = sqlx::query(&sql);
    for a in args {
        query = match a {
            Arg::Null => query.bind(None::<String>),
            Arg::Int(i) => query.bind(*i),
            Arg::Num(n) => query.bind(*n),
            Arg::Text(s) | Arg::Json(s) => query.bind(s.clone()),
            Arg::Ids(ids) => query.bind(serde_json::to_string(ids).expect("ids serialize")),
        };
    }
    let row = query.fetch_one(&mut *conn).await?;
    let raw = row.try_get_raw(0)?;
    let value = if raw.is_null() {
        SqliteValue::Null
    } else {
        match raw.type_info().name() {
            "INTEGER" => SqliteValue::Int(row.try_get(0)?),
            "TEXT" => SqliteValue::Text(row.try_get(0)?),
            other => SqliteValue::Other(other.to_string()),
        }
    };
    sqlite_result(function, value)
}

/// Registers the `alk_*` functions on `conn` and creates alkstore's schema
/// if needed. [`AsyncTxHandle`] calls do this by themselves on a connection
/// that lacks the functions; call it from the pool's `after_connect` when
/// plain SQL (`SELECT alk_claim(…)`) may reach a connection first.
///
/// ```no_run
/// # async fn demo() -> Result<(), sqlx::Error> {
/// use sqlx::sqlite::SqlitePoolOptions;
/// let pool = SqlitePoolOptions::new()
///     .after_connect(|conn, _meta| Box::pin(async move {
///         alkstore::register_sqlx_sqlite(conn).await.map_err(|e| sqlx::Error::Protocol(e.to_string()))
///     }))
///     .connect("sqlite:app.db?mode=rwc")
///     .await?;
/// # Ok(()) }
/// ```
pub async fn register(conn: &mut SqliteConnection) -> Result<()> {
    {
        let mut handle = conn.lock_handle().await?;
        let db = handle.as_raw_handle().as_ptr();
        // SAFETY: the handle is locked for us, open, and of the SQLite that
        // alkstore-sqlite registers on (sqlx's libsqlite3-sys, linked once
        // per binary).
        unsafe { alkstore_sqlite::routines::register_handle(db) }
            .map_err(|(rc, what)| Error::engine("sqlite", rc.to_string(), what))?;
    }
    run(conn, "alk_init", &[]).await.map(drop)
}
