//! Schedule specs (contract v1.1 §F): `{"cron": "<5 fields, UTC>"}` or
//! `{"every_s": n}`, and their fire times. The SQLite engine uses this;
//! `sql/postgres/schedule.sql` is the same rules in PL/pgSQL, and the
//! cross-engine suite checks both give the same instants.
//!
//! Cron as Vixie cron reads it: minute hour day-of-month month day-of-week,
//! each field `*`, a number, a range `a-b`, a step `*/s` or `a-b/s`, or a
//! comma list of those; day-of-week 0–7 with 0 and 7 both Sunday. A day
//! field starting with `*` only decides how the two day fields combine
//! (contract v1.2 §L): if either starts with `*` a day must match both, if
//! neither does it must match either; `*/10` still allows only its own days.
//! No names, no `L`, `W`, `#`. A cron text is at most [`MAX_CRON_BYTES`].
//! `every_s: n` fires at whole multiples of n seconds since the Unix epoch
//! (n to the millisecond, at least 0.001).

use crate::error::{err, Code, ContractError};
use crate::time;
use serde_json::Value;

const MINUTE_MS: i64 = 60_000;
const DAY_MS: i64 = 86_400_000;

/// How far a cron search looks before it calls a spec one that never fires
/// (a 29 February that is also a given weekday comes round within 28 years).
const SEARCH_DAYS: i64 = 366 * 28;

/// The longest cron text, in bytes: far more than any real crontab line, and
/// short enough that parsing it on every tick costs nothing.
pub const MAX_CRON_BYTES: usize = 1024;

/// A parsed spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Spec {
    /// Fires at whole multiples of this many milliseconds since the epoch.
    Every(i64),
    /// A cron expression.
    Cron(Cron),
}

/// The values each cron field allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    minutes: [bool; 60],
    hours: [bool; 24],
    doms: [bool; 32],
    months: [bool; 13],
    dows: [bool; 7],
    dom_restricted: bool,
    dow_restricted: bool,
}

impl Spec {
    /// Parses a spec; anything else is `InvalidOptions` with the reason.
    ///
    /// ```
    /// use alkstore_core::schedule::Spec;
    /// let every = Spec::parse(&serde_json::json!({"every_s": 60})).unwrap();
    /// assert_eq!(every.next_after(90_000), 120_000);
    /// let bad = Spec::parse(&serde_json::json!({"cron": "0 0 * JAN *"})).unwrap_err();
    /// assert!(bad.detail.contains("month"));
    /// ```
    pub fn parse(spec: &Value) -> Result<Spec, ContractError> {
        let Some(map) = spec.as_object() else {
            return err(
                Code::InvalidOptions,
                format!(
                    "a schedule spec must be a JSON object, {{\"cron\": \"…\"}} or {{\"every_s\": n}}, got {}",
                    crate::names::excerpt(&spec.to_string())
                ),
            );
        };
        match (map.len(), map.get("cron"), map.get("every_s")) {
            (1, Some(Value::String(cron)), None) => Ok(Spec::Cron(Cron::parse(cron)?)),
            (1, Some(other), None) => err(
                Code::InvalidOptions,
                format!(
                    "cron must be a string of 5 fields, got {}",
                    crate::names::excerpt(&other.to_string())
                ),
            ),
            (1, None, Some(n)) => {
                // Seconds to the millisecond, rounded as every duration is (§G).
                let ms = n
                    .as_f64()
                    .filter(|s| (0.0..=crate::opts::MAX_DURATION_S).contains(s))
                    .map(time::seconds_to_ms)
                    .filter(|ms| *ms >= 1);
                match ms {
                    Some(ms) => Ok(Spec::Every(ms)),
                    None => err(
                        Code::InvalidOptions,
                        format!(
                            "every_s must be a number of seconds from 0.001 to {}, got {}",
                            crate::opts::MAX_DURATION_S,
                            crate::names::excerpt(&n.to_string())
                        ),
                    ),
                }
            }
            _ => err(
                Code::InvalidOptions,
                format!(
                    "a schedule spec has exactly one key, cron or every_s, got {}",
                    crate::names::excerpt(&spec.to_string())
                ),
            ),
        }
    }

