//! What both worker kinds ([`Worker`](crate::Worker), blocking, and
//! `AsyncWorker`) decide the same way: how a handled job is settled, when
//! the chores are due, and how long to wait out a database that went away.
//! Each runs the decisions with its own transport and its own way of
//! sleeping.

use crate::call::{self, Call};
use crate::error::{Error, Result};
use std::time::{Duration, Instant};

/// The most jobs a worker's local queue holds (contract v1.3 §P).
pub const MAX_PREFETCH: usize = 1000;

/// The most jobs one claim asks for (`alk_claim`'s own bound).
pub(crate) const MAX_CLAIM: usize = 1000;

/// How often a worker's keeper looks at its local queue.
pub(crate) const KEEP_EVERY: Duration = Duration::from_millis(100);

/// Tries of one batch of acks before each is tried on its own.
pub(crate) const FLUSH_TRIES: usize = 10;

/// Says that `n` acks were lost (their jobs run again when their claims
/// expire: at least once, never lost).
pub(crate) fn lost_acks(n: usize) {
    if n > 0 {
        tracing::warn!(
            jobs = n,
            "alkstore: acks lost; those jobs run again when their claims expire"
        );
    }
}

/// What a worker does next with a batch of acks (`alk_ack_batch`) that
/// failed: both worker kinds flush the same way, each with its own
/// transport and sleep.
pub(crate) enum FlushStep {
    /// The database is away: try the batch again after this pause.
    Pause(Duration),
    /// Away for [`FLUSH_TRIES`] tries, or the worker is stopping: the acks
    /// are lost (one at a time would only wait for it again, once per job).
    Lost,
    /// An error a wait cannot cure (a bad id, say): ack each on its own.
    OneByOne,
}

/// The tries of one batch of acks.
#[derive(Default)]
pub(crate) struct FlushTries {
    outage: Outage,
    tries: usize,
}

impl FlushTries {
    /// The batch acked `acked` of `sent` jobs: says so if some were no
    /// longer this worker's.
    pub(crate) fn acked(acked: i64, sent: usize) {
        if acked < sent as i64 {
            tracing::warn!(
                jobs = sent,
                acked,
                "alkstore: some jobs were no longer this worker's when their acks were sent"
            );
        }
    }

    /// The batch failed with `e`; `stopping`: the worker is on its way out.
    pub(crate) fn failed(&mut self, e: Error, stopping: bool) -> FlushStep {
        match self.outage.pause_after(e) {
            Ok(pause) => {
                self.tries += 1;
                if stopping || self.tries >= FLUSH_TRIES {
                    FlushStep::Lost
                } else {
                    FlushStep::Pause(pause)
                }
            }
            Err(_) => FlushStep::OneByOne,
        }
    }
}

/// Rows per `alk_prune` call: one short transaction each.
pub(crate) const PRUNE_BATCH: i64 = 1000;

/// How often a worker (blocking or async) sweeps its queue (`alk_sweep`)
/// unless told otherwise.
pub const DEFAULT_SWEEP_EVERY: Duration = Duration::from_secs(1);

/// What a handler asks of its worker when it returns without an error
/// ([`Worker::run_handled`](crate::Worker::run_handled),
/// [`AsyncWorker::run_handled`](crate::AsyncWorker::run_handled)).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Handled {
    /// Done: ack the job.
    Ack,
    /// Done: ack the job with a result, kept while the queue retains
    /// completed jobs.
    AckWith(serde_json::Value),
    /// Not now: give the job back to run again after this long, without
    /// spending an attempt or recording an error (`alk_release`, contract
    /// v1.3 §Q) — River's and Oban's "snooze". A job may snooze any number
    /// of times, also on a queue with `max_attempts` 1.
    Snooze(Duration),
}

/// The shortest interval of a worker's chores (ticking, pruning, sweeping):
/// a shorter one, `Duration::ZERO` included, is this. (Zero used to sweep
/// between every two claims; `None` is how to turn a chore off.)
pub const MIN_CHORE_EVERY: Duration = Duration::from_millis(100);

/// How a job ends once its handler is done.
pub(crate) enum Settlement {
    /// It succeeded: ack, keeping the result while the queue retains
    /// completed jobs.
    Ack(Option<serde_json::Value>),
    /// It failed (an error, a panic, a commit that did not land): retry
    /// with the stamped backoff, or dead when its attempts are used up.
    Retry(String),
    /// Give the claim back without spending an attempt (`alk_release`):
    /// the handler snoozed the job for this long, or (`None`: claimable at
    /// once) it was still running at the async worker's shutdown deadline.
    Release(Option<Duration>),
}

