//! The dashboard's JSON API over real HTTP, on SQLite, the extension and
//! the plain install: every endpoint against what the admin functions say,
//! the token, the browser session and its CSRF token, cross-site changes,
//! read-only mode, the live event stream, and a PostgreSQL role without
//! the admin grant.

mod common;

use alkstore::EnqueueOpts;
use alkstore_web::Config;
use common::*;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::time::Duration;

const TOKEN: &str = "test-token-0123456789";

fn with_token() -> Config {
    Config {
        token: Some(TOKEN.into()),
        ..Config::default()
    }
}

fn auth() -> [(&'static str, String); 1] {
    [("authorization", format!("Bearer {TOKEN}"))]
}

fn get_ok(server: &Server, path: &str) -> Value {
    let a = auth();
    let r = get(&server.url(path), &[(a[0].0, &a[0].1)]);
    assert_eq!(r.status, 200, "GET {path}: {}", r.text);
    r.json()
}

fn post_ok(server: &Server, path: &str, body: Option<&Value>) -> Value {
    let r = post_auth(server, path, body);
    assert_eq!(r.status, 200, "POST {path}: {}", r.text);
    r.json()
}

fn post_auth(server: &Server, path: &str, body: Option<&Value>) -> Answer {
    let a = auth();
    post(&server.url(path), &[(a[0].0, &a[0].1)], body)
}

/// A queue with a dead job (account 42), two pending ones (42 and 7).
fn seed(store: &alkstore::Store, queue: &str) -> (i64, i64, i64) {
    let q = store.queue(queue).unwrap();
    let dead = q
        .enqueue(&EnqueueOpts::new().max_attempts(1), &json!({"account": 42}))
        .unwrap();
    let claimed = q.claim("w", 1).unwrap();
    assert_eq!(claimed[0].id, dead);
    q.fail(dead, "w", "boom: the mail server said no").unwrap();
    let a = q
        .enqueue(
            &EnqueueOpts::new(),
            &json!({"account": 42, "user": {"email": "ada@example.com"}}),
        )
        .unwrap();
    let b = q
        .enqueue(&EnqueueOpts::new(), &json!({"account": 7}))
        .unwrap();
    (dead, a, b)
}

fn queue_row(all: &Value, queue: &str) -> Value {
    all.as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == queue)
        .cloned()
        .unwrap_or_else(|| panic!("{queue} not in {all}"))
}

/// Counts as the API gives them, without the age that moves.
fn counts(q: &Value) -> Value {
    let mut q = q.clone();
    q.as_object_mut().unwrap().remove("oldest_runnable_age_s");
    q
}

