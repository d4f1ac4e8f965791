//! Outboxes (contract §6, ADR-014): an outbox name derives its backing queue
//! `__alkstore_outbox:{name}` here, in the database, with fixed options.
//! The reserved prefix keeps that queue out of reach of the queue functions.

use crate::args::Args;
use crate::conn::Conn;
use crate::error::Result;
use crate::out::Out;
use crate::queue;
use alkstore_core::{names, EnqueueOpts, NameKind, QueueOpts};

fn backing_queue(args: &Args) -> Result<String> {
    Ok(names::outbox_queue(args.name(0, NameKind::Outbox)?))
}

/// `alk_outbox_enqueue(outbox, opts, payload)` → job id, visible on commit.
pub fn alk_outbox_enqueue(conn: &Conn, args: &Args) -> Result<Out> {
    let queue = backing_queue(args)?;
    let opts = EnqueueOpts::parse(args.opts(1)?.as_ref())?;
    let payload = args.payload(2, "payload")?;
    let id = queue::enqueue_one(conn, &queue, &QueueOpts::outbox(), &opts, &payload)?;
    Ok(Out::Int(id))
}

/// `alk_outbox_claim(outbox, worker[, max_jobs])` → jobs, shaped as `alk_claim`'s.
pub fn alk_outbox_claim(conn: &Conn, args: &Args) -> Result<Out> {
    let queue = backing_queue(args)?;
    queue::claim_from(conn, &queue, args)
}

/// `alk_outbox_stats(outbox)` → `alk_queue_stats` of the backing queue.
pub fn alk_outbox_stats(conn: &Conn, args: &Args) -> Result<Out> {
    let queue = backing_queue(args)?;
    Ok(Out::Text(queue::stats_of(conn, &queue, &queue, true)?))
}
