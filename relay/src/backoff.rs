//! How long a route leaves an unavailable sink alone (contract v1.3 §N3):
//! the outbox's backoff (base 5 s, doubling per failure in a row), capped
//! at a minute so a sink that comes back is found soon, and never shorter
//! than the sink's own `Retry-After`.

use std::time::{Duration, Instant};

/// The outbox's backoff base (contract v1 §6).
pub const BASE: Duration = Duration::from_secs(5);
/// The longest pause between tries of a sink that stays down.
pub const CAP: Duration = Duration::from_secs(60);

/// A route's failures in a row, and when it may try its sink again.
#[derive(Debug, Default)]
pub struct Down {
    streak: u32,
    until: Option<Instant>,
    /// When the first failure of this outage was seen.
    since: Option<Instant>,
}

impl Down {
    /// Counts a failure; returns how long to leave the sink alone.
    pub fn fail(&mut self, retry_after: Option<Duration>) -> Duration {
        self.streak = self.streak.saturating_add(1);
        self.since.get_or_insert_with(Instant::now);
        let backoff = BASE
            .saturating_mul(1u32 << (self.streak - 1).min(16))
            .min(CAP);
        let wait = backoff.max(retry_after.unwrap_or(Duration::ZERO));
        self.until = Instant::now().checked_add(wait);
        wait
    }

    /// A delivery went through: the sink is up. True if it was down.
    pub fn clear(&mut self) -> bool {
        let was = self.streak > 0;
        self.streak = 0;
        self.until = None;
        self.since = None;
        was
    }

    /// How long the sink has been down (zero while it is up): a message
    /// that failed at the start of the outage has waited at least this long.
    pub fn for_how_long(&self) -> Duration {
        self.since.map_or(Duration::ZERO, |s| s.elapsed())
    }

    /// Whether the sink is counted down.
    pub fn is_down(&self) -> bool {
        self.streak > 0
    }

    /// How long is left before the next try (`None`: try now).
    pub fn left(&self) -> Option<Duration> {
        let left = self.until?.checked_duration_since(Instant::now())?;
        (!left.is_zero()).then_some(left)
    }
}
