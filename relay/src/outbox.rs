//! An outbox route: claims as the route's worker name, keeps up to
//! `concurrency` messages in flight (a new one starts as soon as one is
//! confirmed), acks confirmed messages together, gives back with
//! `alk_release` what it could not deliver for now (no attempt spent), and
//! retries what the sink refused (an attempt spent; dead after
//! `max_attempts` with the sink's answer as the error). A group's next
//! message is claimable only once its head is acked or dead, so groups keep
//! their order.
//!
//! Claims run ahead of the window by what the sink takes in about a
//! quarter of a second at its measured pace (at most [`MAX_AHEAD`]), on a
//! thread of their own ([`Ahead`]), and acks go out on another, so one
//! claim and one ack serve many messages while the window keeps moving; a
//! claimed message not started within [`AHEAD_TTL`] is given back.

use crate::ahead::{Ahead, EXTEND_ABOVE};
use crate::backoff::Down;
use crate::message::Message;
use crate::route::{deliver_one, Ctx, LAG_EVERY};
use crate::sink::Outcome;
use alkstore::{Job, Retried};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The most messages claimed ahead of those in flight.
pub const MAX_AHEAD: usize = 1000;
/// A message claimed ahead and not started by then is given back (well
/// within the outbox's 60 s claims).
pub const AHEAD_TTL: Duration = Duration::from_secs(20);
/// Confirmed messages are acked together once this many wait…
const ACK_EVERY: usize = 100;
/// …or the oldest has waited this long.
const ACK_WINDOW: Duration = Duration::from_millis(10);

/// What a finished delivery reports back to the route's thread.
type Done = (Job, Outcome);

pub fn run(ctx: &Ctx<'_>, outbox: &str) -> alkstore::Result<()> {
    let ob = ctx.store.outbox(outbox)?;
    // Acks go out on a thread of their own: the window keeps moving while
    // a batch of them commits.
    let (acker, acked) = std::sync::mpsc::channel::<Vec<i64>>();
    let ahead = Ahead::default();
    std::thread::scope(|s| {
        s.spawn(|| ack(ctx, ob.jobs(), acked));
        s.spawn(|| ahead.claim(ctx, &ob));
        window(ctx, outbox, &ob, &ahead, acker)
    })
}

/// Acks each batch it is sent until the sender is dropped.
fn ack(ctx: &Ctx<'_>, q: &alkstore::Queue, batches: std::sync::mpsc::Receiver<Vec<i64>>) {
    for ids in batches {
        // A failed ack leaves the claims to expire: those messages go
        // again, under the same ids.
        if let Err(e) = q.ack_batch(&ids, &ctx.route.name) {
            ctx.log(&format!(
                "could not ack {} delivered messages (they will be delivered again): {e}",
                ids.len()
            ));
        }
    }
}

fn window(
    ctx: &Ctx<'_>,
    outbox: &str,
    ob: &alkstore::Outbox,
    ahead: &Ahead,
    acker: std::sync::mpsc::Sender<Vec<i64>>,
) -> alkstore::Result<()> {
    let mut r = Runner {
        ctx,
        outbox,
        acker,
        q: ob.jobs(),
        worker: ctx.route.name.as_str(),
        ahead,
        in_flight: 0,
        acks: Vec::new(),
        acks_since: None,
        down: Down::default(),
        pace: Pace::default(),
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<Done>();
    let mut lag_at = Instant::now() - LAG_EVERY;
    // The last turn started nothing: the next waits for a delivery to
    // finish rather than spin while the claimer works.
    let mut stalled = false;
    while !ctx.stop.is_stopped() {
        // Finished deliveries: wait for one only when nothing else can be
        // done (the window is full, or nothing is left to start).
        let full = r.in_flight >= ctx.route.concurrency;
        let starved = r.ahead.starved();
        let waiting = r.in_flight > 0 && (full || starved || stalled || r.down.left().is_some());
        r.settle(&mut rx, waiting);
        if lag_at.elapsed() >= LAG_EVERY {
            lag_at = Instant::now();
            if let Ok(stats) = ob.stats() {
                // Messages given back during an outage are not runnable
                // until their delay ends: the outage's length bounds the
                // lag from below.
                let runnable = stats["oldest_runnable_age_s"].as_f64().unwrap_or(0.0);
                ctx.metrics
                    .set_lag(runnable.max(r.down.for_how_long().as_secs_f64()));
            }
        }
        r.aim();
        if let Some(left) = r.down.left() {
            // Nothing is claimed while the sink is left alone; what a claim
            // in progress brought goes back at once (held through a long
            // backoff, its claims would expire and spend an attempt).
            let held = ahead.take_all();
            r.give_back(&held, Some(left));
            if r.in_flight == 0 {
                ctx.pause(left.min(Duration::from_millis(250)));
            }
            continue;
        }
        stalled = r.start(&tx) == 0;
        if r.in_flight == 0 {
            // Nothing to settle: wait for the claimer.
            ahead.wait_for_jobs(Duration::from_millis(100));
        }
    }
    // Stopping: nothing new starts; what was claimed ahead goes back at
    // once, what is in flight finishes (each within the route's timeout).
    let held = ahead.close();
    r.give_back(&held, None);
    let end = Instant::now() + ctx.route.timeout + Duration::from_secs(1);
    while r.in_flight > 0 && Instant::now() < end {
        r.settle(&mut rx, true);
    }
    r.flush_acks();
    Ok(())
}

/// A route's state between loops.
struct Runner<'a> {
    ctx: &'a Ctx<'a>,
    outbox: &'a str,
    acker: std::sync::mpsc::Sender<Vec<i64>>,
    q: &'a alkstore::Queue,
    worker: &'a str,
    /// Claimed, not yet started.
    ahead: &'a Ahead,
    in_flight: usize,
    /// Confirmed, not yet acked.
    acks: Vec<i64>,
    acks_since: Option<Instant>,
    down: Down,
    pace: Pace,
}

