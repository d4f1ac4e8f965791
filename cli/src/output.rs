//! Printing results: a table for people, JSON (`--json`) for scripts.

use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
use serde_json::Value;

/// How results are printed.
pub struct Output {
    /// JSON instead of tables.
    pub json: bool,
}

impl Output {
    /// Rows (JSON objects) as a table of `columns`, or as a JSON array.
    pub fn rows(&self, rows: &[Value], columns: &[&str]) {
        if self.json {
            say(Value::Array(rows.to_vec()));
            return;
        }
        if rows.is_empty() {
            say("(none)");
            return;
        }
        let mut table = Table::new();
        table
            .load_preset(UTF8_BORDERS_ONLY)
            .set_header(columns.to_vec());
        for row in rows {
            table.add_row(columns.iter().map(|c| cell(&row[*c])));
        }
        say(table);
    }

    /// One document: JSON, pretty for people.
    pub fn doc(&self, doc: &Value) {
        if self.json {
            say(doc);
        } else {
            say(serde_json::to_string_pretty(doc).expect("JSON prints"));
        }
    }

    /// A result of an action: `{key: value}` in JSON, `message` for people
    /// (its control characters escaped: it may name a queue).
    pub fn done(&self, key: &str, value: Value, message: &str) {
        if self.json {
            say(serde_json::json!({ key: value }));
        } else {
            say(visible(message));
        }
    }
}

/// Prints a line to standard output. A reader that went away (`| head`)
/// ends the program quietly, as command-line tools do, instead of a panic.
pub fn say(line: impl std::fmt::Display) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}") {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        panic!("cannot write to standard output: {e}");
    }
}

/// A table cell: strings bare (their control characters shown escaped),
/// null as "-", the rest as JSON.
pub fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => visible(s).into_owned(),
        other => other.to_string(),
    }
}

/// `s` with every control character escaped (`\n`, `\u{1b}`, …): names may
/// hold them (any role that may enqueue chooses queue names), and printed
/// raw to a terminal they would retitle or clear it, or forge a table row
/// (issue 64 item 7).
pub fn visible(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    std::borrow::Cow::Owned(
        s.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_default().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}
