//! What the blocking and the async workers share: claim names unique per
//! process, panic messages, and how often to keep a claim alive.

use crate::types::Job;
use std::time::Duration;

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

/// How long the job's claim has left (60 s if its expiry cannot be read).
pub(crate) fn claim_left(job: &Job) -> Duration {
    let left = alkstore_core::time::parse_rfc3339_ms(&job.claim_expires_at)
        .map(|at| at - alkstore_core::time::now_ms())
        .unwrap_or(60_000);
    Duration::from_millis(left.max(0) as u64)
}
