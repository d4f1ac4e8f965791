//! `alkstore metrics`: a Prometheus exporter. Each scrape of `/metrics`
//! reads `alk_queues()` and `alk_streams()` once (on PostgreSQL also what
//! holds back vacuum and the dead tuples of alkstore's tables) and answers
//! in the text exposition format; a failed read answers `alkstore_up 0` and
//! counts `alkstore_exporter_scrape_errors_total`.
//!
//! Queues and streams come into being by enqueueing and publishing, which
//! any application role may do: the series per queue and per stream are
//! bounded ([`Bounds`]), the largest backlogs (the longest streams) by
//! name, the rest folded into one name, [`OTHER`], that no queue or
//! stream can have (100,000 queues made a scrape 113 MB and the exporter
//! 1.2 GB).

use crate::output::visible;
use crate::Fallible;
use axum::http::{header, StatusCode};
use prometheus::{
    Encoder, GaugeVec, IntCounter, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};
use std::sync::mpsc;
use std::time::Duration;

/// The label of what is beyond the bounds: the reserved prefix makes it a
/// name no queue or stream can take.
pub const OTHER: &str = "__alkstore_other";

/// How many queues and streams get series of their own.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Queues with their own series: the largest backlogs (pending,
    /// scheduled, running and dead), then by name.
    pub queues: usize,
    /// Streams with their own series (and their consumers'): the highest
    /// last offsets, then by name.
    pub streams: usize,
}

/// One queue's series, or the fold of those beyond the bound.
struct QueueRow {
    name: String,
    /// pending, scheduled, running, dead, completed.
    counts: [i64; 5],
    age_s: f64,
    /// 1 while paused; for the fold, how many of its queues are.
    paused: i64,
}

/// A stream's name, last offset and its consumers' names and lags.
type StreamRow = (String, i64, Vec<(String, i64)>);

const STATES: [&str; 5] = ["pending", "scheduled", "running", "dead", "completed"];

/// The queues with the largest backlogs (pending, scheduled, running and
/// dead; then by name) up to `keep`, and the rest folded into [`OTHER`]:
/// counts add up, the age is the largest, `paused` counts paused queues.
/// Also how many were folded.
fn bounded_queues(
    queues: Vec<alkstore::call::QueueSummary>,
    keep: usize,
) -> (Vec<QueueRow>, usize) {
    let mut rows: Vec<QueueRow> = queues
        .into_iter()
        .map(|q| QueueRow {
            counts: [q.pending, q.scheduled, q.running, q.dead, q.completed],
            age_s: q.oldest_runnable_age_s.unwrap_or(0.0),
            paused: i64::from(q.paused),
            name: q.queue,
        })
        .collect();
    let backlog = |r: &QueueRow| r.counts[..4].iter().sum::<i64>();
    rows.sort_by(|a, b| {
        backlog(b)
            .cmp(&backlog(a))
            .then_with(|| a.name.cmp(&b.name))
    });
    if rows.len() <= keep {
        return (rows, 0);
    }
    let rest = rows.split_off(keep);
    let mut other = QueueRow {
        name: OTHER.to_string(),
        counts: [0; 5],
        age_s: 0.0,
        paused: 0,
    };
    for r in &rest {
        for (sum, n) in other.counts.iter_mut().zip(r.counts) {
            *sum += n;
        }
        other.age_s = other.age_s.max(r.age_s);
        other.paused += r.paused;
    }
    rows.push(other);
    (rows, rest.len())
}

