//! Queue and enqueue options (contract §5), parsed from JSON objects.
//!
//! Unknown keys, wrong types, out-of-range values and contradictory keys are
//! all `InvalidOptions`, so a typo never silently does nothing. JSON `null`
//! as a value is a wrong type, not "default" — except `retain_dead_s`, whose
//! default is null (keep dead jobs), so null is how it is set back.

use crate::error::{err, Code, ContractError};
use crate::time;
use serde_json::{Map, Value};

/// The longest duration any option takes: 100 years, in seconds.
pub const MAX_DURATION_S: f64 = 3_153_600_000.0;

/// The longest a wake-up registration (`alk_listen_*`) lasts per call, in
/// seconds (contract v1.1 §A3).
pub const MAX_WAIT_TTL_S: f64 = 300.0;

/// A PostgreSQL session registered to wait (`alk_listen_*`) holds one
/// advisory lock per bucket of names, of this many buckets per kind (queues
/// with outboxes, streams), for the session's life: however many names it
/// waits on, it holds at most twice this many locks in the server's shared
/// lock table (one lock per name let one session fill it for the whole
/// cluster). A power of two.
pub const WAIT_LOCK_BUCKETS: usize = 64;

/// A notification payload's compact JSON text must be shorter than this
/// many bytes (contract v1 §8, as `pg_notify`).
pub const MAX_NOTIFY_BYTES: usize = 8000;

/// The length of JSON text without whitespace outside strings, with each
/// string escape counted as the canonical text writes it: how the
/// notification limit is measured on both engines (contract v1.1 §G).
/// Canonical is PostgreSQL's jsonb text: `\u00e9` is written `é` (2 bytes),
/// `\/` is `/`, a control character is `\n`-style or `\u001f`, `"` and `\`
/// stay escaped.
///
/// ```
/// use alkstore_core::opts::compact_json_len;
/// assert_eq!(compact_json_len(r#"{ "a" : [1, 2], "b": " x " }"#), 21);
/// assert_eq!(compact_json_len(r#""\u00e9""#), compact_json_len("\"é\""));
/// ```
pub fn compact_json_len(text: &str) -> usize {
    let b = text.as_bytes();
    let hex = |at: usize| -> Option<u32> {
        let h = b.get(at..at + 4)?;
        u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()
    };
    let (mut n, mut i, mut in_string) = (0, 0, false);
    while i < b.len() {
        let c = b[i];
        if !in_string {
            if !matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
                n += 1;
                in_string = c == b'"';
            }
            i += 1;
            continue;
        }
        match c {
            b'"' => {
                in_string = false;
                n += 1;
                i += 1;
            }
            b'\\' => match b.get(i + 1) {
                Some(b'/') => {
                    n += 1;
                    i += 2;
                }
                Some(b'u') => {
                    let Some(cp) = hex(i + 2) else {
                        n += 2; // not JSON: counted as it stands
                        i += 2;
                        continue;
                    };
                    i += 6;
                    n += match cp {
                        0x08 | 0x09 | 0x0a | 0x0c | 0x0d | 0x22 | 0x5c => 2,
                        0..=0x1f => 6,
                        0xd800..=0xdbff
                            if b.get(i..i + 2) == Some(b"\\u")
                                && hex(i + 2).is_some_and(|lo| (0xdc00..=0xdfff).contains(&lo)) =>
                        {
                            i += 6;
                            4
                        }
                        0xd800..=0xdfff => 6,
                        _ => char::from_u32(cp).map_or(6, char::len_utf8),
                    };
                }
                Some(_) => {
                    n += 2;
                    i += 2;
                }
                None => {
                    n += 1;
                    i += 1;
                }
            },
            _ => {
                n += 1;
                i += 1;
            }
        }
    }
    n
}

/// The most rows one `alk_prune` call deletes (contract v1.1 §G).
pub const MAX_PRUNE_ROWS: i64 = 100_000;

/// The largest `max_jobs` / `max_events` a call may ask for.
pub const MAX_BATCH: i64 = 1000;

