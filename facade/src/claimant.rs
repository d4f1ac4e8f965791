//! What the blocking and the async workers share: claim names unique per
//! process, panic messages, and how often to keep a claim alive.

use crate::types::Job;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// `<host>-<pid>-<random>`, the same for the whole process: the random part
/// tells apart two processes that got the same pid (containers).
pub(crate) fn process_tag() -> &'static str {
    static TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TAG.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        // RandomState is seeded from the OS's randomness once per process.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        let host = gethostname::gethostname();
        format!(
            "{}-{}-{:08x}",
            host.to_string_lossy(),
            std::process::id(),
            h.finish() as u32
        )
    })
}

/// Runs `f`, turning a panic into an error message.
#[cfg(feature = "blocking")]
pub(crate) fn guarded<T>(
    f: impl FnOnce() -> std::result::Result<T, String>,
) -> std::result::Result<T, String> {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| Err(panic_message(&*panic)))
}

/// The error a panicking handler is retried with.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let msg = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown".into());
    format!("handler panicked: {msg}")
}

/// Milliseconds added to the host's clock where the workers read it
/// ([`crate::testing::offset_worker_clock`]: a test of a host whose clock is
/// off).
static HOST_OFFSET_MS: AtomicI64 = AtomicI64::new(0);

/// The host's clock as the workers read it, in epoch milliseconds.
pub(crate) fn host_now_ms() -> i64 {
    alkstore_core::time::now_ms() + HOST_OFFSET_MS.load(Ordering::Relaxed)
}

/// Moves the host's clock as the workers read it by `ms`.
#[cfg(feature = "testing")]
pub(crate) fn offset_host_clock(ms: i64) {
    HOST_OFFSET_MS.store(ms, Ordering::Relaxed);
}

/// The database's clock minus the host's, as a worker last measured it. A
/// claim's `claim_expires_at` is on the database's clock: read against a
/// host clock running a minute behind, a 30 s claim would look 90 s long,
/// and its heartbeats would come after it lapsed (another worker then runs
/// the job too). SQLite's clock is the host's (its functions run in this
/// process or beside it).
#[derive(Debug, Default)]
pub(crate) struct Skew {
    ms: i64,
    next: Option<Instant>,
}

impl Skew {
    /// How often it is measured again.
    const EVERY: Duration = Duration::from_secs(60);
    /// How soon after a reading that failed.
    const RETRY: Duration = Duration::from_secs(1);

    /// Whether it is time to measure it (never measured, a minute since,
    /// or a second after a reading that failed).
    pub(crate) fn due(&self) -> bool {
        self.next.is_none_or(|at| Instant::now() >= at)
    }

    /// Records a reading of the database's clock (`None`: it failed, and
    /// the last one stays) taken between two readings of the host's.
    pub(crate) fn record(&mut self, before: i64, db: Option<i64>, after: i64) {
        if let Some(db) = db {
            self.ms = db - before / 2 - after / 2;
        }
        self.next = Some(
            Instant::now()
                + if db.is_some() {
                    Self::EVERY
                } else {
                    Self::RETRY
                },
        );
    }

    /// The database's clock minus the host's, in milliseconds.
    pub(crate) fn ms(&self) -> i64 {
        self.ms
    }
}

/// How long the job's claim has left on the database's clock (`skew_ms`
/// ahead of the host's); 60 s if its expiry cannot be read.
pub(crate) fn claim_left(job: &Job, skew_ms: i64) -> Duration {
    let left = alkstore_core::time::parse_rfc3339_ms(&job.claim_expires_at)
        .map(|at| at - host_now_ms() - skew_ms)
        .unwrap_or(60_000);
    Duration::from_millis(left.max(0) as u64)
}
