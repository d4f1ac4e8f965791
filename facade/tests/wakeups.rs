//! Waiting without busy polling: claim_wait, listen and stream subscriptions
//! wake on commits from other connections and other processes.

mod common;
use alkstore::EnqueueOpts;
use common::*;
use serde_json::json;
use std::process::Command;
use std::time::{Duration, Instant};

/// Far below the 1 s fallback poll: only a real wake-up is this fast.
const WOKEN: Duration = Duration::from_millis(300);

#[test]
fn an_idle_worker_claims_within_milliseconds_of_the_commit() {
    for target in targets() {
        let q = fresh("wake");
        let producer = target.open();
        let (ready, waiting) = std::sync::mpsc::channel();
        let worker = {
            let (target, q) = (target.clone(), q.clone());
            std::thread::spawn(move || {
                let store = target.open();
                let queue = store.queue(&q).unwrap();
                assert!(queue.claim_wait("w", 1, ms(50)).unwrap().is_empty()); // registered
                ready.send(()).unwrap();
                let jobs = queue.claim_wait("w", 1, Duration::from_secs(10)).unwrap();
                (Instant::now(), jobs)
            })
        };
        // The worker is registered (a fixed pause was not always enough on
        // a loaded machine).
        waiting.recv_timeout(Duration::from_secs(30)).unwrap();
        // Then a moment for it to be in its wait, so that the commit wakes it
        // rather than meets its first claim (far below the fallback poll).
        std::thread::sleep(std::time::Duration::from_millis(200));
        let mut tx = producer.begin().unwrap();
        tx.enqueue_tx(&q, &EnqueueOpts::new(), &json!("hello"))
            .unwrap();
        tx.commit().unwrap();
        let committed = Instant::now();
        let (claimed_at, jobs) = worker.join().unwrap();
        assert_eq!(jobs.len(), 1, "[{}]", target.name());
        let latency = claimed_at.saturating_duration_since(committed);
        assert!(
            latency < WOKEN,
            "[{}] claimed {latency:?} after commit",
            target.name()
        );
    }
}

#[test]
fn a_worker_in_another_process_is_woken_by_the_commit() {
    for target in targets() {
        let q = fresh("wake-process");
        let out = tempfile::NamedTempFile::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "child_claim_wait",
                "--ignored",
                "--test-threads=1",
            ])
            .envs(target.child_env())
            .env("ALK_CHILD_QUEUE", &q)
            .env("ALK_CHILD_OUT", out.path())
            .env("ALK_CHILD_READY", &ready)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        wait_for_file(&mut child, &ready); // the child has registered
                                           // Then a moment for it to be in its wait, so that the commit wakes it
                                           // rather than meets its first claim (far below the fallback poll).
        std::thread::sleep(std::time::Duration::from_millis(200));
        let store = target.open();
        store
            .queue(&q)
            .unwrap()
            .enqueue(&EnqueueOpts::new(), &json!({"n": 1}))
            .unwrap();
        let committed = alkstore_core::time::now_ms();
        assert!(child.wait().unwrap().success());
        let claimed_at: i64 = std::fs::read_to_string(out.path())
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let latency = claimed_at - committed;
        assert!(
            latency < WOKEN.as_millis() as i64,
            "[{}] another process claimed {latency} ms after the commit",
            target.name()
        );
    }
}

/// Not a test on its own: the waiting worker of the test above.
#[test]
#[ignore = "started as a child process by a_worker_in_another_process_is_woken_by_the_commit"]
fn child_claim_wait() {
    let store = open_child();
    let queue = store
        .queue(&std::env::var("ALK_CHILD_QUEUE").unwrap())
        .unwrap();
    assert!(queue.claim_wait("child", 1, ms(50)).unwrap().is_empty()); // registered
    std::fs::write(std::env::var("ALK_CHILD_READY").unwrap(), "ready").unwrap();
    let jobs = queue
        .claim_wait("child", 1, Duration::from_secs(20))
        .unwrap();
    assert_eq!(jobs.len(), 1);
    std::fs::write(
        std::env::var("ALK_CHILD_OUT").unwrap(),
        alkstore_core::time::now_ms().to_string(),
    )
    .unwrap();
}