/// Per-queue options, stored in the database and stamped onto each job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueOpts {
    /// How long a claim is held before the job may be claimed again.
    pub visibility_timeout_ms: i64,
    /// Claims allowed before the job goes to the dead-letter state.
    pub max_attempts: i32,
    /// Base of the exponential retry delay.
    pub backoff_base_ms: i64,
    /// Cap of the computed retry delay.
    pub backoff_max_ms: i64,
    /// How long an acked job is kept as `completed` (0: deleted at ack).
    /// Read when a job finishes, not stamped (contract v1.1 §C3, §G).
    pub retain_completed_ms: i64,
    /// How long a dead job is kept (`None`: until requeued or purged).
    pub retain_dead_ms: Option<i64>,
}

impl Default for QueueOpts {
    fn default() -> Self {
        QueueOpts {
            visibility_timeout_ms: 60_000,
            max_attempts: 5,
            backoff_base_ms: 5_000,
            backoff_max_ms: 3_600_000,
            retain_completed_ms: 0,
            retain_dead_ms: None,
        }
    }
}

/// The option keys of the limits, a part of [`QUEUE_KEYS`]; their values are
/// read by [`crate::limits`] (flow control, contract v1.2 §I).
pub const LIMIT_KEYS: [&str; 6] = [
    "max_running",
    "rate_max",
    "rate_per_s",
    "key_max_running",
    "key_rate_max",
    "key_rate_per_s",
];

/// The option keys `alk_queue_configure` accepts: the options stamped on
/// jobs and read when they finish, then the limits ([`crate::limits`]).
pub const QUEUE_KEYS: [&str; 12] = [
    "visibility_timeout_s",
    "max_attempts",
    "backoff_base_s",
    "backoff_max_s",
    "retain_completed_s",
    "retain_dead_s",
    "max_running",
    "rate_max",
    "rate_per_s",
    "key_max_running",
    "key_rate_max",
    "key_rate_per_s",
];

/// The option keys the enqueue functions accept.
pub const ENQUEUE_KEYS: [&str; 10] = [
    "delay_s",
    "run_at",
    "priority",
    "max_attempts",
    "expires_in_s",
    "idempotency_key",
    "idempotency_ttl_s",
    "group_key",
    "limit_key",
    "depends_on",
];

/// The most jobs one `depends_on` may name (contract v1.2 §J).
pub const MAX_DEPENDENCIES: usize = 100;

/// How long alkstore remembers that a job whose row is gone ended without
/// an ack (cancelled, purged, or dead and then pruned), so that a later
/// `depends_on` naming it makes its dependent dead rather than runnable:
/// seven days. Past that, such an id is forgotten, and with it every gone id
/// up to it: an enqueue naming one is `InvalidOptions` (docs/sql-api.md
/// "Dependencies and workflows").
pub const DEPENDENCY_MEMORY_MS: i64 = 7 * 86_400_000;

/// How long an idempotency key holds when no `idempotency_ttl_s` is given.
pub const DEFAULT_IDEMPOTENCY_TTL_MS: i64 = 86_400_000;

/// The longest `idempotency_key`, `group_key` or `limit_key`, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;

impl QueueOpts {
    /// The fixed options of every outbox's backing queue (contract §6).
    pub fn outbox() -> Self {
        QueueOpts::default()
    }

