//! A server restart under a running `AsyncWorker`, on sqlx and on
//! tokio-postgres: it rides out the outage, re-registers its wake-ups (on a
//! listener connection made again) and handles what is enqueued after. Alone in
//! its test binary, since the restart drops every connection.

mod async_common;
mod common;

use alkstore::{AsyncEngine, AsyncStore, AsyncWorker, EnqueueOpts, QueueOpts};
use async_common::{eventually, queue, stores, tokio_stores};
use common::ms;
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_async_worker_rides_out_a_server_restart() {
    let Ok(restart) = std::env::var("ALKSTORE_PG_RESTART") else {
        eprintln!("note: ALKSTORE_PG_RESTART not set: restart not tested");
        return;
    };
    // Directly only: one restart per driver is enough for both pools.
    if let Some((target, store)) = stores().await.into_iter().next() {
        rides_out_a_restart(target, store, &restart).await;
    }
    if let Some((target, store)) = tokio_stores().await.into_iter().next() {
        rides_out_a_restart(target, store, &restart).await;
    }
}

async fn rides_out_a_restart<DB: AsyncEngine>(target: &str, store: AsyncStore<DB>, restart: &str) {
    let name = queue(&store, "async-restart", QueueOpts::new()).await;
    let q = store.queue(&name).unwrap();
    let seen: Arc<Mutex<BTreeSet<i64>>> = Arc::default();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let worker = {
        let seen = seen.clone();
        // Polling only every minute: the jobs after the restart are found
        // by wake-ups, so the listener must have been made again and
        // registered again.
        let w = AsyncWorker::new(q.clone(), "survivor")
            .concurrency(2)
            .poll_every(Duration::from_secs(60));
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            w.run(
                async move {
                    let _ = stopped.wait_for(|s| *s).await;
                },
                move |job| {
                    let seen = seen.clone();
                    async move {
                        seen.lock()
                            .unwrap()
                            .insert(job.payload["n"].as_i64().unwrap());
                        Ok::<(), String>(())
                    }
                },
            )
            .await
        })
    };
    for n in 0..5 {
        q.enqueue(&EnqueueOpts::new(), &json!({ "n": n }))
            .await
            .unwrap();
    }
    eventually("the first jobs handled", || seen.lock().unwrap().len() == 5).await;
    let status = tokio::process::Command::new("sh")
        .args(["-c", restart])
        .status()
        .await
        .unwrap();
    assert!(status.success(), "{restart}");
    // Enqueue after the restart (retrying while the server comes back); the
    // worker must wake for them on its re-made listener.
    for n in 5..10 {
        let until = Instant::now() + Duration::from_secs(30);
        while let Err(e) = q.enqueue(&EnqueueOpts::new(), &json!({ "n": n })).await {
            assert!(Instant::now() < until, "[{target}] {e}");
            tokio::time::sleep(ms(100)).await;
        }
    }
    eventually("the jobs after the restart handled", || {
        seen.lock().unwrap().len() == 10
    })
    .await;
    stop.send(true).unwrap();
    assert!(
        worker.await.unwrap().unwrap() >= 10,
        "[{target}] the worker survived"
    );
}