#[test]
fn listings_match_the_admin_functions() {
    for t in targets() {
        let store = alkstore::open(&t.url).unwrap();
        let queue = fresh("web-list");
        let (dead, a, b) = seed(&store, &queue);
        let server = serve(&t.url, with_token());
        let label = t.label;

        let all = get_ok(&server, "/api/queues");
        let want = store.call("alk_queues", &[]).unwrap();
        assert_eq!(
            counts(&queue_row(&all, &queue)),
            counts(&queue_row(&want, &queue)),
            "[{label}]"
        );
        assert_eq!(queue_row(&all, &queue)["dead"], 1, "[{label}]");

        let path = format!("/api/queues/{queue}/jobs");
        let ids = |v: &Value| -> Vec<i64> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|j| j["id"].as_i64().unwrap())
                .collect()
        };
        assert_eq!(
            ids(&get_ok(&server, &path)),
            vec![dead, a, b],
            "[{label}] every state"
        );
        assert_eq!(
            ids(&get_ok(&server, &format!("{path}?state=dead"))),
            vec![dead],
            "[{label}]"
        );
        assert_eq!(
            ids(&get_ok(&server, &format!("{path}?state=pending&limit=1"))),
            vec![a],
            "[{label}]"
        );
        assert_eq!(
            ids(&get_ok(
                &server,
                &format!("{path}?state=pending&after_id={a}")
            )),
            vec![b],
            "[{label}]"
        );
        // The page is alk_list_jobs' own documents.
        let listed = get_ok(&server, &format!("{path}?state=dead"));
        assert_eq!(
            listed[0],
            store.get_job(dead).unwrap().unwrap(),
            "[{label}]"
        );

        // Filters on payload fields.
        assert_eq!(
            ids(&get_ok(&server, &format!("{path}?filter=account%3D42"))),
            vec![dead, a],
            "[{label}]"
        );
        assert_eq!(
            ids(&get_ok(
                &server,
                &format!("{path}?filter=account%3D%2242%22")
            )),
            vec![dead, a],
            "[{label}] string or number"
        );
        assert_eq!(
            ids(&get_ok(
                &server,
                &format!("{path}?filter=user.email%3Dada@example.com")
            )),
            vec![a],
            "[{label}] nested"
        );
        assert_eq!(
            ids(&get_ok(&server, &format!("{path}?filter=account%3D99"))),
            Vec::<i64>::new(),
            "[{label}]"
        );
        let a_ = auth();
        let r = get(
            &server.url(&format!("{path}?filter=account%3D42&limit=1")),
            &[(a_[0].0, &a_[0].1)],
        );
        assert_eq!(
            r.through.as_deref(),
            Some(dead.to_string().as_str()),
            "[{label}] where the next page starts"
        );

        // Bad input: the contract's code, or the API's own message.
        for (bad, code) in [
            (format!("{path}?limit=0"), None),
            (format!("{path}?limit=1001"), None),
            (format!("{path}?filter=nofield"), None),
            (format!("{path}?state=sleeping"), Some("ALK05")),
            ("/api/queues/__alkstore_x/jobs".to_string(), Some("ALK02")),
        ] {
            let r = get(&server.url(&bad), &[(a_[0].0, &a_[0].1)]);
            assert_eq!(r.status, 400, "[{label}] {bad}: {}", r.text);
            assert_eq!(
                r.json()["code"].as_str(),
                code,
                "[{label}] {bad}: {}",
                r.text
            );
            assert!(!r.json()["error"].as_str().unwrap().is_empty());
        }

        let job = get_ok(&server, &format!("/api/jobs/{dead}"));
        assert_eq!(job, store.get_job(dead).unwrap().unwrap(), "[{label}]");
        assert_eq!(job["last_error"], "boom: the mail server said no");
        let r = get(&server.url("/api/jobs/999999999"), &[(a_[0].0, &a_[0].1)]);
        assert_eq!(r.status, 404, "[{label}]");
        let errors = get_ok(&server, &format!("/api/jobs/{dead}/errors"));
        assert_eq!(
            errors,
            store.job_errors(dead).unwrap().unwrap(),
            "[{label}]"
        );
        assert_eq!(
            errors[0]["error"], "boom: the mail server said no",
            "[{label}] {errors}"
        );
        assert_eq!(errors[0]["attempt"], 1, "[{label}] {errors}");
        assert_eq!(
            get_ok(&server, &format!("/api/jobs/{a}/errors")),
            json!([]),
            "[{label}]"
        );
        let r = get(
            &server.url("/api/jobs/999999999/errors"),
            &[(a_[0].0, &a_[0].1)],
        );
        assert_eq!(r.status, 404, "[{label}]");

        // Streams, schedules and leases, as their functions list them.
        let stream = fresh("web-stream");
        let s = store.stream(&stream).unwrap();
        s.publish(&json!({"n": 1}), None).unwrap();
        s.publish(&json!({"n": 2}), None).unwrap();
        store.sequence(None).unwrap();
        let first = s.read(0, 1).unwrap()[0].offset;
        assert!(s.save_offset("billing", first).unwrap());
        let schedule = fresh("web-schedule");
        store
            .schedule(
                &schedule,
                &queue,
                &alkstore::ScheduleSpec::Every(Duration::from_secs(3600)),
                &json!({"report": 1}),
                &EnqueueOpts::new(),
            )
            .unwrap();
        let lease = fresh("web-lease");
        let _guard = store
            .lock(&lease, "web-test", Duration::from_secs(60))
            .unwrap()
            .unwrap();
        for (path, function) in [
            ("/api/streams", "alk_streams"),
            ("/api/schedules", "alk_schedules"),
            ("/api/locks", "alk_locks"),
        ] {
            assert_eq!(
                get_ok(&server, path),
                store.call(function, &[]).unwrap(),
                "[{label}] {path}"
            );
        }
        let streams = get_ok(&server, "/api/streams");
        let ours = streams
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["stream"] == stream.as_str())
            .unwrap();
        assert_eq!(ours["consumers"][0]["lag"], 1, "[{label}] {ours}");
        assert!(get_ok(&server, "/api/schedules")
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == schedule.as_str()));
        assert!(get_ok(&server, "/api/locks")
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["name"] == lease.as_str() && l["held"] == true));
        store.unschedule(&schedule).unwrap();

        // A transaction holding an XID while the health panel reads.
        let holder = (t.label != "sqlite").then(|| {
            let mut c = postgres::Client::connect(&t.url, postgres::NoTls).unwrap();
            c.batch_execute("BEGIN; SELECT txid_current()").unwrap();
            c
        });
        let health = get_ok(&server, "/api/health");
        drop(holder);
        // Issue 57: how long ago a sweep ran (null before any).
        assert!(
            health
                .get("last_sweep_age_s")
                .is_some_and(|a| a.is_number() || a.is_null()),
            "[{label}] {health}"
        );
        if t.label == "sqlite" {
            assert_eq!(health["engine"], "sqlite");
            assert_eq!(health["journal_mode"], "wal");
            assert_eq!(health["maintenance_worker"], false, "{health}");
            assert!(health["pages"].as_i64().unwrap() > 0);
        } else {
            assert_eq!(health["engine"], "postgres");
            assert!(
                health["tables"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|t| t["table"] == "jobs"),
                "[{label}] {health}"
            );
            assert!(health["notification_queue_usage"].is_number());
            // Contract v1.3 §O; the maintenance worker serves only
            // alkstore_test_worker (tests/tests/maintenance.rs).
            assert_eq!(health["maintenance_worker"], false, "[{label}] {health}");
            assert_eq!(health["sees_all_sessions"], true, "[{label}] {health}");
            assert!(health["prepared_transactions"].is_number(), "{health}");
            let oldest = &health["oldest_transaction"];
            assert!(oldest["xmin_age"].is_number(), "[{label}] {health}");
            assert!(oldest["state"].is_string(), "[{label}] {health}");
        }
    }
}

