//! Contract v1.1 §F (schedules) on every engine: the same fire times on
//! both (a table of specs and instants), invalid specs refused with the
//! reason, at most one job per occurrence with 8 concurrent tickers, no
//! replay of occurrences missed while nobody ticked.

use alkstore_core::schedule::Spec;
use alkstore_core::time::{format_ms, now_ms, parse_rfc3339_ms};
use alkstore_tests::*;
use serde_json::{json, Value};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// (spec, instant, next fire time after it, last fire time at or before it)
const FIRE_TIMES: &[(&str, &str, &str, &str)] = &[
    (
        r#"{"cron": "*/15 * * * *"}"#,
        "2026-11-30T10:07:00.000Z",
        "2026-11-30T10:15:00.000Z",
        "2026-11-30T10:00:00.000Z",
    ),
    (
        r#"{"cron": "*/15 * * * *"}"#,
        "2026-11-30T10:15:00.000Z",
        "2026-11-30T10:30:00.000Z",
        "2026-11-30T10:15:00.000Z",
    ),
    // Month ends and year ends.
    (
        r#"{"cron": "0 0 1 * *"}"#,
        "2026-12-31T23:59:59.999Z",
        "2027-01-01T00:00:00.000Z",
        "2026-12-01T00:00:00.000Z",
    ),
    (
        r#"{"cron": "30 9 31 * *"}"#,
        "2026-04-01T00:00:00.000Z",
        "2026-05-31T09:30:00.000Z",
        "2026-03-31T09:30:00.000Z",
    ),
    (
        r#"{"cron": "59 23 28-31 2 *"}"#,
        "2027-02-27T00:00:00.000Z",
        "2027-02-28T23:59:00.000Z",
        "2026-02-28T23:59:00.000Z",
    ),
    // Leap days.
    (
        r#"{"cron": "0 12 29 2 *"}"#,
        "2026-03-01T00:00:00.000Z",
        "2028-02-29T12:00:00.000Z",
        "2024-02-29T12:00:00.000Z",
    ),
    (
        // 29 February or a Monday of February: either day field.
        r#"{"cron": "0 0 29 2 1"}"#,
        "2026-11-30T00:00:00.000Z",
        "2027-02-01T00:00:00.000Z",
        "2026-02-23T00:00:00.000Z",
    ),
    // Sunday as 0 and as 7 (2026-11-29 is a Sunday).
    (
        r#"{"cron": "0 8 * * 0"}"#,
        "2026-11-25T00:00:00.000Z",
        "2026-11-29T08:00:00.000Z",
        "2026-11-22T08:00:00.000Z",
    ),
    (
        r#"{"cron": "0 8 * * 7"}"#,
        "2026-11-25T00:00:00.000Z",
        "2026-11-29T08:00:00.000Z",
        "2026-11-22T08:00:00.000Z",
    ),
    (
        r#"{"cron": "0 8 * * 5-7"}"#,
        "2026-11-29T08:00:00.000Z",
        "2026-12-04T08:00:00.000Z",
        "2026-11-29T08:00:00.000Z",
    ),
    // Both day fields restricted: either matches. A field starting with *
    // makes them combine with AND, and still allows only its own days
    // (contract v1.2 §L): */2 is odd days, */10 days 1, 11, 21 and 31.
    (
        r#"{"cron": "0 0 1 * 5"}"#,
        "2026-12-01T00:00:00.000Z",
        "2026-12-04T00:00:00.000Z",
        "2026-12-01T00:00:00.000Z",
    ),
    (
        r#"{"cron": "0 0 */2 * 5"}"#,
        "2026-11-30T00:00:00.000Z",
        "2026-12-11T00:00:00.000Z",
        "2026-11-27T00:00:00.000Z",
    ),
    (
        r#"{"cron": "0 6 */10 * *"}"#,
        "2026-12-02T00:00:00.000Z",
        "2026-12-11T06:00:00.000Z",
        "2026-12-01T06:00:00.000Z",
    ),
    (
        r#"{"cron": "0 6 */10 * *"}"#,
        "2026-12-22T00:00:00.000Z",
        "2026-12-31T06:00:00.000Z",
        "2026-12-21T06:00:00.000Z",
    ),
    (
        r#"{"cron": "0 6 * * */3"}"#,
        "2026-12-02T06:00:00.000Z",
        "2026-12-05T06:00:00.000Z",
        "2026-12-02T06:00:00.000Z",
    ),
    (
        r#"{"cron": "5-10/5,59 1 * * 1-5"}"#,
        "2026-11-30T01:05:00.000Z",
        "2026-11-30T01:10:00.000Z",
        "2026-11-30T01:05:00.000Z",
    ),
    (
        r#"{"cron": "0 9-17/4 * 1,6,12 *"}"#,
        "2026-11-30T23:00:00.000Z",
        "2026-12-01T09:00:00.000Z",
        "2026-06-30T17:00:00.000Z",
    ),
    (
        r#"{"every_s": 60}"#,
        "2026-11-30T10:07:30.500Z",
        "2026-11-30T10:08:00.000Z",
        "2026-11-30T10:07:00.000Z",
    ),
    (
        r#"{"every_s": 86400}"#,
        "2026-11-30T00:00:00.000Z",
        "2026-12-01T00:00:00.000Z",
        "2026-11-30T00:00:00.000Z",
    ),
    (
        r#"{"every_s": 2.5}"#,
        "2026-11-30T10:00:01.000Z",
        "2026-11-30T10:00:02.500Z",
        "2026-11-30T10:00:00.000Z",
    ),
    (
        r#"{"every_s": 7}"#,
        "1970-01-01T00:00:13.999Z",
        "1970-01-01T00:00:14.000Z",
        "1970-01-01T00:00:07.000Z",
    ),
];

