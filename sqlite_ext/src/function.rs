//! Registration of the `alk_*` functions and the call path they share:
//! panic containment, lazy schema creation, and result / error reporting.

use crate::args::Args;
use crate::conn::{Conn, ConnState};
use crate::error::Result;
use crate::ffi::{Ctx, Db};
use crate::out::Out;
use crate::sys::{sqlite3_context, sqlite3_value};
use alkstore_core::catalogue::{self, Access};
use std::ffi::{c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// A function body: checks its arguments, then runs its statements.
pub type Handler = fn(&Conn, &Args) -> Result<Out>;

// Every mechanism's function bodies, each named after its SQL function
// (`alk_*`): the generated table below names them. A new function's body
// in one of these modules needs nothing else here.
#[allow(clippy::wildcard_imports)]
use crate::{
    admin::*, init::*, lock::*, notify::*, outbox::*, pause::*, prune::*, queue::*, release::*,
    schedule::*, stream::*,
};

/// The body of every function of the catalogue (`alkstore_core::catalogue`)
/// that SQLite has, by name: written by `cargo xtask codegen` from the
/// catalogue. The argument counts, whether it writes and where a schema may
/// call it come from the catalogue too; optional trailing arguments are
/// separate arities, so a wrong count is SQLite's own "wrong number of
/// arguments" error.
#[path = "generated/handlers.rs"]
mod handlers;
pub use handlers::HANDLERS;

/// The catalogue entry of a handler.
fn catalogued(name: &CStr) -> &'static catalogue::Function {
    let name = name.to_str().expect("ASCII names");
    catalogue::get(name).unwrap_or_else(|| panic!("{name} is not in the catalogue"))
}

struct Registered {
    handler: Handler,
    access: Access,
    state: Arc<ConnState>,
}

/// Registers every function, and the statement-cache anchor, on `db`.
pub fn register_all(db: Db) -> c_int {
    let state = Arc::new(ConnState::default());
    let rc = crate::anchor::register_anchor(db, &state);
    if rc != 0 {
        return rc;
    }
    for (name, handler) in HANDLERS {
        let function = catalogued(name);
        for n in function.arities() {
            let app = Box::into_raw(Box::new(Registered {
                handler: *handler,
                access: function.access,
                state: Arc::clone(&state),
            }));
            // SAFETY: `app` is a boxed Registered that only `destroy` frees,
            // and `dispatch` reads it as one.
            let rc = unsafe {
                db.create_function(
                    name,
                    n as c_int,
                    schema_flags(function.in_schema),
                    app as *mut c_void,
                    dispatch,
                    destroy,
                )
            };
            if rc != 0 {
                return rc; // SQLite has already called destroy(app)
            }
        }
    }
    0
}

/// SQLite's registration flags for where a schema may call a function
/// (`catalogue::InSchema`; docs/security.md says why each is where it is).
fn schema_flags(in_schema: catalogue::InSchema) -> c_int {
    use crate::sys::{SQLITE_DIRECTONLY, SQLITE_INNOCUOUS};
    match in_schema {
        catalogue::InSchema::Never => SQLITE_DIRECTONLY as c_int,
        catalogue::InSchema::Trusted => 0,
        catalogue::InSchema::Anywhere => SQLITE_INNOCUOUS as c_int,
    }
}

unsafe extern "C" fn destroy(app: *mut c_void) {
    // SAFETY: the Box register_all leaked for this registration; SQLite
    // calls destroy once, after the last call through it.
    drop(unsafe { Box::from_raw(app as *mut Registered) });
}

unsafe extern "C" fn dispatch(
    ctx: *mut sqlite3_context,
    argc: c_int,
    argv: *mut *mut sqlite3_value,
) {
    // SAFETY: SQLite calls this with the context of the call being made.
    let mut ctx = unsafe { Ctx::from_raw(ctx) };
    // SAFETY: the application data is the Registered of register_all,
    // alive until destroy, which SQLite never runs during a call.
    let f = unsafe { &*(ctx.user_data() as *const Registered) };
    let argv = if argc > 0 && !argv.is_null() {
        // SAFETY: SQLite passes `argc` argument pointers, valid for the call.
        unsafe { std::slice::from_raw_parts(argv, argc as usize) }
    } else {
        &[]
    };
    // SAFETY: the arguments of this call, used only during it.
    let args = unsafe { Args::new(argv) };
    let conn = Conn::new(ctx.db(), &f.state);
    // A panic must not unwind into SQLite's C frames (or crash its host).
    match catch_unwind(AssertUnwindSafe(|| call(f, &conn, &args))) {
        Ok(Ok(out)) => set_result(&mut ctx, out),
        Ok(Err(e)) => e.report(&mut ctx),
        Err(_) => ctx.result_error("alkstore: internal error (a bug: please report it)", 2),
    }
}

fn call(f: &Registered, conn: &Conn, args: &Args) -> Result<Out> {
    let run = || match f.access {
        Access::Writes => conn.atomic(|| (f.handler)(conn, args)),
        Access::Reads => (f.handler)(conn, args),
    };
    match run() {
        // The tables vanished under a cached check (a transaction that created
        // them rolled back): the call failed on its first statement, so
        // nothing was written; check again and run it once more.
        Err(e) if e.is_missing_schema() => {
            conn.schema_lost();
            run()
        }
        other => other,
    }
}

fn set_result(ctx: &mut Ctx, out: Out) {
    match out {
        Out::Null => ctx.result_null(),
        Out::Int(v) => ctx.result_i64(v),
        Out::Bool(v) => ctx.result_i64(v as i64),
        Out::Text(v) => ctx.result_text(&v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handlers_are_exactly_the_catalogues_sqlite_functions() {
        let mut have: Vec<&str> = HANDLERS.iter().map(|(n, _)| catalogued(n).name).collect();
        let mut want: Vec<&str> = catalogue::FUNCTIONS
            .iter()
            .filter(|f| f.on_sqlite())
            .map(|f| f.name)
            .collect();
        have.sort_unstable();
        want.sort_unstable();
        assert_eq!(have, want);
    }
}
