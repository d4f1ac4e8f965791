//! The blocking worker's heartbeats: one thread beside each handler thread
//! for the whole run, told of each job as it starts and ends, that extends
//! the job's claim every third of its visibility timeout while it runs. (A
//! thread per job, as before, cost a spawn per job and, joined at the job's
//! end, held every job until the thread's next 10 ms poll: a 1 ms handler
//! ran at about 95 jobs a second.)

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// What the heartbeat thread is told.
#[derive(Default)]
struct Beat {
    /// The job in hand and how often to extend its claim.
    job: Option<(i64, Duration)>,
    /// Moves at every change: a wait that sees it move starts over.
    generation: u64,
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

    fn change(&self, f: impl FnOnce(&mut Beat)) {
        let mut beat = self.lock();
        f(&mut beat);
        beat.generation += 1;
        drop(beat);
        self.changed.notify_all();
    }

    /// Runs `f` with job `id`'s claim extended every `every` while it runs.
    pub(crate) fn during<T>(&self, id: i64, every: Duration, f: impl FnOnce() -> T) -> T {
        self.change(|b| b.job = Some((id, every)));
        let out = f();
        self.change(|b| b.job = None);
        out
    }

    /// Ends [`run`](Self::run) when dropped.
    pub(crate) fn stopper(&self) -> Stopper<'_> {
        Stopper(self)
    }

    /// The heartbeat thread's loop, until a [`stopper`](Self::stopper) is
    /// dropped: `extend(id)`
    /// each time a job has run for another `every` (called without the
    /// lock, so a job ending meanwhile never waits for it).
    pub(crate) fn run(&self, extend: impl Fn(i64)) {
        let mut beat = self.lock();
        loop {
            if beat.stopped {
                return;
            }
            let Some((id, every)) = beat.job else {
                beat = self.changed.wait(beat).unwrap_or_else(|e| e.into_inner());
                continue;
            };
            let generation = beat.generation;
            let (again, waited) = self
                .changed
                .wait_timeout_while(beat, every, |b| b.generation == generation)
                .unwrap_or_else(|e| e.into_inner());
            beat = again;
            if waited.timed_out() {
                drop(beat);
                extend(id);
                beat = self.lock();
            }
        }
    }
}

/// Ends a [`Heartbeat`]'s run when dropped.
pub(crate) struct Stopper<'a>(&'a Heartbeat);

impl Drop for Stopper<'_> {
    fn drop(&mut self) {
        self.0.change(|b| b.stopped = true);
    }
}
