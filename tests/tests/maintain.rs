//! `alk_maintain` (sql/postgres/maintain.sql): the maintenance worker's
//! chores for a database no worker serves, from a scheduler that starts
//! one command at a time — and the pg_cron recipe of docs/operating.md
//! that runs it, on the test cluster's pg_cron (`scripts/postgres.sh
//! install` preloads it). PostgreSQL only: SQLite has `alkstore maintain`.
//! Each test in databases of its own, where no worker sweeps and no other
//! test's transaction holds the job table's slots back.

use alkstore_tests::*;
use postgres::{Client, NoTls};
use std::time::{Duration, Instant};

fn client(url: &str) -> Client {
    Client::connect(url, NoTls).expect("connect")
}

/// The storage of a hot slot: a truncation gives it a new one.
fn filenode(c: &mut Client, slot: i16) -> u32 {
    c.query_one(
        &format!("SELECT pg_relation_filenode('alkstore.jobs_slot{slot}')::oid"),
        &[],
    )
    .unwrap()
    .get(0)
}

fn job(c: &mut Client, id: i64) -> serde_json::Value {
    c.query_one("SELECT alk_get_job($1)::text", &[&id])
        .unwrap()
        .get::<_, Option<String>>(0)
        .map_or(serde_json::Value::Null, |s| {
            serde_json::from_str(&s).unwrap()
        })
}

fn last_offset(c: &mut Client, stream: &str) -> i64 {
    c.query_one(
        "SELECT (alk_stream_info($1)->>'last_offset')::bigint",
        &[&stream],
    )
    .unwrap()
    .get(0)
}

