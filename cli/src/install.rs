//! install and upgrade.

use crate::output::Output;
use crate::Fallible;
use alkstore::call;
use alkstore::sql::call_postgres;
use serde_json::json;

/// The plain PostgreSQL install script of this version (re-runnable: it
/// installs, upgrades an older plain install, or says there is nothing to do).
const PLAIN_SQL: &str = include_str!(concat!(env!("OUT_DIR"), "/alkstore.plain.sql"));

pub fn install(print_sql: bool) -> Fallible {
    if !print_sql {
        return Err(
            "on PostgreSQL: `alkstore install --print-sql | psql -v ON_ERROR_STOP=1 -d DB` \
                    (or CREATE EXTENSION alkstore where the extension is installed); \
                    SQLite needs no install: the schema is created on first use"
                .into(),
        );
    }
    use std::io::Write;
    match std::io::stdout().lock().write_all(PLAIN_SQL.as_bytes()) {
        // `| head`: the reader has seen enough.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// Brings the database's alkstore to this version: `ALTER EXTENSION … UPDATE`
/// for the extension, the plain script for a plain install, the migrations
/// for SQLite (run by the first call).
pub fn upgrade(url: &str, out: &Output) -> Fallible {
    if let alkstore::url::DbUrl::Postgres(url) = alkstore::url::DbUrl::parse(url)? {
        let mut client = alkstore::postgres::client(&url)?;
        let ext: Option<String> = client
            .query_opt(
                "SELECT extversion FROM pg_extension WHERE extname = 'alkstore'",
                &[],
            )?
            .map(|r| r.get(0));
        let how = match ext {
            Some(_) => {
                client.batch_execute("ALTER EXTENSION alkstore UPDATE")?;
                "extension"
            }
            None => {
                client.batch_execute(PLAIN_SQL)?;
                "plain SQL install"
            }
        };
        let read = call::version();
        let version = read.decode(call_postgres(&mut client, read.function(), read.args())?)?;
        out.done(
            "version",
            version.clone(),
            &format!(
                "alkstore {} ({how})",
                version["version"].as_str().unwrap_or("?")
            ),
        );
        return Ok(());
    }
    let store = alkstore::open(url)?;
    store.run(call::init())?;
    let version = store.run(call::version())?;
    out.done(
        "version",
        json!(version),
        &format!(
            "alkstore {} (SQLite, schema {})",
            version["version"].as_str().unwrap_or("?"),
            version["schema"]
        ),
    );
    Ok(())
}
