//! The harness of the cross-engine suite.
//!
//! A test body talks to a [`Db`] — one connection to one engine — by
//! function name and typed arguments, and gets every result back as JSON
//! in one shape, whatever the engine's idiom (SQLite's JSON text and 0/1,
//! PostgreSQL's `SETOF` rows, `bigint[]` and booleans). [`targets`] lists
//! the engines to run each body on: SQLite always (a fresh file), and
//! PostgreSQL installed as an extension (`ALKSTORE_PG_URL`) and as the
//! plain SQL script (`ALKSTORE_PG_PLAIN_URL`) when set; `scripts/test.sh`
//! sets both.

use serde_json::Value;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One argument of a call.
#[derive(Clone, Debug)]
pub enum Arg {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A number (seconds).
    Num(f64),
    /// Text (a name, an error message).
    Text(String),
    /// JSON text (a payload, options).
    Json(String),
    /// A list of job ids (SQLite: JSON array text; PostgreSQL: `bigint[]`).
    Ids(Vec<i64>),
}

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

enum Res {
    Int,
    Bool,
    Text,
    Json,
    Rows,
    Void,
}

/// Every function: PostgreSQL argument types and the result's kind.
const FUNCTIONS: &[(&str, &[&str], Res)] = &[
    ("alk_init", &[], Res::Int),
    ("alk_enqueue", &["text", "jsonb", "jsonb"], Res::Int),
    ("alk_enqueue_batch", &["text", "jsonb", "jsonb"], Res::Json),
    ("alk_claim", &["text", "text", "int4"], Res::Rows),
    ("alk_ack", &["int8", "text"], Res::Bool),
    ("alk_ack_batch", &["int8[]", "text"], Res::Int),
    ("alk_retry", &["int8", "text", "text", "float8"], Res::Text),
    ("alk_fail", &["int8", "text", "text"], Res::Bool),
    ("alk_heartbeat", &["int8", "text", "float8"], Res::Bool),
    ("alk_cancel", &["int8"], Res::Bool),
    ("alk_get_job", &["int8"], Res::Json),
    ("alk_requeue_dead", &["int8"], Res::Bool),
    ("alk_queue_configure", &["text", "jsonb"], Res::Json),
    ("alk_queue_opts", &["text"], Res::Json),
    ("alk_queue_stats", &["text"], Res::Json),
    ("alk_sweep", &["text"], Res::Int),
    ("alk_outbox_enqueue", &["text", "jsonb", "jsonb"], Res::Int),
    ("alk_outbox_claim", &["text", "text", "int4"], Res::Rows),
    ("alk_outbox_stats", &["text"], Res::Json),
    ("alk_publish", &["text", "jsonb", "text"], Res::Int),
    ("alk_read", &["text", "int8", "int4"], Res::Rows),
    ("alk_save_offset", &["text", "text", "int8"], Res::Bool),
    ("alk_get_offset", &["text", "text"], Res::Int),
    ("alk_notify", &["text", "jsonb"], Res::Void),
    ("alk_lock_acquire", &["text", "text", "float8"], Res::Int),
    ("alk_lock_renew", &["text", "text", "float8"], Res::Bool),
    ("alk_lock_release", &["text", "text"], Res::Bool),
];

fn lookup(f: &str) -> (&'static [&'static str], &'static Res) {
    FUNCTIONS
        .iter()
        .find(|(name, _, _)| *name == f)
        .map(|(_, types, res)| (*types, res))
        .unwrap_or_else(|| panic!("unknown function {f}"))
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
        label: &'static str,
    },
}

