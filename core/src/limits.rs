//! Flow control (contract v1.2 §I): a queue's concurrency and sliding-window
//! rate limits, queue-wide and per `limit_key`. Set through the same options
//! object as the queue's other options (`alk_queue_configure`); null, the
//! default, is no limit, and setting a key to null removes that limit.

use crate::error::{err, Code, ContractError};
use crate::opts::{duration, int_in};
use crate::time;
use serde_json::{Map, Value};

/// The option keys of the limits (kept with the other option keys in
/// [`crate::opts`], which checks them by name and leaves their values to
/// this module).
pub use crate::opts::LIMIT_KEYS;

/// A queue's limits; `None` is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueLimits {
    /// At most this many of the queue's jobs running at once.
    pub max_running: Option<i64>,
    /// At most this many claims start in any window of `rate_per_ms`.
    pub rate_max: Option<i64>,
    /// The length of the queue-wide rate window, in milliseconds.
    pub rate_per_ms: Option<i64>,
    /// At most this many jobs of one `limit_key` running at once.
    pub key_max_running: Option<i64>,
    /// At most this many claims of one key's jobs in any window of `key_rate_per_ms`.
    pub key_rate_max: Option<i64>,
    /// The length of the per-key rate window, in milliseconds.
    pub key_rate_per_ms: Option<i64>,
}

impl QueueLimits {
    /// True when no limit is set: claims take the unlimited path.
    pub fn is_empty(&self) -> bool {
        *self == QueueLimits::default()
    }

    /// Returns these limits with the limit keys of `opts` merged over them
    /// (other keys are the queue options' business: `QueueOpts::merged`
    /// checks them). The result must have both or neither of each rate
    /// pair, so `{"rate_max": 10}` is fine on a queue that has a
    /// `rate_per_s` already and `InvalidOptions` on one that has none.
    ///
    /// ```
    /// use alkstore_core::QueueLimits;
    /// let rate = serde_json::json!({"rate_max": 60, "rate_per_s": 60});
    /// let l = QueueLimits::default().merged(Some(&rate)).unwrap();
    /// assert_eq!((l.rate_max, l.rate_per_ms), (Some(60), Some(60_000)));
    /// assert!(QueueLimits::default().merged(Some(&serde_json::json!({"rate_max": 60}))).is_err());
    /// assert!(l.merged(Some(&serde_json::json!({"rate_max": 10}))).is_ok());
    /// ```
    pub fn merged(self, opts: Option<&Value>) -> Result<Self, ContractError> {
        let merged = self.merged_values(opts)?;
        for (max, per, names) in [
            (
                merged.rate_max,
                merged.rate_per_ms,
                ("rate_max", "rate_per_s"),
            ),
            (
                merged.key_rate_max,
                merged.key_rate_per_ms,
                ("key_rate_max", "key_rate_per_s"),
            ),
        ] {
            if max.is_some() != per.is_some() {
                return err(
                    Code::InvalidOptions,
                    format!(
                        "{} and {} go together: give both, or set both to null",
                        names.0, names.1
                    ),
                );
            }
        }
        Ok(merged)
    }

    /// The merge without the pair check: each value is checked on its own.
    pub fn merged_values(mut self, opts: Option<&Value>) -> Result<Self, ContractError> {
        let Some(Value::Object(map)) = opts else {
            return Ok(self);
        };
        for (key, value) in map {
            let value = (!value.is_null()).then_some(value);
            let count = |v: &Value| int_in(key, v, 1, i32::MAX as i64);
            let window = |v: &Value| duration(key, v, true);
            match key.as_str() {
                "max_running" => self.max_running = value.map(count).transpose()?,
                "rate_max" => self.rate_max = value.map(count).transpose()?,
                "rate_per_s" => self.rate_per_ms = value.map(window).transpose()?,
                "key_max_running" => self.key_max_running = value.map(count).transpose()?,
                "key_rate_max" => self.key_rate_max = value.map(count).transpose()?,
                "key_rate_per_s" => self.key_rate_per_ms = value.map(window).transpose()?,
                _ => {}
            }
        }
        Ok(self)
    }

    /// Adds the limits to a queue's options object as `alk_queue_opts` shows them.
    pub fn add_json(&self, out: &mut Map<String, Value>) {
        let secs = |ms: Option<i64>| ms.map(time::ms_to_seconds_json).unwrap_or(Value::Null);
        out.insert("max_running".into(), self.max_running.into());
        out.insert("rate_max".into(), self.rate_max.into());
        out.insert("rate_per_s".into(), secs(self.rate_per_ms));
        out.insert("key_max_running".into(), self.key_max_running.into());
        out.insert("key_rate_max".into(), self.key_rate_max.into());
        out.insert("key_rate_per_s".into(), secs(self.key_rate_per_ms));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn limits_reject_zero_negative_fractional_and_lone_halves() {
        for bad in [
            json!({"max_running": 0}),
            json!({"max_running": -1}),
            json!({"max_running": 1.5}),
            json!({"max_running": "3"}),
            json!({"key_max_running": 0}),
            json!({"rate_max": 5}),
            json!({"rate_per_s": 5}),
            json!({"rate_max": 5, "rate_per_s": 0}),
            json!({"key_rate_max": 5}),
            json!({"key_rate_per_s": 1}),
            json!({"key_rate_max": 0.5, "key_rate_per_s": 1}),
        ] {
            let e = QueueLimits::default().merged(Some(&bad)).unwrap_err();
            assert_eq!(e.code, Code::InvalidOptions, "{bad}");
        }
    }

    #[test]
    fn null_removes_a_limit_and_the_json_shows_every_key() {
        let l = QueueLimits::default()
            .merged(Some(
                &json!({"max_running": 5, "key_rate_max": 2, "key_rate_per_s": 0.5}),
            ))
            .unwrap();
        let mut m = Map::new();
        l.add_json(&mut m);
        assert_eq!(
            Value::Object(m),
            json!({"max_running": 5, "rate_max": null, "rate_per_s": null, "key_max_running": null,
                   "key_rate_max": 2, "key_rate_per_s": 0.5})
        );
        let l = l
            .merged(Some(
                &json!({"key_rate_max": null, "key_rate_per_s": null, "max_running": null}),
            ))
            .unwrap();
        assert!(l.is_empty());
    }
}
