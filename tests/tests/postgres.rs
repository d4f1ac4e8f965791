//! PostgreSQL-only behaviour: claims, publishes and leases under real
//! concurrency, rights of an ordinary application role, a hostile
//! search_path, and LISTEN/NOTIFY wake-ups. Runs on both installs (the
//! extension and the plain SQL script); without PostgreSQL configured
//! (`scripts/test.sh` configures it) there is nothing to run.

use alkstore_tests::*;
use postgres::{Client, NoTls};
use std::collections::HashMap;
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

fn client(target: &Target) -> Client {
    Client::connect(target.pg_url(), NoTls).expect("connect")
}

fn fill(c: &mut Client, f: &str, name: &str, n: usize) -> Vec<i64> {
    let mut ids = Vec::new();
    for chunk in 0..n.div_ceil(1000) {
        let payloads: Vec<usize> = (chunk * 1000..((chunk + 1) * 1000).min(n)).collect();
        let row = c
            .query_one(
                &format!("SELECT {f}($1, NULL, $2::text::jsonb)"),
                &[&name, &serde_json::to_string(&payloads).unwrap()],
            )
            .unwrap();
        ids.extend(row.get::<_, Vec<i64>>(0));
    }
    ids
}

fn exactly_once(expected: &[i64], acked: &[i64]) {
    let mut counts: HashMap<i64, usize> = HashMap::new();
    for id in acked {
        *counts.entry(*id).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).take(10).collect();
    assert!(twice.is_empty(), "acked more than once: {twice:?}");
    let missing: Vec<_> = expected
        .iter()
        .filter(|id| !counts.contains_key(id))
        .take(10)
        .collect();
    assert!(missing.is_empty(), "never acked (first ten): {missing:?}");
    assert_eq!(counts.len(), expected.len());
}

