//! The JSON API under `/api`: the admin functions' own documents, so that
//! a script sees what the pages show.

use crate::db::{blocking, outbox_of, run, ApiError, Db};
use crate::sampler::Reading;
use crate::Shared;
use alkstore::call;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::time::Duration;
use tokio_stream::{Stream, StreamExt};

/// A filtered listing reads at most this many jobs per request.
pub const FILTER_SCAN: i64 = 2_000;
/// A bulk action reads at most this many jobs.
pub const BULK_SCAN: i64 = 100_000;

type ApiResult = Result<Json<Value>, ApiError>;

/// Every error of the API has the JSON body `{"error": …, "code": …}`,
/// also those axum answers itself before a handler runs (a job id that is
/// not a number, a malformed query or JSON body): their text becomes the
/// error.
pub async fn json_errors(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let response = next.run(req).await;
    let failed = response.status().is_client_error() || response.status().is_server_error();
    let is_json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !failed || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = match axum::body::to_bytes(body, 64 * 1024).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(_) => String::new(),
    };
    let text = if text.is_empty() {
        parts
            .status
            .canonical_reason()
            .unwrap_or("error")
            .to_string()
    } else {
        text
    };
    (parts.status, Json(json!({"error": text, "code": null}))).into_response()
}

/// Any other path under `/api`: 404, with the JSON body.
pub async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        Json(json!({"error": "no such API endpoint", "code": null})),
    )
        .into_response()
}

/// `GET /api/queues`: `alk_queues()`.
pub async fn queues(State(app): State<Shared>) -> ApiResult {
    Ok(Json(run(&app.db, call::queues().raw()).await?))
}

/// The query of a job listing.
#[derive(Deserialize, Default)]
pub struct ListQuery {
    /// pending, running, dead, completed; empty or absent: every state.
    pub state: Option<String>,
    /// Jobs after this id.
    pub after_id: Option<i64>,
    /// At most this many (1–1000, default 100).
    pub limit: Option<i64>,
    /// `path=value` on the payload (see [`Filter`]).
    pub filter: Option<String>,
}

impl ListQuery {
    fn state(&self) -> Option<String> {
        self.state.clone().filter(|s| !s.is_empty())
    }
}

/// A filter on a payload field: `account=42`, `user.email=ada@example.com`.
/// The value is compared as JSON when it parses as JSON (`42`, `true`,
/// `"42"`), else as a string.
#[derive(Clone, Debug)]
pub struct Filter {
    path: Vec<String>,
    value: Value,
}

impl Filter {
    /// Parses `path=value`; an empty text is no filter.
    pub fn parse(text: &str) -> Result<Option<Filter>, ApiError> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        let Some((path, value)) = text.split_once('=') else {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "a filter is payload_field=value, e.g. account=42 or user.email=ada@example.com",
            ));
        };
        let path: Vec<String> = path.trim().split('.').map(str::to_string).collect();
        if path.iter().any(String::is_empty) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "a filter's field path has an empty part",
            ));
        }
        let value = value.trim();
        let value =
            serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()));
        Ok(Some(Filter { path, value }))
    }

    /// Whether a job document's payload matches.
    pub fn matches(&self, job: &Value) -> bool {
        let mut v = job.get("payload");
        for key in &self.path {
            v = v.and_then(|v| v.get(key));
        }
        match (v, &self.value) {
            (Some(found), want) if found == want => true,
            // `account=42` also finds "42", and `code="7"` finds 7.
            (Some(Value::String(s)), Value::Number(n)) => s == &n.to_string(),
            (Some(Value::Number(n)), Value::String(s)) => s == &n.to_string(),
            _ => false,
        }
    }
}

/// A page of jobs, filtered: the matches, and the last id read (where the
/// next page starts; it may lie beyond the last match).
pub struct Listing {
    pub jobs: Vec<Value>,
    pub through: i64,
    pub more: bool,
}

