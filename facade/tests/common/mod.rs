//! The stores every facade test runs on: SQLite always, PostgreSQL when the
//! test command configured it (`ALKSTORE_PG_URL`; `ALKSTORE_REQUIRE_PG`
//! turns its absence into a failure), and PostgreSQL through PgBouncer in
//! transaction-pooling mode (`ALKSTORE_PG_BOUNCER_URL`) with the wake-up
//! listener connected directly.
#![allow(dead_code)]

use alkstore::{PgStore, SqliteStore, Store};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How to open one more store on the same database (another "process").
#[derive(Clone)]
pub enum Target {
    Sqlite(Arc<tempfile::TempDir>),
    Postgres(Pg),
}

/// Where a PostgreSQL store connects: its pool, and its listener.
#[derive(Clone)]
pub struct Pg {
    /// The pool's connection string (maybe a PgBouncer).
    pub url: String,
    /// The listener's: always the server itself.
    pub direct: String,
}

impl Pg {
    fn connect(&self) -> PgStore {
        PgStore::connect_with_listener(&self.url, &self.direct).unwrap()
    }

    /// Whether the pool goes through PgBouncer.
    pub fn pooled(&self) -> bool {
        self.url != self.direct
    }
}

/// Opens the store a parent test handed to its child process.
pub fn open_child() -> Box<dyn Store> {
    let url = std::env::var("ALK_CHILD_URL").expect("started by the parent test");
    match std::env::var("ALK_CHILD_LISTEN_URL") {
        Ok(direct) => Box::new(PgStore::connect_with_listener(&url, &direct).unwrap()),
        Err(_) => alkstore::open(&url).unwrap(),
    }
}

impl Target {
    pub fn open(&self) -> Box<dyn Store> {
        match self {
            Target::Sqlite(dir) => {
                Box::new(SqliteStore::open(dir.path().join("facade.db")).unwrap())
            }
            Target::Postgres(pg) => Box::new(pg.connect()),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Target::Sqlite(_) => "sqlite",
            Target::Postgres(pg) if pg.pooled() => "postgres via PgBouncer",
            Target::Postgres(_) => "postgres",
        }
    }

    /// Environment for a child process that opens this target (`open_child`).
    pub fn child_env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![("ALK_CHILD_URL", self.url())];
        if let Target::Postgres(pg) = self {
            env.push(("ALK_CHILD_LISTEN_URL", pg.direct.clone()));
        }
        env
    }

    /// The `alkstore::open` URL (SQLite) or connection string (PostgreSQL).
    pub fn url(&self) -> String {
        match self {
            Target::Sqlite(dir) => format!("sqlite:{}", dir.path().join("facade.db").display()),
            Target::Postgres(pg) => pg.url.clone(),
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
            Target::Postgres(pg) => pg.connect(),
            Target::Sqlite(_) => panic!("not PostgreSQL"),
        }
    }
}

pub fn targets() -> Vec<Target> {
    let mut out = vec![Target::Sqlite(Arc::new(tempfile::tempdir().unwrap()))];
    match std::env::var("ALKSTORE_PG_URL") {
        Ok(url) => {
            out.push(Target::Postgres(Pg {
                url: url.clone(),
                direct: url.clone(),
            }));
            if let Ok(pooled) = std::env::var("ALKSTORE_PG_BOUNCER_URL") {
                out.push(Target::Postgres(Pg {
                    url: pooled,
                    direct: url,
                }));
            }
        }
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
