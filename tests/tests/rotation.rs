//! The job table's hot slots (schema.sql, rotate.sql; issue 35): jobs
//! written due go to the hot slot of their 3 s period, finished ones move to the
//! cold slot, and a slot whose jobs are all gone is truncated, so its index
//! entries leave the claim path even while a transaction holds back
//! vacuum. Never while a snapshot that could still see its rows is open,
//! never with a live job in it. PostgreSQL only (SQLite keeps one table: a
//! deleted row's index entries go with it). Each test in databases of its
//! own: another test's open transaction would hold the slots back.

use alkstore_tests::*;
use postgres::{Client, NoTls};
use std::time::{Duration, Instant};

fn pg_isolated(prefix: &str) -> Vec<Target> {
    isolated_targets(prefix)
        .into_iter()
        .filter(|t| t.is_postgres())
        .collect()
}

fn client(target: &Target) -> Client {
    Client::connect(target.pg_url(), NoTls).expect("connect")
}

/// The slots holding these jobs.
fn slots(c: &mut Client, ids: &[i64]) -> Vec<i16> {
    c.query(
        "SELECT DISTINCT slot FROM alkstore.jobs WHERE id = ANY ($1) ORDER BY 1",
        &[&ids],
    )
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

/// The bytes of the hot slots among `slots` (the cold slot, 2, is never truncated).
fn hot_bytes(c: &mut Client, slots: &[i16]) -> i64 {
    slots
        .iter()
        .filter(|s| **s < 2)
        .map(|s| {
            c.query_one(
                &format!("SELECT pg_relation_size('alkstore.jobs_slot{s}')"),
                &[],
            )
            .unwrap()
            .get::<_, i64>(0)
        })
        .sum()
}

/// Calls alk_sweep (each call a transaction of its own, as the workers
/// make it) every 100 ms until `done` or `within` has passed.
fn sweep_until(
    c: &mut Client,
    within: Duration,
    mut done: impl FnMut(&mut Client) -> bool,
) -> bool {
    let end = Instant::now() + within;
    loop {
        c.batch_execute("SELECT alk_sweep()").unwrap();
        if done(c) {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn enqueue(c: &mut Client, q: &str, n: i64) -> Vec<i64> {
    c.query_one(
        "SELECT alk_enqueue_batch($1, NULL, (SELECT jsonb_agg(g) FROM generate_series(1, $2::bigint) g))",
        &[&q, &n],
    )
    .unwrap()
    .get(0)
}

fn claim_and_ack_all(c: &mut Client, q: &str) -> i64 {
    let mut acked = 0;
    loop {
        let ids: Vec<i64> = c
            .query("SELECT id FROM alk_claim($1, 'w', 100)", &[&q])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        if ids.is_empty() {
            return acked;
        }
        let n: i32 = c
            .query_one("SELECT alk_ack_batch($1, 'w')", &[&ids])
            .unwrap()
            .get(0);
        acked += n as i64;
    }
}

#[test]
fn spent_jobs_leave_the_claim_path_while_a_transaction_holds_back_vacuum() {
    for target in pg_isolated("rotation_held") {
        let name = target.name();
        let mut c = client(&target);
        // A transaction holding an XID, idle: vacuum can remove nothing
        // deleted from now on. Its statement ran through the extended
        // protocol, as most drivers run them: its finished portal keeps a
        // snapshot, which stops counting once the session has been idle for
        // 10 s (rotate.sql).
        let mut holder = client(&target);
        let mut held = holder.transaction().unwrap();
        held.query_one("SELECT txid_current()", &[]).unwrap();
        let xmin: Option<String> = client(&target)
            .query_one(
                "SELECT backend_xmin::text FROM pg_stat_activity WHERE state = 'idle in transaction'
                    AND datname = current_database()",
                &[],
            )
            .unwrap()
            .get(0);
        assert!(xmin.is_some(), "[{name}] the idle session holds a snapshot");
        c.batch_execute("SELECT alk_queue_configure('rot-done', '{\"retain_completed_s\": 3600}')")
            .unwrap();
        let ids = enqueue(&mut c, "rot-q", 300);
        let done = enqueue(&mut c, "rot-done", 1)[0];
        let dead: i64 = c
            .query_one(
                "SELECT alk_enqueue('rot-dead', '{\"max_attempts\": 1}', '1')",
                &[],
            )
            .unwrap()
            .get(0);
        let mut all = ids.clone();
        all.extend([done, dead]);
        let hot = slots(&mut c, &all);
        assert!(
            hot.iter().all(|s| *s < 2),
            "[{name}] due jobs in hot slots: {hot:?}"
        );
        assert_eq!(claim_and_ack_all(&mut c, "rot-q"), 300, "[{name}]");
        c.batch_execute(
            "SELECT alk_ack(c.id, 'w', '{\"r\": 1}') FROM alk_claim('rot-done', 'w') c;
             SELECT alk_fail(c.id, 'w', 'boom') FROM alk_claim('rot-dead', 'w') c;",
        )
        .unwrap();
        assert!(hot_bytes(&mut c, &hot) > 0, "[{name}]");
        // The slots are truncated though the XID is still held.
        let emptied = sweep_until(&mut c, Duration::from_secs(24), |c| hot_bytes(c, &hot) == 0);
        assert!(
            emptied,
            "[{name}] slots {hot:?} still hold {} bytes",
            hot_bytes(&mut c, &hot)
        );
        // The finished jobs were moved to the cold slot, whole.
        assert_eq!(slots(&mut c, &[done, dead]), [2], "[{name}]");
        let r = c
            .query_one(
                "SELECT alk_get_job($1)->>'state', alk_get_job($1)->>'result', alk_get_job($2)->>'state'",
                &[&done, &dead],
            )
            .unwrap();
        let row: (String, String, String) = (r.get(0), r.get(1), r.get(2));
        assert_eq!(
            row,
            ("completed".into(), r#"{"r": 1}"#.into(), "dead".into()),
            "[{name}]"
        );
        // A moved dead job is requeued and claimed from there.
        let requeued: bool = c
            .query_one("SELECT alk_requeue_dead($1)", &[&dead])
            .unwrap()
            .get(0);
        assert!(requeued, "[{name}]");
        let got: Vec<i64> = c
            .query("SELECT id FROM alk_claim('rot-dead', 'w')", &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(got, [dead], "[{name}]");
        held.rollback().unwrap();
    }
}

#[test]
fn a_snapshot_older_than_the_acks_keeps_the_slot_and_sees_every_job() {
    for target in pg_isolated("rotation_snapshot") {
        let name = target.name();
        let mut c = client(&target);
        let ids = enqueue(&mut c, "snap-q", 20);
        let hot = slots(&mut c, &ids);
        // A snapshot from before the acks, as pg_dump takes one; it has not
        // read the job table (it would hold its lock).
        let mut reader = client(&target);
        reader
            .batch_execute(
                "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM alkstore.meta;",
            )
            .unwrap();
        assert_eq!(claim_and_ack_all(&mut c, "snap-q"), 20, "[{name}]");
        // Long enough for its slot to come up (a slot's period is 3 s, the
        // other slot's follows), and shorter than the 10 s after which a
        // session idle in its transaction no longer counts (rotate.sql).
        let emptied = sweep_until(&mut c, Duration::from_secs(7), |c| hot_bytes(c, &hot) == 0);
        assert!(
            !emptied,
            "[{name}] slots {hot:?} truncated under an older snapshot"
        );
        let seen: i64 = reader
            .query_one(
                "SELECT count(*) FROM alkstore.jobs WHERE queue = 'snap-q'",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(seen, 20, "[{name}] what the older snapshot sees");
        reader.batch_execute("COMMIT").unwrap();
        let emptied = sweep_until(&mut c, Duration::from_secs(14), |c| hot_bytes(c, &hot) == 0);
        assert!(
            emptied,
            "[{name}] slots {hot:?} kept after the snapshot ended"
        );
    }
}

#[test]
fn a_slot_with_a_running_job_is_kept_and_the_job_finishes() {
    for target in pg_isolated("rotation_running") {
        let name = target.name();
        let mut c = client(&target);
        let ids = enqueue(&mut c, "run-q", 10);
        let hot = slots(&mut c, &ids);
        let running: Vec<i64> = c
            .query("SELECT id FROM alk_claim('run-q', 'w', 1)", &[])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(claim_and_ack_all(&mut c, "run-q"), 9, "[{name}]");
        let its = slots(&mut c, &running);
        let emptied = sweep_until(&mut c, Duration::from_secs(8), |c| hot_bytes(c, &its) == 0);
        assert!(
            !emptied,
            "[{name}] slot {its:?} truncated under a running job"
        );
        let state: String = c
            .query_one("SELECT alk_get_job($1)->>'state'", &[&running[0]])
            .unwrap()
            .get(0);
        assert_eq!(state, "running", "[{name}]");
        let acked: bool = c
            .query_one("SELECT alk_ack($1, 'w')", &[&running[0]])
            .unwrap()
            .get(0);
        assert!(acked, "[{name}] the running job is acked after the sweeps");
        let emptied = sweep_until(&mut c, Duration::from_secs(14), |c| hot_bytes(c, &hot) == 0);
        assert!(emptied, "[{name}] slots {hot:?} kept after the last ack");
    }
}

/// The maintenance worker rotates with no caller (its database is set up
/// by the test command: ALKSTORE_PG_WORKER_URL).
#[test]
fn the_maintenance_worker_truncates_spent_slots_with_no_caller() {
    let Ok(url) = std::env::var("ALKSTORE_PG_WORKER_URL") else {
        assert!(std::env::var("ALKSTORE_REQUIRE_PG").is_err());
        return;
    };
    let mut c = Client::connect(&url, NoTls).unwrap();
    let q = fresh("worker-rot");
    let ids = enqueue(&mut c, &q, 50);
    let hot = slots(&mut c, &ids);
    assert_eq!(claim_and_ack_all(&mut c, &q), 50);
    let end = Instant::now() + Duration::from_secs(14);
    while hot_bytes(&mut c, &hot) > 0 && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(hot_bytes(&mut c, &hot), 0, "slots {hot:?}");
}

/// The acked head of a group, by a batch ack: its group's next job
/// becomes the head (alkstore.groups_done, a statement by a set of ids).
fn ack_group_head(c: &mut impl postgres::GenericClient, q: &str) {
    let ids: Vec<i64> = c
        .query("SELECT id FROM alk_claim($1, 'w', 1)", &[&q])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids.len(), 1, "a head to claim");
    c.query_one("SELECT alk_ack_batch($1, 'w')", &[&ids])
        .unwrap();
}

/// Every truncation makes the job statements be planned again, while the
/// truncated slot is empty and its statistics reset; that slot then fills
/// with a period's jobs. A claim, a batch ack or a group's hand-over
/// planned at that moment still reads the slots by index: it never reads
/// a slot whole to find the few jobs it takes (before, one claim read
/// every row of a refilled slot, dead versions included).
#[test]
fn claims_and_batch_acks_planned_on_empty_slots_read_refilled_ones_by_index() {
    for target in pg_isolated("rot_plan") {
        let mut c = client(&target);
        let q = fresh("plan");
        let g = fresh("plan-group");
        // Plans made now: every slot empty, never analyzed.
        c.batch_execute("TRUNCATE alkstore.jobs").unwrap();
        enqueue(&mut c, &q, 3);
        for _ in 0..3 {
            c.execute(
                "SELECT alk_enqueue($1, '{\"group_key\": \"k\"}', '1')",
                &[&g],
            )
            .unwrap();
        }
        ack_group_head(&mut c, &g);
        for n in [1, 2] {
            let ids: Vec<i64> = c
                .query("SELECT id FROM alk_claim($1, 'w', $2)", &[&q, &n])
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            c.query_one("SELECT alk_ack_batch($1, 'w')", &[&ids])
                .unwrap();
        }
        // The slot fills; the plans stay.
        enqueue(&mut c, &q, 5000);
        let mut tx = c.transaction().unwrap();
        let one: i64 = tx
            .query_one("SELECT id FROM alk_claim($1, 'w', 1)", &[&q])
            .unwrap()
            .get(0);
        let mut ids: Vec<i64> = tx
            .query("SELECT id FROM alk_claim($1, 'w', 2)", &[&q])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        ids.push(one);
        ack_group_head(&mut tx, &g);
        let acked: i32 = tx
            .query_one("SELECT alk_ack_batch($1, 'w')", &[&ids])
            .unwrap()
            .get(0);
        assert_eq!(acked, 3, "{}", target.name());
        // Rows read by sequential scans (a bitmap scan counts as a scan in
        // seq_scan on PostgreSQL 15, but reads no row here).
        let read: i64 = tx
            .query_one(
                "SELECT coalesce(sum(seq_tup_read), 0)::bigint FROM pg_stat_xact_user_tables
                  WHERE schemaname = 'alkstore' AND relname LIKE 'jobs_slot%'",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(read, 0, "hot slots read whole: {}", target.name());
        tx.commit().unwrap();
    }
}

/// Every function that runs a statement on jobs by a set of ids
/// (`id = ANY (…)`) carries `enable_seqscan = off` (schema.sql, "Statements
/// by a set of ids"), or runs only inside one that does: the setting of the
/// outer call holds for the inner one. A new such function without it
/// would read a refilled hot slot whole after each truncation, as the
/// claim did, and no timing test would notice.
#[test]
fn every_function_updating_jobs_by_a_set_of_ids_is_planned_by_index() {
    for target in pg_targets() {
        let name = target.name();
        let mut c = client(&target);
        // Bodies without their comments; the functions of the two schemas.
        let functions = "SELECT p.proname::text AS name,
                                regexp_replace(p.prosrc, '--[^\n]*', '', 'g') AS body,
                                coalesce('enable_seqscan=off' = ANY (p.proconfig), false) AS by_index
                           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                          WHERE n.nspname IN ('alkstore', 'public')";
        let names: Vec<String> = c
            .query(
                &format!(
                    "WITH f AS ({functions})
                     SELECT name FROM f
                      WHERE NOT by_index AND body ~* '\\mid\\s*=\\s*ANY\\s*\\('
                        AND body ~ 'alkstore\\.jobs\\M'
                      ORDER BY 1"
                ),
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        // Run only inside alk_claim (plain) or alkstore.claim_full (extension).
        assert_eq!(names, ["claim_limited", "park", "park_rated"], "[{name}]");
        // Whatever calls them carries the setting, or is one of them.
        let callers: Vec<(String, bool)> = c
            .query(
                &format!(
                    "WITH f AS ({functions})
                     SELECT name, by_index FROM f
                      WHERE body ~ '\\m(claim_limited|park|park_rated)\\s*\\('
                      ORDER BY 1"
                ),
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        assert!(!callers.is_empty(), "[{name}]");
        for (caller, by_index) in callers {
            assert!(
                by_index || ["claim_limited", "park", "park_rated"].contains(&caller.as_str()),
                "[{name}] {caller} calls a function by a set of ids without enable_seqscan = off"
            );
        }
    }
}

/// `alkstore.rotation` takes what a boolean setting takes: `false` turns
/// the truncation off as `off` does (it did not: only the exact word
/// `off` did), and a value that is no boolean is ALK05, not silently on.
#[test]
fn the_rotation_setting_takes_booleans_and_refuses_anything_else() {
    for target in pg_isolated("rot_setting") {
        let name = target.name();
        let mut c = client(&target);
        c.batch_execute("SET alkstore.rotation = 'sometimes'")
            .unwrap();
        let err = c.batch_execute("SELECT alk_sweep()").unwrap_err();
        let db = err.as_db_error().expect("a database error");
        assert_eq!(db.code().code(), "ALK05", "[{name}] {db}");
        assert!(
            db.message().contains("alkstore.rotation must be on or off"),
            "[{name}] {db}"
        );
        let q = fresh("setting");
        let ids = enqueue(&mut c, &q, 20);
        let hot = slots(&mut c, &ids);
        assert_eq!(claim_and_ack_all(&mut c, &q), 20, "[{name}]");
        // Two periods of sweeps, each of which truncates a spent slot when on.
        c.batch_execute("SET alkstore.rotation = 'FALSE'").unwrap();
        let kept = !sweep_until(&mut c, Duration::from_secs(7), |c| hot_bytes(c, &hot) == 0);
        assert!(kept, "[{name}] truncated though off");
        c.batch_execute("SET alkstore.rotation = yes").unwrap();
        let emptied = sweep_until(&mut c, Duration::from_secs(14), |c| hot_bytes(c, &hot) == 0);
        assert!(emptied, "[{name}] not truncated once on");
    }
}

/// A transaction left open after writing finished jobs (a purge, a job
/// deleted by id) or naming one as a dependency holds up no move but of the
/// rows it holds: the rotation still moves other finished jobs out of their
/// hot slot. (These calls held a lock to their commit that stopped every
/// move: a dead job then kept its hot slot for as long as the transaction
/// stayed open.)
#[test]
fn an_open_transaction_that_wrote_finished_jobs_holds_up_no_move() {
    for target in pg_isolated("rot_open") {
        let name = target.name();
        let mut c = client(&target);
        let q = fresh("open");
        let done = enqueue(&mut c, &q, 1)[0];
        assert_eq!(claim_and_ack_all(&mut c, &q), 1, "[{name}]");
        // Each holder's transaction stays open through the sweeps below.
        let mut holders: Vec<Client> = (0..3).map(|_| client(&target)).collect();
        let calls = [
            format!("SELECT alk_purge('{q}-other', 'dead')"),
            "SELECT alk_delete_job(-1)".to_string(),
            format!("SELECT alk_enqueue('{q}-next', '{{\"depends_on\": [{done}]}}', '1')"),
        ];
        for (h, call) in holders.iter_mut().zip(&calls) {
            h.batch_execute(&format!("BEGIN; {call}")).unwrap();
        }
        let dead: i64 = c
            .query_one(
                "SELECT alk_enqueue($1, '{\"max_attempts\": 1}', '1')",
                &[&q],
            )
            .unwrap()
            .get(0);
        c.query_one(
            "SELECT alk_fail(c.id, 'w', 'boom') FROM alk_claim($1, 'w') c",
            &[&q],
        )
        .unwrap();
        assert!(slots(&mut c, &[dead])[0] < 2, "[{name}]");
        // Its slot is rotated within two periods.
        let moved = sweep_until(&mut c, Duration::from_secs(8), |c| slots(c, &[dead]) == [2]);
        assert!(moved, "[{name}] the dead job kept its hot slot");
        for h in &mut holders {
            h.batch_execute("COMMIT").unwrap();
        }
    }
}

/// A slot is marked empty (the first of the rotation's two looks) only by a
/// sweep whose transaction wrote nothing before it: a statement that acks a
/// slot's last jobs and sweeps in one transaction sees the slot empty
/// before its acks commit, while a snapshot taken meanwhile still sees the
/// jobs; a truncation that trusted that look could take them from it.
#[test]
fn a_sweep_after_acks_in_one_statement_does_not_mark_their_slot_empty() {
    for target in pg_isolated("rot_same_tx") {
        let name = target.name();
        let mut c = client(&target);
        // Tried again when a period ends between the two looks below (the
        // slot is then written to again, and marked by nobody).
        let mut shown = false;
        for _ in 0..5 {
            let q = fresh("same-tx");
            let ids = enqueue(&mut c, &q, 3);
            let hot = slots(&mut c, &ids);
            assert_eq!(hot.len(), 1, "[{name}] one slot: {hot:?}");
            let claimed: Vec<i64> = c
                .query("SELECT id FROM alk_claim($1, 'w', 3)", &[&q])
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect();
            assert_eq!(claimed.len(), 3, "[{name}]");
            // Until the slot's period has passed, early in the next one: the
            // slot a sweep looks at.
            let period = |c: &mut Client| -> (i16, f64) {
                let r = c
                    .query_one(
                        "SELECT alkstore.hot_slot(clock_timestamp()),
                                date_part('epoch', clock_timestamp())::float8",
                        &[],
                    )
                    .unwrap();
                (r.get(0), r.get(1))
            };
            let until = Instant::now() + Duration::from_secs(10);
            let started = loop {
                let (now, at) = period(&mut c);
                if now != hot[0] && at % 3.0 < 1.0 {
                    break (at / 3.0).floor();
                }
                assert!(Instant::now() < until, "[{name}] the period never passed");
                std::thread::sleep(Duration::from_millis(20));
            };
            c.query_one(
                "SELECT (SELECT count(alk_ack(x, 'w')) FROM unnest($1::bigint[]) x), alk_sweep(NULL)",
                &[&claimed],
            )
            .unwrap();
            // (A mark of this period: an earlier try's may be left.)
            let marked = |c: &mut Client| -> i64 {
                c.query_one(
                    "SELECT count(*) FROM alkstore.rotation WHERE slot = $1 AND round = $2",
                    &[&hot[0], &(started as i64)],
                )
                .unwrap()
                .get(0)
            };
            assert_eq!(
                marked(&mut c),
                0,
                "[{name}] slot {} marked by the acks' own sweep",
                hot[0]
            );
            // The same look from a sweep alone, after the acks committed,
            // marks it: the one above could have.
            c.batch_execute("SELECT alk_sweep(NULL)").unwrap();
            let (_, at) = period(&mut c);
            if (at / 3.0).floor() != started {
                continue;
            }
            assert_eq!(
                marked(&mut c),
                1,
                "[{name}] a sweep alone marks slot {}",
                hot[0]
            );
            shown = true;
            break;
        }
        assert!(
            shown,
            "[{name}] no period long enough for both looks in 5 tries"
        );
    }
}

/// A sweep sent as drivers send a call with parameters — the extended
/// protocol, whose transaction begins at Bind and its statement at
/// Execute — rotates the slots too, as the Rust, Python and Node workers
/// and `alkstore maintain` send theirs. Before, only a sweep sent as a
/// simple query did: the rotation took the two timestamps' difference for
/// a transaction block.
#[test]
fn a_sweep_sent_with_parameters_rotates_the_slots() {
    for target in pg_isolated("rot_extended") {
        let name = target.name();
        let mut c = client(&target);
        let q = fresh("extended");
        let ids = enqueue(&mut c, &q, 50);
        let hot = slots(&mut c, &ids);
        assert_eq!(claim_and_ack_all(&mut c, &q), 50);
        let end = Instant::now() + Duration::from_secs(20);
        while hot_bytes(&mut c, &hot) > 0 && Instant::now() < end {
            c.query_one("SELECT alk_sweep($1)", &[&q]).unwrap();
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(hot_bytes(&mut c, &hot), 0, "[{name}] slots {hot:?}");
    }
}
