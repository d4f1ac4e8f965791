//! The relay to RabbitMQ (contract v1.3 §N), against a real RabbitMQ node
//! of the test's own, from SQLite and every PostgreSQL install at once:
//! the properties and headers, a message no queue takes refused (dead
//! after `max_attempts`), group and stream order under concurrency 16,
//! and the node killed while 1,000 messages per
//! engine are enqueued — all delivered once it is back, none dead, no
//! attempt spent.

mod common;

use alkstore::EnqueueOpts;
use alkstore_tests::fresh;
use common::*;
use lapin::options::{BasicGetOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Connection, ConnectionProperties};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::time::Duration;

struct Got {
    message_id: String,
    content_type: String,
    delivery_mode: u8,
    headers: FieldTable,
    body: Value,
}

impl Got {
    fn header(&self, k: &str) -> String {
        match self.headers.inner().get(k) {
            Some(AMQPValue::LongString(s)) => s.to_string(),
            other => panic!("header {k}: {other:?}"),
        }
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn declare(url: &str, queues: &[String]) {
    rt().block_on(async {
        let conn = Connection::connect(url, ConnectionProperties::default())
            .await
            .unwrap();
        let ch = conn.create_channel().await.unwrap();
        for q in queues {
            ch.queue_declare(
                q.as_str(),
                QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap();
        }
    })
}

/// Takes every message waiting in `queue` (none when the node is down).
fn take(url: &str, queue: &str) -> Vec<Got> {
    rt().block_on(async {
        let Ok(conn) = Connection::connect(url, ConnectionProperties::default()).await else {
            return vec![];
        };
        let ch = conn.create_channel().await.unwrap();
        let mut out = Vec::new();
        while let Some(m) = ch
            .basic_get(queue, BasicGetOptions { no_ack: true })
            .await
            .unwrap()
        {
            let p = &m.delivery.properties;
            out.push(Got {
                message_id: p
                    .message_id()
                    .as_ref()
                    .map(|s| s.to_string())
                    .unwrap_or_default(),
                content_type: p
                    .content_type()
                    .as_ref()
                    .map(|s| s.to_string())
                    .unwrap_or_default(),
                delivery_mode: p.delivery_mode().unwrap_or(0),
                headers: p.headers().clone().unwrap_or_default(),
                body: serde_json::from_slice(&m.delivery.data).unwrap(),
            });
        }
        out
    })
}

#[test]
fn rabbitmq_confirms_refusals_and_an_outage_on_every_engine() {
    let Some(mut server) = Server::rabbitmq() else {
        return;
    };
    let url = format!("amqp://guest:guest@127.0.0.1:{}/%2f", server.port);
    let targets = alkstore_tests::targets();
    let queues: Vec<String> = (0..targets.len())
        .map(|i| fresh(&format!("orders{i}")))
        .collect();
    // Per engine, a queue for grouped outbox messages and one for events.
    let ordered: Vec<(String, String)> = (0..targets.len())
        .map(|i| (fresh(&format!("groups{i}")), fresh(&format!("events{i}"))))
        .collect();
    declare(&url, &queues);
    declare(
        &url,
        &ordered
            .iter()
            .flat_map(|(g, e)| [g.clone(), e.clone()])
            .collect::<Vec<_>>(),
    );
    let mut relays = Vec::new();
    let mut cases = Vec::new();
    for ((target, queue), (groups, events)) in targets.iter().zip(&queues).zip(&ordered) {
        let store = store(target);
        let outbox = fresh("relay-amqp");
        let nowhere = fresh("relay-amqp-nowhere");
        let (grouped, stream) = (fresh("relay-amqp-groups"), fresh("relay-amqp-st"));
        enqueue_groups(&store, &grouped);
        publish_numbered(&store, &stream, 60);
        let id = store
            .outbox(&outbox)
            .unwrap()
            .enqueue(&EnqueueOpts::default(), &json!({"first": true}))
            .unwrap();
        let lost = store
            .outbox(&nowhere)
            .unwrap()
            .enqueue(
                &EnqueueOpts {
                    max_attempts: Some(1),
                    ..Default::default()
                },
                &json!({}),
            )
            .unwrap();
        let config = format!(
            "[[route]]\nname = \"to-rabbit\"\noutbox = \"{outbox}\"\nto = \"{url}\"\nsubject = \"{queue}\"\ntimeout_s = 3\n\n\
             [[route]]\nname = \"unroutable\"\noutbox = \"{nowhere}\"\nto = \"{url}\"\nsubject = \"no-queue-has-this-name\"\n\n\
             [[route]]\nname = \"groups\"\noutbox = \"{grouped}\"\nto = \"{url}\"\nsubject = \"{groups}\"\nconcurrency = 16\n\n\
             [[route]]\nname = \"events\"\nstream = \"{stream}\"\nto = \"{url}\"\nsubject = \"{events}\"\nconcurrency = 16\n"
        );
        relays.push(Running::start(&store, &config));
        cases.push((target.name(), store, outbox, id, lost, queue.clone()));
    }
    let mut taken: Vec<Vec<Got>> = queues.iter().map(|_| Vec::new()).collect();
    for (i, (name, store, outbox, id, lost, queue)) in cases.iter().enumerate() {
        wait_until(60, "the first message", || {
            taken[i].extend(take(&url, queue));
            !taken[i].is_empty()
        });
        let g = &taken[i][0];
        let want = format!("outbox:{outbox}:{id}");
        assert_eq!(g.message_id, want, "[{name}]");
        assert_eq!(g.header("Alk-Id"), want);
        assert_eq!(g.header("Alk-Source"), format!("outbox:{outbox}"));
        assert_eq!(g.header("Alk-Attempt"), "1");
        assert_eq!(g.content_type, "application/json");
        assert_eq!(g.delivery_mode, 2, "persistent");
        assert_eq!(g.body, json!({"first": true}));
        wait_until(60, "the unroutable message to go dead", || {
            store
                .get_job(*lost)
                .unwrap()
                .is_some_and(|j| j["state"] == "dead")
        });
        let dead = store.get_job(*lost).unwrap().unwrap();
        assert!(
            dead["last_error"]
                .as_str()
                .unwrap()
                .contains("returned unroutable"),
            "[{name}] {dead}"
        );
        // Under concurrency 16 (confirms pipelined on one channel): each
        // group in its order, the stream's events in offset order.
        let (groups, events) = &ordered[i];
        let (mut g, mut e) = (Vec::new(), Vec::new());
        wait_until(120, "100 grouped messages and 60 events", || {
            g.extend(take(&url, groups).into_iter().map(|m| m.body));
            e.extend(take(&url, events).into_iter().map(|m| m.body));
            g.len() >= 100 && e.len() >= 60
        });
        assert_group_order(&g);
        assert_numbered(&e, 60);
    }
    server.kill();
    for (_, store, outbox, ..) in &cases {
        let mut tx = store.begin().unwrap();
        for i in 0..1000 {
            tx.outbox_enqueue_tx(outbox, &EnqueueOpts::default(), &json!({"i": i}))
                .unwrap();
        }
        tx.commit().unwrap();
    }
    std::thread::sleep(Duration::from_secs(10));
    for r in &relays {
        assert!(
            r.metrics()
                .contains("alkstore_relay_up{route=\"to-rabbit\"} 0"),
            "{}",
            r.metrics()
        );
    }
    server.start();
    for (i, (name, store, outbox, ..)) in cases.iter().enumerate() {
        wait_until(240, "1,001 messages", || {
            taken[i].extend(take(&url, &cases[i].5));
            taken[i]
                .iter()
                .map(|g| &g.message_id)
                .collect::<HashSet<_>>()
                .len()
                >= 1001
        });
        assert_all_acked_none_dead(store, outbox);
        assert!(
            taken[i].iter().all(|g| g.header("Alk-Attempt") == "1"),
            "[{name}] no attempt spent on the outage"
        );
    }
    drop(relays);
}