#[test]
fn actions_change_what_the_admin_functions_say() {
    for t in targets() {
        let store = alkstore::open(&t.url).unwrap();
        let queue = fresh("web-act");
        let (dead, a, b) = seed(&store, &queue);
        let server = serve(&t.url, with_token());
        let label = t.label;
        let q = store.queue(&queue).unwrap();

        assert_eq!(
            post_ok(&server, &format!("/api/jobs/{dead}/requeue"), None),
            json!({"requeued": true}),
            "[{label}]"
        );
        assert_eq!(store.get_job(dead).unwrap().unwrap()["state"], "pending");
        assert_eq!(
            post_ok(&server, &format!("/api/jobs/{dead}/requeue"), None),
            json!({"requeued": false}),
            "[{label}] not dead"
        );
        assert_eq!(
            post_ok(&server, &format!("/api/jobs/{b}/cancel"), None),
            json!({"cancelled": true}),
            "[{label}]"
        );
        assert!(store.get_job(b).unwrap().is_none());
        assert_eq!(
            post_ok(&server, &format!("/api/jobs/{b}/cancel"), None),
            json!({"cancelled": false}),
            "[{label}]"
        );

        assert_eq!(
            post_ok(&server, &format!("/api/queues/{queue}/pause"), None),
            json!({"paused": true}),
            "[{label}]"
        );
        assert_eq!(q.stats().unwrap()["paused"], true);
        assert!(q.claim("w", 1).unwrap().is_empty(), "[{label}] paused");
        assert_eq!(
            post_ok(&server, &format!("/api/queues/{queue}/resume"), None),
            json!({"resumed": true}),
            "[{label}]"
        );
        assert_eq!(q.stats().unwrap()["paused"], false);

        // Limits, as the flow-control options.
        let opts = post_ok(
            &server,
            &format!("/api/queues/{queue}/configure"),
            Some(&json!({"max_running": 3})),
        );
        assert_eq!(opts["max_running"], 3, "[{label}] {opts}");
        assert_eq!(q.stats().unwrap()["running_limit"], 3);
        let r = post_auth(
            &server,
            &format!("/api/queues/{queue}/configure"),
            Some(&json!({"max_running": -1})),
        );
        assert_eq!(
            (r.status, r.json()["code"].clone()),
            (400, json!("ALK03")),
            "[{label}] {}",
            r.text
        );
        assert_eq!(
            q.opts().unwrap()["max_running"],
            3,
            "[{label}] a refused change changes nothing"
        );
        post_ok(
            &server,
            &format!("/api/queues/{queue}/configure"),
            Some(&json!({"max_running": null})),
        );

        // Dead again, then every dead job back at once.
        for job in q.claim("w", 10).unwrap() {
            q.fail(job.id, "w", "no").unwrap();
        }
        assert_eq!(
            q.stats().unwrap()["dead"],
            2,
            "[{label}] {dead} and {a} died"
        );
        // Bulk by filter: the dry run counts, the action changes only matches.
        let bulk =
            format!("/api/queues/{queue}/bulk?action=requeue&state=dead&filter=account%3D42");
        assert_eq!(
            post_ok(&server, &format!("{bulk}&dry_run=true"), None)["matched"],
            2,
            "[{label}]"
        );
        assert_eq!(
            q.stats().unwrap()["dead"],
            2,
            "[{label}] a dry run changes nothing"
        );
        let r = post_ok(
            &server,
            &format!("/api/queues/{queue}/bulk?action=requeue&filter=user.email%3Dada@example.com"),
            None,
        );
        assert_eq!(
            (r["matched"].clone(), r["changed"].clone()),
            (json!(1), json!(1)),
            "[{label}] {r}"
        );
        assert_eq!(store.get_job(a).unwrap().unwrap()["state"], "pending");
        assert_eq!(store.get_job(dead).unwrap().unwrap()["state"], "dead");
        let r = post_ok(
            &server,
            &format!("/api/queues/{queue}/bulk?action=cancel&state=pending"),
            None,
        );
        assert_eq!(r["changed"], 1, "[{label}] {r}");
        assert!(store.get_job(a).unwrap().is_none());
        let r = post_auth(
            &server,
            &format!("/api/queues/{queue}/bulk?action=explode"),
            None,
        );
        assert_eq!(r.status, 400, "[{label}]");

        assert_eq!(
            post_ok(&server, &format!("/api/queues/{queue}/requeue-dead"), None),
            json!({"requeued": 1}),
            "[{label}]"
        );
        assert_eq!(q.stats().unwrap()["pending"], 1);
        let r = post_auth(&server, &format!("/api/queues/{queue}/purge"), None);
        assert_eq!(r.status, 400, "[{label}] purge needs a state");
        let r = post_auth(
            &server,
            &format!("/api/queues/{queue}/purge?state=running"),
            None,
        );
        assert_eq!(
            (r.status, r.json()["code"].clone()),
            (400, json!("ALK05")),
            "[{label}] {}",
            r.text
        );
        assert_eq!(q.stats().unwrap()["pending"], 1, "[{label}] nothing purged");
        assert_eq!(
            post_ok(
                &server,
                &format!("/api/queues/{queue}/purge?state=pending"),
                None
            ),
            json!({"purged": 1}),
            "[{label}]"
        );
        assert_eq!(q.stats().unwrap()["pending"], 0);

        // Purge what a filter matches: dead jobs deleted one by one.
        let q2 = fresh("web-purge");
        let queue2 = store.queue(&q2).unwrap();
        let mut by_account = vec![];
        for account in [1, 1, 2] {
            let id = queue2
                .enqueue(
                    &EnqueueOpts::new().max_attempts(1),
                    &json!({ "account": account }),
                )
                .unwrap();
            queue2.claim("w", 1).unwrap();
            queue2.fail(id, "w", "no").unwrap();
            by_account.push(id);
        }
        let purge = format!("/api/queues/{q2}/bulk?action=purge&state=dead&filter=account%3D1");
        assert_eq!(
            post_ok(&server, &format!("{purge}&dry_run=true"), None)["matched"],
            2,
            "[{label}]"
        );
        let r = post_ok(&server, &purge, None);
        assert_eq!(
            (r["matched"].clone(), r["changed"].clone()),
            (json!(2), json!(2)),
            "[{label}] {r}"
        );
        assert!(store.get_job(by_account[0]).unwrap().is_none(), "[{label}]");
        assert!(store.get_job(by_account[1]).unwrap().is_none(), "[{label}]");
        assert_eq!(
            store.get_job(by_account[2]).unwrap().unwrap()["state"],
            "dead",
            "[{label}]"
        );
        for bad in [
            "action=purge",
            "action=purge&state=running",
            "action=requeue&state=pending",
            "action=cancel&state=dead",
        ] {
            let r = post_auth(&server, &format!("/api/queues/{q2}/bulk?{bad}"), None);
            assert_eq!(r.status, 400, "[{label}] {bad}: {}", r.text);
        }
        assert_eq!(
            queue2.stats().unwrap()["dead"],
            1,
            "[{label}] refused: nothing changed"
        );

        // An outbox's backing queue pauses the outbox.
        let outbox = fresh("web-outbox");
        let mut tx = store.begin().unwrap();
        tx.outbox_enqueue_tx(&outbox, &EnqueueOpts::new(), &json!({"event": 1}))
            .unwrap();
        tx.commit().unwrap();
        let backing = format!("__alkstore_outbox:{outbox}");
        let encoded = backing.replace(':', "%3A");
        assert_eq!(
            post_ok(&server, &format!("/api/queues/{encoded}/pause"), None),
            json!({"paused": true}),
            "[{label}]"
        );
        assert!(
            store
                .outbox(&outbox)
                .unwrap()
                .claim("w", 1)
                .unwrap()
                .is_empty(),
            "[{label}] the outbox is paused"
        );
        post_ok(&server, &format!("/api/queues/{encoded}/resume"), None);
        // An outbox's page and a dead message on the dead-letter page: shown
        // without listing (the listings refuse the reserved backing name).
        let ob = store.outbox(&outbox).unwrap();
        let msg = ob.claim("w", 1).unwrap()[0].id;
        assert!(ob.jobs().fail(msg, "w", "relay down").unwrap());
        let a_ = auth();
        let page = get(
            &server.url(&format!("/queues/{encoded}")),
            &[(a_[0].0, &a_[0].1)],
        );
        assert_eq!(page.status, 200, "[{label}] {}", page.text);
        assert!(page.text.contains("outbox-note"), "[{label}]");
        // The sampler reads again after a change made through the dashboard;
        // this one was not: wait for its next reading.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            let page = get(&server.url("/dead"), &[(a_[0].0, &a_[0].1)]);
            assert_eq!(page.status, 200, "[{label}] {}", page.text);
            if page.text.contains(&format!("Outbox {outbox}: 1 dead")) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "[{label}] {}",
                page.text
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

#[test]
fn a_token_guards_every_request_and_read_only_refuses_every_change() {
    let t = &targets()[0];
    let store = alkstore::open(&t.url).unwrap();
    let queue = fresh("web-auth");
    let (dead, _, _) = seed(&store, &queue);
    let server = serve(&t.url, with_token());
    // No token, a wrong one: 401 for the API, the login page for a page.
    let r = get(&server.url("/api/queues"), &[]);
    assert_eq!(r.status, 401);
    let r = get(
        &server.url("/api/queues"),
        &[("authorization", "Bearer wrong")],
    );
    assert_eq!(r.status, 401);
    let r = post(
        &server.url(&format!("/api/jobs/{dead}/requeue")),
        &[("authorization", "Bearer wrong")],
        None,
    );
    assert_eq!(r.status, 401);
    assert_eq!(
        store.get_job(dead).unwrap().unwrap()["state"],
        "dead",
        "a refused change changes nothing"
    );
    let r = get(&server.url("/"), &[]);
    assert_eq!((r.status, r.location.as_deref()), (303, Some("/login")));
    // Assets and the login page are open.
    assert_eq!(get(&server.url("/assets/app.js"), &[]).status, 200);
    assert_eq!(get(&server.url("/login"), &[]).status, 200);

    // A browser logs in: a wrong token is 401, the right one sets an
    // HttpOnly, SameSite=Strict cookie.
    let r = post_form(&server.url("/login"), &[("token", "wrong")]);
    assert_eq!(r.status, 401);
    assert!(r.set_cookie.is_empty());
    let r = post_form(&server.url("/login"), &[("token", TOKEN)]);
    assert_eq!(r.status, 303, "{}", r.text);
    let cookie = r.set_cookie.first().expect("a session cookie").clone();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_string();
    let page = get(&server.url("/"), &[("cookie", &session)]);
    assert_eq!(page.status, 200);
    let csrf = page
        .text
        .split("name=\"csrf-token\" content=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("the page carries its CSRF token")
        .to_string();
    // A change with the cookie but without the CSRF token is refused; with it, done.
    let requeue = server.url(&format!("/api/jobs/{dead}/requeue"));
    let r = post(&requeue, &[("cookie", &session)], None);
    assert_eq!(r.status, 403, "{}", r.text);
    let r = post(
        &requeue,
        &[("cookie", &session), ("x-csrf-token", "0000")],
        None,
    );
    assert_eq!(r.status, 403, "{}", r.text);
    assert_eq!(store.get_job(dead).unwrap().unwrap()["state"], "dead");
    // Sent from another site, even with everything right: refused.
    let r = post(
        &requeue,
        &[
            ("cookie", &session),
            ("x-csrf-token", &csrf),
            ("origin", "http://evil.example"),
        ],
        None,
    );
    assert_eq!(r.status, 403, "{}", r.text);
    assert_eq!(store.get_job(dead).unwrap().unwrap()["state"], "dead");
    let r = post(
        &requeue,
        &[
            ("cookie", &session),
            ("x-csrf-token", &csrf),
            ("origin", &server.url("")),
        ],
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(store.get_job(dead).unwrap().unwrap()["state"], "pending");
    // Logging out ends the session.
    let r = post(
        &server.url("/logout"),
        &[("cookie", &session), ("x-csrf-token", &csrf)],
        None,
    );
    assert_eq!(r.status, 303);
    assert_eq!(
        get(&server.url("/api/queues"), &[("cookie", &session)]).status,
        401
    );

    // Read-only: every change refused (with the token too), listings served.
    let ro = serve(
        &t.url,
        Config {
            read_only: true,
            ..with_token()
        },
    );
    let paths = [
        format!("/api/jobs/{dead}/cancel"),
        format!("/api/jobs/{dead}/requeue"),
        format!("/api/queues/{queue}/pause"),
        format!("/api/queues/{queue}/resume"),
        format!("/api/queues/{queue}/requeue-dead"),
        format!("/api/queues/{queue}/purge?state=pending"),
        format!("/api/queues/{queue}/bulk?action=cancel"),
    ];
    let before = store
        .call("alk_list_jobs", &[alkstore::sql::Arg::Text(queue.clone())])
        .unwrap();
    for path in &paths {
        let r = post_auth(&ro, path, None);
        assert_eq!(r.status, 403, "{path}: {}", r.text);
        assert!(r.json()["error"].as_str().unwrap().contains("read-only"));
    }
    let r = post_auth(
        &ro,
        &format!("/api/queues/{queue}/configure"),
        Some(&json!({"max_running": 1})),
    );
    assert_eq!(r.status, 403);
    assert_eq!(
        store
            .call("alk_list_jobs", &[alkstore::sql::Arg::Text(queue.clone())])
            .unwrap(),
        before,
        "nothing changed"
    );
    assert_eq!(
        store.queue(&queue).unwrap().opts().unwrap()["max_running"],
        Value::Null
    );
    assert_eq!(get_ok(&ro, &format!("/api/jobs/{dead}"))["id"], dead);
}

#[test]
fn without_a_token_a_cross_site_change_is_still_refused() {
    let t = &targets()[0];
    let store = alkstore::open(&t.url).unwrap();
    let queue = fresh("web-open");
    let (dead, _, _) = seed(&store, &queue);
    let server = serve(&t.url, Config::default());
    let requeue = server.url(&format!("/api/jobs/{dead}/requeue"));
    let r = post(&requeue, &[("origin", "http://evil.example")], None);
    assert_eq!(r.status, 403);
    let r = post(&requeue, &[("sec-fetch-site", "cross-site")], None);
    assert_eq!(r.status, 403);
    assert_eq!(store.get_job(dead).unwrap().unwrap()["state"], "dead");
    // Another site's name rebound to 127.0.0.1 (DNS rebinding): its own
    // name in Host, even for reads.
    let r = get(&server.url("/api/queues"), &[("host", "evil.example:8081")]);
    assert_eq!(r.status, 403, "{}", r.text);
    let r = post(
        &requeue,
        &[("host", "evil.example"), ("origin", "http://evil.example")],
        None,
    );
    assert_eq!(r.status, 403, "{}", r.text);
    assert_eq!(store.get_job(dead).unwrap().unwrap()["state"], "dead");
    for host in ["localhost:1", "127.0.0.1", "[::1]:8081"] {
        assert_eq!(
            get(&server.url("/api/queues"), &[("host", host)]).status,
            200,
            "{host}"
        );
    }
    // A browser gets a session with its first page; its changes need the token.
    let page = get(&server.url("/"), &[]);
    assert_eq!(page.status, 200);
    let session = page.set_cookie[0].split(';').next().unwrap().to_string();
    assert_eq!(post(&requeue, &[("cookie", &session)], None).status, 403);
    // Issue 57 item 4: a cookie the server never issued (planted by a page
    // on another localhost port, or left from before a restart) does not
    // skip the CSRF check: refused, alone or before the real session.
    for cookie in [
        "alkstore_session=deadbeef".to_string(),
        format!("alkstore_session=deadbeef; {session}"),
    ] {
        let r = post(&requeue, &[("cookie", &cookie)], None);
        assert_eq!(r.status, 403, "{cookie}: {}", r.text);
    }
    assert_eq!(store.get_job(dead).unwrap().unwrap()["state"], "dead");
    // The real session's token passes even behind a planted cookie.
    let csrf = page
        .text
        .split("name=\"csrf-token\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_string();
    let planted = format!("alkstore_session=deadbeef; {session}");
    let r = post(
        &requeue,
        &[("cookie", &planted), ("x-csrf-token", &csrf)],
        None,
    );
    assert_eq!((r.status, r.json()), (200, json!({"requeued": true})));
    // A script without a cookie (curl on the same machine) may change.
    let (dead2, _, _) = seed(&store, &fresh("web-open2"));
    let r = post(
        &server.url(&format!("/api/jobs/{dead2}/requeue")),
        &[],
        None,
    );
    assert_eq!((r.status, r.json()), (200, json!({"requeued": true})));
}

/// Reads server-sent events until `want` holds for one `counts` event.
fn events_until(server: &Server, want: impl Fn(&Value) -> bool) -> Value {
    let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "GET /api/events HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nAccept: text/event-stream\r\n\r\n",
        server.addr
    )
    .unwrap();
    let reader = BufReader::new(stream);
    for line in reader.lines() {
        let line = line.expect("an event within 20 s");
        if let Some(data) = line.strip_prefix("data: ") {
            let v: Value = serde_json::from_str(data).unwrap();
            if want(&v) {
                return v;
            }
        }
    }
    panic!("the event stream ended")
}

#[test]
fn the_event_stream_sends_counts_at_once_and_on_change() {
    for t in targets() {
        let store = alkstore::open(&t.url).unwrap();
        let queue = fresh("web-events");
        // From before the server starts: the bound must stay below the
        // sampler's idle 15 s whatever the start took.
        let started = std::time::Instant::now();
        let server = serve(&t.url, with_token());
        store
            .queue(&queue)
            .unwrap()
            .enqueue(&EnqueueOpts::new(), &json!({}))
            .unwrap();
        let first = events_until(&server, |_| true);
        assert!(first.is_array(), "[{}] {first}", t.label);
        // Below the 15 s the sampler idles between readings without a listener.
        assert!(
            started.elapsed() < Duration::from_secs(12),
            "[{}] the first event comes at once",
            t.label
        );
        // A job enqueued elsewhere shows within the sampler's second.
        let q = store.queue(&queue).unwrap();
        q.enqueue(&EnqueueOpts::new(), &json!({})).unwrap();
        events_until(&server, |v| {
            v.as_array()
                .unwrap()
                .iter()
                .any(|q| q["queue"] == queue.as_str() && q["pending"] == 2)
        });
    }
}

#[test]
fn a_role_without_the_admin_grant_is_told_what_it_needs() {
    let Ok(url) = std::env::var("ALKSTORE_PG_URL") else {
        assert!(!pg_required());
        return;
    };
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let role = fresh("web_user").replace('-', "_");
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN PASSWORD 'web-pass' IN ROLE alkstore_user"
        ))
        .unwrap();
    let db = admin
        .query_one("SELECT current_database()", &[])
        .unwrap()
        .get::<_, String>(0);
    let as_user = format!("postgresql://{role}:web-pass@127.0.0.1:5432/{db}");
    let server = serve(
        &as_user,
        Config {
            read_only: true,
            ..with_token()
        },
    );
    let a = auth();
    let r = get(&server.url("/api/queues"), &[(a[0].0, &a[0].1)]);
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("alkstore_admin"),
        "{}",
        r.text
    );
    let page = get(&server.url("/"), &[(a[0].0, &a[0].1)]);
    assert_eq!(page.status, 403);
    assert!(page.text.contains("alkstore_admin"), "{}", page.text);
    // A page it may show (a job by id) says up front what it cannot do.
    let id: i64 = admin
        .query_one("SELECT alk_enqueue('web-role-q', NULL, '{}')", &[])
        .unwrap()
        .get(0);
    let page = get(&server.url(&format!("/jobs/{id}")), &[(a[0].0, &a[0].1)]);
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(
        page.text.contains("role-note")
            && page.text.contains(&format!(
                "Connected as role {role}, a member of alkstore_user but not of alkstore_admin"
            )),
        "{}",
        page.text
    );
    // The admin role's own dashboard says nothing of the kind.
    let admin_server = serve(&url, with_token());
    let page = get(
        &admin_server.url(&format!("/jobs/{id}")),
        &[(a[0].0, &a[0].1)],
    );
    assert_eq!(page.status, 200);
    assert!(!page.text.contains("role-note"), "{}", page.text);
    admin.query_one("SELECT alk_cancel($1)", &[&id]).unwrap();
    drop((server, admin_server));
    admin.batch_execute(&format!("DROP ROLE {role}")).unwrap();
}

/// An operator role (alkstore_admin) without `pg_monitor` cannot see other
/// roles' transactions: the health panel says so rather than show "none"
/// for the oldest transaction holding back vacuum.
#[test]
fn the_health_panel_says_when_it_cannot_see_other_sessions() {
    let Ok(url) = std::env::var("ALKSTORE_PG_URL") else {
        assert!(!pg_required());
        return;
    };
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let role = fresh("web_operator").replace('-', "_");
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN PASSWORD 'web-pass' IN ROLE alkstore_admin"
        ))
        .unwrap();
    let db: String = admin
        .query_one("SELECT current_database()", &[])
        .unwrap()
        .get(0);
    let server = serve(
        &format!("postgresql://{role}:web-pass@127.0.0.1:5432/{db}"),
        with_token(),
    );
    let a = auth();
    let blind = get(&server.url("/api/health"), &[(a[0].0, &a[0].1)]);
    let page = get(&server.url("/health"), &[(a[0].0, &a[0].1)]);
    admin
        .batch_execute(&format!("GRANT pg_monitor TO {role}"))
        .unwrap();
    let seeing = get(&server.url("/health"), &[(a[0].0, &a[0].1)]);
    drop(server);
    admin.batch_execute(&format!("DROP ROLE {role}")).unwrap();
    assert_eq!(blind.status, 200, "{}", blind.text);
    assert_eq!(blind.json()["sees_all_sessions"], false, "{}", blind.text);
    assert_eq!(page.status, 200, "{}", page.text);
    assert!(page.text.contains("sessions-hidden"), "{}", page.text);
    assert_eq!(seeing.status, 200, "{}", seeing.text);
    assert!(!seeing.text.contains("sessions-hidden"), "{}", seeing.text);
}

