//! The blocking worker's local queue and batched acks (contract v1.3 §P,
//! issue 59), on SQLite, PostgreSQL and PostgreSQL through PgBouncer: a
//! prefetched job stays claimed past its visibility timeout, a stopping
//! worker gives its prefetched jobs back at once, a worker killed with acks
//! waiting loses none of its jobs, a zero flush window acks each job as its
//! handler returns, and limits and groups hold with prefetch.

mod common;
use alkstore::{EnqueueOpts, FlushWindow, QueueOpts, Stop, Worker};
use common::*;
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn no_flush() -> FlushWindow {
    FlushWindow {
        wait: Duration::ZERO,
        max_jobs: 1,
    }
}

/// A job that waits in the local queue longer than the visibility timeout
/// (its time to live set longer) is kept claimed by heartbeats: another
/// worker polling all along never gets it, and it runs once, on its first
/// attempt.
#[test]
fn a_prefetched_job_is_held_past_its_visibility_timeout() {
    for target in targets() {
        let store = target.open();
        let q = store.queue(&fresh("prefetch-held")).unwrap();
        q.configure(&QueueOpts::new().visibility_timeout(ms(1000)))
            .unwrap();
        let first = q.enqueue(&EnqueueOpts::new(), &json!(1)).unwrap();
        let second = q.enqueue(&EnqueueOpts::new(), &json!(2)).unwrap();
        let stop = Stop::new();
        let (runs, stolen) = (Mutex::new(vec![]), Mutex::new(vec![]));
        let started = AtomicUsize::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                // One handler, one job prefetched, that may wait 10 s.
                Worker::new(store.queue(q.name()).unwrap(), "holder")
                    .prefetch(1)
                    .prefetch_ttl(Duration::from_secs(10))
                    .run(&stop, |job| {
                        runs.lock().unwrap().push((job.id, job.attempts));
                        started.fetch_add(1, Ordering::SeqCst);
                        if job.id == first {
                            std::thread::sleep(ms(3000)); // three visibility timeouts
                        } else {
                            stop.stop();
                        }
                        Ok(())
                    })
                    .unwrap()
            });
            // The thief starts once the worker holds both jobs.
            while started.load(Ordering::SeqCst) == 0 {
                std::thread::sleep(ms(10));
            }
            while !stop.is_stopped() {
                stolen
                    .lock()
                    .unwrap()
                    .extend(q.claim("thief", 1).unwrap().into_iter().map(|j| j.id));
                std::thread::sleep(ms(50));
            }
        });
        assert_eq!(
            *stolen.lock().unwrap(),
            Vec::<i64>::new(),
            "[{}]",
            target.name()
        );
        assert_eq!(
            *runs.lock().unwrap(),
            vec![(first, 1), (second, 1)],
            "[{}]",
            target.name()
        );
        for id in [first, second] {
            assert_eq!(q.get_job(id).unwrap(), None, "[{}] acked", target.name());
        }
    }
}

/// A stopping worker gives back what it prefetched and did not start
/// (`alk_release_batch`): pending at once, no attempt spent, claimable by
/// another worker without waiting for the claims to expire.
#[test]
fn a_stopping_worker_gives_back_its_prefetched_jobs_at_once() {
    for target in targets() {
        let store = target.open();
        let q = store.queue(&fresh("prefetch-stop")).unwrap();
        // A long visibility timeout: only a give-back frees them in time.
        q.configure(&QueueOpts::new().visibility_timeout(Duration::from_secs(300)))
            .unwrap();
        let ids: Vec<i64> = (0..6)
            .map(|n| q.enqueue(&EnqueueOpts::new(), &json!(n)).unwrap())
            .collect();
        let stop = Stop::new();
        let started = AtomicUsize::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                Worker::new(store.queue(q.name()).unwrap(), "stopper")
                    .prefetch(5)
                    .run(&stop, |_job| {
                        started.fetch_add(1, Ordering::SeqCst);
                        // Hold the first job until the local queue is full.
                        let until = Instant::now() + Duration::from_secs(30);
                        while q.stats().unwrap()["running"] != json!(6) && Instant::now() < until {
                            std::thread::sleep(ms(20));
                        }
                        stop.stop();
                        Ok(())
                    })
                    .unwrap()
            });
        });
        assert_eq!(started.load(Ordering::SeqCst), 1, "[{}]", target.name());
        let took = q.claim("other", 10).unwrap();
        let mut got: Vec<(i64, i64)> = took.iter().map(|j| (j.id, j.attempts)).collect();
        got.sort();
        let want: Vec<(i64, i64)> = ids[1..].iter().map(|&id| (id, 1)).collect();
        assert_eq!(
            got,
            want,
            "[{}] given back, no attempt spent",
            target.name()
        );
    }
}

