//! What the relay's tests share: a store on each engine, a relay running
//! on a thread, a webhook receiver, and real broker servers started on
//! loopback ports for the test and killed after.
#![allow(dead_code)]

use alkstore::{Stop, Store};
use alkstore_relay::{Config, Relay, Report};
use alkstore_tests::Target;
use axum::http::HeaderMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The store of a test target.
pub fn store(target: &Target) -> Store {
    if target.is_postgres() {
        // Through PgBouncer, the listener connects to the server itself.
        return alkstore::PgStore::connect_with_listener(target.pg_url(), target.pg_direct_url())
            .expect("open the store")
            .into();
    }
    alkstore::open(&format!("sqlite:{}", target.sqlite_path().display())).expect("open the store")
}

/// The groups [`enqueue_groups`] fills, and how many messages each gets.
pub const GROUPS: [&str; 4] = ["a", "b", "c", "d"];
pub const PER_GROUP: i64 = 25;

/// [`PER_GROUP`] messages `{"g": group, "i": n}` in each of [`GROUPS`],
/// enqueued interleaved (a0 b0 c0 d0 a1 …).
pub fn enqueue_groups(store: &Store, outbox: &str) {
    let ob = store.outbox(outbox).unwrap();
    for i in 0..PER_GROUP {
        for g in GROUPS {
            let opts = alkstore::EnqueueOpts {
                group_key: Some(g.into()),
                ..Default::default()
            };
            ob.enqueue(&opts, &serde_json::json!({"g": g, "i": i}))
                .unwrap();
        }
    }
}

/// Each group's messages arrived once, one after another in its order
/// (contract v1.3 §N3), whatever the groups' interleaving.
pub fn assert_group_order(bodies: &[serde_json::Value]) {
    assert_eq!(bodies.len(), GROUPS.len() * PER_GROUP as usize, "each once");
    for g in GROUPS {
        let order: Vec<i64> = bodies
            .iter()
            .filter(|b| b["g"] == g)
            .map(|b| b["i"].as_i64().unwrap())
            .collect();
        assert_eq!(
            order,
            (0..PER_GROUP).collect::<Vec<_>>(),
            "group {g} in order"
        );
    }
}

/// Publishes `{"i": 0}` … `{"i": n - 1}` to `stream`.
pub fn publish_numbered(store: &Store, stream: &str, n: i64) {
    let st = store.stream(stream).unwrap();
    for i in 0..n {
        st.publish(&serde_json::json!({"i": i}), None).unwrap();
    }
}

/// The events of [`publish_numbered`] arrived once each, in offset order.
pub fn assert_numbered(bodies: &[serde_json::Value], n: i64) {
    let got: Vec<i64> = bodies.iter().map(|b| b["i"].as_i64().unwrap()).collect();
    assert_eq!(got, (0..n).collect::<Vec<_>>(), "each event once, in order");
}

/// A relay running on a thread until dropped (or [`Running::stop`]).
pub struct Running {
    pub relay: Arc<Relay>,
    stop: Stop,
    thread: Option<std::thread::JoinHandle<Report>>,
}

impl Running {
    pub fn start(store: &Store, config: &str) -> Running {
        let config = Config::parse(config).expect("a valid config");
        let relay = Arc::new(Relay::new(store.clone(), config));
        let stop = Stop::new();
        let (r, s) = (relay.clone(), stop.clone());
        let thread = std::thread::spawn(move || r.run(&s).expect("the relay runs"));
        Running {
            relay,
            stop,
            thread: Some(thread),
        }
    }

    pub fn stop(mut self) -> Report {
        self.stop.stop();
        self.thread
            .take()
            .unwrap()
            .join()
            .expect("the relay thread")
    }

