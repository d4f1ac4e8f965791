//! Queue and job commands: queues, jobs, job, requeue, purge, pause,
//! resume, enqueue, prune.

use crate::output::Output;
use crate::Fallible;
use alkstore::call;
use alkstore::{EnqueueOpts, Queue, Store};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::time::Duration;

const QUEUE_COLUMNS: [&str; 9] = [
    "queue",
    "pending",
    "scheduled",
    "running",
    "dead",
    "completed",
    "oldest_runnable_age_s",
    "paused",
    "limits",
];

const JOB_COLUMNS: [&str; 7] = [
    "id",
    "state",
    "attempts",
    "run_at",
    "group_key",
    "last_error",
    "payload",
];

pub fn queues(store: &Store, out: &Output) -> Fallible {
    let mut rows = store.run(call::queues().raw())?;
    // Every queue's limits in one more query (one per queue took 66 s for
    // 20,000 queues): the ones set, as an object, or null.
    let limits: std::collections::HashMap<String, Value> = store
        .run(call::queue_limits())?
        .iter()
        .filter_map(|row| {
            let queue = row["queue"].as_str()?.to_owned();
            let set: serde_json::Map<String, Value> = alkstore::LIMIT_KEYS
                .iter()
                .filter(|k| !row[**k].is_null())
                .map(|k| ((*k).to_owned(), row[*k].clone()))
                .collect();
            (!set.is_empty()).then_some((queue, Value::Object(set)))
        })
        .collect();
    let rows = rows.as_array_mut().map_or(&mut [][..], |r| r);
    for row in rows.iter_mut() {
        let queue = row["queue"].as_str().unwrap_or_default();
        row["limits"] = limits.get(queue).cloned().unwrap_or(Value::Null);
    }
    out.rows(rows, &QUEUE_COLUMNS);
    Ok(())
}

/// Reads a queue's (or an outbox's) counts.
type Counts = Box<dyn Fn() -> alkstore::Result<Value>>;

/// The jobs of `name` as the admin functions take it: a queue's, or an
/// outbox's messages by its backing queue as `alkstore queues` lists it
/// (`__alkstore_outbox:NAME`), listed, requeued and purged like any
/// queue's jobs. Also its counts, for a confirmation.
fn listed(store: &Store, name: &str) -> Fallible<(Queue, Counts)> {
    Ok(match alkstore::outbox_of(name) {
        Some(outbox) => {
            let outbox = store.outbox(outbox)?;
            let queue = outbox.jobs().clone();
            (queue, Box::new(move || outbox.stats()))
        }
        None => {
            let queue = store.queue(name)?;
            let counted = queue.clone();
            (queue, Box::new(move || counted.stats()))
        }
    })
}

pub fn jobs(
    store: &Store,
    out: &Output,
    queue: &str,
    state: Option<&str>,
    after: i64,
    limit: i64,
) -> Fallible {
    let rows = listed(store, queue)?.0.list_jobs(state, after, limit)?;
    out.rows(&rows, &JOB_COLUMNS);
    if !out.json && rows.len() as i64 == limit {
        if let Some(last) = rows.last() {
            eprintln!("(more: --after {})", last["id"]);
        }
    }
    Ok(())
}

pub fn job(store: &Store, out: &Output, id: i64) -> Fallible {
    match store.get_job(id)? {
        Some(doc) => {
            out.doc(&doc);
            Ok(())
        }
        None => Err(format!("no job {id} (never enqueued, acked, or pruned)").into()),
    }
}

pub fn requeue(store: &Store, out: &Output, target: &str, dead: bool) -> Fallible {
    if dead {
        let (queue, _) = listed(store, target)?;
        let n = spinner(&format!("requeueing the dead jobs of {target}"), || {
            queue.requeue_dead_all()
        })?;
        out.done(
            "requeued",
            n.into(),
            &format!("{n} dead jobs of {target} back to pending"),
        );
        return Ok(());
    }
    let id: i64 = target.parse().map_err(|_| {
        format!("{target:?} is not a job id (to requeue a queue's dead jobs: --dead)")
    })?;
    if !store.run(call::requeue_dead(id))? {
        return Err(format!("job {id} is not dead: nothing requeued").into());
    }
    out.done("requeued", 1.into(), &format!("job {id} back to pending"));
    Ok(())
}