/// `workers` threads, each on its own connection, claim and ack until empty.
fn drain(target: &Target, claim_fn: &str, name: &str, workers: usize) -> Vec<i64> {
    let acked = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..workers)
        .map(|w| {
            let (target, name, acked, claim_fn) = (
                target.clone(),
                name.to_string(),
                Arc::clone(&acked),
                claim_fn.to_string(),
            );
            std::thread::spawn(move || {
                let mut c = client(&target);
                let worker = format!("worker-{w}");
                let batch = [1, 4, 16, 32][w % 4];
                let mut mine = Vec::new();
                let mut idle = 0;
                while idle < 3 {
                    let rows = c
                        .query(
                            &format!("SELECT id, attempts FROM {claim_fn}($1, $2, $3)"),
                            &[&name, &worker, &batch],
                        )
                        .unwrap();
                    if rows.is_empty() {
                        idle += 1;
                        sleep_ms(20);
                        continue;
                    }
                    idle = 0;
                    let ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
                    for r in &rows {
                        assert_eq!(r.get::<_, i32>(1), 1, "a job was handed out twice");
                    }
                    let n: i32 = c
                        .query_one("SELECT alk_ack_batch($1, $2)", &[&ids, &worker])
                        .unwrap()
                        .get(0);
                    assert_eq!(n as usize, ids.len());
                    mine.extend(ids);
                }
                acked.lock().unwrap().extend(mine);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    acked
}

#[test]
fn eight_workers_claim_ten_thousand_jobs_each_acked_exactly_once() {
    for target in pg_targets() {
        let q = fresh("race");
        let ids = fill(&mut client(&target), "alk_enqueue_batch", &q, 10_000);
        exactly_once(&ids, &drain(&target, "alk_claim", &q, 8));
    }
}

#[test]
fn eight_workers_deliver_ten_thousand_outbox_messages_exactly_once() {
    for target in pg_targets() {
        let o = fresh("race-outbox");
        let mut c = client(&target);
        let mut ids = Vec::new();
        // Outbox messages come one per business transaction.
        for chunk in 0..10 {
            let mut tx = c.transaction().unwrap();
            for i in 0..1000 {
                let payload = format!("{{\"n\": {}}}", chunk * 1000 + i);
                ids.push(
                    tx.query_one(
                        "SELECT alk_outbox_enqueue($1, NULL, $2::text::jsonb)",
                        &[&o, &payload],
                    )
                    .unwrap()
                    .get::<_, i64>(0),
                );
            }
            tx.commit().unwrap();
        }
        exactly_once(&ids, &drain(&target, "alk_outbox_claim", &o, 8));
    }
}

#[test]
fn racing_publishers_keep_offsets_dense_and_a_reader_never_sees_one_appear_behind_it() {
    for target in pg_targets() {
        let s = fresh("publish-race");
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (target, s, done) = (target.clone(), s.clone(), Arc::clone(&done));
            std::thread::spawn(move || {
                let mut c = client(&target);
                let mut last = 0i64;
                loop {
                    let finished = done.load(std::sync::atomic::Ordering::SeqCst);
                    // The reader is its own sequencer (v1.2 §K), as the
                    // facade's readers are.
                    c.execute("CALL alk_sequence($1, NULL)", &[&s]).unwrap();
                    let rows = c
                        .query(
                            "SELECT \"offset\" FROM alk_read($1, $2, 1000)",
                            &[&s, &last],
                        )
                        .unwrap();
                    for r in rows {
                        let o: i64 = r.get(0);
                        assert_eq!(o, last + 1, "after reading {last} the reader saw {o}");
                        last = o;
                    }
                    if finished {
                        return last;
                    }
                }
            })
        };
        let barrier = Arc::new(Barrier::new(4));
        let publishers: Vec<_> = (0..4)
            .map(|p| {
                let (target, s, barrier) = (target.clone(), s.clone(), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    let mut c = client(&target);
                    barrier.wait();
                    let mut kept = 0;
                    for i in 0..150 {
                        let mut tx = c.transaction().unwrap();
                        tx.execute(
                            "SELECT alk_publish($1, $2::text::jsonb)",
                            &[&s, &format!("[{p},{i}]")],
                        )
                        .unwrap();
                        if i % 7 == 3 {
                            tx.rollback().unwrap();
                        } else {
                            tx.commit().unwrap();
                            kept += 1;
                        }
                    }
                    kept
                })
            })
            .collect();
        let kept: i64 = publishers.into_iter().map(|p| p.join().unwrap()).sum();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        assert_eq!(
            reader.join().unwrap(),
            kept,
            "the reader saw every committed event"
        );
        let mut c = client(&target);
        let mut all = Vec::new();
        let mut after = 0i64;
        c.execute("CALL alk_sequence($1, NULL)", &[&s]).unwrap();
        loop {
            let rows = c
                .query(
                    "SELECT \"offset\" FROM alk_read($1, $2, 1000)",
                    &[&s, &after],
                )
                .unwrap();
            if rows.is_empty() {
                break;
            }
            for r in rows {
                after = r.get(0);
                all.push(after);
            }
        }
        assert_eq!(
            all,
            (1..=kept).collect::<Vec<_>>(),
            "dense, in order, no gaps from rollbacks"
        );
    }
}

#[test]
fn racing_owners_get_strictly_increasing_tokens() {
    for target in pg_targets() {
        let l = fresh("lock-race");
        let threads: Vec<_> = (0..4)
            .map(|o| {
                let (target, l) = (target.clone(), l.clone());
                std::thread::spawn(move || {
                    let mut c = client(&target);
                    let owner = format!("owner-{o}");
                    let mut tokens = Vec::new();
                    for _ in 0..100 {
                        let t: Option<i64> = c
                            .query_one("SELECT alk_lock_acquire($1, $2, 10)", &[&l, &owner])
                            .unwrap()
                            .get(0);
                        if let Some(t) = t {
                            tokens.push(t);
                            assert!(c
                                .query_one("SELECT alk_lock_release($1, $2)", &[&l, &owner])
                                .unwrap()
                                .get::<_, bool>(0));
                        }
                    }
                    tokens
                })
            })
            .collect();
        let per_owner: Vec<Vec<i64>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        for tokens in &per_owner {
            assert!(
                tokens.windows(2).all(|w| w[0] < w[1]),
                "each owner's tokens increase"
            );
        }
        let mut all: Vec<i64> = per_owner.concat();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "no token handed out twice");
        assert!(n >= 4);
    }
}

/// A role with no rights of its own, as an application would have.
fn app_role(c: &mut Client) -> String {
    // Concurrent GRANTs on one database row fail with "tuple concurrently updated".
    static GRANTS: Mutex<()> = Mutex::new(());
    let _one_at_a_time = GRANTS.lock().unwrap_or_else(|e| e.into_inner());
    let role = fresh("alk_app").replace('-', "_");
    let db: String = c
        .query_one("SELECT current_database()::text", &[])
        .unwrap()
        .get(0);
    c.batch_execute(&format!(
        "CREATE ROLE {role} NOLOGIN NOSUPERUSER IN ROLE alkstore_admin; \
         GRANT CREATE ON DATABASE {db} TO {role}; GRANT CREATE, USAGE ON SCHEMA public TO {role};"
    ))
    .unwrap();
    role
}

