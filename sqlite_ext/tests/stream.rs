//! Streams (contract §7) on a real SQLite file.

mod common;
use common::*;
use serde_json::{json, Value};

fn offsets(events: &Value) -> Vec<i64> {
    events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["offset"].as_i64().unwrap())
        .collect()
}

#[test]
fn offsets_are_dense_per_stream_with_no_gap_after_rollback() {
    let db = Db::new();
    let c = db.conn();
    // alk_publish returns the event's id (v1.1 §E), unique across streams.
    let a1 = int(&c, "SELECT alk_publish('a', '{\"n\":1}')", &[]);
    let b1 = int(&c, "SELECT alk_publish('b', '1')", &[]);
    assert!(b1 > a1);
    c.execute_batch("BEGIN").unwrap();
    let rolled_back = int(&c, "SELECT alk_publish('a', '2')", &[]);
    c.execute_batch("ROLLBACK").unwrap();
    let a2 = int(&c, "SELECT alk_publish('a', '2', 'key-2')", &[]);
    let a3 = int(&c, "SELECT alk_publish('a', '3', NULL)", &[]);
    // A rolled-back event never existed: its id may come again (as a
    // rolled-back transaction's ids do in SQLite), no kept id ever does.
    assert!(a2 >= rolled_back && a2 > b1 && a3 > a2);
    let events = val(&c, "SELECT alk_read('a', 0, 100)", &[]);
    assert_eq!(offsets(&events), vec![1, 2, 3]);
    let ids: Vec<i64> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![a1, a2, a3]);
    assert_eq!(events[0]["payload"], json!({"n": 1}));
    assert_eq!(events[0]["key"], Value::Null);
    assert_eq!(events[1]["key"], "key-2");
    assert!(events[0]["created_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(events[0].as_object().unwrap().len(), 5);
    assert_eq!(
        offsets(&val(&c, "SELECT alk_read('a', 1, 1)", &[])),
        vec![2]
    );
    assert_eq!(
        offsets(&val(&c, "SELECT alk_read('a', 3, 10)", &[])),
        Vec::<i64>::new()
    );
    assert_eq!(
        offsets(&val(&c, "SELECT alk_read('b', 0, 10)", &[])),
        vec![1]
    );
}

#[test]
fn saved_offsets_never_move_backwards() {
    let db = Db::new();
    let c = db.conn();
    assert_eq!(int(&c, "SELECT alk_get_offset('s', 'c')", &[]), 0);
    assert_eq!(int(&c, "SELECT alk_save_offset('s', 'c', 5)", &[]), 1);
    assert_eq!(int(&c, "SELECT alk_save_offset('s', 'c', 3)", &[]), 0);
    assert_eq!(int(&c, "SELECT alk_save_offset('s', 'c', 5)", &[]), 0);
    assert_eq!(int(&c, "SELECT alk_get_offset('s', 'c')", &[]), 5);
    assert_eq!(int(&c, "SELECT alk_save_offset('s', 'c', 7)", &[]), 1);
    assert_eq!(int(&c, "SELECT alk_get_offset('s', 'c')", &[]), 7);
    assert_eq!(int(&c, "SELECT alk_get_offset('s', 'other')", &[]), 0);
    assert_eq!(int(&c, "SELECT alk_save_offset('s', 'fresh', 0)", &[]), 0);
}

#[test]
fn a_consumer_resumes_from_its_saved_offset() {
    let db = Db::new();
    let c = db.conn();
    for i in 1..=5 {
        int(&c, "SELECT alk_publish('s', ?1)", &[&i.to_string()]);
    }
    let first = val(&c, "SELECT alk_read('s', alk_get_offset('s', 'c'), 2)", &[]);
    assert_eq!(offsets(&first), vec![1, 2]);
    int(&c, "SELECT alk_save_offset('s', 'c', 2)", &[]);
    drop(c);
    let c = db.conn();
    let rest = val(
        &c,
        "SELECT alk_read('s', alk_get_offset('s', 'c'), 10)",
        &[],
    );
    assert_eq!(offsets(&rest), vec![3, 4, 5]);
}

#[test]
fn concurrent_publishers_from_many_connections_keep_offsets_dense() {
    let db = Db::new();
    db.conn().execute_batch("SELECT alk_init()").unwrap();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let path = db.path.clone();
            std::thread::spawn(move || {
                let c = open(&path);
                for i in 0..50 {
                    c.execute_batch("BEGIN IMMEDIATE").unwrap();
                    int(&c, "SELECT alk_publish('s', ?1)", &[&format!("[{t},{i}]")]);
                    c.execute_batch(if i % 5 == 0 { "ROLLBACK" } else { "COMMIT" })
                        .unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let c = db.conn();
    let events = val(&c, "SELECT alk_read('s', 0, 1000)", &[]);
    assert_eq!(offsets(&events), (1..=160).collect::<Vec<_>>());
}
