//! What the functions return, typed.

use crate::error::{Error, Result};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A claimed job.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// The job's id (unique across queues).
    pub id: i64,
    /// Its queue (an outbox's backing queue for outbox jobs).
    pub queue: String,
    /// Its payload.
    pub payload: Value,
    /// Claims so far, this one included.
    pub attempts: i64,
    /// Claims allowed.
    pub max_attempts: i64,
    /// When this claim expires, RFC 3339 UTC with milliseconds.
    pub claim_expires_at: String,
}

/// A claimed job whose payload cannot be read here: its id and why.
pub(crate) type Unreadable = (i64, String);

impl Job {
    /// The payload as a typed value.
    pub fn payload_as<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_value(self.payload.clone()).map_err(Error::decode)
    }

    /// The jobs of `alk_claim`'s result, and the `(id, reason)` of each one
    /// whose payload this crate cannot read (see [`crate::sql::UNREADABLE`]):
    /// those the caller fails (`alk_fail`) rather than hands out.
    pub(crate) fn from_claim(v: &Value) -> Result<(Vec<Job>, Vec<Unreadable>)> {
        let (mut jobs, mut unreadable) = (Vec::new(), Vec::new());
        for row in v.as_array().map(Vec::as_slice).unwrap_or_default() {
            match row.get(crate::sql::UNREADABLE) {
                Some(reason) => unreadable.push((
                    row["id"].as_i64().unwrap_or_default(),
                    format!("alkstore: the payload cannot be read by this client ({reason})"),
                )),
                None => jobs.push(Job::from_json(row)?),
            }
        }
        Ok((jobs, unreadable))
    }

    /// A job from one row of `alk_claim`'s result, as the calls of
    /// [`crate::sql`] return it.
    pub fn from_json(v: &Value) -> Result<Job> {
        Ok(Job {
            id: int(v, "id")?,
            queue: text(v, "queue")?,
            payload: v["payload"].clone(),
            attempts: int(v, "attempts")?,
            max_attempts: int(v, "max_attempts")?,
            claim_expires_at: time(v, "claim_expires_at")?,
        })
    }
}

/// The rows of a claim's or a read's result, each with its payload's JSON
/// text as the database wrote it (contract v1.3 §N2: SQLite keeps the text
/// as given). A payload this crate's JSON cannot hold is null in the row
/// and whole in its text.
#[cfg(feature = "blocking")]
pub(crate) fn verbatim<T>(
    text: Option<&str>,
    row: impl Fn(&Value) -> Result<T>,
) -> Result<Vec<(T, String)>> {
    #[derive(serde::Deserialize)]
    struct Payload<'a> {
        #[serde(borrow)]
        payload: Option<&'a serde_json::value::RawValue>,
    }
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    let rows = crate::sql::tolerant(text)?;
    let payloads: Vec<Payload<'_>> = serde_json::from_str(text).map_err(Error::decode)?;
    let rows = rows.as_array().map(Vec::as_slice).unwrap_or_default();
    if rows.len() != payloads.len() {
        return Err(Error::decode(format!(
            "{} rows but {} payloads",
            rows.len(),
            payloads.len()
        )));
    }
    rows.iter()
        .zip(payloads)
        .map(|(r, p)| Ok((row(r)?, p.payload.map_or("null", |p| p.get()).to_string())))
        .collect()
}

/// A stream event.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Its offset in the stream: 1, 2, 3, … in commit order.
    pub offset: i64,
    /// Its id, given at publish (what `publish` returned).
    pub id: i64,
    /// The key given at publish, if any.
    pub key: Option<String>,
    /// Its payload.
    pub payload: Value,
    /// When it was published, RFC 3339 UTC with milliseconds.
    pub created_at: String,
}

