//! What a function call can fail with, and how it is reported to SQLite.

use crate::ffi::{self, DbError};
use alkstore_core::ContractError;

/// A failed call: bad input (contract §3) or an error from SQLite itself.
#[derive(Debug)]
pub enum Error {
    /// Bad input; reported as `alkstore ALK0x Variant: …` with `SQLITE_ERROR`.
    Contract(ContractError),
    /// SQLite failed (busy, read-only, full, …); its code is kept.
    Db(DbError),
}

/// Result of a function body.
pub type Result<T> = std::result::Result<T, Error>;

impl From<ContractError> for Error {
    fn from(e: ContractError) -> Self {
        Error::Contract(e)
    }
}

impl From<DbError> for Error {
    fn from(e: DbError) -> Self {
        Error::Db(e)
    }
}

impl Error {
    /// Whether SQLite failed because alkstore's tables are not there (yet, or
    /// any more: a transaction that created them rolled back).
    pub fn is_missing_schema(&self) -> bool {
        matches!(self, Error::Db(e) if e.message.starts_with("no such table: alk_")
            || e.message.starts_with("no such table: main.alk_"))
    }

    /// Sets this error as the function's result.
    pub fn report(&self, ctx: &mut ffi::Ctx) {
        match self {
            Error::Contract(e) => ctx.result_error(&e.sqlite_message(), 1),
            Error::Db(e) => ctx.result_error(&e.message, e.code),
        }
    }
}
