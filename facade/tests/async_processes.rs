//! The async API across processes, on SQLite, PostgreSQL and PostgreSQL
//! through PgBouncer: an `AsyncWorker`, a listener and a stream subscriber
//! in another process are woken by commits here; a process killed with
//! SIGKILL inside an async transaction, or inside a transactional handler,
//! leaves nothing of it behind, and its job comes back to someone else.
//!
//! Each parent test starts this binary again as a child that runs one of
//! the ignored `child_*` tests on the async store (`async_common::open_child`);
//! the parent commits and checks through the blocking store.

mod async_common;
mod common;

use alkstore::{
    AsyncConn, AsyncEngine, AsyncStore, AsyncTxHandle, AsyncWorker, EnqueueOpts, QueueOpts,
};
use async_common::{open_child, ChildStore};
use common::*;
use serde_json::json;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Far below the fallback polls (1 s, or the 60 s the children set): only a
/// wake-up is this fast, with room for a loaded machine.
const WOKEN_MS: i64 = 700;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name}: started by the parent test"))
}

fn now_ms() -> i64 {
    alkstore_core::time::now_ms()
}

/// A scratch directory for the files parent and child signal with.
fn signals() -> PathBuf {
    tempfile::tempdir().unwrap().keep()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs a child body on whichever engine the parent gave it.
macro_rules! on_child_store {
    ($body:ident) => {
        match open_child().await {
            ChildStore::Postgres(store) => $body(store).await,
            ChildStore::Sqlite(store) => $body(store).await,
        }
    };
}

/// The application's own SQL on one of its connections, for bodies generic
/// over the engine (literal values: the same text runs on both).
trait AppSql: AsyncEngine {
    fn app_sql(conn: &mut Self::Connection, sql: &str) -> impl Future<Output = ()> + Send;
}

impl AppSql for sqlx::Postgres {
    async fn app_sql(conn: &mut sqlx::PgConnection, sql: &str) {
        sqlx::query(sql)
            .persistent(false)
            .execute(conn)
            .await
            .unwrap();
    }
}

impl AppSql for sqlx::Sqlite {
    async fn app_sql(conn: &mut sqlx::SqliteConnection, sql: &str) {
        sqlx::query(sql)
            .persistent(false)
            .execute(conn)
            .await
            .unwrap();
    }
}

// ---- wake-ups across processes ----------------------------------------

#[test]
fn an_idle_async_worker_in_another_process_is_woken_by_the_commit() {
    for target in targets() {
        let q = fresh("async-wake-process");
        let dir = signals();
        let (ready, out) = (dir.join("ready"), dir.join("out"));
        let mut child = target.spawn_child(
            "child_async_worker_waits",
            &[
                ("ALK_CHILD_NAME", &q),
                ("ALK_CHILD_READY", path(&ready)),
                ("ALK_CHILD_OUT", path(&out)),
            ],
        );
        wait_for_file(&mut child, &ready);
        // Then a moment for it to be in its wait, so that the commit wakes it
        // rather than meets its first claim (far below the fallback poll).
        std::thread::sleep(std::time::Duration::from_millis(200));
        let store = target.open();
        let mut tx = store.begin().unwrap();
        tx.enqueue_tx(&q, &EnqueueOpts::new(), &json!({ "n": 1 }))
            .unwrap();
        tx.commit().unwrap();
        let committed = now_ms();
        assert!(child.wait().unwrap().success(), "[{}]", target.name());
        let handled_at: i64 = std::fs::read_to_string(&out)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let latency = handled_at - committed;
        assert!(
            latency < WOKEN_MS,
            "[{}] the worker in another process handled the job {latency} ms after the commit",
            target.name()
        );
    }
}

/// Not a test on its own: an idle async worker that polls only every
/// minute, so it must be woken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "started as a child process by an_idle_async_worker_in_another_process_is_woken_by_the_commit"]
async fn child_async_worker_waits() {
    on_child_store!(async_worker_waits)
}

async fn async_worker_waits<DB: AsyncEngine>(store: AsyncStore<DB>) {
    let queue = store.queue(&env("ALK_CHILD_NAME")).unwrap();
    let registers = queue.clone();
    let (done, shutdown) = tokio::sync::oneshot::channel::<()>();
    let done = Arc::new(Mutex::new(Some(done)));
    let worker = AsyncWorker::new(queue, "woken").poll_every(Duration::from_secs(60));
    let run = worker.run(shutdown, move |job| {
        let done = done.clone();
        async move {
            std::fs::write(env("ALK_CHILD_OUT"), now_ms().to_string()).unwrap();
            assert_eq!(job.payload, json!({ "n": 1 }));
            if let Some(done) = done.lock().unwrap().take() {
                let _ = done.send(());
            }
            Ok::<(), String>(())
        }
    });
    let ready = async {
        // The store is registered for the queue's wake-ups (the worker's
        // wait shares it; a job committed before its first claim is found
        // by that claim): a fixed pause was not always enough.
        let none = registers
            .claim_wait("woken", 1, Duration::from_millis(50))
            .await
            .unwrap();
        assert!(none.is_empty());
        std::fs::write(env("ALK_CHILD_READY"), "ready").unwrap();
    };
    let (handled, ()) =
        tokio::time::timeout(Duration::from_secs(30), async { tokio::join!(run, ready) })
            .await
            .expect("the job never came");
    assert_eq!(handled.unwrap(), 1);
}

#[test]
fn async_listeners_and_stream_subscribers_in_another_process_are_woken_by_the_commit() {
    for target in targets() {
        let (channel, stream) = (fresh("async-ch"), fresh("async-events"));
        let dir = signals();
        let (ready, out) = (dir.join("ready"), dir.join("out"));
        let mut child = target.spawn_child(
            "child_async_listener_waits",
            &[
                ("ALK_CHILD_CHANNEL", &channel),
                ("ALK_CHILD_STREAM", &stream),
                ("ALK_CHILD_READY", path(&ready)),
                ("ALK_CHILD_OUT", path(&out)),
            ],
        );
        wait_for_file(&mut child, &ready);
        let store = target.open();
        let mut tx = store.begin().unwrap();
        tx.notify_tx(&channel, &json!("never")).unwrap();
        tx.publish_tx(&stream, &json!("never")).unwrap();
        tx.rollback().unwrap();
        let mut tx = store.begin().unwrap();
        tx.notify_tx(&channel, &json!("hello")).unwrap();
        let id = tx.publish_tx(&stream, &json!({ "n": 1 })).unwrap();
        tx.commit().unwrap();
        let committed = now_ms();
        assert!(child.wait().unwrap().success(), "[{}]", target.name());
        let got: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(
            (&got["payload"], &got["event"]),
            (
                &json!("hello"),
                &json!({ "offset": 1, "id": id, "payload": { "n": 1 } })
            ),
            "[{}] the committed notification and event, not the rolled-back ones",
            target.name()
        );
        for what in ["notified_at", "read_at"] {
            let latency = got[what].as_i64().unwrap() - committed;
            assert!(
                latency < WOKEN_MS,
                "[{}] {what} {latency} ms after the commit",
                target.name()
            );
        }
    }
}

/// Not a test on its own: a listener and a stream subscriber that wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "started as a child process by async_listeners_and_stream_subscribers_in_another_process_are_woken_by_the_commit"]
async fn child_async_listener_waits() {
    on_child_store!(async_listener_waits)
}

async fn async_listener_waits<DB: AsyncEngine>(store: AsyncStore<DB>) {
    let mut notifications = store.listen(&env("ALK_CHILD_CHANNEL")).await.unwrap();
    let stream = store.stream(&env("ALK_CHILD_STREAM")).unwrap();
    let mut events = stream.subscribe("child").await.unwrap();
    assert!(events
        .next_batch(10, Duration::ZERO)
        .await
        .unwrap()
        .is_empty());
    std::fs::write(env("ALK_CHILD_READY"), "ready").unwrap();
    let wait = Duration::from_secs(20);
    let notification = notifications.recv_timeout(wait).await.unwrap().unwrap();
    let notified_at = now_ms();
    let batch = events.next_batch(10, wait).await.unwrap();
    let read_at = now_ms();
    assert_eq!(batch.len(), 1, "{batch:?}");
    let out = json!({
        "payload": notification.payload,
        "notified_at": notified_at,
        "event": { "offset": batch[0].offset, "id": batch[0].id, "payload": batch[0].payload },
        "read_at": read_at,
    });
    std::fs::write(env("ALK_CHILD_OUT"), out.to_string()).unwrap();
}

// ---- crashes ------------------------------------------------------------

#[test]
fn an_async_process_killed_inside_its_transaction_leaves_no_job_message_event_or_row() {
    for target in targets() {
        let name = fresh("async-crash");
        let table = name.replace('-', "_");
        target.execute(&format!("CREATE TABLE {table} (item text)"));
        let dir = signals();
        let ready = dir.join("ready");
        let mut child = target.spawn_child(
            "child_async_dies_mid_transaction",
            &[("ALK_CHILD_NAME", &name), ("ALK_CHILD_READY", path(&ready))],
        );
        wait_for_file(&mut child, &ready);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let store = target.open();
        let who = target.name();
        let queue = store.queue(&name).unwrap();
        assert!(
            queue.claim("w", 10).unwrap().is_empty(),
            "[{who}] no ghost job"
        );
        let outbox = store.outbox(&name).unwrap();
        assert!(
            outbox.claim("w", 10).unwrap().is_empty(),
            "[{who}] no ghost message"
        );
        let stream = store.stream(&name).unwrap();
        assert!(
            stream.read(0, 10).unwrap().is_empty(),
            "[{who}] no ghost event"
        );
        let rows = target.query_i64(&format!("SELECT count(*) FROM {table}"));
        assert_eq!(rows, 0, "[{who}] no partial rows");
        // Nothing is left locked: the same writes go through now.
        let mut tx = store.begin().unwrap();
        tx.enqueue_tx(&name, &EnqueueOpts::new(), &json!("after"))
            .unwrap();
        tx.publish_tx(&name, &json!("after")).unwrap();
        tx.commit().unwrap();
        assert_eq!(queue.claim("w", 10).unwrap().len(), 1, "[{who}]");
        assert_eq!(stream.read(0, 10).unwrap().len(), 1, "[{who}]");
    }
}

/// Not a test on its own: writes a row, a job, an outbox message and an
/// event in an async transaction, then hangs until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "started as a child process by an_async_process_killed_inside_its_transaction_leaves_no_job_message_event_or_row"]
async fn child_async_dies_mid_transaction() {
    on_child_store!(async_dies_mid_transaction)
}

async fn async_dies_mid_transaction<DB: AppSql>(store: AsyncStore<DB>) {
    let name = env("ALK_CHILD_NAME");
    let table = name.replace('-', "_");
    let mut tx = store.begin().await.unwrap();
    DB::app_sql(&mut *tx, &format!("INSERT INTO {table} VALUES ('ghost')")).await;
    let mut conn = AsyncConn::<DB>(&mut *tx);
    let ghost = json!("ghost");
    conn.enqueue_tx(&name, &EnqueueOpts::new(), &ghost)
        .await
        .unwrap();
    conn.outbox_enqueue_tx(&name, &EnqueueOpts::new(), &ghost)
        .await
        .unwrap();
    conn.publish_tx(&name, &ghost).await.unwrap();
    std::fs::write(env("ALK_CHILD_READY"), "ready").unwrap();
    tokio::time::sleep(Duration::from_secs(600)).await;
}

#[test]
fn a_killed_async_workers_job_comes_back_and_its_transactions_writes_never_commit() {
    for target in targets() {
        let name = fresh("async-orphan");
        let table = name.replace('-', "_");
        target.execute(&format!("CREATE TABLE {table} (item text)"));
        let store = target.open();
        let who = target.name();
        let queue = store.queue(&name).unwrap();
        let visibility = Duration::from_secs(1);
        queue
            .configure(&QueueOpts::new().visibility_timeout(visibility))
            .unwrap();
        let id = queue
            .enqueue(&EnqueueOpts::new(), &json!("important"))
            .unwrap();
        let dir = signals();
        let (claimed, go, wrote) = (dir.join("claimed"), dir.join("go"), dir.join("wrote"));
        let mut child = target.spawn_child(
            "child_async_worker_dies_in_its_handler",
            &[
                ("ALK_CHILD_NAME", &name),
                ("ALK_CHILD_CLAIMED", path(&claimed)),
                ("ALK_CHILD_GO", path(&go)),
                ("ALK_CHILD_READY", path(&wrote)),
            ],
        );
        wait_for_file(&mut child, &claimed);
        // Three visibility timeouts later the job is still the child's: its
        // worker's heartbeats keep the claim alive across processes.
        std::thread::sleep(visibility * 3);
        assert!(
            queue.claim("survivor", 1).unwrap().is_empty(),
            "[{who}] a running handler's job stays claimed"
        );
        std::fs::write(&go, "go").unwrap();
        wait_for_file(&mut child, &wrote);
        child.kill().unwrap(); // SIGKILL, mid-handler, its transaction open
        child.wait().unwrap();
        let jobs = queue
            .claim_wait("survivor", 1, Duration::from_secs(15))
            .unwrap();
        assert_eq!(
            jobs.iter().map(|j| (j.id, j.attempts)).collect::<Vec<_>>(),
            vec![(id, 2)],
            "[{who}] the killed worker's job comes back once its claim expires"
        );
        let rows = target.query_i64(&format!("SELECT count(*) FROM {table}"));
        assert_eq!(
            rows, 0,
            "[{who}] the killed handler's writes never committed"
        );
        assert!(queue.ack(id, "survivor").unwrap(), "[{who}]");
    }
}

/// Not a test on its own: an async worker whose transactional handler
/// waits for the parent, writes a row in the job's transaction, then hangs
/// until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "started as a child process by a_killed_async_workers_job_comes_back_and_its_transactions_writes_never_commit"]
async fn child_async_worker_dies_in_its_handler() {
    on_child_store!(async_worker_dies_in_its_handler)
}

async fn async_worker_dies_in_its_handler<DB: AppSql>(store: AsyncStore<DB>) {
    let name = env("ALK_CHILD_NAME");
    let worker = AsyncWorker::new(store.queue(&name).unwrap(), "doomed");
    let handler = move |_job: alkstore::Job, mut tx: alkstore::AsyncTransaction<DB>| {
        let table = name.replace('-', "_");
        async move {
            std::fs::write(env("ALK_CHILD_CLAIMED"), "claimed").unwrap();
            while !Path::new(&env("ALK_CHILD_GO")).exists() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            DB::app_sql(
                &mut *tx,
                &format!("INSERT INTO {table} VALUES ('uncommitted')"),
            )
            .await;
            std::fs::write(env("ALK_CHILD_READY"), "wrote").unwrap();
            tokio::time::sleep(Duration::from_secs(600)).await;
            Ok::<_, String>(tx)
        }
    };
    worker
        .run_in_tx(std::future::pending::<()>(), handler)
        .await
        .unwrap();
}
