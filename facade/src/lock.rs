//! Leases: a held lock, released when dropped (contract §9).

use crate::call;
use crate::engine::Engine;
use crate::error::Result;
use std::sync::Arc;
use std::time::Duration;

/// A held lease; released when dropped.
pub struct LockGuard {
    engine: Arc<dyn Engine>,
    name: String,
    owner: String,
    token: i64,
    released: bool,
}

impl LockGuard {
    pub(crate) fn acquire(
        engine: Arc<dyn Engine>,
        name: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<LockGuard>> {
        let token = call::lock_acquire(name, owner, ttl)?.run_on(&*engine)?;
        Ok(token.map(|token| LockGuard {
            engine,
            name: name.into(),
            owner: owner.into(),
            token,
            released: false,
        }))
    }

    /// The fencing token: larger for every new acquisition of this name.
    pub fn token(&self) -> i64 {
        self.token
    }

    /// Extends the lease; false if it had expired (it is no longer held).
    pub fn renew(&self, ttl: Duration) -> Result<bool> {
        call::lock_renew(&self.name, &self.owner, ttl)?.run_on(&*self.engine)
    }

    /// Releases the lease; false if it had expired.
    pub fn release(mut self) -> Result<bool> {
        self.released = true;
        call::lock_release(&self.name, &self.owner)?.run_on(&*self.engine)
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            if let Ok(release) = call::lock_release(&self.name, &self.owner) {
                let _ = release.run_on(&*self.engine);
            }
        }
    }
}
