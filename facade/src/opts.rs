//! Typed options (contract §5). Only the fields you set are sent; the
//! database validates them and fills in the rest.

use serde_json::{Map, Value};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Per-queue options for [`Queue::configure`](crate::Queue::configure).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueueOpts {
    /// How long a claim is held before the job may be claimed again (default 60 s).
    pub visibility_timeout: Option<Duration>,
    /// Claims allowed before the job goes to the dead-letter state (default 5).
    pub max_attempts: Option<u32>,
    /// Base of the retry backoff `base * 2^(attempts-1)` (default 5 s).
    pub backoff_base: Option<Duration>,
    /// Cap of the retry backoff (default 3600 s).
    pub backoff_max: Option<Duration>,
    /// How long an acked job is kept as `completed`, with its result
    /// (default zero: deleted at ack). Read when each job finishes.
    pub retain_completed: Option<Duration>,
    /// How long a dead job is kept: `Some(None)` sets it back to the
    /// default, kept until requeued or purged.
    pub retain_dead: Option<Option<Duration>>,
    /// At most this many of the queue's jobs running at once, across every
    /// worker (contract v1.2 §I); `Some(None)` removes the limit.
    pub max_running: Option<Option<u32>>,
    /// At most this many claims start in any window of this length (a
    /// sliding window); `Some(None)` removes the limit.
    pub rate: Option<Option<(u32, Duration)>>,
    /// Per [`EnqueueOpts::limit_key`]: at most this many running at once.
    pub key_max_running: Option<Option<u32>>,
    /// Per [`EnqueueOpts::limit_key`]: at most this many claims in any
    /// window of this length.
    pub key_rate: Option<Option<(u32, Duration)>>,
}

impl QueueOpts {
    /// No options set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the visibility timeout.
    pub fn visibility_timeout(mut self, d: Duration) -> Self {
        self.visibility_timeout = Some(d);
        self
    }

    /// Sets the attempts allowed.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }

    /// Sets the backoff base and cap.
    pub fn backoff(mut self, base: Duration, max: Duration) -> Self {
        self.backoff_base = Some(base);
        self.backoff_max = Some(max);
        self
    }

    /// Keeps acked jobs, and the results they were acked with, this long
    /// (`alk_prune` deletes them after).
    pub fn retain_completed(mut self, d: Duration) -> Self {
        self.retain_completed = Some(d);
        self
    }

    /// Keeps dead jobs this long (`None`: until requeued or purged).
    pub fn retain_dead(mut self, d: Option<Duration>) -> Self {
        self.retain_dead = Some(d);
        self
    }

    /// Lets at most `n` jobs of the queue run at once (`None`: no limit).
    ///
    /// ```
    /// use alkstore::QueueOpts;
    /// use std::time::Duration;
    /// let opts = QueueOpts::new().max_running(Some(5)).rate(Some((60, Duration::from_secs(60))));
    /// assert_eq!(opts.to_json(), serde_json::json!({"max_running": 5, "rate_max": 60, "rate_per_s": 60.0}));
    /// ```
    pub fn max_running(mut self, n: Option<u32>) -> Self {
        self.max_running = Some(n);
        self
    }

    /// Lets at most `max` claims start in any window of `per` (`None`: no limit).
    pub fn rate(mut self, limit: Option<(u32, Duration)>) -> Self {
        self.rate = Some(limit);
        self
    }

    /// Lets at most `n` jobs of one limit key run at once (`None`: no limit).
    pub fn key_max_running(mut self, n: Option<u32>) -> Self {
        self.key_max_running = Some(n);
        self
    }

    /// Lets at most `max` claims of one limit key start in any window of
    /// `per` (`None`: no limit).
    pub fn key_rate(mut self, limit: Option<(u32, Duration)>) -> Self {
        self.key_rate = Some(limit);
        self
    }

