//! The blocking worker's heartbeats: one thread beside each handler thread
//! for the whole run, that extends the claim of the job in hand every third
//! of its visibility timeout while it runs. (A thread per job, as before,
//! cost a spawn per job and, joined at the job's end, held every job until
//! the thread's next 10 ms poll: a 1 ms handler ran at about 95 jobs a
//! second.) A job's start and end are written where the thread reads them
//! when it wakes, without waking it: it is woken only when it would wake
//! after the new job's first beat is due. (Woken at each start and end, it
//! cost two thread switches a job: no-op jobs on SQLite ran at a third of
//! the SQL's pace.)

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What the handler thread and the heartbeat thread share.
#[derive(Default)]
struct Beat {
    /// The job in hand, how often to extend its claim, and since when it
    /// has gone without (its start, then its last extension).
    job: Option<(i64, Duration, Instant)>,
    /// When the heartbeat thread wakes next (`None`: when told).
    wakes_at: Option<Instant>,
    stopped: bool,
}

/// One handler thread's heartbeat.
#[derive(Default)]
pub(crate) struct Heartbeat {
    beat: Mutex<Beat>,
    changed: Condvar,
}

impl Heartbeat {
    fn lock(&self) -> MutexGuard<'_, Beat> {
        self.beat.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` with job `id`'s claim extended every `every` while it runs.
    pub(crate) fn during<T>(&self, id: i64, every: Duration, f: impl FnOnce() -> T) -> T {
        let now = Instant::now();
        let mut beat = self.lock();
        beat.job = Some((id, every, now));
        // Asleep past the first beat's time (or until told): wake it.
        let late = beat.wakes_at.is_none_or(|at| at > now + every);
        drop(beat);
        if late {
            self.changed.notify_all();
        }
        let out = f();
        // Not woken: it finds the job gone when it wakes.
        self.lock().job = None;
        out
    }

    /// Ends [`run`](Self::run) when dropped.
    pub(crate) fn stopper(&self) -> Stopper<'_> {
        Stopper(self)
    }

    /// The heartbeat thread's loop, until a [`stopper`](Self::stopper) is
    /// dropped: `extend(id)` each time the job in hand has gone `every`
    /// without (called without the lock, so a job ending meanwhile never
    /// waits for it). Idle, it wakes every last `every` seen, so that a job
    /// starting with the same `every` need not wake it.
    pub(crate) fn run(&self, extend: impl Fn(i64)) {
        let mut beat = self.lock();
        let mut idle_every: Option<Duration> = None;
        loop {
            if beat.stopped {
                return;
            }
            let now = Instant::now();
            let wakes_at = match beat.job {
                Some((id, every, since)) if now >= since + every => {
                    beat.job = Some((id, every, now));
                    drop(beat);
                    extend(id);
                    beat = self.lock();
                    continue;
                }
                Some((_, every, since)) => {
                    idle_every = Some(every);
                    Some(since + every)
                }
                None => idle_every.map(|every| now + every),
            };
            beat.wakes_at = wakes_at;
            beat = match wakes_at {
                Some(at) => {
                    let wait = at.saturating_duration_since(now);
                    self.changed
                        .wait_timeout(beat, wait)
                        .unwrap_or_else(|e| e.into_inner())
                        .0
                }
                None => self.changed.wait(beat).unwrap_or_else(|e| e.into_inner()),
            };
        }
    }
}

/// Ends a [`Heartbeat`]'s run when dropped.
pub(crate) struct Stopper<'a>(&'a Heartbeat);

impl Drop for Stopper<'_> {
    fn drop(&mut self) {
        self.0.lock().stopped = true;
        self.0.changed.notify_all();
    }
}
