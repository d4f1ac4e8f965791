//! `scripts/bench-relay.sh`: messages/s delivered to NATS JetStream and to
//! RabbitMQ by the relay, beside a plain client of the same library
//! publishing the same messages with the same number of confirms in flight
//! (the floor), and the database alone handing out and taking back the
//! same messages with no sink (the db floor), in one run.
//!
//! `ALK_NATS_URL=nats://… ALK_AMQP_URL=amqp://… [ALK_RELAY_DBS="sqlite
//! postgres://…"] [ALK_RELAY_MESSAGES=20000] [ALK_RELAY_CONCURRENCY=16]
//! cargo bench -p alkstore-relay --bench relay`. Not run by the tests.

use alkstore::EnqueueOpts;
use futures_util::stream::{FuturesUnordered, StreamExt};
use serde_json::json;
use std::time::{Duration, Instant};

fn var(k: &str, default: &str) -> String {
    std::env::var(k).unwrap_or_else(|_| default.into())
}

/// CPU seconds the whole machine has spent busy so far (every process:
/// the broker, the database server, this one), from /proc/stat.
fn cpu_busy() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let line = stat.lines().next().unwrap_or_default();
    // cpu user nice system idle iowait irq softirq steal …: all but idle and iowait.
    let f: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let busy: f64 = f
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4 && *i < 8)
        .map(|(_, v)| v)
        .sum();
    busy / 100.0 // USER_HZ
}

/// Runs `f` (messages/s for `n` messages): its rate, and the machine's
/// busy CPU microseconds per message meanwhile.
fn measured(n: usize, f: impl FnOnce() -> f64) -> (f64, f64) {
    let before = cpu_busy();
    let rate = f();
    (rate, (cpu_busy() - before) * 1e6 / n as f64)
}

/// The same message the relay sends: a small JSON body and its headers.
fn body(i: usize) -> String {
    json!({"order": i, "item": "book", "qty": 1}).to_string()
}