/// What the chores have to do: a claim expired on its final attempt (the
/// sweep ends it), an event without its offset (the sequencer), a
/// completed job past its retention (the prune), and a hot slot whose jobs
/// were all acked (the rotation truncates it). Returns (the expired job,
/// the kept job, the hot slot and its storage).
fn chores(c: &mut Client) -> (i64, i64, i16, u32) {
    c.batch_execute(
        "SELECT alk_queue_configure('mt-expire', '{\"visibility_timeout_s\": 1, \"max_attempts\": 1}');
         SELECT alk_queue_configure('mt-kept', '{\"retain_completed_s\": 1}');
         SELECT alk_publish('mt-events', '{}');",
    )
    .unwrap();
    let expired: i64 = c
        .query_one("SELECT alk_enqueue('mt-expire', NULL, '{}')", &[])
        .unwrap()
        .get(0);
    c.query("SELECT id FROM alk_claim('mt-expire', 'w', 1)", &[])
        .unwrap();
    let kept: i64 = c
        .query_one("SELECT alk_enqueue('mt-kept', NULL, '{}')", &[])
        .unwrap()
        .get(0);
    c.query(
        "SELECT alk_ack(id, 'w') FROM alk_claim('mt-kept', 'w', 1)",
        &[],
    )
    .unwrap();
    let ids: Vec<i64> = c
        .query(
            "SELECT unnest(alk_enqueue_batch('mt-done', NULL, '[1, 2, 3]'))",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let slot: i16 = c
        .query_one("SELECT slot FROM alkstore.jobs WHERE id = $1", &[&ids[0]])
        .unwrap()
        .get(0);
    c.query(
        "SELECT alk_ack(id, 'w') FROM alk_claim('mt-done', 'w', 10)",
        &[],
    )
    .unwrap();
    let node = filenode(c, slot);
    // The expired claim and the kept job's retention both 1 s.
    sleep_ms(1200);
    (expired, kept, slot, node)
}

#[test]
fn alk_maintain_does_every_chore_each_in_a_transaction_of_its_own() {
    for (i, install) in Install::ALL.into_iter().enumerate() {
        let Some(url) = pg_database(&format!("alk_maintain_chores_{i}")) else {
            return;
        };
        install.install(&url);
        let name = format!("{install:?}");
        let mut c = client(&url);
        let (expired, kept, slot, node) = chores(&mut c);
        assert_eq!(job(&mut c, expired)["state"], "running", "[{name}]");
        assert_eq!(last_offset(&mut c, "mt-events"), 0, "[{name}]");
        let started = Instant::now();
        let rounds: i64 = c.query_one("CALL alk_maintain(8)", &[]).unwrap().get(0);
        let took = started.elapsed();
        assert!(rounds >= 2, "[{name}] {rounds} rounds in {took:?}");
        assert!(
            took >= Duration::from_secs(8),
            "[{name}] returned after {took:?}"
        );
        let dead = job(&mut c, expired);
        assert_eq!(dead["state"], "dead", "[{name}] swept: {dead}");
        assert_eq!(
            dead["last_error"], "visibility timeout exceeded on final attempt",
            "[{name}]"
        );
        assert_eq!(
            job(&mut c, kept),
            serde_json::Value::Null,
            "[{name}] pruned"
        );
        assert_eq!(last_offset(&mut c, "mt-events"), 1, "[{name}] sequenced");
        // A procedure's transactions after its first COMMIT begin after
        // its CALL statement: the rotation, which tells a transaction of
        // its own by its start, never ran there before alk_maintain told it.
        assert_ne!(
            filenode(&mut c, slot),
            node,
            "[{name}] hot slot {slot} was not truncated"
        );
        let age: Option<f64> = c
            .query_one(
                "SELECT (alk_queue_stats('mt-done')->>'last_sweep_age_s')::float8",
                &[],
            )
            .unwrap()
            .get(0);
        // Recorded in its first round, at most every 10 s after.
        assert!(
            age.is_some_and(|a| a < started.elapsed().as_secs_f64() + 1.0),
            "[{name}] {age:?} after {:?}",
            started.elapsed()
        );

        // Schedules tick (here, not above: their jobs would keep the hot
        // slots from ever emptying).
        c.batch_execute(
            "SELECT alk_schedule('mt-tick', 'mt-ticks', '{\"every_s\": 1}', '{}', NULL)",
        )
        .unwrap();
        c.query_one("CALL alk_maintain(2.5)", &[]).unwrap();
        let ticked: i64 = c
            .query_one(
                "SELECT (alk_queue_stats('mt-ticks')->>'pending')::bigint",
                &[],
            )
            .unwrap()
            .get(0);
        assert!(ticked >= 1, "[{name}] {ticked} jobs from the schedule");
    }
}

#[test]
fn alk_maintain_refuses_a_transaction_block_and_a_bad_duration() {
    for (i, install) in Install::ALL.into_iter().enumerate() {
        let Some(url) = pg_database(&format!("alk_maintain_refuses_{i}")) else {
            return;
        };
        install.install(&url);
        let name = format!("{install:?}");
        let target = Target::postgres(url.clone(), "isolated");
        let mut r = target.connect();
        for bad in [
            Arg::Num(-1.0),
            Arg::Num(f64::NAN),
            Arg::Num(3601.0),
            Arg::Null,
        ] {
            assert_eq!(
                r.code("alk_maintain", std::slice::from_ref(&bad)),
                "ALK05",
                "[{name}] {bad:?}"
            );
        }
        let mut c = client(&url);
        c.batch_execute(
            "SELECT alk_queue_configure('mt-block', '{\"visibility_timeout_s\": 1, \"max_attempts\": 1}')",
        )
        .unwrap();
        let id: i64 = c
            .query_one("SELECT alk_enqueue('mt-block', NULL, '{}')", &[])
            .unwrap()
            .get(0);
        c.query("SELECT id FROM alk_claim('mt-block', 'w', 1)", &[])
            .unwrap();
        sleep_ms(1100);
        // In a transaction block: one that wrote (every install sees it),
        // one that did not, empty or after a savepoint (the extension sees
        // it; the plain install's first COMMIT refuses it, which the
        // clients report as the same ALK05). Nothing is done.
        for opening in ["wrote", "empty", "savepoint"] {
            r.begin();
            match opening {
                "wrote" => {
                    r.call("alk_enqueue", &[t("mt-other"), Arg::Null, j("{}")])
                        .unwrap();
                }
                "savepoint" => r.exec("SAVEPOINT s"),
                _ => {}
            }
            assert_eq!(
                r.code("alk_maintain", &[Arg::Num(1.0)]),
                "ALK05",
                "[{name}] {opening}"
            );
            r.rollback();
            assert_eq!(
                job(&mut c, id)["state"],
                "running",
                "[{name}] {opening}: nothing swept"
            );
        }
        // A chore that fails in every round (a setting that is no boolean
        // fails every alk_sweep) fails the call at its end, with its error,
        // once the others' work is committed: a schedule ticked.
        c.batch_execute(
            "SET alkstore.rotation = 'maybe';
             SELECT alk_schedule('mt-failing', 'mt-failing', '{\"every_s\": 1}', '{}', NULL)",
        )
        .unwrap();
        let e = c.query_one("CALL alk_maintain(1.5)", &[]).unwrap_err();
        let e = e.as_db_error().expect("a database error");
        assert_eq!(e.code().code(), "ALK05", "[{name}] {e:?}");
        assert!(
            e.message().contains("sweep failed in every round"),
            "[{name}] {}",
            e.message()
        );
        let ticked: i64 = c
            .query_one(
                "SELECT (alk_queue_stats('mt-failing')->>'pending')::bigint",
                &[],
            )
            .unwrap()
            .get(0);
        assert!(ticked >= 1, "[{name}] the tick's work was kept");
    }
}

/// The recipe in docs/operating.md (`CALL alk_maintain(run_for_s)`), on the
/// plain install: pg_cron starts `CALL alk_maintain(50)` every minute as a
/// role granted nothing but alkstore_user, and the chores get done.
#[test]
fn pg_cron_runs_alk_maintain_as_the_operating_docs_say() {
    let Some(url) = pg_database("alk_maintain_cron") else {
        return;
    };
    Install::Plain.install(&url);
    let cron_url = pg_database_url(&url, "postgres");
    let mut cron = client(&cron_url);
    cron.batch_execute("CREATE EXTENSION IF NOT EXISTS pg_cron")
        .expect("pg_cron: scripts/postgres.sh install preloads it");
    let mut c = client(&url);
    let (expired, kept, slot, node) = chores(&mut c);

    /// Unschedules the job however the test ends.
    struct Job(Client);
    impl Drop for Job {
        fn drop(&mut self) {
            let _ = self.0.batch_execute(
                "SELECT cron.unschedule(jobid) FROM cron.job WHERE jobname = 'alk_maintain_cron'",
            );
            // (Its run may still be connected: the database goes with FORCE.)
            let _ = self.0.batch_execute(
                "DROP DATABASE IF EXISTS alk_maintain_cron WITH (FORCE);
                 DROP ROLE IF EXISTS alk_maintain_cron_user",
            );
        }
    }
    cron.batch_execute(
        "SELECT cron.unschedule(jobid) FROM cron.job WHERE jobname = 'alk_maintain_cron';
         DROP ROLE IF EXISTS alk_maintain_cron_user;
         CREATE ROLE alk_maintain_cron_user LOGIN;
         GRANT alkstore_user TO alk_maintain_cron_user;",
    )
    .unwrap();
    // The docs' command, with this database's name and a role granted
    // nothing but alkstore_user.
    cron.execute(
        "SELECT cron.schedule_in_database('alk_maintain_cron', '* * * * *', 'CALL alk_maintain(50)', $1,
                                          'alk_maintain_cron_user')",
        &[&"alk_maintain_cron"],
    )
    .unwrap();
    let mut cron = Job(cron);
    // pg_cron starts jobs on the minute: within 60 s, then the first round.
    let until = Instant::now() + Duration::from_secs(120);
    let done = loop {
        let swept = job(&mut c, expired)["state"] == "dead";
        let pruned = job(&mut c, kept).is_null();
        let sequenced = last_offset(&mut c, "mt-events") == 1;
        let rotated = filenode(&mut c, slot) != node;
        if swept && pruned && sequenced && rotated {
            break true;
        }
        if Instant::now() > until {
            eprintln!("swept {swept}, pruned {pruned}, sequenced {sequenced}, rotated {rotated}");
            break false;
        }
        std::thread::sleep(Duration::from_millis(250));
    };
    let runs: Vec<String> = cron
        .0
        .query(
            "SELECT d.status || ': ' || coalesce(d.return_message, '') FROM cron.job_run_details d
               JOIN cron.job j USING (jobid) WHERE j.jobname = 'alk_maintain_cron'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(done, "pg_cron's runs: {runs:?}");
    assert!(
        runs.iter().all(|r| !r.starts_with("failed")),
        "pg_cron's runs: {runs:?}"
    );
}

/// `url` with its database replaced by `db`.
fn pg_database_url(url: &str, db: &str) -> String {
    let config: postgres::Config = url.parse().unwrap();
    let current = config.get_dbname().unwrap();
    if url.contains(&format!("dbname={current}")) {
        url.replace(&format!("dbname={current}"), &format!("dbname={db}"))
    } else {
        url.replacen(&format!("/{current}"), &format!("/{db}"), 1)
    }
}