#[test]
fn both_engines_compute_the_same_fire_times() {
    // SQLite's engine computes them with alkstore_core::schedule.
    for (spec, at, next, last) in FIRE_TIMES {
        let s = Spec::parse(&serde_json::from_str(spec).unwrap()).unwrap();
        let t = parse_rfc3339_ms(at).unwrap();
        assert_eq!(
            format_ms(s.next_after(t)),
            *next,
            "[sqlite] {spec} after {at}"
        );
        assert_eq!(
            s.last_at_or_before(t).map(format_ms).as_deref(),
            Some(*last),
            "[sqlite] {spec} at {at}"
        );
    }
    // PostgreSQL's with the PL/pgSQL of sql/postgres/schedule.sql, whatever
    // the session's time zone.
    for target in pg_targets() {
        let mut c = postgres::Client::connect(target.pg_url(), postgres::NoTls).unwrap();
        c.batch_execute("SET TimeZone = 'America/St_Johns'")
            .unwrap();
        for (spec, at, next, last) in FIRE_TIMES {
            let row = c
                .query_one(
                    "SELECT alkstore.ts(alkstore.schedule_next(alkstore.schedule_parse($1::text::jsonb), $2::text::timestamptz)),
                            alkstore.ts(alkstore.schedule_last(alkstore.schedule_parse($1::text::jsonb), $2::text::timestamptz))",
                    &[spec, at],
                )
                .unwrap();
            let (n, l): (String, String) = (row.get(0), row.get(1));
            assert_eq!(
                (n.as_str(), l.as_str()),
                (*next, *last),
                "[{}] {spec} at {at}",
                target.name()
            );
        }
    }
}

