//! `alkstore`: operate alkstore from a terminal or a script — every queue's
//! depth, dead jobs and their errors, bulk requeue and purge, pause,
//! streams and consumer lag, leases, install and upgrade, and a Prometheus
//! exporter. Over a URL: `sqlite:PATH` or `postgres://…` (`--url` or
//! `ALKSTORE_URL`).
//!
//! Human tables by default, `--json` for scripts. An error is one line with
//! the contract's code on standard error and exit status 1 (2: bad usage).

mod install;
mod jobs;
mod maintain;
mod metrics;
mod output;
mod relay;
mod signals;
mod streams;
mod web;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "alkstore",
    version,
    about = "Operate alkstore queues, streams and leases"
)]
struct Cli {
    /// The database: `sqlite:PATH` or `postgres://…`. With a password,
    /// prefer `ALKSTORE_URL`: a command line is visible to every user of the
    /// machine (`ps`); `--help` never shows the variable's value.
    #[arg(long, env = "ALKSTORE_URL", hide_env_values = true, global = true)]
    url: Option<String>,
    /// With a transaction-pooling PgBouncer in `--url`: the server itself,
    /// for the one connection that must keep its session (`LISTEN`, the
    /// wake-ups of `relay` and `tail -f`). Without it, that connection goes
    /// through the pooler, misses wake-ups and leaves its `LISTEN` on a
    /// server connection other clients of the pooler then get. Ignored on
    /// SQLite and by the commands that never wait (`web`, `metrics`, the
    /// listings).
    #[arg(
        long,
        env = "ALKSTORE_LISTENER_URL",
        hide_env_values = true,
        global = true
    )]
    listener_url: Option<String>,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every queue and outbox: pending, scheduled, running, dead, completed, oldest age, paused.
    Queues,
    /// A page of a queue's jobs in id order.
    Jobs {
        queue: String,
        /// pending, running, dead or completed (default: every state).
        #[arg(long)]
        state: Option<String>,
        /// At most this many jobs.
        #[arg(long, default_value_t = 50)]
        limit: i64,
        /// Jobs after this id (the last id of the previous page).
        #[arg(long, default_value_t = 0)]
        after: i64,
    },
    /// One job's document.
    Job { id: i64 },
    /// Puts dead jobs back to pending: one by id, or a queue's all with --dead.
    Requeue {
        /// A job id, or with --dead a queue.
        target: String,
        /// Requeue every dead job of the queue TARGET.
        #[arg(long)]
        dead: bool,
    },
    /// Deletes every job of a queue in one state (asks first unless --yes).
    Purge {
        queue: String,
        /// pending, dead or completed.
        #[arg(long)]
        state: String,
        /// Do not ask.
        #[arg(long, short)]
        yes: bool,
    },
    /// Pauses a queue (or an outbox): claims return nothing until resumed.
    Pause {
        queue: String,
        /// QUEUE names an outbox.
        #[arg(long)]
        outbox: bool,
    },
    /// Resumes a paused queue (or outbox).
    Resume {
        queue: String,
        /// QUEUE names an outbox.
        #[arg(long)]
        outbox: bool,
    },
    /// Enqueues one job; prints its id.
    Enqueue {
        queue: String,
        /// The payload, JSON.
        payload: String,
        /// Enqueue options, a JSON object (delay_s, priority, group_key, …).
        #[arg(long)]
        opts: Option<String>,
    },
    /// Every stream: first and last offsets, consumers and their lag.
    Streams,
    /// Prints a stream's events after an offset; -f follows new ones.
    Tail {
        stream: String,
        /// Events after this offset (default: the last 10).
        #[arg(long)]
        from: Option<i64>,
        /// Keep printing new events as they are published (wake-ups, no polling).
        #[arg(long, short)]
        follow: bool,
    },
    /// Publishes one event; prints its id.
    Publish {
        stream: String,
        /// The payload, JSON.
        payload: String,
        /// The event's key.
        #[arg(long)]
        key: Option<String>,
    },
    /// Every lease: owner, fencing token, expiry, held.
    Locks,
    /// Every schedule: its spec, queue, next and last run.
    Schedules,
    /// Deletes what outlived its retention (completed and dead jobs, keys, old notifications).
    Prune {
        /// Rows per call (the calls repeat until nothing is left).
        #[arg(long, default_value_t = 10_000)]
        batch: i64,
    },
    /// Installs alkstore: --print-sql prints the plain PostgreSQL install script.
    Install {
        /// Print the plain SQL install (for managed PostgreSQL: psql -f, or any client).
        #[arg(long)]
        print_sql: bool,
    },
    /// Brings the database's alkstore to this version (extension, plain SQL install or SQLite).
    Upgrade,
    /// Serves Prometheus metrics on /metrics.
    Metrics {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:9187")]
        listen: String,
        /// Seconds a scrape waits for the database before it answers
        /// `alkstore_up 0` (below Prometheus's scrape_timeout).
        #[arg(long, default_value_t = 5.0)]
        scrape_timeout: f64,
        /// Queues with series of their own (the largest backlogs); the rest
        /// are summed under queue="__alkstore_other".
        #[arg(long, default_value_t = 1000)]
        max_queues: usize,
        /// Streams with series of their own (the highest offsets); the rest
        /// are folded under stream="__alkstore_other".
        #[arg(long, default_value_t = 1000)]
        max_streams: usize,
    },
    /// Does the maintenance worker's chores for a database no worker serves
    /// (the plain install, a SQLite file): sequences streams, sweeps
    /// (expired claims, due jobs, the job table's rotation), ticks
    /// schedules and prunes, each in a transaction of its own, until
    /// SIGTERM or SIGINT.
    Maintain {
        /// Seconds between sequencing, sweeping and ticking.
        #[arg(long, default_value_t = 1.0)]
        every: f64,
        /// Seconds between prunes.
        #[arg(long, default_value_t = 10.0)]
        prune_every: f64,
    },
    /// Delivers outbox messages and stream events to NATS JetStream,
    /// RabbitMQ, Redis Streams and webhooks (docs/relay.md), until SIGTERM
    /// or SIGINT. A bad config file: one line naming the route and the
    /// key, exit status 2.
    Relay {
        /// The routes: a TOML file of [[route]] tables.
        #[arg(long)]
        config: std::path::PathBuf,
        /// Serve the relay's Prometheus metrics on this address (/metrics).
        #[arg(long)]
        metrics: Option<String>,
    },
    /// Serves the web dashboard (and its JSON API under /api).
    Web {
        /// Address to listen on; one that is not loopback needs a token.
        #[arg(long, default_value = "127.0.0.1:8081")]
        listen: String,
        /// Every request must carry it (`Authorization: Bearer TOKEN`, or a
        /// browser's login).
        #[arg(long, env = "ALKSTORE_WEB_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Refuse every change (403).
        #[arg(long)]
        read_only: bool,
    },
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("alkstore: {e}");
        std::process::exit(1);
    }
}