#[test]
fn an_application_role_can_use_every_function_but_not_the_tables() {
    for target in pg_targets() {
        let mut c = client(&target);
        let role = app_role(&mut c);
        c.batch_execute(&format!("SET ROLE {role}")).unwrap();
        let superuser: bool = c
            .query_one(
                "SELECT rolsuper FROM pg_roles WHERE rolname = current_user",
                &[],
            )
            .unwrap()
            .get(0);
        assert!(!superuser, "the test runs as an ordinary role");
        let q = fresh("role");
        let id: i64 = c
            .query_one("SELECT alk_enqueue($1, NULL, '{\"a\": 1}')", &[&q])
            .unwrap()
            .get(0);
        let claimed: i64 = c
            .query_one("SELECT id FROM alk_claim($1, 'w')", &[&q])
            .unwrap()
            .get(0);
        assert_eq!(claimed, id);
        assert!(c
            .query_one("SELECT alk_ack($1, 'w')", &[&id])
            .unwrap()
            .get::<_, bool>(0));
        c.batch_execute(&format!(
            "SELECT alk_outbox_enqueue('{q}', NULL, '1'); SELECT * FROM alk_outbox_claim('{q}', 'w'); \
             SELECT alk_publish('{q}', '1'); SELECT * FROM alk_read('{q}', 0, 10); \
             SELECT alk_save_offset('{q}', 'c', 1); SELECT alk_lock_acquire('{q}', 'o', 1); \
             SELECT alk_notify('{q}', '1'); SELECT alk_queue_configure('{q}', '{{}}'); \
             SELECT alk_queue_stats('{q}'); SELECT alk_sweep('{q}'); SELECT alk_listen_queue('{q}');"
        ))
        .unwrap();
        // The procedure runs with the caller's rights (docs/security.md).
        let sequenced: i64 = c
            .query_one("CALL alk_sequence($1, NULL)", &[&q])
            .unwrap()
            .get(0);
        assert_eq!(sequenced, 1, "the event published above");
        for sql in [
            "SELECT count(*) FROM alkstore.jobs",
            "INSERT INTO alkstore.jobs (queue) VALUES ('x')",
            "UPDATE alkstore.jobs SET state = 'dead'",
            "DELETE FROM alkstore.events",
            "SELECT alkstore.raise('ALK01', 'x')",
            "SELECT alkstore.enqueue_batch('x', NULL, NULL, '[1]')",
        ] {
            let e = c.batch_execute(sql).unwrap_err();
            assert_eq!(
                e.code().map(|c| c.code()),
                Some("42501"),
                "[{}] {sql}: {e}",
                target.name()
            );
        }
    }
}

