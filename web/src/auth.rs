//! Who may see and change what: the bearer token, the browser's session
//! cookie and its CSRF token, the same-origin rule for changes, and
//! read-only mode.

use crate::Shared;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Form, Json};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub const COOKIE: &str = "alkstore_session";
/// The header a browser's change carries its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// How long a browser stays logged in.
const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);
/// Sessions kept at most (the oldest go first): a flood of logins or
/// cookie-less page loads cannot grow memory without bound.
const MAX_SESSIONS: usize = 10_000;

struct Session {
    csrf: String,
    created: Instant,
}

/// Browser sessions, in memory: a restart logs every browser out.
#[derive(Default)]
pub struct Sessions(Mutex<HashMap<String, Session>>);

impl Sessions {
    fn create(&self) -> (String, String) {
        let (id, csrf) = (random_token(), random_token());
        let mut map = self.0.lock().unwrap();
        map.retain(|_, s| s.created.elapsed() < SESSION_TTL);
        if map.len() >= MAX_SESSIONS {
            if let Some(oldest) = map
                .iter()
                .min_by_key(|(_, s)| s.created)
                .map(|(k, _)| k.clone())
            {
                map.remove(&oldest);
            }
        }
        map.insert(
            id.clone(),
            Session {
                csrf: csrf.clone(),
                created: Instant::now(),
            },
        );
        (id, csrf)
    }

    fn csrf(&self, id: &str) -> Option<String> {
        let map = self.0.lock().unwrap();
        map.get(id)
            .filter(|s| s.created.elapsed() < SESSION_TTL)
            .map(|s| s.csrf.clone())
    }

    fn remove(&self, id: &str) {
        self.0.lock().unwrap().remove(id);
    }
}

/// 32 random bytes as hex.
fn random_token() -> String {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).expect("the operating system's random source");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// Every value of the session cookie the request carries: a browser sends
/// all it has under that name (another site on another localhost port can
/// plant one: browsers do not keep cookies apart by port).
fn cookies(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .filter(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
        .collect()
}

fn cookie(headers: &HeaderMap) -> Option<String> {
    cookies(headers).into_iter().next()
}

/// The token of an `Authorization: Bearer TOKEN` header; the scheme's name
/// in any case (RFC 7235 §2.1).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim_start())
}

/// Whether a change comes from another site: a browser names the page's
/// origin in `Origin` (and `Sec-Fetch-Site`) on every cross-site request.
fn cross_site(headers: &HeaderMap) -> bool {
    if headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == "cross-site")
    {
        return true;
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let origin_host = origin.split_once("://").map_or(origin, |(_, h)| h);
    origin == "null" || origin_host != host
}

