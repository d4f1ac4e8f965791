//! A host whose clock runs behind the database's: the workers read a
//! claim's time left against the database's clock (contract v1.3 §P's
//! heartbeats keep a held job claimed), so a job still runs once. Before,
//! a host two minutes behind read a 2 s claim as 122 s long and sent its
//! first heartbeat 40 s in, long after the claim lapsed and another worker
//! took the job. The blocking and the async worker, on every store. (The
//! offset is this test binary's alone: `alkstore::testing`.)

#[macro_use]
mod async_common;
mod common;

use alkstore::{AsyncEngine, AsyncStore, AsyncWorker, EnqueueOpts, QueueOpts, Stop, Worker};
use common::{fresh, ms, targets};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Two minutes behind.
const BEHIND_MS: i64 = -120_000;

#[test]
fn a_blocking_worker_on_a_host_behind_keeps_its_claim() {
    alkstore::testing::offset_worker_clock(BEHIND_MS);
    for target in targets() {
        let store = target.open();
        let q = store.queue(&fresh("clock-behind")).unwrap();
        q.configure(&QueueOpts::new().visibility_timeout(ms(2000)))
            .unwrap();
        let id = q.enqueue(&EnqueueOpts::new(), &json!(1)).unwrap();
        let stop = Stop::new();
        let (runs, stolen) = (Mutex::new(vec![]), Mutex::new(vec![]));
        let started = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                Worker::new(store.queue(q.name()).unwrap(), "behind")
                    .run(&stop, |job| {
                        runs.lock().unwrap().push((job.id, job.attempts));
                        started.store(true, Ordering::SeqCst);
                        std::thread::sleep(ms(5000)); // two and a half visibility timeouts
                        stop.stop();
                        Ok(())
                    })
                    .unwrap()
            });
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while !started.load(Ordering::SeqCst) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the worker never started the job"
                );
                std::thread::sleep(ms(10));
            }
            while !stop.is_stopped() {
                let claimed = q.claim("thief", 1).unwrap();
                stolen.lock().unwrap().extend(claimed.iter().map(|j| j.id));
                std::thread::sleep(ms(50));
            }
        });
        let name = target.name();
        assert_eq!(*stolen.lock().unwrap(), Vec::<i64>::new(), "[{name}]");
        assert_eq!(*runs.lock().unwrap(), vec![(id, 1)], "[{name}]");
        assert_eq!(q.get_job(id).unwrap(), None, "[{name}] acked");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_async_worker_on_a_host_behind_keeps_its_claim() {
    alkstore::testing::offset_worker_clock(BEHIND_MS);
    on_every_store!(an_async_worker_on_a_host_behind_keeps_its_claim_on);
}

async fn an_async_worker_on_a_host_behind_keeps_its_claim_on<DB: AsyncEngine>(
    target: &str,
    store: AsyncStore<DB>,
) {
    let opts = QueueOpts::new().visibility_timeout(ms(2000));
    let name = async_common::queue(&store, "clock-behind-async", opts).await;
    let q = store.queue(&name).unwrap();
    let id = q.enqueue(&EnqueueOpts::new(), &json!(1)).await.unwrap();
    let runs = Arc::new(Mutex::new(vec![]));
    let started = Arc::new(tokio::sync::Notify::new());
    let (done, shutdown) = tokio::sync::oneshot::channel::<()>();
    let done = Arc::new(Mutex::new(Some(done)));
    let handler = {
        let (runs, started) = (runs.clone(), started.clone());
        move |job: alkstore::Job| {
            let (runs, started, done) = (runs.clone(), started.clone(), done.clone());
            async move {
                runs.lock().unwrap().push((job.id, job.attempts));
                started.notify_one();
                tokio::time::sleep(ms(5000)).await; // two and a half visibility timeouts
                if let Some(done) = done.lock().unwrap().take() {
                    let _ = done.send(());
                }
                Ok::<(), String>(())
            }
        }
    };
    let worker = AsyncWorker::new(q.clone(), "behind");
    let finished = AtomicBool::new(false);
    let run = async {
        let handled = worker.run(shutdown, handler).await;
        finished.store(true, Ordering::SeqCst);
        handled
    };
    let thief = async {
        tokio::time::timeout(std::time::Duration::from_secs(60), started.notified())
            .await
            .expect("the worker never started the job");
        let mut stolen = vec![];
        while !finished.load(Ordering::SeqCst) {
            stolen.extend(q.claim("thief", 1).await.unwrap().into_iter().map(|j| j.id));
            tokio::time::sleep(ms(50)).await;
        }
        stolen
    };
    let (handled, stolen) = tokio::join!(run, thief);
    handled.unwrap();
    assert_eq!(stolen, Vec::<i64>::new(), "[{target}]");
    assert_eq!(*runs.lock().unwrap(), vec![(id, 1)], "[{target}]");
    assert_eq!(
        q.store().get_job(id).await.unwrap(),
        None,
        "[{target}] acked"
    );
}
