//! `AsyncStore`'s stream, notification and lease handles on a real
//! PostgreSQL server, directly and through PgBouncer (the listener direct),
//! and on a SQLite file: one body per behaviour, run on each.

#[macro_use]
mod async_common;
mod common;

use alkstore::{AsyncConn, AsyncEngine, AsyncStore, AsyncTransactionEnd, AsyncTxHandle};
use async_common::stats;
use common::{fresh, ms};
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_consumer_reads_committed_events_in_order_and_resumes_from_its_offset() {
    on_every_store!(
        a_stream_consumer_reads_committed_events_in_order_and_resumes_from_its_offset_on
    );
}

async fn a_stream_consumer_reads_committed_events_in_order_and_resumes_from_its_offset_on<
    DB: AsyncEngine,
>(
    target: &str,
    store: AsyncStore<DB>,
) {
    let stream = store.stream(&fresh("async-stream")).unwrap();
    let mut consumer = stream.subscribe("billing").await.unwrap();
    assert!(consumer.next_batch(10, ms(50)).await.unwrap().is_empty());

    // A rolled-back publish leaves nothing behind, not even a gap.
    let mut tx = store.begin().await.unwrap();
    AsyncConn::<DB>(&mut tx)
        .publish_tx(stream.name(), &json!({"n": 0}))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    // A consumer waiting while events are committed gets them.
    let waiting = tokio::spawn(async move {
        let events = consumer
            .next_batch(10, Duration::from_secs(20))
            .await
            .unwrap();
        (consumer, events)
    });
    tokio::time::sleep(ms(200)).await;
    let mut tx = store.begin().await.unwrap();
    let id1 = AsyncConn::<DB>(&mut tx)
        .publish_tx(stream.name(), &json!({"n": 1}))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let id2 = stream.publish(&json!({"n": 2}), Some("k")).await.unwrap();
    let (mut consumer, mut events) = waiting.await.unwrap();
    if events.len() == 1 {
        events.extend(consumer.next_batch(10, ms(2000)).await.unwrap());
    }
    let got: Vec<_> = events
        .iter()
        .map(|e| (e.offset, e.id, e.payload["n"].as_i64()))
        .collect();
    assert_eq!(got, [(1, id1, Some(1)), (2, id2, Some(2))], "[{target}]");
    assert_eq!(events[1].key.as_deref(), Some("k"), "[{target}]");
    assert_eq!(consumer.position(), 2);

    // Saved offsets are where a new subscription resumes.
    assert!(!store
        .stream(stream.name())
        .unwrap()
        .reader(0)
        .commit()
        .await
        .unwrap());
    assert_eq!(stream.get_offset("billing").await.unwrap(), 0);
    assert!(consumer.commit().await.unwrap());
    stream.publish(&json!({"n": 3}), None).await.unwrap();
    let mut again = stream.subscribe("billing").await.unwrap();
    let next = again.next_batch(10, ms(2000)).await.unwrap();
    assert_eq!(
        next.iter().map(|e| e.offset).collect::<Vec<_>>(),
        [3],
        "[{target}]"
    );
    let info = stream.info().await.unwrap();
    assert_eq!((info.first_offset, info.last_offset), (1, 3), "[{target}]");
    assert_eq!(stream.read(1, 10).await.unwrap().len(), 2, "[{target}]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_arrive_when_their_transaction_commits_and_never_after_a_rollback() {
    on_every_store!(
        notifications_arrive_when_their_transaction_commits_and_never_after_a_rollback_on
    );
}

async fn notifications_arrive_when_their_transaction_commits_and_never_after_a_rollback_on<
    DB: AsyncEngine,
>(
    target: &str,
    store: AsyncStore<DB>,
) {
    let channel = fresh("async-channel");
    let mut sub = store.listen(&channel).await.unwrap();
    let mut tx = store.begin().await.unwrap();
    AsyncConn::<DB>(&mut tx)
        .notify_tx(&channel, &json!({"n": "rolled back"}))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    let mut tx = store.begin().await.unwrap();
    AsyncConn::<DB>(&mut tx)
        .notify_tx(&channel, &json!({"n": 1}))
        .await
        .unwrap();
    assert!(
        sub.recv_timeout(ms(300)).await.unwrap().is_none(),
        "[{target}] delivered before commit"
    );
    tx.commit().await.unwrap();
    store.notify(&channel, &json!({"n": 2})).await.unwrap();
    for n in [1, 2] {
        let got = sub.recv_timeout(Duration::from_secs(10)).await.unwrap();
        let got = got.unwrap_or_else(|| panic!("[{target}] notification {n} not delivered"));
        assert_eq!(
            (got.channel.as_str(), &got.payload),
            (channel.as_str(), &json!({ "n": n }))
        );
    }
    assert!(
        sub.recv_timeout(ms(300)).await.unwrap().is_none(),
        "[{target}]"
    );
    let err = store.listen("").await.err().unwrap();
    assert_eq!(err.code(), Some("ALK01"), "[{target}]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_excludes_other_owners_and_its_tokens_grow() {
    on_every_store!(a_lease_excludes_other_owners_and_its_tokens_grow_on);
}

async fn a_lease_excludes_other_owners_and_its_tokens_grow_on<DB: AsyncEngine>(
    target: &str,
    store: AsyncStore<DB>,
) {
    let name = fresh("async-lease");
    let ttl = Duration::from_secs(30);
    let a = store.lock(&name, "a", ttl).await.unwrap().expect("free");
    assert!(
        store.lock(&name, "b", ttl).await.unwrap().is_none(),
        "[{target}]"
    );
    assert!(a.renew(ttl).await.unwrap());
    let first = a.token();
    assert!(a.release().await.unwrap());
    let b = store
        .lock(&name, "b", ttl)
        .await
        .unwrap()
        .expect("released");
    assert!(b.token() > first, "[{target}] fencing tokens grow");
    // Dropped: released in the background.
    drop(b);
    let until = std::time::Instant::now() + Duration::from_secs(30);
    let c = loop {
        if let Some(c) = store.lock(&name, "c", ttl).await.unwrap() {
            break c;
        }
        assert!(
            std::time::Instant::now() < until,
            "[{target}] the dropped lease was not released"
        );
        tokio::time::sleep(ms(20)).await;
    };
    assert!(c.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_character_is_refused_alike_by_every_async_driver() {
    on_every_store!(a_nul_character_is_refused_alike_by_every_async_driver_on);
}

async fn a_nul_character_is_refused_alike_by_every_async_driver_on<DB: AsyncEngine>(
    target: &str,
    store: AsyncStore<DB>,
) {
    let name = fresh("async-nul");
    let mut tx = store.begin().await.unwrap();
    let mut conn = AsyncConn::<DB>(&mut *tx);
    // sqlx's PostgreSQL calls write parameters into the statement: a raw NUL
    // must be refused before, not cut the statement short.
    let err = conn
        .notify_tx(&name, &json!({ "text": "a\u{0}b" }))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("ALK04"), "[{target}] {err}");
    tx.rollback().await.unwrap();
    let queue = store.queue(&name).unwrap();
    let err = queue
        .enqueue(&alkstore::EnqueueOpts::new().limit_key("k\u{0}"), &json!(1))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("ALK03"), "[{target}] {err}");
    let id = queue
        .enqueue(&alkstore::EnqueueOpts::new(), &json!(1))
        .await
        .unwrap();
    assert_eq!(queue.claim("w", 1).await.unwrap().len(), 1);
    let key = alkstore::sql::Arg::from("k\u{0}");
    let err = store
        .call(
            "alk_publish",
            &[
                name.as_str().into(),
                json!(1).to_string().as_str().into(),
                key,
            ],
        )
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("ALK05"), "[{target}] {err}");
    // A NUL in a name through the untyped call: a bad name on every driver.
    let args = [
        "s\u{0}".into(),
        json!(1).to_string().as_str().into(),
        alkstore::sql::Arg::Null,
    ];
    let err = store.call("alk_publish", &args).await.unwrap_err();
    assert_eq!(err.code(), Some("ALK01"), "[{target}] {err}");
    queue
        .retry(id, "w", "bad\u{0}byte", Some(Duration::ZERO))
        .await
        .unwrap();
    let job = store.get_job(id).await.unwrap().unwrap();
    assert_eq!(job["last_error"], "bad\u{FFFD}byte", "[{target}] {job}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_function_or_arity_is_invalid_argument_on_every_async_driver() {
    on_every_store!(an_unknown_function_or_arity_is_invalid_argument_on_every_async_driver_on);
}

async fn an_unknown_function_or_arity_is_invalid_argument_on_every_async_driver_on<
    DB: AsyncEngine,
>(
    target: &str,
    store: AsyncStore<DB>,
) {
    use alkstore::sql::Arg;
    let bad: [(&str, Vec<Arg>); 3] = [
        ("alk_nope", vec![]),
        ("pg_sleep", vec![Arg::Int(1)]),
        ("alk_enqueue", vec![Arg::from("q")]),
    ];
    let mut tx = store.begin().await.unwrap();
    for (f, args) in &bad {
        let outside = store.call(f, args).await.unwrap_err();
        let inside = AsyncConn::<DB>(&mut *tx).call(f, args).await.unwrap_err();
        for err in [outside, inside] {
            assert_eq!(err.code(), Some("ALK05"), "[{target}] {f}: {err}");
        }
    }
    // Nothing was sent: the transaction is still usable.
    let queue = fresh("async-arity");
    let args = [queue.as_str().into(), Arg::Null, Arg::json(&json!(1))];
    AsyncConn::<DB>(&mut *tx)
        .call("alk_enqueue", &args)
        .await
        .unwrap();
    AsyncTransactionEnd::commit(tx).await.unwrap();
    assert_eq!(stats(&store, &queue).await["pending"], 1, "[{target}]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_enqueued_on_an_async_transaction_exists_only_if_it_commits() {
    on_every_store!(a_workflow_enqueued_on_an_async_transaction_exists_only_if_it_commits_on);
}

async fn a_workflow_enqueued_on_an_async_transaction_exists_only_if_it_commits_on<
    DB: AsyncEngine,
>(
    target: &str,
    store: AsyncStore<DB>,
) {
    let q = fresh("async-wf");
    let flow = alkstore::Workflow::new()
        .step("a", &q, json!(1), &[])
        .step("b", &q, json!(2), &["a"])
        .step("c", &q, json!(3), &["a", "b"]);
    let mut tx = store.begin().await.unwrap();
    let gone = flow
        .enqueue_async(&mut AsyncConn::<DB>(&mut tx))
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(store.get_job(gone["a"]).await.unwrap(), None, "[{target}]");
    let mut tx = store.begin().await.unwrap();
    let ids = flow
        .enqueue_async(&mut AsyncConn::<DB>(&mut tx))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let c = store.get_job(ids["c"]).await.unwrap().unwrap();
    assert_eq!(c["waiting_for"], json!([ids["a"], ids["b"]]), "[{target}]");
    let cycle = alkstore::Workflow::new().step("x", &q, json!(1), &["x"]);
    let mut tx = store.begin().await.unwrap();
    let err = cycle
        .enqueue_async(&mut AsyncConn::<DB>(&mut tx))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("ALK03"), "[{target}] {err}");
    tx.rollback().await.unwrap();
}
