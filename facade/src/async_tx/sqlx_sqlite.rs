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
use alkstore_sqlite::routines::{is_busy, query_one_handle_nowait, HandleError, HandleValue};
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
    let params = handle_params(args);
    if crate::call::on_handle(function) {
        if let Some(value) = run_on_handle(conn, &sql, &params).await? {
            return sqlite_result(function, value?);
        }
    }
    let mut query = sqlx::query(&sql);
    for p in params {
        query = match p {
            HandleValue::Null => query.bind(None::<String>),
            HandleValue::Int(i) => query.bind(i),
            HandleValue::Real(n) => query.bind(n),
            HandleValue::Text(s) => query.bind(s),
            HandleValue::Blob(b) => query.bind(b),
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

/// Runs `sql` on the connection's raw handle (locked for us while it runs);
/// `None` when another connection holds the write lock: the caller waits
/// for it on the connection's own thread instead of blocking this one (on a
/// current-thread runtime, the lock's holder may be a task of this thread).
async fn run_on_handle(
    conn: &mut SqliteConnection,
    sql: &str,
    params: &[HandleValue],
) -> Result<Option<Result<SqliteValue>>> {
    let out = {
        let mut handle = conn.lock_handle().await?;
        let db = handle.as_raw_handle().as_ptr();
        // SAFETY: the handle is locked for us, open, and of the SQLite that
        // alkstore-sqlite links (sqlx's libsqlite3-sys).
        unsafe { query_one_handle_nowait(db, sql, params) }
    };
    Ok(settle(out))
}

/// `args` as parameters of a statement run on a raw handle.
pub(crate) fn handle_params(args: &[Arg]) -> Vec<HandleValue> {
    args.iter()
        .map(|a| match a {
            Arg::Null => HandleValue::Null,
            Arg::Int(i) => HandleValue::Int(*i),
            Arg::Num(n) => HandleValue::Real(*n),
            Arg::Text(s) | Arg::Json(s) => HandleValue::Text(s.clone()),
            Arg::Ids(ids) => HandleValue::Text(serde_json::to_string(ids).expect("ids serialize")),
        })
        .collect()
}

/// What a statement run on a raw handle gave: its value, the error as the
/// sqlx path reports it, or `None` if it met another connection's lock
/// (it changed nothing: run it where waiting does not block the runtime).
pub(crate) fn settle(
    out: std::result::Result<HandleValue, HandleError>,
) -> Option<Result<SqliteValue>> {
    Some(match out {
        Ok(HandleValue::Null) => Ok(SqliteValue::Null),
        Ok(HandleValue::Int(i)) => Ok(SqliteValue::Int(i)),
        Ok(HandleValue::Text(t)) => Ok(SqliteValue::Text(t)),
        Ok(other) => Ok(SqliteValue::Other(format!("{other:?}"))),
        Err(e) if is_busy(&e) => return None,
        Err(e) => Err(match alkstore_core::ContractError::parse(&e.message) {
            Some(c) => c.into(),
            None => Error::engine("sqlite", e.code.to_string(), e.message),
        }),
    })
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
    let init = crate::call::init();
    run(conn, init.function(), init.args()).await.map(drop)
}
