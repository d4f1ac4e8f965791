//! The edge between PostgreSQL and the library's SQL-callable functions
//! ([`crate::claim`], [`crate::ack`]) that run statements which may raise
//! alkstore's own errors.
//!
//! pgrx turns an error PostgreSQL raises under a Rust frame into a panic
//! and, at `#[pg_guard]`, raises it again — with a SQLSTATE from its own
//! list, `XX000` for any other, such as alkstore's `ALK01`…`ALK05` (contract
//! §3). [`guard`] does what `#[pg_guard]` does, but raises an error whose
//! message is one of alkstore's contract errors with that error's SQLSTATE,
//! so that the library's functions fail as the PL/pgSQL ones do.

use alkstore_core::ContractError;
use pgrx::pg_sys;
use pgrx::pg_sys::panic::CaughtError;
use std::any::Any;
use std::ffi::{c_char, c_int, CString};
use std::panic::{catch_unwind, UnwindSafe};

// As pgrx's own report (pgrx-pg-sys's panic.rs): not in its bindings.
unsafe extern "C-unwind" {
    fn errstart(elevel: c_int, domain: *const c_char) -> bool;
    fn errcode(sqlerrcode: c_int) -> c_int;
    fn errmsg(fmt: *const c_char, ...) -> c_int;
    fn errdetail(fmt: *const c_char, ...) -> c_int;
    fn errhint(fmt: *const c_char, ...) -> c_int;
    fn errfinish(filename: *const c_char, lineno: c_int, funcname: *const c_char);
}

/// PostgreSQL's MAKE_SQLSTATE of a five-character code.
fn sqlstate(code: &str) -> c_int {
    code.bytes()
        .enumerate()
        .map(|(i, c)| (c_int::from(c.wrapping_sub(b'0')) & 0x3F) << (6 * i))
        .sum()
}

/// Runs `body`; an error raised in it is raised again as PostgreSQL's
/// error, with alkstore's SQLSTATE for alkstore's contract errors.
pub fn guard(body: impl FnOnce() -> pg_sys::Datum + UnwindSafe) -> pg_sys::Datum {
    match catch_unwind(body) {
        Ok(d) => d,
        Err(payload) => raise(payload),
    }
}

/// The error's SQLSTATE, message, detail and hint.
fn report(payload: Box<dyn Any + Send>) -> (c_int, String, Option<String>, Option<String>) {
    match payload.downcast::<CaughtError>() {
        Ok(caught) => {
            let r = match *caught {
                CaughtError::PostgresError(r) | CaughtError::ErrorReport(r) => r,
                CaughtError::RustPanic { ereport, .. } => ereport,
            };
            let code = match ContractError::parse(r.message()) {
                Some(e) if r.message().starts_with("alkstore: ") => sqlstate(e.code.code()),
                _ => r.sql_error_code() as c_int,
            };
            let text = |s: Option<&str>| s.map(str::to_owned);
            (
                code,
                r.message().to_owned(),
                text(r.detail()),
                text(r.hint()),
            )
        }
        Err(other) => {
            let message = other
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| other.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic in alkstore's library".to_owned());
            (sqlstate("XX000"), message, None, None)
        }
    }
}

/// Raises the error at ERROR. Nothing of Rust's is left to drop when
/// PostgreSQL jumps out of this frame.
fn raise(payload: Box<dyn Any + Send>) -> ! {
    let (code, message, detail, hint) = report(payload);
    let c = |s: String| CString::new(s.replace('\0', " ")).expect("NULs replaced");
    let (message, detail, hint) = (c(message), detail.map(c), hint.map(c));
    // SAFETY: the error functions copy their arguments into the error
    // being built; the strings are dropped before errfinish jumps away.
    unsafe {
        if errstart(pgrx::PgLogLevel::ERROR as c_int, std::ptr::null()) {
            errcode(code);
            errmsg(c"%s".as_ptr(), message.as_ptr());
            if let Some(d) = &detail {
                errdetail(c"%s".as_ptr(), d.as_ptr());
            }
            if let Some(h) = &hint {
                errhint(c"%s".as_ptr(), h.as_ptr());
            }
            drop((message, detail, hint));
            errfinish(c"pg_ext/src/boundary.rs".as_ptr(), 0, c"alkstore".as_ptr());
        }
    }
    unreachable!("errfinish returns only below ERROR");
}

#[cfg(test)]
mod tests {
    use super::sqlstate;
    use pgrx::pg_sys::errcodes::PgSqlErrorCode::*;

    #[test]
    fn sqlstates_are_encoded_as_postgres_encodes_them() {
        assert_eq!(sqlstate("XX000"), ERRCODE_INTERNAL_ERROR as i32);
        assert_eq!(sqlstate("23505"), ERRCODE_UNIQUE_VIOLATION as i32);
        assert_eq!(sqlstate("57014"), ERRCODE_QUERY_CANCELED as i32);
    }
}
