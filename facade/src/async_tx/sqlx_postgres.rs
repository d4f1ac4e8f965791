//! [`AsyncTxHandle`] on sqlx's PostgreSQL connection (feature `sqlx-postgres`).

use super::AsyncTxHandle;
use crate::error::Result;
use crate::sql::{Arg, PgCall};
use serde_json::Value;
use sqlx::postgres::{PgConnection, PgRow};

/// The statement of a call, and how to read its row. Sent with the simple
/// query protocol, parameters written in as literals: sqlx sends an unnamed
/// statement's Parse and its Bind in two separate exchanges, which a
/// transaction-pooling PgBouncer may route to two different server
/// connections outside a transaction (running another client's statement
/// with these parameters). One message cannot be split.
pub(crate) struct SqlxCall(PgCall);

impl SqlxCall {
    pub(crate) fn new(function: &str, args: &[Arg]) -> Result<(SqlxCall, String)> {
        let call = PgCall::new(function, args)?;
        let sql = call.inline_sql();
        Ok((SqlxCall(call), sql))
    }

    pub(crate) fn result(&self, row: PgRow) -> Result<Value> {
        let text: Option<String> = if self.0.procedure {
            sqlx::Row::try_get::<Option<i64>, _>(&row, 0)?.map(|n| n.to_string())
        } else {
            sqlx::Row::try_get(&row, 0)?
        };
        self.0.result(text)
    }
}

/// Calls `function` on a sqlx PostgreSQL connection.
pub(crate) async fn call(conn: &mut PgConnection, function: &str, args: &[Arg]) -> Result<Value> {
    let (call, sql) = SqlxCall::new(function, args)?;
    let row = sqlx::Executor::fetch_one(conn, sql.as_str()).await?;
    call.result(row)
}

/// `&mut *tx` of a `sqlx::Transaction<'_, Postgres>`, or a pooled
/// connection (`&mut *pool.acquire().await?`).
impl AsyncTxHandle for PgConnection {
    async fn call(&mut self, function: &str, args: &[Arg]) -> Result<Value> {
        call(self, function, args).await
    }
}