    /// The first fire time strictly after `t` (epoch milliseconds).
    pub fn next_after(&self, t: i64) -> i64 {
        match self {
            Spec::Every(n) => (t.div_euclid(*n) + 1) * n,
            Spec::Cron(c) => c
                .next_after(t)
                .expect("parse refuses specs that never fire"),
        }
    }

    /// The last fire time at or before `t`, if any in the search window.
    pub fn last_at_or_before(&self, t: i64) -> Option<i64> {
        match self {
            Spec::Every(n) => Some(t.div_euclid(*n) * n),
            Spec::Cron(c) => c.last_at_or_before(t),
        }
    }
}

impl Cron {
    /// Parses 5 whitespace-separated fields.
    pub fn parse(text: &str) -> Result<Cron, ContractError> {
        if text.len() > MAX_CRON_BYTES {
            return err(
                Code::InvalidOptions,
                format!(
                    "cron must be at most {MAX_CRON_BYTES} bytes, got {}",
                    text.len()
                ),
            );
        }
        // The separators PostgreSQL's parser uses too: the same specs split alike.
        let fields: Vec<&str> = text
            .split([' ', '\t', '\n', '\r'])
            .filter(|f| !f.is_empty())
            .collect();
        if fields.len() != 5 {
            return err(
                Code::InvalidOptions,
                format!(
                    "cron must have 5 fields (minute hour day-of-month month day-of-week), got {} in {}",
                    fields.len(),
                    crate::names::quote(text)
                ),
            );
        }
        let mut c = Cron {
            minutes: [false; 60],
            hours: [false; 24],
            doms: [false; 32],
            months: [false; 13],
            dows: [false; 7],
            dom_restricted: !fields[2].starts_with('*'),
            dow_restricted: !fields[4].starts_with('*'),
        };
        field(fields[0], "minute", 0, 59, &mut c.minutes)?;
        field(fields[1], "hour", 0, 23, &mut c.hours)?;
        field(fields[2], "day-of-month", 1, 31, &mut c.doms)?;
        field(fields[3], "month", 1, 12, &mut c.months)?;
        let mut dows = [false; 8];
        field(fields[4], "day-of-week", 0, 7, &mut dows)?;
        for (d, on) in dows.iter().enumerate() {
            c.dows[d % 7] |= *on; // 7 is Sunday too
        }
        if c.next_after(0).is_none() {
            return err(
                Code::InvalidOptions,
                format!(
                    "cron {} never fires (no such day)",
                    crate::names::quote(text)
                ),
            );
        }
        Ok(c)
    }

    fn day_matches(&self, day: i64) -> bool {
        let (_, month, dom) = time::civil_from_days(day);
        let dow = (day + 4).rem_euclid(7) as usize; // 1970-01-01 was a Thursday
        if !self.months[month as usize] {
            return false;
        }
        let (d, w) = (self.doms[dom as usize], self.dows[dow]);
        if self.dom_restricted && self.dow_restricted {
            d || w
        } else {
            d && w
        }
    }

    fn next_after(&self, t: i64) -> Option<i64> {
        let start = (t.div_euclid(MINUTE_MS) + 1) * MINUTE_MS;
        let first_day = start.div_euclid(DAY_MS);
        for day in first_day..first_day + SEARCH_DAYS {
            if !self.day_matches(day) {
                continue;
            }
            for h in (0..24).filter(|h| self.hours[*h]) {
                for m in (0..60).filter(|m| self.minutes[*m]) {
                    let at = day * DAY_MS + (h as i64 * 60 + m as i64) * MINUTE_MS;
                    if at >= start {
                        return Some(at);
                    }
                }
            }
        }
        None
    }