/// Documents read per call while scanning past what a request returns (a
/// filter's misses, a bulk action's jobs): a request holds at most one such
/// page of documents at once, whatever their payloads weigh (any
/// `alkstore_user` can enqueue 1 MB payloads: 1,000 of them at once took
/// hundreds of megabytes).
pub const SCAN_PAGE: i64 = 25;

/// Reads `queue`'s jobs after `after_id` in id order, `page_size` at a
/// time, handing every one the filter matches to `each` (which says
/// whether to go on), until the queue ends or `scan` jobs were read.
/// Returns the last id read and whether jobs may remain beyond it.
#[allow(clippy::too_many_arguments)]
fn scan_jobs(
    db: &Db,
    queue: &str,
    state: Option<&str>,
    after_id: i64,
    page_size: i64,
    filter: Option<&Filter>,
    scan: i64,
    mut each: impl FnMut(Value) -> bool,
) -> Result<(i64, bool), ApiError> {
    let (mut through, mut read) = (after_id, 0);
    loop {
        let page = db
            .store()
            .run(call::list_jobs(queue, state, through, page_size)?)?;
        let full = page.len() as i64 == page_size;
        for job in page {
            through = job.get("id").and_then(Value::as_i64).unwrap_or(through);
            read += 1;
            if filter.is_none_or(|f| f.matches(&job)) && !each(job) {
                return Ok((through, true));
            }
        }
        if !full {
            return Ok((through, false));
        }
        if read >= scan {
            return Ok((through, true));
        }
    }
}

/// Reads `queue`'s jobs after `after_id` until `limit` match or `scan`
/// jobs were read.
pub fn list(
    db: &Db,
    queue: &str,
    state: Option<&str>,
    after_id: i64,
    limit: i64,
    filter: Option<&Filter>,
    scan: i64,
) -> Result<Listing, ApiError> {
    let page_size = if filter.is_some() {
        SCAN_PAGE
    } else {
        limit.min(1000)
    };
    let mut jobs = Vec::new();
    let (through, more) = scan_jobs(db, queue, state, after_id, page_size, filter, scan, |job| {
        jobs.push(job);
        (jobs.len() as i64) < limit
    })?;
    Ok(Listing {
        jobs,
        through,
        more,
    })
}

/// The ids of `queue`'s jobs in `state` that the filter matches, at most
/// `scan` read (and whether more may remain): ids only, a page of
/// documents at a time.
fn matching_ids(
    db: &Db,
    queue: &str,
    state: &str,
    filter: Option<&Filter>,
    scan: i64,
) -> Result<(Vec<i64>, bool), ApiError> {
    let mut ids = Vec::new();
    let (_, more) = scan_jobs(db, queue, Some(state), 0, SCAN_PAGE, filter, scan, |job| {
        ids.extend(job.get("id").and_then(Value::as_i64));
        true
    })?;
    Ok((ids, more))
}

fn limit(q: &ListQuery) -> Result<i64, ApiError> {
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "limit is 1–1000"));
    }
    Ok(limit)
}

/// `GET /api/queues/{queue}/jobs?state=&after_id=&limit=&filter=`:
/// `alk_list_jobs`, with an optional payload filter. A filtered page reads
/// at most 2,000 jobs; the header `x-alkstore-through` names the last id
/// read, where the next page starts.
pub async fn jobs(
    State(app): State<Shared>,
    Path(queue): Path<String>,
    Query(q): Query<ListQuery>,
) -> Result<Response, ApiError> {
    let limit = limit(&q)?;
    let filter = Filter::parse(q.filter.as_deref().unwrap_or(""))?;
    let state = q.state();
    let after = q.after_id.unwrap_or(0);
    let listing = blocking(&app.db, move |db| {
        list(
            db,
            &queue,
            state.as_deref(),
            after,
            limit,
            filter.as_ref(),
            FILTER_SCAN,
        )
    })
    .await?;
    let mut response = Json(Value::Array(listing.jobs)).into_response();
    response
        .headers_mut()
        .insert("x-alkstore-through", listing.through.into());
    Ok(response)
}

