//! The alkstore web dashboard: every queue and outbox with live counts,
//! a queue's jobs with filters and bulk actions, a job with its errors and
//! its dependencies drawn as a graph, dead letters across queues, streams
//! with consumer lag, schedules, leases and a health panel — and the same
//! data as JSON under `/api`.
//!
//! `alkstore web` serves it; a Rust application mounts it as an axum
//! [`Router`] under a path prefix of its own:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let db = alkstore_web::Db::open("sqlite:app.db")?;
//! let config = alkstore_web::Config {
//!     token: Some("s3cret".into()),
//!     base: "/admin/jobs".into(),
//!     ..Default::default()
//! };
//! let app = axum::Router::new().nest("/admin/jobs", alkstore_web::router(db, config));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8081").await?;
//! axum::serve(listener, app).await?;
//! # Ok(()) }
//! ```
//!
//! Security: with a token every request needs `Authorization: Bearer TOKEN`
//! or the session cookie of a browser that logged in with it (HttpOnly,
//! SameSite=Strict); changes from a browser carry the session's CSRF token,
//! and a change sent from another site (its `Origin`) is refused either
//! way. `read_only` refuses every change with 403.

mod api;
mod auth;
mod db;
mod graph;
mod headers;
mod health;
mod pages;
mod role;
mod sampler;

pub use db::Db;
pub use role::note as role_note;

use axum::routing::{get, post};
use axum::Router;
use std::sync::Arc;

/// How the dashboard serves.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// The bearer token every request must carry (or have logged in with);
    /// `None`: no authentication (only for a loopback address, which
    /// `alkstore web` enforces).
    pub token: Option<String>,
    /// Refuse every change (403): listings only.
    pub read_only: bool,
    /// The path prefix the router is mounted under (`""` at the root,
    /// `"/admin/jobs"` when nested there): links and cookies use it.
    pub base: String,
}

/// The overview's address: `/` at the root, the prefix itself when nested
/// (a nested router's `/` answers the prefix without a trailing slash).
pub(crate) fn home(base: &str) -> String {
    if base.is_empty() {
        "/".into()
    } else {
        base.into()
    }
}

/// What every handler shares.
pub(crate) struct App {
    pub db: Arc<db::Held>,
    pub config: Config,
    pub sessions: auth::Sessions,
    pub sampler: sampler::Sampler,
    /// What the database role may not do ([`role_note`]), read before the
    /// first page.
    pub role: Arc<std::sync::OnceLock<Option<String>>>,
}

pub(crate) type Shared = Arc<App>;

/// The dashboard as a router: pages at `/`, JSON under `/api`. Call it
/// inside a tokio runtime: it starts the one sampler that feeds every open
/// page's live counts (`/api/events`).
pub fn router(db: Db, config: Config) -> Router {
    let db = Arc::new(db::Held::new(db));
    let app: Shared = Arc::new(App {
        sampler: sampler::Sampler::start(db.clone()),
        role: Arc::default(),
        db,
        sessions: auth::Sessions::default(),
        config: Config {
            base: config.base.trim_end_matches('/').to_string(),
            ..config
        },
    });
    let api = Router::new()
        .route("/queues", get(api::queues))
        .route("/queues/{queue}/jobs", get(api::jobs))
        .route("/queues/{queue}/pause", post(api::pause))
        .route("/queues/{queue}/resume", post(api::resume))
        .route("/queues/{queue}/requeue-dead", post(api::requeue_dead_all))
        .route("/queues/{queue}/purge", post(api::purge))
        .route("/queues/{queue}/configure", post(api::configure))
        .route("/queues/{queue}/bulk", post(api::bulk))
        .route("/jobs/{id}", get(api::job))
        .route("/jobs/{id}/errors", get(api::job_errors))
        .route("/jobs/{id}/requeue", post(api::requeue))
        .route("/jobs/{id}/cancel", post(api::cancel))
        .route("/streams", get(api::streams))
        .route("/schedules", get(api::schedules))
        .route("/locks", get(api::locks))
        .route("/health", get(api::health))
        .route("/events", get(api::events))
        .fallback(api::not_found)
        .layer(axum::middleware::from_fn(api::json_errors));
    Router::new()
        .route("/", get(pages::overview))
        .route("/queues/{queue}", get(pages::queue))
        .route("/jobs/{id}", get(pages::job))
        .route("/dead", get(pages::dead))
        .route("/streams", get(pages::streams))
        .route("/schedules", get(pages::schedules))
        .route("/locks", get(pages::locks))
        .route("/health", get(pages::health))
        .route("/login", get(auth::login_form).post(auth::login))
        .route("/logout", post(auth::logout))
        .route("/assets/app.js", get(pages::script))
        .route("/assets/app.css", get(pages::style))
        .nest("/api", api)
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            auth::guard,
        ))
        .layer(axum::middleware::from_fn(headers::secure))
        .with_state(app)
}