/// The streams with the highest last offsets (then by name) up to `keep`,
/// with their consumers; the rest folded into [`OTHER`] with the highest
/// last offset and, as one consumer [`OTHER`], the largest lag. Also how
/// many were folded.
fn bounded_streams(
    mut streams: Vec<alkstore::call::StreamSummary>,
    keep: usize,
) -> (Vec<StreamRow>, usize) {
    streams.sort_by(|a, b| {
        b.last_offset
            .cmp(&a.last_offset)
            .then_with(|| a.stream.cmp(&b.stream))
    });
    let rest = if streams.len() > keep {
        streams.split_off(keep)
    } else {
        vec![]
    };
    let mut rows: Vec<StreamRow> = streams
        .into_iter()
        .map(|s| {
            let consumers = s
                .consumers
                .into_iter()
                .map(|c| (c.consumer, c.lag))
                .collect();
            (s.stream, s.last_offset, consumers)
        })
        .collect();
    if !rest.is_empty() {
        let last = rest.iter().map(|s| s.last_offset).max().unwrap_or(0);
        let lag = rest
            .iter()
            .flat_map(|s| s.consumers.iter().map(|c| c.lag))
            .max();
        let consumers = lag.map(|l| (OTHER.to_string(), l)).into_iter().collect();
        rows.push((OTHER.to_string(), last, consumers));
    }
    (rows, rest.len())
}

/// The exporter's connection: on PostgreSQL it also reads the server's
/// statistics.
enum Opened {
    Postgres(alkstore::PgStore),
    Sqlite(alkstore::Store),
}

impl Opened {
    fn open(url: &str) -> alkstore::Result<Opened> {
        Ok(match alkstore::url::DbUrl::parse(url)? {
            alkstore::url::DbUrl::Postgres(url) => {
                Opened::Postgres(alkstore::PgStore::connect(&url)?)
            }
            alkstore::url::DbUrl::Sqlite(_) => Opened::Sqlite(alkstore::open(url)?),
        })
    }

    fn store(&self) -> &alkstore::Store {
        match self {
            Opened::Postgres(pg) => pg,
            Opened::Sqlite(store) => store,
        }
    }
}

/// What holds back vacuum in this database ([`alkstore::Horizon`]) and the
/// dead tuples of alkstore's tables: claims walk the index entries of every
/// job version vacuum could not remove yet (docs/operating.md, "Long
/// transactions"). A role that cannot see other roles' transactions gets
/// `alkstore_pg_sessions_visible 0` and no ages: a zero it could not see
/// behind would read as "nothing holds vacuum back".
fn collect_vacuum(pg: &alkstore::PgStore, registry: &Registry) -> alkstore::Result<()> {
    let visible = IntGauge::new(
        "alkstore_pg_sessions_visible",
        "1 if the exporter's role sees other roles' transactions (pg_monitor or superuser); the two ages below are exported only then.",
    )
    .expect("metric");
    let dead = IntGaugeVec::new(
        Opts::new(
            "alkstore_pg_dead_tuples",
            "Dead tuples of an alkstore table (pg_stat_user_tables.n_dead_tup; a partitioned table's summed over its partitions).",
        ),
        &["table"],
    )
    .expect("metric");
    let horizon = pg.horizon()?;
    let mut tx = pg.transaction()?;
    for row in tx.client().query(
        // The job table's partitions under its name (schema.sql).
        "SELECT coalesce(p.relname, s.relname)::text, sum(s.n_dead_tup)::int8
           FROM pg_stat_user_tables s
           LEFT JOIN pg_inherits h ON h.inhrelid = s.relid
           LEFT JOIN pg_class p ON p.oid = h.inhparent
          WHERE s.schemaname = 'alkstore' GROUP BY 1",
        &[],
    )? {
        dead.with_label_values(&[row.get::<_, &str>(0)])
            .set(row.get(1));
    }
    tx.rollback()?;
    visible.set(horizon.sees_all_sessions.into());
    if horizon.sees_all_sessions {
        let age = prometheus::Gauge::new(
            "alkstore_pg_oldest_transaction_age_seconds",
            "How long the oldest transaction (or prepared transaction) of this database holding back vacuum has been open (0: none).",
        )
        .expect("metric");
        let xids = IntGauge::new(
            "alkstore_pg_oldest_xmin_age_xids",
            "Transactions since the oldest xmin anything holds: sessions of this database, walsenders, prepared transactions, replication slots.",
        )
        .expect("metric");
        age.set(horizon.oldest_transaction_age_s.unwrap_or(0.0));
        xids.set(horizon.oldest_xmin_age_xids());
        registry.register(Box::new(age)).expect("unique");
        registry.register(Box::new(xids)).expect("unique");
    }
    registry.register(Box::new(visible)).expect("unique");
    registry.register(Box::new(dead)).expect("unique");
    Ok(())
}

