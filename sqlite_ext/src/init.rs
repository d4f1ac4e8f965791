//! `alk_init()` and `alk_version()`: the schema, created or migrated now
//! instead of on first use, and the versions (contract v1.1 §B).

use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::out::Out;

/// `alk_init()` → the schema version, after creating or migrating the schema.
pub fn alk_init(conn: &Conn, _args: &Args) -> Result<Out> {
    Ok(Out::Int(conn.schema_version()?))
}

/// `alk_version()` → `{"version": "<library version>", "schema": <n>}`.
pub fn alk_version(conn: &Conn, _args: &Args) -> Result<Out> {
    let schema = conn.schema_version()?;
    Ok(Out::Text(format!(
        r#"{{"version":"{}","schema":{schema}}}"#,
        alkstore_core::VERSION
    )))
}