#[test]
fn nested_under_a_prefix_every_link_and_the_cookie_stay_under_it() {
    let t = &targets()[0];
    let store = alkstore::open(&t.url).unwrap();
    let queue = fresh("web-nested");
    let (dead, _, _) = seed(&store, &queue);
    let config = Config {
        base: "/admin/jobs".into(),
        ..with_token()
    };
    let server = serve_under(&t.url, config, "/admin/jobs");
    let a = auth();
    let r = get(&server.url("/admin/jobs/api/queues"), &[(a[0].0, &a[0].1)]);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        get(&server.url("/api/queues"), &[(a[0].0, &a[0].1)]).status,
        404
    );
    // A browser is sent to the prefixed login, and its cookie is the prefix's.
    let r = get(&server.url("/admin/jobs"), &[]);
    assert_eq!(
        (r.status, r.location.as_deref()),
        (303, Some("/admin/jobs/login"))
    );
    let r = post_form(&server.url("/admin/jobs/login"), &[("token", TOKEN)]);
    assert_eq!(r.location.as_deref(), Some("/admin/jobs"));
    assert!(
        r.set_cookie[0].contains("Path=/admin/jobs"),
        "{:?}",
        r.set_cookie
    );
    let session = r.set_cookie[0].split(';').next().unwrap().to_string();
    let page = get(&server.url("/admin/jobs/dead"), &[("cookie", &session)]);
    assert_eq!(page.status, 200, "{}", page.text);
    for link in [
        "href=\"/admin/jobs/assets/app.css\"".to_string(),
        format!("href=\"/admin/jobs/jobs/{dead}\""),
        format!("data-url=\"/admin/jobs/api/jobs/{dead}/requeue\""),
        "content=\"/admin/jobs\"".to_string(),
    ] {
        assert!(page.text.contains(&link), "{link} in {}", page.text);
    }
    // Every link stays under the prefix and leads somewhere.
    for href in page.text.split("href=\"").skip(1) {
        let href = href.split('"').next().unwrap();
        assert!(
            href.starts_with("/admin/jobs"),
            "a link outside the prefix: {href}"
        );
        let r = get(&server.url(href), &[("cookie", &session)]);
        assert_eq!(r.status, 200, "{href}: {}", r.text);
    }
}