    /// Returns these options with the keys of `opts` merged over them.
    ///
    /// ```
    /// use alkstore_core::QueueOpts;
    /// let opts = serde_json::json!({"max_attempts": 3, "visibility_timeout_s": 0.5});
    /// let merged = QueueOpts::default().merged(Some(&opts)).unwrap();
    /// assert_eq!((merged.max_attempts, merged.visibility_timeout_ms), (3, 500));
    /// assert_eq!(merged.backoff_base_ms, 5_000);
    /// ```
    pub fn merged(mut self, opts: Option<&Value>) -> Result<Self, ContractError> {
        let Some(map) = object(opts, "queue", &QUEUE_KEYS)? else {
            return Ok(self);
        };
        for (key, value) in map {
            match key.as_str() {
                "visibility_timeout_s" => self.visibility_timeout_ms = duration(key, value, true)?,
                "max_attempts" => self.max_attempts = max_attempts(value)?,
                "backoff_base_s" => self.backoff_base_ms = duration(key, value, false)?,
                "backoff_max_s" => self.backoff_max_ms = duration(key, value, false)?,
                "retain_completed_s" => self.retain_completed_ms = duration(key, value, false)?,
                // null: keep dead jobs until requeued or purged (the default).
                "retain_dead_s" if value.is_null() => self.retain_dead_ms = None,
                "retain_dead_s" => self.retain_dead_ms = Some(duration(key, value, false)?),
                // The limits: QueueLimits::merged.
                k if LIMIT_KEYS.contains(&k) => {}
                _ => unreachable!("object() rejects unknown keys"),
            }
        }
        Ok(self)
    }

    /// The resolved options as the JSON object `alk_queue_opts` returns.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "visibility_timeout_s": time::ms_to_seconds_json(self.visibility_timeout_ms),
            "max_attempts": self.max_attempts,
            "backoff_base_s": time::ms_to_seconds_json(self.backoff_base_ms),
            "backoff_max_s": time::ms_to_seconds_json(self.backoff_max_ms),
            "retain_completed_s": time::ms_to_seconds_json(self.retain_completed_ms),
            "retain_dead_s": self.retain_dead_ms.map(time::ms_to_seconds_json),
        })
    }
}

/// A stream's retention (contract v1.1 §E); `None` keeps everything.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamOpts {
    /// Events older than this many milliseconds may be pruned.
    pub retain_ms: Option<i64>,
    /// Only the newest this many events are kept.
    pub retain_events: Option<i64>,
}

const STREAM_KEYS: [&str; 2] = ["retain_s", "retain_events"];

impl StreamOpts {
    /// Returns these options with the keys of `opts` merged over them; a
    /// key set to null goes back to keeping everything.
    ///
    /// ```
    /// use alkstore_core::opts::StreamOpts;
    /// let kept = StreamOpts { retain_ms: Some(60_000), retain_events: Some(10) };
    /// let merged = kept.merged(Some(&serde_json::json!({"retain_events": null}))).unwrap();
    /// assert_eq!(merged, StreamOpts { retain_ms: Some(60_000), retain_events: None });
    /// assert!(kept.merged(Some(&serde_json::json!({"retain_s": 0}))).is_err());
    /// ```
    pub fn merged(mut self, opts: Option<&Value>) -> Result<Self, ContractError> {
        let Some(map) = object(opts, "stream", &STREAM_KEYS)? else {
            return Ok(self);
        };
        for (key, value) in map {
            let value = (!value.is_null()).then_some(value);
            match key.as_str() {
                "retain_s" => self.retain_ms = value.map(|v| duration(key, v, true)).transpose()?,
                "retain_events" => {
                    self.retain_events = value.map(|v| int_in(key, v, 1, i64::MAX)).transpose()?
                }
                _ => unreachable!("object() rejects unknown keys"),
            }
        }
        Ok(self)
    }

    /// The options as `alk_stream_configure` and `alk_stream_info` show them.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "retain_s": self.retain_ms.map(time::ms_to_seconds_json),
            "retain_events": self.retain_events,
        })
    }
}

/// The retry delay when the caller gives none: `base * 2^(attempts-1)`, capped.
///
/// ```
/// assert_eq!(alkstore_core::opts::backoff_ms(5_000, 3_600_000, 1), 5_000);
/// assert_eq!(alkstore_core::opts::backoff_ms(5_000, 3_600_000, 3), 20_000);
/// assert_eq!(alkstore_core::opts::backoff_ms(5_000, 3_600_000, 60), 3_600_000);
/// ```
pub fn backoff_ms(base_ms: i64, max_ms: i64, attempts: i64) -> i64 {
    let exp = (attempts.max(1) - 1).min(62) as u32;
    base_ms.saturating_mul(1i64 << exp).min(max_ms)
}