impl From<Handled> for Settlement {
    fn from(handled: Handled) -> Settlement {
        match handled {
            Handled::Ack => Settlement::Ack(None),
            Handled::AckWith(result) => Settlement::Ack(Some(result)),
            Handled::Snooze(delay) => Settlement::Release(Some(delay)),
        }
    }
}

impl Settlement {
    /// The call that settles `job_id` for `worker`. A settlement lost with
    /// the connection leaves the job claimed until its claim expires; then
    /// it runs again: at least once, never lost.
    pub(crate) fn call(self, job_id: i64, worker: &str) -> Result<Call<()>> {
        Ok(match self {
            Settlement::Ack(None) => call::ack(job_id, worker)?.discard(),
            Settlement::Ack(Some(result)) => {
                call::ack_with_result(job_id, worker, &result)?.discard()
            }
            Settlement::Retry(error) => call::retry(job_id, worker, &error, None)?.discard(),
            Settlement::Release(delay) => call::release(job_id, worker, delay)?.discard(),
        })
    }

    /// The handler's outcome this settles, for [`instead`](Self::instead):
    /// `None` for a retry.
    pub(crate) fn outcome(&self) -> Option<&'static str> {
        match self {
            Settlement::Retry(_) => None,
            Settlement::Ack(_) => Some("ack"),
            Settlement::Release(_) => Some("snooze"),
        }
    }

    /// What to settle instead when the settlement of `outcome` was refused
    /// as bad input (a contract error: a snooze longer than the contract
    /// allows, a result the database cannot keep): the job fails with that
    /// error, retried with the stamped backoff as after a handler's error,
    /// and the worker goes on. `None` for a retry (nothing left to fall
    /// back on) and for any other error (the database: a wait may cure it).
    pub(crate) fn instead(outcome: Option<&'static str>, refused: &Error) -> Option<Settlement> {
        let outcome = outcome?;
        refused.code()?;
        tracing::warn!(error = %refused, "alkstore: the handler's {outcome} was refused; the job will be retried");
        Some(Settlement::Retry(format!(
            "the handler's {outcome} was refused: {refused}"
        )))
    }
}

/// The periodic chores of a worker: ticking schedules, pruning, sweeping
/// its queue.
pub(crate) struct Chores {
    tick_every: Option<Duration>,
    prune_every: Option<Duration>,
    sweep: Option<(Duration, String)>,
    ticked_at: Option<Instant>,
    pruned_at: Option<Instant>,
    swept_at: Option<Instant>,
}

/// A chore that is due now.
pub(crate) enum Chore {
    /// One `alk_schedule_tick`.
    Tick(Call<i64>),
    /// One `alk_sweep` of the worker's queue: expired jobs dead-lettered,
    /// and jobs scheduled ahead that came due made pending (a bounded
    /// batch; claims take the rest meanwhile — contract v1.2 §H).
    Sweep(Call<i64>),
    /// `alk_prune` calls until one deletes fewer than [`PRUNE_BATCH`] rows
    /// (or the worker stops).
    Prune,
}

impl Chores {
    /// `sweep`: how often, and the queue (never an outbox's backing queue:
    /// not a name alk_sweep takes).
    pub(crate) fn new(
        tick_every: Option<Duration>,
        prune_every: Option<Duration>,
        sweep: Option<(Duration, String)>,
    ) -> Chores {
        let sweep = sweep
            .filter(|(_, q)| !q.starts_with(alkstore_core::names::OUTBOX_QUEUE_PREFIX))
            .map(|(every, q)| (every.max(MIN_CHORE_EVERY), q));
        Chores {
            tick_every: tick_every.map(|e| e.max(MIN_CHORE_EVERY)),
            prune_every: prune_every.map(|e| e.max(MIN_CHORE_EVERY)),
            sweep,
            ticked_at: None,
            pruned_at: None,
            swept_at: None,
        }
    }

    /// Whether no chore is ever due (every one turned off).
    pub(crate) fn none(&self) -> bool {
        self.tick_every.is_none() && self.prune_every.is_none() && self.sweep.is_none()
    }

