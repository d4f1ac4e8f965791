//! Time (contract §4): integer milliseconds since the Unix epoch inside the
//! engines, RFC 3339 UTC strings with milliseconds in JSON.

use chrono::{DateTime, SecondsFormat};
use std::time::{SystemTime, UNIX_EPOCH};

/// The latest instant accepted anywhere: 9999-12-31T23:59:59.999Z.
pub const MAX_MS: i64 = 253_402_300_799_999;

/// The wall clock now, in milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Formats epoch milliseconds as `2026-11-29T22:24:05.123Z`.
///
/// ```
/// assert_eq!(alkstore_core::time::format_ms(1_764_455_045_123), "2025-11-29T22:24:05.123Z");
/// ```
pub fn format_ms(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms.clamp(0, MAX_MS))
        .expect("clamped into chrono's range")
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Parses an RFC 3339 timestamp (any offset) to epoch milliseconds.
pub fn parse_rfc3339_ms(text: &str) -> Option<i64> {
    let ms = DateTime::parse_from_rfc3339(text).ok()?.timestamp_millis();
    (0..=MAX_MS).contains(&ms).then_some(ms)
}

/// Seconds (fractions allowed) to milliseconds, rounded to the nearest one.
pub fn seconds_to_ms(seconds: f64) -> i64 {
    (seconds * 1000.0).round() as i64
}

/// Milliseconds as a JSON number of seconds: integral values without a
/// fraction (`60`), others with up to three decimals (`0.25`).
pub fn ms_to_seconds_json(ms: i64) -> serde_json::Value {
    if ms % 1000 == 0 {
        serde_json::Value::from(ms / 1000)
    } else {
        serde_json::Value::from(ms as f64 / 1000.0)
    }
}
