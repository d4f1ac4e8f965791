//! `alkstore relay`: the relay of the `alkstore-relay` crate over a URL,
//! stopped by SIGTERM or SIGINT, with its metrics on an address.

use crate::Fallible;
use std::sync::Arc;

/// Runs the relay until SIGTERM or SIGINT. Exit status 1 when a stream
/// route stopped at an event its sink refused.
pub fn run(
    store: alkstore::Store,
    config: alkstore_relay::Config,
    metrics: Option<&str>,
) -> Fallible {
    // The signals are caught before anything is claimed: a SIGTERM from
    // then on stops the relay cleanly; a second one ends it at once.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let mut signals = crate::signals::Signals::catch(&runtime)?;
    let relay = Arc::new(alkstore_relay::Relay::new(store, config));
    let stop = alkstore::Stop::new();
    if let Some(listen) = metrics {
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(listen))
            .map_err(|e| format!("--metrics: cannot listen on {listen}: {e}"))?;
        eprintln!(
            "alkstore relay: metrics on http://{}/metrics",
            listener.local_addr()?
        );
        let relay = relay.clone();
        let app = axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let body = relay.metrics();
                async move { ([("content-type", "text/plain; version=0.0.4")], body) }
            }),
        );
        runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
    }
    let on_signal = stop.clone();
    runtime.spawn(async move {
        signals.next().await;
        eprintln!("alkstore relay: stopping (again to quit at once)");
        on_signal.stop();
        signals.next().await;
        eprintln!("alkstore relay: quitting without waiting for deliveries in flight");
        std::process::exit(130);
    });
    eprintln!(
        "alkstore relay: {} route{} running",
        relay.route_metrics().len(),
        if relay.route_metrics().len() == 1 {
            ""
        } else {
            "s"
        }
    );
    let report = relay.run(&stop)?;
    runtime.shutdown_background();
    if report.stopped.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = report
        .stopped
        .iter()
        .map(|(route, offset, error)| {
            format!("route {route:?} stopped at offset {offset}: {error}")
        })
        .collect();
    Err(lines.join("; ").into())
}