/// Issue 57 item 2: every answer — pages, the API, assets, refusals — says
/// that no other site may frame it, allows only the dashboard's own script
/// and styles, and is not to be sniffed.
#[test]
fn every_answer_forbids_framing_and_sniffing() {
    let t = &targets()[0];
    for config in [with_token(), Config::default()] {
        let tokened = config.token.is_some();
        let server = serve(&t.url, config);
        let a = auth();
        let mut answers = vec![
            ("a page", get(&server.url("/"), &[(a[0].0, &a[0].1)])),
            (
                "the API",
                get(&server.url("/api/queues"), &[(a[0].0, &a[0].1)]),
            ),
            ("the script", get(&server.url("/assets/app.js"), &[])),
            (
                "a job page",
                get(&server.url("/jobs/1"), &[(a[0].0, &a[0].1)]),
            ),
        ];
        if tokened {
            answers.push(("a refusal", get(&server.url("/api/queues"), &[])));
            answers.push(("the login page", get(&server.url("/login"), &[])));
        }
        for (what, r) in answers {
            let h = |name: &str| {
                r.headers
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string()
            };
            assert_eq!(h("x-frame-options"), "DENY", "{what} ({})", r.status);
            assert_eq!(h("x-content-type-options"), "nosniff", "{what}");
            let csp = h("content-security-policy");
            for part in [
                "frame-ancestors 'none'",
                "script-src 'self'",
                "default-src 'self'",
            ] {
                assert!(csp.contains(part), "{what}: {csp}");
            }
            assert!(!csp.contains("unsafe-inline"), "{what}: {csp}");
        }
    }
}

