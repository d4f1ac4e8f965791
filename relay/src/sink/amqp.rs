//! RabbitMQ (AMQP 0-9-1): a persistent, mandatory publish on a channel in
//! confirm mode; the broker's confirm is the confirmation, a message
//! returned unroutable a refusal.

use super::{scrub, Delivery, Outcome, Sink};
use crate::message::Message;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::publisher_confirm::Confirmation;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use tokio::sync::Mutex;

pub struct Amqp {
    url: url::Url,
    exchange: String,
    routing_key: String,
    // The connection and its confirm channel; dropped on an error and
    // opened again by the next delivery.
    chan: Mutex<Option<(Connection, Channel)>>,
}

impl Amqp {
    pub fn new(url: &url::Url, exchange: &str, routing_key: &str) -> Amqp {
        Amqp {
            url: url.clone(),
            exchange: exchange.into(),
            routing_key: routing_key.into(),
            chan: Mutex::new(None),
        }
    }

    fn err(&self, e: lapin::Error) -> String {
        scrub(format!("amqp: {e}"), &self.url)
    }

    async fn channel(&self) -> Result<Channel, String> {
        let mut held = self.chan.lock().await;
        if let Some((conn, chan)) = &*held {
            if conn.status().connected() && chan.status().connected() {
                return Ok(chan.clone());
            }
        }
        *held = None;
        let conn = Connection::connect(self.url.as_str(), ConnectionProperties::default())
            .await
            .map_err(|e| self.err(e))?;
        let chan = conn.create_channel().await.map_err(|e| self.err(e))?;
        chan.confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| self.err(e))?;
        *held = Some((conn, chan.clone()));
        Ok(chan)
    }
}

impl Sink for Amqp {
    fn deliver<'a>(&'a self, m: &'a Message) -> Delivery<'a> {
        Box::pin(async move {
            let chan = match self.channel().await {
                Ok(c) => c,
                Err(e) => return Outcome::unavailable(e),
            };
            let mut headers = FieldTable::default();
            for (k, v) in m.headers() {
                headers.insert(ShortString::from(k), AMQPValue::LongString(v.into()));
            }
            let props = BasicProperties::default()
                .with_message_id(ShortString::from(m.id.as_str()))
                .with_content_type(ShortString::from("application/json"))
                .with_delivery_mode(2)
                .with_headers(headers);
            let opts = BasicPublishOptions {
                mandatory: true,
                ..Default::default()
            };
            let published = chan
                .basic_publish(
                    self.exchange.as_str(),
                    self.routing_key.as_str(),
                    opts,
                    m.body.as_bytes(),
                    props,
                )
                .await;
            let confirm = match published {
                Ok(c) => c.await,
                Err(e) => Err(e),
            };
            match confirm {
                Ok(Confirmation::Ack(None)) => Outcome::Delivered,
                // The channel is not in confirm mode (after a reconnect):
                // no confirmation, so not delivered.
                Ok(Confirmation::NotRequested) => {
                    *self.chan.lock().await = None;
                    Outcome::unavailable("amqp: the broker did not confirm the publish")
                }
                Ok(Confirmation::Ack(Some(returned))) | Ok(Confirmation::Nack(Some(returned))) => {
                    Outcome::Refused(format!(
                        "amqp: returned unroutable by exchange {:?} for routing key {:?}: {} {}",
                        self.exchange, self.routing_key, returned.reply_code, returned.reply_text
                    ))
                }
                Ok(Confirmation::Nack(None)) => {
                    Outcome::unavailable("amqp: the broker nacked the message")
                }
                Err(e) => {
                    *self.chan.lock().await = None;
                    Outcome::unavailable(self.err(e))
                }
            }
        })
    }
}