/// The figures of one scrape, in a registry of its own: a queue or consumer
/// that is gone is gone from the next scrape too.
fn collect(opened: &Opened, registry: &Registry, bounds: Bounds) -> alkstore::Result<()> {
    if let Opened::Postgres(pg) = opened {
        collect_vacuum(pg, registry)?;
    }
    let store = opened.store();
    let jobs = IntGaugeVec::new(
        Opts::new(
            "alkstore_queue_jobs",
            "Jobs of a queue (outboxes by backing queue) in each state.",
        ),
        &["queue", "state"],
    )
    .expect("metric");
    let age = GaugeVec::new(
        Opts::new(
            "alkstore_queue_oldest_runnable_age_seconds",
            "How long the oldest runnable pending job has waited (0: none).",
        ),
        &["queue"],
    )
    .expect("metric");
    let paused = IntGaugeVec::new(
        Opts::new("alkstore_queue_paused", "1 while the queue is paused."),
        &["queue"],
    )
    .expect("metric");
    let last = IntGaugeVec::new(
        Opts::new(
            "alkstore_stream_last_offset",
            "The stream's last kept offset.",
        ),
        &["stream"],
    )
    .expect("metric");
    let lag = IntGaugeVec::new(
        Opts::new(
            "alkstore_stream_consumer_lag",
            "Events of the stream after the consumer's saved offset.",
        ),
        &["stream", "consumer"],
    )
    .expect("metric");
    registry.register(Box::new(jobs.clone())).expect("unique");
    registry.register(Box::new(age.clone())).expect("unique");
    registry.register(Box::new(paused.clone())).expect("unique");
    registry.register(Box::new(last.clone())).expect("unique");
    registry.register(Box::new(lag.clone())).expect("unique");
    let folded = IntGaugeVec::new(
        Opts::new(
            "alkstore_exporter_folded",
            "Queues or streams beyond --max-queues / --max-streams, folded into the name __alkstore_other.",
        ),
        &["kind"],
    )
    .expect("metric");
    registry.register(Box::new(folded.clone())).expect("unique");
    // Typed: a row this version cannot read is an error (the scrape says
    // alkstore_up 0), never a zero that looks like an empty queue.
    let (queues, n) = bounded_queues(store.queues()?, bounds.queues);
    folded.with_label_values(&["queue"]).set(n as i64);
    for q in queues {
        let name = visible(&q.name);
        for (state, n) in STATES.iter().zip(q.counts) {
            jobs.with_label_values(&[&*name, state]).set(n);
        }
        age.with_label_values(&[&*name]).set(q.age_s);
        paused.with_label_values(&[&*name]).set(q.paused);
    }
    // Offsets (and so lag) of events committed since the last sequencer.
    store.sequence(None)?;
    let (streams, n) = bounded_streams(store.streams()?, bounds.streams);
    folded.with_label_values(&["stream"]).set(n as i64);
    for (stream, last_offset, consumers) in streams {
        let name = visible(&stream);
        last.with_label_values(&[&*name]).set(last_offset);
        for (consumer, n) in consumers {
            lag.with_label_values(&[&*name, &*visible(&consumer)])
                .set(n);
        }
    }
    Ok(())
}

/// A scrape waiting for the collector: where its answer goes.
type Reply = mpsc::Sender<alkstore::Result<Registry>>;

