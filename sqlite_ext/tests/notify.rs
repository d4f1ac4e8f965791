//! Notifications (contract §8) on SQLite: rows read after commit.

mod common;
use common::*;
use serde_json::json;

#[test]
fn notifications_are_visible_after_commit_only_in_commit_order() {
    let db = Db::new();
    let a = db.conn();
    let listener = db.conn();
    a.execute_batch("SELECT alk_init()").unwrap();
    a.execute_batch("BEGIN IMMEDIATE").unwrap();
    val(&a, "SELECT alk_notify('ch', '{\"n\": 1}')", &[]);
    assert_eq!(
        val(&listener, "SELECT alk_notifications('ch', 0)", &[]),
        json!([])
    );
    a.execute_batch("COMMIT").unwrap();
    a.execute_batch("BEGIN; SELECT alk_notify('ch', '\"dropped\"'); ROLLBACK")
        .unwrap();
    val(&a, "SELECT alk_notify('ch', '2')", &[]);
    val(&a, "SELECT alk_notify('other', '3')", &[]);
    let got = val(&listener, "SELECT alk_notifications('ch', 0)", &[]);
    let payloads: Vec<_> = got
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["payload"].clone())
        .collect();
    assert_eq!(payloads, vec![json!({"n": 1}), json!(2)]);
    let last = got[1]["id"].as_i64().unwrap();
    assert_eq!(
        val(&listener, "SELECT alk_notifications('ch', ?1)", &[&last]),
        json!([])
    );
    assert_eq!(
        val(&listener, "SELECT alk_notifications('ch', 0, 1)", &[])
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn a_commit_bumps_data_version_for_other_connections() {
    // What the facade's watcher relies on to wake listeners without polling the table.
    let db = Db::new();
    let a = db.conn();
    let w = db.conn();
    a.execute_batch("SELECT alk_init()").unwrap();
    let v = |c: &rusqlite::Connection| -> i64 {
        c.query_row("PRAGMA data_version", [], |r| r.get(0))
            .unwrap()
    };
    let before = v(&w);
    val(&a, "SELECT alk_notify('ch', '1')", &[]);
    assert_ne!(v(&w), before);
}

#[test]
fn old_notifications_are_pruned() {
    let db = Db::new();
    let c = db.conn();
    val(&c, "SELECT alk_notify('ch', '0')", &[]);
    c.execute("UPDATE alk_notifications SET created_at = 0", [])
        .unwrap();
    for i in 0..64 {
        val(&c, "SELECT alk_notify('ch', ?1)", &[&i.to_string()]);
    }
    let old: i64 = c
        .query_row(
            "SELECT count(*) FROM alk_notifications WHERE created_at = 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(old, 0);
}
