//! Calling `alk_*` functions on a driver connection, with every result in
//! one JSON shape whatever the engine's idiom: SQLite's JSON text and 0/1,
//! PostgreSQL's `SETOF` rows, `bigint[]` and booleans. The typed handles of
//! this crate are built on it; it is public for callers who want the raw
//! functions without writing SQL.

// Without any driver feature there is nothing to call these with.
#![cfg_attr(
    not(any(
        feature = "blocking",
        feature = "sqlx-postgres",
        feature = "tokio-postgres"
    )),
    allow(dead_code)
)]

use crate::error::{Error, Result};
use serde_json::Value;

/// One argument of a call.
#[derive(Clone, Debug)]
pub enum Arg {
    /// SQL NULL.
    Null,
    /// An integer (ids, offsets, counts).
    Int(i64),
    /// A number (seconds).
    Num(f64),
    /// Text (names, error messages, keys).
    Text(String),
    /// JSON text (payloads, options).
    Json(String),
    /// A list of job ids.
    Ids(Vec<i64>),
}

impl From<&str> for Arg {
    fn from(s: &str) -> Self {
        Arg::Text(s.to_string())
    }
}

impl From<i64> for Arg {
    fn from(i: i64) -> Self {
        Arg::Int(i)
    }
}

impl Arg {
    /// JSON argument from a value.
    pub fn json(v: &Value) -> Arg {
        Arg::Json(v.to_string())
    }
}

/// Refuses a text argument with a NUL character (`InvalidName` for a name,
/// `InvalidArgument` otherwise, as SQLite's functions do) before a
/// PostgreSQL call is sent: PostgreSQL text
/// cannot hold one, and each driver would fail differently — sqlx's
/// statement, which carries the arguments written in, would be cut short.
#[cfg(any(
    feature = "blocking",
    feature = "tokio-postgres",
    feature = "sqlx-postgres"
))]
pub(crate) fn no_nul(f: &str, args: &[Arg]) -> Result<()> {
    // A name is refused as a name (`InvalidName`), as the engines refuse it.
    for &(i, kind) in catalogue::name_args(f) {
        if let Some(Arg::Text(s)) = args.get(i) {
            if s.contains('\0') {
                alkstore_core::names::validate(kind, s)?;
            }
        }
    }
    // A NUL in an enqueue option is the options' error, as SQLite's.
    let opts_arg = catalogue::enqueue_opts_arg(f);
    if let Some(Arg::Json(opts)) = opts_arg.and_then(|at| args.get(at.position)) {
        if opts.contains("\\u0000") {
            if let Ok(opts) = serde_json::from_str::<Value>(opts) {
                if opts_arg.is_some_and(|at| at.batch) {
                    alkstore_core::opts::EnqueueOpts::parse_batch(Some(&opts))
                } else {
                    alkstore_core::opts::EnqueueOpts::parse(Some(&opts))
                }?;
            }
        }
    }
    match args
        .iter()
        .position(|a| matches!(a, Arg::Text(s) if s.contains('\0')))
    {
        Some(i) => Err(Error::InvalidArgument(format!(
            "argument {} of {f} must not contain a NUL character",
            i + 1
        ))),
        None => Ok(()),
    }
}

/// The JSON argument for anything serializable (payloads, results).
pub(crate) fn payload<T: serde::Serialize + ?Sized>(p: &T) -> Result<Arg> {
    // Serializing fails only for values JSON cannot say (a map with
    // non-string keys, a Serialize impl that refuses): a bad payload.
    serde_json::to_string(p)
        .map(Arg::Json)
        .map_err(|e| Error::InvalidPayload(e.to_string()))
}

/// An integer result (ids, counts).
pub(crate) fn int(v: Value) -> Result<i64> {
    v.as_i64()
        .ok_or_else(|| Error::decode(format!("expected an integer, got {v}")))
}

/// A boolean result.
pub(crate) fn boolean(v: Value) -> Result<bool> {
    v.as_bool()
        .ok_or_else(|| Error::decode(format!("expected a boolean, got {v}")))
}

use alkstore_core::catalogue::{self, Returns as Res};

