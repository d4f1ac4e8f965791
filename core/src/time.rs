//! Time (contract §4): integer milliseconds since the Unix epoch inside the
//! engines, RFC 3339 UTC strings with milliseconds in JSON.

use chrono::DateTime;
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
    let mut out = String::with_capacity(24);
    push_ms(&mut out, ms);
    out
}

/// Appends epoch milliseconds as `2026-11-29T22:24:05.123Z` (hot path of
/// claims and stream reads: no allocation, no formatting machinery).
pub fn push_ms(out: &mut String, ms: i64) {
    let ms = ms.clamp(0, MAX_MS);
    let (days, ms_of_day) = (ms / 86_400_000, ms % 86_400_000);
    let (year, month, day) = civil_from_days(days);
    let fields = [
        (year, 4, '-'),
        (month, 2, '-'),
        (day, 2, 'T'),
        (ms_of_day / 3_600_000, 2, ':'),
        (ms_of_day / 60_000 % 60, 2, ':'),
        (ms_of_day / 1000 % 60, 2, '.'),
        (ms_of_day % 1000, 3, 'Z'),
    ];
    for (value, width, sep) in fields {
        let mut digits = [b'0'; 4];
        let mut v = value;
        for d in digits[..width].iter_mut().rev() {
            *d = b'0' + (v % 10) as u8;
            v /= 10;
        }
        out.push_str(std::str::from_utf8(&digits[..width]).expect("ASCII digits"));
        out.push(sep);
    }
}

/// The civil date `(year, month 1–12, day 1–31)` of a day number (days
/// since 1970-01-01, which may be negative; Howard Hinnant's algorithm).
///
/// ```
/// assert_eq!(alkstore_core::time::civil_from_days(0), (1970, 1, 1));
/// assert_eq!(alkstore_core::time::civil_from_days(20_513), (2026, 3, 1));
/// ```
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + (month <= 2) as i64, month, day)
}

/// Parses an RFC 3339 timestamp (any offset) to epoch milliseconds.
pub fn parse_rfc3339_ms(text: &str) -> Option<i64> {
    let ms = DateTime::parse_from_rfc3339(text).ok()?.timestamp_millis();
    (0..=MAX_MS).contains(&ms).then_some(ms)
}

/// Seconds (fractions allowed) to milliseconds, rounded half away from
/// zero on the decimal the number is written as (contract v1.1 §G), as
/// PostgreSQL's `numeric` does: 4.0005 s is 4001 ms. Multiplying the binary
/// `f64` instead gives 4000.4999… and so 4000.
///
/// ```
/// use alkstore_core::time::seconds_to_ms;
/// assert_eq!(seconds_to_ms(4.0005), 4001);
/// assert_eq!(seconds_to_ms(0.0004), 0);
/// assert_eq!(seconds_to_ms(-1.2345), -1235);
/// assert_eq!(seconds_to_ms(3153600000.0), 3153600000000);
/// ```
pub fn seconds_to_ms(seconds: f64) -> i64 {
    if !seconds.is_finite() || seconds.abs() >= 1e15 {
        return (seconds * 1000.0).round() as i64; // saturates; callers reject the range
    }
    // Rust writes an f64 as its shortest round-trip decimal, never with an exponent.
    let text = format!("{}", seconds.abs());
    let (whole, fraction) = text.split_once('.').unwrap_or((&text, ""));
    let digit = |i: usize| fraction.as_bytes().get(i).map_or(0, |b| (b - b'0') as i64);
    let mut ms =
        whole.parse::<i64>().unwrap_or(0) * 1000 + digit(0) * 100 + digit(1) * 10 + digit(2);
    if digit(3) >= 5 {
        ms += 1;
    }
    if seconds < 0.0 {
        -ms
    } else {
        ms
    }
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

#[cfg(test)]
mod tests {
    #[test]
    fn formatting_agrees_with_chrono() {
        let mut ms = 0i64;
        while ms < super::MAX_MS {
            let want = chrono::DateTime::from_timestamp_millis(ms)
                .unwrap()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            assert_eq!(super::format_ms(ms), want);
            ms += 7_919_993_337; // a prime step through leap years, month ends, every field
        }
        assert_eq!(super::format_ms(super::MAX_MS), "9999-12-31T23:59:59.999Z");
        assert_eq!(
            super::format_ms(951_782_400_000),
            "2000-02-29T00:00:00.000Z"
        );
    }
}
