//! Contract v1.1 §E and v1.2 §K (streams): event ids, offsets that stay
//! dense and commit-ordered while no publisher waits for another and no
//! reader waits for anyone, `alk_sequence`, retention, and
//! `alk_stream_info` — one body per rule on SQLite, the extension, the plain
//! install and PgBouncer; the races on real concurrent connections.
//!
//! On PostgreSQL a read only reads: offsets are given by a sequencer. The
//! test databases other than the worker's have no background worker, so
//! the helper `read` plays the facade's reader: it calls `alk_sequence` on
//! a connection of its own (kept per thread), then reads on the caller's.

use alkstore_tests::*;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Held by the tests that sequence every stream (`alk_prune`, `alk_streams`)
/// and by the one that checks who may sequence: tests run in parallel, and
/// a global sequencing in another test would give its events offsets.
static SEQUENCES_ALL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SEQUENCES_ALL.lock().unwrap_or_else(|e| e.into_inner())
}

fn publish(db: &mut dyn Db, s: &str, payload: &str) -> i64 {
    db.int("alk_publish", &[t(s), j(payload), Arg::Null])
}

thread_local! {
    /// Each thread's sequencer connection per PostgreSQL target.
    static SEQUENCERS: std::cell::RefCell<std::collections::HashMap<String, Box<dyn Db>>> =
        Default::default();
}

/// Gives the stream's committed events their offsets as a sequencer does:
/// `alk_sequence(s)` on a connection of its own, outside any transaction
/// (nothing on SQLite, which gives offsets at publish; nothing for a
/// target not in `targets()`).
fn sequence(engine: &str, s: &str) -> i64 {
    if engine == "sqlite" {
        return 0;
    }
    SEQUENCERS.with(|map| {
        let mut map = map.borrow_mut();
        if !map.contains_key(engine) {
            let Some(target) = targets().into_iter().find(|t| t.name() == engine) else {
                return 0;
            };
            map.insert(engine.to_string(), target.connect());
        }
        let db = map.get_mut(engine).unwrap();
        db.int("alk_sequence", &[t(s)])
    })
}

/// (offset, id) of each event after `after`, once a sequencer has run.
fn read(db: &mut dyn Db, s: &str, after: i64, max: i64) -> Vec<(i64, i64)> {
    sequence(&db.engine(), s);
    read_only(db, s, after, max)
}

/// (offset, id) of each event after `after` that has an offset now.
fn read_only(db: &mut dyn Db, s: &str, after: i64, max: i64) -> Vec<(i64, i64)> {
    db.ok("alk_read", &[t(s), Arg::Int(after), Arg::Int(max)])
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["offset"].as_i64().unwrap(), e["id"].as_i64().unwrap()))
        .collect()
}

/// Every event of the stream, page by page.
fn read_all(db: &mut dyn Db, s: &str) -> Vec<(i64, i64)> {
    let mut all: Vec<(i64, i64)> = Vec::new();
    loop {
        let page = read(db, s, all.last().map_or(0, |r| r.0), 1000);
        if page.is_empty() {
            return all;
        }
        all.extend(page);
    }
}

fn offsets(db: &mut dyn Db, s: &str) -> Vec<i64> {
    read(db, s, 0, 1000).into_iter().map(|(o, _)| o).collect()
}

fn span(db: &mut dyn Db, s: &str) -> (i64, i64) {
    sequence(&db.engine(), s);
    let info = db.ok("alk_stream_info", &[t(s)]);
    (
        info["first_offset"].as_i64().unwrap(),
        info["last_offset"].as_i64().unwrap(),
    )
}

/// Prunes everything due, once the stream's committed events have offsets
/// (a prune gives none: it counts from when an event became readable).
fn prune_all(db: &mut dyn Db, s: &str) {
    sequence(&db.engine(), s);
    while db.int("alk_prune", &[Arg::Int(1000)]) > 0 {}
}

#[test]
fn an_event_is_visible_to_others_once_its_publisher_commits() {
    let _serial = serial();
    for target in targets() {
        let e = target.name();
        let s = fresh("visible");
        let (mut a, mut b) = (target.connect(), target.connect());
        // Both see the schema first (SQLite creates it on first use).
        a.ok("alk_version", &[]);
        b.ok("alk_version", &[]);
        a.begin();
        let id = publish(&mut *a, &s, r#"{"n": 1}"#);
        // SQLite's one writer gives the offset at publish; on PostgreSQL a
        // sequencer gives offsets to committed events only.
        let own = if target.is_postgres() {
            vec![]
        } else {
            vec![(1, id)]
        };
        assert_eq!(
            read(&mut *a, &s, 0, 10),
            own,
            "[{e}] the publisher reads its own event on SQLite only"
        );
        assert_eq!(read(&mut *b, &s, 0, 10), [], "[{e}] not before commit");
        assert_eq!(span(&mut *b, &s), (0, 0), "[{e}]");
        a.commit();
        assert_eq!(
            read(&mut *b, &s, 0, 10),
            [(1, id)],
            "[{e}] at once after it"
        );
        assert_eq!(span(&mut *b, &s), (1, 1), "[{e}]");
        let listed = b.ok("alk_streams", &[]);
        let row = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["stream"] == s.as_str())
            .cloned();
        assert_eq!(
            row.map(|r| (r["first_offset"].clone(), r["last_offset"].clone())),
            Some((json!(1), json!(1))),
            "[{e}]"
        );
    }
}