/// The catalogue entry of `f`, checked before anything is sent: a function
/// that is not alkstore's, not on this engine, or given a number of
/// arguments it does not take is `InvalidArgument` on every engine and
/// driver (rather than a panic on one and a server error on another).
pub(crate) fn function(
    f: &str,
    args: usize,
    postgres: bool,
) -> Result<&'static catalogue::Function> {
    let invalid = |why: String| Err(Error::InvalidArgument(why));
    let Some(entry) = catalogue::get(f) else {
        return invalid(format!("{f:?} is not an alkstore function"));
    };
    if !(if postgres {
        entry.on_postgres()
    } else {
        entry.on_sqlite()
    }) {
        let engine = if postgres { "PostgreSQL" } else { "SQLite" };
        return invalid(format!("{f} is not available on {engine}"));
    }
    if !entry.arities().contains(&args) {
        let (lo, hi) = (entry.required, entry.args.len());
        let takes = if lo == hi {
            format!("{lo}")
        } else {
            format!("{lo} to {hi}")
        };
        return invalid(format!("{f} takes {takes} arguments, got {args}"));
    }
    Ok(entry)
}

/// The result shape of a function [`function`] has already checked.
#[cfg(any(feature = "blocking", feature = "sqlx-sqlite"))]
fn returns(f: &str) -> Res {
    catalogue::get(f).map_or(Res::Json, |e| e.returns)
}

/// The server's clock, in epoch milliseconds (PostgreSQL).
#[cfg(any(
    feature = "blocking",
    feature = "sqlx-postgres",
    feature = "tokio-postgres"
))]
pub(crate) const PG_CLOCK_MS: &str =
    "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint";

/// The key a row gets when one of its values cannot be read here (the
/// reserved prefix: no function's row has such a column).
pub const UNREADABLE: &str = "__alkstore_unreadable";

/// A document or a set of rows. Both engines accept JSON that this crate's
/// JSON cannot hold (`1e400`, nesting deeper than 128): such a value becomes
/// null and its object gets [`UNREADABLE`] with the reason, so that one bad
/// payload fails its job instead of the whole claim (whose jobs are already
/// claimed), and `alk_get_job` still shows the job.
pub(crate) fn tolerant(text: &str) -> Result<Value> {
    use serde_json::value::RawValue;
    use std::collections::BTreeMap;
    if let Ok(v) = serde_json::from_str(text) {
        return Ok(v);
    }
    let object = |row: BTreeMap<String, Box<RawValue>>| {
        let mut out = serde_json::Map::new();
        for (key, raw) in row {
            let value = serde_json::from_str(raw.get()).unwrap_or_else(|e| {
                out.insert(UNREADABLE.into(), Value::String(format!("{key}: {e}")));
                Value::Null
            });
            out.insert(key, value);
        }
        Value::Object(out)
    };
    if let Ok(rows) = serde_json::from_str::<Vec<BTreeMap<String, Box<RawValue>>>>(text) {
        return Ok(Value::Array(rows.into_iter().map(object).collect()));
    }
    Ok(object(serde_json::from_str(text).map_err(Error::decode)?))
}

/// Calls `f` on a SQLite connection that has the functions registered.
#[cfg(feature = "blocking")]
pub fn call_sqlite(conn: &rusqlite::Connection, f: &str, args: &[Arg]) -> Result<Value> {
    sqlite_result(f, sqlite_column(conn, f, args)?)
}

/// Calls `f` on SQLite; its result as text, unparsed (JSON as the engine
/// wrote it).
#[cfg(feature = "blocking")]
pub(crate) fn sqlite_text(
    conn: &rusqlite::Connection,
    f: &str,
    args: &[Arg],
) -> Result<Option<String>> {
    Ok(match sqlite_column(conn, f, args)? {
        SqliteValue::Null => None,
        SqliteValue::Int(i) => Some(i.to_string()),
        SqliteValue::Text(t) => Some(t),
        SqliteValue::Other(o) => return Err(unexpected(f, &o)),
    })
}