    /// The options as the JSON object the functions take.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        put_secs(&mut m, "visibility_timeout_s", self.visibility_timeout);
        if let Some(n) = self.max_attempts {
            m.insert("max_attempts".into(), n.into());
        }
        put_secs(&mut m, "backoff_base_s", self.backoff_base);
        put_secs(&mut m, "backoff_max_s", self.backoff_max);
        put_secs(&mut m, "retain_completed_s", self.retain_completed);
        match self.retain_dead {
            Some(Some(d)) => put_secs(&mut m, "retain_dead_s", Some(d)),
            Some(None) => {
                m.insert("retain_dead_s".into(), Value::Null);
            }
            None => {}
        }
        for (key, n) in [
            ("max_running", self.max_running),
            ("key_max_running", self.key_max_running),
        ] {
            if let Some(n) = n {
                m.insert(key.into(), n.map_or(Value::Null, Value::from));
            }
        }
        for (keys, rate) in [
            (("rate_max", "rate_per_s"), self.rate),
            (("key_rate_max", "key_rate_per_s"), self.key_rate),
        ] {
            match rate {
                Some(Some((max, per))) => {
                    m.insert(keys.0.into(), max.into());
                    put_secs(&mut m, keys.1, Some(per));
                }
                Some(None) => {
                    m.insert(keys.0.into(), Value::Null);
                    m.insert(keys.1.into(), Value::Null);
                }
                None => {}
            }
        }
        Value::Object(m)
    }
}

/// A stream's retention for [`Stream::configure`](crate::Stream::configure)
/// (contract v1.1 §E). Only the fields you set are sent; `Some(None)` sets
/// one back to keeping everything. With both, an event goes when either
/// says so; `alk_prune` (workers call it) deletes it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamOpts {
    /// Keep events younger than this.
    pub retain: Option<Option<Duration>>,
    /// Keep only the newest this many events.
    pub retain_events: Option<Option<u64>>,
}

impl StreamOpts {
    /// No options set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps events this long (`None`: however long).
    pub fn retain(mut self, d: Option<Duration>) -> Self {
        self.retain = Some(d);
        self
    }

    /// Keeps the newest `n` events (`None`: however many).
    pub fn retain_events(mut self, n: Option<u64>) -> Self {
        self.retain_events = Some(n);
        self
    }

    /// The options as the JSON object `alk_stream_configure` takes.
    ///
    /// ```
    /// use alkstore::StreamOpts;
    /// use std::time::Duration;
    /// let opts = StreamOpts::new().retain(Some(Duration::from_secs(60))).retain_events(None);
    /// assert_eq!(opts.to_json(), serde_json::json!({"retain_s": 60.0, "retain_events": null}));
    /// ```
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        match self.retain {
            Some(Some(d)) => put_secs(&mut m, "retain_s", Some(d)),
            Some(None) => {
                m.insert("retain_s".into(), Value::Null);
            }
            None => {}
        }
        if let Some(n) = self.retain_events {
            m.insert("retain_events".into(), n.map_or(Value::Null, Value::from));
        }
        Value::Object(m)
    }
}

/// Per-job options for enqueue.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EnqueueOpts {
    /// Run no earlier than now + delay (not with `run_at`).
    pub delay: Option<Duration>,
    /// Run no earlier than this time (not with `delay`).
    pub run_at: Option<SystemTime>,
    /// Higher runs first (default 0).
    pub priority: Option<i32>,
    /// Overrides the queue's `max_attempts` for this job.
    pub max_attempts: Option<u32>,
    /// Dead-letter the job as `expired` if it has not started this long after enqueue.
    pub expires_in: Option<Duration>,
    /// Another enqueue with this key into the same queue (or outbox) within
    /// the TTL returns the first job's id and writes nothing — even once
    /// that job is done. Not for batches.
    pub idempotency_key: Option<String>,
    /// How long the key holds, from this enqueue (default a day).
    pub idempotency_ttl: Option<Duration>,
    /// Jobs with one group key run one at a time, in the order enqueued.
    pub group_key: Option<String>,
    /// The partition this job's per-key limits count in (a customer, a
    /// tenant, an API host): see [`QueueOpts::key_max_running`] and
    /// [`QueueOpts::key_rate`].
    pub limit_key: Option<String>,
    /// Jobs (1 to 100 ids, of any queue) that must be acked before this one
    /// runs (contract v1.2 §J). If one goes dead or is cancelled, this job
    /// goes dead at once. Empty: none. [`crate::Workflow`] enqueues a graph.
    pub depends_on: Vec<i64>,
}