/// `GET /api/jobs/{id}`: `alk_get_job`, 404 when there is none.
pub async fn job(State(app): State<Shared>, Path(id): Path<i64>) -> ApiResult {
    match run(&app.db, call::get_job(id)).await? {
        None => Err(ApiError::not_found(format!("no job {id}"))),
        Some(job) => Ok(Json(job)),
    }
}

/// `GET /api/jobs/{id}/errors`: `alk_job_errors`, every error the job met
/// (`[{attempt, error, at}]`, oldest first), 404 when there is no such job.
pub async fn job_errors(State(app): State<Shared>, Path(id): Path<i64>) -> ApiResult {
    match run(&app.db, call::job_errors(id)).await? {
        None => Err(ApiError::not_found(format!("no job {id}"))),
        Some(errors) => Ok(Json(errors)),
    }
}

async fn changed(app: &Shared, v: Value) -> ApiResult {
    app.sampler.poke();
    Ok(Json(v))
}

/// `POST /api/jobs/{id}/requeue`: `alk_requeue_dead` → `{"requeued": bool}`.
pub async fn requeue(State(app): State<Shared>, Path(id): Path<i64>) -> ApiResult {
    let done = run(&app.db, call::requeue_dead(id)).await?;
    changed(&app, json!({"requeued": done})).await
}

/// `POST /api/jobs/{id}/cancel`: `alk_cancel` → `{"cancelled": bool}`.
pub async fn cancel(State(app): State<Shared>, Path(id): Path<i64>) -> ApiResult {
    let done = run(&app.db, call::cancel(id)).await?;
    changed(&app, json!({"cancelled": done})).await
}

async fn pause_or_resume(app: &Shared, queue: String, pause: bool) -> ApiResult {
    let change = match (outbox_of(&queue), pause) {
        (Some(outbox), true) => call::outbox_pause(outbox),
        (Some(outbox), false) => call::outbox_resume(outbox),
        (None, true) => call::queue_pause(&queue),
        (None, false) => call::queue_resume(&queue),
    }?;
    let done = run(&app.db, change).await?;
    let key = if pause { "paused" } else { "resumed" };
    changed(app, json!({ key: done })).await
}

/// `POST /api/queues/{queue}/pause` → `{"paused": bool}` (an outbox's
/// backing queue pauses the outbox).
pub async fn pause(State(app): State<Shared>, Path(queue): Path<String>) -> ApiResult {
    pause_or_resume(&app, queue, true).await
}

/// `POST /api/queues/{queue}/resume` → `{"resumed": bool}`.
pub async fn resume(State(app): State<Shared>, Path(queue): Path<String>) -> ApiResult {
    pause_or_resume(&app, queue, false).await
}

/// `POST /api/queues/{queue}/requeue-dead`: `alk_requeue_dead_all` →
/// `{"requeued": n}`.
pub async fn requeue_dead_all(State(app): State<Shared>, Path(queue): Path<String>) -> ApiResult {
    let n = run(&app.db, call::requeue_dead_all(&queue)?).await?;
    changed(&app, json!({"requeued": n})).await
}

/// The query of a purge.
#[derive(Deserialize)]
pub struct PurgeQuery {
    state: Option<String>,
}

/// `POST /api/queues/{queue}/purge?state=`: `alk_purge` → `{"purged": n}`.
pub async fn purge(
    State(app): State<Shared>,
    Path(queue): Path<String>,
    Query(q): Query<PurgeQuery>,
) -> ApiResult {
    let Some(state) = q.state.filter(|s| !s.is_empty()) else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "purge needs ?state=pending, dead or completed",
        ));
    };
    let n = run(&app.db, call::purge(&queue, &state)?).await?;
    changed(&app, json!({"purged": n})).await
}