/// `f`'s result column on SQLite.
#[cfg(feature = "blocking")]
fn sqlite_column(conn: &rusqlite::Connection, f: &str, args: &[Arg]) -> Result<SqliteValue> {
    use rusqlite::types::Value as V;
    function(f, args.len(), false)?;
    let sql = sqlite_sql(f, args.len());
    let params: Vec<V> = args
        .iter()
        .map(|a| match a {
            Arg::Null => V::Null,
            Arg::Int(i) => V::Integer(*i),
            Arg::Num(n) => V::Real(*n),
            Arg::Text(s) | Arg::Json(s) => V::Text(s.clone()),
            Arg::Ids(ids) => V::Text(serde_json::to_string(ids).expect("ids serialize")),
        })
        .collect();
    let mut st = conn.prepare_cached(&sql)?;
    let v = st.query_row(rusqlite::params_from_iter(params), |r| r.get::<_, V>(0))?;
    Ok(match v {
        V::Null => SqliteValue::Null,
        V::Integer(i) => SqliteValue::Int(i),
        V::Text(t) => SqliteValue::Text(t),
        other => SqliteValue::Other(format!("{other:?}")),
    })
}

/// The statement that calls `f` on SQLite: `SELECT f(?1, …)`.
#[cfg(any(feature = "blocking", feature = "sqlx-sqlite"))]
pub(crate) fn sqlite_sql(f: &str, args: usize) -> String {
    let marks: Vec<String> = (1..=args).map(|i| format!("?{i}")).collect();
    format!("SELECT {f}({})", marks.join(", "))
}

/// A SQLite function's result, whichever driver read it.
#[cfg(any(feature = "blocking", feature = "sqlx-sqlite"))]
pub(crate) enum SqliteValue {
    Null,
    Int(i64),
    Text(String),
    /// Anything else (described), which no function returns.
    Other(String),
}

/// `f`'s result as JSON: SQLite's 0/1 as booleans, JSON text parsed.
#[cfg(any(feature = "blocking", feature = "sqlx-sqlite"))]
pub(crate) fn sqlite_result(f: &str, v: SqliteValue) -> Result<Value> {
    let res = returns(f);
    Ok(match (res, v) {
        (_, SqliteValue::Null) | (Res::Void, _) => Value::Null,
        (Res::Bool, SqliteValue::Int(i)) => Value::Bool(i != 0),
        (Res::Int, SqliteValue::Int(i)) => Value::from(i),
        (Res::Json | Res::Rows, SqliteValue::Text(t)) => tolerant(&t)?,
        (Res::Text, SqliteValue::Text(t)) => Value::String(t),
        (_, SqliteValue::Int(i)) => return Err(unexpected(f, &i.to_string())),
        (_, SqliteValue::Text(t)) => return Err(unexpected(f, &t)),
        (_, SqliteValue::Other(o)) => return Err(unexpected(f, &o)),
    })
}

#[cfg(any(feature = "blocking", feature = "sqlx-sqlite"))]
fn unexpected(f: &str, what: &str) -> Error {
    Error::engine("sqlite", "", format!("{f}: unexpected result {what:?}"))
}

/// A PostgreSQL call of `f` as every driver sends it: one statement whose
/// parameters are all text (cast to the function's argument types in the
/// statement) and whose one column is the result as JSON text.
#[cfg(any(
    feature = "blocking",
    feature = "tokio-postgres",
    feature = "sqlx-postgres"
))]
pub(crate) struct PgCall {
    pub(crate) sql: String,
    pub(crate) params: Vec<Option<String>>,
    res: Res,
    /// A procedure: its one column is its INOUT result as `bigint`, not
    /// JSON text (`alk_sequence`).
    pub(crate) procedure: bool,
}

#[cfg(any(
    feature = "blocking",
    feature = "tokio-postgres",
    feature = "sqlx-postgres"
))]
impl PgCall {
    pub(crate) fn new(f: &str, args: &[Arg]) -> Result<PgCall> {
        let entry = function(f, args.len(), true)?;
        no_nul(f, args)?;
        let res = entry.returns;
        let marks: Vec<String> = (0..args.len())
            .map(|i| format!("${}::text::{}", i + 1, entry.pg_type(i)))
            .collect();
        let call = format!("{f}({})", marks.join(", "));
        let sql = match res {
            // The INOUT result arguments not given, passed NULL.
            _ if entry.procedure => {
                let nulls = vec!["NULL".to_string(); entry.args.len().saturating_sub(args.len())];
                format!("CALL {f}({})", [marks, nulls].concat().join(", "))
            }
            Res::Rows => {
                format!("SELECT coalesce(jsonb_agg(to_jsonb(r)), '[]'::jsonb)::text FROM {call} r")
            }
            Res::Void => format!("SELECT {call}::text"),
            _ => format!("SELECT to_jsonb({call})::text"),
        };
        let params = args
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
        Ok(PgCall {
            sql,
            params,
            res,
            procedure: entry.procedure,
        })
    }

