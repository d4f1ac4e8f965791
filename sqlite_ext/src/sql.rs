//! The statement catalogue: every statement the functions run, loaded from
//! `sql/sqlite/*.sql`, where each one follows a `-- name: <key>` line.

use std::collections::HashMap;
use std::sync::OnceLock;

/// The schema script, run idempotently on first use.
pub const SCHEMA: &str = include_str!("../sql/schema.sql");

/// The schema version this build creates and understands.
pub const SCHEMA_VERSION: i64 = alkstore_core::SCHEMA_VERSION;

/// The migrations, as (the version each one brings the schema to, its
/// script), in order. A database at version `v` runs every one above `v`.
pub const MIGRATIONS: &[(i64, &str)] = &[
    (2, include_str!("../sql/migrate/0002.sql")),
    (3, include_str!("../sql/migrate/0003.sql")),
];

/// The tables and indexes [`SCHEMA`] makes, as (type, name): a database
/// at this schema version has every one of them.
pub fn schema_objects() -> &'static [(String, String)] {
    static OBJECTS: OnceLock<Vec<(String, String)>> = OnceLock::new();
    OBJECTS.get_or_init(|| {
        SCHEMA
            .lines()
            .filter_map(|line| {
                let rest = line.strip_prefix("CREATE ")?;
                let (kind, rest) = rest.split_once(" IF NOT EXISTS ")?;
                let name = rest.split([' ', '(']).next()?;
                Some((kind.to_lowercase(), name.to_string()))
            })
            .collect()
    })
}

const SOURCES: [&str; 12] = [
    include_str!("../sql/schedule.sql"),
    include_str!("../sql/admin.sql"),
    include_str!("../sql/queue.sql"),
    include_str!("../sql/release.sql"),
    include_str!("../sql/limit.sql"),
    include_str!("../sql/group.sql"),
    include_str!("../sql/deps.sql"),
    include_str!("../sql/pause.sql"),
    include_str!("../sql/prune.sql"),
    include_str!("../sql/stream.sql"),
    include_str!("../sql/notify.sql"),
    include_str!("../sql/lock.sql"),
];

fn catalogue() -> &'static HashMap<&'static str, &'static str> {
    static CATALOGUE: OnceLock<HashMap<&'static str, &'static str>> = OnceLock::new();
    CATALOGUE.get_or_init(|| {
        let mut map = HashMap::new();
        for source in SOURCES {
            for block in source.split("-- name: ").skip(1) {
                let (name, body) = block.split_once('\n').unwrap_or((block, ""));
                // A block ends at the first blank line; comments after it belong to the next one.
                let body = body.split("\n\n").next().unwrap_or("").trim();
                // A second statement of the same name would replace the
                // first for every caller (a savepoint's `release`, once).
                let name = name.trim();
                assert!(
                    map.insert(name, body).is_none(),
                    "two SQL statements named {name:?}"
                );
            }
        }
        map
    })
}

/// The SQL of the statement `name`.
///
/// # Panics
/// If no statement has that name: a programming error, caught by the tests.
pub fn get(name: &str) -> &'static str {
    catalogue()
        .get(name)
        .copied()
        .unwrap_or_else(|| panic!("no SQL statement named {name:?}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_schema_objects_are_read_from_the_schema() {
        let objects = super::schema_objects();
        assert!(objects.contains(&("table".into(), "alk_meta".into())));
        assert!(objects.contains(&("index".into(), "alk_jobs_pending".into())));
        assert!(objects.len() >= 20, "{objects:?}");
    }

    #[test]
    fn migrations_end_at_the_schema_version() {
        let versions: Vec<i64> = super::MIGRATIONS.iter().map(|m| m.0).collect();
        assert_eq!(versions, (2..=super::SCHEMA_VERSION).collect::<Vec<_>>());
        for (v, script) in super::MIGRATIONS {
            let bump = format!("UPDATE alk_meta SET value = '{v}' WHERE key = 'schema_version';");
            assert!(
                script.contains(&bump),
                "migration {v} must record its version"
            );
        }
    }

    #[test]
    fn blocks_are_single_statements() {
        let c = super::catalogue();
        assert!(c.len() >= 25, "{} statements", c.len());
        for (name, sql) in c {
            assert!(sql.ends_with(';'), "{name}: {sql}");
            assert_eq!(sql.matches(';').count(), 1, "{name}");
        }
    }
}