/// Issue 57 item 6: the Bearer scheme is matched in any case (RFC 7235); a
/// dashboard without a token ignores an Authorization header rather than
/// calling it wrong. Every API error is JSON, those axum gives before a
/// handler runs too (a job id that is not a number).
#[test]
fn the_bearer_scheme_is_case_insensitive_and_api_errors_are_json() {
    let t = &targets()[0];
    let server = serve(&t.url, with_token());
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let value = format!("{scheme} {TOKEN}");
        let r = get(&server.url("/api/queues"), &[("authorization", &value)]);
        assert_eq!(r.status, 200, "{scheme}: {}", r.text);
    }
    let r = get(
        &server.url("/api/queues"),
        &[("authorization", "bearer nope")],
    );
    assert_eq!(r.status, 401);
    let r = get(
        &server.url("/api/queues"),
        &[("authorization", &format!("Basic {TOKEN}"))],
    );
    assert_eq!(r.status, 401, "another scheme is no token: {}", r.text);

    let open = serve(&t.url, Config::default());
    let r = get(
        &open.url("/api/queues"),
        &[("authorization", "Bearer anything")],
    );
    assert_eq!(r.status, 200, "{}", r.text);

    let a = auth();
    for path in [
        "/api/jobs/abc",
        "/api/jobs/abc/errors",
        "/api/queues/q/jobs?limit=many",
    ] {
        let r = get(&server.url(path), &[(a[0].0, &a[0].1)]);
        assert_eq!(r.status, 400, "{path}: {}", r.text);
        let body = r.json();
        assert!(
            body["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{path}: {body}"
        );
    }
    let r = post_auth(&server, "/api/jobs/abc/requeue", None);
    assert_eq!(r.status, 400, "{}", r.text);
    assert!(r.json()["error"].is_string());
    let r = get(&server.url("/api/nothing-here"), &[(a[0].0, &a[0].1)]);
    assert_eq!(r.status, 404, "{}", r.text);
    assert!(r.json()["error"].is_string());
}

