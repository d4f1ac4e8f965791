//! The HTML pages: rendered on the server from the same calls as the API,
//! with a little JavaScript (assets/app.js) for actions and live counts.

use crate::api::{self, Filter, ListQuery, FILTER_SCAN};
use crate::auth::Csrf;
use crate::db::{blocking, outbox_of, run, ApiError};
use crate::sampler::Point;
use crate::{graph, Shared};
use alkstore::call;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use maud::{html, Markup, DOCTYPE};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use serde_json::Value;

const SCRIPT: &str = include_str!("assets/app.js");
const STYLE: &str = include_str!("assets/app.css");

/// `GET /assets/app.js`.
pub async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

/// `GET /assets/app.css`.
pub async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

/// A path segment, percent-encoded (queue names may hold any character).
fn seg(s: &str) -> String {
    utf8_percent_encode(s, NON_ALPHANUMERIC).to_string()
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// An error shown as a page (its status kept).
pub struct PageError(ApiError);

impl From<ApiError> for PageError {
    fn from(e: ApiError) -> PageError {
        PageError(e)
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let body = html! {
            (DOCTYPE)
            html lang="en" {
                head { meta charset="utf-8"; title { "alkstore — error" } }
                body { h1 { "Error" } p.error { (self.0.message) } }
            }
        };
        (self.0.status, body).into_response()
    }
}

type Page = Result<Markup, PageError>;

/// Every queue's counts as the sampler last read them (pages never count:
/// on millions of jobs `alk_queues()` takes a while); read here only when
/// the sampler has nothing, which shows its error (a role without the
/// grant, say).
async fn counts(app: &Shared) -> Result<Value, ApiError> {
    match app.sampler.latest().await {
        Value::Null => run(&app.db, call::queues().raw()).await,
        v => Ok(v),
    }
}

fn layout(app: &Shared, csrf: &Csrf, title: &str, live: bool, body: Markup) -> Markup {
    let base = &app.config.base;
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(token) = &csrf.0 { meta name="csrf-token" content=(token); }
                meta name="base" content=(base);
                title { (title) " — alkstore" }
                link rel="stylesheet" href={(base) "/assets/app.css"};
                script src={(base) "/assets/app.js"} defer {}
            }
            body data-live=[live.then_some("1")] data-read-only=[app.config.read_only.then_some("1")] {
                header {
                    a.brand href=(crate::home(base)) { "alkstore" }
                    nav {
                        a href=(crate::home(base)) { "Queues" }
                        a href={(base) "/dead"} { "Dead letters" }
                        a href={(base) "/streams"} { "Streams" }
                        a href={(base) "/schedules"} { "Schedules" }
                        a href={(base) "/locks"} { "Leases" }
                        a href={(base) "/health"} { "Health" }
                    }
                    span.engine { (app.db.engine()) }
                    @if app.config.read_only { span.badge #read-only { "read-only" } }
                    @if app.config.token.is_some() {
                        button.link data-url={(base) "/logout"} data-then="login" { "Log out" }
                    }
                }
                @if let Some(Some(note)) = app.role.get() { p.banner #role-note { (note) } }
                div #flash role="alert" {}
                main { h1 { (title) } (body) }
            }
        }
    }
}

/// A button that POSTs to `url` (assets/app.js): `confirm` asks first,
/// `count` (a dry-run URL) puts the number of jobs into the question.
fn action(app: &Shared, label: &str, url: &str, confirm: Option<&str>, then: &str) -> Markup {
    html! {
        button.action data-url={(app.config.base) (url)} data-confirm=[confirm] data-then=(then)
            disabled[app.config.read_only] { (label) }
    }
}

const STATES: [&str; 4] = ["pending", "running", "dead", "completed"];

fn age(v: &Value) -> String {
    match v.as_f64() {
        None => "—".into(),
        Some(s) if s < 120.0 => format!("{s:.0} s"),
        Some(s) if s < 7200.0 => format!("{:.0} min", s / 60.0),
        Some(s) => format!("{:.1} h", s / 3600.0),
    }
}

