//! `alkstore relay` as a process (contract v1.3 §N1): every kind of bad
//! config exits 2 with one line naming the route and the key, having
//! claimed nothing, and no password in it; SIGTERM gives back what it
//! could not deliver and exits 0. On SQLite and PostgreSQL.

use alkstore_tests::{fresh, pg_required};
use serde_json::json;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn urls() -> Vec<(String, tempfile::TempDir)> {
    let dir = tempfile::tempdir().unwrap();
    let mut urls = vec![(
        format!("sqlite:{}", dir.path().join("relay.db").display()),
        dir,
    )];
    for var in ["ALKSTORE_PG_URL", "ALKSTORE_PG_PLAIN_URL"] {
        match std::env::var(var) {
            Ok(url) => urls.push((url, tempfile::tempdir().unwrap())),
            Err(_) => assert!(
                !pg_required() || var != "ALKSTORE_PG_URL",
                "{var} is required"
            ),
        }
    }
    urls
}

/// SIGTERM to a relay; its exit code and what it printed on standard error.
fn terminate(child: std::process::Child) -> (Option<i32>, String) {
    Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn relay(url: &str, config: &str, dir: &std::path::Path) -> std::process::Child {
    relay_with(url, config, dir, &[])
}

fn relay_with(
    url: &str,
    config: &str,
    dir: &std::path::Path,
    args: &[&str],
) -> std::process::Child {
    let path = dir.join(format!("{}.toml", fresh("relay")));
    std::fs::write(&path, config).unwrap();
    Command::new(env!("CARGO_BIN_EXE_alkstore"))
        .arg("--url")
        .arg(url)
        .arg("relay")
        .arg("--config")
        .arg(&path)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn each_bad_config_exits_2_with_one_line_and_claims_nothing() {
    let ok = "name = \"r\"\noutbox = \"OB\"\nto = \"http://127.0.0.1:9/hook\"\n";
    let cases: Vec<(String, &str)> = vec![
        ("[[route]\nname = 1".into(), "not valid TOML (line 1)"),
        ("".into(), "config: no [[route]] table"),
        ("[[route]]\noutbox = \"OB\"\nto = \"http://x/\"\n".into(), "route 1: key \"name\": required"),
        ("[[route]]\nname = \"\"\noutbox = \"OB\"\nto = \"http://x/\"\n".into(), "route 1: key \"name\":"),
        (format!("[[route]]\n{ok}colour = \"red\"\n"), "route \"r\" (route 1): key \"colour\": unknown key"),
        (format!("[[route]]\n{ok}stream = \"s\"\n"), "route \"r\" (route 1): key \"stream\": a route delivers one source"),
        ("[[route]]\nname = \"r\"\nto = \"http://x/\"\n".into(), "route \"r\" (route 1): key \"outbox\": required"),
        ("[[route]]\nname = \"r\"\noutbox = \"OB\"\n".into(), "route \"r\" (route 1): key \"to\": required"),
        (format!("[[route]]\n{ok}\n[[route]]\n{ok}"), "route \"r\" (route 2): key \"name\": the name is used by an earlier route"),
        ("[[route]]\nname = \"r\"\noutbox = \"OB\"\nto = \"ftp://u:hunter2@x/\"\n".into(), "route \"r\" (route 1): key \"to\": unknown scheme \"ftp\""),
        ("[[route]]\nname = \"r\"\noutbox = \"OB\"\nto = \"nats://x:4222\"\n".into(), "route \"r\" (route 1): key \"subject\": required"),
        (format!("[[route]]\n{ok}subject = \"s\"\n"), "route \"r\" (route 1): key \"subject\": not for http sinks"),
        ("[[route]]\nname = \"r\"\noutbox = \"OB\"\nto = \"redis://x\"\nsubject = \"k\"\nexchange = \"e\"\n".into(), "route \"r\" (route 1): key \"exchange\": only for amqp sinks"),
        ("[[route]]\nname = \"r\"\noutbox = \"OB\"\nto = \"amqp://u:hunter2@x/\"\nsubject = \"k\"\nsecret = \"whsec_aGk=\"\n".into(), "route \"r\" (route 1): key \"secret\": only for http sinks"),
        (format!("[[route]]\n{ok}secret = \"hunter2\"\n"), "route \"r\" (route 1): key \"secret\": must start with \"whsec_\""),
        (format!("[[route]]\n{ok}concurrency = 0\n"), "route \"r\" (route 1): key \"concurrency\": must be a whole number"),
        (format!("[[route]]\n{ok}timeout_s = -1\n"), "route \"r\" (route 1): key \"timeout_s\": must be a number of seconds above 0"),
        ("[[route]]\nname = \"r\"\noutbox = \"__alkstore_x\"\nto = \"http://x/\"\n".into(), "route \"r\" (route 1): key \"outbox\":"),
        (format!("[[route]]\n{ok}\n[[route]]\nname = \"r2\"\noutbox = \"OB\"\nto = \"redis://x\"\nsubject = \"k\"\n"), "route \"r2\" (route 2): key \"outbox\": outbox"),
        ("[[route]]\nname = \"r\"\noutbox = \"OB\"\nto = \"nats:localhost:4222\"\nsubject = \"s\"\n".into(), "route \"r\" (route 1): key \"to\": the URL names no host"),
        (format!("[[route]]\n{ok}headers = {{ webhook-id = \"x\" }}\n"), "route \"r\" (route 1): key \"headers\": \"webhook-id\" is set by the relay itself"),
    ];
    for (url, dir) in urls() {
        let outbox = fresh("relay-cli");
        let store = alkstore::open(&url).unwrap();
        let id = store
            .outbox(&outbox)
            .unwrap()
            .enqueue(&Default::default(), &json!({}))
            .unwrap();
        for (config, want) in &cases {
            let config = config.replace("OB", &outbox);
            let out = relay(&url, &config, dir.path()).wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{config:?}: {err}");
            assert_eq!(err.lines().count(), 1, "one line: {err}");
            assert!(
                err.contains(want),
                "{config:?}: {err:?} should say {want:?}"
            );
            assert!(
                !err.contains("hunter2"),
                "no password or secret shown: {err}"
            );
        }
        let job = store.get_job(id).unwrap().unwrap();
        assert_eq!(
            (job["state"].as_str(), job["attempts"].as_i64()),
            (Some("pending"), Some(0)),
            "nothing claimed"
        );
    }
}

/// The body of `GET /metrics` on `addr`, `None` while nothing answers.
fn scrape(addr: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr).ok()?;
    c.write_all(
        format!("GET /metrics HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n").as_bytes(),
    )
    .ok()?;
    let mut out = String::new();
    c.read_to_string(&mut out).ok()?;
    Some(out)
}

/// While the sink is down the claim is given back (no attempt spent), the
/// metrics say the sink is down, the password in the sink's URL shows in
/// no log line and no metric; SIGTERM ends the relay with exit status 0.
#[test]
fn sigterm_gives_back_what_could_not_be_delivered_and_exits_0() {
    for (url, dir) in urls() {
        let outbox = fresh("relay-term");
        let store = alkstore::open(&url).unwrap();
        let id = store
            .outbox(&outbox)
            .unwrap()
            .enqueue(&Default::default(), &json!({}))
            .unwrap();
        // Nothing listens on port 9 of loopback: the sink is down.
        let config = format!(
            "[[route]]\nname = \"r\"\noutbox = \"{outbox}\"\nto = \"http://hook:hunter2@127.0.0.1:9/hook\"\n"
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let child = relay_with(&url, &config, dir.path(), &["--metrics", &addr]);
        let end = Instant::now() + Duration::from_secs(60);
        loop {
            let job = store.get_job(id).unwrap().unwrap();
            if job["run_at"] != job["created_at"] || Instant::now() > end {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let job = store.get_job(id).unwrap().unwrap();
        assert_eq!(job["state"], "pending", "given back: {job}");
        assert_eq!(job["attempts"], 0, "the outage spent no attempt: {job}");
        let mut metrics = String::new();
        wait(30, "metrics saying the sink is down", || {
            metrics = scrape(&addr).unwrap_or_default();
            metrics.contains("alkstore_relay_up{route=\"r\"} 0")
        });
        assert!(
            !metrics.contains("alkstore_relay_failed_total{route=\"r\"} 0"),
            "{metrics}"
        );
        assert!(
            metrics.contains("alkstore_relay_delivered_total{route=\"r\"} 0"),
            "{metrics}"
        );
        assert!(
            metrics.contains("alkstore_relay_lag_seconds{route=\"r\"}"),
            "{metrics}"
        );
        assert!(!metrics.contains("hunter2"), "{metrics}");
        let (code, err) = terminate(child);
        assert_eq!(code, Some(0), "{err}");
        assert!(
            err.contains("route \"r\": sink http://***:***@127.0.0.1:9/hook down"),
            "{err}"
        );
        assert!(!err.contains("hunter2"), "no password in any line: {err}");
        assert!(err.contains("stopping"), "{err}");
    }
}

/// A relay connected as a role granted nothing but `alkstore_user` (every
/// function the relay calls is catalogued for it) delivers an outbox and a
/// stream, takes its lease, saves its offset and reads its lag, logging no
/// failed call. PostgreSQL, both installs.
#[test]
fn a_role_granted_only_alkstore_user_runs_the_relay() {
    let mut roles = Vec::new();
    for var in ["ALKSTORE_PG_URL", "ALKSTORE_PG_PLAIN_URL"] {
        let Ok(url) = std::env::var(var) else {
            assert!(!pg_required(), "{var} is required");
            continue;
        };
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let role = fresh("relay_user").replace('-', "_");
        c.batch_execute(&format!(
            "CREATE ROLE {role} LOGIN NOSUPERUSER PASSWORD 'relay-pw'; GRANT alkstore_user TO {role}"
        ))
        .unwrap();
        roles.push(role.clone());
        let db: String = c
            .query_one("SELECT current_database()", &[])
            .unwrap()
            .get(0);
        let user_url = format!("postgresql://{role}:relay-pw@127.0.0.1:5432/{db}?sslmode=disable");
        let store = alkstore::open(&url).unwrap();
        let (outbox, stream) = (fresh("relay-user"), fresh("relay-user-st"));
        let ob = store.outbox(&outbox).unwrap();
        let st = store.stream(&stream).unwrap();
        for i in 0..20 {
            ob.enqueue(&Default::default(), &json!({"i": i})).unwrap();
            st.publish(&json!({"i": i}), None).unwrap();
        }
        let (hook, log) = receiver(Duration::ZERO);
        let config = format!(
            "[[route]]\nname = \"orders\"\noutbox = \"{outbox}\"\nto = \"{hook}\"\n\n\
             [[route]]\nname = \"events\"\nstream = \"{stream}\"\nto = \"{hook}\"\n"
        );
        let dir = tempfile::tempdir().unwrap();
        let child = relay(&user_url, &config, dir.path());
        wait(60, "40 deliveries", || ids(&log).len() >= 40);
        wait(30, "every ack", || {
            let s = ob.stats().unwrap();
            s["pending"] == 0 && s["running"] == 0
        });
        let last = st.read(0, 100).unwrap().last().unwrap().offset;
        wait(30, "the saved offset", || {
            st.get_offset("events").unwrap() == last
        });
        let (code, err) = terminate(child);
        assert_eq!(code, Some(0), "[{var}] {err}");
        assert!(
            err.contains(&format!("lease relay:{stream}:events taken")),
            "[{var}] {err}"
        );
        for bad in ["failed", "permission", "denied", "ALK"] {
            assert!(!err.contains(bad), "[{var}] {bad:?} in the log: {err}");
        }
    }
    if let Ok(url) = std::env::var("ALKSTORE_PG_URL") {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        for role in roles {
            c.batch_execute(&format!("DROP ROLE {role}")).unwrap();
        }
    }
}

/// What a webhook receiver got: each request's `webhook-id` and when.
type Log = std::sync::Arc<std::sync::Mutex<Vec<(String, Instant)>>>;

/// A webhook receiver on a loopback port (plain HTTP/1.1 with keep-alive,
/// a thread per connection) that answers 204 after `delay`.
fn receiver(delay: Duration) -> (String, Log) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let log: Log = Default::default();
    let l = log.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let l = l.clone();
            std::thread::spawn(move || {
                let mut out = conn.try_clone().unwrap();
                let mut r = BufReader::new(conn);
                loop {
                    let (mut len, mut id, mut line) = (0usize, String::new(), String::new());
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    loop {
                        line.clear();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let h = line.trim_end();
                        if h.is_empty() {
                            break;
                        }
                        let (k, v) = h.split_once(':').unwrap();
                        match k.to_ascii_lowercase().as_str() {
                            "content-length" => len = v.trim().parse().unwrap(),
                            "webhook-id" => id = v.trim().to_string(),
                            _ => {}
                        }
                    }
                    let mut body = vec![0; len];
                    if r.read_exact(&mut body).is_err() {
                        return;
                    }
                    std::thread::sleep(delay);
                    if out.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").is_err() {
                        return;
                    }
                    l.lock().unwrap().push((id, Instant::now()));
                }
            });
        }
    });
    (url, log)
}

