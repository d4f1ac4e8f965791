//! Notifications: a subscription to one channel (contract §8).

use crate::error::Result;
use crate::types::Notification;
use serde_json::Value;
use std::time::Duration;

/// Notifications on one channel, from the moment of `listen` on.
pub struct Subscription {
    pub(crate) channel: String,
    pub(crate) source: Box<dyn NotificationSource>,
}

/// Where a subscription's notifications come from (engine-specific).
pub(crate) trait NotificationSource: Send {
    fn next(&mut self, timeout: Duration) -> Result<Option<Value>>;
}

impl Subscription {
    /// The next notification, waiting as long as it takes.
    pub fn recv(&mut self) -> Result<Notification> {
        loop {
            if let Some(n) = self.recv_timeout(Duration::from_secs(3600))? {
                return Ok(n);
            }
        }
    }

    /// The next notification, or `None` after `timeout`.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Option<Notification>> {
        let channel = self.channel.clone();
        Ok(self
            .source
            .next(timeout)?
            .map(|payload| Notification { channel, payload }))
    }

    /// Notifications as they come.
    pub fn iter(&mut self) -> impl Iterator<Item = Result<Notification>> + '_ {
        std::iter::from_fn(move || Some(self.recv()))
    }
}
