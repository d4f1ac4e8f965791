//! alkstore's PostgreSQL engine, packaged by pgrx.
//!
//! All logic is SQL / PL/pgSQL in `sql/postgres/` (so the very same
//! functions also install as one plain SQL script where native extensions
//! are not allowed, see `scripts/build-plain-sql.sh`). This crate only
//! embeds those files into the extension's install script and hosts the
//! in-server tests.

::pgrx::pg_module_magic!();

// The install script, in order. scripts/build-plain-sql.sh reads this list
// to build the plain SQL install from the same files.
::pgrx::extension_sql_file!("../../sql/postgres/schema.sql", name = "schema", bootstrap);
::pgrx::extension_sql_file!(
    "../../sql/postgres/common.sql",
    name = "common",
    requires = ["schema"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/wake.sql",
    name = "wake",
    requires = ["common"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/queue.sql",
    name = "queue",
    requires = ["wake"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/outbox.sql",
    name = "outbox",
    requires = ["queue"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/stream.sql",
    name = "stream",
    requires = ["outbox"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/notify.sql",
    name = "notify",
    requires = ["stream"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/lock.sql",
    name = "lock",
    requires = ["notify"]
);

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests;

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    /// One-off setup when the test framework starts.
    pub fn setup(_options: Vec<&str>) {}

    /// postgresql.conf settings the tests need.
    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}
