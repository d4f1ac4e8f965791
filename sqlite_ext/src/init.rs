//! `alk_init()`: creates the schema now instead of on first use.

use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::function::Out;
use crate::sql::SCHEMA_VERSION;

/// `alk_init()` → the schema version, after creating the schema if needed.
pub fn init(conn: &Conn, _args: &Args) -> Result<Out> {
    conn.ensure_schema()?;
    Ok(Out::Int(SCHEMA_VERSION))
}
