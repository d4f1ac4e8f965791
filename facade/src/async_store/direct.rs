//! The hot calls of an [`AsyncStore`](super::AsyncStore) opened by
//! `open_sqlite`, on SQLite connections of the store's own, run on the
//! calling task. sqlx's SQLite driver runs each connection on a thread of
//! its own: a call there goes to that thread and back (and the pool pings
//! the connection as it comes back), which on the development machine cost
//! four to five times the call itself. A claim or an ack takes tens of
//! microseconds: less than the hand-over. Everything else (your
//! transactions, the other functions) stays on the pool; a hot call that
//! meets another connection's write lock goes there too and waits on the
//! driver's thread, never on the runtime's.

use crate::async_tx::sqlx_sqlite::{handle_params, settle};
use crate::call::on_handle;
use crate::error::Result;
use crate::sql::{sqlite_result, sqlite_sql, Arg};
use alkstore_sqlite::routines::HandleConn;
use serde_json::Value;
use std::sync::Mutex;

/// How many idle connections the store keeps; more are opened while more
/// calls run at once, and closed after.
const KEEP_IDLE: usize = 8;

/// The store's own connections to its database file.
pub(crate) struct Direct {
    path: String,
    busy_timeout_ms: i32,
    idle: Mutex<Vec<HandleConn>>,
}

impl Direct {
    /// Connections to the file at `path` (opened as they are needed).
    pub(crate) fn new(path: String, busy_timeout_ms: i32) -> Direct {
        Direct {
            path,
            busy_timeout_ms,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Runs `function` if it is a hot call; `None` for the pool to run it
    /// (not a hot call, a connection that could not be opened, or another
    /// connection's write lock met: nothing was changed).
    pub(crate) fn call(&self, function: &str, args: &[Arg]) -> Option<Result<Value>> {
        if !on_handle(function) {
            return None;
        }
        if let Err(e) = crate::sql::function(function, args.len(), false) {
            return Some(Err(e));
        }
        let taken = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let mut conn = match taken {
            Some(conn) => conn,
            None => HandleConn::open(&self.path, self.busy_timeout_ms).ok()?,
        };
        let out = conn.query_one_nowait(&sqlite_sql(function, args.len()), &handle_params(args));
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < KEEP_IDLE {
            idle.push(conn);
        }
        drop(idle);
        Some(settle(out)?.and_then(|v| sqlite_result(function, v)))
    }
}
