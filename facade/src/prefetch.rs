//! A blocking worker's local queue (contract v1.3 §P): jobs claimed ahead
//! of free handlers, in one claim, handed to the handlers in claim order.
//! Every job in it stays claimed: a keeper gives back (`alk_release_batch`)
//! each job no handler took within its time to live — by default half its
//! claim's time, so that it never needs a heartbeat — and keeps claimed,
//! with heartbeats, those allowed to wait longer. A stopping worker gives
//! back what is left here. Ids are held once: a job this worker still runs
//! or holds is never queued again when a claim of its own returns it.

use crate::types::Job;
use std::collections::{HashSet, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The shortest time to live: a shorter one would give jobs back and claim
/// them again in a loop.
const MIN_TTL: Duration = Duration::from_millis(100);
/// The shortest interval between heartbeats.
const MIN_BEAT: Duration = Duration::from_millis(50);
/// How long a handler waits at a time before looking at the stop flag.
#[cfg(feature = "blocking")]
const TAKE_WAIT: Duration = Duration::from_millis(50);

/// A job waiting for a handler.
struct Waiting {
    job: Job,
    /// How long a claim (or a heartbeat) holds it: its claim's time left
    /// when it came.
    lease: Duration,
    /// Until when its claim holds, as far as this worker knows.
    claim_until: Instant,
    /// Given back if no handler took it by then.
    give_back_at: Instant,
    ttl: Duration,
    /// When its claim next needs extending: only if it may wait longer than
    /// a third of its lease.
    beat_at: Option<Instant>,
}

#[derive(Default)]
struct State {
    waiting: VecDeque<Waiting>,
    /// Ids waiting or running.
    held: HashSet<i64>,
    /// Jobs taken by handlers and not yet done.
    running: usize,
    /// Jobs handlers finished, ever (for [`Sizer`]).
    finished: u64,
    /// No more jobs are handed out.
    closed: bool,
    /// After a give-back, claims are for free handlers only until then: the
    /// jobs given back are for idle workers elsewhere, not to be claimed
    /// again here at once.
    prefetch_paused_until: Option<Instant>,
    /// What the claimer waits for in [`LocalQueue::room`]: its capacity and
    /// batch (a handler done wakes it only when that many fit).
    claimer_waits: Option<(usize, usize)>,
}

impl State {
    /// Whether the claimer, waiting for room for `batch` of `capacity`
    /// jobs, may go on: that much room, or any room once no job waits.
    fn room_for(&self, capacity: usize, batch: usize) -> bool {
        let free = capacity.saturating_sub(self.waiting.len() + self.running);
        free >= batch.max(1) || (free > 0 && self.waiting.is_empty())
    }
}

/// The local queue shared by a worker's claimer, keeper and handlers.
#[derive(Default)]
pub(crate) struct LocalQueue {
    state: Mutex<State>,
    changed: Condvar,
}

impl LocalQueue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many jobs may be held at once: the handlers, plus the prefetch
    /// unless a give-back paused it.
    pub(crate) fn capacity(&self, concurrency: usize, prefetch: usize) -> usize {
        let paused = self
            .lock()
            .prefetch_paused_until
            .is_some_and(|until| Instant::now() < until);
        if paused {
            concurrency
        } else {
            concurrency + prefetch
        }
    }

    /// How many more jobs fit beside those waiting and running, when at
    /// most `capacity` may be held; waits up to `timeout` for room for
    /// `batch` jobs, or for any room once no job waits (a handler is about
    /// to go idle). (Claiming as soon as one job's room freed, a claimer
    /// kept up with its handlers one job a claim: a claim's cost a job.)
    pub(crate) fn room(&self, capacity: usize, batch: usize, timeout: Duration) -> usize {
        let mut state = self.lock();
        state.claimer_waits = Some((capacity, batch));
        let (mut state, _) = self
            .changed
            .wait_timeout_while(state, timeout, |s| {
                !s.closed && !s.room_for(capacity, batch)
            })
            .unwrap_or_else(|e| e.into_inner());
        state.claimer_waits = None;
        capacity.saturating_sub(state.waiting.len() + state.running)
    }

    /// Adds claimed jobs (but those already held here). Each is given back
    /// after `ttl` if no handler took it (default: half the time its claim
    /// had left). Returns the ids of jobs not taken because the queue was
    /// closed meanwhile (a claim in flight at stop): the caller gives them
    /// back. `skew_ms`: the database's clock minus the host's, which their
    /// claims' expiries are read against.
    #[must_use = "jobs refused by a closed queue must be given back"]
    pub(crate) fn push(&self, jobs: Vec<Job>, ttl: Option<Duration>, skew_ms: i64) -> Vec<i64> {
        if jobs.is_empty() {
            return Vec::new();
        }
        let now = Instant::now();
        let mut state = self.lock();
        if state.closed {
            return jobs.iter().map(|j| j.id).collect();
        }
        for job in jobs {
            if !state.held.insert(job.id) {
                continue; // re-claimed by this worker while it held it
            }
            let lease = crate::claimant::claim_left(&job, skew_ms).max(MIN_BEAT);
            let ttl = ttl.unwrap_or(lease / 2).max(MIN_TTL);
            let far = now + Duration::from_secs(365 * 24 * 3600);
            state.waiting.push_back(Waiting {
                give_back_at: now.checked_add(ttl).unwrap_or(far),
                beat_at: (ttl > lease / 3).then(|| now + (lease / 3).max(MIN_BEAT)),
                claim_until: now + lease,
                lease,
                ttl,
                job,
            });
        }
        drop(state);
        self.changed.notify_all();
        Vec::new()
    }

    /// The next job for a handler, counted as running until
    /// [`done`](Self::done), with how often to extend its claim while it
    /// runs; `None` once `stopped()` says so or the queue is closed. A job
    /// whose claim lapsed while it waited is dropped, not run: another
    /// worker may hold it now.
    #[cfg(feature = "blocking")]
    pub(crate) fn take(&self, stopped: impl Fn() -> bool) -> Option<(Job, Duration)> {
        let mut state = self.lock();
        loop {
            if state.closed || stopped() {
                return None;
            }
            if let Some(next) = self.next(&mut state) {
                return Some(next);
            }
            state = self
                .changed
                .wait_timeout(state, TAKE_WAIT)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// [`take`](Self::take) without waiting: `None` when no job waits (or
    /// the queue is closed).
    #[cfg(any(
        feature = "sqlx-postgres",
        feature = "sqlx-sqlite",
        feature = "tokio-postgres"
    ))]
    pub(crate) fn try_take(&self) -> Option<(Job, Duration)> {
        let mut state = self.lock();
        if state.closed {
            return None;
        }
        self.next(&mut state)
    }

    fn next(&self, state: &mut State) -> Option<(Job, Duration)> {
        while let Some(w) = state.waiting.pop_front() {
            let now = Instant::now();
            if w.claim_until <= now {
                state.held.remove(&w.job.id);
                tracing::warn!(job.id = w.job.id,
                               "alkstore: a prefetched job's claim lapsed before a handler took it; left to whoever claims it");
                self.changed.notify_all();
                continue;
            }
            state.running += 1;
            // The last waiting job taken: a claimer waiting for more room
            // than there is may go on now (handlers would idle otherwise).
            if state.waiting.is_empty()
                && state
                    .claimer_waits
                    .is_some_and(|(capacity, batch)| state.room_for(capacity, batch))
            {
                self.changed.notify_all();
            }
            let left = w.claim_until - now;
            let every = (w.lease / 3).min(left / 2).max(MIN_BEAT);
            return Some((w.job, every));
        }
        None
    }

    /// A handler is done with job `id`: room for another claim.
    pub(crate) fn done(&self, id: i64) {
        let mut state = self.lock();
        state.running -= 1;
        state.finished += 1;
        state.held.remove(&id);
        // Only the claimer waits for this, and only for enough room (a
        // wake-up at every job cost a thread switch a job).
        let wake = state
            .claimer_waits
            .is_some_and(|(capacity, batch)| state.room_for(capacity, batch));
        drop(state);
        if wake {
            self.changed.notify_all();
        }
    }

    /// Removes the waiting jobs whose time to live is up, to give back,
    /// and pauses the prefetch for as long as they were allowed to wait.
    pub(crate) fn expired(&self) -> Vec<i64> {
        let now = Instant::now();
        let mut state = self.lock();
        let mut out = Vec::new();
        let mut pause = None::<Duration>;
        state.waiting.retain(|w| {
            let keep = w.give_back_at > now;
            if !keep {
                out.push(w.job.id);
                pause = Some(pause.map_or(w.ttl, |p| p.max(w.ttl)));
            }
            keep
        });
        for id in &out {
            state.held.remove(id);
        }
        if let Some(pause) = pause {
            state.prefetch_paused_until = now.checked_add(pause);
        }
        drop(state);
        if !out.is_empty() {
            self.changed.notify_all();
        }
        out
    }

    /// The waiting jobs whose claims need extending now (each marked for
    /// its next beat).
    pub(crate) fn due_beats(&self) -> Vec<i64> {
        let now = Instant::now();
        let mut state = self.lock();
        let mut out = Vec::new();
        for w in state.waiting.iter_mut() {
            if let Some(at) = w.beat_at.filter(|at| *at <= now) {
                w.beat_at = Some(at.max(now) + (w.lease / 3).max(MIN_BEAT));
                out.push(w.job.id);
            }
        }
        out
    }

    /// What a heartbeat of waiting job `id` found: its claim extended, or
    /// gone (cancelled, deleted, its claim lapsed): then it is dropped.
    pub(crate) fn beat(&self, id: i64, held: bool) {
        let now = Instant::now();
        let mut state = self.lock();
        if held {
            if let Some(w) = state.waiting.iter_mut().find(|w| w.job.id == id) {
                w.claim_until = now + w.lease;
            }
        } else if let Some(at) = state.waiting.iter().position(|w| w.job.id == id) {
            state.waiting.remove(at);
            state.held.remove(&id);
            drop(state);
            self.changed.notify_all();
        }
    }

    /// Whether [`close`](Self::close) was called.
    #[cfg(feature = "blocking")]
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Waits up to `timeout`, or until the queue is closed.
    #[cfg(feature = "blocking")]
    pub(crate) fn nap(&self, timeout: Duration) {
        let state = self.lock();
        let _ = self
            .changed
            .wait_timeout_while(state, timeout, |s| !s.closed)
            .unwrap_or_else(|e| e.into_inner());
    }

    /// No more jobs for the handlers: returns those still waiting, to give
    /// back.
    pub(crate) fn close(&self) -> Vec<i64> {
        let mut state = self.lock();
        state.closed = true;
        let out: Vec<i64> = state.waiting.drain(..).map(|w| w.job.id).collect();
        for id in &out {
            state.held.remove(id);
        }
        drop(state);
        self.changed.notify_all();
        out
    }
}

