//! What the dashboard's tests share: a dashboard served in-process on a real
//! socket, the databases to serve (SQLite and every PostgreSQL install the
//! test command prepared), and an HTTP client that shows every status.

#![allow(dead_code)] // each test file uses its own part

use alkstore_web::{Config, Db};
use serde_json::Value;
use std::net::SocketAddr;

pub use alkstore_tests::{fresh, pg_required};

/// A dashboard on 127.0.0.1 at a free port; stops when dropped.
pub struct Server {
    pub addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Server {
    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// Serves the dashboard of `url`.
pub fn serve(url: &str, config: Config) -> Server {
    serve_under(url, config, "")
}

/// Serves it nested under `prefix` in an application's router (`""`: at
/// the root), as docs/web.md shows.
pub fn serve_under(url: &str, config: Config, prefix: &str) -> Server {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let db = Db::open(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    let addr = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = match prefix {
            "" => alkstore_web::router(db, config),
            prefix => axum::Router::new().nest(prefix, alkstore_web::router(db, config)),
        };
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        addr
    });
    Server {
        addr,
        runtime: Some(runtime),
    }
}

/// A database to serve: a label and its URL (the temporary directory of a
/// SQLite file lives as long as it).
pub struct Target {
    pub label: &'static str,
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

/// SQLite, the extension and the plain install.
pub fn targets() -> Vec<Target> {
    let dir = tempfile::tempdir().unwrap();
    let mut out = vec![Target {
        label: "sqlite",
        url: format!("sqlite:{}", dir.path().join("web.db").display()),
        _dir: Some(dir),
    }];
    for (label, var) in [
        ("extension", "ALKSTORE_PG_URL"),
        ("plain SQL install", "ALKSTORE_PG_PLAIN_URL"),
    ] {
        match std::env::var(var) {
            Ok(url) => out.push(Target {
                label,
                url,
                _dir: None,
            }),
            Err(_) => assert!(!pg_required(), "{var} is required"),
        }
    }
    out
}

/// An HTTP client that returns 4xx and 5xx answers instead of failing, and
/// does not follow redirects.
pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .build()
        .into()
}

/// An answer: status, headers we look at, and the body (JSON when it is).
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub location: Option<String>,
    pub set_cookie: Vec<String>,
    pub through: Option<String>,
    pub text: String,
    /// Every header.
    pub headers: ureq::http::HeaderMap,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }
}

fn answer(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Answer {
    let mut r = r.unwrap();
    let header = |name: &str| {
        r.headers()
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let location = header("location").pop();
    let set_cookie = header("set-cookie");
    let through = header("x-alkstore-through").pop();
    let headers = r.headers().clone();
    Answer {
        status: r.status().as_u16(),
        location,
        set_cookie,
        through,
        text: r.body_mut().read_to_string().unwrap(),
        headers,
    }
}

/// GET with these extra headers.
pub fn get(url: &str, headers: &[(&str, &str)]) -> Answer {
    let mut req = agent().get(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    answer(req.call())
}

/// POST (an empty body, or JSON) with these extra headers.
pub fn post(url: &str, headers: &[(&str, &str)], json: Option<&Value>) -> Answer {
    let mut req = agent().post(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    answer(match json {
        Some(v) => req.send_json(v),
        None => req.send_empty(),
    })
}

/// POST a form.
pub fn post_form(url: &str, fields: &[(&str, &str)]) -> Answer {
    answer(agent().post(url).send_form(fields.iter().copied()))
}
