//! Leases with fencing tokens (contract §9).

mod common;
use common::*;
use serde_json::Value;

#[test]
fn tokens_are_stable_for_the_holder_and_grow_for_each_new_acquisition() {
    let db = Db::new();
    let c = db.conn();
    let t1 = int(&c, "SELECT alk_lock_acquire('l', 'a', 10)", &[]);
    assert_eq!(
        int(&c, "SELECT alk_lock_acquire('l', 'a', 10)", &[]),
        t1,
        "re-acquire keeps the token"
    );
    assert_eq!(
        val(&c, "SELECT alk_lock_acquire('l', 'b', 10)", &[]),
        Value::Null
    );
    assert_eq!(int(&c, "SELECT alk_lock_renew('l', 'a', 10)", &[]), 1);
    assert_eq!(int(&c, "SELECT alk_lock_renew('l', 'b', 10)", &[]), 0);
    assert_eq!(int(&c, "SELECT alk_lock_release('l', 'b')", &[]), 0);
    assert_eq!(int(&c, "SELECT alk_lock_release('l', 'a')", &[]), 1);
    assert_eq!(int(&c, "SELECT alk_lock_release('l', 'a')", &[]), 0);
    let t2 = int(&c, "SELECT alk_lock_acquire('l', 'b', 0.05)", &[]);
    assert!(t2 > t1);
    sleep_ms(80);
    // Expired: renew fails, another owner takes it with a larger token.
    assert_eq!(int(&c, "SELECT alk_lock_renew('l', 'b', 10)", &[]), 0);
    let t3 = int(&c, "SELECT alk_lock_acquire('l', 'a', 10)", &[]);
    assert!(t3 > t2);
    // The same owner after its own lease expired is a new acquisition too.
    int(&c, "SELECT alk_lock_release('l', 'a')", &[]);
    let t4 = int(&c, "SELECT alk_lock_acquire('l', 'a', 0.05)", &[]);
    sleep_ms(80);
    let t5 = int(&c, "SELECT alk_lock_acquire('l', 'a', 10)", &[]);
    assert!(t5 > t4 && t4 > t3);
    // Names are independent.
    assert_eq!(int(&c, "SELECT alk_lock_acquire('other', 'a', 10)", &[]), 1);
}

#[test]
fn a_rolled_back_acquisition_leaves_no_lease() {
    let db = Db::new();
    let c = db.conn();
    c.execute_batch("BEGIN").unwrap();
    int(&c, "SELECT alk_lock_acquire('l', 'a', 10)", &[]);
    c.execute_batch("ROLLBACK").unwrap();
    assert!(val(&c, "SELECT alk_lock_acquire('l', 'b', 10)", &[]).is_i64());
}

#[test]
fn racing_owners_never_hold_the_same_lease_and_tokens_only_grow() {
    let db = Db::new();
    db.conn().execute_batch("SELECT alk_init()").unwrap();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let path = db.path.clone();
            std::thread::spawn(move || {
                let c = open(&path);
                let owner = format!("o{t}");
                let mut tokens = Vec::new();
                for _ in 0..100 {
                    if let Value::Number(n) =
                        val(&c, "SELECT alk_lock_acquire('l', ?1, 10)", &[&owner])
                    {
                        tokens.push(n.as_i64().unwrap());
                        assert_eq!(int(&c, "SELECT alk_lock_release('l', ?1)", &[&owner]), 1);
                    }
                }
                tokens
            })
        })
        .collect();
    let mut all: Vec<i64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n, "every acquisition got its own token");
    assert!(n > 0);
}