/// A small line chart of the last hour: depth (and dead) per point.
fn sparkline(points: &[Point]) -> Markup {
    let (w, h) = (120.0, 24.0);
    let max = points
        .iter()
        .map(|p| p.depth.max(p.dead).max(p.done))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let line = |f: fn(&Point) -> i64| -> String {
        let step = if points.len() > 1 {
            w / (points.len() - 1) as f64
        } else {
            w
        };
        points
            .iter()
            .enumerate()
            .map(|(i, p)| {
                format!(
                    "{:.1},{:.1}",
                    i as f64 * step,
                    h - 1.0 - f(p) as f64 / max * (h - 2.0)
                )
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    html! {
        svg.spark width="120" height="24" viewBox="0 0 120 24" {
            title { "last hour: depth (blue), finished (green), dead (red); peak " (max) }
            @if !points.is_empty() {
                polyline.depth points=(line(|p| p.depth)) {}
                polyline.done points=(line(|p| p.done)) {}
                polyline.dead points=(line(|p| p.dead)) {}
            }
        }
    }
}

/// `GET /`: every queue and outbox, live.
pub async fn overview(State(app): State<Shared>, Extension(csrf): Extension<Csrf>) -> Page {
    let queues = counts(&app).await?;
    let base = &app.config.base;
    let body = html! {
        @if queues.as_array().is_none_or(Vec::is_empty) {
            p.empty { "No queues yet: enqueue a job and it shows here." }
        } @else {
            table #queues {
                thead { tr {
                    th { "queue" } th { "pending" } th { "scheduled" } th { "running" }
                    th { "dead" } th { "completed" } th { "oldest runnable" } th { "paused" } th { "last hour" }
                } }
                tbody {
                    @for q in queues.as_array().into_iter().flatten() {
                        @let name = q["queue"].as_str().unwrap_or("");
                        tr data-queue=(name) {
                            td { a href={(base) "/queues/" (seg(name))} {
                                @if let Some(o) = outbox_of(name) { "outbox " (o) } @else { (name) }
                            } }
                            @for f in ["pending", "scheduled", "running", "dead", "completed"] {
                                td.num data-q=(name) data-f=(f) { (text(&q[f])) }
                            }
                            td.num data-q=(name) data-f="oldest_runnable_age_s" data-age="1" { (age(&q["oldest_runnable_age_s"])) }
                            td data-q=(name) data-f="paused" { (text(&q["paused"])) }
                            td { (sparkline(&app.sampler.history(name))) }
                        }
                    }
                }
            }
        }
    };
    Ok(layout(&app, &csrf, "Queues", true, body))
}

/// `GET /queues/{queue}?state=&after_id=&filter=`: counts, actions, limits
/// and a page of jobs.
pub async fn queue(
    State(app): State<Shared>,
    Extension(csrf): Extension<Csrf>,
    Path(queue): Path<String>,
    Query(q): Query<ListQuery>,
) -> Page {
    let filter_text = q.filter.clone().unwrap_or_default();
    let filter = Filter::parse(&filter_text)?;
    let state = q.state.clone().filter(|s| !s.is_empty());
    let after = q.after_id.unwrap_or(0);
    let name = queue.clone();
    let st = state.clone();
    let sampled = counts(&app)
        .await?
        .as_array()
        .and_then(|all| all.iter().find(|q| q["queue"] == queue.as_str()).cloned());
    let (stats, opts, listing) = blocking(&app.db, move |db| {
        let stats = match (sampled, outbox_of(&name)) {
            (Some(stats), _) => stats,
            // Not sampled yet (new, or empty when sampled): cheap to count.
            (None, Some(o)) => db.store().run(call::outbox_stats(o)?)?,
            (None, None) => db.store().run(call::queue_stats(&name)?)?,
        };
        let opts = match outbox_of(&name) {
            Some(_) => Value::Null,
            None => db.store().run(call::queue_opts(&name)?)?,
        };
        // An outbox's jobs are not listed: alk_list_jobs takes queue names,
        // and an outbox's backing name is reserved.
        if outbox_of(&name).is_some() {
            let none = api::Listing {
                jobs: vec![],
                through: after,
                more: false,
            };
            return Ok((stats, opts, none));
        }
        let listing = api::list(
            db,
            &name,
            st.as_deref(),
            after,
            50,
            filter.as_ref(),
            FILTER_SCAN,
        )?;
        Ok((stats, opts, listing))
    })
    .await?;
    let base = &app.config.base;
    let qs = seg(&queue);
    let api_q = format!("/api/queues/{qs}");
    let paused = stats["paused"].as_bool().unwrap_or(false);
    let is_outbox = outbox_of(&queue).is_some();
    let title = match outbox_of(&queue) {
        Some(o) => format!("Outbox {o}"),
        None => format!("Queue {queue}"),
    };
    let link = |state: Option<&str>| {
        let mut url = format!("{base}/queues/{qs}?state={}", state.unwrap_or(""));
        if !filter_text.is_empty() {
            url.push_str(&format!("&filter={}", seg(&filter_text)));
        }
        url
    };
    let bulk_state = state.clone().unwrap_or_default();
    let bulk = |action: &str| {
        format!(
            "{api_q}/bulk?action={action}&state={}&filter={}",
            seg(&bulk_state),
            seg(&filter_text)
        )
    };
    let body = html! {
        section.counts {
            @for f in ["pending", "scheduled", "running", "dead", "completed"] {
                div.count { span.label { (f) } span.value data-q=(queue) data-f=(f) { (text(&stats[f])) } }
            }
            // For an outbox this is its relay's lag: nothing else takes its messages.
            div.count { span.label { @if is_outbox { "oldest runnable (relay lag)" } @else { "oldest runnable" } } span.value data-q=(queue) data-f="oldest_runnable_age_s" data-age="1" { (age(&stats["oldest_runnable_age_s"])) } }
            @if !opts["max_running"].is_null() {
                div.count { span.label { "running limit" } span.value { (text(&opts["max_running"])) } }
            }
        }
        section.actions {
            @if paused {
                (action(&app, "Resume", &format!("{api_q}/resume"), None, "reload"))
            } @else {
                (action(&app, "Pause", &format!("{api_q}/pause"), Some("Pause claims on this queue?"), "reload"))
            }
            @if !is_outbox {
                (action(&app, "Requeue all dead", &format!("{api_q}/requeue-dead"), Some("Requeue every dead job of this queue?"), "reload"))
                @for s in ["pending", "dead", "completed"] {
                    (action(&app, &format!("Purge {s}"), &format!("{api_q}/purge?state={s}"),
                        Some(&format!("Delete every {s} job of this queue? This cannot be undone.")), "reload"))
                }
            }
        }
        @if is_outbox {
            p.hint #outbox-note { "An outbox's messages are not listed here: the SQL API's listings and bulk actions take queue names, "
                "and an outbox's backing name is reserved. Its messages are reachable by id ("
                code { "alk_get_job" } ", " code { "alk_requeue_dead" } ", " code { "alk_cancel" } ")." }
        } @else {
        @if !opts.is_null() {
            details.limits {
                summary { "Flow control limits" }
                form #limits data-url={(base) (api_q) "/configure"} {
                    @for key in alkstore::LIMIT_KEYS {
                        label { (key) " " input type="number" min="0" step="any" name=(key) value=(text(&opts[key])) disabled[app.config.read_only]; }
                    }
                    button type="submit" disabled[app.config.read_only] { "Save limits" }
                    span.hint { "empty: no limit" }
                }
            }
        }
        nav.tabs {
            a href=(link(None)) class=[state.is_none().then_some("on")] { "all" }
            @for s in STATES {
                a href=(link(Some(s))) class=[(state.as_deref() == Some(s)).then_some("on")] { (s) }
            }
        }
        form.filter method="get" {
            input type="hidden" name="state" value=(state.clone().unwrap_or_default());
            label { "Payload filter " input #filter name="filter" placeholder="account=42" value=(filter_text); }
            button type="submit" { "Filter" }
            @if matches!(state.as_deref(), Some("dead")) {
                button.action type="button" data-url={(base) (bulk("requeue"))} data-count="1" data-confirm="Requeue {n} matching jobs?" data-then="reload" disabled[app.config.read_only] { "Requeue all matching" }
            }
            @if matches!(state.as_deref(), Some("dead") | Some("completed")) {
                button.action type="button" data-url={(base) (bulk("purge"))} data-count="1" data-confirm="Delete {n} matching jobs? This cannot be undone." data-then="reload" disabled[app.config.read_only] { "Purge all matching" }
            }
            @if matches!(state.as_deref(), Some("pending") | Some("running")) {
                button.action type="button" data-url={(base) (bulk("cancel"))} data-count="1" data-confirm="Cancel {n} matching jobs?" data-then="reload" disabled[app.config.read_only] { "Cancel all matching" }
            }
        }
        (jobs_table(&app, &listing.jobs))
        @if listing.more {
            @let next = format!("{}&after_id={}", link(state.as_deref()), listing.through);
            a.next href=(next) { "Next page →" }
        }
        }
    };
    Ok(layout(&app, &csrf, &title, true, body))
}

fn jobs_table(app: &Shared, jobs: &[Value]) -> Markup {
    let base = &app.config.base;
    html! {
        @if jobs.is_empty() {
            p.empty #no-jobs { "No jobs." }
        } @else {
            table.jobs {
                thead { tr { th { "id" } th { "queue" } th { "state" } th { "attempts" } th { "run at" } th { "payload" } th { "last error" } th {} } }
                tbody {
                    @for j in jobs {
                        @let id = j["id"].as_i64().unwrap_or(0);
                        @let state = j["state"].as_str().unwrap_or("");
                        tr #{"job-" (id)} data-job=(id) {
                            td { a href={(base) "/jobs/" (id)} { (id) } }
                            td { (text(&j["queue"])) }
                            td.state { (state) }
                            td.num { (text(&j["attempts"])) "/" (text(&j["max_attempts"])) }
                            td { (text(&j["run_at"])) }
                            td.payload { code { (truncate(&j["payload"].to_string(), 80)) } }
                            td.error { (truncate(&text(&j["last_error"]), 80)) }
                            td {
                                @if state == "dead" {
                                    (action(app, "Requeue", &format!("/api/jobs/{id}/requeue"), None, "remove"))
                                }
                                @if state == "pending" || state == "running" {
                                    (action(app, "Cancel", &format!("/api/jobs/{id}/cancel"), Some("Cancel this job?"), "remove"))
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn truncate(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// `GET /jobs/{id}`: the document, its error and its dependency graph.
pub async fn job(
    State(app): State<Shared>,
    Extension(csrf): Extension<Csrf>,
    Path(id): Path<i64>,
) -> Page {
    let (job, errors, nodes) = blocking(&app.db, move |db| {
        let Some(job) = db.store().run(call::get_job(id))? else {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                format!(
                    "No job {id}: it never existed, or it was acked without retention, or pruned."
                ),
            ));
        };
        let errors = db.store().run(call::job_errors(id).raw())?;
        let nodes = graph::read(db, &job)?;
        Ok((job, errors, nodes))
    })
    .await?;
    let base = &app.config.base;
    let state = job["state"].as_str().unwrap_or("").to_string();
    let queue = job["queue"].as_str().unwrap_or("").to_string();
    let body = html! {
        p {
            "Queue " a href={(base) "/queues/" (seg(&queue))} { (queue) } ", state " strong #job-state { (state) }
            @if let Some(waiting) = job["waiting_for"].as_array().filter(|w| !w.is_empty()) {
                ", waiting for "
                @for (i, id) in waiting.iter().enumerate() {
                    @if i > 0 { ", " }
                    a href={(base) "/jobs/" (text(id))} { "#" (text(id)) }
                }
            }
            @if let Some(group) = job["group_key"].as_str() { ", group " code { (group) } }
            @if let Some(key) = job["limit_key"].as_str() { ", limit key " code { (key) } }
        }
        section.actions {
            @if state == "dead" { (action(&app, "Requeue", &format!("/api/jobs/{id}/requeue"), None, "reload")) }
            @if state == "pending" || state == "running" {
                (action(&app, "Cancel", &format!("/api/jobs/{id}/cancel"), Some("Cancel this job?"), "reload"))
            }
        }
        @if let Some(errors) = errors.as_array().filter(|e| !e.is_empty()) {
            h2 { "Errors, oldest first" }
            table #errors {
                thead { tr { th { "attempt" } th { "at" } th { "error" } } }
                tbody {
                    @for e in errors {
                        tr { td.num { (text(&e["attempt"])) } td { (text(&e["at"])) } td { pre.error { (text(&e["error"])) } } }
                    }
                }
            }
        } @else if !job["last_error"].is_null() {
            h2 { "Last error" }
            pre.error { (text(&job["last_error"])) }
        }
        @if nodes.len() > 1 {
            h2 { "Dependencies" }
            p.hint { "Jobs this one waits for, left to right; gone means acked (or ended and forgotten)." }
            (graph::svg(base, &nodes))
        }
        h2 { "Payload" }
        pre { (serde_json::to_string_pretty(&job["payload"]).unwrap_or_default()) }
        @if !job["result"].is_null() {
            h2 { "Result" }
            pre { (serde_json::to_string_pretty(&job["result"]).unwrap_or_default()) }
        }
        h2 { "Stamped options and state" }
        table.fields {
            @for (k, v) in job.as_object().into_iter().flatten() {
                @if k != "payload" && k != "result" { tr { th { (k) } td { (text(v)) } } }
            }
        }
    };
    Ok(layout(&app, &csrf, &format!("Job {id}"), false, body))
}

/// `GET /dead`: the dead letters of every queue, newest pages first read.
pub async fn dead(State(app): State<Shared>, Extension(csrf): Extension<Csrf>) -> Page {
    let queues = counts(&app).await?;
    let (jobs, outboxes) = blocking(&app.db, move |db| {
        let mut jobs = vec![];
        let mut outboxes = vec![];
        for q in queues.as_array().into_iter().flatten() {
            let dead = q["dead"].as_i64().unwrap_or(0);
            let name = q["queue"].as_str().unwrap_or("");
            match outbox_of(name) {
                _ if dead == 0 => {}
                Some(outbox) => outboxes.push((outbox.to_string(), dead)),
                None => jobs.extend(api::list(db, name, Some("dead"), 0, 100, None, 100)?.jobs),
            }
        }
        Ok((jobs, outboxes))
    })
    .await?;
    let body = html! {
        p.hint { "Up to 100 per queue; a queue's page lists them all." }
        (jobs_table(&app, &jobs))
        @for (outbox, dead) in &outboxes {
            p.hint { "Outbox " (outbox) ": " (dead) " dead (the SQL API lists an outbox's messages by id only: "
                code { "alk_get_job" } ", " code { "alk_requeue_dead" } ")." }
        }
    };
    Ok(layout(&app, &csrf, "Dead letters", true, body))
}

/// `GET /streams`: streams with their consumers, how far behind each is
/// (events, and the age of the first event it has not read), and the
/// relay route delivering it: a stream route saves its offset as the
/// consumer named after it, under the lease `relay:{stream}:{route}`
/// (alkstore-relay's `lease_name`), so a held lease of that name marks the
/// consumer as a relay's.
pub async fn streams(State(app): State<Shared>, Extension(csrf): Extension<Csrf>) -> Page {
    let (streams, relays, behind) = blocking(&app.db, |db| {
        let streams = db.store().run(call::streams().raw())?;
        let relays: std::collections::HashMap<String, String> = db
            .store()
            .run(call::locks())?
            .iter()
            .filter(|l| l["held"] == true)
            .filter_map(|l| Some((l["name"].as_str()?.to_string(), text(&l["owner"]))))
            .collect();
        let mut behind = std::collections::HashMap::new();
        for s in streams.as_array().into_iter().flatten() {
            for c in s["consumers"].as_array().into_iter().flatten() {
                if c["lag"].as_i64().unwrap_or(0) <= 0 {
                    continue;
                }
                let offset = c["offset"].as_i64().unwrap_or(0);
                let next = db
                    .store()
                    .run(call::read(&text(&s["stream"]), offset, 1)?.raw())?;
                if let Some(age) = next[0]["created_at"].as_str().and_then(age_of) {
                    behind.insert((text(&s["stream"]), text(&c["consumer"])), age);
                }
            }
        }
        Ok((streams, relays, behind))
    })
    .await?;
    let body = html! {
        @if streams.as_array().is_none_or(Vec::is_empty) { p.empty { "No streams." } }
        @for s in streams.as_array().into_iter().flatten() {
            h2 { (text(&s["stream"])) }
            p { "offsets " (text(&s["first_offset"])) "–" (text(&s["last_offset"])) }
            table {
                thead { tr { th { "consumer" } th { "offset" } th { "lag (events)" } th { "behind" } th { "relay route held by" } } }
                tbody {
                    @for c in s["consumers"].as_array().into_iter().flatten() {
                        @let consumer = text(&c["consumer"]);
                        @let age_s = behind.get(&(text(&s["stream"]), consumer.clone())).copied();
                        tr data-consumer=(consumer) {
                            td { (consumer) }
                            td.num { (text(&c["offset"])) }
                            td.num { (text(&c["lag"])) }
                            td.num.behind { @if let Some(a) = age_s { (age(&Value::from(a))) } @else { "—" } }
                            td.relay { @if let Some(owner) = relays.get(&format!("relay:{}:{consumer}", text(&s["stream"]))) { (owner) } }
                        }
                    }
                }
            }
        }
        p.hint { "A relay's stream route reads as the consumer named after the route; its lease "
            code { "relay:{stream}:{route}" } " names the relay holding it (docs/relay.md)." }
    };
    Ok(layout(&app, &csrf, "Streams", false, body))
}

/// Seconds since an RFC 3339 time, never below 0.
fn age_of(at: &str) -> Option<f64> {
    let at = chrono::DateTime::parse_from_rfc3339(at).ok()?;
    let ms = (chrono::Utc::now() - at.with_timezone(&chrono::Utc)).num_milliseconds();
    Some((ms.max(0) as f64) / 1000.0)
}

/// `GET /schedules`: every schedule with its next and last run.
pub async fn schedules(State(app): State<Shared>, Extension(csrf): Extension<Csrf>) -> Page {
    let rows = run(&app.db, call::schedules().raw()).await?;
    let body = table(
        &rows,
        &[
            "name",
            "queue",
            "spec",
            "payload",
            "next_run_at",
            "last_run_at",
        ],
        "No schedules.",
    );
    Ok(layout(&app, &csrf, "Schedules", false, body))
}

/// `GET /locks`: every lease.
pub async fn locks(State(app): State<Shared>, Extension(csrf): Extension<Csrf>) -> Page {
    let rows = run(&app.db, call::locks().raw()).await?;
    let body = table(
        &rows,
        &["name", "owner", "token", "expires_at", "held"],
        "No leases.",
    );
    Ok(layout(&app, &csrf, "Leases", false, body))
}

fn table(rows: &Value, columns: &[&str], empty: &str) -> Markup {
    html! {
        @if rows.as_array().is_none_or(Vec::is_empty) {
            p.empty { (empty) }
        } @else {
            table {
                thead { tr { @for c in columns { th { (c) } } } }
                tbody {
                    @for r in rows.as_array().into_iter().flatten() {
                        tr { @for c in columns { td { (text(&r[*c])) } } }
                    }
                }
            }
        }
    }
}

/// Seconds without a sweep after which the health page warns (the
/// maintenance worker and the workers sweep every second or so).
const NO_SWEEP_S: f64 = 60.0;

/// `GET /health`: the engine's health readings.
pub async fn health(State(app): State<Shared>, Extension(csrf): Extension<Csrf>) -> Page {
    let h = blocking(&app.db, crate::health::read).await?;
    let body = html! {
        h2 { "Maintenance" }
        @if h["maintenance_worker"] == true {
            p #maintenance { "alkstore's maintenance worker serves this database: it sweeps, ticks schedules, prunes and gives stream events their offsets. Claims still look for expired claims and due jobs themselves." }
        } @else {
            p #maintenance { "No maintenance worker serves this database: the workers' chores (or `alkstore maintain`, or your scheduler: docs/operating.md) sweep, tick schedules, prune and sequence streams, and claims look for expired claims and due jobs themselves." }
        }
        @let swept = &h["last_sweep_age_s"];
        @if h["maintenance_worker"] != true && swept.as_f64().is_none_or(|s| s > NO_SWEEP_S) {
            p.banner #no-sweep {
                @if swept.is_null() { "No sweep has run in this database" } @else { "No sweep has run for " (age(swept)) }
                ": nothing dead-letters expired claims, and on PostgreSQL a transaction held open slows claims down. Run `alkstore maintain` beside it (docs/operating.md)."
            }
        }
        @if h["engine"] == "postgres" {
            h2 { "Oldest transaction holding back vacuum" }
            @if h["sees_all_sessions"] == false {
                p.banner #sessions-hidden { "This role cannot see other roles' transactions (grant it pg_monitor): a transaction they hold open is not shown here." }
            }
            @if h["oldest_transaction"].is_null() {
                p #oldest-transaction { "none" }
            } @else {
                (table(&Value::Array(vec![h["oldest_transaction"].clone()]), &["pid", "user", "application_name", "state", "gid", "age_s", "xmin_age"], ""))
            }
            @let or_none = |v: &Value| if v.is_null() { "none".to_string() } else { text(v) };
            p { "Prepared transactions: " (or_none(&h["prepared_transactions"]))
                "; oldest replication slot xmin age: " (or_none(&h["replication_slot_xmin_age"]))
                "; notification queue usage: " (or_none(&h["notification_queue_usage"])) }
            h2 { "Tables" }
            (table(&h["tables"], &["table", "live_tuples", "dead_tuples", "last_autovacuum", "last_vacuum"], "No alkstore tables."))
        } @else {
            (table(&Value::Array(vec![h.clone()]), &["journal_mode", "page_size", "pages", "free_pages"], ""))
        }
    };
    Ok(layout(&app, &csrf, "Health", false, body))
}
