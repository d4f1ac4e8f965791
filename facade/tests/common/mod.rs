//! The stores every facade test runs on: SQLite always, PostgreSQL when the
//! test command configured it (`ALKSTORE_PG_URL`; `ALKSTORE_REQUIRE_PG`
//! turns its absence into a failure).
#![allow(dead_code)]

use alkstore::{PgStore, SqliteStore, Store};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How to open one more store on the same database (another "process").
#[derive(Clone)]
pub enum Target {
    Sqlite(Arc<tempfile::TempDir>),
    Postgres(String),
}

impl Target {
    pub fn open(&self) -> Box<dyn Store> {
        match self {
            Target::Sqlite(dir) => {
                Box::new(SqliteStore::open(dir.path().join("facade.db")).unwrap())
            }
            Target::Postgres(url) => Box::new(PgStore::connect(url).unwrap()),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Target::Sqlite(_) => "sqlite",
            Target::Postgres(_) => "postgres",
        }
    }

    /// The `alkstore::open` URL (SQLite) or connection string (PostgreSQL).
    pub fn url(&self) -> String {
        match self {
            Target::Sqlite(dir) => format!("sqlite:{}", dir.path().join("facade.db").display()),
            Target::Postgres(url) => url.clone(),
        }
    }

    pub fn sqlite(&self) -> SqliteStore {
        match self {
            Target::Sqlite(dir) => SqliteStore::open(dir.path().join("facade.db")).unwrap(),
            Target::Postgres(_) => panic!("not SQLite"),
        }
    }

    pub fn postgres(&self) -> PgStore {
        match self {
            Target::Postgres(url) => PgStore::connect(url).unwrap(),
            Target::Sqlite(_) => panic!("not PostgreSQL"),
        }
    }
}

pub fn targets() -> Vec<Target> {
    let mut out = vec![Target::Sqlite(Arc::new(tempfile::tempdir().unwrap()))];
    match std::env::var("ALKSTORE_PG_URL") {
        Ok(url) => out.push(Target::Postgres(url)),
        Err(_) if std::env::var_os("ALKSTORE_REQUIRE_PG").is_some() => {
            panic!("ALKSTORE_PG_URL is not set")
        }
        Err(_) => eprintln!("note: ALKSTORE_PG_URL not set: PostgreSQL not tested"),
    }
    out
}

/// A name no other test or run uses (the PostgreSQL database is shared).
pub fn fresh(base: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{base}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

pub fn ms(n: u64) -> std::time::Duration {
    std::time::Duration::from_millis(n)
}
