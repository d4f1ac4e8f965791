//! A stream route: one relay at a time delivers it, under a lease named
//! `relay:{stream}:{route}` (10 s, renewed every 3 s by a keeper thread).
//! The deliverer stops a second before the lease could have ended by its
//! own clock, whether or not the keeper noticed (a process paused past
//! its lease, a renewal that hangs), abandoning what is in flight: so a
//! relay that takes the route over is the only one delivering it (but for
//! publishes a paused relay had already handed to its broker's client,
//! which that client may still send when it resumes). It reads
//! from the route's saved offset (the route name is the consumer), delivers
//! a batch with every event in flight, and saves the offset of the
//! gap-free prefix the sink confirmed. An unavailable sink is tried again
//! from the first unconfirmed event after a backoff; a refused event stops
//! the route there, never skipped.

use crate::backoff::Down;
use crate::message::Message;
use crate::route::{Ctx, DbState, IDLE_WAIT, LAG_EVERY};
use crate::sink::Outcome;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long a route's lease lasts without a renewal.
pub const LEASE_TTL: Duration = Duration::from_secs(10);
/// How often the holder renews it.
pub const RENEW_EVERY: Duration = Duration::from_secs(3);
/// How soon a renewal that failed is tried again.
pub const RENEW_RETRY: Duration = Duration::from_millis(500);
/// How often a relay without the lease tries to take it.
pub const STANDBY_EVERY: Duration = Duration::from_secs(1);
/// How long before its lease could end, by this host's clock, a relay
/// stops delivering: room for the clocks' rates and for
/// [`HELD_EVERY`](crate::route::HELD_EVERY).
pub const LEASE_MARGIN: Duration = Duration::from_secs(1);

/// Until when this relay holds a route's lease, by this host's clock:
/// counted from when the lock or its renewal was *sent* (the database
/// counts from later), less [`LEASE_MARGIN`].
struct Held {
    from: Instant,
    until_ms: AtomicU64,
}

impl Held {
    /// Taken by a lock sent at `sent`.
    fn new(sent: Instant) -> Held {
        let held = Held {
            from: sent,
            until_ms: AtomicU64::new(0),
        };
        held.renewed(sent);
        held
    }

    /// Renewed by a renewal sent at `sent`.
    fn renewed(&self, sent: Instant) {
        let until = sent.saturating_duration_since(self.from) + LEASE_TTL - LEASE_MARGIN;
        self.until_ms
            .fetch_max(until.as_millis() as u64, Ordering::SeqCst);
    }

    /// How long it may still deliver (zero: no more).
    fn left(&self) -> Duration {
        let until = self.from + Duration::from_millis(self.until_ms.load(Ordering::SeqCst));
        until.saturating_duration_since(Instant::now())
    }
}

/// Why a stream route ended.
pub enum End {
    /// The stop flag was raised.
    Stopped,
    /// The sink refused an event: the route stops there.
    Refused { offset: i64, error: String },
}

pub fn run(ctx: &Ctx<'_>, stream: &str, owner: &str) -> alkstore::Result<End> {
    let lease = crate::config::lease_name(stream, &ctx.route.name);
    let mut db = DbState::default();
    let mut standby_logged = false;
    while !ctx.stop.is_stopped() {
        let sent = Instant::now();
        let guard = match ctx.store.lock(&lease, owner, LEASE_TTL) {
            Ok(Some(g)) => {
                db.ok(ctx);
                g
            }
            Ok(None) => {
                db.ok(ctx);
                if !standby_logged {
                    standby_logged = true;
                    ctx.log("another relay delivers this stream route; standing by");
                }
                ctx.pause(STANDBY_EVERY);
                continue;
            }
            Err(e) => {
                db.failed(ctx, &e);
                continue;
            }
        };
        standby_logged = false;
        ctx.log(&format!("delivering stream {stream} (lease {lease} taken)"));
        let held = Held::new(sent);
        let lost = AtomicBool::new(false);
        let done = AtomicBool::new(false);
        let end = std::thread::scope(|s| {
            s.spawn(|| keep(&guard, &held, &lost, &done, ctx));
            // Raised however `deliver` ends, a panic included: the keeper
            // must not hold the lease for a relay that stopped delivering.
            let _done = Raise(&done);
            deliver(ctx, stream, &held, &lost, &mut db)
        });
        // Released at once (dropped), so a standby takes over without
        // waiting out the lease.
        drop(guard);
        match end {
            Ok(Some(end)) => return Ok(end),
            Ok(None) => ctx.log(&format!("lease {lease} lost; standing by")),
            Err(e) => db.failed(ctx, &e),
        }
    }
    Ok(End::Stopped)
}

/// Raises its flag when dropped.
struct Raise<'a>(&'a AtomicBool);

impl Drop for Raise<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Renews the lease until `done`; raises `lost` when it is gone or could
/// not be renewed before it ran out.
fn keep(
    guard: &alkstore::LockGuard,
    held: &Held,
    lost: &AtomicBool,
    done: &AtomicBool,
    ctx: &Ctx<'_>,
) {
    let mut next = Instant::now() + RENEW_EVERY;
    let mut failing = false;
    while !done.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
        if Instant::now() < next {
            continue;
        }
        let sent = Instant::now();
        match guard.renew(LEASE_TTL) {
            Ok(true) => {
                // Even after `held` ran out: the database says the lease
                // is still this relay's, so it may go on delivering.
                held.renewed(sent);
                failing = false;
                next = Instant::now() + RENEW_EVERY;
            }
            Ok(false) => {
                lost.store(true, Ordering::SeqCst);
                return;
            }
            Err(e) => {
                // Tried again soon, until the lease's time is up (the
                // deliverer stops by then on its own).
                if held.left().is_zero() {
                    ctx.log(&format!("could not renew the lease: {e}"));
                    lost.store(true, Ordering::SeqCst);
                    return;
                }
                if !failing {
                    failing = true;
                    ctx.log(&format!("could not renew the lease, trying again: {e}"));
                }
                next = Instant::now() + RENEW_RETRY;
            }
        }
    }
}

