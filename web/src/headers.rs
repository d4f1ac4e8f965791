//! The headers every answer carries, whoever asked and whatever it says
//! (refusals included): no page of the dashboard may be framed by another
//! site (clickjacking: a framed page's own buttons are same-origin clicks),
//! scripts and styles come only from the dashboard itself, and no answer
//! is sniffed into another type.

use axum::extract::Request;
use axum::http::{header, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

/// The Content-Security-Policy: the dashboard's own script and stylesheet
/// (`/assets/`), its own API and event stream, and no frame, plugin, base
/// or form target elsewhere.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
form-action 'self'; frame-ancestors 'none'";

/// Adds the headers to every response.
pub async fn secure(req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let h = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "same-origin"),
        (
            HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    response
}