impl Runner<'_> {
    /// Takes every finished delivery (waiting up to a few ms for the first
    /// when `wait`), then acks, gives back or retries accordingly.
    fn settle(&mut self, rx: &mut mpsc::UnboundedReceiver<Done>, wait: bool) {
        let mut done = Vec::new();
        if wait {
            let first = self.ctx.rt.block_on(async {
                tokio::time::timeout(Duration::from_millis(50), rx.recv()).await
            });
            if let Ok(Some(d)) = first {
                done.push(d);
            }
        }
        while let Ok(d) = rx.try_recv() {
            done.push(d);
        }
        self.in_flight -= done.len();
        let mut later = Vec::new();
        let mut retry_after = None;
        let mut first_error = None;
        let mut delivered = 0;
        for (job, outcome) in done {
            match outcome {
                Outcome::Delivered => {
                    delivered += 1;
                    self.acks.push(job.id);
                    self.acks_since.get_or_insert_with(Instant::now);
                }
                Outcome::Unavailable {
                    error,
                    retry_after: after,
                } => {
                    later.push(job.id);
                    retry_after = retry_after.max(after);
                    first_error.get_or_insert(error);
                }
                Outcome::Refused(error) => self.refused(&job, &error),
            }
        }
        self.pace.count(delivered);
        if delivered > 0 {
            self.ctx.metrics.delivered(delivered);
        }
        if !later.is_empty() {
            self.ctx.metrics.failed(later.len());
            let wait = self.ctx.sink_down(
                &mut self.down,
                first_error.as_deref().unwrap_or(""),
                retry_after,
            );
            // What was claimed ahead would meet the same sink: back too.
            later.extend(self.ahead.take_all());
            self.give_back(&later, Some(wait));
        } else if delivered > 0 {
            self.ctx.sink_up(&mut self.down);
        }
        let due = self.acks_since.is_some_and(|t| t.elapsed() >= ACK_WINDOW);
        if self.acks.len() >= ACK_EVERY || due || self.in_flight == 0 {
            self.flush_acks();
        }
    }

    /// The sink refused `job`: the claim counted an attempt, retry spends it.
    fn refused(&mut self, job: &Job, error: &str) {
        self.ctx.metrics.failed(1);
        match self.q.retry(job.id, self.worker, error, None) {
            Ok(Retried::Dead) => self.ctx.log(&format!(
                "message outbox:{}:{} dead after {} attempts: {error}",
                self.outbox, job.id, job.attempts
            )),
            Ok(_) => {}
            Err(e) => self.ctx.log(&format!(
                "could not record a refusal of job {}: {e}",
                job.id
            )),
        }
    }

    fn flush_acks(&mut self) {
        self.acks_since = None;
        if !self.acks.is_empty() {
            let _ = self.acker.send(std::mem::take(&mut self.acks));
        }
    }

    fn give_back(&self, ids: &[i64], delay: Option<Duration>) {
        if ids.is_empty() {
            return;
        }
        if let Err(e) = self.q.release_batch(ids, self.worker, delay) {
            self.ctx.log(&format!(
                "could not give back {} claims (they come back when they expire): {e}",
                ids.len()
            ));
        }
    }

    /// Tells the claimer what to hold: a window's worth, or what the sink
    /// takes in about 250 ms when that is more; nothing while the sink is
    /// left alone, then one message (the probe); for a slow sink no more
    /// than the window.
    fn aim(&self) {
        let c = self.ctx.route.concurrency;
        if self.down.left().is_some() {
            self.ahead.aim(0, true, self.in_flight);
        } else if self.down.is_down() {
            self.ahead.aim(1, true, self.in_flight);
        } else if self.ctx.route.timeout > EXTEND_ABOVE {
            self.ahead.aim(c, true, self.in_flight);
        } else {
            let target = c.max(self.pace.ahead().min(MAX_AHEAD));
            self.ahead.aim(target, false, self.in_flight);
        }
    }

    /// Starts deliveries until the window is full; returns how many.
    fn start(&mut self, tx: &mpsc::UnboundedSender<Done>) -> usize {
        // Claimed too long ago to be sure of finishing within the claim.
        let stale = self.ahead.take_stale(AHEAD_TTL);
        self.give_back(&stale, None);
        // While the sink is down, only the probe goes out.
        let window = if self.down.is_down() {
            1
        } else {
            self.ctx.route.concurrency
        };
        let mut started = 0;
        while self.in_flight < window {
            let Some((job, body)) = self.ahead.pop() else {
                break;
            };
            started += 1;
            let m = Message::outbox(self.outbox, &job, &body);
            let (sink, tx, timeout) = (self.ctx.sink.clone(), tx.clone(), self.ctx.route.timeout);
            self.in_flight += 1;
            self.ctx.rt.spawn(async move {
                let outcome = deliver_one(&*sink, &m, timeout).await;
                let _ = tx.send((job, outcome));
            });
        }
        self.aim();
        started
    }
}

