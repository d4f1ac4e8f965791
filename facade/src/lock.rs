//! Leases: a held lock, released when dropped (contract §9).

use crate::engine::Engine;
use crate::error::Result;
use crate::sql::{boolean, Arg};
use alkstore_core::{names, NameKind};
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
        names::validate(NameKind::Lock, name)?;
        let v = engine.call(
            "alk_lock_acquire",
            &[name.into(), owner.into(), Arg::Num(ttl.as_secs_f64())],
        )?;
        Ok(v.as_i64().map(|token| LockGuard {
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
        let args = [
            self.name.as_str().into(),
            self.owner.as_str().into(),
            Arg::Num(ttl.as_secs_f64()),
        ];
        boolean(self.engine.call("alk_lock_renew", &args)?)
    }

    /// Releases the lease; false if it had expired.
    pub fn release(mut self) -> Result<bool> {
        self.released = true;
        boolean(self.engine.call(
            "alk_lock_release",
            &[self.name.as_str().into(), self.owner.as_str().into()],
        )?)
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            let _ = self.engine.call(
                "alk_lock_release",
                &[self.name.as_str().into(), self.owner.as_str().into()],
            );
        }
    }
}