    /// The chores due now, each marked done as it is handed out.
    pub(crate) fn due(&mut self) -> Vec<Chore> {
        let now = Instant::now();
        let due = |every: Option<Duration>, last: Option<Instant>| {
            every.is_some_and(|e| last.is_none_or(|at| now.duration_since(at) >= e))
        };
        let mut out = Vec::new();
        if due(self.tick_every, self.ticked_at) {
            self.ticked_at = Some(now);
            out.push(Chore::Tick(call::schedule_tick()));
        }
        if due(self.prune_every, self.pruned_at) {
            self.pruned_at = Some(now);
            out.push(Chore::Prune);
        }
        if let Some((every, queue)) = &self.sweep {
            if due(Some(*every), self.swept_at) {
                self.swept_at = Some(now);
                if let Ok(sweep) = call::sweep(Some(queue)) {
                    out.push(Chore::Sweep(sweep));
                }
            }
        }
        out
    }

    /// Before pruning: gives committed stream events their offsets
    /// (`alk_sequence(NULL)`, v1.2 §K), which retention counts from.
    pub(crate) fn sequence_call() -> Result<Call<i64>> {
        call::sequence(None)
    }

    /// One prune call of a batch.
    pub(crate) fn prune_call() -> Call<i64> {
        call::prune(PRUNE_BATCH)
    }
}

/// How a worker on a queue with limits (contract v1.2 §I) waits after a
/// claim that got nothing: until the queue's `next_slot_at` — when its
/// limits hold claims back — rather than claiming again at every poll. A
/// wake-up (an enqueue, a finish freeing a running slot) or stop ends the
/// nap sooner. Whether the queue has limits is read from its options once
/// every [`Pacing::RECHECK`], so a queue without them costs nothing more.
pub(crate) struct Pacing {
    queue: String,
    limited: Option<(bool, Instant)>,
    outbox: bool,
}

impl Pacing {
    /// How long a reading of the queue's options holds.
    pub(crate) const RECHECK: Duration = Duration::from_secs(10);
    /// The longest nap: limits may change, a slot may free unannounced.
    pub(crate) const MAX_NAP: Duration = Duration::from_secs(30);

    /// The pacing of a worker claiming from `queue`. An outbox's backing
    /// queue takes no options, so has no limits: never asked.
    pub(crate) fn new(queue: &str) -> Pacing {
        let outbox = queue.starts_with(alkstore_core::names::OUTBOX_QUEUE_PREFIX);
        Pacing {
            queue: queue.to_owned(),
            limited: None,
            outbox,
        }
    }

    /// The options call to make first, when the last reading is stale.
    pub(crate) fn opts_call(&self) -> Result<Option<Call<serde_json::Value>>> {
        match self.limited {
            _ if self.outbox => Ok(None),
            Some((_, at)) if at.elapsed() < Self::RECHECK => Ok(None),
            _ => call::queue_opts(&self.queue).map(Some),
        }
    }

    /// Takes in the queue's options: whether it has limits.
    pub(crate) fn saw_opts(&mut self, opts: &serde_json::Value) {
        let limited = ["max_running", "rate_max", "key_max_running", "key_rate_max"]
            .iter()
            .any(|k| !opts[*k].is_null());
        self.limited = Some((limited, Instant::now()));
    }

    /// The stats call to read `next_slot_at` from, if the queue has limits.
    pub(crate) fn stats_call(&self) -> Result<Option<Call<serde_json::Value>>> {
        match self.limited {
            Some((true, _)) => call::queue_stats(&self.queue).map(Some),
            _ => Ok(None),
        }
    }

    /// How long to nap given the queue's stats: until `next_slot_at` (at
    /// most [`Pacing::MAX_NAP`]), or `None` when a claim could take a job now.
    /// `skew_ms`: the database's clock minus the host's (`next_slot_at` is
    /// on the database's).
    pub(crate) fn nap(stats: &serde_json::Value, skew_ms: i64) -> Option<Duration> {
        let at = alkstore_core::time::parse_rfc3339_ms(stats["next_slot_at"].as_str()?)?;
        let left = at - crate::claimant::host_now_ms() - skew_ms;
        (left > 0).then(|| Duration::from_millis(left as u64).min(Self::MAX_NAP))
    }
}

/// Rides out the database going away (a restart, a failover): wait and try
/// again with a growing pause, up to a second. Errors that retrying cannot
/// cure ([`Error::is_transient`] false: a contract error, a decode error)
/// end the run.
#[derive(Default)]
pub(crate) struct Outage {
    pause: Option<Duration>,
}