/// The sink's measured pace: messages confirmed per second, smoothed.
#[derive(Default)]
struct Pace {
    /// The first confirmation.
    started: Option<Instant>,
    since: Option<Instant>,
    count: usize,
    /// Confirmed since the first.
    total: usize,
    per_s: f64,
}

/// How often the pace is measured.
const PACE_EVERY: Duration = Duration::from_millis(200);
/// In the first [`PACE_EVERY`] it is measured whenever this many were
/// confirmed since the last measure, at least [`EARLY_PACE_AFTER`] after
/// it: a route started on a backlog otherwise claimed a window's worth at
/// a time for its first 200 ms.
const EARLY_PACE_COUNT: usize = 64;
/// See [`EARLY_PACE_COUNT`].
const EARLY_PACE_AFTER: Duration = Duration::from_millis(5);

impl Pace {
    fn count(&mut self, n: usize) {
        if n == 0 && self.started.is_none() {
            return; // the clock starts at the first confirmation
        }
        let now = Instant::now();
        let started = *self.started.get_or_insert(now);
        let since = *self.since.get_or_insert(now);
        self.count += n;
        self.total += n;
        let elapsed = since.elapsed();
        let early = started.elapsed() < PACE_EVERY
            && self.count >= EARLY_PACE_COUNT
            && elapsed >= EARLY_PACE_AFTER;
        if elapsed >= PACE_EVERY || early {
            let measured = self.count as f64 / elapsed.as_secs_f64();
            self.per_s = if self.per_s == 0.0 || early {
                measured
            } else {
                0.5 * self.per_s + 0.5 * measured
            };
            self.since = Some(Instant::now());
            self.count = 0;
        }
    }

    /// Messages to claim ahead: what the sink takes in about 250 ms, and
    /// never more than it has confirmed so far (a few fast confirmations
    /// first do not make the route hold a thousand for a slow sink).
    fn ahead(&self) -> usize {
        ((self.per_s * 0.25) as usize).min(self.total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A route started on a backlog sizes its claims by the sink's pace
    /// within milliseconds, not after the first 200 ms, and never above
    /// what the sink confirmed so far.
    #[test]
    fn the_first_pace_is_measured_as_soon_as_it_shows() {
        let mut pace = Pace::default();
        pace.count(1);
        assert_eq!(pace.ahead(), 0, "nothing measured from one confirmation");
        std::thread::sleep(EARLY_PACE_AFTER);
        pace.count(EARLY_PACE_COUNT);
        // 64 more in at least 5 ms: unless this thread slept 16 s since,
        // more than one a quarter of a second, and at most the 65.
        let ahead = pace.ahead();
        assert!(
            (1..=EARLY_PACE_COUNT + 1).contains(&ahead),
            "ahead {ahead} after {} confirmations",
            EARLY_PACE_COUNT + 1
        );
    }
}
