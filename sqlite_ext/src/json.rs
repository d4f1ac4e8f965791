//! Building the JSON documents the functions return, in a fixed key order,
//! embedding stored payloads as they are (they were checked on the way in).

use alkstore_core::time;
use std::fmt::Write;

/// A JSON object under construction.
pub struct Obj(String);

impl Obj {
    /// Starts an object.
    pub fn new() -> Self {
        let mut s = String::with_capacity(256);
        s.push('{');
        Obj(s)
    }

    /// Starts an object at the end of `out` (to build arrays without copies).
    pub fn within(out: &mut String) -> Self {
        let mut s = std::mem::take(out);
        s.push('{');
        Obj(s)
    }

    fn key(&mut self, key: &str) {
        if !self.0.ends_with('{') {
            self.0.push(',');
        }
        self.0.push('"');
        self.0.push_str(key); // keys are our own literals: nothing to escape
        self.0.push_str("\":");
    }

    /// A value that is already JSON text.
    pub fn raw(mut self, key: &str, json: &str) -> Self {
        self.key(key);
        self.0.push_str(json);
        self
    }

    /// A string, or null.
    pub fn str(mut self, key: &str, v: Option<&str>) -> Self {
        self.key(key);
        match v {
            Some(v) => push_quoted(&mut self.0, v),
            None => self.0.push_str("null"),
        }
        self
    }

    /// An integer, or null.
    pub fn int(mut self, key: &str, v: Option<i64>) -> Self {
        self.key(key);
        match v {
            Some(v) => self.0.push_str(itoa::Buffer::new().format(v)),
            None => self.0.push_str("null"),
        }
        self
    }

    /// An epoch-milliseconds time as an RFC 3339 string, or null.
    pub fn time(mut self, key: &str, ms: Option<i64>) -> Self {
        self.key(key);
        match ms {
            Some(ms) => {
                self.0.push('"');
                time::push_ms(&mut self.0, ms);
                self.0.push('"');
            }
            None => self.0.push_str("null"),
        }
        self
    }

    /// A duration in milliseconds as a number of seconds.
    pub fn seconds(self, key: &str, ms: i64) -> Self {
        let v = time::ms_to_seconds_json(ms).to_string();
        self.raw(key, &v)
    }

    /// Closes the object.
    pub fn finish(mut self) -> String {
        self.0.push('}');
        self.0
    }
}

/// Appends `s` as a JSON string literal.
pub fn push_quoted(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A JSON array of integers.
pub fn int_array(values: &[i64]) -> String {
    let mut out = String::with_capacity(values.len() * 8 + 2);
    out.push('[');
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(itoa::Buffer::new().format(*v));
    }
    out.push(']');
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn quoting_agrees_with_serde_json() {
        for s in [
            "",
            "plain",
            "q\"uote",
            "back\\slash",
            "nl\n tab\t cr\r",
            "\u{1} \u{1f}",
            "é ✓ 🦀",
            "\u{7f}",
        ] {
            let mut out = String::new();
            super::push_quoted(&mut out, s);
            assert_eq!(out, serde_json::to_string(s).unwrap());
        }
    }
}