/// A plain JetStream client: `n` publishes, `c` acks outstanding at most.
async fn nats_floor(url: &str, subject: &str, n: usize, c: usize) -> f64 {
    let js = async_nats::jetstream::new(async_nats::connect(url).await.unwrap());
    let start = Instant::now();
    let mut inflight: FuturesUnordered<
        <async_nats::jetstream::context::PublishAckFuture as std::future::IntoFuture>::IntoFuture,
    > = FuturesUnordered::new();
    for i in 0..n {
        if inflight.len() >= c {
            inflight.next().await.unwrap().unwrap();
        }
        let mut h = async_nats::HeaderMap::new();
        h.insert(
            "Nats-Msg-Id",
            format!("floor:{i}:{}", start.elapsed().as_nanos()).as_str(),
        );
        h.insert("Alk-Source", "outbox:floor");
        let ack = js
            .publish_with_headers(subject.to_string(), h, body(i).into())
            .await
            .unwrap();
        inflight.push(std::future::IntoFuture::into_future(ack));
    }
    while let Some(r) = inflight.next().await {
        r.unwrap();
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// A plain lapin client: persistent, mandatory publishes on a confirm
/// channel, `c` confirms outstanding at most.
async fn amqp_floor(url: &str, queue: &str, n: usize, c: usize) -> f64 {
    use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
    use lapin::BasicProperties;
    let conn = lapin::Connection::connect(url, lapin::ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let start = Instant::now();
    let mut inflight: FuturesUnordered<
        <lapin::publisher_confirm::PublisherConfirm as std::future::IntoFuture>::IntoFuture,
    > = FuturesUnordered::new();
    for i in 0..n {
        if inflight.len() >= c {
            inflight.next().await.unwrap().unwrap();
        }
        let props = BasicProperties::default()
            .with_message_id(format!("floor:{i}").into())
            .with_content_type("application/json".into())
            .with_delivery_mode(2);
        let opts = BasicPublishOptions {
            mandatory: true,
            ..Default::default()
        };
        let b = body(i);
        let confirm = ch
            .basic_publish("", queue, opts, b.as_bytes(), props)
            .await
            .unwrap();
        inflight.push(std::future::IntoFuture::into_future(confirm));
    }
    while let Some(r) = inflight.next().await {
        r.unwrap();
    }
    n as f64 / start.elapsed().as_secs_f64()
}

/// `n` messages in a new outbox of `store`, enqueued 1,000 a transaction
/// (not timed); its name.
fn fill(store: &alkstore::Store, n: usize, label: &str) -> String {
    static FILLED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = FILLED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let outbox = format!("bench-{label}-{}-{k}", std::process::id());
    for chunk in (0..n).collect::<Vec<_>>().chunks(1000) {
        let mut tx = store.begin().unwrap();
        for &i in chunk {
            tx.outbox_enqueue_tx(
                &outbox,
                &EnqueueOpts::default(),
                &serde_json::from_str(&body(i)).unwrap(),
            )
            .unwrap();
        }
        tx.commit().unwrap();
    }
    outbox
}

/// The database alone: `n` outbox messages claimed (`claim` at a time, the
/// relay's largest claim being 1,000) on one thread and acked in batches on
/// another, as the relay's claimer and acker do, with no sink between:
/// messages/s, what the database can hand out and take back through the
/// same calls. The relay cannot go faster than this.
fn db_floor(db: &str, n: usize, claim: i64) -> (f64, f64) {
    let store = alkstore::open(db).unwrap();
    let ob = store.outbox(&fill(&store, n, "db")).unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<i64>>();
    let cpu = cpu_busy();
    let start = Instant::now();
    std::thread::scope(|s| {
        let ob = &ob;
        let acker = s.spawn(move || {
            let mut acked = 0;
            while let Ok(mut ids) = rx.recv() {
                while let Ok(more) = rx.try_recv() {
                    ids.extend(more);
                }
                acked += ob.jobs().ack_batch(&ids, "floor").unwrap();
            }
            acked
        });
        let mut claimed = 0;
        while claimed < n {
            let jobs = ob.claim_verbatim("floor", claim).unwrap();
            claimed += jobs.len();
            tx.send(jobs.into_iter().map(|(j, _)| j.id).collect())
                .unwrap();
        }
        drop(tx);
        assert_eq!(acker.join().unwrap() as usize, n, "every message acked");
    });
    let rate = n as f64 / start.elapsed().as_secs_f64();
    (rate, (cpu_busy() - cpu) * 1e6 / n as f64)
}

/// The relay draining `n` outbox messages to `to`: messages/s from its
/// start to the last ack.
fn relay(db: &str, to: &str, subject: &str, n: usize, c: usize) -> (f64, f64) {
    let store = alkstore::open(db).unwrap();
    let outbox = fill(&store, n, "relay");
    let config = alkstore_relay::Config::parse(&format!(
        "[[route]]\nname = \"bench\"\noutbox = \"{outbox}\"\nto = \"{to}\"\nsubject = \"{subject}\"\nconcurrency = {c}\n"
    ))
    .unwrap();
    let relay = alkstore_relay::Relay::new(store.clone(), config);
    let stop = alkstore::Stop::new();
    let cpu = cpu_busy();
    let start = Instant::now();
    let took = std::thread::scope(|s| {
        let running = s.spawn(|| relay.run(&stop).unwrap());
        while relay.route_metrics()[0].delivered_total() < n as u64 {
            std::thread::sleep(Duration::from_millis(2));
        }
        let took = start.elapsed();
        stop.stop();
        running.join().unwrap();
        took
    });
    assert_eq!(
        relay.route_metrics()[0].failed_total(),
        0,
        "no delivery failed"
    );
    (
        n as f64 / took.as_secs_f64(),
        (cpu_busy() - cpu) * 1e6 / n as f64,
    )
}

fn main() {
    let n: usize = var("ALK_RELAY_MESSAGES", "20000").parse().unwrap();
    let c: usize = var("ALK_RELAY_CONCURRENCY", "16").parse().unwrap();
    let nats = var("ALK_NATS_URL", "nats://127.0.0.1:14222");
    let amqp = var("ALK_AMQP_URL", "amqp://guest:guest@127.0.0.1:15672/%2f");
    let dir = tempfile::tempdir().unwrap();
    let dbs: Vec<String> = var("ALK_RELAY_DBS", "sqlite")
        .split_whitespace()
        .map(|d| {
            if d == "sqlite" {
                format!("sqlite:{}", dir.path().join("bench.db").display())
            } else {
                d.to_string()
            }
        })
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    // The broker side: a JetStream stream and a durable queue, emptied.
    rt.block_on(async {
        let js = async_nats::jetstream::new(async_nats::connect(nats.as_str()).await.unwrap());
        let _ = js.delete_stream("BENCH").await;
        js.create_stream(async_nats::jetstream::stream::Config {
            name: "BENCH".into(),
            subjects: vec!["bench.>".into()],
            ..Default::default()
        })
        .await
        .unwrap();
        let conn = lapin::Connection::connect(&amqp, lapin::ConnectionProperties::default())
            .await
            .unwrap();
        let ch = conn.create_channel().await.unwrap();
        let durable = lapin::options::QueueDeclareOptions {
            durable: true,
            ..Default::default()
        };
        ch.queue_declare("bench", durable, Default::default())
            .await
            .unwrap();
    });
    let purge = || {
        rt.block_on(async {
            let conn = lapin::Connection::connect(&amqp, lapin::ConnectionProperties::default())
                .await
                .unwrap();
            let ch = conn.create_channel().await.unwrap();
            ch.queue_purge("bench", Default::default()).await.unwrap();
            let js = async_nats::jetstream::new(async_nats::connect(nats.as_str()).await.unwrap());
            js.get_stream("BENCH").await.unwrap().purge().await.unwrap();
        })
    };
    println!("{n} messages of {} bytes, {c} in flight", body(0).len());
    // The database alone, with no sink: what the relay can reach at best.
    let db_floors: Vec<(f64, f64)> = dbs.iter().map(|db| db_floor(db, n, 400)).collect();
    println!(
        "{:<11} {:<10} {:>12} {:>12} {:>12} {:>11} {:>8}   cpu µs/msg: {:>5} {:>5} {:>5} {:>10}",
        "sink",
        "database",
        "relay msg/s",
        "floor msg/s",
        "db msg/s",
        "relay/floor",
        "relay/db",
        "relay",
        "floor",
        "db",
        "2 cores/(floor+db)"
    );
    for (sink, to, subject) in [
        ("jetstream", nats.as_str(), "bench.orders"),
        ("rabbitmq", amqp.as_str(), "bench"),
    ] {
        for (db, db_floor) in dbs.iter().zip(&db_floors) {
            purge();
            let (floor, floor_cpu) = measured(n, || match sink {
                "jetstream" => rt.block_on(nats_floor(to, subject, n, c)),
                _ => rt.block_on(amqp_floor(to, subject, n, c)),
            });
            purge();
            let (r, relay_cpu) = relay(db, to, subject, n, c);
            let (db_floor, db_cpu) = *db_floor;
            let engine = if db.starts_with("sqlite") {
                "sqlite"
            } else {
                "postgres"
            };
            println!(
                "{sink:<11} {engine:<10} {r:>12.0} {floor:>12.0} {db_floor:>12.0} {:>11.2} {:>8.2}   cpu µs/msg: {relay_cpu:>5.1} {floor_cpu:>5.1} {db_cpu:>5.1} {:>10.0}",
                r / floor,
                r / db_floor,
                2e6 / (floor_cpu + db_cpu)
            );
        }
    }
}