/// Not a test on its own: a worker with a 60 s flush window whose handlers
/// return at once, killed by the parent while their acks wait.
#[test]
#[ignore = "started as a child process by a_worker_killed_with_acks_waiting_loses_no_job"]
fn child_handles_with_a_long_flush_window() {
    let store = open_child();
    let queue = store
        .queue(&std::env::var("ALK_CHILD_NAME").unwrap())
        .unwrap();
    let ready = std::env::var("ALK_CHILD_READY").unwrap();
    let handled = AtomicUsize::new(0);
    Worker::new(queue, "doomed")
        .concurrency(4)
        .flush_window(FlushWindow {
            wait: Duration::from_secs(60),
            max_jobs: 1000,
        })
        .run(&Stop::new(), |_job| {
            if handled.fetch_add(1, Ordering::SeqCst) + 1 == 10 {
                std::fs::write(&ready, "ready").unwrap();
            }
            Ok(())
        })
        .unwrap();
}

/// SIGKILL while acks wait for their flush: none of those jobs is lost;
/// each runs again once its claim expires (at least once).
#[test]
fn a_worker_killed_with_acks_waiting_loses_no_job() {
    for target in targets() {
        let name = fresh("flush-kill");
        let store = target.open();
        let q = store.queue(&name).unwrap();
        q.configure(&QueueOpts::new().visibility_timeout(ms(2000)))
            .unwrap();
        let ids: Vec<i64> = (0..10)
            .map(|n| q.enqueue(&EnqueueOpts::new(), &json!(n)).unwrap())
            .collect();
        let ready = tempfile::tempdir().unwrap().keep().join("ready");
        let mut c = target.spawn_child(
            "child_handles_with_a_long_flush_window",
            &[
                ("ALK_CHILD_NAME", &name),
                ("ALK_CHILD_READY", ready.to_str().unwrap()),
            ],
        );
        wait_for_file(&mut c, &ready);
        c.kill().unwrap();
        c.wait().unwrap();
        // Handled, but not acked: still claimed by the dead worker.
        assert_eq!(
            q.stats().unwrap()["running"],
            json!(10),
            "[{}]",
            target.name()
        );
        let mut again = vec![];
        let until = Instant::now() + Duration::from_secs(30);
        while again.len() < ids.len() && Instant::now() < until {
            for job in q.claim_wait("survivor", 10, ms(500)).unwrap() {
                assert!(q.ack(job.id, "survivor").unwrap());
                again.push(job.id);
            }
        }
        again.sort();
        assert_eq!(again, ids, "[{}] every job ran again", target.name());
    }
}

/// With a zero flush window each job is acked as its handler returns (as
/// before batching): the next handler finds the previous job gone.
#[test]
fn a_zero_flush_window_acks_each_job_as_its_handler_returns() {
    for target in targets() {
        let store = target.open();
        let q = store.queue(&fresh("no-flush")).unwrap();
        let ids: Vec<i64> = (0..5)
            .map(|n| q.enqueue(&EnqueueOpts::new(), &json!(n)).unwrap())
            .collect();
        let stop = Stop::new();
        let seen = Mutex::new(vec![]);
        Worker::new(store.queue(q.name()).unwrap(), "single")
            .prefetch(0)
            .flush_window(no_flush())
            .run(&stop, |job| {
                let mut seen = seen.lock().unwrap();
                // The job before this one is acked already.
                let before = seen.last().copied();
                let gone = before.map(|id| q.get_job(id).unwrap().is_none());
                seen.push(job.id);
                if seen.len() == ids.len() {
                    stop.stop();
                }
                assert_ne!(gone, Some(false), "the previous job is not acked yet");
                Ok(())
            })
            .unwrap();
        assert_eq!(*seen.lock().unwrap(), ids, "[{}]", target.name());
        // And with the default window the last acks land before run returns.
        let more: Vec<i64> = (0..5)
            .map(|n| q.enqueue(&EnqueueOpts::new(), &json!(n)).unwrap())
            .collect();
        let stop = Stop::new();
        let n = AtomicUsize::new(0);
        Worker::new(store.queue(q.name()).unwrap(), "batched")
            .run(&stop, |_job| {
                if n.fetch_add(1, Ordering::SeqCst) + 1 == more.len() {
                    stop.stop();
                }
                Ok(())
            })
            .unwrap();
        for id in more {
            assert_eq!(q.get_job(id).unwrap(), None, "[{}] acked", target.name());
        }
    }
}

