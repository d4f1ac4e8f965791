//! NATS JetStream: a publish with `Nats-Msg-Id`, confirmed by the stream's
//! publish ack (so JetStream's duplicate window drops a redelivery).

use super::{scrub, Delivery, Outcome, Sink};
use crate::message::Message;
use async_nats::jetstream::context::{GetStreamByNameErrorKind, PublishErrorKind};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

/// How long a reading of the server's `max_payload` is used: the client
/// copies the whole server description for each reading, too much for
/// every message; a reconnect may reach a server with another limit.
const MAX_PAYLOAD_FOR: Duration = Duration::from_secs(5);

pub struct Nats {
    url: url::Url,
    subject: String,
    timeout: Duration,
    js: OnceCell<async_nats::jetstream::Context>,
    /// The server's `max_payload`, and when it was read.
    max_payload: Mutex<Option<(usize, Instant)>>,
}

impl Nats {
    pub fn new(url: &url::Url, subject: &str, timeout: Duration) -> Nats {
        Nats {
            url: url.clone(),
            subject: subject.into(),
            timeout,
            js: OnceCell::new(),
            max_payload: Mutex::new(None),
        }
    }

    fn max_payload(&self, js: &async_nats::jetstream::Context) -> usize {
        let mut cached = self.max_payload.lock().unwrap_or_else(|e| e.into_inner());
        match *cached {
            Some((max, at)) if at.elapsed() < MAX_PAYLOAD_FOR => max,
            _ => {
                let max = js.client().server_info().max_payload;
                *cached = Some((max, Instant::now()));
                max
            }
        }
    }

    async fn context(&self) -> Result<&async_nats::jetstream::Context, String> {
        self.js
            .get_or_try_init(|| async {
                // Once connected the client reconnects by itself; a server
                // down at the first delivery is tried again at the next.
                let client = async_nats::ConnectOptions::new()
                    .connection_timeout(self.timeout)
                    .connect(self.url.as_str())
                    .await
                    .map_err(|e| scrub(format!("nats: {e}"), &self.url))?;
                let mut js = async_nats::jetstream::new(client);
                js.set_timeout(self.timeout);
                Ok(js)
            })
            .await
    }
}

impl Sink for Nats {
    fn deliver<'a>(&'a self, m: &'a Message) -> Delivery<'a> {
        Box::pin(async move {
            let js = match self.context().await {
                Ok(js) => js,
                Err(e) => return Outcome::unavailable(e),
            };
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("Nats-Msg-Id", m.id.as_str());
            let mut size = "NATS/1.0\r\n\r\n".len() + "Nats-Msg-Id: \r\n".len() + m.id.len();
            for (k, v) in m.headers() {
                size += k.len() + v.len() + ": \r\n".len();
                headers.insert(k, v.as_str());
            }
            // Larger than the server takes (headers and body count): no
            // retry will get it in, so a refusal (its attempts spent, then
            // dead), not an outage that would hold the whole route back.
            let max = self.max_payload(js);
            size += m.body.len();
            if size > max {
                return Outcome::Refused(format!(
                    "nats: the message is {size} bytes with its headers, over the server's max_payload of {max}"
                ));
            }
            let sent = js
                .publish_with_headers(self.subject.clone(), headers, m.body.clone().into())
                .await;
            let acked = match sent {
                Ok(ack) => ack.await,
                Err(e) => Err(e),
            };
            match acked {
                Ok(_) => Outcome::Delivered,
                // "No responders" also answers while JetStream starts or
                // elects a leader: a refusal only when no stream captures
                // the subject.
                Err(e) if e.kind() == PublishErrorKind::StreamNotFound => {
                    match js.stream_by_subject(self.subject.clone()).await {
                        Err(f) if f.kind() == GetStreamByNameErrorKind::NotFound => {
                            Outcome::Refused(format!(
                                "nats: no JetStream stream captures subject {:?}",
                                self.subject
                            ))
                        }
                        _ => Outcome::unavailable(scrub(format!("nats: {e}"), &self.url)),
                    }
                }
                Err(e) => Outcome::unavailable(scrub(format!("nats: {e}"), &self.url)),
            }
        })
    }
}
