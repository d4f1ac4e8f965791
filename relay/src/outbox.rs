//! An outbox route: claims as the route's worker name, delivers the batch
//! with every message in flight, acks what the sink confirmed, gives back
//! with `alk_release` what it could not deliver for now (no attempt spent),
//! and retries what the sink refused (an attempt spent; dead after
//! `max_attempts` with the sink's answer as the error). A group's next
//! message is claimable only once its head is acked or dead, so groups keep
//! their order.

use crate::backoff::Down;
use crate::message::Message;
use crate::route::{Ctx, DbState, IDLE_WAIT, LAG_EVERY};
use crate::sink::Outcome;
use alkstore::Retried;
use std::time::{Duration, Instant};

/// Claims are held 60 s (the outbox's visibility); a delivery that may
/// take longer than this extends its claims first.
const EXTEND_ABOVE: Duration = Duration::from_secs(30);

pub fn run(ctx: &Ctx<'_>, outbox: &str) -> alkstore::Result<()> {
    let ob = ctx.store.outbox(outbox)?;
    let q = ob.jobs().clone();
    let worker = ctx.route.name.as_str();
    let mut down = Down::default();
    let mut db = DbState::default();
    let mut lag_at = Instant::now() - LAG_EVERY;
    while !ctx.stop.is_stopped() {
        if let Some(left) = down.left() {
            ctx.pause(left.min(Duration::from_millis(250)));
            continue;
        }
        if lag_at.elapsed() >= LAG_EVERY {
            lag_at = Instant::now();
            if let Ok(stats) = ob.stats() {
                ctx.metrics
                    .set_lag(stats["oldest_runnable_age_s"].as_f64().unwrap_or(0.0));
            }
        }
        // While the sink is down, one message probes it.
        let max = if down.is_down() {
            1
        } else {
            ctx.route.concurrency as i64
        };
        let jobs = match ob.claim_wait(worker, max, IDLE_WAIT) {
            Ok(jobs) => {
                db.ok(ctx);
                jobs
            }
            Err(e) => {
                db.failed(ctx, &e);
                continue;
            }
        };
        if jobs.is_empty() {
            continue;
        }
        if ctx.route.timeout > EXTEND_ABOVE {
            for j in &jobs {
                let _ = q.heartbeat(j.id, worker, Some(ctx.route.timeout + EXTEND_ABOVE));
            }
        }
        let messages: Vec<Message> = jobs.iter().map(|j| Message::outbox(outbox, j)).collect();
        let outcomes = ctx.deliver_all(&messages);
        let mut acked = Vec::new();
        let mut later = Vec::new();
        let mut retry_after = None;
        let mut first_error = None;
        for (job, outcome) in jobs.iter().zip(outcomes) {
            match outcome {
                Outcome::Delivered => acked.push(job.id),
                Outcome::Unavailable {
                    error,
                    retry_after: after,
                } => {
                    later.push(job.id);
                    retry_after = retry_after.max(after);
                    first_error.get_or_insert(error);
                }
                Outcome::Refused(error) => {
                    ctx.metrics.failed(1);
                    // The claim counted an attempt: retry spends it.
                    match q.retry(job.id, worker, &error, None) {
                        Ok(Retried::Dead) => ctx.log(&format!(
                            "message outbox:{outbox}:{} dead after {} attempts: {error}",
                            job.id, job.attempts
                        )),
                        Ok(_) => {}
                        Err(e) => ctx.log(&format!(
                            "could not record a refusal of job {}: {e}",
                            job.id
                        )),
                    }
                }
            }
        }
        if !acked.is_empty() {
            // A failed ack leaves the claims to expire: those messages go
            // again, under the same ids.
            if let Err(e) = q.ack_batch(&acked, worker) {
                ctx.log(&format!(
                    "could not ack {} delivered messages (they will be delivered again): {e}",
                    acked.len()
                ));
            }
            ctx.metrics.delivered(acked.len());
        }
        if later.is_empty() {
            if !acked.is_empty() {
                ctx.sink_up(&mut down);
            }
        } else {
            ctx.metrics.failed(later.len());
            let wait = ctx.sink_down(&mut down, first_error.as_deref().unwrap_or(""), retry_after);
            if let Err(e) = q.release_batch(&later, worker, Some(wait)) {
                ctx.log(&format!(
                    "could not give back {} claims (they come back when they expire): {e}",
                    later.len()
                ));
            }
        }
    }
    Ok(())
}
