//! The alkstore relay (contract v1.3 §N): delivers outbox messages and
//! stream events to NATS JetStream, RabbitMQ, Redis Streams and webhooks,
//! at least once, in order (per outbox group, per stream), under message
//! ids that are the same on every redelivery.
//!
//! `alkstore relay --config FILE` runs it; an application runs it beside
//! its workers, stopped by the same kind of [`Stop`] flag as a `Worker`:
//!
//! ```no_run
//! # fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = alkstore_relay::Config::parse(r#"
//!     [[route]]
//!     name = "orders-to-billing"
//!     outbox = "orders"
//!     to = "https://billing.example.com/hooks/orders"
//! "#)?;
//! let store = alkstore::open("sqlite:app.db")?;
//! let relay = alkstore_relay::Relay::new(store, config);
//! let stop = alkstore::Stop::new();
//! // elsewhere: stop.stop() ends it; relay.metrics() is Prometheus text.
//! let report = relay.run(&stop)?;
//! # Ok(()) }
//! ```
//!
//! Each route runs on a thread of its own: database calls there, sink
//! calls on a small tokio runtime the relay owns, every message of a batch
//! in flight at once. Outbox messages are shared out between relays by
//! claims; a stream route is delivered by one relay at a time, under a
//! lease.

mod ahead;
mod backoff;
mod config;
mod message;
mod metrics;
mod outbox;
mod route;
mod sink;
mod stream;

pub use config::{
    lease_name, Config, ConfigError, Route, SinkSpec, Source, DEFAULT_CONCURRENCY, DEFAULT_TIMEOUT,
};
pub use message::Message;
pub use metrics::RouteMetrics;
pub use sink::{Delivery, Outcome, Sink};

use alkstore::{Stop, Store};
use std::sync::Arc;

/// A relay over one database: its routes, and their metrics.
pub struct Relay {
    store: Store,
    config: Config,
    metrics: Vec<Arc<RouteMetrics>>,
}

/// How a run ended.
#[derive(Debug, Default)]
pub struct Report {
    /// Stream routes that stopped at an event their sink refused: the
    /// route, the event's offset and the sink's answer.
    pub stopped: Vec<(String, i64, String)>,
}

impl Relay {
    /// A relay for `config`'s routes on `store` (nothing is claimed until
    /// [`run`](Relay::run)).
    pub fn new(store: Store, config: Config) -> Relay {
        let metrics = config
            .routes
            .iter()
            .map(|r| Arc::new(RouteMetrics::new(&r.name)))
            .collect();
        Relay {
            store,
            config,
            metrics,
        }
    }

    /// The routes' counters.
    pub fn route_metrics(&self) -> &[Arc<RouteMetrics>] {
        &self.metrics
    }

    /// Prometheus text (contract v1.3 §N4): delivered, failed, lag and up,
    /// per route.
    pub fn metrics(&self) -> String {
        metrics::render(&self.metrics)
    }

    /// Delivers until `stop` is raised: claims and reads stop, deliveries
    /// in flight finish or are given back within the route's timeout.
    /// Errors only when the relay cannot start (its runtime); a route that
    /// meets a database error logs it and tries again.
    pub fn run(&self, stop: &Stop) -> std::io::Result<Report> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("alkstore-relay")
            .enable_all()
            .build()?;
        let handle = rt.handle().clone();
        let owner = owner();
        let stopped = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for (route, metrics) in self.config.routes.iter().zip(&self.metrics) {
                let (handle, owner, stopped) = (&handle, &owner, &stopped);
                s.spawn(move || {
                    let sink = sink::open(&route.sink, route.timeout);
                    let ctx = route::Ctx {
                        store: &self.store,
                        route,
                        sink: &sink,
                        rt: handle,
                        metrics,
                        stop,
                    };
                    let ended = match &route.source {
                        Source::Outbox(o) => outbox::run(&ctx, o).map(|()| stream::End::Stopped),
                        Source::Stream(st) => stream::run(&ctx, st, owner),
                    };
                    match ended {
                        Ok(stream::End::Stopped) => {}
                        Ok(stream::End::Refused { offset, error }) => stopped
                            .lock()
                            .unwrap()
                            .push((route.name.clone(), offset, error)),
                        // Only a name the config already checked can fail here.
                        Err(e) => ctx.log(&format!("cannot run: {e}")),
                    }
                    // The sink's connections close inside the runtime.
                    let _guard = handle.enter();
                    drop(sink);
                });
            }
        });
        rt.shutdown_timeout(std::time::Duration::from_secs(1));
        Ok(Report {
            stopped: stopped.into_inner().unwrap(),
        })
    }
}

/// This process's owner name for leases: host, process id and start time,
/// so two relays never share one.
fn owner() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "relay".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("relay@{host}:{}:{nanos}", std::process::id())
}

/// One line on stderr for a change of a route's state.
pub(crate) fn log(route: &str, what: &str) {
    eprintln!("alkstore relay: route {route:?}: {what}");
}