per_engine! {
    fn invalid_specs_are_refused_with_the_reason_and_write_nothing(target) {
        let mut db = target.connect();
        let e = db.engine();
        let name = fresh("bad-schedule");
        for (spec, why) in [
            (r#"{"cron": "* * * *"}"#, "5 fields"),
            (r#"{"cron": "60 * * * *"}"#, "minute"),
            (r#"{"cron": "* 24 * * *"}"#, "hour"),
            (r#"{"cron": "* * 0 * *"}"#, "day-of-month"),
            (r#"{"cron": "* * * 13 *"}"#, "month"),
            (r#"{"cron": "* * * * 8"}"#, "day-of-week"),
            (r#"{"cron": "* * * JAN *"}"#, "no names"),
            (r#"{"cron": "* * L * *"}"#, "no names"),
            (r#"{"cron": "* * * * 1#2"}"#, "no names"),
            (r#"{"cron": "5/15 * * * *"}"#, "a step needs"),
            (r#"{"cron": "*/0 * * * *"}"#, "at least 1"),
            (r#"{"cron": "10-5 * * * *"}"#, "low to high"),
            (r#"{"cron": "+5 * * * *"}"#, "expected"),
            (r#"{"cron": "99999999999 * * * *"}"#, "from 0 to 59"),
            (r#"{"cron": "*\u00a0* * * *"}"#, "5 fields"),
            (r#"{"cron": "0 0 30 2 *"}"#, "never fires"),
            (r#"{"every_s": 0}"#, "every_s"),
            (r#"{"every_s": 0.0004}"#, "every_s"),
            (r#"{"every_s": -5}"#, "every_s"),
            (r#"{"every_s": "60"}"#, "every_s"),
            (r#"{"every_s": 60, "cron": "* * * * *"}"#, "exactly one"),
            (r#"{"at": "noon"}"#, "exactly one"),
            (r#""* * * * *""#, "JSON object"),
            // 1025 bytes: bounded, so that no spec makes every tick slow.
            (
                &format!(r#"{{"cron": "{}0 * * * *"}}"#, "0,".repeat(508)),
                "at most 1024 bytes",
            ),
        ] {
            let err = db
                .call("alk_schedule", &[t(&name), t("q"), j(spec), j("{}")])
                .unwrap_err();
            assert_eq!(err.code, "ALK03", "[{e}] {spec}");
            assert!(err.message.contains(why), "[{e}] {spec}: {}", err.message);
        }
        assert_eq!(
            db.code(
                "alk_schedule",
                &[
                    t(&name),
                    t("q"),
                    j(r#"{"every_s": 60}"#),
                    j("1"),
                    j(r#"{"idempotency_key": "k"}"#)
                ]
            ),
            "ALK03",
            "[{e}]"
        );
        // Nor dependencies (contract v1.2 §J): a job a schedule named once
        // would have ended long before its later occurrences.
        let err = db
            .call(
                "alk_schedule",
                &[t(&name), t("q"), j(r#"{"every_s": 60}"#), j("1"), j(r#"{"depends_on": [1]}"#)],
            )
            .unwrap_err();
        assert!(err.code == "ALK03" && err.message.contains("depends_on"), "[{e}] {err:?}");
        assert_eq!(
            db.code(
                "alk_schedule",
                &[t(&name), t("__alkstore_q"), j(r#"{"every_s": 60}"#), j("1")]
            ),
            "ALK02"
        );
        assert_eq!(
            db.code(
                "alk_schedule",
                &[t(""), t("q"), j(r#"{"every_s": 60}"#), j("1")]
            ),
            "ALK01"
        );
        assert_eq!(
            db.code(
                "alk_schedule",
                &[t(&name), t("q"), j(r#"{"every_s": 60}"#), Arg::Null]
            ),
            "ALK04"
        );
        let all = db.ok("alk_schedules", &[]);
        assert!(
            all.as_array()
                .unwrap()
                .iter()
                .all(|s| s["name"] != name.as_str()),
            "[{e}] nothing written"
        );
    }
}

/// Sleeps until the clock is early in a `period_ms` window, so that the
/// steps of a test run within one occurrence of an `every_s` schedule.
fn early_in_window(period_ms: i64) {
    loop {
        let into = now_ms().rem_euclid(period_ms);
        if (200..1000).contains(&into) {
            return;
        }
        sleep_ms(((period_ms - into + 250).rem_euclid(period_ms)) as u64);
    }
}

fn jobs_of(db: &mut dyn Db, q: &str) -> i64 {
    let s = db.ok("alk_queue_stats", &[t(q)]);
    s["pending"].as_i64().unwrap() + s["scheduled"].as_i64().unwrap()
}

per_engine! {
    fn eight_concurrent_tickers_enqueue_each_occurrence_once(target) {
        let mut db = target.connect();
        let e = db.engine();
        let (name, q) = (fresh("tick8"), fresh("tick8-q"));
        early_in_window(5000);
        let next = db.ok(
            "alk_schedule",
            &[
                t(&name),
                t(&q),
                j(r#"{"every_s": 5}"#),
                j(r#"{"report": "hourly"}"#),
                j(r#"{"priority": 7}"#),
            ],
        );
        // Not due until its next fire time: nothing yet.
        db.int("alk_schedule_tick", &[]);
        assert_eq!(jobs_of(&mut *db, &q), 0, "[{e}] next fire time {next}");
        sleep_ms(
            (parse_rfc3339_ms(next.as_str().unwrap()).unwrap() - now_ms() + 300).max(0) as u64,
        );
        let barrier = Arc::new(Barrier::new(8));
        let tickers: Vec<_> = (0..8)
            .map(|_| {
                let (tt, b) = (target.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let mut db = tt.connect();
                    b.wait();
                    db.int("alk_schedule_tick", &[])
                })
            })
            .collect();
        for t in tickers {
            t.join().unwrap();
        }
        // This test runs on the extension and through PgBouncer at once, on
        // one database and in the same 5 s window: the other's tick may hold
        // this schedule's row (its tickers skip it) and commit a moment
        // after these ended. Wait for that; the count must then be one.
        let deadline = Instant::now() + Duration::from_secs(5);
        while jobs_of(&mut *db, &q) == 0 && Instant::now() < deadline {
            sleep_ms(50);
        }
        assert_eq!(jobs_of(&mut *db, &q), 1, "[{e}] one job for the occurrence");
        db.int("alk_schedule_tick", &[]);
        assert_eq!(
            jobs_of(&mut *db, &q),
            1,
            "[{e}] ticking again changes nothing"
        );
        // The job is the schedule's payload with its options.
        let job = &db.ok("alk_claim", &[t(&q), t("w")])[0];
        assert_eq!(job["payload"], json!({"report": "hourly"}), "[{e}]");
        assert_eq!(
            db.ok("alk_get_job", &[job["id"].clone().into_arg()])["priority"],
            7,
            "[{e}]"
        );
        // Replacing the schedule keeps the record: the occurrence does not fire again.
        db.ok(
            "alk_schedule",
            &[
                t(&name),
                t(&q),
                j(r#"{"every_s": 5}"#),
                j(r#"{"report": "again"}"#),
            ],
        );
        db.int("alk_schedule_tick", &[]);
        let listed = db.ok("alk_schedules", &[]);
        let me = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name.as_str())
            .unwrap()
            .clone();
        assert_eq!(me["queue"], q, "[{e}]");
        assert_eq!(me["spec"], json!({"every_s": 5}), "[{e}]");
        assert_eq!(me["payload"], json!({"report": "again"}), "[{e}]");
        assert_eq!(me["opts"], Value::Null, "[{e}]");
        assert!(me["last_run_at"].is_string(), "[{e}] {me}");
        assert!(
            instant(&me["next_run_at"]) > instant(&me["last_run_at"]),
            "[{e}] {me}"
        );
        assert!(db.yes("alk_unschedule", &[t(&name)]), "[{e}]");
        assert!(!db.yes("alk_unschedule", &[t(&name)]), "[{e}]");
    }
}

#[test]
fn occurrences_missed_while_nobody_ticked_are_not_replayed() {
    // Nobody else may tick: every other test's tick would enqueue an
    // occurrence here too. SQLite targets are a file of their own; on
    // PostgreSQL, a database of its own per install.
    for target in isolated_targets("alkstore_test_schedules") {
        let mut db = target.connect();
        let e = db.engine();
        let (name, q) = (fresh("missed"), fresh("missed-q"));
        db.ok(
            "alk_schedule",
            &[t(&name), t(&q), j(r#"{"every_s": 1}"#), j("1")],
        );
        sleep_ms(3500); // three or four occurrences pass with nobody ticking
        db.begin();
        db.int("alk_schedule_tick", &[]);
        assert_eq!(
            jobs_of(&mut *db, &q),
            1,
            "[{e}] only the latest due occurrence"
        );
        db.commit();
        db.yes("alk_unschedule", &[t(&name)]);
    }
}

/// Issue 34 item 4: an app re-applies its schedules at start-up; a deploy
/// while an occurrence is due must not lose it.
#[test]
fn re_applying_an_unchanged_schedule_keeps_the_occurrence_that_is_due() {
    for target in isolated_targets("alkstore_test_schedules_reapply") {
        let mut db = target.connect();
        let e = db.engine();
        let (name, q) = (fresh("reapply"), fresh("reapply-q"));
        let spec = r#"{"every_s": 2}"#;
        let first = db.ok("alk_schedule", &[t(&name), t(&q), j(spec), j("1")]);
        let due = parse_rfc3339_ms(first.as_str().unwrap()).unwrap();
        sleep_ms((due - now_ms() + 300).max(0) as u64);
        // Due now; re-applied unchanged: it keeps its due time.
        let again = db.ok("alk_schedule", &[t(&name), t(&q), j(spec), j("1")]);
        assert_eq!(again, first, "[{e}] re-applying moved the due time");
        assert_eq!(db.int("alk_schedule_tick", &[]), 1, "[{e}] the due run");
        assert_eq!(jobs_of(&mut *db, &q), 1, "[{e}]");
        let row = db
            .ok("alk_schedules", &[])
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name.as_str())
            .cloned()
            .unwrap();
        assert_eq!(row["last_run_at"], first, "[{e}]");
        // A changed spec starts from now: its next time is ahead.
        let changed = db.ok(
            "alk_schedule",
            &[t(&name), t(&q), j(r#"{"every_s": 3600}"#), j("1")],
        );
        assert!(
            parse_rfc3339_ms(changed.as_str().unwrap()).unwrap() > now_ms(),
            "[{e}] {changed}"
        );
        db.yes("alk_unschedule", &[t(&name)]);
    }
}

trait IntoArg {
    fn into_arg(self) -> Arg;
}

impl IntoArg for Value {
    fn into_arg(self) -> Arg {
        Arg::Int(self.as_i64().unwrap())
    }
}
