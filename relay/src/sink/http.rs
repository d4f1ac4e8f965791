//! Webhooks: one POST per message, with the Standard Webhooks headers
//! (`webhook-id`, `webhook-timestamp`, `webhook-signature`).

use super::{scrub, Delivery, Outcome, Sink};
use crate::message::Message;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::io::Read;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How much of a refusing answer's body becomes the message's error.
const ANSWER_BYTES: u64 = 1000;

pub struct Http {
    agent: ureq::Agent,
    url: url::Url,
    secret: Option<Vec<u8>>,
    headers: Vec<(String, String)>,
}

impl Http {
    pub fn new(
        url: &url::Url,
        secret: Option<Vec<u8>>,
        headers: Vec<(String, String)>,
        timeout: Duration,
    ) -> Http {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            // Statuses are answers to read, not errors.
            .http_status_as_error(false)
            // A redirect is the endpoint's business; following it would
            // re-send the body elsewhere.
            .max_redirects(0)
            .build()
            .new_agent();
        Http {
            agent,
            url: url.clone(),
            secret,
            headers,
        }
    }
}

/// `v1,` and base64 of HMAC-SHA256(`{id}.{timestamp}.{body}`) keyed by the
/// secret's bytes (Standard Webhooks).
pub fn signature(secret: &[u8], id: &str, timestamp: u64, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    )
}

/// The longest `Retry-After` honoured: a day (a hostile or mistaken value
/// must not park a route for ever).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(86_400);

/// A `Retry-After` value: seconds, or an HTTP date (how long until then),
/// at most [`MAX_RETRY_AFTER`].
pub fn retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    let after = if let Ok(s) = value.parse::<u64>() {
        Duration::from_secs(s)
    } else {
        let at = httpdate::parse_http_date(value).ok()?;
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO)
    };
    Some(after.min(MAX_RETRY_AFTER))
}

impl Sink for Http {
    fn deliver<'a>(&'a self, m: &'a Message) -> Delivery<'a> {
        let agent = self.agent.clone();
        let url = self.url.clone();
        let secret = self.secret.clone();
        let extra = self.headers.clone();
        let m = m.clone();
        Box::pin(async move {
            let shown = url.clone();
            let sent = tokio::task::spawn_blocking(move || {
                let timestamp = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs())
                    .unwrap_or(0);
                let mut req = agent
                    .post(url.as_str())
                    .header("content-type", "application/json")
                    .header("webhook-id", &m.id)
                    .header("webhook-timestamp", timestamp.to_string());
                if let Some(secret) = &secret {
                    req = req.header(
                        "webhook-signature",
                        signature(secret, &m.id, timestamp, &m.body),
                    );
                }
                for (k, v) in m.headers() {
                    req = req.header(k, v);
                }
                for (k, v) in &extra {
                    req = req.header(k.as_str(), v.as_str());
                }
                let mut resp = req.send(m.body.as_bytes())?;
                let status = resp.status().as_u16();
                let after = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(retry_after);
                let mut answer = String::new();
                if !(200..300).contains(&status) {
                    let _ = resp
                        .body_mut()
                        .as_reader()
                        .take(ANSWER_BYTES)
                        .read_to_string(&mut answer);
                }
                Ok::<_, ureq::Error>((status, after, answer))
            })
            .await;
            match sent {
                Err(e) => Outcome::unavailable(format!("delivery task failed: {e}")),
                Ok(Err(e)) => Outcome::unavailable(scrub(format!("POST failed: {e}"), &shown)),
                Ok(Ok((status, _, _))) if (200..300).contains(&status) => Outcome::Delivered,
                Ok(Ok((status, after, answer))) => {
                    let error = format!("HTTP {status}: {}", answer.trim());
                    // A refusal is a 4xx other than 408 and 429; anything
                    // else (5xx, 408, 429, a redirect not followed) is
                    // tried again later.
                    if (400..500).contains(&status) && status != 408 && status != 429 {
                        Outcome::Refused(error)
                    } else {
                        Outcome::Unavailable {
                            error,
                            retry_after: after,
                        }
                    }
                }
            }
        })
    }
}