    /// The statement with its parameters written in as quoted literals, for
    /// the simple query protocol: one message, one round trip, and nothing
    /// that depends on the server connection between messages.
    #[cfg(feature = "sqlx-postgres")]
    pub(crate) fn inline_sql(&self) -> String {
        let mut sql = self.sql.clone();
        // From the last: "$1" must not replace the start of "$10".
        for (i, p) in self.params.iter().enumerate().rev() {
            let literal = p
                .as_deref()
                .map_or_else(|| "NULL".to_string(), quote_literal);
            sql = sql.replace(&format!("${}::", i + 1), &format!("{literal}::"));
        }
        sql
    }

    /// The result from the statement's one column.
    pub(crate) fn result(&self, text: Option<String>) -> Result<Value> {
        Ok(match (self.res, text) {
            (Res::Void, _) | (_, None) => Value::Null,
            (_, Some(t)) => tolerant(&t)?,
        })
    }
}

/// A PostgreSQL string literal of `s`, as `quote_literal` writes it: quotes
/// doubled, and with backslashes doubled in an `E''` literal, so it reads the
/// same whatever `standard_conforming_strings` says.
#[cfg(feature = "sqlx-postgres")]
fn quote_literal(s: &str) -> String {
    let quoted = s.replace('\'', "''");
    if s.contains('\\') {
        format!("E'{}'", quoted.replace('\\', "\\\\"))
    } else {
        format!("'{quoted}'")
    }
}

/// Calls `f` on a PostgreSQL client or transaction with the functions installed.
#[cfg(feature = "blocking")]
pub fn call_postgres(
    client: &mut impl postgres::GenericClient,
    f: &str,
    args: &[Arg],
) -> Result<Value> {
    let call = PgCall::new(f, args)?;
    call.result(postgres_column(client, &call)?)
}

/// Calls `f` on PostgreSQL; its result as text, unparsed (JSON as the
/// server wrote it).
#[cfg(feature = "blocking")]
pub(crate) fn postgres_text(
    client: &mut impl postgres::GenericClient,
    f: &str,
    args: &[Arg],
) -> Result<Option<String>> {
    postgres_column(client, &PgCall::new(f, args)?)
}

#[cfg(feature = "blocking")]
fn postgres_column(
    client: &mut impl postgres::GenericClient,
    call: &PgCall,
) -> Result<Option<String>> {
    // Typed, unnamed statements: parse, bind and execute in one round trip,
    // and nothing left on the server connection between calls, so calls work
    // through a transaction-pooling PgBouncer too (a named prepared statement
    // would live on a server connection other clients then share).
    let row = client.query_typed_one(call.sql.as_str(), &call.typed_params())?;
    call.column(&row)
}

#[cfg(any(feature = "blocking", feature = "tokio-postgres"))]
impl PgCall {
    /// The result column as text.
    pub(crate) fn column(&self, row: &tokio_postgres::Row) -> Result<Option<String>> {
        Ok(if self.procedure {
            row.try_get::<_, Option<i64>>(0)?.map(|n| n.to_string())
        } else {
            row.try_get(0)?
        })
    }

    /// The parameters for `query_typed`: every one declared text.
    pub(crate) fn typed_params(
        &self,
    ) -> Vec<(
        &(dyn tokio_postgres::types::ToSql + Sync),
        tokio_postgres::types::Type,
    )> {
        self.params
            .iter()
            .map(|p| {
                (
                    p as &(dyn tokio_postgres::types::ToSql + Sync),
                    tokio_postgres::types::Type::TEXT,
                )
            })
            .collect()
    }
}
