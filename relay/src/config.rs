//! The relay's config file (contract v1.3 §N1): TOML, one `[[route]]`
//! table per route, read whole and checked before anything is claimed.

use alkstore_core::{names, NameKind};
use base64::Engine as _;
use std::collections::HashSet;
use std::fmt;
use std::time::Duration;

/// Messages of one route in flight at once, when the file does not say.
pub const DEFAULT_CONCURRENCY: usize = 16;
/// How long one delivery may take, when the file does not say.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Every route of a config file, in file order.
#[derive(Clone, Debug)]
pub struct Config {
    /// The routes.
    pub routes: Vec<Route>,
}

/// One `[[route]]`: what it delivers, where, and how many at once.
#[derive(Clone, Debug)]
pub struct Route {
    /// Unique in the file: the outbox worker name or the stream consumer name.
    pub name: String,
    /// What it delivers.
    pub source: Source,
    /// Where it delivers.
    pub sink: SinkSpec,
    /// Messages in flight at once (≥ 1).
    pub concurrency: usize,
    /// How long one delivery may take.
    pub timeout: Duration,
}

/// The lease under which one relay at a time delivers a stream route:
/// `relay:{stream}:{route}`, as narrow as the consumer offset the route
/// saves (the stream's consumer named after the route), so that routes of
/// one name on different streams never wait for each other.
pub fn lease_name(stream: &str, route: &str) -> String {
    format!("relay:{stream}:{route}")
}

/// What a route delivers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// The messages of an outbox.
    Outbox(String),
    /// The events of a stream.
    Stream(String),
}

impl Source {
    /// `outbox:{name}` or `stream:{name}`: the `Alk-Source` of its messages.
    pub fn label(&self) -> String {
        match self {
            Source::Outbox(n) => format!("outbox:{n}"),
            Source::Stream(n) => format!("stream:{n}"),
        }
    }
}

/// Where a route delivers, by the scheme of its `to`.
#[derive(Clone)]
pub enum SinkSpec {
    /// `nats://…`: NATS JetStream, publishing to `subject`.
    Nats {
        /// The server URL.
        url: url::Url,
        /// The subject (a JetStream stream must capture it).
        subject: String,
    },
    /// `amqp://…`: RabbitMQ with publisher confirms.
    Amqp {
        /// The server URL (user, password and vhost in it).
        url: url::Url,
        /// The exchange (`""`: the default exchange).
        exchange: String,
        /// The routing key.
        routing_key: String,
    },
    /// `redis://…`: `XADD` to a Redis stream.
    Redis {
        /// The server URL.
        url: url::Url,
        /// The stream key.
        key: String,
    },
    /// `http://…` or `https://…`: a webhook, one POST per message.
    Http {
        /// The endpoint.
        url: url::Url,
        /// The Standard Webhooks secret's decoded bytes.
        secret: Option<Vec<u8>>,
        /// Extra request headers.
        headers: Vec<(String, String)>,
    },
}

impl SinkSpec {
    /// The sink's URL with any password replaced by `***`: what logs and
    /// errors show.
    pub fn shown(&self) -> String {
        redact(self.url())
    }

    fn url(&self) -> &url::Url {
        match self {
            SinkSpec::Nats { url, .. }
            | SinkSpec::Amqp { url, .. }
            | SinkSpec::Redis { url, .. }
            | SinkSpec::Http { url, .. } => url,
        }
    }
}

// Never print the URL or a secret: only what `shown` gives.
impl fmt::Debug for SinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown())
    }
}

/// A URL as it may be shown: the password, and the user part of an http
/// URL (where it is often a token), as `***`.
pub fn redact(url: &url::Url) -> String {
    let mut shown = url.clone();
    if url.password().is_some() {
        let _ = shown.set_password(Some("***"));
    }
    if matches!(url.scheme(), "http" | "https") && !url.username().is_empty() {
        let _ = shown.set_username("***");
    }
    shown.to_string()
}

/// Request headers the relay sets itself: `headers` may not set them.
const OWN_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "host",
    "transfer-encoding",
];

/// A config that cannot run: one line naming the route and the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

const KEYS: &[&str] = &[
    "name",
    "outbox",
    "stream",
    "to",
    "subject",
    "exchange",
    "secret",
    "headers",
    "concurrency",
    "timeout_s",
];