/// Serves `/metrics` on `listen`. Each scrape answers within `timeout`:
/// with the figures, or with `alkstore_up 0` when the database did not
/// answer in time (down, unreachable, a lock held). Scrapes are served
/// concurrently; one collector thread reads the database for all of them, so
/// a stalled database holds one connection attempt, not one per scrape. The
/// exporter starts whether or not the database is up and reconnects after a
/// failure. Connections are tokio tasks (hyper, through axum), not threads:
/// with tiny_http, 300 connections left half-open held 302 threads.
pub fn serve(url: &str, listen: &str, timeout: Duration, bounds: Bounds) -> Fallible {
    // A URL that can never work is refused now, not at each scrape.
    alkstore::url::DbUrl::parse(url)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        let addr = listener.local_addr()?;
        eprintln!("alkstore: metrics on http://{addr}/metrics");
        if !addr.ip().is_loopback() {
            // The exporter has no authentication (Prometheus scrapes it as
            // is): whoever reaches the address reads the queue names and
            // counts.
            eprintln!(
                "alkstore: warning: {addr} is not a loopback address and the exporter asks no \
                 one for credentials: keep it behind a firewall or an authenticating proxy \
                 (docs/operating.md)"
            );
        }
        let errors = IntCounter::new(
            "alkstore_exporter_scrape_errors_total",
            "Scrapes that could not read the database in time.",
        )
        .expect("metric");
        let (scrapes, waiting) = mpsc::channel::<Reply>();
        let url = url.to_string();
        std::thread::spawn(move || collector(&url, &waiting, bounds));
        let scrapes = std::sync::Arc::new(std::sync::Mutex::new(scrapes));
        let app = axum::Router::new()
            .route(
                "/metrics",
                axum::routing::get(move || {
                    let (scrapes, errors) = (scrapes.clone(), errors.clone());
                    async move {
                        // The wait for the collector blocks: off the runtime.
                        let (status, body) = tokio::task::spawn_blocking(move || {
                            let scrapes = scrapes.lock().unwrap_or_else(|e| e.into_inner()).clone();
                            answer(&scrapes, &errors, timeout)
                        })
                        .await
                        .unwrap_or((StatusCode::INTERNAL_SERVER_ERROR, Vec::new()));
                        let format = TextEncoder::new().format_type().to_string();
                        (status, [(header::CONTENT_TYPE, format)], body)
                    }
                }),
            )
            .fallback(|| async { (StatusCode::NOT_FOUND, "see /metrics\n") });
        axum::serve(listener, app).await?;
        Ok(())
    })
}

/// Reads the database for every scrape waiting, one read at a time; a read
/// that finds more scrapes queued behind it answers them all.
fn collector(url: &str, waiting: &mpsc::Receiver<Reply>, bounds: Bounds) {
    let mut store: Option<Opened> = None;
    while let Ok(first) = waiting.recv() {
        let mut replies = vec![first];
        replies.extend(waiting.try_iter());
        let result: alkstore::Result<Registry> = (|| {
            if store.is_none() {
                store = Some(Opened::open(url)?);
            }
            let registry = Registry::new();
            collect(store.as_ref().expect("opened"), &registry, bounds)?;
            Ok(registry)
        })();
        if result.is_err() {
            store = None; // connect again next time
        }
        for reply in replies {
            let _ = reply.send(match &result {
                Ok(r) => Ok(r.clone()),
                Err(e) => Err(e.clone()),
            });
        }
    }
}

/// One scrape's answer: the collector's registry within `timeout`, or
/// `alkstore_up 0`; with the exporter's own counter.
fn answer(
    scrapes: &mpsc::Sender<Reply>,
    errors: &IntCounter,
    timeout: Duration,
) -> (StatusCode, Vec<u8>) {
    let (reply, answer) = mpsc::channel();
    let _ = scrapes.send(reply);
    let up =
        IntGauge::new("alkstore_up", "1 if the scrape read the database in time.").expect("metric");
    let registry = match answer.recv_timeout(timeout) {
        Ok(Ok(registry)) => {
            up.set(1);
            registry
        }
        failed => {
            errors.inc();
            match failed {
                Ok(Err(e)) => eprintln!("alkstore: scrape failed: {e}"),
                _ => eprintln!(
                    "alkstore: scrape failed: no answer from the database within {timeout:?}"
                ),
            }
            Registry::new()
        }
    };
    registry.register(Box::new(up)).expect("unique");
    registry.register(Box::new(errors.clone())).expect("unique");
    let mut body = Vec::new();
    match TextEncoder::new().encode(&registry.gather(), &mut body) {
        Ok(()) => (StatusCode::OK, body),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, Vec::new()),
    }
}
