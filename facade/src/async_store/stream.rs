//! Async stream handle and consumer (contract §7, v1.1 §E).

use super::wakeups::Watched;
use super::{AsyncEngine, AsyncStore, DefaultEngine, FALLBACK_POLL};
use crate::call;
use crate::error::Result;
use crate::opts::StreamOpts;
use crate::types::{Event, StreamInfo};
use alkstore_core::{names, NameKind};
use serde::Serialize;
use serde_json::Value;
use std::time::{Duration, Instant};

/// A stream on an [`AsyncStore`]. To publish with your own rows use
/// [`AsyncTxHandle::publish_tx`](crate::AsyncTxHandle::publish_tx).
pub struct AsyncStream<DB: AsyncEngine = DefaultEngine> {
    store: AsyncStore<DB>,
    name: String,
}

impl<DB: AsyncEngine> Clone for AsyncStream<DB> {
    fn clone(&self) -> Self {
        AsyncStream {
            store: self.store.clone(),
            name: self.name.clone(),
        }
    }
}

impl<DB: AsyncEngine> AsyncStream<DB> {
    pub(crate) fn new(store: AsyncStore<DB>, name: &str) -> Result<AsyncStream<DB>> {
        names::validate(NameKind::Stream, name)?;
        Ok(AsyncStream {
            store,
            name: name.into(),
        })
    }

    /// The stream's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets the stream's retention (admin role) and returns it resolved.
    pub async fn configure(&self, opts: &StreamOpts) -> Result<Value> {
        self.store
            .run(call::stream_configure(&self.name, opts)?)
            .await
    }

    /// The stream's kept offsets and retention, after giving offsets to the
    /// events committed since the last sequencer ran.
    pub async fn info(&self) -> Result<StreamInfo> {
        self.sequence().await?;
        self.store.run(call::stream_info(&self.name)?).await
    }

    /// Gives the stream's committed events their offsets (`alk_sequence`,
    /// contract v1.2 §K) in transactions of their own, on a connection of
    /// the store's; returns how many. Reads call it when they reach the end
    /// of what has offsets.
    pub async fn sequence(&self) -> Result<i64> {
        self.store.run(call::sequence(Some(&self.name))?).await
    }

    /// Publishes an event in its own transaction; returns its id.
    pub async fn publish<T: Serialize + Sync + ?Sized>(
        &self,
        event: &T,
        key: Option<&str>,
    ) -> Result<i64> {
        self.store.run(call::publish(&self.name, event, key)?).await
    }

    /// Up to `max` events after `after`, ascending (unreadable payloads
    /// skipped with a warning through `tracing`).
    pub async fn read(&self, after: i64, max: i64) -> Result<Vec<Event>> {
        Ok(self.read_page(after, max).await?.0)
    }

    async fn read_page(&self, after: i64, max: i64) -> Result<(Vec<Event>, Option<i64>)> {
        let mut page = self.store.run(call::read(&self.name, after, max)?).await?;
        // At the end of what has offsets: see the blocking Stream.
        if !page.full(max) && self.sequence().await? > 0 {
            page = self.store.run(call::read(&self.name, after, max)?).await?;
        }
        Ok((page.events, page.last))
    }

    /// Saves a consumer's offset; true if it advanced.
    pub async fn save_offset(&self, consumer: &str, offset: i64) -> Result<bool> {
        self.store
            .run(call::save_offset(&self.name, consumer, offset)?)
            .await
    }

    /// A consumer's saved offset (0 if none).
    pub async fn get_offset(&self, consumer: &str) -> Result<i64> {
        self.store
            .run(call::get_offset(&self.name, consumer)?)
            .await
    }

    /// A consumer that resumes from its saved offset.
    pub async fn subscribe(&self, consumer: &str) -> Result<AsyncStreamSubscription<DB>> {
        names::validate(NameKind::Consumer, consumer)?;
        let position = self.get_offset(consumer).await?;
        Ok(AsyncStreamSubscription {
            stream: self.clone(),
            consumer: Some(consumer.into()),
            position,
        })
    }

    /// A reader of the events after `after`, with no saved offset.
    pub fn reader(&self, after: i64) -> AsyncStreamSubscription<DB> {
        AsyncStreamSubscription {
            stream: self.clone(),
            consumer: None,
            position: after,
        }
    }
}

/// A stream consumer: reads from its position, waits for new events by
/// wake-ups, and saves its offset when told (at-least-once).
pub struct AsyncStreamSubscription<DB: AsyncEngine = DefaultEngine> {
    stream: AsyncStream<DB>,
    consumer: Option<String>,
    position: i64,
}

impl<DB: AsyncEngine> AsyncStreamSubscription<DB> {
    /// The offset of the last event handed out.
    pub fn position(&self) -> i64 {
        self.position
    }

    /// The next events, waiting up to `timeout` for one to arrive. Dropping
    /// the future loses nothing: the position moves only when it returns.
    pub async fn next_batch(&mut self, max: i64, timeout: Duration) -> Result<Vec<Event>> {
        let deadline = Instant::now() + timeout;
        let watched = Watched::stream(&self.stream.name);
        loop {
            let mut woken = self.stream.store.wakeups().watch(&watched).await?;
            // Pages of nothing but unreadable events are read past at once.
            let (events, last) = self.stream.read_page(self.position, max).await?;
            if let Some(last) = last {
                self.position = last;
            }
            if !events.is_empty() {
                return Ok(events);
            }
            if last.is_some() {
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(events);
            }
            let _ = tokio::time::timeout(left.min(FALLBACK_POLL), woken.changed()).await;
        }
    }

    /// Saves the position as the consumer's offset (a reader has none: false).
    pub async fn commit(&self) -> Result<bool> {
        match &self.consumer {
            Some(consumer) => self.stream.save_offset(consumer, self.position).await,
            None => Ok(false),
        }
    }
}
