//! [`AsyncTxHandle`] on tokio-postgres (feature `tokio-postgres`).

use super::AsyncTxHandle;
use crate::error::Result;
use crate::sql::{Arg, PgCall};
use serde_json::Value;

async fn call(
    client: &impl tokio_postgres::GenericClient,
    function: &str,
    args: &[Arg],
) -> Result<Value> {
    let call = PgCall::new(function, args)?;
    // Typed, unnamed statements, as the blocking API sends them.
    let row = client
        .query_typed_one(&call.sql, &call.typed_params())
        .await?;
    call.result(call.column(&row)?)
}

/// A transaction the caller began (`client.transaction().await?`).
impl AsyncTxHandle for tokio_postgres::Transaction<'_> {
    async fn call(&mut self, function: &str, args: &[Arg]) -> Result<Value> {
        call(&*self, function, args).await
    }
}

/// A client outside a transaction: each call commits on its own, or inside
/// a transaction the caller opened with `BEGIN` on it.
impl AsyncTxHandle for tokio_postgres::Client {
    async fn call(&mut self, function: &str, args: &[Arg]) -> Result<Value> {
        call(&*self, function, args).await
    }
}