/// How much of the handlers' work the default prefetch holds: enough for
/// fast jobs to be claimed hundreds at a time, and for slow ones no more
/// than the concurrency, so that a worker does not sit on jobs an idle
/// worker elsewhere could run.
const HORIZON: Duration = Duration::from_millis(100);
/// How often the handlers' pace is measured.
const MEASURE_EVERY: Duration = Duration::from_millis(100);
/// In the first [`MEASURE_EVERY`], the pace is measured whenever this many
/// jobs finished since the last measure, at least [`FIRST_MEASURE_AFTER`]
/// after it.
const FIRST_MEASURE_JOBS: u64 = 64;
/// See [`FIRST_MEASURE_JOBS`].
const FIRST_MEASURE_AFTER: Duration = Duration::from_millis(5);

/// How a worker sizes its local queue of prefetched jobs (contract v1.3
/// §P).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Prefetch {
    /// As many as the worker's concurrency: the contract's default.
    Concurrency,
    /// As many as the user set.
    Fixed(usize),
    /// What the handlers finish in [`HORIZON`] at the pace measured as they
    /// run, between the concurrency and the most.
    Pace,
}

/// The prefetch a worker claims for: the one set (by default the
/// concurrency), or what its handlers finish in [`HORIZON`] at the pace
/// measured as they run (a moving average), at least the concurrency and
/// at most `max`.
pub(crate) struct Sizer {
    fixed: Option<usize>,
    floor: usize,
    max: usize,
    at: Instant,
    seen: u64,
    /// Jobs finished per second.
    pace: f64,
    /// Whether `pace` was measured yet.
    measured: bool,
    started: Instant,
}