per_engine! {
    fn stream_options_are_checked_merged_and_reset_with_null(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let s = fresh("opts");
        for (opts, why) in [
            (r#"{"retain_s": 0}"#, "retain_s must be > 0"),
            (r#"{"retain_s": -1}"#, "negative"),
            (r#"{"retain_s": "1"}"#, "a string"),
            (r#"{"retain_events": 0}"#, "retain_events must be >= 1"),
            (r#"{"retain_events": 1.5}"#, "not whole"),
            (r#"{"retain": 1}"#, "unknown key"),
            (r#"[1]"#, "not an object"),
        ] {
            assert_eq!(
                db.code("alk_stream_configure", &[t(&s), j(opts)]),
                "ALK03",
                "[{e}] {why}"
            );
        }
        assert_eq!(db.code("alk_stream_configure", &[t(""), j("{}")]), "ALK01");
        assert_eq!(
            db.code("alk_stream_info", &[t("__alkstore_x")]),
            "ALK02",
            "[{e}]"
        );
        let info = db.ok("alk_stream_info", &[t(&s)]);
        assert_eq!(
            (info["retain_s"].clone(), info["retain_events"].clone()),
            (Value::Null, Value::Null),
            "[{e}] bad options wrote nothing"
        );
        let c = |db: &mut dyn Db, opts: &str| db.ok("alk_stream_configure", &[t(&s), j(opts)]);
        assert_eq!(
            c(db, r#"{"retain_events": 3}"#),
            json!({"retain_s": null, "retain_events": 3}),
            "[{e}]"
        );
        assert_eq!(
            c(db, r#"{"retain_s": 1.5}"#),
            json!({"retain_s": 1.5, "retain_events": 3}),
            "[{e}] merged over the stored options"
        );
        assert_eq!(
            c(db, r#"{"retain_events": null}"#),
            json!({"retain_s": 1.5, "retain_events": null}),
            "[{e}] null keeps everything again"
        );
        assert_eq!(
            c(db, "{}"),
            json!({"retain_s": 1.5, "retain_events": null}),
            "[{e}]"
        );
        let info = db.ok("alk_stream_info", &[t(&s)]);
        assert_eq!(
            info,
            json!({"stream": s, "first_offset": 0, "last_offset": 0,
                   "retain_s": 1.5, "retain_events": null}),
            "[{e}]"
        );
    }
}

#[test]
fn retention_prunes_a_prefix_and_offsets_go_on_from_the_last() {
    let _serial = serial();
    each(|db, _| {
        let e = db.engine();
        // By count: the newest three stay.
        let s = fresh("by-count");
        db.ok(
            "alk_stream_configure",
            &[t(&s), j(r#"{"retain_events": 3}"#)],
        );
        for n in 1..=5 {
            publish(db, &s, &n.to_string());
        }
        assert_eq!(span(db, &s), (1, 5), "[{e}] nothing goes before a prune");
        prune_all(db, &s);
        assert_eq!(offsets(db, &s), [3, 4, 5], "[{e}]");
        assert_eq!(
            read(db, &s, 1, 10).first().map(|r| r.0),
            Some(3),
            "[{e}] a read after the pruned range starts at the first kept event"
        );
        assert_eq!(span(db, &s), (3, 5), "[{e}]");

        // By age: only what has been readable longer than retain_s goes,
        // oldest first. (A read or prune is when the engine sees an event
        // readable: PostgreSQL gives it its offset, SQLite stamps it.)
        let s = fresh("by-age");
        db.ok("alk_stream_configure", &[t(&s), j(r#"{"retain_s": 0.3}"#)]);
        let old = [publish(db, &s, "1"), publish(db, &s, "2")];
        prune_all(db, &s);
        sleep_ms(450);
        publish(db, &s, "3");
        prune_all(db, &s);
        assert_eq!(offsets(db, &s), [3], "[{e}]");

        // Everything gone: 0 and 0; the next event takes the next offset and
        // a new id, never an old one.
        sleep_ms(450);
        prune_all(db, &s);
        assert_eq!(span(db, &s), (0, 0), "[{e}]");
        assert_eq!(offsets(db, &s), Vec::<i64>::new(), "[{e}]");
        let new = publish(db, &s, "4");
        assert!(old.iter().all(|&id| id < new), "[{e}] {old:?} then {new}");
        assert_eq!(read(db, &s, 0, 10), [(4, new)], "[{e}]");

        // A stream without retention keeps everything.
        let keep = fresh("keep");
        publish(db, &keep, "1");
        prune_all(db, &s);
        assert_eq!(offsets(db, &keep), [1], "[{e}]");

        // max_rows bounds one call.
        let s = fresh("bounded");
        db.ok(
            "alk_stream_configure",
            &[t(&s), j(r#"{"retain_events": 1}"#)],
        );
        for n in 1..=6 {
            publish(db, &s, &n.to_string());
        }
        assert!(db.int("alk_prune", &[Arg::Int(2)]) <= 2, "[{e}]");
        prune_all(db, &s);
        assert_eq!(offsets(db, &s), [6], "[{e}]");
    });
}

/// Issue 34 item 9: retain_s counts from when an event became readable,
/// not from its publish. A transaction that publishes, works longer than
/// retain_s and commits: its event survives the prunes right after the
/// commit, is read, and goes once it has been readable for retain_s.
#[test]
fn retention_counts_from_when_an_event_became_readable() {
    let _serial = serial();
    for target in targets() {
        let e = target.name();
        let s = fresh("late-commit");
        let (mut a, mut b) = (target.connect(), target.connect());
        b.ok("alk_stream_configure", &[t(&s), j(r#"{"retain_s": 1}"#)]);
        a.begin();
        let id = publish(&mut *a, &s, r#"{"late": true}"#);
        sleep_ms(1500);
        a.commit();
        prune_all(&mut *b, &s);
        prune_all(&mut *b, &s);
        assert_eq!(
            read(&mut *b, &s, 0, 10),
            [(1, id)],
            "[{e}] pruned at once after a late commit"
        );
        sleep_ms(1200);
        prune_all(&mut *b, &s);
        assert_eq!(
            read(&mut *b, &s, 0, 10),
            [],
            "[{e}] kept past its retention"
        );
        // A transaction that reads back before it commits (SQLite: its own
        // event too): counted from the commit too.
        let s = fresh("own-read");
        b.ok("alk_stream_configure", &[t(&s), j(r#"{"retain_s": 1}"#)]);
        a.begin();
        let id = publish(&mut *a, &s, "1");
        let own = if target.is_postgres() {
            vec![]
        } else {
            vec![(1, id)]
        };
        assert_eq!(read(&mut *a, &s, 0, 10), own, "[{e}]");
        sleep_ms(1500);
        a.commit();
        prune_all(&mut *b, &s);
        assert_eq!(read(&mut *b, &s, 0, 10), [(1, id)], "[{e}] own read");
    }
}

per_engine! {
    /// Eight publishers on one stream, one of them holding its transaction open
    /// for two seconds (PostgreSQL: SQLite's one writer makes everyone wait
    /// there by design), while three readers (two on SQLite) read as fast as
    /// they can, in read committed, repeatable read and serializable
    /// transactions, and (PostgreSQL) a fourth holds one REPEATABLE READ
    /// transaction for 2.5 s. The others keep publishing; no reader ever sees
    /// an offset appear behind one it read, nor a gap; every event is read
    /// once, in order; the long publisher's event is readable at once after
    /// it commits.
    fn publishers_never_wait_for_a_long_publisher_and_readers_see_no_gap(target) {
        let e = target.name();
        let s = fresh("race");
        let long = target.is_postgres();
        let holding = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let published = Arc::new(Mutex::new(Vec::<i64>::new()));
        let during_hold = Arc::new(AtomicUsize::new(0));
        let long_started = Arc::new(AtomicBool::new(!long));
        let mut threads = Vec::new();
        for p in 0..(if long { 7 } else { 8 }) {
            let (target, s, stop) = (target.clone(), s.clone(), stop.clone());
            let (published, holding, during_hold, long_started) = (
                published.clone(),
                holding.clone(),
                during_hold.clone(),
                long_started.clone(),
            );
            threads.push(std::thread::spawn(move || {
                let mut db = target.connect();
                let mut n = 0;
                let deadline = Instant::now() + Duration::from_secs(30);
                while !stop.load(Ordering::SeqCst) || !long_started.load(Ordering::SeqCst) {
                    assert!(Instant::now() < deadline, "publisher {p}: still publishing after 30 s (the long publisher never ended)");
                    let in_hold = holding.load(Ordering::SeqCst);
                    // Two per transaction: they keep their order.
                    db.begin();
                    let a = publish(&mut *db, &s, &format!("[{p}, {n}]"));
                    let b = publish(&mut *db, &s, &format!("[{p}, {}]", n + 1));
                    db.commit();
                    assert!(a < b);
                    n += 2;
                    if in_hold && holding.load(Ordering::SeqCst) {
                        during_hold.fetch_add(2, Ordering::SeqCst);
                    }
                    published.lock().unwrap().extend([a, b]);
                }
            }));
        }
        let long_id = Arc::new(Mutex::new(None));
        if long {
            let (target, s, holding, stop) =
                (target.clone(), s.clone(), holding.clone(), stop.clone());
            let e = e.clone();
            let (long_id, published, long_started) =
                (long_id.clone(), published.clone(), long_started.clone());
            threads.push(std::thread::spawn(move || {
                let mut db = target.connect();
                sleep_ms(300);
                db.begin();
                let id = publish(&mut *db, &s, r#""long""#);
                long_started.store(true, Ordering::SeqCst);
                holding.store(true, Ordering::SeqCst);
                sleep_ms(2000);
                holding.store(false, Ordering::SeqCst);
                db.commit();
                *long_id.lock().unwrap() = Some(id);
                published.lock().unwrap().push(id);
                // Readable at once: reading forward right after the commit
                // reaches it before any empty page. Not read to the end: the
                // others still publish, and a reader slower than seven
                // publishers would never see an empty page.
                let mut other = target.connect();
                let (mut after, deadline) = (0, Instant::now() + Duration::from_secs(20));
                loop {
                    let page = read(&mut *other, &s, after, 1000);
                    if page.iter().any(|r| r.1 == id) {
                        break;
                    }
                    assert!(
                        !page.is_empty() && Instant::now() < deadline,
                        "[{e}] the long event is readable right after its commit"
                    );
                    after = page.last().unwrap().0;
                }
                sleep_ms(300);
                stop.store(true, Ordering::SeqCst);
            }));
        } else {
            let stop = stop.clone();
            threads.push(std::thread::spawn(move || {
                sleep_ms(1500);
                stop.store(true, Ordering::SeqCst);
            }));
        }
        if long {
            // A consumer that holds one REPEATABLE READ transaction open for
            // two seconds while the others publish, sequence and read (v1.2
            // §K): it reads the same snapshot each time, and nobody waits
            // for it (the long event above is readable right after its
            // commit, which falls inside this hold).
            let (target, s, e) = (target.clone(), s.clone(), e.clone());
            threads.push(std::thread::spawn(move || {
                let mut db = target.connect();
                sleep_ms(200);
                db.exec("BEGIN ISOLATION LEVEL REPEATABLE READ");
                let first = read(&mut *db, &s, 0, 1000);
                let until = Instant::now() + Duration::from_millis(2500);
                while Instant::now() < until {
                    assert_eq!(
                        read(&mut *db, &s, 0, 1000),
                        first,
                        "[{e}] a held REPEATABLE READ snapshot"
                    );
                    sleep_ms(100);
                }
                db.commit();
            }));
        }
        // Set once every publisher has returned: readers then read to the end.
        let done = Arc::new(AtomicBool::new(false));
        let mut readers = Vec::new();
        // PostgreSQL: the second reader reads each page in a REPEATABLE READ
        // transaction, the third in a SERIALIZABLE one.
        let levels: &[Option<&str>] = if long {
            &[None, Some("REPEATABLE READ"), Some("SERIALIZABLE")]
        } else {
            &[None, None]
        };
        for (r, level) in levels.iter().copied().enumerate() {
            let (target, s, stop) = (target.clone(), s.clone(), done.clone());
            readers.push(std::thread::spawn(move || {
                let mut db = target.connect();
                let mut seen: Vec<(i64, i64)> = Vec::new();
                let mut after = 0;
                loop {
                    let finished = stop.load(Ordering::SeqCst);
                    if let Some(level) = level {
                        db.exec(&format!("BEGIN ISOLATION LEVEL {level}"));
                    }
                    let page = read(&mut *db, &s, after, 100);
                    if level.is_some() {
                        db.exec("COMMIT");
                    }
                    for (k, &(offset, _)) in page.iter().enumerate() {
                        assert_eq!(
                            offset,
                            after + 1 + k as i64,
                            "reader {r}: a gap, or an offset behind {after}"
                        );
                    }
                    if let Some(last) = page.last() {
                        after = last.0;
                    }
                    // Re-reading from the start of what was read finds the same events.
                    if !page.is_empty() && r == 0 {
                        let again = read(&mut *db, &s, page[0].0 - 1, page.len() as i64);
                        assert_eq!(again, page, "reader {r}: events changed under it");
                    }
                    // An older snapshot may miss an assignment another
                    // reader just made: end on an empty read-committed read.
                    if page.is_empty()
                        && finished
                        && (level.is_none() || read(&mut *db, &s, after, 1).is_empty())
                    {
                        break;
                    }
                    seen.extend(page);
                }
                seen
            }));
        }
        for th in threads {
            th.join().unwrap();
        }
        done.store(true, Ordering::SeqCst);
        let published: HashSet<i64> = published.lock().unwrap().iter().copied().collect();
        for reader in readers {
            let seen = reader.join().unwrap();
            // Each page was checked to follow the last; here: all of them.
            assert_eq!(seen.len(), published.len(), "[{e}] every event read once");
            assert!(
                seen.iter().enumerate().all(|(k, r)| r.0 == k as i64 + 1),
                "[{e}] offsets 1..={} in order",
                seen.len()
            );
            let ids: HashSet<i64> = seen.iter().map(|r| r.1).collect();
            assert!(ids == published, "[{e}] the ids read are the ids published");
        }
        if long {
            let hold = during_hold.load(Ordering::SeqCst);
            assert!(
                hold >= 20,
                "[{e}] the others published only {hold} events while one transaction was open"
            );
            // The long event's offset is after events that committed while
            // it was open, although its id is older: offsets follow commits.
            let id = long_id.lock().unwrap().unwrap();
            let mut db = target.connect();
            let all = read_all(&mut *db, &s);
            let mine = all.iter().find(|r| r.1 == id).unwrap().0;
            assert!(
                all.iter().any(|&(o, i)| o < mine && i > id),
                "[{e}] an event published after the long one and committed before it comes first"
            );
        }
    }
}

/// Contract v1.2 §K: a reader in a READ ONLY, REPEATABLE READ or
/// SERIALIZABLE transaction reads what a sequencer gave offsets, and a
/// sequencer never waits for an open reader (before, the first reader gave
/// offsets under a lock held until its transaction ended). `alk_sequence`
/// in a transaction block fails with InvalidArgument and changes nothing.
#[test]
fn postgres_readers_of_every_kind_read_what_a_sequencer_gave_and_hold_up_nobody() {
    for target in pg_targets() {
        let e = target.name();
        let s = fresh("iso");
        let mut a = target.connect();
        let mut r = target.connect();
        publish(&mut *a, &s, "1");
        let mut sequenced = 0;
        for level in [
            "READ ONLY",
            "ISOLATION LEVEL REPEATABLE READ",
            "ISOLATION LEVEL SERIALIZABLE",
        ] {
            r.exec(&format!("BEGIN TRANSACTION {level}"));
            let before = read_only(&mut *r, &s, 0, 10);
            assert_eq!(
                before.len(),
                sequenced,
                "[{e}] {level}: the new event has no offset yet"
            );
            // The reader's transaction stays open: the sequencer does not
            // wait for it.
            assert_eq!(sequence(&e, &s), 1, "[{e}] {level}");
            sequenced += 1;
            let after = read_only(&mut *r, &s, 0, 10);
            if level == "READ ONLY" {
                // Read committed: each statement sees what committed.
                assert_eq!(after.len(), sequenced, "[{e}] {level}");
            } else {
                assert_eq!(after, before, "[{e}] {level}: what its snapshot shows");
            }
            r.exec("COMMIT");
            assert_eq!(
                read_only(&mut *r, &s, 0, 10).len(),
                sequenced,
                "[{e}] {level}"
            );
            publish(&mut *a, &s, "2");
        }
        // Dense, in commit order, the same for every reader.
        let all = read(&mut *a, &s, 0, 10);
        assert_eq!(
            all.iter().map(|r| r.0).collect::<Vec<_>>(),
            [1, 2, 3, 4],
            "[{e}]"
        );
        assert_eq!(read_only(&mut *r, &s, 0, 10), all, "[{e}]");
        // Refused in a transaction block: one that wrote (every install
        // sees it), and one that did not, empty or after a savepoint (the
        // extension sees it; the plain install's first COMMIT refuses it,
        // which the clients report as the same ALK05).
        r.begin();
        publish(&mut *r, &s, "5");
        assert_eq!(r.code("alk_sequence", &[t(&s)]), "ALK05", "[{e}]");
        r.rollback();
        r.begin();
        assert_eq!(r.code("alk_sequence", &[Arg::Null]), "ALK05", "[{e}]");
        r.rollback();
        r.begin();
        r.exec("SAVEPOINT s");
        assert_eq!(r.code("alk_sequence", &[t(&s)]), "ALK05", "[{e}]");
        r.rollback();
        assert_eq!(read(&mut *r, &s, 0, 10), all, "[{e}] nothing changed");
        // Its argument is checked like every stream name.
        assert_eq!(r.code("alk_sequence", &[t("")]), "ALK01", "[{e}]");
    }
}

/// The check for new events keeps the snapshot of the stream's last
/// assignment, which lists transaction ids. One restored from another
/// cluster (pg_dump and restore keep `alkstore.streams`) lists that
/// cluster's transactions and is not used: events published here are read.
#[test]
fn postgres_a_sequencing_snapshot_from_another_cluster_is_not_used() {
    let _serial = serial();
    for target in pg_targets() {
        let e = target.name();
        let s = fresh("restored");
        let mut a = target.connect();
        let first = publish(&mut *a, &s, "1");
        assert_eq!(read(&mut *a, &s, 0, 10), [(1, first)], "[{e}]");
        // As a restore from a busier cluster leaves it: kept by another
        // server, and ahead of every transaction of this one.
        a.exec(&format!(
            "UPDATE alkstore.streams SET seq_started = seq_started - interval '1 day', \
             seq_xmax = (pg_current_xact_id()::text::numeric + 1000000)::text::xid8, \
             seq_xip = '{{}}' WHERE stream = '{s}'"
        ));
        let second = publish(&mut *a, &s, "2");
        assert_eq!(
            read(&mut *a, &s, 0, 10),
            [(1, first), (2, second)],
            "[{e}] an event published after the restore"
        );
    }
}

/// The check for new events looks only at transactions the last
/// assignment did not see committed. Step by step: an event of a
/// transaction open during an assignment (with its id taken before it, or
/// after, or inside a savepoint) is found and read once that transaction
/// commits, after the events that committed first.
#[test]
fn postgres_events_of_transactions_open_during_an_assignment_are_read_after_they_commit() {
    for target in pg_targets() {
        let e = target.name();
        let s = fresh("open");
        let (mut a, mut b, mut c) = (target.connect(), target.connect(), target.connect());
        let first = publish(&mut *c, &s, "0");
        assert_eq!(read(&mut *c, &s, 0, 10), [(1, first)], "[{e}]");
        // a publishes and stays open: running at the next assignment.
        a.begin();
        let early = publish(&mut *a, &s, "1");
        // b has a transaction but publishes only after the assignment.
        b.begin();
        assert!(b.query_i64("SELECT pg_current_xact_id()::text::bigint") > 0);
        let mid = publish(&mut *c, &s, "2");
        assert_eq!(read(&mut *c, &s, 0, 10), [(1, first), (2, mid)], "[{e}]");
        b.exec("SAVEPOINT p");
        let late = publish(&mut *b, &s, "3");
        b.exec("RELEASE SAVEPOINT p");
        b.commit();
        assert_eq!(
            read(&mut *c, &s, 0, 10),
            [(1, first), (2, mid), (3, late)],
            "[{e}] the event published after the assignment"
        );
        a.commit();
        assert_eq!(
            read(&mut *c, &s, 0, 10),
            [(1, first), (2, mid), (3, late), (4, early)],
            "[{e}] the event of the transaction the assignment saw running"
        );
        // A new session without a transaction id at the assignment.
        let mut d = target.connect();
        d.begin();
        assert_eq!(d.query_i64("SELECT 1::bigint"), 1);
        let next = publish(&mut *c, &s, "4");
        assert_eq!(read(&mut *c, &s, 4, 10), [(5, next)], "[{e}]");
        let last = publish(&mut *d, &s, "5");
        d.commit();
        assert_eq!(read(&mut *c, &s, 4, 10), [(5, next), (6, last)], "[{e}]");
    }
}

/// Contract v1.2 §L: commit order is strict, even when no sequencer ran
/// between two commits. A transaction that published first (the lower
/// transaction id) and committed last gets the higher offsets, its events
/// in the order it published them, also when it published to another
/// stream in between; and so does one whose deferred triggers ran before
/// its COMMIT (`SET CONSTRAINTS ALL IMMEDIATE`) and that published again;
/// one that skipped its ticket goes last.
#[test]
fn postgres_offsets_follow_commit_order_when_no_sequencer_ran_between_the_commits() {
    for target in pg_targets() {
        let e = target.name();
        let (s, elsewhere) = (fresh("order"), fresh("order-other"));
        let (mut a, mut b, mut c) = (target.connect(), target.connect(), target.connect());
        a.begin();
        let early = publish(&mut *a, &s, "1");
        publish(&mut *a, &elsewhere, "7");
        let early_again = publish(&mut *a, &s, "2");
        b.begin();
        let late = publish(&mut *b, &s, "3");
        b.commit();
        a.commit();
        assert_eq!(
            read(&mut *c, &s, 0, 10),
            [(1, late), (2, early), (3, early_again)],
            "[{e}] the transaction that committed first comes first"
        );
        a.begin();
        let checked = publish(&mut *a, &s, "4");
        a.exec("SET CONSTRAINTS ALL IMMEDIATE");
        b.begin();
        let between = publish(&mut *b, &s, "5");
        b.commit();
        let after_check = publish(&mut *a, &s, "6");
        a.commit();
        assert_eq!(
            read(&mut *c, &s, 3, 10),
            [(4, between), (5, checked), (6, after_check)],
            "[{e}] a transaction that checked its constraints early and published again"
        );
        // A publisher that forges the setting alk_publish keeps, to skip its
        // ticket, goes after one that committed later: it can only delay
        // itself.
        a.begin();
        let txid = a.query_i64("SELECT pg_current_xact_id()::text::bigint");
        a.exec(&format!(
            "SELECT set_config('alkstore.published_to', '{txid}:{s}', true)"
        ));
        let forged = publish(&mut *a, &s, "7");
        a.commit();
        let honest = publish(&mut *b, &s, "8");
        assert_eq!(
            read(&mut *c, &s, 6, 10),
            [(7, honest), (8, forged)],
            "[{e}] a transaction without a ticket"
        );
    }
}

per_engine! {
    /// One transaction publishes, reads (SQLite: its own event too;
    /// PostgreSQL: what a sequencer gave offsets) and publishes again: after
    /// it commits, both events are read, in order, on every engine.
    fn a_transaction_that_reads_its_stream_and_publishes_again_loses_nothing(target) {
        let e = target.name();
        let s = fresh("again");
        let mut a = target.connect();
        let mut other = target.connect();
        let zero = publish(&mut *other, &s, "0");
        a.begin();
        let first = publish(&mut *a, &s, "1");
        if target.is_postgres() {
            // Another transaction completes in between, as on a busy server
            // (SQLite's one writer: a is it until it commits).
            publish(&mut *other, &fresh("busy"), "0");
        }
        let seen = if target.is_postgres() {
            vec![(1, zero)]
        } else {
            vec![(1, zero), (2, first)]
        };
        assert_eq!(read(&mut *a, &s, 0, 10), seen, "[{e}]");
        let second = publish(&mut *a, &s, "2");
        a.commit();
        assert_eq!(
            read(&mut *other, &s, 0, 10),
            [(1, zero), (2, first), (3, second)],
            "[{e}] the event published after the read"
        );
    }
}

/// A hot standby (streaming replication, `scripts/postgres.sh standby`):
/// a read there never fails and alk_sequence gives nothing; once a
/// sequencer on the primary gave offsets, the standby reads the same events
/// with the same offsets and ids (contract v1.2 §K, docs/decisions.md).
#[test]
fn postgres_a_hot_standby_reads_the_offsets_the_primary_gave() {
    let (Ok(primary), Ok(standby)) = (
        std::env::var("ALKSTORE_PG_URL"),
        std::env::var("ALKSTORE_PG_STANDBY_URL"),
    ) else {
        assert!(!pg_required(), "ALKSTORE_PG_STANDBY_URL is not set");
        return;
    };
    let mut p = Target::postgres(primary, "primary").connect();
    let mut r = Target::postgres(standby.clone(), "standby").connect();
    assert_eq!(r.query_i64("SELECT pg_is_in_recovery()::int::bigint"), 1);
    let replayed = |p: &mut dyn Db, r: &mut dyn Db| {
        let lsn = p.query_i64("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint");
        let deadline = Instant::now() + Duration::from_secs(60);
        while r.query_i64("SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint") < lsn {
            if Instant::now() > deadline {
                panic!(
                    "the standby did not catch up to {lsn} in 60 s: {}",
                    standby_state(&standby)
                );
            }
            sleep_ms(10);
        }
    };
    let s = fresh("standby");
    let first = publish(&mut *p, &s, "1");
    assert_eq!(p.int("alk_sequence", &[t(&s)]), 1);
    assert_eq!(read(&mut *p, &s, 0, 10), [(1, first)]);
    let second = publish(&mut *p, &s, "2");
    replayed(&mut *p, &mut *r);
    // The second event has no offset unless another test's alk_sequence(NULL)
    // on the primary gave it one meanwhile. Read and info in one snapshot,
    // so they agree.
    r.exec("BEGIN ISOLATION LEVEL REPEATABLE READ");
    let seen = read(&mut *r, &s, 0, 10);
    let info = r.ok("alk_stream_info", &[t(&s)]);
    r.commit();
    assert!(
        seen == [(1, first)] || seen == [(1, first), (2, second)],
        "what has offsets: {seen:?}"
    );
    assert_eq!(info["last_offset"], seen.len(), "{info}");
    // On a standby nothing can be written: alk_sequence gives nothing there.
    assert_eq!(r.int("alk_sequence", &[t(&s)]), 0);
    // Bad input gets its code before anything asks for a transaction id.
    assert_eq!(r.code("alk_publish", &[t(""), j("1")]), "ALK01");
    assert_eq!(r.code("alk_publish", &[t(&s), Arg::Null]), "ALK04");
    p.int("alk_sequence", &[t(&s)]);
    assert_eq!(read(&mut *p, &s, 0, 10), [(1, first), (2, second)]);
    replayed(&mut *p, &mut *r);
    assert_eq!(
        read(&mut *r, &s, 0, 10),
        [(1, first), (2, second)],
        "the primary's offsets"
    );
}

per_engine! {
    fn stream_offsets_are_dense_and_saved_offsets_only_advance(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let (s, other) = (fresh("stream"), fresh("stream-b"));
        // alk_publish returns the event's id (v1.1 §E); offsets come later.
        let first = db.int("alk_publish", &[t(&s), j(r#"{"n": 1}"#)]);
        let elsewhere = db.int("alk_publish", &[t(&other), j("1")]);
        assert_ne!(first, elsewhere, "[{}] ids are unique", db.engine());
        db.begin();
        db.int("alk_publish", &[t(&s), j("2")]);
        db.rollback();
        let second = db.int("alk_publish", &[t(&s), j("2"), t("key-2")]);
        let third = db.int("alk_publish", &[t(&s), j("3"), Arg::Null]);
        assert!(first < second && second < third, "[{}]", db.engine());
        // A sequencer gives offsets (v1.2 §K; SQLite gave them at publish).
        db.int("alk_sequence", &[t(&other)]);
        db.int("alk_sequence", &[t(&s)]);
        assert_eq!(
            db.ok("alk_read", &[t(&other), Arg::Int(0), Arg::Int(10)])[0]["offset"],
            1
        );
        let events = db.ok("alk_read", &[t(&s), Arg::Int(0), Arg::Int(100)]);
        let offsets: Vec<i64> = events
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["offset"].as_i64().unwrap())
            .collect();
        assert_eq!(
            offsets,
            vec![1, 2, 3],
            "[{}] no gap after rollback",
            db.engine()
        );
        let event_ids: Vec<i64> = events
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["id"].as_i64().unwrap())
            .collect();
        assert_eq!(event_ids, vec![first, second, third]);
        assert_eq!(
            (
                events[0]["payload"].clone(),
                events[0]["key"].clone(),
                events[1]["key"].clone()
            ),
            (json!({"n": 1}), Value::Null, json!("key-2"))
        );
        instant(&events[0]["created_at"]);
        assert_eq!(
            db.ok("alk_read", &[t(&s), Arg::Int(1), Arg::Int(1)])[0]["offset"],
            2
        );
        assert_eq!(db.int("alk_get_offset", &[t(&s), t("c")]), 0);
        assert!(db.yes("alk_save_offset", &[t(&s), t("c"), Arg::Int(5)]));
        assert!(!db.yes("alk_save_offset", &[t(&s), t("c"), Arg::Int(3)]));
        assert!(!db.yes("alk_save_offset", &[t(&s), t("c"), Arg::Int(5)]));
        assert_eq!(db.int("alk_get_offset", &[t(&s), t("c")]), 5);
        assert!(!db.yes("alk_save_offset", &[t(&s), t("fresh"), Arg::Int(0)]));
    }
}

/// What a standby that does not catch up is doing, for the failure message:
/// its receiver, what it received and replayed, and what its recovery waits
/// on.
fn standby_state(url: &str) -> String {
    let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
    let row = c
        .query_one(
            "SELECT concat_ws(', ',
                        'receiver ' || coalesce((SELECT status || ' from ' || coalesce(sender_host, '?')
                                                   FROM pg_stat_wal_receiver), 'none'),
                        'received ' || pg_last_wal_receive_lsn(),
                        'replayed ' || pg_last_wal_replay_lsn(),
                        'replay paused ' || pg_get_wal_replay_pause_state(),
                        'recovery waits on ' || coalesce((SELECT wait_event_type || '/' || wait_event
                                                            FROM pg_stat_activity
                                                           WHERE backend_type = 'startup'), 'nothing'),
                        'conflicts ' || (SELECT sum(confl_tablespace + confl_lock + confl_snapshot
                                                    + confl_bufferpin + confl_deadlock)
                                           FROM pg_stat_database_conflicts))",
            &[],
        )
        .unwrap();
    row.get(0)
}

/// Issue 57: `alk_publish` checks its arguments before anything else —
/// on a hot standby a bad name is ALK01 (not "cannot execute
/// pg_current_xact_id() during recovery"), and on the primary a refused
/// call assigns no transaction id.
#[test]
fn postgres_a_refused_publish_is_its_code_on_a_standby_and_takes_no_xid() {
    let (Ok(primary), Ok(standby)) = (
        std::env::var("ALKSTORE_PG_URL"),
        std::env::var("ALKSTORE_PG_STANDBY_URL"),
    ) else {
        assert!(!pg_required(), "ALKSTORE_PG_STANDBY_URL is not set");
        return;
    };
    let mut r = Target::postgres(standby, "standby").connect();
    assert_eq!(r.query_i64("SELECT pg_is_in_recovery()::int::bigint"), 1);
    for (args, want) in [
        (vec![t(""), j("{}")], "ALK01"),
        (vec![t("__alkstore_x"), j("{}")], "ALK02"),
        (vec![t("s"), Arg::Null], "ALK04"),
    ] {
        assert_eq!(r.code("alk_publish", &args), want, "standby {args:?}");
    }
    let mut p = postgres::Client::connect(&primary, postgres::NoTls).unwrap();
    let mut tx = p.transaction().unwrap();
    tx.batch_execute("SAVEPOINT s").unwrap();
    assert!(tx.query_one("SELECT alk_publish('', '{}')", &[]).is_err());
    tx.batch_execute("ROLLBACK TO SAVEPOINT s").unwrap();
    let xid: Option<String> = tx
        .query_one("SELECT pg_current_xact_id_if_assigned()::text", &[])
        .unwrap()
        .get(0);
    assert_eq!(xid, None, "a refused alk_publish assigned a transaction id");
}
