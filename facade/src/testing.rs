//! For your own tests (feature `testing`): a throwaway store, "run every
//! pending job of this queue now", and what was enqueued.
//!
//! ```
//! use alkstore::testing::TestStore;
//! use alkstore::EnqueueOpts;
//! use serde_json::json;
//!
//! // The code under test enqueues…
//! let t = TestStore::new()?;
//! t.queue("emails")?.enqueue(&EnqueueOpts::new(), &json!({"to": "ada@example.com"}))?;
//!
//! // …the test sees what, and runs it.
//! assert_eq!(t.enqueued("emails")?, vec![json!({"to": "ada@example.com"})]);
//! let ran = t.run_pending("emails", |job| {
//!     assert_eq!(job.payload["to"], "ada@example.com");
//!     Ok::<(), String>(()) // any error that displays: it becomes last_error
//! })?;
//! assert_eq!((ran.acked, ran.retried, ran.dead), (1, 0, 0));
//! assert!(t.enqueued("emails")?.is_empty());
//! # Ok::<(), alkstore::Error>(())
//! ```

use crate::error::Result;
use crate::sqlite::SqliteStore;
use crate::types::{Job, Retried};
use serde_json::Value;

/// Moves the host's clock, as this process's workers read it, by `ms`
/// (negative: behind the database's), for a test of a host whose clock is
/// off. The workers read a claim's time left against the database's clock,
/// so they still extend their claims in time; this is how to check that.
pub fn offset_worker_clock(ms: i64) {
    crate::claimant::offset_host_clock(ms);
}

/// A SQLite store in a temporary directory, removed when it is dropped.
/// It is a [`SqliteStore`] (through `Deref`): hand it to the code under
/// test wherever a store is expected.
pub struct TestStore {
    store: SqliteStore,
    _dir: tempfile::TempDir,
}

/// What [`TestStore::run_pending`] did with the jobs it ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ran {
    /// The handler returned `Ok`: acked.
    pub acked: usize,
    /// It returned `Err`: given back with the queue's backoff, to run again
    /// later (not in this call).
    pub retried: usize,
    /// It returned `Err` on the last attempt: dead-lettered.
    pub dead: usize,
}

/// The worker name the test runs claim under.
const WORKER: &str = "alkstore-testing";

impl TestStore {
    /// A new, empty store.
    pub fn new() -> Result<TestStore> {
        let dir = tempfile::tempdir()
            .map_err(|e| crate::error::Error::engine("sqlite", "", e.to_string()))?;
        let store = SqliteStore::open(dir.path().join("test.db"))?;
        Ok(TestStore { store, _dir: dir })
    }

    /// The payloads of the jobs now pending in `queue`, oldest first:
    /// runnable, delayed and waiting in a group alike.
    pub fn enqueued(&self, queue: &str) -> Result<Vec<Value>> {
        let queue = self.store.queue(queue)?;
        let mut out = Vec::new();
        let mut after = 0;
        loop {
            let page = queue.list_jobs(Some("pending"), after, 100)?;
            let Some(last) = page.last() else {
                return Ok(out);
            };
            after = last["id"].as_i64().unwrap_or(i64::MAX);
            out.extend(page.into_iter().map(|j| j["payload"].clone()));
        }
    }

    /// Runs every job of `queue` that is runnable now, each once, on this
    /// thread: `Ok` acks it, `Err` retries it with the queue's backoff (or
    /// dead-letters it on its last attempt). Jobs that become runnable
    /// while it runs (enqueued by a handler, say) run too.
    pub fn run_pending<E: std::fmt::Display>(
        &self,
        queue: &str,
        mut handler: impl FnMut(&Job) -> std::result::Result<(), E>,
    ) -> Result<Ran> {
        let queue = self.store.queue(queue)?;
        let mut ran = Ran::default();
        loop {
            let jobs = queue.claim(WORKER, 100)?;
            if jobs.is_empty() {
                return Ok(ran);
            }
            for job in &jobs {
                match handler(job) {
                    Ok(()) => {
                        queue.ack(job.id, WORKER)?;
                        ran.acked += 1;
                    }
                    Err(e) => match queue.retry(job.id, WORKER, &e.to_string(), None)? {
                        Retried::Dead => ran.dead += 1,
                        _ => ran.retried += 1,
                    },
                }
            }
        }
    }
}

impl std::ops::Deref for TestStore {
    type Target = SqliteStore;

    fn deref(&self) -> &SqliteStore {
        &self.store
    }
}