impl Sizer {
    pub(crate) fn new(prefetch: Prefetch, concurrency: usize, max: usize) -> Sizer {
        Sizer {
            fixed: match prefetch {
                Prefetch::Concurrency => Some(concurrency.min(max)),
                Prefetch::Fixed(n) => Some(n.min(max)),
                Prefetch::Pace => None,
            },
            floor: concurrency.min(max),
            max,
            at: Instant::now(),
            seen: 0,
            pace: 0.0,
            measured: false,
            started: Instant::now(),
        }
    }

    /// The prefetch now.
    pub(crate) fn prefetch(&mut self, local: &LocalQueue) -> usize {
        if let Some(n) = self.fixed {
            return n;
        }
        let finished = local.lock().finished;
        if finished == 0 {
            // Nothing to measure yet: the clock starts at the first job
            // finished (a worker started idle measured a pace of 0).
            (self.at, self.started) = (Instant::now(), Instant::now());
            return self.floor;
        }
        let elapsed = self.at.elapsed();
        let done = finished - self.seen;
        // In the first 100 ms the pace is taken as soon as it shows, again
        // and again, each measure standing on its own: a worker started on
        // a backlog of fast jobs otherwise claimed one or two at a time for
        // its first 100 ms (a backlog of 20,000 no-op jobs on SQLite took
        // 0.2 s to drain, half of it so).
        let early = self.started.elapsed() < MEASURE_EVERY
            && done >= FIRST_MEASURE_JOBS
            && elapsed >= FIRST_MEASURE_AFTER;
        if elapsed >= MEASURE_EVERY || early {
            let pace = done as f64 / elapsed.as_secs_f64();
            self.pace = if self.measured && !early {
                (self.pace + pace) / 2.0
            } else {
                pace
            };
            self.measured = true;
            (self.at, self.seen) = (Instant::now(), finished);
        }
        // Never more than the handlers have finished so far: a few fast
        // jobs first do not make a worker take a thousand slow ones.
        let by_pace = ((self.pace * HORIZON.as_secs_f64()) as usize).min(finished as usize);
        by_pace.clamp(self.floor, self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker started on a backlog of fast jobs sizes its prefetch by
    /// their pace within milliseconds, not after the first 100 ms, and
    /// never above the jobs finished so far.
    #[test]
    fn the_first_pace_is_measured_as_soon_as_it_shows() {
        let local = LocalQueue::default();
        let mut sizer = Sizer::new(Prefetch::Pace, 1, MAX_TEST);
        assert_eq!(sizer.prefetch(&local), 1);
        std::thread::sleep(FIRST_MEASURE_AFTER);
        local.lock().finished += FIRST_MEASURE_JOBS;
        // 64 jobs in at least 5 ms: unless this thread slept 3 s since,
        // more than one job's worth in 100 ms, and at most the 64.
        let sized = sizer.prefetch(&local);
        assert!(
            (2..=FIRST_MEASURE_JOBS as usize).contains(&sized),
            "prefetch {sized} after {FIRST_MEASURE_JOBS} jobs"
        );
    }

    const MAX_TEST: usize = 1000;
}
