//! Reading SQL arguments into checked Rust values, with the contract's
//! error for each kind of bad input. Nothing is written before every
//! argument of a call has passed through here.

use crate::ffi::{Arg, Kind};
use crate::sys::sqlite3_value;
use alkstore_core::{err, names, Code, ContractError, NameKind};
use serde_json::Value;
use std::borrow::Cow;

pub use alkstore_core::opts::MAX_BATCH;

type Result<T> = std::result::Result<T, ContractError>;

/// The arguments of one call.
pub struct Args<'a> {
    argv: &'a [*mut sqlite3_value],
}

impl<'a> Args<'a> {
    /// Wraps SQLite's argument array.
    ///
    /// # Safety
    /// `argv` must be the arguments SQLite passed to the function being
    /// called (after the routine table was set), and `'a` must not outlive
    /// that call.
    pub unsafe fn new(argv: &'a [*mut sqlite3_value]) -> Self {
        Args { argv }
    }

    /// Argument `i`, or `None` when a trailing optional argument was left out.
    pub fn get(&self, i: usize) -> Option<Arg<'a>> {
        // SAFETY: Args::new's contract: a value of this call, for 'a.
        self.argv.get(i).map(|v| unsafe { Arg::from_raw(*v) })
    }

    fn arg(&self, i: usize) -> Arg<'a> {
        self.get(i).expect("arity is fixed at registration")
    }

    /// Argument `i` as a UTF-8 string, or `None` for NULL / not text.
    fn text(&self, i: usize) -> Option<std::result::Result<&'a str, std::str::Utf8Error>> {
        let a = self.arg(i);
        (a.kind() == Kind::Text).then(|| std::str::from_utf8(a.text_bytes()))
    }

    /// A name of the given kind (contract §2).
    pub fn name(&self, i: usize, kind: NameKind) -> Result<&'a str> {
        let label = kind.label();
        let name = match self.text(i) {
            Some(Ok(s)) => s,
            Some(Err(_)) => {
                return err(
                    Code::InvalidName,
                    format!("{label} name is not valid UTF-8"),
                )
            }
            None if self.arg(i).kind() == Kind::Null => {
                return err(Code::InvalidName, format!("{label} name must not be NULL"))
            }
            None => return err(Code::InvalidName, format!("{label} name must be text")),
        };
        names::validate(kind, name)?;
        Ok(name)
    }

    /// A queue name as the admin functions take it: a queue's, or an
    /// outbox's backing queue (`names::validate_listed_queue`).
    pub fn listed_queue(&self, i: usize) -> Result<&'a str> {
        match self.text(i) {
            Some(Ok(name)) if names::outbox_of(name).is_some() => {
                names::validate_listed_queue(name)?;
                Ok(name)
            }
            _ => self.name(i, NameKind::Queue),
        }
    }

    /// Argument `i` as an integer: an SQL integer, or a real with no fraction
    /// (what JavaScript clients bind for every number); `None` for NULL.
    fn integer(&self, i: usize, what: &str) -> Result<Option<i64>> {
        let a = self.arg(i);
        match a.kind() {
            Kind::Integer => Ok(Some(a.i64())),
            Kind::Real if a.f64().fract() == 0.0 && a.f64().abs() < 9.007_199_254_740_992e15 => {
                Ok(Some(a.f64() as i64))
            }
            Kind::Null => Ok(None),
            _ => err(Code::InvalidArgument, format!("{what} must be an integer")),
        }
    }

    /// A job id: an integer.
    pub fn job_id(&self, i: usize) -> Result<i64> {
        self.integer(i, "job_id")?
            .ok_or_else(|| ContractError::new(Code::InvalidArgument, "job_id must not be NULL"))
    }

    /// A list of job ids: a JSON array of integers (`alk_ack_batch`,
    /// `alk_release_batch`; PostgreSQL's `bigint[]` without NULLs).
    pub fn job_ids(&self, i: usize) -> Result<Vec<i64>> {
        let text = self.opt_text(i, "job_ids")?.unwrap_or("");
        serde_json::from_str(text).map_err(|_| {
            ContractError::new(
                Code::InvalidArgument,
                "job_ids must be a JSON array of integers",
            )
        })
    }

    /// A JSON payload as text: JSON text, or an SQL number taken as a JSON number.
    pub fn payload(&self, i: usize, what: &str) -> Result<Cow<'a, str>> {
        let a = self.arg(i);
        match a.kind() {
            Kind::Text => {
                let text = std::str::from_utf8(a.text_bytes()).map_err(|_| {
                    ContractError::new(Code::InvalidPayload, format!("{what} is not valid UTF-8"))
                })?;
                check_json(text, what)?;
                Ok(Cow::Borrowed(text))
            }
            Kind::Integer => Ok(Cow::Owned(a.i64().to_string())),
            Kind::Real if a.f64().is_finite() => Ok(Cow::Owned(Value::from(a.f64()).to_string())),
            Kind::Real => err(
                Code::InvalidPayload,
                format!("{what} is not a finite number"),
            ),
            Kind::Null => err(
                Code::InvalidPayload,
                format!("{what} must not be NULL (the JSON text 'null' is a valid payload)"),
            ),
            Kind::Blob => err(
                Code::InvalidPayload,
                format!("{what} must be JSON text, not a blob"),
            ),
        }
    }

    /// An options object: NULL means defaults.
    pub fn opts(&self, i: usize) -> Result<Option<Value>> {
        match self.text(i) {
            Some(Ok(s)) => alkstore_core::opts::parse_text(Some(s)),
            Some(Err(_)) => err(Code::InvalidOptions, "options are not valid UTF-8"),
            None if self.arg(i).kind() == Kind::Null => Ok(None),
            None => err(
                Code::InvalidOptions,
                "options must be a JSON object as text, or NULL",
            ),
        }
    }

    /// A non-negative number of seconds in milliseconds; NULL or left out is `None`.
    pub fn opt_seconds(&self, i: usize, what: &str, positive: bool) -> Result<Option<i64>> {
        let Some(a) = self.get(i) else {
            return Ok(None);
        };
        let s = match a.kind() {
            Kind::Null => return Ok(None),
            Kind::Integer => a.i64() as f64,
            Kind::Real => a.f64(),
            _ => {
                return err(
                    Code::InvalidArgument,
                    format!("{what} must be a number of seconds"),
                )
            }
        };
        let ms = alkstore_core::time::seconds_to_ms(s);
        if !(0.0..=alkstore_core::opts::MAX_DURATION_S).contains(&s) || (positive && ms < 1) {
            let least = if positive {
                "greater than 0"
            } else {
                "at least 0"
            };
            return err(
                Code::InvalidArgument,
                format!(
                    "{what} must be {least} and at most {} seconds, got {s}",
                    alkstore_core::opts::MAX_DURATION_S
                ),
            );
        }
        Ok(Some(ms))
    }

    /// A required positive number of seconds (a ttl), in milliseconds.
    pub fn ttl(&self, i: usize, what: &str) -> Result<i64> {
        self.opt_seconds(i, what, true)?.ok_or_else(|| {
            ContractError::new(Code::InvalidArgument, format!("{what} must not be NULL"))
        })
    }

    /// A batch size from 1 to [`MAX_BATCH`]; left out means `default`.
    pub fn batch_size(&self, i: usize, what: &str, default: i64) -> Result<i64> {
        if self.get(i).is_none() {
            return Ok(default);
        }
        let Some(n) = self.integer(i, what)? else {
            return err(Code::InvalidArgument, format!("{what} must not be NULL"));
        };
        if !(1..=MAX_BATCH).contains(&n) {
            return err(
                Code::InvalidArgument,
                format!("{what} must be between 1 and {MAX_BATCH}, got {n}"),
            );
        }
        Ok(n)
    }

    /// A required whole number from 1 to `max` (`alk_prune`'s `max_rows`).
    pub fn count(&self, i: usize, what: &str, max: i64) -> Result<i64> {
        match self.integer(i, what)? {
            Some(n) if (1..=max).contains(&n) => Ok(n),
            Some(n) => err(
                Code::InvalidArgument,
                format!("{what} must be between 1 and {max}, got {n}"),
            ),
            None => err(Code::InvalidArgument, format!("{what} must not be NULL")),
        }
    }

    /// An optional JSON value (`alk_ack`'s result): NULL or left out is `None`.
    pub fn opt_json(&self, i: usize, what: &str) -> Result<Option<Cow<'a, str>>> {
        match self.get(i) {
            None => Ok(None),
            Some(a) if a.kind() == Kind::Null => Ok(None),
            Some(_) => self.payload(i, what).map(Some),
        }
    }

    /// A stream offset: an integer of at least 0.
    pub fn offset(&self, i: usize, what: &str) -> Result<i64> {
        match self.integer(i, what)? {
            Some(n) if n >= 0 => Ok(n),
            Some(n) => err(
                Code::InvalidArgument,
                format!("{what} must be at least 0, got {n}"),
            ),
            None => err(Code::InvalidArgument, format!("{what} must not be NULL")),
        }
    }

    /// Optional text (an error message, an event key): NULL or left out is `None`.
    pub fn opt_text(&self, i: usize, what: &str) -> Result<Option<&'a str>> {
        if self.get(i).is_none_or(|a| a.kind() == Kind::Null) {
            return Ok(None);
        }
        match self.text(i) {
            // As on PostgreSQL, whose text cannot hold one.
            Some(Ok(s)) if s.contains('\0') => err(
                Code::InvalidArgument,
                format!("{what} must not contain a NUL character"),
            ),
            Some(Ok(s)) => Ok(Some(s)),
            Some(Err(_)) => err(Code::InvalidArgument, format!("{what} is not valid UTF-8")),
            None => err(
                Code::InvalidArgument,
                format!("{what} must be text or NULL"),
            ),
        }
    }
}

/// Checks that `text` is one JSON value that PostgreSQL's `jsonb` could
/// hold too: no `\u0000` in its strings.
pub fn check_json(text: &str, what: &str) -> Result<()> {
    serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(|e| {
        ContractError::new(
            Code::InvalidPayload,
            format!("{what} is not valid JSON: {e}"),
        )
    })?;
    if has_nul_escape(text) {
        return err(
            Code::InvalidPayload,
            format!("{what} must not contain \\u0000 (a NUL character)"),
        );
    }
    Ok(())
}

/// Whether valid JSON text escapes a NUL character. Every backslash in
/// valid JSON starts a two-character escape inside a string, so pairs can
/// be skipped without tracking strings.
fn has_nul_escape(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            if b[i + 1..].starts_with(b"u0000") {
                return true;
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::has_nul_escape;

    #[test]
    fn only_an_escaped_nul_counts() {
        assert!(has_nul_escape(r#"{"a": "x\u0000y"}"#));
        assert!(has_nul_escape(r#""\\\u0000""#)); // a backslash, then a NUL
        assert!(!has_nul_escape(r#""\\u0000""#)); // a backslash, then "u0000"
        assert!(!has_nul_escape(r#"{"a": "\u0001", "b": "u0000"}"#));
    }
}
