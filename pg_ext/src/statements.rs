//! The statements the library's hot paths ([`crate::claim`],
//! [`crate::ack`]) send: the SQL of `sql/postgres/templates/`, which the
//! PL/pgSQL functions run too, with the PL/pgSQL variables bound to
//! parameters, planned once per backend.
//!
//! They run under a search path of `pg_catalog` alone, pushed around them
//! (PostgreSQL's own plan cache does the same when it re-plans), never
//! under the caller's `search_path`: no schema of the caller's can redirect
//! an operator, a function or a type in them, and no setting changes per
//! call, as a `SET search_path` on the function would (every relation they
//! name is qualified with its schema). Their plans are generic, as
//! `SET plan_cache_mode = force_generic_plan` makes the PL/pgSQL ones.
//!
//! A statement is planned again with `enable_seqscan = off` (the PL/pgSQL
//! claim and batch ack carry that setting for the whole call). Every
//! truncation of a hot slot (rotate.sql) sends its plans to be made again,
//! while that slot is empty and its statistics are reset: PostgreSQL then
//! prefers reading the slot whole to its index for `id = ANY (…)`, and the
//! slot fills with a period's jobs and their dead versions before the next
//! truncation plans the statement again — a claim then reads thousands of
//! rows to update one.

use crate::settings;
use pgrx::pg_sys;
use pgrx::prelude::*;
use std::cell::Cell;
use std::ffi::{c_char, CString};

thread_local! {
    /// pg_catalog alone (made on first use, in TopMemoryContext).
    static PATH: Cell<*mut pg_sys::OverrideSearchPath> = const { Cell::new(std::ptr::null_mut()) };
}

/// `sql` with each whole-word PL/pgSQL variable of `vars` replaced by its
/// value (a parameter such as `$1`, or a constant); quoted text, comments
/// and qualified names (`j.queue`) are left as they are.
pub fn bind(sql: &str, vars: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(sql.len());
    let b = sql.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\'' {
            let end = sql[i + 1..].find('\'').map_or(b.len(), |e| i + e + 2);
            out.push_str(&sql[i..end]);
            i = end;
        } else if sql[i..].starts_with("--") {
            let end = sql[i..].find('\n').map_or(b.len(), |e| i + e);
            out.push_str(&sql[i..end]);
            i = end;
        } else if word(b[i]) {
            let start = i;
            while i < b.len() && (word(b[i]) || b[i] == b'$') {
                i += 1;
            }
            let w = &sql[start..i];
            let qualified = start > 0 && b[start - 1] == b'.';
            match vars.iter().find(|(name, _)| *name == w) {
                Some((_, value)) if !qualified => out.push_str(value),
                _ => out.push_str(w),
            }
        } else {
            let c = sql[i..].chars().next().expect("in bounds");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// A connection to SPI under the pinned search path, for one call.
/// [`Session::finish`] ends it; on an error, the transaction's (or
/// subtransaction's) abort pops the path and closes SPI.
pub struct Session(());

impl Session {
    /// Connects to SPI and pushes the path.
    ///
    /// # Safety
    /// In a function PostgreSQL called, with a transaction open.
    pub unsafe fn start(who: &str) -> Session {
        // SAFETY: in a call from PostgreSQL with a transaction open (the caller's promise); the
        // path lives in TopMemoryContext for the backend.
        unsafe {
            if pg_sys::SPI_connect() < 0 {
                error!("{who}: SPI_connect failed");
            }
            let mut path = PATH.get();
            if path.is_null() {
                // As Citus's PushOverrideEmptySearchPath.
                path = pg_sys::GetOverrideSearchPath(pg_sys::TopMemoryContext);
                (*path).schemas = std::ptr::null_mut();
                (*path).addCatalog = true;
                (*path).addTemp = false;
                PATH.set(path);
            }
            pg_sys::PushOverrideSearchPath(path);
        }
        Session(())
    }

    /// Pops the path and disconnects.
    ///
    /// # Safety
    /// Nothing from SPI's memory (rows, datums) is used afterwards.
    pub unsafe fn finish(self) {
        // SAFETY: the path pushed by start, and SPI connected by it.
        unsafe {
            pg_sys::PopOverrideSearchPath();
            pg_sys::SPI_finish();
        }
    }

    /// Plans `sql` (generic) and keeps the plan for the backend.
    ///
    /// # Safety
    /// `types` are the parameters' types.
    pub unsafe fn prepare(
        &self,
        who: &str,
        sql: &str,
        types: &[pg_sys::Oid],
    ) -> pg_sys::SPIPlanPtr {
        let text = CString::new(sql).expect("no NUL in the statements");
        let mut types = types.to_vec();
        // SAFETY: types outlives the call; SPI copies the text.
        unsafe {
            let plan = pg_sys::SPI_prepare_cursor(
                text.as_ptr(),
                types.len() as i32,
                types.as_mut_ptr(),
                pg_sys::CURSOR_OPT_GENERIC_PLAN as i32,
            );
            if plan.is_null() || pg_sys::SPI_keepplan(plan) != 0 {
                error!("{who}: cannot plan its statements");
            }
            plan
        }
    }

    /// Runs a kept plan; its rows stay valid until [`Session::finish`].
    /// `nulls`: one byte per argument, `n` for NULL, as SPI takes them.
    ///
    /// # Safety
    /// `args` (and `nulls`) match the plan's parameters.
    pub unsafe fn run<'s>(
        &'s self,
        who: &str,
        plan: pg_sys::SPIPlanPtr,
        args: &mut [pg_sys::Datum],
        nulls: Option<&[c_char]>,
    ) -> Rows<'s> {
        // SAFETY: args and nulls match the plan's parameters (the caller's promise); the rows live
        // in SPI's memory until finish.
        unsafe {
            let nulls = nulls.map_or(std::ptr::null(), <[c_char]>::as_ptr);
            let rc = if replan_due(plan) {
                // Planned again (a hot slot truncated, schema.sql): by index
                // whatever the slots hold now (see the module's note).
                let level = pg_sys::NewGUCNestLevel();
                settings::set(
                    c"enable_seqscan",
                    c"off",
                    pg_sys::GucAction::GUC_ACTION_SAVE,
                );
                let rc = pg_sys::SPI_execute_plan(plan, args.as_mut_ptr(), nulls, false, 0);
                pg_sys::AtEOXact_GUC(true, level);
                rc
            } else {
                pg_sys::SPI_execute_plan(plan, args.as_mut_ptr(), nulls, false, 0)
            };
            if rc < 0 {
                error!("{who}: a statement failed to run ({rc})");
            }
            let table = pg_sys::SPI_tuptable;
            Rows {
                rows: if table.is_null() {
                    &[]
                } else {
                    std::slice::from_raw_parts((*table).vals, pg_sys::SPI_processed as usize)
                },
                desc: if table.is_null() {
                    std::ptr::null_mut()
                } else {
                    (*table).tupdesc
                },
            }
        }
    }
}

