//! Crashes: a process killed with SIGKILL in the middle of a business
//! transaction leaves nothing behind; a worker killed while holding a job
//! lets another worker re-claim it after the visibility timeout.

mod common;
use alkstore::{EnqueueOpts, QueueOpts, TxHandle};
use common::*;
use serde_json::json;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn child(test: &str, target: &Target, name: &str, ready: &std::path::Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--ignored", "--test-threads=1"])
        .envs(target.child_env())
        .env("ALK_CHILD_NAME", name)
        .env("ALK_CHILD_READY", ready)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_ready(ready: &std::path::Path) {
    let until = Instant::now() + Duration::from_secs(30);
    while !ready.exists() {
        assert!(Instant::now() < until, "the child never got ready");
        std::thread::sleep(ms(20));
    }
}

#[test]
fn a_process_killed_inside_its_transaction_leaves_no_job_and_no_row() {
    for target in targets() {
        let name = fresh("crash");
        let table = name.replace('-', "_");
        let store = target.open();
        // The business table exists before the child starts.
        create_table(&target, &table);
        let ready = tempfile::tempdir().unwrap().keep().join("ready");
        let mut c = child("child_dies_mid_transaction", &target, &name, &ready);
        wait_ready(&ready);
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
        assert_eq!(count_rows(&target, &table), 0, "no partial rows");
        // The database is not left locked.
        let mut tx = store.begin().unwrap();
        tx.enqueue_tx(&name, &EnqueueOpts::new(), &json!("after"))
            .unwrap();
        tx.commit().unwrap();
        assert_eq!(queue.claim("w", 10).unwrap().len(), 1);
    }
}

fn create_table(target: &Target, table: &str) {
    match target {
        Target::Sqlite(_) => target.sqlite().transaction().map(|tx| {
            tx.conn()
                .execute_batch(&format!("CREATE TABLE {table} (item TEXT)"))
                .unwrap();
            tx.commit().unwrap();
        }),
        Target::Postgres(_) => target.postgres().transaction().map(|mut tx| {
            tx.client()
                .batch_execute(&format!("CREATE TABLE {table} (item text)"))
                .unwrap();
            tx.commit().unwrap();
        }),
    }
    .unwrap();
}

fn count_rows(target: &Target, table: &str) -> i64 {
    let sql = format!("SELECT count(*) FROM {table}");
    match target {
        Target::Sqlite(_) => target
            .sqlite()
            .transaction()
            .unwrap()
            .conn()
            .query_row(&sql, [], |r| r.get(0))
            .unwrap(),
        Target::Postgres(_) => target
            .postgres()
            .transaction()
            .unwrap()
            .client()
            .query_one(&sql, &[])
            .unwrap()
            .get(0),
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
            .configure(&QueueOpts::new().visibility_timeout(ms(500)))
            .unwrap();
        let id = queue
            .enqueue(&EnqueueOpts::new(), &json!("important"))
            .unwrap();
        let ready = tempfile::tempdir().unwrap().keep().join("ready");
        let mut c = child("child_claims_and_hangs", &target, &name, &ready);
        wait_ready(&ready);
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
