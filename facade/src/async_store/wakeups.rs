//! Wake-ups for async waiters: one listener connection per store registers
//! the queues and streams being waited for (`alk_listen_*`, which LISTEN for
//! that session) and turns their notifications into per-key generation
//! counters that waiters watch; it also forwards the notifications of the
//! channels subscribed to (`AsyncStore::listen`).

#[cfg(feature = "sqlx-postgres")]
use crate::async_tx::sqlx_postgres::SqlxCall;
use crate::error::{Error, Result};
#[cfg(feature = "sqlx-postgres")]
use crate::sql::Arg;
use serde_json::Value;
#[cfg(feature = "sqlx-postgres")]
use sqlx::postgres::PgListener;
use std::collections::HashMap;
#[cfg(feature = "sqlx-postgres")]
use std::sync::Weak;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot, watch};

/// How long a registration lasts on the server (`ttl_s`).
#[cfg(feature = "sqlx-postgres")]
const REGISTRATION_TTL_S: f64 = 60.0;
/// Registrations are renewed well before they run out.
const RENEW_EVERY: Duration = Duration::from_secs(20);
/// How often SQLite's `data_version` is looked at.
#[cfg(feature = "sqlx-sqlite")]
const SQLITE_WATCH_EVERY: Duration = Duration::from_millis(10);

/// What a waiter waits for: the registering function, the name it takes
/// and the key its notifications arrive under.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Watched {
    function: &'static str,
    name: String,
    key: String,
}

impl Watched {
    /// Jobs of a queue.
    pub(crate) fn queue(name: &str) -> Watched {
        Watched {
            function: "alk_listen_queue",
            name: name.into(),
            key: format!("q:{name}"),
        }
    }

    /// Events of a stream.
    pub(crate) fn stream(name: &str) -> Watched {
        Watched {
            function: "alk_listen_stream",
            name: name.into(),
            key: format!("s:{name}"),
        }
    }

    /// Messages of an outbox (notified under its backing queue's name).
    pub(crate) fn outbox(name: &str) -> Watched {
        Watched {
            function: "alk_listen_outbox",
            name: name.into(),
            key: format!("q:{}", alkstore_core::names::outbox_queue(name)),
        }
    }
}

#[cfg_attr(not(feature = "sqlx-postgres"), allow(dead_code))]
enum Request {
    /// Register for wake-ups.
    Watch(Watched, oneshot::Sender<Result<()>>),
    /// Forward the notifications of a PostgreSQL channel.
    Listen(
        String,
        mpsc::UnboundedSender<Value>,
        oneshot::Sender<Result<()>>,
    ),
}

/// The store's side of the listener task (PostgreSQL) or of the
/// `data_version` watcher (SQLite).
#[doc(hidden)]
pub struct Wakeups {
    /// To the PostgreSQL listener; SQLite registers nothing.
    requests: Option<mpsc::UnboundedSender<Request>>,
    generations: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// When each registration was last confirmed, to skip asking again.
    confirmed: Mutex<HashMap<Watched, Instant>>,
}

impl Wakeups {
    /// Starts the listener task on `listener`. It ends when the store (every
    /// clone) is dropped.
    #[cfg(feature = "sqlx-postgres")]
    pub(crate) fn start(listener: PgListener) -> Arc<Wakeups> {
        let (requests, rx) = mpsc::unbounded_channel();
        let wakeups = Arc::new(Wakeups {
            requests: Some(requests),
            generations: Mutex::default(),
            confirmed: Mutex::default(),
        });
        tokio::spawn(listen(listener, rx, Arc::downgrade(&wakeups)));
        wakeups
    }

    /// A receiver that changes with every wake-up for `watched` from now on,
    /// once the listener is registered for it. Subscribe, then look for
    /// work, then wait: a wake-up in between is not missed.
    pub(crate) async fn watch(&self, watched: &Watched) -> Result<watch::Receiver<u64>> {
        let rx = self.sender(&watched.key).subscribe();
        if self.requests.is_none() {
            return Ok(rx); // SQLite: every commit wakes every waiter
        }
        let fresh = lock(&self.confirmed)
            .get(watched)
            .is_some_and(|at| at.elapsed() < RENEW_EVERY);
        if !fresh {
            self.ask(|reply| Request::Watch(watched.clone(), reply))
                .await?;
            lock(&self.confirmed).insert(watched.clone(), Instant::now());
        }
        Ok(rx)
    }

