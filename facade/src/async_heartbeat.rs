//! The async worker's heartbeats: one task per handler slot for the whole
//! run, that extends the claim of the slot's job every third of its
//! visibility timeout while it runs. A job starting tells it nothing unless
//! it must wake sooner than it planned to (it sleeps until the due time of
//! the job it last saw, and the next job's is later), so a run of short
//! jobs costs it no wake-up at all, where a task spawned and aborted per
//! job cost two.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// The slot's job, as the heartbeat task reads it.
#[derive(Default)]
struct State {
    /// The job in hand: id, how often to extend its claim, when it started,
    /// and its number among the slot's jobs.
    job: Option<(i64, Duration, Instant, u64)>,
    jobs: u64,
    /// When the task will look next on its own (`None`: only when told).
    wakes_at: Option<Instant>,
}

/// One slot's heartbeat.
#[derive(Default)]
pub(crate) struct AsyncHeartbeat {
    state: Mutex<State>,
    told: Notify,
}

impl AsyncHeartbeat {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Job `id` starts: its claim is extended every `every` until
    /// [`end`](Self::end).
    pub(crate) fn start(&self, id: i64, every: Duration) {
        let now = Instant::now();
        let mut s = self.lock();
        s.jobs += 1;
        s.job = Some((id, every, now, s.jobs));
        let sooner = s.wakes_at.is_none_or(|at| now + every < at);
        drop(s);
        if sooner {
            self.told.notify_one();
        }
    }

    /// The job in hand ended (the task finds it gone when it looks).
    pub(crate) fn end(&self) {
        self.lock().job = None;
    }

    /// The task's loop: `extend(id)` each time the job in hand has run
    /// for another `every`. Runs until aborted.
    pub(crate) async fn run<F, Fut>(self: Arc<Self>, extend: F)
    where
        F: Fn(i64) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let mut last: Option<(u64, Instant)> = None; // the last extension
        loop {
            let next = {
                let mut s = self.lock();
                match s.job {
                    None => {
                        s.wakes_at = None;
                        None
                    }
                    Some((id, every, started, n)) => {
                        let due = match last {
                            Some((m, at)) if m == n => at + every,
                            _ => started + every,
                        };
                        s.wakes_at = Some(due);
                        Some((id, due, n))
                    }
                }
            };
            let Some((id, due, n)) = next else {
                self.told.notified().await;
                continue;
            };
            tokio::select! {
                _ = tokio::time::sleep_until(due) => {}
                _ = self.told.notified() => continue,
            }
            let still = self.lock().job.is_some_and(|j| j.3 == n);
            if still {
                extend(id).await;
                last = Some((n, Instant::now()));
            }
        }
    }
}