impl EnqueueOpts {
    /// No options set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets a delay.
    pub fn delay(mut self, d: Duration) -> Self {
        self.delay = Some(d);
        self
    }

    /// Sets an absolute earliest run time.
    pub fn run_at(mut self, t: SystemTime) -> Self {
        self.run_at = Some(t);
        self
    }

    /// Sets the priority.
    pub fn priority(mut self, p: i32) -> Self {
        self.priority = Some(p);
        self
    }

    /// Sets this job's attempts.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }

    /// Sets an expiry.
    pub fn expires_in(mut self, d: Duration) -> Self {
        self.expires_in = Some(d);
        self
    }

    /// Makes the enqueue idempotent under `key` (see the field's docs).
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }

    /// Sets how long the idempotency key holds.
    pub fn idempotency_ttl(mut self, d: Duration) -> Self {
        self.idempotency_ttl = Some(d);
        self
    }

    /// Puts the job in an ordered group: one at a time, in id order.
    pub fn group_key(mut self, key: impl Into<String>) -> Self {
        self.group_key = Some(key.into());
        self
    }

    /// Counts the job toward the per-key limits of `key`.
    pub fn limit_key(mut self, key: impl Into<String>) -> Self {
        self.limit_key = Some(key.into());
        self
    }

    /// Runs the job only after these jobs were acked (see the field's docs).
    pub fn depends_on(mut self, job_ids: impl IntoIterator<Item = i64>) -> Self {
        self.depends_on = job_ids.into_iter().collect();
        self
    }

    /// The options as the JSON object the functions take.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        put_secs(&mut m, "delay_s", self.delay);
        if let Some(t) = self.run_at {
            let secs = t
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(-1.0);
            m.insert("run_at".into(), Value::from(secs));
        }
        if let Some(p) = self.priority {
            m.insert("priority".into(), p.into());
        }
        if let Some(n) = self.max_attempts {
            m.insert("max_attempts".into(), n.into());
        }
        put_secs(&mut m, "expires_in_s", self.expires_in);
        if let Some(k) = &self.idempotency_key {
            m.insert("idempotency_key".into(), k.as_str().into());
        }
        put_secs(&mut m, "idempotency_ttl_s", self.idempotency_ttl);
        if let Some(g) = &self.group_key {
            m.insert("group_key".into(), g.as_str().into());
        }
        if let Some(k) = &self.limit_key {
            m.insert("limit_key".into(), k.as_str().into());
        }
        if !self.depends_on.is_empty() {
            m.insert("depends_on".into(), self.depends_on.clone().into());
        }
        Value::Object(m)
    }
}

fn put_secs(m: &mut Map<String, Value>, key: &str, d: Option<Duration>) {
    if let Some(d) = d {
        m.insert(key.into(), Value::from(d.as_secs_f64()));
    }
}

/// When a schedule fires (contract v1.1 §F).
#[derive(Clone, Debug, PartialEq)]
pub enum ScheduleSpec {
    /// A 5-field cron expression, in UTC: `"0 3 * * *"` is 03:00 UTC daily.
    Cron(String),
    /// At whole multiples of this period since the Unix epoch (to the
    /// millisecond, at least 1 ms).
    Every(Duration),
}

impl ScheduleSpec {
    /// The spec as the JSON object `alk_schedule` takes.
    ///
    /// ```
    /// use alkstore::ScheduleSpec;
    /// use std::time::Duration;
    /// assert_eq!(ScheduleSpec::Every(Duration::from_secs(60)).to_json(), serde_json::json!({"every_s": 60}));
    /// assert_eq!(ScheduleSpec::Cron("*/5 * * * *".into()).to_json(), serde_json::json!({"cron": "*/5 * * * *"}));
    /// ```
    pub fn to_json(&self) -> Value {
        match self {
            ScheduleSpec::Cron(c) => serde_json::json!({ "cron": c }),
            ScheduleSpec::Every(d) if d.subsec_nanos() == 0 => {
                serde_json::json!({ "every_s": d.as_secs() })
            }
            ScheduleSpec::Every(d) => serde_json::json!({ "every_s": d.as_secs_f64() }),
        }
    }
}