/// What a command fails with: a contract or engine error from the
/// database, or a message of the tool's own.
pub type Fallible<T = ()> = Result<T, Box<dyn std::error::Error>>;

fn run(cli: Cli) -> Fallible {
    let out = output::Output { json: cli.json };
    if let Command::Install { print_sql } = &cli.command {
        return install::install(*print_sql);
    }
    if let Command::Relay { config, metrics } = &cli.command {
        // The file is read and checked before the database is opened: a
        // bad one claims and reads nothing.
        let config = match alkstore_relay::Config::load(config) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("alkstore relay: {e}");
                std::process::exit(2);
            }
        };
        let url = cli
            .url
            .as_deref()
            .ok_or("no database: give --url or set ALKSTORE_URL (sqlite:PATH or postgres://…)")?;
        let store = open(url, cli.listener_url.as_deref())?;
        return relay::run(store, config, metrics.as_deref());
    }
    let url = cli
        .url
        .ok_or("no database: give --url or set ALKSTORE_URL (sqlite:PATH or postgres://…)")?;
    if let Command::Upgrade = cli.command {
        return install::upgrade(&url, &out);
    }
    if let Command::Metrics {
        listen,
        scrape_timeout,
        max_queues,
        max_streams,
    } = &cli.command
    {
        if !(scrape_timeout.is_finite() && *scrape_timeout > 0.0) {
            return Err("--scrape-timeout must be a number of seconds above 0".into());
        }
        return metrics::serve(
            &url,
            listen,
            std::time::Duration::from_secs_f64(*scrape_timeout),
            metrics::Bounds {
                queues: *max_queues,
                streams: *max_streams,
            },
        );
    }
    if let Command::Maintain { every, prune_every } = &cli.command {
        maintain::check(*every, *prune_every)?;
        // A mistyped path would be a new, empty database kept forever.
        if let alkstore::url::DbUrl::Sqlite(path) = alkstore::url::DbUrl::parse(&url)? {
            if !std::path::Path::new(&path).exists() {
                return Err(
                    format!("no database at {path}: alkstore maintain creates none").into(),
                );
            }
        }
        return maintain::run(
            open(&url, cli.listener_url.as_deref())?,
            *every,
            *prune_every,
        );
    }
    if let Command::Web {
        listen,
        token,
        read_only,
    } = cli.command
    {
        return web::serve(&url, &listen, token, read_only);
    }
    // Commands that only look open a SQLite file read-only: nothing is
    // created or switched to WAL, a mistyped path is an error (issue 64).
    let inspects = matches!(
        cli.command,
        Command::Queues
            | Command::Jobs { .. }
            | Command::Job { .. }
            | Command::Streams
            | Command::Locks
            | Command::Schedules
    );
    let store = if inspects {
        alkstore::open_to_inspect(&url)?
    } else {
        open(&url, cli.listener_url.as_deref())?
    };
    let store = &store;
    match cli.command {
        Command::Queues => jobs::queues(store, &out),
        Command::Jobs {
            queue,
            state,
            limit,
            after,
        } => jobs::jobs(store, &out, &queue, state.as_deref(), after, limit),
        Command::Job { id } => jobs::job(store, &out, id),
        Command::Requeue { target, dead } => jobs::requeue(store, &out, &target, dead),
        Command::Purge { queue, state, yes } => jobs::purge(store, &out, &queue, &state, yes),
        Command::Pause { queue, outbox } => jobs::pause(store, &out, &queue, outbox, true),
        Command::Resume { queue, outbox } => jobs::pause(store, &out, &queue, outbox, false),
        Command::Enqueue {
            queue,
            payload,
            opts,
        } => jobs::enqueue(store, &out, &queue, &payload, opts.as_deref()),
        Command::Streams => streams::streams(store, &out),
        Command::Tail {
            stream,
            from,
            follow,
        } => streams::tail(store, &out, &stream, from, follow),
        Command::Publish {
            stream,
            payload,
            key,
        } => streams::publish(store, &out, &stream, &payload, key.as_deref()),
        Command::Locks => streams::locks(store, &out),
        Command::Schedules => jobs::schedules(store, &out),
        Command::Prune { batch } => jobs::prune(store, &out, batch),
        Command::Install { .. }
        | Command::Upgrade
        | Command::Metrics { .. }
        | Command::Maintain { .. }
        | Command::Relay { .. }
        | Command::Web { .. } => {
            unreachable!()
        }
    }
}

/// Opens the database, its wake-up listener on `listener_url` when given
/// (PostgreSQL: the server behind a transaction-pooling PgBouncer; a
/// SQLite store has no listener, and ignores it).
fn open(url: &str, listener_url: Option<&str>) -> Fallible<alkstore::Store> {
    let (Some(listener), alkstore::url::DbUrl::Postgres(url)) =
        (listener_url, alkstore::url::DbUrl::parse(url)?)
    else {
        return Ok(alkstore::open(url)?);
    };
    match alkstore::url::DbUrl::parse(listener) {
        Ok(alkstore::url::DbUrl::Postgres(_)) => {}
        Ok(alkstore::url::DbUrl::Sqlite(_)) => {
            return Err("--listener-url must be a postgres:// URL (the server itself)".into())
        }
        Err(e) => return Err(format!("--listener-url: {e}").into()),
    }
    Ok(alkstore::PgStore::connect_with_listener(&url, listener)?.into())
}