pub fn purge(store: &Store, out: &Output, queue: &str, state: &str, yes: bool) -> Fallible {
    // The state first: a bad one is refused before the question is asked.
    if !matches!(state, "pending" | "dead" | "completed") {
        return Err(alkstore::Error::InvalidArgument(format!(
            "state must be pending, dead or completed (running jobs are never purged), got {state:?}"
        ))
        .into());
    }
    let (q, counts) = listed(store, queue)?;
    if !yes {
        let stats = counts()?;
        let count = match state {
            "pending" => {
                stats["pending"].as_i64().unwrap_or(0) + stats["scheduled"].as_i64().unwrap_or(0)
            }
            other => stats[other].as_i64().unwrap_or(0),
        };
        eprint!("Delete {count} {state} jobs of queue {queue}? [y/N] ");
        std::io::stderr().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            return Err("not deleted (answer y, or pass --yes)".into());
        }
    }
    let n = spinner(&format!("deleting the {state} jobs of {queue}"), || {
        q.purge(state)
    })?;
    out.done(
        "purged",
        n.into(),
        &format!("{n} {state} jobs of {queue} deleted"),
    );
    Ok(())
}

pub fn pause(store: &Store, out: &Output, name: &str, outbox: bool, paused: bool) -> Fallible {
    let changed = match (outbox, paused) {
        (false, true) => store.queue(name)?.pause()?,
        (false, false) => store.queue(name)?.resume()?,
        (true, true) => store.outbox(name)?.pause()?,
        (true, false) => store.outbox(name)?.resume()?,
    };
    let what = if outbox { "outbox" } else { "queue" };
    let message = match (changed, paused) {
        (true, true) => format!("{what} {name} paused"),
        (true, false) => format!("{what} {name} resumed"),
        (false, true) => format!("{what} {name} was already paused"),
        (false, false) => format!("{what} {name} was not paused"),
    };
    out.done("changed", changed.into(), &message);
    Ok(())
}

pub fn enqueue(
    store: &Store,
    out: &Output,
    queue: &str,
    payload: &str,
    opts: Option<&str>,
) -> Fallible {
    let payload: Value =
        serde_json::from_str(payload).map_err(|e| format!("the payload is not JSON: {e}"))?;
    let id = match opts {
        // Options as given, checked by the database like any caller's.
        Some(opts) => store.run(call::enqueue_doc(queue, opts, &payload)?)?,
        None => store.queue(queue)?.enqueue(&EnqueueOpts::new(), &payload)?,
    };
    out.done("id", id.into(), &id.to_string());
    Ok(())
}

pub fn schedules(store: &Store, out: &Output) -> Fallible {
    let rows = store.schedules()?;
    out.rows(
        &rows,
        &[
            "name",
            "queue",
            "spec",
            "next_run_at",
            "last_run_at",
            "payload",
        ],
    );
    Ok(())
}

pub fn prune(store: &Store, out: &Output, batch: i64) -> Fallible {
    let mut total = 0;
    spinner("pruning", || -> alkstore::Result<()> {
        loop {
            let n = store.prune(batch)?;
            total += n;
            if n < batch {
                return Ok(());
            }
        }
    })?;
    out.done("pruned", json!(total), &format!("{total} rows pruned"));
    Ok(())
}

/// Runs a bulk call with a spinner and the elapsed time on standard error
/// (shown only on a terminal).
fn spinner<T>(what: &str, f: impl FnOnce() -> alkstore::Result<T>) -> alkstore::Result<T> {
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {msg} ({elapsed})").expect("template"));
    bar.set_message(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(100));
    let result = f();
    bar.finish_and_clear();
    result
}
