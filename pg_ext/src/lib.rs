//! alkstore's PostgreSQL engine, packaged by pgrx.
//!
//! All logic is SQL / PL/pgSQL in `sql/postgres/` (so the very same
//! functions also install as one plain SQL script where native extensions
//! are not allowed, see `scripts/build-plain-sql.sh`). This crate only
//! embeds those files into the extension's install script and hosts the
//! in-server tests.

::pgrx::pg_module_magic!();

// The install script, in order: the schema, then the code (every function
// CREATE OR REPLACE, so upgrades re-run it). scripts/lib/pg-sources.sh reads
// this list to build the plain SQL install and the update scripts
// (pg_ext/sql/alkstore--<old>--<new>.sql) from the same files.
::pgrx::extension_sql_file!("../../sql/postgres/schema.sql", name = "schema", bootstrap);
::pgrx::extension_sql_file!(
    "../../sql/postgres/constants.sql",
    name = "constants",
    requires = ["schema"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/common.sql",
    name = "common",
    requires = ["constants"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/wake.sql",
    name = "wake",
    requires = ["common"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/group.sql",
    name = "group",
    requires = ["wake"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/queue.sql",
    name = "queue",
    requires = ["group"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/outbox.sql",
    name = "outbox",
    requires = ["queue"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/pause.sql",
    name = "pause",
    requires = ["outbox"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/prune.sql",
    name = "prune",
    requires = ["pause"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/schedule.sql",
    name = "schedule",
    requires = ["prune"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/stream.sql",
    name = "stream",
    requires = ["schedule"]
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
::pgrx::extension_sql_file!(
    "../../sql/postgres/admin.sql",
    name = "admin",
    requires = ["lock"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/version.sql",
    name = "version",
    requires = ["admin"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/backup.sql",
    name = "backup",
    requires = ["version"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/guard.sql",
    name = "guard",
    requires = ["backup"]
);
::pgrx::extension_sql_file!(
    "../../sql/postgres/grants.sql",
    name = "grants",
    requires = ["guard"]
);

/// In-server tests (`cargo pgrx test`): the extension installs and its
/// functions work inside one backend. Behaviour under concurrency, roles
/// and both install methods is tested from outside, in `tests/`.
#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;
    #[pg_test]
    fn a_job_round_trip_inside_one_transaction() {
        let id = Spi::get_one::<i64>("SELECT alk_enqueue('pgrx-rt', NULL, '{\"n\": 1}')")
            .unwrap()
            .unwrap();
        let claimed = Spi::get_one::<i64>("SELECT id FROM alk_claim('pgrx-rt', 'w', 10)")
            .unwrap()
            .unwrap();
        assert_eq!(claimed, id);
        let acked = Spi::get_one::<bool>(&format!("SELECT alk_ack({id}, 'w')"))
            .unwrap()
            .unwrap();
        assert!(acked);
        let gone = Spi::get_one::<pgrx::JsonB>(&format!("SELECT alk_get_job({id})")).unwrap();
        assert!(gone.is_none());
    }

    #[pg_test]
    fn stamped_options_show_in_get_job() {
        Spi::run("SELECT alk_queue_configure('pgrx-stamp', '{\"visibility_timeout_s\": 0.25}')")
            .unwrap();
        let id =
            Spi::get_one::<i64>("SELECT alk_enqueue('pgrx-stamp', '{\"max_attempts\": 2}', '1')")
                .unwrap()
                .unwrap();
        // A separate statement: alk_get_job reads with its own snapshot.
        let job = Spi::get_one::<String>(&format!("SELECT alk_get_job({id})::text"))
            .unwrap()
            .unwrap();
        assert!(job.contains("\"max_attempts\": 2"), "{job}");
        assert!(job.contains("\"visibility_timeout_s\": 0.25"), "{job}");
    }

    #[pg_test(
        error = "alkstore: ReservedName: queue name \"__alkstore_outbox:x\" starts with the reserved prefix \"__alkstore_\""
    )]
    fn the_backing_queue_of_an_outbox_is_reserved() {
        Spi::run("SELECT alk_enqueue('__alkstore_outbox:x', NULL, '1')").unwrap();
    }

    #[pg_test]
    fn stream_offsets_are_dense() {
        // alk_publish returns the event's id; a read gives it its offset.
        let mut ids = Vec::new();
        for _ in 1..=3 {
            ids.push(
                Spi::get_one::<i64>("SELECT alk_publish('pgrx-s', '{}')")
                    .unwrap()
                    .unwrap(),
            );
        }
        let read = Spi::get_one::<String>(
            "SELECT string_agg(\"offset\" || ':' || id, ',' ORDER BY \"offset\") \
             FROM alk_read('pgrx-s', 0, 10)",
        )
        .unwrap()
        .unwrap();
        let want: Vec<String> = ids
            .iter()
            .enumerate()
            .map(|(k, id)| format!("{}:{id}", k + 1))
            .collect();
        assert_eq!(read, want.join(","));
    }
}

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
