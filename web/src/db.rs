//! The database behind the dashboard: the facade's store on either engine,
//! called off the async threads, and its errors as HTTP answers.

use alkstore::call::Call;
use alkstore::{Error, PgStore, SqliteStore, Store};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use std::sync::Arc;

/// The database the dashboard shows: either engine. The engine's own store
/// (not only a [`Store`]) so that the health panel can read the server's
/// statistics.
pub enum Db {
    /// A SQLite file.
    Sqlite(SqliteStore),
    /// A PostgreSQL database (the extension or the plain install).
    Postgres(PgStore),
}

impl Db {
    /// Opens `sqlite:PATH` or `postgres://…` as `alkstore::open` does.
    pub fn open(url: &str) -> alkstore::Result<Db> {
        Ok(match alkstore::url::DbUrl::parse(url)? {
            alkstore::url::DbUrl::Postgres(url) => Db::Postgres(PgStore::connect(&url)?),
            alkstore::url::DbUrl::Sqlite(path) => Db::Sqlite(SqliteStore::open(&path)?),
        })
    }

    /// The engine-neutral store.
    pub fn store(&self) -> &Store {
        match self {
            Db::Sqlite(s) => s,
            Db::Postgres(s) => s,
        }
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn engine(&self) -> &'static str {
        match self {
            Db::Sqlite(_) => "sqlite",
            Db::Postgres(_) => "postgres",
        }
    }
}

/// The dashboard's hold on its [`Db`]: the blocking drivers' connections
/// must not close on an async thread (the `postgres` crate blocks on a
/// runtime of its own there), so the last holder drops them on a thread of
/// their own.
pub struct Held(Option<Db>);

impl Held {
    pub fn new(db: Db) -> Held {
        Held(Some(db))
    }
}

impl std::ops::Deref for Held {
    type Target = Db;

    fn deref(&self) -> &Db {
        self.0.as_ref().expect("held until dropped")
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(db) = self.0.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                let _ = std::thread::spawn(move || drop(db)).join();
            }
        }
    }
}

/// An error as the API answers it: a status and `{"error", "code"}`.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: Option<String>,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code: None,
            message: message.into(),
        }
    }

    pub fn not_found(what: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, what)
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        let (status, code) = match &e {
            Error::Engine { code, .. } if code == "42501" => {
                // The role the dashboard connects as lacks the grant: say
                // which role it needs instead of a bare SQLSTATE.
                return ApiError {
                    status: StatusCode::FORBIDDEN,
                    code: Some(code.clone()),
                    message: format!(
                        "the database role this dashboard connects as may not do this \
                         (it needs alkstore_admin): {e}"
                    ),
                };
            }
            Error::Engine { code, .. } => (StatusCode::INTERNAL_SERVER_ERROR, Some(code.clone())),
            Error::Decode(_) => (StatusCode::INTERNAL_SERVER_ERROR, None),
            _ => (StatusCode::BAD_REQUEST, e.code().map(str::to_string)),
        };
        ApiError {
            status,
            code,
            message: e.to_string(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(json!({"error": self.message, "code": self.code})),
        )
            .into_response()
    }
}

/// Runs blocking database work on tokio's blocking threads.
pub async fn blocking<T, F>(db: &Arc<Held>, f: F) -> Result<T, ApiError>
where
    T: Send + 'static,
    F: FnOnce(&Db) -> Result<T, ApiError> + Send + 'static,
{
    let db = db.clone();
    tokio::task::spawn_blocking(move || f(&db))
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
}

/// Runs one typed call ([`alkstore::call`]) off the async threads.
pub async fn run<T: Send + 'static>(db: &Arc<Held>, call: Call<T>) -> Result<T, ApiError> {
    blocking(db, move |db| Ok(db.store().run(call)?)).await
}

/// The outbox a backing queue name stands for (`__alkstore_outbox:{name}`),
/// so that pausing "an outbox's queue" pauses the outbox.
pub use alkstore::outbox_of;