/// `POST /api/queues/{queue}/configure` with a JSON object of queue
/// options (the flow-control limits among them): `alk_queue_configure` →
/// the resolved options.
pub async fn configure(
    State(app): State<Shared>,
    Path(queue): Path<String>,
    Json(opts): Json<Value>,
) -> ApiResult {
    let v = run(&app.db, call::queue_configure_doc(&queue, &opts)?).await?;
    changed(&app, v).await
}

/// The query of a bulk action.
#[derive(Deserialize)]
pub struct BulkQuery {
    /// `requeue` (dead jobs), `cancel` (pending or running ones) or `purge`
    /// (pending ones cancelled, dead and completed ones deleted).
    action: String,
    /// The state whose jobs are acted on (default: dead for requeue,
    /// pending for cancel).
    state: Option<String>,
    /// `path=value` on the payload; absent: every job in the state.
    filter: Option<String>,
    /// Count only (`true`): what a confirmation shows.
    dry_run: Option<bool>,
}

/// `POST /api/queues/{queue}/bulk?action=requeue|cancel|purge&state=&filter=&dry_run=`:
/// acts on every job of the state that the filter matches (at most
/// 100,000 read) → `{"matched": n, "changed": m}`; a job that changed
/// state in between is matched but not changed.
pub async fn bulk(
    State(app): State<Shared>,
    Path(queue): Path<String>,
    Query(q): Query<BulkQuery>,
) -> ApiResult {
    let state = q.state.filter(|s| !s.is_empty());
    let (change, state): (fn(i64) -> call::Call<bool>, _) =
        match (q.action.as_str(), state.as_deref()) {
            ("requeue", None | Some("dead")) => (call::requeue_dead, "dead"),
            ("cancel", None | Some("pending")) => (call::cancel, "pending"),
            ("cancel", Some("running")) => (call::cancel, "running"),
            ("purge", Some("pending")) => (call::cancel, "pending"),
            ("purge", Some("dead")) => (call::delete_job, "dead"),
            ("purge", Some("completed")) => (call::delete_job, "completed"),
            _ => {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "action=requeue acts on dead jobs, cancel on pending or running ones, \
                 purge on pending, dead or completed ones (state=)",
                ))
            }
        };
    let state = state.to_string();
    let filter = Filter::parse(q.filter.as_deref().unwrap_or(""))?;
    let dry_run = q.dry_run.unwrap_or(false);
    let v = blocking(&app.db, move |db| {
        let (ids, truncated) = matching_ids(db, &queue, &state, filter.as_ref(), BULK_SCAN)?;
        let mut changed = 0;
        if !dry_run {
            for id in &ids {
                if db.store().run(change(*id))? {
                    changed += 1;
                }
            }
        }
        Ok(json!({"matched": ids.len(), "changed": changed, "truncated": truncated}))
    })
    .await?;
    changed(&app, v).await
}

/// `GET /api/streams`: `alk_streams()`.
pub async fn streams(State(app): State<Shared>) -> ApiResult {
    Ok(Json(run(&app.db, call::streams().raw()).await?))
}

/// `GET /api/schedules`: `alk_schedules()`.
pub async fn schedules(State(app): State<Shared>) -> ApiResult {
    Ok(Json(run(&app.db, call::schedules().raw()).await?))
}

/// `GET /api/locks`: `alk_locks()`.
pub async fn locks(State(app): State<Shared>) -> ApiResult {
    Ok(Json(run(&app.db, call::locks().raw()).await?))
}

/// `GET /api/health`: the health panel's readings (see [`crate::health`]).
pub async fn health(State(app): State<Shared>) -> ApiResult {
    Ok(Json(blocking(&app.db, crate::health::read).await?))
}

/// `GET /api/events`: server-sent events `counts`, each `alk_queues()` as
/// the one sampler read it; the first at once.
pub async fn events(
    State(app): State<Shared>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = app.sampler.subscribe();
    let stream = tokio_stream::wrappers::WatchStream::new(rx).filter_map(|r| match r {
        Reading::Queues(v) => Some(Ok(Event::default().event("counts").data(v.to_string()))),
        _ => None,
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
