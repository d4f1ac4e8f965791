//! The one place the test suites (the cross-engine suite in `tests/`, the
//! facade's `facade/tests/`) learn what to run on, so that they cannot
//! drift apart: which PostgreSQL installs the test command prepared, whether
//! PostgreSQL is required, and names no other test uses.
//!
//! The test command (`scripts/test.sh`) sets:
//! - `ALKSTORE_PG_URL`: a database with `CREATE EXTENSION alkstore`;
//! - `ALKSTORE_PG_PLAIN_URL`: a database with the plain SQL install;
//! - `ALKSTORE_PG_BOUNCER_URL`: the extension's database through PgBouncer
//!   in transaction-pooling mode;
//! - `ALKSTORE_PG_STANDBY_URL`: the extension's database on a hot standby
//!   of the same cluster (`scripts/postgres.sh standby`), for the stream
//!   test that reads there;
//! - `ALKSTORE_REQUIRE_PG=1`: a missing `ALKSTORE_PG_URL` is then a failure,
//!   not a skip.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The variable naming the extension's database.
pub const PG_URL: &str = "ALKSTORE_PG_URL";
/// The variable naming the plain SQL install's database.
pub const PLAIN_URL: &str = "ALKSTORE_PG_PLAIN_URL";
/// The variable naming the extension's database behind PgBouncer.
pub const BOUNCER_URL: &str = "ALKSTORE_PG_BOUNCER_URL";

/// Label of the extension install.
pub const EXTENSION: &str = "extension";
/// Label of the plain SQL install.
pub const PLAIN: &str = "plain SQL install";
/// Label of the extension behind PgBouncer.
pub const BOUNCER: &str = "extension via PgBouncer, transaction pooling";

/// One PostgreSQL install to run tests on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PgInstall {
    /// [`EXTENSION`], [`PLAIN`] or [`BOUNCER`].
    pub label: &'static str,
    /// Where calls and transactions connect (maybe the pooler).
    pub url: String,
    /// Where a session that must keep its state (LISTEN) connects: the
    /// server itself, also for the PgBouncer install.
    pub direct_url: String,
}

impl PgInstall {
    /// Whether calls go through PgBouncer.
    pub fn pooled(&self) -> bool {
        self.label == BOUNCER
    }
}

/// Whether the test command requires PostgreSQL (`ALKSTORE_REQUIRE_PG=1`).
pub fn pg_required() -> bool {
    std::env::var("ALKSTORE_REQUIRE_PG").is_ok_and(|v| v == "1")
}

/// Every PostgreSQL install the test command prepared, extension first.
/// Without `ALKSTORE_PG_URL`: none, or a panic when PostgreSQL is required.
pub fn pg_installs() -> Vec<PgInstall> {
    let Ok(direct) = std::env::var(PG_URL) else {
        assert!(
            !pg_required(),
            "{PG_URL} is not set but ALKSTORE_REQUIRE_PG=1"
        );
        eprintln!("note: {PG_URL} not set: PostgreSQL not tested");
        return vec![];
    };
    let mut out = vec![PgInstall {
        label: EXTENSION,
        url: direct.clone(),
        direct_url: direct.clone(),
    }];
    if let Ok(plain) = std::env::var(PLAIN_URL) {
        out.push(PgInstall {
            label: PLAIN,
            url: plain.clone(),
            direct_url: plain,
        });
    }
    if let Ok(pooled) = std::env::var(BOUNCER_URL) {
        out.push(PgInstall {
            label: BOUNCER,
            url: pooled,
            direct_url: direct,
        });
    }
    out
}

/// A name no other test or earlier run uses (the PostgreSQL databases are shared).
pub fn fresh(base: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{base}-{}-{nanos}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Milliseconds.
pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
