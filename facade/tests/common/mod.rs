//! The stores every facade test runs on: SQLite always, and the PostgreSQL
//! installs the shared test kit (`alkstore_testkit`, which the cross-engine
//! suite reads too) finds — the extension, and the extension through
//! PgBouncer in transaction-pooling mode with the wake-up listener
//! connected directly; `ALKSTORE_REQUIRE_PG=1` turns a missing PostgreSQL
//! into a failure.
#![allow(dead_code)]

use alkstore::{PgStore, SqliteStore, Store};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
pub fn open_child() -> Store {
    let url = std::env::var("ALK_CHILD_URL").expect("started by the parent test");
    match std::env::var("ALK_CHILD_LISTEN_URL") {
        Ok(direct) => PgStore::connect_with_listener(&url, &direct)
            .unwrap()
            .into(),
        Err(_) => alkstore::open(&url).unwrap(),
    }
}

impl Target {
    pub fn open(&self) -> Store {
        match self {
            Target::Sqlite(dir) => SqliteStore::open(dir.path().join("facade.db"))
                .unwrap()
                .into(),
            Target::Postgres(pg) => pg.connect().into(),
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

impl Target {
    /// Runs the application's own SQL (a business table, say) in a
    /// transaction of its own.
    pub fn execute(&self, sql: &str) {
        match self {
            Target::Sqlite(_) => {
                let store = self.sqlite();
                let tx = store.transaction().unwrap();
                tx.conn().execute_batch(sql).unwrap();
                tx.commit().unwrap();
            }
            Target::Postgres(_) => {
                let store = self.postgres();
                let mut tx = store.transaction().unwrap();
                tx.client().batch_execute(sql).unwrap();
                tx.commit().unwrap();
            }
        }
    }

    /// Starts this test binary again as a child process that runs only the
    /// ignored test `test`, opening this target (`open_child`) and reading
    /// `env`; its output is dropped.
    pub fn spawn_child(&self, test: &str, env: &[(&str, &str)]) -> Child {
        Command::new(std::env::current_exe().unwrap())
            .args(["--exact", test, "--ignored", "--test-threads=1"])
            .envs(self.child_env())
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// The integer a one-value query of the application's returns.
    pub fn query_i64(&self, sql: &str) -> i64 {
        match self {
            Target::Sqlite(_) => self
                .sqlite()
                .transaction()
                .unwrap()
                .conn()
                .query_row(sql, [], |r| r.get(0))
                .unwrap(),
            Target::Postgres(_) => self
                .postgres()
                .transaction()
                .unwrap()
                .client()
                // Unnamed: through PgBouncer's transaction pooling a named
                // statement can stay on a server connection another client
                // gets next (42P05; docs/decisions.md, "PgBouncer").
                .query_typed(sql, &[])
                .unwrap()
                .first()
                .expect("one row")
                .get(0),
        }
    }
}

/// SQLite, and the PostgreSQL installs of the shared test kit
/// (`alkstore_testkit`) but the plain SQL one: the facade runs the same
/// calls on it as on the extension, and the cross-engine suite covers that
/// install.
pub fn targets() -> Vec<Target> {
    let mut out = vec![Target::Sqlite(Arc::new(tempfile::tempdir().unwrap()))];
    for install in alkstore_testkit::pg_installs() {
        if install.label != alkstore_testkit::PLAIN {
            out.push(Target::Postgres(Pg {
                url: install.url,
                direct: install.direct_url,
            }));
        }
    }
    out
}

#[allow(unused_imports)]
pub use alkstore_testkit::{fresh, ms};

/// Waits (up to 60 s) for a child process to create `file`; fails at once
/// if the child exits first.
pub fn wait_for_file(child: &mut Child, file: &Path) {
    let until = Instant::now() + Duration::from_secs(60);
    while !file.exists() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the child exited ({status}) before {}", file.display());
        }
        assert!(
            Instant::now() < until,
            "the child never wrote {}",
            file.display()
        );
        std::thread::sleep(ms(20));
    }
}
