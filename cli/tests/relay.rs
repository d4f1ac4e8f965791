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

fn relay(url: &str, config: &str, dir: &std::path::Path) -> std::process::Child {
    let path = dir.join(format!("{}.toml", fresh("relay")));
    std::fs::write(&path, config).unwrap();
    Command::new(env!("CARGO_BIN_EXE_alkstore"))
        .arg("--url")
        .arg(url)
        .arg("relay")
        .arg("--config")
        .arg(&path)
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
            "[[route]]\nname = \"r\"\noutbox = \"{outbox}\"\nto = \"http://127.0.0.1:9/hook\"\n"
        );
        let child = relay(&url, &config, dir.path());
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
        Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(
            err.contains("route \"r\": sink http://127.0.0.1:9/hook down"),
            "{err}"
        );
        assert!(err.contains("stopping"), "{err}");
    }
}
