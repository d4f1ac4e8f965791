//! The four series of contract v1.3 §N4, per route, as Prometheus text.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// One route's counters, shared by its runner and the scrape.
#[derive(Debug)]
pub struct RouteMetrics {
    /// The route's name (the `route` label).
    pub route: String,
    delivered: AtomicU64,
    failed: AtomicU64,
    // f64 bits: the age of the oldest message not yet delivered.
    lag: AtomicU64,
    up: AtomicBool,
}

impl RouteMetrics {
    pub(crate) fn new(route: &str) -> RouteMetrics {
        RouteMetrics {
            route: route.into(),
            delivered: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            lag: AtomicU64::new(0f64.to_bits()),
            // Up until a delivery says otherwise.
            up: AtomicBool::new(true),
        }
    }

    pub(crate) fn delivered(&self, n: usize) {
        self.delivered.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub(crate) fn failed(&self, n: usize) {
        self.failed.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub(crate) fn set_up(&self, up: bool) {
        self.up.store(up, Ordering::Relaxed);
    }

    pub(crate) fn set_lag(&self, seconds: f64) {
        self.lag
            .store(seconds.max(0.0).to_bits(), Ordering::Relaxed);
    }

    /// Messages the sink confirmed.
    pub fn delivered_total(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }

    /// Deliveries that did not go through (unavailable or refused).
    pub fn failed_total(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }

    /// Seconds the oldest message not yet delivered has waited.
    pub fn lag_seconds(&self) -> f64 {
        f64::from_bits(self.lag.load(Ordering::Relaxed))
    }

    /// Whether the sink took the last delivery tried.
    pub fn up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }
}

/// One series: name, type, help, and its value for a route.
type Series = (
    &'static str,
    &'static str,
    &'static str,
    fn(&RouteMetrics) -> String,
);

/// Prometheus text for every route.
pub fn render(routes: &[std::sync::Arc<RouteMetrics>]) -> String {
    let mut out = String::new();
    let series: [Series; 4] = [
        (
            "alkstore_relay_delivered_total",
            "counter",
            "Messages the sink confirmed.",
            |m| m.delivered_total().to_string(),
        ),
        (
            "alkstore_relay_failed_total",
            "counter",
            "Deliveries that did not go through (sink unavailable or message refused).",
            |m| m.failed_total().to_string(),
        ),
        (
            "alkstore_relay_lag_seconds",
            "gauge",
            "Age of the oldest message not yet delivered.",
            |m| format!("{:.3}", m.lag_seconds()),
        ),
        (
            "alkstore_relay_up",
            "gauge",
            "1 while the sink takes deliveries.",
            |m| u8::from(m.up()).to_string(),
        ),
    ];
    for (name, kind, help, value) in series {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for m in routes {
            let _ = writeln!(out, "{name}{{route=\"{}\"}} {}", label(&m.route), value(m));
        }
    }
    out
}

/// A label value escaped as Prometheus text needs.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