/// A queue's running limit counts prefetched jobs (they are claimed), and a
/// group's jobs still run one after another in order, with prefetch.
#[test]
fn limits_and_groups_hold_with_prefetch() {
    for target in targets() {
        let store = target.open();
        let q = store.queue(&fresh("prefetch-limits")).unwrap();
        q.configure(&QueueOpts::new().max_running(Some(2))).unwrap();
        for n in 0..12 {
            q.enqueue(&EnqueueOpts::new(), &json!(n)).unwrap();
        }
        for n in 0..6 {
            q.enqueue(&EnqueueOpts::new().group_key("g"), &json!({ "g": n }))
                .unwrap();
        }
        let stop = Stop::new();
        let (most, done) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let (running, group) = (AtomicUsize::new(0), Mutex::new(vec![]));
        Worker::new(store.queue(q.name()).unwrap(), "limited")
            .concurrency(4)
            .prefetch(8)
            .run(&stop, |job| {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                let held = q.stats().unwrap()["running"].as_u64().unwrap() as usize;
                most.fetch_max(held, Ordering::SeqCst);
                if let Some(g) = job.payload["g"].as_i64() {
                    group.lock().unwrap().push(g);
                }
                std::thread::sleep(ms(20));
                running.fetch_sub(1, Ordering::SeqCst);
                if done.fetch_add(1, Ordering::SeqCst) + 1 == 18 {
                    stop.stop();
                }
                Ok(())
            })
            .unwrap();
        assert!(
            most.load(Ordering::SeqCst) <= 2,
            "[{}] {} held at once under max_running 2",
            target.name(),
            most.load(Ordering::SeqCst)
        );
        assert_eq!(
            *group.lock().unwrap(),
            vec![0, 1, 2, 3, 4, 5],
            "[{}]",
            target.name()
        );
    }
}

/// The most a worker may prefetch, at a concurrency that makes its first
/// claim ask for more than one call takes (1,000): claims are split, and
/// the jobs all run.
#[test]
fn the_largest_prefetch_claims_in_calls_of_at_most_a_thousand() {
    for target in targets() {
        let store = target.open();
        let q = store.queue(&fresh("prefetch-max")).unwrap();
        let jobs: Vec<serde_json::Value> = (0..1500).map(|n| json!(n)).collect();
        for chunk in jobs.chunks(500) {
            q.enqueue_batch(&EnqueueOpts::new(), chunk).unwrap();
        }
        let stop = Stop::new();
        let done = AtomicUsize::new(0);
        let handled = Worker::new(store.queue(q.name()).unwrap(), "hoarder")
            .concurrency(8)
            .prefetch(alkstore::MAX_PREFETCH)
            .run(&stop, |_job| {
                if done.fetch_add(1, Ordering::SeqCst) + 1 == 1500 {
                    stop.stop();
                }
                Ok(())
            })
            .unwrap();
        assert_eq!(handled, 1500, "[{}]", target.name());
        assert_eq!(
            q.stats().unwrap()["pending"],
            json!(0),
            "[{}]",
            target.name()
        );
    }
}

