//! The relay's round trip against one sink:
//!
//! `cargo run -p alkstore-relay --example relay -- SINK-URL`
//!
//! with SINK-URL `http://127.0.0.1:0/hook` (a receiver of the example's
//! own), `redis://…`, `nats://…` (the stream `RECEIPTS` on `receipts.>`
//! is created) or `amqp://…` (the durable queue `receipts` is declared and
//! emptied). On a SQLite file an order and its receipt (an outbox message)
//! commit in one transaction and a second pair rolls back; the relay runs
//! until the sink confirmed the receipt, which is then read back from the
//! sink and printed.

use alkstore::{EnqueueOpts, Stop, TxHandle};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Fallible<T = ()> = Result<T, Box<dyn std::error::Error>>;
/// Reads the last message back from the sink: its id and body.
type ReadBack = Box<dyn Fn() -> Fallible<Option<(String, String)>>>;

fn main() -> Fallible {
    let to = std::env::args()
        .nth(1)
        .ok_or("usage: relay SINK-URL (http://, redis://, nats:// or amqp://)")?;
    let dir = tempfile::tempdir()?;
    let store = alkstore::SqliteStore::open(dir.path().join("shop.db"))?;
    let tx = store.transaction()?;
    tx.conn()
        .execute_batch("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL)")?;
    tx.commit()?;
    let mut tx = store.transaction()?;
    tx.conn()
        .execute("INSERT INTO orders (item) VALUES ('book')", [])?;
    let order = tx.conn().last_insert_rowid();
    tx.outbox_enqueue_tx("receipts", &EnqueueOpts::new(), &json!({ "order": order }))?;
    tx.commit()?;
    let mut tx = store.transaction()?;
    tx.conn()
        .execute("INSERT INTO orders (item) VALUES ('ghost')", [])?;
    tx.outbox_enqueue_tx(
        "receipts",
        &EnqueueOpts::new(),
        &json!({ "order": order + 1 }),
    )?;
    tx.rollback()?;
    println!(
        "committed order {order} with its receipt; rolled back order {} with its receipt",
        order + 1
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let scheme = to.split(':').next().unwrap_or("");
    let (to, subject, read): (String, &str, ReadBack) = match scheme {
        "http" | "https" => {
            let (url, got) = rt.block_on(receiver())?;
            let read = move || Ok(got.lock().unwrap().first().cloned());
            (url, "", Box::new(read))
        }
        "redis" => {
            let url = to.clone();
            let read = move || -> Fallible<_> {
                let mut c = redis::Client::open(url.as_str())?.get_connection()?;
                let last: redis::streams::StreamRangeReply = redis::cmd("XREVRANGE")
                    .arg("receipts")
                    .arg("+")
                    .arg("-")
                    .arg("COUNT")
                    .arg(1)
                    .query(&mut c)?;
                Ok(last.ids.first().map(|e| {
                    let field = |k: &str| e.get::<String>(k).unwrap_or_default();
                    (field("alk_id"), field("payload"))
                }))
            };
            (to, "receipts", Box::new(read))
        }
        "nats" => {
            let js = rt.block_on(async {
                let js = async_nats::jetstream::new(async_nats::connect(to.as_str()).await?);
                js.get_or_create_stream(async_nats::jetstream::stream::Config {
                    name: "RECEIPTS".into(),
                    subjects: vec!["receipts.>".into()],
                    ..Default::default()
                })
                .await?;
                Ok::<_, Box<dyn std::error::Error>>(js)
            })?;
            let handle = rt.handle().clone();
            let read = move || -> Fallible<_> {
                handle.block_on(async {
                    let stream = js.get_stream("RECEIPTS").await?;
                    match stream.get_last_raw_message_by_subject("receipts.new").await {
                        Ok(m) => Ok(Some((
                            m.headers
                                .get("Alk-Id")
                                .map(|v| v.to_string())
                                .unwrap_or_default(),
                            String::from_utf8_lossy(&m.payload).into_owned(),
                        ))),
                        Err(_) => Ok(None),
                    }
                })
            };
            (to, "receipts.new", Box::new(read))
        }
        "amqp" => {
            use lapin::options::{BasicGetOptions, QueueDeclareOptions, QueuePurgeOptions};
            let ch = rt.block_on(async {
                let conn =
                    lapin::Connection::connect(&to, lapin::ConnectionProperties::default()).await?;
                let ch = conn.create_channel().await?;
                let durable = QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                };
                ch.queue_declare("receipts", durable, Default::default())
                    .await?;
                ch.queue_purge("receipts", QueuePurgeOptions::default())
                    .await?;
                Ok::<_, lapin::Error>((conn, ch))
            })?;
            let handle = rt.handle().clone();
            let read = move || -> Fallible<_> {
                handle.block_on(async {
                    let got =
                        ch.1.basic_get("receipts", BasicGetOptions { no_ack: true })
                            .await?;
                    Ok(got.map(|m| {
                        let id = m
                            .delivery
                            .properties
                            .message_id()
                            .as_ref()
                            .map(|s| s.to_string())
                            .unwrap_or_default();
                        (id, String::from_utf8_lossy(&m.delivery.data).into_owned())
                    }))
                })
            };
            (to, "receipts", Box::new(read))
        }
        other => return Err(format!("unknown scheme {other:?}").into()),
    };

    let subject = if subject.is_empty() {
        String::new()
    } else {
        format!("subject = \"{subject}\"\n")
    };
    let config = alkstore_relay::Config::parse(&format!(
        "[[route]]\nname = \"receipts\"\noutbox = \"receipts\"\nto = \"{to}\"\n{subject}"
    ))?;
    let relay = alkstore_relay::Relay::new(alkstore::Store::clone(&store), config);
    let stop = Stop::new();
    let receipts = alkstore::Store::outbox(&store, "receipts")?;
    let got = std::thread::scope(|s| -> Fallible<Option<(String, String)>> {
        let running = s.spawn(|| relay.run(&stop));
        // Acked means the sink confirmed it.
        let end = Instant::now() + Duration::from_secs(60);
        let mut got = None;
        while Instant::now() < end && got.is_none() {
            std::thread::sleep(Duration::from_millis(100));
            let stats = receipts.stats()?;
            if stats["pending"] == 0 && stats["running"] == 0 && stats["scheduled"] == 0 {
                got = read()?;
            }
        }
        stop.stop();
        running.join().expect("the relay")?;
        Ok(got)
    })?;
    let (id, body) = got.ok_or("the receipt did not arrive within 60 s")?;
    println!("delivered {id} {body}");
    Ok(())
}

/// A webhook receiver on a free loopback port: its URL and what it got.
async fn receiver() -> Fallible<(String, Arc<Mutex<Vec<(String, String)>>>)> {
    let got: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/hook", listener.local_addr()?);
    let g = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: String| async move {
                let id = headers
                    .get("webhook-id")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                g.lock().unwrap().push((id, body));
                axum::http::StatusCode::NO_CONTENT
            },
        ),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    Ok((url, got))
}
