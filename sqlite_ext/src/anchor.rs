//! The anchor of the statement cache: an eponymous-only virtual table
//! with no rows, `alkstore_stmt_cache`. Cached statements must be
//! finalized before the connection closes, or `sqlite3_close` fails with
//! SQLITE_BUSY; SQLite disconnects every virtual table before that check,
//! so this table's xDisconnect finalizes the cache (conn.rs). The raw
//! pointers of SQLite's virtual-table interface stop here.

use crate::conn::ConnState;
use crate::ffi::{self, Db};
use crate::sys::{
    sqlite3, sqlite3_index_info, sqlite3_module, sqlite3_value, sqlite3_vtab, sqlite3_vtab_cursor,
};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::Ordering;
use std::sync::Arc;

#[repr(C)]
struct AnchorVtab {
    base: sqlite3_vtab,
    state: Arc<ConnState>,
}

// SQLite calls these with the pointers its virtual-table interface
// documents; each body says what it relies on.

unsafe extern "C" fn anchor_connect(
    db: *mut sqlite3,
    aux: *mut c_void,
    _argc: c_int,
    _argv: *const *const c_char,
    out: *mut *mut sqlite3_vtab,
    _err: *mut *mut c_char,
) -> c_int {
    let schema = c"CREATE TABLE x(unused)";
    let declare = ffi::routines().declare_vtab.expect("declare_vtab");
    // SAFETY: SQLite passes the connecting connection; the schema is
    // NUL-terminated.
    let rc = unsafe { declare(db, schema.as_ptr()) };
    if rc != 0 {
        return rc;
    }
    // SAFETY: `aux` is the pointer register_anchor made with Arc::into_raw,
    // and that reference is only dropped by drop_state, after the last
    // disconnect: counting one more keeps it alive in the vtab too.
    let state = unsafe {
        let aux = aux as *const ConnState;
        Arc::increment_strong_count(aux);
        Arc::from_raw(aux)
    };
    state.anchored.store(true, Ordering::Release);
    let vtab = Box::new(AnchorVtab {
        // SAFETY: sqlite3_vtab is plain C data; SQLite fills it in.
        base: unsafe { std::mem::zeroed() },
        state,
    });
    // SAFETY: `out` is SQLite's slot for the new vtab; #[repr(C)] puts the
    // base first, so SQLite sees a sqlite3_vtab at that address.
    unsafe { *out = Box::into_raw(vtab) as *mut sqlite3_vtab };
    0
}

unsafe extern "C" fn anchor_disconnect(vtab: *mut sqlite3_vtab) -> c_int {
    // SAFETY: the vtab anchor_connect boxed, handed back once by SQLite.
    let vtab = unsafe { Box::from_raw(vtab as *mut AnchorVtab) };
    vtab.state.anchored.store(false, Ordering::Release);
    if let Ok(mut cache) = vtab.state.cache.lock() {
        cache.clear(); // finalizes every cached statement
    }
    0
}

unsafe extern "C" fn anchor_best_index(
    _v: *mut sqlite3_vtab,
    info: *mut sqlite3_index_info,
) -> c_int {
    // SAFETY: SQLite passes a valid index info to fill in.
    unsafe { (*info).estimatedCost = 1.0 };
    0
}

unsafe extern "C" fn anchor_open(
    _v: *mut sqlite3_vtab,
    out: *mut *mut sqlite3_vtab_cursor,
) -> c_int {
    // SAFETY: a cursor is plain C data; `out` is SQLite's slot for it.
    unsafe { *out = Box::into_raw(Box::new(std::mem::zeroed::<sqlite3_vtab_cursor>())) };
    0
}

unsafe extern "C" fn anchor_close(cur: *mut sqlite3_vtab_cursor) -> c_int {
    // SAFETY: the cursor anchor_open boxed, handed back once by SQLite.
    drop(unsafe { Box::from_raw(cur) });
    0
}

unsafe extern "C" fn anchor_filter(
    _cur: *mut sqlite3_vtab_cursor,
    _idx: c_int,
    _idx_str: *const c_char,
    _argc: c_int,
    _argv: *mut *mut sqlite3_value,
) -> c_int {
    0
}

unsafe extern "C" fn anchor_next(_cur: *mut sqlite3_vtab_cursor) -> c_int {
    0
}

unsafe extern "C" fn anchor_eof(_cur: *mut sqlite3_vtab_cursor) -> c_int {
    1
}

unsafe extern "C" fn anchor_column(
    _cur: *mut sqlite3_vtab_cursor,
    ctx: *mut crate::sys::sqlite3_context,
    _i: c_int,
) -> c_int {
    // SAFETY: the context of this column call, used only during it.
    unsafe { ffi::Ctx::from_raw(ctx) }.result_null();
    0
}

unsafe extern "C" fn anchor_rowid(_cur: *mut sqlite3_vtab_cursor, rowid: *mut i64) -> c_int {
    // SAFETY: SQLite's slot for the rowid.
    unsafe { *rowid = 0 };
    0
}

unsafe extern "C" fn drop_state(aux: *mut c_void) {
    // SAFETY: register_anchor's Arc::into_raw, released once when SQLite
    // drops the module.
    drop(unsafe { Arc::from_raw(aux as *const ConnState) });
}

static ANCHOR_MODULE: sqlite3_module = sqlite3_module {
    iVersion: 0,
    xCreate: None, // eponymous-only: it cannot be created in a schema
    xConnect: Some(anchor_connect),
    xBestIndex: Some(anchor_best_index),
    xDisconnect: Some(anchor_disconnect),
    xDestroy: Some(anchor_disconnect),
    xOpen: Some(anchor_open),
    xClose: Some(anchor_close),
    xFilter: Some(anchor_filter),
    xNext: Some(anchor_next),
    xEof: Some(anchor_eof),
    xColumn: Some(anchor_column),
    xRowid: Some(anchor_rowid),
    xUpdate: None,
    xBegin: None,
    xSync: None,
    xCommit: None,
    xRollback: None,
    xFindFunction: None,
    xRename: None,
    xSavepoint: None,
    xRelease: None,
    xRollbackTo: None,
    xShadowName: None,
};

/// Registers the anchor module for `state` on `db`.
pub fn register_anchor(db: Db, state: &Arc<ConnState>) -> c_int {
    let aux = Arc::into_raw(Arc::clone(state)) as *mut c_void;
    let name: &CStr = c"alkstore_stmt_cache";
    let create = ffi::routines().create_module_v2.expect("create_module_v2");
    // SAFETY: an open connection, a static module, and `aux` an Arc that
    // drop_state releases (SQLite calls it even when registration fails).
    unsafe {
        create(
            db.as_ptr(),
            name.as_ptr(),
            &ANCHOR_MODULE,
            aux,
            Some(drop_state),
        )
    }
}