#[test]
fn a_hostile_search_path_cannot_redirect_the_functions() {
    for target in pg_targets() {
        let mut c = client(&target);
        let role = app_role(&mut c);
        let evil = fresh("evil").replace('-', "_");
        c.batch_execute(&format!(
            "SET ROLE {role}; CREATE SCHEMA {evil}; \
             CREATE FUNCTION {evil}.starts_with(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT false'; \
             CREATE FUNCTION {evil}.clock_timestamp() RETURNS timestamptz LANGUAGE sql AS $$SELECT '2000-01-01'::timestamptz$$; \
             CREATE FUNCTION {evil}.jsonb_typeof(jsonb) RETURNS text LANGUAGE sql AS $$SELECT 'object'$$; \
             CREATE TABLE {evil}.jobs (id bigint); \
             SET search_path = {evil}, pg_catalog, public;"
        ))
        .unwrap();
        let e = c
            .query_one("SELECT alk_enqueue('__alkstore_x', NULL, '1')", &[])
            .unwrap_err();
        assert_eq!(
            e.code().map(|c| c.code()),
            Some("ALK02"),
            "[{}] {e}",
            target.name()
        );
        let e = c
            .query_one("SELECT alk_enqueue('q', '[1]', '1')", &[])
            .unwrap_err();
        assert_eq!(e.code().map(|c| c.code()), Some("ALK03"));
        let id: i64 = c
            .query_one("SELECT alk_enqueue($1, NULL, '1')", &[&fresh("evil-q")])
            .unwrap()
            .get(0);
        let job: String = c
            .query_one("SELECT alk_get_job($1)::text", &[&id])
            .unwrap()
            .get(0);
        let job: serde_json::Value = serde_json::from_str(&job).unwrap();
        assert!(job["created_at"].as_str().unwrap() > "2020", "{job}");
        let planted: i64 = c
            .query_one(&format!("SELECT count(*) FROM {evil}.jobs"), &[])
            .unwrap()
            .get(0);
        assert_eq!(planted, 0);
        // A claim under that path, as this session's first (the
        // extension's claim plans its statements once per session, in the
        // library: pg_ext/src/claim.rs), with an `=` on text that says no
        // and a hash of the schema's own: it still takes the job, whose
        // claim expiry is not the schema's clock either.
        c.batch_execute(&format!(
            "CREATE FUNCTION {evil}.no(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT false'; \
             CREATE OPERATOR {evil}.= (LEFTARG = text, RIGHTARG = text, FUNCTION = {evil}.no); \
             CREATE FUNCTION {evil}.hashtextextended(text, bigint) RETURNS bigint LANGUAGE sql AS 'SELECT 0::bigint'"
        ))
        .unwrap();
        let q = fresh("evil-claim");
        let queued: Vec<i64> = (0..2)
            .map(|_| {
                c.query_one("SELECT alk_enqueue($1, NULL, '1')", &[&q])
                    .unwrap()
                    .get(0)
            })
            .collect();
        for (n, job) in [(1, queued[0]), (2, queued[1])] {
            let claimed: Vec<(i64, String)> = c
                .query(
                    "SELECT id, claim_expires_at::text FROM alk_claim($1, 'w', $2)",
                    &[&q, &n],
                )
                .unwrap()
                .iter()
                .map(|r| (r.get(0), r.get(1)))
                .collect();
            assert_eq!(claimed.len(), 1, "[{}] max_jobs {n}", target.name());
            assert_eq!(claimed[0].0, job, "[{}]", target.name());
            assert!(claimed[0].1.as_str() > "2020", "{claimed:?}");
        }
        // And the batch ack (the library's too on the extension) acks both.
        let acked: i32 = c
            .query_one("SELECT alk_ack_batch($1, 'w')", &[&queued])
            .unwrap()
            .get(0);
        assert_eq!(acked, 2, "[{}]", target.name());
        c.batch_execute(&format!("DROP OPERATOR {evil}.= (text, text)"))
            .unwrap(); // (the statements below compare text themselves)
                       // A publish under that path: the commit ticket's trigger function
                       // (the library's on the extension, run with the caller's path)
                       // still draws from alkstore.commit_ticket. SET CONSTRAINTS fires it
                       // inside the transaction, so no other test's sequencer can move the
                       // row before it is read.
        let s = fresh("evil-s");
        c.batch_execute(&format!(
            "CREATE FUNCTION {evil}.nextval(regclass) RETURNS bigint LANGUAGE sql AS 'SELECT -1'; \
             CREATE TABLE {evil}.published (ticket bigint, ctid_ tid)"
        ))
        .unwrap();
        let mut tx = c.transaction().unwrap();
        tx.query_one("SELECT alk_publish($1, '1')", &[&s]).unwrap();
        tx.batch_execute("SET CONSTRAINTS ALL IMMEDIATE; RESET ROLE")
            .unwrap();
        let tickets: Vec<Option<i64>> = tx
            .query(
                "SELECT ticket FROM alkstore.published WHERE stream = $1",
                &[&s],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        tx.commit().unwrap();
        assert_eq!(tickets.len(), 1, "[{}]", target.name());
        assert!(
            tickets[0].is_some_and(|t| t > 0),
            "[{}] {tickets:?}",
            target.name()
        );
    }
}

/// Issue 15 item 12: under generic plans a WHERE term that is never
/// evaluated (no job matched) cannot be where a name is checked.
#[test]
fn empty_worker_names_fail_under_generic_plans_too() {
    for target in pg_targets() {
        let mut c = client(&target);
        c.batch_execute("SET plan_cache_mode = force_generic_plan")
            .unwrap();
        let pending: i64 = c
            .query_one("SELECT alk_enqueue($1, NULL, '1')", &[&fresh("generic")])
            .unwrap()
            .get(0);
        for id in [pending, i64::MAX] {
            for sql in [
                "SELECT alk_ack($1, '')",
                "SELECT alk_ack_batch(ARRAY[$1::bigint], '')",
                "SELECT alk_fail($1, '', 'e')",
                "SELECT alk_heartbeat($1, '')",
                "SELECT alk_retry($1, '', 'e')",
            ] {
                // More calls than the plan cache needs to switch plans.
                for _ in 0..8 {
                    let e = c.query_one(sql, &[&id]).unwrap_err();
                    assert_eq!(
                        e.code().map(|c| c.code()),
                        Some("ALK01"),
                        "[{}] {sql} with job {id}: {e}",
                        target.name()
                    );
                }
            }
        }
    }
}

/// `alk_ack_batch` takes a one-dimensional array of ids without NULLs; any
/// other array is refused with ALK05 (checked before the worker's name, in
/// argument order, as on SQLite) and acks nothing, not even the valid ids
/// in it. A bad worker name with good ids is ALK01.
#[test]
fn ack_batch_refuses_arrays_that_are_not_a_list_of_ids() {
    for target in pg_targets() {
        let mut c = client(&target);
        let q = fresh("ack-batch-args");
        c.query_one("SELECT alk_enqueue_batch($1, NULL, '[1, 2, 3, 4]')", &[&q])
            .unwrap();
        let ids: Vec<i64> = c
            .query("SELECT id FROM alk_claim($1, 'w', 4)", &[&q])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(ids.len(), 4);
        let (a, b, d, e) = (ids[0], ids[1], ids[2], ids[3]);
        for (sql, want) in [
            ("SELECT alk_ack_batch(NULL, 'w')".to_string(), "ALK05"),
            (
                format!("SELECT alk_ack_batch(ARRAY[{a}, NULL], 'w')"),
                "ALK05",
            ),
            (
                format!("SELECT alk_ack_batch(ARRAY[[{a}, {b}], [{d}, {e}]], 'w')"),
                "ALK05",
            ),
            (
                format!("SELECT alk_ack_batch(ARRAY[[{a}, NULL]], '')"),
                "ALK05",
            ),
            ("SELECT alk_ack_batch(NULL, NULL)".to_string(), "ALK05"),
            (format!("SELECT alk_ack_batch(ARRAY[{a}], '')"), "ALK01"),
        ] {
            let err = c.query_one(&sql, &[]).unwrap_err();
            assert_eq!(
                err.code().map(|c| c.code()),
                Some(want),
                "[{}] {sql}: {err}",
                target.name()
            );
        }
        let running: i64 = c
            .query_one("SELECT (alk_queue_stats($1)->>'running')::bigint", &[&q])
            .unwrap()
            .get(0);
        assert_eq!(running, 4, "[{}] a refused call acked jobs", target.name());
        let acked: i32 = c
            .query_one("SELECT alk_ack_batch($1, 'w')", &[&ids])
            .unwrap()
            .get(0);
        assert_eq!(acked, 4, "[{}]", target.name());
    }
}

/// A plan made while the statistics showed no running jobs must still find
/// a job by its id through the primary key, not by reading a whole partial
/// index (every entry of jobs claimed since the last VACUUM) and filtering
/// by id. Counted by PostgreSQL's own per-transaction index statistics.
#[test]
fn statements_by_id_probe_the_primary_key_with_stale_statistics() {
    for target in pg_targets() {
        let mut c = client(&target);
        let q = fresh("byid");
        fill(&mut c, "alk_enqueue_batch", &q, 3000);
        c.batch_execute("ANALYZE alkstore.jobs").unwrap(); // none of them running yet
        let mut ids: Vec<i64> = Vec::new();
        for _ in 0..3 {
            let rows = c
                .query("SELECT id FROM alk_claim($1, 'w', 1000)", &[&q])
                .unwrap();
            ids.extend(rows.iter().map(|r| r.get::<_, i64>(0)));
        }
        assert_eq!(ids.len(), 3000);
        // A new session: plans made now, from those statistics.
        let mut w = client(&target);
        let mut tx = w.transaction().unwrap();
        let calls = [
            "SELECT alk_heartbeat($1, 'w')",
            "SELECT alk_ack($1, 'w')",
            "SELECT alk_ack_batch(ARRAY[$1::bigint], 'w') = 1",
            "SELECT alk_retry($1, 'w', 'e') IS NOT NULL",
            "SELECT alk_fail($1, 'w', 'e')",
            "SELECT alk_cancel($1)",
        ];
        // Each statement more often than the plan cache needs to switch to
        // a generic plan.
        let mut next = ids.iter();
        let mut failed = Vec::new();
        for sql in calls {
            for _ in 0..8 {
                let id = *next.next().unwrap();
                let done: bool = tx.query_one(sql, &[&id]).unwrap().get(0);
                assert!(done, "[{}] {sql} with job {id}", target.name());
                if sql.contains("alk_fail") {
                    failed.push(id);
                }
            }
        }
        // The failed jobs are dead: requeue them by id.
        for id in &failed {
            let done: bool = tx
                .query_one("SELECT alk_requeue_dead($1)", &[id])
                .unwrap()
                .get(0);
            assert!(done, "[{}] alk_requeue_dead({id})", target.name());
        }
        let scans: Vec<(String, i64)> = tx
            .query(
                // Each partition's index under the name of the table's index.
                &format!(
                    "SELECT p.relname::text, sum(pg_stat_get_xact_numscans(c.oid))::bigint
                       FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                       JOIN pg_inherits h ON h.inhrelid = c.oid JOIN pg_class p ON p.oid = h.inhparent
                      WHERE i.indrelid IN ({JOB_PARTITIONS}) AND pg_stat_get_xact_numscans(c.oid) > 0
                      GROUP BY p.relname"
                ),
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        tx.commit().unwrap();
        assert!(
            scans.iter().all(|(index, _)| index == "jobs_pkey")
                && scans
                    .iter()
                    .any(|(index, n)| index == "jobs_pkey" && *n >= 56),
            "[{}] index scans of alkstore.jobs by the calls by id: {scans:?}",
            target.name()
        );
    }
}

// jobs_pending is keyed by the hash of the queue's name (schema.sql). The
// planner ignores a partial index's statistics: without the statistics
// object on that key it took every queue for 0.5% of the table, and a plan
// made from them sorted all of a large queue's jobs on every claim.
#[test]
fn claims_read_a_large_queue_in_claim_order_not_all_of_it() {
    // Databases of their own: the rows other tests leave in the cold slot
    // (schema.sql) would count too, where the planner reads that small
    // partition whole.
    for target in isolated_targets("claim_order")
        .into_iter()
        .filter(|t| t.is_postgres())
    {
        let mut c = client(&target);
        let big = fresh("big");
        fill(&mut c, "alk_enqueue_batch", &big, 5000);
        for _ in 0..10 {
            fill(&mut c, "alk_enqueue_batch", &fresh("small"), 100);
        }
        c.batch_execute("ANALYZE alkstore.jobs").unwrap();
        let holding: Vec<u32> = c
            .query(
                "SELECT DISTINCT j.tableoid FROM alkstore.jobs j WHERE j.queue = $1",
                &[&big],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        // A new session: its plans are made from those statistics.
        let mut w = client(&target);
        let mut tx = w.transaction().unwrap();
        for n in [1, 1, 1, 1, 32, 32] {
            let got = tx
                .query("SELECT id FROM alk_claim($1, 'w', $2)", &[&big, &n])
                .unwrap();
            assert_eq!(got.len(), n as usize, "[{}]", target.name());
        }
        // Rows read by any plan: sequential and bitmap scans count on the
        // partitions holding the queue, index scans on each index. (A
        // partition of a few hundred rows may be read whole to find the
        // claimed ids: the planner's choice for so few rows, which does not
        // grow with the queue.)
        let fetched: i64 = tx
            .query_one(
                &format!(
                    "SELECT (SELECT sum(pg_stat_get_xact_tuples_returned(t.p)
                                        + pg_stat_get_xact_tuples_fetched(t.p))::bigint
                               FROM ({JOB_PARTITIONS}) t(p)
                              WHERE t.p::oid = ANY ($1))
                          + (SELECT sum(pg_stat_get_xact_tuples_fetched(i.indexrelid))::bigint
                               FROM pg_index i WHERE i.indrelid IN ({JOB_PARTITIONS}))"
                ),
                &[&holding],
            )
            .unwrap()
            .get(0);
        tx.commit().unwrap();
        // 68 jobs claimed, each read by the claim index and again by id (136);
        // a sort of the queue reads 5,000 a claim.
        assert!(
            (68..1000).contains(&fetched),
            "[{}] six claims fetched {fetched} rows of alkstore.jobs",
            target.name()
        );
    }
}

#[test]
fn waiting_workers_are_woken_once_per_transaction_and_queue_after_commit() {
    for target in pg_targets() {
        let q = fresh("wake");
        let mut worker = client(&target);
        let channel: String = worker
            .query_one("SELECT alk_listen_queue($1, 30)", &[&q])
            .unwrap()
            .get(0);
        assert_eq!(channel, "alkstore_jobs");
        let mut producer = client(&target);
        let mut tx = producer.transaction().unwrap();
        for _ in 0..3 {
            tx.execute("SELECT alk_enqueue($1, NULL, '1')", &[&q])
                .unwrap();
        }
        assert_eq!(
            next_notification(&mut worker, &[&q], Duration::from_millis(200)),
            None,
            "nothing before commit"
        );
        tx.commit().unwrap();
        assert_eq!(
            next_notification(&mut worker, &[&q], Duration::from_secs(5)),
            Some(("alkstore_jobs".into(), q.clone()))
        );
        assert_eq!(
            next_notification(&mut worker, &[&q], Duration::from_millis(200)),
            None,
            "one per transaction and queue"
        );
        // A rolled-back enqueue wakes nobody.
        let mut tx = producer.transaction().unwrap();
        tx.execute("SELECT alk_enqueue($1, NULL, '1')", &[&q])
            .unwrap();
        tx.rollback().unwrap();
        assert_eq!(
            next_notification(&mut worker, &[&q], Duration::from_millis(200)),
            None
        );
        // Outboxes and streams have their own registrations.
        let o = fresh("wake-outbox");
        let ob = format!("__alkstore_outbox:{o}");
        worker
            .execute("SELECT alk_listen_outbox($1)", &[&o])
            .unwrap();
        producer
            .execute("SELECT alk_outbox_enqueue($1, NULL, '1')", &[&o])
            .unwrap();
        assert_eq!(
            next_notification(&mut worker, &[&ob], Duration::from_secs(5)),
            Some(("alkstore_jobs".into(), ob.clone()))
        );
        let s = fresh("wake-stream");
        assert_eq!(
            worker
                .query_one("SELECT alk_listen_stream($1)", &[&s])
                .unwrap()
                .get::<_, String>(0),
            "alkstore_events"
        );
        producer
            .execute("SELECT alk_publish($1, '1')", &[&s])
            .unwrap();
        assert_eq!(
            next_notification(&mut worker, &[&s], Duration::from_secs(5)),
            Some(("alkstore_events".into(), s.clone()))
        );
        // Unregistered: no wake-up is sent (a plain LISTEN elsewhere hears nothing).
        assert!(worker
            .query_one("SELECT alk_unlisten_queue($1)", &[&q])
            .unwrap()
            .get::<_, bool>(0));
        producer
            .execute("SELECT alk_enqueue($1, NULL, '1')", &[&q])
            .unwrap();
        assert_eq!(
            next_notification(&mut worker, &[&q], Duration::from_millis(300)),
            None,
            "no waiter, no NOTIFY"
        );
    }
}

/// Enqueuers skip the registrations table while no session holds a queue's
/// waiting lock (docs/decisions.md, "Lost wake-ups"). The cases that lock
/// cannot tell apart: a session registered on the queue it enqueues to is
/// woken by its own commit, and a registration that rolled back (it keeps
/// the lock) wakes nobody.
#[test]
fn a_waiter_wakes_itself_and_a_rolled_back_registration_wakes_nobody() {
    for target in pg_targets() {
        let q = fresh("self-wake");
        let mut worker = client(&target);
        // A session's first enqueue always reads the table: warm it first.
        worker
            .query_one("SELECT alk_enqueue($1, NULL, '1')", &[&fresh("warm")])
            .unwrap();
        worker
            .query_one("SELECT alk_listen_queue($1, 30)", &[&q])
            .unwrap();
        worker
            .query_one("SELECT alk_enqueue($1, NULL, '1')", &[&q])
            .unwrap();
        assert_eq!(
            next_notification(&mut worker, &[&q], Duration::from_secs(5)),
            Some(("alkstore_jobs".into(), q.clone())),
            "[{}] its own enqueue",
            target.name()
        );
        let q = fresh("rolled-back-wait");
        let mut listener = client(&target);
        listener.batch_execute("LISTEN alkstore_jobs").unwrap();
        let mut gone = client(&target);
        let mut tx = gone.transaction().unwrap();
        tx.query_one("SELECT alk_listen_queue($1, 30)", &[&q])
            .unwrap();
        tx.rollback().unwrap();
        let mut producer = client(&target);
        for _ in 0..2 {
            producer
                .query_one("SELECT alk_enqueue($1, NULL, '1')", &[&q])
                .unwrap();
        }
        assert_eq!(
            next_notification(&mut listener, &[&q], Duration::from_millis(300)),
            None,
            "[{}] no waiter, no NOTIFY",
            target.name()
        );
    }
}

#[test]
fn notifications_reach_plain_listen_after_commit_in_commit_order() {
    for target in pg_targets() {
        let mut listener = client(&target);
        let mut notifier = client(&target);
        let ch = fresh("ch");
        let pg_channel: String = listener
            .query_one("SELECT alk_channel($1)", &[&ch])
            .unwrap()
            .get(0);
        assert_eq!(pg_channel, format!("alk:{ch}"));
        listener
            .batch_execute(&format!("LISTEN \"{pg_channel}\""))
            .unwrap();
        let mut tx = notifier.transaction().unwrap();
        tx.execute("SELECT alk_notify($1, '{\"n\": 1}')", &[&ch])
            .unwrap();
        assert_eq!(
            next_notification(&mut listener, &[], Duration::from_millis(200)),
            None
        );
        tx.commit().unwrap();
        let mut tx = notifier.transaction().unwrap();
        tx.execute("SELECT alk_notify($1, '\"dropped\"')", &[&ch])
            .unwrap();
        tx.rollback().unwrap();
        notifier
            .execute("SELECT alk_notify($1, '2')", &[&ch])
            .unwrap();
        notifier
            .execute("SELECT alk_notify($1, '3')", &[&ch])
            .unwrap();
        let got: Vec<String> = (0..3)
            .filter_map(|_| {
                next_notification(&mut listener, &[], Duration::from_secs(5)).map(|n| n.1)
            })
            .collect();
        assert_eq!(got, ["{\"n\": 1}", "2", "3"]);
        assert_eq!(
            next_notification(&mut listener, &[], Duration::from_millis(200)),
            None
        );
        // Long channel names map to a hash that fits PostgreSQL's 63 bytes.
        let long = "c".repeat(100);
        let mapped: String = listener
            .query_one("SELECT alk_channel($1)", &[&long])
            .unwrap()
            .get(0);
        assert!(mapped.starts_with("alk#") && mapped.len() == 36, "{mapped}");
        listener
            .batch_execute(&format!("LISTEN \"{mapped}\""))
            .unwrap();
        notifier
            .execute("SELECT alk_notify($1, '\"long\"')", &[&long])
            .unwrap();
        assert_eq!(
            next_notification(&mut listener, &[], Duration::from_secs(5)),
            Some((mapped, "\"long\"".into()))
        );
    }
}

/// The extension's claim and ack plan their statements once per session
/// (pg_ext/src/claim.rs, ack.rs). A session that claimed and acked before
/// the extension was dropped and created again under it — as a restore
/// with `--clean` does while workers stay connected — claims and acks the
/// new tables' jobs, and its errors still carry alkstore's codes.
#[test]
fn a_session_claims_and_acks_across_drop_and_create_extension() {
    let Some(url) = pg_database("claim_across_reinstall") else {
        return;
    };
    Install::Extension.install(&url);
    let mut worker = Client::connect(&url, NoTls).unwrap();
    let mut admin = Client::connect(&url, NoTls).unwrap();
    let round = |c: &mut Client, n: i32| -> Vec<i64> {
        c.batch_execute("SELECT alk_enqueue('q', NULL, '1'), alk_enqueue('q', NULL, '2')")
            .unwrap();
        let ids: Vec<i64> = c
            .query("SELECT id FROM alk_claim('q', 'w', $1)", &[&n])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        for id in &ids {
            let acked: bool = c
                .query_one("SELECT alk_ack($1, 'w')", &[id])
                .unwrap()
                .get(0);
            assert!(acked, "job {id}");
        }
        ids
    };
    assert_eq!(round(&mut worker, 1).len(), 1);
    assert_eq!(round(&mut worker, 2).len(), 2);
    admin
        .batch_execute("DROP EXTENSION alkstore CASCADE; CREATE EXTENSION alkstore")
        .unwrap();
    // The new tables start their ids again: the jobs claimed are theirs.
    assert_eq!(round(&mut worker, 1), vec![1]);
    assert_eq!(round(&mut worker, 2), vec![2, 3]);
    // alk_ack_batch's statement and its follow-up (a group's next job),
    // planned before another drop and create, run after it.
    let batch = |c: &mut Client| -> (i32, Vec<i64>) {
        c.batch_execute(
            r#"SELECT alk_enqueue('g', '{"group_key": "a"}', '1'),
                      alk_enqueue('g', '{"group_key": "a"}', '2')"#,
        )
        .unwrap();
        let claim = |c: &mut Client| -> Vec<i64> {
            c.query("SELECT id FROM alk_claim('g', 'w', 5)", &[])
                .unwrap()
                .iter()
                .map(|r| r.get(0))
                .collect()
        };
        let head = claim(c);
        let acked: i32 = c
            .query_one("SELECT alk_ack_batch($1, 'w')", &[&head])
            .unwrap()
            .get(0);
        let next = claim(c);
        let left: i32 = c
            .query_one("SELECT alk_ack_batch($1, 'w')", &[&next])
            .unwrap()
            .get(0);
        assert_eq!(left, 1);
        (acked, [head, next].concat())
    };
    let (acked, ids) = batch(&mut worker);
    assert_eq!((acked, ids.len()), (1, 2));
    admin
        .batch_execute("DROP EXTENSION alkstore CASCADE; CREATE EXTENSION alkstore")
        .unwrap();
    assert_eq!(batch(&mut worker), (1, vec![1, 2]));
    let e = worker
        .query("SELECT * FROM alk_claim('', 'w', 1)", &[])
        .unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("ALK01"), "{e}");
    let e = worker.query("SELECT alk_ack(1, '')", &[]).unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("ALK01"), "{e}");
    let e = worker
        .query("SELECT alk_ack_batch('{1, NULL}', 'w')", &[])
        .unwrap_err();
    assert_eq!(e.code().map(|c| c.code()), Some("ALK05"), "{e}");
}