/// Whether the request names a loopback host (`localhost`, `127.0.0.1`,
/// `[::1]`, any port).
fn loopback_host(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.split(':').next().unwrap_or(""),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The CSRF token a page embeds for its session (`None`: no session).
#[derive(Clone, Default)]
pub struct Csrf(pub Option<String>);

fn refuse(status: StatusCode, api: bool, message: &str) -> Response {
    if api {
        (status, Json(json!({"error": message, "code": null}))).into_response()
    } else {
        (status, message.to_string()).into_response()
    }
}

/// Every request passes here: authenticates it, refuses changes that are
/// cross-site, lack the session's CSRF token or meet read-only mode, and
/// gives a page its CSRF token.
pub async fn guard(State(app): State<Shared>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let api = path.starts_with("/api/") || path == "/api";
    let change = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let open = path == "/login" || path.starts_with("/assets/");
    if app.config.token.is_none() && !loopback_host(req.headers()) {
        // Without a token only a loopback name may reach it: a page of
        // another site that rebinds its own name to 127.0.0.1 is then
        // refused (DNS rebinding), since its requests carry its name.
        return refuse(
            StatusCode::FORBIDDEN,
            api,
            "refused: without a token this dashboard answers only to localhost, 127.0.0.1 or [::1]",
        );
    }
    if change && cross_site(req.headers()) {
        return refuse(
            StatusCode::FORBIDDEN,
            api,
            "refused: a change sent from another site",
        );
    }
    if open {
        return next.run(req).await;
    }
    let headers = req.headers();
    // The first of its cookies that names a session this server issued.
    let carried = cookies(headers);
    let session = carried
        .iter()
        .find_map(|id| app.sessions.csrf(id).map(|c| (id.clone(), c)));
    // Without a token configured there is none to be wrong: a Bearer header
    // is ignored (it proves nothing either).
    let by_bearer = match (&app.config.token, bearer(headers)) {
        (Some(token), Some(given)) if same(token, given) => true,
        (Some(_), Some(_)) => {
            return refuse(StatusCode::UNAUTHORIZED, api, "wrong token");
        }
        _ => false,
    };
    if app.config.token.is_some() && !by_bearer && session.is_none() {
        if api {
            let mut r = refuse(
                StatusCode::UNAUTHORIZED,
                true,
                "a token is required: Authorization: Bearer TOKEN",
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
        return Redirect::to(&format!("{}/login", app.config.base)).into_response();
    }
    // A browser's change with a session cookie this server did not issue
    // (a planted one, or one from before a restart) is refused: such a
    // cookie would otherwise skip the CSRF check. Reloading the page gets a
    // session.
    if change && !by_bearer && session.is_none() && !carried.is_empty() {
        return refuse(
            StatusCode::FORBIDDEN,
            api,
            "refused: this browser's session is unknown here (reload the page)",
        );
    }
    if change && !by_bearer {
        if let Some((_, csrf)) = &session {
            let given = headers
                .get(CSRF_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if !same(csrf, given) {
                return refuse(
                    StatusCode::FORBIDDEN,
                    api,
                    "refused: the CSRF token is missing or wrong (reload the page)",
                );
            }
        }
    }
    if change && app.config.read_only && path != "/logout" {
        return refuse(
            StatusCode::FORBIDDEN,
            api,
            "refused: this dashboard is read-only",
        );
    }
    // A browser without a session on an open (token-less) dashboard gets
    // one, so that its changes carry a CSRF token too.
    let mut new_cookie = None;
    let csrf = match session {
        Some((_, csrf)) => Some(csrf),
        None if !api && !by_bearer => {
            let (id, csrf) = app.sessions.create();
            new_cookie = Some(id);
            Some(csrf)
        }
        None => None,
    };
    req.extensions_mut().insert(Csrf(csrf));
    if !api && app.role.get().is_none() {
        let db = app.db.clone();
        if let Ok(note) = tokio::task::spawn_blocking(move || crate::role::note(&db)).await {
            let _ = app.role.set(note);
        }
    }
    let mut response = next.run(req).await;
    if let Some(id) = new_cookie {
        set_cookie(&mut response, &app.config.base, &id);
    }
    response
}

fn set_cookie(response: &mut Response, base: &str, id: &str) {
    let path = if base.is_empty() { "/" } else { base };
    let value = format!("{COOKIE}={id}; HttpOnly; SameSite=Strict; Path={path}");
    if let Ok(v) = HeaderValue::from_str(&value) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
}

fn login_page(base: &str, error: Option<&str>) -> Markup {
    html! {
        (maud::DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "alkstore — log in" }
                link rel="stylesheet" href={(base) "/assets/app.css"};
            }
            body.login {
                form method="post" action={(base) "/login"} {
                    h1 { "alkstore" }
                    @if let Some(e) = error { p.error #login-error { (e) } }
                    label { "Token " input #token type="password" name="token" autofocus; }
                    button #login type="submit" { "Log in" }
                }
            }
        }
    }
}

/// `GET /login`: the token form.
pub async fn login_form(State(app): State<Shared>) -> Response {
    if app.config.token.is_none() {
        return Redirect::to(&crate::home(&app.config.base)).into_response();
    }
    login_page(&app.config.base, None).into_response()
}

#[derive(Deserialize)]
pub struct LoginForm {
    token: String,
}

/// `POST /login`: a right token starts a session (the cookie), a wrong one
/// answers 401 after a pause that makes guessing slow.
pub async fn login(State(app): State<Shared>, Form(form): Form<LoginForm>) -> Response {
    let Some(token) = &app.config.token else {
        return Redirect::to(&crate::home(&app.config.base)).into_response();
    };
    if !same(token, &form.token) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        return (
            StatusCode::UNAUTHORIZED,
            login_page(&app.config.base, Some("wrong token")),
        )
            .into_response();
    }
    let (id, _) = app.sessions.create();
    let mut response = Redirect::to(&crate::home(&app.config.base)).into_response();
    set_cookie(&mut response, &app.config.base, &id);
    response
}

/// `POST /logout`: forgets the session.
pub async fn logout(State(app): State<Shared>, headers: HeaderMap) -> Response {
    if let Some(id) = cookie(&headers) {
        app.sessions.remove(&id);
    }
    let mut response = Redirect::to(&format!("{}/login", app.config.base)).into_response();
    let path = if app.config.base.is_empty() {
        "/"
    } else {
        &app.config.base
    };
    if let Ok(v) = HeaderValue::from_str(&format!(
        "{COOKIE}=; HttpOnly; SameSite=Strict; Path={path}; Max-Age=0"
    )) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    response
}
