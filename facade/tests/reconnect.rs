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
        let killed: Vec<i32> = admin
            .query(
                "SELECT pid, pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'alkstore-listener'",
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert!(!killed.is_empty());
        // Reconnected and registered again: a new listener connection whose
        // last statement was the registration (a fixed pause was not always
        // enough on a loaded machine).
        let until = Instant::now() + Duration::from_secs(30);
        while !admin
            .query_one(
                "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE application_name = 'alkstore-listener' \
                  AND pid <> ALL($1) AND state = 'idle' AND query LIKE '%alk_listen_queue(%')",
                &[&killed],
            )
            .unwrap()
            .get::<_, bool>(0)
        {
            assert!(Instant::now() < until, "the listener did not come back");
            std::thread::sleep(ms(20));
        }
        let (ready, waiting) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            ready.send(()).unwrap(); // still registered: it claims, then waits
            let jobs = queue.claim_wait("w", 1, Duration::from_secs(10)).unwrap();
            (Instant::now(), jobs.len())
        });
        waiting.recv_timeout(Duration::from_secs(30)).unwrap();
        // Then a moment for it to be in its wait, so that the commit wakes it
        // rather than meets its first claim (far below the fallback poll).
        std::thread::sleep(std::time::Duration::from_millis(200));
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
