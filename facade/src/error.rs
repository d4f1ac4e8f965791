//! One error type for every engine (contract §3), sorted by what a caller
//! does about it: fix the call (the contract codes), fix the types or the
//! versions ([`Error::Decode`]), or wait for the database
//! ([`Error::is_transient`]).

use alkstore_core::{Code, ContractError};
use std::fmt;

/// What an alkstore call can fail with.
///
/// Non-exhaustive: later versions add kinds of failure; match the ones you
/// handle and keep a `_` arm (or ask [`Error::code`] / [`Error::is_transient`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// `ALK01`: an empty name.
    InvalidName(String),
    /// `ALK02`: a name with the reserved `__alkstore_` prefix.
    ReservedName(String),
    /// `ALK03`: options that are not an object, have an unknown key or a bad value.
    InvalidOptions(String),
    /// `ALK04`: a payload that is not JSON, or a notification payload too large.
    InvalidPayload(String),
    /// `ALK05`: any other bad argument.
    InvalidArgument(String),
    /// The database failed (connection lost, busy, read-only, full, …).
    Engine {
        /// `"sqlite"` or `"postgres"`.
        engine: &'static str,
        /// SQLite's extended result code, or PostgreSQL's SQLSTATE.
        code: String,
        /// The engine's message.
        message: String,
    },
    /// A value could not be read as the type asked for: a payload or result
    /// that does not fit the caller's type ([`crate::Job::payload_as`]), or
    /// a result this crate does not understand (a schema of another version).
    /// Trying again reads the same, so it is never transient.
    Decode(String),
}

/// Result of an alkstore call.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The contract code (`ALK01`…`ALK05`), if this is a contract error.
    pub fn code(&self) -> Option<&'static str> {
        self.contract_code().map(Code::code)
    }

    fn contract_code(&self) -> Option<Code> {
        Some(match self {
            Error::InvalidName(_) => Code::InvalidName,
            Error::ReservedName(_) => Code::ReservedName,
            Error::InvalidOptions(_) => Code::InvalidOptions,
            Error::InvalidPayload(_) => Code::InvalidPayload,
            Error::InvalidArgument(_) => Code::InvalidArgument,
            Error::Engine { .. } | Error::Decode(_) => return None,
        })
    }

    /// Whether trying again later can succeed without changing the call:
    /// the database failed (connection lost, busy, read-only, restarting).
    /// The workers wait and retry on these and end on every other error.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Engine { .. })
    }

    /// A value that could not be read as what was asked for.
    pub(crate) fn decode(what: impl fmt::Display) -> Error {
        Error::Decode(what.to_string())
    }

    pub(crate) fn engine(
        engine: &'static str,
        code: impl Into<String>,
        message: impl Into<String>,
    ) -> Error {
        Error::Engine {
            engine,
            code: code.into(),
            message: message.into(),
        }
    }
}

impl From<ContractError> for Error {
    fn from(e: ContractError) -> Self {
        match e.code {
            Code::InvalidName => Error::InvalidName(e.detail),
            Code::ReservedName => Error::ReservedName(e.detail),
            Code::InvalidOptions => Error::InvalidOptions(e.detail),
            Code::InvalidPayload => Error::InvalidPayload(e.detail),
            Code::InvalidArgument => Error::InvalidArgument(e.detail),
        }
    }
}

#[cfg(feature = "blocking")]
impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Self {
        if let rusqlite::Error::SqliteFailure(f, msg) = &e {
            let message = msg.clone().unwrap_or_else(|| e.to_string());
            if let Some(c) = ContractError::parse(&message) {
                return c.into();
            }
            return Error::engine("sqlite", f.extended_code.to_string(), message);
        }
        Error::engine("sqlite", "", e.to_string())
    }
}

/// The procedures that commit, as PostgreSQL's error context names them,
/// and their refusal of a transaction block (the extension's words).
#[cfg(any(
    feature = "blocking",
    feature = "tokio-postgres",
    feature = "sqlx-postgres"
))]
const REFUSED_IN_A_BLOCK: [(&str, &str); 2] = [
    (
        "alk_sequence(",
        "alk_sequence commits transactions of its own and cannot run inside a \
         transaction block: CALL it on its own (CALL alk_sequence(NULL))",
    ),
    (
        "alk_maintain(",
        "alk_maintain commits transactions of its own and cannot run inside a \
         transaction block: CALL it on its own (CALL alk_maintain(50))",
    ),
];

