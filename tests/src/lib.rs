//! The harness of the cross-engine suite.
//!
//! A test body talks to a [`Db`] — one connection to one engine — by
//! function name and typed arguments, through the facade's call layer
//! (`alkstore::sql`, which every typed handle of the facade uses), and gets
//! every result back as JSON in one shape, whatever the engine's idiom
//! (SQLite's JSON text and 0/1, PostgreSQL's `SETOF` rows, `bigint[]` and
//! booleans). [`targets`] lists
//! the engines to run each body on: SQLite always (a fresh file), and
//! PostgreSQL installed as an extension (`ALKSTORE_PG_URL`) and as the
//! plain SQL script (`ALKSTORE_PG_PLAIN_URL`), and the extension's database
//! through PgBouncer in transaction-pooling mode (`ALKSTORE_PG_BOUNCER_URL`),
//! when set; `scripts/test.sh` sets all three.

use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use alkstore::sql::Arg;

/// Text argument.
pub fn t(s: &str) -> Arg {
    Arg::Text(s.to_string())
}

/// JSON argument.
pub fn j(s: &str) -> Arg {
    Arg::Json(s.to_string())
}

/// A failed call: the contract code (or the engine's code) and the message.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// `ALK01`…`ALK05`, else the engine's own code.
    pub code: String,
    /// The engine's message.
    pub message: String,
}

/// The result of a call, as JSON.
pub type Out = Result<Value, Failure>;

fn failure(e: alkstore::Error) -> Failure {
    let message = e.to_string();
    let code = match &e {
        alkstore::Error::Engine { code, .. } => code.clone(),
        contract => contract.code().unwrap_or_default().to_string(),
    };
    Failure { code, message }
}

/// One connection to one engine.
pub trait Db: Send {
    /// Which engine and install this is, for assertion messages.
    fn engine(&self) -> String;
    /// Calls `alk_*` function `f`.
    fn call(&mut self, f: &str, args: &[Arg]) -> Out;
    /// Runs SQL that is the same on both engines (business tables).
    fn exec(&mut self, sql: &str);
    /// One integer from a query that is the same on both engines.
    fn query_i64(&mut self, sql: &str) -> i64;
    /// Starts a transaction (SQLite: `BEGIN IMMEDIATE`).
    fn begin(&mut self);
    /// Commits.
    fn commit(&mut self);
    /// Rolls back.
    fn rollback(&mut self);

    /// Calls and expects success.
    fn ok(&mut self, f: &str, args: &[Arg]) -> Value {
        let engine = self.engine();
        self.call(f, args)
            .unwrap_or_else(|e| panic!("[{engine}] {f}{args:?} failed: {e:?}"))
    }

    /// Calls and expects an integer result.
    fn int(&mut self, f: &str, args: &[Arg]) -> i64 {
        let v = self.ok(f, args);
        v.as_i64()
            .unwrap_or_else(|| panic!("[{}] {f}: not an integer: {v}", self.engine()))
    }

    /// Calls and expects a boolean result.
    fn yes(&mut self, f: &str, args: &[Arg]) -> bool {
        let v = self.ok(f, args);
        v.as_bool()
            .unwrap_or_else(|| panic!("[{}] {f}: not a boolean: {v}", self.engine()))
    }

    /// Calls and expects a failure; returns its code.
    fn code(&mut self, f: &str, args: &[Arg]) -> String {
        match self.call(f, args) {
            Ok(v) => panic!("[{}] {f}{args:?} should fail, returned {v}", self.engine()),
            Err(e) => e.code,
        }
    }
}

/// An engine to run test bodies on; clone it to open connections anywhere.
#[derive(Clone)]
pub struct Target {
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    Sqlite {
        path: PathBuf,
        _dir: Arc<tempfile::TempDir>,
    },
    Postgres {
        url: String,
        /// The server itself (`url` but for the PgBouncer install).
        direct: String,
        label: &'static str,
    },
}

impl Target {
    /// A new connection.
    pub fn connect(&self) -> Box<dyn Db> {
        match &self.kind {
            Kind::Sqlite { path, .. } => Box::new(Sqlite::open(path)),
            Kind::Postgres { url, label, .. } => Box::new(Pg::open(url, label)),
        }
    }

