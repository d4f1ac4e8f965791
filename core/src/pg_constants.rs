//! The contract's constants as PL/pgSQL, generated from this crate so that
//! the PostgreSQL engine cannot drift from the Rust side:
//! `sql/postgres/generated/constants.sql` is [`sql`]'s output, written by
//! `cargo xtask codegen` and checked by `cargo xtask verify`.
//!
//! Each constant is an `IMMUTABLE` SQL function, which PostgreSQL inlines and
//! folds into the cached plans of the PL/pgSQL that calls it: no cost per call.

use crate::error::{Code, MAX_DETAIL_CHARS};
use crate::names::{NameKind, MAX_NAME_BYTES, OUTBOX_QUEUE_PREFIX, QUOTE_CHARS, RESERVED_PREFIX};
use crate::opts::{
    QueueOpts, DEFAULT_IDEMPOTENCY_TTL_MS, DEPENDENCY_MEMORY_MS, MAX_BATCH, MAX_DEPENDENCIES,
    MAX_DURATION_S, MAX_NOTIFY_BYTES, MAX_PRUNE_ROWS, MAX_WAIT_TTL_S, WAIT_LOCK_BUCKETS,
};
use std::fmt::Write;

const KINDS: [NameKind; 9] = [
    NameKind::Queue,
    NameKind::Outbox,
    NameKind::Stream,
    NameKind::Channel,
    NameKind::Lock,
    NameKind::Consumer,
    NameKind::Worker,
    NameKind::Owner,
    NameKind::Schedule,
];

fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn constant(out: &mut String, doc: &str, name: &str, ty: &str, value: &str) {
    let _ = write!(
        out,
        "\n-- {doc}\nCREATE OR REPLACE FUNCTION alkstore.{name} RETURNS {ty}\n\
         LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT {value}::{ty} $$;\n"
    );
}

/// The text of `sql/postgres/generated/constants.sql`.
pub fn sql() -> String {
    let mut out = String::from(
        "-- GENERATED from core/src/pg_constants.rs: do not edit. The contract's constants,\n\
         -- spelled once in Rust (core/) and here for PL/pgSQL. `cargo xtask verify`\n\
         -- fails when this file is stale; `cargo xtask codegen` rewrites it.\n",
    );
    constant(
        &mut out,
        "The installed code's version (alk_version).",
        "version()",
        "text",
        &quote(crate::VERSION),
    );
    constant(
        &mut out,
        "The schema version this code works on.",
        "schema_version()",
        "integer",
        &crate::SCHEMA_VERSION.to_string(),
    );
    constant(
        &mut out,
        "Queue, outbox, stream, channel and lock names must not start with it.",
        "reserved_prefix()",
        "text",
        &quote(RESERVED_PREFIX),
    );
    constant(
        &mut out,
        "The backing queue of outbox x is this prefix followed by x.",
        "outbox_prefix()",
        "text",
        &quote(OUTBOX_QUEUE_PREFIX),
    );
    constant(
        &mut out,
        "A notification payload's compact JSON must be shorter than this many bytes.",
        "max_notify_bytes()",
        "integer",
        &MAX_NOTIFY_BYTES.to_string(),
    );
    constant(
        &mut out,
        "The longest a wake-up registration lasts per call, in seconds.",
        "max_wait_ttl_s()",
        "double precision",
        &format!("{MAX_WAIT_TTL_S}"),
    );
    constant(
        &mut out,
        "Buckets of names a waiting session's advisory locks are taken per (a power of two).",
        "wait_buckets()",
        "integer",
        &WAIT_LOCK_BUCKETS.to_string(),
    );
    constant(
        &mut out,
        "The longest name of any kind, in bytes.",
        "max_name_bytes()",
        "integer",
        &MAX_NAME_BYTES.to_string(),
    );
    constant(
        &mut out,
        "The longest sentence of an error message, in characters.",
        "max_detail_chars()",
        "integer",
        &MAX_DETAIL_CHARS.to_string(),
    );
    constant(
        &mut out,
        "How many characters of an offending value an error message quotes.",
        "quote_chars()",
        "integer",
        &QUOTE_CHARS.to_string(),
    );
    constant(
        &mut out,
        "The longest duration any option or argument takes, in seconds.",
        "max_duration_s()",
        "numeric",
        &format!("{MAX_DURATION_S}"),
    );
    constant(
        &mut out,
        "The longest cron text of a schedule spec, in bytes.",
        "max_cron_bytes()",
        "integer",
        &crate::schedule::MAX_CRON_BYTES.to_string(),
    );
    constant(
        &mut out,
        "The largest max_jobs / max_events.",
        "max_batch()",
        "integer",
        &MAX_BATCH.to_string(),
    );

    constant(
        &mut out,
        "The largest max_rows of alk_prune.",
        "max_prune_rows()",
        "integer",
        &MAX_PRUNE_ROWS.to_string(),
    );
    constant(
        &mut out,
        "How long an idempotency key holds when no idempotency_ttl_s is given, in milliseconds.",
        "default_idempotency_ttl_ms()",
        "bigint",
        &DEFAULT_IDEMPOTENCY_TTL_MS.to_string(),
    );
    constant(
        &mut out,
        "The most jobs one depends_on may name (contract v1.2 §J).",
        "max_dependencies()",
        "integer",
        &MAX_DEPENDENCIES.to_string(),
    );
    constant(
        &mut out,
        "How long an id that ended without an ack is remembered once its row is gone, in milliseconds.",
        "dependency_memory_ms()",
        "bigint",
        &DEPENDENCY_MEMORY_MS.to_string(),
    );

    let d = QueueOpts::default();
    constant(
        &mut out,
        "Options of a queue never configured (contract §5).",
        "default_queue_opts()",
        "alkstore.queue_opts",
        &format!(
            "ROW({}, {}, {}, {}, {}, {})",
            d.visibility_timeout_ms,
            d.max_attempts,
            d.backoff_base_ms,
            d.backoff_max_ms,
            d.retain_completed_ms,
            d.retain_dead_ms
                .map_or("NULL".to_string(), |ms| ms.to_string())
        ),
    );

    let namespaced: Vec<String> = KINDS
        .iter()
        .filter(|k| k.is_namespaced())
        .map(|k| quote(k.label()))
        .collect();
    let _ = write!(
        out,
        "\n-- Whether names of this kind share the reserved namespace.\n\
         CREATE OR REPLACE FUNCTION alkstore.namespaced(kind text) RETURNS boolean\n\
         LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT kind IN ({}) $$;\n",
        namespaced.join(", ")
    );

    let arms: String = Code::ALL
        .iter()
        .map(|c| format!(" WHEN {} THEN {}", quote(c.code()), quote(c.variant())))
        .collect();
    let _ = write!(
        out,
        "\n-- The facade variant of each error code (contract §3).\n\
         CREATE OR REPLACE FUNCTION alkstore.variant(code text) RETURNS text\n\
         LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT CASE code{arms} END $$;\n"
    );
    out
}
