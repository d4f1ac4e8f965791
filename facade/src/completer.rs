//! A blocking worker's batched acks (contract v1.3 §P): handlers hand the
//! ids of jobs that succeeded to one completer, which acks them together
//! (`alk_ack_batch`, one transaction) once the flush window is up or enough
//! are waiting, whichever comes first. Until that commits the jobs stay
//! claimed: a worker killed meanwhile loses only those acks, and the jobs
//! run again (at least once, as always).

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long and how many acks wait to be flushed together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushWindow {
    /// The longest an ack waits for others (zero: each job is acked on its
    /// own as its handler returns, as before 0.4.0).
    pub wait: Duration,
    /// A flush as soon as this many acks wait.
    pub max_jobs: usize,
}

impl FlushWindow {
    /// The default: 10 ms or 100 jobs, whichever comes first.
    pub const DEFAULT: FlushWindow = FlushWindow {
        wait: Duration::from_millis(10),
        max_jobs: 100,
    };

    /// Whether acks are batched at all.
    pub(crate) fn batches(&self) -> bool {
        !self.wait.is_zero() && self.max_jobs > 1
    }
}

#[derive(Default)]
struct Pending {
    ids: Vec<i64>,
    /// When the oldest waiting ack came.
    since: Option<Instant>,
    /// The flush window's `max_jobs` (0 until [`Completer::run`] starts).
    max_jobs: usize,
    closed: bool,
}

/// The acks waiting for a flush.
#[derive(Default)]
pub(crate) struct Completer {
    pending: Mutex<Pending>,
    changed: Condvar,
}

impl Completer {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A job whose handler succeeded, to ack with the next flush.
    pub(crate) fn add(&self, id: i64) {
        let mut pending = self.lock();
        pending.ids.push(id);
        // Woken only where its wait changes: the first ack starts the window
        // (it waits up to 100 ms without one), and a full batch ends it. (A
        // wake-up at every ack cost a thread switch a job.)
        let first = pending.since.is_none();
        pending.since.get_or_insert_with(Instant::now);
        let full = pending.ids.len() >= pending.max_jobs;
        drop(pending);
        if first || full {
            self.changed.notify_all();
        }
    }

    /// Flushes nothing more after what waits now: [`run`](Self::run)
    /// flushes that and returns.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    /// The completer's loop, until [`close`](Self::close): each batch goes
    /// to `flush`, which acks it (and rides out an outage itself).
    pub(crate) fn run(&self, window: FlushWindow, flush: impl Fn(Vec<i64>)) {
        let mut pending = self.lock();
        pending.max_jobs = window.max_jobs;
        loop {
            let due = match pending.since {
                _ if pending.ids.len() >= window.max_jobs => true,
                Some(since) => since.elapsed() >= window.wait,
                None => false,
            };
            if due || (pending.closed && !pending.ids.is_empty()) {
                let batch = std::mem::take(&mut pending.ids);
                pending.since = None;
                drop(pending);
                flush(batch);
                pending = self.lock();
                continue;
            }
            if pending.closed {
                return;
            }
            let wait = pending.since.map_or(Duration::from_millis(100), |since| {
                window.wait.saturating_sub(since.elapsed())
            });
            pending = self
                .changed
                .wait_timeout(pending, wait)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}