    /// The engine's name.
    pub fn name(&self) -> String {
        match &self.kind {
            Kind::Sqlite { .. } => "sqlite".into(),
            Kind::Postgres { label, .. } => format!("postgres ({label})"),
        }
    }

    /// Whether this is PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        matches!(self.kind, Kind::Postgres { .. })
    }

    /// Whether this is PostgreSQL through PgBouncer.
    pub fn is_bouncer(&self) -> bool {
        matches!(&self.kind, Kind::Postgres { label, .. } if *label == alkstore_testkit::BOUNCER)
    }

    /// Whether values of about 1 MB go through: not through PgBouncer.
    /// Debian 12's PgBouncer 1.18 once broke the framing of such a
    /// parameter under the suite's parallel load (the server: "invalid
    /// frontend message type 110", an 'n' of the value read as a message)
    /// and then spun on the closed connection, logging "sbuf_send_pending:
    /// no dst sock?" (pgbouncer/pgbouncer#590), until killed. The same
    /// calls run on the same server through the direct targets.
    pub fn takes_huge_values(&self) -> bool {
        !self.is_bouncer()
    }

    /// A SQLite file (kept alive by `dir`).
    pub fn sqlite_at(path: PathBuf, dir: Arc<tempfile::TempDir>) -> Target {
        Target {
            kind: Kind::Sqlite { path, _dir: dir },
        }
    }

    /// A PostgreSQL database.
    pub fn postgres(url: String, label: &'static str) -> Target {
        Target::postgres_via(url.clone(), url, label)
    }

    /// A PostgreSQL database reached through `url` (maybe a pooler), the
    /// server itself at `direct`.
    pub fn postgres_via(url: String, direct: String, label: &'static str) -> Target {
        Target {
            kind: Kind::Postgres { url, direct, label },
        }
    }

    /// The SQLite file (panics on PostgreSQL).
    pub fn sqlite_path(&self) -> &std::path::Path {
        match &self.kind {
            Kind::Sqlite { path, .. } => path,
            Kind::Postgres { .. } => panic!("not SQLite"),
        }
    }

    /// The PostgreSQL connection string (panics on SQLite).
    pub fn pg_url(&self) -> &str {
        match &self.kind {
            Kind::Postgres { url, .. } => url,
            Kind::Sqlite { .. } => panic!("not PostgreSQL"),
        }
    }

    /// The server itself, for a session that must keep its state (a
    /// `LISTEN`): [`pg_url`](Self::pg_url) but for the PgBouncer install.
    pub fn pg_direct_url(&self) -> &str {
        match &self.kind {
            Kind::Postgres { direct, .. } => direct,
            Kind::Sqlite { .. } => panic!("not PostgreSQL"),
        }
    }
}

/// The engines every test body runs on.
pub fn targets() -> Vec<Target> {
    let dir = Arc::new(tempfile::tempdir().expect("temp dir"));
    let mut out = vec![Target {
        kind: Kind::Sqlite {
            path: dir.path().join("suite.db"),
            _dir: dir,
        },
    }];
    for install in alkstore_testkit::pg_installs() {
        out.push(Target {
            kind: Kind::Postgres {
                url: install.url,
                direct: install.direct_url,
                label: install.label,
            },
        });
    }
    out
}

pub use alkstore_testkit::BOUNCER_URL;

/// The PostgreSQL targets with a direct connection (none when PostgreSQL is
/// not configured). Not the PgBouncer one: these tests use what a session
/// keeps (LISTEN), which transaction pooling does not.
pub fn pg_targets() -> Vec<Target> {
    targets()
        .into_iter()
        .filter(|t| t.is_postgres() && !t.is_bouncer())
        .collect()
}

/// Targets no other test writes to: the SQLite file of `targets()` (a new
/// one each call) and, on PostgreSQL, a database of its own per install,
/// `{prefix}_0` and `{prefix}_1`, made afresh.
pub fn isolated_targets(prefix: &str) -> Vec<Target> {
    let mut out: Vec<Target> = targets().into_iter().filter(|t| !t.is_postgres()).collect();
    for (i, install) in Install::ALL.into_iter().enumerate() {
        if let Some(url) = pg_database(&format!("{prefix}_{i}")) {
            install.install(&url);
            out.push(Target::postgres(url, "isolated"));
        }
    }
    out
}

