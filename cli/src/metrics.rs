//! `alkstore metrics`: a Prometheus exporter. Each scrape of `/metrics`
//! reads `alk_queues()` and `alk_streams()` once and answers in the text
//! exposition format; a failed read answers `alkstore_up 0` and counts
//! `alkstore_exporter_scrape_errors_total`.

use crate::Fallible;
use prometheus::{
    Encoder, GaugeVec, IntCounter, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder,
};
use serde_json::Value;

/// The figures of one scrape, in a registry of its own: a queue or consumer
/// that is gone is gone from the next scrape too.
fn collect(store: &alkstore::Store, registry: &Registry) -> alkstore::Result<()> {
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
    let queues = store.call("alk_queues", &[])?;
    for q in queues.as_array().map_or(&[][..], |r| r) {
        let name = q["queue"].as_str().unwrap_or_default();
        for state in ["pending", "scheduled", "running", "dead", "completed"] {
            jobs.with_label_values(&[name, state])
                .set(q[state].as_i64().unwrap_or(0));
        }
        age.with_label_values(&[name])
            .set(q["oldest_runnable_age_s"].as_f64().unwrap_or(0.0));
        paused
            .with_label_values(&[name])
            .set(i64::from(q["paused"] == Value::Bool(true)));
    }
    let streams = store.call("alk_streams", &[])?;
    for s in streams.as_array().map_or(&[][..], |r| r) {
        let name = s["stream"].as_str().unwrap_or_default();
        last.with_label_values(&[name])
            .set(s["last_offset"].as_i64().unwrap_or(0));
        for c in s["consumers"].as_array().map_or(&[][..], |c| c) {
            let consumer = c["consumer"].as_str().unwrap_or_default();
            lag.with_label_values(&[name, consumer])
                .set(c["lag"].as_i64().unwrap_or(0));
        }
    }
    Ok(())
}

pub fn serve(url: &str, listen: &str) -> Fallible {
    let store = alkstore::open(url)?;
    let server =
        tiny_http::Server::http(listen).map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    eprintln!(
        "alkstore: metrics on http://{}/metrics",
        server.server_addr()
    );
    let errors = IntCounter::new(
        "alkstore_exporter_scrape_errors_total",
        "Scrapes that could not read the database.",
    )
    .expect("metric");
    for request in server.incoming_requests() {
        if request.url() != "/metrics" {
            let _ = request
                .respond(tiny_http::Response::from_string("see /metrics\n").with_status_code(404));
            continue;
        }
        let registry = Registry::new();
        let up = IntGauge::new("alkstore_up", "1 if the last scrape read the database.")
            .expect("metric");
        registry.register(Box::new(up.clone())).expect("unique");
        registry.register(Box::new(errors.clone())).expect("unique");
        match collect(&store, &registry) {
            Ok(()) => up.set(1),
            Err(e) => {
                errors.inc();
                eprintln!("alkstore: scrape failed: {e}");
            }
        }
        let mut body = Vec::new();
        TextEncoder::new().encode(&registry.gather(), &mut body)?;
        let header = tiny_http::Header::from_bytes(
            &b"Content-Type"[..],
            TextEncoder::new().format_type().as_bytes(),
        )
        .expect("header");
        let _ = request.respond(tiny_http::Response::from_data(body).with_header(header));
    }
    Ok(())
}