/// A PostgreSQL error, by its SQLSTATE: the functions raise the contract's
/// codes (`ALK01`…`ALK05`) as SQLSTATEs, whatever driver carried them.
#[cfg(any(
    feature = "blocking",
    feature = "tokio-postgres",
    feature = "sqlx-postgres"
))]
pub(crate) fn from_postgres(sqlstate: &str, message: &str, context: Option<&str>) -> Error {
    // The plain install cannot tell an empty transaction block from none,
    // so `CALL alk_sequence` (or `alk_maintain`) there meets PostgreSQL's
    // refusal of its first COMMIT, before anything is done: the same
    // refusal as the extension's (contract v1.2 §K), whichever install
    // answered.
    if sqlstate == "2D000" {
        for (procedure, refusal) in REFUSED_IN_A_BLOCK {
            if context.is_some_and(|c| c.contains(procedure)) {
                return ContractError::new(Code::InvalidArgument, refusal).into();
            }
        }
    }
    if let Some(code) = Code::from_code(sqlstate) {
        // The message reads "alkstore: <Variant>: <detail>".
        let detail = message
            .strip_prefix("alkstore: ")
            .and_then(|m| m.strip_prefix(code.variant()))
            .and_then(|m| m.strip_prefix(": "))
            .unwrap_or(message);
        return ContractError::new(code, detail).into();
    }
    // jsonb's own input rejects text that is not JSON (contract §3), and
    // a \u0000 escape it cannot hold (SQLite refuses that too).
    if (sqlstate == "22P02" && message.contains("json"))
        || (sqlstate == "22P05" && message.contains("Unicode escape"))
    {
        return Error::InvalidPayload(message.to_string());
    }
    Error::engine("postgres", sqlstate, message)
}

// `postgres::Error` is this type too.
#[cfg(any(feature = "blocking", feature = "tokio-postgres"))]
impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Self {
        match e.as_db_error() {
            Some(db) => from_postgres(db.code().code(), db.message(), db.where_()),
            // With its causes: "error performing TLS handshake" alone does
            // not say that the certificate was for another host.
            None => Error::engine("postgres", "", with_sources(&e)),
        }
    }
}

#[cfg(any(feature = "blocking", feature = "tokio-postgres"))]
fn with_sources(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(any(feature = "sqlx-postgres", feature = "sqlx-sqlite"))]
impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            #[cfg(feature = "sqlx-sqlite")]
            sqlx::Error::Database(db)
                if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() =>
            {
                match ContractError::parse(db.message()) {
                    Some(c) => c.into(),
                    None => {
                        Error::engine("sqlite", db.code().as_deref().unwrap_or(""), db.message())
                    }
                }
            }
            #[cfg(feature = "sqlx-postgres")]
            sqlx::Error::Database(db) => from_postgres(
                db.code().as_deref().unwrap_or(""),
                db.message(),
                db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                    .and_then(|p| p.r#where()),
            ),
            _ => Error::engine("sqlx", "", e.to_string()),
        }
    }
}

#[cfg(feature = "blocking")]
impl From<r2d2::Error> for Error {
    fn from(e: r2d2::Error) -> Self {
        Error::engine("pool", "", e.to_string())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.contract_code(), self) {
            (
                _,
                Error::Engine {
                    engine,
                    code,
                    message,
                },
            ) if code.is_empty() => write!(f, "{engine} error: {message}"),
            (
                _,
                Error::Engine {
                    engine,
                    code,
                    message,
                },
            ) => write!(f, "{engine} error {code}: {message}"),
            (
                Some(c),
                Error::InvalidName(d) | Error::ReservedName(d) | Error::InvalidOptions(d),
            )
            | (Some(c), Error::InvalidPayload(d) | Error::InvalidArgument(d)) => {
                write!(f, "{} {}: {d}", c.code(), c.variant())
            }
            (_, Error::Decode(d)) => write!(f, "decode error: {d}"),
            _ => unreachable!(),
        }
    }
}

impl std::error::Error for Error {}
