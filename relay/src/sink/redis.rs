//! Redis Streams: one `XADD` per message; the reply (the entry's id) is
//! the confirmation.

use super::{scrub, Delivery, Outcome, Sink};
use crate::message::Message;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::time::Duration;
use tokio::sync::Mutex;

pub struct Redis {
    url: url::Url,
    key: String,
    timeout: Duration,
    // Opened by the first delivery; the manager reconnects by itself after.
    conn: Mutex<Option<ConnectionManager>>,
}

impl Redis {
    pub fn new(url: &url::Url, key: &str, timeout: Duration) -> Redis {
        Redis {
            url: url.clone(),
            key: key.into(),
            timeout,
            conn: Mutex::new(None),
        }
    }

    async fn connection(&self) -> Result<ConnectionManager, String> {
        let mut held = self.conn.lock().await;
        if let Some(c) = &*held {
            return Ok(c.clone());
        }
        let client = redis::Client::open(self.url.as_str()).map_err(|e| self.err(e))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
            .set_number_of_retries(1);
        let c = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(|e| self.err(e))?;
        *held = Some(c.clone());
        Ok(c)
    }

    fn err(&self, e: redis::RedisError) -> String {
        scrub(format!("redis: {e}"), &self.url)
    }
}

impl Sink for Redis {
    fn deliver<'a>(&'a self, m: &'a Message) -> Delivery<'a> {
        Box::pin(async move {
            let mut conn = match self.connection().await {
                Ok(c) => c,
                Err(e) => return Outcome::unavailable(e),
            };
            let mut fields: Vec<(&str, String)> = vec![
                ("payload", m.body.clone()),
                ("alk_id", m.id.clone()),
                ("alk_source", m.source.clone()),
            ];
            if let Some(a) = m.attempt {
                fields.push(("alk_attempt", a.to_string()));
            }
            if let Some(o) = m.offset {
                fields.push(("alk_offset", o.to_string()));
            }
            let added: redis::RedisResult<String> = redis::cmd("XADD")
                .arg(&self.key)
                .arg("*")
                .arg(&fields)
                .query_async(&mut conn)
                .await;
            match added {
                Ok(_) => Outcome::Delivered,
                // The server answered with an error (a key of another type,
                // a command refused by ACL): this message will not go in.
                Err(e)
                    if e.kind()
                        == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError)
                        || e.code() == Some("WRONGTYPE")
                        || e.code() == Some("NOPERM") =>
                {
                    Outcome::Refused(self.err(e))
                }
                Err(e) => Outcome::unavailable(self.err(e)),
            }
        })
    }
}
