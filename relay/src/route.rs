//! What both kinds of route share: the context a runner works in,
//! delivering a batch with every message in flight at once, the state
//! changes it logs, and pauses a stop cuts short.

use crate::backoff::Down;
use crate::config::Route;
use crate::message::Message;
use crate::metrics::RouteMetrics;
use crate::sink::{Outcome, Sink};
use alkstore::{Stop, Store};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Pause between tries while the database cannot be reached.
pub const DB_PAUSE: Duration = Duration::from_secs(1);
/// How long an idle route waits for new messages before it looks at its
/// stop flag again.
pub const IDLE_WAIT: Duration = Duration::from_millis(500);
/// How often [`Ctx::deliver_all_while`] asks whether it may go on.
pub const HELD_EVERY: Duration = Duration::from_millis(50);
/// How often a route reads its lag.
pub const LAG_EVERY: Duration = Duration::from_secs(2);

/// What a route's runner works with.
pub struct Ctx<'a> {
    pub store: &'a Store,
    pub route: &'a Route,
    pub sink: &'a Arc<dyn Sink>,
    pub rt: &'a tokio::runtime::Handle,
    pub metrics: &'a Arc<RouteMetrics>,
    pub stop: &'a Stop,
}

impl Ctx<'_> {
    /// Delivers every message at once, each bounded by the route's
    /// timeout; the outcomes in the messages' order. For as long as
    /// `held()` says the route may still be delivered (a stream route's lease,
    /// looked at every [`HELD_EVERY`]): `None` when it stopped first, the
    /// deliveries still in flight abandoned unconfirmed.
    pub fn deliver_all_while(
        &self,
        messages: &[Message],
        held: impl Fn() -> bool,
    ) -> Option<Vec<Outcome>> {
        let timeout = self.route.timeout;
        let sink = &**self.sink;
        let all =
            futures_util::future::join_all(messages.iter().map(|m| deliver_one(sink, m, timeout)));
        // The watch first, and `held()` asked at its every poll (a timer
        // wakes it at least every HELD_EVERY): whatever wakes this batch,
        // a process resumed past its lease included, nothing more is sent
        // once `held()` said no.
        self.rt.block_on(async {
            let mut tick = tokio::time::interval(HELD_EVERY);
            let watch = std::future::poll_fn(|cx| {
                if !held() {
                    return std::task::Poll::Ready(());
                }
                while tick.poll_tick(cx).is_ready() {}
                std::task::Poll::Pending
            });
            tokio::select! {
                biased;
                () = watch => None,
                outcomes = all => Some(outcomes),
            }
        })
    }

    /// One log line for a change of the route's state.
    pub fn log(&self, what: &str) {
        crate::log(&self.route.name, what);
    }

    /// Counts a failure and marks the sink down (logged the first time).
    pub fn sink_down(
        &self,
        down: &mut Down,
        error: &str,
        retry_after: Option<Duration>,
    ) -> Duration {
        let first = !down.is_down();
        // Deliveries that were in flight when the sink went down fail one
        // after another: one outage, one step of the backoff.
        let wait = match down.left() {
            Some(left) if retry_after.is_none_or(|r| r <= left) => left,
            _ => down.fail(retry_after),
        };
        self.metrics.set_up(false);
        if first {
            self.log(&format!(
                "sink {} down: {error}; trying again in {} s",
                self.route.sink.shown(),
                wait.as_secs_f64()
            ));
        }
        wait
    }

    /// Marks the sink up (logged when it was down).
    pub fn sink_up(&self, down: &mut Down) {
        self.metrics.set_up(true);
        if down.clear() {
            self.log(&format!("sink {} up", self.route.sink.shown()));
        }
    }

    /// Sleeps up to `d`, returning early once the stop flag is raised.
    pub fn pause(&self, d: Duration) {
        let end = Instant::now() + d;
        while !self.stop.is_stopped() {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(100)));
        }
    }
}

/// One delivery bounded by `timeout` (no confirmation in time: unavailable).
pub async fn deliver_one(sink: &dyn Sink, m: &Message, timeout: Duration) -> Outcome {
    match tokio::time::timeout(timeout, sink.deliver(m)).await {
        Ok(outcome) => outcome,
        Err(_) => Outcome::unavailable(format!(
            "no confirmation within {} s",
            timeout.as_secs_f64()
        )),
    }
}

/// A database error, logged once until the database answers again.
#[derive(Default)]
pub struct DbState {
    failing: bool,
}

impl DbState {
    pub fn failed(&mut self, ctx: &Ctx<'_>, e: &alkstore::Error) {
        if !self.failing {
            self.failing = true;
            ctx.log(&format!("database call failed, retrying every second: {e}"));
        }
        ctx.pause(DB_PAUSE);
    }

    pub fn ok(&mut self, ctx: &Ctx<'_>) {
        if self.failing {
            self.failing = false;
            ctx.log("database answers again");
        }
    }
}
