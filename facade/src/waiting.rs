//! Waiting for work: the flag that stops loops, and waits that a wake-up
//! for the awaited queue or stream cuts short.

use crate::engine::{Engine, Kind};
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A flag that asks workers and loops to stop.
#[derive(Clone, Debug, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    /// A flag not yet raised.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises it.
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether it was raised.
    pub fn is_stopped(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// Waits for work on `(kind, name)`: register, look, wait, look again.
pub(crate) fn wait_for<T>(
    engine: &dyn Engine,
    kind: Kind,
    name: &str,
    timeout: Duration,
    mut look: impl FnMut() -> Result<Vec<T>>,
) -> Result<Vec<T>> {
    // A look that will not wait registers nothing (a hot standby refuses
    // LISTEN: a one-off read there must not fail for it).
    if timeout.is_zero() {
        return look();
    }
    let deadline = Instant::now() + timeout;
    let key = kind.key(name);
    match engine.watch(kind, name) {
        // A hot standby: no LISTEN during recovery (SQLSTATE 25006), so the
        // wait polls every fallback interval instead.
        Err(Error::Engine { code, .. }) if code == "25006" => {}
        other => other?,
    }
    loop {
        let seen = engine.waker().seen(&key);
        let found = look()?;
        let left = deadline.saturating_duration_since(Instant::now());
        if !found.is_empty() || left.is_zero() {
            return Ok(found);
        }
        engine
            .waker()
            .wait(&key, seen, left.min(engine.fallback_poll()));
    }
}

/// Sleeps up to `timeout` unless a wake-up for `(kind, name)` comes first;
/// true if one came.
pub(crate) fn sleep_unless_woken(
    engine: &dyn Engine,
    kind: Kind,
    name: &str,
    timeout: Duration,
) -> Result<bool> {
    let key = kind.key(name);
    engine.watch(kind, name)?;
    let seen = engine.waker().seen(&key);
    Ok(engine.waker().wait(&key, seen, timeout))
}