impl Outage {
    /// How long to wait before trying again after `e`, or `e` itself when
    /// waiting cannot help. The first pause of an outage is logged.
    pub(crate) fn pause_after(&mut self, e: Error) -> Result<Duration> {
        if !e.is_transient() {
            return Err(e);
        }
        let pause = self.pause.map_or(Duration::from_millis(20), |p| {
            (p * 2).min(Duration::from_secs(1))
        });
        if self.pause.is_none() {
            tracing::warn!(error = %e, "alkstore: worker waiting for the database");
        }
        self.pause = Some(pause);
        Ok(pause)
    }

    /// A call went through: the next outage starts from the shortest pause.
    pub(crate) fn over(&mut self) {
        self.pause = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nap_lasts_until_next_slot_at_and_never_more_than_the_cap() {
        let at = |ms: i64| {
            serde_json::json!({"next_slot_at": alkstore_core::time::format_ms(
                alkstore_core::time::now_ms() + ms)})
        };
        let nap = Pacing::nap(&at(5_000), 0).unwrap();
        assert!(nap > Duration::from_millis(4_000) && nap <= Duration::from_millis(5_000));
        assert_eq!(Pacing::nap(&at(3_600_000), 0), Some(Pacing::MAX_NAP));
        assert_eq!(Pacing::nap(&at(-10), 0), None);
        // The database's clock 10 s ahead of the host's: that slot is past.
        assert_eq!(Pacing::nap(&at(5_000), 10_000), None);
        assert_eq!(
            Pacing::nap(&serde_json::json!({"next_slot_at": null}), 0),
            None
        );
        let mut p = Pacing::new("q");
        assert!(p.opts_call().unwrap().is_some(), "read once at first");
        p.saw_opts(&serde_json::json!({"max_running": null, "rate_max": 5}));
        assert!(p.opts_call().unwrap().is_none(), "then every RECHECK");
        assert!(p.stats_call().unwrap().is_some());
        p.saw_opts(&serde_json::json!({"max_running": null}));
        assert!(p.stats_call().unwrap().is_none(), "no limits: no stats");
        let o = Pacing::new("__alkstore_outbox:mail");
        assert!(
            o.opts_call().unwrap().is_none(),
            "an outbox's queue has no options"
        );
        assert!(o.stats_call().unwrap().is_none());
    }

    #[test]
    fn a_zero_interval_is_the_shortest_one_not_every_round() {
        let mut chores = Chores::new(
            Some(Duration::ZERO),
            Some(Duration::ZERO),
            Some((Duration::ZERO, "q".into())),
        );
        assert_eq!(chores.due().len(), 3, "each is due at first");
        assert_eq!(chores.due().len(), 0, "not again at once");
        std::thread::sleep(MIN_CHORE_EVERY);
        assert_eq!(chores.due().len(), 3);
    }

    #[test]
    fn outage_pauses_double_up_to_a_second_and_reset_when_over() {
        let down = || Error::engine("postgres", "57P01", "terminating connection");
        let mut o = Outage::default();
        let pauses: Vec<u128> = (0..8)
            .map(|_| o.pause_after(down()).unwrap().as_millis())
            .collect();
        assert_eq!(pauses, [20, 40, 80, 160, 320, 640, 1000, 1000]);
        o.over();
        assert_eq!(o.pause_after(down()).unwrap().as_millis(), 20);
        let contract = Error::InvalidName("empty".into());
        assert_eq!(o.pause_after(contract.clone()), Err(contract));
        let decode = Error::Decode("x".into());
        assert_eq!(o.pause_after(decode.clone()), Err(decode));
    }

    #[test]
    fn each_chore_is_due_once_per_interval_and_never_when_off() {
        let mut c = Chores::new(Some(Duration::from_secs(60)), None, None);
        let first = c.due();
        assert!(matches!(first.as_slice(), [Chore::Tick(_)]));
        assert!(c.due().is_empty());
        let sweep = Some((Duration::ZERO, "q".to_string()));
        let mut all = Chores::new(Some(Duration::ZERO), Some(Duration::ZERO), sweep);
        assert_eq!(all.due().len(), 3);
        std::thread::sleep(MIN_CHORE_EVERY); // zero is the shortest interval
        assert!(matches!(all.due().as_slice(), [_, _, Chore::Sweep(_)]));
        let outbox = Some((Duration::ZERO, "__alkstore_outbox:mail".to_string()));
        assert!(Chores::new(None, None, outbox).due().is_empty());
    }
}
