//! Crashes: a process killed with SIGKILL in the middle of a business
//! transaction leaves nothing behind; a worker killed while holding a job
//! lets another worker re-claim it after the visibility timeout.

mod common;
use alkstore::{EnqueueOpts, QueueOpts, TxHandle};
use common::*;
use serde_json::json;
use std::time::Duration;

#[test]
fn a_process_killed_inside_its_transaction_leaves_no_job_and_no_row() {
    for target in targets() {
        let name = fresh("crash");
        let table = name.replace('-', "_");
        let store = target.open();
        // The business table exists before the child starts.
        target.execute(&format!("CREATE TABLE {table} (item text)"));
        let ready = tempfile::tempdir().unwrap().keep().join("ready");
        let mut c = target.spawn_child(
            "child_dies_mid_transaction",
            &[
                ("ALK_CHILD_NAME", &name),
                ("ALK_CHILD_READY", ready.to_str().unwrap()),
            ],
        );
        wait_for_file(&mut c, &ready);
        c.kill().unwrap(); // SIGKILL
        c.wait().unwrap();
        let queue = store.queue(&name).unwrap();
        assert!(
            queue.claim("w", 10).unwrap().is_empty(),
            "[{}] no ghost job",
            target.name()
        );
        assert!(
            store
                .outbox(&name)
                .unwrap()
                .claim("w", 10)
                .unwrap()
                .is_empty(),
            "no ghost message"
        );
        assert_eq!(
            target.query_i64(&format!("SELECT count(*) FROM {table}")),
            0,
            "no partial rows"
        );
        // The database is not left locked.
        let mut tx = store.begin().unwrap();
        tx.enqueue_tx(&name, &EnqueueOpts::new(), &json!("after"))
            .unwrap();
        tx.commit().unwrap();
        assert_eq!(queue.claim("w", 10).unwrap().len(), 1);
    }
}

/// Not a test on its own: writes rows and jobs in a transaction, then hangs until killed.
#[test]
#[ignore = "started as a child process by a_process_killed_inside_its_transaction_leaves_no_job_and_no_row"]
fn child_dies_mid_transaction() {
    let url = std::env::var("ALK_CHILD_URL").expect("started by the parent test");
    let name = std::env::var("ALK_CHILD_NAME").unwrap();
    let table = name.replace('-', "_");
    let insert = format!("INSERT INTO {table} VALUES ('ghost')");
    let ready = || std::fs::write(std::env::var("ALK_CHILD_READY").unwrap(), "ready").unwrap();
    if url.starts_with("sqlite:") {
        let store = alkstore::SqliteStore::open(url.trim_start_matches("sqlite:")).unwrap();
        let mut tx = store.transaction().unwrap();
        tx.conn().execute_batch(&insert).unwrap();
        tx.enqueue_tx(&name, &EnqueueOpts::new(), &json!("ghost"))
            .unwrap();
        tx.outbox_enqueue_tx(&name, &EnqueueOpts::new(), &json!("ghost"))
            .unwrap();
        ready();
        std::thread::sleep(Duration::from_secs(600));
    } else {
        let direct = std::env::var("ALK_CHILD_LISTEN_URL").unwrap_or_else(|_| url.clone());
        let store = alkstore::PgStore::connect_with_listener(&url, &direct).unwrap();
        let mut tx = store.transaction().unwrap();
        tx.client().batch_execute(&insert).unwrap();
        tx.enqueue_tx(&name, &EnqueueOpts::new(), &json!("ghost"))
            .unwrap();
        tx.outbox_enqueue_tx(&name, &EnqueueOpts::new(), &json!("ghost"))
            .unwrap();
        ready();
        std::thread::sleep(Duration::from_secs(600));
    }
}

#[test]
fn a_killed_workers_job_is_reclaimed_after_the_visibility_timeout_and_processed() {
    for target in targets() {
        let name = fresh("orphan");
        let store = target.open();
        let queue = store.queue(&name).unwrap();
        queue
            .configure(&QueueOpts::new().visibility_timeout(ms(2000)))
            .unwrap();
        let id = queue
            .enqueue(&EnqueueOpts::new(), &json!("important"))
            .unwrap();
        let ready = tempfile::tempdir().unwrap().keep().join("ready");
        let mut c = target.spawn_child(
            "child_claims_and_hangs",
            &[
                ("ALK_CHILD_NAME", &name),
                ("ALK_CHILD_READY", ready.to_str().unwrap()),
            ],
        );
        wait_for_file(&mut c, &ready);
        c.kill().unwrap();
        c.wait().unwrap();
        assert!(
            queue.claim("survivor", 1).unwrap().is_empty(),
            "[{}] still held right after the kill",
            target.name()
        );
        let jobs = queue
            .claim_wait("survivor", 1, Duration::from_secs(10))
            .unwrap();
        assert_eq!(
            jobs.iter().map(|j| (j.id, j.attempts)).collect::<Vec<_>>(),
            vec![(id, 2)],
            "[{}]",
            target.name()
        );
        assert!(queue.ack(id, "survivor").unwrap());
    }
}

/// Not a test on its own: claims a job and hangs until killed.
#[test]
#[ignore = "started as a child process by a_killed_workers_job_is_reclaimed_after_the_visibility_timeout_and_processed"]
fn child_claims_and_hangs() {
    let store = open_child();
    let queue = store
        .queue(&std::env::var("ALK_CHILD_NAME").unwrap())
        .unwrap();
    assert_eq!(queue.claim("doomed", 1).unwrap().len(), 1);
    std::fs::write(std::env::var("ALK_CHILD_READY").unwrap(), "ready").unwrap();
    std::thread::sleep(Duration::from_secs(600));
}
