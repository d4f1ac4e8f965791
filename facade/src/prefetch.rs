//! A blocking worker's local queue (contract v1.3 §P): jobs claimed ahead
//! of free handlers, in one claim, handed to the handlers in claim order.
//! Every job in it stays claimed: one whose claim runs low before a handler
//! takes it gets a heartbeat, and one that no handler took within its time
//! to live is given back (`alk_release_batch`), so that a busy worker does
//! not sit on work an idle one could run. A stopping worker gives back what
//! it holds here.

use crate::types::Job;
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A job waiting for a handler.
struct Waiting {
    job: Job,
    /// Given back if no handler took it by then.
    give_back_at: Instant,
    /// When its claim next needs extending, and how often.
    beat_at: Instant,
    beat_every: Duration,
}

#[derive(Default)]
struct State {
    waiting: VecDeque<Waiting>,
    /// Jobs taken by handlers and not yet done.
    running: usize,
    /// No more jobs are handed out.
    closed: bool,
}

/// The local queue shared by a worker's claimer and its handlers.
#[derive(Default)]
pub(crate) struct LocalQueue {
    state: Mutex<State>,
    changed: Condvar,
}

/// How long a handler waits at a time before looking at the stop flag.
const TAKE_WAIT: Duration = Duration::from_millis(50);

impl LocalQueue {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How many more jobs fit beside those waiting and running, when at
    /// most `capacity` may be held; waits up to `timeout` for room.
    pub(crate) fn room(&self, capacity: usize, timeout: Duration) -> usize {
        let free = |s: &State| capacity.saturating_sub(s.waiting.len() + s.running);
        let state = self.lock();
        let (state, _) = self
            .changed
            .wait_timeout_while(state, timeout, |s| free(s) == 0 && !s.closed)
            .unwrap_or_else(|e| e.into_inner());
        free(&state)
    }

    /// Adds claimed jobs. Each is given back after `ttl` if no handler took
    /// it (default: half the time its claim had left, so that it never
    /// needs a heartbeat); meanwhile a third of that time between heartbeats
    /// keeps it claimed.
    pub(crate) fn push(&self, jobs: Vec<Job>, ttl: Option<Duration>) {
        if jobs.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut state = self.lock();
        for job in jobs {
            let left = crate::claimant::claim_left(&job);
            let ttl = ttl.unwrap_or(left / 2);
            state.waiting.push_back(Waiting {
                give_back_at: now + ttl,
                beat_every: (left / 3).max(Duration::from_millis(50)),
                beat_at: now + (left / 3).max(Duration::from_millis(50)),
                job,
            });
        }
        drop(state);
        self.changed.notify_all();
    }

    /// The next job for a handler, counted as running until [`done`](Self::done);
    /// `None` once `stopped()` says so or the queue is closed.
    pub(crate) fn take(&self, stopped: impl Fn() -> bool) -> Option<Job> {
        let mut state = self.lock();
        loop {
            if state.closed || stopped() {
                return None;
            }
            if let Some(w) = state.waiting.pop_front() {
                state.running += 1;
                return Some(w.job);
            }
            state = self
                .changed
                .wait_timeout(state, TAKE_WAIT)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// A handler is done with the job it took: room for another claim.
    pub(crate) fn done(&self) {
        self.lock().running -= 1;
        self.changed.notify_all();
    }

    /// Removes the waiting jobs whose time to live is up: to give back.
    pub(crate) fn expired(&self) -> Vec<i64> {
        let now = Instant::now();
        let mut state = self.lock();
        let mut out = Vec::new();
        state.waiting.retain(|w| {
            let keep = w.give_back_at > now;
            if !keep {
                out.push(w.job.id);
            }
            keep
        });
        out
    }

    /// The waiting jobs whose claims need extending now (each marked for
    /// its next beat).
    pub(crate) fn due_beats(&self) -> Vec<i64> {
        let now = Instant::now();
        let mut state = self.lock();
        let mut out = Vec::new();
        for w in state.waiting.iter_mut() {
            if w.beat_at <= now {
                w.beat_at = now + w.beat_every;
                out.push(w.job.id);
            }
        }
        out
    }

    /// No more jobs for the handlers: returns those still waiting, to give
    /// back.
    pub(crate) fn close(&self) -> Vec<i64> {
        let mut state = self.lock();
        state.closed = true;
        let out = state.waiting.drain(..).map(|w| w.job.id).collect();
        drop(state);
        self.changed.notify_all();
        out
    }
}