    pub fn metrics(&self) -> String {
        self.relay.metrics()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The outage of the tests: 1,000 messages `{"i": 0..1000}` enqueued into
/// `outbox` in one transaction while the sink is gone, then 10 s, after
/// which route `route` of `relay` shows the sink down.
pub fn enqueue_during_outage(store: &Store, outbox: &str, relay: &Running, route: &str) {
    let mut tx = store.begin().unwrap();
    for i in 0..1000 {
        tx.outbox_enqueue_tx(
            outbox,
            &alkstore::EnqueueOpts::default(),
            &serde_json::json!({"i": i}),
        )
        .unwrap();
    }
    tx.commit().unwrap();
    std::thread::sleep(Duration::from_secs(10));
    let metrics = relay.metrics();
    assert!(
        metrics.contains(&format!("alkstore_relay_up{{route=\"{route}\"}} 0")),
        "{metrics}"
    );
}

/// Waits until `outbox` holds nothing pending, running or scheduled, then
/// checks that none of its messages is dead.
pub fn assert_all_acked_none_dead(store: &Store, outbox: &str) {
    let ob = store.outbox(outbox).unwrap();
    wait_until(60, &format!("every ack of {outbox}"), || {
        let s = ob.stats().unwrap();
        s["pending"].as_i64() == Some(0)
            && s["running"].as_i64() == Some(0)
            && s["scheduled"].as_i64() == Some(0)
    });
    assert_eq!(
        ob.stats().unwrap()["dead"].as_i64(),
        Some(0),
        "none dead in {outbox}"
    );
}

/// Waits up to `secs` for `f` to hold (a loaded two-core machine is slow:
/// generous bounds), panicking with `what` if it never does.
pub fn wait_until(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("waited {secs} s for {what}");
}

/// One request a [`Receiver`] took.
#[derive(Clone, Debug)]
pub struct Received {
    pub headers: HeaderMap,
    pub body: String,
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    }
}

/// An answer a [`Receiver`] gives: status, headers, body.
pub type Answer = (u16, Vec<(&'static str, String)>, String);
type Answerer = dyn Fn(&Received, usize) -> Answer + Send + Sync;

/// A webhook endpoint on a loopback port: records every request and
/// answers as told (`answer(request, how many came before)`).
pub struct Receiver {
    pub url: String,
    /// Where it listens: `127.0.0.1:{port}`.
    pub addr: String,
    pub got: Arc<Mutex<Vec<Received>>>,
    _rt: tokio::runtime::Runtime,
}

impl Receiver {
    pub fn ok() -> Receiver {
        Receiver::answering(|_, _| (200, vec![], String::new()))
    }

    pub fn answering(
        answer: impl Fn(&Received, usize) -> Answer + Send + Sync + 'static,
    ) -> Receiver {
        Receiver::answering_at("127.0.0.1:0", answer)
    }

    /// [`Receiver::answering`] on `addr`: the address of a receiver
    /// dropped earlier (an endpoint that went away and came back).
    pub fn answering_at(
        addr: &str,
        answer: impl Fn(&Received, usize) -> Answer + Send + Sync + 'static,
    ) -> Receiver {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let got: Arc<Mutex<Vec<Received>>> = Arc::default();
        let answer: Arc<Answerer> = Arc::new(answer);
        // A port freed moments ago may still be held by a connection
        // closing: try again for a while.
        let until = Instant::now() + Duration::from_secs(30);
        let listener = loop {
            match rt.block_on(tokio::net::TcpListener::bind(addr)) {
                Ok(listener) => break listener,
                Err(e) if Instant::now() < until => {
                    eprintln!("binding {addr}: {e}; trying again");
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => panic!("binding {addr}: {e}"),
            }
        };
        let addr = listener.local_addr().unwrap().to_string();
        let url = format!("http://{addr}/hook");
        let g = got.clone();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: String| {
                let (g, answer) = (g.clone(), answer.clone());
                async move {
                    let r = Received {
                        headers,
                        body,
                        at: Instant::now(),
                    };
                    let n = {
                        let mut g = g.lock().unwrap();
                        g.push(r.clone());
                        g.len() - 1
                    };
                    let (status, headers, body) = answer(&r, n);
                    let mut resp = axum::response::Response::builder().status(status);
                    for (k, v) in headers {
                        resp = resp.header(k, v);
                    }
                    resp.body(axum::body::Body::from(body)).unwrap()
                }
            }),
        );
        rt.spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Receiver {
            url,
            addr,
            got,
            _rt: rt,
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }
}

/// Whether the test command requires the broker servers
/// (`ALKSTORE_REQUIRE_RELAY=1`); without it a missing server binary skips
/// that test with a note.
pub fn servers_required() -> bool {
    std::env::var("ALKSTORE_REQUIRE_RELAY").is_ok_and(|v| v == "1")
}

fn found(binary: &str) -> Option<String> {
    for dir in ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"] {
        let p = format!("{dir}/{binary}");
        if std::path::Path::new(&p).exists() {
            return Some(p);
        }
    }
    assert!(
        !servers_required(),
        "{binary} not found but ALKSTORE_REQUIRE_RELAY=1"
    );
    eprintln!("note: {binary} not found: not tested");
    None
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A broker server of the test's own, killed when dropped.
pub struct Server {
    pub port: u16,
    binary: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    child: Option<Child>,
    /// Whether it ever listened (a restart keeps its port).
    started: bool,
    _dir: tempfile::TempDir,
}

impl Server {
    /// `redis-server` on a free port, nothing saved to disk.
    pub fn redis() -> Option<Server> {
        let binary = found("redis-server")?;
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let args = vec![
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--save".into(),
            String::new(),
            "--appendonly".into(),
            "no".into(),
            "--dir".into(),
            dir.path().display().to_string(),
        ];
        Some(Server::started(binary, args, port, dir))
    }

    /// `nats-server` with JetStream on a free port, its store in a
    /// directory of its own (kept across a restart of this server).
    pub fn nats() -> Option<Server> {
        let binary = found("nats-server")?;
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let args = vec![
            "-js".into(),
            "-a".into(),
            "127.0.0.1".into(),
            "-p".into(),
            port.to_string(),
            "-sd".into(),
            dir.path().display().to_string(),
        ];
        Some(Server::started(binary, args, port, dir))
    }

    /// A RabbitMQ node of its own (user guest, loopback only): its port,
    /// Erlang distribution port, data and logs in a directory of its own.
    /// Takes about 10 s to start.
    pub fn rabbitmq() -> Option<Server> {
        let binary = found("rabbitmq-server")?;
        // The script in /usr/sbin switches to the rabbitmq user; the one
        // beside the broker runs as whoever calls it.
        let binary = ["/usr/lib/rabbitmq/bin/rabbitmq-server"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .map(String::from)
            .unwrap_or(binary);
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let d = dir.path().display().to_string();
        std::fs::write(dir.path().join("plugins"), "[].").unwrap();
        let env = vec![
            (
                "RABBITMQ_NODENAME".to_string(),
                format!("alk{port}@localhost"),
            ),
            ("RABBITMQ_NODE_IP_ADDRESS".into(), "127.0.0.1".into()),
            ("RABBITMQ_NODE_PORT".into(), port.to_string()),
            ("RABBITMQ_DIST_PORT".into(), free_port().to_string()),
            ("RABBITMQ_MNESIA_BASE".into(), format!("{d}/mnesia")),
            ("RABBITMQ_LOG_BASE".into(), format!("{d}/log")),
            (
                "RABBITMQ_ENABLED_PLUGINS_FILE".into(),
                format!("{d}/plugins"),
            ),
            ("RABBITMQ_PID_FILE".into(), format!("{d}/pid")),
            ("HOME".into(), d.clone()),
        ];
        let mut s = Server {
            port,
            binary,
            args: vec![],
            env,
            child: None,
            started: false,
            _dir: dir,
        };
        s.start();
        Some(s)
    }

    fn started(binary: String, args: Vec<String>, port: u16, dir: tempfile::TempDir) -> Server {
        let mut s = Server {
            port,
            binary,
            args,
            env: vec![],
            child: None,
            started: false,
            _dir: dir,
        };
        s.start();
        s
    }

    /// Starts it (again) on the same port and waits until it listens, still
    /// running: something listening on the port is not enough, as another
    /// test's server may have taken the free port this one was given (its
    /// own then exits at once). A first start that loses its port that way
    /// moves to a new one; a server that exits before it listens is started
    /// once more.
    pub fn start(&mut self) {
        use std::os::unix::process::CommandExt;
        let first = !self.started;
        for _ in 0..3 {
            let mut child = Command::new(&self.binary)
                .args(&self.args)
                .envs(self.env.iter().map(|(k, v)| (k, v)))
                // A group of its own: a kill reaches what a script started.
                .process_group(0)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("start {}: {e}", self.binary));
            let end = Instant::now() + Duration::from_secs(90);
            while Instant::now() < end {
                if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                    std::thread::sleep(Duration::from_millis(300));
                    if child.try_wait().ok().flatten().is_none() {
                        self.child = Some(child);
                        self.started = true;
                        return;
                    }
                }
                if let Ok(Some(status)) = child.try_wait() {
                    eprintln!("{} exited ({status}) before it listened", self.binary);
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            self.child = Some(child);
            self.kill();
            if first {
                self.move_to(free_port());
            }
        }
        panic!("{} did not listen on port {}", self.binary, self.port);
    }

    /// The same server on another port (its name too, for RabbitMQ).
    fn move_to(&mut self, port: u16) {
        let (old, new) = (self.port.to_string(), port.to_string());
        for a in &mut self.args {
            if *a == old {
                *a = new.clone();
            }
        }
        for (k, v) in &mut self.env {
            if k == "RABBITMQ_NODE_PORT" {
                *v = new.clone();
            } else if k == "RABBITMQ_NODENAME" {
                *v = format!("alk{port}@localhost");
            } else if k == "RABBITMQ_DIST_PORT" {
                *v = free_port().to_string();
            }
        }
        self.port = port;
    }

    /// Kills it (SIGKILL) and waits for it to be gone.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", c.id())])
                .status();
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}
