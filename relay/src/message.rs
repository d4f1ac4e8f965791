//! What one delivery carries (contract v1.3 §N2): the body and the ids and
//! headers that are the same on every redelivery of the same message.

use crate::config::Source;

/// One outbox message or stream event, ready for any sink.
#[derive(Clone, Debug)]
pub struct Message {
    /// `outbox:{outbox}:{job_id}` or `stream:{stream}:{offset}`: the same on
    /// every redelivery, for consumers (and JetStream) to drop repeats by.
    pub id: String,
    /// `outbox:{name}` or `stream:{name}`.
    pub source: String,
    /// The payload as JSON text, as the database wrote it: on SQLite the
    /// text as enqueued, on PostgreSQL jsonb's rendering.
    pub body: String,
    /// For an outbox message: the job's attempts at this delivery (1 the first time).
    pub attempt: Option<i64>,
    /// For a stream event: its offset.
    pub offset: Option<i64>,
}

impl Message {
    /// An outbox job as a message, with its payload's text.
    pub fn outbox(outbox: &str, job: &alkstore::Job, body: &str) -> Message {
        Message {
            id: format!("outbox:{outbox}:{}", job.id),
            source: Source::Outbox(outbox.into()).label(),
            body: body.to_string(),
            attempt: Some(job.attempts),
            offset: None,
        }
    }

    /// A stream event as a message, with its payload's text.
    pub fn event(stream: &str, event: &alkstore::Event, body: &str) -> Message {
        Message {
            id: format!("stream:{stream}:{}", event.offset),
            source: Source::Stream(stream.into()).label(),
            body: body.to_string(),
            attempt: None,
            offset: Some(event.offset),
        }
    }

    /// The headers every sink carries besides the id, by their §N2 names:
    /// `Alk-Source`, then `Alk-Attempt` or `Alk-Offset`.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let mut h = vec![
            ("Alk-Id", self.id.clone()),
            ("Alk-Source", self.source.clone()),
        ];
        if let Some(a) = self.attempt {
            h.push(("Alk-Attempt", a.to_string()));
        }
        if let Some(o) = self.offset {
            h.push(("Alk-Offset", o.to_string()));
        }
        h
    }
}