/// Delivers while the lease is held: `Ok(None)` when it was lost, or
/// its time ran out before a renewal.
fn deliver(
    ctx: &Ctx<'_>,
    stream: &str,
    held: &Held,
    lost: &AtomicBool,
    db: &mut DbState,
) -> alkstore::Result<Option<End>> {
    let gone = || lost.load(Ordering::SeqCst) || held.left().is_zero();
    let st = ctx.store.stream(stream)?;
    let consumer = ctx.route.name.as_str();
    let mut saved = st.get_offset(consumer)?;
    let mut reader = st.reader(saved);
    let mut down = Down::default();
    let mut lag_at = Instant::now() - LAG_EVERY;
    while !ctx.stop.is_stopped() {
        if gone() {
            return Ok(None);
        }
        if lag_at.elapsed() >= LAG_EVERY {
            lag_at = Instant::now();
            ctx.metrics.set_lag(lag(&st, saved));
        }
        if let Some(left) = down.left() {
            ctx.pause(left.min(Duration::from_millis(250)));
            continue;
        }
        let max = if down.is_down() {
            1
        } else {
            ctx.route.concurrency as i64
        };
        let events = match reader.next_batch_verbatim(max, IDLE_WAIT) {
            Ok(e) => {
                db.ok(ctx);
                e
            }
            Err(e) => {
                db.failed(ctx, &e);
                reader = st.reader(saved);
                continue;
            }
        };
        if events.is_empty() {
            continue;
        }
        // Looked at again after the read, which may have waited (or the
        // process been paused) past the lease.
        if gone() {
            return Ok(None);
        }
        // Offsets run 1, 2, 3, … with no gap: a gap is an event that
        // retention removed, or one the reader did not return (which would
        // be a defect): never skipped silently, the route stops there.
        let expected = saved + 1;
        let gap = std::iter::once(expected)
            .chain(events.iter().map(|(e, _)| e.offset + 1))
            .zip(events.iter().map(|(e, _)| e.offset))
            .find(|(want, got)| got != want)
            .map(|(want, _)| want);
        if let Some(missing) = gap {
            let removed = st.info().map(|i| missing < i.first_offset).unwrap_or(false);
            if !removed {
                let error = "the event was not read (a gap in the offsets read)".to_string();
                ctx.log(&format!(
                    "stopped at event stream:{stream}:{missing}: {error}"
                ));
                return Ok(Some(End::Refused {
                    offset: missing,
                    error,
                }));
            }
            ctx.log(&format!(
                "events from offset {missing} were removed by the stream's retention before delivery"
            ));
        }
        let messages: Vec<Message> = events
            .iter()
            .map(|(e, body)| Message::event(stream, e, body))
            .collect();
        let Some(outcomes) = ctx.deliver_all_while(&messages, || !gone()) else {
            // What was in flight goes again from the saved offset, under
            // the same ids, by whichever relay holds the lease next.
            return Ok(None);
        };
        let confirmed = outcomes
            .iter()
            .take_while(|o| **o == Outcome::Delivered)
            .count();
        if confirmed > 0 {
            let offset = events[confirmed - 1].0.offset;
            // Offsets never move backwards: a relay that lost its lease
            // meanwhile saves nothing wrong.
            st.save_offset(consumer, offset)?;
            saved = offset;
            ctx.metrics.delivered(confirmed);
        }
        match outcomes.into_iter().nth(confirmed) {
            None => ctx.sink_up(&mut down),
            Some(Outcome::Refused(error)) => {
                ctx.metrics.failed(1);
                let offset = events[confirmed].0.offset;
                ctx.metrics.set_lag(lag(&st, saved));
                ctx.log(&format!(
                    "stopped at event stream:{stream}:{offset}, which the sink refused: {error}"
                ));
                return Ok(Some(End::Refused { offset, error }));
            }
            Some(Outcome::Unavailable { error, retry_after }) => {
                ctx.metrics.failed(events.len() - confirmed);
                ctx.sink_down(&mut down, &error, retry_after);
                // From the first unconfirmed event again; those after it
                // that went through go again under the same ids.
                reader = st.reader(saved);
            }
            Some(Outcome::Delivered) => unreachable!("counted in the prefix"),
        }
    }
    Ok(Some(End::Stopped))
}

/// Seconds since the first event after `saved` was published (0: none).
fn lag(st: &alkstore::Stream, saved: i64) -> f64 {
    // Verbatim: a plain read skips an event whose payload this client
    // cannot parse, and the lag would be the next one's.
    let Ok(events) = st.read_verbatim(saved, 1) else {
        return 0.0;
    };
    let Some((e, _)) = events.first() else {
        return 0.0;
    };
    chrono::DateTime::parse_from_rfc3339(&e.created_at)
        .map(|t| {
            (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_milliseconds() as f64 / 1000.0
        })
        .unwrap_or(0.0)
}
