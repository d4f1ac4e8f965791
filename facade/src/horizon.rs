//! What holds back vacuum on PostgreSQL: while a transaction keeps an old
//! snapshot (or transaction id) open, no job version written since can be
//! removed, and every claim walks the index entries of all of them
//! (docs/operating.md, "Long transactions"). One reading for the Prometheus
//! exporter and the dashboard's health panel.

use crate::error::Result;
use crate::postgres::PgStore;

/// Every session of this database (and every walsender, which has none)
/// holding an xmin or a transaction id, and this database's prepared
/// transactions; another database's snapshot does not hold back this one's
/// tables. `pg_stat_activity` shows other roles' transactions only to a role
/// with the privileges of `pg_read_all_stats` (`pg_monitor` has them) or a
/// superuser: the first column says whether this reading saw them.
const HORIZON: &str = r#"
WITH holders AS (
  SELECT pid, usename::text AS usr, application_name, state, NULL::text AS gid,
         xact_start AS since, greatest(age(backend_xmin), age(backend_xid))::bigint AS xid_age
    FROM pg_stat_activity
   WHERE (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL) AND pid <> pg_backend_pid()
     AND (datname = current_database() OR datname IS NULL)
  UNION ALL
  SELECT NULL, owner::text, NULL, 'prepared', gid, prepared, age(transaction)::bigint
    FROM pg_prepared_xacts WHERE database = current_database()
)
SELECT pg_has_role(current_user, 'pg_read_all_stats', 'USAGE'),
       (SELECT extract(epoch FROM now() - min(since))::float8 FROM holders),
       (SELECT max(xid_age) FROM holders),
       (SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()),
       (SELECT max(greatest(age(xmin), age(catalog_xmin)))::bigint FROM pg_replication_slots),
       h.pid, h.usr, h.application_name, h.state, h.gid,
       extract(epoch FROM now() - h.since)::float8, h.xid_age
  FROM (SELECT 1) AS one
  LEFT JOIN LATERAL (SELECT * FROM holders ORDER BY xid_age DESC NULLS LAST LIMIT 1) AS h ON true
"#;

/// What holds back vacuum in this database, read by [`PgStore::horizon`].
#[derive(Debug, Clone, PartialEq)]
pub struct Horizon {
    /// Whether this role sees other roles' transactions (it has the
    /// privileges of `pg_read_all_stats`, as `pg_monitor` does, or is a
    /// superuser). When false, the readings below cover only this role's
    /// own sessions and prepared transactions: a quiet reading proves
    /// nothing.
    pub sees_all_sessions: bool,
    /// Seconds since the oldest holding transaction began (`None`: none).
    pub oldest_transaction_age_s: Option<f64>,
    /// Transactions since the oldest xmin or transaction id a session or
    /// prepared transaction holds (`None`: none).
    pub oldest_xid_age: Option<i64>,
    /// Prepared transactions of this database.
    pub prepared_transactions: i64,
    /// Transactions since the oldest xmin a replication slot holds
    /// (`None`: no slot holds one).
    pub replication_slot_xmin_age: Option<i64>,
    /// The session or prepared transaction holding the oldest xmin.
    pub holder: Option<HorizonHolder>,
}

impl Horizon {
    /// The oldest xmin anything holds back, in transactions: sessions,
    /// walsenders, prepared transactions and replication slots (0: none).
    pub fn oldest_xmin_age_xids(&self) -> i64 {
        self.oldest_xid_age
            .unwrap_or(0)
            .max(self.replication_slot_xmin_age.unwrap_or(0))
    }
}

/// Who holds the oldest xmin: a session (with its `pid`) or a prepared
/// transaction (with its `gid`).
#[derive(Debug, Clone, PartialEq)]
pub struct HorizonHolder {
    /// The backend's process id; `None` for a prepared transaction.
    pub pid: Option<i32>,
    /// The role it runs as (a prepared transaction's owner).
    pub user: Option<String>,
    /// The session's `application_name`.
    pub application_name: Option<String>,
    /// `active`, `idle in transaction`, … or `prepared`.
    pub state: Option<String>,
    /// A prepared transaction's global id.
    pub gid: Option<String>,
    /// Seconds since its transaction began (`None` for a walsender).
    pub age_s: Option<f64>,
    /// Transactions since its xmin or transaction id.
    pub xid_age: Option<i64>,
}

impl PgStore {
    /// Reads what holds back vacuum in this database (see [`Horizon`]).
    pub fn horizon(&self) -> Result<Horizon> {
        let mut tx = self.transaction()?;
        let row = tx.client().query_one(HORIZON, &[])?;
        tx.rollback()?;
        let pid: Option<i32> = row.get(5);
        let state: Option<String> = row.get(8);
        Ok(Horizon {
            sees_all_sessions: row.get(0),
            oldest_transaction_age_s: row.get(1),
            oldest_xid_age: row.get(2),
            prepared_transactions: row.get(3),
            replication_slot_xmin_age: row.get(4),
            holder: (pid.is_some() || state.is_some()).then(|| HorizonHolder {
                pid,
                user: row.get(6),
                application_name: row.get(7),
                state,
                gid: row.get(9),
                age_s: row.get(10),
                xid_age: row.get(11),
            }),
        })
    }
}