/// Issue 57: an outbox's messages, under the backing name the queue list
/// shows, are listed, requeued and purged through the API like any queue's
/// jobs, on every engine and install.
#[test]
fn an_outboxs_messages_are_listed_and_acted_on() {
    for t in targets() {
        let store = alkstore::open(&t.url).unwrap();
        let name = fresh("web-outbox");
        let outbox = store.outbox(&name).unwrap();
        let dead = outbox
            .enqueue(&EnqueueOpts::new().max_attempts(1), &json!({"mail": 1}))
            .unwrap();
        assert_eq!(outbox.claim("relay", 1).unwrap()[0].id, dead);
        outbox.jobs().fail(dead, "relay", "refused").unwrap();
        let server = serve(&t.url, with_token());
        let backing = format!("__alkstore_outbox:{name}");
        let all = get_ok(&server, "/api/queues");
        assert!(
            all.as_array()
                .unwrap()
                .iter()
                .any(|q| q["queue"] == backing),
            "[{}] {all}",
            t.label
        );
        let listed = get_ok(&server, &format!("/api/queues/{backing}/jobs?state=dead"));
        assert_eq!(listed[0]["id"], dead, "[{}] {listed}", t.label);
        assert_eq!(
            post_ok(
                &server,
                &format!("/api/queues/{backing}/requeue-dead"),
                None
            ),
            json!({"requeued": 1}),
            "[{}]",
            t.label
        );
        assert_eq!(
            post_ok(
                &server,
                &format!("/api/queues/{backing}/purge?state=pending"),
                None
            ),
            json!({"purged": 1}),
            "[{}]",
            t.label
        );
    }
}

