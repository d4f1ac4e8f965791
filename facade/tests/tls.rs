//! TLS for the PostgreSQL connections the crate opens itself, chosen by
//! `sslmode` and `sslrootcert` as libpq chooses it — on the real server over
//! TCP (`ALKSTORE_PG_TLS_URL`) with its own certificate
//! (`ALKSTORE_PG_TLS_CERT`, Debian's self-signed snakeoil), so the
//! certificate is its own root.

use alkstore::{EnqueueOpts, PgStore};
use serde_json::json;

struct Server {
    /// `postgresql://user:password@127.0.0.1:5432/db`, no query.
    url: String,
    /// The server's certificate (PEM).
    cert: String,
}

fn server() -> Option<Server> {
    match (
        std::env::var("ALKSTORE_PG_TLS_URL"),
        std::env::var("ALKSTORE_PG_TLS_CERT"),
    ) {
        (Ok(url), Ok(cert)) => Some(Server { url, cert }),
        _ => {
            assert!(
                std::env::var_os("ALKSTORE_REQUIRE_PG").is_none(),
                "ALKSTORE_PG_TLS_URL / ALKSTORE_PG_TLS_CERT are not set"
            );
            eprintln!("note: ALKSTORE_PG_TLS_URL not set: TLS not tested");
            None
        }
    }
}

/// Whether this connection is encrypted, as the server sees it.
fn encrypted(client: &mut postgres::Client) -> bool {
    client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .unwrap()
        .get(0)
}

/// The DNS name the certificate was issued for (the host name a
/// `verify-full` connection must use).
fn certificate_name(cert: &str) -> String {
    let out = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-ext", "subjectAltName", "-in", cert])
        .output()
        .expect("openssl");
    let text = String::from_utf8_lossy(&out.stdout);
    text.split([',', '\n', ' '])
        .find_map(|part| part.trim().strip_prefix("DNS:"))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no DNS name in {cert}: {text}"))
}

#[test]
fn sslmode_chooses_tls_as_libpq_does() {
    let Some(s) = server() else { return };
    let cert = &s.cert;
    let cases = [
        ("sslmode=disable".to_string(), false),
        (String::new(), true), // prefer, and this server offers TLS
        ("sslmode=prefer".into(), true),
        ("sslmode=require".into(), true),
        (format!("sslmode=require&sslrootcert={cert}"), true),
        (format!("sslmode=verify-ca&sslrootcert={cert}"), true),
    ];
    for (query, want) in cases {
        let url = format!("{}?{query}", s.url);
        let mut client = alkstore::postgres::client(&url).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(encrypted(&mut client), want, "{url}");
    }
    // verify-full: the name on the certificate, the server's address.
    let name = certificate_name(cert);
    let url = s.url.replacen("127.0.0.1", &name, 1)
        + &format!("?hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert={cert}");
    let mut client = alkstore::postgres::client(&url).unwrap_or_else(|e| panic!("{url}: {e}"));
    assert!(encrypted(&mut client), "{url}");
    // A key=value string says the same.
    let kv = format!(
        "host=127.0.0.1 port=5432 user={} password=alkstore-tests dbname=alkstore_test_ext sslmode=verify-ca sslrootcert='{cert}'",
        s.url.split("//").nth(1).unwrap().split(':').next().unwrap()
    );
    let mut client = alkstore::postgres::client(&kv).unwrap_or_else(|e| panic!("{kv}: {e}"));
    assert!(encrypted(&mut client), "{kv}");

    // A whole store over verify-full: its pool and its wake-up listener.
    let store = PgStore::connect(&url).unwrap();
    let queue = store.queue("tls-jobs").unwrap();
    let id = queue
        .enqueue(&EnqueueOpts::new(), &json!({"secret": 1}))
        .unwrap();
    let jobs = queue
        .claim_wait("w", 10, std::time::Duration::from_secs(5))
        .unwrap();
    assert!(jobs.iter().any(|j| j.id == id));
}

#[test]
fn a_certificate_that_does_not_check_out_is_refused() {
    let Some(s) = server() else { return };
    let cert = &s.cert;
    let refused = |query: String, why: &str| {
        let url = format!("{}?{query}", s.url);
        let e = match alkstore::postgres::client(&url) {
            Ok(_) => panic!("{url}: connected"),
            Err(e) => e.to_string(),
        };
        assert!(e.contains(why), "{url}: {e}");
    };
    // Signed by the trusted root, but for another name than 127.0.0.1.
    refused(
        format!("sslmode=verify-full&sslrootcert={cert}"),
        "certificate",
    );
    // A root that did not sign it: a fresh self-signed one. (Not the
    // system's roots: Debian's /etc/ssl/certs holds the snakeoil too.)
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.pem");
    let made = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=other",
        ])
        .arg("-keyout")
        .arg(dir.path().join("other.key"))
        .arg("-out")
        .arg(&other)
        .output()
        .expect("openssl");
    assert!(made.status.success(), "{made:?}");
    refused(
        format!("sslmode=verify-ca&sslrootcert={}", other.display()),
        "certificate",
    );
    refused(
        "sslmode=verify-ca&sslrootcert=/nonexistent/root.crt".into(),
        "sslrootcert /nonexistent/root.crt",
    );
    refused("sslmode=bogus".into(), "sslmode must be");
    // Refused before any connection: nothing to fall back to.
    let store = PgStore::connect(&format!("{}?sslmode=verify-full&sslrootcert={cert}", s.url));
    let e = store.err().expect("refused").to_string();
    assert!(e.contains("certificate"), "{e}");
}
