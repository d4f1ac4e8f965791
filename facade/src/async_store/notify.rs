//! Async notifications (contract §8) and leases (contract §9).

use super::AsyncStore;
use crate::error::{Error, Result};
use crate::sql::{boolean, Arg};
use crate::types::Notification;
use alkstore_core::{names, NameKind};
use serde_json::Value;
use std::time::Duration;
use tokio::sync::mpsc;

/// Notifications on one channel, from the moment of
/// [`AsyncStore::listen`] on.
pub struct AsyncSubscription {
    pub(crate) channel: String,
    pub(crate) rx: mpsc::UnboundedReceiver<Value>,
}

impl AsyncSubscription {
    /// The next notification, waiting as long as it takes.
    pub async fn recv(&mut self) -> Result<Notification> {
        let payload = self
            .rx
            .recv()
            .await
            .ok_or_else(|| Error::engine("postgres", "", "the listener connection is gone"))?;
        Ok(Notification {
            channel: self.channel.clone(),
            payload,
        })
    }

    /// The next notification, or `None` after `timeout`.
    pub async fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<Notification>> {
        match tokio::time::timeout(timeout, self.recv()).await {
            Ok(n) => n.map(Some),
            Err(_) => Ok(None),
        }
    }
}

/// A held lease on an [`AsyncStore`]; released when dropped (in a task on
/// the current tokio runtime) unless [`release`](Self::release)d.
pub struct AsyncLockGuard {
    store: AsyncStore,
    name: String,
    owner: String,
    token: i64,
    released: bool,
}

impl AsyncLockGuard {
    pub(crate) async fn acquire(
        store: &AsyncStore,
        name: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<AsyncLockGuard>> {
        names::validate(NameKind::Lock, name)?;
        let args = [name.into(), owner.into(), Arg::Num(ttl.as_secs_f64())];
        let v = store.call("alk_lock_acquire", &args).await?;
        Ok(v.as_i64().map(|token| AsyncLockGuard {
            store: store.clone(),
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
    pub async fn renew(&self, ttl: Duration) -> Result<bool> {
        let args = [
            self.name.as_str().into(),
            self.owner.as_str().into(),
            Arg::Num(ttl.as_secs_f64()),
        ];
        boolean(self.store.call("alk_lock_renew", &args).await?)
    }

    /// Releases the lease; false if it had expired.
    pub async fn release(mut self) -> Result<bool> {
        self.released = true;
        let args = [self.name.as_str().into(), self.owner.as_str().into()];
        boolean(self.store.call("alk_lock_release", &args).await?)
    }
}

impl Drop for AsyncLockGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        // Outside a runtime the lease simply runs out at its ttl.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (store, name, owner) = (self.store.clone(), self.name.clone(), self.owner.clone());
            rt.spawn(async move {
                let args = [name.as_str().into(), owner.as_str().into()];
                let _ = store.call("alk_lock_release", &args).await;
            });
        }
    }
}
