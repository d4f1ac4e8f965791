//! The function catalogue: every `alk_*` function, which engines have it,
//! how many arguments it takes, its PostgreSQL argument types, the shape of
//! its result and which role may call it on PostgreSQL (contract v1.1 §A1).
//!
//! It is the one list of functions. The SQLite engine registers exactly
//! these (its tests fail on any difference), the facade's call layer takes
//! argument types and result shapes from it, and the PostgreSQL tests
//! compare it with what an install created and granted.

/// Which engines implement a function.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Engines {
    /// SQLite and PostgreSQL.
    Both,
    /// PostgreSQL only (LISTEN-based wake-ups, the channel mapping).
    Postgres,
    /// SQLite only (reading notifications, which PostgreSQL delivers itself).
    Sqlite,
}

/// The PostgreSQL role that may execute a function (contract v1.1 §A1).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// `alkstore_user`: what applications and their workers call.
    User,
    /// `alkstore_admin`: also what changes policy or reaches across queues.
    Admin,
}

impl Role {
    /// The role's name.
    pub fn name(self) -> &'static str {
        match self {
            Role::User => "alkstore_user",
            Role::Admin => "alkstore_admin",
        }
    }
}

/// The shape of a function's result, before the facade turns it into JSON.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Returns {
    /// An integer (ids, counts, offsets, tokens).
    Int,
    /// A boolean (SQLite: 0 / 1).
    Bool,
    /// Text.
    Text,
    /// A JSON document (PostgreSQL `jsonb` or `bigint[]`; SQLite JSON text).
    Json,
    /// A set (PostgreSQL `SETOF` rows; SQLite a JSON array).
    Rows,
    /// Nothing (NULL).
    Void,
}

/// Where SQLite lets a database file's own schema (a view, a trigger, a
/// generated column, a CHECK or a DEFAULT) call a function. An application
/// may open a file it did not write, or attach one: whatever that file's
/// schema calls runs with the application's connection (docs/security.md,
/// "SQLite: what a database file's schema can call"). PostgreSQL answers
/// the same question with its roles ([`Role`]), so only SQLite reads this.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum InSchema {
    /// Never (`SQLITE_DIRECTONLY`): only a statement the application itself
    /// prepares may call it. Every function that takes, settles or removes
    /// work, or changes policy: a schema must not purge a queue when read.
    Never,
    /// From a schema SQLite trusts (`PRAGMA trusted_schema = 1`, its
    /// default), not from one it does not: the functions that only add
    /// work, so that a trigger can fill an outbox with its business row,
    /// and `alk_version`. (Not the reads: a view in an attached file could
    /// copy the application's jobs into that file.)
    Trusted,
    /// From any schema (`SQLITE_INNOCUOUS`). No function is: every one may
    /// create the schema on first use, which is a write.
    Anywhere,
}

/// One function.
#[derive(Copy, Clone, Debug)]
pub struct Function {
    /// Its SQL name.
    pub name: &'static str,
    /// Which engines have it.
    pub engines: Engines,
    /// Its arguments in order, each `"name type"` as PostgreSQL declares
    /// it (`"job_id bigint"`, `"delay_s double precision"`); SQLite takes the
    /// same positions. A required argument for which NULL is a meaning of
    /// its own (`alk_sequence`'s stream: every stream) is written with
    /// ` NULL` after its type; an optional one always may be NULL.
    pub args: &'static [&'static str],
    /// How many leading arguments are required (the rest have defaults).
    pub required: usize,
    /// Its result.
    pub returns: Returns,
    /// Who may call it on PostgreSQL.
    pub role: Role,
    /// A procedure on PostgreSQL (`CALL`, a row of its INOUT arguments).
    pub procedure: bool,
    /// Where a database file's schema may call it on SQLite.
    pub in_schema: InSchema,
    /// What it does to the database on SQLite: a function that writes runs
    /// as one write transaction of its own (or a savepoint in the caller's).
    pub access: Access,
    /// Its work is bounded by its arguments (a few rows, tens of
    /// microseconds): what a worker, producer or consumer calls per job or
    /// event. The Rust crate's sqlx SQLite store runs these on the
    /// connection's raw handle from the calling task (docs/benchmarks.md,
    /// "Workers").
    pub bounded: bool,
}