fn ids(log: &Log) -> std::collections::HashSet<String> {
    log.lock()
        .unwrap()
        .iter()
        .map(|(id, _)| id.clone())
        .collect()
}

fn wait(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < end, "waited {secs} s for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Two relays run one file: they share the outbox, one of them delivers
/// the stream route. The one holding the stream's lease is SIGKILLed
/// mid-run: every outbox message and every event still arrives (what the
/// killed one had not acked goes again, under the same ids), and the
/// other takes the stream route over within 30 s (the lease lasts 10 s:
/// ~12 s is usual, more on a loaded machine; still well under the killed
/// one's 60 s claims).
#[test]
fn sigkill_loses_nothing_and_the_other_relay_takes_the_stream_over() {
    // Each install waits out the killed relay's 60 s claims: side by side.
    std::thread::scope(|scope| {
        for (url, dir) in urls() {
            scope.spawn(move || {
                let store = alkstore::open(&url).unwrap();
                let (outbox, stream) = (fresh("relay-kill"), fresh("relay-kill-st"));
                let (hook, log) = receiver(Duration::from_millis(20));
                let config = format!(
                    "[[route]]\nname = \"orders\"\noutbox = \"{outbox}\"\nto = \"{hook}\"\n\n\
                     [[route]]\nname = \"events\"\nstream = \"{stream}\"\nto = \"{hook}\"\n"
                );
                let ob = store.outbox(&outbox).unwrap();
                let st = store.stream(&stream).unwrap();
                let mut want = std::collections::HashSet::new();
                for i in 0..300 {
                    want.insert(format!(
                        "outbox:{outbox}:{}",
                        ob.enqueue(&Default::default(), &json!({"i": i})).unwrap()
                    ));
                    st.publish(&json!({"i": i}), None).unwrap();
                }
                let mut first = relay(&url, &config, dir.path());
                // The first holds the stream's lease before the second starts.
                wait(60, "the first deliveries", || {
                    ids(&log).iter().any(|id| id.starts_with("stream:"))
                });
                let mut second = relay(&url, &config, dir.path());
                wait(60, "a third of the messages", || ids(&log).len() >= 200);
                first.kill().unwrap();
                let killed = Instant::now();
                let _ = first.wait();
                for i in 300..350 {
                    st.publish(&json!({"i": i}), None).unwrap();
                }
                let events: Vec<i64> = {
                    let mut all = Vec::new();
                    wait(60, "offsets for every event", || {
                        all = st.read(0, 1000).unwrap().iter().map(|e| e.offset).collect();
                        all.len() == 350
                    });
                    all
                };
                for o in &events {
                    want.insert(format!("stream:{stream}:{o}"));
                }
                wait(180, "every message and event", || {
                    want.is_subset(&ids(&log))
                });
                let late = format!("stream:{stream}:{}", events[300]);
                let took_over = log
                    .lock()
                    .unwrap()
                    .iter()
                    .find(|(id, _)| *id == late)
                    .map(|(_, at)| *at)
                    .unwrap();
                assert!(
                    took_over.duration_since(killed) < Duration::from_secs(30),
                    "the stream route went on {:?} after the kill",
                    took_over.duration_since(killed)
                );
                assert_eq!(ids(&log).len(), want.len(), "nothing but these ids");
                wait(60, "every ack", || {
                    let s = ob.stats().unwrap();
                    s["pending"] == 0 && s["running"] == 0 && s["scheduled"] == 0
                });
                assert_eq!(ob.stats().unwrap()["dead"], 0);
                Command::new("kill")
                    .arg("-TERM")
                    .arg(second.id().to_string())
                    .status()
                    .unwrap();
                assert_eq!(second.wait().unwrap().code(), Some(0));
            });
        }
    });
}

/// A relay killed if the test fails before it ends it, so that no relay
/// outlives a failed test and delivers into another test's receiver.
struct Killed(Option<std::process::Child>);

impl Killed {
    fn new(child: std::process::Child) -> Killed {
        Killed(Some(child))
    }

    fn child(&self) -> &std::process::Child {
        self.0.as_ref().expect("not taken")
    }

    /// The relay, for the test to end.
    fn take(mut self) -> std::process::Child {
        self.0.take().expect("not taken")
    }
}

impl Drop for Killed {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Whether a write transaction can begin on the database now (always on
/// PostgreSQL; on SQLite, whether no other connection holds its writer).
fn writer_free(url: &str) -> bool {
    let Some(path) = url.strip_prefix("sqlite:") else {
        return true;
    };
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.busy_timeout(Duration::from_millis(500)).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK").is_ok()
}

/// Sends `signal` (`STOP`, `CONT`, …) to a relay.
fn signal(child: &std::process::Child, signal: &str) {
    let sent = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(sent.success(), "kill -{signal}");
}

/// A relay paused (SIGSTOP) past its stream route's lease delivers
/// nothing once resumed: the other relay took the route over meanwhile
/// and is the only one delivering it (contract v1.3 §N3: "each stream
/// route is delivered by exactly one relay at a time"). The two relays
/// run the same route (one lease, one saved offset) to two receivers, so
/// that each delivery shows who made it.
#[test]
fn a_relay_paused_past_its_lease_delivers_nothing_once_resumed() {
    std::thread::scope(|scope| {
        for (url, dir) in urls() {
            scope.spawn(move || {
                let store = alkstore::open(&url).unwrap();
                let stream = fresh("relay-pause-st");
                let st = store.stream(&stream).unwrap();
                let publish = |from: i64, to: i64| {
                    for i in from..to {
                        st.publish(&json!({"i": i}), None).unwrap();
                    }
                };
                let (hook_a, log_a) = receiver(Duration::ZERO);
                let (hook_b, log_b) = receiver(Duration::ZERO);
                let config = |hook: &str| {
                    format!(
                        "[[route]]\nname = \"events\"\nstream = \"{stream}\"\nto = \"{hook}\"\n"
                    )
                };
                // This stream's ids only: a relay left running by another
                // test may find its old receiver's port reused by these.
                let ours = format!("stream:{stream}:");
                let has = |log: &Log, from: usize, to: usize| {
                    let got = ids(log);
                    let offsets: Vec<i64> =
                        st.read(0, 100).unwrap().iter().map(|e| e.offset).collect();
                    offsets.len() >= to
                        && offsets[from..to]
                            .iter()
                            .all(|o| got.contains(&format!("{ours}{o}")))
                };
                publish(0, 20);
                let a = Killed::new(relay(&url, &config(&hook_a), dir.path()));
                wait(60, "the first relay's deliveries", || has(&log_a, 0, 20));
                let b = Killed::new(relay(&url, &config(&hook_b), dir.path()));
                // Paused while it waits for events, not inside a write
                // transaction (which would keep SQLite's one writer from
                // the other relay): if it was, it goes on a moment and is
                // paused again.
                std::thread::sleep(Duration::from_millis(500));
                signal(a.child(), "STOP");
                for tries in 1.. {
                    if writer_free(&url) {
                        break;
                    }
                    assert!(tries < 20, "the paused relay held the writer 20 times");
                    signal(a.child(), "CONT");
                    std::thread::sleep(Duration::from_millis(200));
                    signal(a.child(), "STOP");
                }
                publish(20, 40);
                wait(60, "the second relay to take the route over", || {
                    has(&log_b, 20, 40)
                });
                let resumed = Instant::now();
                signal(a.child(), "CONT");
                for i in 40..60 {
                    publish(i, i + 1);
                    std::thread::sleep(Duration::from_millis(50));
                }
                wait(60, "every later event at the second relay", || {
                    has(&log_b, 40, 60)
                });
                std::thread::sleep(Duration::from_millis(500));
                let late: Vec<String> = log_a
                    .lock()
                    .unwrap()
                    .iter()
                    .filter(|(id, at)| *at > resumed && id.starts_with(&ours))
                    .map(|(id, _)| id.clone())
                    .collect();
                let (code_a, stderr_a) = terminate(a.take());
                let (code_b, stderr_b) = terminate(b.take());
                // Unless the other gave the lease up meanwhile (a database
                // error ends its hold) and this one took it again: a
                // handover, not two at once.
                let took = stderr_a.matches("delivering stream").count();
                assert!(
                    late.is_empty() || took >= 2,
                    "the paused relay, resumed, delivered {late:?} while the other held the lease \
                     ({:?} after resuming); its log:\n{stderr_a}\nthe other's:\n{stderr_b}",
                    resumed.elapsed()
                );
                assert_eq!(code_a, Some(0), "{stderr_a}");
                assert!(stderr_a.contains("lost; standing by"), "{stderr_a}");
                assert_eq!(code_b, Some(0), "{stderr_b}");
            });
        }
    });
}

/// Through a transaction-pooling PgBouncer, `--listener-url` puts the
/// relay's `LISTEN` (its wake-up registration) on a connection of its own
/// to the server: none is left on a server connection of the pooler,
/// which the pooler's other clients would get next, stray notifications
/// and all (sqlx fails on them: "unexpected message: NotificationResponse").
#[test]
fn through_pgbouncer_the_relay_listens_on_the_server_itself() {
    let (Ok(bouncer), Ok(direct)) = (
        std::env::var("ALKSTORE_PG_BOUNCER_URL"),
        std::env::var("ALKSTORE_PG_URL"),
    ) else {
        assert!(!pg_required(), "ALKSTORE_PG_BOUNCER_URL is required");
        return;
    };
    let app = fresh("relaybouncer").replace('-', "_");
    let with_app = |url: &str| {
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}application_name={app}")
    };
    let outbox = fresh("relay-bouncer");
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "[[route]]\nname = \"r\"\noutbox = \"{outbox}\"\nto = \"http://127.0.0.1:9/hook\"\n"
    );
    let child = relay_with(
        &with_app(&bouncer),
        &config,
        dir.path(),
        &["--listener-url", &with_app(&direct)],
    );
    // (Direct: the test's own role; through the pooler: the pooler's.)
    let mut db = postgres::Client::connect(&direct, postgres::NoTls).unwrap();
    let count = |db: &mut postgres::Client| -> (i64, i64) {
        let row = db
            .query_one(
                "SELECT count(*) FILTER (WHERE usename = current_user), \
                        count(*) FILTER (WHERE usename <> current_user) \
                   FROM pg_stat_activity WHERE application_name = $1 AND query ILIKE '%alk_listen_outbox%'",
                &[&app],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    let until = Instant::now() + Duration::from_secs(60);
    let mut seen = count(&mut db);
    while seen.0 == 0 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
        seen = count(&mut db);
    }
    let (code, said) = terminate(child);
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(
        seen,
        (1, 0),
        "registered directly, never through the pooler: {said}"
    );
    // (A server connection of the pooler outlives the relay.)
    assert_eq!(count(&mut db).1, 0, "no LISTEN left behind the pooler");
}