/// Per-job options, resolved at enqueue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EnqueueOpts {
    /// Run no earlier than now + delay.
    pub delay_ms: Option<i64>,
    /// Absolute earliest run time, epoch milliseconds.
    pub run_at_ms: Option<i64>,
    /// Higher runs first.
    pub priority: i32,
    /// Overrides the queue's `max_attempts` for this job.
    pub max_attempts: Option<i32>,
    /// Dead-letter the job with `expired` if it has not started this long after enqueue.
    pub expires_in_ms: Option<i64>,
    /// Another enqueue with this key within the TTL returns the first job's
    /// id and writes nothing (contract v1.1 §C1).
    pub idempotency_key: Option<String>,
    /// How long the key holds, counted from this enqueue (`None`: a day).
    pub idempotency_ttl_ms: Option<i64>,
    /// Jobs of one group run one at a time, in id order (contract v1.1 §C2).
    pub group_key: Option<String>,
    /// The partition the job's per-key limits count in (contract v1.2 §I).
    pub limit_key: Option<String>,
    /// Jobs that must be acked before this one runs (contract v1.2 §J):
    /// 1 to [`MAX_DEPENDENCIES`] ids, duplicates dropped, in the order given.
    pub depends_on: Option<Vec<i64>>,
}

impl EnqueueOpts {
    /// Parses enqueue options; `None` means defaults.
    ///
    /// ```
    /// use alkstore_core::{Code, EnqueueOpts};
    /// let bad = serde_json::json!({"delay_s": 1, "run_at": 0});
    /// assert_eq!(EnqueueOpts::parse(Some(&bad)).unwrap_err().code, Code::InvalidOptions);
    /// ```
    pub fn parse(opts: Option<&Value>) -> Result<Self, ContractError> {
        let mut out = EnqueueOpts::default();
        let Some(map) = object(opts, "enqueue", &ENQUEUE_KEYS)? else {
            return Ok(out);
        };
        for (key, value) in map {
            match key.as_str() {
                "delay_s" => out.delay_ms = Some(duration(key, value, false)?),
                "run_at" => out.run_at_ms = Some(run_at(value)?),
                "priority" => {
                    out.priority = int_in(key, value, i32::MIN as i64, i32::MAX as i64)? as i32
                }
                "max_attempts" => out.max_attempts = Some(max_attempts(value)?),
                "expires_in_s" => out.expires_in_ms = Some(duration(key, value, true)?),
                "idempotency_key" => out.idempotency_key = Some(key_text(key, value)?),
                "idempotency_ttl_s" => out.idempotency_ttl_ms = Some(duration(key, value, true)?),
                "group_key" => out.group_key = Some(key_text(key, value)?),
                "limit_key" => out.limit_key = Some(key_text(key, value)?),
                "depends_on" => out.depends_on = Some(depends_on(value)?),
                _ => unreachable!("object() rejects unknown keys"),
            }
        }
        if out.delay_ms.is_some() && out.run_at_ms.is_some() {
            return err(
                Code::InvalidOptions,
                "delay_s and run_at cannot be given together",
            );
        }
        Ok(out)
    }

    /// Parses the options of a batch enqueue, which apply to every payload:
    /// an idempotency key (or its TTL) there is `InvalidOptions` (§C1).
    pub fn parse_batch(opts: Option<&Value>) -> Result<Self, ContractError> {
        let out = Self::parse(opts)?;
        if out.idempotency_key.is_some() || out.idempotency_ttl_ms.is_some() {
            return err(
                Code::InvalidOptions,
                "idempotency_key and idempotency_ttl_s cannot be given to a batch enqueue: \
                 its options apply to every payload",
            );
        }
        Ok(out)
    }

    /// How long the idempotency key holds, in milliseconds.
    pub fn idempotency_ttl_ms(&self) -> i64 {
        self.idempotency_ttl_ms
            .unwrap_or(DEFAULT_IDEMPOTENCY_TTL_MS)
    }

