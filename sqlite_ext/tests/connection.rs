//! The extension's life on a connection: cached statements must never keep
//! a connection from closing, and registering again must be harmless.

mod common;
use common::*;

#[test]
fn connections_close_cleanly_after_using_every_kind_of_function() {
    let db = Db::new();
    for i in 0..50 {
        let c = db.conn();
        let id = enqueue(&c, "q", None, "1");
        claim(&c, "q", "w", 1);
        int(&c, "SELECT alk_ack(?1, 'w')", &[&id]);
        int(&c, "SELECT alk_publish('s', '1')", &[]);
        val(&c, "SELECT alk_read('s', 0, 10)", &[]);
        val(&c, "SELECT alk_notify('c', '1')", &[]);
        val(&c, "SELECT alk_lock_acquire('l', ?1, 1)", &[&i.to_string()]);
        val(&c, "SELECT alk_queue_stats('q')", &[]);
        // sqlite3_close (not _v2) fails with SQLITE_BUSY if any statement is left.
        c.close()
            .map_err(|(_, e)| e)
            .expect("close with no statement left behind");
    }
}

#[test]
fn statements_are_cached_between_calls() {
    let db = Db::new();
    let c = db.conn();
    enqueue(&c, "q", None, "1");
    // Cached statements sit unfinalized on the connection between calls.
    let open_stmts = || -> usize {
        let mut n = 0;
        let mut st = unsafe { rusqlite::ffi::sqlite3_next_stmt(c.handle(), std::ptr::null_mut()) };
        while !st.is_null() {
            n += 1;
            st = unsafe { rusqlite::ffi::sqlite3_next_stmt(c.handle(), st) };
        }
        n
    };
    let before = open_stmts();
    assert!(before >= 2, "enqueue's statements are cached: {before}");
    for _ in 0..100 {
        enqueue(&c, "q", None, "1");
    }
    assert!(
        open_stmts() <= before + 1,
        "no statement per call: {} vs {before}",
        open_stmts()
    );
}

#[test]
fn registering_twice_on_one_connection_is_harmless() {
    let db = Db::new();
    let c = db.conn();
    enqueue(&c, "q", None, "1");
    alkstore_sqlite::register(&c).unwrap();
    enqueue(&c, "q", None, "2");
    assert_eq!(claim(&c, "q", "w", 10).len(), 2);
    c.close().map_err(|(_, e)| e).unwrap();
}

#[test]
fn the_anchor_table_is_empty_and_read_only() {
    let db = Db::new();
    let c = db.conn();
    let n: i64 = c
        .query_row("SELECT count(*) FROM alkstore_stmt_cache", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
    assert!(c
        .execute("INSERT INTO alkstore_stmt_cache VALUES (1)", [])
        .is_err());
    assert!(c
        .execute_batch("CREATE VIRTUAL TABLE x USING alkstore_stmt_cache")
        .is_err());
}
