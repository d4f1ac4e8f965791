//! What each engine provides to the engine-neutral handles.

use crate::call::Call;
use crate::error::Result;
use crate::notify::Subscription;
use crate::sql::Arg;
use crate::tx::TxHandle;
use crate::wake::Waker;
use serde_json::Value;
use std::time::Duration;

/// What a waiter waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    /// Jobs of a queue (outboxes: their backing queue).
    Queue,
    /// Events of a stream.
    Stream,
}

impl Kind {
    pub fn key(self, name: &str) -> String {
        match self {
            Kind::Queue => format!("q:{name}"),
            Kind::Stream => format!("s:{name}"),
        }
    }
}

/// One engine behind a store.
pub(crate) trait Engine: Send + Sync {
    /// Calls an `alk_*` function in its own transaction.
    fn call(&self, f: &str, args: &[Arg]) -> Result<Value>;
    /// The same, its result as text, unparsed: JSON as the database wrote
    /// it (what the relay delivers, contract v1.3 §N2).
    fn call_text(&self, f: &str, args: &[Arg]) -> Result<Option<String>>;
    /// Opens a transaction.
    fn begin(&self) -> Result<Box<dyn TxHandle>>;
    /// The wake-up counters.
    fn waker(&self) -> &Waker;
    /// Makes sure a wake-up will come for `(kind, name)` (PostgreSQL
    /// registers the waiting session); call before checking for work.
    fn watch(&self, kind: Kind, name: &str) -> Result<()>;
    /// A subscription to notifications on `channel`, listening from now on.
    fn listen(&self, channel: &str) -> Result<Subscription>;
    /// How long to wait at most before looking again without a wake-up
    /// (work whose run_at arrives or whose claim expires announces nothing).
    fn fallback_poll(&self) -> Duration;
    /// The database's clock now, in epoch milliseconds: what a claim's
    /// expiry is read against. (SQLite's functions read this process's.)
    fn clock_ms(&self) -> Result<i64> {
        Ok(alkstore_core::time::now_ms())
    }
}

impl<T> Call<T> {
    /// Runs it in its own transaction on a store's engine.
    pub(crate) fn run_on(self, engine: &dyn Engine) -> Result<T> {
        let v = engine.call(self.function(), self.args())?;
        self.decode(v)
    }

    /// Runs it in its own transaction on a store's engine; its result as
    /// the database wrote it, undecoded.
    pub(crate) fn run_text_on(&self, engine: &dyn Engine) -> Result<Option<String>> {
        engine.call_text(self.function(), self.args())
    }
}
