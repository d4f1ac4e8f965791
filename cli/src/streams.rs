//! Stream and lease commands: streams, tail, publish, locks.

use crate::output::{cell, say, Output};
use crate::Fallible;
use alkstore::{call, Store};
use serde_json::{json, Value};
use std::time::Duration;

pub fn streams(store: &Store, out: &Output) -> Fallible {
    store.sequence(None)?;
    let rows = store.run(call::streams().raw())?;
    let rows = rows.as_array().map_or(&[][..], |r| r);
    if out.json {
        out.rows(rows, &[]);
        return Ok(());
    }
    // One line per consumer (a stream without consumers gets one line).
    let mut flat = Vec::new();
    for s in rows {
        let base = json!({"stream": s["stream"], "first_offset": s["first_offset"], "last_offset": s["last_offset"]});
        let consumers = s["consumers"].as_array().map_or(&[][..], |c| c);
        if consumers.is_empty() {
            flat.push(base.clone());
        }
        for c in consumers {
            let mut row = base.clone();
            row["consumer"] = c["consumer"].clone();
            row["offset"] = c["offset"].clone();
            row["lag"] = c["lag"].clone();
            flat.push(row);
        }
    }
    out.rows(
        &flat,
        &[
            "stream",
            "first_offset",
            "last_offset",
            "consumer",
            "offset",
            "lag",
        ],
    );
    Ok(())
}

pub fn tail(store: &Store, out: &Output, name: &str, from: Option<i64>, follow: bool) -> Fallible {
    let stream = store.stream(name)?;
    let from = match from {
        Some(n) => n,
        None => {
            // The last ten: from the stream's last offset.
            let last = store.run(call::stream_info(name)?)?.last_offset;
            (last - 10).max(0)
        }
    };
    let mut reader = stream.reader(from);
    loop {
        // Waits for new events by wake-ups (LISTEN / data_version), not polling.
        let wait = if follow {
            Duration::from_secs(5)
        } else {
            Duration::ZERO
        };
        let events = reader.next_batch(1000, wait)?;
        for e in &events {
            if out.json {
                let line = json!({"offset": e.offset, "id": e.id, "key": e.key, "payload": e.payload, "created_at": e.created_at});
                say(line);
            } else {
                let key = e
                    .key
                    .as_deref()
                    .map(|k| format!(" [{k}]"))
                    .unwrap_or_default();
                say(format!(
                    "{} {}{key} {}",
                    e.offset,
                    e.created_at,
                    cell(&e.payload)
                ));
            }
        }
        if events.is_empty() && !follow {
            return Ok(());
        }
    }
}

pub fn publish(
    store: &Store,
    out: &Output,
    name: &str,
    payload: &str,
    key: Option<&str>,
) -> Fallible {
    let payload: Value =
        serde_json::from_str(payload).map_err(|e| format!("the payload is not JSON: {e}"))?;
    let id = store.stream(name)?.publish(&payload, key)?;
    out.done("id", id.into(), &id.to_string());
    Ok(())
}

pub fn locks(store: &Store, out: &Output) -> Fallible {
    let rows = store.run(call::locks())?;
    out.rows(&rows, &["name", "owner", "token", "expires_at", "held"]);
    Ok(())
}