/// What a function does to a SQLite database ([`Function::access`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Access {
    /// It only reads.
    Reads,
    /// It writes.
    Writes,
}

/// One argument of a function ([`Function::params`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Param {
    /// Its name, as PostgreSQL declares it.
    pub name: &'static str,
    /// Its PostgreSQL type (`text`, `bigint[]`, `double precision`, …).
    pub pg_type: &'static str,
    /// Whether NULL is a value it takes: every optional argument, and a
    /// required one marked ` NULL` in the catalogue.
    pub nullable: bool,
}

impl Function {
    /// The argument counts it accepts.
    pub fn arities(&self) -> std::ops::RangeInclusive<usize> {
        self.required..=self.args.len()
    }

    /// Its arguments, parsed from [`Function::args`].
    pub fn params(&self) -> impl Iterator<Item = Param> + '_ {
        self.args.iter().enumerate().map(|(i, a)| {
            let (name, rest) = a.split_once(' ').expect("\"name type\"");
            let (pg_type, null) = match rest.strip_suffix(" NULL") {
                Some(t) => (t, true),
                None => (rest, false),
            };
            Param {
                name,
                pg_type,
                nullable: null || i >= self.required,
            }
        })
    }

    /// The PostgreSQL type of argument `i` (which must exist).
    pub fn pg_type(&self, i: usize) -> &'static str {
        let a = self.args[i];
        let t = a.split_once(' ').map_or(a, |(_, t)| t);
        t.strip_suffix(" NULL").unwrap_or(t)
    }

    /// The PostgreSQL argument types, in order.
    pub fn pg_types(&self) -> Vec<&'static str> {
        (0..self.args.len()).map(|i| self.pg_type(i)).collect()
    }

    /// Whether `engine` implements it.
    pub fn on_sqlite(&self) -> bool {
        self.engines != Engines::Postgres
    }

    /// Whether PostgreSQL implements it.
    pub fn on_postgres(&self) -> bool {
        self.engines != Engines::Sqlite
    }

    /// The PostgreSQL signature, as `GRANT … ON ROUTINE` spells it.
    pub fn pg_signature(&self) -> String {
        format!("{}({})", self.name, self.pg_types().join(", "))
    }
}

const fn f(
    name: &'static str,
    engines: Engines,
    args: &'static [&'static str],
    required: usize,
    returns: Returns,
    role: Role,
) -> Function {
    Function {
        name,
        engines,
        args,
        required,
        returns,
        role,
        procedure: false,
        // Direct-only unless decided otherwise below: a new function is safe
        // until someone has thought about it in a trigger.
        in_schema: InSchema::Never,
        // Writes unless said otherwise: a function that writes and is taken
        // for a reader would not be atomic on SQLite.
        access: Access::Writes,
        bounded: false,
    }
}

/// `function`, callable from a trusted schema ([`InSchema::Trusted`]).
const fn trusted(function: Function) -> Function {
    Function {
        in_schema: InSchema::Trusted,
        ..function
    }
}

/// `function`, which only reads ([`Access::Reads`]).
const fn reads(function: Function) -> Function {
    Function {
        access: Access::Reads,
        ..function
    }
}

/// `function`, whose work its arguments bound ([`Function::bounded`]).
const fn bounded(function: Function) -> Function {
    Function {
        bounded: true,
        ..function
    }
}

use crate::NameKind;
use Engines::{Both, Postgres, Sqlite};
use Returns::{Bool, Int, Json, Rows, Text, Void};
use Role::{Admin, User};

