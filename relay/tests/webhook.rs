//! The relay to webhooks (contract v1.3 §N): what arrives, under which ids
//! and headers, in which order, and what a refusing or unavailable
//! endpoint does to the outbox, and one gone for 10 s — on SQLite and PostgreSQL (extension,
//! plain install, PgBouncer), with a real HTTP receiver.

mod common;

use alkstore::EnqueueOpts;
use alkstore_tests::{fresh, per_engine};
use base64::Engine as _;
use common::*;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use std::time::Duration;

const SECRET: &str = "whsec_c2VjcmV0LWtleS1vZi10aGUtdGVzdA==";

fn route(name: &str, source: &str, url: &str, extra: &str) -> String {
    format!("[[route]]\nname = \"{name}\"\n{source}\nto = \"{url}\"\n{extra}\n")
}

per_engine! {
    /// Committed messages arrive once, with `webhook-id` = `outbox:{outbox}:{job}`,
    /// a timestamp and a Standard Webhooks signature that verifies, the
    /// alkstore headers and the payload as JSON; a rolled-back message never.
    fn committed_outbox_messages_arrive_once_with_their_ids_and_a_signature(target) {
        let store = store(target);
        let outbox = fresh("relay-hook");
        let rx = Receiver::ok();
        let mut ids = Vec::new();
        for i in 0..3 {
            let mut tx = store.begin().unwrap();
            ids.push(tx.outbox_enqueue_tx(&outbox, &EnqueueOpts::default(), &json!({"n": i, "name": "ünï"})).unwrap());
            tx.commit().unwrap();
        }
        let mut tx = store.begin().unwrap();
        tx.outbox_enqueue_tx(&outbox, &EnqueueOpts::default(), &json!({"n": "rolled back"})).unwrap();
        tx.rollback().unwrap();
        let relay = Running::start(
            &store,
            &route("hook", &format!("outbox = \"{outbox}\""), &rx.url, &format!("secret = \"{SECRET}\"\nheaders = {{ x-team = \"billing\" }}")),
        );
        wait_until(60, "three deliveries", || rx.received().len() >= 3);
        wait_until(30, "the acks", || {
            store.outbox(&outbox).unwrap().stats().unwrap()["completed"].as_i64() == Some(0)
                && store.outbox(&outbox).unwrap().stats().unwrap()["running"].as_i64() == Some(0)
        });
        std::thread::sleep(Duration::from_millis(1500));
        let mut got = rx.received();
        assert_eq!(got.len(), 3, "each message once, the rolled-back one never");
        // Sent side by side: they may arrive in any order.
        got.sort_by_key(|r| r.header("webhook-id").rsplit(':').next().unwrap().parse::<i64>().unwrap());
        let key = base64::engine::general_purpose::STANDARD
            .decode(SECRET.strip_prefix("whsec_").unwrap())
            .unwrap();
        for (r, id) in got.iter().zip(&ids) {
            let want = format!("outbox:{outbox}:{id}");
            assert_eq!(r.header("webhook-id"), want);
            assert_eq!(r.header("alk-id"), want);
            assert_eq!(r.header("alk-source"), format!("outbox:{outbox}"));
            assert_eq!(r.header("alk-attempt"), "1");
            assert_eq!(r.header("content-type"), "application/json");
            assert_eq!(r.header("x-team"), "billing");
            let ts = r.header("webhook-timestamp");
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
            assert!(now.abs_diff(ts.parse::<u64>().unwrap()) < 120, "a Unix timestamp: {ts}");
            let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
            mac.update(format!("{want}.{ts}.{}", r.body).as_bytes());
            let sig = format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()));
            assert_eq!(r.header("webhook-signature"), sig, "the signature verifies");
            let body: Value = serde_json::from_str(&r.body).unwrap();
            assert_eq!(body["name"], "ünï");
        }
        let ns: Vec<i64> = got.iter().map(|r| serde_json::from_str::<Value>(&r.body).unwrap()["n"].as_i64().unwrap()).collect();
        let mut sorted = ns.clone();
        sorted.sort();
        assert_eq!(sorted, vec![0, 1, 2]);
        let report = relay.stop();
        assert!(report.stopped.is_empty());
    }

    /// Under `concurrency` 16, messages of one group arrive one after
    /// another in their order, while groups go side by side.
    fn group_order_holds_under_concurrency(target) {
        let store = store(target);
        let outbox = fresh("relay-groups");
        let rx = Receiver::ok();
        enqueue_groups(&store, &outbox);
        let relay = Running::start(&store, &route("groups", &format!("outbox = \"{outbox}\""), &rx.url, "concurrency = 16"));
        wait_until(120, "100 deliveries", || rx.received().len() >= 100);
        drop(relay);
        let bodies: Vec<Value> = rx.received().iter().map(|r| serde_json::from_str(&r.body).unwrap()).collect();
        assert_group_order(&bodies);
    }

    /// An HTTP 400 spends an attempt each time and dead-letters the message
    /// after `max_attempts`, with the endpoint's answer as its error.
    fn a_refusal_dead_letters_after_max_attempts_with_the_answer(target) {
        let store = store(target);
        let outbox = fresh("relay-400");
        let rx = Receiver::answering(|_, _| (400, vec![], "no such customer".into()));
        let ob = store.outbox(&outbox).unwrap();
        let id = ob.enqueue(&EnqueueOpts { max_attempts: Some(2), ..Default::default() }, &json!({})).unwrap();
        let relay = Running::start(&store, &route("refused", &format!("outbox = \"{outbox}\""), &rx.url, ""));
        // Two attempts, the backoff of 5 s between them.
        wait_until(90, "the message to go dead", || ob.stats().unwrap()["dead"].as_i64() == Some(1));
        let job = store.get_job(id).unwrap().expect("the dead job");
        assert_eq!(job["state"], "dead");
        assert_eq!(job["attempts"], 2);
        assert_eq!(job["last_error"], "HTTP 400: no such customer");
        let got = rx.received();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].header("alk-attempt"), "1");
        assert_eq!(got[1].header("alk-attempt"), "2");
        let metrics = relay.metrics();
        assert!(metrics.contains("alkstore_relay_failed_total{route=\"refused\"} 2"), "{metrics}");
        assert!(metrics.contains("alkstore_relay_up{route=\"refused\"} 1"), "a refusal is not an outage: {metrics}");
    }

    /// A 503 with `Retry-After: 1` gives the claim back without spending an
    /// attempt, and the message goes again no earlier than the backoff.
    fn a_503_is_retried_after_its_backoff_without_spending_an_attempt(target) {
        let store = store(target);
        let outbox = fresh("relay-503");
        let rx = Receiver::answering(|_, n| {
            if n == 0 {
                (503, vec![("retry-after", "1".into())], "busy".into())
            } else {
                (204, vec![], String::new())
            }
        });
        let ob = store.outbox(&outbox).unwrap();
        let id = ob.enqueue(&EnqueueOpts::default(), &json!({"x": 1})).unwrap();
        let relay = Running::start(&store, &route("busy", &format!("outbox = \"{outbox}\""), &rx.url, ""));
        wait_until(60, "the second delivery", || rx.received().len() >= 2);
        wait_until(30, "the ack", || store.get_job(id).unwrap().is_none_or(|j| j["state"] == "completed"));
        let got = rx.received();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].header("alk-attempt"), "1");
        assert_eq!(got[1].header("alk-attempt"), "1", "the outage spent no attempt");
        assert_eq!(got[0].header("webhook-id"), got[1].header("webhook-id"));
        let gap = got[1].at - got[0].at;
        // Retry-After asked for 1 s; the outbox's backoff (5 s) is longer.
        assert!(gap >= Duration::from_secs(5), "went again after {gap:?}");
        let metrics = relay.metrics();
        assert!(metrics.contains("alkstore_relay_delivered_total{route=\"busy\"} 1"), "{metrics}");
        assert!(metrics.contains("alkstore_relay_up{route=\"busy\"} 1"), "{metrics}");
    }

    /// The endpoint gone for 10 s (its port closed) while 1,000 messages
    /// are enqueued: once it is back every message arrives, none is dead,
    /// no attempt was spent.
    fn an_outage_loses_nothing_and_spends_no_attempt(target) {
        let store = store(target);
        let outbox = fresh("relay-hook-down");
        let ob = store.outbox(&outbox).unwrap();
        let rx = Receiver::ok();
        let addr = rx.addr.clone();
        let relay = Running::start(&store, &route("down", &format!("outbox = \"{outbox}\""), &rx.url, "timeout_s = 2"));
        ob.enqueue(&EnqueueOpts::default(), &json!({"i": -1})).unwrap();
        wait_until(60, "a first delivery", || rx.received().len() == 1);
        // Acked: its answer reached the relay. Cut off before that, the
        // relay cannot know it was delivered and sends it again after the
        // outage, under the same id (CI saw 1,001 ids on Redis).
        wait_until(60, "the first message acked", || {
            let s = ob.stats().unwrap();
            s["pending"].as_i64() == Some(0) && s["running"].as_i64() == Some(0)
        });
        drop(rx);
        enqueue_during_outage(&store, &outbox, &relay, "down");
        let rx = Receiver::answering_at(&addr, |_, _| (200, vec![], String::new()));
        wait_until(180, "1,000 deliveries", || rx.received().len() >= 1000);
        assert_all_acked_none_dead(&store, &outbox);
        let got = rx.received();
        let ids: std::collections::HashSet<String> = got.iter().map(|r| r.header("webhook-id")).collect();
        assert_eq!(ids.len(), 1000, "every message, each under its own id");
        assert!(got.iter().all(|r| r.header("alk-attempt") == "1"), "no attempt spent on the outage");
        assert!(relay.metrics().contains("alkstore_relay_up{route=\"down\"} 1"));
    }

    /// A stream route delivers every event once in offset order (one at a
    /// time here), under `stream:{stream}:{offset}`, and saves its offset;
    /// a second relay on the same file stands by, and takes over when the
    /// first stops.
    fn a_stream_route_delivers_in_order_and_one_relay_at_a_time(target) {
        let store = store(target);
        let stream = fresh("relay-stream");
        let rx = Receiver::ok();
        let st = store.stream(&stream).unwrap();
        for i in 0..20 {
            st.publish(&json!({"i": i}), None).unwrap();
        }
        let config = route("events", &format!("stream = \"{stream}\""), &rx.url, "concurrency = 1");
        let first = Running::start(&store, &config);
        wait_until(60, "20 deliveries", || rx.received().len() >= 20);
        let second = Running::start(&store, &config);
        std::thread::sleep(Duration::from_secs(2));
        for i in 20..30 {
            st.publish(&json!({"i": i}), None).unwrap();
        }
        wait_until(60, "30 deliveries", || rx.received().len() >= 30);
        first.stop();
        for i in 30..40 {
            st.publish(&json!({"i": i}), None).unwrap();
        }
        // The second takes over within the lease's 10 s (released at once here).
        wait_until(60, "40 deliveries", || rx.received().len() >= 40);
        drop(second);
        let got = rx.received();
        let is: Vec<i64> = got.iter().map(|r| serde_json::from_str::<Value>(&r.body).unwrap()["i"].as_i64().unwrap()).collect();
        assert_eq!(is, (0..40).collect::<Vec<_>>(), "each event once, in order");
        for (k, r) in got.iter().enumerate() {
            let offset = r.header("alk-offset").parse::<i64>().unwrap();
            assert_eq!(r.header("webhook-id"), format!("stream:{stream}:{offset}"));
            assert_eq!(r.header("alk-source"), format!("stream:{stream}"));
            if k > 0 {
                assert!(offset > got[k - 1].header("alk-offset").parse::<i64>().unwrap());
            }
        }
        assert_eq!(st.get_offset("events").unwrap(), got[39].header("alk-offset").parse::<i64>().unwrap());
    }

    /// The body is the payload's text as the database keeps it (§N2):
    /// SQLite's byte for byte as enqueued or published, PostgreSQL's as
    /// jsonb renders the same value. Numbers no 64-bit float holds arrive
    /// as written, in an outbox message and in a stream event alike.
    fn the_body_is_the_payload_text_the_database_keeps(target) {
        use alkstore::sql::Arg;
        let store = store(target);
        let (outbox, stream) = (fresh("relay-body"), fresh("relay-body-st"));
        let given = r#"{"z": 1,  "a": [1.50, 123456789012345678901234567890, 1e400], "s": "\u00e9"}"#;
        store.outbox(&outbox).unwrap();
        store.stream(&stream).unwrap();
        store
            .call("alk_outbox_enqueue", &[Arg::Text(outbox.clone()), Arg::Json("{}".into()), Arg::Json(given.into())])
            .unwrap();
        store
            .call("alk_publish", &[Arg::Text(stream.clone()), Arg::Json(given.into()), Arg::Null])
            .unwrap();
        let want = if target.is_postgres() {
            format!(r#"{{"a": [1.50, 123456789012345678901234567890, 1{}], "s": "é", "z": 1}}"#, "0".repeat(400))
        } else {
            given.to_string()
        };
        let rx = Receiver::ok();
        let config = route("body", &format!("outbox = \"{outbox}\""), &rx.url, "")
            + &route("body-events", &format!("stream = \"{stream}\""), &rx.url, "");
        let relay = Running::start(&store, &config);
        wait_until(60, "both deliveries", || rx.received().len() >= 2);
        drop(relay);
        let got = rx.received();
        assert_eq!(got.len(), 2);
        for r in &got {
            assert_eq!(r.body, want, "{}", r.header("webhook-id"));
        }
        let dead = store.outbox(&outbox).unwrap().stats().unwrap()["dead"].as_i64();
        assert_eq!(dead, Some(0), "nothing dead-lettered for a payload this client cannot parse");
    }
}