/// A prefetched job no handler took within its time to live is given back
/// (no attempt spent) and goes to an idle worker, not back into the same
/// local queue: the busy worker claims only for free handlers for a while.
#[test]
fn a_job_given_back_after_its_time_to_live_goes_to_an_idle_worker() {
    for target in targets() {
        let store = target.open();
        let q = store.queue(&fresh("prefetch-ttl")).unwrap();
        let first = q.enqueue(&EnqueueOpts::new(), &json!(1)).unwrap();
        let second = q.enqueue(&EnqueueOpts::new(), &json!(2)).unwrap();
        let stop = Stop::new();
        let busy_ran = Mutex::new(vec![]);
        let idle_got = Mutex::new(vec![]);
        std::thread::scope(|s| {
            s.spawn(|| {
                Worker::new(store.queue(q.name()).unwrap(), "busy")
                    .prefetch(1)
                    .prefetch_ttl(ms(300))
                    .run(&stop, |job| {
                        busy_ran.lock().unwrap().push(job.id);
                        // Busy for longer than the time to live.
                        let until = Instant::now() + Duration::from_secs(20);
                        while !stop.is_stopped() && Instant::now() < until {
                            std::thread::sleep(ms(20));
                        }
                        Ok(())
                    })
                    .unwrap()
            });
            // The idle worker comes once the busy one holds both.
            let until = Instant::now() + Duration::from_secs(20);
            while q.stats().unwrap()["running"] != json!(2) && Instant::now() < until {
                std::thread::sleep(ms(20));
            }
            let until = Instant::now() + Duration::from_secs(20);
            while idle_got.lock().unwrap().is_empty() && Instant::now() < until {
                for job in q.claim_wait("idle", 1, ms(200)).unwrap() {
                    idle_got.lock().unwrap().push((job.id, job.attempts));
                    assert!(q.ack(job.id, "idle").unwrap());
                }
            }
            stop.stop();
        });
        assert_eq!(
            *busy_ran.lock().unwrap(),
            vec![first],
            "[{}]",
            target.name()
        );
        assert_eq!(
            *idle_got.lock().unwrap(),
            vec![(second, 1)],
            "[{}]",
            target.name()
        );
    }
}

/// The pool's size is a setting (issue 64 item 10, contract v1.3 §P): zero
/// is refused, and a worker of concurrency 8 drains its queue on a pool of
/// one connection, its handlers running side by side, the server never
/// seeing more than that one connection from the pool (the listener has
/// its own name).
#[test]
fn a_worker_of_any_concurrency_works_on_a_pool_of_one() {
    for target in targets() {
        let Target::Postgres(pg) = &target else {
            continue;
        };
        if pg.pooled() {
            continue; // PgBouncer names its own server connections
        }
        let app = fresh("pool-of-one").replace('-', "_");
        let named = |app: &str| {
            if pg.direct.contains("://") {
                let sep = if pg.direct.contains('?') { '&' } else { '?' };
                format!("{}{sep}application_name={app}", pg.direct)
            } else {
                format!("{} application_name={app}", pg.direct)
            }
        };
        // The wake-up listener, a connection of its own, named apart.
        let (url, listener) = (named(&app), named(&format!("{app}_listener")));
        let refused = alkstore::PgStore::builder(&url).pool_size(0).connect();
        assert!(
            matches!(refused, Err(alkstore::Error::InvalidArgument(_))),
            "{:?}",
            refused.err()
        );
        let store: alkstore::Store = alkstore::PgStore::builder(&url)
            .pool_size(1)
            .listener(&listener)
            .connect()
            .unwrap()
            .into();
        let q = store.queue(&fresh("pool-of-one")).unwrap();
        const JOBS: usize = 200;
        for i in 0..JOBS {
            q.enqueue(&EnqueueOpts::new(), &json!(i)).unwrap();
        }
        let stop = Stop::new();
        let (done, running, most_running) = (
            AtomicUsize::new(0),
            AtomicUsize::new(0),
            AtomicUsize::new(0),
        );
        let most_connections = AtomicUsize::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                let mut watcher = postgres::Client::connect(&pg.direct, postgres::NoTls).unwrap();
                while !stop.is_stopped() {
                    let n: i64 = watcher
                        .query_one(
                            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                            &[&app],
                        )
                        .unwrap()
                        .get(0);
                    most_connections.fetch_max(n as usize, Ordering::SeqCst);
                    std::thread::sleep(ms(5));
                }
            });
            Worker::new(store.queue(q.name()).unwrap(), "pool-of-one")
                .concurrency(8)
                .run(&stop, |_job| {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most_running.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(ms(20));
                    running.fetch_sub(1, Ordering::SeqCst);
                    if done.fetch_add(1, Ordering::SeqCst) + 1 == JOBS {
                        stop.stop();
                    }
                    Ok(())
                })
                .unwrap();
        });
        assert_eq!(done.load(Ordering::SeqCst), JOBS, "[{}]", target.name());
        let stats = q.stats().unwrap();
        assert_eq!(stats["pending"], 0, "{stats}");
        assert_eq!(stats["running"], 0, "{stats}");
        assert!(
            most_running.load(Ordering::SeqCst) >= 4,
            "handlers ran side by side on one connection: {}",
            most_running.load(Ordering::SeqCst)
        );
        assert_eq!(
            most_connections.load(Ordering::SeqCst),
            1,
            "[{}]",
            target.name()
        );
    }
}