/// A stream's kept offsets and retention (`alk_stream_info`).
#[derive(Clone, Debug, PartialEq)]
pub struct StreamInfo {
    /// The first kept offset (0 when no event is kept).
    pub first_offset: i64,
    /// The last kept offset (0 when no event is kept).
    pub last_offset: i64,
    /// Events younger than this are kept (`None`: however old).
    pub retain: Option<std::time::Duration>,
    /// Only the newest this many are kept (`None`: however many).
    pub retain_events: Option<u64>,
}

impl StreamInfo {
    /// From `alk_stream_info`'s document.
    pub fn from_json(v: &Value) -> Result<StreamInfo> {
        Ok(StreamInfo {
            first_offset: int(v, "first_offset")?,
            last_offset: int(v, "last_offset")?,
            retain: v["retain_s"]
                .as_f64()
                .map(std::time::Duration::from_secs_f64),
            retain_events: v["retain_events"].as_u64(),
        })
    }
}

impl Event {
    /// The payload as a typed value.
    pub fn payload_as<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_value(self.payload.clone()).map_err(Error::decode)
    }

    /// The events of an `alk_read` result, and the offset of its last row,
    /// readable or not. An event whose payload this crate cannot read is
    /// skipped with a warning through `tracing`: a consumer must get past it.
    #[cfg(any(
        feature = "blocking",
        feature = "sqlx-postgres",
        feature = "sqlx-sqlite",
        feature = "tokio-postgres"
    ))]
    pub(crate) fn page(v: &Value, stream: &str) -> Result<(Vec<Event>, Option<i64>)> {
        let rows = v.as_array().map(Vec::as_slice).unwrap_or_default();
        let mut out = Vec::new();
        for row in rows {
            if let Some(reason) = row.get(crate::sql::UNREADABLE) {
                tracing::warn!(
                    offset = %row["offset"], stream, %reason,
                    "alkstore: skipping an event whose payload cannot be read"
                );
                continue;
            }
            out.push(Event::from_json(row)?);
        }
        Ok((out, rows.last().and_then(|r| r["offset"].as_i64())))
    }

    /// An event from one row of `alk_read`'s result.
    pub fn from_json(v: &Value) -> Result<Event> {
        Ok(Event {
            offset: int(v, "offset")?,
            id: int(v, "id")?,
            key: v["key"].as_str().map(str::to_string),
            payload: v["payload"].clone(),
            created_at: time(v, "created_at")?,
        })
    }
}

/// A notification received by a [`Subscription`](crate::Subscription).
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    /// The alkstore channel.
    pub channel: String,
    /// The payload given to notify.
    pub payload: Value,
}

/// What [`Queue::retry`](crate::Queue::retry) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retried {
    /// Back to pending, to run again after the delay.
    Pending,
    /// Its attempts were used up: dead-lettered.
    Dead,
    /// The claim was not held (any more): nothing changed.
    NotHeld,
}

impl Retried {
    /// From `alk_retry`'s result: the job's new state, or null.
    pub fn from_state(v: &Value) -> Retried {
        match v.as_str() {
            Some("pending") => Retried::Pending,
            Some("dead") => Retried::Dead,
            _ => Retried::NotHeld,
        }
    }
}

fn bad(what: &str, v: &Value) -> Error {
    Error::decode(format!("unexpected {what} in {v}"))
}

pub(crate) fn int(v: &Value, key: &str) -> Result<i64> {
    v[key].as_i64().ok_or_else(|| bad(key, v))
}

fn text(v: &Value, key: &str) -> Result<String> {
    v[key]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| bad(key, v))
}

/// Times come as `…Z` from SQLite and `…+00:00` (microseconds) from
/// PostgreSQL rows: both are given back as `2026-11-29T22:24:05.123Z`.
fn time(v: &Value, key: &str) -> Result<String> {
    let s = v[key].as_str().ok_or_else(|| bad(key, v))?;
    let ms = alkstore_core::time::parse_rfc3339_ms(s).ok_or_else(|| bad(key, v))?;
    Ok(alkstore_core::time::format_ms(ms))
}
