//! TLS for the PostgreSQL connections this crate opens itself, chosen as
//! libpq chooses it: by the connection string's `sslmode` and
//! `sslrootcert` (rustls, no system TLS library).
//!
//! | `sslmode` | TLS | certificate checked |
//! |---|---|---|
//! | `disable` | never | — |
//! | `allow`, `prefer` (default) | when the server offers it | only with `sslrootcert`, as `verify-ca` |
//! | `require` | always | only with `sslrootcert`, as `verify-ca` |
//! | `verify-ca` | always | signed by a root of `sslrootcert` |
//! | `verify-full` | always | that, and issued for the host connected to |
//!
//! `sslrootcert` is a PEM file, or `system` for the operating system's
//! roots; `verify-ca` and `verify-full` without it read libpq's default,
//! `~/.postgresql/root.crt`. (libpq's `allow` tries without TLS first; here
//! it is `prefer`.) A Unix socket never uses TLS.

use crate::error::{Error, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::Arc;
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// What the connections are opened with.
pub(crate) type Tls = MakeRustlsConnect;

/// The driver's configuration and the TLS connector for `conninfo` (a URL
/// or key=value connection string).
pub(crate) fn config(conninfo: &str) -> Result<(tokio_postgres::Config, Tls)> {
    let (rest, opts) = take_options(conninfo)?;
    let mut config: tokio_postgres::Config = rest.parse()?;
    let mode = opts.mode.as_deref().unwrap_or("prefer");
    let check = match mode {
        "disable" => Check::Nothing,
        "allow" | "prefer" | "require" if opts.root.is_none() => Check::Nothing,
        "allow" | "prefer" | "require" | "verify-ca" => Check::Chain,
        "verify-full" => Check::ChainAndName,
        other => {
            return Err(bad(format!(
                "sslmode must be disable, allow, prefer, require, verify-ca or verify-full, got {other:?}"
            )))
        }
    };
    config.ssl_mode(match mode {
        "disable" => SslMode::Disable,
        "allow" | "prefer" => SslMode::Prefer,
        _ => SslMode::Require,
    });
    let roots = match check {
        Check::Nothing => None,
        _ => Some(roots(opts.root.as_deref())?),
    };
    Ok((config, MakeRustlsConnect::new(client_config(check, roots)?)))
}

/// How much of the server's certificate is checked.
#[derive(Clone, Copy, PartialEq)]
enum Check {
    Nothing,
    Chain,
    ChainAndName,
}

/// The TLS options the driver does not know, taken out of the string.
#[derive(Default)]
struct Options {
    mode: Option<String>,
    root: Option<String>,
}

fn bad(message: String) -> Error {
    Error::engine("postgres", "", message)
}

/// Removes `sslmode` and `sslrootcert` from a connection string; returns
/// the rest and their values.
fn take_options(conninfo: &str) -> Result<(String, Options)> {
    let mut opts = Options::default();
    let mut keep = |key: &str, value: String| -> bool {
        match key {
            "sslmode" => opts.mode = Some(value),
            "sslrootcert" => opts.root = Some(value),
            _ => return true,
        }
        false
    };
    if conninfo.starts_with("postgres://") || conninfo.starts_with("postgresql://") {
        let Some((base, query)) = conninfo.split_once('?') else {
            return Ok((conninfo.to_string(), opts));
        };
        let kept: Vec<&str> = query
            .split('&')
            .filter(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                keep(k, percent_decode(v))
            })
            .collect();
        let rest = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return Ok((rest, opts));
    }
    // key = value pairs; values may be 'single quoted' with \ escapes.
    let mut rest = String::new();
    let mut chars = conninfo.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(_) = chars.peek() else { break };
        let key: String =
            std::iter::from_fn(|| chars.next_if(|c| *c != '=' && !c.is_whitespace())).collect();
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(bad(format!(
                "connection string: missing \"=\" after {key:?}"
            )));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut raw = String::new(); // the value as written, for the rest
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            raw.push('\'');
            loop {
                match chars.next() {
                    Some('\\') => {
                        let c = chars.next().unwrap_or('\\');
                        raw.extend(['\\', c]);
                        value.push(c);
                    }
                    Some('\'') => {
                        raw.push('\'');
                        break;
                    }
                    Some(c) => {
                        raw.push(c);
                        value.push(c);
                    }
                    None => return Err(bad("connection string: unterminated quote".into())),
                }
            }
        } else {
            value = std::iter::from_fn(|| chars.next_if(|c| !c.is_whitespace())).collect();
            raw.clone_from(&value);
        }
        if keep(&key, value) {
            rest.push_str(&format!("{key}={raw} "));
        }
    }
    Ok((rest.trim_end().to_string(), opts))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).copied().and_then(hex),
            bytes.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The trusted roots: a PEM file, `system`, or libpq's default file.