    /// The payloads notified on `pg_channel` (`alk_channel`'s name for an
    /// alkstore channel) from now on.
    #[cfg(feature = "sqlx-postgres")]
    pub(crate) async fn listen(&self, pg_channel: &str) -> Result<mpsc::UnboundedReceiver<Value>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.ask(|reply| Request::Listen(pg_channel.to_string(), tx, reply))
            .await?;
        Ok(rx)
    }

    async fn ask(
        &self,
        request: impl FnOnce(oneshot::Sender<Result<()>>) -> Request,
    ) -> Result<()> {
        let (reply, answer) = oneshot::channel();
        let gone = || Error::engine("postgres", "", "the listener connection is gone");
        let requests = self.requests.as_ref().ok_or_else(gone)?;
        requests.send(request(reply)).map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }

    /// SQLite: a task on a connection of its own watches `PRAGMA
    /// data_version`, which changes with every commit by any other
    /// connection of any process, and wakes every waiter when it does.
    #[cfg(feature = "sqlx-sqlite")]
    pub(crate) async fn start_sqlite(pool: &sqlx::SqlitePool) -> Result<Arc<Wakeups>> {
        let mut conn = pool.acquire().await?.detach();
        let mut last = data_version(&mut conn).await?;
        let wakeups = Arc::new(Wakeups {
            requests: None,
            generations: Mutex::default(),
            confirmed: Mutex::default(),
        });
        let weak = Arc::downgrade(&wakeups);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(SQLITE_WATCH_EVERY).await;
                let Some(w) = weak.upgrade() else { return };
                if let Ok(v) = data_version(&mut conn).await {
                    if v != last {
                        last = v;
                        w.bump_all();
                    }
                }
            }
        });
        Ok(wakeups)
    }

    /// A receiver for a key of the caller's own (SQLite notifications).
    #[cfg(feature = "sqlx-sqlite")]
    pub(crate) fn subscribe(&self, key: &str) -> watch::Receiver<u64> {
        self.sender(key).subscribe()
    }

    fn sender(&self, key: &str) -> watch::Sender<u64> {
        lock(&self.generations)
            .entry(key.to_string())
            .or_insert_with(|| watch::Sender::new(0))
            .clone()
    }

    #[cfg(feature = "sqlx-postgres")]
    fn bump(&self, key: &str) {
        if let Some(s) = lock(&self.generations).get(key) {
            s.send_modify(|g| *g += 1);
        }
    }

    /// After a lost connection: notifications may have been missed.
    fn bump_all(&self) {
        for s in lock(&self.generations).values() {
            s.send_modify(|g| *g += 1);
        }
    }
}

#[cfg(feature = "sqlx-sqlite")]
async fn data_version(conn: &mut sqlx::SqliteConnection) -> sqlx::Result<i64> {
    sqlx::query_scalar("PRAGMA data_version")
        .fetch_one(conn)
        .await
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(feature = "sqlx-postgres")]
async fn register(listener: &mut PgListener, w: &Watched) -> Result<()> {
    let args = [w.name.as_str().into(), Arg::Num(REGISTRATION_TTL_S)];
    let (call, sql) = SqlxCall::new(w.function, &args)?;
    let row = sqlx::Executor::fetch_one(listener, sql.as_str()).await?;
    call.result(row).map(|_| ())
}

/// The listener task: registrations on request, renewals, notifications to
/// generation bumps. sqlx reconnects a lost connection; the task then
/// registers everything again and wakes every waiter.
#[cfg(feature = "sqlx-postgres")]
async fn listen(
    mut listener: PgListener,
    mut requests: mpsc::UnboundedReceiver<Request>,
    wakeups: Weak<Wakeups>,
) {
    let mut registered: HashMap<Watched, Instant> = HashMap::new();
    let mut subscribers: HashMap<String, Vec<mpsc::UnboundedSender<Value>>> = HashMap::new();
    let mut lost = false;
    loop {
        if lost {
            let mut ok = true;
            for (w, at) in registered.iter_mut() {
                ok = ok && register(&mut listener, w).await.is_ok();
                *at = Instant::now();
            }
            if !ok {
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            lost = false;
            match wakeups.upgrade() {
                Some(w) => w.bump_all(),
                None => return,
            }
        }
        for (w, at) in registered.iter_mut() {
            if at.elapsed() >= RENEW_EVERY {
                lost |= register(&mut listener, w).await.is_err();
                *at = Instant::now();
            }
        }
        tokio::select! {
            request = requests.recv() => match request {
                None => return,
                Some(Request::Watch(watched, reply)) => {
                    let r = register(&mut listener, &watched).await;
                    if r.is_ok() {
                        registered.insert(watched, Instant::now());
                    } else {
                        lost = true;
                    }
                    let _ = reply.send(r);
                }
                Some(Request::Listen(pg_channel, tx, reply)) => {
                    // sqlx LISTENs again by itself after a reconnect.
                    let r = listener.listen(&pg_channel).await.map_err(Error::from);
                    if r.is_ok() {
                        subscribers.entry(pg_channel).or_default().push(tx);
                    }
                    let _ = reply.send(r);
                }
            },
            n = listener.try_recv() => match n {
                Ok(Some(n)) => {
                    let key = match n.channel() {
                        "alkstore_jobs" => format!("q:{}", n.payload()),
                        "alkstore_events" => format!("s:{}", n.payload()),
                        other => {
                            if let Some(subs) = subscribers.get_mut(other) {
                                let payload = serde_json::from_str(n.payload()).unwrap_or(Value::Null);
                                subs.retain(|s| s.send(payload.clone()).is_ok());
                            }
                            continue;
                        }
                    };
                    match wakeups.upgrade() {
                        Some(w) => w.bump(&key),
                        None => return,
                    }
                }
                // Reconnected (or reconnecting): register again.
                Ok(None) => lost = true,
                Err(sqlx::Error::PoolClosed) => return,
                Err(_) => {
                    lost = true;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            },
            // Renewals come due while nothing else happens.
            _ = tokio::time::sleep(RENEW_EVERY / 4) => {}
        }
    }
}