/// By default the local queue holds as many jobs as the worker has
/// handlers (contract v1.3 §P): with fast jobs, a worker of concurrency 2
/// holds at most 4 claims, and does prefetch (holds more than its 2
/// handlers) at some point. (A pace-sized default held hundreds.)
#[test]
fn the_default_prefetch_is_the_concurrency() {
    for target in targets() {
        let store = target.open();
        let q = store.queue(&fresh("prefetch-default")).unwrap();
        let payloads: Vec<_> = (0..400).map(|i| json!(i)).collect();
        q.enqueue_batch(&EnqueueOpts::new(), &payloads).unwrap();
        let (stop, done, most) = (Stop::new(), AtomicUsize::new(0), AtomicUsize::new(0));
        Worker::new(store.queue(q.name()).unwrap(), "default")
            .concurrency(2)
            .flush_window(no_flush())
            .run(&stop, |_job| {
                let held = q.stats().unwrap()["running"].as_u64().unwrap() as usize;
                most.fetch_max(held, Ordering::SeqCst);
                if done.fetch_add(1, Ordering::SeqCst) + 1 == 400 {
                    stop.stop();
                }
                Ok(())
            })
            .unwrap();
        let most = most.load(Ordering::SeqCst);
        assert!(
            (3..=4).contains(&most),
            "[{}] at most {most} claimed at once by a worker of concurrency 2",
            target.name()
        );
    }
}

/// `prefetch_by_pace` follows the handlers' pace: fast jobs are claimed
/// far beyond the concurrency (at least ten times it: how far follows the
/// machine's speed, and CI's loaded cores ack a few hundred a second), slow ones
/// never beyond twice the concurrency, so that a worker does not sit on
/// jobs an idle worker elsewhere could run. (Slow: 200 ms, where the pace
/// asks for half the concurrency. At 50 ms it asked for exactly twice it,
/// and a burst of finishes measured on a loaded machine held 5.)
#[test]
fn prefetch_by_pace_follows_the_handlers_pace() {
    for target in targets() {
        let store = target.open();
        for (jobs, handler_ms, most_allowed, least_expected) in
            [(4000usize, 0u64, usize::MAX, 10usize), (16, 200, 4, 1)]
        {
            let q = store.queue(&fresh("pace")).unwrap();
            let payloads: Vec<_> = (0..jobs).map(|i| json!(i)).collect();
            for chunk in payloads.chunks(1000) {
                q.enqueue_batch(&EnqueueOpts::new(), chunk).unwrap();
            }
            let (stop, done, most) = (Stop::new(), AtomicUsize::new(0), AtomicUsize::new(0));
            let began = std::time::Instant::now();
            // Each job acked as its handler returns: the claims counted
            // running are those held, waiting or running.
            Worker::new(store.queue(q.name()).unwrap(), "pace")
                .prefetch_by_pace()
                .concurrency(if handler_ms == 0 { 1 } else { 2 })
                .flush_window(no_flush())
                .run(&stop, |_job| {
                    let n = done.fetch_add(1, Ordering::SeqCst) + 1;
                    if n % 50 == 0 || handler_ms > 0 {
                        let held = q.stats().unwrap()["running"].as_u64().unwrap() as usize;
                        most.fetch_max(held, Ordering::SeqCst);
                    }
                    std::thread::sleep(ms(handler_ms));
                    if n == jobs {
                        stop.stop();
                    }
                    Ok(())
                })
                .unwrap();
            let most = most.load(Ordering::SeqCst);
            assert!(
                most <= most_allowed && most >= least_expected,
                "[{}] {jobs} jobs of {handler_ms} ms: at most {most} claimed at once, at {:.0} jobs/s",
                target.name(),
                jobs as f64 / began.elapsed().as_secs_f64()
            );
        }
    }
}
