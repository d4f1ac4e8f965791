//! Contract v1.1 §D (operating it): the listings and bulk actions, on every
//! engine. The PostgreSQL databases are shared with other tests, so each
//! test looks for its own (fresh) names in the listings.

use alkstore_tests::*;
use serde_json::{json, Value};

fn find<'a>(rows: &'a Value, key: &str, name: &str) -> Option<&'a Value> {
    rows.as_array().unwrap().iter().find(|r| r[key] == name)
}

per_engine! {
    /// `alk_queues` counts every queue in one pass (issue 64 item 1); each
    /// row must say what `alk_queue_stats` says of that queue, for jobs in
    /// every state: pending, scheduled, running, dead, completed, waiting
    /// behind a group's head, blocked on a dependency and parked at a key's
    /// limit.
    fn alk_queues_counts_each_queue_as_alk_queue_stats_does(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let (mixed, parked, empty_paused) = (fresh("adm-mix"), fresh("adm-park"), fresh("adm-pz"));
        db.ok(
            "alk_queue_configure",
            &[t(&mixed), j(r#"{"retain_completed_s": 3600, "max_attempts": 1}"#)],
        );
        let first = db.int("alk_enqueue", &[t(&mixed), Arg::Null, j("1")]);
        db.int("alk_enqueue", &[t(&mixed), j(r#"{"delay_s": 3600}"#), j("2")]);
        db.int("alk_enqueue", &[t(&mixed), j(&format!(r#"{{"depends_on": [{first}]}}"#)), j("3")]);
        for n in 0..3 {
            db.int("alk_enqueue", &[t(&mixed), j(r#"{"group_key": "g"}"#), j(&n.to_string())]);
        }
        for n in 0..3 {
            db.int("alk_enqueue", &[t(&mixed), Arg::Null, j(&format!("{}", 10 + n))]);
        }
        // Claim four (the first job, the group's head, two plain ones), ack
        // one, fail one: running, completed and dead jobs.
        let claimed = ids(&db.ok("alk_claim", &[t(&mixed), t("w"), Arg::Int(4)]));
        assert_eq!(claimed.len(), 4, "[{e}]");
        db.yes("alk_ack", &[Arg::Int(claimed[2]), t("w")]);
        db.yes("alk_fail", &[Arg::Int(claimed[3]), t("w"), t("x")]);
        db.ok("alk_queue_configure", &[t(&parked), j(r#"{"key_max_running": 1}"#)]);
        for n in 0..3 {
            db.int("alk_enqueue", &[t(&parked), j(r#"{"limit_key": "k"}"#), j(&n.to_string())]);
        }
        assert_eq!(ids(&db.ok("alk_claim", &[t(&parked), t("w"), Arg::Int(3)])).len(), 1, "[{e}]");
        db.yes("alk_queue_pause", &[t(&empty_paused)]);
        db.yes("alk_queue_pause", &[t(&parked)]);
        let all = db.ok("alk_queues", &[]);
        for q in [&mixed, &parked, &empty_paused] {
            let row = find(&all, "queue", q).unwrap_or_else(|| panic!("[{e}] {q} missing"));
            let stats = db.ok("alk_queue_stats", &[t(q)]);
            for k in ["pending", "scheduled", "running", "dead", "completed", "paused"] {
                assert_eq!(row[k], stats[k], "[{e}] {q} {k}: {row} vs {stats}");
            }
            let (a, b) = (&row["oldest_runnable_age_s"], &stats["oldest_runnable_age_s"]);
            assert_eq!(a.is_null(), b.is_null(), "[{e}] {q}: {row} vs {stats}");
            if let (Some(a), Some(b)) = (a.as_f64(), b.as_f64()) {
                assert!((a - b).abs() < 30.0, "[{e}] {q}: {row} vs {stats}");
            }
        }
        let row = find(&all, "queue", &mixed).unwrap();
        // pending: a plain one, two group members waiting, the blocked one.
        assert_eq!(
            (&row["pending"], &row["scheduled"], &row["running"], &row["dead"], &row["completed"]),
            (&json!(4), &json!(1), &json!(2), &json!(1), &json!(1)),
            "[{e}] {row}"
        );
        let row = find(&all, "queue", &parked).unwrap();
        assert_eq!(
            (&row["pending"], &row["running"], &row["paused"]),
            (&json!(2), &json!(1), &json!(true)),
            "[{e}] {row}"
        );
    }

    /// `alk_queue_limits()`: every queue with a limit set, its limits as
    /// `alk_queue_opts` shows them (what `alkstore queues` reads in one
    /// query); none for a queue without, or whose limits were all removed.
    fn alk_queue_limits_lists_the_limits_alk_queue_opts_shows(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let (capped, rated, keyed, plain, removed) = (
            fresh("lim-cap"),
            fresh("lim-rate"),
            fresh("lim-key"),
            fresh("lim-none"),
            fresh("lim-gone"),
        );
        db.ok("alk_queue_configure", &[t(&capped), j(r#"{"max_running": 3}"#)]);
        db.ok("alk_queue_configure", &[t(&rated), j(r#"{"rate_max": 10, "rate_per_s": 1.5}"#)]);
        db.ok(
            "alk_queue_configure",
            &[t(&keyed), j(r#"{"key_max_running": 1, "key_rate_max": 2, "key_rate_per_s": 60}"#)],
        );
        db.ok("alk_queue_configure", &[t(&plain), j(r#"{"max_attempts": 2}"#)]);
        db.ok("alk_queue_configure", &[t(&removed), j(r#"{"max_running": 1}"#)]);
        db.ok("alk_queue_configure", &[t(&removed), j(r#"{"max_running": null}"#)]);
        let all = db.ok("alk_queue_limits", &[]);
        let names: Vec<&str> = all
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["queue"].as_str().unwrap())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "[{e}] in name order");
        for q in [&capped, &rated, &keyed] {
            let row = find(&all, "queue", q).unwrap_or_else(|| panic!("[{e}] {q} missing"));
            let opts = db.ok("alk_queue_opts", &[t(q)]);
            for k in ["max_running", "rate_max", "rate_per_s", "key_max_running", "key_rate_max", "key_rate_per_s"] {
                assert_eq!(
                    row[k].as_f64(),
                    opts[k].as_f64(),
                    "[{e}] {q} {k}: {row} vs {opts}"
                );
            }
        }
        for q in [&plain, &removed] {
            assert!(find(&all, "queue", q).is_none(), "[{e}] {q} listed: {all}");
        }
        assert_eq!(
            find(&all, "queue", &rated).unwrap()["rate_per_s"].as_f64(),
            Some(1.5),
            "[{e}]"
        );
    }

    fn alk_queues_lists_every_queue_with_options_jobs_or_a_pause(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let (busy, configured, paused, untouched) = (
            fresh("adm-busy"),
            fresh("adm-conf"),
            fresh("adm-paused"),
            fresh("adm-none"),
        );
        let outbox = fresh("adm-outbox");
        // Listed only through its dead job: no options, nothing else.
        let dead_only = fresh("adm-dead");
        db.int(
            "alk_enqueue",
            &[t(&dead_only), j(r#"{"max_attempts": 1}"#), j("0")],
        );
        for id in ids(&db.ok("alk_claim", &[t(&dead_only), t("w"), Arg::Int(1)])) {
            db.yes("alk_fail", &[Arg::Int(id), t("w"), t("x")]);
        }
        db.int("alk_enqueue", &[t(&busy), Arg::Null, j("1")]);
        db.int(
            "alk_enqueue",
            &[t(&busy), j(r#"{"delay_s": 3600}"#), j("2")],
        );
        db.ok(
            "alk_queue_configure",
            &[t(&configured), j(r#"{"max_attempts": 2}"#)],
        );
        db.yes("alk_queue_pause", &[t(&paused)]);
        db.int("alk_outbox_enqueue", &[t(&outbox), Arg::Null, j("3")]);
        db.ok("alk_queue_opts", &[t(&untouched)]);
        let all = db.ok("alk_queues", &[]);
        let row = find(&all, "queue", &busy).unwrap_or_else(|| panic!("[{e}] {busy} missing"));
        let mut keys: Vec<&str> = row
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "completed",
                "dead",
                "oldest_runnable_age_s",
                "paused",
                "pending",
                "queue",
                "running",
                "scheduled"
            ],
            "[{e}]"
        );
        assert_eq!(
            (&row["pending"], &row["scheduled"], &row["paused"]),
            (&json!(1), &json!(1), &json!(false)),
            "[{e}]"
        );
        let conf = find(&all, "queue", &configured).unwrap_or_else(|| panic!("[{e}] {configured}"));
        assert_eq!(
            (&conf["pending"], &conf["oldest_runnable_age_s"]),
            (&json!(0), &Value::Null),
            "[{e}]"
        );
        let dead = find(&all, "queue", &dead_only).unwrap_or_else(|| panic!("[{e}] {dead_only}"));
        assert_eq!(
            (&dead["dead"], &dead["pending"]),
            (&json!(1), &json!(0)),
            "[{e}]"
        );
        assert_eq!(
            find(&all, "queue", &paused).unwrap()["paused"],
            true,
            "[{e}]"
        );
        let backing = format!("__alkstore_outbox:{outbox}");
        assert_eq!(
            find(&all, "queue", &backing).unwrap()["pending"],
            1,
            "[{e}] outboxes by backing queue"
        );
        assert!(
            find(&all, "queue", &untouched).is_none(),
            "[{e}] a queue only read is not listed"
        );
        let names: Vec<&str> = all
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["queue"].as_str().unwrap())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "[{e}] in name order");
    }
}

per_engine! {
    fn alk_list_jobs_pages_in_id_order_per_state(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("adm-list");
        db.ok(
            "alk_queue_configure",
            &[t(&q), j(r#"{"retain_completed_s": 3600}"#)],
        );
        let mut all = Vec::new();
        for i in 0..6 {
            all.push(db.int(
                "alk_enqueue",
                &[t(&q), j(r#"{"group_key": "g"}"#), j(&i.to_string())],
            ));
        }
        let plain = db.int("alk_enqueue", &[t(&q), j(r#"{"max_attempts": 1}"#), j("6")]);
        all.push(plain);
        // all[0] heads the group: claim it and the plain job; the plain one dies.
        let claimed = ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(10)]));
        assert_eq!(claimed, [all[0], plain], "[{e}]");
        db.yes("alk_fail", &[Arg::Int(plain), t("w"), t("boom")]);
        // Every job, two per page.
        let mut seen = Vec::new();
        let mut after = 0;
        loop {
            let page = db.ok(
                "alk_list_jobs",
                &[t(&q), Arg::Null, Arg::Int(after), Arg::Int(2)],
            );
            let got = ids(&page);
            assert!(got.len() <= 2, "[{e}]");
            if got.is_empty() {
                break;
            }
            after = *got.last().unwrap();
            seen.extend(got);
        }
        assert_eq!(seen, all, "[{e}] every job once, ascending id");
        let list = |db: &mut dyn Db, state: &str| {
            ids(&db.ok(
                "alk_list_jobs",
                &[t(&q), t(state), Arg::Int(0), Arg::Int(100)],
            ))
        };
        assert_eq!(list(db, "running"), [all[0]], "[{e}]");
        assert_eq!(list(db, "dead"), [plain], "[{e}]");
        assert_eq!(
            list(db, "pending"),
            all[1..6].to_vec(),
            "[{e}] waiting group members are pending"
        );
        assert!(
            db.yes("alk_ack", &[Arg::Int(all[0]), t("w"), j(r#"{"ok": 1}"#)]),
            "[{e}]"
        );
        let done = db.ok("alk_list_jobs", &[t(&q), t("completed")]);
        assert_eq!(
            ids(&done),
            [all[0]],
            "[{e}] defaults: from the start, 100 at most"
        );
        assert_eq!(
            done[0]["result"],
            json!({"ok": 1}),
            "[{e}] documents as alk_get_job"
        );
        assert_eq!(done[0], db.ok("alk_get_job", &[Arg::Int(all[0])]), "[{e}]");
        for bad in [t("waiting"), t("Dead"), t("")] {
            assert_eq!(db.code("alk_list_jobs", &[t(&q), bad]), "ALK05", "[{e}]");
        }
        assert_eq!(
            db.code("alk_list_jobs", &[t(&q), Arg::Null, Arg::Int(-1)]),
            "ALK05",
            "[{e}]"
        );
        assert_eq!(
            db.code(
                "alk_list_jobs",
                &[t(&q), Arg::Null, Arg::Int(0), Arg::Int(0)]
            ),
            "ALK05",
            "[{e}]"
        );
        assert_eq!(
            db.code("alk_list_jobs", &[t("__alkstore_x")]),
            "ALK02",
            "[{e}]"
        );
    }
}

per_engine! {
    fn requeue_dead_all_and_purge_act_on_one_queue_and_state(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let (q, other) = (fresh("adm-bulk"), fresh("adm-bulk-other"));
        let mut dead = Vec::new();
        for i in 0..3 {
            let opts = if i == 2 {
                r#"{"max_attempts": 1, "group_key": "g"}"#
            } else {
                r#"{"max_attempts": 1}"#
            };
            dead.push(db.int("alk_enqueue", &[t(&q), j(opts), j("1")]));
        }
        let o = db.int(
            "alk_enqueue",
            &[t(&other), j(r#"{"max_attempts": 1}"#), j("1")],
        );
        for (queue, n) in [(&q, 3), (&other, 1)] {
            for id in ids(&db.ok("alk_claim", &[t(queue), t("w"), Arg::Int(n)])) {
                db.yes("alk_fail", &[Arg::Int(id), t("w"), t("x")]);
            }
        }
        assert_eq!(db.int("alk_requeue_dead_all", &[t(&q)]), 3, "[{e}]");
        assert_eq!(db.int("alk_requeue_dead_all", &[t(&q)]), 0, "[{e}]");
        for id in &dead {
            let job = db.ok("alk_get_job", &[Arg::Int(*id)]);
            assert_eq!(
                (&job["state"], &job["attempts"]),
                (&json!("pending"), &json!(0)),
                "[{e}]"
            );
        }
        assert_eq!(
            db.ok("alk_get_job", &[Arg::Int(o)])["state"],
            "dead",
            "[{e}] other queues untouched"
        );
        // Purge: pending ones (waiting group members too), then dead.
        db.int("alk_enqueue", &[t(&q), j(r#"{"group_key": "g"}"#), j("2")]);
        assert_eq!(db.int("alk_purge", &[t(&q), t("pending")]), 4, "[{e}]");
        assert_eq!(db.ok("alk_queue_stats", &[t(&q)])["pending"], 0, "[{e}]");
        // The purged group starts over: a new job heads it.
        let head = db.int("alk_enqueue", &[t(&q), j(r#"{"group_key": "g"}"#), j("3")]);
        assert_eq!(
            ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(5)])),
            [head],
            "[{e}]"
        );
        assert_eq!(db.int("alk_purge", &[t(&other), t("dead")]), 1, "[{e}]");
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(o)]), Value::Null, "[{e}]");
        assert_eq!(db.int("alk_purge", &[t(&q), t("completed")]), 0, "[{e}]");
        for bad in [t("running"), t("waiting"), Arg::Null] {
            assert_eq!(db.code("alk_purge", &[t(&q), bad]), "ALK05", "[{e}]");
        }
        assert_eq!(
            db.ok("alk_get_job", &[Arg::Int(head)])["state"],
            "running",
            "[{e}] running jobs are never purged"
        );
    }
}

per_engine! {
    fn alk_streams_shows_offsets_and_consumer_lag(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let (s, empty) = (fresh("adm-stream"), fresh("adm-stream-empty"));
        for i in 0..3 {
            db.int("alk_publish", &[t(&s), j(&i.to_string())]);
        }
        db.yes("alk_save_offset", &[t(&s), t("behind"), Arg::Int(1)]);
        db.yes("alk_save_offset", &[t(&s), t("caught-up"), Arg::Int(3)]);
        db.yes("alk_save_offset", &[t(&empty), t("early"), Arg::Int(0)]);
        db.ok("alk_reset_offset", &[t(&empty), t("ahead"), Arg::Int(5)]);
        // Events count once a sequencer gave them offsets (v1.2 §K).
        db.int("alk_sequence", &[t(&s)]);
        let all = db.ok("alk_streams", &[]);
        let row = find(&all, "stream", &s).unwrap_or_else(|| panic!("[{e}] {s}"));
        assert_eq!(
            row,
            &json!({"stream": s, "first_offset": 1, "last_offset": 3, "consumers": [
                {"consumer": "behind", "offset": 1, "lag": 2},
                {"consumer": "caught-up", "offset": 3, "lag": 0}]}),
            "[{e}]"
        );
        let row = find(&all, "stream", &empty).unwrap_or_else(|| panic!("[{e}] {empty}"));
        assert_eq!(
            (&row["first_offset"], &row["last_offset"]),
            (&json!(0), &json!(0)),
            "[{e}]"
        );
        assert_eq!(
            row["consumers"][0],
            json!({"consumer": "ahead", "offset": 5, "lag": 0}),
            "[{e}] never negative"
        );
    }
}

per_engine! {
    fn alk_locks_lists_every_lease_and_whether_it_is_held(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let (held, released, expired) = (
            fresh("adm-held"),
            fresh("adm-released"),
            fresh("adm-expired"),
        );
        let ttl = |s: f64| Arg::Num(s);
        let token = db.int("alk_lock_acquire", &[t(&held), t("me"), ttl(60.0)]);
        db.int("alk_lock_acquire", &[t(&released), t("me"), ttl(60.0)]);
        db.yes("alk_lock_release", &[t(&released), t("me")]);
        db.int("alk_lock_acquire", &[t(&expired), t("me"), ttl(0.05)]);
        sleep_ms(100);
        let all = db.ok("alk_locks", &[]);
        let row = find(&all, "name", &held).unwrap();
        assert_eq!(
            (&row["owner"], &row["token"], &row["held"]),
            (&json!("me"), &json!(token), &json!(true)),
            "[{e}]"
        );
        assert!(
            instant(&row["expires_at"]) > alkstore_core::time::now_ms(),
            "[{e}]"
        );
        let row = find(&all, "name", &released).unwrap();
        assert_eq!(
            (&row["owner"], &row["expires_at"], &row["held"]),
            (&Value::Null, &Value::Null, &json!(false)),
            "[{e}]"
        );
        let row = find(&all, "name", &expired).unwrap();
        assert_eq!(
            (&row["owner"], &row["held"]),
            (&json!("me"), &json!(false)),
            "[{e}]"
        );
    }
}

per_engine! {
    fn alk_delete_job_deletes_one_dead_or_completed_job_and_nothing_else(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let q = fresh("adm-delete");
        db.ok("alk_queue_configure", &[t(&q), j(r#"{"retain_completed_s": 3600}"#)]);
        let enqueue = |db: &mut dyn Db| db.int("alk_enqueue", &[t(&q), j(r#"{"max_attempts": 1}"#), j("{}")]);
        let (dead, done, running) = (enqueue(db), enqueue(db), enqueue(db));
        assert_eq!(ids(&db.ok("alk_claim", &[t(&q), t("w"), Arg::Int(3)])), vec![dead, done, running]);
        assert!(db.yes("alk_fail", &[Arg::Int(dead), t("w"), t("no")]));
        assert!(db.yes("alk_ack", &[Arg::Int(done), t("w")]));
        let pending = enqueue(db);
        let state = |db: &mut dyn Db, id: i64| db.ok("alk_get_job", &[Arg::Int(id)])["state"].clone();
        assert_eq!(state(db, done), "completed", "[{e}]");
        for (id, why) in [(pending, "pending"), (running, "running")] {
            assert!(!db.yes("alk_delete_job", &[Arg::Int(id)]), "[{e}] a {why} job is cancel's");
            assert!(!state(db, id).is_null(), "[{e}] {why} kept");
        }
        assert!(db.yes("alk_delete_job", &[Arg::Int(dead)]), "[{e}]");
        assert!(db.yes("alk_delete_job", &[Arg::Int(done)]), "[{e}]");
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(dead)]), Value::Null, "[{e}]");
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(done)]), Value::Null, "[{e}]");
        assert!(!db.yes("alk_delete_job", &[Arg::Int(dead)]), "[{e}] once");
        assert!(!db.yes("alk_delete_job", &[Arg::Int(i64::MAX)]), "[{e}] unknown");
        let stats = db.ok("alk_queue_stats", &[t(&q)]);
        assert_eq!((stats["dead"].clone(), stats["completed"].clone()), (json!(0), json!(0)), "[{e}]");
        // A deleted dead job counts as dead for a later depends_on (as a
        // purged one does); a deleted completed one as acked.
        let after_dead = db.int("alk_enqueue", &[t(&q), j(&json!({"depends_on": [dead]}).to_string()), j("{}")]);
        let doc = db.ok("alk_get_job", &[Arg::Int(after_dead)]);
        assert_eq!(doc["state"], "dead", "[{e}] {doc}");
        assert_eq!(doc["last_error"], format!("dependency {dead} dead"), "[{e}]");
        assert_eq!(db.ok("alk_job_errors", &[Arg::Int(after_dead)]), json!([]), "[{e}] written dead, never ran");
        let after_done = db.int("alk_enqueue", &[t(&q), j(&json!({"depends_on": [done]}).to_string()), j("{}")]);
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(after_done)])["waiting_for"], Value::Null, "[{e}] runnable");
        // Ids as alk_requeue_dead takes them.
        for bad in [Arg::Int(0), Arg::Int(-1), Arg::Null] {
            let want = db.call("alk_requeue_dead", std::slice::from_ref(&bad)).map_err(|f| f.code);
            let got = db.call("alk_delete_job", std::slice::from_ref(&bad)).map_err(|f| f.code);
            assert_eq!(got, want, "[{e}] {bad:?}");
        }
    }
}

per_engine! {
    /// Issue 57: the admin functions take exactly the backing names that
    /// `alk_queues` lists for outboxes, so an operator can list an outbox's
    /// dead messages, requeue and purge them; every other function keeps
    /// refusing the prefix, and a backing name must name a valid outbox.
    fn an_operator_lists_requeues_and_purges_an_outboxs_messages(_target) {
        let mut db = _target.connect();
        let db = &mut *db;
        let e = db.engine();
        let o = fresh("adm-outbox");
        let backing = format!("__alkstore_outbox:{o}");
        let dead = db.int("alk_outbox_enqueue", &[t(&o), Arg::Null, j(r#"{"mail": 1}"#)]);
        let pending = db.int("alk_outbox_enqueue", &[t(&o), Arg::Null, j(r#"{"mail": 2}"#)]);
        assert_eq!(ids(&db.ok("alk_outbox_claim", &[t(&o), t("relay")])), [dead]);
        assert!(db.yes("alk_fail", &[Arg::Int(dead), t("relay"), t("refused")]));
        let listed = db.ok("alk_queues", &[]);
        assert!(find(&listed, "queue", &backing).is_some(), "[{e}] {listed}");

        let rows = db.ok("alk_list_jobs", &[t(&backing), t("dead")]);
        assert_eq!(ids(&rows), [dead], "[{e}] {rows}");
        assert_eq!(db.int("alk_requeue_dead_all", &[t(&backing)]), 1, "[{e}]");
        assert_eq!(db.ok("alk_get_job", &[Arg::Int(dead)])["state"], "pending");
        assert_eq!(
            ids(&db.ok("alk_list_jobs", &[t(&backing), t("pending")])),
            [dead, pending],
            "[{e}]"
        );
        assert_eq!(db.int("alk_purge", &[t(&backing), t("pending")]), 2, "[{e}]");
        assert_eq!(db.ok("alk_outbox_stats", &[t(&o)])["pending"], 0);

        // Still refused: the prefix anywhere else, and a backing name that
        // names no valid outbox.
        for (f, args, want) in [
            ("alk_enqueue", vec![t(&backing), Arg::Null, j("1")], "ALK02"),
            ("alk_claim", vec![t(&backing), t("w")], "ALK02"),
            ("alk_queue_stats", vec![t(&backing)], "ALK02"),
            ("alk_list_jobs", vec![t("__alkstore_outbox:")], "ALK01"),
            ("alk_purge", vec![t("__alkstore_outbox:__alkstore_x"), t("pending")], "ALK02"),
            ("alk_requeue_dead_all", vec![t("__alkstore_other")], "ALK02"),
        ] {
            assert_eq!(db.code(f, &args), want, "[{e}] {f} {args:?}");
        }
    }
}
