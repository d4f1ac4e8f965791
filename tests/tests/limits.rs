//! Contract v1.2 §I (flow control): concurrency and sliding-window rate
//! limits per queue and per `limit_key` — one body per rule, run on SQLite,
//! the extension, the plain install and through PgBouncer; eight concurrent
//! claimers against each limit kind on real connections.

use alkstore_tests::*;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

fn enqueue(db: &mut dyn Db, q: &str, opts: &str, payload: &str) -> i64 {
    db.int("alk_enqueue", &[t(q), j(opts), j(payload)])
}

fn keyed(db: &mut dyn Db, q: &str, key: &str) -> i64 {
    enqueue(db, q, &format!(r#"{{"limit_key": "{key}"}}"#), "1")
}

fn claim(db: &mut dyn Db, q: &str, worker: &str, n: i64) -> Vec<i64> {
    ids(&db.ok("alk_claim", &[t(q), t(worker), Arg::Int(n)]))
}

fn ack(db: &mut dyn Db, id: i64, worker: &str) -> bool {
    db.yes("alk_ack", &[Arg::Int(id), t(worker)])
}

/// Lets worker `w`'s claim on `id` run out now, however long the steps
/// before took: the claim is stamped with the queue's long visibility and
/// cut short only here (a short visibility could run out between steps on
/// a loaded machine).
fn expire_claim(db: &mut dyn Db, id: i64) {
    assert!(
        db.yes("alk_heartbeat", &[Arg::Int(id), t("w"), Arg::Num(0.05)]),
        "{id} held by w"
    );
    std::thread::sleep(Duration::from_millis(120));
}

fn configure(db: &mut dyn Db, q: &str, opts: &str) -> Value {
    db.ok("alk_queue_configure", &[t(q), j(opts)])
}

fn stats(db: &mut dyn Db, q: &str) -> Value {
    db.ok("alk_queue_stats", &[t(q)])
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

per_engine! {
    fn limits_are_queue_options_checked_before_anything_is_written(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("lim-opts");
        let set = configure(db, &q, r#"{"max_running": 3, "rate_max": 10, "rate_per_s": 1.5,
                                        "key_max_running": 1, "key_rate_max": 2, "key_rate_per_s": 60}"#);
        let limits = json!({"max_running": 3, "rate_max": 10, "rate_per_s": 1.5,
                            "key_max_running": 1, "key_rate_max": 2, "key_rate_per_s": 60});
        for (k, v) in limits.as_object().unwrap() {
            assert_eq!(&set[k], v, "[{e}] {k}");
        }
        assert_eq!(db.ok("alk_queue_opts", &[t(&q)]), set, "[{e}]");
        for bad in [
            r#"{"max_running": 0}"#,
            r#"{"max_running": -1}"#,
            r#"{"max_running": 2.5}"#,
            r#"{"max_running": "2"}"#,
            r#"{"key_max_running": 0}"#,
            r#"{"rate_max": 0}"#,
            r#"{"rate_per_s": 0}"#,
            r#"{"rate_per_s": -1}"#,
            r#"{"key_rate_max": 1.5}"#,
            r#"{"rate_max": null}"#,
            r#"{"key_rate_per_s": null}"#,
            r#"{"max_running": 1, "rate_per_s": null}"#,
        ] {
            assert_eq!(db.code("alk_queue_configure", &[t(&q), j(bad)]), "ALK03", "[{e}] {bad}");
            assert_eq!(db.ok("alk_queue_opts", &[t(&q)]), set, "[{e}] {bad} changed nothing");
        }
        // One of a pair without the other, on a queue that has neither.
        let other = fresh("lim-pair");
        for bad in [r#"{"rate_max": 5}"#, r#"{"key_rate_per_s": 5}"#] {
            assert_eq!(db.code("alk_queue_configure", &[t(&other), j(bad)]), "ALK03", "[{e}] {bad}");
        }
        assert_eq!(db.ok("alk_queue_opts", &[t(&other)])["rate_max"], Value::Null, "[{e}]");
        // Half of a pair where the other half is set already is a change.
        assert_eq!(configure(db, &q, r#"{"rate_max": 4}"#)["rate_max"], 4, "[{e}]");
        // null removes a limit (a pair together).
        let off = configure(db, &q, r#"{"max_running": null, "rate_max": null, "rate_per_s": null,
                                        "key_max_running": null, "key_rate_max": null, "key_rate_per_s": null}"#);
        for k in limits.as_object().unwrap().keys() {
            assert_eq!(off[k], Value::Null, "[{e}] {k}");
        }
        let s = stats(db, &q);
        assert_eq!((&s["running_limit"], &s["next_slot_at"]), (&Value::Null, &Value::Null), "[{e}]");
        // limit_key: a non-empty string of at most 1024 bytes, shown by alk_get_job.
        for bad in [r#"{"limit_key": ""}"#, r#"{"limit_key": 5}"#, r#"{"limit_key": null}"#] {
            assert_eq!(db.code("alk_enqueue", &[t(&q), j(bad), j("1")]), "ALK03", "[{e}] {bad}");
        }
        let long = format!(r#"{{"limit_key": "{}"}}"#, "k".repeat(1025));
        assert_eq!(db.code("alk_enqueue", &[t(&q), j(&long), j("1")]), "ALK03", "[{e}]");
        assert_eq!(stats(db, &q)["pending"], 0, "[{e}] nothing written");
        let id = keyed(db, &q, "acct-42");
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(id)])["limit_key"], "acct-42", "[{e}]");
        let batch = db.ok("alk_enqueue_batch", &[t(&q), j(r#"{"limit_key": "b"}"#), j("[1, 2]")]);
        for id in ids_of(&batch) {
            assert_eq!(db.ok("alk_get_job", &[Arg::Int(id)])["limit_key"], "b", "[{e}]");
        }
        let plain = enqueue(db, &q, "{}", "1");
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(plain)])["limit_key"], Value::Null, "[{e}]");
    }
}

fn ids_of(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

per_engine! {
    fn max_running_caps_the_queue_and_every_finish_or_expiry_frees_a_slot_at_once(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("lim-running");
        configure(db, &q, r#"{"max_running": 2, "visibility_timeout_s": 60}"#);
        let jobs: Vec<i64> = (0..8).map(|i| enqueue(db, &q, "{}", &i.to_string())).collect();
        assert_eq!(claim(db, &q, "w", 5), jobs[..2], "[{e}] two, in claim order");
        assert_eq!(claim(db, &q, "w", 5), Vec::<i64>::new(), "[{e}] none: no waiting for a slot");
        let s = stats(db, &q);
        assert_eq!(s["running_limit"], 2, "[{e}]");
        assert!(s["next_slot_at"].is_string(), "[{e}] a slot frees by the first claim's expiry: {s}");
        // Ack, retry, fail and cancel each free a slot at once.
        assert!(ack(db, jobs[0], "w"), "[{e}]");
        assert_eq!(stats(db, &q)["next_slot_at"], Value::Null, "[{e}]");
        assert_eq!(claim(db, &q, "w", 5), [jobs[2]], "[{e}] after an ack");
        assert_eq!(
            db.ok("alk_retry", &[Arg::Int(jobs[1]), t("w"), t("later"), Arg::Num(3600.0)]),
            "pending",
            "[{e}]"
        );
        assert_eq!(claim(db, &q, "w", 5), [jobs[3]], "[{e}] after a retry");
        assert!(db.yes("alk_fail", &[Arg::Int(jobs[2]), t("w"), t("no")]), "[{e}]");
        assert_eq!(claim(db, &q, "w", 5), [jobs[4]], "[{e}] after a fail");
        assert!(db.yes("alk_cancel", &[Arg::Int(jobs[3])]), "[{e}]");
        assert_eq!(claim(db, &q, "w", 5), [jobs[5]], "[{e}] after a cancel");
        // Lowering the limit takes nothing back; raising it lets more run.
        configure(db, &q, r#"{"max_running": 1}"#);
        assert_eq!(stats(db, &q)["running"], 2, "[{e}]");
        assert_eq!(claim(db, &q, "w", 5), Vec::<i64>::new(), "[{e}]");
        configure(db, &q, r#"{"max_running": 3}"#);
        assert_eq!(claim(db, &q, "w", 5), [jobs[6]], "[{e}]");
        // An expired claim frees its slot, and its re-claim takes one.
        let q2 = fresh("lim-expiry");
        configure(db, &q2, r#"{"max_running": 1, "visibility_timeout_s": 0.2}"#);
        let a = enqueue(db, &q2, r#"{"priority": 1}"#, "1");
        let b = enqueue(db, &q2, "{}", "2");
        assert_eq!(claim(db, &q2, "w1", 2), [a], "[{e}]");
        sleep_ms(300);
        assert_eq!(claim(db, &q2, "w2", 2), [a], "[{e}] the expired claim, in claim order, and only it");
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(b)])["state"], "pending", "[{e}]");
    }
}

per_engine! {
    fn a_rate_window_slides_and_next_slot_at_says_when_it_frees(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("lim-rate");
        // A 3 s window: the steps between two slots freeing must fit in
        // it, also on a loaded machine.
        configure(db, &q, r#"{"rate_max": 2, "rate_per_s": 3}"#);
        let jobs: Vec<i64> = (0..6).map(|i| enqueue(db, &q, "{}", &i.to_string())).collect();
        let first = db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(1)]);
        let t0 = instant(&first[0]["claim_expires_at"]) - 60_000;
        sleep_ms(1200);
        assert_eq!(claim(db, &q, "w", 5), [jobs[1]], "[{e}] the second claim of the window");
        // Acks do not give rate back: the window counts claims started.
        assert!(ack(db, jobs[0], "w") && ack(db, jobs[1], "w"), "[{e}]");
        assert_eq!(claim(db, &q, "w", 5), Vec::<i64>::new(), "[{e}] the window is full");
        let s = stats(db, &q);
        assert_eq!(s["running_limit"], Value::Null, "[{e}]");
        let free = instant(&s["next_slot_at"]);
        assert_eq!(free, t0 + 3000, "[{e}] when the first claim leaves the window: {s}");
        // Not a calendar bucket: once the first claim left, one slot; the
        // second claim holds the other until it leaves in turn.
        sleep_ms((free - now_ms()).max(0) as u64 + 20);
        assert_eq!(claim(db, &q, "w", 5), [jobs[2]], "[{e}] one slot freed");
        assert_eq!(claim(db, &q, "w", 5), Vec::<i64>::new(), "[{e}]");
        assert!(instant(&stats(db, &q)["next_slot_at"]) > free, "[{e}]");
        // A retry's re-claim counts too.
        assert_eq!(
            db.ok("alk_retry", &[Arg::Int(jobs[2]), t("w"), t("x"), Arg::Num(0.0)]),
            "pending",
            "[{e}]"
        );
        assert_eq!(claim(db, &q, "w", 5), Vec::<i64>::new(), "[{e}] its re-claim waits for the window");
        // A prune leaves the window alone.
        db.int("alk_prune", &[Arg::Int(1000)]);
        assert_eq!(claim(db, &q, "w", 5), Vec::<i64>::new(), "[{e}] after a prune");
        // A rate removed takes its window along: set again, it starts empty.
        configure(db, &q, r#"{"rate_max": null, "rate_per_s": null}"#);
        configure(db, &q, r#"{"rate_max": 2, "rate_per_s": 3600}"#);
        assert_eq!(claim(db, &q, "w", 5).len(), 2, "[{e}] a fresh window");
        assert_eq!(claim(db, &q, "w", 5), Vec::<i64>::new(), "[{e}]");
    }
}

per_engine! {
    fn a_busy_key_is_stepped_over_in_claim_order_and_never_holds_back_the_others(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("lim-keys");
        configure(db, &q, r#"{"key_max_running": 1}"#);
        let busy: Vec<i64> = (0..5).map(|_| keyed(db, &q, "busy")).collect();
        let idle1 = keyed(db, &q, "idle-1");
        let none = enqueue(db, &q, "{}", "1");
        let idle2 = keyed(db, &q, "idle-2");
        assert_eq!(claim(db, &q, "w", 10), [busy[0], idle1, none, idle2], "[{e}]");
        assert_eq!(claim(db, &q, "w", 10), Vec::<i64>::new(), "[{e}]");
        let s = stats(db, &q);
        assert!(s["next_slot_at"].is_string(), "[{e}] every due job's key is at its limit: {s}");
        let late = keyed(db, &q, "late");
        assert_eq!(stats(db, &q)["next_slot_at"], Value::Null, "[{e}] a job whose key has room");
        assert_eq!(claim(db, &q, "w", 1), [late], "[{e}] past the busy key's jobs");
        assert!(ack(db, busy[0], "w"), "[{e}]");
        assert_eq!(claim(db, &q, "w", 10), [busy[1]], "[{e}] the busy key's next, one only");
        // Per-key rate: a key at its rate is stepped over as well; the
        // queue-wide limits count every key.
        let r = fresh("lim-keyrate");
        configure(db, &r, r#"{"key_rate_max": 2, "key_rate_per_s": 3600, "max_running": 3}"#);
        let a: Vec<i64> = (0..3).map(|_| keyed(db, &r, "a")).collect();
        let b: Vec<i64> = (0..3).map(|_| keyed(db, &r, "b")).collect();
        assert_eq!(claim(db, &r, "w", 10), [a[0], a[1], b[0]], "[{e}] the queue's 3");
        for id in [a[0], a[1], b[0]] {
            assert!(ack(db, id, "w"), "[{e}]");
        }
        assert_eq!(claim(db, &r, "w", 10), [b[1]], "[{e}] a is at its rate, b has one left");
        assert!(ack(db, b[1], "w"), "[{e}]");
        assert_eq!(claim(db, &r, "w", 10), Vec::<i64>::new(), "[{e}]");
        let s = stats(db, &r);
        assert!(instant(&s["next_slot_at"]) > now_ms() + 3_500_000, "[{e}] an hour's window: {s}");
    }
}

per_engine! {
    fn a_groups_head_is_claimable_only_when_its_key_has_room(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("lim-group");
        configure(db, &q, r#"{"key_max_running": 1}"#);
        let opts = |g: &str, k: &str| format!(r#"{{"group_key": "{g}", "limit_key": "{k}"}}"#);
        let g1 = enqueue(db, &q, &opts("g1", "k"), "1");
        let g1b = enqueue(db, &q, &opts("g1", "k"), "2");
        let g2 = enqueue(db, &q, &opts("g2", "k"), "3");
        let g3 = enqueue(db, &q, &opts("g3", "other"), "4");
        assert_eq!(claim(db, &q, "w", 10), [g1, g3], "[{e}] g2's head waits for key k");
        assert!(ack(db, g1, "w"), "[{e}]");
        // g1's next job and g2's head are both heads of key k: one runs.
        assert_eq!(claim(db, &q, "w", 10), [g1b], "[{e}]");
        assert!(ack(db, g1b, "w"), "[{e}]");
        assert_eq!(claim(db, &q, "w", 10), [g2], "[{e}]");
    }
}

per_engine! {
    fn a_full_keys_backlog_waits_out_of_claim_order_and_comes_back_as_its_key_frees(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("lim-park");
        configure(db, &q, r#"{"key_max_running": 2}"#);
        let held: Vec<i64> = (0..2).map(|_| keyed(db, &q, "busy")).collect();
        assert_eq!(claim(db, &q, "w", 2), held, "[{e}]");
        let backlog: Vec<i64> = (0..60).map(|_| keyed(db, &q, "busy")).collect();
        let others: Vec<i64> = (0..3).map(|i| keyed(db, &q, &format!("k{i}"))).collect();
        assert_eq!(claim(db, &q, "w", 1), [others[0]], "[{e}] past the busy key's 60");
        assert_eq!(claim(db, &q, "w", 1), [others[1]], "[{e}] and again");
        // Stepped over, the busy key's jobs are pending to everyone outside.
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(backlog[0])])["state"], "pending", "[{e}]");
        assert_eq!(stats(db, &q)["pending"], 61, "[{e}]");
        let listed = db.ok("alk_list_jobs", &[t(&q), t("pending"), Arg::Int(0), Arg::Int(100)]);
        assert_eq!(listed.as_array().map(Vec::len), Some(61), "[{e}] listed as pending");
        // An ack frees one slot: the key's next job in claim order, one only.
        assert!(ack(db, held[0], "w"), "[{e}]");
        assert_eq!(claim(db, &q, "w", 5), [backlog[0], others[2]], "[{e}]");
        // A retry frees one too (the retried job waits for its delay).
        let retried = db.ok("alk_retry", &[Arg::Int(held[1]), t("w"), t("again"), Arg::Num(3600.0)]);
        assert_eq!(retried, "pending", "[{e}]");
        assert_eq!(claim(db, &q, "w", 5), [backlog[1]], "[{e}]");
        // A job stepped over can be cancelled, and a cancelled running job frees its slot.
        assert!(db.yes("alk_cancel", &[Arg::Int(backlog[2])]), "[{e}]");
        assert!(db.yes("alk_cancel", &[Arg::Int(backlog[0])]), "[{e}]");
        assert_eq!(claim(db, &q, "w", 5), [backlog[3]], "[{e}] the next after the cancelled one");
        assert_eq!(stats(db, &q)["pending"], 56, "[{e}] the backlog's 56 left (the retried one is scheduled)");
        // Raising the key's limit lets the rest run at once.
        configure(db, &q, r#"{"key_max_running": 100}"#);
        assert_eq!(claim(db, &q, "w", 100), backlog[4..].to_vec(), "[{e}] everything left, in order");
        // Removing it as well: a new backlog stepped over comes back with the limit gone.
        configure(db, &q, r#"{"key_max_running": 1}"#);
        let more: Vec<i64> = (0..5).map(|_| keyed(db, &q, "busy")).collect();
        let other = keyed(db, &q, "k9");
        assert_eq!(claim(db, &q, "w", 1), [other], "[{e}]");
        configure(db, &q, r#"{"key_max_running": null}"#);
        assert_eq!(claim(db, &q, "w", 10), more, "[{e}] without a limit");

        // A final claim that expires frees its slot: the claim that
        // dead-letters it takes the key's next job.
        let x = fresh("lim-park-expiry");
        configure(db, &x, r#"{"key_max_running": 1, "max_attempts": 1}"#);
        let first = keyed(db, &x, "k");
        assert_eq!(claim(db, &x, "w", 1), [first], "[{e}]");
        let next = keyed(db, &x, "k");
        let other = keyed(db, &x, "other");
        assert_eq!(claim(db, &x, "w", 1), [other], "[{e}]");
        expire_claim(db, first);
        assert_eq!(claim(db, &x, "w", 1), [next], "[{e}]");
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(first)])["state"], "dead", "[{e}]");
        assert!(ack(db, other, "w") && ack(db, next, "w"), "[{e}]");
        // And one that a sweep dead-letters.
        let first = keyed(db, &x, "s");
        assert_eq!(claim(db, &x, "w", 1), [first], "[{e}]");
        let next = keyed(db, &x, "s");
        let other = keyed(db, &x, "other");
        assert_eq!(claim(db, &x, "w", 1), [other], "[{e}]");
        expire_claim(db, first);
        db.ok("alk_sweep", &[t(&x)]);
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(first)])["state"], "dead", "[{e}]");
        assert_eq!(stats(db, &x)["pending"], 1, "[{e}]");
        assert_eq!(claim(db, &x, "w", 1), [next], "[{e}]");

        // A claim that expires with attempts left frees its slot too: claim
        // order decides between its re-claim and the key's parked jobs.
        let y = fresh("lim-park-reclaim");
        configure(db, &y, r#"{"key_max_running": 1}"#);
        let first = keyed(db, &y, "k");
        assert_eq!(claim(db, &y, "w", 1), [first], "[{e}]");
        let urgent = enqueue(db, &y, r#"{"limit_key": "k", "priority": 10}"#, "1");
        let other = keyed(db, &y, "other");
        assert_eq!(claim(db, &y, "w", 1), [other], "[{e}]");
        expire_claim(db, first);
        expire_claim(db, other);
        assert_eq!(claim(db, &y, "w", 1), [urgent], "[{e}] the higher priority first");
        assert_eq!(claim(db, &y, "w", 5), [other], "[{e}] other's expired claim; k is full again");

        // A job stepped over that expires, and ones purged: neither comes
        // back, nor stands in the way of the key's next job.
        let p = fresh("lim-park-gone");
        configure(db, &p, r#"{"key_max_running": 1}"#);
        let run = keyed(db, &p, "k");
        assert_eq!(claim(db, &p, "w", 1), [run], "[{e}]");
        let short = enqueue(db, &p, r#"{"limit_key": "k", "expires_in_s": 0.2}"#, "1");
        let long = keyed(db, &p, "k");
        let other = keyed(db, &p, "o");
        assert_eq!(claim(db, &p, "w", 1), [other], "[{e}]");
        std::thread::sleep(Duration::from_millis(300));
        db.ok("alk_sweep", &[t(&p)]);
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(short)])["state"], "dead", "[{e}]");
        assert!(ack(db, run, "w"), "[{e}]");
        assert_eq!(claim(db, &p, "w", 1), [long], "[{e}] not held back by the expired one");
        let purged: Vec<i64> = (0..3).map(|_| keyed(db, &p, "k")).collect();
        let other = keyed(db, &p, "o2");
        assert_eq!(claim(db, &p, "w", 1), [other], "[{e}]");
        assert_eq!(db.int("alk_purge", &[t(&p), t("pending")]), purged.len() as i64, "[{e}]");
        assert!(ack(db, long, "w"), "[{e}]");
        let after = keyed(db, &p, "k");
        assert_eq!(claim(db, &p, "w", 1), [after], "[{e}] not held back by the purged ones");
        assert_eq!(stats(db, &p)["pending"], 0, "[{e}]");
        // One put back by a finish and cancelled before any claim took it:
        // the next one comes back in its place.
        let a = keyed(db, &p, "k");
        let b = keyed(db, &p, "k");
        let other = keyed(db, &p, "o3");
        assert_eq!(claim(db, &p, "w", 1), [other], "[{e}]");
        assert!(ack(db, after, "w"), "[{e}]");
        assert!(db.yes("alk_cancel", &[Arg::Int(a)]), "[{e}]");
        assert_eq!(claim(db, &p, "w", 1), [b], "[{e}] not stranded behind the cancelled one");
    }
}

per_engine! {
    fn a_key_at_its_rate_waits_out_of_claim_order_until_its_window_frees(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("lim-park-rate");
        configure(db, &q, r#"{"key_rate_max": 2, "key_rate_per_s": 2}"#);
        let r: Vec<i64> = (0..7).map(|_| keyed(db, &q, "r")).collect();
        let o: Vec<i64> = (0..2).map(|i| keyed(db, &q, &format!("o{i}"))).collect();
        assert_eq!(claim(db, &q, "w", 10), [r[0], r[1], o[0], o[1]], "[{e}]");
        assert_eq!(claim(db, &q, "w", 10), Vec::<i64>::new(), "[{e}] r is at its rate");
        assert_eq!(stats(db, &q)["pending"], 5, "[{e}]");
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(r[2])])["state"], "pending", "[{e}]");
        let late = keyed(db, &q, "o9");
        assert_eq!(claim(db, &q, "w", 10), [late], "[{e}] past r's jobs");
        std::thread::sleep(Duration::from_millis(2100));
        assert_eq!(claim(db, &q, "w", 10), [r[2], r[3]], "[{e}] a new window: r's next two");
        assert_eq!(claim(db, &q, "w", 10), Vec::<i64>::new(), "[{e}]");
        // One that waits is cancelled: the next window takes the two after it.
        assert!(db.yes("alk_cancel", &[Arg::Int(r[4])]), "[{e}]");
        std::thread::sleep(Duration::from_millis(2100));
        assert_eq!(claim(db, &q, "w", 10), [r[5], r[6]], "[{e}]");
        assert_eq!(stats(db, &q)["pending"], 0, "[{e}]");
        // Lifting the rate lets a waiting backlog run at once.
        let more: Vec<i64> = (0..5).map(|_| keyed(db, &q, "s")).collect();
        assert_eq!(claim(db, &q, "w", 1), [more[0]], "[{e}]");
        assert_eq!(claim(db, &q, "w", 1), [more[1]], "[{e}]");
        assert_eq!(claim(db, &q, "w", 1), Vec::<i64>::new(), "[{e}]");
        configure(db, &q, r#"{"key_rate_max": null, "key_rate_per_s": null}"#);
        assert_eq!(claim(db, &q, "w", 10), more[2..].to_vec(), "[{e}]");
    }
}

/// Eight workers claim (1 to 3 at a time) and ack on their own connections
/// until `jobs` jobs ran; returns each claim's (claim time, jobs' keys), the
/// claim time read back from its claim expiry, and the most jobs ever held
/// at once, queue-wide and per key, as the workers saw it (inside the span
/// in which the database counts them running, so never more than it does).
fn race(target: &Target, q: &str, jobs: usize, vt_ms: i64) -> (Vec<(i64, String)>, i64, i64) {
    let claims = Arc::new(Mutex::new(Vec::new()));
    let held = Arc::new(AtomicI64::new(0));
    let most = Arc::new(AtomicI64::new(0));
    let per_key: Arc<Mutex<(HashMap<String, i64>, i64)>> = Arc::default();
    let done = Arc::new(AtomicI64::new(0));
    let barrier = Arc::new(Barrier::new(8));
    let deadline = Instant::now() + Duration::from_secs(60);
    let workers: Vec<_> =
        (0..8)
            .map(|i| {
                let (t, q) = (target.clone(), q.to_owned());
                let (claims, held, most, per_key, done, barrier) = (
                    claims.clone(),
                    held.clone(),
                    most.clone(),
                    per_key.clone(),
                    done.clone(),
                    barrier.clone(),
                );
                std::thread::spawn(move || {
                    let mut db = t.connect();
                    let w = format!("w{i}");
                    barrier.wait();
                    while (done.load(Ordering::SeqCst) as usize) < jobs {
                        assert!(Instant::now() < deadline, "the race did not finish");
                        let got = db.ok("alk_claim", &[t_(&q), t_(&w), Arg::Int(1 + i % 3)]);
                        let got = got.as_array().unwrap().clone();
                        if got.is_empty() {
                            sleep_ms(2);
                            continue;
                        }
                        let n = got.len() as i64;
                        most.fetch_max(held.fetch_add(n, Ordering::SeqCst) + n, Ordering::SeqCst);
                        let mut keys = Vec::new();
                        for job in &got {
                            let doc =
                                db.ok("alk_get_job", &[Arg::Int(job["id"].as_i64().unwrap())]);
                            let key = doc["limit_key"].as_str().unwrap_or("").to_owned();
                            let mut pk = per_key.lock().unwrap();
                            let c = pk.0.entry(key.clone()).or_insert(0);
                            *c += 1;
                            let c = *c;
                            pk.1 = pk.1.max(c);
                            claims
                                .lock()
                                .unwrap()
                                .push((instant(&job["claim_expires_at"]) - vt_ms, key.clone()));
                            keys.push(key);
                        }
                        sleep_ms(3);
                        for (job, key) in got.iter().zip(keys) {
                            *per_key.lock().unwrap().0.get_mut(&key).unwrap() -= 1;
                            held.fetch_sub(1, Ordering::SeqCst);
                            assert!(
                                db.yes("alk_ack", &[Arg::Int(job["id"].as_i64().unwrap()), t_(&w)])
                            );
                            done.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
    for w in workers {
        w.join().unwrap();
    }
    let most_key = per_key.lock().unwrap().1;
    let claims = std::mem::take(&mut *claims.lock().unwrap());
    (claims, most.load(Ordering::SeqCst), most_key)
}

fn t_(s: &str) -> Arg {
    t(s)
}

/// The most claims of `key` (None: all) in any window of `per_ms` (less the
/// millisecond the reported times are rounded to).
fn most_in_window(claims: &[(i64, String)], key: Option<&str>, per_ms: i64) -> usize {
    let mut at: Vec<i64> = claims
        .iter()
        .filter(|(_, k)| key.is_none_or(|key| key == k))
        .map(|(t, _)| *t)
        .collect();
    at.sort();
    (0..at.len())
        .map(|i| {
            at[i..]
                .iter()
                .take_while(|t| **t < at[i] + per_ms - 1)
                .count()
        })
        .max()
        .unwrap_or(0)
}

per_engine! {
    fn eight_claimers_never_exceed_a_running_limit(_target) {
        let mut db = _target.connect();
        let e = db.engine();
        let q = fresh("lim-race-run");
        configure(&mut *db, &q, r#"{"max_running": 3, "key_max_running": 1}"#);
        for i in 0..60 {
            keyed(&mut *db, &q, &format!("k{}", i % 5));
        }
        let (claims, most, most_key) = race(_target, &q, 60, 60_000);
        assert_eq!(claims.len(), 60, "[{e}] every job ran once");
        assert!(most <= 3, "[{e}] {most} running at once");
        assert!(most_key <= 1, "[{e}] {most_key} of one key at once");
        assert!(most >= 2, "[{e}] the workers overlapped ({most}): the race tested nothing");
    }
}

per_engine! {
    fn eight_claimers_never_exceed_a_rate(_target) {
        let mut db = _target.connect();
        let e = db.engine();
        let q = fresh("lim-race-rate");
        configure(&mut *db, &q, r#"{"rate_max": 5, "rate_per_s": 0.5, "key_rate_max": 2, "key_rate_per_s": 0.5}"#);
        for i in 0..30 {
            keyed(&mut *db, &q, &format!("k{}", i % 3));
        }
        let (claims, _, _) = race(_target, &q, 30, 60_000);
        assert_eq!(claims.len(), 30, "[{e}] every job ran once");
        let most = most_in_window(&claims, None, 500);
        assert!(most <= 5, "[{e}] {most} claims in one window of the queue");
        assert_eq!(most, 5, "[{e}] the window filled: the race tested something");
        for k in ["k0", "k1", "k2"] {
            let most = most_in_window(&claims, Some(k), 500);
            assert!(most <= 2, "[{e}] {most} claims of {k} in one window");
        }
    }
}

/// A client of a PostgreSQL target.
fn pg_client(target: &Target) -> postgres::Client {
    postgres::Client::connect(target.pg_url(), postgres::NoTls).unwrap()
}

#[test]
fn postgres_a_finish_in_a_queue_with_a_running_limit_wakes_a_waiting_worker() {
    for target in pg_targets() {
        let name = target.name();
        let q = fresh("lim-wake");
        let mut producer = pg_client(&target);
        producer
            .execute(
                r#"SELECT alk_queue_configure($1, '{"max_running": 1}')"#,
                &[&q],
            )
            .unwrap();
        for _ in 0..2 {
            producer
                .execute("SELECT alk_enqueue($1, NULL, '1')", &[&q])
                .unwrap();
        }
        let row = producer
            .query_one("SELECT id FROM alk_claim($1, 'w1')", &[&q])
            .unwrap();
        let id: i64 = row.get(0);
        let mut worker = pg_client(&target);
        worker
            .query_one("SELECT alk_listen_queue($1, 30)", &[&q])
            .unwrap();
        assert!(worker
            .query("SELECT id FROM alk_claim($1, 'w2')", &[&q])
            .unwrap()
            .is_empty());
        let finishes: [(&str, &str); 4] = [
            ("ack", "SELECT alk_ack($1, 'w1')"),
            ("retry", "SELECT alk_retry($1, 'w1', 'x', 3600)"),
            ("fail", "SELECT alk_fail($1, 'w1', 'x')"),
            ("cancel", "SELECT alk_cancel($1)"),
        ];
        let mut held = id;
        for (what, sql) in finishes {
            producer.execute(sql, &[&held]).unwrap();
            assert_eq!(
                next_notification(&mut worker, &[&q], Duration::from_secs(5)),
                Some(("alkstore_jobs".into(), q.clone())),
                "[{name}] a waiting worker is woken by the {what}"
            );
            producer
                .execute("SELECT alk_enqueue($1, NULL, '1')", &[&q])
                .unwrap();
            while next_notification(&mut worker, &[&q], Duration::from_millis(100)).is_some() {}
            let row = producer
                .query_opt("SELECT id FROM alk_claim($1, 'w1')", &[&q])
                .unwrap()
                .unwrap_or_else(|| panic!("[{name}] a slot after the {what}"));
            held = row.get(0);
        }
        // alk_ack_batch too.
        producer
            .execute("SELECT alk_ack_batch(ARRAY[$1::bigint], 'w1')", &[&held])
            .unwrap();
        assert_eq!(
            next_notification(&mut worker, &[&q], Duration::from_secs(5)),
            Some(("alkstore_jobs".into(), q.clone())),
            "[{name}] a waiting worker is woken by a batch ack"
        );
    }
}

/// What one claim reads of the database: blocks of jobs and its indexes
/// fetched on PostgreSQL (in the claim's transaction); on SQLite, which
/// keeps the page a cursor is on, the virtual machine's instructions (in
/// thousands) of every statement the claim ran.
fn claim_reads(target: &Target, q: &str) -> (Vec<i64>, i64) {
    if target.is_postgres() {
        return pg_claim_blocks(&mut pg_client(target), q);
    }
    static STEPS: AtomicI64 = AtomicI64::new(0);
    extern "C" fn step(_: *mut std::ffi::c_void) -> std::ffi::c_int {
        STEPS.fetch_add(1, Ordering::Relaxed);
        0
    }
    let conn = rusqlite::Connection::open(target.sqlite_path()).unwrap();
    conn.busy_timeout(Duration::from_secs(30)).unwrap();
    alkstore_sqlite::register(&conn).unwrap();
    // The first call prepares the engine's statements: not counted.
    let _: String = conn
        .query_row("SELECT alk_queue_stats(?1)", [q], |r| r.get(0))
        .unwrap();
    STEPS.store(0, Ordering::Relaxed);
    // SAFETY: a valid open connection; the handler touches only a static.
    unsafe {
        rusqlite::ffi::sqlite3_progress_handler(
            conn.handle(),
            1000,
            Some(step),
            std::ptr::null_mut(),
        )
    };
    let out: String = conn
        .query_row("SELECT alk_claim(?1, 'w', 1)", [q], |r| r.get(0))
        .unwrap();
    // SAFETY: as above; removes the handler.
    unsafe {
        rusqlite::ffi::sqlite3_progress_handler(conn.handle(), 0, None, std::ptr::null_mut())
    };
    (
        ids(&serde_json::from_str(&out).unwrap()),
        STEPS.load(Ordering::Relaxed),
    )
}

#[test]
fn a_claim_does_not_read_a_full_keys_backlog_again() {
    for target in targets().into_iter().filter(|t| !t.is_bouncer()) {
        // A key at its running limit, then one at its rate.
        for limits in [
            r#"{"key_max_running": 1}"#,
            r#"{"key_rate_max": 1, "key_rate_per_s": 3600}"#,
        ] {
            let mut db = target.connect();
            let db = &mut *db;
            let e = db.engine();
            let q = fresh("lim-park-cost");
            configure(db, &q, limits);
            let held = keyed(db, &q, "busy");
            assert_eq!(claim(db, &q, "w", 1), [held], "[{e}]");
            let burst: String = format!("[{}]", vec!["1"; 2000].join(","));
            db.ok(
                "alk_enqueue_batch",
                &[t(&q), j(r#"{"limit_key": "busy"}"#), j(&burst)],
            );
            let others: Vec<i64> = (0..3).map(|i| keyed(db, &q, &format!("k{i}"))).collect();
            // The first claim after the burst reads past it; the next do not.
            let (got, first) = claim_reads(&target, &q);
            assert_eq!(got, [others[0]], "[{e}] {limits}");
            let (got, next) = claim_reads(&target, &q);
            assert_eq!(got, [others[1]], "[{e}] {limits}");
            eprintln!(
                "[{e}] {limits}: what the first claim after 2,000 jobs of a full key read: {first}, the next: {next}"
            );
            assert!(
                next * 5 < first,
                "[{e}] {limits}: the next claim read {next}, the first {first}"
            );
            if limits.contains("key_max_running") {
                // And once the key frees, its next job comes first in claim order.
                assert!(ack(db, held, "w"), "[{e}]");
                let (got, _) = claim_reads(&target, &q);
                assert_eq!(got.len(), 1, "[{e}]");
                assert_ne!(
                    got,
                    [others[2]],
                    "[{e}] the busy key's next job comes first"
                );
            }
        }
    }
}