/// Whether running `plan` plans it first: never run yet, or its generic
/// plan invalidated (by a TRUNCATE or an ANALYZE of a partition it reads).
///
/// # Safety
/// `plan` is a kept plan.
unsafe fn replan_due(plan: pg_sys::SPIPlanPtr) -> bool {
    // SAFETY: a kept plan's sources live as long as it does.
    unsafe {
        let sources = pg_sys::SPI_plan_get_plan_sources(plan);
        if sources.is_null() {
            return true;
        }
        let list = &*sources;
        (0..list.length as usize).any(|i| {
            let source = (*list.elements.add(i)).ptr_value as *const pg_sys::CachedPlanSource;
            !(*source).is_valid || (*source).gplan.is_null() || !(*(*source).gplan).is_valid
        })
    }
}

/// The rows a statement returned, in SPI's memory: valid while the
/// session is.
pub struct Rows<'s> {
    /// The rows.
    pub rows: &'s [pg_sys::HeapTuple],
    desc: pg_sys::TupleDesc,
}

impl Rows<'_> {
    /// Column `col` (from 1) of row `row`: its datum, or None for NULL.
    ///
    /// # Safety
    /// The row exists; the datum lives in SPI's memory.
    pub unsafe fn get(&self, row: usize, col: i32) -> Option<pg_sys::Datum> {
        let mut null = false;
        // SAFETY: the row exists (the caller's promise) and desc is its descriptor.
        let d = unsafe { pg_sys::SPI_getbinval(self.rows[row], self.desc, col, &mut null) };
        (!null).then_some(d)
    }

    /// A boolean column, NULL as false.
    ///
    /// # Safety
    /// As [`Rows::get`], and the column is a boolean.
    pub unsafe fn flag(&self, row: usize, col: i32) -> bool {
        // SAFETY: as for get.
        unsafe { self.get(row, col) }.is_some_and(|d| d.value() != 0)
    }
}

/// SPI's byte for one argument: `n` for NULL, a space otherwise.
fn null_byte(null: bool) -> c_char {
    (if null { b'n' } else { b' ' }) as c_char
}

/// Arguments for [`Session::run`] from values that may be NULL: the datums
/// (0 for NULL, which SPI does not read) and their NULL bytes.
pub fn params(values: &[Option<pg_sys::Datum>]) -> (Vec<pg_sys::Datum>, Vec<c_char>) {
    let datums = values
        .iter()
        .map(|v| v.unwrap_or(pg_sys::Datum::from(0)))
        .collect();
    let nulls = values.iter().map(|v| null_byte(v.is_none())).collect();
    (datums, nulls)
}

/// One byte per argument, as SPI takes NULLs: `n` for each NULL argument of
/// `fcinfo` among the first `n`.
///
/// # Safety
/// `fcinfo` has at least `n` arguments.
pub unsafe fn arg_nulls(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> Vec<c_char> {
    (0..n)
        .map(|i| {
            // SAFETY: fcinfo has at least n arguments (the caller's promise).
            null_byte(unsafe { pgrx::fcinfo::pg_arg_is_null(fcinfo, i) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{bind, params};
    use pgrx::pg_sys::Datum;
    use std::ffi::c_char;

    #[test]
    fn params_mark_each_null_and_pass_zero_for_it() {
        let (datums, nulls) = params(&[Some(Datum::from(7)), None, Some(Datum::from(9))]);
        assert_eq!(
            datums.iter().map(|d| d.value()).collect::<Vec<_>>(),
            [7, 0, 9]
        );
        assert_eq!(nulls, [b' ' as c_char, b'n' as c_char, b' ' as c_char]);
    }

    #[test]
    fn bind_replaces_whole_unqualified_words_outside_quotes() {
        assert_eq!(
            bind(
                "p.queue = q AND q2 = 'q' AND now <= now_x AND $1 = 'it''s q' -- q's\n  AND q",
                &[("q", "$1"), ("now", "$2")]
            ),
            "p.queue = $1 AND q2 = 'q' AND $2 <= now_x AND $1 = 'it''s q' -- q's\n  AND $1"
        );
    }
}
