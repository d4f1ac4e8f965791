//! The dashboard in a real browser (Debian's chromium, headless, driven
//! over WebDriver by chromedriver), on SQLite and the extension: log in
//! (a wrong token refused), see a dead job, requeue it and watch it leave
//! the dead list and the counts change without a reload, follow a
//! workflow's dependency graph, and a read-only server refusing changes.
//! It saves a screenshot of every page (`ALK_SCREENSHOTS=DIR` puts them
//! there: `docs/screenshots` for the README).
//!
//! Without chromedriver the test is skipped, unless the test command asks
//! for it (`ALKSTORE_REQUIRE_BROWSER=1`).

mod common;

use alkstore::{EnqueueOpts, Workflow};
use alkstore_web::Config;
use common::*;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "browser-token-42";

/// chromedriver on a free port; killed when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn driver() -> Option<Driver> {
    let path = std::env::var("ALKSTORE_CHROMEDRIVER").unwrap_or("/usr/bin/chromedriver".into());
    if !std::path::Path::new(&path).exists() {
        assert!(
            std::env::var("ALKSTORE_REQUIRE_BROWSER").as_deref() != Ok("1"),
            "{path} is missing but ALKSTORE_REQUIRE_BROWSER=1 (apt-get install chromium chromium-driver)"
        );
        eprintln!("note: {path} missing: the browser tests are skipped");
        return None;
    }
    // A port found free may be taken before chromedriver binds it (another
    // test's browser starts at the same time): then chromedriver exits, and
    // the next attempt takes another port.
    for _ in 0..5 {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new(&path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        loop {
            if child.try_wait().unwrap().is_some() {
                break; // exited: try another port
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(Driver {
                    child,
                    url: format!("http://127.0.0.1:{port}"),
                });
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "chromedriver did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    panic!("chromedriver exited at start five times");
}

async fn browser(driver: &Driver) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,860"]}),
    );
    // A session refused once (chromedriver still settling on a loaded
    // machine) is asked for again.
    let mut last = None;
    for _ in 0..5 {
        match ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps.clone())
            .connect(&driver.url)
            .await
        {
            Ok(client) => return client,
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("a chromium session: {last:?}");
}

/// Where screenshots go.
fn shots() -> PathBuf {
    let dir = std::env::var("ALK_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("screenshots"));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn text(c: &Client, css: &str) -> String {
    c.find(Locator::Css(css))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Waits up to 60 s for `script` (a JS expression) to be true. On a loaded
/// 2-core machine a shared database of thousands of queues makes one
/// `alk_queues()` reading take 1.5 s and more, and the sampler then waits
/// ten times that before reading again for a change made elsewhere (it
/// gave up after 10 s in CI; 17 s is the wait at 5,000 queues here).
async fn until(c: &Client, what: &str, script: &str) {
    let started = Instant::now();
    loop {
        let v = c
            .execute(&format!("return !!({script});"), vec![])
            .await
            .unwrap();
        if v == Value::Bool(true) {
            return;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let flash = c
                .execute(
                    "return [location.href, document.getElementById('flash')?.textContent];",
                    vec![],
                )
                .await
                .unwrap();
            panic!("waited 60 s for {what} ({script}); the page says {flash}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Runs blocking database calls off the async thread (the `postgres`
/// crate refuses to block inside a runtime).
/// Runs a test's browser session on a runtime of its own.
fn block_on<T>(session: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(session)
}

fn off<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| s.spawn(f).join().unwrap())
}

async fn login(c: &Client, base: &str, token: &str) {
    c.goto(&format!("{base}/")).await.unwrap();
    assert!(c.current_url().await.unwrap().path().ends_with("/login"));
    c.find(Locator::Id("token"))
        .await
        .unwrap()
        .send_keys(token)
        .await
        .unwrap();
    c.find(Locator::Id("login"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
}

#[test]
fn an_operator_requeues_a_dead_job_and_sees_it_leave_without_reloading() {
    let Some(driver) = driver() else { return };
    let targets = targets();
    // SQLite and the extension (the plain install serves the same pages).
    for t in targets.iter().filter(|t| t.label != "plain SQL install") {
        let store = alkstore::open(&t.url).unwrap();
        // Plain names on SQLite's own file (for the screenshots); the
        // PostgreSQL databases are shared with other tests.
        let name = |base: &str| {
            if t.label == "sqlite" {
                base.to_string()
            } else {
                fresh(base)
            }
        };
        let queue = name("exports");
        let q = store.queue(&queue).unwrap();
        let dead = q
            .enqueue(
                &EnqueueOpts::new().max_attempts(1),
                &json!({"account": 42, "report": "monthly"}),
            )
            .unwrap();
        q.claim("w", 1).unwrap();
        q.fail(dead, "w", "timeout talking to the warehouse")
            .unwrap();
        q.enqueue(
            &EnqueueOpts::new(),
            &json!({"account": 7, "report": "weekly"}),
        )
        .unwrap();
        let etl = name("etl");
        let ids = Workflow::new()
            .step("extract", &etl, json!({"step": "extract"}), &[])
            .step("load", &etl, json!({"step": "load"}), &["extract"])
            .enqueue(&store)
            .unwrap();
        let orders = name("orders");
        let stream = store.stream(&orders).unwrap();
        for n in 1..=3 {
            stream.publish(&json!({"order": n}), Some("shop")).unwrap();
        }
        store.sequence(None).unwrap();
        stream.save_offset("billing", 1).unwrap();
        let nightly = name("nightly-report");
        store
            .schedule(
                &nightly,
                &name("reports"),
                &alkstore::ScheduleSpec::Cron("0 3 * * *".into()),
                &json!({"report": "sales"}),
                &EnqueueOpts::new(),
            )
            .unwrap();
        let _lease = store
            .lock(&name("invoice-run"), "host-a", Duration::from_secs(300))
            .unwrap()
            .unwrap();
        let later = name("reports");
        store
            .queue(&later)
            .unwrap()
            .enqueue(
                &EnqueueOpts::new().delay(Duration::from_secs(3600)),
                &json!({"report": "nightly"}),
            )
            .unwrap();

        let server = serve(
            &t.url,
            Config {
                token: Some(TOKEN.into()),
                ..Config::default()
            },
        );
        let base = server.url("");
        let label = t.label;
        block_on(async {
            let c = browser(&driver).await;
            let dir = shots();
            // A wrong token: the login page again, saying so.
            login(&c, &base, "not-the-token").await;
            // (the refusal comes after a pause that slows guessing)
            let error = c
                .wait()
                .for_element(Locator::Id("login-error"))
                .await
                .unwrap();
            assert_eq!(error.text().await.unwrap(), "wrong token", "[{label}]");
            if label == "sqlite" {
                std::fs::write(dir.join("login.png"), c.screenshot().await.unwrap()).unwrap();
            }
            login(&c, &base, TOKEN).await;
            let row = format!("tr[data-queue=\"{queue}\"]");
            c.wait().for_element(Locator::Css(&row)).await.unwrap();
            assert_eq!(
                text(&c, &format!("{row} td[data-f=dead]")).await,
                "1",
                "[{label}]"
            );

            // The dead letters: requeue, and the row goes without a reload.
            c.goto(&format!("{base}/dead")).await.unwrap();
            let job_row = format!("#job-{dead}");
            let r = c.find(Locator::Css(&job_row)).await.unwrap();
            assert!(
                r.text()
                    .await
                    .unwrap()
                    .contains("timeout talking to the warehouse"),
                "[{label}]"
            );
            if label == "sqlite" {
                std::fs::write(dir.join("dead.png"), c.screenshot().await.unwrap()).unwrap();
            }
            c.execute("window.notReloaded = true;", vec![])
                .await
                .unwrap();
            c.find(Locator::Css(&format!("{job_row} button.action")))
                .await
                .unwrap()
                .click()
                .await
                .unwrap();
            until(
                &c,
                "the row to leave",
                &format!("!document.querySelector('{job_row}')"),
            )
            .await;
            until(
                &c,
                "the flash",
                "document.getElementById('flash').textContent.includes('requeued: true')",
            )
            .await;
            assert_eq!(
                c.execute("return window.notReloaded === true;", vec![])
                    .await
                    .unwrap(),
                json!(true),
                "[{label}] no reload"
            );
            assert_eq!(
                off(|| store.get_job(dead)).unwrap().unwrap()["state"],
                "pending",
                "[{label}]"
            );

            // The overview follows the database live: a job dies elsewhere.
            c.goto(&format!("{base}/")).await.unwrap();
            c.execute("window.notReloaded = true;", vec![])
                .await
                .unwrap();
            until(
                &c,
                "the dead count to read 0",
                &format!("document.querySelector('{row} td[data-f=dead]').textContent === '0'"),
            )
            .await;
            off(|| {
                for job in q.claim("w", 10).unwrap() {
                    if job.id == dead {
                        q.fail(job.id, "w", "timeout again").unwrap();
                    }
                }
            });
            until(
                &c,
                "the dead count to read 1 again",
                &format!("document.querySelector('{row} td[data-f=dead]').textContent === '1'"),
            )
            .await;
            assert_eq!(
                c.execute("return window.notReloaded === true;", vec![])
                    .await
                    .unwrap(),
                json!(true),
                "[{label}] no reload"
            );
            if label == "sqlite" {
                std::fs::write(dir.join("overview.png"), c.screenshot().await.unwrap()).unwrap();
            }

            // The dead job's page: both of its errors, oldest first.
            c.goto(&format!("{base}/jobs/{dead}")).await.unwrap();
            let rows = c.find_all(Locator::Css("#errors tbody tr")).await.unwrap();
            assert_eq!(rows.len(), 2, "[{label}]");
            assert!(
                rows[0]
                    .text()
                    .await
                    .unwrap()
                    .contains("timeout talking to the warehouse"),
                "[{label}]"
            );
            assert!(
                rows[1].text().await.unwrap().contains("timeout again"),
                "[{label}]"
            );
            if label == "sqlite" {
                std::fs::write(dir.join("dead-job.png"), c.screenshot().await.unwrap()).unwrap();
            }

            // The queue's page: filter on a payload field; the jobs of a workflow.
            c.goto(&format!(
                "{base}/queues/{queue}?state=dead&filter=account%3D42"
            ))
            .await
            .unwrap();
            c.find(Locator::Css(&job_row)).await.unwrap();
            if label == "sqlite" {
                std::fs::write(dir.join("queue.png"), c.screenshot().await.unwrap()).unwrap();
            }
            c.goto(&format!(
                "{base}/queues/{queue}?state=dead&filter=account%3D7"
            ))
            .await
            .unwrap();
            c.find(Locator::Id("no-jobs")).await.unwrap();

            // Limits, edited on the queue's page.
            c.goto(&format!("{base}/queues/{queue}")).await.unwrap();
            c.find(Locator::Css("details.limits summary"))
                .await
                .unwrap()
                .click()
                .await
                .unwrap();
            c.find(Locator::Css("#limits input[name=max_running]"))
                .await
                .unwrap()
                .send_keys("4")
                .await
                .unwrap();
            c.find(Locator::Css("#limits button[type=submit]"))
                .await
                .unwrap()
                .click()
                .await
                .unwrap();
            until(
                &c,
                "the limits to be saved",
                "document.getElementById('flash').textContent === 'limits saved'",
            )
            .await;
            assert_eq!(off(|| q.opts()).unwrap()["max_running"], 4, "[{label}]");

            // Bulk: requeue what the filter matches, after a confirmation
            // that names the count (the browser's confirm answered yes).
            c.goto(&format!(
                "{base}/queues/{queue}?state=dead&filter=report%3Dmonthly"
            ))
            .await
            .unwrap();
            c.execute("window.asked = []; window.confirm = (q) => { sessionStorage.setItem('asked', q); return true; };", vec![]).await.unwrap();
            c.find(Locator::XPath("//button[text()='Requeue all matching']"))
                .await
                .unwrap()
                .click()
                .await
                .unwrap();
            until(
                &c,
                "the page to reload after the bulk requeue",
                "window.asked === undefined",
            )
            .await;
            c.find(Locator::Id("no-jobs")).await.unwrap();
            let asked = c
                .execute("return sessionStorage.getItem('asked');", vec![])
                .await
                .unwrap();
            assert_eq!(asked, json!("Requeue 1 matching jobs?"), "[{label}]");
            assert_eq!(
                off(|| store.get_job(dead)).unwrap().unwrap()["state"],
                "pending",
                "[{label}]"
            );

            // A dependent job draws what it waits for.
            let (extract, load) = (ids["extract"], ids["load"]);
            c.goto(&format!("{base}/jobs/{load}")).await.unwrap();
            c.find(Locator::Css(&format!(
                "#dependency-graph rect[data-job=\"{extract}\"]"
            )))
            .await
            .unwrap();
            let graph = c
                .execute(
                    "return document.getElementById('dependency-graph').textContent;",
                    vec![],
                )
                .await
                .unwrap();
            assert!(
                graph
                    .as_str()
                    .unwrap()
                    .contains(&format!("#{extract} pending")),
                "[{label}] {graph}"
            );
            assert!(
                text(&c, "main p")
                    .await
                    .contains(&format!("waiting for #{extract}")),
                "[{label}]"
            );
            if label == "sqlite" {
                std::fs::write(dir.join("job.png"), c.screenshot().await.unwrap()).unwrap();
                for page in ["streams", "schedules", "locks", "health"] {
                    c.goto(&format!("{base}/{page}")).await.unwrap();
                    c.find(Locator::Css("main h1")).await.unwrap();
                    std::fs::write(
                        dir.join(format!("{page}.png")),
                        c.screenshot().await.unwrap(),
                    )
                    .unwrap();
                }
            } else {
                c.goto(&format!("{base}/health")).await.unwrap();
                assert!(
                    c.source()
                        .await
                        .unwrap()
                        .contains("Oldest transaction holding back vacuum"),
                    "[{label}]"
                );
                std::fs::write(
                    dir.join("health-postgres.png"),
                    c.screenshot().await.unwrap(),
                )
                .unwrap();
            }
            c.close().await.unwrap();
        });
        drop(server);
        store.unschedule(&nightly).unwrap();
        q.purge("dead").unwrap();
        q.purge("pending").unwrap();
    }
}

#[test]
fn a_read_only_dashboard_refuses_changes_in_the_browser() {
    let Some(driver) = driver() else { return };
    let t = &targets()[0];
    let store = alkstore::open(&t.url).unwrap();
    let queue = fresh("ro");
    let q = store.queue(&queue).unwrap();
    let dead = q
        .enqueue(&EnqueueOpts::new().max_attempts(1), &json!({"n": 1}))
        .unwrap();
    q.claim("w", 1).unwrap();
    q.fail(dead, "w", "no").unwrap();
    let server = serve(
        &t.url,
        Config {
            token: Some(TOKEN.into()),
            read_only: true,
            ..Config::default()
        },
    );
    let base = server.url("");
    block_on(async {
        let c = browser(&driver).await;
        login(&c, &base, TOKEN).await;
        c.goto(&format!("{base}/queues/{queue}?state=dead"))
            .await
            .unwrap();
        assert_eq!(text(&c, "#read-only").await, "read-only");
        // Waited for, as the other tests' first elements are (CI once found
        // no such element here, on a loaded machine; it passed on reruns).
        let button = c
            .wait()
            .for_element(Locator::Css(&format!("#job-{dead} button.action")))
            .await
            .unwrap();
        assert!(
            !button.is_enabled().await.unwrap(),
            "the requeue button is disabled"
        );
        // Sent anyway, with the page's own session and CSRF token: 403.
        let status = c
            .execute_async(
                &format!(
                    "const done = arguments[0]; fetch('{base}/api/jobs/{dead}/requeue', {{method: 'POST', headers: {{'x-csrf-token': document.querySelector('meta[name=csrf-token]').content}}}}).then(r => done(r.status));"
                ),
                vec![],
            )
            .await
            .unwrap();
        assert_eq!(status, json!(403));
        c.close().await.unwrap();
    });
    assert_eq!(store.get_job(dead).unwrap().unwrap()["state"], "dead");
}

/// Serves one HTML page on a port of its own (another origin than the
/// dashboard's), for as long as the process runs; returns its URL.
fn other_site(html: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://127.0.0.1:{}/",
        listener.local_addr().unwrap().port()
    );
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let mut buf = [0u8; 4096];
            let _ = std::io::Read::read(&mut stream, &mut buf);
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{html}",
                html.len()
            );
            let _ = std::io::Write::write_all(&mut stream, answer.as_bytes());
        }
    });
    url
}

/// Issue 57 item 2 (clickjacking): a page of another site that frames the
/// dashboard (token-less, as `alkstore web` runs by default on localhost)
/// gets no dashboard in its frame — the browser refuses to render it, so
/// none of its buttons can be clicked through the frame.
#[test]
fn another_site_cannot_frame_the_dashboard() {
    let Some(driver) = driver() else { return };
    let t = &targets()[0];
    let server = serve(&t.url, Config::default());
    let dashboard = server.url("/");
    let attacker = other_site(format!(
        "<!doctype html><title>prize</title><iframe id=f width=800 height=600 src=\"{dashboard}\"></iframe>"
    ));
    block_on(async {
        let c = browser(&driver).await;
        // The dashboard itself renders.
        c.goto(&dashboard).await.unwrap();
        assert!(
            c.find(Locator::Css("header nav")).await.is_ok(),
            "the dashboard renders on its own"
        );
        c.goto(&attacker).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        c.enter_frame(0).await.unwrap();
        let inside = c
            .execute(
                "return document.querySelector('header nav') !== null;",
                vec![],
            )
            .await
            .unwrap();
        let url = c.execute("return document.URL;", vec![]).await.unwrap();
        assert_eq!(
            inside,
            json!(false),
            "the framed dashboard rendered (frame at {url})"
        );
        c.close().await.unwrap();
    });
}

/// Issue 57: where no maintenance worker serves the database, the health
/// page warns while no sweep has run (none yet, or none for over a minute)
/// and says nothing once one has. A SQLite file of its own, so no other
/// test's sweep comes between.
#[test]
fn the_health_page_warns_while_nothing_sweeps() {
    let Some(driver) = driver() else { return };
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("unswept.db").display());
    let store = alkstore::open(&url).unwrap();
    let server = serve(&url, Config::default());
    let health = server.url("/health");
    block_on(async {
        let c = browser(&driver).await;
        c.goto(&health).await.unwrap();
        let warned = text(&c, "#no-sweep").await;
        assert!(
            warned.contains("No sweep has run in this database"),
            "{warned}"
        );
        off(|| store.queue("any").unwrap().sweep().unwrap());
        c.goto(&health).await.unwrap();
        c.find(Locator::Css("#maintenance")).await.unwrap();
        assert!(
            c.find(Locator::Css("#no-sweep")).await.is_err(),
            "warned right after a sweep"
        );
        // A sweep an hour ago is as good as none.
        off(|| {
            let hour_ago = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64
                - 3_600_000;
            let c = rusqlite::Connection::open(dir.path().join("unswept.db")).unwrap();
            c.execute(
                "UPDATE alk_meta SET value = ?1 WHERE key = 'last_sweep_at'",
                [hour_ago.to_string()],
            )
            .unwrap();
        });
        c.goto(&health).await.unwrap();
        let warned = text(&c, "#no-sweep").await;
        assert!(warned.contains("No sweep has run for 60 min"), "{warned}");
        c.close().await.unwrap();
    });
}
