//! One sampler per server: it reads `alk_queues()` once a second while a
//! page listens for live counts (every 15 s otherwise, for the charts) and
//! hands the result to every listener and page, so that open tabs and page
//! loads cost the database nothing more. `alk_queues()` counts, so on a
//! database of millions of jobs one reading takes a while: the sampler then
//! waits [`BACKOFF`] times as long as the reading took before the next, so
//! that it never keeps the database busier than 1 part in `BACKOFF + 1`
//! (a change made from the dashboard brings the next reading forward to
//! one reading's time, once per change). It keeps the last hour of each queue's depth and
//! dead count, and counts completions as the fall of the total between
//! samples (plus what the retained completed count grew by).

use crate::db::Held;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::{watch, Notify};

/// How often the sampler reads while someone listens.
const LIVE_EVERY: Duration = Duration::from_secs(1);
/// How often it reads for the charts alone.
const IDLE_EVERY: Duration = Duration::from_secs(15);
/// At least this many times a reading's own duration between readings.
pub const BACKOFF: u32 = 10;
/// The least time between two readings.
const MIN_GAP: Duration = Duration::from_millis(200);
/// How long a page waits for the first reading.
const FIRST_READ: Duration = Duration::from_secs(30);
/// One chart point per this many seconds, an hour of them.
const POINT_S: u64 = 30;
const POINTS: usize = 120;

/// The sampler's last reading.
#[derive(Clone, Debug)]
pub enum Reading {
    /// None yet.
    None,
    /// `alk_queues()`.
    Queues(Value),
    /// The last reading failed.
    Failed,
}

/// One point of a queue's history.
#[derive(Clone, Copy, Debug, Default)]
pub struct Point {
    /// Seconds since the epoch.
    pub at: u64,
    /// pending + scheduled + running.
    pub depth: i64,
    /// Dead-lettered jobs.
    pub dead: i64,
    /// Jobs that left the queue since the previous point, other than by
    /// dying (acked, cancelled or purged) — an estimate from counts.
    pub done: i64,
}

/// The sampler's handle: the latest `alk_queues()` and the history.
pub struct Sampler {
    latest: watch::Receiver<Reading>,
    wake: Arc<Notify>,
    poke: Arc<Notify>,
    history: Arc<Mutex<HashMap<String, VecDeque<Point>>>>,
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn n(q: &Value, k: &str) -> i64 {
    q.get(k).and_then(Value::as_i64).unwrap_or(0)
}

impl Sampler {
    /// Starts the sampling task on the current tokio runtime.
    pub fn start(db: Arc<Held>) -> Sampler {
        let (tx, rx) = watch::channel(Reading::None);
        let history: Arc<Mutex<HashMap<String, VecDeque<Point>>>> = Arc::default();
        let hist = history.clone();
        let wake = Arc::new(Notify::new());
        let woken = wake.clone();
        let poke = Arc::new(Notify::new());
        let poked = poke.clone();
        tokio::spawn(async move {
            let mut last: HashMap<String, (i64, i64)> = HashMap::new();
            loop {
                let db2 = db.clone();
                let started = std::time::Instant::now();
                let read = tokio::task::spawn_blocking(move || {
                    db2.store().run(alkstore::call::queues().raw())
                })
                .await;
                let took = started.elapsed();
                match read {
                    Ok(Ok(queues)) => {
                        record(&hist, &mut last, &queues);
                        tx.send_replace(Reading::Queues(queues));
                    }
                    // Pages read for themselves (and show the error) until
                    // a reading succeeds.
                    _ => {
                        tx.send_replace(Reading::Failed);
                    }
                }
                if tx.is_closed() {
                    return; // the router is gone
                }
                // Listeners are the receivers beyond the sampler's own.
                // A new listener wakes it early, but never sooner than the
                // backoff allows; a change made here (a poke) sooner still,
                // after one reading's own time, so that the operator who
                // made it sees it (pokes come one per action).
                let from = tokio::time::Instant::now();
                let every = if tx.receiver_count() > 1 {
                    LIVE_EVERY
                } else {
                    IDLE_EVERY
                };
                let gap = (took * BACKOFF).max(MIN_GAP);
                let mut next = from + gap.max(every);
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep_until(next) => break,
                        _ = woken.notified() => next = next.min(from + gap),
                        _ = poked.notified() => next = next.min(from + took.max(MIN_GAP)),
                    }
                }
            }
        });
        Sampler {
            latest: rx,
            wake,
            poke,
            history,
        }
    }

    /// The latest reading of `alk_queues()`: what pages show (waits for
    /// the first; null if a reading failed or none came in 30 s).
    pub async fn latest(&self) -> Value {
        let mut rx = self.latest.clone();
        let _ =
            tokio::time::timeout(FIRST_READ, rx.wait_for(|r| !matches!(r, Reading::None))).await;
        let v = match &*rx.borrow() {
            Reading::Queues(v) => v.clone(),
            _ => Value::Null,
        };
        v
    }

    /// A listener that sees each new reading.
    pub fn subscribe(&self) -> watch::Receiver<Reading> {
        self.wake.notify_one();
        self.latest.clone()
    }

    /// Reads again now: after a change made here, listeners see it at once.
    pub fn poke(&self) {
        self.poke.notify_one();
    }

    /// A queue's points over the last hour, oldest first.
    pub fn history(&self, queue: &str) -> Vec<Point> {
        self.history
            .lock()
            .unwrap()
            .get(queue)
            .map(|h| h.iter().copied().collect())
            .unwrap_or_default()
    }
}

fn record(
    history: &Mutex<HashMap<String, VecDeque<Point>>>,
    last: &mut HashMap<String, (i64, i64)>,
    queues: &Value,
) {
    let at = now_s();
    let mut history = history.lock().unwrap();
    for q in queues.as_array().into_iter().flatten() {
        let Some(name) = q.get("queue").and_then(Value::as_str) else {
            continue;
        };
        let depth = n(q, "pending") + n(q, "scheduled") + n(q, "running");
        let (dead, completed) = (n(q, "dead"), n(q, "completed"));
        // Jobs only enter by enqueue, so a fall of depth beyond what died is
        // what finished; retained completions add what their count grew by.
        let done = match last.insert(name.to_string(), (depth + dead, completed)) {
            Some((before, completed_before)) => {
                (before - depth - dead).max(0) + (completed - completed_before).max(0)
            }
            None => 0,
        };
        let points = history.entry(name.to_string()).or_default();
        match points.back_mut() {
            Some(p) if at / POINT_S == p.at / POINT_S => {
                p.depth = depth;
                p.dead = dead;
                p.done += done;
            }
            _ => {
                points.push_back(Point {
                    at,
                    depth,
                    dead,
                    done,
                });
                while points.len() > POINTS {
                    points.pop_front();
                }
            }
        }
    }
}