#[test]
fn claim_wait_still_finds_delayed_jobs_without_a_notification() {
    for target in targets() {
        let store = target.open();
        let queue = store.queue(&fresh("delayed")).unwrap();
        queue
            .enqueue(&EnqueueOpts::new().delay(ms(200)), &json!(1))
            .unwrap();
        let started = Instant::now();
        let jobs = queue.claim_wait("w", 1, Duration::from_secs(5)).unwrap();
        assert_eq!(jobs.len(), 1, "[{}]", target.name());
        assert!(started.elapsed() >= ms(150), "not before its run_at");
        assert!(
            queue.claim_wait("w", 1, ms(100)).unwrap().is_empty(),
            "times out empty"
        );
    }
}

#[test]
fn listeners_get_notifications_after_commit_in_order_and_never_after_rollback() {
    for target in targets() {
        let ch = fresh("ch");
        let listener_store = target.open();
        let mut sub = listener_store.listen(&ch).unwrap();
        let store = target.open();
        store.notify(&ch, &json!(1)).unwrap();
        let mut tx = store.begin().unwrap();
        tx.notify_tx(&ch, &json!("never")).unwrap();
        tx.rollback().unwrap();
        let mut tx = store.begin().unwrap();
        tx.notify_tx(&ch, &json!(2)).unwrap();
        tx.notify_tx(&ch, &json!(3)).unwrap();
        tx.commit().unwrap();
        let got: Vec<_> = (0..3)
            .map(|_| {
                sub.recv_timeout(Duration::from_secs(5))
                    .unwrap()
                    .unwrap()
                    .payload
            })
            .collect();
        assert_eq!(
            got,
            vec![json!(1), json!(2), json!(3)],
            "[{}]",
            target.name()
        );
        assert_eq!(sub.recv_timeout(ms(300)).unwrap(), None);
        // A listener that was not listening does not get it later.
        let mut late = listener_store.listen(&ch).unwrap();
        assert_eq!(late.recv_timeout(ms(200)).unwrap(), None);
    }
}

#[test]
fn a_stream_consumer_resumes_from_its_saved_offset_and_waits_for_new_events() {
    for target in targets() {
        let store = target.open();
        let s = fresh("events");
        let stream = store.stream(&s).unwrap();
        // publish returns the event's id; offsets come with reads.
        let ids: Vec<i64> = (1..=3)
            .map(|i| stream.publish(&json!({"n": i}), None).unwrap())
            .collect();
        let mut sub = stream.subscribe("billing").unwrap();
        let first = sub.next_batch(2, ms(100)).unwrap();
        assert_eq!(
            first.iter().map(|e| (e.offset, e.id)).collect::<Vec<_>>(),
            vec![(1, ids[0]), (2, ids[1])]
        );
        assert!(sub.commit().unwrap());
        drop(sub); // "crash"
        let mut sub = stream.subscribe("billing").unwrap();
        assert_eq!(sub.position(), 2);
        let publisher = {
            let (target, s) = (target.clone(), s.clone());
            std::thread::spawn(move || {
                std::thread::sleep(ms(300));
                target
                    .open()
                    .stream(&s)
                    .unwrap()
                    .publish(&json!({"n": 4}), Some("k"))
                    .unwrap()
            })
        };
        let rest = sub.next_batch(10, Duration::from_secs(5)).unwrap();
        assert_eq!(rest[0].offset, 3);
        let waited = if rest.len() == 1 {
            sub.next_batch(10, Duration::from_secs(5)).unwrap()
        } else {
            rest[1..].to_vec()
        };
        assert_eq!(waited[0].offset, 4, "[{}]", target.name());
        assert_eq!(waited[0].key.as_deref(), Some("k"));
        assert_eq!(publisher.join().unwrap(), waited[0].id);
    }
}
