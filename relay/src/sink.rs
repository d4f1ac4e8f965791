//! The one small trait every sink is behind, and what a delivery can come
//! to (contract v1.3 §N3): delivered, the sink unavailable for now (no
//! attempt spent), or this message refused (an attempt spent).

mod amqp;
mod http;
mod nats;
mod redis;

use crate::config::SinkSpec;
use crate::message::Message;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// A delivery in progress.
pub type Delivery<'a> = Pin<Box<dyn Future<Output = Outcome> + Send + 'a>>;

/// A place messages are delivered to. `deliver` resolves only once the
/// sink confirmed the message (a publish ack, a publisher confirm, an
/// `XADD` reply, an HTTP 2xx) or could not take it; many deliveries may be
/// in flight at once.
pub trait Sink: Send + Sync {
    /// Delivers one message.
    fn deliver<'a>(&'a self, message: &'a Message) -> Delivery<'a>;
}

/// What one delivery came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The sink confirmed it.
    Delivered,
    /// The sink is unreachable, timed out, or asked to be tried later (HTTP
    /// 5xx, 408, 429): tried again after a backoff, no attempt spent.
    Unavailable {
        /// What happened, without passwords.
        error: String,
        /// How long the sink asked to be left alone (`Retry-After`).
        retry_after: Option<Duration>,
    },
    /// The sink refused this message for good (HTTP 4xx, an unroutable
    /// AMQP message, a subject no JetStream stream captures): an attempt
    /// spent; the sink's answer is the error.
    Refused(String),
}

impl Outcome {
    /// Unavailable, with no `Retry-After`.
    pub fn unavailable(error: impl Into<String>) -> Outcome {
        Outcome::Unavailable {
            error: error.into(),
            retry_after: None,
        }
    }
}

/// The sink a route's spec names; connections are opened as deliveries
/// need them (a sink down at start is a sink unavailable, not an error).
pub fn open(spec: &SinkSpec, timeout: Duration) -> Arc<dyn Sink> {
    match spec {
        SinkSpec::Nats { url, subject } => Arc::new(nats::Nats::new(url, subject, timeout)),
        SinkSpec::Amqp {
            url,
            exchange,
            routing_key,
        } => Arc::new(amqp::Amqp::new(url, exchange, routing_key)),
        SinkSpec::Redis { url, key } => Arc::new(redis::Redis::new(url, key, timeout)),
        SinkSpec::Http {
            url,
            secret,
            headers,
        } => Arc::new(http::Http::new(
            url,
            secret.clone(),
            headers.clone(),
            timeout,
        )),
    }
}

/// An error's text with the sink URL's password (if any) taken out.
pub(crate) fn scrub(text: String, url: &url::Url) -> String {
    match url.password() {
        Some(p) if !p.is_empty() => text.replace(p, "***"),
        _ => text,
    }
}
