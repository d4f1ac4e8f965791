//! [`AsyncTxHandle`] on sqlx's PostgreSQL connection (feature `sqlx-postgres`).

use super::AsyncTxHandle;
use crate::error::Result;
use crate::sql::{Arg, PgCall};
use serde_json::Value;

/// `&mut *tx` of a `sqlx::Transaction<'_, Postgres>`, or a pooled
/// connection (`&mut *pool.acquire().await?`).
impl AsyncTxHandle for sqlx::PgConnection {
    async fn call(&mut self, function: &str, args: &[Arg]) -> Result<Value> {
        let call = PgCall::new(function, args);
        let mut query = sqlx::query_scalar::<_, Option<String>>(&call.sql)
            // Unnamed: nothing stays prepared on the server connection, so
            // calls work through a transaction-pooling PgBouncer as well.
            .persistent(false);
        for p in &call.params {
            query = query.bind(p.as_deref());
        }
        let text = query.fetch_one(&mut *self).await?;
        call.result(text)
    }
}