impl Target {
    /// A new connection.
    pub fn connect(&self) -> Box<dyn Db> {
        match &self.kind {
            Kind::Sqlite { path, .. } => Box::new(Sqlite::open(path)),
            Kind::Postgres { url, label } => Box::new(Pg::open(url, label)),
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

    /// The PostgreSQL connection string (panics on SQLite).
    pub fn pg_url(&self) -> &str {
        match &self.kind {
            Kind::Postgres { url, .. } => url,
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
    for (var, label) in [
        ("ALKSTORE_PG_URL", "extension"),
        ("ALKSTORE_PG_PLAIN_URL", "plain SQL install"),
    ] {
        if let Ok(url) = std::env::var(var) {
            out.push(Target {
                kind: Kind::Postgres { url, label },
            });
        }
    }
    out
}

/// The PostgreSQL targets only (none when PostgreSQL is not configured).
pub fn pg_targets() -> Vec<Target> {
    targets().into_iter().filter(Target::is_postgres).collect()
}

/// A name no other test (or earlier run) uses: tests share the PostgreSQL databases.
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

/// Epoch milliseconds of a JSON timestamp from either engine.
pub fn instant(v: &Value) -> i64 {
    let s = v.as_str().unwrap_or_else(|| panic!("not a timestamp: {v}"));
    alkstore_core::time::parse_rfc3339_ms(s).unwrap_or_else(|| panic!("not RFC 3339: {s}"))
}

/// Sleeps.
pub fn sleep_ms(ms: u64) {
    std::thread::sleep(Duration::from_millis(ms));
}

// ---- SQLite ----

struct Sqlite {
    conn: rusqlite::Connection,
}

impl Sqlite {
    fn open(path: &std::path::Path) -> Sqlite {
        let conn = rusqlite::Connection::open(path).expect("open SQLite");
        conn.pragma_update(None, "journal_mode", "WAL").unwrap();
        conn.pragma_update(None, "synchronous", "NORMAL").unwrap();
        conn.busy_timeout(Duration::from_secs(30)).unwrap();
        alkstore_sqlite::register(&conn).expect("register alkstore");
        Sqlite { conn }
    }
}

impl Db for Sqlite {
    fn engine(&self) -> String {
        "sqlite".into()
    }

    fn call(&mut self, f: &str, args: &[Arg]) -> Out {
        let (_, res) = lookup(f);
        let marks: Vec<String> = (1..=args.len()).map(|i| format!("?{i}")).collect();
        let sql = format!("SELECT {f}({})", marks.join(", "));
        let params: Vec<rusqlite::types::Value> = args
            .iter()
            .map(|a| match a {
                Arg::Null => rusqlite::types::Value::Null,
                Arg::Int(i) => (*i).into(),
                Arg::Num(n) => (*n).into(),
                Arg::Text(s) | Arg::Json(s) => s.clone().into(),
                Arg::Ids(ids) => serde_json::to_string(ids).unwrap().into(),
            })
            .collect();
        let got = self
            .conn
            .query_row(&sql, rusqlite::params_from_iter(params), |r| {
                r.get::<_, rusqlite::types::Value>(0)
            });
        use rusqlite::types::Value as V;
        match got {
            Ok(v) => Ok(match (res, v) {
                (_, V::Null) => Value::Null,
                (Res::Bool, V::Integer(i)) => Value::Bool(i != 0),
                (Res::Int, V::Integer(i)) => Value::from(i),
                (Res::Json | Res::Rows, V::Text(t)) => {
                    serde_json::from_str(&t).expect("JSON result")
                }
                (Res::Text, V::Text(t)) => Value::String(t),
                (Res::Void, _) => Value::Null,
                (_, other) => panic!("{f}: unexpected SQLite result {other:?}"),
            }),
            Err(rusqlite::Error::SqliteFailure(e, msg)) => {
                let message = msg.unwrap_or_default();
                let code = alkstore_core::ContractError::parse(&message)
                    .map(|c| c.code.code().to_string())
                    .unwrap_or_else(|| format!("sqlite:{}", e.extended_code));
                Err(Failure { code, message })
            }
            Err(e) => Err(Failure {
                code: "sqlite".into(),
                message: e.to_string(),
            }),
        }
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
        let (types, res) = lookup(f);
        let marks: Vec<String> = args
            .iter()
            .enumerate()
            .map(|(i, _)| format!("$%{}::text::{}", i + 1, types[i]))
            .collect();
        let call = format!("{f}({})", marks.join(", ")).replace("$%", "$");
        let sql = match res {
            Res::Rows => {
                format!("SELECT coalesce(jsonb_agg(to_jsonb(r)), '[]'::jsonb)::text FROM {call} r")
            }
            Res::Void => format!("SELECT {call}::text"),
            _ => format!("SELECT to_jsonb({call})::text"),
        };
        let params: Vec<Option<String>> = args
            .iter()
            .map(|a| match a {
                Arg::Null => None,
                Arg::Int(i) => Some(i.to_string()),
                Arg::Num(n) => Some(n.to_string()),
                Arg::Text(s) | Arg::Json(s) => Some(s.clone()),
                Arg::Ids(ids) => Some(format!(
                    "{{{}}}",
                    ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",")
                )),
            })
            .collect();
        let refs: Vec<&(dyn postgres::types::ToSql + Sync)> = params
            .iter()
            .map(|p| p as &(dyn postgres::types::ToSql + Sync))
            .collect();
        match self.client.query_one(sql.as_str(), &refs) {
            Ok(row) => {
                let text: Option<String> = row.get(0);
                Ok(match (res, text) {
                    (Res::Void, _) | (_, None) => Value::Null,
                    (_, Some(t)) => serde_json::from_str(&t).expect("JSON result"),
                })
            }
            Err(e) => match e.as_db_error() {
                Some(db) => {
                    // Text that is not JSON fails in jsonb's input before alkstore runs (contract §3).
                    let code = match db.code().code() {
                        "22P02" if db.message().contains("json") => "ALK04".to_string(),
                        c => c.to_string(),
                    };
                    Err(Failure {
                        code,
                        message: db.message().to_string(),
                    })
                }
                None => panic!("[{}] {f}: {e}", self.engine()),
            },
        }
    }

    fn exec(&mut self, sql: &str) {
        self.client
            .batch_execute(sql)
            .unwrap_or_else(|e| panic!("[postgres] {sql}: {e}"));
    }

    fn query_i64(&mut self, sql: &str) -> i64 {
        let row = self
            .client
            .query_one(sql, &[])
            .unwrap_or_else(|e| panic!("[postgres] {sql}: {e}"));
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