impl Config {
    /// Reads and checks a config file.
    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("config {}: {e}", path.display())))?;
        Config::parse(&text)
    }

    /// Checks a config's text.
    pub fn parse(text: &str) -> Result<Config, ConfigError> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            // toml's message spans lines (a snippet of the file): one line.
            let first = e.message().lines().next().unwrap_or("").to_string();
            let at = e
                .span()
                .map(|s| format!(" (line {})", line_of(text, s.start)))
                .unwrap_or_default();
            ConfigError(format!("config: not valid TOML{at}: {first}"))
        })?;
        if let Some(key) = table.keys().find(|k| *k != "route") {
            return Err(ConfigError(format!(
                "config: unknown key {key:?} at the top level (only [[route]] tables)"
            )));
        }
        let routes = match table.get("route") {
            None => return Err(ConfigError("config: no [[route]] table".into())),
            Some(toml::Value::Array(routes)) => routes,
            Some(_) => {
                return Err(ConfigError(
                    "config: \"route\" must be [[route]] tables".into(),
                ))
            }
        };
        let mut seen = HashSet::new();
        let mut outboxes = std::collections::HashMap::new();
        let mut out = Vec::with_capacity(routes.len());
        for (i, route) in routes.iter().enumerate() {
            let route = parse_route(i + 1, route)?;
            if !seen.insert(route.name.clone()) {
                return Err(ConfigError(format!(
                    "route {:?} (route {}): key \"name\": the name is used by an earlier route",
                    route.name,
                    i + 1
                )));
            }
            if let Source::Outbox(o) = &route.source {
                if let Some(other) = outboxes.insert(o.clone(), route.name.clone()) {
                    return Err(ConfigError(format!(
                        "route {:?} (route {}): key \"outbox\": outbox {o:?} is delivered by route {other:?} already \
                         (two routes would split its messages between them, not each deliver all)",
                        route.name,
                        i + 1
                    )));
                }
            }
            out.push(route);
        }
        if out.is_empty() {
            return Err(ConfigError("config: no [[route]] table".into()));
        }
        Ok(Config { routes: out })
    }
}

fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