/// A worker's transaction that catches a failed call at a savepoint and
/// goes on: the extension's claim and acks (pg_ext/src/claim.rs, ack.rs)
/// raise alkstore's errors, and after the rollback to the savepoint — and
/// after calls that succeed — the session's search path is its own again
/// (the library pushes its own around its statements) and its claims and
/// acks work in the same transaction.
#[test]
fn a_failed_call_rolled_back_to_a_savepoint_leaves_the_session_as_it_was() {
    for target in pg_targets() {
        let mut c = client(&target);
        c.batch_execute("SET search_path = public, pg_catalog")
            .unwrap();
        let path = |c: &mut postgres::Transaction| -> String {
            c.query_one("SELECT current_schemas(true)::text", &[])
                .unwrap()
                .get(0)
        };
        let q = fresh("savepoint");
        let mut tx = c.transaction().unwrap();
        let before = path(&mut tx);
        let id: i64 = tx
            .query_one("SELECT alk_enqueue($1, NULL, '1')", &[&q])
            .unwrap()
            .get(0);
        for (sql, code) in [
            ("SELECT id FROM alk_claim('', 'w', 1)", "ALK01"),
            ("SELECT alk_ack(1, '')", "ALK01"),
            ("SELECT alk_ack_batch('{1}', '')", "ALK01"),
            ("SELECT alk_ack_batch('{{1}}', 'w')", "ALK05"),
        ] {
            let mut sp = tx.transaction().unwrap();
            let e = sp.query(sql, &[]).unwrap_err();
            assert_eq!(
                e.code().map(|c| c.code()),
                Some(code),
                "[{}] {sql}: {e}",
                target.name()
            );
            sp.rollback().unwrap();
            assert_eq!(path(&mut tx), before, "[{}] after {sql}", target.name());
        }
        let claimed: Vec<i64> = tx
            .query("SELECT id FROM alk_claim($1, 'w', 1)", &[&q])
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(claimed, vec![id], "[{}]", target.name());
        let acked: bool = tx
            .query_one("SELECT alk_ack($1, 'w')", &[&id])
            .unwrap()
            .get(0);
        assert!(acked, "[{}]", target.name());
        let id: i64 = tx
            .query_one("SELECT alk_enqueue($1, NULL, '2')", &[&q])
            .unwrap()
            .get(0);
        tx.query("SELECT id FROM alk_claim($1, 'w', 1)", &[&q])
            .unwrap();
        let acked: i32 = tx
            .query_one("SELECT alk_ack_batch(ARRAY[$1::bigint], 'w')", &[&id])
            .unwrap()
            .get(0);
        assert_eq!(acked, 1, "[{}]", target.name());
        assert_eq!(
            path(&mut tx),
            before,
            "[{}] after a claim and acks",
            target.name()
        );
        tx.commit().unwrap();
    }
}