    fn last_at_or_before(&self, t: i64) -> Option<i64> {
        let last_day = t.div_euclid(DAY_MS);
        for day in (last_day - SEARCH_DAYS..=last_day).rev() {
            if !self.day_matches(day) {
                continue;
            }
            for h in (0..24).rev().filter(|h| self.hours[*h]) {
                for m in (0..60).rev().filter(|m| self.minutes[*m]) {
                    let at = day * DAY_MS + (h as i64 * 60 + m as i64) * MINUTE_MS;
                    if at <= t {
                        return Some(at);
                    }
                }
            }
        }
        None
    }
}

/// Parses one field into `allowed` (indexes `lo..=hi`).
/// A field's number: ASCII digits only (no sign, no other script's digits,
/// as PostgreSQL's `[0-9]+`); too large for a u32 counts as out of range.
fn number(s: &str) -> Option<usize> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse::<u32>().map_or(usize::MAX, |n| n as usize))
}

fn field(
    text: &str,
    name: &str,
    lo: usize,
    hi: usize,
    allowed: &mut [bool],
) -> Result<(), ContractError> {
    let bad = |why: &str| {
        err::<()>(
            Code::InvalidOptions,
            format!("cron {name} field {}: {why}", crate::names::quote(text)),
        )
    };
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => match number(s) {
                Some(s) if s >= 1 => (r, s),
                _ => return bad("a step must be a whole number of at least 1"),
            },
            None => (item, 1),
        };
        let (a, b) =
            if range == "*" {
                (lo, hi)
            } else if let Some((a, b)) = range.split_once('-') {
                match (number(a), number(b)) {
                    (Some(a), Some(b)) => (a, b),
                    _ => return bad("a range is two numbers, a-b (no names)"),
                }
            } else {
                match number(range) {
                    Some(_) if item.contains('/') => {
                        return bad("a step needs * or a range before it (*/s, a-b/s)")
                    }
                    Some(a) => (a, a),
                    None => return bad(
                        "expected *, a number, a range a-b or a step */s (no names, no L, W or #)",
                    ),
                }
            };
        if a < lo || b > hi || a > b {
            return bad(&format!("values must be from {lo} to {hi}, low to high"));
        }
        for v in (a..=b).step_by(step) {
            allowed[v] = true;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: &str) -> i64 {
        time::parse_rfc3339_ms(s).unwrap()
    }

    fn next(cron: &str, after: &str) -> String {
        let spec = Spec::parse(&json!({ "cron": cron })).unwrap();
        time::format_ms(spec.next_after(at(after)))
    }

    #[test]
    fn cron_fire_times() {
        assert_eq!(
            next("*/15 * * * *", "2026-11-30T10:07:00Z"),
            "2026-11-30T10:15:00.000Z"
        );
        assert_eq!(
            next("*/15 * * * *", "2026-11-30T10:15:00Z"),
            "2026-11-30T10:30:00.000Z"
        );
        assert_eq!(
            next("0 0 1 * *", "2026-12-31T23:59:59.999Z"),
            "2027-01-01T00:00:00.000Z"
        );
        assert_eq!(
            next("0 12 29 2 *", "2026-03-01T00:00:00Z"),
            "2028-02-29T12:00:00.000Z"
        );
        assert_eq!(
            next("30 9 31 * *", "2026-04-01T00:00:00Z"),
            "2026-05-31T09:30:00.000Z"
        );
        // Sunday as 0 and as 7; 2026-11-29 is a Sunday.
        assert_eq!(
            next("0 8 * * 0", "2026-11-25T00:00:00Z"),
            "2026-11-29T08:00:00.000Z"
        );
        assert_eq!(
            next("0 8 * * 7", "2026-11-25T00:00:00Z"),
            "2026-11-29T08:00:00.000Z"
        );
        // Both day fields restricted: either matches (the 1st, or a Friday).
        assert_eq!(
            next("0 0 1 * 5", "2026-11-30T00:00:00Z"),
            "2026-12-01T00:00:00.000Z"
        );
        assert_eq!(
            next("0 0 1 * 5", "2026-12-01T00:00:00Z"),
            "2026-12-04T00:00:00.000Z"
        );
        // A day field starting with * makes the two combine with AND, and
        // still allows only its own days (contract v1.2 §L).
        assert_eq!(
            next("0 0 */2 * 5", "2026-11-30T00:00:00Z"),
            "2026-12-11T00:00:00.000Z"
        );
        assert_eq!(
            next("0 6 */10 * *", "2026-12-01T06:00:00Z"),
            "2026-12-11T06:00:00.000Z"
        );
        assert_eq!(
            next("0 6 */10 * *", "2026-12-21T06:00:00Z"),
            "2026-12-31T06:00:00.000Z"
        );
        assert_eq!(
            next("0 6 */10 * *", "2026-12-31T06:00:00Z"),
            "2027-01-01T06:00:00.000Z"
        );
        assert_eq!(
            next("0 6 * * */3", "2026-12-01T00:00:00Z"), // Sun, Wed, Sat
            "2026-12-02T06:00:00.000Z"
        );
        assert_eq!(
            next("5-10/5,59 1 * * 1-5", "2026-11-30T01:05:00Z"),
            "2026-11-30T01:10:00.000Z"
        );
    }

    #[test]
    fn last_due_time() {
        let spec = Spec::parse(&json!({"cron": "0 * * * *"})).unwrap();
        assert_eq!(
            spec.last_at_or_before(at("2026-11-30T10:59:59Z")),
            Some(at("2026-11-30T10:00:00Z"))
        );
        assert_eq!(
            spec.last_at_or_before(at("2026-11-30T10:00:00Z")),
            Some(at("2026-11-30T10:00:00Z"))
        );
        let half = Spec::parse(&json!({"every_s": 0.5})).unwrap();
        assert_eq!(
            half.next_after(at("2026-11-30T10:00:00.250Z")),
            at("2026-11-30T10:00:00.500Z")
        );
        let every = Spec::parse(&json!({"every_s": 3600})).unwrap();
        assert_eq!(
            every.last_at_or_before(at("2026-11-30T10:59:59Z")),
            Some(at("2026-11-30T10:00:00Z"))
        );
    }

    #[test]
    fn bad_specs_say_why() {
        for (bad, why) in [
            (json!({"cron": "* * * *"}), "5 fields"),
            (json!({"cron": "60 * * * *"}), "minute"),
            (json!({"cron": "* * * JAN *"}), "no names"),
            (json!({"cron": "* * L * *"}), "no names"),
            (json!({"cron": "* * * * 1#2"}), "no names"),
            (json!({"cron": "5/15 * * * *"}), "a step needs"),
            (json!({"cron": "*/0 * * * *"}), "at least 1"),
            (json!({"cron": "10-5 * * * *"}), "low to high"),
            (json!({"cron": "+5 * * * *"}), "expected"),
            (json!({"cron": "99999999999 * * * *"}), "from 0 to 59"),
            (json!({"cron": "*\u{a0}* * * *"}), "5 fields"),
            (json!({"cron": "0 0 30 2 *"}), "never fires"),
            (json!({"every_s": 0}), "every_s"),
            (json!({"every_s": 0.0004}), "every_s"),
            (json!({"every_s": -1}), "every_s"),
            (json!({"every_s": 60, "cron": "* * * * *"}), "exactly one"),
            (json!("* * * * *"), "JSON object"),
            (json!({"cron": 5}), "string"),
        ] {
            let e = Spec::parse(&bad).unwrap_err();
            assert_eq!(e.code, Code::InvalidOptions);
            assert!(e.detail.contains(why), "{bad}: {}", e.detail);
        }
    }
}
