//! The messages an outbox route has claimed ahead of its window, and the
//! thread that claims them: claims overlap deliveries, so the window is
//! never left idle while a claim of hundreds commits.

use crate::route::{Ctx, DbState, IDLE_WAIT};
use alkstore::Job;
use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A delivery that may take longer than this extends its claims first
/// (the outbox holds claims 60 s).
pub const EXTEND_ABOVE: Duration = Duration::from_secs(30);
/// After a claim found nothing while messages were in flight, the claimer
/// waits this long before it looks again (an idle route waits on the
/// outbox's wake-ups instead).
const DRY_PAUSE: Duration = Duration::from_millis(50);

/// The claimed messages not yet started, shared by the window and the
/// claimer.
#[derive(Default)]
pub struct Ahead {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// Each with its payload's text and when it was claimed.
    jobs: VecDeque<(Job, String, Instant)>,
    /// How many messages the claimer keeps held…
    target: usize,
    /// …counting those in flight too (a probe, a slow sink), or not.
    with_in_flight: bool,
    in_flight: usize,
    /// The last claim found nothing.
    dry: bool,
    closed: bool,
}

impl Ahead {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What the claimer aims at: `target` messages held, counting the
    /// `in_flight` ones when `with_in_flight`.
    pub fn aim(&self, target: usize, with_in_flight: bool, in_flight: usize) {
        let mut st = self.lock();
        let changed =
            st.target != target || st.with_in_flight != with_in_flight || st.in_flight != in_flight;
        st.target = target;
        st.with_in_flight = with_in_flight;
        st.in_flight = in_flight;
        if changed {
            self.changed.notify_all();
        }
    }

    /// The next message to start, with its payload's text.
    pub fn pop(&self) -> Option<(Job, String)> {
        let job = self.lock().jobs.pop_front().map(|(j, body, _)| (j, body));
        if job.is_some() {
            self.changed.notify_all();
        }
        job
    }

    /// Every message held, taken out (to give back).
    pub fn take_all(&self) -> Vec<i64> {
        let ids = self.lock().jobs.drain(..).map(|(j, _, _)| j.id).collect();
        self.changed.notify_all();
        ids
    }

    /// The messages claimed longer than `ttl` ago, taken out.
    pub fn take_stale(&self, ttl: Duration) -> Vec<i64> {
        let mut st = self.lock();
        let n = st
            .jobs
            .iter()
            .take_while(|(_, _, at)| at.elapsed() > ttl)
            .count();
        st.jobs.drain(..n).map(|(j, _, _)| j.id).collect()
    }

    /// Nothing held and the last claim found nothing.
    pub fn starved(&self) -> bool {
        let st = self.lock();
        st.jobs.is_empty() && st.dry
    }

    /// Waits up to `timeout` for a message to be held.
    pub fn wait_for_jobs(&self, timeout: Duration) {
        let st = self.lock();
        if st.jobs.is_empty() && !st.closed {
            let _ = self.changed.wait_timeout(st, timeout);
        }
    }

    /// Ends the claimer; returns what is still held (to give back).
    pub fn close(&self) -> Vec<i64> {
        self.lock().closed = true;
        self.take_all()
    }

    /// The claimer: claims whenever what is held ran down to half the
    /// target, until [`close`](Ahead::close) or the stop flag.
    pub fn claim(&self, ctx: &Ctx<'_>, ob: &alkstore::Outbox) {
        let worker = ctx.route.name.as_str();
        let mut db = DbState::default();
        loop {
            let (want, idle) = {
                let mut st = self.lock();
                loop {
                    if st.closed || ctx.stop.is_stopped() {
                        return;
                    }
                    let held = st.jobs.len() + if st.with_in_flight { st.in_flight } else { 0 };
                    if held <= st.target / 2 && held < st.target {
                        break (st.target - held, st.jobs.is_empty() && st.in_flight == 0);
                    }
                    st = self
                        .changed
                        .wait_timeout(st, Duration::from_millis(100))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            };
            let claimed = if idle {
                ob.claim_verbatim_wait(worker, want as i64, IDLE_WAIT)
            } else {
                ob.claim_verbatim(worker, want as i64)
            };
            let jobs = match claimed {
                Ok(jobs) => {
                    db.ok(ctx);
                    jobs
                }
                Err(e) => {
                    db.failed(ctx, &e);
                    continue;
                }
            };
            if ctx.route.timeout > EXTEND_ABOVE {
                for (j, _) in &jobs {
                    let extend = ctx.route.timeout + EXTEND_ABOVE;
                    let _ = ob.jobs().heartbeat(j.id, worker, Some(extend));
                }
            }
            let empty = jobs.is_empty();
            let mut st = self.lock();
            if st.closed {
                drop(st);
                let ids: Vec<i64> = jobs.iter().map(|(j, _)| j.id).collect();
                if !ids.is_empty() {
                    let _ = ob.jobs().release_batch(&ids, worker, None);
                }
                return;
            }
            st.dry = empty;
            let now = Instant::now();
            st.jobs
                .extend(jobs.into_iter().map(|(j, body)| (j, body, now)));
            self.changed.notify_all();
            drop(st);
            if empty && !idle {
                std::thread::sleep(DRY_PAUSE);
            }
        }
    }
}