/// Every function, in the order of the contract's sections. On SQLite
/// every one is direct-only but those wrapped in `trusted(…)`: the ones
/// that only add work, and `alk_version`.
pub const FUNCTIONS: &[Function] = &[
    reads(trusted(f("alk_version", Both, &[], 0, Json, User))),
    f("alk_init", Both, &[], 0, Int, User),
    // Queues (v1 §5).
    bounded(trusted(f(
        "alk_enqueue",
        Both,
        &["queue text", "opts jsonb", "payload jsonb"],
        3,
        Int,
        User,
    ))),
    bounded(trusted(f(
        "alk_enqueue_batch",
        Both,
        &["queue text", "opts jsonb", "payloads jsonb"],
        3,
        Json,
        User,
    ))),
    bounded(f(
        "alk_claim",
        Both,
        &["queue_name text", "worker text", "max_jobs integer"],
        2,
        Rows,
        User,
    )),
    bounded(f(
        "alk_ack",
        Both,
        &["job_id bigint", "worker text", "result jsonb"],
        2,
        Bool,
        User,
    )),
    bounded(f(
        "alk_ack_batch",
        Both,
        &["job_ids bigint[]", "worker text"],
        2,
        Int,
        User,
    )),
    bounded(f(
        "alk_retry",
        Both,
        &[
            "job_id bigint",
            "worker text",
            "error text",
            "delay_s double precision",
        ],
        3,
        Text,
        User,
    )),
    bounded(f(
        "alk_fail",
        Both,
        &["job_id bigint", "worker text", "error text"],
        3,
        Bool,
        User,
    )),
    bounded(f(
        "alk_heartbeat",
        Both,
        &["job_id bigint", "worker text", "extend_s double precision"],
        2,
        Bool,
        User,
    )),
    // Giving a claim back (v1.3 §Q).
    f(
        "alk_release",
        Both,
        &["job_id bigint", "worker text", "delay_s double precision"],
        2,
        Bool,
        User,
    ),
    f(
        "alk_release_batch",
        Both,
        &[
            "job_ids bigint[]",
            "worker text",
            "delay_s double precision",
        ],
        2,
        Int,
        User,
    ),
    f("alk_cancel", Both, &["job_id bigint"], 1, Bool, User),
    reads(f("alk_get_job", Both, &["job_id bigint"], 1, Json, User)),
    reads(f("alk_job_errors", Both, &["job_id bigint"], 1, Json, User)),
    f("alk_requeue_dead", Both, &["job_id bigint"], 1, Bool, Admin),
    f("alk_delete_job", Both, &["job_id bigint"], 1, Bool, Admin),
    f(
        "alk_queue_configure",
        Both,
        &["queue text", "opts jsonb"],
        2,
        Json,
        Admin,
    ),
    reads(f("alk_queue_opts", Both, &["queue text"], 1, Json, User)),
    reads(f("alk_queue_stats", Both, &["queue text"], 1, Json, User)),
    f("alk_sweep", Both, &["queue text"], 0, Int, User),
    // Job features (v1.1 §C).
    f("alk_queue_pause", Both, &["queue text"], 1, Bool, Admin),
    f("alk_queue_resume", Both, &["queue text"], 1, Bool, Admin),
    f("alk_outbox_pause", Both, &["outbox text"], 1, Bool, Admin),
    f("alk_outbox_resume", Both, &["outbox text"], 1, Bool, Admin),
    f("alk_prune", Both, &["max_rows integer"], 1, Int, User),
    // Operating it (v1.1 §D).
    reads(f("alk_queues", Both, &[], 0, Rows, Admin)),
    reads(f("alk_queue_limits", Both, &[], 0, Rows, Admin)),
    reads(f(
        "alk_list_jobs",
        Both,
        &[
            "queue text",
            "state text",
            "after_id bigint",
            "max_jobs integer",
        ],
        1,
        Rows,
        Admin,
    )),
    f("alk_requeue_dead_all", Both, &["queue text"], 1, Int, Admin),
    f(
        "alk_purge",
        Both,
        &["queue text", "state text"],
        2,
        Int,
        Admin,
    ),
    // Outboxes (v1 §6).
    bounded(trusted(f(
        "alk_outbox_enqueue",
        Both,
        &["outbox text", "opts jsonb", "payload jsonb"],
        3,
        Int,
        User,
    ))),
    bounded(f(
        "alk_outbox_claim",
        Both,
        &["outbox text", "worker text", "max_jobs integer"],
        2,
        Rows,
        User,
    )),
    reads(f("alk_outbox_stats", Both, &["outbox text"], 1, Json, User)),
    // Streams (v1 §7).
    bounded(trusted(f(
        "alk_publish",
        Both,
        &["stream text", "payload jsonb", "key text"],
        2,
        Int,
        User,
    ))),
    reads(bounded(f(
        "alk_read",
        Both,
        &["stream text", "after_offset bigint", "max_events integer"],
        3,
        Rows,
        User,
    ))),
    bounded(f(
        "alk_save_offset",
        Both,
        &["stream text", "consumer text", "offset bigint"],
        3,
        Bool,
        User,
    )),
    reads(bounded(f(
        "alk_get_offset",
        Both,
        &["stream text", "consumer text"],
        2,
        Int,
        User,
    ))),
    f(
        "alk_reset_offset",
        Both,
        &["stream text", "consumer text", "offset bigint"],
        3,
        Bool,
        Admin,
    ),
    reads(f("alk_streams", Both, &[], 0, Rows, Admin)),
    // Stream retention (v1.1 §E).
    f(
        "alk_stream_configure",
        Both,
        &["stream text", "opts jsonb"],
        2,
        Json,
        Admin,
    ),
    reads(f("alk_stream_info", Both, &["stream text"], 1, Json, User)),
    // Sequencing (v1.2 §K): a procedure on PostgreSQL (its second argument
    // is the INOUT result, passed NULL), a function returning 0 on SQLite,
    // where it only reads.
    Function {
        procedure: true,
        in_schema: InSchema::Trusted,
        access: Access::Reads,
        ..f(
            "alk_sequence",
            Both,
            &["stream text NULL", "sequenced bigint"],
            1,
            Int,
            User,
        )
    },
    // Schedules (v1.1 §F).
    f(
        "alk_schedule",
        Both,
        &[
            "name text",
            "queue text",
            "spec jsonb",
            "payload jsonb",
            "opts jsonb",
        ],
        4,
        Text,
        Admin,
    ),
    f("alk_unschedule", Both, &["name text"], 1, Bool, Admin),
    reads(f("alk_schedules", Both, &[], 0, Rows, User)),
    f("alk_schedule_tick", Both, &[], 0, Int, User),
    // The maintenance worker's chores for a scheduler such as pg_cron
    // (docs/operating.md): a procedure that commits between them; its
    // second argument is the INOUT count of rounds, passed NULL. SQLite
    // has `alkstore maintain` instead.
    Function {
        procedure: true,
        ..f(
            "alk_maintain",
            Postgres,
            &["run_for_s double precision", "rounds bigint"],
            1,
            Int,
            User,
        )
    },
    // Notifications (v1 §8).
    bounded(trusted(f(
        "alk_notify",
        Both,
        &["channel text", "payload jsonb"],
        2,
        Void,
        User,
    ))),
    reads(f(
        "alk_notifications",
        Sqlite,
        &["channel text", "after_id bigint", "max integer"],
        2,
        Json,
        User,
    )),
    f("alk_channel", Postgres, &["channel text"], 1, Text, User),
    // Wake-ups (v1 §10).
    f(
        "alk_listen_queue",
        Postgres,
        &["queue text", "ttl_s double precision"],
        1,
        Text,
        User,
    ),
    f(
        "alk_listen_outbox",
        Postgres,
        &["outbox text", "ttl_s double precision"],
        1,
        Text,
        User,
    ),
    f(
        "alk_listen_stream",
        Postgres,
        &["stream text", "ttl_s double precision"],
        1,
        Text,
        User,
    ),
    f(
        "alk_unlisten_queue",
        Postgres,
        &["queue text"],
        1,
        Bool,
        User,
    ),
    f(
        "alk_unlisten_outbox",
        Postgres,
        &["outbox text"],
        1,
        Bool,
        User,
    ),
    f(
        "alk_unlisten_stream",
        Postgres,
        &["stream text"],
        1,
        Bool,
        User,
    ),
    // Leases (v1 §9).
    f(
        "alk_lock_acquire",
        Both,
        &["name text", "owner text", "ttl_s double precision"],
        3,
        Int,
        User,
    ),
    f(
        "alk_lock_renew",
        Both,
        &["name text", "owner text", "ttl_s double precision"],
        3,
        Bool,
        User,
    ),
    f(
        "alk_lock_release",
        Both,
        &["name text", "owner text"],
        2,
        Bool,
        User,
    ),
    reads(f("alk_locks", Both, &[], 0, Rows, Admin)),
];

