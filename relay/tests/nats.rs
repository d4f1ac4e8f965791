//! The relay to NATS JetStream (contract v1.3 §N), against a real
//! `nats-server -js` of the test's own: headers, JetStream dropping a
//! redelivery under the same `Nats-Msg-Id`, and a subject no stream
//! captures refused (an attempt spent, dead after `max_attempts`).

mod common;

use alkstore::EnqueueOpts;
use alkstore_tests::{fresh, per_engine};
use common::*;
use serde_json::{json, Value};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Creates the JetStream stream `ORDERS` capturing `orders.>`.
fn jetstream(port: u16) -> async_nats::jetstream::Context {
    rt().block_on(async {
        let client = async_nats::connect(format!("nats://127.0.0.1:{port}"))
            .await
            .unwrap();
        let js = async_nats::jetstream::new(client);
        js.get_or_create_stream(async_nats::jetstream::stream::Config {
            name: "ORDERS".into(),
            subjects: vec!["orders.>".into()],
            ..Default::default()
        })
        .await
        .unwrap();
        js
    })
}

/// Every message of the stream `ORDERS`: its headers and payload (none
/// while the server or its JetStream cannot answer).
fn messages(port: u16) -> Vec<(async_nats::HeaderMap, Value)> {
    rt().block_on(async {
        let Ok(client) = async_nats::connect(format!("nats://127.0.0.1:{port}")).await else {
            return vec![];
        };
        let js = async_nats::jetstream::new(client);
        let Ok(mut stream) = js.get_stream("ORDERS").await else {
            return vec![];
        };
        let Ok(info) = stream.info().await else {
            return vec![];
        };
        let mut out = Vec::new();
        for seq in 1..=info.state.messages {
            let Ok(m) = stream.get_raw_message(seq).await else {
                return vec![];
            };
            out.push((m.headers, serde_json::from_slice(&m.payload).unwrap()));
        }
        out
    })
}

/// How many messages the stream `ORDERS` holds (0 while it cannot answer).
fn count(port: u16) -> u64 {
    rt().block_on(async {
        let Ok(client) = async_nats::connect(format!("nats://127.0.0.1:{port}")).await else {
            return 0;
        };
        let js = async_nats::jetstream::new(client);
        let Ok(mut stream) = js.get_stream("ORDERS").await else {
            return 0;
        };
        stream.info().await.map_or(0, |i| i.state.messages)
    })
}

/// Not a test of its own: the relay that
/// `a_sigkilled_relay_loses_nothing_and_jetstream_keeps_one_copy` runs in
/// a child process of this test binary, so that it can be SIGKILLed.
/// Without its variables it does nothing.
#[test]
fn relay_process() {
    let (Ok(url), Ok(config)) = (
        std::env::var("ALK_RELAY_CHILD_URL"),
        std::env::var("ALK_RELAY_CHILD_CONFIG"),
    ) else {
        return;
    };
    let store = match std::env::var("ALK_RELAY_CHILD_LISTENER_URL") {
        Ok(direct) => alkstore::PgStore::connect_with_listener(&url, &direct)
            .unwrap()
            .into(),
        Err(_) => alkstore::open(&url).unwrap(),
    };
    let config = alkstore_relay::Config::parse(&config).unwrap();
    let relay = alkstore_relay::Relay::new(store, config);
    relay.run(&alkstore::Stop::new()).unwrap();
}