    /// The job's `run_at` given the time of enqueue.
    pub fn run_at(&self, now_ms: i64) -> i64 {
        self.run_at_ms
            .unwrap_or(now_ms + self.delay_ms.unwrap_or(0))
    }

    /// The job's `expires_at` given the time of enqueue.
    pub fn expires_at(&self, now_ms: i64) -> Option<i64> {
        self.expires_in_ms.map(|ms| now_ms + ms)
    }
}

/// Parses option text as the SQLite functions receive it (`None` = SQL NULL).
pub fn parse_text(text: Option<&str>) -> Result<Option<Value>, ContractError> {
    match text {
        None => Ok(None),
        Some(t) => serde_json::from_str(t).map(Some).map_err(|e| {
            ContractError::new(
                Code::InvalidOptions,
                format!("options are not valid JSON: {e}"),
            )
        }),
    }
}

fn object<'a>(
    opts: Option<&'a Value>,
    what: &str,
    keys: &[&str],
) -> Result<Option<&'a Map<String, Value>>, ContractError> {
    let map = match opts {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(map)) => map,
        Some(other) => {
            return err(
                Code::InvalidOptions,
                format!(
                    "{what} options must be a JSON object, got {}",
                    crate::names::excerpt(&other.to_string())
                ),
            )
        }
    };
    if let Some(key) = map.keys().find(|k| !keys.contains(&k.as_str())) {
        return err(
            Code::InvalidOptions,
            format!(
                "unknown {what} option {} (expected one of: {})",
                crate::names::quote(key),
                keys.join(", ")
            ),
        );
    }
    Ok(Some(map))
}

fn number(key: &str, value: &Value) -> Result<f64, ContractError> {
    value.as_f64().ok_or_else(|| {
        ContractError::new(
            Code::InvalidOptions,
            format!(
                "{key} must be a number, got {}",
                crate::names::excerpt(&value.to_string())
            ),
        )
    })
}

pub(crate) fn duration(key: &str, value: &Value, positive: bool) -> Result<i64, ContractError> {
    let s = number(key, value)?;
    let ms = time::seconds_to_ms(s);
    if !(0.0..=MAX_DURATION_S).contains(&s) || (positive && ms < 1) {
        let range = if positive {
            "at least 0.001"
        } else {
            "at least 0"
        };
        return err(
            Code::InvalidOptions,
            format!(
                "{key} must be {range} and at most {MAX_DURATION_S} seconds, got {}",
                crate::names::excerpt(&value.to_string())
            ),
        );
    }
    Ok(ms)
}

/// A JSON number's whole value, however it is written; `None` for a
/// fraction, anything else, or a value that is not exact.
fn whole(value: &Value) -> Option<i64> {
    let x = value.as_number()?;
    if x.is_i64() {
        return x.as_i64();
    }
    if x.is_u64() {
        return None; // above i64::MAX
    }
    // 7.0 or 7e0 is read as a float: whole, and below 2^63 (which would
    // round to i64::MAX; PostgreSQL's bigint refuses it). Beyond 2^53 a
    // float is not exact: there a whole number is written plainly.
    let n = x.as_f64()?;
    (n.fract() == 0.0 && (i64::MIN as f64..-(i64::MIN as f64)).contains(&n)).then_some(n as i64)
}

pub(crate) fn int_in(key: &str, value: &Value, min: i64, max: i64) -> Result<i64, ContractError> {
    number(key, value)?;
    match whole(value) {
        Some(i) if (min..=max).contains(&i) => Ok(i),
        _ => err(
            Code::InvalidOptions,
            format!(
                "{key} must be a whole number from {min} to {max}, got {}",
                crate::names::excerpt(&value.to_string())
            ),
        ),
    }
}

