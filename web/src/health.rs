//! The health panel's readings. On PostgreSQL: live and dead tuples and the
//! last (auto)vacuum of each alkstore table, the oldest transaction that
//! holds back vacuum (and who holds it), prepared transactions and
//! replication slots holding an xmin, and `pg_notification_queue_usage()`.
//! On SQLite: the file's pages, free pages and journal mode.

use crate::db::{ApiError, Db};
use serde_json::{json, Value};

const PG_HEALTH: &str = r#"
SELECT json_build_object(
  'engine', 'postgres',
  'tables', coalesce((
    SELECT json_agg(json_build_object(
             'table', relname, 'live_tuples', n_live_tup, 'dead_tuples', n_dead_tup,
             'last_autovacuum', last_autovacuum, 'last_vacuum', last_vacuum)
           ORDER BY n_dead_tup DESC, relname)
      FROM pg_stat_user_tables WHERE schemaname = 'alkstore'), '[]'::json),
  'oldest_transaction', (
    SELECT json_build_object(
             'pid', pid, 'user', usename, 'application_name', application_name,
             'state', state, 'age_s', round(extract(epoch FROM now() - xact_start)::numeric, 1),
             'xmin_age', age(backend_xmin))
      FROM pg_stat_activity
     WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
       -- another database's snapshot does not hold back this one's tables;
       -- a walsender's (hot_standby_feedback: no database) does
       AND (datname = current_database() OR datname IS NULL)
     ORDER BY age(backend_xmin) DESC LIMIT 1),
  'prepared_transactions', (SELECT count(*) FROM pg_prepared_xacts),
  'replication_slot_xmin_age', (SELECT max(greatest(age(xmin), age(catalog_xmin))) FROM pg_replication_slots),
  'notification_queue_usage', pg_notification_queue_usage()
)::text
"#;

/// Reads the engine's health document.
pub fn read(db: &Db) -> Result<Value, ApiError> {
    match db {
        Db::Postgres(pg) => {
            let mut tx = pg.transaction()?;
            let row = tx
                .client()
                .query_one(PG_HEALTH, &[])
                .map_err(alkstore::Error::from)?;
            let text: String = row.get(0);
            tx.rollback()?;
            Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
        }
        Db::Sqlite(lite) => {
            let tx = lite.transaction()?;
            let pragma = |name: &str| -> Result<Value, ApiError> {
                Ok(tx
                    .conn()
                    .query_row(&format!("PRAGMA {name}"), [], |r| {
                        r.get::<_, rusqlite::types::Value>(0)
                    })
                    .map(|v| match v {
                        rusqlite::types::Value::Integer(i) => json!(i),
                        rusqlite::types::Value::Text(t) => json!(t),
                        _ => Value::Null,
                    })
                    .map_err(alkstore::Error::from)?)
            };
            let v = json!({
                "engine": "sqlite",
                "page_size": pragma("page_size")?,
                "pages": pragma("page_count")?,
                "free_pages": pragma("freelist_count")?,
                "journal_mode": pragma("journal_mode")?,
            });
            tx.rollback()?;
            Ok(v)
        }
    }
}
