//! Registration of the `alk_*` functions and the call path they share:
//! panic containment, lazy schema creation, and result / error reporting.

use crate::args::Args;
use crate::conn::{Conn, ConnState};
use crate::error::Result;
use crate::ffi;
use crate::{init, lock, notify, outbox, queue, stream};
use sqlite_loadable::ext::{sqlite3, sqlite3_context, sqlite3_value};
use std::ffi::{c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// What a function returns to SQL.
pub enum Out {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A boolean, as SQLite's 1 / 0.
    Bool(bool),
    /// Text (JSON documents are text on SQLite).
    Text(String),
}

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

/// Every function with the argument counts it accepts (contract §5–§9, §12).
/// Optional trailing arguments are separate arities, so a wrong count is
/// SQLite's own "wrong number of arguments" error.
pub const FUNCTIONS: &[(&CStr, &[c_int], Access, Handler)] = &[
    (c"alk_init", &[0], WRITES, init::init),
    (c"alk_enqueue", &[3], WRITES, queue::enqueue),
    (c"alk_enqueue_batch", &[3], WRITES, queue::enqueue_batch),
    (c"alk_claim", &[2, 3], WRITES, queue::claim),
    (c"alk_ack", &[2], WRITES, queue::ack),
    (c"alk_ack_batch", &[2], WRITES, queue::ack_batch),
    (c"alk_retry", &[3, 4], WRITES, queue::retry),
    (c"alk_fail", &[3], WRITES, queue::fail),
    (c"alk_heartbeat", &[2, 3], WRITES, queue::heartbeat),
    (c"alk_cancel", &[1], WRITES, queue::cancel),
    (c"alk_get_job", &[1], READS, queue::get_job),
    (c"alk_requeue_dead", &[1], WRITES, queue::requeue_dead),
    (c"alk_queue_configure", &[2], WRITES, queue::configure),
    (c"alk_queue_opts", &[1], READS, queue::opts),
    (c"alk_queue_stats", &[1], READS, queue::stats),
    (c"alk_sweep", &[0, 1], WRITES, queue::sweep),
    (c"alk_outbox_enqueue", &[3], WRITES, outbox::enqueue),
    (c"alk_outbox_claim", &[2, 3], WRITES, outbox::claim),
    (c"alk_outbox_stats", &[1], READS, outbox::stats),
    (c"alk_publish", &[2, 3], WRITES, stream::publish),
    (c"alk_read", &[3], READS, stream::read),
    (c"alk_save_offset", &[3], WRITES, stream::save_offset),
    (c"alk_get_offset", &[2], READS, stream::get_offset),
    (c"alk_notify", &[2], WRITES, notify::notify),
    (c"alk_notifications", &[2, 3], READS, notify::notifications),
    (c"alk_lock_acquire", &[3], WRITES, lock::acquire),
    (c"alk_lock_renew", &[3], WRITES, lock::renew),
    (c"alk_lock_release", &[2], WRITES, lock::release),
];

struct Registered {
    handler: Handler,
    access: Access,
    state: Arc<ConnState>,
}

/// Registers every function, and the statement-cache anchor, on `db`.
///
/// # Safety
/// `db` must be an open connection and the routine table must be set.
pub unsafe fn register_all(db: *mut sqlite3) -> c_int {
    let state = Arc::new(ConnState::default());
    let rc = crate::conn::register_anchor(db, &state);
    if rc != 0 {
        return rc;
    }
    for (name, arities, access, handler) in FUNCTIONS {
        for &n in *arities {
            let app = Box::into_raw(Box::new(Registered {
                handler: *handler,
                access: *access,
                state: Arc::clone(&state),
            }));
            let rc = ffi::create_function(db, name, n, app as *mut c_void, dispatch, destroy);
            if rc != 0 {
                return rc; // SQLite has already called destroy(app)
            }
        }
    }
    0
}

unsafe extern "C" fn destroy(app: *mut c_void) {
    drop(Box::from_raw(app as *mut Registered));
}

unsafe extern "C" fn dispatch(
    ctx: *mut sqlite3_context,
    argc: c_int,
    argv: *mut *mut sqlite3_value,
) {
    let f = &*(ffi::user_data(ctx) as *const Registered);
    let argv = if argc > 0 {
        std::slice::from_raw_parts(argv, argc as usize)
    } else {
        &[]
    };
    let args = Args::new(argv);
    let conn = Conn::new(ffi::context_db(ctx), &f.state);
    // A panic must not unwind into SQLite's C frames (or crash its host).
    match catch_unwind(AssertUnwindSafe(|| call(f, &conn, &args))) {
        Ok(Ok(out)) => set_result(ctx, out),
        Ok(Err(e)) => e.report(ctx),
        Err(_) => ffi::result_error(ctx, "alkstore: internal error (a bug: please report it)", 2),
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

fn set_result(ctx: *mut sqlite3_context, out: Out) {
    match out {
        Out::Null => ffi::result_null(ctx),
        Out::Int(v) => ffi::result_i64(ctx, v),
        Out::Bool(v) => ffi::result_i64(ctx, v as i64),
        Out::Text(v) => ffi::result_text(ctx, &v),
    }
}
