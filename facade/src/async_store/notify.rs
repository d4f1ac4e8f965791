//! Async notifications (contract §8) and leases (contract §9).

use super::{AsyncEngine, AsyncStore, DefaultEngine};
use crate::call;
use crate::error::{Error, Result};
use crate::types::Notification;
use serde_json::Value;
use std::time::Duration;
use tokio::sync::mpsc;

/// Notifications on one channel, from the moment of
/// [`AsyncStore::listen`] on.
pub struct AsyncSubscription {
    channel: String,
    rx: mpsc::UnboundedReceiver<Value>,
}

impl AsyncSubscription {
    pub(crate) fn new(channel: &str, rx: mpsc::UnboundedReceiver<Value>) -> AsyncSubscription {
        AsyncSubscription {
            channel: channel.into(),
            rx,
        }
    }

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
pub struct AsyncLockGuard<DB: AsyncEngine = DefaultEngine> {
    store: AsyncStore<DB>,
    name: String,
    owner: String,
    token: i64,
    released: bool,
}

impl<DB: AsyncEngine> AsyncLockGuard<DB> {
    pub(crate) async fn acquire(
        store: &AsyncStore<DB>,
        name: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<Option<AsyncLockGuard<DB>>> {
        let token = store.run(call::lock_acquire(name, owner, ttl)?).await?;
        Ok(token.map(|token| AsyncLockGuard {
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
        self.store
            .run(call::lock_renew(&self.name, &self.owner, ttl)?)
            .await
    }

    /// Releases the lease; false if it had expired.
    pub async fn release(mut self) -> Result<bool> {
        self.released = true;
        self.store
            .run(call::lock_release(&self.name, &self.owner)?)
            .await
    }
}

impl<DB: AsyncEngine> Drop for AsyncLockGuard<DB> {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        // Outside a runtime the lease simply runs out at its ttl.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let (store, name, owner) = (self.store.clone(), self.name.clone(), self.owner.clone());
            rt.spawn(async move {
                if let Ok(release) = call::lock_release(&name, &owner) {
                    let _ = store.run(release).await;
                }
            });
        }
    }
}

/// A SQLite subscription: a task reads `alk_notifications` after the last
/// id it saw whenever a commit changes the database, and forwards them.
#[cfg(feature = "sqlx-sqlite")]
pub(crate) async fn sqlite_subscription(
    store: &AsyncStore<sqlx::Sqlite>,
    channel: &str,
) -> Result<AsyncSubscription> {
    const PAGE: i64 = 1000;
    let page = |store: AsyncStore<sqlx::Sqlite>, channel: String, after: i64| async move {
        store
            .run(crate::call::notifications(&channel, after, PAGE))
            .await
    };
    // Listening starts now: skip what was sent before.
    let mut last = 0;
    loop {
        let rows = page(store.clone(), channel.to_string(), last).await?;
        last = rows.last().and_then(|n| n["id"].as_i64()).unwrap_or(last);
        if (rows.len() as i64) < PAGE {
            break;
        }
    }
    let (tx, rx) = mpsc::unbounded_channel();
    let mut changed = store.wakeups().subscribe(&format!("n:{channel}"));
    let (store, channel_name) = (store.clone(), channel.to_string());
    tokio::spawn(async move {
        loop {
            let Ok(rows) = page(store.clone(), channel_name.clone(), last).await else {
                tokio::time::sleep(super::FALLBACK_POLL).await;
                continue;
            };
            for n in &rows {
                last = n["id"].as_i64().unwrap_or(last);
                if tx.send(n["payload"].clone()).is_err() {
                    return; // the subscription was dropped
                }
            }
            if rows.is_empty() {
                tokio::select! {
                    _ = changed.changed() => {}
                    _ = tokio::time::sleep(super::FALLBACK_POLL) => {}
                    _ = tx.closed() => return,
                }
            }
        }
    });
    Ok(AsyncSubscription::new(channel, rx))
}