per_engine! {
    /// Under `concurrency` 16 the saved offset covers only the gap-free
    /// prefix of confirmed events: the 10th event answered 503 once is
    /// sent again while the offset still stands before it (events after
    /// it, confirmed in the same batch, are sent again too), and every
    /// event arrives.
    fn a_stream_route_saves_only_the_gap_free_prefix(target) {
        let store = store(target);
        let stream = fresh("relay-prefix");
        let st = store.stream(&stream).unwrap();
        let mut offsets = Vec::new();
        for i in 0..40 {
            st.publish(&json!({"i": i}), None).unwrap();
        }
        // The offsets come with reads (a sequencer gives them after commit).
        wait_until(30, "offsets", || {
            offsets = st.read(0, 100).unwrap().iter().map(|e| e.offset).collect();
            offsets.len() == 40
        });
        let tenth = offsets[9];
        let seen_saved = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (s2, stream2, seen) = (store.clone(), stream.clone(), seen_saved.clone());
        let refused_once = std::sync::atomic::AtomicBool::new(false);
        let rx = Receiver::answering(move |r, _| {
            let offset: i64 = r.header("alk-offset").parse().unwrap();
            if offset == tenth {
                if !refused_once.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    return (503, vec![], "not yet".into());
                }
                // Sent again: the saved offset has not passed the gap.
                // (A thread of its own: the blocking driver must not run
                // on the receiver's async thread.)
                let saved = std::thread::scope(|t| {
                    t.spawn(|| s2.stream(&stream2).unwrap().get_offset("prefix").unwrap()).join().unwrap()
                });
                seen.lock().unwrap().push(saved);
            }
            (200, vec![], String::new())
        });
        let relay = Running::start(&store, &route("prefix", &format!("stream = \"{stream}\""), &rx.url, "concurrency = 16"));
        wait_until(90, "every event", || {
            let got: std::collections::HashSet<String> = rx.received().iter().map(|r| r.header("alk-offset")).collect();
            got.len() == 40
        });
        wait_until(30, "the last offset saved", || st.get_offset("prefix").unwrap() == offsets[39]);
        drop(relay);
        let saved = seen_saved.lock().unwrap().clone();
        assert_eq!(saved.len(), 1, "the 10th event sent twice");
        assert!(saved[0] < tenth, "saved {} while event {tenth} was not confirmed", saved[0]);
        assert_eq!(saved[0], offsets[8], "the prefix before the gap was saved");
        let repeats = rx.received().iter().filter(|r| r.header("alk-offset") == offsets[12].to_string()).count();
        assert_eq!(repeats, 2, "events after the gap in the same batch go again, under the same id");
    }
}