/// Looks a function up by name.
pub fn get(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().find(|f| f.name == name)
}

/// The argument of `function` that holds enqueue options, by position. A
/// NUL in an option's string is refused as the options' error (ALK03) on
/// every engine; PostgreSQL's `jsonb` cannot hold one and would refuse the
/// document with its own 22P05, so callers refuse it before sending.
pub fn enqueue_opts_arg(function: &str) -> Option<OptsArg> {
    let at = |position, batch| Some(OptsArg { position, batch });
    match function {
        "alk_enqueue" | "alk_outbox_enqueue" => at(1, false),
        "alk_enqueue_batch" => at(1, true),
        "alk_schedule" => at(4, false),
        _ => None,
    }
}

/// Where a function takes enqueue options ([`enqueue_opts_arg`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct OptsArg {
    /// The argument's position.
    pub position: usize,
    /// Whether they are a batch's options (`alk_enqueue_batch`: shared
    /// options, no per-job key), not one job's.
    pub batch: bool,
}

/// The arguments of `function` that are names, by position, with their
/// kind: both engines check them as names (contract §2), so callers that
/// must refuse something before it reaches an engine (a NUL character,
/// which PostgreSQL text cannot hold) refuse it as a name there too. The
/// SQLite engine's tests check this list against what its functions do.
pub fn name_args(function: &str) -> &'static [(usize, NameKind)] {
    use NameKind::*;
    match function {
        "alk_enqueue"
        | "alk_enqueue_batch"
        | "alk_queue_configure"
        | "alk_queue_opts"
        | "alk_queue_stats"
        | "alk_sweep"
        | "alk_queue_pause"
        | "alk_queue_resume"
        | "alk_list_jobs"
        | "alk_requeue_dead_all"
        | "alk_purge"
        | "alk_listen_queue"
        | "alk_unlisten_queue" => &[(0, Queue)],
        "alk_claim" => &[(0, Queue), (1, Worker)],
        "alk_ack" | "alk_ack_batch" | "alk_retry" | "alk_fail" | "alk_heartbeat"
        | "alk_release" | "alk_release_batch" => &[(1, Worker)],
        "alk_outbox_enqueue"
        | "alk_outbox_stats"
        | "alk_outbox_pause"
        | "alk_outbox_resume"
        | "alk_listen_outbox"
        | "alk_unlisten_outbox" => &[(0, Outbox)],
        "alk_outbox_claim" => &[(0, Outbox), (1, Worker)],
        "alk_publish"
        | "alk_read"
        | "alk_stream_configure"
        | "alk_stream_info"
        | "alk_sequence"
        | "alk_listen_stream"
        | "alk_unlisten_stream" => &[(0, Stream)],
        "alk_save_offset" | "alk_get_offset" | "alk_reset_offset" => &[(0, Stream), (1, Consumer)],
        "alk_schedule" => &[(0, Schedule), (1, Queue)],
        "alk_unschedule" => &[(0, Schedule)],
        "alk_notify" | "alk_notifications" | "alk_channel" => &[(0, Channel)],
        "alk_lock_acquire" | "alk_lock_renew" | "alk_lock_release" => &[(0, Lock), (1, Owner)],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_arities_sane() {
        for (i, a) in FUNCTIONS.iter().enumerate() {
            assert!(a.name.starts_with("alk_"), "{}", a.name);
            assert!(a.required <= a.args.len(), "{}", a.name);
            for p in a.params() {
                assert!(
                    !p.name.is_empty()
                        && p.name.bytes().all(|c| c.is_ascii_lowercase() || c == b'_'),
                    "{}: {p:?}",
                    a.name
                );
            }
            assert!(
                FUNCTIONS[i + 1..].iter().all(|b| b.name != a.name),
                "{} twice",
                a.name
            );
        }
        assert_eq!(get("alk_claim").unwrap().arities(), 2..=3);
        assert_eq!(
            get("alk_retry").unwrap().pg_signature(),
            "alk_retry(bigint, text, text, double precision)"
        );
    }
}
