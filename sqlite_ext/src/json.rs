//! Building the JSON documents the functions return, in a fixed key order,
//! embedding stored payloads as they are (they were checked on the way in).

use alkstore_core::time;

/// A JSON object under construction.
pub struct Obj(String);

impl Obj {
    /// Starts an object.
    pub fn new() -> Self {
        Obj(String::from("{"))
    }

    fn key(&mut self, key: &str) {
        if self.0.len() > 1 {
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
            Some(v) => self.0.push_str(&v.to_string()),
            None => self.0.push_str("null"),
        }
        self
    }

    /// An epoch-milliseconds time as an RFC 3339 string, or null.
    pub fn time(self, key: &str, ms: Option<i64>) -> Self {
        let formatted = ms.map(time::format_ms);
        self.str(key, formatted.as_deref())
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
    out.push_str(&serde_json::to_string(s).expect("strings always serialize"));
}

/// A JSON array of integers.
pub fn int_array(values: &[i64]) -> String {
    let mut out = String::with_capacity(values.len() * 8 + 2);
    out.push('[');
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&v.to_string());
    }
    out.push(']');
    out
}
