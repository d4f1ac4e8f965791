//! Wake-ups without busy polling: a generation counter per key that the
//! engine's watcher bumps, and waiters block on until it moves.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The key every SQLite commit bumps (SQLite cannot tell what changed).
pub(crate) const ANY: &str = "*";

/// Generations per key, with a condition variable to wait for a change.
#[derive(Default)]
pub(crate) struct Waker {
    generations: Mutex<HashMap<String, u64>>,
    changed: Condvar,
}

impl Waker {
    /// The current generation of `key` (and of [`ANY`]).
    pub fn seen(&self, key: &str) -> (u64, u64) {
        let g = self.generations.lock().unwrap_or_else(|e| e.into_inner());
        (
            g.get(key).copied().unwrap_or(0),
            g.get(ANY).copied().unwrap_or(0),
        )
    }

    /// Marks `key` as changed and wakes its waiters.
    pub fn bump(&self, key: &str) {
        let mut g = self.generations.lock().unwrap_or_else(|e| e.into_inner());
        *g.entry(key.to_string()).or_default() += 1;
        drop(g);
        self.changed.notify_all();
    }

    /// Waits until `key` (or [`ANY`]) moved past `seen`, or `timeout` passed.
    /// Returns whether it moved.
    pub fn wait(&self, key: &str, seen: (u64, u64), timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut g = self.generations.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let now = (
                g.get(key).copied().unwrap_or(0),
                g.get(ANY).copied().unwrap_or(0),
            );
            if now != seen {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            g = self
                .changed
                .wait_timeout(g, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}