/// A child relay, SIGKILLed when dropped: a failed assertion leaves none
/// running.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// [`relay_process`] as a child process.
fn relay_child(target: &alkstore_tests::Target, config: &str) -> Child {
    let mut command = std::process::Command::new(std::env::current_exe().unwrap());
    if target.is_postgres() {
        command
            .env("ALK_RELAY_CHILD_URL", target.pg_url())
            .env("ALK_RELAY_CHILD_LISTENER_URL", target.pg_direct_url());
    } else {
        let url = format!("sqlite:{}", target.sqlite_path().display());
        command.env("ALK_RELAY_CHILD_URL", url);
    }
    command
        .args([
            "relay_process",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ALK_RELAY_CHILD_CONFIG", config)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map(Child)
        .unwrap()
}

per_engine! {
    /// The relay SIGKILLed mid-run (publishes in flight, acks not yet
    /// written) and started again: every outbox message and stream event
    /// is in the JetStream stream, and only once — redeliveries go out
    /// under the same `Nats-Msg-Id`, which JetStream's duplicate window
    /// drops — none dead. The killed relay's claims come back when they
    /// expire (the outbox's 60 s).
    fn a_sigkilled_relay_loses_nothing_and_jetstream_keeps_one_copy(target) {
        let Some(server) = Server::nats() else { return };
        let _ = jetstream(server.port);
        let store = store(target);
        let (outbox, stream) = (fresh("relay-nats-kill"), fresh("relay-nats-kill-st"));
        let ob = store.outbox(&outbox).unwrap();
        for i in 0..600 {
            ob.enqueue(&EnqueueOpts::default(), &json!({"i": i})).unwrap();
        }
        publish_numbered(&store, &stream, 200);
        let config = format!(
            "[[route]]\nname = \"orders\"\noutbox = \"{outbox}\"\nto = \"nats://127.0.0.1:{p}\"\nsubject = \"orders.new\"\nconcurrency = 16\n\n\
             [[route]]\nname = \"events\"\nstream = \"{stream}\"\nto = \"nats://127.0.0.1:{p}\"\nsubject = \"orders.events\"\nconcurrency = 16\n",
            p = server.port
        );
        let first = relay_child(target, &config);
        wait_until(60, "a first part delivered", || count(server.port) >= 150);
        drop(first); // SIGKILL
        let second = relay_child(target, &config);
        wait_until(240, "every message and event", || count(server.port) >= 800);
        // The killed relay's claims come back 60 s after they were made.
        wait_until(150, "every ack", || {
            let s = ob.stats().unwrap();
            s["pending"].as_i64() == Some(0) && s["running"].as_i64() == Some(0)
        });
        // Anything sent again in the meantime would show now.
        std::thread::sleep(std::time::Duration::from_secs(1));
        drop(second);
        assert_eq!(ob.stats().unwrap()["dead"].as_i64(), Some(0), "none dead");
        let got = messages(server.port);
        let ids: std::collections::HashSet<String> = got
            .iter()
            .map(|(h, _)| h.get(async_nats::header::NATS_MESSAGE_ID).unwrap().to_string())
            .collect();
        assert_eq!(got.len(), 800, "one copy of each");
        assert_eq!(ids.len(), 800);
        let events: Vec<Value> = got
            .iter()
            .filter(|(h, _)| h.get("Alk-Source").map(|v| v.as_str()) == Some(format!("stream:{stream}").as_str()))
            .map(|(_, b)| b.clone())
            .collect();
        assert_numbered(&events, 200);
    }
}

per_engine! {
    /// A message larger than the server's `max_payload` (1 MB by default)
    /// is a refusal: dead after `max_attempts` with the reason, while the
    /// messages after it go on (an outage would hold the route back).
    fn a_message_over_max_payload_is_refused_and_the_route_goes_on(target) {
        let Some(server) = Server::nats() else { return };
        let _ = jetstream(server.port);
        let store = store(target);
        let outbox = fresh("relay-nats-big");
        let ob = store.outbox(&outbox).unwrap();
        let big = ob
            .enqueue(&EnqueueOpts { max_attempts: Some(2), ..Default::default() }, &json!({"blob": "x".repeat(1_100_000)}))
            .unwrap();
        ob.enqueue(&EnqueueOpts::default(), &json!({"after": true})).unwrap();
        let config = format!(
            "[[route]]\nname = \"big\"\noutbox = \"{outbox}\"\nto = \"nats://127.0.0.1:{}\"\nsubject = \"orders.big\"\n",
            server.port
        );
        let relay = Running::start(&store, &config);
        wait_until(60, "the small message", || count(server.port) == 1);
        assert_eq!(messages(server.port)[0].1, json!({"after": true}));
        // Its second attempt waits out the outbox's backoff.
        wait_until(120, "the big one dead", || store.get_job(big).unwrap().is_some_and(|j| j["state"] == "dead"));
        let dead = store.get_job(big).unwrap().unwrap();
        assert!(dead["last_error"].as_str().unwrap().contains("over the server's max_payload of 1048576"), "{dead}");
        assert!(relay.metrics().contains("alkstore_relay_up{route=\"big\"} 1"), "{}", relay.metrics());
    }
}

per_engine! {
    /// A message arrives with `Nats-Msg-Id` = `Alk-Id` = its message id and
    /// `Alk-Source`, `Alk-Attempt`; a publish under the same id again is
    /// dropped by JetStream's duplicate window; a subject no stream
    /// captures is a refusal that dead-letters after `max_attempts`.
    fn messages_arrive_with_their_ids_and_jetstream_drops_repeats(target) {
        let Some(server) = Server::nats() else { return };
        let _ = jetstream(server.port);
        let store = store(target);
        let outbox = fresh("relay-nats");
        let nowhere = fresh("relay-nats-nowhere");
        let id = store.outbox(&outbox).unwrap().enqueue(&EnqueueOpts::default(), &json!({"order": 1})).unwrap();
        let lost = store
            .outbox(&nowhere)
            .unwrap()
            .enqueue(&EnqueueOpts { max_attempts: Some(1), ..Default::default() }, &json!({}))
            .unwrap();
        let config = format!(
            "[[route]]\nname = \"to-nats\"\noutbox = \"{outbox}\"\nto = \"nats://127.0.0.1:{p}\"\nsubject = \"orders.new\"\n\n\
             [[route]]\nname = \"nowhere\"\noutbox = \"{nowhere}\"\nto = \"nats://127.0.0.1:{p}\"\nsubject = \"nobody.listens\"\n",
            p = server.port
        );
        let relay = Running::start(&store, &config);
        wait_until(60, "one message in the stream", || messages(server.port).len() == 1);
        wait_until(60, "the refused message to go dead", || {
            store.get_job(lost).unwrap().is_some_and(|j| j["state"] == "dead")
        });
        let dead = store.get_job(lost).unwrap().unwrap();
        assert!(dead["last_error"].as_str().unwrap().contains("no JetStream stream captures"), "{dead}");
        drop(relay);
        let (headers, payload) = &messages(server.port)[0];
        let want = format!("outbox:{outbox}:{id}");
        assert_eq!(headers.get(async_nats::header::NATS_MESSAGE_ID).unwrap().as_str(), want);
        assert_eq!(headers.get("Alk-Id").unwrap().as_str(), want);
        assert_eq!(headers.get("Alk-Source").unwrap().as_str(), format!("outbox:{outbox}"));
        assert_eq!(headers.get("Alk-Attempt").unwrap().as_str(), "1");
        assert_eq!(payload, &json!({"order": 1}));
        // What a redelivery after a crash is: the same id again.
        rt().block_on(async {
            let client = async_nats::connect(format!("nats://127.0.0.1:{}", server.port)).await.unwrap();
            let js = async_nats::jetstream::new(client);
            let mut h = async_nats::HeaderMap::new();
            h.insert("Nats-Msg-Id", want.as_str());
            let ack = js.publish_with_headers("orders.new", h, "{}".into()).await.unwrap().await.unwrap();
            assert!(ack.duplicate, "JetStream drops the repeat");
        });
        assert_eq!(messages(server.port).len(), 1);
    }
}

per_engine! {
    /// Under `concurrency` 16 (JetStream publishes in flight side by side)
    /// each outbox group's messages are in its order and a stream's events
    /// in offset order.
    fn group_and_stream_order_hold_under_concurrency(target) {
        let Some(server) = Server::nats() else { return };
        let _ = jetstream(server.port);
        let store = store(target);
        let (outbox, stream) = (fresh("relay-nats-order"), fresh("relay-nats-order-st"));
        enqueue_groups(&store, &outbox);
        publish_numbered(&store, &stream, 60);
        let config = format!(
            "[[route]]\nname = \"groups\"\noutbox = \"{outbox}\"\nto = \"nats://127.0.0.1:{p}\"\nsubject = \"orders.groups\"\nconcurrency = 16\n\n\
             [[route]]\nname = \"events\"\nstream = \"{stream}\"\nto = \"nats://127.0.0.1:{p}\"\nsubject = \"orders.events\"\nconcurrency = 16\n",
            p = server.port
        );
        let relay = Running::start(&store, &config);
        wait_until(120, "160 messages", || messages(server.port).len() >= 160);
        drop(relay);
        let all = messages(server.port);
        let from = |source: String| -> Vec<Value> {
            all.iter()
                .filter(|(h, _)| h.get("Alk-Source").map(|v| v.as_str()) == Some(source.as_str()))
                .map(|(_, b)| b.clone())
                .collect()
        };
        assert_group_order(&from(format!("outbox:{outbox}")));
        assert_numbered(&from(format!("stream:{stream}")), 60);
    }
}

per_engine! {
    /// The NATS server killed while 1,000 messages are enqueued and
    /// started again 10 s later (its JetStream store kept): every message
    /// is in the stream once it is back, none dead, no attempt spent, and
    /// JetStream holds one copy of each id.
    fn an_outage_loses_nothing_and_spends_no_attempt(target) {
        let Some(mut server) = Server::nats() else { return };
        let _ = jetstream(server.port);
        let store = store(target);
        let outbox = fresh("relay-nats-down");
        let ob = store.outbox(&outbox).unwrap();
        let config = format!(
            "[[route]]\nname = \"down\"\noutbox = \"{outbox}\"\nto = \"nats://127.0.0.1:{}\"\nsubject = \"orders.new\"\ntimeout_s = 2\n",
            server.port
        );
        let relay = Running::start(&store, &config);
        ob.enqueue(&EnqueueOpts::default(), &json!({"i": -1})).unwrap();
        wait_until(60, "a first message", || messages(server.port).len() == 1);
        server.kill();
        enqueue_during_outage(&store, &outbox, &relay, "down");
        server.start();
        wait_until(180, "1,001 messages", || {
            messages(server.port).len() >= 1001
        });
        assert_all_acked_none_dead(&store, &outbox);
        let got = messages(server.port);
        let ids: std::collections::HashSet<String> = got
            .iter()
            .map(|(h, _)| h.get(async_nats::header::NATS_MESSAGE_ID).unwrap().to_string())
            .collect();
        assert_eq!(got.len(), 1001, "one copy of each");
        assert_eq!(ids.len(), 1001);
        assert!(got.iter().all(|(h, _)| h.get("Alk-Attempt").unwrap().as_str() == "1"), "no attempt spent");
    }
}