/// A key option: a non-empty string of at most [`MAX_KEY_BYTES`] bytes.
/// No NUL: PostgreSQL's `jsonb` cannot hold one (it refuses the document
/// before alkstore runs), so SQLite refuses it too (issue 57).
fn key_text(key: &str, value: &Value) -> Result<String, ContractError> {
    match value {
        Value::String(s) if s.contains('\0') => err(
            Code::InvalidOptions,
            format!(
                "{key} must not contain NUL (\\u0000), got {}",
                crate::names::quote(s)
            ),
        ),
        Value::String(s) if !s.is_empty() && s.len() <= MAX_KEY_BYTES => Ok(s.clone()),
        Value::String(s) if !s.is_empty() => err(
            Code::InvalidOptions,
            format!(
                "{key} must be at most {MAX_KEY_BYTES} bytes, got {} bytes starting {}",
                s.len(),
                crate::names::quote(s)
            ),
        ),
        _ => err(
            Code::InvalidOptions,
            format!(
                "{key} must be a non-empty string, got {}",
                crate::names::excerpt(&value.to_string())
            ),
        ),
    }
}

/// `depends_on`: a JSON array of 1 to [`MAX_DEPENDENCIES`] job ids, each a
/// whole number ≥ 1; duplicates are dropped (a job waits once per job).
fn depends_on(value: &Value) -> Result<Vec<i64>, ContractError> {
    let bad = || {
        err(
            Code::InvalidOptions,
            format!(
                "depends_on must be a JSON array of 1 to {MAX_DEPENDENCIES} job ids, got {}",
                crate::names::excerpt(&value.to_string())
            ),
        )
    };
    let Value::Array(items) = value else {
        return bad();
    };
    if items.is_empty() || items.len() > MAX_DEPENDENCIES {
        return bad();
    }
    let mut ids = Vec::with_capacity(items.len());
    for item in items {
        // A whole number however it is written (7, 7.0, 7e0), as every
        // whole-number option: PostgreSQL's jsonb reads 7e0 as 7.
        let id = match whole(item) {
            Some(id) if id >= 1 => id,
            _ => return bad(),
        };
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

fn max_attempts(value: &Value) -> Result<i32, ContractError> {
    Ok(int_in("max_attempts", value, 1, i32::MAX as i64)? as i32)
}

fn run_at(value: &Value) -> Result<i64, ContractError> {
    let ms = match value {
        Value::String(s) => time::parse_rfc3339_ms(s),
        Value::Number(_) => {
            let s = value.as_f64().unwrap_or(-1.0);
            (0.0..=(time::MAX_MS / 1000) as f64)
                .contains(&s)
                .then(|| time::seconds_to_ms(s))
        }
        _ => None,
    };
    ms.ok_or_else(|| {
        ContractError::new(
            Code::InvalidOptions,
            format!("run_at must be an RFC 3339 timestamp or unix seconds between 1970 and 9999, got {}", crate::names::excerpt(&value.to_string())),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn code(v: Value) -> Code {
        EnqueueOpts::parse(Some(&v)).unwrap_err().code
    }

    #[test]
    fn enqueue_opts_reject_bad_values() {
        for bad in [
            json!([]),
            json!("x"),
            json!({"dely_s": 1}),
            json!({"delay_s": -1}),
            json!({"delay_s": "1"}),
            json!({"delay_s": null}),
            json!({"priority": 1.5}),
            json!({"priority": 1e12}),
            json!({"max_attempts": 0}),
            json!({"expires_in_s": 0}),
            json!({"run_at": "yesterday"}),
            json!({"run_at": -5}),
            json!({"delay_s": 1, "run_at": 5}),
            json!({"idempotency_key": ""}),
            json!({"idempotency_key": 5}),
            json!({"idempotency_key": "k".repeat(1025)}),
            json!({"idempotency_key": "k", "idempotency_ttl_s": 0}),
            json!({"group_key": ""}),
            json!({"group_key": null}),
            json!({"limit_key": ""}),
            json!({"limit_key": 7}),
            json!({"limit_key": "k".repeat(1025)}),
            json!({"limit_key": "a\u{0}b"}),
            json!({"group_key": "\u{0}"}),
            json!({"idempotency_key": "k\u{0}"}),
            json!({"depends_on": []}),
            json!({"depends_on": null}),
            json!({"depends_on": 7}),
            json!({"depends_on": [0]}),
            json!({"depends_on": [-3]}),
            json!({"depends_on": [1.5]}),
            json!({"depends_on": ["7"]}),
            json!({"depends_on": [9223372036854775808u64]}),
            json!({"depends_on": (1..=101).collect::<Vec<i64>>()}),
        ] {
            assert_eq!(code(bad), Code::InvalidOptions);
        }
    }

    #[test]
    fn depends_on_keeps_the_first_of_each_id() {
        let opts = json!({"depends_on": [5, 3, 5, 9223372036854775807i64]});
        let parsed = EnqueueOpts::parse(Some(&opts)).unwrap();
        assert_eq!(parsed.depends_on, Some(vec![5, 3, i64::MAX]));
        // A whole number however written, as PostgreSQL's jsonb reads it.
        let written: Value = serde_json::from_str(r#"{"depends_on": [1e0, 2.0, 3E1]}"#).unwrap();
        let parsed = EnqueueOpts::parse(Some(&written)).unwrap();
        assert_eq!(parsed.depends_on, Some(vec![1, 2, 30]));
        let many = json!({"depends_on": (1..=100).collect::<Vec<i64>>()});
        assert_eq!(
            EnqueueOpts::parse(Some(&many))
                .unwrap()
                .depends_on
                .unwrap()
                .len(),
            100
        );
    }

    #[test]
    fn batch_opts_refuse_idempotency() {
        for bad in [
            json!({"idempotency_key": "k"}),
            json!({"idempotency_ttl_s": 5}),
        ] {
            let e = EnqueueOpts::parse_batch(Some(&bad)).unwrap_err();
            assert_eq!(e.code, Code::InvalidOptions);
        }
        let ok = EnqueueOpts::parse_batch(Some(&json!({"group_key": "g"}))).unwrap();
        assert_eq!(ok.group_key.as_deref(), Some("g"));
    }

    #[test]
    fn enqueue_opts_resolve() {
        let o = EnqueueOpts::parse(Some(
            &json!({"delay_s": 0.25, "priority": -3, "max_attempts": 2.0}),
        ))
        .unwrap();
        assert_eq!(o.run_at(1000), 1250);
        assert_eq!((o.priority, o.max_attempts), (-3, Some(2)));
        let o = EnqueueOpts::parse(Some(&json!({"run_at": "1970-01-01T00:00:10.5Z"}))).unwrap();
        assert_eq!(o.run_at(99), 10_500);
        let o = EnqueueOpts::parse(Some(&json!({"run_at": 10.25}))).unwrap();
        assert_eq!(o.run_at(99), 10_250);
    }

    #[test]
    fn queue_opts_json_shape() {
        let q = QueueOpts::default()
            .merged(Some(&json!({"backoff_base_s": 0.5})))
            .unwrap();
        assert_eq!(
            q.to_json(),
            json!({"visibility_timeout_s": 60, "max_attempts": 5, "backoff_base_s": 0.5, "backoff_max_s": 3600,
                   "retain_completed_s": 0, "retain_dead_s": null})
        );
        let r = QueueOpts::default()
            .merged(Some(
                &json!({"retain_completed_s": 3600, "retain_dead_s": 0.5}),
            ))
            .unwrap();
        assert_eq!(
            (r.retain_completed_ms, r.retain_dead_ms),
            (3_600_000, Some(500))
        );
        let r = r.merged(Some(&json!({"retain_dead_s": null}))).unwrap();
        assert_eq!(r.retain_dead_ms, None);
        assert!(QueueOpts::default()
            .merged(Some(&json!({"retain_completed_s": -1})))
            .is_err());
        assert!(QueueOpts::default()
            .merged(Some(&json!({"visibility_timeout_s": 0})))
            .is_err());
    }
}