/// (Re)creates the PostgreSQL database `name` on the server of
/// `ALKSTORE_PG_URL` (whose role must be allowed to) and returns its URL;
/// None when PostgreSQL is not configured.
pub fn pg_database(name: &str) -> Option<String> {
    let url = std::env::var("ALKSTORE_PG_URL").ok()?;
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    // Two statements, not one batch: a batch is one implicit transaction.
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .expect("drop database");
    admin
        .batch_execute(&format!("CREATE DATABASE \"{name}\""))
        .expect("create database");
    let config: postgres::Config = url.parse().expect("ALKSTORE_PG_URL");
    let current = config
        .get_dbname()
        .expect("ALKSTORE_PG_URL names a database");
    // The URL names its database once, as the path or as dbname=.
    Some(if url.contains(&format!("dbname={current}")) {
        url.replace(&format!("dbname={current}"), &format!("dbname={name}"))
    } else {
        url.replacen(&format!("/{current}"), &format!("/{name}"), 1)
    })
}

/// The partitions of `alkstore.jobs` (schema.sql), which hold its rows and
/// index entries: a query on them, as a subquery of one column.
pub const JOB_PARTITIONS: &str =
    "SELECT t.relid FROM pg_partition_tree('alkstore.jobs') t WHERE t.isleaf";

/// Claims one job of `queue` (worker `w`) in a transaction of its own and
/// returns the blocks of `alkstore.jobs`' partitions and their indexes that
/// transaction fetched: what the claim read, in pages (a btree
/// step over entries that fail a condition returns none of them, so tuples
/// would not show it).
pub fn pg_claim_blocks(c: &mut postgres::Client, queue: &str) -> (Vec<i64>, i64) {
    let read = format!(
        "SELECT (SELECT sum(pg_stat_get_xact_blocks_fetched(i.indexrelid))::bigint
                   FROM pg_index i WHERE i.indrelid IN ({JOB_PARTITIONS}))
              + (SELECT sum(pg_stat_get_xact_blocks_fetched(p))::bigint FROM ({JOB_PARTITIONS}) t(p))"
    );
    let read = read.as_str();
    let mut tx = c.transaction().unwrap();
    let before: i64 = tx.query_one(read, &[]).unwrap().get(0);
    let got = tx
        .query("SELECT id FROM alk_claim($1, 'w', 1)", &[&queue])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let after: i64 = tx.query_one(read, &[]).unwrap().get(0);
    tx.commit().unwrap();
    (got, after - before)
}

pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// Every Rust source file under `dir`, appended to `out` (the source scans:
/// typed_calls.rs, module_graph.rs).
pub fn rust_files(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Today's plain SQL script, built from the current sources as `cargo
/// xtask plain-sql` builds it (renamed into place: tests running at once
/// read a whole script).
pub fn plain_script() -> PathBuf {
    let build = xtask::Build::new(std::path::Path::new(ROOT)).expect("the PostgreSQL build");
    let name = format!("alkstore--{}.plain.sql", build.version());
    let path = std::path::Path::new(ROOT).join("dist").join(&name);
    let text = build.plain_sql(&name).expect("the plain SQL install");
    xtask::write_atomically(&path, &text).expect("write the plain SQL install");
    path
}

/// Runs a script with psql as the README says; returns (success, stderr).
pub fn psql_file(url: &str, file: &std::path::Path) -> (bool, String) {
    let out = std::process::Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f"])
        .arg(file)
        .output()
        .expect("run psql");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// How alkstore is installed into a PostgreSQL database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Install {
    /// `CREATE EXTENSION alkstore`.
    Extension,
    /// The plain SQL script, with psql.
    Plain,
}

impl Install {
    /// Both.
    pub const ALL: [Install; 2] = [Install::Extension, Install::Plain];

    /// Installs the current version into the database at `url`.
    pub fn install(self, url: &str) {
        match self {
            Install::Extension => postgres::Client::connect(url, postgres::NoTls)
                .unwrap()
                .batch_execute("CREATE EXTENSION alkstore")
                .unwrap(),
            Install::Plain => {
                let (ok, stderr) = psql_file(url, &plain_script());
                assert!(ok, "{stderr}");
            }
        }
    }
}

/// The columns of every table in schema alkstore (a partitioned table as
/// one: which partition holds a row is not what these compare).
pub fn columns_pg(c: &mut postgres::Client) -> Vec<(String, Vec<String>)> {
    c.query(
        "SELECT c.relname::text, array_agg(a.attname::text ORDER BY a.attnum)
           FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
          WHERE c.relnamespace = 'alkstore'::regnamespace AND c.relkind IN ('r', 'p')
            AND NOT c.relispartition AND a.attnum > 0 AND NOT a.attisdropped
            AND (c.relname, a.attname) <> ('jobs', 'slot')
          GROUP BY c.relname ORDER BY c.relname",
        &[],
    )
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

/// Every row of those tables and columns, as text (not the session registrations).
pub fn rows_pg(c: &mut postgres::Client, columns: &[(String, Vec<String>)]) -> Vec<String> {
    let mut out = Vec::new();
    for (table, cols) in columns {
        if table == "waiters" {
            continue; // session registrations: checked by behaviour below
        }
        let list: Vec<String> = cols.iter().map(|c| format!("t.\"{c}\"")).collect();
        let sql = format!(
            "SELECT ROW({})::text FROM alkstore.{table} t ORDER BY 1",
            list.join(", ")
        );
        for r in c.query(&sql, &[]).unwrap() {
            out.push(format!("{table}: {}", r.get::<_, String>(0)));
        }
    }
    out
}

/// One engine of the cross-engine suite, as [`per_engine!`] names its tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// A SQLite file.
    Sqlite,
    /// PostgreSQL with `CREATE EXTENSION alkstore` (`ALKSTORE_PG_URL`).
    PostgresExtension,
    /// PostgreSQL with the plain SQL install (`ALKSTORE_PG_PLAIN_URL`).
    PostgresPlain,
    /// The extension's database through PgBouncer in transaction pooling
    /// (`ALKSTORE_PG_BOUNCER_URL`).
    PostgresBouncer,
}

/// The target of `engine`, or `None` when it is not configured here (a
/// failure instead when `ALKSTORE_REQUIRE_PG=1` and PostgreSQL is missing).
pub fn target(engine: Engine) -> Option<Target> {
    let label = match engine {
        Engine::Sqlite => return targets().into_iter().next(),
        Engine::PostgresExtension => alkstore_testkit::EXTENSION,
        Engine::PostgresPlain => alkstore_testkit::PLAIN,
        Engine::PostgresBouncer => alkstore_testkit::BOUNCER,
    };
    let found = alkstore_testkit::pg_installs()
        .into_iter()
        .find(|i| i.label == label)
        .map(|i| Target::postgres_via(i.url, i.direct_url, i.label));
    if found.is_none() {
        eprintln!("note: {engine:?} is not configured here: not tested");
    }
    found
}

/// Runs `body` on `engine` when it is configured (see [`target`]).
pub fn run_on(engine: Engine, body: impl FnOnce(&Target)) {
    if let Some(t) = target(engine) {
        body(&t);
    }
}

/// A test body run on every engine, as one `#[test]` per engine: a module
/// named after the test holding `sqlite`, `postgres_extension`,
/// `postgres_plain` and `postgres_bouncer`. `cargo test -- sqlite` runs one
/// engine; a failure names its engine.
///
/// ```ignore
/// per_engine! {
///     /// What the test shows.
///     fn enqueue_returns_an_id(target) {
///         let mut db = target.connect();
///         // …
///     }
/// }
/// ```
#[macro_export]
macro_rules! per_engine {
    ($($(#[$meta:meta])* fn $name:ident($target:ident) $body:block)+) => {$(
        $(#[$meta])*
        #[allow(non_snake_case)]
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn body($target: &$crate::Target) $body

            #[test]
            fn sqlite() {
                $crate::run_on($crate::Engine::Sqlite, body)
            }

            #[test]
            fn postgres_extension() {
                $crate::run_on($crate::Engine::PostgresExtension, body)
            }

            #[test]
            fn postgres_plain() {
                $crate::run_on($crate::Engine::PostgresPlain, body)
            }

            #[test]
            fn postgres_bouncer() {
                $crate::run_on($crate::Engine::PostgresBouncer, body)
            }
        }
    )+};
}

/// Runs `body` once per engine of [`targets`], each with a fresh connection.
pub fn each(mut body: impl FnMut(&mut dyn Db, &Target)) {
    for target in targets() {
        let mut db = target.connect();
        body(&mut *db, &target);
    }
}

/// The `id`s of a JSON array of jobs (claims, listings), in order.
pub fn ids(jobs: &Value) -> Vec<i64> {
    jobs.as_array()
        .unwrap_or_else(|| panic!("not an array of jobs: {jobs}"))
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect()
}

pub use alkstore_testkit::{fresh, pg_required};

/// Epoch milliseconds of a JSON timestamp from either engine.
pub fn instant(v: &Value) -> i64 {
    let s = v.as_str().unwrap_or_else(|| panic!("not a timestamp: {v}"));
    alkstore_core::time::parse_rfc3339_ms(s).unwrap_or_else(|| panic!("not RFC 3339: {s}"))
}

/// Sleeps.
pub fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

/// The next notification on `c` within `wait`, as (channel, payload),
/// skipping wake-ups (alkstore_jobs, alkstore_events) whose payload is not
/// one of `names`: tests running at once share the test databases, so those
/// channels also carry other tests' queues and streams.
pub fn next_notification(
    c: &mut postgres::Client,
    names: &[&str],
    wait: Duration,
) -> Option<(String, String)> {
    use postgres::fallible_iterator::FallibleIterator;
    let deadline = std::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let mut all = c.notifications();
        let n = all.timeout_iter(left).next().expect("notifications")?;
        let shared = ["alkstore_jobs", "alkstore_events"].contains(&n.channel());
        if !shared || names.contains(&n.payload()) {
            return Some((n.channel().to_string(), n.payload().to_string()));
        }
    }
}

// ---- SQLite ----

struct Sqlite {
    conn: rusqlite::Connection,
}

impl Sqlite {
    fn open(path: &std::path::Path) -> Sqlite {
        // As the facade opens its own: busy timeout (set before the pragmas,
        // which read the file), WAL, functions registered.
        let conn = alkstore::sqlite::open_connection(path).expect("open SQLite");
        Sqlite { conn }
    }
}

impl Db for Sqlite {
    fn engine(&self) -> String {
        "sqlite".into()
    }

    fn call(&mut self, f: &str, args: &[Arg]) -> Out {
        alkstore::sql::call_sqlite(&self.conn, f, args).map_err(failure)
    }

    fn exec(&mut self, sql: &str) {
        self.conn
            .execute_batch(sql)
            .unwrap_or_else(|e| panic!("[sqlite] {sql}: {e}"));
    }

    fn query_i64(&mut self, sql: &str) -> i64 {
        self.conn
            .query_row(sql, [], |r| r.get(0))
            .unwrap_or_else(|e| panic!("[sqlite] {sql}: {e}"))
    }

    fn begin(&mut self) {
        self.exec("BEGIN IMMEDIATE");
    }

    fn commit(&mut self) {
        self.exec("COMMIT");
    }

    fn rollback(&mut self) {
        self.exec("ROLLBACK");
    }
}

// ---- PostgreSQL ----

struct Pg {
    client: postgres::Client,
    label: &'static str,
}

impl Pg {
    fn open(url: &str, label: &'static str) -> Pg {
        let client = postgres::Client::connect(url, postgres::NoTls)
            .unwrap_or_else(|e| panic!("cannot connect to PostgreSQL at {url:?}: {e}"));
        Pg { client, label }
    }
}

impl Db for Pg {
    fn engine(&self) -> String {
        format!("postgres ({})", self.label)
    }

    fn call(&mut self, f: &str, args: &[Arg]) -> Out {
        alkstore::sql::call_postgres(&mut self.client, f, args).map_err(failure)
    }

    fn exec(&mut self, sql: &str) {
        self.client
            .batch_execute(sql)
            .unwrap_or_else(|e| panic!("[postgres] {sql}: {e:?}"));
    }

    fn query_i64(&mut self, sql: &str) -> i64 {
        // Unnamed, as the facade's calls: through a transaction-pooling
        // PgBouncer a named statement ("s4") can be prepared on one server
        // connection and run on another, where another client's "s4" is.
        let row = self
            .client
            .query_typed_one(sql, &[])
            .unwrap_or_else(|e| panic!("[postgres] {sql}: {e:?}"));
        row.get::<_, i64>(0)
    }

    fn begin(&mut self) {
        self.exec("BEGIN");
    }

    fn commit(&mut self) {
        self.exec("COMMIT");
    }

    fn rollback(&mut self) {
        self.exec("ROLLBACK");
    }
}
