//! A stream handle and its consumer (contract §7, v1.1 §E).

use crate::call;
use crate::engine::{Engine, Kind};
use crate::error::Result;
use crate::opts::StreamOpts;
use crate::types::{Event, StreamInfo};
use crate::waiting::wait_for;
use alkstore_core::{names, NameKind};
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// A stream (contract §7).
#[derive(Clone)]
pub struct Stream {
    engine: Arc<dyn Engine>,
    name: String,
}

impl Stream {
    pub(crate) fn new(engine: Arc<dyn Engine>, name: &str) -> Result<Stream> {
        names::validate(NameKind::Stream, name)?;
        Ok(Stream {
            engine,
            name: name.to_string(),
        })
    }

    /// Sets the stream's retention (admin role on PostgreSQL) and returns
    /// it resolved; events past it go when `alk_prune` runs (workers call
    /// it every minute).
    pub fn configure(&self, opts: &StreamOpts) -> Result<Value> {
        call::stream_configure(&self.name, opts)?.run_on(&*self.engine)
    }

    /// The stream's kept offsets and retention, after giving offsets to the
    /// events committed since the last sequencer ran ([`Stream::sequence`]).
    pub fn info(&self) -> Result<StreamInfo> {
        self.sequence()?;
        call::stream_info(&self.name)?.run_on(&*self.engine)
    }

    /// Gives the stream's committed events their offsets (`alk_sequence`,
    /// contract v1.2 §K) in transactions of their own, on this store's own
    /// connection; returns how many. Reads call it when they reach the end
    /// of what has offsets, so a database without the extension's
    /// background worker reads new events at once as well.
    pub fn sequence(&self) -> Result<i64> {
        call::sequence(Some(&self.name))?.run_on(&*self.engine)
    }

    /// Publishes an event in its own transaction; returns its id.
    pub fn publish<T: Serialize + ?Sized>(&self, event: &T, key: Option<&str>) -> Result<i64> {
        call::publish(&self.name, event, key)?.run_on(&*self.engine)
    }

    /// Up to `max` events after `after`, ascending. An event whose payload
    /// this crate cannot read is skipped with a message on standard error.
    pub fn read(&self, after: i64, max: i64) -> Result<Vec<Event>> {
        Ok(self.read_page(after, max)?.0)
    }

    /// Up to `max` events after `after`, ascending, each with its payload's
    /// JSON text as the database wrote it: on SQLite the text as published,
    /// on PostgreSQL jsonb's rendering (contract v1.3 §N2, the relay's
    /// body). None is skipped: a payload this crate's JSON cannot hold
    /// (`1e400`) is null in its [`Event`] and whole in its text.
    pub fn read_verbatim(&self, after: i64, max: i64) -> Result<Vec<(Event, String)>> {
        let read = || -> Result<Vec<(Event, String)>> {
            let text = call::read(&self.name, after, max)?.run_text_on(&*self.engine)?;
            crate::types::verbatim(text.as_deref(), Event::from_json)
        };
        let page = read()?;
        // As read_page: events committed without their offsets yet get them.
        if i64::try_from(page.len()).is_ok_and(|n| n >= max) || self.sequence()? == 0 {
            return Ok(page);
        }
        read()
    }

    /// A page of events and the offset of the last row read, readable or not.
    /// At the end of what has offsets, events may be committed without
    /// theirs yet: they get them, and the page is read again.
    fn read_page(&self, after: i64, max: i64) -> Result<(Vec<Event>, Option<i64>)> {
        let mut page = call::read(&self.name, after, max)?.run_on(&*self.engine)?;
        if !page.full(max) && self.sequence()? > 0 {
            page = call::read(&self.name, after, max)?.run_on(&*self.engine)?;
        }
        Ok((page.events, page.last))
    }

    /// Saves a consumer's offset; true if it advanced.
    pub fn save_offset(&self, consumer: &str, offset: i64) -> Result<bool> {
        call::save_offset(&self.name, consumer, offset)?.run_on(&*self.engine)
    }

    /// A consumer's saved offset (0 if none).
    pub fn get_offset(&self, consumer: &str) -> Result<i64> {
        call::get_offset(&self.name, consumer)?.run_on(&*self.engine)
    }

    /// A consumer that resumes from its saved offset.
    pub fn subscribe(&self, consumer: &str) -> Result<StreamSubscription> {
        names::validate(NameKind::Consumer, consumer)?;
        let position = self.get_offset(consumer)?;
        Ok(StreamSubscription {
            stream: self.clone(),
            consumer: Some(consumer.to_string()),
            position,
        })
    }

    /// A reader of the events after `after`, waiting for new ones like a
    /// consumer, but with no saved offset (`commit` saves nothing).
    pub fn reader(&self, after: i64) -> StreamSubscription {
        StreamSubscription {
            stream: self.clone(),
            consumer: None,
            position: after,
        }
    }
}

/// A stream consumer: reads from its position, waits for new events, and
/// saves its offset when told (at-least-once: a crash resumes from the last save).
pub struct StreamSubscription {
    stream: Stream,
    consumer: Option<String>,
    position: i64,
}

impl StreamSubscription {
    /// The offset of the last event handed out.
    pub fn position(&self) -> i64 {
        self.position
    }

    /// The next events, waiting up to `timeout` for one to arrive.
    pub fn next_batch(&mut self, max: i64, timeout: Duration) -> Result<Vec<Event>> {
        let s = &self.stream;
        let seen = std::cell::Cell::new(self.position);
        let events = wait_for(&*s.engine, Kind::Stream, &s.name, timeout, || loop {
            // Pages of nothing but unreadable events are read past at once.
            let (events, last) = s.read_page(seen.get(), max)?;
            if let Some(last) = last {
                seen.set(last);
            }
            if !events.is_empty() || last.is_none() {
                return Ok(events);
            }
        })?;
        self.position = seen.get();
        Ok(events)
    }

    /// [`next_batch`](Self::next_batch), each event with its payload's JSON
    /// text as the database wrote it ([`Stream::read_verbatim`]): none is
    /// skipped.
    pub fn next_batch_verbatim(
        &mut self,
        max: i64,
        timeout: Duration,
    ) -> Result<Vec<(Event, String)>> {
        let (s, after) = (&self.stream, self.position);
        let events = wait_for(&*s.engine, Kind::Stream, &s.name, timeout, || {
            s.read_verbatim(after, max)
        })?;
        if let Some((last, _)) = events.last() {
            self.position = last.offset;
        }
        Ok(events)
    }

    /// Saves the position as the consumer's offset (a
    /// [`reader`](Stream::reader) has none: false).
    pub fn commit(&self) -> Result<bool> {
        match &self.consumer {
            Some(consumer) => self.stream.save_offset(consumer, self.position),
            None => Ok(false),
        }
    }
}