fn roots(root: Option<&str>) -> Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    if root == Some("system") {
        let found = rustls_native_certs::load_native_certs();
        let (added, _) = store.add_parsable_certificates(found.certs);
        if added == 0 {
            return Err(bad(
                "sslrootcert=system: no root certificates found on this system".into(),
            ));
        }
        return Ok(store);
    }
    let path = match root {
        Some(p) => std::path::PathBuf::from(p),
        None => std::env::home_dir()
            .unwrap_or_default()
            .join(".postgresql/root.crt"),
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&path)
        .and_then(|certs| certs.collect())
        .map_err(|e| {
            bad(format!(
                "sslrootcert {}: cannot read root certificates: {e} (a certificate check needs sslrootcert)",
                path.display()
            ))
        })?;
    let (added, _) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err(bad(format!(
            "sslrootcert {}: no certificate in it",
            path.display()
        )));
    }
    Ok(store)
}

fn client_config(check: Check, roots: Option<RootCertStore>) -> Result<rustls::ClientConfig> {
    let provider = Arc::new(ring::default_provider());
    let tls_error = |e: rustls::Error| bad(format!("TLS: {e}"));
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?;
    let verifier: Arc<dyn ServerCertVerifier> = match (check, roots) {
        (Check::Nothing, _) | (_, None) => Arc::new(EncryptOnly(provider)),
        (check, Some(roots)) => {
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| bad(format!("TLS: {e}")))?;
            if check == Check::ChainAndName {
                webpki
            } else {
                Arc::new(ChainOnly(webpki))
            }
        }
    };
    Ok(builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

/// `prefer` / `require` without roots (libpq's meaning): the connection is
/// encrypted, but whose certificate it is is not checked. The handshake's
/// signatures still are.
#[derive(Debug)]
struct EncryptOnly(Arc<CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain must lead to a trusted root; the name on the
/// certificate is not compared with the host.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::take_options;

    #[test]
    fn the_tls_options_are_taken_out_of_urls_and_key_value_strings() {
        let (rest, o) = take_options(
            "postgresql://u:p@db.example.com:5432/app?sslmode=verify-full&application_name=x&sslrootcert=%2Fetc%2Fca.pem",
        )
        .unwrap();
        assert_eq!(
            rest,
            "postgresql://u:p@db.example.com:5432/app?application_name=x"
        );
        assert_eq!(
            (o.mode.as_deref(), o.root.as_deref()),
            (Some("verify-full"), Some("/etc/ca.pem"))
        );
        let (rest, o) = take_options("postgres://h/app?sslmode=require").unwrap();
        assert_eq!(
            (rest.as_str(), o.mode.as_deref(), o.root),
            ("postgres://h/app", Some("require"), None)
        );
        let (rest, o) = take_options(
            "host=db password='a \\'b' sslmode=verify-ca sslrootcert='/a b/ca.pem' dbname=app",
        )
        .unwrap();
        assert_eq!(rest, "host=db password='a \\'b' dbname=app");
        assert_eq!(
            (o.mode.as_deref(), o.root.as_deref()),
            (Some("verify-ca"), Some("/a b/ca.pem"))
        );
        assert!(take_options("host=db sslmode").is_err());
    }
}