fn parse_route(n: usize, value: &toml::Value) -> Result<Route, ConfigError> {
    let Some(t) = value.as_table() else {
        return Err(ConfigError(format!("route {n}: must be a table")));
    };
    // Until the name is read, the route is known by its place.
    let mut who = format!("route {n}");
    let name = match t.get("name") {
        None => return fail(&who, "name", "required".into()),
        Some(v) => string(&who, "name", v)?,
    };
    if let Err(e) = names::validate(NameKind::Consumer, &name) {
        return fail(&who, "name", e.detail);
    }
    who = format!("route {name:?} (route {n})");
    if let Some(key) = t.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return fail(&who, key, "unknown key".into());
    }
    let source = match (t.get("outbox"), t.get("stream")) {
        (Some(_), Some(_)) => {
            return fail(
                &who,
                "stream",
                "a route delivers one source: \"outbox\" or \"stream\", not both".into(),
            )
        }
        (None, None) => return fail(&who, "outbox", "required (or \"stream\")".into()),
        (Some(v), None) => {
            let s = string(&who, "outbox", v)?;
            if let Err(e) = names::validate(NameKind::Outbox, &s) {
                return fail(&who, "outbox", e.detail);
            }
            Source::Outbox(s)
        }
        (None, Some(v)) => {
            let s = string(&who, "stream", v)?;
            if let Err(e) = names::validate(NameKind::Stream, &s) {
                return fail(&who, "stream", e.detail);
            }
            // The route's lease must be a valid lock name too.
            if let Err(e) = names::validate(NameKind::Lock, &lease_name(&s, &name)) {
                return fail(&who, "name", e.detail);
            }
            Source::Stream(s)
        }
    };
    let to = match t.get("to") {
        None => return fail(&who, "to", "required".into()),
        Some(v) => string(&who, "to", v)?,
    };
    let url = match url::Url::parse(&to) {
        Ok(url) => url,
        // The parse error names no part of the URL: nothing to hide.
        Err(e) => return fail(&who, "to", format!("not a URL: {e}")),
    };
    if url.host_str().is_none_or(str::is_empty) {
        return fail(&who, "to", "the URL names no host".into());
    }
    let opt = |key: &str| -> Result<Option<String>, ConfigError> {
        t.get(key).map(|v| string(&who, key, v)).transpose()
    };
    let subject = opt("subject")?;
    let exchange = opt("exchange")?;
    let secret = opt("secret")?;
    let headers = t.get("headers");
    let only = |key: &str, present: bool, sink: &str| -> Result<(), ConfigError> {
        if present {
            fail(&who, key, format!("only for {sink} sinks"))
        } else {
            Ok(())
        }
    };
    let need_subject = |what: &str| -> Result<String, ConfigError> {
        match &subject {
            None => fail(&who, "subject", format!("required: the {what}")),
            Some(s) if s.is_empty() => fail(&who, "subject", "must not be empty".into()),
            Some(s) => Ok(s.clone()),
        }
    };
    let sink = match url.scheme() {
        "nats" => {
            only("exchange", exchange.is_some(), "amqp")?;
            only("secret", secret.is_some(), "http")?;
            only("headers", headers.is_some(), "http")?;
            SinkSpec::Nats {
                subject: need_subject("NATS subject")?,
                url,
            }
        }
        "amqp" => {
            only("secret", secret.is_some(), "http")?;
            only("headers", headers.is_some(), "http")?;
            // AMQP short strings: at most 255 bytes, the message id
            // (`outbox:{name}:{id}`) included.
            for (key, v) in [("subject", &subject), ("exchange", &exchange)] {
                if v.as_ref().is_some_and(|v| v.len() > 255) {
                    return fail(&who, key, "at most 255 bytes for AMQP".into());
                }
            }
            let (key, source_name) = match &source {
                Source::Outbox(o) => ("outbox", o),
                Source::Stream(s) => ("stream", s),
            };
            if source_name.len() > 200 {
                return fail(
                    &who,
                    key,
                    "at most 200 bytes for an AMQP route (its message ids are AMQP short strings)"
                        .into(),
                );
            }
            SinkSpec::Amqp {
                routing_key: need_subject("routing key")?,
                exchange: exchange.unwrap_or_default(),
                url,
            }
        }
        "redis" => {
            only("exchange", exchange.is_some(), "amqp")?;
            only("secret", secret.is_some(), "http")?;
            only("headers", headers.is_some(), "http")?;
            SinkSpec::Redis {
                key: need_subject("stream key")?,
                url,
            }
        }
        "http" | "https" => {
            if subject.is_some() {
                return fail(&who, "subject", "not for http sinks".into());
            }
            only("exchange", exchange.is_some(), "amqp")?;
            let secret = match secret {
                None => None,
                Some(s) => Some(
                    webhook_secret(&s)
                        .map_err(|what| ConfigError(format!("{who}: key \"secret\": {what}")))?,
                ),
            };
            let headers = match headers {
                None => Vec::new(),
                Some(toml::Value::Table(h)) => {
                    let mut out = Vec::with_capacity(h.len());
                    for (k, v) in h {
                        let Some(v) = v.as_str() else {
                            return fail(&who, "headers", format!("{k:?} must be a string"));
                        };
                        if ureq::http::HeaderName::from_bytes(k.as_bytes()).is_err()
                            || ureq::http::HeaderValue::from_str(v).is_err()
                        {
                            return fail(&who, "headers", format!("{k:?} is not a valid header"));
                        }
                        let lower = k.to_ascii_lowercase();
                        if OWN_HEADERS.contains(&lower.as_str())
                            || lower.starts_with("webhook-")
                            || lower.starts_with("alk-")
                        {
                            return fail(
                                &who,
                                "headers",
                                format!("{k:?} is set by the relay itself"),
                            );
                        }
                        out.push((k.clone(), v.to_string()));
                    }
                    out
                }
                Some(_) => return fail(&who, "headers", "must be a table of strings".into()),
            };
            SinkSpec::Http {
                url,
                secret,
                headers,
            }
        }
        other => {
            return fail(
                &who,
                "to",
                format!(
                    "unknown scheme {other:?} (nats://, amqp://, redis://, http:// or https://)"
                ),
            )
        }
    };
    let concurrency = match t.get("concurrency") {
        None => DEFAULT_CONCURRENCY,
        Some(toml::Value::Integer(c)) if *c >= 1 && *c <= 10_000 => *c as usize,
        Some(_) => {
            return fail(
                &who,
                "concurrency",
                "must be a whole number from 1 to 10000".into(),
            )
        }
    };
    let timeout = match t.get("timeout_s") {
        None => DEFAULT_TIMEOUT,
        Some(v) => {
            let s = match v {
                toml::Value::Integer(i) => *i as f64,
                toml::Value::Float(f) => *f,
                _ => f64::NAN,
            };
            if !(s.is_finite() && s > 0.0 && s <= 3600.0) {
                return fail(
                    &who,
                    "timeout_s",
                    "must be a number of seconds above 0 (at most 3600)".into(),
                );
            }
            Duration::from_secs_f64(s)
        }
    };
    Ok(Route {
        name,
        source,
        sink,
        concurrency,
        timeout,
    })
}

fn fail<T>(who: &str, key: &str, what: String) -> Result<T, ConfigError> {
    Err(ConfigError(format!("{who}: key {key:?}: {what}")))
}

fn string(who: &str, key: &str, v: &toml::Value) -> Result<String, ConfigError> {
    match v.as_str() {
        Some(s) => Ok(s.to_string()),
        None => Err(ConfigError(format!("{who}: key {key:?}: must be a string"))),
    }
}

/// A Standard Webhooks secret: `whsec_` and base64 of the key's bytes.
fn webhook_secret(s: &str) -> Result<Vec<u8>, String> {
    let Some(b64) = s.strip_prefix("whsec_") else {
        return Err("must start with \"whsec_\" (a Standard Webhooks secret)".into());
    };
    match base64::engine::general_purpose::STANDARD.decode(b64) {
        Ok(key) if !key.is_empty() => Ok(key),
        // The secret itself is never shown.
        _ => Err("the part after \"whsec_\" must be base64 of at least one byte".into()),
    }
}
