//! The health panel's readings. On PostgreSQL: live and dead tuples and the
//! last (auto)vacuum of each alkstore table, what holds back vacuum
//! ([`alkstore::Horizon`]: the oldest transaction and who holds it, prepared
//! transactions, replication slots, whether this role sees other roles'
//! sessions), `pg_notification_queue_usage()` and whether the maintenance
//! worker serves the database (contract v1.3 §O).
//! On SQLite: the file's pages, free pages and journal mode. On both: how
//! long ago a sweep last ran (issue 57).

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
            let mut doc: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let h = pg.horizon()?;
            doc["sees_all_sessions"] = json!(h.sees_all_sessions);
            doc["oldest_transaction"] = h.holder.map_or(Value::Null, |o| {
                json!({
                    "pid": o.pid, "user": o.user, "application_name": o.application_name,
                    "state": o.state, "gid": o.gid,
                    "age_s": o.age_s.map(|s| (s * 10.0).round() / 10.0), "xmin_age": o.xid_age,
                })
            });
            doc["prepared_transactions"] = json!(h.prepared_transactions);
            doc["replication_slot_xmin_age"] = json!(h.replication_slot_xmin_age);
            // As alk_queue_stats says it: its owner sees the worker's
            // backend, whatever this role may see of other sessions.
            let stats = pg.run(alkstore::call::queue_stats("health")?)?;
            doc["maintenance_worker"] = stats["maintenance_worker"].clone();
            doc["last_sweep_age_s"] = stats["last_sweep_age_s"].clone();
            Ok(doc)
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
                "maintenance_worker": false,
            });
            tx.rollback()?;
            let mut v = v;
            let stats = lite.run(alkstore::call::queue_stats("health")?)?;
            v["last_sweep_age_s"] = stats["last_sweep_age_s"].clone();
            Ok(v)
        }
    }
}
