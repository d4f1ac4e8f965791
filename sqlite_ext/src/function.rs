//! Registration of the `alk_*` functions and the call path they share:
//! panic containment, lazy schema creation, and result / error reporting.

use crate::args::Args;
use crate::conn::{Conn, ConnState};
use crate::error::Result;
use crate::ffi::{Ctx, Db};
use crate::out::Out;
use crate::sys::{sqlite3_context, sqlite3_value};
use crate::{admin, init, lock, notify, outbox, pause, prune, queue, release, schedule, stream};
use alkstore_core::catalogue;
use std::ffi::{c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// A function body: checks its arguments, then runs its statements.
pub type Handler = fn(&Conn, &Args) -> Result<Out>;

/// Whether a function writes (and so must be atomic, see `Conn::atomic`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Only reads.
    Reads,
    /// Writes.
    Writes,
}
const READS: Access = Access::Reads;
const WRITES: Access = Access::Writes;

/// The body of every function of the catalogue (`alkstore_core::catalogue`)
/// that SQLite has. The argument counts come from the catalogue; optional
/// trailing arguments are separate arities, so a wrong count is SQLite's own
/// "wrong number of arguments" error.
pub const HANDLERS: &[(&CStr, Access, Handler)] = &[
    (c"alk_version", READS, init::version),
    (c"alk_init", WRITES, init::init),
    (c"alk_enqueue", WRITES, queue::enqueue),
    (c"alk_enqueue_batch", WRITES, queue::enqueue_batch),
    (c"alk_claim", WRITES, queue::claim),
    (c"alk_ack", WRITES, queue::ack),
    (c"alk_ack_batch", WRITES, queue::ack_batch),
    (c"alk_retry", WRITES, queue::retry),
    (c"alk_fail", WRITES, queue::fail),
    (c"alk_heartbeat", WRITES, queue::heartbeat),
    (c"alk_release", WRITES, release::release),
    (c"alk_release_batch", WRITES, release::release_batch),
    (c"alk_cancel", WRITES, queue::cancel),
    (c"alk_get_job", READS, queue::get_job),
    (c"alk_job_errors", READS, queue::job_errors),
    (c"alk_requeue_dead", WRITES, queue::requeue_dead),
    (c"alk_queue_configure", WRITES, queue::configure),
    (c"alk_queue_opts", READS, queue::opts),
    (c"alk_queue_stats", READS, queue::stats),
    (c"alk_sweep", WRITES, queue::sweep),
    (c"alk_queue_pause", WRITES, pause::queue_pause),
    (c"alk_queue_resume", WRITES, pause::queue_resume),
    (c"alk_outbox_pause", WRITES, pause::outbox_pause),
    (c"alk_outbox_resume", WRITES, pause::outbox_resume),
    (c"alk_prune", WRITES, prune::prune),
    (c"alk_queues", READS, admin::queues),
    (c"alk_queue_limits", READS, admin::queue_limits),
    (c"alk_list_jobs", READS, admin::list_jobs),
    (c"alk_requeue_dead_all", WRITES, admin::requeue_dead_all),
    (c"alk_purge", WRITES, admin::purge),
    (c"alk_delete_job", WRITES, admin::delete_job),
    (c"alk_outbox_enqueue", WRITES, outbox::enqueue),
    (c"alk_outbox_claim", WRITES, outbox::claim),
    (c"alk_outbox_stats", READS, outbox::stats),
    (c"alk_publish", WRITES, stream::publish),
    (c"alk_read", READS, stream::read),
    (c"alk_save_offset", WRITES, stream::save_offset),
    (c"alk_get_offset", READS, stream::get_offset),
    (c"alk_reset_offset", WRITES, stream::reset_offset),
    (c"alk_stream_configure", WRITES, stream::configure),
    (c"alk_stream_info", READS, stream::info),
    (c"alk_sequence", READS, stream::sequence),
    (c"alk_schedule", WRITES, schedule::schedule),
    (c"alk_unschedule", WRITES, schedule::unschedule),
    (c"alk_schedules", READS, schedule::schedules),
    (c"alk_schedule_tick", WRITES, schedule::tick),
    (c"alk_streams", READS, admin::streams),
    (c"alk_notify", WRITES, notify::notify),
    (c"alk_notifications", READS, notify::notifications),
    (c"alk_lock_acquire", WRITES, lock::acquire),
    (c"alk_lock_renew", WRITES, lock::renew),
    (c"alk_lock_release", WRITES, lock::release),
    (c"alk_locks", READS, admin::locks),
];

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
    for (name, access, handler) in HANDLERS {
        let function = catalogued(name);
        for n in function.arities() {
            let app = Box::into_raw(Box::new(Registered {
                handler: *handler,
                access: *access,
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
        let mut have: Vec<&str> = HANDLERS
            .iter()
            .map(|(n, _, _)| catalogued(n).name)
            .collect();
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
