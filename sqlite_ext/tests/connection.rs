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
        // SAFETY: an open connection, walked on this thread only.
        let mut st = unsafe { rusqlite::ffi::sqlite3_next_stmt(c.handle(), std::ptr::null_mut()) };
        while !st.is_null() {
            n += 1;
            // SAFETY: `st` is a statement of that connection, still open.
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

/// Issue 34 item 11: tables, views and indexes named alk_* that are not
/// alkstore's are refused at the first call, naming them, and nothing is
/// written; the database is usable once they are gone.
#[test]
fn objects_named_alk_that_are_not_alkstores_are_refused_by_name() {
    for (setup, named) in [
        (
            "CREATE TABLE alk_meta (key TEXT PRIMARY KEY, value TEXT); \
             INSERT INTO alk_meta VALUES ('schema_version', '2');",
            "table alk_meta; migrating it from schema 2 failed",
        ),
        (
            "CREATE TABLE alk_meta (key TEXT PRIMARY KEY, value TEXT); \
             INSERT INTO alk_meta VALUES ('schema_version', '3');",
            "table alk_queues missing",
        ),
        ("CREATE TABLE alk_events (x);", "table alk_events"),
        ("CREATE VIEW alk_locks AS SELECT 1 AS x;", "view alk_locks"),
        ("CREATE TABLE alk_meta (k, v);", "table alk_meta"),
    ] {
        let db = Db::new();
        let conn = db.conn();
        conn.execute_batch(setup).unwrap();
        let before = objects(&conn);
        for call in ["SELECT alk_init()", "SELECT alk_enqueue('q', NULL, '1')"] {
            let (_, msg, _) = fails(&conn, call, &[]);
            assert!(
                msg.contains("not alkstore's schema") && msg.contains(named),
                "{setup}: {call}: {msg}"
            );
        }
        assert_eq!(objects(&conn), before, "{setup}: something was written");
    }
    // An alkstore database whose table was swapped for a view.
    let db = Db::new();
    let conn = db.conn();
    assert_eq!(int(&conn, "SELECT alk_init()", &[]), 3);
    conn.execute_batch("DROP TABLE alk_locks; CREATE VIEW alk_locks AS SELECT 1 AS x;")
        .unwrap();
    let fresh = open(&db.path);
    let (_, msg, _) = fails(&fresh, "SELECT alk_init()", &[]);
    assert!(
        msg.contains("view alk_locks, where alkstore has a table"),
        "{msg}"
    );
    // Gone: the next call makes the schema.
    let db = Db::new();
    let conn = db.conn();
    conn.execute_batch("CREATE TABLE alk_events (x);").unwrap();
    assert!(sql(&conn, "SELECT alk_init()", &[]).is_err());
    conn.execute_batch("DROP TABLE alk_events;").unwrap();
    assert_eq!(int(&conn, "SELECT alk_init()", &[]), 3);
}

fn objects(conn: &rusqlite::Connection) -> Vec<String> {
    let mut st = conn
        .prepare("SELECT type || ' ' || name || ' ' || coalesce(sql, '') FROM sqlite_master ORDER BY name")
        .unwrap();
    st.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}