/// Issue 60: the streams page shows how far behind each consumer is, in
/// events and in the age of the first event it has not read, and marks the
/// consumer a relay's stream route saves (the lease `relay:{stream}:{route}`
/// held), and only on that stream.
#[test]
fn the_streams_page_shows_relay_routes_and_how_far_behind_they_are() {
    for t in targets() {
        let store = alkstore::open(&t.url).unwrap();
        let server = serve(&t.url, with_token());
        let stream = fresh("web-relay-st");
        let st = store.stream(&stream).unwrap();
        for i in 0..3 {
            st.publish(&json!({"i": i}), None).unwrap();
        }
        let first = st.read(0, 10).unwrap()[0].offset;
        let route = fresh("web-route");
        st.save_offset(&route, first).unwrap();
        st.save_offset("reports", first).unwrap();
        let _lease = store
            .lock(
                &format!("relay:{stream}:{route}"),
                "relay-on-host-1",
                Duration::from_secs(60),
            )
            .unwrap()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1100));
        let a = auth();
        let page = get(&server.url("/streams"), &[(a[0].0, &a[0].1)]);
        assert_eq!(page.status, 200, "[{}] {}", t.label, page.text);
        let row = |consumer: &str| -> String {
            let start = page
                .text
                .find(&format!("data-consumer=\"{consumer}\""))
                .unwrap_or_else(|| panic!("[{}] no row for {consumer}: {}", t.label, page.text));
            let rest = &page.text[start..];
            rest[..rest.find("</tr>").unwrap()].to_string()
        };
        let relay = row(&route);
        assert!(relay.contains(">2</td>"), "[{}] lag 2: {relay}", t.label);
        assert!(relay.contains("relay-on-host-1"), "[{}] {relay}", t.label);
        let behind = relay.split("behind\">").nth(1).unwrap();
        assert!(
            behind.starts_with(|c: char| c.is_ascii_digit()) && behind.contains(" s<"),
            "[{}] an age: {relay}",
            t.label
        );
        let other = row("reports");
        assert!(
            !other.contains("relay-on-host-1"),
            "[{}] not a relay's: {other}",
            t.label
        );
        // A consumer of the route's name on another stream is not the route's.
        let elsewhere = fresh("web-relay-st2");
        let st2 = store.stream(&elsewhere).unwrap();
        st2.publish(&json!({}), None).unwrap();
        st2.save_offset(&route, st2.read(0, 1).unwrap()[0].offset)
            .unwrap();
        let page = get(&server.url("/streams"), &[(a[0].0, &a[0].1)]).text;
        let section = &page[page.find(&format!("<h2>{elsewhere}</h2>")).unwrap()..];
        let row2 = &section[section.find(&format!("data-consumer=\"{route}\"")).unwrap()..];
        let row2 = &row2[..row2.find("</tr>").unwrap()];
        assert!(
            !row2.contains("relay-on-host-1"),
            "[{}] another stream's consumer: {row2}",
            t.label
        );
    }
}
