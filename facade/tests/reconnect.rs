//! PostgreSQL: the listener connection of a store comes back after it is
//! killed, and wake-ups work again. (Its own test binary: killing listener
//! connections must not disturb other tests.)

mod common;
use alkstore::EnqueueOpts;
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

#[test]
fn wake_ups_survive_a_killed_listener_connection() {
    for target in targets()
        .into_iter()
        .filter(|t| matches!(t, Target::Postgres(_)))
    {
        let q = fresh("reconnect");
        let store = target.postgres();
        let queue = store.queue(&q).unwrap();
        assert!(queue.claim_wait("w", 1, ms(50)).unwrap().is_empty()); // registered
        let Target::Postgres(pg) = &target else {
            unreachable!()
        };
        let mut admin = postgres::Client::connect(&pg.direct, postgres::NoTls).unwrap();
        let killed: i64 = admin
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'alkstore-listener'",
                &[],
            )
            .unwrap()
            .get(0);
        assert!(killed >= 1);
        std::thread::sleep(ms(1000)); // reconnected and registered again
        let waiter = std::thread::spawn(move || {
            let jobs = queue.claim_wait("w", 1, Duration::from_secs(10)).unwrap();
            (Instant::now(), jobs.len())
        });
        std::thread::sleep(ms(300));
        target
            .open()
            .queue(&q)
            .unwrap()
            .enqueue(&EnqueueOpts::new(), &json!(1))
            .unwrap();
        let committed = Instant::now();
        let (claimed, n) = waiter.join().unwrap();
        assert_eq!(n, 1);
        let latency = claimed.saturating_duration_since(committed);
        assert!(latency < ms(300), "woken {latency:?} after the commit");
    }
}
